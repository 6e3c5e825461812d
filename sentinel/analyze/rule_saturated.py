"""A loss at the ceiling of a clipped logarithm: the model gives the true answer a probability of ~0.

A cross-entropy takes the log of a predicted probability, and libraries clip that probability (or the
log) so that a wrong answer given with full confidence costs a fixed amount instead of infinity: Keras
and TensorFlow clip at ``1e-7`` (a loss of ``-ln 1e-7 = 16.118095``), hand-written losses add
``1e-8`` or ``1e-12``, scikit-learn's log loss ``1e-15``, PyTorch's ``BCELoss`` clamps each log at
``-100`` and OpenNMT caps a perplexity at ``e^100``. A batch mean lands exactly there only when every
example of the batch is answered wrong with certainty: outputs saturated by a learning rate far too
high or unnormalised inputs, labels that do not match the outputs. A run whose last rows keep coming
back to that value is not learning, however low a lucky batch between them was (an UrbanSound
classifier at ``Loss 16.118095, Accuracy 0.000000`` on most lines, 4.53 once).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.noise import printed_unit

# The ceilings, each with where it comes from.
CEILINGS = {
    -math.log(1e-7): "a probability clipped at 1e-7 (Keras' and TensorFlow's epsilon)",
    -math.log(1e-8): "a probability clipped at 1e-8",
    -math.log(1e-12): "a probability clipped at 1e-12",
    -math.log(1e-15): "a probability clipped at 1e-15 (scikit-learn's log loss)",
    100.0: "a log clamped at -100 (PyTorch's BCELoss; OpenNMT caps a perplexity at e^100)",
}
# The log's last rows looked at, and how many of them at a ceiling make a finding.
TAIL_ROWS = 20
MIN_ROWS = 4
# Relative distance within which a value is at a ceiling: its printed digits, at least six of them.
SAME_RTOL = 1e-6
# A value printed coarser than this (relative to the ceiling: "100.0" may be any loss near 100), or
# computed (the log of OpenNMT's capped perplexity, exactly 100), must end the log MIN_ROWS times.
COARSEST_UNIT = 1e-4


def saturated_incidents(loss: pd.Series) -> list[Incident]:
    """One warning where :data:`MIN_ROWS` or more of the log's last :data:`TAIL_ROWS` losses sit at a
    clipped log's ceiling and the last one is at least half of it (see the module docstring).

    Example:
        >>> s = pd.Series([16.118095, 16.118095, 4.533215, 15.614405, 16.118095, 16.118095], index=range(6))
        >>> saturated_incidents(s)[0].message.split(":")[0]
        'loss at 16.12 = -ln(1e-7) on 4 of the last 6 logged steps (0-5)'
    """
    values = loss.to_numpy(dtype="float64")[-TAIL_ROWS:]
    finite = values[np.isfinite(values)]
    if len(finite) < MIN_ROWS:
        return []
    for ceiling, why in CEILINGS.items():
        at = np.abs(values - ceiling) <= SAME_RTOL * ceiling
        if at.sum() < MIN_ROWS or values[-1] < ceiling / 2:
            continue
        if printed_unit(values[at]) > COARSEST_UNIT * ceiling and not at[-MIN_ROWS:].all():
            continue  # a loss printed as "100.0" now and then, near 100 anyway
        steps = loss.index.to_numpy()[-len(values):]
        first, last = int(steps[np.argmax(at)]), int(steps[-1])
        named = "" if ceiling == 100.0 else f" = -ln(1e-{round(ceiling / math.log(10))})"
        message = (f"loss at {ceiling:.4g}{named} on {int(at.sum())} of the last {len(values)} logged steps "
                   f"({first}-{last}): the ceiling of {why}, where every example of a batch is answered wrong "
                   "with certainty; the outputs are saturated (a learning rate far too high, unnormalised "
                   "inputs, labels that do not match the outputs)")
        return [Incident(IncidentKind.LOSS_STUCK, first, last, Severity.WARNING, message,
                         {"ceiling": ceiling, "rows": int(at.sum()), "resolved": False})]
    return []
