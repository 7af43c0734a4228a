"""The history writer's child process outlives a collector killed with SIGKILL (it has its own
process group) by the write in progress at most: it finishes that write, finds the parent gone
and exits quietly, without a traceback."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from sparkwatch.history import migrate
from sparkwatch.spool import Spool
from tests.support import wait_for
from tests.test_collector_support import count_rows, fresh_ids, run_events

PARENT = """
import sys, threading
from pathlib import Path
from sparkwatch.collector.history_process import WriterProcess
from sparkwatch.spool import Spool

url, directory = sys.argv[1], Path(sys.argv[2])
spool = Spool(directory, 1 << 26, fsync=False)
writer = WriterProcess(url, migrate=False, spool_dir=directory)
sent = threading.Event()

def waiting() -> bool:  # asked only while the answer is awaited: the request was sent
    sent.set()
    return False

threading.Thread(target=writer.write, args=(spool.cursor, spool.end, 1000, waiting),
                 daemon=True).start()
sent.wait()
print(writer.pid, flush=True)
threading.Event().wait()
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_writer_child_of_a_killed_collector_finishes_its_write_and_exits_quietly(
    tmp_path: Path,
) -> None:
    db = tmp_path / "history.db"
    url = f"sqlite:///{db}"
    migrate.upgrade(url)
    ids = fresh_ids()
    spool = Spool(tmp_path / "spool", 1 << 26, fsync=False)
    spool.append(run_events(**ids))
    spool.close()
    lock = sqlite3.connect(db, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")  # the child's write waits here while its parent dies
    stderr = tmp_path / "stderr"
    with open(stderr, "w") as err:
        parent = subprocess.Popen([sys.executable, "-c", PARENT, url, str(tmp_path / "spool")],
                                  stdout=subprocess.PIPE, stderr=err, text=True,
                                  env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert alive(child)
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    wait_for(lambda: not alive(child), 60, "the orphaned writer child exited")
    assert count_rows(url, "select count(*) from batches where run_id = :r",
                      r=ids["run_id"]) == 6  # its write was finished, not cut off
    assert "Traceback" not in stderr.read_text(), stderr.read_text()
