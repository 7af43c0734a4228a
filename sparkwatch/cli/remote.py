"""Options of the commands that read a collector or a /metrics over HTTP (``doctor``, ``top``):
the URL and the read token, each checked once where the command starts."""

from __future__ import annotations

import argparse
import sys
import urllib.parse

from sparkwatch.cli.errors import CliError
from sparkwatch.redact import redact_url
from sparkwatch.settings.cli import TOKEN
from sparkwatch.settings.options import FromEnv, origin
from sparkwatch.settings.spec import SettingsError


def command_token(args: argparse.Namespace) -> str | None:
    """The read token of ``--token`` or ``SPARKWATCH_TOKEN`` (``doctor`` and ``top``), parsed
    once here; a bad one is refused naming where it came from, never showing it."""
    raw = args.token
    if raw is None:
        return None
    try:
        token: str | None = TOKEN.parsed(raw, origin(raw, str(TOKEN.flag)))
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    if not isinstance(raw, FromEnv):
        # Still taken (scripts pass it), but a command line shows in `ps` to every local user.
        print(f"sparkwatch {args.command}: warning: {TOKEN.flag} is visible to every local user "
              f"(ps, /proc); set {TOKEN.env} instead", file=sys.stderr)
    return token


def refuse_unused_token(args: argparse.Namespace, used_with: str) -> None:
    """A ``--token`` on a command line that reads the history database instead: it was ignored
    without a word, and the user took the answer for the collector's. (``SPARKWATCH_TOKEN`` in
    the environment serves every command, so it is not an error where unused.)"""
    if args.token is not None and not isinstance(args.token, FromEnv):
        raise CliError(f"{TOKEN.flag} is sent only with {used_with}, which is not given")


def checked_url(url: str, option: str) -> str:
    """``url`` once it is an http(s) URL with a host; the error names ``option``, not the URL
    (it may hold a password). Without this an unclosed IPv6 bracket or a port that is not a
    number raised ValueError deep in urllib, and a URL the HTTP client cannot send (no scheme,
    another scheme, no host, bytes that are not UTF-8) was only said as "cannot reach
    <unparseable URL>"."""
    if not url:
        # The empty string is false: the command read the history database instead.
        raise CliError(f"{option} is empty: expected http://host:port")
    try:
        url.encode("utf-8")
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check
    except (UnicodeEncodeError, ValueError):
        raise CliError(f"{option} is not a valid URL: expected http://host:port") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise CliError(f"{option} {redact_url(url)}: not an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        # urllib sends no user:password from a URL: it took them as part of the host name and
        # failed on a DNS lookup that sent the reader looking at the network.
        raise CliError(f"{option} {redact_url(url)}: a user or password in the URL is not sent; "
                       f"give the collector's read token as {TOKEN.env}")
    return url
