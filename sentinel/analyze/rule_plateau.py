"""Plateaus: the best loss did not improve over a long window (information, not a fault)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sentinel.analyze.config import AnalyzeConfig
from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.noise import end_levels
from sentinel.analyze.spans import cadence, group_runs


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
    window = config.plateau_window
    if isinstance(window, (int, np.integer)):
        # A loss logged less often than the window (once an epoch) is judged over a few logged
        # points, not from one point to the next (two epochs were a "plateau").
        window = max(int(window), _MIN_ROWS * cadence(loss.index))
    if every is not None and isinstance(window, (int, np.integer)):
        # A regular cadence: the window's reference row lies a fixed number of rows back
        # (``(i * every - window) // every == i - ceil(window / every)`` in integers), so the
        # reference is a shifted slice of ``best``: the same comparison without a gather.
        back = -(-int(window) // every)
        if back < len(steps):
            reference = best[: len(steps) - max(back, 0)]
            current = best[max(back, 0):]
            np.greater_equal(current, reference - config.plateau_rtol * np.abs(reference),
                             out=stalled[max(back, 0):])
    else:
        # Rows mostly a fixed number apart in steps (a regular cadence with a few rows missing):
        # guess the reference row that many rows back and search only where the guess is wrong.
        shift = len(steps) - 1 - int(_last_step_at_or_before(steps, steps[-1:] - window, None)[0])
        for lo in range(0, len(steps), _CHUNK):  # bounded temporaries on long runs
            part = slice(lo, lo + _CHUNK)
            back = _rows_back(steps, lo, min(lo + _CHUNK, len(steps)), window, shift)
            full = back >= 0  # a whole window of history lies behind this step
            reference = best[np.clip(back, 0, None)]
            stalled[part] = full & (best[part] >= reference - config.plateau_rtol * np.abs(reference))
    spans = group_runs(stalled, steps)
    if not spans:
        return []
    first, end = max(spans, key=lambda span: span[1] - span[0])
    start = int(steps[_last_step_at_or_before(steps, np.array([first - window]), every)[0]])
    level = float(best[np.searchsorted(steps, end)])
    message = (f"loss plateaued for {end - start} steps ({start}-{end}): best {level:.4g}, less than "
               f"{config.plateau_rtol:.0%} better per {window} steps") + _level_rose(loss, start, end)
    return [Incident(IncidentKind.PLATEAU, start, end, Severity.INFO, message,
                     {"length": end - start, "best": level, "resolved": True})]


# A plateau whose level rose over it by this much, at least (the median of its last rows against its
# first rows'), says so: SphereFace under Caffe at 9.48, then 11.4-11.9 after a gap in the paste, was
# "plateaued ... best 9.478" alone, as if flat.
_ROSE = 1.1
# ... and one whose rows rose this much within it, for a fifth of them or more in a row, and came back says
# that (a noisy loss's bumps of x1.1-x1.15 are its spread).
_BUMP = 1.2
# The level at either end: the median of this share of the stretch's rows (a per-batch loss's noise
# averaged out).
_LEVEL_SHARE = 5


def _level_rose(loss: pd.Series, start: int, end: int) -> str:
    """``"; its level rose x1.21 over it (9.483 to 11.52)"`` where the loss's level at the end of a
    plateau (the median of its last fifth of rows, :data:`_LEVEL_SHARE`) stands :data:`_ROSE` times
    its level at the start or more; else an empty string.

    Example:
        >>> _level_rose(pd.Series([9.483, 11.42, 11.9, 11.52], index=range(4)), 0, 3)
        '; its level rose x1.21 over it (9.483 to 11.52)'
    """
    values = loss[(loss.index >= start) & (loss.index <= end)].to_numpy(dtype="float64")
    if len(values) < 3 or not values.min() > 0:  # (a ratio of levels on either side of 0 says nothing)
        return ""
    first, last = end_levels(values, _LEVEL_SHARE)  # (a paste's few rows: its first against its last)
    if last < _ROSE * first:
        return _rose_and_came_back(loss[(loss.index >= start) & (loss.index <= end)], first)
    return f"; its level rose x{last / first:.3g} over it ({first:.4g} to {last:.4g})"


def _rose_and_came_back(part: pd.Series, first: float) -> str:
    """``"; it rose to 6.596 at step 16000 (x1.27) and came back"`` where a run of the plateau's rows,
    a :data:`_LEVEL_SHARE`-th of them or more in a row, stood :data:`_BUMP` times its first level or more
    (Marian's cost 5.20, then 6.60, 6.30, 5.85, 5.25 over 8,000 updates: a rise, told as "plateaued"
    alone); else an empty string (a per-batch loss's high draws are single rows).

    Example:
        >>> _rose_and_came_back(pd.Series([5.20, 6.60, 6.30, 5.85, 5.25], index=range(0, 10000, 2000)), 5.20)
        '; it rose to 6.6 at step 2000 (x1.27) and came back'
    """
    above = part.to_numpy(dtype="float64") >= _BUMP * first
    runs = group_runs(above, np.arange(len(above)))
    if not runs or max(b - a + 1 for a, b in runs) * _LEVEL_SHARE < len(above):
        return ""
    peak = int(np.argmax(part.to_numpy(dtype="float64")))
    height = float(part.iloc[peak])
    return f"; it rose to {height:.4g} at step {int(part.index[peak])} (x{height / first:.3g}) and came back"


_CHUNK = 1 << 20
# The fewest logged points a plateau's window spans.
_MIN_ROWS = 4


def _cadence(steps: np.ndarray) -> int | None:
    """The step between rows when it never changes (integer steps), else None."""
    if len(steps) > 1 and np.issubdtype(steps.dtype, np.integer):
        every = int(steps[1] - steps[0])
        if every > 0 and bool((np.diff(steps) == every).all()):
            return every
    return None


def _rows_back(steps: np.ndarray, lo: int, hi: int, window, shift: int) -> np.ndarray:
    """``_last_step_at_or_before(steps, steps[lo:hi] - window, None)``: each row's guess is the
    row ``shift`` rows back, kept where it is the last step ``<=`` its target (that step at or
    below the target, the next one above it: what the binary search returns on increasing
    steps), searched for elsewhere."""
    targets = steps[lo:hi] - window
    back = np.arange(lo - shift, hi - shift)
    good = np.zeros(hi - lo, dtype=bool)
    a = max(lo, shift)  # rows whose guess is a row (>= 0); the next row then exists (shift >= 1)
    if shift >= 1 and a < hi:
        t = targets[a - lo:]
        good[a - lo:] = (steps[a - shift:hi - shift] <= t) & (steps[a - shift + 1:hi - shift + 1] > t)
    wrong = np.flatnonzero(~good)
    if len(wrong):
        back[wrong] = np.searchsorted(steps, targets[wrong], side="right") - 1
    return back


def _last_step_at_or_before(steps: np.ndarray, targets: np.ndarray, every: int | None) -> np.ndarray:
    """For each target, the position of the last step ``<=`` it (-1 when none): arithmetic for
    a regular cadence ``every``, a binary search otherwise."""
    if every is not None:
        return np.maximum((targets - steps[0]) // every, -1)
    return np.searchsorted(steps, targets, side="right") - 1


def plateau_before_divergence(loss: pd.Series, diverged: list[Incident], config: AnalyzeConfig) -> list[Incident]:
    """:func:`plateau_incidents`, on the loss before a divergence's onset where the longest
    plateau overlaps the diverged stretch: the best loss so far stops improving there because the
    loss went up, which the divergence reports ("plateaued for 1012 steps (988-2000)" of a loss
    that jumped x2.5 at step 1200 and stayed there).

    Example:
        >>> s = pd.Series([3.0, 2.0] + [1.0] * 2000)
        >>> plateau_before_divergence(s, [], AnalyzeConfig()).pop().step
        2
    """
    plateaus = plateau_incidents(loss, config)
    for div in sorted(diverged, key=lambda i: i.step):
        if any(p.step <= div.end_step and div.step <= p.end_step for p in plateaus):
            return plateau_incidents(loss[loss.index < div.step], config)
    return plateaus
