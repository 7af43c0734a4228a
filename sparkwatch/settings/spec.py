"""The one way a setting is declared and read: :class:`Setting` names it once (environment
variable, Spark conf key, command-line flag, parser, help, whether it is a secret) and
:func:`resolve` reads any table of them from ordered sources.

The listener's, the collector's and the commands' settings are tables of this one declaration
(``listener.py``, ``collector.py``, ``cli.py``); their types and defaults are the typed dataclass
each table fills, joined to it by name. Standard library only: the listener uses it in the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sparkwatch.redact import redact_url
from sparkwatch.settings.parsers import boolean
from sparkwatch.summary import cut, quoted

SHOWN_CHARS = 200
"""How much of a refused value an error quotes."""


class SettingsError(ValueError):
    """A setting with a bad value; the message names the setting and where it came from."""


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    """The attribute of the settings dataclass it fills."""
    parse: Callable[[str], Any]
    """From the text of an environment variable, a Spark conf value or a flag; ValueError if bad."""
    help: str
    env: str
    """The environment variable."""
    conf_key: str | None = None
    """The Spark conf key (``spark.sparkwatch.…``) of a listener setting."""
    flag: str | None = None
    """The command-line option; None when it has none (the collector's secrets: a command line
    shows in ``ps``)."""
    secret: bool = False
    """Never shown, neither in errors nor as a default."""

    def shown(self, raw: str) -> str:
        """``raw`` as an error shows it: never a secret, a URL without its secrets."""
        if self.secret:
            return "<secret>"
        # Cut: a value set by mistake may be megabytes (a file's content), and the error is
        # one line of a log or a terminal.
        if self.name.endswith("_url"):
            return cut(redact_url(raw), SHOWN_CHARS)
        return quoted(raw, SHOWN_CHARS)

    @property
    def is_flag(self) -> bool:
        """A boolean: on the command line a flag without a value (``--no-auth``;
        ``--otlp/--no-otlp``)."""
        return self.parse is boolean

    def flag_form(self, value: str = "VALUE") -> str:
        """How the option is written, as docs show it (``value``: what its value is, as
        ``--help`` names it)."""
        if not self.is_flag:
            return f"{self.flag} {value}"
        if self.name.startswith("no_"):
            return str(self.flag)
        return f"{self.flag}/--no-{str(self.flag)[2:]}"

    def parsed(self, raw: str, origin: str) -> Any:
        """``raw`` parsed; a bad value raises :class:`SettingsError` naming ``origin``."""
        try:
            return self.parse(raw)
        except ValueError as exc:
            # The parser's own words may quote the value again (float's do).
            raise SettingsError(f"{origin}={self.shown(raw)}: {cut(str(exc), SHOWN_CHARS)}"
                                ) from None


Source = Callable[[Setting], "tuple[str, str] | None"]
"""Where a setting may be given: its raw text and where it came from (named in errors), or None."""


def env_source(env: Mapping[str, str]) -> Source:
    return lambda s: (env[s.env], s.env) if s.env in env else None


def conf_source(conf: Mapping[str, str]) -> Source:
    return lambda s: (conf[s.conf_key], s.conf_key) \
        if s.conf_key is not None and s.conf_key in conf else None


def flag_source(flags: Mapping[str, str | None]) -> Source:
    """Values given on the command line by setting name (None: not given); secrets never."""
    def lookup(s: Setting) -> tuple[str, str] | None:
        raw = flags.get(s.name)
        return (raw, s.flag) if raw is not None and s.flag else None
    return lookup


def resolve(settings: Iterable[Setting], sources: Iterable[Source]) -> dict[str, Any]:
    """Each setting's parsed value from the first source that gives it (a setting no source gives
    is left out: the dataclass default applies)."""
    ordered = tuple(sources)
    values: dict[str, Any] = {}
    for setting in settings:
        for source in ordered:
            found = source(setting)
            if found is not None:
                values[setting.name] = setting.parsed(*found)
                break
    return values


def shown_default(value: Any) -> str:
    """A default as the docs' settings tables show it."""
    if value is None or value == ():
        return "–"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple):
        value = ",".join(map(str, value))
    return f"`{value}`"
