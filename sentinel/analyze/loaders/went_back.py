"""Where a log's steps go back: a run resumed from an earlier checkpoint writes its history again
from there (OPT's and PaLM's restarts after a spike, a preempted job resumed from its last save).

The history written after replaces the earlier one from its first step on: read as one series by
step, the two would interleave (the abandoned climb between the resumed run's values) or the
abandoned steps would vanish with no word. These functions find the fall-backs in the records'
write order and tell which records a later history replaced; the replaced stretches are kept
apart (:class:`~sentinel.analyze.loaders.AbandonedHistory`) so the analyzer can say what happened
in them: usually why the run was taken back.

Example:
    >>> import numpy as np
    >>> steps = np.array([10, 20, 30, 40, 50, 30, 40, 50, 60])  # went back from 50 to 30
    >>> starts = fall_backs(steps); starts.tolist()
    [5]
    >>> steps[survivors(steps, starts)].tolist()
    [10, 20, 30, 40, 50, 60]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# More fall-backs than one in this many records, or most steps logged several times, is no run
# resumed now and then (ranks printing out of step with each other, a count not made global).
_RECORDS_PER_FALL_BACK = 5
_LOGGED_AGAIN = 0.8


def fall_backs(steps: np.ndarray) -> np.ndarray:
    """Indices into ``steps`` (records in write order) where a later history starts: the step falls
    below the one before. Empty where there is none, or where the fall-backs are no resumed run's:

    - one goes back to the log's first step or before it (a training started over in the same
      file, or a count inside the epoch: not a resume from a checkpoint);
    - it is one step printed wrong: it leaves a single record behind, or the history after it
      does not log again inside the stretch it would replace (such a fall-back is passed over);
    - several, and more than one per :data:`_RECORDS_PER_FALL_BACK` records, or most steps logged
      more than once (every rank printing, out of step with each other).

    NaN steps (records without one) are passed over.

    Example:
        >>> fall_backs(np.array([1, 2, 3, 2, 3, 4])).tolist(), fall_backs(np.array([1, 2, 1, 2])).tolist()
        ([3], [])
    """
    steps = np.asarray(steps, dtype="float64")
    at = np.flatnonzero(~np.isnan(steps))
    known = steps[at]
    if len(known) < 3:
        return np.zeros(0, dtype=np.int64)
    back = np.flatnonzero(known[1:] < known[:-1]) + 1
    # A resume replaces two records or more, and the history after it logs again in the stretch it
    # replaced; one step printed wrong (300000 among 29 and 31, or 3 among 29 and 31) does neither.
    later = np.minimum(back + 1, len(known) - 1)
    back = back[(back >= 2) & (known[np.maximum(back - 2, 0)] >= known[back]) & (back + 1 < len(known))
                & (known[later] <= known[back - 1])]
    if not len(back) or bool((known[back] <= known[0]).any()):
        return np.zeros(0, dtype=np.int64)
    if len(back) > 1:
        _, counts = np.unique(known, return_counts=True)
        if len(back) * _RECORDS_PER_FALL_BACK > len(known) or (counts > 1).mean() > _LOGGED_AGAIN:
            return np.zeros(0, dtype=np.int64)
    return at[back]


def survivors(steps: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Which records (in write order) no later history replaced: a record survives when its step
    is below the first step of every history written after its own (``starts``: where each later
    history begins, from :func:`fall_backs`). A record without a step survives.

    Example:
        >>> survivors(np.array([1, 2, 3, 4, 2, 3, 1.5, 5]), np.array([4, 6])).tolist()
        [True, False, False, False, False, False, True, True]
    """
    steps = np.asarray(steps, dtype="float64")
    if not len(starts):
        return np.ones(len(steps), dtype=bool)
    # Each later history's first step (not its lowest: a step printed wrong inside it is no resume).
    history = np.searchsorted(starts, np.arange(len(steps)), side="right")  # 0: the first history
    return survivors_of(steps, history, steps[np.asarray(starts)])


def survivors_of(steps: np.ndarray, history: np.ndarray, firsts: np.ndarray) -> np.ndarray:
    """:func:`survivors` of records whose history is known otherwise (``history``: 0 for the
    first, k for the one the k-th later history began; ``firsts``: each later history's first
    step): another series printed between the loss's records.

    Example:
        >>> survivors_of(np.array([100., 300., 200., 400.]), np.array([0, 0, 1, 1]), np.array([150.])).tolist()
        [True, False, True, True]
    """
    below_later = np.r_[np.minimum.accumulate(np.asarray(firsts, dtype="float64")[::-1])[::-1], np.inf]
    with np.errstate(invalid="ignore"):
        return ~(np.asarray(steps, dtype="float64") >= below_later[history])


# The records before a replaced stretch kept with it for the analyzer (the spike detector's
# history, the best loss so far), and the most stretches kept (those with the most records).
CONTEXT = 5_000
MOST = 20


def logged_nan_within(logged_nan: dict | None, first: int, last: int) -> dict[str, list[int]] | None:
    """The steps of ``logged_nan`` (a run's ``LOGGED_NAN`` meta: metric key -> steps logged as NaN)
    from ``first`` to ``last`` (a replaced stretch's frame, its context included), keys with none
    left out; None where the run's source does not tell a NaN logged from a value not logged.

    Example:
        >>> logged_nan_within({"loss": [5, 120, 300], "lr": [7]}, 100, 200), logged_nan_within(None, 0, 9)
        ({'loss': [120]}, None)
    """
    if logged_nan is None:
        return None
    found = {key: [int(s) for s in at if first <= s <= last] for key, at in logged_nan.items()}
    return {key: at for key, at in found.items() if at}


@dataclass
class Stretch:
    """What one fall-back replaced: the first step of the history written after (``resumed_at``),
    the first and the last step it replaced, ``rows``: indices into the steps given (in write
    order) of the history as it stood before it, from up to :data:`CONTEXT` records before the
    stretch, and ``index``: which fall-back of those given it is (not every one is kept)."""

    resumed_at: int
    first: int
    last: int
    rows: np.ndarray
    index: int


def replaced_stretches(steps: np.ndarray, starts: np.ndarray) -> list[Stretch]:
    """For each fall-back in ``starts`` (at most :data:`MOST`: those that replaced the most
    records), the stretch it replaced in the history as it stood before it: the records written
    before it that no earlier fall-back replaced, from its first step on.

    Example:
        >>> (s,) = replaced_stretches(np.array([1, 2, 3, 4, 2, 3]), np.array([4]))
        >>> s.resumed_at, s.first, s.last, s.rows.tolist(), s.index
        (2, 2, 4, [0, 1, 2, 3], 0)
    """
    steps = np.asarray(steps, dtype="float64")
    found = []
    for k, start in enumerate(starts):
        written = steps[:start]
        before = survivors(written, np.asarray(starts[:k]))
        with np.errstate(invalid="ignore"):
            replaced = before & (written >= steps[start])
        count = int(replaced.sum())
        rows = np.flatnonzero(before)
        rows = rows[max(0, len(rows) - count - CONTEXT):]
        last = written[~np.isnan(written)][-1]
        found.append((count, Stretch(int(steps[start]), int(np.nanmin(written[replaced])), int(last), rows, k)))
    kept = sorted(range(len(found)), key=lambda k: -found[k][0])[:MOST]
    return [found[k][1] for k in sorted(kept)]
