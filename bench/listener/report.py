"""The listener benchmark's results as tables, and a verdict against the issue's goals."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from bench.tables import ms, percent, ratio, table

STATS = ("median_ms", "p90_ms", "p99_ms", "mean_ms", "max_ms")
E2E_STATS = ("median_ms", "p90_ms", "max_ms")
CALLBACK_GOAL = 20.0


def callback_table(timing: dict[str, Any]) -> str:
    sw, pub = timing["listeners"]["sparkwatch"], timing["listeners"]["public"]
    export = pub.get("inline_export")
    history = " + history write" if timing.get("history") else ""
    rows: list[list[Any]] = [
        ["sparkwatch `JvmReceiver` (`jevent.json()` + queue offer)", _n(sw["callback"]),
         *(ms(sw["callback"], k) for k in STATS)],
        [f"public `addListener` (`fromJObject` + `.json` + parse + apply{history})",
         _n(pub["callback"]), *(ms(pub["callback"], k) for k in STATS)],
        [f"… of which the inline export (parse + apply{history})", _n(export),
         *(ms(export, k) for k in STATS)],
        ["**public / sparkwatch**", "",
         *(ratio(ms(pub["callback"], k), ms(sw["callback"], k)) for k in STATS)],
    ]
    header = ["callback on Spark's listener thread", "events", "median ms", "p90 ms", "p99 ms",
              "mean ms", "max ms"]
    return table(header, rows)


def events_table(runs: list[dict[str, Any]]) -> str:
    rows = []
    for run, name, lst in per_listener(runs):
        cb = lst["callback"]
        rows.append([
            run["queries"], name, run["produced"], lst["received"],
            percent(lst["received"], run["produced"]), percent(lst["received_at_stop"],
                                                               run["produced"]),
            run["spark_dropped_streams"], run["peak_streams_queue"], lst["exported"],
            ms(cb, "median_ms"), ms(cb, "p99_ms"), busy(run, lst), f"{run['loadavg_1m'][0]:.1f}",
        ])
    header = ["queries", "listener", "progress produced", "received", "received/produced",
              "… by query stop", "Spark dropped (streams queue)", "peak queue depth",
              "exported", "callback median ms", "callback p99 ms", "listener thread busy",
              "load 1m"]
    return table(header, rows)


def e2e_table(runs: list[dict[str, Any]]) -> str:
    rows = []
    for run, name, lst in per_listener(runs):
        if "e2e" not in lst:
            continue
        e2e, history = lst.get("e2e"), lst.get("e2e_history")
        rows.append([run["queries"], name, _n(e2e),
                     *(ms(e2e, k) for k in E2E_STATS), ms(lst.get("e2e_scrape"), "median_ms"),
                     *(ms(history, k) for k in E2E_STATS),
                     f"{lst.get('e2e_timeouts')} / {lst.get('e2e_history_timeouts', '–')}"])
    header = ["queries", "listener", "probes", "/metrics median ms", "/metrics p90 ms",
              "/metrics max ms", "one scrape (median ms)", "history median ms",
              "history p90 ms", "history max ms", "not visible in 10 s (/metrics / history)"]
    return table(header, rows)


def callback_verdict(timing: dict[str, Any]) -> list[str]:
    sw = timing["listeners"]["sparkwatch"]["callback"]
    pub = timing["listeners"]["public"]["callback"]
    if not (sw and pub):
        return ["callback time: no progress event timed"]
    med, mean = pub["median_ms"] / sw["median_ms"], pub["mean_ms"] / sw["mean_ms"]
    ok = min(med, mean) >= CALLBACK_GOAL
    return [f"callback time, public/sparkwatch: {med:.1f}× (median), {mean:.1f}× (mean) -> goal "
            f"≥{CALLBACK_GOAL:g}× on both: {'MET' if ok else 'MISSED'}"]


def drop_verdict(runs: list[dict[str, Any]]) -> list[str]:
    top = max(run["queries"] for run in runs)
    lines, lost_by = [], {}
    for run, name, lst in per_listener(r for r in runs if r["queries"] == top):
        lost = lost_by[name] = run["produced"] - lst["received"]
        lines.append(f"{top} queries, {name}: {lst['received']}/{run['produced']} progress events"
                     f" received ({lost} lost); Spark dropped {run['spark_dropped_streams']} events"
                     f" from its streams queue; peak depth {run['peak_streams_queue']}")
    if "sparkwatch" in lost_by and "public" in lost_by:
        spark_drops = {n: r["spark_dropped_streams"] for r, n, _ in per_listener(runs)
                       if r["queries"] == top}
        ours = lost_by["sparkwatch"] == 0 and spark_drops["sparkwatch"] == 0
        theirs = lost_by["public"] > 0 or spark_drops["public"] > 0
        state = "MET" if ours and theirs else ("MISSED" if not ours else "NOT SHOWN (public path"
                                                " lost nothing in this run)")
        lines.append(f"no lost progress events for sparkwatch at {top} queries where the public "
                     f"path loses some: {state}")
    return lines


def busy(run: dict[str, Any], lst: dict[str, Any]) -> str:
    """Share of the run Spark's listener thread spent in this callback: near 100 % the listener
    cannot keep up, its backlog in Spark's queue only grows and Spark drops events once full."""
    elapsed = run["warmup_s"] + run["window_s"] + run["drain_s"]
    return percent(lst["callback_total_s"], elapsed)


def per_listener(runs: Iterable[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], str, Any]]:
    """(run, listener name, listener result) for every listener of every run."""
    for run in runs:
        for name, lst in run["listeners"].items():
            yield run, name, lst


def _n(summary: dict[str, Any] | None) -> int:
    return 0 if summary is None else int(summary["n"])
