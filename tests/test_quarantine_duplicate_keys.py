"""A line of the quarantine whose object names a key twice (written by hand or by another tool:
the collector never does) says two things at once: which event, which tenant it is cannot be
told. It is no entry, as a torn line is none: counted among the lines that could not be read,
named by its number, kept byte for byte, never listed, replayed or taken for the entry of the
event it may name (an append then quarantines that event again, once). Parsed as the last key
said, but skipped by an append that read the first id, the event was held twice."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.collector.quarantine import Quarantine, entry_id
from tests.support import run_cli
from tests.test_cli_quarantine import _started, run_ids_written, spool_and_history

OTHER_ID = "0123456789abcdef"


def hand_line(*members: tuple[str, Any]) -> bytes:
    """A line holding an object of these members, in this order (a key may come twice)."""
    return ("{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in members)
            + "}\n").encode()


def named_twice(path: Path, line: int, key: str, so: str) -> str:
    return (f"sparkwatch quarantine: 1 line of {path} could not be read (torn or corrupt): {so}\n"
            f'sparkwatch quarantine: line {line} of {path} names "{key}" twice: which one it '
            "means cannot be told\n")


@pytest.mark.parametrize("events_id_is", ["first", "last"])
def test_a_line_naming_id_twice_is_no_entry_and_its_event_is_quarantined_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], events_id_is: str
) -> None:
    quarantine = Quarantine(tmp_path)
    event, other = {"kind": "idle", "payload": {"id": "q0"}}, {"kind": "idle"}
    assert quarantine.add([(other, "refused")]) == 1
    first, last = (entry_id(event), OTHER_ID)[::1 if events_id_is == "first" else -1]
    line = hand_line(("id", first), ("at", 1.0), ("reason", "by hand"), ("event", event),
                     ("id", last))
    with quarantine.path.open("ab") as f:
        f.write(line)
    assert quarantine.add([(event, "refused")]) == 1
    assert quarantine.add([(event, "refused again")]) == 0
    entries, unreadable = quarantine.scan()
    assert [(e.id, e.reason) for e in entries] == \
        [(entry_id(other), "refused"), (entry_id(event), "refused")]
    assert unreadable == 1
    assert quarantine.path.read_bytes().splitlines(keepends=True)[1] == line
    code, out, err = run_cli(capsys, "quarantine", "list", "--spool-dir", str(tmp_path))
    assert (code, out.splitlines()[-1]) == (0, "2 quarantined events")
    assert err == named_twice(quarantine.path, 2, "id", "not listed, and never replayed")


def test_a_line_naming_its_tenant_twice_is_replayed_into_neither_and_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spool, history = spool_and_history(tmp_path)
    event = _started()
    line = hand_line(("id", entry_id(event)), ("at", 1.0), ("reason", "by hand"),
                     ("event", event), ("tenant", "acme"), ("tenant", "default"))
    (spool / "quarantine.jsonl").write_bytes(line)
    code, out, err = run_cli(capsys, "quarantine", "replay", "--spool-dir", str(spool),
                             "--history-url", history)
    assert (code, out) == (0, "replayed 0 of 0\n")
    assert err == named_twice(spool / "quarantine.jsonl", 1, "tenant",
                              "not replayed, kept in the file")
    assert run_ids_written(history) == set()
    assert (spool / "quarantine.jsonl").read_bytes() == line


def test_past_ten_lines_naming_a_key_twice_the_listing_says_how_many_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quarantine = Quarantine(tmp_path)
    quarantine.path.write_bytes(b"".join(
        hand_line(("id", f"{n:016x}"), ("at", 1.0), ("reason", "by hand"), ("event", {}),
                  ("at", 2.0)) for n in range(13)))
    code, out, err = run_cli(capsys, "quarantine", "list", "--spool-dir", str(tmp_path))
    assert (code, out) == (0, "0 quarantined events\n")
    path = quarantine.path
    assert err.splitlines() == [
        f"sparkwatch quarantine: 13 lines of {path} could not be read (torn or corrupt): not "
        "listed, and never replayed",
        *(f'sparkwatch quarantine: line {n} of {path} names "at" twice: which one it means '
          "cannot be told" for n in range(1, 11)),
        f"sparkwatch quarantine: and 3 more lines of {path} name a key twice"]
