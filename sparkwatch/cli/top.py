"""`sparkwatch top`: a live terminal view of queries and their state operators.

Reads an embedded exporter's or a collector's ``/metrics`` (``--metrics``/``--collector``), or the
history database (default). Keys: g/l/b/s/n sort by growth, lag, batch time, state rows, name;
``/`` filter; up/down select; enter drills into a query; esc back; q quits.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import urllib.parse
from collections.abc import Callable
from typing import Any

from sparkwatch.cli.db import add_url_argument, command_url
from sparkwatch.cli.errors import CliError
from sparkwatch.cli.remote import checked_url, command_token, refuse_unused_token
from sparkwatch.settings.cli import TOKEN
from sparkwatch.settings.options import add_option

SORTS = ("growth", "lag", "batch", "rows", "name")
MAX_INTERVAL = 86_400.0
"""A day: the longest --interval. Longer is a typo for a live view, and inf or 1e300 overflowed
the wait for a key (select())."""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "top",
        help="live view of queries and state operators (sort, filter, drill in)",
        description="A live terminal view of streaming queries and their state operators.",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--metrics", metavar="URL",
                        help="an embedded exporter's /metrics, e.g. http://driver:9750/metrics")
    source.add_argument("--collector", metavar="URL",
                        help="a sparkwatch collector (reads the token's queries at "
                        "/api/v1/metrics, else its /metrics)")
    add_url_argument(parser)
    add_option(parser, TOKEN)
    parser.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                        help="seconds between reads of the source (default 2, at most "
                        f"{MAX_INTERVAL:.0f})")
    parser.add_argument("--sort", choices=SORTS, default="growth")
    parser.add_argument("--filter", default="", metavar="TEXT",
                        help="show only queries whose name, id, operators or keys contain TEXT")
    parser.add_argument("--once", action="store_true",
                        help="print one frame and exit (also when stdout is not a terminal)")
    parser.set_defaults(func=run_top)


def _reader(args: argparse.Namespace) -> tuple[str, Callable[[], Any]]:
    metrics = args.metrics is not None
    given = args.metrics if metrics else args.collector
    if given is not None:  # "" too: refused, not read as "no URL" (the history instead)
        option = "--metrics" if metrics else "--collector"
        url = checked_url(given if not given or "://" in given else "http://" + given, option)
        token = command_token(args)
        from sparkwatch.top import metrics_source

        if not metrics:
            return url, metrics_source.CollectorReader(url, token)
        if urllib.parse.urlparse(url).path in ("", "/"):
            url = url.rstrip("/") + "/metrics"
        return url, lambda: metrics_source.read_metrics(url, token)
    from sparkwatch.top.history_source import read_history

    refuse_unused_token(args, "--collector or --metrics")
    history_url = command_url(args)
    return history_url, lambda: read_history(history_url)


def _interactive() -> bool:
    """Whether keys can be read and frames drawn in place: stdin and stdout both a terminal.
    A closed one (``<&-``, a service without stdin) is None in ``sys``: not a terminal (its
    isatty() was an AttributeError, a traceback)."""
    return all(stream is not None and stream.isatty() for stream in (sys.stdin, sys.stdout))


def run_top(args: argparse.Namespace) -> int:
    from sparkwatch.top.terminal import print_once, run_live
    from sparkwatch.top.view import View

    # Written so that NaN fails too (every comparison with it is false): it redrew non-stop.
    if not 0 < args.interval <= MAX_INTERVAL:
        raise CliError(f"--interval must be a number of seconds > 0 and at most "
                       f"{MAX_INTERVAL:.0f}")
    _, read = _reader(args)
    view = View(sort=args.sort, filter=args.filter)
    if args.once or not _interactive():
        snap = read()
        if snap.error is not None:
            # No frame to show, only why: on stderr, where a script's 2>&1 or log looks for it,
            # and stdout (a pipe into a parser, a file) gets no table of nothing.
            raise CliError(f"cannot read {snap.source}: {snap.error}")
        width = shutil.get_terminal_size((160, 40)).columns
        print_once(snap, view, sys.stdout, width)
        return 0
    run_live(read, view, args.interval)
    return 0
