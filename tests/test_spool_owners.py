"""The spool's count of each owner's pending bytes (the collector's tenants): what it holds, a
share past which its appends are refused while other owners' still fit, bytes given back as
commits pass its records (also inside a run of its records and across segments), and counted
again from the records when the spool is reopened."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkwatch.collector.config import load_collector_settings, spool_share
from sparkwatch.collector.ingest import record_tenant, spool_record
from sparkwatch.collector.routes.ingest import spool_refusal
from sparkwatch.spool import ShareFull, Spool, SpoolFull, SpoolWriteFailed


def record(tenant: str, size: int = 60) -> bytes:
    """A spool record as the collector writes it, of about ``size`` bytes of events."""
    return spool_record(tenant, [json.dumps({"pad": "x" * size}).encode()])


def framed(data: bytes) -> int:
    """The bytes a record takes in the spool: its header and itself."""
    return 8 + len(data)


def drain_one_by_one(spool: Spool) -> list[dict[str, int]]:
    """Commit one record at a time; the owners' bytes after each commit (which always sum to
    the pending bytes)."""
    seen = []
    while not spool.is_empty():
        _, position = spool.read(1)
        spool.commit(position)
        seen.append(spool.owners())
        assert sum(seen[-1].values()) == spool.pending_bytes
    return seen


def test_each_owners_bytes_are_counted_and_sum_to_the_pending_bytes(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 20, segment_bytes=300)
    sizes = {"alpha": 0, "beta": 0}
    for i in range(20):
        tenant = "alpha" if i % 3 else "beta"
        data = record(tenant)
        spool.append_all([data], owner=tenant)
        sizes[tenant] += framed(data)
    assert spool.owners() == sizes
    assert sum(spool.owners().values()) == spool.pending_bytes
    assert len(list(tmp_path.glob("*.wal"))) > 3, "the records span several segments"


def test_an_owners_bytes_go_down_as_commits_pass_its_records(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 20, segment_bytes=300)
    for i in range(12):
        tenant = "alpha" if i < 8 else "beta"
        spool.append_all([record(tenant)], owner=tenant)
    seen = drain_one_by_one(spool)
    alpha = [owners.get("alpha", 0) for owners in seen]
    assert alpha == sorted(alpha, reverse=True) and alpha[7:] == [0] * 5
    assert seen[-1] == {}, "every owner's bytes given back once the spool is empty"
    assert spool.pending_bytes == 0


def test_a_commit_inside_a_run_of_one_owners_records_gives_back_exactly_what_it_passed(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path, 1 << 20)  # one segment: alpha's appends make one run
    data = record("alpha")
    spool.append_all([data, data, data], owner="alpha")
    spool.append_all([data], owner="alpha")
    _, position = spool.read(2)
    spool.commit(position)
    assert spool.owned("alpha") == 2 * framed(data) == spool.pending_bytes


def test_an_owner_past_its_share_is_refused_naming_it_while_another_owner_fits(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path, 2000)
    data = record("alpha", 200)
    while spool.owned("alpha") + framed(data) <= 1000:
        spool.append_all([data], owner="alpha", share=1000)
    held = spool.owned("alpha")
    with pytest.raises(ShareFull) as refused:
        spool.append_all([data], owner="alpha", share=1000)
    assert (refused.value.owned, refused.value.more, refused.value.bound) == (
        held, framed(data), 1000)
    assert spool.owned("alpha") == held, "nothing of the refused append is counted"
    spool.append_all([record("beta", 200)], owner="beta", share=1000)  # beta has its room


def test_an_append_of_several_records_past_the_share_keeps_none_and_counts_none(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path, 1 << 20)
    data = record("alpha", 200)
    with pytest.raises(ShareFull):
        spool.append_all([data, data, data], owner="alpha", share=2 * framed(data))
    assert spool.owners() == {} and spool.pending_bytes == 0 and list(spool.pending()) == []


def test_a_share_of_the_whole_bound_says_the_spool_is_full(tmp_path: Path) -> None:
    """One tenant (the default's only): it may fill the whole spool, and is told it is full."""
    spool = Spool(tmp_path, 1000)
    data = record("default", 200)
    with pytest.raises(SpoolFull) as refused:
        for _ in range(10):
            spool.append_all([data], owner="default", share=1000)
    assert not isinstance(refused.value, ShareFull)
    assert spool.owned("default") > 1000 - framed(data)


def test_a_reopened_spool_counts_each_owners_pending_records_again(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 20, segment_bytes=300)
    for i in range(15):
        tenant = ("default", "alpha", "beta")[i % 3]
        spool.append_all([record(tenant)], owner=tenant)
    _, position = spool.read(4)
    spool.commit(position)
    before = spool.owners()
    spool.close()

    reopened = Spool(tmp_path, 1 << 20, segment_bytes=300, owner_of=record_tenant)
    assert reopened.owners() == before
    assert sum(before.values()) == reopened.pending_bytes
    drain_one_by_one(reopened)
    assert reopened.owners() == {}


def test_the_tenant_of_a_spool_record_is_read_from_its_first_bytes() -> None:
    assert record_tenant(spool_record("default", [b"{}"])) == "default"
    assert record_tenant(spool_record("alpha", [b"{}"])) == "alpha"
    assert record_tenant(spool_record('we "quote"\u00e9', [b"{}"])) == 'we "quote"\u00e9'
    assert record_tenant(b'{"events":[],"tenant":"beta"}') == "beta"
    assert record_tenant(b'{"tenant":') == "default"  # unreadable: never raises


def test_one_tenant_may_fill_the_whole_spool_and_several_share_it() -> None:
    settings = load_collector_settings({"SPARKWATCH_COLLECTOR_NO_AUTH": "true"},
                                       {"spool_max_bytes": "1000"})
    assert spool_share(settings, 0) == spool_share(settings, 1) == 1000
    assert spool_share(settings, 2) == 500
    tighter = load_collector_settings({"SPARKWATCH_COLLECTOR_NO_AUTH": "true"},
                                      {"spool_max_bytes": "1000", "spool_tenant_share": "0.25"})
    assert spool_share(tighter, 3) == 250


@pytest.mark.parametrize("share", ["0", "1.5", "nan", "-0.1"])
def test_a_tenant_share_outside_0_to_1_is_refused_at_start(share: str) -> None:
    from sparkwatch.settings import SettingsError

    with pytest.raises(SettingsError, match="spool-tenant-share"):
        load_collector_settings({"SPARKWATCH_COLLECTOR_NO_AUTH": "true"},
                                {"spool_tenant_share": share})


def test_a_spool_refusal_tells_the_tenant_its_own_numbers_never_the_directory_or_totals(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path / "secret-spool-dir", 3000)
    spool.append_all([record("beta", 1200)], owner="beta")  # another tenant's bytes
    spool.append_all([record("alpha", 300)], owner="alpha")
    total = str(spool.pending_bytes)
    refusals = []
    for owner, share in (("alpha", 1500), ("alpha", 3000)):
        with pytest.raises(SpoolFull) as refused:
            spool.append_all([record(owner, 1400)], owner=owner, share=share)
        assert "secret-spool-dir" in str(refused.value), "the operator's message names it"
        refusals.append(spool_refusal(refused.value))
    share_full, spool_full = refusals
    assert "this tenant's share of the spool is full" in share_full
    assert str(spool.owned("alpha")) in share_full and "1500" in share_full
    assert "the spool is full" in spool_full and str(spool.owned("alpha")) in spool_full
    disk = spool_refusal(SpoolWriteFailed(f"spool {tmp_path} cannot write: No space left",
                                          "No space left on device"))
    assert "No space left on device" in disk
    for said in (*refusals, disk):
        assert "secret-spool-dir" not in said and str(tmp_path) not in said
        assert total not in said, "the bytes every tenant holds are not the tenant's to know"
