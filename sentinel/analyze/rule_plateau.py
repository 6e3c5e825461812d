"""Plateaus: the best loss did not improve over a long window (information, not a fault)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sentinel.analyze.config import AnalyzeConfig
from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.spans import group_steps


def plateau_incidents(loss: pd.Series, config: AnalyzeConfig) -> list[Incident]:
    """One info incident for the longest stretch in which the best loss so far improved by less
    than ``plateau_rtol`` of itself over every window of ``plateau_window`` steps.

    Example:
        >>> s = pd.Series([3.0, 2.0] + [1.0] * 2000)
        >>> plateau_incidents(s, AnalyzeConfig()).pop().step
        2
    """
    if len(loss) < 2:
        return []
    steps = loss.index.to_numpy()
    best = np.minimum.accumulate(loss.to_numpy(dtype="float64"))
    every = _cadence(steps)
    stalled = np.zeros(len(steps), dtype=bool)
    for lo in range(0, len(steps), _CHUNK):  # bounded temporaries on long runs
        part = slice(lo, lo + _CHUNK)
        back = _last_step_at_or_before(steps, steps[part] - config.plateau_window, every)
        full = back >= 0  # a whole window of history lies behind this step
        reference = best[np.clip(back, 0, None)]
        stalled[part] = full & (best[part] >= reference - config.plateau_rtol * np.abs(reference))
    spans = group_steps(pd.Series(stalled, index=loss.index), max_gap=1)
    if not spans:
        return []
    first, end = max(spans, key=lambda span: span[1] - span[0])
    start = int(steps[_last_step_at_or_before(steps, np.array([first - config.plateau_window]), every)[0]])
    level = float(best[np.searchsorted(steps, end)])
    message = (f"loss plateaued for {end - start} steps ({start}-{end}): best {level:.4g}, less than "
               f"{config.plateau_rtol:.0%} better per {config.plateau_window} steps")
    return [Incident(IncidentKind.PLATEAU, start, end, Severity.INFO, message,
                     {"length": end - start, "best": level, "resolved": True})]


_CHUNK = 1 << 20


def _cadence(steps: np.ndarray) -> int | None:
    """The step between rows when it never changes (integer steps), else None."""
    if len(steps) > 1 and np.issubdtype(steps.dtype, np.integer):
        every = int(steps[1] - steps[0])
        if every > 0 and bool((np.diff(steps) == every).all()):
            return every
    return None


def _last_step_at_or_before(steps: np.ndarray, targets: np.ndarray, every: int | None) -> np.ndarray:
    """For each target, the position of the last step ``<=`` it (-1 when none): arithmetic for
    a regular cadence ``every``, a binary search otherwise."""
    if every is not None:
        return np.maximum((targets - steps[0]) // every, -1)
    return np.searchsorted(steps, targets, side="right") - 1
