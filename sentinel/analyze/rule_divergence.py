"""Divergence: the loss staying well above its best level, found by the guard's detector."""

from __future__ import annotations

import pandas as pd

from sentinel.analyze.detector import detect_divergence
from sentinel.analyze.incident import Incident, IncidentKind, Severity


def divergence_incidents(loss: pd.Series) -> list[Incident]:
    """One critical incident per diverged stretch, starting at the detector's onset.

    Non-finite values are the non-finite rule's business: pass finite values only. A divergence
    is never resolved, even when the loss came back later (``came_back`` says so): the loss
    stayed elevated longer than the detector's patience, the span after which PaLM and
    BigScience restarted from a checkpoint rather than wait, so those steps were lost. The
    CS336 sweep runs its author calls unstable (lr 1e-1, 3e-1, 1) all come back down once the
    cosine schedule has decayed the LR, after 540 to 3,940 diverged steps.

    Example:
        >>> divergence_incidents(run.steps["loss"].dropna())  # doctest: +SKIP
    """
    if loss.empty:
        return []
    frame = detect_divergence(loss)
    diverged = frame[frame["diverged"].to_numpy(dtype=bool)]
    incidents = []
    last = int(loss.index[-1])
    for onset, stretch in diverged.groupby("onset", sort=True):
        start, end = int(onset), int(stretch.index[-1])
        best = float(stretch["best"].iloc[0])
        worst = float(stretch["level"].max())
        ongoing = end == last
        message = (f"loss diverged from step {start}: smoothed loss {worst:.4g} vs best {best:.4g} "
                   f"({worst / best:.3g}x) until step {end}" if best > 0 else
                   f"loss diverged from step {start}: smoothed loss {worst:.4g} vs best {best:.4g} until step {end}")
        message += "; still diverged at the last step" if ongoing else "; came back afterwards"
        incidents.append(Incident(IncidentKind.DIVERGENCE, start, end, Severity.CRITICAL, message,
                                  {"onset": start, "best_level": best, "max_level": worst,
                                   "came_back": not ongoing, "resolved": False}))
    return incidents
