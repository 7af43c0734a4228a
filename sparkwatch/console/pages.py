"""The console's HTML: every value from Spark or the history goes through :func:`e` (or
:func:`u`), the one place text becomes markup (``console/markup.py``); the pages hold no inline
script or style (the CSP forbids both)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from sparkwatch.console.markup import e, u
from sparkwatch.console.model import (
    OPERATORS_PAGE,
    OVERVIEW_PAGE,
    TABLE_PAGE,
    QueryCounts,
    QueryDetail,
    QueryRow,
    attention,
)
from sparkwatch.console.svg import Point, Series, fmt_number, fmt_unit, line_chart, sparkline
from sparkwatch.history.views import StatePoint

RANGES: dict[str, float | None] = {"15m": 900, "1h": 3600, "6h": 6 * 3600, "24h": 86400,
                                   "7d": 7 * 86400, "all": None}
DEFAULT_RANGE = "1h"
OVERVIEW_REFRESH, QUERY_REFRESH = 5, 10
MAX_PAGE_POINTS = 12_000
"""Points drawn by all the charts of a query page together: past it each series is thinned
(its lows and highs kept). Drawing is most of a page's time and size."""

ROCKSDB_METRICS: dict[str, tuple[str, ...]] = {
    # What the doctor's RocksDB checks read, and what sizes the store on disk and in memory.
    "bytes": ("rocksdbSstFileSize", "rocksdbPinnedBlocksMemoryUsage"),
    "ms": ("rocksdbCommitFlushLatency", "rocksdbCommitCompactLatency",
           "rocksdbCommitCheckpointLatency", "rocksdbWriterStallLatencyMs",
           "rocksdbTotalCompactionLatencyMs"),
    "": ("rocksdbReadBlockCacheHitCount", "rocksdbReadBlockCacheMissCount"),
}


def query_href(query_id: str, **params: object) -> str:
    shown = {k: v for k, v in params.items() if v not in (None, "")}
    return "/queries/" + quote(query_id, safe="") + ("?" + urlencode(shown) if shown else "")


def _page(title: str, body: str, refresh: int, isolate: bool = False) -> str:
    """``isolate``: ``title`` is user text. A title cannot hold markup (no ``<bdi>``): it is
    isolated by FSI ... PDI instead, added around the text made inert, never escaped with it."""
    shown = f"\u2068{e(title)}\u2069" if isolate else e(title)
    return (
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{shown} - sparkwatch</title>"
        "<link rel=\"stylesheet\" href=\"/console.css\">"
        "<script src=\"/console.js\" defer></script></head>"
        f"<body data-refresh=\"{refresh}\"><header><a href=\"/\">sparkwatch console</a>"
        "</header><main>" + body + "</main></body></html>")


def _age(epoch: float | None, now: float) -> str:
    if epoch is None:
        return "-"
    seconds = max(now - epoch, 0.0)
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.1f}h ago"


def _num(value: float | None, unit: str = "") -> str:
    return "-" if value is None else fmt_unit(float(value), unit)


SORTS: dict[str, Callable[[QueryRow], Any]] = {
    "name": lambda r: (r.name or r.query_id).lower(),
    "app": lambda r: r.app_name.lower(),
    # Failed first, then active, then the rest; each most recently active first.
    "status": lambda r: (attention(r.status), -(r.last_event_at or r.last_batch_at or 0.0)),
    "input": lambda r: r.input_rate or 0.0,
    "processed": lambda r: r.processed_rate or 0.0,
    "rows": lambda r: r.state_rows or 0,
    "memory": lambda r: r.state_memory or 0,
    "lag": lambda r: r.watermark_lag or 0.0,
    "last": lambda r: r.last_batch_at or 0.0,
}
COLUMNS = (("name", "query"), ("app", "app"), ("status", "status"), ("input", "input rows/s"),
           ("processed", "processed rows/s"), ("rows", "state rows"),
           ("memory", "state memory"), ("lag", "watermark lag"), ("last", "last batch"))


def overview(rows: Sequence[QueryRow], sort: str, descending: bool, refresh: int,
             notes: Sequence[str], counts: QueryCounts, page: int = 0,
             now: float | None = None) -> str:
    now = time.time() if now is None else now
    ordered = sorted(rows, key=SORTS[sort], reverse=descending)

    def here(**changes: object) -> str:
        state = {"sort": sort, "order": "desc" if descending else "asc", "refresh": refresh,
                 "page": page or None, **changes}
        return "/?" + urlencode({k: v for k, v in state.items() if v is not None})

    head = []
    for key, label in COLUMNS:
        order = "asc" if key == sort and descending else "desc"
        mark = (" \u25bc" if descending else " \u25b2") if key == sort else ""
        head.append(f'<th><a href="{e(here(sort=key, order=order))}">{e(label)}{mark}</a></th>')
    head.append("<th>state rows, last batches</th>")
    # A page not refreshing opens query pages that do not either.
    sticky = {"refresh": 0} if refresh == 0 else {}
    body = []
    for r in ordered:
        cls = f"status-{e(r.status)}"
        body.append(
            f'<tr class="{cls}" data-query-id="{e(r.query_id)}">'
            f'<td><a class="query" href="{e(query_href(r.query_id, **sticky))}">'
            f'{u(r.name or r.query_id)}</a><div class="id">{u(r.query_id)}</div></td>'
            f"<td>{u(r.app_name)}</td><td><span class=\"status\">{e(r.status)}</span></td>"
            f"<td>{_num(r.input_rate)}</td><td>{_num(r.processed_rate)}</td>"
            f"<td>{_num(r.state_rows)}</td><td>{_num(r.state_memory, 'bytes')}</td>"
            f"<td>{_num(r.watermark_lag, 's')}</td>"
            f"<td>{e('-' if r.last_batch_id is None else r.last_batch_id)} "
            f"<span class=\"age\">{_age(r.last_batch_at, now)}</span></td>"
            f"<td>{sparkline(r.spark)}</td></tr>")
    refresh_link = (f'<a href="{e(here(refresh=0 if refresh else OVERVIEW_REFRESH))}">'
                    f"{'stop auto-refresh' if refresh else 'auto-refresh every 5 s'}</a>")
    summary = (f"<p class=\"summary\">{counts.total} queries, {counts.active} active, "
               f"{counts.failed} failed \u00b7 {refresh_link}</p>")
    summary += _overview_pager(len(rows), counts.total, page, here)
    if rows:
        table = ("<table class=\"queries\"><thead><tr>" + "".join(head) + "</tr></thead><tbody>"
                 + "".join(body) + "</tbody></table>")
    elif page:
        table = f'<p class="empty">No query on this page: <a href="{e(here(page=None))}">' \
                "first page</a>.</p>"
    else:
        table = "<p class=\"empty\">No query seen yet.</p>"
    return _page("queries", "<h1>Queries</h1>" + _notes(notes) + summary + table, refresh)


def _overview_pager(shown: int, total: int, page: int, here: Callable[..., str]) -> str:
    """"showing N of M" and the links to the pages before and after, when one page is not all."""
    if total <= OVERVIEW_PAGE and not page:
        return ""
    last = max((total - 1) // OVERVIEW_PAGE, 0)
    links = []
    if page > 0:
        links.append(f'<a href="{e(here(page=min(page - 1, last) or None))}">previous page</a>')
    if page < last:
        links.append(f'<a href="{e(here(page=page + 1))}">next page</a>')
    return (f'<p class="pager">showing {shown} of {total} (page {page + 1} of {last + 1}; '
            "failed and active queries first) " + " ".join(links) + "</p>")


def _notes(notes: Sequence[str]) -> str:
    return "".join(f'<p class="note">{u(n)}</p>' for n in notes)


@dataclass(frozen=True, slots=True)
class Chart:
    anchor: str
    title: str
    unit: str
    series: Sequence[Series]

    def html(self) -> str:
        return (f'<figure class="chart" id="{e(self.anchor)}"><figcaption>'
                f'<a href="#{e(self.anchor)}">{e(self.title)}</a></figcaption>'
                f"{line_chart(self.title, self.unit, self.series)}</figure>")


def _chart(anchor: str, title: str, unit: str, series: Sequence[Series]) -> Chart:
    return Chart(anchor, title, unit, series)


def within_budget(charts: Sequence[Chart], budget: int = MAX_PAGE_POINTS) -> list[Chart]:
    """The charts with their series thinned in the same proportion to ``budget`` points in all
    (none below a handful), when they hold more."""
    total = sum(len(s.points) for c in charts for s in c.series)
    if total <= budget:
        return list(charts)
    share = budget / total
    return [Chart(c.anchor, c.title, c.unit,
                  [Series(s.label, thin(s.points, int(len(s.points) * share)))
                   for s in c.series]) for c in charts]


def thin(points: Sequence[Point], keep: int) -> list[Point]:
    """At most ``keep`` (at least 5) of ``points`` (oldest first): the lowest and the highest of
    each of equal runs, and the last (a spike or a dip stays visible; the last value shown)."""
    if len(points) <= max(keep, 5):
        return list(points)
    buckets = max((keep - 1) // 2, 2)
    size = (len(points) - 1) / buckets
    out: list[Point] = []
    for b in range(buckets):
        run = points[round(b * size):round((b + 1) * size)]
        if not run:
            continue
        low = min(range(len(run)), key=lambda i: run[i][1])
        high = max(range(len(run)), key=lambda i: run[i][1])
        out += [run[i] for i in sorted({low, high})]
    return [*out, points[-1]]


def _op_series(ops: Sequence[StatePoint], **fields: Callable[[StatePoint], float]
               ) -> list[Series]:
    return [Series(label, [(o.timestamp.timestamp(), float(get(o))) for o in ops])
            for label, get in fields.items()]


def _custom(ops: Sequence[StatePoint], key: str) -> list[tuple[float, float]]:
    out = []
    for o in ops:
        value = o.custom_metrics.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out.append((o.timestamp.timestamp(), float(value)))
    return out


def _operator_charts(index: int, ops: Sequence[StatePoint]) -> list[Chart]:
    p = f"op-{index}"
    charts = [
        _chart(f"{p}-rows", "state rows (total)", "",
               _op_series(ops, rows=lambda o: o.num_rows_total)),
        _chart(f"{p}-changes", "rows updated / removed per batch", "",
               _op_series(ops, updated=lambda o: o.num_rows_updated,
                          removed=lambda o: o.num_rows_removed)),
        _chart(f"{p}-dropped", "rows dropped by watermark per batch", "",
               _op_series(ops, dropped=lambda o: o.num_rows_dropped_by_watermark)),
        _chart(f"{p}-memory", "state memory", "bytes",
               _op_series(ops, memory=lambda o: o.memory_used_bytes)),
        _chart(f"{p}-time", "commit / update / removal time per batch", "ms",
               _op_series(ops, commit=lambda o: o.commit_time_ms,
                          update=lambda o: o.all_updates_time_ms,
                          removal=lambda o: o.all_removals_time_ms)),
    ]
    rocks: list[Chart] = []
    for unit, keys in ROCKSDB_METRICS.items():
        found = [Series(k, pts) for k in keys if (pts := _custom(ops, k))]
        if found:
            # The first is what doctor's RocksDB findings link to.
            anchor = f"{p}-rocksdb" + (f"-{len(rocks) + 1}" if rocks else "")
            rocks.append(_chart(anchor, f"RocksDB {unit or 'counts'}", unit, found))
    return charts + rocks


def _operator_section(index: int, name: str, charts: Sequence[Chart]) -> str:
    return (f'<section class="operator" id="op-{index}"><h2>operator {index}: {u(name)}</h2>'
            f'<div class="charts">{"".join(c.html() for c in charts)}</div></section>')


def query_page(d: QueryDetail, range_key: str, page: int, refresh: int, ops_page: int = 0,
               now: float | None = None) -> str:
    now = time.time() if now is None else now
    title = d.name or d.query_id
    indexes = sorted(set(d.operator_indexes) | set(d.operators))
    shown = indexes[ops_page * OPERATORS_PAGE:(ops_page + 1) * OPERATORS_PAGE]

    def link(**changes: object) -> str:
        state: dict[str, object] = {"range": range_key, "refresh": refresh, "page": page,
                                    "ops": ops_page, **changes}
        return query_href(d.query_id, range=state["range"], refresh=state["refresh"],
                          page=state["page"] or None, ops=state["ops"] or None)

    ranges = " ".join(
        f'<a class="{"on" if key == range_key else ""}" href="{e(link(range=key))}">{e(key)}</a>'
        for key in RANGES)
    toggle = (f'<a href="{e(link(refresh=0 if refresh else QUERY_REFRESH))}">'
              f"{'stop auto-refresh' if refresh else f'auto-refresh every {QUERY_REFRESH} s'}</a>")
    head = (f"<h1>{u(title)} <span class=\"status status-{e(d.status)}\">{e(d.status)}</span>"
            f"</h1><p class=\"id\">query {u(d.query_id)} \u00b7 app {u(d.app_name)} \u00b7 "
            f'{toggle}</p><nav class="ranges">time range: {ranges}</nav>' + _notes(d.notes))
    findings = ""
    if d.findings:
        def target(anchor: str, operator: int | None) -> str:
            if operator is None or operator in shown or operator not in indexes:
                return f"#{anchor}"
            return link(ops=indexes.index(operator) // OPERATORS_PAGE) + f"#{anchor}"

        items = "".join(
            f'<li class="sev-{e(f.severity)}"><a href="{e(target(f.anchor, f.operator_index))}">'
            f"{e(f.severity)} {e(f.code)}</a>: {u(f.title)}"
            + (f" ({u(f.operator)})" if f.operator else "") + "</li>" for f in d.findings)
        findings = f'<section id="findings"><h2>doctor</h2><ul>{items}</ul></section>'
    b = d.batches
    query_charts = [
        _chart("batches", "batch duration", "ms",
               [Series("batch", [(x.timestamp, float(x.duration_ms)) for x in b])]
               + [Series(phase, [(x.timestamp, float(x.phases[phase])) for x in b
                                 if phase in x.phases])
                  for phase in ("addBatch", "queryPlanning", "walCommit", "commitOffsets")]),
        _chart("rates", "input and processing rates", "rows/s",
               [Series("input", [(x.timestamp, x.input_rate) for x in b
                                 if x.input_rate is not None]),
                Series("processed", [(x.timestamp, x.processed_rate) for x in b
                                     if x.processed_rate is not None])]),
        _chart("watermark", "watermark lag (trigger time - watermark)", "s",
               [Series("lag", [(x.timestamp, lag) for x in b
                               if (lag := x.watermark_lag) is not None])]),
        _chart("backlog", "source backlog (offsets behind latest)", "",
               [Series("behind", [(p.timestamp, p.behind) for p in d.backlog])]),
    ]
    per_operator = [_operator_charts(i, d.operators.get(i, [])) for i in shown]
    drawn = within_budget(query_charts + [c for charts in per_operator for c in charts])
    query_charts, rest = drawn[:len(query_charts)], drawn[len(query_charts):]
    sections = []
    for i, charts in zip(shown, per_operator, strict=True):
        ops = d.operators.get(i, [])
        name = d.operator_names.get(i, ops[-1].operator_name if ops else "?")
        sections.append(_operator_section(i, name, rest[:len(charts)]))
        rest = rest[len(charts):]
    operators = _operators_pager(indexes, ops_page, link) + "".join(sections)
    if not indexes:
        operators = '<p class="empty">No state operator reported in this range.</p>'
    elif not shown:
        operators += '<p class="empty">No operator on this page.</p>'
    runs = "".join(
        f"<tr class=\"status-{e(r.status)}\"><td>{u(r.run_id)}</td><td>{e(r.status)}</td>"
        f"<td>{_age(r.started_at, now)}</td><td>{_age(r.ended_at, now)}</td>"
        f"<td>{e(r.batches)}</td><td>{e(r.first_batch_id)}..{e(r.last_batch_id)}</td>"
        f"<td>{u(r.error or '')}</td></tr>" for r in d.runs)
    rows = "".join(
        f"<tr><td>{e(x.batch_id)}</td><td>{u(x.run_id[:8])}</td><td>{_age(x.timestamp, now)}"
        f"</td><td>{_num(x.duration_ms, 'ms')}</td><td>{e(x.input_rows)}</td>"
        f"<td>{_num(x.input_rate)}</td><td>{_num(x.processed_rate)}</td>"
        f"<td>{_num(x.watermark_lag, 's')}</td></tr>" for x in d.table)
    pager = []
    if page > 0:
        pager.append(f'<a href="{e(link(page=page - 1))}#batch-table">newer</a>')
    if len(d.table) >= TABLE_PAGE:
        pager.append(f'<a href="{e(link(page=page + 1))}#batch-table">older</a>')
    body = (head + findings + '<section id="query-charts"><h2>query</h2><div class="charts">'
            + "".join(c.html() for c in query_charts) + "</div></section>" + operators
            + '<section id="runs"><h2>runs</h2><table><thead><tr><th>run</th><th>status</th>'
            "<th>started</th><th>ended</th><th>batches</th><th>batch ids</th><th>error</th>"
            f"</tr></thead><tbody>{runs}</tbody></table></section>"
            f'<section id="batch-table"><h2>batches (page {page + 1})</h2><table><thead><tr>'
            "<th>batch</th><th>run</th><th>when</th><th>duration</th><th>input rows</th>"
            "<th>input rows/s</th><th>processed rows/s</th><th>watermark lag</th></tr></thead>"
            f"<tbody>{rows}</tbody></table><p class=\"pager\">{' '.join(pager)}</p></section>")
    return _page(title, body, refresh, isolate=True)


def _operators_pager(indexes: Sequence[int], ops_page: int, link: Callable[..., str]) -> str:
    """Which operators the page charts, linking the other pages of them."""
    if len(indexes) <= OPERATORS_PAGE:
        return ""
    first = ops_page * OPERATORS_PAGE
    shown = (f"operators {first + 1}-{min(first + OPERATORS_PAGE, len(indexes))} of "
             f"{len(indexes)}" if first < len(indexes) else f"{len(indexes)} operators")
    links = []
    for n, start in enumerate(range(0, len(indexes), OPERATORS_PAGE)):
        if n != ops_page:
            label = f"{start + 1}-{min(start + OPERATORS_PAGE, len(indexes))}"
            links.append(f'<a href="{e(link(ops=n))}#operators">{label}</a>')
    return f'<p class="pager" id="operators">{shown} \u00b7 {" ".join(links)}</p>'


def error_page(status: int, message: str) -> str:
    return _page(f"{status}", f"<h1>{status}</h1><p class=\"note\">{u(message)}</p>", 0)


__all__ = ["MAX_PAGE_POINTS", "OPERATORS_PAGE", "OVERVIEW_PAGE", "RANGES", "SORTS", "error_page",
           "fmt_number", "overview", "query_page"]
