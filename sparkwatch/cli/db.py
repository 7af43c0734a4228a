"""`sparkwatch db`: create and migrate the SQL history schema.

SQLAlchemy and Alembic are imported inside the commands: every ``sparkwatch`` invocation builds
this parser, and importing them costs about a second.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sparkwatch.cli.errors import CliError
from sparkwatch.cli.numbers import shown
from sparkwatch.history.errors import UPGRADE_HINT, HistoryError
from sparkwatch.history.urls import resolve_url
from sparkwatch.settings.cli import HISTORY_URL
from sparkwatch.settings.options import FromEnv, add_option, origin
from sparkwatch.summary import one_line


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "db",
        help="create or migrate the SQL history schema",
        description="Manage the history schema (Alembic migrations shipped with sparkwatch).",
    )
    actions = parser.add_subparsers(dest="db_action", required=True, metavar="ACTION")
    up = actions.add_parser("upgrade", help="migrate the schema up (creates it if absent)")
    up.add_argument("--revision", default="head", help="target revision (default: head)")
    up.set_defaults(func=run_upgrade)
    down = actions.add_parser("downgrade", help="migrate the schema down (base drops it)")
    down.add_argument("--revision", required=True, help="target revision, e.g. base or -1")
    down.set_defaults(func=run_downgrade)
    current = actions.add_parser("current", help="show the schema revision")
    current.set_defaults(func=run_current)
    stamp = actions.add_parser(
        "stamp", help="record the revision the history's tables are at, migrating nothing",
        description="Repair a version table that does not say one revision (emptied, dropped, "
        "or holding several): record the one the history's tables are at. Nothing is migrated.")
    stamp.add_argument("--revision", required=True,
                       help="the revision the tables are at, e.g. head or 0011")
    stamp.set_defaults(func=run_stamp)
    for action in (up, down):
        action.add_argument(
            "--lock-wait-seconds", type=_lock_wait, metavar="SECONDS",
            help="on PostgreSQL, the most a step waits for a lock another session holds (a "
            "long read, a backup) before the migration is rolled back (default "
            f"{LOCK_WAIT_DEFAULT:g}; 0: wait as long as it is held, with every session after "
            "it waiting too)")
    for action in (up, down, current, stamp):
        add_url_argument(action)


LOCK_WAIT_DEFAULT = 10.0
"""``sparkwatch.history.migrate.LOCK_WAIT_SECONDS`` (not imported to build the parser: Alembic
costs a second; tests/test_cli_db.py holds the two equal)."""


def _lock_wait(raw: str) -> float:
    from sparkwatch.settings.parsers import non_negative_float

    try:
        return non_negative_float(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}: {shown(raw)}") from None


def add_url_argument(parser: argparse.ArgumentParser) -> None:
    add_option(parser, HISTORY_URL, dest="url")


@contextmanager
def user_errors() -> Iterator[None]:
    """History and database failures as one-line :class:`CliError`s."""
    import sqlalchemy as sa

    from sparkwatch.history.engine import LOCK_NOT_AVAILABLE, READ_LOCK_SECONDS, driver_message

    try:
        yield
    except HistoryError as exc:
        raise CliError(str(exc)) from None
    except sa.exc.DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) == LOCK_NOT_AVAILABLE:
            raise CliError(
                f"waited {READ_LOCK_SECONDS:.0f} s for a lock another session holds on the "
                "history's tables (a migration, a partition being created?); nothing was "
                "changed: try again once it is done") from None
        raise CliError(f"database error: {driver_message(exc)}") from None
    except sa.exc.ArgumentError as exc:
        raise CliError(f"database URL refused: {one_line(exc)}") from None
    except ValueError as exc:
        frames = _frames(exc)
        if any(module.startswith(URL_STAGE) or (function in URL_FUNCTIONS and _library(module))
               for module, function in frames):
            # What the driver makes of the URL's query (?timeout=abc) before it connects.
            raise CliError(f"database URL refused: {one_line(exc)}") from None
        if any(_library(module) for module, _ in frames):
            # Read back by the database library: a value another program wrote, or this
            # program's older self (a time that is no time, a JSON column that is no JSON).
            raise CliError(f"the history holds a value this version cannot read: "
                           f"{one_line(exc)}") from None
        raise  # this program's own fault, not the URL's nor the history's: it goes on as itself


DATABASE_LIBRARIES = ("sqlalchemy", "psycopg", "sqlite3", "alembic")
URL_STAGE = ("sqlalchemy.engine.create", "sqlalchemy.engine.url")
URL_FUNCTIONS = frozenset({"create_connect_args", "connect"})
"""Where a ValueError is the URL's: building the engine from it, or the first connection."""


def _library(module: str) -> bool:
    return module.split(".")[0] in DATABASE_LIBRARIES


def _frames(exc: BaseException) -> list[tuple[str, str]]:
    """(module, function) of each frame ``exc`` went through, outermost first."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        frames.append((str(tb.tb_frame.f_globals.get("__name__", "")), code.co_name))
        tb = tb.tb_next
    return frames


def command_url(args: argparse.Namespace) -> str:
    from_env = isinstance(args.url, FromEnv)
    with user_errors():
        url = resolve_url(args.url, from_env=from_env)
    if args.url is None:
        return url
    return checked_history_url(url, HISTORY_URL.env if from_env else "--url")


def checked_history_url(url: str, origin: str) -> str:
    """``url`` once it parses as a history URL; the error names ``origin`` (the flag or the
    environment variable it came from), and the URL only without its password."""
    from sparkwatch.history.urls import checked_url

    try:
        checked_url(url)
    except HistoryError as exc:
        raise CliError(f"{origin}: {exc}") from None
    return url


def quiet_alembic(args: argparse.Namespace) -> None:
    # Alembic logs every step at INFO, some on import (its plugins): so before importing
    # sparkwatch.history.migrate. The commands print their own summary.
    if not getattr(args, "verbose", False):
        logging.getLogger("alembic").setLevel(logging.WARNING)


def run_upgrade(args: argparse.Namespace) -> int:
    quiet_alembic(args)
    from sparkwatch.history import migrate

    return _migrate(args, migrate.upgrade, _describe)


def run_downgrade(args: argparse.Namespace) -> int:
    quiet_alembic(args)
    from sparkwatch.history import migrate

    return _migrate(args, migrate.downgrade, lambda rev: rev or "base (no history tables)")


def _migrate(
    args: argparse.Namespace,
    step: Callable[[str, str, float], None],
    describe: Callable[[str | None], str],
) -> int:
    """Move the schema to ``args.revision`` with ``step``, then say where it stands."""
    from sparkwatch.history import migrate
    from sparkwatch.history.engine import describe_url

    url = _history_url(args)
    with user_errors():
        try:
            wait = LOCK_WAIT_DEFAULT if args.lock_wait_seconds is None else args.lock_wait_seconds
            step(url, args.revision, wait)
        except migrate.NoHistorySchema:
            # A downgrade, which wrote nothing. Base is where such a database stands already (a
            # teardown run twice, or before anything was created); no other revision is.
            if args.revision != "base":
                raise
            print(f"no sparkwatch history schema in {describe_url(url)}: nothing to downgrade")
            return 0
        except migrate.BadRevision as exc:
            raise CliError(f"--revision {shown(args.revision)}: {exc}") from None
        print(f"history schema at {describe(migrate.current(url))} in {describe_url(url)}")
    return 0


def run_stamp(args: argparse.Namespace) -> int:
    quiet_alembic(args)
    from sparkwatch.history import migrate
    from sparkwatch.history.engine import describe_url

    url = _history_url(args)
    with user_errors():
        try:
            migrate.stamp(url, args.revision)
        except migrate.BadRevision as exc:
            raise CliError(f"--revision {shown(args.revision)}: {exc}") from None
        print(f"history schema recorded at {_describe(migrate.current(url))} in "
              f"{describe_url(url)} (nothing migrated)")
    return 0


def run_current(args: argparse.Namespace) -> int:
    quiet_alembic(args)
    from sparkwatch.history import migrate

    url = _history_url(args)
    with user_errors():
        revision = migrate.current(url)
    print(_describe(revision))
    return 0


def _history_url(args: argparse.Namespace) -> str:
    """:func:`command_url`, refusing an in-memory SQLite database (`db upgrade` succeeded, then
    reported no schema)."""
    return durable_history_url(command_url(args), origin(args.url, "--url"))


def durable_history_url(url: str, origin: str) -> str:
    """:func:`checked_history_url`, refusing an in-memory SQLite database
    (:func:`sparkwatch.history.urls.durable_url`, the check the listener's attach makes too)."""
    from sparkwatch.history.urls import durable_url

    try:
        durable_url(url)
    except HistoryError as exc:
        raise CliError(f"{origin}: {exc}") from None
    return url


def _describe(revision: str | None) -> str:
    from sparkwatch.history import migrate

    head = migrate.head()
    if revision is None:
        return f"none (no history schema: {UPGRADE_HINT})"
    if revision == head:
        return f"{revision} (head)"
    if revision not in migrate.known_revisions():
        from sparkwatch.history.revision import STAMP_HINT, is_newer

        if not is_newer(revision):  # a hand-made row: no sparkwatch's revision
            return (f"{revision} (not a revision of any sparkwatch: record the one the tables "
                    f"are at with {STAMP_HINT})")
        # Written by a newer sparkwatch: `db upgrade` here cannot know its migrations.
        return f"{revision} (newer than this sparkwatch, whose head is {head}: upgrade sparkwatch)"
    return f"{revision} (head is {head}: {UPGRADE_HINT})"
