"""`sparkwatch collector`: the push collector service (needs the ``collector`` extra).

Flags override ``SPARKWATCH_COLLECTOR_*`` env vars; ingest tokens and the read token come only
from the environment or ``--tokens-file`` (command lines are visible to every local user). The web
stack is imported inside the command, to keep ``sparkwatch --help`` fast.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from sparkwatch.cli.errors import CliError
from sparkwatch.settings import SettingsError


def register(sub: argparse._SubParsersAction) -> None:
    from sparkwatch.collector.config import SETTINGS

    parser = sub.add_parser(
        "collector",
        help="run the collector that apps push their events to",
        description="Receive events pushed by sparkwatch listeners; serve /metrics for every app, "
        "write the SQL history, run retention, rollups and stall detection. Every flag also "
        "reads SPARKWATCH_COLLECTOR_<NAME>; tokens: SPARKWATCH_COLLECTOR_TOKENS=APP=TOKEN,... "
        "and SPARKWATCH_COLLECTOR_READ_TOKEN.",
    )
    for setting in SETTINGS:
        if not setting.secret:
            parser.add_argument(setting.flag, dest=setting.name, metavar="VALUE",
                                help=f"{setting.help} (env {setting.env})")
    parser.add_argument("--tokens-file", type=Path, metavar="FILE",
                        help="ingest tokens, one APP=TOKEN per line (added to the env's)")
    parser.set_defaults(func=run)


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
        from sparkwatch.collector.service import build_service
        from sparkwatch.history.errors import HistoryUrlError
    except ImportError as exc:
        raise CliError(f"{exc}: install the collector with pip install 'sparkwatch[collector]'") \
            from None
    flags = {s.name: getattr(args, s.name, None) for s in SETTINGS}
    try:
        settings = load_collector_settings(os.environ, flags, args.tokens_file)
        service = build_service(settings)
    except (SettingsError, HistoryUrlError) as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot open the spool in {exc.filename}: {exc.strerror}") from None
    tune_gc()
    uvicorn.run(create_app(service), host=settings.host, port=settings.port,
                log_level="debug" if verbose else "info", access_log=verbose,
                timeout_graceful_shutdown=5, log_config=None)
    return 0
