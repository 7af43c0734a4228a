"""Command-line options built from setting declarations (argparse conventions): the help names
the environment variable, booleans are flags, and a command's option takes its default from the
environment when the parser is built, at the command's edge (:class:`FromEnv` keeps where it came
from, so an error can name the variable)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sparkwatch.settings.parsers import (
    METRICS_PROFILES,
    buckets,
    days,
    fraction,
    metrics_profile,
    port,
    positive_int,
    rate,
    regex_list,
)
from sparkwatch.settings.spec import Setting

SETTING_ATTRIBUTE = "sparkwatch_setting"
"""The attribute of an argparse action that names the setting it was built from."""


class FromEnv(str):
    """An option's value taken from its environment variable, not from the command line."""

    env: str

    def __new__(cls, value: str, env: str) -> FromEnv:
        self = super().__new__(cls, value)
        self.env = env
        return self


def origin(value: str | None, flag: str) -> str:
    """Where an option's value came from, as errors name it: its environment variable, or
    ``flag``."""
    return value.env if isinstance(value, FromEnv) else flag


def env_help(setting: Setting, text: str | None = None) -> str:
    return f"{text or setting.help} (env {setting.env})"


def add_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    setting: Setting,
    *,
    flag: str | None = None,
    help: str | None = None,
    env: Mapping[str, str] | None = None,
    required: bool = False,
    **kwargs: Any,
) -> argparse.Action:
    """``setting`` as an option (``flag`` when the command spells it differently): its value
    when given, else its environment variable's (``env``, by default the process's), else None;
    ``required`` options may come from either."""
    source = os.environ if env is None else env
    default = FromEnv(source[setting.env], setting.env) if setting.env in source else None
    kwargs.setdefault("metavar", metavar(setting))
    action = parser.add_argument(
        flag or _flag(setting), dest=kwargs.pop("dest", setting.name), default=default,
        required=required and default is None, help=env_help(setting, help), **kwargs)
    setattr(action, SETTING_ATTRIBUTE, setting)
    return action


def add_loader_option(parser: argparse.ArgumentParser, setting: Setting,
                      default: Any = None) -> argparse.Action:
    """``setting`` as an option whose text the settings' loader reads (flags > env > defaults):
    the option's default is None, a boolean is a flag (``--no-auth``; ``--jobs-enabled`` and
    ``--no-jobs-enabled``) whose value reaches the loader as the env var's text would.

    ``default``: what the loader falls back to, only shown in the help (None: none shown; the
    loader, not argparse, applies it, after the environment)."""
    help_text = env_help(setting, _with_default(setting, default))
    if not setting.is_flag:
        action = parser.add_argument(_flag(setting), dest=setting.name,
                                     metavar=metavar(setting), help=help_text)
    elif setting.name.startswith("no_"):
        action = parser.add_argument(_flag(setting), dest=setting.name, action="store_const",
                                     const="true", help=help_text)
    else:
        action = parser.add_argument(_flag(setting), dest=setting.name, action=_BoolFlag,
                                     help=help_text)
    setattr(action, SETTING_ATTRIBUTE, setting)
    return action


def metavar(setting: Setting) -> str:
    """What a setting's value is, for ``--help``: its unit or kind, from its name and parser."""
    for suffix, shown in _METAVAR_SUFFIXES:
        if setting.name.endswith(suffix):
            return shown
    return _METAVAR_PARSERS.get(setting.parse, "N" if setting.parse is positive_int else "TEXT")


_METAVAR_SUFFIXES = (
    ("_url", "URL"), ("_dir", "DIR"), ("_bytes", "BYTES"), ("_seconds", "SECONDS"),
    ("_days", "DAYS"), ("_per_second", "RATE"), ("host", "HOST"), ("replica", "NAME"),
    ("token", "TOKEN"),
)
"""By name first: the unit a name ends in says more than its parser (a float of seconds)."""
_METAVAR_PARSERS = {
    port: "PORT", days: "DAYS", rate: "RATE", fraction: "FRACTION", buckets: "SECONDS,...",
    regex_list: "REGEX,...", metrics_profile: "{" + ",".join(METRICS_PROFILES) + "}",
    Path: "PATH",
}


def _with_default(setting: Setting, default: Any) -> str:
    """The setting's help with its default, as the loader applies it (nothing for a secret, a
    ``--no-…`` flag, which is off unless given, or a default of None)."""
    if default is None or setting.secret or setting.name.startswith("no_"):
        return setting.help
    return f"{setting.help} (default: {_shown(default)})"


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 67108864, not 6.7108864e+07
    if isinstance(value, tuple):
        return ",".join(map(_shown, value))
    return str(value)


def _flag(setting: Setting) -> str:
    if setting.flag is None:
        raise ValueError(f"{setting.name} is a secret: it has no command-line option")
    return setting.flag


class _BoolFlag(argparse.BooleanOptionalAction):
    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        setattr(namespace, self.dest, "false" if option and option.startswith("--no-") else "true")
