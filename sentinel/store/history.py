"""One history from a run directory that several processes wrote (a run resumed from a checkpoint).

A resumed process starts again from its checkpoint's step, so its records go back to steps the
earlier process already recorded. The later process's history replaces the earlier one from that
step on: the earlier records there belong to a trajectory that was abandoned (their losses and the
batches they skipped would otherwise be counted twice, and the run's end would be the earlier
process's end). Within one process the step only grows (a rollback restores weights, not the step
counter), so a step going back is always a restart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

START = "start"  # the event each process writes at its first step


def latest_history(steps: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Which records, in write order, survive, and the steps where a later process took over.

    A record survives when every record written after it has a larger step.

    Args:
        steps: step of each record, in the order they were written.

    Returns:
        ``(keep, restarts)``: a boolean mask over ``steps`` (the kept steps are strictly
        increasing) and the sorted steps at which the history went back.

    Example:
        >>> keep, restarts = latest_history(np.array([0, 1, 2, 3, 1, 2]))
        >>> keep.tolist(), restarts
        ([True, False, False, False, True, True], [1])
    """
    steps = np.asarray(steps)
    n = len(steps)
    if n < 2 or bool((steps[1:] > steps[:-1]).all()):
        return np.ones(n, dtype=bool), []
    later_min = np.minimum.accumulate(steps[::-1])[::-1]  # min over this record and later ones
    keep = np.ones(n, dtype=bool)
    keep[:-1] = steps[:-1] < later_min[1:]
    went_back = np.flatnonzero(steps[1:] <= steps[:-1]) + 1  # a process's records only go up
    return keep, sorted({int(steps[i]) for i in went_back})


def supersede_events(events: pd.DataFrame) -> tuple[pd.DataFrame, list[int]]:
    """Drop the events a later process's history replaced; return the restart steps.

    Each process writes a ``start`` event at its first step. An event written before a
    ``start`` at step ``s`` and itself at step ``s`` or later belongs to the abandoned
    trajectory. The first ``start`` of the file is the run's beginning, not a restart.

    Args:
        events: ``events.jsonl`` in file order (``step`` and ``kind`` columns).

    Returns:
        ``(events, restarts)``: the surviving events in file order and the steps of the
        ``start`` events after the first.

    Example:
        >>> ev = pd.DataFrame({"step": [0, 60, 40, 60], "kind": ["start", "skip_step", "start", "skip"]})
        >>> kept, restarts = supersede_events(ev)
        >>> list(kept["kind"]), restarts
        (['start', 'start', 'skip'], [40])
    """
    if events.empty or "kind" not in events.columns:
        return events, []
    is_start = (events["kind"] == START).to_numpy()
    positions = np.flatnonzero(is_start)
    if len(positions) < 2:
        return events, []
    steps = pd.to_numeric(events["step"], errors="coerce").to_numpy(dtype="float64")
    keep = np.ones(len(events), dtype=bool)
    restarts = []
    for pos in positions[1:]:
        s = steps[pos]
        if not np.isfinite(s):
            continue
        restarts.append(int(s))
        keep[:pos] &= ~((steps[:pos] >= s) & ~is_start[:pos])
    return events[keep], sorted(set(restarts))
