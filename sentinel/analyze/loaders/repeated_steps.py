"""Steps that print their loss several times with different values: every rank printing without
its rank before its lines, each micro-batch's loss. A reader keeps one row a step (the last
printed), and the series it reads mixes them; this says so."""

from __future__ import annotations

import numpy as np


def several_losses_per_step(step: np.ndarray, loss: np.ndarray, record_word: str = "step",
                            nan_mark: np.ndarray | None = None) -> str | None:
    """The warning where most steps print their loss several times, with different values (the
    last of each step is read); else None. ``step`` in the order printed. A bar redrawing a count
    now and then says nothing, nor does one that shows the step before's loss at its new count
    first. A record without a loss (the Trainer's evaluation dict at its step) prints none; one
    that printed a NaN (``nan_mark``: 1.0 there) does.

    Example:
        >>> several_losses_per_step(np.array([1, 1, 2, 2]), np.array([9.1, 9.3, 9.0, 8.9]))[:49]
        '2 of 2 steps print their loss 2 times with differ'
        >>> several_losses_per_step(np.array([1, 1, 2, 2]), np.array([9.1, 9.1, 9.0, 9.0])) is None
        True
    """
    loss = np.asarray(loss, dtype="float64")
    printed = ~np.isnan(loss) if nan_mark is None else ~np.isnan(loss) | (nan_mark == 1.0)
    if not printed.all():
        step, loss = step[printed], loss[printed]
    if not len(step):
        return None
    starts = np.flatnonzero(np.r_[True, step[1:] != step[:-1]])
    counts = np.diff(np.r_[starts, len(step)])
    several = counts > 1
    if several.sum() * 2 < len(starts):
        return None
    last = loss[np.r_[starts[1:], len(step)] - 1]  # each step's last record
    differ = np.zeros(len(starts), dtype=bool)
    per_record = np.repeat(last, counts)
    # (equal to a part in 1e5: one loss computed twice, a relaunch's nondeterminism, not another rank's shard)
    unequal = ~(np.isclose(loss, per_record, rtol=1e-5, atol=0.0) | (np.isnan(loss) & np.isnan(per_record)))
    # A bar drawn at its new count before its description was set again shows the step before's
    # loss (llama-recipes' "step N completed (loss: X)" description): a redraw, not another print.
    unequal &= loss != np.repeat(np.r_[np.nan, last[:-1]], counts)
    np.logical_or.at(differ, np.repeat(np.arange(len(starts)), counts), unequal)
    if differ.sum() * 2 < len(starts):
        return None
    times = int(np.median(counts[several]))
    return (f"{int(differ.sum())} of {len(starts)} {record_word}s print their loss {times} times with different "
            "values (every rank printing? each micro-batch?): the last printed of each is read. Print from rank 0 "
            "only, or let the launcher put the rank before each line (torchrun --tee 3, srun --label, mpirun "
            "--tag-output: rank 0's lines are then read)")
