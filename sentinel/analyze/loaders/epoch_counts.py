"""A count that starts again in each epoch, made a step that goes on across epochs.

mmengine and MMDetection print the iteration inside the epoch, Keras its batch, and many loops
write ``epoch, step, loss`` with the step counting from 0 again each epoch. Read as the step, the
epochs fall onto one another: each step number keeps the last epoch's value (a table of 500 rows
read as 100, the spike at row 301 gone). The global step is the epoch (from its first) times the
epoch's length, plus the count.
"""

from __future__ import annotations

import math

import numpy as np


def epoch_length(iters: np.ndarray) -> float:
    """Iterations in an epoch when the log does not say: the largest count logged, plus one
    logging interval when counts start below one interval (from 0: the last one logged is not
    the epoch's end).

    Example:
        >>> epoch_length(np.array([100., 200., 300., 100.])), epoch_length(np.array([0., 100., 200., 0.]))
        (300.0, 300.0)
    """
    finite = np.unique(iters[~np.isnan(iters)])
    if not len(finite):
        return math.nan
    gap = float(np.median(np.diff(finite))) if len(finite) > 1 else 1.0
    return float(finite[-1] + (gap if finite[0] < gap else 0.0))


def length_of_global_prints(epoch: np.ndarray, iters: np.ndarray) -> float | None:
    """The epoch's length where its counts are printed every ``P`` of a count that runs on across
    epochs (pytorch-CycleGAN-and-pix2pix prints at ``total_iters % print_freq == 0``: its epoch of
    1,096 samples printed ``iters: 1000`` last, the next ``iters: 4`` first, where the largest count
    seen, 1,000 plus 4, made it 1,012): ``a + P - b`` at each move of the epoch (``a`` the last count
    before it, ``b`` the first after), the same at every move; None where the counts do not read so
    (the same first count in each epoch: printed by the epoch's own count).

    Example:
        >>> epochs, counts = np.array([1, 1, 1, 2, 2, 2, 2, 3]), np.array([100, 200, 300, 50, 150, 250, 350, 100])
        >>> length_of_global_prints(epochs, counts)
        350.0
        >>> length_of_global_prints(np.array([1, 1, 2, 2]), np.array([100, 200, 100, 200])) is None
        True
    """
    if len(iters) < 3 or np.isnan(epoch).any() or np.isnan(iters).any() or (np.diff(epoch) < 0).any():
        return None
    moves = np.flatnonzero(np.diff(epoch) > 0)
    within = np.diff(iters)[np.diff(epoch) == 0]
    if not len(moves) or not len(within) or not (within == within[0]).all() or within[0] <= 0:
        return None
    every = float(within[0])
    firsts = iters[np.r_[0, moves + 1]]
    after, before = iters[moves + 1], iters[moves]
    lengths = before + every - after
    if (firsts == firsts[0]).all() or not ((after > 0) & (after <= every)).all() or not (lengths == lengths[0]).all():
        return None
    return float(lengths[0]) if lengths[0] >= iters.max() else None


def steps_across_epochs(step: np.ndarray, epoch: np.ndarray,
                        counted: np.ndarray | None = None) -> tuple[np.ndarray, int] | None:
    """``(global steps, epoch length)`` where ``step`` (in row order) starts again at each move of
    ``epoch`` and at no other row (epochs in order, each move a fall of the count, or none where
    each epoch logs one row at the same count); None otherwise
    (a step that goes on across epochs, a resume that goes back). ``counted``: the rows whose count
    is the training's (the others, an evaluation's rows with its own count, mmcv's JSON ``{"mode":
    "val", "iter": 80}``, are no part of the epoch's length and sit at their epoch's end).

    Example:
        >>> steps_across_epochs(np.array([0, 1, 2, 0, 1, 2]), np.array([0, 0, 0, 1, 1, 1]))[0].tolist()
        [0, 1, 2, 3, 4, 5]
        >>> steps_across_epochs(np.array([0, 1, 2, 3, 4, 5]), np.array([0, 0, 0, 1, 1, 1])) is None
        True
        >>> steps_across_epochs(np.array([20, 20, 20]), np.array([1, 2, 14]))[0].tolist()
        [20, 40, 280]
    """
    epoch = epoch.astype("float64", copy=False)
    if len(step) < 3 or not np.isfinite(epoch).all() or not (np.diff(epoch) >= 0).all():
        return None
    # The count starts again at each move (or stays where it was: a log of one row an epoch at its
    # last iteration, mmaction2's JSON {"epoch": 14, "iter": 20}) and falls nowhere else: among the
    # training's rows (an epoch's evaluation row after its last, {"mode": "val", "iter": 625} after
    # iteration 7300, is a fall of no training count).
    own_epoch, own_step = (epoch, step) if counted is None else (epoch[counted], step[counted])
    moves = own_epoch[1:] > own_epoch[:-1]
    if len(own_step) < 2 or not moves.any() or (own_step[1:] < own_step[:-1])[~moves].any() \
            or (own_step[1:] > own_step[:-1])[moves].any():
        return None
    length = epoch_length(step.astype("float64") if counted is None else step[counted].astype("float64"))
    if not length > 0:
        return None
    if counted is not None:
        step = np.where(counted, step, np.minimum(step, length))
    return (np.round((epoch - epoch[0]) * length).astype(np.int64) + step.astype(np.int64)), int(length)


def count_wraps(step: np.ndarray) -> tuple[np.ndarray, int] | None:
    """:func:`steps_across_epochs` where no column names the epoch: ``step`` (in write order) falls
    back to its first value two times or more, each epoch but the last as long as the first (a
    batch index passed as TensorBoard's global_step: ``add_scalar("loss", v, i)`` in the inner
    loop). One fall is a training started again or resumed, not this.

    Example:
        >>> count_wraps(np.array([0, 1, 2, 0, 1, 2, 0, 1]))[0].tolist()
        [0, 1, 2, 3, 4, 5, 6, 7]
        >>> count_wraps(np.array([0, 1, 2, 3, 0, 1, 2, 3])) is None
        True
    """
    falls = np.flatnonzero(step[1:] < step[:-1])
    if len(falls) < 2 or not (step[falls + 1] == step[0]).all():
        return None
    ends = np.r_[falls, len(step) - 1]
    highest = np.maximum.reduceat(step, np.r_[0, falls + 1])
    if not (highest[:-1] == highest[0]).all() or highest[-1] > highest[0] or not (step[ends[:-1]] == highest[0]).all():
        return None
    epoch = np.zeros(len(step))
    epoch[falls + 1] = 1
    return steps_across_epochs(step, np.cumsum(epoch))
