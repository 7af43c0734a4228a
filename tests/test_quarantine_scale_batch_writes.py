"""A replay writes each batch of entries in one transaction (one per entry took 7 ms each: a
full quarantine, 170,000 entries, took 20 minutes of history writes). When the history refuses
the batch for an entry it still refuses, the entries are written one by one: the others are
written and leave the quarantine, the refused one is kept with its reason, as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from sparkwatch.collector.history_process import decode_records
from sparkwatch.collector.quarantine import Quarantine
from sparkwatch.history import migrate
from sparkwatch.history.tenancy import FOREIGN
from sparkwatch.history.writer import HistoryWriter
from tests.support import run_cli
from tests.test_cli_quarantine import run_ids_written
from tests.test_collector_support import fresh_ids, run_events


def started(name: str = "window_agg_hdfs") -> dict[str, Any]:
    ids = fresh_ids()
    event = run_events(query_id=ids["query_id"], run_id=ids["run_id"], terminated=False)[0]
    event["payload"]["name"] = name
    return event


@pytest.mark.postgres
def test_a_batch_with_an_entry_the_history_still_refuses_writes_the_others_and_keeps_it(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    migrate.upgrade(pg_url)
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE query_runs ADD CONSTRAINT no_poison "
                             "CHECK (name IS DISTINCT FROM 'poison')"))
    engine.dispose()
    events = [started(), started(), started("poison"), started()]
    quarantine = Quarantine(tmp_path)
    quarantine.add([(e, "refused") for e in events])
    poison = quarantine.entries()[2]
    code, out, err = run_cli(capsys, "quarantine", "replay", "--spool-dir", str(tmp_path),
                             "--history-url", pg_url)
    assert code == 1, err
    first, last = out.splitlines()
    assert first.startswith(f"{poison.id}: still refused, kept: ") and "no_poison" in first
    assert last == "replayed 3 of 4"
    assert run_ids_written(pg_url) == {e["payload"]["runId"] for e in events} - \
        {events[2]["payload"]["runId"]}
    assert quarantine.entries() == [poison]
    assert quarantine.scan()[1] == 0


def test_a_batch_with_an_entry_naming_another_tenants_run_writes_the_others_and_keeps_it(
    tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    acme = started()
    writer = HistoryWriter(sqlite_url)
    try:
        assert writer.write(decode_records([[acme]]), ["acme"]) == []
    finally:
        writer.close()
    foreign = {**acme, "kind": "idle", "payload": {**acme["payload"]}}
    ours = [started(), started()]
    quarantine = Quarantine(tmp_path / "spool")
    quarantine.add([(ours[0], "refused"), (foreign, "refused"), (ours[1], "refused")],
                   ["beta", "beta", "beta"])
    kept = quarantine.entries()[1]
    code, out, _ = run_cli(capsys, "quarantine", "replay", "--spool-dir", str(tmp_path / "spool"),
                           "--history-url", sqlite_url)
    assert (code, out) == (1, f"{kept.id}: still refused, kept: {FOREIGN}\nreplayed 2 of 3\n")
    assert run_ids_written(sqlite_url) == {e["payload"]["runId"] for e in [acme, *ours]}
    assert quarantine.entries() == [kept]
