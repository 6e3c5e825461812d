"""A loss that rises while the learning rate warms up, and comes back, is the warm-up's doing.

Fine-tuning a pretrained model with a warm-up (MMDetection's default: the LR from a thousandth of
its value to all of it over 500 iterations) often shows the loss climbing while the LR grows, then
falling once it has; its authors call such a run healthy. A spike or a divergence that starts
while the logged LR is still rising towards its peak, and that the run got past, is told as info
with the warm-up's numbers, where nothing of the kind (a spike or a divergence, warning or worse)
happens after the warm-up. A run that rises again later is unstable, and its rise during the
warm-up is the first sign of it: the CS336 sweep's runs at a learning rate of 0.3 and 1 diverge
in their warm-up and again later. One that starts after the warm-up, or that the run never got
past, is left as the other rules said.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from sentinel.analyze.incident import Incident, IncidentKind, Severity

# The LR's first logged value at most this share of its peak: a warm-up, not a flat schedule.
START_SHARE = 0.5
# The warm-up ends at the first step whose LR reaches this share of the peak.
PEAK_SHARE = 0.95
# Logged LR values the rise needs, its end included.
MIN_POINTS = 3
# A step down smaller than this share of the LR is rounding in a printed LR, not a decay.
JITTER = 1e-3


@dataclasses.dataclass(frozen=True)
class Warmup:
    """The LR's warm-up: it rose from ``first`` (at the first logged step) to ``peak`` by ``end``."""

    end: int
    first: float
    peak: float


def lr_warmup(lr: pd.Series) -> Warmup | None:
    """The warm-up at the start of ``lr`` (indexed by step), or None where the LR does not start
    well below its peak and rise to it.

    Example:
        >>> lr_warmup(pd.Series([1e-5, 5e-3, 1e-2, 1e-2, 5e-3], index=[0, 50, 100, 150, 200]))
        Warmup(end=100, first=1e-05, peak=0.01)
        >>> lr_warmup(pd.Series([1e-2, 9e-3, 8e-3], index=[0, 50, 100])) is None
        True
    """
    values = lr.to_numpy(dtype="float64")
    keep = np.isfinite(values) & (values > 0)
    values, steps = values[keep], lr.index.to_numpy()[keep]
    if len(values) < MIN_POINTS:
        return None
    peak = float(values.max())
    if values[0] > START_SHARE * peak:
        return None
    end = int(np.argmax(values >= PEAK_SHARE * peak))
    rise = values[: end + 1]
    if end + 1 < MIN_POINTS or (np.diff(rise) < -JITTER * rise[1:]).any():
        return None
    return Warmup(int(steps[end]), float(values[0]), peak)


def settle_warmup(incidents: list[Incident], lr: pd.Series | None) -> list[Incident]:
    """``incidents`` with every loss spike or divergence that began during the LR's warm-up and
    that the run got past (a divergence that came back) told as info, unless one begins after it.

    Example:
        >>> settle_warmup(incidents, run.steps["lr"])  # doctest: +SKIP
    """
    warmup = lr_warmup(lr) if lr is not None else None
    if warmup is None or any(_rise(i) and i.step >= warmup.end for i in incidents):
        return incidents
    settled = []
    for incident in incidents:
        got_past = incident.details.get("came_back") if incident.kind == IncidentKind.DIVERGENCE.value \
            else incident.resolved
        if _rise(incident) and incident.step < warmup.end and got_past:
            incident = dataclasses.replace(
                incident, severity=Severity.INFO,
                message=f"{incident.message}; during the learning-rate warm-up (lr {warmup.first:.3g} rising to "
                        f"{warmup.peak:.3g} by step {warmup.end}): a rise that came back, as a warm-up often "
                        "shows when fine-tuning",
                details={**incident.details, "during_warmup": dataclasses.asdict(warmup)})
        settled.append(incident)
    return settled


def _rise(incident: Incident) -> bool:
    return incident.kind in (IncidentKind.LOSS_SPIKE.value, IncidentKind.DIVERGENCE.value) \
        and incident.severity.rank >= Severity.WARNING.rank
