"""Steps as spans: group flagged steps into incidents, find where a series came back down."""

from __future__ import annotations

import numpy as np
import pandas as pd


def group_steps(flags: pd.Series, max_gap: int = 1) -> list[tuple[int, int]]:
    """Group the True entries of a boolean series (indexed by step) into ``(start, end)`` spans.

    Two flagged rows belong to one span when at most ``max_gap - 1`` unflagged rows lie between
    them (counted in rows, so a series logged every 10 steps groups like one logged every step).

    Example:
        >>> group_steps(pd.Series([False, True, True, False, True], index=[0, 10, 20, 30, 40]))
        [(10, 20), (40, 40)]
    """
    return group_positions(np.flatnonzero(flags.to_numpy(dtype=bool)), flags.index.to_numpy(), max_gap)


def group_positions(positions: np.ndarray, steps: np.ndarray, max_gap: int = 1,
                    gaps: np.ndarray | None = None) -> list[tuple[int, int]]:
    """:func:`group_steps` from the flagged rows' positions (increasing) and the steps of all
    rows: no boolean series the length of the run is needed when the flagged rows are known.
    ``gaps``: rows after which the log skips a stretch (:func:`gap_rows`): no span runs across one.

    Example:
        >>> group_positions(np.array([1, 2, 4]), np.array([0, 10, 20, 30, 40]))
        [(10, 20), (40, 40)]
        >>> group_positions(np.array([1, 2]), np.array([0, 10, 900, 910]), max_gap=2, gaps=np.array([1]))
        [(10, 10), (900, 900)]
    """
    if positions.size == 0:
        return []
    apart = np.diff(positions) > max_gap
    if gaps is not None and gaps.size:
        # a gap row at or after one flagged row and before the next lies between them
        apart |= np.searchsorted(gaps, positions[:-1], side="left") != np.searchsorted(gaps, positions[1:], side="left")
    breaks = np.flatnonzero(apart)
    starts = np.concatenate(([positions[0]], positions[breaks + 1]))
    ends = np.concatenate((positions[breaks], [positions[-1]]))
    return [(int(steps[s]), int(steps[e])) for s, e in zip(starts, ends)]


def group_runs(flags: np.ndarray, steps: np.ndarray) -> list[tuple[int, int]]:
    """:func:`group_steps` with ``max_gap=1`` from a boolean array and the rows' steps: the runs
    of True found from where the flags change, not from every flagged row (a plateau can hold
    most rows of a long run).

    Example:
        >>> group_runs(np.array([False, True, True, False, True]), np.array([0, 10, 20, 30, 40]))
        [(10, 20), (40, 40)]
    """
    n = len(flags)
    if n == 0:
        return []
    bounds = np.concatenate(([0], np.flatnonzero(flags[1:] != flags[:-1]) + 1, [n]))
    first = 0 if flags[0] else 1  # runs alternate between True and False from the first row's
    starts, ends = bounds[first:-1:2], bounds[first + 1::2] - 1
    return [(int(steps[s]), int(steps[e])) for s, e in zip(starts, ends)]


# A jump between two logged steps of more than this many logging intervals, with the intervals on
# either side of it under a fifth of it: the log skips a stretch there (an excerpt pasted with
# "..." between its parts, CHGNet's 300 -> 26,300 at a cadence of 100; a log that lost a part).
# Nothing is known of the steps in between, so no span or patience runs across it. A change of
# cadence (every step, then every 100) is no gap: the intervals after it are as long.
GAP_INTERVALS = 10
_GAP_NEIGHBOURS = 5


def gap_rows(steps: np.ndarray, every: int | None = None) -> np.ndarray:
    """Positions of the rows after which the log skips a stretch (see :data:`GAP_INTERVALS`);
    ``every``: the logging interval (:func:`cadence`), found when not given.

    Example:
        >>> gap_rows(np.array([0, 10, 20, 30, 5000, 5010, 5020]))
        array([3])
    """
    if len(steps) < 3:
        return np.zeros(0, dtype=np.int64)
    diffs = np.diff(steps)
    every = cadence(pd.Index(steps, copy=False)) if every is None else every
    big = np.flatnonzero(diffs > GAP_INTERVALS * every)
    if not big.size:
        return big
    jump = diffs[big]
    left = np.where(big > 0, diffs[np.maximum(big - 1, 0)], 0)
    right = np.where(big < len(diffs) - 1, diffs[np.minimum(big + 1, len(diffs) - 1)], 0)
    return big[(_GAP_NEIGHBOURS * left < jump) & (_GAP_NEIGHBOURS * right < jump)]


def first_step_at_or_below(series: pd.Series, after: int, level: float, within: int) -> int | None:
    """First step in ``(after, after + within]`` where ``series`` is at or below ``level``.

    Example:
        >>> first_step_at_or_below(pd.Series([1.0, 9.0, 5.0, 1.1], index=[0, 1, 2, 3]), 1, 1.5, 10)
        3
    """
    steps = series.index.to_numpy()
    # searchsorted, not a boolean mask: O(log N + within) per call, for runs with many spikes.
    lo, hi = np.searchsorted(steps, [after, after + within], side="right")
    hits = np.flatnonzero(series.to_numpy()[lo:hi] <= level)
    return int(steps[lo + hits[0]]) if hits.size else None


def cadence(index: pd.Index) -> int:
    """The usual distance between consecutive steps of a series (1 when it has < 2 steps).

    Example:
        >>> cadence(pd.Index([0, 10, 20, 30, 35]))
        10
    """
    if len(index) < 2:
        return 1
    gaps = np.diff(index.to_numpy())
    if gaps[0] > 0 and bool((gaps == gaps[0]).all()):
        return int(gaps[0])  # a regular cadence: no sort of a million gaps
    forward = gaps > 0
    if gaps[0] > 0 and 2 * int(np.count_nonzero(gaps == gaps[0])) > int(np.count_nonzero(forward)):
        return int(gaps[0])  # more than half of the forward gaps: the most common one, no sort
    values, counts = np.unique(gaps[forward], return_counts=True)
    return int(values[np.argmax(counts)]) if len(values) else 1


def between(data: pd.Series | pd.DataFrame, start: int | None = None, end: int | None = None):
    """``data.loc[start:end]`` for data indexed by increasing steps, found by binary search.

    A label slice first builds a hash table of the whole index (~20 ms and tens of MB for a
    million steps, once per index object); the rules slice a few spans out of long series.

    Example:
        >>> between(pd.Series([1.0, 2.0, 3.0, 4.0], index=[0, 10, 20, 30]), 5, 20).tolist()
        [2.0, 3.0]
    """
    index = data.index
    lo = 0 if start is None else int(index.searchsorted(start, side="left"))
    hi = len(index) if end is None else int(index.searchsorted(end, side="right"))
    return data.iloc[lo:hi]


def value_at(series: pd.Series, step: int):
    """``series.loc[step]`` for a series indexed by increasing steps, found by binary search.

    Raises:
        KeyError: ``step`` is not in the index.

    Example:
        >>> float(value_at(pd.Series([1.0, 2.0], index=[0, 10]), 10))
        2.0
    """
    pos = int(series.index.searchsorted(step, side="left"))
    if pos == len(series.index) or series.index[pos] != step:
        raise KeyError(step)
    return series.iloc[pos]
