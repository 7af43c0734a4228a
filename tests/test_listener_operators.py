"""For every stateful operator kind, on real local Spark: what sparkwatch exports and writes to the
history equals the query's own progress, on SQLite and PostgreSQL at once (two listeners attached
to the same session receive the same events)."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
import sqlalchemy as sa
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import sparkwatch
from tests.support import create_database, drop_database, wait_for
from tests.workloads import (
    WORKLOADS,
    installed_spark_version,
    progress_dicts,
    run_to_completion,
    supported,
)

pytestmark = [pytest.mark.spark, pytest.mark.postgres]


class Run:
    """A finished workload: its query's identity and every progress it produced."""

    def __init__(self, name: str, query: Any) -> None:
        self.name = name
        self.query_id = str(query.id)
        self.run_id = str(query.runId)
        self.progress = progress_dicts(query)
        self.last = self.progress[-1]


@pytest.fixture(scope="module")
def attachments(spark: Any, pg_admin_url: str, tmp_path_factory: Any) -> Iterator[dict[str, Any]]:
    db_name = create_database(pg_admin_url)
    pg_url = sa.engine.make_url(pg_admin_url).set(database=db_name)
    sqlite_file = tmp_path_factory.mktemp("history") / "history.db"
    # The full metric profile: these tests check every operator metric, not the default's few.
    common = {"metrics_port": 0, "history_flush_seconds": 0.2, "metrics_profile": "full"}
    atts = {
        "sqlite": sparkwatch.attach(spark, history_url=f"sqlite:///{sqlite_file}", **common),
        "postgresql": sparkwatch.attach(
            spark, history_url=pg_url.render_as_string(hide_password=False), **common
        ),
    }
    yield atts
    for att in atts.values():
        att.detach()
    drop_database(pg_admin_url, db_name)


@pytest.fixture(scope="module")
def runs(spark: Any, attachments: dict[str, Any], tmp_path_factory: Any) -> dict[str, Run]:
    """All workloads run to completion; both listeners have seen them terminate."""
    queries = run_to_completion(spark, supported(), tmp_path_factory.mktemp)
    done = {n: Run(n, q) for n, q in queries.items()}
    for att in attachments.values():
        app_id = att.app.id
        for run in done.values():
            wait_for(partial(_terminated, att, app_id, run.query_id), 30, f"{run.name} end")
        assert att.flush(30), "history writer did not catch up"
    return done


def _terminated(att: Any, app_id: str, query_id: str) -> bool:
    state = att.state.query(app_id, query_id)
    return state is not None and not state.active


def scrape(att: Any) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(att.registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def sample(samples: dict, name: str, **labels: str) -> float:
    matches = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert len(matches) == 1, f"{name}{labels}: expected one sample, found {len(matches)}"
    return matches[0]


CUSTOM_METRIC = {
    # one custom metric checked per kind, with the family sparkwatch exports it under
    "stateStoreSave": (
        "stateOnCurrentVersionSizeBytes",
        "spark_streaming_state_hdfs_current_version_size_bytes",
        1.0,
    ),
    "dedupe": ("rocksdbSstFileSize", "spark_streaming_state_rocksdb_sst_file_size_bytes", 1.0),
    "dedupeWithinWatermark": (
        "stateOnCurrentVersionSizeBytes",
        "spark_streaming_state_hdfs_current_version_size_bytes",
        1.0,
    ),
    "sessionWindowStateStoreSaveExec": (
        "rocksdbSstFileSize",
        "spark_streaming_state_rocksdb_sst_file_size_bytes",
        1.0,
    ),
    "symmetricHashJoin": (
        "rocksdbSstFileSize",
        "spark_streaming_state_rocksdb_sst_file_size_bytes",
        1.0,
    ),
    "globalLimit": (
        "stateOnCurrentVersionSizeBytes",
        "spark_streaming_state_hdfs_current_version_size_bytes",
        1.0,
    ),
    "applyInPandasWithState": (
        "stateOnCurrentVersionSizeBytes",
        "spark_streaming_state_hdfs_current_version_size_bytes",
        1.0,
    ),
    "transformWithStateInPandasExec": (
        "numValueStateVars",
        "spark_streaming_state_value_state_variables",
        1.0,
    ),
}


def workload_params() -> list[str]:
    return supported()


@pytest.fixture(params=[(w, b) for w in workload_params() for b in ("sqlite", "postgresql")],
                ids="-".join)
def case(request: pytest.FixtureRequest, runs: dict[str, Run],
         attachments: dict[str, Any]) -> tuple[str, Run, Any]:
    """Every workload with each history backend: its name, its run and that backend's listener."""
    workload, backend = request.param
    return workload, runs[workload], attachments[backend]


def test_exported_operator_values_equal_the_last_progress(case: tuple[str, Run, Any]) -> None:
    workload, run, att = case
    samples = scrape(att)
    op = run.last["stateOperators"][0]
    ids = {"query_id": run.query_id, "operator_index": "0", "operator": op["operatorName"]}
    assert op["operatorName"] == WORKLOADS[workload].operator_name(installed_spark_version())
    assert sample(samples, "spark_streaming_state_rows", **ids) == op["numRowsTotal"]
    assert (
        sample(samples, "spark_streaming_state_memory_used_bytes", **ids) == op["memoryUsedBytes"]
    )
    last_gauges = {
        "spark_streaming_state_last_batch_rows_updated": op["numRowsUpdated"],
        "spark_streaming_state_last_batch_rows_removed": op["numRowsRemoved"],
        "spark_streaming_state_last_batch_commit_time_seconds": op["commitTimeMs"] / 1000,
        "spark_streaming_state_last_batch_update_time_seconds": op["allUpdatesTimeMs"] / 1000,
    }
    for name, expected in last_gauges.items():
        assert sample(samples, name, **ids) == pytest.approx(expected), name
    ops = [p["stateOperators"][0] for p in run.progress]
    totals = {
        "spark_streaming_state_rows_updated_total": sum(o["numRowsUpdated"] for o in ops),
        "spark_streaming_state_rows_removed_total": sum(o["numRowsRemoved"] for o in ops),
        "spark_streaming_state_rows_dropped_by_watermark_total": sum(
            o["numRowsDroppedByWatermark"] for o in ops
        ),
        "spark_streaming_state_commit_time_seconds_total": sum(o["commitTimeMs"] for o in ops)
        / 1000,
    }
    for name, expected in totals.items():
        assert sample(samples, name, **ids) == pytest.approx(expected), name
    key, family, scale = CUSTOM_METRIC[WORKLOADS[workload].kind]
    assert sample(samples, family, **ids) == pytest.approx(op["customMetrics"][key] * scale)
    assert sample(samples, "spark_streaming_query_batches_total", query_id=run.query_id) == len(
        run.progress
    )


@pytest.mark.parametrize("workload", ["dedupe", "dedupe_within_watermark", "stream_join"])
def test_late_rows_are_dropped_and_exported_as_dropped_by_watermark(
    runs: dict[str, Run], attachments: dict[str, Any], workload: str
) -> None:
    """The inputs carry rows behind the watermark; row-level operators drop them, and the
    counter says exactly how many."""
    run = runs[workload]
    dropped = sum(p["stateOperators"][0]["numRowsDroppedByWatermark"] for p in run.progress)
    assert dropped > 0
    samples = scrape(attachments["sqlite"])
    assert (
        sample(
            samples, "spark_streaming_state_rows_dropped_by_watermark_total", query_id=run.query_id
        )
        == dropped
    )


def test_history_has_one_row_per_batch_equal_to_the_progress(case: tuple[str, Run, Any]) -> None:
    _, run, att = case
    engine = sa.create_engine(att.settings.history_url)
    try:
        with engine.connect() as conn:
            batches = conn.execute(
                sa.text(
                    "select batch_id, num_input_rows from batches where run_id = :r "
                    "order by batch_id"
                ),
                {"r": run.run_id},
            ).all()
            op_rows = (
                conn.execute(
                    sa.text(
                        "select * from operator_batches where run_id = :r and operator_index = 0 "
                        "order by batch_id"
                    ),
                    {"r": run.run_id},
                )
                .mappings()
                .all()
            )
            status = conn.execute(
                sa.text("select status, ended_at from query_runs where run_id = :r"),
                {"r": run.run_id},
            ).one()
    finally:
        engine.dispose()
    assert [(b.batch_id, b.num_input_rows) for b in batches] == [
        (p["batchId"], p["numInputRows"]) for p in run.progress
    ]
    assert len(op_rows) == len(run.progress)
    last_row, op = op_rows[-1], run.last["stateOperators"][0]
    fields = {
        "operator_name": "operatorName",
        "num_rows_total": "numRowsTotal",
        "num_rows_updated": "numRowsUpdated",
        "num_rows_removed": "numRowsRemoved",
        "memory_used_bytes": "memoryUsedBytes",
        "commit_time_ms": "commitTimeMs",
        "all_updates_time_ms": "allUpdatesTimeMs",
        "all_removals_time_ms": "allRemovalsTimeMs",
        "num_rows_dropped_by_watermark": "numRowsDroppedByWatermark",
        "num_shuffle_partitions": "numShufflePartitions",
        "num_state_store_instances": "numStateStoreInstances",
    }
    for column, key in fields.items():
        assert last_row[column] == op[key], column
    custom = last_row["custom_metrics"]
    if isinstance(custom, str):  # SQLite hands JSON back as text through a raw query
        import json

        custom = json.loads(custom)
    assert custom == op.get("customMetrics", {})
    assert status.ended_at is not None


def test_two_listeners_on_one_session_both_receive_every_event(
    runs: dict[str, Run], attachments: dict[str, Any]
) -> None:
    produced = sum(len(r.progress) for r in runs.values())
    for att in attachments.values():
        stats = att.stats()
        assert stats.mode == "jvm"
        assert stats.received.get("progress", 0) >= produced
        assert stats.dropped.get("intake", 0) == 0
        assert stats.parse_errors == 0


def test_workloads_cover_every_operator_kind_of_the_issue() -> None:
    kinds = {w.kind for w in WORKLOADS.values()}
    assert {
        "stateStoreSave",
        "dedupe",
        "dedupeWithinWatermark",
        "symmetricHashJoin",
        "sessionWindowStateStoreSaveExec",
        "globalLimit",
        "applyInPandasWithState",
        "transformWithStateInPandasExec",
    } <= kinds
