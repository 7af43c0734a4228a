"""Which history URL a command uses: --url, else SPARKWATCH_HISTORY_URL, else the default."""

from __future__ import annotations

from collections.abc import Mapping

from sparkwatch.history.errors import HistoryUrlError
from sparkwatch.settings import DEFAULT_HISTORY_URL, LISTENER_FIELDS

_FIELD = next(f for f in LISTENER_FIELDS if f.name == "history_url")


def resolve_url(explicit: str | None, env: Mapping[str, str]) -> str:
    """The URL to use; the env var is parsed like the listener parses it ('off' disables)."""
    if explicit:
        return explicit
    raw = env.get(_FIELD.env)
    if raw is None:
        return DEFAULT_HISTORY_URL
    url = _FIELD.parse(raw)
    if url is None:
        raise HistoryUrlError(f"the history is disabled ({_FIELD.env}={raw!r}); pass --url")
    return str(url)
