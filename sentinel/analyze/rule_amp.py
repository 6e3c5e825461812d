"""Mixed precision: dynamic loss-scale collapse and the rate of overflow steps."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.config import AnalyzeConfig
from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.spans import between, group_positions, group_steps, value_at


def loss_scale_incidents(scale: pd.Series, config: AnalyzeConfig, overflow: pd.Series | None = None,
                         tool_floor: float | None = None) -> list[Incident]:
    """A critical incident when the loss scale fell below ``loss_scale_floor`` or by
    ``loss_scale_drop_orders`` orders of magnitude from its running peak; otherwise a warning
    per fast fall, ``loss_scale_fall_orders`` orders within ``loss_scale_fall_window`` steps.
    Where ``overflow`` (``amp/overflow`` per step) is given and nothing critical was found, a
    critical incident when the scale stopped falling on overflowing steps at or under the floor
    (:func:`at_minimum_incidents`). ``tool_floor``: the tool's own floor, where its scaler goes
    on below ``loss_scale_floor`` (fairseq's 1e-4): the collapse is judged against it, and a fall
    under ``loss_scale_floor`` is a warning (:func:`fell_under_floor_incidents`).

    The scaler's start-up search is no collapse: DeepSpeed starts at 2**32 and Megatron's and
    torch's scalers start high too, halving on each overflowing step until the scale fits. The
    falls are counted from the first logged step at which the scale did not fall (only the
    floor applies before it). A first row that overflowed logs the scale its overflow halved to:
    the scale it started from is twice it (fairseq's "NOTE: overflow detected, setting loss scale
    to: 64.0" is its start-up search from 128).

    Example:
        >>> s = pd.Series([65536.0, 65536.0, 1024.0, 8.0, 0.5], index=[0, 1, 2, 3, 4])
        >>> loss_scale_incidents(s, AnalyzeConfig())[0].step
        3
    """
    halved_first = overflow is not None and len(scale) > 0 and bool(overflow.get(scale.index[0], 0) > 0)
    if tool_floor is not None and tool_floor < config.loss_scale_floor:
        found = _collapse_incidents(scale, replace(config, loss_scale_floor=tool_floor), halved_first)
        if not found:
            found = fell_under_floor_incidents(scale, config)
    else:
        found = _collapse_incidents(scale, config, halved_first)
    if overflow is not None and not any(i.severity is Severity.CRITICAL for i in found):
        found += at_minimum_incidents(scale, overflow, config)
    return found


def fell_under_floor_incidents(scale: pd.Series, config: AnalyzeConfig) -> list[Incident]:
    """A warning where the scale, under ``loss_scale_floor``, stood ``loss_scale_fall_orders``
    orders below its running peak: a scaler that goes on down to a floor of its own (fairseq's
    1e-4) halving again and again, "a bunch of overflows in a row, usually the loss exploding"
    in fairseq's maintainers' words, before it stops there. A scale that moves between 0.5
    and 1 is its normal range, no incident. Where the log shows no such fall, a scale that stands
    that far under the floor from its first step had fallen before (a paste from late in a run:
    fairseq's 0.00049, then 0.00024, two overflows from its minimum of 1e-4, the run then stopped
    there; its summary lines print that scale as 0).

    Example:
        >>> s = pd.Series([0.0625, 0.0625, 0.03125, 0.0039], index=[190, 290, 389, 486])
        >>> fell_under_floor_incidents(s, AnalyzeConfig())[0].details["min_step"]
        486
    """
    raw = scale.to_numpy(dtype="float64")
    values = scale[np.isfinite(raw) & (raw > 0)]
    under = values < config.loss_scale_floor
    peak = values.cummax()
    fell = under & (np.log10(peak) - np.log10(values) >= config.loss_scale_fall_orders)
    from_floor = not fell.any() and len(values) > 0 and bool(under.iloc[0])
    if from_floor:  # measured from the floor
        peak = peak.clip(lower=config.loss_scale_floor)
        fell = under & (np.log10(peak) - np.log10(values) >= config.loss_scale_fall_orders)
    if not fell.any():
        return []
    start, low_step = int(fell.idxmax()), int(values.idxmin())
    top, low, final = float(peak[start]), float(values.min()), float(values.iloc[-1])
    resolved = math.log10(top) - math.log10(final) < config.loss_scale_fall_orders
    halvings = math.log2(top) - math.log2(low)
    first = float(values.iloc[0])
    if not from_floor:
        fallen = (f"loss scale fell from {top:.4g} to {low:.4g} at step {low_step} ({halvings:.3g} halvings), under "
                  f"{config.loss_scale_floor:g}")
    else:  # under the floor from the log's first step: it had fallen before
        fallen = (f"loss scale under {config.loss_scale_floor:g} from the first step logged ({int(values.index[0])}): "
                  f"{first:.4g}" + (f", down to {low:.4g} at step {low_step}" if low < first else "")
                  + f" ({halvings:.3g} halvings under {config.loss_scale_floor:g})")
    message = f"{fallen}: overflow after overflow, as where the loss is exploding; final {final:.4g}"
    return [Incident(IncidentKind.LOSS_SCALE_COLLAPSE, start, max(low_step, int(fell[fell].index[-1])),
                     Severity.WARNING, message, {"peak": top, "min": low, "min_step": low_step, "final": final,
                                                 "orders": math.log10(top) - math.log10(low),
                                                 "resolved": bool(resolved)})]


def at_minimum_incidents(scale: pd.Series, overflow: pd.Series, config: AnalyzeConfig) -> list[Incident]:
    """A critical incident where overflowing steps left the loss scale where it was, at or under
    ``loss_scale_floor``, at least twice in a row: the scaler is at its minimum (DeepSpeed's and
    Megatron's ``min_loss_scale``, 1 by default: "Attempted loss scale: 1, reducing to 1"), so
    each such step is skipped and no update is applied (DeepSpeed raises "Current loss scale
    already at minimum" where told to).

    Example:
        >>> s = pd.Series([4.0, 2.0, 1.0, 1.0, 1.0])
        >>> at_minimum_incidents(s, pd.Series(1.0, index=s.index), AnalyzeConfig())[0].details["skipped_at_minimum"]
        2
    """
    both = pd.concat([scale, overflow], axis=1, keys=["scale", "overflow"]).dropna(subset=["scale"])
    both = both[both["scale"] > 0]
    values, hit = both["scale"].to_numpy(dtype="float64"), both["overflow"].fillna(0).to_numpy() > 0
    # An overflowing row whose scale is the row before's: the scaler could not lower it.
    held = np.zeros(len(values), dtype=bool)
    held[1:] = hit[1:] & (values[1:] == values[:-1]) & (values[1:] <= config.loss_scale_floor)
    rows = np.arange(len(held))
    runs = [(first, last) for first, last in group_positions(np.flatnonzero(held), rows) if last > first]
    steps = both.index
    incidents = []
    for first, last in runs:
        count = last - first + 1
        low = float(values[last])
        resolved = bool((~hit[last + 1:]).any())
        message = (f"loss scale at its minimum ({low:.4g}) and still overflowing: {count} steps in a row left it where "
                   f"it was (steps {int(steps[first])}-{int(steps[last])}): the scaler cannot lower it, so each such "
                   "step is skipped and no update is applied" + ("" if resolved else "; still so at the last logged step"))
        incidents.append(Incident(IncidentKind.LOSS_SCALE_COLLAPSE, int(steps[first]), int(steps[last]),
                                  Severity.CRITICAL, message,
                                  {"min": low, "skipped_at_minimum": count, "resolved": resolved}))
    return incidents


def _collapse_incidents(scale: pd.Series, config: AnalyzeConfig, halved_first: bool = False) -> list[Incident]:
    """:func:`loss_scale_incidents` without the minimum's check (``halved_first``: the first row
    logs the scale its overflow halved to)."""
    raw = scale.to_numpy(dtype="float64")
    keep = np.isfinite(raw) & (raw > 0)
    values = raw if keep.all() else raw[keep]
    if not len(values) or _never_fell(values, config):
        return []
    scale = scale[keep]
    held = np.flatnonzero(values[1:] >= values[:-1])
    settled = np.zeros(len(scale), dtype=bool)
    # A search from a start-up scale only: a log (a paste) whose first scale is already low is
    # past its start-up, and a fall from there counts.
    startup = values[0] * (2 if halved_first else 1) >= _STARTUP_SCALE
    settled[(held[0] if held.size else len(scale) - 1) if startup else 0:] = True
    peak = scale.where(settled).cummax()
    orders = np.log10(peak) - np.log10(scale)  # not of the ratio: a scale of 5e-324 under 65536 overflows it
    bad = (scale < config.loss_scale_floor) | (orders >= config.loss_scale_drop_orders)
    if not bad.any():
        return _fast_falls(scale, settled, config)
    start = int(bad.idxmax())
    low_step = int(scale.idxmin())
    low = float(scale.min())
    final = float(scale.iloc[-1])
    end = max(int(bad[bad].index[-1]), low_step)
    top = float(value_at(peak, start)) if np.isfinite(value_at(peak, start)) else float(scale.iloc[0])
    resolved = final >= config.loss_scale_floor and math.log10(top) - math.log10(final) < config.loss_scale_drop_orders
    fell = max(float(orders.max()), math.log10(top) - math.log10(low) if low > 0 else math.inf)
    first = float(scale.iloc[0])
    if first >= config.loss_scale_floor:
        # (a start-up search that went on under the floor has no settled peak above it: from its first value)
        shown, orders = (top, fell) if top > low else (first, math.log10(first) - math.log10(low))
        message = (f"loss scale collapsed from {shown:.4g} to {low:.4g} at step {low_step} "
                   f"({orders:.1f} orders of magnitude); final {final:.4g}")
    else:  # it starts under the floor (a paste from late in a run)
        message = (f"loss scale {first:.4g} from the first step logged ({int(scale.index[0])}), under "
                   f"{config.loss_scale_floor:g}: it had collapsed before" + (
                       f"; down to {low:.4g} at step {low_step} ({math.log10(first) - math.log10(low):.1f} orders of "
                       "magnitude)" if low < first else "") + f"; final {final:.4g}")
    return [Incident(IncidentKind.LOSS_SCALE_COLLAPSE, start, end, Severity.CRITICAL, message,
                     {"peak": top, "min": low, "min_step": low_step,
                      "final": final, "orders": fell, "resolved": bool(resolved)})]


# The lowest start-up scale of the common scalers (fairseq's --fp16-init-scale, 128; torch's
# GradScaler and apex start at 65536, DeepSpeed and Megatron at 2**32 or 2**16).
_STARTUP_SCALE = 128.0


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
    fell = np.log10(top) - np.log10(scale.to_numpy()) >= config.loss_scale_fall_orders
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
        halvings = math.log2(peak) - math.log2(low)
        resolved = math.log10(peak) - math.log10(final) < config.loss_scale_fall_orders
        message = (f"loss scale fell from {peak:.4g} at step {peak_step} to {low:.4g} at step {low_step} "
                   f"({halvings:.3g} halvings in {low_step - peak_step} step{'s' if low_step - peak_step != 1 else ''}): "
                   "repeated overflows; "
                   f"final {final:.4g}")
        incidents.append(Incident(IncidentKind.LOSS_SCALE_COLLAPSE, start, max(last, low_step), Severity.WARNING,
                                  message, {"peak": peak, "peak_step": peak_step, "min": low, "min_step": low_step, "final": final,
                                            "orders": math.log10(peak) - math.log10(low), "halvings": halvings,
                                            "resolved": bool(resolved)}))
    return incidents


# Steps a rate of overflows is taken over, at least, or overflows among fewer: two overflows among a
# paste's four steps are a scaler's search (MiniLLM's fp16 scale 128 -> 32 at iterations 15 and 16),
# no rate; six among nine are (BigScience tr8b's 17062-17068, its scale halving from 2**20).
_FEWEST_RATED = 10
_FEWEST_OVERFLOWS = 3


def overflow_incidents(overflow: pd.Series, config: AnalyzeConfig) -> list[Incident]:
    """A warning when more than ``overflow_rate`` of the logged steps overflowed (of 10 steps or
    more, or 3 overflows or more). Where the rows are several steps apart (a line every 10 steps, fairseq's line per
    epoch), each row's count of overflow lines is a count of steps among the steps its rows span.

    Example:
        >>> s = pd.Series([0.0] * 8 + [1.0] * 2)
        >>> overflow_incidents(s, AnalyzeConfig())[0].details["rate"]
        0.2
        >>> overflow_incidents(pd.Series([1.0, 0.0, 1.0], index=[250, 500, 750]), AnalyzeConfig())
        []
        >>> overflow_incidents(pd.Series([0.0, 0.0, 1.0, 1.0]), AnalyzeConfig())
        []
    """
    logged = overflow.dropna()
    if logged.empty:
        return []
    hit = logged > 0
    steps_logged = logged.index.to_numpy()
    cadence = int(np.median(np.diff(steps_logged))) if len(steps_logged) > 1 else 1
    if cadence > 1:
        overflowed = int(logged.clip(lower=0).sum())
        spanned = int(steps_logged[-1] - steps_logged[0]) + cadence
    else:
        overflowed, spanned = int(hit.sum()), len(logged)
    rate = min(1.0, overflowed / spanned)
    if rate <= config.overflow_rate or (spanned < _FEWEST_RATED and overflowed < _FEWEST_OVERFLOWS):
        return []
    steps = logged.index[hit.to_numpy()]
    # Got past when the log ends on clean steps; two or more overflows in a row at its end are a
    # scaler still searching down (the run died of it, or was cut there).
    flags = hit.to_numpy()
    trailing = len(flags) - int(np.flatnonzero(~flags)[-1]) - 1 if (~flags).any() else len(flags)
    resolved = trailing < 2
    message = (f"{overflowed} of {spanned} steps overflowed ({rate:.1%}, above "
               f"{config.overflow_rate:.0%}); {metrics.AMP_OVERFLOW} first at step {int(steps[0])}"
               + ("" if resolved else f"; still overflowing at the last {trailing} logged "
                  f"{'steps' if cadence == 1 else 'rows'}"))
    return [Incident(IncidentKind.OVERFLOW_RATE, int(steps[0]), int(steps[-1]), Severity.WARNING, message,
                     {"overflow_steps": overflowed, "logged_steps": spanned, "rate": rate,
                      "resolved": resolved})]


# Steps a DeepSpeed run skips while its scaler searches down from its start-up scale (2**16 by
# default, 2**32 at most): not counted against it.
_STARTUP_SKIPS = 32
# A share of skipped steps at or above which the run hardly trained: critical.
_MOSTLY_SKIPPED = 0.5
# Steps the logged lines must span for their own share to be judged (a start-up's few lines are its search).
_FEWEST_SPANNED = 100


def skipped_update_incidents(counts: dict | None, config: AnalyzeConfig) -> list[Incident]:
    """DeepSpeed's own count of skipped steps judged (a loader's ``meta["skipped_updates"]``, from its
    progress lines ``step=2000, skipped=1999, lr=[...]``): a warning where more than ``overflow_rate``
    of the steps were skipped, over the run so far (its start-up search not counted) or over the
    steps the lines span; critical where half or more were: each skipped step's gradients overflowed
    and no update was applied, so the run hardly trained however its loss lines move.

    Example:
        >>> counts = {"first": [2000, 1999], "before_last": [2000, 1999], "last": [2000, 1999]}
        >>> skipped_update_incidents(counts, AnalyzeConfig())[0].severity.value
        'critical'
        >>> skipped_update_incidents({"first": [10, 6], "before_last": [7350, 139], "last": [7360, 139]},
        ...                          AnalyzeConfig())
        []
    """
    if not counts:
        return []
    (first_step, first_skipped), (_, before), (step, skipped) = counts["first"], counts["before_last"], counts["last"]
    if step <= 0:
        return []
    whole = max(skipped - _STARTUP_SKIPS, 0) / step
    spanned = step - first_step
    logged = (skipped - first_skipped) / spanned if spanned >= _FEWEST_SPANNED else 0.0
    rate = max(whole, logged)
    if rate <= config.overflow_rate:
        return []
    critical = rate >= _MOSTLY_SKIPPED
    resolved = skipped == before and counts["before_last"] != counts["last"]
    said = f"DeepSpeed skipped {skipped} of its {step} optimizer steps (its last progress line: step={step}, " \
           f"skipped={skipped})"
    if whole < rate:
        said += f"; {skipped - first_skipped} of the {spanned} steps from step {first_step} ({rate:.1%})"
    said += (": a skipped step's gradients overflowed (fp16) and no update was applied, so the run hardly trained "
             "whatever its loss lines show; its loss scale is likely at its minimum: train in bf16, or lower the "
             "learning rate" if critical else
             f": above {config.overflow_rate:.0%}, fp16 overflows" + ("" if resolved else ", still at its last line"))
    return [Incident(IncidentKind.OVERFLOW_RATE, int(first_step), int(step),
                     Severity.CRITICAL if critical else Severity.WARNING, said,
                     {"overflow_steps": int(skipped), "logged_steps": int(step), "rate": rate, "resolved": resolved})]
