"""A README that works twice: every command of the README, run as a new user runs it, on one
fresh clone, and then again: the state section's demo resumes from the checkpoints the first left,
every history command reads a history where a second demo made each query name ambiguous (the
history picks the latest query and says so), the schema goes up and down again and the generated
files build again unchanged. Each command must exit 0 and print what the README promises.

Slow by nature (three demos, reads of their state): one clone, one install, and each demo stopped
with Ctrl-C (as the README says) as soon as what the commands after it read is there. The live
demo runs once: the second round's demo binds the same port and serves the same page, and its
queries' names are already ambiguous after the first state demo.
Commands the README shows that cannot run here are listed in ``NOT_RUN`` with the reason, and a
test keeps that list and the README in step, so no new README command goes unrun unnoticed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from sparkwatch.demo import queries as dq
from tests.conftest import DEMOS, ROOT, UNMEASURED
from tests.support import create_database, drop_database, state_rows, state_series, wait_for
from tests.workloads import installed_spark_version

pytestmark = [pytest.mark.spark, pytest.mark.postgres, DEMOS, UNMEASURED]

DEMO_SECONDS = "300"
"""The README's demo runs until Ctrl-C or ``--duration``: the test presses Ctrl-C once every query
reports state (about 30 s on two busy cores); the duration only bounds a demo the test left behind.
The README's state example says 75: here too the demo is stopped once the state is there."""
READY_SECONDS = 240
"""How long a demo may take to show state for every query, Spark's start-up included (113 s seen
on two cores shared with a dozen other processes)."""
DEMO_METRICS = "http://127.0.0.1:9750/metrics"
DEMO_QUERIES = frozenset(q.name for q in dq.available(installed_spark_version()))
COLLECTOR_METRICS = "http://127.0.0.1:9751/metrics"

NOT_RUN = {
    "scripts/test": "runs the whole suite, this test included (CI runs it, test_readme.py)",
    "pip install sparkwatch": "installs from PyPI; the clone installs itself with the demo's "
    "command, which the test runs",
    "pip install 'sparkwatch[collector]'": "from PyPI; `pip install -e '.[demo]'` (run) pulls "
    "the collector's dependencies for `demo --collector`",
    "pip install 'sparkwatch[otlp]'": "from PyPI; the suite's own install carries the otlp "
    "extra, and tests/test_otlp.py and test_otlp_collector.py export through it",
    "sparkwatch collector --history-url postgresql+psycopg://sparkwatch@db/sparkwatch":
    "a database host named db; `demo --collector` (run, with the README's token example) "
    "starts the same collector command",
    "SPARKWATCH_METRICS_PORT=9750 SPARKWATCH_HISTORY_URL=off sparkwatch run -- spark-submit "
    "app.py": "needs the user's app.py; tests/test_run.py runs it on an unmodified app",
    "grafana-cli plugins install frser-sqlite-datasource": "needs Grafana (not installed here) "
    "and its plugin registry; tests/test_history_panels_sqlite.py runs the dashboard's SQL as "
    "the plugin does",
    "sparkwatch dashboards build --output sw": "`sparkwatch dashboards build` (run) writes the "
    "same files; tests/test_dashboards.py runs --output",
}
"""README commands this test does not run, and why."""


def readme_commands() -> list[str]:
    """Every command line of the README's bash blocks (comments and continuations joined)."""
    text = (ROOT / "README.md").read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def test_every_readme_command_is_run_here_or_said_why_not() -> None:
    commands = readme_commands()
    run = [c for c in commands if not c.startswith(tuple(NOT_RUN))
           and not c.startswith(("export ", "pip install -e"))]
    assert set(run) <= set(RUN_BY_THIS_TEST), sorted(set(run) - set(RUN_BY_THIS_TEST))
    for prefix in NOT_RUN:
        assert any(c.startswith(prefix) for c in commands), f"README no longer has {prefix!r}"


# The README's own lines the rounds below run (literally, or with the short duration and the
# checkpoint directory of this test in place of /tmp/demo-chk).
RUN_BY_THIS_TEST = (
    "sparkwatch demo",  # the console section's: its page is read while the demo serves
    "sparkwatch demo --collector",
    "curl -s localhost:9750/metrics | grep spark_streaming_state_rows",
    "sparkwatch history queries",
    "sparkwatch history state window_agg --operator 0",
    "sparkwatch top --metrics localhost:9750",
    "sparkwatch doctor",
    "sparkwatch demo --duration 75 --checkpoint-dir /tmp/demo-chk",
    "sparkwatch state /tmp/demo-chk/skewed_keys --store left-keyWithIndexToValue --top 3",
    "sparkwatch doctor $(for q in /tmp/demo-chk/*; do echo --inspect-state $q; done)",
    "sparkwatch dashboards build",
    "sparkwatch rules build",
    "sparkwatch db upgrade --url postgresql+psycopg://postgres@127.0.0.1/sparkwatch",
    "sparkwatch db downgrade --revision base --url ...",
    "sparkwatch history queries --format json --limit 100 --offset 0",
)


class Clone:
    """A fresh clone of the committed tree with its own venv, installed by the README's line."""

    def __init__(self, root: Path) -> None:
        self.root = root
        venv = root / ".venv" / "bin"
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("SPARKWATCH_")},
            "PATH": f"{venv}:{os.environ['PATH']}",
            "PYSPARK_PYTHON": str(venv / "python"),
            "VIRTUAL_ENV": str(root / ".venv"),
        }

    def sh(self, command: str, timeout: float = 300, env: dict[str, str] | None = None,
           ok: tuple[int, ...] = (0,)) -> str:
        """Run one README line in bash in the clone; its output (stdout and stderr)."""
        done = subprocess.run(["bash", "-c", command], cwd=self.root, capture_output=True,
                              text=True, timeout=timeout, env={**self.env, **(env or {})})
        said = done.stdout + done.stderr
        assert done.returncode in ok, f"`{command}` exited {done.returncode}:\n{said[-3000:]}"
        return said

    def start(self, command: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """A README line left running, in its own process group as in a terminal's foreground."""
        return subprocess.Popen(["bash", "-c", command], cwd=self.root, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env={**self.env, **(env or {})}, start_new_session=True)


def stop_once(demo: subprocess.Popen[str], ready: Callable[[], bool], what: str) -> str:
    """Ctrl-C once ``ready()``; the demo's output."""
    try:
        wait_for(lambda: _running(demo) and ready(), READY_SECONDS, what)
    except BaseException:
        _kill(demo)
        raise
    return ctrl_c(demo)


def ctrl_c(demo: subprocess.Popen[str]) -> str:
    """Ctrl-C as a terminal sends it (SIGINT to the foreground process group): the demo stops its
    queries cleanly and exits 130, as every command stopped by Ctrl-C does. Its output."""
    try:
        os.killpg(demo.pid, signal.SIGINT)
        out, _ = demo.communicate(timeout=120)
    finally:
        _kill(demo)
    assert demo.returncode == 130, out[-3000:]
    return out


def _kill(demo: subprocess.Popen[str]) -> None:
    if demo.poll() is None:
        os.killpg(demo.pid, signal.SIGKILL)
        demo.wait()


def _running(demo: subprocess.Popen[str]) -> bool:
    if demo.poll() is not None:
        out, _ = demo.communicate()
        raise AssertionError(f"the demo ended (exit {demo.returncode}) too early:\n{out[-3000:]}")
    return True


def every_query_holds_state(metrics_url: str, *holding: str) -> Callable[[], bool]:
    """Every demo query reports its state operators, and the ``holding`` ones hold rows."""

    def ready() -> bool:
        rows = state_rows(metrics_url)
        return set(rows) >= DEMO_QUERIES and all(rows[name] > 0 for name in holding)

    return ready


@pytest.fixture(scope="module")
def clone(tmp_path_factory: Any) -> Iterator[Clone]:
    root = tmp_path_factory.mktemp("readme") / "sparkwatch"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(root)], check=True, timeout=120)
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(root / ".venv")],
                   check=True, timeout=120)
    c = Clone(root)
    c.sh("pip install -q -e '.[demo]'", timeout=600)  # the README's install line
    yield c


@pytest.fixture(scope="module")
def database(pg_admin_url: str) -> Iterator[str]:
    name = create_database(pg_admin_url)
    yield sa.engine.make_url(pg_admin_url).set(database=name).render_as_string(False)
    drop_database(pg_admin_url, name)


@pytest.mark.timeout(1200)  # three demos and two rounds of state reads: minutes by nature
def test_every_readme_command_works_on_a_fresh_clone_and_again(
    clone: Clone, database: str, tmp_path: Path
) -> None:
    chk = tmp_path / "demo-chk"
    # The collector test's demo writes to the same history; when it ran first, window_agg
    # already names two queries after the live demo.
    earlier = _queries_with_operator_batches(f"sqlite:///{clone.root / 'sparkwatch.db'}") > 0
    _live_demo(clone)
    _history_commands(clone, several_demos=earlier)
    for _round in (1, 2):
        _state_section(clone, chk)  # the second round resumes from the first's checkpoints
        _history_commands(clone, several_demos=True)
        _history_section(clone, database)
        _generated_files(clone)


def _live_demo(clone: Clone) -> None:
    demo = clone.start(f"sparkwatch demo --duration {DEMO_SECONDS}")
    try:
        # "Then:" in another terminal, while the demo serves.
        curl = "curl -s localhost:9750/metrics | grep spark_streaming_state_rows"
        wait_for(lambda: _serves_state(clone, curl, demo), READY_SECONDS,
                 "the demo's /metrics with state rows")
        # What the history commands below read: every query's state, window_agg's rows.
        ready = every_query_holds_state(DEMO_METRICS, "window_agg")
        wait_for(lambda: _running(demo) and ready(), READY_SECONDS, "state of every demo query")
        top = clone.sh("sparkwatch top --metrics localhost:9750")  # not a terminal: one frame
        assert "sparkwatch top - " in top and "window_agg" in top, top
        console = clone.sh("curl -s localhost:9750/")  # the console's "then open" page
        assert "window_agg" in console and "/queries/" in console, console[-2000:]
    except BaseException:
        _kill(demo)
        raise
    out = ctrl_c(demo)
    assert "all queries reported state" in out, out[-2000:]
    assert "listener received" in out and "dropped 0" in out, out[-2000:]


def _history_commands(clone: Clone, several_demos: bool) -> None:
    """The live demo's "Then:" lines that read the history the demos so far left."""
    queries = clone.sh("sparkwatch history queries")
    assert "window_agg" in queries and "skewed_keys" in queries
    state = clone.sh("sparkwatch history state window_agg --operator 0")
    assert "operator 0 stateStoreSave: aggregation on [window, key]" in state, state
    # After a second demo the name names the queries of every demo so far: the latest is shown.
    assert ("showing the most recently active" in state) == several_demos, state
    doctor = clone.sh("sparkwatch doctor", ok=(0, 1))  # 1: a finding at warning or above
    assert re.search(r"^checked \d+ queries", doctor, re.M), doctor


def _serves_state(clone: Clone, curl: str, demo: subprocess.Popen[str]) -> bool:
    if demo.poll() is not None:
        out, _ = demo.communicate()
        raise AssertionError(f"the demo ended (exit {demo.returncode}) before `{curl}` saw "
                             f"state:\n{out[-3000:]}")
    done = subprocess.run(["bash", "-c", curl], cwd=clone.root, capture_output=True,
                          text=True, timeout=30, env=clone.env)
    return done.returncode == 0 and "spark_streaming_state_rows{" in done.stdout


def _state_section(clone: Clone, chk: Path) -> None:
    demo = clone.start(f"sparkwatch demo --duration {DEMO_SECONDS} --checkpoint-dir {chk}")
    # Stopped once skewed_keys' checkpoint holds the join state `sparkwatch state` reads.
    out = stop_once(demo, every_query_holds_state(DEMO_METRICS, "skewed_keys"),
                    "state of every demo query, rows in skewed_keys")
    assert "listener received" in out, out[-2000:]
    state = clone.sh(f"sparkwatch state {chk}/skewed_keys --store left-keyWithIndexToValue "
                     "--top 3")
    assert f"{chk}/skewed_keys: state as of batch" in state, state
    assert "operator 0 symmetricHashJoin" in state and "top keys by bytes" in state, state
    doctor = clone.sh(f"sparkwatch doctor $(for q in {chk}/*; do echo --inspect-state $q; done)",
                      timeout=600, ok=(0, 1))
    assert re.search(r"^checked the state of 9 checkpoints", doctor, re.M), doctor
    assert f"skewed_keys (state of {chk}/skewed_keys)" in doctor, doctor


def _history_section(clone: Clone, database: str) -> None:
    up = clone.sh(f"sparkwatch db upgrade --url {shlex.quote(database)}")
    down = clone.sh(f"sparkwatch db downgrade --revision base --url {shlex.quote(database)}")
    assert up.strip() and down.strip()
    listed = json.loads(clone.sh("sparkwatch history queries --format json --limit 100 "
                                 "--offset 0 2>/dev/null"))
    assert {q["name"] for q in listed} >= {"window_agg", "skewed_keys", "stream_stream_join"}


def _generated_files(clone: Clone) -> None:
    for command in ("sparkwatch dashboards build", "sparkwatch rules build"):
        assert " 0 changed" in clone.sh(command), command  # the committed files are the build
    assert clone.sh("git status --porcelain --untracked-files=no") == ""


def test_demo_collector_works_with_the_readme_install_and_token_example(clone: Clone) -> None:
    # The README's collector section, exported in the shell the user runs the demo from.
    readme_env = {
        "SPARKWATCH_COLLECTOR_TOKENS": "orders-etl=s3cret-1",
        "SPARKWATCH_PUSH_URL": "http://collector:9751/api/v1/events",
        "SPARKWATCH_PUSH_TOKEN": "s3cret-1",
    }
    history = f"sqlite:///{clone.root / 'sparkwatch.db'}"  # the README's default, in its cwd
    before = _queries_with_operator_batches(history)
    demo = clone.start(f"sparkwatch demo --collector --duration {DEMO_SECONDS}", env=readme_env)
    every_query = every_query_holds_state(COLLECTOR_METRICS)
    out = stop_once(demo, lambda: every_query() and _labelled_by_app(COLLECTOR_METRICS),
                    "every demo query's state on the collector's /metrics, app-labelled")
    assert "collector: http://127.0.0.1:9751/metrics" in out, out[-2000:]
    assert "listener received" in out and "dropped 0" in out, out[-2000:]
    assert "s3cret-1" not in out
    # The collector wrote each query's operators to the history, and stopped with the demo.
    assert _queries_with_operator_batches(history) - before >= len(DEMO_QUERIES)
    assert not _serves(COLLECTOR_METRICS), "the collector stops with the demo"


def _labelled_by_app(metrics_url: str) -> bool:
    series = [labels for labels, _ in state_series(metrics_url)]
    return bool(series) and all(s.get("app_name") and s.get("app_id") for s in series)


def _serves(url: str) -> bool:
    try:
        httpx.get(url, timeout=5)
    except httpx.TransportError:
        return False
    return True


def _queries_with_operator_batches(url: str) -> int:
    """0 before any history exists (this test run on its own, before the other's demos)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table("operator_batches"):
                return 0
            return int(conn.scalar(sa.text(
                "select count(distinct query_id) from operator_batches")) or 0)
    finally:
        engine.dispose()
