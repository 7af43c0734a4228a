"""`sparkwatch state` and `doctor --inspect-state` on hostile checkpoints (Spark 4.x): corrupt
state files and logs, paths Spark's State Data Source escapes twice, and doctor given many
checkpoints of which some are broken."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.state_support import finish, start, tree_hash
from tests.support import run_cli
from tests.test_cli_signals import spark_context_up, sparkwatch, wait_for
from tests.workloads import installed_spark_version

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(installed_spark_version() < (4, 0), reason="the State Data Source is 4.0+"),
]

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def checkpoint(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished windowed aggregation on the HDFS provider: delta files and 4 committed
    batches (0..3)."""
    root = tmp_path_factory.mktemp("hostile-agg")
    finish(start(spark, "window_agg", "hdfs", root))
    return root / "checkpoint"


def _copy(checkpoint: Path, to: Path) -> Path:
    shutil.copytree(checkpoint, to)
    return to


def _latest(directory: Path) -> Path:
    return max((p for p in directory.iterdir() if p.name.isdecimal()), key=lambda p: int(p.name))


def zero_byte_delta(checkpoint: Path, to: Path) -> Path:
    """The last delta file of partition 0 truncated to nothing (a disk that filled up)."""
    copy = _copy(checkpoint, to)
    delta = max((copy / "state" / "0" / "0").glob("*.delta"), key=lambda p: int(p.stem))
    delta.write_bytes(b"")
    (delta.parent / f".{delta.name}.crc").unlink(missing_ok=True)
    return copy


def garbage_commit(checkpoint: Path, to: Path) -> Path:
    copy = _copy(checkpoint, to)
    last = _latest(copy / "commits")
    last.write_text("zzz\n")
    (last.parent / f".{last.name}.crc").unlink(missing_ok=True)
    return copy


def _sparkwatch(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "sparkwatch.cli.main", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_a_corrupt_state_file_is_one_line_without_a_java_stack(
    checkpoint: Path, tmp_path: Path
) -> None:
    """A zero-byte delta file failed the read's tasks, and Spark's executor and task listeners
    logged the Java stack (170 lines of ERROR and `at ...`) on stderr before the one line."""
    broken = zero_byte_delta(checkpoint, tmp_path / "zero-delta")
    done = _sparkwatch(tmp_path, "state", str(broken), "--format", "json")
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stdout == ""
    assert "\tat " not in done.stderr and " ERROR " not in done.stderr, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("sparkwatch state:")]
    assert line.startswith(f"sparkwatch state: error: cannot read operator 0 default of {broken}:")
    assert "CANNOT_LOAD_STATE_STORE" in line and "EOFException" in line, line


def test_a_malformed_log_is_named_not_a_py4j_object(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was "An error occurred while calling o38.collectToPython.": Py4J's first line, naming a
    Py4J object instead of the malformed file."""
    broken = garbage_commit(checkpoint, tmp_path / "garbage-commit")
    code, out, err = run_cli(capsys, "state", str(broken))
    assert (code, out) == (2, "")
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"sparkwatch state: error: cannot read the state metadata of {broken}")
    assert "MALFORMED_LOG_FILE" in line and f"{broken}/commits/" in line, line
    assert "An error occurred while calling" not in line


@pytest.mark.parametrize("name", ["with space", "per%20cent", "pipe|and;amp&", "ünï cödé $(x)"])
def test_a_path_spark_escapes_twice_is_read(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """Spark's State Data Source turns the checkpoint into a URI and reads it back as a path:
    `/chk/with space` was looked for at `/chk/with%20space`, and a valid checkpoint was refused
    with "[STDS_COMMITTED_BATCH_UNAVAILABLE] No committed batch found"."""
    copy = _copy(checkpoint, tmp_path / name)
    before = tree_hash(copy)
    code, out, err = run_cli(capsys, "state", str(copy), "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["checkpoint"] == str(copy) and data["batch_id"] == 3
    assert data["operators"][0]["rows"] > 0
    assert tree_hash(copy) == before
    # The link the read went through is gone, and was never made inside the checkpoint.
    assert sorted(tmp_path.iterdir()) == [copy]


def test_doctor_reports_every_checkpoint_when_some_are_broken(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Twenty checkpoints, four broken: the first broken one ended doctor with exit 2 and nothing
    about the other nineteen."""
    broken = {
        str(tmp_path / "missing"): "is not a streaming checkpoint",
        str(zero_byte_delta(checkpoint, tmp_path / "zero-delta")): "EOFException",
        str(garbage_commit(checkpoint, tmp_path / "garbage-commit")): "MALFORMED_LOG_FILE",
        str(tmp_path / "a-file"): "is not a streaming checkpoint",
    }
    (tmp_path / "a-file").write_text("not a checkpoint\n")
    good = [str(checkpoint)] * 15 + [str(_copy(checkpoint, tmp_path / "spaced out"))]
    order = good[:5] + list(broken)[:2] + good[5:12] + list(broken)[2:] + good[12:]
    argv = ["doctor", "--format", "json", "--fail-on", "error"]
    for path in order:
        argv += ["--inspect-state", path]
    code, out, err = run_cli(capsys, *argv)
    data = json.loads(out)
    assert code == 1, err
    checked = data["checked_state"]
    assert [c["checkpoint"] for c in checked] == order
    for c in checked:
        if c["checkpoint"] in broken:
            assert broken[c["checkpoint"]] in c["error"], c
            assert c["checkpoint"] in c["error"] and c["batch_id"] is None
        else:
            assert (c["error"], c["batch_id"], c["stores"]) == (None, 3, 1), c
    unreadable = [f for f in data["findings"] if f["code"] == "state-unreadable"]
    assert sorted(f["query_id"] for f in unreadable) == sorted(broken)
    assert {f["severity"] for f in unreadable} == {"error"}
    assert "Traceback" not in err


def test_doctor_table_names_the_unreadable_checkpoint(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "doctor", "--inspect-state", str(tmp_path / "nowhere"),
                             "--inspect-state", str(checkpoint))
    assert code == 1, err
    lines = out.splitlines()
    assert lines[0] == "checked the state of 2 checkpoints: 1 error"
    assert lines[1] == (f"  nowhere (state of {tmp_path}/nowhere): unreadable - "
                        f"{tmp_path}/nowhere is not a streaming checkpoint (no offsets log)")
    assert lines[2].startswith(f"  checkpoint (state of {checkpoint}): ")
    assert "ERROR   state-unreadable: the checkpoint's state cannot be read [nowhere]" in out


def test_a_checkpoint_without_a_committed_batch_names_its_operators(
    checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its commit log gone (or a query that failed in its first batch): the state metadata names
    operator 0, and the report said "state as of batch None ... no stateful operator"."""
    copy = _copy(checkpoint, tmp_path / "no-commits")
    shutil.rmtree(copy / "commits")
    code, out, err = run_cli(capsys, "state", str(copy))
    assert code == 0, err
    assert out.splitlines() == [f"{copy}: no committed batch, no state to read",
                                "operator 0 stateStoreSave: no committed state"]
    code, out, err = run_cli(capsys, "state", str(copy), "--format", "json")
    data = json.loads(out)
    assert (data["batch_id"], data["operators"]) == (None, [])
    assert data["uncommitted_operators"] == ["0 stateStoreSave"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_doctor_stopped_among_many_checkpoints_some_broken_ends_cleanly(
    checkpoint: Path, tmp_path: Path, sig: signal.Signals
) -> None:
    """A broken checkpoint is reported and doctor goes on to the next; a signal is not a broken
    checkpoint: it stops the command (130 / 143), whichever read it lands in."""
    broken = [str(zero_byte_delta(checkpoint, tmp_path / "zero-delta")), str(tmp_path / "none")]
    argv = ["doctor"]
    for path in ([str(checkpoint)] * 9 + broken) * 2:
        argv += ["--inspect-state", path]
    local_dirs = tmp_path / "spark-local"
    local_dirs.mkdir()
    with sparkwatch(tmp_path, *argv, env={"SPARK_LOCAL_DIRS": str(local_dirs)}) as doctor:
        wait_for(lambda: spark_context_up(local_dirs) or doctor.proc.poll() is not None, 90,
                 "the SparkContext")
        if doctor.proc.poll() is not None:
            pytest.fail(f"doctor ended before the signal: {doctor.err.read_text()[-2000:]}")
        doctor.send(sig)
        err = doctor.ends_cleanly(sig)
    assert "Traceback" not in err and "\tat " not in err, err
