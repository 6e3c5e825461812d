"""Loss spikes and grad-norm spikes and explosions, found by the guard's own spike detector."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.config import AnalyzeConfig
from sentinel.analyze.detector import OVER_ONE_VALUE, SPREAD_ROWS, detect_spikes, loss_atol, spike_config
from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.noise import printed_unit
from sentinel.analyze.spans import between, cadence, first_step_at_or_below, gap_rows, group_positions, value_at

# A single outlier row, the next logged step no outlier and at least half-way back: an outlier
# batch, the case the guard answers by withholding one update (tier 1), not an incident. A
# longer stretch is reported as a spike even when it stays under the guard's ``spike_patience``
# (which would still have withheld its updates without a rollback).
OUTLIER_ROWS = 1
# Fewer rows than the spike rule's warm-up: an excerpt somebody cut around an incident (as many: within the
# warm-up still, as the analyzer's warning says, for a spike within the spread of the values before it).
_EXCERPT_ROWS = 20
# A spike on an excerpt's last row is a warning (nothing after it tells whether it recovered: a
# noisy loss's last batch, TransUNet's x1.7, ZipVoice's x2.1), critical from this many times its
# baseline on (an order of magnitude: CHGNet's 0.35 -> 124.6); on a longer log's last row, an
# outlier batch below it, a spike from it on.
_SURE_AT_THE_END = 10.0
# A jump over a log's few first values (this many at most) that stands within their own spread (a
# score under this: their robust sigmas) was flagged by its height alone: not known, as over one value.
_FEW_VALUES = 3
_WITHIN_THEIR_SPREAD = 1.0


def spike_spans(series: pd.Series, config: AnalyzeConfig, *, start_jump: float | None = None,
                atol: float | None = None, back_under: float | None = None) -> list[dict]:
    """Detector-flagged spans of a finite series with their numbers.

    Each span: ``start``, ``end``, ``peak_step``, ``peak``, ``baseline``, ``ratio`` (peak over
    baseline), ``score`` (the detector's largest), ``recovered_step`` (first step back under
    ``baseline + recover_frac * (peak - baseline)`` within :func:`recover_window`, else None;
    no higher than ``back_under`` times a positive baseline where given: a loss at 155 after a
    spike to 4977 from 0.27 was "recovered", being under a tenth of the peak), ``next_step`` (the
    next logged step, None at the end) and ``outlier_batch`` (see :func:`is_outlier_batch`).

    Example:
        >>> spike_spans(run.steps["loss"].dropna(), AnalyzeConfig())[0]["peak"]  # doctest: +SKIP
        9.1
    """
    if series.empty:
        return []
    # the rows that can be spikes (and the two after each)
    frame = detect_spikes(series, config, start_jump=start_jump, atol=atol)
    # The spikes' rows (positions into ``series``, increasing): no flag per row of a long run.
    flagged = np.unique(series.index.searchsorted(frame.index[frame["is_spike"].to_numpy(dtype=bool)]))
    steps = series.index.to_numpy()
    spans = []
    if not len(flagged):
        return spans
    interval, excerpt = _interval(series), len(series) < _EXCERPT_ROWS
    within = recover_window(series, config)
    gaps = gap_rows(steps) if np.issubdtype(steps.dtype, np.integer) else None
    groups = group_positions(flagged, steps, max_gap=2, gaps=gaps)
    for start, end in _still_up(series, frame, groups):
        part = between(series, start, end)
        peak_step = int(part.idxmax())
        peak = float(part.max())
        baseline = float(value_at(frame["baseline"], start)) if "baseline" in frame else float("nan")
        if not np.isfinite(baseline):
            before = between(series, None, start - 1)
            baseline = float(before.tail(20).median()) if len(before) else float("nan")
        score = float(between(frame["score"], start, end).max()) if "score" in frame else float("nan")
        settled = _new_level(series, start, baseline, peak)  # where the loss stood just before, a step above it
        floor = baseline if settled is None else settled
        level = floor + config.recover_frac * (peak - floor)
        if back_under is not None and floor > 0:
            level = min(level, back_under * floor)
        # A loss printed with few decimals is back where it shows one unit of its last digit above
        # its baseline (gsplat's 0.011, then 0.017, 0.013, 0.012: the printing cannot say more).
        around = series.to_numpy()[max(0, series.index.searchsorted(start) - _ROWS_PRINTED):][:2 * _ROWS_PRINTED]
        level = max(level, min(baseline + printed_unit(around), (baseline + peak) / 2))
        # (the next rows logged, however far: a TensorBoard download's rows thinned to a thousand, the
        # spike's next row 247 steps on and back down, was "not recovered within 200 steps")
        nxt = _next_step(series, end)
        gap = _across_a_gap(series, end, nxt, gaps, level, within)  # (a paste's "..." after it: said as such)
        within_here = within if gap["gap_after"] else max(within, _rows_ahead(series, peak_step, _RECOVER_ROWS))
        recovered = first_step_at_or_below(series, peak_step, level, within_here)
        # (the logging interval where the spike is: a log of its first ten steps, then one every 200)
        at = int(np.searchsorted(steps, start))
        here = int(steps[at] - steps[at - 1]) if at > 0 else interval
        # (the log's last row an order of magnitude up is no outlier batch: judged as an excerpt's last row is;
        # a TF run's 0.39, then 3417.76 at its last step, was "recovered")
        ratio = _ratio(peak, baseline)
        outlier = not excerpt and _flagged_between(flagged, steps, start, end) <= OUTLIER_ROWS and \
            _back_at_once(series, end, nxt, max(interval, here), baseline, peak) and \
            not (nxt is None and ratio >= _SURE_AT_THE_END)
        history = int(value_at(frame["history"], start)) if "history" in frame else None
        spans.append({"start": start, "end": end, "peak_step": peak_step, "peak": peak,
                      "baseline": baseline, "ratio": ratio, "score": score, "history": history,
                      "recovered_step": recovered, "next_step": nxt, "outlier_batch": outlier,
                      "recover_within": within_here, **gap,
                      # the log skips a stretch right before it, the loss up from its first row after it
                      # on: the rise came over rows left out
                      "gap_before": int(steps[at - 1]) if gaps is not None and at > 0 and bool(np.isin(at - 1, gaps))
                      and bool((between(series, start, peak_step) > level).all()) else None})
    return spans


# The rows just before a spike that stand as a level of their own above its baseline (a step the loss
# took before it, which the detector's window has not caught up with), and how flat they must be.
_LEVEL_ROWS = 5
_LEVEL_SPREAD = 0.05
# ... and no higher above it than a jump the spike rule would call one (x1.5): a level far above the
# baseline is the spike before it still going on, not a place the loss settled.
_LEVEL_RATIO = 1.5
# ... with the spike's peak this far above the level at least (a spike from there, not its edge).
_ABOVE_LEVEL = 1.1


def _new_level(series: pd.Series, start: int, baseline: float, peak: float) -> float | None:
    """The level the loss stood at just before a spike, where its last :data:`_LEVEL_ROWS` rows stand
    flat (within :data:`_LEVEL_SPREAD` of their median) above the spike's baseline, under
    :data:`_LEVEL_RATIO` times it, the peak :data:`_ABOVE_LEVEL` times the level or more: a step the
    loss took earlier (AlphaPose's loss up x1.17 at epoch 141 as its schedule changed, a one-epoch
    bump at 153 "not recovered" against the level of before 141). A spike is back where it came from
    there. None otherwise.

    Example:
        >>> s = pd.Series([1.0] * 10 + [1.17] * 10 + [1.5, 1.18, 1.17])
        >>> _new_level(s, 20, 1.0, 1.5)
        1.17
    """
    before = between(series, None, start - 1).to_numpy(dtype="float64")[-_LEVEL_ROWS:]
    if len(before) < _LEVEL_ROWS or not baseline > 0:
        return None
    level = float(np.median(before))
    flat = bool((np.abs(before - level) <= _LEVEL_SPREAD * abs(level)).all())
    return level if flat and baseline < level < _LEVEL_RATIO * baseline and peak >= _ABOVE_LEVEL * level else None


# Rows before a spike (and as many from it on) whose printing tells the loss's last printed digit.
_ROWS_PRINTED = 20


# A flagged stretch that rises no more than this above the rows just before it, which had not come
# back from the spike before them, is that spike going on (see _still_up).
_FRESH_RISE = 1.1
_ROWS_BEFORE = 5


def _still_up(series: pd.Series, frame: pd.DataFrame, groups: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``groups`` of flagged steps, each joined to the one before it where the loss stayed up in
    between (every row there more than half-way from that spike's baseline to its peak: an
    outlier batch is back under half at once) and it rises no higher than
    :data:`_FRESH_RISE` times the rows just before it: the detector flags a loss that jumped to a
    new level and stayed again and again against its old baseline, which was one spike and not
    a new one each time (DNABERT's loss at ln 2 "spiked" at 41,200 and again at 41,700 inside
    its flat 0.6930-0.6938; a reranker at 2.1 for 20 rows "spiked to 2.106, 59x baseline").

    Example:
        >>> s = pd.Series([1.0] * 30 + [3.0, 2.9, 2.95, 2.9, 3.0, 3.05])
        >>> frame = pd.DataFrame({"baseline": 1.0}, index=s.index)
        >>> _still_up(s, frame, [(30, 30), (34, 35)])
        [(30, 35)]
    """
    out: list[tuple[int, int]] = []
    for start, end in groups:
        if out:
            first, last = out[-1]
            before = between(series, last + 1, start - 1).to_numpy()
            try:
                baseline = float(value_at(frame["baseline"], first)) if "baseline" in frame else np.nan
            except KeyError:
                baseline = np.nan
            peak = float(between(series, first, last).max())
            level = (baseline + peak) / 2
            if len(before) and np.isfinite(level) and bool((before > level).all()) and \
                    float(between(series, start, end).max()) <= _FRESH_RISE * float(before[-_ROWS_BEFORE:].max()):
                out[-1] = (first, end)
                continue
        out.append((start, end))
    return out


# A loss logged less often than ``recover_steps`` (once an epoch, every 500 steps) shows a
# recovery only at its next logged points: this many of them are waited for.
_RECOVER_ROWS = 2


def recover_window(series: pd.Series, config: AnalyzeConfig) -> int:
    """Steps after a spike's peak within which a return counts as a recovery: ``recover_steps``,
    or two logging intervals where the loss is logged less often (a per-epoch loss back down at
    the next epoch recovered; it was 'not recovered within 200 steps').

    Example:
        >>> recover_window(pd.Series([2.0, 1.9, 1.8], index=[1875, 3750, 5625]), AnalyzeConfig())
        3750
    """
    return max(int(config.recover_steps), _RECOVER_ROWS * cadence(series.index))


def _rows_ahead(series: pd.Series, step: int, rows: int) -> int:
    """Steps from ``step`` to the ``rows``-th row logged after it (0 where the log ends before).

    Example:
        >>> _rows_ahead(pd.Series([1.0, 9.0, 1.0, 1.0], index=[0, 10, 257, 300]), 10, 2)
        290
    """
    at = int(series.index.searchsorted(step, side="right")) + rows - 1
    return int(series.index[at]) - step if at < len(series) else 0


# A spike's last value "coming back" when the log ends: within this share of the spike's height above its
# baseline, and (a positive baseline) within this factor of it.
_COMING_BACK_SHARE = 0.25
_COMING_BACK_RATIO = 1.5


def _coming_back(loss: pd.Series, span: dict) -> bool:
    """Whether the loss's last value, after a spike's peak, is nearly back: within a quarter of the spike's
    height above its baseline, and within x1.5 of a positive one (a spike to 6e33 "back" at 2e30 is not).

    Example:
        >>> spike = {"peak_step": 1, "baseline": 16.5, "peak": 25.2}
        >>> _coming_back(pd.Series([16.5, 25.2, 18.1, 17.6]), spike), _coming_back(pd.Series([16.5, 25.2, 21.0]), spike)
        (True, False)
    """
    baseline, last = span["baseline"], float(loss.iloc[-1])
    return int(loss.index[-1]) > span["peak_step"] and bool(np.isfinite(baseline)) and \
        last - baseline <= _COMING_BACK_SHARE * (span["peak"] - baseline) and \
        (baseline <= 0 or last <= _COMING_BACK_RATIO * baseline)


def _few_rows_all_above(loss: pd.Series, span: dict) -> bool:
    """Whether the rows after a spike's peak are too few to hold it to their spread (under
    :data:`SPREAD_ROWS`) and all above its baseline: a BasicSR paste's 3.42, then 6.29, 4.81, 4.57,
    6.91 tells neither a new level nor a lucky low first value. (PSMNet's 17.37, 33.4, ..., 17.36
    came back: late, not unknown.)

    Example:
        >>> loss = pd.Series([3.42, 6.29, 4.81, 4.57, 6.91], index=range(3800, 4300, 100))
        >>> _few_rows_all_above(loss, {"peak_step": 3900, "baseline": 3.42}), _few_rows_all_above(loss, {"peak_step": 3900, "baseline": 4.6})
        (True, False)
    """
    after = loss.to_numpy()[loss.index > span["peak_step"]]
    return len(after) < SPREAD_ROWS and bool((after > span["baseline"]).all())


def loss_spike_incidents(loss: pd.Series, config: AnalyzeConfig, last_step: int | None = None,
                         per_epoch: bool = False) -> tuple[list[Incident], list[dict]]:
    """One incident per loss spike: height vs baseline, score, recovered and in how many steps.

    A spike that recovered is a warning, one that did not is critical. ``loss`` holds the finite
    values only; ``last_step`` is the run's last step: a "recovery" on the last finite value of a
    run that went on logging non-finite losses is no recovery. ``per_epoch``: each value is an
    epoch's mean, so one that jumps is a whole epoch gone wrong, never an outlier batch.

    Returns:
        ``(incidents, spans)``; the spans feed the grad-norm rule's lead-time check.
    """
    spike = spike_config(config)
    spans = spike_spans(loss, config, atol=loss_atol(loss, spike.atol), back_under=1.0 + spike.short_rtol)
    # A loss of exactly 0 at every step before a span was not computed yet (DeePMD's rmse_trn over
    # batches without reference data; GRPO's loss while the policy is the reference): its first
    # values are no spike ("0.335 against a baseline at or below 0").
    computed = np.flatnonzero(loss.to_numpy() != 0)
    if len(computed) and computed[0] > 0:
        started = loss.index[computed[0]]
        spans = [span for span in spans if span["baseline"] > _NO_BASELINE or span["start"] > started]
    # A loss that lives below 0 (a flow's negative log-likelihood, WaveGlow's -6398 then 6809): a rise from a
    # baseline at or below 0 has no ratio, and its log-space score ("3.65e+10") says nothing.
    if spans and float(np.mean(loss.to_numpy() < 0)) >= _SIGNED_SHARE:
        spans = [span for span in spans if span["baseline"] > _NO_BASELINE]
    # A rise of a unit or two of the last printed digit is the print's rounding: mlx's DPO loss at
    # "0.000" from step 63, "0.001" at 66 and 69 ("a spike against a baseline at or below 0, score 231").
    if spans:  # (a print's resolution from 4,096 values at most: a run of 1,000,000 steps has it as well)
        values = loss.to_numpy()
        unit = printed_unit(values[:: max(1, len(values) // 4096)])
        spans = [span for span in spans if span["peak"] - max(span["baseline"], 0.0) > _ROUNDING_UNITS * unit]
    if per_epoch:
        for span in spans:
            span["outlier_batch"] = False
    incidents = []
    last = int(loss.index[-1])
    for span in spans:
        rec = span["recovered_step"]
        unknown = noise = False
        if is_outlier_batch(span):
            incidents.append(_outlier_incident(span))
            continue
        if rec is not None and rec == last and last_step is not None and last_step > last:
            rec = span["recovered_step"] = None  # the loss went non-finite after it for good
            after = f"then non-finite after step {last}"  # (the next logged step is not in the finite series)
        elif rec is not None and len(loss) <= _EXCERPT_ROWS and span["score"] < _WITHIN_THEIR_SPREAD:
            # (CSRNet's batch-size-1 losses, 782, 139, 3414, 585, 10, 4907, 30: each jump flagged by its height
            # alone, under one robust sigma of the values before it)
            after = (f"recovered in {_steps(rec - span['start'])} (step {rec}); within the spread of the few values "
                     "before it: a noisy loss's batch as much as a spike")
            noise = True
        elif rec is not None:
            after = f"recovered in {_steps(rec - span['start'])} (step {rec})"
        elif span["end"] == last and last_step is not None and last_step > last:
            after = f"not recovered: non-finite after step {last}"  # (the finite series ends at it)
        elif span["start"] == last and not span["ratio"] >= _SURE_AT_THE_END:
            after = "the log ends at it: whether it recovers is not known"
        elif span["gap_after"] and span["back_after_gap"] is not None:
            rec = span["back_after_gap"]
            after = (f"back down by step {rec}, after the log skips from step {span['end']} to "
                     f"{span['next_step']}: when it recovered is not known")
        elif span["gap_after"]:
            after = (f"not back down by step {span['checked_after_gap']}, after the log skips from step "
                     f"{span['end']} to {span['next_step']}")
        elif span.get("gap_before") is not None and not span["ratio"] >= _SURE_AT_THE_END:
            # (MACE's paste: epoch 182, "......", epoch 798 up x1.42: a rise over 616 epochs, not a jump;
            # a loss x45 its level since the gap is damage, however it came)
            after = (f"not back down by the last logged step {last}; the log skips from step {span['gap_before']} "
                     f"to {span['start']} before it: whether the loss jumped or rose over the steps left out is "
                     "not known")
            unknown = True
        elif span.get("history") == 1 and not span["ratio"] >= _SURE_AT_THE_END and (
                last < span["peak_step"] + span["recover_within"] or _few_rows_all_above(loss, span)):
            # (PaddleClas' paste from an epoch's first batch, 0.0176, then its intervals' 0.05-0.09)
            after = f"not back down by the last logged step {last}: {OVER_ONE_VALUE}"
            unknown = True
        elif 2 <= (span.get("history") or _FEW_VALUES + 1) <= _FEW_VALUES and span["score"] < _WITHIN_THEIR_SPREAD:
            # (one value before it has no spread: the branch above judged it, a jump of x10 or more sure)
            # (a batch-size-1 paste's 0.069, 0.000, then 2.8, 2.2, 5.0, 1.3, 11.3: x72.9 at score 0.14)
            after = (f"not back down by the last logged step {last}: the {span['history']} values before it spread as "
                     "wide as the jump, so whether the loss rose or they were lucky low ones is not known")
            unknown = True
        elif last < span["peak_step"] + span["recover_within"] and _coming_back(loss, span):
            # (fairseq's FSDP example, 10 updates: 16.48, 25.22 after two overflows, then down to 17.56 at the
            # last; the log ended inside the window the recovery is given)
            ratio = _ratio(float(loss.iloc[-1]), span["baseline"])
            after = (f"coming back: {float(loss.iloc[-1]):.4g} by the last logged step {last}"
                     + (f" ({ratio:.2f}x its baseline)" if np.isfinite(ratio) else "")
                     + "; whether it recovers fully is not known")
            unknown = True
        elif last < span["peak_step"] + span["recover_within"]:
            after = f"not recovered by the last logged step {last}"
        else:
            after = f"not recovered within {span['recover_within']} steps"
        message = (f"loss spike to {span['peak']:.4g} at step {span['peak_step']} "
                   f"({_against(span)}{_score(span['score'])}); "
                   f"{after}")
        details = {**_json(span), "recovered": rec is not None,
                   "steps_to_recover": None if rec is None else rec - span["start"],
                   "resolved": rec is not None}
        unknown = unknown or (rec is None and after.startswith("the log ends at it"))
        if unknown:
            details["at_the_end"] = True
        severity = Severity.INFO if noise else Severity.WARNING if rec is not None or unknown else Severity.CRITICAL
        incidents.append(Incident(IncidentKind.LOSS_SPIKE, span["start"], span["end"], severity, message, details))
    return incidents, spans


def confirmed_by_grad_norm(incidents: list[Incident]) -> list[Incident]:
    """``incidents`` with a loss spike on the log's last row (a warning: nothing after it tells
    whether it recovered) made critical where the grad norm's explosion led to it: BigScience
    tr8's excerpt 11446-11448, the grad norm up at 11447, the loss at 11448, its last row.

    Example:
        >>> confirmed_by_grad_norm([])
        []
    """
    led = {i.details.get("loss_spike_step") for i in incidents if i.kind == IncidentKind.GRAD_EXPLOSION}
    out = []
    for incident in incidents:
        if incident.kind == IncidentKind.LOSS_SPIKE and incident.details.get("at_the_end") and incident.step in led:
            incident = dataclasses.replace(
                incident, severity=Severity.CRITICAL,
                message=incident.message.replace("whether it recovers is not known",
                                                 "whether it recovers is not known, and the grad norm exploded before it"))
        out.append(incident)
    return out


def is_outlier_batch(span: dict) -> bool:
    """One outlier row back on the trend at once (the next logged step, close by, at least half
    way back to the baseline), in a log longer than an excerpt: the guard withholds such an
    update (tier 1) and the run goes on, so it is information, not an incident.

    The last logged step is not judged one way or the other (nothing follows it to say whether it
    was back on the trend): it is an outlier batch too, not a spike, unless it stands an order of
    magnitude above its baseline (:data:`_SURE_AT_THE_END`).

    Example:
        >>> is_outlier_batch({"outlier_batch": True})
        True
    """
    return bool(span.get("outlier_batch", False))


def _across_a_gap(series: pd.Series, end: int, nxt: int | None, gaps: np.ndarray | None, level: float,
                  within: int) -> dict:
    """Where the log skips a stretch right after a spike (see ``spans.gap_rows``), whether the
    rows after the gap are back under the recovery ``level`` within ``within`` steps of it: nothing
    within ``within`` steps of the peak was logged, so "not recovered within 200 steps" would be
    no finding. BigScience tr8's 11.42 at 7,010, then ``[...]`` to 7,220 at 7.16, still up
    (its authors: the loss "stayed there" and later went NaN); CHGNet's 0.96 at 300, then "..."
    to 26,300-26,400, back down at 0.35."""
    if gaps is None or nxt is None or not bool(np.isin(series.index.searchsorted(end), gaps)):
        return {"gap_after": False}
    last = min(nxt + within, int(series.index[-1]))
    last = int(between(series, None, last).index[-1])
    return {"gap_after": True, "back_after_gap": first_step_at_or_below(series, nxt - 1, level, within),
            "checked_after_gap": last}


def _back_at_once(series: pd.Series, end: int, nxt: int | None, interval: int, baseline: float,
                  peak: float) -> bool:
    if nxt is None:
        return True
    if nxt - end > 2 * interval:
        return False  # the next row is too far away to say "at once"
    return bool(np.isfinite(baseline) and float(value_at(series, nxt)) <= (baseline + peak) / 2)


def _outlier_incident(span: dict) -> Incident:
    steps = f"step {span['start']}" if span["start"] == span["end"] else f"steps {span['start']}-{span['end']}"
    back = f"back on the trend at step {span['next_step']}" if span["next_step"] is not None \
        else "the last logged step"
    message = f"outlier batch at {steps}: loss {span['peak']:.4g} ({_against(span)}); {back}"
    return Incident(IncidentKind.OUTLIER_BATCH, span["start"], span["end"], Severity.INFO, message,
                    {**_json(span), "resolved": True})


def _flagged_between(flagged: np.ndarray, steps: np.ndarray, start: int, end: int) -> int:
    """How many of the flagged positions (increasing) lie on the rows of steps ``start..end``."""
    lo, hi = np.searchsorted(steps, start, side="left"), np.searchsorted(steps, end, side="right")
    return int(np.searchsorted(flagged, hi, side="left") - np.searchsorted(flagged, lo, side="left"))


def _interval(series: pd.Series) -> int:
    """The logging interval: the smallest step difference (rows are often every N steps)."""
    diffs = np.diff(series.index.to_numpy())
    if not len(diffs):
        return 1
    least = diffs.min()
    if least > 0:
        return int(least)  # increasing steps (the usual case): one pass
    return int(diffs[diffs > 0].min()) if (diffs > 0).any() else 1


def _next_step(series: pd.Series, end: int) -> int | None:
    pos = series.index.searchsorted(end, side="right")
    return int(series.index[pos]) if pos < len(series.index) else None


# In the first steps of a run (a short log from its start) a grad norm counts as exploding from
# x5 its little history on (x1.5 for a loss): it rises and falls by x2 there in healthy runs.
GRAD_START_JUMP = 4.0


# A grad norm that rose under this many times its baseline and stayed, with no loss spike after it,
# moved to a new level (information); from it on, a rise that stays is an explosion (a warning).
GRAD_NEW_LEVEL = 3.0


# Rows of the grad norm, at least, before a jump and from it to the log's end, for one still up there to
# be told as not got past.
_GRAD_ROWS_BEFORE, _GRAD_ROWS_UP = 2, 3


# A grad norm that climbed to its peak over this many logged rows at least, by under this factor from
# one row to the next, with no loss spike after it, grew (an MMEngine detector's pre-clip norm going
# from 13 to 134 over 60 rows as its loss fell): not an explosion, however far it went.
_GRAD_CLIMB_ROWS, _GRAD_CLIMB_STEP = 5, 1.5

# A loss whose last rows average under this share of its rows' before a grad norm's jump went on
# falling through it: the jump did it no harm in the log (a detector's pre-clip norm, x4 in one row of
# a coarse log, its loss 29 -> 10).
_FELL_ON = 0.9


def grad_explosion_incidents(grad_norm: pd.Series, loss_spans: list[dict],
                             config: AnalyzeConfig, loss: pd.Series | None = None) -> list[Incident]:
    """One incident per jump of the grad norm, saying whether (and how many steps) it preceded a
    loss spike.

    A ``grad_norm_explosion`` (a warning) when a loss spike followed within ``grad_lead_max``
    steps, or when the grad norm did not come back down from :data:`GRAD_NEW_LEVEL` times its
    baseline or more; a ``grad_norm_spike`` (information) when it came back, or stayed at a new
    level under that, or climbed there gradually, or ``loss`` (the finite loss) went on falling
    after it, and the loss never reacted. Such a transient jump is ordinary in a healthy
    run: llm.c's stable GPT-2 run (grad clipping at 1.0) has 28 of them in 19,560 steps, up to
    x7.5 its baseline, and the BLOOM team logged "a few grad norm spikes" before their first
    loss spike. Its author would not call them explosions, so the report does not either.

    Example:
        >>> grad_explosion_incidents(run.steps["grad_norm/total"].dropna(), spans, AnalyzeConfig())  # doctest: +SKIP
    """
    incidents = []
    last = int(grad_norm.index[-1])
    for span in spike_spans(grad_norm, config, start_jump=GRAD_START_JUMP):
        # A loss spike that began within grad_lead_max steps of the jump, or while the grad norm
        # was still up (a norm that grows for 80 steps before the loss goes: the spike followed it).
        window_end = max(span["start"] + config.grad_lead_max, span["end"])
        led = [s for s in loss_spans if span["start"] <= s["start"] <= window_end
               and not is_outlier_batch(s)]  # an outlier batch's update is withheld: no consequence
        if led:
            lead = led[0]["start"] - span["start"]
            tail = (f"preceded the loss spike at step {led[0]['start']} by {_steps(lead)}"
                    if lead else f"at the same step as the loss spike at step {led[0]['start']}")
        else:
            lead, tail = None, "no loss spike followed"
            if span["recovered_step"] is not None:
                tail += f"; back down at step {span['recovered_step']}"
            elif span["start"] == last:
                tail = "at the last logged step: nothing after it shows whether it mattered"
        # A rise under x3 that stays, with the loss calm before and after it (a LoRA fine-tune's grad
        # norm drifting from 1.2 to 2.7 as its loss falls): a new level, not one inside a loss spike
        # that has not come back (BigScience tr8b's grad norm rising again 4 steps after it).
        new_level = not led and span["recovered_step"] is None and span["ratio"] < GRAD_NEW_LEVEL and not any(
            s["start"] <= span["start"] and (s["recovered_step"] is None or s["recovered_step"] >= span["start"])
            for s in loss_spans if not is_outlier_batch(s))
        if new_level and span["start"] != last:
            tail += "; it stays up: a new level of the grad norm, not an explosion"
        climb = None if led or new_level else _gradual_climb(grad_norm, span)
        if climb is not None:
            tail += (f"; it rose gradually, over {climb[0]} logged steps by at most x{climb[1]:.3g} each: a "
                     "growing grad norm, not an explosion")
        fell = None if led or new_level or climb is not None or span["recovered_step"] is not None \
            else _loss_fell_on(loss, span["start"])
        if fell is not None:
            tail += (f"; the loss went on falling, from {fell[0]:.4g} before it to {fell[1]:.4g} at the end: "
                     "it did no harm")
        # Back down with no loss spike, the last row alone, where nothing follows, a new level, a
        # gradual climb or one the loss fell on through: information.
        transient = not led and (span["recovered_step"] is not None or span["start"] == last or new_level
                                 or climb is not None or fell is not None)
        # An explosion that no loss spike followed and that is still up at the log's end is not got past
        # (one that led a loss spike is that spike's to tell: its incident says whether it recovered),
        # where rows on both sides tell: a baseline of one value, or a jump in the last two rows
        # (fairseq's gnorm x17 at a paste's last two lines, its loss still falling), may be a draw.
        rows_before = int(grad_norm.index.searchsorted(span["start"]))
        rows_up = len(grad_norm) - rows_before
        not_back = not transient and not led and span["recovered_step"] is None \
            and rows_before >= _GRAD_ROWS_BEFORE and rows_up >= _GRAD_ROWS_UP
        if not_back:
            tail += f"; still up at the last logged step {last}"
        message = (f"grad norm {metrics.GRAD_NORM_TOTAL} {'rose' if climb else 'jumped'} to {span['peak']:.4g} at step "
                   f"{span['peak_step']} ({_against(span)}); {tail}")
        details = {**_json(span), "loss_spike_step": led[0]["start"] if led else None,
                   "lead_steps": lead, "resolved": not not_back}
        incidents.append(Incident(IncidentKind.GRAD_SPIKE, span["start"], span["end"], Severity.INFO, message, details)
                         if transient else
                         Incident(IncidentKind.GRAD_EXPLOSION, span["start"], span["end"], Severity.WARNING,
                                  message, details))
    return incidents


def _gradual_climb(grad_norm: pd.Series, span: dict) -> tuple[int, float] | None:
    """The logged steps from the row before ``span`` to its peak and the largest rise between two
    of them, where the grad norm climbed there over :data:`_GRAD_CLIMB_ROWS` rows or more by under
    :data:`_GRAD_CLIMB_STEP` each; else None.

    Example:
        >>> norm = pd.Series([10.0, 12, 15, 19, 24, 30, 38, 48], index=range(8))
        >>> _gradual_climb(norm, {"start": 3, "peak_step": 7})
        (5, 1.27)
    """
    first = max(int(grad_norm.index.searchsorted(span["start"])) - 1, 0)
    values = grad_norm.to_numpy(dtype="float64")[first:int(grad_norm.index.searchsorted(span["peak_step"])) + 1]
    if len(values) < _GRAD_CLIMB_ROWS or not (values > 0).all():
        return None
    largest = float(np.max(values[1:] / values[:-1]))
    return (len(values) - 1, round(largest, 2)) if largest < _GRAD_CLIMB_STEP else None


def _loss_fell_on(loss: pd.Series | None, start: int) -> tuple[float, float] | None:
    """The loss's mean over the :data:`_GRAD_ROWS_UP` rows before ``start`` and over its last ones,
    where it has that many on both sides and the later mean is under :data:`_FELL_ON` of the
    earlier; else None.

    Example:
        >>> _loss_fell_on(pd.Series([4.0, 3.5, 3.0, 2.5, 2.0, 1.6, 1.3]), 3)
        (3.5, 1.633...)
    """
    if loss is None:
        return None
    at = int(loss.index.searchsorted(start))
    if at < _GRAD_ROWS_UP or len(loss) - at < _GRAD_ROWS_UP:
        return None
    values = loss.to_numpy(dtype="float64")
    before, end = float(values[at - _GRAD_ROWS_UP:at].mean()), float(values[-_GRAD_ROWS_UP:].mean())
    return (before, end) if before > 0 and end < _FELL_ON * before else None


def _score(score: float) -> str:
    # No score where the history had no spread yet (a jump judged on a row or two).
    return f", score {score:.3g}" if np.isfinite(score) else ""


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def _ratio(peak: float, baseline: float) -> float:
    return peak / baseline if baseline and np.isfinite(baseline) and baseline > 0 else float("nan")


def _times(ratio: float) -> str:
    return f"{ratio:.3g}x" if np.isfinite(ratio) else "vs"


# The units of a loss's last printed digit a spike must rise by, more than (see loss_spike_incidents).
_ROUNDING_UNITS = 2

# The detectors work in log space from this floor up: a baseline at it is a series at or below 0.
_NO_BASELINE = 1e-9
# A loss below 0 at this share of its values or more is a signed one (a likelihood's), not one that touched 0.
_SIGNED_SHARE = 0.1


def _against(span: dict) -> str:
    """``2.3x baseline 1.5``; for a baseline at the log-space floor (the series had been at or below
    0, a loss with a negative term), the ratio means nothing: said so instead.

    Example:
        >>> _against({"baseline": 1.5, "ratio": 2.3}), _against({"baseline": 1e-12, "ratio": 1.7e12})
        ('2.3x baseline 1.5', 'against a baseline at or below 0: no ratio')
    """
    if not span["baseline"] > _NO_BASELINE:
        return "against a baseline at or below 0: no ratio"
    return f"{_times(span['ratio'])} baseline {span['baseline']:.4g}"


def _json(span: dict) -> dict:
    return {k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in span.items()}
