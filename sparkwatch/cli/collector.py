"""`sparkwatch collector`: the push collector service (needs the ``collector`` extra).

Flags override ``SPARKWATCH_COLLECTOR_*`` env vars; ingest tokens and the read token come only
from the environment or ``--tokens-file`` (command lines are visible to every local user). The web
stack is imported inside the command, to keep ``sparkwatch --help`` fast.
"""

from __future__ import annotations

import argparse
import logging
import os
from contextlib import suppress
from pathlib import Path
from typing import Any

from sparkwatch.cli.errors import CliError
from sparkwatch.cli.signals import Stopped
from sparkwatch.settings import SettingsError


def register(sub: argparse._SubParsersAction) -> None:
    from sparkwatch.collector.config import SETTINGS

    parser = sub.add_parser(
        "collector",
        help="run the collector that apps push their events to",
        description="Receive events pushed by sparkwatch listeners; serve /metrics for every app, "
        "write the SQL history, run retention, rollups and stall detection. Every flag also "
        "reads SPARKWATCH_COLLECTOR_<NAME>; tokens: SPARKWATCH_COLLECTOR_TOKENS="
        "[TENANT/]APP=TOKEN,..., SPARKWATCH_COLLECTOR_READ_TOKEN (admin reads), "
        "SPARKWATCH_COLLECTOR_TENANT_READ_TOKENS=TENANT=TOKEN,... and "
        "SPARKWATCH_COLLECTOR_SCRAPE_TOKEN (/metrics).",
    )
    for setting in SETTINGS:
        if not setting.secret:
            _add_flag(parser, setting)
    parser.add_argument("--tokens-file", type=Path, metavar="FILE",
                        help="ingest tokens, one [TENANT/]APP=TOKEN per line (added to the env's)")
    parser.set_defaults(func=run)


def _add_flag(parser: argparse.ArgumentParser, setting: Any) -> None:
    """Boolean settings are flags (``--no-auth``; ``--jobs-enabled/--no-jobs-enabled``), the
    rest take a value; either way the flag's value reaches the settings as the env var would."""
    from sparkwatch.collector.config import is_bool

    help_text = f"{setting.help} (env {setting.env})"
    if not is_bool(setting):
        parser.add_argument(setting.flag, dest=setting.name, metavar="VALUE", help=help_text)
    elif setting.name.startswith("no_"):
        parser.add_argument(setting.flag, dest=setting.name, action="store_const", const="true",
                            help=help_text)
    else:
        parser.add_argument(setting.flag, dest=setting.name, help=help_text,
                            action=_BoolFlag)


class _BoolFlag(argparse.BooleanOptionalAction):
    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        setattr(namespace, self.dest, "false" if option and option.startswith("--no-") else "true")


def _otlp_config(on: bool) -> Any:
    """The OTEL_* variables the OTLP export reads at start (--otlp); raises SettingsError for a
    bad one and, as CliError, for a missing otlp extra."""
    if not on:
        return None
    from sparkwatch.otlp.config import otlp_config

    return otlp_config(os.environ)


def run(args: argparse.Namespace) -> int:
    verbose = getattr(args, "verbose", False)
    if not verbose:  # before the imports: Alembic logs at INFO while loading
        for noisy in ("apscheduler", "alembic"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        import uvicorn

        from sparkwatch.collector.api import create_app
        from sparkwatch.collector.config import SETTINGS, load_collector_settings
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
    try:
        settings = load_collector_settings(os.environ, flags, args.tokens_file)
        service = build_service(settings, _otlp_config(settings.otlp))
    except (SettingsError, HistoryUrlError) as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot open the spool in {exc.filename}: {exc.strerror}") from None
    tune_gc()
    log_with_request_ids(LOG_FORMAT)
    reload_tokens_on_sighup(service, args.tokens_file)
    serve(uvicorn.Config(create_app(service), host=settings.host, port=settings.port,
                         log_level="debug" if verbose else "info", access_log=verbose,
                         timeout_graceful_shutdown=5, log_config=None,
                         http=header_deadline(settings.header_timeout_seconds,
                                              service.metrics.slow_clients.labels("headers").inc),
                         limit_concurrency=settings.max_connections))
    return 0


def serve(config: Any) -> None:
    """``uvicorn.run``, which swallows the stop signal and re-raises the ones it caught last
    first: here the first one ends the command, as every command ends (sparkwatch.cli.signals)."""
    import uvicorn

    class Server(uvicorn.Server):
        first_signal: int | None = None

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self.first_signal is None:
                self.first_signal = sig
            super().handle_exit(sig, frame)

    server = Server(config)
    with suppress(KeyboardInterrupt):  # a signal uvicorn caught, raised again after its stop
        server.run()
    if server.first_signal is not None:
        raise Stopped(server.first_signal)
    if not server.started:
        raise SystemExit(3)  # as uvicorn.run: the server could not start (port taken, ...)
