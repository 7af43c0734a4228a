"""A replay that cannot remove what it wrote from the quarantine (the file not writable in place,
and the rewrite that then removes it failing too) fails nothing: the history holds the entries,
the replay counts them and exits as it would have, and says in one warning line naming the file
and the reasons what follows: the entries stay in the quarantine, and the next replay writes
them again (the history's writes are idempotent: it keeps each once) and removes them. Such a
replay ended with an error (exit 2) after its entries were written.

Both failures are real ones that stop root too: the command runs in a process of its own, as
root without CAP_DAC_OVERRIDE (a file's mode then binds it as it binds any user) or in a mount
namespace of its own where the quarantine file is a read-only bind mount (which nothing renames
over)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sparkwatch.cli.quarantine import REPLAY_BATCH
from sparkwatch.collector.quarantine import Quarantine
from tests.support import run_cli
from tests.test_cli_quarantine import _started_events, run_ids_written, spool_and_history
from tests.test_collector_support import scalar

CLI = (sys.executable, "-m", "sparkwatch.cli.main")
Unwritable = Callable[[Quarantine], tuple[list[str], str]]
"""Makes the quarantine file unwritable for a command: its prefix, and the reasons said."""


def _mode_binds_root(quarantine: Quarantine) -> tuple[list[str], str]:
    """The file made read-only by its mode, for a process without CAP_DAC_OVERRIDE, and a
    directory where the rewrite's temporary goes: the command's prefix, and the reason said."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    quarantine.path.chmod(0o444)
    tmp = quarantine.path.with_suffix(".tmp")
    tmp.mkdir()
    drop = ["setpriv", "--inh-caps=-dac_override", "--bounding-set=-dac_override"] \
        if os.geteuid() == 0 else []
    return drop, (f"cannot remove the entries replayed from {quarantine.path}: Permission "
                  f"denied, nor rewrite {tmp}: Is a directory")


def _read_only_mount(quarantine: Quarantine) -> tuple[list[str], str]:
    """The file bind-mounted read-only over itself, in a mount namespace of the command's own
    (private: nothing outlives it): written in place it is refused, renamed over it is busy."""
    if os.geteuid() != 0 or shutil.which("unshare") is None or \
            subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespace to be had (root and unshare needed)")
    path = str(quarantine.path)
    prefix = ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', path]
    return prefix, (f"cannot remove the entries replayed from {path}: Read-only file system, "
                    f"nor rewrite {path}: Device or resource busy")


@pytest.mark.parametrize("unwritable", [_mode_binds_root, _read_only_mount],
                         ids=["mode-without-dac-override", "read-only-bind-mount"])
def test_a_replay_that_cannot_remove_its_entries_warns_exits_0_and_the_next_removes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], unwritable: Unwritable
) -> None:
    spool, history = spool_and_history(tmp_path)
    events = _started_events(REPLAY_BATCH + 1)  # two batches: the second is written too
    quarantine = Quarantine(spool)
    assert quarantine.add([(e, "refused") for e in events]) == len(events)
    held = quarantine.path.read_bytes()
    argv = ["quarantine", "replay", "--spool-dir", str(spool), "--history-url", history]
    prefix, reasons = unwritable(quarantine)
    done = subprocess.run([*prefix, *CLI, *argv], capture_output=True, text=True, timeout=120)
    n = len(events)
    assert (done.returncode, done.stdout) == (0, f"replayed {n} of {n}\n"), done.stderr
    said = [line for line in done.stderr.splitlines() if " INFO sparkwatch." not in line]
    assert said == [  # one line (but the history's log of its schema)
        f"sparkwatch quarantine: warning: --spool-dir {spool}: {reasons}: the entries "
        f"replayed ({n}) stay in the quarantine: the next replay writes them again (the history "
        "keeps each once) and removes them"]
    runs = {e["payload"]["runId"] for e in events}
    assert run_ids_written(history) == runs
    assert quarantine.path.read_bytes() == held
    tmp = quarantine.path.with_suffix(".tmp")
    # No copy of the quarantine left beside it (the rewrite's, refused its rename): only what
    # blocked it, where that was a directory at its name.
    assert not tmp.is_file()
    shutil.rmtree(tmp, ignore_errors=True)
    quarantine.path.chmod(0o644)
    # The cause gone, the next replay writes them again and removes them: each run held once.
    assert run_cli(capsys, *argv) == (0, f"replayed {n} of {n}\n", "")
    assert quarantine.path.read_bytes() == b""
    assert scalar(history, "select count(*) from query_runs") == n
    assert run_ids_written(history) == runs
