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
    ENTROPY_COLLAPSE = "entropy_collapse"
    GAVE_UP = "gave_up"


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
