"""Daily partitions of the raw per-batch tables on PostgreSQL (migration 0010).

``batches``, ``operator_batches``, ``source_batches`` and ``sink_batches`` are partitioned by
RANGE on ``timestamp``, one partition per UTC day (``<table>_pYYYYMMDD``) plus a DEFAULT partition
(``<table>_default``) so that a write never fails for lack of a partition. A batch and its
children share one timestamp, so they always land in the same day of each table, and retention
drops the four partitions of a day together (``DROP TABLE``: no row-by-row DELETE, no bloat).

Partitions are created ahead by the collector's retention job and by the listener's history
writer; creating a day that has rows in the DEFAULT partition moves them into it first (the rows
land there when nothing created the day in time). SQLite keeps one table each: every function here
does nothing there.

Every piece of DDL here (a day created in one table, a day dropped in all four) is a step of its
own whose lock waits are bounded by :data:`LOCK_WAIT_SECONDS`: see :class:`PartitionsBusy`. A step
is one transaction (PostgreSQL's DDL is transactional): a process killed in the middle of one
leaves nothing of it. A day's table, or a DEFAULT partition, there but detached all the same (by
hand, by a tool outside one transaction) is attached again by the next creation pass
(:func:`ensure`), the day's with the indexes it lacks. A DEFAULT partition gone (``DROP TABLE`` by
hand) is made again, empty, first thing in every pass (:func:`ensure`, :func:`ensure_ahead`,
:func:`drop_before`), before anything reads it by name.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Literal

import sqlalchemy as sa

from sparkwatch.history.engine import LOCK_NOT_AVAILABLE

log = logging.getLogger(__name__)

# Children first: the order retention drops a day in and creation does not care about.
TABLES = ("operator_batches", "source_batches", "sink_batches", "batches")
DAYS_AHEAD = 3
"""Days after today that get their partitions ahead of the writes."""
DAY = timedelta(days=1)
DAYS_BEHIND = 31
"""Days before today whose rows, waiting in a DEFAULT partition, get their own day moved out (a
spool drained after an outage). Rows further off either way stay in DEFAULT, which every read
includes: a skewed clock or a forged timestamp must not create tables by the thousand."""
_LOCK = 0x73706B70  # "spkp"
LOCK_WAIT_SECONDS = 3.0
"""The longest a partition's DDL waits for a lock. ``DROP TABLE`` of a day, ``CREATE TABLE ...
PARTITION OF`` and ``DETACH`` take ACCESS EXCLUSIVE on the parent table, which waits for every
open transaction that read it (a dashboard's long query; pg_dump, for its whole dump), and while
it waits PostgreSQL queues every later statement on the table behind it: without a bound the
history's writes, the jobs and the read API stood still for as long as the reader, with no
error. A few seconds covers the history's own transactions (milliseconds to a second)."""
Commit = Callable[[], None]
OnBusy = Literal["skip", "raise"]
_NAME = re.compile(r"^(?P<table>[a-z_]+)_(?:p(?P<day>\d{8})|default)$")


class PartitionsBusy(Exception):
    """A step's DDL gave up waiting :data:`LOCK_WAIT_SECONDS` for a lock another session holds
    (a long read of the table, a dump): nothing of that step was done, the steps before it stand,
    and the next call tries again. Days not created by then take their rows in DEFAULT, which the
    next creation moves out; days not dropped are dropped by a later run."""


@contextmanager
def _step(conn: sa.Connection, what: str, commit: Commit | None) -> Iterator[None]:
    """One step of DDL in a savepoint, its lock waits bounded; committed on its own with
    ``commit`` (the ACCESS EXCLUSIVE lock on the parent is then held for this step only, not for
    the rest of the caller's work)."""
    try:
        with conn.begin_nested():
            before = conn.execute(sa.text("SELECT current_setting('lock_timeout')")).scalar_one()
            _set_lock_timeout(conn, f"{round(LOCK_WAIT_SECONDS * 1000)}ms")
            yield
            _set_lock_timeout(conn, before)  # the caller's own statements wait as before
    except sa.exc.OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
            raise
        raise PartitionsBusy(
            f"{what}: another session held the table for more than {LOCK_WAIT_SECONDS:g} s "
            "(a long read or a dump?)") from None
    if commit is not None:
        commit()


def _set_lock_timeout(conn: sa.Connection, value: str) -> None:
    conn.execute(sa.text("SELECT set_config('lock_timeout', :v, true)"), {"v": value})


def _exists(conn: sa.Connection, name: str) -> bool:
    return conn.execute(sa.text("SELECT to_regclass(:n)"), {"n": name}).scalar() is not None


def is_partition_name(name: str) -> bool:
    """A table that is one of the partitions (schema comparisons look at the parents only)."""
    match = _NAME.match(name)
    return match is not None and match["table"] in TABLES


def partition_name(table: str, day: datetime) -> str:
    return f"{table}_p{day:%Y%m%d}"


def default_name(table: str) -> str:
    return f"{table}_default"


def day_of(moment: datetime) -> datetime:
    moment = moment.astimezone(UTC)
    return datetime(moment.year, moment.month, moment.day, tzinfo=UTC)


def days(start: datetime, end: datetime) -> list[datetime]:
    """The UTC days covering [start, end] (both included)."""
    out, day = [], day_of(start)
    while day <= end:
        out.append(day)
        day += DAY
    return out


def is_partitioned(conn: sa.Connection) -> bool:
    """Whether this history has the partitioned layout (PostgreSQL at 0010 or later)."""
    if conn.dialect.name != "postgresql":
        return False
    kind = conn.execute(sa.text("SELECT relkind FROM pg_class WHERE oid = to_regclass('batches')"))
    return kind.scalar() == "p"


def _attached(conn: sa.Connection, table: str) -> set[str]:
    """The names of ``table``'s partitions (attached to it; a table of the same name that is not
    is a half-made one, see :func:`ensure`)."""
    return set(conn.execute(sa.text(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass(:t)"), {"t": table}).scalars())


def existing_days(conn: sa.Connection, table: str) -> set[datetime]:
    """The days that have a partition of ``table``."""
    out = set()
    for name in _attached(conn, table):
        match = _NAME.match(name)
        if match is not None and match["day"]:
            out.add(datetime.strptime(match["day"], "%Y%m%d").replace(tzinfo=UTC))
    return out


def _bounds(day: datetime) -> str:
    return f"FROM ('{day.isoformat()}') TO ('{(day + DAY).isoformat()}')"


def create_day(conn: sa.Connection, table: str, day: datetime) -> None:
    """Create ``table``'s partition of ``day``, moving that day's rows out of the DEFAULT
    partition first when it has any (PostgreSQL refuses a partition whose rows sit in DEFAULT).
    A table of that name already there, not attached (half made), is attached instead: PostgreSQL
    builds the parent's indexes it lacks."""
    name, default = partition_name(table, day), default_name(table)
    make = (f"ALTER TABLE {table} ATTACH PARTITION {name} FOR VALUES {_bounds(day)}"
            if _exists(conn, name) else
            f"CREATE TABLE {name} PARTITION OF {table} FOR VALUES {_bounds(day)}")
    in_range = "timestamp >= :a AND timestamp < :b"
    span = {"a": day, "b": day + DAY}
    # Every identifier in this module's SQL is a table of TABLES or one of its day partitions
    # (a date's digits); values are bound.
    exists = f"SELECT EXISTS (SELECT 1 FROM {default} WHERE {in_range})"  # nosec B608
    stranded = conn.execute(sa.text(exists), span).scalar()
    if not stranded:
        conn.execute(sa.text(make))
        return
    # Detached, the DEFAULT's rows can be re-inserted through the parent into the new partition.
    conn.execute(sa.text(f"ALTER TABLE {table} DETACH PARTITION {default}"))
    conn.execute(sa.text(make))
    move = f"INSERT INTO {table} SELECT * FROM {default} WHERE {in_range}"  # nosec B608
    conn.execute(sa.text(move), span)
    conn.execute(sa.text(f"DELETE FROM {default} WHERE {in_range}"), span)  # nosec B608
    conn.execute(sa.text(f"ALTER TABLE {table} ATTACH PARTITION {default} DEFAULT"))


def ensure(conn: sa.Connection, wanted: Iterable[datetime], commit: Commit | None = None,
           on_busy: OnBusy = "skip") -> int:
    """Create the missing partitions of the ``wanted`` days in every table; returns how many.
    Nothing on an unpartitioned history (SQLite).

    Each day of each table is a step (:func:`_step`), committed on its own with ``commit``. A
    step whose locks are held by another session past :data:`LOCK_WAIT_SECONDS`: with
    ``on_busy="raise"``, :class:`PartitionsBusy`; with ``"skip"`` (a writer, whose rows may wait
    in DEFAULT) the days left are logged and left for the next call."""
    return _ensure(conn, lambda: wanted, commit, on_busy)


def _ensure(conn: sa.Connection, wanted: Callable[[], Iterable[datetime]],
            commit: Commit | None, on_busy: OnBusy) -> int:
    """:func:`ensure`, the DEFAULT partitions made sure of first: ``wanted`` is read after them
    (it may read a DEFAULT partition)."""
    if not is_partitioned(conn):
        return 0
    created = 0
    try:
        _defaults(conn, commit)
        days_wanted = sorted({day_of(d) for d in wanted()})
        for table in TABLES:
            have = existing_days(conn, table)
            for day in days_wanted:
                if day not in have:
                    created += _create_step(conn, table, day, commit)
    except PartitionsBusy as exc:
        if on_busy == "raise":
            raise
        log.info("partitions not created now (%d made), left for the next creation: %s",
                 created, exc)
    return created


def _create_step(conn: sa.Connection, table: str, day: datetime, commit: Commit | None) -> int:
    name = partition_name(table, day)
    with _step(conn, f"creating {name}", commit):
        _one_creator(conn)
        if name in _attached(conn, table):
            return 0
        create_day(conn, table, day)
    return 1


def _defaults(conn: sa.Connection, commit: Commit | None) -> None:
    """Every table's DEFAULT partition there and attached, before a pass reads one by name: one
    dropped by hand failed every pass at its first such query, so nothing made it again (and
    meanwhile rows of a day without a partition failed to write)."""
    for table in TABLES:
        if default_name(table) not in _attached(conn, table):
            _default_step(conn, table, commit)


def _default_step(conn: sa.Connection, table: str, commit: Commit | None) -> None:
    """``table``'s DEFAULT partition attached again (detached by hand, or by a creation outside
    one transaction cut short between its DETACH and ATTACH: rows of a day without a partition
    then failed to write), or made if it is gone."""
    default = default_name(table)
    with _step(conn, f"attaching {default}", commit):
        _one_creator(conn)
        if default in _attached(conn, table):
            return
        if _exists(conn, default):
            log.warning("%s was not a partition of %s (a creation cut short?): attaching it "
                        "again", default, table)
            conn.execute(sa.text(f"ALTER TABLE {table} ATTACH PARTITION {default} DEFAULT"))
        else:
            log.warning("%s was gone (dropped by hand?): making it again, empty", default)
            conn.execute(sa.text(f"CREATE TABLE {default} PARTITION OF {table} DEFAULT"))


def _one_creator(conn: sa.Connection) -> None:
    """One creator at a time (collector replicas, listeners): the second finds the work done
    (between steps too, as the lock is the step's)."""
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK})


def ensure_ahead(conn: sa.Connection, now: datetime, days_ahead: int = DAYS_AHEAD,
                 commit: Commit | None = None, on_busy: OnBusy = "skip") -> int:
    """Today's and the next ``days_ahead`` days' partitions, plus any day from
    :data:`DAYS_BEHIND` before today whose rows wait in a DEFAULT partition (moved into their
    own). ``commit``, ``on_busy``: as :func:`ensure`."""
    first, last = day_of(now) - DAYS_BEHIND * DAY, day_of(now) + days_ahead * DAY

    def wanted() -> list[datetime]:
        stranded = conn.execute(sa.text(
            "SELECT DISTINCT date_trunc('day', timestamp AT TIME ZONE 'UTC') FROM batches_default "
            "WHERE timestamp >= :first AND timestamp < :end"), {"first": first, "end": last + DAY})
        return days(now, last) + [d.replace(tzinfo=UTC) for d in stranded.scalars()]
    return _ensure(conn, wanted, commit, on_busy)


# Each run loses the batches of the dropped day: one grouped pass over that day's partition.
_SUBTRACT = """
WITH counted AS (SELECT run_id, count(*) AS n FROM {partition} GROUP BY run_id)
UPDATE query_runs SET batches = query_runs.batches - counted.n FROM counted
WHERE query_runs.run_id = counted.run_id
RETURNING counted.n
"""
_DELETE_DEFAULT = """
WITH gone AS (DELETE FROM batches_default WHERE timestamp < :cutoff RETURNING run_id),
counted AS (SELECT run_id, count(*) AS n FROM gone GROUP BY run_id)
UPDATE query_runs SET batches = query_runs.batches - counted.n FROM counted
WHERE query_runs.run_id = counted.run_id
RETURNING counted.n
"""


def _rows_of(conn: sa.Connection, partition: str) -> int:
    """Rows of a partition about to be dropped: PostgreSQL's estimate once it analyzed the
    partition (autovacuum does after a day's writes), as counting would read a whole cold day
    from disk only to report it; counted when never analyzed (a small or fresh partition)."""
    estimate = conn.execute(sa.text(
        "SELECT reltuples FROM pg_class WHERE oid = to_regclass(:n)"), {"n": partition}).scalar()
    if estimate is not None and estimate >= 0:
        return int(estimate)
    count = f"SELECT count(*) FROM {partition}"  # nosec B608 - a partition of TABLES
    return int(conn.execute(sa.text(count)).scalar_one())


def drop_before(conn: sa.Connection, cutoff: datetime,
                commit: Commit | None = None) -> dict[str, int]:
    """Drop every day that ended at or before ``cutoff`` (rows of the day ``cutoff`` falls in stay
    until that whole day is due), and delete the DEFAULT partitions' rows older than ``cutoff``
    (few: they are moved out whenever their day is created). Returns rows removed per table: exact
    for ``batches`` (the runs' counts need them), estimated for the children's analyzed partitions.

    Each day is a step (its runs' counts and its four partitions together), committed on its own
    with ``commit``, after the DEFAULT partitions are made sure of (:func:`_defaults`: their
    rows are deleted by name); raises :class:`PartitionsBusy` when a day's locks are held past
    :data:`LOCK_WAIT_SECONDS` (the days dropped before it stand)."""
    _defaults(conn, commit)
    removed = dict.fromkeys(TABLES, 0)
    due = sorted(d for d in existing_days(conn, "batches") if d + DAY <= cutoff)
    for day in due:
        with _step(conn, f"dropping the partitions of {day:%Y-%m-%d}", commit):
            dropped = _drop_day(conn, day)
        for table, rows in dropped.items():
            removed[table] += rows
    with _step(conn, "deleting old rows of the DEFAULT partitions", commit):
        for table in TABLES[:-1]:
            removed[table] += conn.execute(sa.text(
                f"DELETE FROM {default_name(table)} WHERE timestamp < :c"),  # nosec B608
                {"c": cutoff}).rowcount
        removed["batches"] += sum(conn.execute(sa.text(_DELETE_DEFAULT), {"cutoff": cutoff})
                                  .scalars())
    return removed


def _drop_day(conn: sa.Connection, day: datetime) -> dict[str, int]:
    removed = dict.fromkeys(TABLES, 0)
    for table in TABLES:
        name = partition_name(table, day)
        if not _exists(conn, name):
            continue
        if table == "batches":
            removed[table] = sum(conn.execute(sa.text(_SUBTRACT.format(partition=name)))
                                 .scalars())
        else:
            removed[table] = _rows_of(conn, name)
        conn.execute(sa.text(f"DROP TABLE {name}"))
    return removed
