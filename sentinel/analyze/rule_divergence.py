"""Divergence: the loss staying well above its best level, found by the guard's detector."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from sentinel.analyze.config import AnalyzeConfig
from sentinel.analyze.detector import (OVER_ONE_VALUE, detect_divergence, divergence_config, lucky_first_value,
                                       spike_config)
from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.noise import step_noise
from sentinel.analyze.spans import between, gap_rows
from sentinel.detect.divergence import NOISE_AFTER, measured_margin, whole_margin


def divergence_incidents(loss: pd.Series, spike_spans: list[dict] | None = None,
                         config: AnalyzeConfig | None = None, epochs: bool = False) -> list[Incident]:
    """One critical incident per diverged stretch, starting at the detector's onset; and one
    critical ``loss_spike`` when the log ends inside an elevated stretch younger than the
    detector's patience that no spike in ``spike_spans`` covers (see :func:`_unfinished_rise`).
    ``epochs``: each value is an epoch's mean (judged over five epochs, not 200 steps).

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
    frame = detect_divergence(loss, epochs=epochs)
    diverged = frame[frame["diverged"].to_numpy(dtype=bool)]
    incidents = []
    last = int(loss.index[-1])
    for onset, stretch in diverged.groupby("onset", sort=True):
        end = int(stretch.index[-1])
        incidents.append(_diverged(int(onset), end, float(stretch["best"].iloc[0]), float(stretch["level"].max()),
                                   ongoing=end == last))
    incidents = _over_one_value(_beyond_the_noise(_across_gaps(incidents, loss, frame, epochs), loss), loss)
    incidents = [_drawn_again(i, loss) for i in incidents]
    incidents = _within_short_noise(incidents, loss)
    ongoing = [i for i in incidents if not i.details["came_back"]]
    runaway = runaway_incidents(loss)
    if runaway and all(i.step >= runaway[0].step for i in ongoing):
        # A climb at every row to the log's end is told as that, from where it started: the
        # detector's stretch inside it is the same climb (Keras' x3.55 an epoch, read in epochs).
        if ongoing:
            runaway[0].details["detected"] = True  # long enough for the detector: not a few rows
        return [i for i in incidents if i.details["came_back"]] + runaway
    if not ongoing:
        incidents += _unfinished_rise(loss, frame, spike_spans or [], config or AnalyzeConfig())
    return incidents


def _diverged(start: int, end: int, best: float, worst: float, ongoing: bool) -> Incident:
    """The critical incident of a loss diverged from ``start`` to ``end``: its smoothed level up to
    ``worst`` against its ``best``; ``ongoing``: still diverged at the log's last step."""
    message = (f"loss diverged from step {start}: smoothed loss {worst:.4g} vs best {best:.4g} "
               f"({worst / best:.3g}x) until step {end}" if best > 0 else
               f"loss diverged from step {start}: smoothed loss {worst:.4g} vs best {best:.4g} until step {end}")
    message += "; still diverged at the last step" if ongoing else "; came back afterwards"
    return Incident(IncidentKind.DIVERGENCE, start, end, Severity.CRITICAL, message,
                    {"onset": start, "best_level": best, "max_level": worst, "came_back": not ongoing,
                     "resolved": False})


def _beyond_the_noise(incidents: list[Incident], loss: pd.Series) -> list[Incident]:
    """``incidents`` without the divergences that came back, began before the detector measured
    the loss's noise (its first 100 values: judged by the plain 10% margin) and stayed within
    the margin that noise gives once measured. A noisy single-batch loss logged every 200 steps
    rose 15-29% above a lucky first value for a few rows at the head of a healthy run: 6 of 40
    seeds diverged there, 1 does now (its rise x1.29 against a measured margin of x1.25). A log too
    short to measure it that way is held to the noise of all its values (a TF-Agents DQN loss of 27
    rows swinging x20 from row to row rose x1.12 and came back: "diverged", critical)."""
    early = [i for i in incidents if i.details["came_back"] and loss.index.searchsorted(i.step) < NOISE_AFTER]
    if not early:
        return incidents
    margin = measured_margin(loss.to_numpy())
    if margin is None:  # a log too short for the detector to measure its noise: the noise of all it holds
        margin = whole_margin(loss.to_numpy())
    within = {id(i) for i in early if i.details["max_level"] <= i.details["best_level"] * (1 + margin)}
    return [i for i in incidents if id(i) not in within]


# Values after a log's first one that stand this far above it leave it the best level alone.
_ONE_VALUE_MARGIN = 0.1


def _over_one_value(incidents: list[Incident], loss: pd.Series) -> list[Incident]:
    """``incidents`` with each divergence that came back and rose over the log's one first value (its
    best level that value alone, every value after it up to the onset above it) a warning: no level
    stood before it. A wav2vec 2.0 fine-tune's trainer_state, 0.269 for its first 25 steps, then
    0.46-0.97 until step 600 (its learning rate at its highest), then down to 0.2: "diverged",
    critical, on a run whose evaluations improved throughout.

    Example:
        >>> loss = pd.Series([0.27] + [0.6] * 30 + [0.3] * 40, index=range(25, 1800, 25))
        >>> [i.severity.value for i in divergence_incidents(loss)]
        ['warning']
    """
    first = float(loss.iloc[0]) if len(loss) else float("nan")

    def alone(incident: Incident) -> bool:
        after_first = loss[loss.index < incident.step].to_numpy(dtype="float64")[1:]
        return incident.kind == IncidentKind.DIVERGENCE and bool(incident.details.get("came_back")) and first > 0 \
            and incident.details["best_level"] == first and bool((after_first > first * (1 + _ONE_VALUE_MARGIN)).all())

    return [dataclasses.replace(i, severity=Severity.WARNING, message=i.message + (
        "; its best level is the log's first value alone, so whether the loss rose or that value was a lucky low one "
        "is not known")) if alone(i) else i for i in incidents]


def _drawn_again(incident: Incident, loss: pd.Series) -> Incident:
    """A divergence from the log's second row, still up at its end, told as information where its
    best level is the first value alone and a row after it draws that value again (comes within
    :data:`_ONE_VALUE_MARGIN` of it): a low draw of a noisy loss, not a level it left. A Ray Train
    worker's per-batch loss pasted from 0.518, then 0.905, 0.917, 0.833, 1.198, 1.418, 0.934,
    0.549, ...: "diverged, still diverged at the last step" (x1.77 its smoothed level), on a run
    its author called healthy. A loss that jumped to a level of its own (BigScience tr8's 6.44, then
    11.42 ... 7.16) never comes back to it.

    Example:
        >>> steps = range(6400, 24000, 1600)
        >>> loss = pd.Series([0.518, 0.905, 0.917, 0.833, 1.198, 1.418, 0.934, 0.549, 1.103, 0.891, 0.825], steps)
        >>> [(i.severity.value, i.message.split(":")[0]) for i in divergence_incidents(loss)]
        [('info', 'loss level up from step 8000')]
    """
    if incident.kind != IncidentKind.DIVERGENCE or incident.details["came_back"]:
        return incident
    values = loss.to_numpy(dtype="float64")
    onset = int(loss.index.searchsorted(incident.step))
    first = float(values[0])
    again = np.flatnonzero(values[onset:] <= first * (1 + _ONE_VALUE_MARGIN))
    if onset != 1 or not first > 0 or incident.details["best_level"] != first or not again.size:
        return incident
    row = onset + int(again[0])
    worst = incident.details["max_level"]
    return dataclasses.replace(incident, severity=Severity.INFO, message=(
        f"loss level up from step {incident.step}: smoothed loss {worst:.4g} vs the log's first "
        f"value {first:.4g} ({worst / first:.3g}x) to the last step {incident.end_step}; a row "
        f"after it draws that value again ({values[row]:.4g} at step {loss.index[row]}): the first value was a low "
        "draw of a noisy loss, not a level it left; worth watching"))


# Values a log needs, at least, for its noise to be measured over all of them: a paste of 3 or 7 rows
# around a spike has that spike for its noise (BigScience tr8's glitches, whose authors call them
# diverged, "it stayed there"). Ten have one of their own: pytorch-semseg's 17 rows of one batch's loss
# swinging 0.53-1.28 (x1.44 over a first value taken for its best) and TESTAM's 14 epochs (x1.17) were
# "diverged", critical, on runs their authors called normal; pastes of 9-19 rows that did diverge
# (x6.7 after a spike that stayed, x35, a runaway) rise far beyond their noise.
_FEWEST_FOR_NOISE = 10


def _within_short_noise(incidents: list[Incident], loss: pd.Series) -> list[Incident]:
    """``incidents`` with each divergence still up at the end of a log too short for the detector to
    measure its noise (:data:`NOISE_AFTER` values) but long enough to have one of its own
    (:data:`_FEWEST_FOR_NOISE`), whose rise stays within the noise of all its values
    (:func:`whole_margin`), told as information: a level 10% up over a few noisy rows is
    worth a look, not a restart. A GPT-2 fine-tune's single-batch loss logged every 50 steps, 50
    rows swinging 1.2-3.1, its last ten x1.1 over its best level: "diverged", critical."""
    ongoing = [i for i in incidents if i.kind == IncidentKind.DIVERGENCE and not i.details["came_back"]]
    if not ongoing or not _FEWEST_FOR_NOISE <= len(loss) <= NOISE_AFTER:
        return incidents
    margin = whole_margin(loss.to_numpy())
    within = {id(i) for i in ongoing if 0 < i.details["best_level"]
              and i.details["max_level"] <= i.details["best_level"] * (1 + margin)}
    return [dataclasses.replace(i, severity=Severity.INFO, message=(
        f"loss level up from step {i.step}: smoothed loss {i.details['max_level']:.4g} vs best "
        f"{i.details['best_level']:.4g} ({i.details['max_level'] / i.details['best_level']:.3g}x) to the last step "
        f"{i.end_step}, within the noise of this short log's values (x{1 + margin:.3g} from row to row): too few rows "
        "to call it diverged; worth watching")) if id(i) in within else i for i in incidents]


def _across_gaps(incidents: list[Incident], loss: pd.Series, frame: pd.DataFrame, epochs: bool) -> list[Incident]:
    """``incidents`` with each divergence that runs across a stretch the log skips
    (``spans.gap_rows``) cut to start after its last row back at the best level, and dropped
    where what is left lasts less than the detector's patience: nothing is known
    of the skipped steps, so only a loss up at every row on both sides of a gap stayed up.
    BigScience tr8's 11.42 at 7,010, ``[...]``, 7.16 at 7,220 against 6.44 (its authors: it
    "stayed there") diverged; CHGNet's noisy paste, back at its best at 26,400 after the "...",
    did not ("diverged from step 300 until 26500"); PixelLink's spike at 6,450 came back by 6,510,
    and its loss up at every row from 10,830 across two gaps diverged from there."""
    steps = loss.index.to_numpy()
    if not incidents or not np.issubdtype(steps.dtype, np.integer):
        return incidents
    gaps = gap_rows(steps)
    if not gaps.size:
        return incidents
    config = divergence_config(loss.index, epochs)
    values = loss.to_numpy()
    kept = []
    for incident in incidents:
        if incident.kind != IncidentKind.DIVERGENCE or incident.details.get("runaway"):
            kept.append(incident)
            continue
        lo, hi = int(steps.searchsorted(incident.step)), int(steps.searchsorted(incident.end_step, side="right"))
        if not ((gaps >= lo) & (gaps < hi - 1)).any():
            kept.append(incident)
            continue
        best = incident.details["best_level"]
        part = values[lo:hi]
        back = np.flatnonzero(~((part - best > config.margin * abs(best)) & (part - best > config.atol)))
        if not back.size:
            kept.append(incident)
            continue
        lo += int(back[-1]) + 1
        if lo >= hi or steps[hi - 1] - steps[lo] < config.patience:
            continue  # what is left, up at every row, is too short to have diverged
        start = int(steps[lo])
        levels = between(frame["level"], start, incident.end_step)
        worst = float(levels.max()) if len(levels) else float(values[lo:hi].max())
        kept.append(_diverged(start, incident.end_step, best, worst, ongoing=not incident.details["came_back"]))
    return kept


# A loss that rose at each of its last RUNAWAY_RISES logged steps, by RUNAWAY_GROWTH in all.
RUNAWAY_RISES = 5
RUNAWAY_GROWTH = 10.0
# ... a GAN generator's, whose rises are the game (it climbs for epochs while its discriminator
# wins): by three orders of magnitude.
GAN_RUNAWAY_GROWTH = 1000.0


def runaway_incidents(loss: pd.Series, growth: float = RUNAWAY_GROWTH) -> list[Incident]:
    """The loss rose at every one of its last :data:`RUNAWAY_RISES` or more logged steps, to
    ``growth`` times or more where the climb started: a divergence however few steps it spans
    (a log of epochs never reaches the detector's patience in steps; Keras' SGD on unscaled
    inputs: 451, 1603, 5698, ... 1.8e9, x3.5 an epoch). Asked of a GAN's generator loss with
    :data:`GAN_RUNAWAY_GROWTH` (DerainNet's 112, 244, 3335, ... 7.4e30, then inf).

    Example:
        >>> loss = pd.Series([112.0, 244.0, 3335.0, 22600.0, 143878.0, 2.5e6], index=range(6))
        >>> runaway_incidents(loss, GAN_RUNAWAY_GROWTH)[0].message.split(":")[0]
        'loss diverged from step 0'
    """
    values = loss.to_numpy(dtype="float64")
    if len(values) < 2:
        return []
    rising = np.diff(values) > 0
    rises = len(rising) if rising.all() else int(np.argmin(rising[::-1]))
    if rises < RUNAWAY_RISES:
        return []
    start = values[-rises - 1]
    if not (start > 0 and values[-1] >= growth * start):
        return []
    steps = loss.index.to_numpy()
    first, last = int(steps[-rises - 1]), int(steps[-1])
    grew = values[-1] / start
    message = (f"loss diverged from step {first}: it rose at each of the last {rises} logged steps, from "
               f"{start:.4g} to {values[-1]:.4g} at step {last} ({grew:.3g}x, x{grew ** (1 / rises):.3g} per "
               "step), and was still rising when the log ends: lower the learning rate (or scale the inputs)")
    return [Incident(IncidentKind.DIVERGENCE, first, last, Severity.CRITICAL, message,
                     {"onset": first, "best_level": float(start), "max_level": float(values[-1]),
                      "came_back": False, "runaway": True, "resolved": False})]


def size_runaway_incidents(loss: pd.Series, growth: float = GAN_RUNAWAY_GROWTH) -> list[Incident]:
    """A GAN's loss whose size ran away by orders of magnitude, whichever way its sign went: each of
    its last :data:`RUNAWAY_RISES` logged values ``growth`` times or more the size of its first ones
    (their median). audiolm-pytorch's SoundStream, 4.5 through step 25,008, then -6.5e5, -1.5e6,
    -2.4e6, 2.8e6, 1.5e7, 1.2e7, 2.4e6: no rise at every row, so no runaway, a 'healthy' run its
    author called horrible.

    Example:
        >>> loss = pd.Series([4.5, 4.9, 4.4, 4.7, 4.6, -6.5e5, -1.5e6, -2.4e6, 2.8e6, 1.5e7, 1.2e7, 2.4e6], index=range(12))
        >>> size_runaway_incidents(loss)[0].message.split(":")[0]
        "the loss's size ran away by orders of magnitude from step 5"
    """
    size = np.abs(loss.to_numpy(dtype="float64"))
    if len(size) < 2 * RUNAWAY_RISES:
        return []
    base = float(np.median(size[:RUNAWAY_RISES]))
    huge = size >= growth * base
    if not base > 0 or not bool(huge[-RUNAWAY_RISES:].all()):
        return []
    onset = len(huge) - (int(np.argmin(huge[::-1])) if not huge.all() else len(huge))
    steps = loss.index.to_numpy()
    first, last = int(steps[onset]), int(steps[-1])
    message = (f"the loss's size ran away by orders of magnitude from step {first}: {float(loss.iloc[onset]):.4g} "
               f"there, {float(loss.iloc[-1]):.4g} at step {last}, against {base:.4g} at its start "
               f"(x{float(np.median(size[onset:])) / base:.3g}): a game no longer played (lower the learning rates)")
    return [Incident(IncidentKind.DIVERGENCE, first, last, Severity.CRITICAL, message,
                     {"onset": first, "best_level": base, "max_level": float(size[onset:].max()),
                      "came_back": False, "runaway": True, "resolved": False})]


# The rows before a rise that give its reference level and noise, and how many robust standard
# deviations (1.4826 x the median absolute deviation, in log space) the rise's median must clear;
# with fewer than five rows before it, the rise's own rows that measure its noise.
_NOISE_ROWS = 50
_NOISE_SIGMAS = 3.0
_RISE_NOISE_ROWS = 6


def _above_noise(before: np.ndarray, rise: np.ndarray) -> bool:
    """Whether the median of ``rise`` stands above the rows ``before`` it by more than their
    noise: a flat loss with 10% batch noise has runs of high rows at its end all the time (over
    50 steps, a quarter of such logs ended "still elevated" against a best level that was one of
    its lowest medians). Where too few rows came before, True.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> flat = 2 * np.exp(rng.normal(0, 0.1, 45))
        >>> _above_noise(flat, np.array([2.2, 2.1, 2.25])), _above_noise(flat, np.array([3.1, 3.4, 3.3]))
        (False, True)
    """
    before = before[-_NOISE_ROWS:]
    if not len(before):
        return True
    # In log space where the loss is positive (its noise scales with it); else as it is (a loss
    # with a negative term, a PSNR loss at -30 dB).
    positive = bool((before > 0).all() and (rise > 0).all())
    scale = np.log if positive else np.asarray
    levels = scale(before)
    center = float(np.median(levels))
    if len(before) >= 5:
        spread = 1.4826 * float(np.median(np.abs(levels - center)))
    elif len(rise) >= _RISE_NOISE_ROWS:  # a "rise" from the log's first rows on: its own row-to-row
        # noise (its successive differences about their median: a trend moves them all alike),
        # against the few rows before it
        spread = step_noise(scale(rise))
    else:
        return True
    return float(scale(np.median(rise))) - center > _NOISE_SIGMAS * spread


def _large_rise(peak: float, best: float, rtol: float) -> bool:
    """Whether ``peak`` stands more than ``rtol`` of the best level's size above it: ``best * (1 +
    rtol)`` for a positive level, ``rtol * |best|`` above a negative one (a PSNR loss's -30.7 dB,
    where x1.5 would be -46, below any value it takes).

    Example:
        >>> _large_rise(3.2, 2.0, 0.5), _large_rise(-27.5, -30.7, 0.5), _large_rise(5.0, -1.0, 0.5)
        (True, False, True)
    """
    return peak - best > rtol * abs(best) if best < 0 else peak > best * (1.0 + rtol)


def _unfinished_rise(loss: pd.Series, frame: pd.DataFrame, spike_spans: list[dict],
                     config: AnalyzeConfig) -> list[Incident]:
    """The loss is above its best level at the last logged step, and has been for fewer steps
    than the divergence detector's patience.

    A rise spread over several logged rows can stay under the spike rule's jump threshold at
    every row, because each row's baseline already holds the rows before it that were rising
    too (BigScience tr8-104B exp2, logged every 10 iterations: 6.37, 6.60, 7.31, 9.12, 10.24,
    each at most x1.4 its short history). The divergence detector sees it (its best level is
    the level before the rise), but the log ends before its patience runs out, as a short
    excerpt or a run stopped early does. Say what can be said: the loss rose from a step and
    had not come back when the log ends, too soon to tell a spike from a divergence. With fewer
    rows before the rise than the spike rule's warm-up, only a rise above its short-history
    jump (x1.5) counts.
    """
    from sentinel.detect import DivergenceConfig  # pandas-heavy: imported when analysing

    last_row = frame.iloc[-1]
    if not bool(last_row["elevated"]) or bool(last_row["diverged"]):
        return []
    onset, last = int(last_row["onset"]), int(loss.index[-1])
    if onset >= last:
        return []  # one last row: nothing after it says whether it was a blip or a rise
    if any(span["start"] <= last and span["end"] >= onset for span in spike_spans):
        return []  # the spike rule already reports this rise
    part = between(loss, onset, last)
    peak_step, peak = int(part.idxmax()), float(part.max())
    best = float(last_row["best"])
    # A best level that rests on a few rows (the start of an excerpt) is weak evidence: there,
    # as in the spike rule before its warm-up, only a large rise counts (x1.5: BigScience exp2's
    # 6.37 -> 10.24 over 4 rows is one; a detector run's 1.02 then 1.25-1.38 is batch noise).
    spike = spike_config(config)  # the spike rule's settings, with the user's --warmup
    if int((loss.index < onset).sum()) < spike.warmup and not _large_rise(peak, best, spike.short_rtol):
        return []
    if not _above_noise(loss[loss.index < onset].to_numpy(dtype="float64"), part.to_numpy(dtype="float64")):
        return []  # a few high rows of a noisy loss: its best level is a low draw, not the level
    patience = DivergenceConfig().patience
    message = (f"loss rose from step {onset}: {peak:.4g} at step {peak_step} vs best level {best:.4g} "
               f"({peak / best:.3g}x), still elevated at the last logged step {last}; the log ends "
               f"{last - onset} steps into the rise, too soon to tell a spike from a divergence "
               f"(patience {patience} steps)" if best > 0 else
               f"loss rose from step {onset} to {peak:.4g} at step {peak_step}, still elevated at the "
               f"last logged step {last}")
    # Over the log's one first value that the rise's rows may have drawn (a paste of a noisy per-step
    # loss from 1258, then 2635, 1867, ...), a rise and a lucky low first value cannot be told apart.
    alone = int((loss.index < onset).sum()) == 1 and lucky_first_value(float(loss.iloc[0]),
                                                                       part.to_numpy(dtype="float64"))
    if alone:
        message += f"; {OVER_ONE_VALUE}"
    return [Incident(IncidentKind.LOSS_SPIKE, onset, last, Severity.WARNING if alone else Severity.CRITICAL, message,
                     {"start": onset, "end": last, "peak_step": peak_step, "peak": peak,
                      "baseline": best, "ratio": peak / best if best > 0 else None,
                      "recovered_step": None, "recovered": False, "steps_to_recover": None,
                      "unfinished": True, "resolved": False})]
