"""Mixed precision: dynamic loss-scale collapse and the rate of overflow steps."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.config import AnalyzeConfig
from sentinel.analyze.incident import Incident, IncidentKind, Severity


def loss_scale_incidents(scale: pd.Series, config: AnalyzeConfig) -> list[Incident]:
    """A critical incident when the loss scale fell below ``loss_scale_floor`` or by
    ``loss_scale_drop_orders`` orders of magnitude from its running peak.

    Example:
        >>> s = pd.Series([65536.0, 1024.0, 8.0, 0.5], index=[0, 1, 2, 3])
        >>> loss_scale_incidents(s, AnalyzeConfig())[0].step
        2
    """
    scale = scale[np.isfinite(scale.to_numpy(dtype="float64")) & (scale > 0)]
    if scale.empty:
        return []
    peak = scale.cummax()
    orders = np.log10(peak / scale)
    bad = (scale < config.loss_scale_floor) | (orders >= config.loss_scale_drop_orders)
    if not bad.any():
        return []
    start = int(bad.idxmax())
    low_step = int(scale.idxmin())
    low = float(scale.min())
    final = float(scale.iloc[-1])
    end = max(int(bad[bad].index[-1]), low_step)
    resolved = final >= config.loss_scale_floor and math.log10(float(peak.iloc[-1]) / final) < config.loss_scale_drop_orders
    message = (f"loss scale collapsed from {float(peak.loc[start]):.4g} to {low:.4g} at step {low_step} "
               f"({float(orders.max()):.1f} orders of magnitude); final {final:.4g}")
    return [Incident(IncidentKind.LOSS_SCALE_COLLAPSE, start, end, Severity.CRITICAL, message,
                     {"peak": float(peak.loc[start]), "min": low, "min_step": low_step,
                      "final": final, "orders": float(orders.max()), "resolved": bool(resolved)})]


def overflow_incidents(overflow: pd.Series, config: AnalyzeConfig) -> list[Incident]:
    """A warning when more than ``overflow_rate`` of the logged steps overflowed.

    Example:
        >>> s = pd.Series([0.0] * 8 + [1.0] * 2)
        >>> overflow_incidents(s, AnalyzeConfig())[0].details["rate"]
        0.2
    """
    logged = overflow.dropna()
    if logged.empty:
        return []
    hit = logged > 0
    rate = float(hit.mean())
    if rate <= config.overflow_rate:
        return []
    steps = logged.index[hit.to_numpy()]
    message = (f"{int(hit.sum())} of {len(logged)} steps overflowed ({rate:.1%}, above "
               f"{config.overflow_rate:.0%}); {metrics.AMP_OVERFLOW} first at step {int(steps[0])}")
    return [Incident(IncidentKind.OVERFLOW_RATE, int(steps[0]), int(steps[-1]), Severity.WARNING, message,
                     {"overflow_steps": int(hit.sum()), "logged_steps": int(len(logged)), "rate": rate,
                      "resolved": True})]
