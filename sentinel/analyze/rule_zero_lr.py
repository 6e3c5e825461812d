"""A run whose logged learning rate is exactly zero: its updates move nothing.

A learning rate of exactly ``0.0`` at many logged steps in a row, while the loss does not come
down, is a schedule that never started or ended before the run did: a warm-up as long as the run,
a scheduler stepped per batch with a length counted in epochs (or the other way round), a
``LambdaLR`` whose factor is 0, a cosine schedule over fewer steps than the run, an optimizer given
``lr=0``. Those steps train nothing. A linear warm-up from 0 is at 0 at its first step only, and a
decay to 0 reaches it at the run's last step: neither makes a stretch. Where the loss falls over
the stretch, the logged rate is not the one the weights move by (a frozen parameter group's, a
rate printed with too few digits): not reported.

A warning where the stretch starts at the first logged rate (a run that never trained); info later
(the schedule ended early: the steps after it were spent for nothing).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sentinel.analyze.incident import Incident, IncidentKind
from sentinel.analyze.zero_stretches import zero_stretches

# Logged learning rates of exactly 0 in a row that make a stretch: this many, and this share of the
# run's logged rates at least. A rate printed with too few digits shows 0 for a while where it is
# tiny: llm.c's "lr:0.000000" over the last 2% of a cosine decay, a long warm-up's first steps.
MIN_ROWS = 5
MIN_SHARE = 0.2
# The loss across the stretch must not fall by more than this share for it to count.
MAX_LOSS_FALL = 0.05


def zero_lr_incidents(lr: pd.Series, loss: pd.Series, min_rows: int = MIN_ROWS) -> list[Incident]:
    """One incident for the longest stretch of logged learning rates in a row that are exactly 0
    (``min_rows`` or more, and a fifth of the logged rates), where the loss over it fell by less
    than :data:`MAX_LOSS_FALL`.

    Args:
        lr: the finite learning rates, indexed by step.
        loss: the finite losses, indexed by step.
        min_rows: the shortest stretch reported.

    Example:
        >>> lr = pd.Series([0.0] * 20, index=range(10, 210, 10))
        >>> loss = pd.Series([2.30 + 0.001 * (i % 3) for i in range(20)], index=range(10, 210, 10))
        >>> zero_lr_incidents(lr, loss)[0].message.split(";")[0]
        'learning rate logged as 0 at 20 logged steps in a row (10-200), to the end of the log'
    """
    if not len(loss):
        return []
    least = max(min_rows, int(np.ceil(MIN_SHARE * len(lr))))
    for stretch in zero_stretches(lr, loss, least):
        fall = stretch.fall
        if fall is None or fall > MAX_LOSS_FALL:
            continue  # the loss came down: the weights did move, by some other rate
        from_start = stretch.first == 0  # 0 from the first logged rate on: it never trained
        cause = ("the run did not train (a rate of 0, or one too small for the digits printed: a schedule that "
                 "never started, a warm-up as long as the run, a scheduler's length in the wrong unit, lr=0 given "
                 "to the optimizer)" if from_start else
                 "those steps trained nothing (a schedule that ended before the run did: a decay over fewer steps "
                 "than the run)")
        return [stretch.incident(IncidentKind.ZERO_LR, from_start, f"learning rate logged as 0 {stretch.where}; "
                                                                   f"the loss moved {-fall:+.1%} over it: {cause}")]
    return []
