"""A loss whose every value is written again at the next few logged steps: each value read once.

A Lightning module that logs its loss only now and then (``if batch_idx % 2000 == 0:
self.log("train_loss", loss)``) under ``log_every_n_steps=250`` has the logger write the last
value again at each logging step: every value eight times in a row. Read as eight steps, a
one-batch value held flat and then jumping was a spike with a score of 2e9 (the held rows have no
noise), a "divergence" over each high value's rows, and the weights "not changing". The first row
of each held value is the one logged.

Example:
    >>> held = pd.Series([3.0104] * 3 + [1.5781] * 3 + [2.2312] * 3) + 1.23456789e-8  # printed whole
    >>> held = pd.concat([held] * 4, ignore_index=True)
    >>> carried_once(held).round(4).tolist()[:4]
    [3.0104, 1.5781, 2.2312, 3.0104]
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sentinel.analyze.noise import printed_unit

# Values held, at least (their first rows), for a log to be read so; a loss stuck at one value is
# one held value, and the stuck rule's to tell.
MIN_HELD_VALUES = 10
# Of the rows, at least this share repeats the row before it.
MIN_REPEATED_SHARE = 0.6
# A printed unit this small against the values (a float32 written whole has ~1e-7) cannot round
# different values to one.
_FULL_PRECISION = 1e-5


def carried_once(loss: pd.Series) -> pd.Series | None:
    """``loss`` with each run of one value at consecutive logged steps read at its first step, where
    most values are so held (:data:`MIN_HELD_VALUES` runs or more, their median length two rows or
    more, :data:`MIN_REPEATED_SHARE` of the rows a repeat) and written in full precision; else None.

    Example:
        >>> carried_once(pd.Series([2.0, 1.9, 1.8, 1.8, 1.7])) is None
        True
    """
    values = loss.to_numpy(dtype="float64")
    if len(values) < 2 * MIN_HELD_VALUES:
        return None
    starts = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    lengths = np.diff(np.concatenate((starts, [len(values)])))
    repeated = 1 - len(starts) / len(values)
    if len(starts) < MIN_HELD_VALUES or np.median(lengths) < 2 or repeated < MIN_REPEATED_SHARE:
        return None
    # Values printed with few digits repeat by rounding (a smooth loss at 3 significant digits is the
    # same for ten steps, a two-step spike two equal values): only full-precision values are held ones.
    held = loss.iloc[starts]
    scale = float(np.median(np.abs(held.to_numpy(dtype="float64"))))
    if not scale > 0 or printed_unit(held.to_numpy()) > _FULL_PRECISION * scale:
        return None
    return held


def carried_note(held: pd.Series, loss: pd.Series) -> str:
    """The warning of a loss read by :func:`carried_once`.

    Example:
        >>> carried_note(pd.Series([3.0, 1.0]), pd.Series([3.0] * 8 + [1.0] * 8))
        'the loss repeats each value at 8 logged steps in a row (2 values over 16 rows: a value logged less often than the logger writes): each is read once, at its first step'
    """
    return (f"the loss repeats each value at {round(len(loss) / len(held))} logged steps in a row ({len(held)} values "
            f"over {len(loss)} rows: a value logged less often than the logger writes): each is read once, at its first "
            "step")
