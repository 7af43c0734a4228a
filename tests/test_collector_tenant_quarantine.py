"""What the history writer leaves out because it names another tenant's run (the collector's
memory did not know the owner at ingest, e.g. after a restart with the history locked) was
acknowledged: it goes to the quarantine with its reason and tenant, and is counted as
quarantined, not as written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkwatch.collector.history_process import WriterProcess, Written
from sparkwatch.collector.quarantine import Quarantine
from sparkwatch.spool import Spool
from tests.test_collector_support import count_rows, fresh_ids, run_events


@pytest.fixture
def spool(tmp_path: Path) -> Iterator[Spool]:
    spool = Spool(tmp_path / "spool", 1 << 26, fsync=False)
    yield spool
    spool.close()


def write(writer: WriterProcess, spool: Spool) -> Written:
    written = writer.write(spool.cursor, spool.end, 1000, lambda: False)
    assert written is not None
    spool.commit(written.position)
    return written


def test_events_naming_another_tenants_run_are_quarantined_with_their_tenant_not_counted_written(
    history_url: str, spool: Spool
) -> None:
    url = history_url
    ids = fresh_ids()
    events = run_events(terminated=False, **ids)
    writer = WriterProcess(url, migrate=True, spool_dir=spool.directory)
    try:
        spool.append({"tenant": "ta", "events": events[:3]})
        assert write(writer, spool) == Written(spool.end, 3, 0)
        spool.append({"tenant": "tb", "events": events[3:]})
        foreign = len(events) - 3
        assert write(writer, spool) == Written(spool.end, 0, foreign)
    finally:
        writer.close()
    entries = Quarantine(spool.directory).entries()
    assert len(entries) == foreign
    assert {e.tenant for e in entries} == {"tb"}
    assert all("another tenant" in e.reason for e in entries)
    assert [e.event["payload"]["runId"] for e in entries] == [ids["run_id"]] * foreign
    assert count_rows(url, "select count(*) from batches where run_id = :r",
                      r=ids["run_id"]) == 2  # ta's two batches, none of tb's
