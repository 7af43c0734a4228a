"""Read queries over the history: what ``sparkwatch history`` shows, reusable by a read API.

Queries are addressed by id, name (of their latest run), or a unique id prefix. Results are plain
dataclasses from :mod:`sparkwatch.history.views`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sparkwatch.history.engine import READ_LOCK_SECONDS, connect, create_engine, describe_url
from sparkwatch.history.errors import UnknownOperator, UnknownQuery
from sparkwatch.history.interruptible import stops_for_signals
from sparkwatch.history.revision import check_schema
from sparkwatch.history.schema import OperatorBatch, OperatorPlan, QueryRun, RunTrigger
from sparkwatch.history.series import operator_indexes
from sparkwatch.history.views import QuerySummary, RunSummary, StatePoint, json_map, state_point
from sparkwatch.jsoncodec import dumps_text
from sparkwatch.model.contract import LIMITS, fit
from sparkwatch.plan.codec import identity_from_dict
from sparkwatch.plan.model import QueryPlan, Source

DEFAULT_LIMIT = 100
EXCEPTION_EXCERPT_CHARS = 1_000
"""The most of a run's exception a list of runs carries (its first characters: the message and
the top of the stack); ``exception_chars`` says how long the whole text is, and
:meth:`HistoryReader.exception` reads it whole. A run's exception may be 64 Ki characters, which
JSON's escapes can make six times as many bytes: a page of 1,000 runs answered 394 MB."""
LISTED_OPERATORS = 50
"""The most operators an unknown operator's error names."""
FULL_ID_CHARS = 36
"""The length of Spark's query ids (``java.util.UUID.toString``): one that long names an id in
full, never the start of one."""


class HistoryReader:
    """Reads the history at ``url``; the schema is checked on first use (must be at head)."""

    def __init__(self, url: str, keep_notes: bool = True,
                 read_bounds: tuple[float, float] | None = None) -> None:
        """``read_bounds``: a server's (:func:`~sparkwatch.history.engine.create_engine`);
        without them, a command's: a wait for a lock is bounded, the read itself is not."""
        self._engine = create_engine(url, must_exist=True, read_bounds=read_bounds,
                                     lock_seconds=READ_LOCK_SECONDS)
        self._checked = False
        self._keep_notes = keep_notes
        self.notes: list[str] = []
        """What a reader chose for the user (a name shared by several queries), to be shown;
        kept only with ``keep_notes``: a reader that lives as long as its process (the
        collector's, the console's) would hold one note per call, every tenant's ids in them."""

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> HistoryReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _connection(self) -> Iterator[sa.Connection]:
        with connect(self._engine) as conn, stops_for_signals(conn):
            if not self._checked:
                check_schema(conn)
                self._checked = True
            yield conn

    def queries(self, limit: int | None = DEFAULT_LIMIT, offset: int = 0,
                tenant: str | None = None) -> list[QuerySummary]:
        """The page ``offset``, ``limit`` of the queries, most recently active first.

        A page reads its queries' runs only, however many batches (and daily partitions of
        them) the history keeps: the runs carry their batch counts, last batch ids and latest
        batch times (migrations 0007, 0013; after retention these are the bounds of what the run
        recorded, see :class:`~sparkwatch.history.schema.QueryRun`). For every query's id and
        status alone, :meth:`statuses` reads the runs only. ``tenant``: that tenant's queries only
        (None: every tenant's; the same for every method taking it).
        """
        with self._connection() as conn:
            stmt = _queries_select(limit, offset, tenant)
            return [QuerySummary(**row._mapping) for row in conn.execute(stmt)]

    def statuses(self) -> dict[str, str]:
        """Every query id with the status of its latest run, most recently active first (the
        runs table only, however many batches the history holds)."""
        page = _latest_runs().subquery()
        stmt = sa.select(page.c.query_id, page.c.status).order_by(
            page.c.last_event_at.desc(), page.c.query_id)
        with self._connection() as conn:
            return {row.query_id: row.status for row in conn.execute(stmt)}

    def runs(self, query: str, limit: int | None = None, offset: int = 0,
             tenant: str | None = None) -> list[RunSummary]:
        """The runs of one query (or the page ``offset``, ``limit``), latest first; each with at
        most :data:`EXCEPTION_EXCERPT_CHARS` of its exception (see :meth:`exception`)."""
        with self._connection() as conn:
            query_id = _resolve(conn, query, self._notes(), tenant)
            stmt = _runs_select(query_id, tenant).limit(limit).offset(offset)
            return [RunSummary(**row._mapping) for row in conn.execute(stmt)]

    def has_run(self, query: str, run_id: str, tenant: str | None = None) -> bool:
        """Whether ``run_id`` is a run of the query (one index probe)."""
        with self._connection() as conn:
            query_id = _resolve(conn, query, self._notes(), tenant)
            runs = QueryRun.__table__.c
            return conn.execute(sa.select(runs.run_id).where(
                runs.query_id == query_id, runs.run_id == run_id, _in_tenant(tenant))
                .limit(1)).first() is not None

    def exception(self, query: str, run_id: str, tenant: str | None = None) -> str | None:
        """The whole exception of one run of the query (None: the run ended without one, or
        is no run of the query)."""
        with self._connection() as conn:
            query_id = _resolve(conn, query, self._notes(), tenant)
            runs = QueryRun.__table__.c
            return conn.execute(sa.select(runs.exception).where(
                runs.query_id == query_id, runs.run_id == run_id, _in_tenant(tenant))).scalar()

    def state(
        self,
        query: str,
        operator: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = DEFAULT_LIMIT,
        offset: int = 0,
        tenant: str | None = None,
    ) -> list[StatePoint]:
        """State of one query's operators over time, oldest first, within [since, until).

        Without ``since`` these are the newest ``limit`` points (page back with ``until`` = the
        oldest timestamp received, or ``offset``); with it, the first ``limit`` from ``since``.
        """
        with self._connection() as conn:
            query_id = _resolve(conn, query, self._notes(), tenant)
            operators = [operator] if operator is not None else operator_indexes(conn, query_id)
            stmt = _state_page(query_id, operators, since, until, limit, offset)
            rows = list(conn.execute(stmt)) if stmt is not None else []
            if since is None:
                rows.reverse()
            if not rows and operator is not None:
                _check_operator(conn, query_id, operator)
            # Through state_point, as doctor and the console build theirs: a custom metrics
            # column of other JSON than a map is an empty map (a list was served as it was: 500).
            return [state_point(row._mapping) for row in rows]

    def plans(self, query: str, run_id: str | None = None, tenant: str | None = None,
              limit: int | None = None, offset: int = 0) -> list[QueryPlan]:
        """Operator identity of each run of one query (or of ``run_id``), latest read first;
        the page ``offset``, ``limit`` of them is chosen in SQL (a plan is one run's rows):
        only that page's rows are read whole."""
        with self._connection() as conn:
            query_id = _resolve(conn, query, self._notes(), tenant)
            plans = OperatorPlan.__table__.c
            stmt = sa.select(OperatorPlan.__table__).where(plans.query_id == query_id)
            t = RunTrigger.__table__.c
            triggers = sa.select(RunTrigger.__table__).where(t.query_id == query_id)
            chosen = [run_id] if run_id is not None else None
            if limit is not None or offset:
                page = _plan_runs(query_id, run_id).limit(limit).offset(offset)
                chosen = list(conn.execute(page).scalars())
            if chosen is not None:
                stmt, triggers = stmt.where(plans.run_id.in_(chosen)), triggers.where(
                    t.run_id.in_(chosen))
            rows = conn.execute(stmt.order_by(plans.read_at.desc(), plans.operator_index,
                                              plans.run_id)).all()
            return plans_from_rows([dict(row._mapping) for row in rows],
                                   [dict(row._mapping) for row in conn.execute(triggers)])

    def _notes(self) -> list[str] | None:
        return self.notes if self._keep_notes else None

    def resolve_query(self, query: str, tenant: str | None = None) -> str:
        """The query id for an id, a name or a unique id prefix; :class:`UnknownQuery` if none
        (or if the query is another tenant's than ``tenant``)."""
        with self._connection() as conn:
            return _resolve(conn, query, self._notes(), tenant)

    def check_operator(self, query_id: str, operator: int) -> None:
        """:class:`UnknownOperator`, naming the query's operators, unless it has ``operator``."""
        with self._connection() as conn:
            _check_operator(conn, query_id, operator)


def _plan_runs(query_id: str, run_id: str | None) -> sa.Select[Any]:
    """The run ids of the query's plans, in the order :func:`plans_from_rows` returns them
    (latest read first, then by run id): the runs with operator rows, and the runs with a
    trigger only (a stateless query)."""
    plans, t = OperatorPlan.__table__.c, RunTrigger.__table__.c
    with_operators = (sa.select(plans.run_id, sa.func.max(plans.read_at).label("read_at"))
                      .where(plans.query_id == query_id).group_by(plans.run_id))
    has_operators = sa.exists().where(plans.run_id == t.run_id)
    trigger_only = sa.select(t.run_id, t.read_at).where(t.query_id == query_id, ~has_operators)
    if run_id is not None:
        with_operators = with_operators.where(plans.run_id == run_id)
        trigger_only = trigger_only.where(t.run_id == run_id)
    both = sa.union_all(with_operators, trigger_only).subquery()
    return sa.select(both.c.run_id).order_by(both.c.read_at.desc(), both.c.run_id)


def _in_tenant(tenant: str | None) -> sa.ColumnElement[bool]:
    """The runs of ``tenant`` (every run for None)."""
    runs = QueryRun.__table__.c
    return sa.true() if tenant is None else runs.tenant == tenant


def _resolve(conn: sa.Connection, query: str, notes: list[str] | None,
             tenant: str | None = None) -> str:
    runs = QueryRun.__table__.c
    mine = _in_tenant(tenant)
    if len(query) <= LIMITS.id_chars and conn.execute(
            sa.select(runs.query_id).where(runs.query_id == query, mine).limit(1)).first():
        return query
    # A name is stored as the contract fits it (cut to name_chars): the name the query was given
    # in Spark finds it however long it was.
    name = fit(query, LIMITS.name_chars)
    by_name = _latest_first(conn, sa.and_(runs.name == name, mine))
    if len(by_name) > 1 and notes is not None:
        # A name reused by a later run of the app (a second demo, a redeploy with a new
        # checkpoint) is a new query id: the user means the latest one.
        others = ", ".join(by_name[1:])
        notes.append(f"name {name!r} matches {len(by_name)} queries; showing the most recently "
                     f"active, {by_name[0]} (others: {others}; pass an id to choose)")
    if by_name:
        return by_name[0]
    where = describe_url(conn.engine.url)
    # A full id is no one's prefix: another tenant's exact id must find nothing (404), not one
    # of the caller's that starts with it (the same id with a space after it). And SQLite
    # refuses a LIKE pattern past 50,000 bytes.
    by_prefix = _ids_starting(conn, query, mine) if len(query) < FULL_ID_CHARS else []
    if len(by_prefix) == 1:
        return by_prefix[0]
    if by_prefix:  # "no query" would send the user looking for one that is there, twice
        more = ", ..." if len(by_prefix) > _SHOWN_MATCHES else ""
        shown = ", ".join(by_prefix[:_SHOWN_MATCHES]) + more
        raise UnknownQuery(f"{query!r} is the start of the ids of more than one query "
                           f"({shown})", where, "give more of the id, or the name")
    raise UnknownQuery(f"no query with id or name {name!r}", where,
                       "see `sparkwatch history queries`")


def _ids_starting(conn: sa.Connection, prefix: str, mine: sa.ColumnElement[bool]) -> list[str]:
    """The ids that start with ``prefix`` and go on past it: the same characters, in the same
    case (SQLite's LIKE ignores ASCII case, PostgreSQL's does not), and more than spaces (an id
    that is ``prefix`` and a trailing space is a lookalike, not what was meant)."""
    runs = QueryRun.__table__.c
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return _distinct_ids(conn, sa.and_(
        runs.query_id.like(escaped + "%", escape="\\"),  # LIKE: the index, where it can serve
        sa.func.substr(runs.query_id, 1, len(prefix)) == prefix,
        sa.func.rtrim(runs.query_id) != prefix,
        mine))


_SHOWN_MATCHES = 3


def _latest_first(conn: sa.Connection, condition: sa.ColumnElement[bool]) -> list[str]:
    runs = QueryRun.__table__.c
    last = sa.func.max(runs.last_event_at)
    stmt = (sa.select(runs.query_id).where(condition).group_by(runs.query_id)
            .order_by(last.desc(), runs.query_id.desc()).limit(10))
    return list(conn.execute(stmt).scalars())


def _distinct_ids(conn: sa.Connection, condition: sa.ColumnElement[bool]) -> list[str]:
    runs = QueryRun.__table__.c
    stmt = sa.select(runs.query_id).where(condition).distinct().order_by(runs.query_id).limit(10)
    return list(conn.execute(stmt).scalars())


def _queries_select(limit: int | None, offset: int, tenant: str | None = None) -> sa.Select[Any]:
    runs = QueryRun.__table__.c
    latest_first = (runs.last_event_at.desc(), runs.run_id.desc())
    of_query = sa.func.count().over(partition_by=runs.query_id)
    ranked = sa.select(
        *runs,
        sa.func.row_number().over(partition_by=runs.query_id, order_by=latest_first).label("rank"),
        of_query.label("runs"),
        # The runs' own counts (migration 0007): no batch row is read to count them.
        sa.func.sum(runs.batches).over(partition_by=runs.query_id).label("query_batches"),
        # The latest batch of any of the query's runs, from the runs' own (migration 0013).
        sa.func.max(runs.last_progress_at).over(partition_by=runs.query_id)
        .label("query_last_progress_at"),
    ).where(_in_tenant(tenant)).subquery()
    page = (
        sa.select(ranked)
        .where(ranked.c.rank == 1)
        .order_by(ranked.c.last_event_at.desc(), ranked.c.query_id)
        .limit(limit)
        .offset(offset)
        .subquery()
    )
    return sa.select(
        page.c.query_id,
        page.c.name,
        page.c.app_name,
        page.c.run_id.label("latest_run_id"),
        page.c.status,
        page.c.started_at,
        page.c.ended_at,
        page.c.last_event_at,
        page.c.runs,
        sa.cast(page.c.query_batches, sa.BigInteger).label("batches"),
        # The latest run's last batch and the query's latest batch time: no batch row is read
        # (a probe per daily partition each made a page of 100 queries take seconds).
        page.c.last_batch_id,
        page.c.query_last_progress_at.label("last_progress_at"),
    ).order_by(page.c.last_event_at.desc(), page.c.query_id)


def _latest_runs() -> sa.Select[Any]:
    runs = QueryRun.__table__.c
    latest_first = (runs.last_event_at.desc(), runs.run_id.desc())
    ranked = sa.select(
        runs.query_id, runs.status, runs.last_event_at,
        sa.func.row_number().over(partition_by=runs.query_id, order_by=latest_first).label("n"),
    ).subquery()
    return sa.select(ranked.c.query_id, ranked.c.status, ranked.c.last_event_at).where(
        ranked.c.n == 1)


def _runs_select(query_id: str, tenant: str | None = None) -> sa.Select[Any]:
    runs = QueryRun.__table__.c
    return (
        sa.select(
            *(runs[name] for name in _RUN_COLUMNS),
            # The start of the exception only, and its whole length: a page's size is bounded.
            sa.func.substr(runs.exception, 1, EXCEPTION_EXCERPT_CHARS).label("exception"),
            sa.func.length(runs.exception).label("exception_chars"),
            runs.error_class,
            runs.batches,
            # Kept on the run by the writer (migration 0013): no batch row is read.
            runs.first_batch_id,
            runs.last_batch_id,
        )
        .where(runs.query_id == query_id, _in_tenant(tenant))
        .order_by(runs.last_event_at.desc(), runs.run_id)
    )


_RUN_COLUMNS = (
    "run_id", "query_id", "name", "app_name", "app_id", "spark_version", "status",
    "started_at", "ended_at", "last_event_at",
)


def _state_page(
    query_id: str, operators: list[int], since: datetime | None, until: datetime | None,
    limit: int, offset: int,
) -> sa.Select[Any] | None:
    """One page of state points, newest first without ``since``, else oldest first.

    The index is (query, operator, time): one ordered, limited range scan per operator, merged,
    instead of a single ORDER BY time that sorts every row of the query for one page.
    """
    if not operators:
        return None
    newest = since is None
    parts = [_state_select(query_id, index, since, until, newest).limit(limit + offset)
             for index in operators]
    merged = sa.union_all(*(sa.select(p.subquery()) for p in parts)).subquery()
    order = [merged.c.timestamp, merged.c.batch_id, merged.c.operator_index]
    return (sa.select(merged).order_by(*(c.desc() for c in order) if newest else order)
            .limit(limit).offset(offset))


def _state_select(
    query_id: str, operator: int, since: datetime | None, until: datetime | None,
    newest: bool,
) -> sa.Select[Any]:
    ops = OperatorBatch.__table__.c
    stmt = sa.select(*(ops[name] for name in StatePoint.__dataclass_fields__))
    stmt = stmt.where(ops.query_id == query_id, ops.operator_index == operator)
    if since is not None:
        stmt = stmt.where(ops.timestamp >= since)
    if until is not None:
        stmt = stmt.where(ops.timestamp < until)
    order = [ops.timestamp, ops.batch_id]
    return stmt.order_by(*(c.desc() for c in order) if newest else order)


def _check_operator(conn: sa.Connection, query_id: str, operator: int) -> None:
    """Index probes only, however long the query's history: is there a row of ``operator``;
    if not, the query's operators (a skip scan) and one name each."""
    ops = OperatorBatch.__table__.c
    of_query = ops.query_id == query_id
    if conn.execute(sa.select(ops.operator_index).where(
            of_query, ops.operator_index == operator).limit(1)).first():
        return
    indexes = operator_indexes(conn, query_id, LISTED_OPERATORS + 1)
    known = [(index, conn.execute(sa.select(ops.operator_name).where(
        of_query, ops.operator_index == index).limit(1)).scalar())
        for index in indexes[:LISTED_OPERATORS]]
    more = ", ..." if len(indexes) > LISTED_OPERATORS else ""
    listed = (", ".join(f"{index} {name}" for index, name in known) + more) or "none recorded"
    raise UnknownOperator(
        f"query {query_id} has no state operator {operator} (operators: {listed})"
    )


def plans_from_rows(rows: list[dict[str, Any]],
                    triggers: Sequence[dict[str, Any]] = ()) -> list[QueryPlan]:
    """``operator_plans`` rows (ordered latest read first) grouped back into plans, per run,
    with each run's ``run_triggers`` row; a run with a trigger and no state operator (a
    stateless query) is a plan without operators. Latest read first."""
    by_run: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_run.setdefault(row["run_id"], []).append(row)
    plans = {run_id: _plan_of(run_rows) for run_id, run_rows in by_run.items()}
    for t in triggers:
        plan = plans.get(t["run_id"])
        if plan is None:
            plan = QueryPlan(t["query_id"], t["run_id"], Source.PLAN, (),
                             read_at=t["read_at"].timestamp())
        plans[t["run_id"]] = replace(plan, trigger=t["trigger_kind"],
                                     trigger_interval_ms=t["trigger_interval_ms"])
    return sorted(plans.values(), key=lambda p: (-p.read_at, p.run_id))


def _plan_of(rows: list[dict[str, Any]]) -> QueryPlan:
    first = rows[0]
    operators = [
        identity_from_dict({**json_map(row["details"]), "index": row["operator_index"],
                            "operator": row["operator_name"], "kind": row["kind"]})
        for row in sorted(rows, key=lambda r: r["operator_index"])
    ]
    return QueryPlan(
        query_id=first["query_id"],
        run_id=first["run_id"],
        source=Source(first["source"]),
        operators=tuple(operators),
        batch_id=first["batch_id"],
        read_at=first["read_at"].timestamp(),
        note=first["note"],
        settings=_settings(first["settings"]),
    )


def _settings(value: Any) -> dict[str, str]:
    """A plan's Spark settings as text, as Spark keeps them and the API promises (``dict[str,
    str]``): a value of other JSON in a SQLite history (``5``, ``true``) as its JSON text, where
    it answered 500; a column of other JSON than a map as no settings."""
    return {str(key): item if isinstance(item, str) else dumps_text(item)
            for key, item in json_map(value).items()}
