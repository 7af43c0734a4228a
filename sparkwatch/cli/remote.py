"""Options of the commands that read a collector or a /metrics over HTTP (``doctor``, ``top``):
the URL and the read token, each checked once where the command starts."""

from __future__ import annotations

import argparse
import urllib.parse

from sparkwatch.cli.errors import CliError
from sparkwatch.settings.cli import TOKEN
from sparkwatch.settings.options import FromEnv
from sparkwatch.settings.spec import SettingsError


def command_token(args: argparse.Namespace) -> str | None:
    """The read token of ``--token`` or ``SPARKWATCH_TOKEN`` (``doctor`` and ``top``), parsed
    once here; a bad one is refused naming where it came from, never showing it."""
    raw = args.token
    if raw is None:
        return None
    origin = raw.env if isinstance(raw, FromEnv) else str(TOKEN.flag)
    try:
        token: str | None = TOKEN.parsed(raw, origin)
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    return token


def checked_url(url: str, option: str) -> str:
    """``url`` once it parses (an unclosed IPv6 bracket, a port that is not a number raise
    ValueError deep in urllib otherwise); the error names ``option``, not the URL (it may hold a
    password)."""
    try:
        urllib.parse.urlsplit(url).port  # noqa: B018 - parsing the port is the check
    except ValueError:
        raise CliError(f"{option} is not a valid URL: expected http://host:port") from None
    return url
