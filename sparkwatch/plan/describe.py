"""Operator identity as short human text (demo, history, top, doctor) and as metric labels."""

from __future__ import annotations

from sparkwatch.plan.model import OperatorIdentity, Source

# The labels of the operator info metric (the metric catalogue's ``state_operator_info``), in
# the order of :func:`identity_label_values`.
OPERATOR_IDENTITY_LABELS: tuple[str, ...] = (
    "kind",
    "operator_id",
    "keys",
    "output_mode",
    "watermark_column",
    "watermark_delay_seconds",
    "state_store_provider",
    "num_state_stores",
    "checkpoint_location",
    "source",
)

MAX_LABEL = 200
"""Keys and checkpoint paths are fixed per run but can be long: cut label values."""


def delay_text(ms: int | None) -> str:
    """``5s``, ``10m``, ``1h30m``; ``-`` when unknown."""
    if ms is None:
        return "-"
    if ms % 1000:
        return f"{ms}ms"
    seconds = ms // 1000
    parts = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"


def keys_text(op: OperatorIdentity) -> str:
    return "[" + ", ".join(op.keys) + "]"


def summary(op: OperatorIdentity, with_checkpoint: bool = False) -> str:
    """``aggregation on [window, key], append, watermark ts 5s, 2 stores, hdfs``."""
    parts = [op.kind]
    if op.keys:
        parts[0] += f" on {keys_text(op)}"
    if op.node is None:
        return parts[0] + " (plan not read)"
    if op.output_mode:
        parts.append(op.output_mode)
    if op.watermarks:
        parts.append(f"watermark {op.watermark_column} {delay_text(op.watermark_delay_ms)}")
    else:
        parts.append("no watermark")
    if op.num_state_stores is not None:
        parts.append(f"{op.num_state_stores} stores")
    if op.state_store_provider:
        parts.append(op.state_store_provider)
    if with_checkpoint and op.checkpoint_location:
        parts.append(op.checkpoint_location)
    return ", ".join(parts)


def label_values(op: OperatorIdentity, source: Source) -> tuple[str, ...]:
    """Values of the info metric's identity labels, in ``OPERATOR_IDENTITY_LABELS`` order."""
    delay = op.watermark_delay_ms
    values = (
        op.kind,
        "" if op.operator_id is None else str(op.operator_id),
        ",".join(op.keys),
        op.output_mode or "",
        op.watermark_column or "",
        "" if delay is None else _seconds(delay),
        op.state_store_provider or "",
        "" if op.num_state_stores is None else str(op.num_state_stores),
        op.checkpoint_location or "",
        source.value,
    )
    assert len(values) == len(OPERATOR_IDENTITY_LABELS)
    return tuple(_cut(v) for v in values)


def _seconds(ms: int) -> str:
    return f"{ms / 1000:g}"


def _cut(value: str) -> str:
    return value if len(value) <= MAX_LABEL else value[: MAX_LABEL - 1] + "…"
