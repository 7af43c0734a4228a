"""Map a progress's ``stateOperators`` to the writers of the executed plan, or degrade.

Spark builds ``stateOperators`` with ``executedPlan.collect { case w: StateStoreWriter }``, a
pre-order walk: entry n is the n-th writer of the tree string (so the operator nearest the sink is
index 0). When the plan and the progress disagree (count or names), nothing is guessed: every
operator gets what the progress says, and the plan says why.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from sparkwatch.plan import kinds
from sparkwatch.plan.model import OperatorIdentity, QueryPlan, RawPlan, Source
from sparkwatch.plan.nodes import OUTPUT_MODES, WriterFacts, writer_facts, writer_positions
from sparkwatch.plan.settings import provider_name
from sparkwatch.plan.tree import parse_tree
from sparkwatch.plan.trigger import parse_trigger


def map_plan(
    raw: RawPlan, operators: Sequence[str] | None = None, read_at: float | None = None
) -> QueryPlan:
    """Identity of each operator; ``operators`` are the progress's operatorNames, in order
    (None: trust the plan's own order and names)."""
    read_at = time.time() if read_at is None else read_at
    nodes = parse_tree(raw.tree)
    facts = [writer_facts(nodes, p) for p in writer_positions(nodes)]
    names = list(operators) if operators is not None else [_default_name(f) for f in facts]
    problem = _mismatch(facts, names)
    trigger, interval = parse_trigger(raw.trigger)
    if problem is not None:
        plan = from_progress(raw.query_id, raw.run_id, names, problem, raw.batch_id, read_at)
        return replace(plan, trigger=trigger, trigger_interval_ms=interval)
    query_mode = OUTPUT_MODES.get(raw.output_mode or "", (raw.output_mode or "").lower() or None)
    identities = tuple(
        _identity(i, name, f, raw, query_mode)
        for i, (name, f) in enumerate(zip(names, facts, strict=True))
    )
    return QueryPlan(
        query_id=raw.query_id,
        run_id=raw.run_id,
        source=Source.PLAN,
        operators=identities,
        batch_id=raw.batch_id,
        read_at=read_at,
        settings=dict(raw.conf),
        trigger=trigger,
        trigger_interval_ms=interval,
    )


def from_progress(
    query_id: str,
    run_id: str,
    operators: Sequence[str],
    note: str,
    batch_id: int | None = None,
    read_at: float | None = None,
) -> QueryPlan:
    """What the progress alone says: name, position and the kind the name implies."""
    return QueryPlan(
        query_id=query_id,
        run_id=run_id,
        source=Source.PROGRESS,
        operators=tuple(
            OperatorIdentity(index=i, operator=name, kind=kinds.kind_of(name))
            for i, name in enumerate(operators)
        ),
        batch_id=batch_id,
        read_at=time.time() if read_at is None else read_at,
        note=note,
    )


def _mismatch(facts: list[WriterFacts], names: list[str]) -> str | None:
    if len(facts) != len(names):
        return f"the plan has {len(facts)} state operators, the progress {len(names)}"
    for i, (f, name) in enumerate(zip(facts, names, strict=True)):
        if not kinds.matches(f.node, name):
            return f"operator {i} is {name} in the progress but {f.node} in the plan"
    return None


def _default_name(facts: WriterFacts) -> str:
    return kinds.WRITER_NODES.get(facts.node, (facts.node,))[0]


def _identity(
    index: int, name: str, f: WriterFacts, raw: RawPlan, query_mode: str | None
) -> OperatorIdentity:
    state = f.state
    checkpoint = state.checkpoint if state is not None else raw.state_checkpoint
    if checkpoint and state is not None and checkpoint != "<unknown>":
        checkpoint = f"{checkpoint.rstrip('/')}/{state.operator_id}"
    return OperatorIdentity(
        index=index,
        operator=name,
        kind=kinds.kind_of(name, f.node),
        node=f.node,
        operator_id=state.operator_id if state is not None else None,
        keys=f.keys,
        event_time_keys=f.event_time_keys,
        output_mode=f.output_mode or query_mode,
        watermarks=f.watermarks,
        num_state_stores=state.num_partitions if state is not None else None,
        state_store_provider=provider_name(raw.conf),
        checkpoint_location=checkpoint,
        details=f.details,
    )
