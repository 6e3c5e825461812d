"""Event kinds written to ``events.jsonl``: a closed set, stored as plain strings."""

from __future__ import annotations

import enum
import time
from typing import Any


class EventKind(str, enum.Enum):
    """What happened at a step. The value is what goes to disk."""

    SPIKE = "spike"
    DIVERGENCE = "divergence"
    NONFINITE = "nonfinite"
    OVERFLOW = "overflow"
    ROLLBACK = "rollback"
    SKIP = "skip"
    SKIP_STEP = "skip_step"
    ENTROPY_COLLAPSE = "entropy_collapse"
    GAVE_UP = "gave_up"
    NEW_LEVEL = "new_level"  # outliers on restored weights: the loss moved, the weights did not
    START = "start"  # a process's first recorded step (a later one marks a resumed run)


def make_event(kind: EventKind | str, step: int, **detail: Any) -> dict[str, Any]:
    """Build one event record: ``{"step", "time", "kind", **detail}``.

    Args:
        kind: an :class:`EventKind` (or its string value; anything else raises).
        step: the optimizer step the event belongs to.
        **detail: JSON-serialisable fields specific to the kind.

    Returns:
        A dict ready for :meth:`sentinel.store.RunWriter.write_event`.

    Example:
        >>> make_event(EventKind.SPIKE, 120, metric="loss", value=9.1)["kind"]
        'spike'
    """
    kind = EventKind(kind)
    return {"step": int(step), "time": time.time(), "kind": kind.value, **detail}


# What a reduced-precision replay found (``cause`` of a ``nonfinite`` event under AMP).
_CAUSES = {
    "nan_source": ": a real NaN source (non-finite in float32 too), not a float16 overflow",
    "fp16_range": ": finite in float32, its values pass the float16 range (an overflow; bf16 or "
                  "smaller activations avoid it)",
    "bf16_range": ": finite in float32, its values pass the bfloat16 range",
}


def describe(kind: EventKind, d: dict[str, Any], max_rollbacks: int) -> str | None:
    """One line for the events a person watching the run should see as they happen, else None.

    Example:
        >>> describe(EventKind.NONFINITE, {"module": "blocks.2.mlp", "phase": "forward"}, 5)
        'NaN/Inf first appeared in blocks.2.mlp (forward)'
    """
    if kind is EventKind.SKIP_STEP:
        return f"{d.get('reason')}: update not applied (outlier step {d.get('streak')} in a row)"
    if kind is EventKind.ROLLBACK:
        if d.get("restored_step") is None:
            return f"{d.get('reason')} at step {d.get('spike_step')}, but no snapshot to roll back to yet"
        lr = f", learning rate x{d['lr_scale']:g} for the cool-down" if d.get("lr_scale", 1.0) < 1.0 else ""
        note = str(d.get("note", ""))
        dropped = (f"{note.split(':')[0]} ({note.split(': ', 1)[-1]})" if note.startswith("no batch dropped") else
                   f"dropping {len(d.get('skipped', []))} culprit batches and the next {d.get('skip_after', 0)}")
        return (f"{d.get('reason')} since step {d.get('spike_step')}: rolled back to step "
                f"{d.get('restored_step')}, {dropped}{lr} (rollback {d.get('rollback')} of at most {max_rollbacks})")
    if kind is EventKind.NONFINITE:
        if d.get("streak"):
            return None  # said once, at the first step of the streak
        where = f"{d.get('module')} ({d.get('phase')})" if d.get("module") else "an unknown module"
        rank = f" on rank {d['rank']}" if d.get("rank") not in (None, 0) else ""
        return f"NaN/Inf first appeared in {where}{rank}{_CAUSES.get(d.get('cause'), '')}"
    if kind is EventKind.DIVERGENCE:
        return f"loss diverging: {d.get('value'):.4g} against a best level of {d.get('best'):.4g}"
    if kind is EventKind.ENTROPY_COLLAPSE:
        return f"attention entropy of {d.get('module')} collapsed to {d.get('entropy'):.3g} nats"
    if kind is EventKind.GAVE_UP:
        return str(d.get("message"))
    if kind is EventKind.NEW_LEVEL:
        return (f"the loss is still over the spike rule ({d.get('loss'):.4g} against {d.get('loss_baseline'):.4g}) "
                f"on the weights restored from step {d.get('restored_step')}, which gave a normal loss then: "
                f"the data or the loss itself changed, and rolling back cannot undo that; this level is "
                f"accepted and training goes on (the rollback is not counted toward the give-up)")
    return None
