"""Label cardinality caps: how many apps, queries per app and operators per query the collector
holds series for. An event that would go past a cap is refused (with the cap named) and counted,
so one misbehaving app cannot blow up /metrics for everyone."""

from __future__ import annotations

from dataclasses import dataclass

from sparkwatch.metrics.state import MetricState
from sparkwatch.model.events import ParsedEvent, QueryProgress


@dataclass(frozen=True, slots=True)
class Caps:
    max_apps: int
    max_queries_per_app: int
    max_operators_per_query: int


class SeriesIndex:
    """Which apps and queries have series now, plus those admitted since the snapshot."""

    def __init__(self, state: MetricState) -> None:
        self._queries: dict[str, set[str]] = {}
        with state.read() as (apps, queries):
            for app in apps:
                self._queries.setdefault(app.id, set())
            for q in queries:
                self._queries.setdefault(q.app.id, set()).add(q.query_id)

    def refusal(self, parsed: ParsedEvent, caps: Caps) -> str | None:
        """Why ``parsed`` would exceed a cap (None: it fits, and is now counted in)."""
        app, query_id = parsed.app, parsed.event.query_id
        event = parsed.event
        operators = len(event.state_operators) if isinstance(event, QueryProgress) else 0
        if operators > caps.max_operators_per_query:
            return (
                f"query {query_id} reports {operators} state operators, over "
                f"the limit of {caps.max_operators_per_query} (max_operators_per_query)"
            )
        known = self._queries.get(app.id)
        if known is None:
            if len(self._queries) >= caps.max_apps:
                return (
                    f"app {app.name!r} ({app.id}) is new and the collector already holds "
                    f"{len(self._queries)} apps, the limit (max_apps)"
                )
            known = self._queries[app.id] = set()
        if query_id not in known:
            if len(known) >= caps.max_queries_per_app:
                return (
                    f"query {query_id} is new and app {app.name!r} ({app.id}) already has "
                    f"{len(known)} queries, the limit (max_queries_per_app)"
                )
            known.add(query_id)
        return None
