"""Tables and verdicts of the scrape bench (printed, and recorded by ``--record``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.tables import cell, ratio, table

MB = 1_000_000
RSS_TARGET_MB = 300.0
TARGET_QUERIES = 1000


def _mb(value: int | None) -> float | None:
    return None if value is None else value / MB


def _scraped(side: dict[str, Any], encoding: str, key: str) -> float:
    return float(side["scrapes"][encoding]["latency"][key])


def rows() -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
    def latency(encoding: str, key: str) -> Callable[[dict[str, Any]], Any]:
        return lambda side: _scraped(side, encoding, key)

    out: list[tuple[str, Callable[[dict[str, Any]], Any]]] = []
    for encoding, shown in (("gzip", "`Accept-Encoding: gzip`"), ("identity", "uncompressed")):
        for key, name in (("p50_ms", "p50"), ("p95_ms", "p95"), ("max_ms", "max")):
            out.append((f"scrape {name} ms, {shown}", latency(encoding, key)))
    out += [
        ("body bytes, uncompressed", lambda s: s["scrapes"]["identity"]["wire_bytes"]),
        ("bytes on the wire with `Accept-Encoding: gzip`",
         lambda s: s["scrapes"]["gzip"]["wire_bytes"]),
        ("series (sample lines), all", lambda s: s["census"]["series"]),
        ("… `spark_streaming_*` series", lambda s: s["census"]["spark_streaming"]),
        ("RSS after loading, MB", lambda s: _mb(s["memory_loaded"]["VmRSS"])),
        ("RSS after the scrapes, MB", lambda s: _mb(s["memory_scraped"]["VmRSS"])),
        ("peak RSS (VmHWM), MB", lambda s: _mb(s["memory_scraped"]["VmHWM"])),
    ]
    return out


def number(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else cell(value)


def times(num: float, den: float) -> str:
    """num/den, with two significant digits below 0.1 (0.0× says nothing)."""
    if den and 0 < num / den < 0.1:
        return f"{num / den:.2g}×"
    return ratio(num, den)


def size_table(result: dict[str, Any]) -> str:
    sw, pg = result["sparkwatch"], result["pushgateway"]
    body = []
    for name, get in rows():
        a, b = get(sw), get(pg)
        body.append([name, number(a), number(b), times(float(b), float(a))])
    return table(["", "sparkwatch collector", "Pushgateway", "Pushgateway / sparkwatch"], body)


def caption(result: dict[str, Any]) -> str:
    sw, pg = result["sparkwatch"], result["pushgateway"]
    return (
        f"**{result['queries']:,} queries × 4 operators** ({result['apps']} apps of ≤"
        f"{result['per_app']} queries, {result['batches']} progress events per query, "
        f"{result['events']:,} events pushed to the collector in {sw['load']['seconds']:.1f} s; "
        f"{pg['push']['groups']:,} groups pushed to the Pushgateway in "
        f"{pg['push']['seconds']:.1f} s; {result['scrapes']} scrapes per server and encoding, "
        f"alternating servers, after {result['warmup']} warm-up). Pushgateway's series include "
        f"its {pg['census']['push_time']:,} `push_time_seconds` and "
        f"{pg['census']['push_failure_time']:,} `push_failure_time_seconds` and its own "
        f"process metrics; the collector's include its `sparkwatch_collector_*` "
        f"({sw['census']['sparkwatch_collector']}). Served encodings: sparkwatch "
        f"{sw['scrapes']['gzip']['served']} / Pushgateway {pg['scrapes']['gzip']['served']} "
        "when asked for gzip.")


def verdict(result: dict[str, Any]) -> list[str]:
    sw, pg = result["sparkwatch"], result["pushgateway"]
    n = result["queries"]
    lines = []
    for encoding in ("gzip", "identity"):
        a, b = _scraped(sw, encoding, "p50_ms"), _scraped(pg, encoding, "p50_ms")
        lines.append(f"{n:,} × 4, scrape p50 ({encoding}): sparkwatch {cell(a)} ms, "
                     f"Pushgateway {cell(b)} ms ({times(b, a)})"
                     + (f" -> goal faster than Pushgateway: {'MET' if a < b else 'MISSED'}"
                        if n == TARGET_QUERIES else ""))
    peak = sw["memory_scraped"]["VmHWM"] / MB
    lines.append(f"{n:,} × 4, collector peak RSS {peak:.0f} MB"
                 + (f" -> goal under {RSS_TARGET_MB:.0f} MB: "
                    f"{'MET' if peak < RSS_TARGET_MB else 'MISSED'}"
                    if n == TARGET_QUERIES else ""))
    if sw["census"]["spark_streaming"] != pg["census"]["spark_streaming"]:
        lines.append(f"SERIES DIFFER: sparkwatch {sw['census']['spark_streaming']} vs "
                     f"Pushgateway {pg['census']['spark_streaming']} `spark_streaming_*` series")
    return lines


def render_table(result: dict[str, Any]) -> str:
    r = result["render"]
    before, now = r["prometheus_client"], r["sparkwatch"]
    body = [
        ["prometheus_client `generate_latest` (/metrics before)",
         *(cell(before[k]) for k in ("p50_ms", "p95_ms", "max_ms"))],
        ["`sparkwatch.metrics.text.generate` (/metrics now)",
         *(cell(now[k]) for k in ("p50_ms", "p95_ms", "max_ms"))],
        ["**before / now**", *(times(before[k], now[k]) for k in ("p50_ms", "p95_ms", "max_ms"))],
    ]
    return (f"In-process rendering of the same {result['queries']:,}-query exposition "
            f"({r['bytes']:,} bytes, identical from both; {before['n']} renders each, taking "
            "turns; collection from the metric state included):\n\n"
            + table(["renderer", "p50 ms", "p95 ms", "max ms"], body))


def render(results: list[dict[str, Any]]) -> str:
    parts, verdicts = [], []
    for result in results:
        parts += [caption(result), size_table(result)]
        if result.get("render"):
            parts.append(render_table(result))
        verdicts += verdict(result)
    return "\n\n".join([*parts, "\n".join(f"- {line}" for line in verdicts)])
