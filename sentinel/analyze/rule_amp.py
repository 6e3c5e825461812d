"""Mixed precision: dynamic loss-scale collapse and the rate of overflow steps."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.config import AnalyzeConfig
from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.spans import between, group_steps, value_at


def loss_scale_incidents(scale: pd.Series, config: AnalyzeConfig) -> list[Incident]:
    """A critical incident when the loss scale fell below ``loss_scale_floor`` or by
    ``loss_scale_drop_orders`` orders of magnitude from its running peak; otherwise a warning
    per fast fall, ``loss_scale_fall_orders`` orders within ``loss_scale_fall_window`` steps.

    The scaler's start-up search is no collapse: DeepSpeed starts at 2**32 and Megatron's and
    torch's scalers start high too, halving on each overflowing step until the scale fits. The
    falls are counted from the first logged step at which the scale did not fall (only the
    floor applies before it).

    Example:
        >>> s = pd.Series([65536.0, 65536.0, 1024.0, 8.0, 0.5], index=[0, 1, 2, 3, 4])
        >>> loss_scale_incidents(s, AnalyzeConfig())[0].step
        3
    """
    raw = scale.to_numpy(dtype="float64")
    keep = np.isfinite(raw) & (raw > 0)
    values = raw if keep.all() else raw[keep]
    if not len(values) or _never_fell(values, config):
        return []
    scale = scale[keep]
    held = np.flatnonzero(values[1:] >= values[:-1])
    settled = np.zeros(len(scale), dtype=bool)
    settled[(held[0] if held.size else len(scale) - 1):] = True
    peak = scale.where(settled).cummax()
    orders = np.log10(peak / scale)
    bad = (scale < config.loss_scale_floor) | (orders >= config.loss_scale_drop_orders)
    if not bad.any():
        return _fast_falls(scale, settled, config)
    start = int(bad.idxmax())
    low_step = int(scale.idxmin())
    low = float(scale.min())
    final = float(scale.iloc[-1])
    end = max(int(bad[bad].index[-1]), low_step)
    top = float(value_at(peak, start)) if np.isfinite(value_at(peak, start)) else float(scale.iloc[0])
    resolved = final >= config.loss_scale_floor and math.log10(top / final) < config.loss_scale_drop_orders
    fell = max(float(orders.max()), math.log10(top / low) if low > 0 else math.inf)
    message = (f"loss scale collapsed from {top:.4g} to {low:.4g} at step {low_step} "
               f"({fell:.1f} orders of magnitude); final {final:.4g}")
    return [Incident(IncidentKind.LOSS_SCALE_COLLAPSE, start, end, Severity.CRITICAL, message,
                     {"peak": top, "min": low, "min_step": low_step,
                      "final": final, "orders": fell, "resolved": bool(resolved)})]


def _never_fell(values: np.ndarray, config: AnalyzeConfig) -> bool:
    """A scale that never fell (constant, or a scaler that only grew) from at or above the
    floor: no incident, found without the running peak and its logarithms. The peak is then
    the value itself (0 orders below it, and ``loss_scale_drop_orders`` > 0), every value is
    at or above the first, so at or above the floor, and none lies below an earlier one."""
    return bool(values[0] >= config.loss_scale_floor and (values[1:] >= values[:-1]).all())


def _fast_falls(scale: pd.Series, settled: np.ndarray, config: AnalyzeConfig) -> list[Incident]:
    """A warning per stretch in which the scale stood ``loss_scale_fall_orders`` orders below
    its highest value of the last ``loss_scale_fall_window`` steps (after start-up)."""
    values = scale.to_numpy()
    if len(values) < 2 or bool((values[1:] >= values[:-1]).all()):
        return []  # never below an earlier value: every window's top is the value itself
    steps = scale.index.to_numpy()
    # A time-based rolling max is a window in steps, whatever the logging cadence.
    on_time = pd.Series(scale.where(settled).to_numpy(),
                        index=pd.to_timedelta(steps.astype("int64"), unit="s"))
    top = on_time.rolling(pd.Timedelta(seconds=config.loss_scale_fall_window), closed="both",
                          min_periods=1).max().to_numpy()
    fell = np.log10(top / scale.to_numpy()) >= config.loss_scale_fall_orders
    incidents = []
    final = float(scale.iloc[-1])
    for first, last in group_steps(pd.Series(fell & settled, index=scale.index), max_gap=1):
        i = int(np.searchsorted(steps, first))
        peak = float(top[i])
        at_peak = np.flatnonzero((steps >= steps[i] - config.loss_scale_fall_window) & (steps <= steps[i])
                                 & (scale.to_numpy() == peak))
        peak_step = int(steps[at_peak[-1]])
        start = int(steps[at_peak[-1] + 1])  # the first step below the peak
        part = between(scale, start, last)
        low, low_step = float(part.min()), int(part.idxmin())
        halvings = math.log2(peak / low)
        resolved = math.log10(peak / final) < config.loss_scale_fall_orders
        message = (f"loss scale fell from {peak:.4g} at step {peak_step} to {low:.4g} at step {low_step} "
                   f"({halvings:.3g} halvings in {low_step - peak_step} step{'s' if low_step - peak_step != 1 else ''}): "
                   "repeated overflows; "
                   f"final {final:.4g}")
        incidents.append(Incident(IncidentKind.LOSS_SCALE_COLLAPSE, start, max(last, low_step), Severity.WARNING,
                                  message, {"peak": peak, "peak_step": peak_step, "min": low, "min_step": low_step, "final": final,
                                            "orders": math.log10(peak / low), "halvings": halvings,
                                            "resolved": bool(resolved)}))
    return incidents


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
    # Got past when the log ends on clean steps; two or more overflows in a row at its end are a
    # scaler still searching down (the run died of it, or was cut there).
    flags = hit.to_numpy()
    trailing = len(flags) - int(np.flatnonzero(~flags)[-1]) - 1 if (~flags).any() else len(flags)
    resolved = trailing < 2
    message = (f"{int(hit.sum())} of {len(logged)} steps overflowed ({rate:.1%}, above "
               f"{config.overflow_rate:.0%}); {metrics.AMP_OVERFLOW} first at step {int(steps[0])}"
               + ("" if resolved else f"; still overflowing at the last {trailing} logged steps"))
    return [Incident(IncidentKind.OVERFLOW_RATE, int(steps[0]), int(steps[-1]), Severity.WARNING, message,
                     {"overflow_steps": int(hit.sum()), "logged_steps": int(len(logged)), "rate": rate,
                      "resolved": resolved})]
