"""Stretches of a logged series that is exactly zero, with what the loss did over each.

A grad norm or a learning rate of exactly ``0.0`` at many logged steps in a row is a run that
did not train there, where the loss did not come down either (the ``zero_grad`` and ``zero_lr``
rules tell why); both rules walk the same stretches.

Example:
    >>> values = pd.Series([1.0, 0.0, 0.0, 0.0, 2.0], index=[10, 20, 30, 40, 50])
    >>> loss = pd.Series([3.0, 2.0, 2.0, 2.0, 1.0], index=[10, 20, 30, 40, 50])
    >>> [(s.first_step, s.last_step, s.rows, s.fall, s.after) for s in zero_stretches(values, loss, 3)]
    [(20, 40, 3, 0.0, '; it is non-zero again at step 50')]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sentinel.analyze.incident import Incident, Severity


@dataclass(frozen=True)
class ZeroStretch:
    """Rows ``first..last`` of a series, all exactly 0.

    Attributes:
        first, last: the rows (``first == 0``: from the series' first value).
        first_step, last_step: their steps.
        rows: how many.
        during: the finite losses logged at those steps.
        fall: the share the loss fell by over them (its last against its first; None with fewer
            than two losses or a first that is not positive).
        resolved: the series is non-zero again after it.
        after: how the stretch ends, for a message.
    """

    first: int
    last: int
    first_step: int
    last_step: int
    rows: int
    during: np.ndarray
    fall: float | None
    resolved: bool
    after: str

    @property
    def where(self) -> str:
        """Where it lies, for a message: ``at 11 logged steps in a row (10-110), to the end of the log``."""
        return f"at {self.rows} logged steps in a row ({self.first_step}-{self.last_step}){self.after}"

    def incident(self, kind: str, from_start: bool, message: str) -> Incident:
        """The finding: a warning where the run did not train from its start, else info."""
        return Incident(kind, self.first_step, self.last_step, Severity.WARNING if from_start else Severity.INFO,
                        message, {"rows": self.rows, "loss_fall": self.fall, "resolved": self.resolved,
                                  "from_start": from_start})


def zero_stretches(series: pd.Series, loss: pd.Series, least: int) -> Iterator[ZeroStretch]:
    """The stretches of ``least`` or more values of ``series`` in a row that are exactly 0,
    longest first (the earlier of two as long), with the finite ``loss`` over each."""
    values = series.to_numpy(dtype="float64")
    if len(values) < least:
        return
    zero = values == 0
    bounds = np.flatnonzero(np.diff(np.concatenate(([0], zero.view(np.int8), [0]))))
    starts, ends = bounds[::2], bounds[1::2] - 1  # rows starts[k]..ends[k] are zeros
    steps = series.index.to_numpy()
    for k in np.argsort(-(ends - starts), kind="stable"):
        first, last = int(starts[k]), int(ends[k])
        if last - first + 1 < least:
            return
        during = loss[(loss.index >= steps[first]) & (loss.index <= steps[last])].to_numpy(dtype="float64")
        fall = float(1 - during[-1] / during[0]) if len(during) >= 2 and during[0] > 0 else None
        resolved = last < len(values) - 1
        after = f"; it is non-zero again at step {int(steps[last + 1])}" if resolved else ", to the end of the log"
        yield ZeroStretch(first, last, int(steps[first]), int(steps[last]), last - first + 1, during, fall,
                          resolved, after)
