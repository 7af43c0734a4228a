"""Which history URL a command uses: --url, else SPARKWATCH_HISTORY_URL, else the default."""

from __future__ import annotations

from sparkwatch.history.errors import HistoryUrlError
from sparkwatch.settings.cli import HISTORY_URL
from sparkwatch.settings.listener import DEFAULT_HISTORY_URL


def resolve_url(given: str | None, from_env: bool = False) -> str:
    """The URL to use: ``given`` (--url's value, or the env var's when ``from_env``: parsed as the
    listener parses it, 'off' disables), else the default."""
    if not given:
        return DEFAULT_HISTORY_URL
    if not from_env:
        return given
    url = HISTORY_URL.parse(given)
    if url is None:
        raise HistoryUrlError(f"the history is disabled ({HISTORY_URL.env}={given!r}); pass --url")
    return str(url)
