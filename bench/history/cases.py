"""What the history benchmark measures: every read of the history a user can trigger.

- ``reader``: each public method of :class:`~sparkwatch.history.reader.HistoryReader` (what
  ``sparkwatch history`` runs), in-process;
- ``http``: each read endpoint of a real collector process (FastAPI, JSON) over keep-alive HTTP;
- ``dashboard``: each SQL panel and query variable of the History dashboard, as Grafana sends it,
  for three time ranges and two selections (every app and query, and one query).

Per-query cases rotate over a sample of queries (different trigger intervals, run counts and
operators) from one repetition to the next.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import psycopg
import sqlalchemy as sa

from bench.history import grafana
from bench.history.measure import Case
from sparkwatch.history.engine import parse_url
from sparkwatch.history.reader import HistoryReader

ALL, ONE = "All", "one query"


@dataclass(frozen=True, slots=True)
class Sample:
    query_id: str
    display: str
    """What Grafana's $query variable holds: the name, or the id of an unnamed query."""
    name: str | None
    app_name: str
    run_id: str


def samples(url: str, count: int) -> list[Sample]:
    """``count`` queries spread over the population (the population's own helper table)."""
    engine = sa.create_engine(parse_url(url))
    try:
        with engine.connect() as conn:
            total = int(conn.execute(sa.text("SELECT count(*) FROM bench_queries")).scalar_one())
            picked = sorted({(k * 211) % total for k in range(min(count, total))})
            rows = conn.execute(sa.text("""
                SELECT q.query_id, q.name, q.app_name, (
                  SELECT run_id FROM query_runs r WHERE r.query_id = q.query_id
                  ORDER BY last_event_at DESC LIMIT 1) AS run_id
                FROM bench_queries q WHERE q.q = ANY(:picked) ORDER BY q.q"""),
                {"picked": picked}).all()
    finally:
        engine.dispose()
    return [Sample(r.query_id, r.name or r.query_id, r.name, r.app_name, r.run_id) for r in rows]


def _pick(items: Sequence[Sample], i: int) -> Sample:
    return items[i % len(items)]


def reader_cases(reader: HistoryReader, picks: list[Sample], end: datetime) -> list[Case]:
    def case(name: str, call: Callable[[Sample], Sequence[Any] | str]) -> Case:
        def run(i: int) -> int:
            out = call(_pick(picks, i))
            return 1 if isinstance(out, str) else len(out)
        return Case("reader", name, "–", ONE, run, len(picks))

    named = [s for s in picks if s.name] or picks
    six_hours = end - timedelta(hours=6)
    return [
        Case("reader", "queries()", "–", ALL, lambda i: len(reader.queries())),
        Case("reader", "statuses()", "–", ALL, lambda i: len(reader.statuses())),
        Case("reader", "queries(limit=100)", "–", ALL,
             lambda i: len(reader.queries(limit=100))),
        case("runs(id)", lambda s: reader.runs(s.query_id)),
        Case("reader", "runs(name)", "–", ONE,
             lambda i: len(reader.runs(_pick(named, i).display)), len(named)),
        case("resolve_query(id prefix)", lambda s: reader.resolve_query(s.query_id[:8])),
        case("state(id) newest 100", lambda s: reader.state(s.query_id)),
        case("state(id, operator=0) newest 100", lambda s: reader.state(s.query_id, 0)),
        case("state(id, since=end-6h)", lambda s: reader.state(s.query_id, since=six_hours)),
        case("state(id, offset=1000)", lambda s: reader.state(s.query_id, offset=1000)),
        case("plans(id)", lambda s: reader.plans(s.query_id)),
        case("plans(id, run_id)", lambda s: reader.plans(s.query_id, s.run_id)),
    ]


def http_cases(client: httpx.Client, picks: list[Sample], end: datetime) -> list[Case]:
    def get(path: str, params: dict[str, Any]) -> int:
        response = client.get(path, params=params)
        if response.status_code != 200:
            raise RuntimeError(f"GET {path} {params}: {response.status_code} {response.text}")
        return len(response.json())

    def case(name: str, path: str, **params: Any) -> Case:
        def run(i: int) -> int:
            s = _pick(picks, i)
            return get(path.format(q=s.query_id, name=s.display), params)
        return Case("http", name, "–", ONE, run, len(picks))

    six_hours, week = (end - timedelta(hours=6)).isoformat(), (end - timedelta(days=7)).isoformat()
    return [
        Case("http", "GET /api/v1/queries", "–", ALL, lambda i: get("/api/v1/queries", {})),
        case("GET /queries/{id}/runs", "/api/v1/queries/{q}/runs"),
        case("GET /queries/{name}/runs", "/api/v1/queries/{name}/runs"),
        case("GET /queries/{id}/state", "/api/v1/queries/{q}/state"),
        case("GET /queries/{id}/state?since=end-6h", "/api/v1/queries/{q}/state",
             since=six_hours),
        case("GET /queries/{id}/progress", "/api/v1/queries/{q}/progress"),
        case("GET /queries/{id}/progress?since=end-6h", "/api/v1/queries/{q}/progress",
             since=six_hours),
        case("GET /queries/{id}/rollups (minute)", "/api/v1/queries/{q}/rollups"),
        case("GET /queries/{id}/rollups?resolution=hour&operator=0&since=end-7d",
             "/api/v1/queries/{q}/rollups", resolution="hour", operator=0, since=week),
        Case("http", "GET /api/v1/stalls", "–", ALL, lambda i: get("/api/v1/stalls", {})),
        Case("http", "GET /api/v1/stalls?open=true", "–", ALL,
             lambda i: get("/api/v1/stalls", {"open": "true"})),
    ]


# --- dashboard ----------------------------------------------------------------------------------

Values = dict[str, list[str]]


def _fetch(conn: psycopg.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql.encode())  # as text, no parameters: exactly what Grafana sends
        return cur.fetchall() if cur.description is not None else []


def variable_values(conn: psycopg.Connection[Any], board: grafana.Board, start: datetime,
                    end: datetime, chosen: Values) -> Values:
    """Each variable's value: ``chosen`` where given, else *All* (every value its query
    returns with the variables before it set), as Grafana resolves them in order."""
    values: Values = {}
    for variable in board.variables:
        if variable.title in chosen:
            values[variable.title] = chosen[variable.title]
        else:
            sql = grafana.render(variable.sql, values, start, end)
            values[variable.title] = [str(row[0]) for row in _fetch(conn, sql)]
    return values


def selections(conn: psycopg.Connection[Any], board: grafana.Board, picks: list[Sample],
               start: datetime, end: datetime) -> dict[str, list[Values]]:
    """Per selection, the variable values of each repetition (one query: rotating)."""
    return {
        ALL: [variable_values(conn, board, start, end, {})],
        ONE: [variable_values(conn, board, start, end,
                              {"app": [s.app_name], "query": [s.display]}) for s in picks],
    }


def dashboard_cases(conn: psycopg.Connection[Any], board: grafana.Board, picks: list[Sample],
                    end: datetime, ranges: Sequence[grafana.TimeRange]) -> list[Case]:
    def case(target: grafana.Target, kind: str, label: str, selection: str,
             start: datetime, per_rep: list[Values]) -> Case:
        def run(i: int) -> int:
            sql = grafana.render(target.sql, per_rep[i % len(per_rep)], start, end)
            return len(_fetch(conn, sql))
        return Case("dashboard", f"{kind}{target.title}", label, selection, run, len(per_rep))

    start, _ = ranges[0].bounds(end)
    chosen = selections(conn, board, picks, start, end)
    cases: list[Case] = []
    for selection, per_rep in chosen.items():
        # Variables have no time macro: one case each, whatever the range. With one query
        # chosen, $app is chosen too: its query does not run.
        for variable in board.variables[1:] if selection == ONE else board.variables:
            before = _upstream(board, variable.title)
            reps = [{k: v for k, v in values.items() if k in before} for values in per_rep]
            cases.append(case(variable, "variable $", "–", selection, start, reps))
    for time_range in ranges:
        start, _ = time_range.bounds(end)
        for selection, per_rep in chosen.items():
            cases += [case(panel, "", time_range.label, selection, start, per_rep)
                      for panel in board.panels]
    return cases


def _upstream(board: grafana.Board, name: str) -> set[str]:
    names = [v.title for v in board.variables]
    return set(names[: names.index(name)])
