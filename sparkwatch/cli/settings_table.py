"""The README's table of the commands' options that read an environment variable, from the real
parsers (each such option is built from a setting declaration, :mod:`sparkwatch.settings.cli`).
The collector's own table is in docs/collector.md."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from sparkwatch.settings.options import SETTING_ATTRIBUTE
from sparkwatch.settings.spec import Setting

OWN_TABLE = ("collector",)
"""Commands whose settings have a table of their own."""


def commands(parser: argparse.ArgumentParser, path: str = "sparkwatch"
             ) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command and sub-command of ``parser`` by its full name, itself first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, f"{path} {name}")


def env_options(parser: argparse.ArgumentParser
                ) -> Iterator[tuple[str, argparse.Action, Setting]]:
    """(command, option, its setting) for every option built from a setting declaration."""
    for path, command in commands(parser):
        for action in command._actions:
            setting = getattr(action, SETTING_ATTRIBUTE, None)
            if setting is not None:
                yield path, action, setting


def render_cli_settings_table(parser: argparse.ArgumentParser) -> str:
    rows: dict[tuple[str, str, str], list[str]] = {}
    for path, action, setting in env_options(parser):
        name = path.removeprefix("sparkwatch ")
        if name.split()[0] in OWN_TABLE:
            continue
        help_text = (action.help or "").removesuffix(f" (env {setting.env})")
        rows.setdefault((action.option_strings[0], setting.env, help_text), []).append(name)
    lines = ["| option | environment variable | commands | what |", "|---|---|---|---|"]
    for (option, env, help_text), names in rows.items():
        shown = ", ".join(f"`{n}`" for n in names)
        lines.append(f"| `{option}` | `{env}` | {shown} | {help_text} |")
    return "\n".join(lines)
