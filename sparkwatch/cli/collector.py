"""`sparkwatch collector`: the push collector service (needs the ``collector`` extra).

Flags override ``SPARKWATCH_COLLECTOR_*`` env vars; ingest tokens and the read token come only
from the environment or ``--tokens-file`` (command lines are visible to every local user). The web
stack is imported inside the command, to keep ``sparkwatch --help`` fast.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from sparkwatch.cli.db import durable_history_url
from sparkwatch.cli.errors import CliError
from sparkwatch.cli.signals import Stopped, note_still_stopping
from sparkwatch.interrupts import not_ignored
from sparkwatch.settings import SettingsError
from sparkwatch.settings.collector import (
    BY_NAME,
    SETTINGS,
    default_values,
    env_tokens,
    load_collector_settings,
)
from sparkwatch.settings.options import add_loader_option
from sparkwatch.spool import SpoolBusy
from sparkwatch.terminal import printable


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "collector",
        help="run the collector that apps push their events to",
        description="Receive events pushed by sparkwatch listeners; serve /metrics for every app, "
        "write the SQL history, run retention, rollups and stall detection. Every flag also "
        "reads the environment variable its help names; the secrets come only from the "
        "environment (or --tokens-file): "
        + "; ".join(f"{s.env}: {s.help}" for s in SETTINGS if s.secret) + ".",
    )
    defaults = default_values()
    for setting in SETTINGS:
        if not setting.secret:
            add_loader_option(parser, setting, defaults.get(setting.name))
    parser.add_argument("--tokens-file", type=Path, metavar="FILE",
                        help="ingest tokens, one [TENANT/]APP=TOKEN per line (added to the env's)")
    parser.set_defaults(func=run)


def _otlp_config(on: bool, env: Mapping[str, str]) -> Any:
    """The OTEL_* variables the OTLP export reads at start (--otlp); raises SettingsError for a
    bad one and, as CliError, for a missing otlp extra."""
    if not on:
        return None
    from sparkwatch.otlp.config import otlp_config

    return otlp_config(env)


def run(args: argparse.Namespace) -> int:
    verbose = getattr(args, "verbose", False)
    if not verbose:  # before the imports: Alembic logs at INFO while loading
        for noisy in ("apscheduler", "alembic"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        import uvicorn

        from sparkwatch.collector.api import create_app
        from sparkwatch.collector.gctune import tune_gc
        from sparkwatch.collector.guard import header_deadline
        from sparkwatch.collector.request_context import log_with_request_ids
        from sparkwatch.collector.service import build_service
        from sparkwatch.collector.tokens import reload_tokens_on_sighup
        from sparkwatch.history.errors import HistoryUrlError
        from sparkwatch.logs import LOG_FORMAT
    except ImportError as exc:
        raise CliError(f"{exc}: install the collector with pip install 'sparkwatch[collector]'") \
            from None
    flags = {s.name: getattr(args, s.name, None) for s in SETTINGS}
    env = os.environ  # read here, once: the settings, the OTEL_* variables, the env's tokens
    try:
        settings = load_collector_settings(env, flags, args.tokens_file)
        _check_history_url(settings.history_url, *_history_origin(args, env))
        _check_host(settings.host, _origin(args, "host"))
        service = build_service(settings, _otlp_config(settings.otlp, env))
    except (SettingsError, HistoryUrlError) as exc:
        raise CliError(str(exc)) from None
    except SpoolBusy as exc:
        raise CliError(f"{_origin(args, 'spool_dir')}: {exc} (each replica needs a spool "
                       "directory of its own)") from None
    except OSError as exc:
        raise CliError(f"cannot open the spool in {exc.filename}: {exc.strerror}") from None
    tune_gc()
    log_with_request_ids(LOG_FORMAT)
    reload_tokens_on_sighup(service, args.tokens_file, env_tokens(env))
    serve(uvicorn.Config(create_app(service), host=settings.host, port=settings.port,
                         log_level="debug" if verbose else "info", access_log=verbose,
                         timeout_graceful_shutdown=5, log_config=None,
                         http=header_deadline(settings.header_timeout_seconds,
                                              service.metrics.slow_clients.labels("headers").inc),
                         # uvicorn counts the new request's own connection against its
                         # limit: at N it served N-1 connections.
                         limit_concurrency=settings.max_connections + 1))
    return 0


def _origin(args: argparse.Namespace, name: str) -> str:
    """Where setting ``name`` came from, as errors name it: its flag if given, else its env var
    (or its default, which the variable would have changed)."""
    setting = BY_NAME[name]
    return str(setting.flag) if getattr(args, name, None) is not None else setting.env


def _history_origin(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[str, str | None]:
    """The history URL's origin and its raw text there (None: the default)."""
    origin = _origin(args, "history_url")
    raw = args.history_url if origin.startswith("--") else env.get(origin)
    return origin, raw


def _check_history_url(url: str | None, origin: str, raw: str | None) -> None:
    """An empty value is a mistake, not the history turned off (that is 'off': the collector
    then acknowledges events it keeps only in /metrics); a URL as the db command checks it."""
    if raw is not None and not raw.strip():
        raise CliError(f"{origin} is empty: give a database URL, or 'off' to keep only /metrics")
    if url:
        durable_history_url(url, origin)


def _check_host(host: str, origin: str) -> None:
    """Refuse a host no resolver takes (bytes that are not UTF-8, a label over 63 characters):
    the server's bind raised UnicodeError from deep in asyncio, a traceback, once started; and
    one that resolves to no address (256.1.1.1, a name no DNS knows), which the server's log
    told without naming the host or where it was set."""
    try:
        host.encode("idna")
    except UnicodeError:
        raise CliError(f"{origin}: not a host name or address (expected e.g. 0.0.0.0, "
                       "127.0.0.1 or a DNS name)") from None
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:  # socket.gaierror is an OSError
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "no address"
        raise CliError(f"{origin}: {printable(host)!r} resolves to no address to listen on "
                       f"({reason})") from None


def serve(config: Any) -> None:
    """``uvicorn.run``, which swallows the stop signal and re-raises the ones it caught last
    first: here the first one ends the command, as every command ends (sparkwatch.cli.signals)."""
    import uvicorn

    handled = not_ignored()  # uvicorn handles both whatever it was started with

    class Server(uvicorn.Server):
        first_signal: int | None = None

        def handle_exit(self, sig: int, frame: Any) -> None:
            if sig not in handled:
                return
            if self.first_signal is not None:
                # uvicorn takes a second SIGINT as "exit now": no graceful shutdown, and none of
                # the service's stop (the history writer's end). Here it is only noted.
                note_still_stopping()
                return
            self.first_signal = sig
            super().handle_exit(sig, frame)

    server = Server(config)
    with suppress(KeyboardInterrupt):  # a signal uvicorn caught, raised again after its stop
        server.run()
    if server.first_signal is not None:
        raise Stopped(server.first_signal)
    if not server.started:
        raise SystemExit(3)  # as uvicorn.run: the server could not start (port taken, ...)
