"""Divergence: the loss staying well above its best level, found by the guard's detector."""

from __future__ import annotations

import pandas as pd

from sentinel.analyze.detector import detect_divergence
from sentinel.analyze.incident import Incident, IncidentKind, Severity


def divergence_incidents(loss: pd.Series) -> list[Incident]:
    """One critical incident per diverged stretch, starting at the detector's onset.

    Non-finite values are the non-finite rule's business: pass finite values only. A stretch
    that ends before the run does (the loss came back) is marked resolved.

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
                                   "resolved": not ongoing}))
    return incidents
