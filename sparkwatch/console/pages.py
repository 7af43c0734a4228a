"""The console's HTML: every value from Spark or the history is escaped here, at the one place
text becomes markup (:func:`e`); the pages hold no inline script or style (the CSP forbids both)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from html import escape
from typing import Any
from urllib.parse import quote, urlencode

from sparkwatch.console.model import FAILED, QueryDetail, QueryRow
from sparkwatch.console.svg import Series, fmt_number, fmt_unit, line_chart, sparkline
from sparkwatch.history.views import StatePoint

RANGES: dict[str, float | None] = {"15m": 900, "1h": 3600, "6h": 6 * 3600, "24h": 86400,
                                   "7d": 7 * 86400, "all": None}
DEFAULT_RANGE = "1h"

ROCKSDB_METRICS: dict[str, tuple[str, ...]] = {
    # What the doctor's RocksDB checks read, and what sizes the store on disk and in memory.
    "bytes": ("rocksdbSstFileSize", "rocksdbPinnedBlocksMemoryUsage"),
    "ms": ("rocksdbCommitFlushLatency", "rocksdbCommitCompactLatency",
           "rocksdbCommitCheckpointLatency", "rocksdbWriterStallLatencyMs",
           "rocksdbTotalCompactionLatencyMs"),
    "": ("rocksdbReadBlockCacheHitCount", "rocksdbReadBlockCacheMissCount"),
}


def e(value: object) -> str:
    """Text as HTML (quotes too: safe inside attributes)."""
    return escape("" if value is None else str(value), quote=True)


def query_href(query_id: str, **params: object) -> str:
    shown = {k: v for k, v in params.items() if v not in (None, "")}
    return "/queries/" + quote(query_id, safe="") + ("?" + urlencode(shown) if shown else "")


def _page(title: str, body: str, refresh: int) -> str:
    return (
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{e(title)} - sparkwatch</title>"
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
    "status": lambda r: r.status,
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
             notes: Sequence[str], now: float | None = None) -> str:
    now = time.time() if now is None else now
    ordered = sorted(rows, key=SORTS[sort], reverse=descending)
    head = []
    for key, label in COLUMNS:
        order = "asc" if key == sort and descending else "desc"
        mark = (" \u25bc" if descending else " \u25b2") if key == sort else ""
        link = urlencode({"sort": key, "order": order, "refresh": refresh})
        head.append(f'<th><a href="/?{link}">{e(label)}{mark}</a></th>')
    head.append("<th>state rows, last batches</th>")
    body = []
    for r in ordered:
        cls = f"status-{e(r.status)}"
        body.append(
            f'<tr class="{cls}" data-query-id="{e(r.query_id)}">'
            f'<td><a class="query" href="{e(query_href(r.query_id))}">{e(r.name or r.query_id)}'
            f'</a><div class="id">{e(r.query_id)}</div></td>'
            f"<td>{e(r.app_name)}</td><td><span class=\"status\">{e(r.status)}</span></td>"
            f"<td>{_num(r.input_rate)}</td><td>{_num(r.processed_rate)}</td>"
            f"<td>{_num(r.state_rows)}</td><td>{_num(r.state_memory, 'bytes')}</td>"
            f"<td>{_num(r.watermark_lag, 's')}</td>"
            f"<td>{e('-' if r.last_batch_id is None else r.last_batch_id)} "
            f"<span class=\"age\">{_age(r.last_batch_at, now)}</span></td>"
            f"<td>{sparkline(r.spark)}</td></tr>")
    toggle = urlencode({"sort": sort, "order": "desc" if descending else "asc",
                        "refresh": 0 if refresh else 5})
    refresh_link = (f'<a href="/?{toggle}">'
                    f"{'stop auto-refresh' if refresh else 'auto-refresh every 5 s'}</a>")
    failed = sum(1 for r in rows if r.status == FAILED)
    summary = (f"<p class=\"summary\">{len(rows)} queries, "
               f"{sum(1 for r in rows if r.status in ('running', 'idle'))} active, "
               f"{failed} failed \u00b7 {refresh_link}</p>")
    table = ("<table class=\"queries\"><thead><tr>" + "".join(head) + "</tr></thead><tbody>"
             + "".join(body) + "</tbody></table>") if rows else \
        "<p class=\"empty\">No query seen yet.</p>"
    return _page("queries", "<h1>Queries</h1>" + _notes(notes) + summary + table, refresh)


def _notes(notes: Sequence[str]) -> str:
    return "".join(f'<p class="note">{e(n)}</p>' for n in notes)


def _chart(anchor: str, title: str, unit: str, series: Sequence[Series]) -> str:
    return (f'<figure class="chart" id="{e(anchor)}"><figcaption><a href="#{e(anchor)}">'
            f"{e(title)}</a></figcaption>{line_chart(title, unit, series)}</figure>")


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


def _operator_section(index: int, name: str, ops: Sequence[StatePoint]) -> str:
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
    rocks: list[str] = []
    for unit, keys in ROCKSDB_METRICS.items():
        found = [Series(k, pts) for k in keys if (pts := _custom(ops, k))]
        if found:
            # The first is what doctor's RocksDB findings link to.
            anchor = f"{p}-rocksdb" + (f"-{len(rocks) + 1}" if rocks else "")
            rocks.append(_chart(anchor, f"RocksDB {unit or 'counts'}", unit, found))
    return (f'<section class="operator" id="{p}"><h2>operator {index}: {e(name)}</h2>'
            f'<div class="charts">{"".join(charts + rocks)}</div></section>')


def query_page(d: QueryDetail, range_key: str, page: int, refresh: int,
               now: float | None = None) -> str:
    now = time.time() if now is None else now
    title = d.name or d.query_id
    ranges = " ".join(
        f'<a class="{"on" if key == range_key else ""}" '
        f'href="{e(query_href(d.query_id, range=key, refresh=refresh or None))}">{e(key)}</a>'
        for key in RANGES)
    head = (f"<h1>{e(title)} <span class=\"status status-{e(d.status)}\">{e(d.status)}</span>"
            f"</h1><p class=\"id\">query {e(d.query_id)} \u00b7 app {e(d.app_name)}</p>"
            f'<nav class="ranges">time range: {ranges}</nav>' + _notes(d.notes))
    findings = ""
    if d.findings:
        items = "".join(
            f'<li class="sev-{e(f.severity)}"><a href="#{e(f.anchor)}">{e(f.severity)} '
            f"{e(f.code)}</a>: {e(f.title)}" + (f" ({e(f.operator)})" if f.operator else "")
            + "</li>" for f in d.findings)
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
    operators = "".join(
        _operator_section(i, d.operator_names.get(i, ops[-1].operator_name if ops else "?"), ops)
        for i, ops in sorted(d.operators.items()))
    if not d.operators:
        operators = '<p class="empty">No state operator reported in this range.</p>'
    runs = "".join(
        f"<tr class=\"status-{e(r.status)}\"><td>{e(r.run_id)}</td><td>{e(r.status)}</td>"
        f"<td>{_age(r.started_at, now)}</td><td>{_age(r.ended_at, now)}</td>"
        f"<td>{e(r.batches)}</td><td>{e(r.first_batch_id)}..{e(r.last_batch_id)}</td>"
        f"<td>{e(r.error or '')}</td></tr>" for r in d.runs)
    rows = "".join(
        f"<tr><td>{e(x.batch_id)}</td><td>{e(x.run_id[:8])}</td><td>{_age(x.timestamp, now)}"
        f"</td><td>{_num(x.duration_ms, 'ms')}</td><td>{e(x.input_rows)}</td>"
        f"<td>{_num(x.input_rate)}</td><td>{_num(x.processed_rate)}</td>"
        f"<td>{_num(x.watermark_lag, 's')}</td></tr>" for x in d.table)
    pager = []
    if page > 0:
        pager.append(f'<a href="{e(query_href(d.query_id, range=range_key, page=page - 1))}'
                     '#batch-table">newer</a>')
    if len(d.table) and len(d.table) >= 50:
        pager.append(f'<a href="{e(query_href(d.query_id, range=range_key, page=page + 1))}'
                     '#batch-table">older</a>')
    body = (head + findings + '<section id="query-charts"><h2>query</h2><div class="charts">'
            + "".join(query_charts) + "</div></section>" + operators
            + '<section id="runs"><h2>runs</h2><table><thead><tr><th>run</th><th>status</th>'
            "<th>started</th><th>ended</th><th>batches</th><th>batch ids</th><th>error</th>"
            f"</tr></thead><tbody>{runs}</tbody></table></section>"
            f'<section id="batch-table"><h2>batches (page {page + 1})</h2><table><thead><tr>'
            "<th>batch</th><th>run</th><th>when</th><th>duration</th><th>input rows</th>"
            "<th>input rows/s</th><th>processed rows/s</th><th>watermark lag</th></tr></thead>"
            f"<tbody>{rows}</tbody></table><p class=\"pager\">{' '.join(pager)}</p></section>")
    return _page(title, body, refresh)


def error_page(status: int, message: str) -> str:
    return _page(f"{status}", f"<h1>{status}</h1><p class=\"note\">{e(message)}</p>", 0)


__all__ = ["RANGES", "SORTS", "error_page", "fmt_number", "overview", "query_page"]
