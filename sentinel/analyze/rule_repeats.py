"""A loss that repeats, value for value, the values it had some rows earlier: the weights did not change.

A model whose weights never change scores the same batch the same way: where the data come in the
same order each epoch (no shuffling, or a paste of a few fixed batches), its per-batch losses repeat
exactly from one epoch to the next (TRACE's LoRA run: "Epoch 2, Step 0, Loss: 0.9741" and on, each
value epoch 1's). A plateau or a loss stuck at one value says nothing here: the values move within
each epoch. Exact repeats of a few values happen by chance where the loss is printed with few digits
over a narrow range; a finding needs so many repeated values that chance could not line them up.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.noise import printed_unit

# The values at the log's end that are looked at (a run whose weights stopped changing stays so).
TAIL_ROWS = 20_000
# Repeated values, at least, in a row.
MIN_REPEATS = 4
# Different values, at least, among them (a constant loss is the stuck rule's).
MIN_DISTINCT = 3
# How unlikely a chance repeat must be: the expected number of chance matches of the repeated
# stretch over every pair of positions, at most this.
CHANCE = 1e-6
# The seeds looked at (groups of repeated four-value windows), at most.
MOST_SEEDS = 1000


def repeated_loss_incidents(loss: pd.Series) -> list[Incident]:
    """One warning where the loss repeats, value for value, the values it had some rows earlier
    over a stretch chance cannot explain (see the module docstring).

    Example:
        >>> epoch = [0.9741, 1.3742, 1.2390, 0.9670, 1.0386, 1.1681, 1.2240, 0.9610]
        >>> (found,) = repeated_loss_incidents(pd.Series(epoch * 2, index=range(16)))
        >>> found.step, found.end_step, found.details["period_rows"]
        (8, 15, 8)
    """
    values = loss.to_numpy(dtype="float64")[-TAIL_ROWS:]
    steps = loss.index.to_numpy()[-TAIL_ROWS:]
    n = len(values)
    if n < 2 * MIN_REPEATS:
        return []
    found = _longest_repeat(values)
    if found is None:
        return []
    first, period, rows = found
    start, end = first + period, first + period + rows - 1
    shown = ", ".join(f"{v:.6g}" for v in values[start:start + 4])
    resolved = end < n - 1
    after = f"; the loss changes again at step {int(steps[end + 1])}" if resolved else "; to the end of the log"
    message = (f"loss repeats exactly the values it had {period} logged steps earlier: steps {int(steps[start])}-"
               f"{int(steps[end])} repeat steps {int(steps[first])}-{int(steps[first + rows - 1])} ({shown}, ...), "
               f"{rows} values: the weights did not change between them (a learning rate of 0, parameters frozen "
               "or not given to the optimizer, optimizer.step() not called, every update skipped), or the same "
               f"lines were logged twice{after}")
    return [Incident(IncidentKind.LOSS_STUCK, int(steps[start]), int(steps[end]), Severity.WARNING, message,
                     {"repeats_step": int(steps[first]), "period_rows": period, "rows": rows, "resolved": resolved})]


def _chance_digits(stretch: np.ndarray, unit: float) -> float:
    """``-log10`` of the chance that a value of ``stretch`` equals another by luck: one in its spread
    over three units of its last printed digit (a loss's values bunch around its level); 0 where
    its values lie within a few units (a flat loss printed with few digits repeats all the time)."""
    spread = float(np.max(stretch) - np.min(stretch)) if len(stretch) else 0.0
    return math.log10(max(spread / (3 * unit), 1.0))


def _longest_repeat(values: np.ndarray) -> tuple[int, int, int] | None:
    """``(first, period, rows)`` of the longest stretch ``values[first + period:][:rows]`` equal to
    ``values[first:][:rows]`` that chance cannot explain, or None."""
    n = len(values)
    unit = printed_unit(values[: min(n, 2_000)])
    # The pairs of positions a stretch could repeat at number about n**2 / 2: so many of its values
    # must match that chance could not line them up (each by _chance_digits).
    needed = math.log10(n * n / 2 / CHANCE)
    # Each window of four values hashed (their bits, mixed): windows equal in hash are the seeds; a
    # hash shared by chance repeats no value and is passed over.
    bits = np.ascontiguousarray(values).view(np.uint64)
    mixed = np.zeros(n - MIN_REPEATS + 1, dtype=np.uint64)
    for k, odd in enumerate((0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x27D4EB2F165667C5)):
        mixed = (mixed ^ bits[k:n - MIN_REPEATS + 1 + k]) * np.uint64(odd)
    _, first_at, inverse, counts = np.unique(mixed, return_index=True, return_inverse=True, return_counts=True)
    repeated = np.flatnonzero(counts > 1)
    # Each window's positions in order, grouped by hash: a group's second position is the repeat.
    by_group = np.argsort(inverse.reshape(-1), kind="stable")
    group_start = np.cumsum(counts) - counts
    best = None
    for group in repeated[np.argsort(first_at[repeated])][:MOST_SEEDS].tolist():
        first = int(first_at[group])
        if len(np.unique(values[first:first + MIN_REPEATS])) < 2:
            continue  # a constant stretch: the stuck rule's
        period = int(by_group[group_start[group] + 1]) - first
        # A first look at as many values as chance needs where the loss moves its most there.
        digits = _chance_digits(values[first:first + period], unit)
        least = max(MIN_REPEATS, math.ceil(needed / digits)) if digits > 0 else n
        if first + period + least > n or not np.array_equal(values[first:first + least],
                                                              values[first + period:first + period + least]):
            continue
        rows = int(np.argmin(np.r_[values[first + period:] == values[first:n - period], False]))
        repeat = values[first + period:first + period + rows]
        if len(np.unique(repeat)) < MIN_DISTINCT or rows * _chance_digits(repeat, unit) < needed:
            continue
        if best is None or rows > best[2]:
            best = (first, period, rows)
    return best
