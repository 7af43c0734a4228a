"""Reading a query's executed plan over Py4J (classic mode only; internal API, stable 3.5-4.3).

Only :func:`read_raw_plan` touches the JVM objects; what it returns is parsed elsewhere, purely.
"""

from __future__ import annotations

from typing import Any

from sparkwatch.plan.model import RawPlan
from sparkwatch.plan.settings import CHECKPOINT_KEYS, SESSION_KEYS


class PlanUnavailable(Exception):
    """The plan of this run cannot be read; the message says why."""

    def __init__(self, reason: str, retry: bool = False) -> None:
        super().__init__(reason)
        self.retry = retry


def find_query(jspark: Any, query_id: str, run_id: str) -> Any:
    """The active JVM query (``StreamingQueryWrapper``) of this run."""
    jquery = jspark.streams().get(query_id)
    if jquery is None:
        raise PlanUnavailable("the query is no longer active")
    if str(jquery.runId()) != run_id:
        raise PlanUnavailable("the query restarted since")
    return jquery


def read_raw_plan(jquery: Any, query_id: str, run_id: str) -> RawPlan:
    """The executed plan of a JVM ``StreamingQuery`` (wrapper) and the settings around it.

    Works after the query ended too, as long as the handle was taken while it ran: the
    ``StreamExecution`` keeps its last ``IncrementalExecution``.
    """
    execution = jquery.streamingQuery().lastExecution()
    if execution is None:
        raise PlanUnavailable("the query has not planned a batch yet", retry=True)
    return RawPlan(
        query_id=query_id,
        run_id=run_id,
        batch_id=int(execution.currentBatchId()),
        tree=str(execution.executedPlan().treeString()),
        output_mode=str(execution.outputMode()),
        state_checkpoint=str(execution.checkpointLocation()),
        conf={**_checkpoint_conf(execution), **_session_conf(execution)},
        trigger=_trigger(jquery),
    )


def _trigger(jquery: Any) -> str | None:
    """The query's trigger as Spark prints it; None when this Spark hides it."""
    try:
        return str(jquery.streamingQuery().trigger().toString())
    except Exception:  # noqa: BLE001 - an internal API: the plan is read without it
        return None


def _checkpoint_conf(execution: Any) -> dict[str, str]:
    conf = execution.offsetSeqMetadata().conf()  # a Scala Map
    return {key: str(conf.apply(key)) for key in CHECKPOINT_KEYS if conf.contains(key)}


def _session_conf(execution: Any) -> dict[str, str]:
    runtime = execution.sparkSession().conf()
    out = {}
    for key in SESSION_KEYS:
        value = runtime.get(key, None)
        if value is not None:
            out[key] = str(value)
    return out
