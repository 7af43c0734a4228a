"""Which history URL a command uses: --url, else SPARKWATCH_HISTORY_URL, else the default."""

from __future__ import annotations

from sparkwatch.history.errors import HistoryUrlError
from sparkwatch.settings.cli import HISTORY_URL
from sparkwatch.settings.listener import DEFAULT_HISTORY_URL


def resolve_url(given: str | None, from_env: bool = False) -> str:
    """The URL to use: ``given`` (--url's value, or the env var's when ``from_env``: parsed as the
    listener parses it, 'off' disables), else the default."""
    if given is None:
        return DEFAULT_HISTORY_URL
    where = HISTORY_URL.env if from_env else "--url"
    try:
        given.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 in argv or the environment
        raise HistoryUrlError(f"{where} is not UTF-8 text") from None
    if not from_env:
        if not given.strip():
            # An empty value is no choice: the default would be used (and `db upgrade` create
            # it) where a variable meant to fill it was not set.
            raise HistoryUrlError("--url is empty: give a database URL, e.g. "
                                  "sqlite:///sparkwatch.db")
        return given
    url = HISTORY_URL.parse(given)
    if url is None:
        raise HistoryUrlError(f"the history is disabled ({HISTORY_URL.env}={given!r}); pass --url")
    return str(url)
