"""The guard's detectors, run offline over a run's series with the analyzer's overrides."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from sentinel.analyze.config import AnalyzeConfig, InvalidThreshold
from sentinel.analyze.noise import mad_sigma
from sentinel.analyze.spans import cadence

# AnalyzeConfig fields forwarded to the detector's SpikeConfig when set (--window, ...).
_SPIKE_OVERRIDES = ("window", "threshold", "warmup")


def spike_config(config: AnalyzeConfig):
    """The detector's ``SpikeConfig`` with the user's window/threshold/warm-up applied.

    Raises:
        ValueError: the detector has no such setting, or rejects the value.

    Example:
        >>> spike_config(AnalyzeConfig(window=20)).window  # doctest: +SKIP
        20
    """
    from sentinel.detect import SpikeConfig  # pandas-heavy: imported when analysing

    names = {f.name for f in dataclasses.fields(SpikeConfig)}
    overrides = {k: getattr(config, k) for k in _SPIKE_OVERRIDES if getattr(config, k) is not None}
    missing = sorted(set(overrides) - names)
    if missing:
        raise ValueError(f"the spike detector has no setting {', '.join(missing)}: "
                         f"its settings are {', '.join(sorted(names))}")
    defaults = {f.name: f.default for f in dataclasses.fields(SpikeConfig)}
    window, warmup = overrides.get("window", defaults["window"]), overrides.get("warmup", defaults["warmup"])
    if warmup > window:  # one of them is the detector's default: say which, and what fits
        if "warmup" in overrides:
            raise InvalidThreshold("warmup", f"warmup={warmup} is invalid: pass an integer from 2 to the window, "
                                             f"{window} by default (a longer window takes a longer warm-up)")
        raise InvalidThreshold("window", f"window={window} is invalid: it is shorter than the detector's warm-up, "
                                         f"{warmup} by default: pass a window of at least {warmup}, or a warmup "
                                         f"from 2 to {window}")
    return SpikeConfig(**overrides)


def loss_warmup(loss: pd.Series, config: AnalyzeConfig, epoch_means: bool = False) -> AnalyzeConfig:
    """``config`` with the spike detector's warm-up for this finite loss, where the user set none:
    5 values for a loss of epoch means (its rows are few and smooth: 20 were two thirds of a
    30-epoch run), a fifth of a whole run of 21-99 values (5 at least: a loss every 100 batches
    spent most of itself in the warm-up). A log no longer than the warm-up is judged on big jumps
    throughout, and an excerpt from mid-run keeps its own rule (big jumps until it has history).

    Example:
        >>> thirty, one = pd.Series(range(30), dtype=float), pd.Series([1.0])
        >>> loss_warmup(thirty, AnalyzeConfig()).warmup, loss_warmup(one, AnalyzeConfig()).warmup
        (6, None)
    """
    if config.warmup is not None:
        return config
    if epoch_means:
        return dataclasses.replace(config, warmup=_EPOCH_WARMUP)
    warmup = warmup_steps(config)
    if warmup < len(loss) < 5 * warmup and not _starts_mid_run(loss, warmup):
        return dataclasses.replace(config, warmup=max(_EPOCH_WARMUP, len(loss) // 5))
    return config


# The spike detector's warm-up, in values, for a loss of epoch means (see loss_warmup): the outlier
# test's spread is measured on four differences from there on.
_EPOCH_WARMUP = 5


def warmup_steps(config: AnalyzeConfig) -> int:
    """How many values of history the spike detector needs before its outlier test runs
    (before that it flags only large jumps)."""
    return int(spike_config(config).warmup)


def loss_atol(loss: pd.Series, atol: float) -> float:
    """The spike detector's absolute part (``atol``, 0.2: nats of a language model's cross-entropy)
    for this loss: a tenth of its starting level where that is less. A detection loss logged at
    0.09, whose spike to 0.28 is x3, never cleared 0.2. (The divergence detector keeps its own:
    with a tenth of the start, a 2-row spike lifted its smoothed level into a "divergence"; a
    small loss that jumps and stays is a spike that did not recover.)

    Example:
        >>> loss_atol(pd.Series([0.18, 0.15, 0.12]), 0.2), loss_atol(pd.Series([10.9, 9.0]), 0.2)
        (0.015, 0.2)
    """
    start = float(loss.iloc[:_START_VALUES].median()) if len(loss) else float("nan")
    return min(atol, _ATOL_OF_START * start) if start > 0 else atol


# The loss's starting level (see loss_atol): the median of its first values, and the share of it
# that is the absolute part. A loss that falls near zero from a start of 2 keeps 0.2 (its batches
# up to 0.1 are no spikes); one that starts at 0.15 has 0.015.
_START_VALUES = 20
_ATOL_OF_START = 0.1


def detect_spikes(series: pd.Series, config: AnalyzeConfig, *, start_jump: float | None = None,
                  atol: float | None = None) -> pd.DataFrame:
    """Run the guard's spike detector over a finite series (index = step).

    A series longer than ``warmup`` is judged from its ``warmup``-th value on, like the guard
    judges a live run; a shorter one (a log excerpt around an incident) is judged on large jumps
    against the little history it has. ``atol``: the absolute part, where not the detector's
    (:func:`loss_atol`). ``start_jump`` is the jump (``short_rtol``) that counts in
    a short log that starts at its run's start: grad norms move a lot in a run's first steps (x1.75
    is ordinary, x9 is not), while a loss that jumps x1.5 there is still news.

    Returns:
        The detector's frame (``is_spike``, ``score``, ``baseline``, ...) in its sparse mode:
        the rows of the values that can be spikes and of the two after each (every row a span
        of spikes holds), indexed by step; any other step is not a spike.

    Example:
        >>> s = pd.Series([2.0] * 30 + [9.0] + [2.0] * 5)
        >>> frame = detect_spikes(s, AnalyzeConfig())
        >>> frame.index[frame["is_spike"]].tolist(), float(frame.loc[30, "baseline"])
        ([30], 2.0)
    """
    from sentinel.detect import detect_spikes as _detect_spikes

    cfg = spike_config(config)
    if atol is not None:
        cfg = dataclasses.replace(cfg, atol=atol)
    mid_run = _starts_mid_run(series, cfg.warmup)
    if start_jump is not None and not mid_run:
        cfg = dataclasses.replace(cfg, short_rtol=max(cfg.short_rtol, start_jump))
    if len(series) <= 2:  # one value's history: no spread, no trend, only a large jump tells
        cfg = dataclasses.replace(cfg, short_rtol=max(cfg.short_rtol, _TWO_VALUES_JUMP))
    if len(series) > cfg.warmup and not mid_run:
        # A whole run: its first values are its warm-up, judged as the guard judges them, on the
        # outlier rule not at all. A short excerpt, which has no more history than that, and a
        # log that starts long after the run's start (a paste from step 1136 on) are judged on
        # big jumps until they have the history for more.
        frame = _detect_spikes(series, dataclasses.replace(cfg, min_history=cfg.warmup), sparse=True)
        # Only a jump no healthy start makes counts there (a loss logged every 100 steps spends
        # 2,000 steps in those values).
        early_cfg = dataclasses.replace(cfg, min_history=min(_EARLY_HISTORY, cfg.warmup),
                                        short_rtol=max(cfg.short_rtol, _EARLY_JUMP, start_jump or 0.0))
        frame = _far_above_the_window(series, frame, cfg)
        head = series.iloc[:cfg.warmup]
        early = _detect_spikes(head, early_cfg, sparse=True).copy()
        # ... and rises past twice every value before it: a noisy start (an RL loss's episodes)
        # jumps x3 over a median of three or four values as it goes.
        highest = head.cummax().shift(1).reindex(early.index).to_numpy()
        early["is_spike"] &= head.reindex(early.index).to_numpy() > _EARLY_ABOVE_ALL * highest
        if not early["is_spike"].any():
            return frame
        return pd.concat([early, frame[frame.index >= series.index[cfg.warmup]]])
    frame = _above_its_noise(series, _detect_spikes(series, cfg, sparse=True), cfg)
    return _above_what_follows(series, _far_above_the_window(series, frame, cfg), cfg)


# While the history is shorter than the warm-up the detector judges a jump by its size alone (x1.5).
# A jump under x2 counts there only where it also stands this many robust sigmas above where the
# history's own steps lead (its last value, moved by its typical step; the sigma from how far its
# steps stray from that), once the history has values enough to measure them: a short paste of a
# noisy per-batch loss (a diffusion loss at random timesteps, 0.06-0.25; a contrastive loss) rose
# x1.5-x1.8 over its median at under 2 such sigmas, where the jumps authors reported stood higher;
# a curve falling steadily, whose steps are alike, keeps a x3 epoch.
# A log of two values (a paste of two lines) is judged on a jump past x3 (a language model's 2.28 ->
# 11.05, gpt-neox#947); one of x1.5 between two values of a noisy loss says nothing.
_TWO_VALUES_JUMP = 2.0
_SHORT_JUMP_SIGMAS = 3.0
_SHORT_SURE_JUMP = 2.0
_NOISE_HISTORY = 4
# A jump of x2 or more is held to the same spread where the history (its first value and its
# spikes aside) has been nearly as high, no more than this below it.
_SHORT_ABOVE_ALL = 1.25


def _above_its_noise(series: pd.Series, frame: pd.DataFrame, cfg) -> pd.DataFrame:
    """``frame`` without the spikes of a short history that stay within its own spread
    (:data:`_SHORT_JUMP_SIGMAS`, :data:`_SHORT_ABOVE_ALL`).

    Example:
        >>> s = pd.Series([0.25, 0.09, 0.06, 0.12, 0.07, 0.16, 0.09, 0.1])
        >>> from sentinel.detect import detect_spikes as raw
        >>> cfg = dataclasses.replace(spike_config(AnalyzeConfig()), atol=0.02)
        >>> bool(raw(s, cfg, sparse=True).loc[5, "is_spike"]), bool(_above_its_noise(s, raw(s, cfg, sparse=True), cfg).loc[5, "is_spike"])
        (True, False)
    """
    if frame.empty or not frame["is_spike"].any():
        return frame
    history = frame["history"].to_numpy()
    candidates = np.flatnonzero(frame["is_spike"].to_numpy(dtype=bool) & (history < cfg.warmup)
                                & (history >= _NOISE_HISTORY))
    if not len(candidates):
        return frame
    from sentinel.detect.spike import to_log

    values = series.to_numpy(dtype="float64")
    logs = to_log(values)  # the detector's log space
    at = series.index.get_indexer(frame.index[candidates])
    # The rows flagged: a spike's own rows are no part of the spread its later rows are held to.
    spiked = np.zeros(len(values), dtype=bool)
    spiked[series.index.get_indexer(frame.index[frame["is_spike"].to_numpy(dtype=bool)])] = True
    within = np.zeros(len(frame), dtype=bool)
    for row, i in zip(candidates.tolist(), at.tolist()):
        # The highest the history has been, its first value and its spikes aside (a log from its
        # run's start starts at its highest): a jump of x2 or more counts unless it stayed nearly
        # that low; one under x2 no higher than it is within the spread.
        before = values[i - int(history[row]) + 1:i][~spiked[i - int(history[row]) + 1:i]]
        highest = before.max() if len(before) else -np.inf
        sure = frame["ratio"].iat[row] >= _SHORT_SURE_JUMP
        if sure and values[i] > _SHORT_ABOVE_ALL * highest:
            continue
        if not sure and values[i] <= highest:
            within[row] = True
        else:
            steps = np.diff(logs[i - int(history[row]):i])
            typical = float(np.median(steps))
            within[row] = (logs[i] - (logs[i - 1] + typical)) / mad_sigma(steps, typical) < _SHORT_JUMP_SIGMAS
        spiked[i] = not within[row]  # a row found within the spread is the spread's, for the rows after it
    if not within.any():
        return frame
    frame = frame.copy()
    frame.loc[within, "is_spike"] = False
    return frame


# ... and on its last row, where no row after it tells its spread, a jump under this (as over two
# values: _TWO_VALUES_JUMP's x3) is none, unless it stands out of the steps of the rows before it.
_LAST_ROW_JUMP = 3.0
# A jump with fewer rows before it than _NOISE_HISTORY is held to the spread of the rows around it
# instead (before it, and after it came back until the next spike), where they are this many or more.
SPREAD_ROWS = 5


def _above_what_follows(series: pd.Series, frame: pd.DataFrame, cfg) -> pd.DataFrame:
    """``frame`` without the spikes of a short log's first rows (fewer than :data:`_NOISE_HISTORY`
    before them: no spread of their own to be held to) that stand within
    :data:`_SHORT_JUMP_SIGMAS` robust sigmas of the rows around them: those before it and those
    from where the loss came back (under the jump's x1.5 of its baseline) to the next spike. A
    paste of a noisy per-batch loss that opens on a low value (BTS's 0.587, then 0.970, then
    0.40-0.85; PaddleSeg's 0.049, then 0.23, 0.29 and 0.07-0.32 after; DiffTF's 1.70, 0.74, 0.18,
    then 1.64 x2.2 among 0.13-1.85) rose over a value or three and was "a spike". A rise that never came back stays one
    (BigScience tr8b's 2.67 -> 4.37, 4.37, 4.39, ...), and so does one the rows after it never
    come near (PSMNet's 17.4, 33.4, 36.8, 28.9, 18.6, 17.4). Fewer than five such rows hold no
    spread (BigScience tr8's grad norm, 98k, 220k at its labelled spike, then 17k, is as ms-swift's
    loss near its floor, 2.8e-4, 5.6e-4, 7.1e-5: the jump stands).

    Example:
        >>> s = pd.Series([0.587, 0.970, 0.852, 0.468, 0.398, 0.396, 0.725, 0.694, 0.810, 0.508])
        >>> from sentinel.detect import detect_spikes as raw
        >>> cfg = spike_config(AnalyzeConfig())
        >>> bool(raw(s, cfg, sparse=True).loc[1, "is_spike"]), bool(_above_what_follows(s, raw(s, cfg, sparse=True), cfg).loc[1, "is_spike"])
        (True, False)
    """
    if frame.empty or not frame["is_spike"].any():
        return frame
    flagged = frame["is_spike"].to_numpy(dtype=bool)
    history = frame["history"].to_numpy()
    candidates = np.flatnonzero(flagged & (history < _NOISE_HISTORY))
    if not len(candidates):
        return frame
    from sentinel.detect.spike import to_log

    values = series.to_numpy(dtype="float64")
    logs = to_log(values)
    spiked = np.zeros(len(values), dtype=bool)
    spiked[series.index.get_indexer(frame.index[flagged])] = True
    within = np.zeros(len(frame), dtype=bool)
    for row, i in zip(candidates.tolist(), series.index.get_indexer(frame.index[candidates]).tolist()):
        back_under = frame["baseline"].iat[row] * (1 + cfg.short_rtol)
        if i == len(values) - 1:  # a short log's last row: nothing after it to hold it to, but the
            # rows before it (BigScience tr8's 3.11, 3.11, then 7.71: x2.48, 52 sigmas of their steps)
            within[row] = frame["ratio"].iat[row] < _LAST_ROW_JUMP and not frame["score"].iat[row] >= cfg.threshold
            continue
        back = i + 1 + np.flatnonzero(values[i + 1:] < back_under)
        if not len(back):
            within[row] = history[row] <= 1 and _lucky_first(logs, spiked, i)
            continue  # never came back: a level, unless the one value before was a lucky low one
        later = np.flatnonzero(spiked[back[0]:])
        until = back[0] + (int(later[0]) if len(later) else len(values) - back[0])
        rest = np.r_[logs[:i][~spiked[:i]], logs[back[0]:until]]
        if len(rest) < SPREAD_ROWS:
            continue
        within[row] = _sigmas_above(rest, logs[i]) < _SHORT_JUMP_SIGMAS
    if not within.any():
        return frame
    frame = frame.copy()
    frame.loc[within, "is_spike"] = False
    return frame


# What is said of a rise measured against a log's one first value.
OVER_ONE_VALUE = ("measured against the one value before it, whether the loss rose or that value was a lucky low "
                  "one is not known")


def lucky_first_value(first: float, rows: np.ndarray) -> bool:
    """Whether a log's one value before a rise, ``first``, may be a lucky low draw of the rise's
    ``rows``: fewer than :data:`SPREAD_ROWS` of them tell nothing (True); else it stands within
    :data:`_SHORT_JUMP_SIGMAS` robust sigmas of their median (in log space, where all are positive).
    A Trainer paste's 1258, then 2635, 1867, 1691, 1430, 2164 may be; a Whisper fine-tune's 1.24, then
    1.84, 1.87, 1.80, 1.72, 1.59, 1.58, 2.41 (its lr warming up to 3e-3) rose.

    Example:
        >>> lucky_first_value(1258, np.array([2635, 1867, 1691, 1430, 2164.0]))
        True
        >>> lucky_first_value(1.24, np.array([1.84, 1.87, 1.80, 1.72, 1.59, 1.58, 2.41]))
        False
    """
    if len(rows) < SPREAD_ROWS:
        return True
    positive = first > 0 and bool((rows > 0).all())
    levels = np.log(rows) if positive else np.asarray(rows, dtype="float64")
    return -_sigmas_above(levels, float(np.log(first) if positive else first)) < _SHORT_JUMP_SIGMAS


def _lucky_first(logs: np.ndarray, spiked: np.ndarray, i: int) -> bool:
    """Whether a jump at row ``i`` over a log's single first value, that never came back under
    it, is that value's luck and not a new level: the rows after it (spikes left out, five or
    more) hold both the first value and the jump within :data:`_SHORT_JUMP_SIGMAS` robust sigmas.
    CLIP4Clip's per-batch contrastive loss pasted from 0.0099, then 0.060, then 0.016-0.095: a
    "spike x6.1 not recovered" of a run at its usual level. BigScience tr8b's 2.67 -> 4.37, 4.37,
    4.39, ... is a new level (its first value lies far below the rows after it).

    Example:
        >>> logs = np.log([0.0099, 0.060, 0.034, 0.0215, 0.030, 0.046, 0.0376, 0.041, 0.016, 0.019, 0.0275, 0.0226])
        >>> _lucky_first(logs, np.zeros(12, dtype=bool), 1), _lucky_first(np.log([2.0, 4, 4.1, 3.9, 4.2, 4, 4.1]), np.zeros(7, dtype=bool), 1)
        (True, False)
    """
    after = logs[i + 1:][~spiked[i + 1:]]
    if len(after) < SPREAD_ROWS:
        return False
    return -_sigmas_above(after, logs[0]) < _SHORT_JUMP_SIGMAS and _sigmas_above(after, logs[i]) < _SHORT_JUMP_SIGMAS


def _sigmas_above(rows: np.ndarray, value: float) -> float:
    """How many robust sigmas ``value`` stands above the median of ``rows`` (below: negative).

    Example:
        >>> round(_sigmas_above(np.array([1.0, 2.0, 3.0, 4.0, 5.0]), 6.0), 2)
        2.02
    """
    middle = float(np.median(rows))
    return float((value - middle) / mad_sigma(rows, middle))


# A value this many times every value of the window before it is a spike, whatever the spread says
# (at the detector's own threshold; a stricter one asked for, --threshold 12, asks that much more).
_ABOVE_WINDOW = 2.0


def _far_above_the_window(series: pd.Series, frame: pd.DataFrame, cfg) -> pd.DataFrame:
    """``frame`` with the rows flagged whose value is more than :data:`_ABOVE_WINDOW` times every
    value of the window before it (times the threshold over the detector's own, where that is
    higher; past the warm-up, the relative and absolute parts met): a spread
    the run's own wobbling widened hides a jump the outlier part finds in a calm stretch (a loss
    going 0.4-1.8 for twenty steps, then 5.1: 5.2 sigmas, under the 6). The guard acts on the
    outlier part alone, as it must step by step; the analysis sees the jump for what it is.

    Example:
        >>> s = pd.Series([0.43, 0.74, 0.41, 0.6, 1.1, 1.8, 0.9, 1.3, 0.5, 1.0] * 3 + [5.1, 0.9])
        >>> from sentinel.detect import detect_spikes as raw
        >>> cfg = spike_config(AnalyzeConfig())
        >>> bool(raw(s, cfg, sparse=True).loc[30, "is_spike"]), bool(_far_above_the_window(s, raw(s, cfg, sparse=True), cfg).loc[30, "is_spike"])
        (False, True)
    """
    if frame.empty or len(series) <= cfg.warmup:
        return frame
    from sentinel.detect import SpikeConfig

    above = _ABOVE_WINDOW * max(1.0, cfg.threshold / SpikeConfig().threshold)
    # Only a value above twice the baseline can be above twice the window's top (which is at least
    # the baseline, a median of it): a few rows of any run, each window's top taken on its own.
    rows = np.flatnonzero((frame["ratio"].to_numpy() > max(above, 1 + cfg.rtol))
                          & ~frame["is_spike"].to_numpy(dtype=bool))
    if not len(rows):
        return frame
    at = series.index.get_indexer(frame.index[rows])
    rows, at = rows[at >= cfg.warmup], at[at >= cfg.warmup]
    if not len(rows):
        return frame
    values = series.to_numpy(dtype="float64")
    bounds = np.empty(2 * len(at), dtype=np.intp)
    bounds[0::2], bounds[1::2] = np.maximum(at - cfg.window, 0), at  # each window: the values before the row
    before = np.maximum.reduceat(values, bounds)[0::2]
    here = values[at]
    far = (here > above * before) & (here - frame["baseline"].to_numpy()[rows] > cfg.atol)
    if not far.any():
        return frame
    frame = frame.copy()
    frame.loc[frame.index[rows[far]], "is_spike"] = True
    return frame


# A whole run's warm-up values (see detect_spikes): judged from this many values of history on, on
# a jump above 1 + this over the baseline, to more than this times every value before. Over their
# first 20 values the healthy runs among 145 real and fixture runs rose at most x2.7 over the
# baseline (a small model's per-batch loss; most under x1.3); the TinyStories sweep's lr=1 run x10.8.
_EARLY_HISTORY = 3
_EARLY_JUMP = 2.0
_EARLY_ABOVE_ALL = 2.0


def _starts_mid_run(series: pd.Series, warmup: int) -> bool:
    """The log's first step lies beyond the run's warm-up at the log's own cadence: its first
    rows are not the run's first steps."""
    steps = series.index
    if len(steps) < 2:
        return False
    every = max(int(steps[1]) - int(steps[0]), 1)
    return int(steps[0]) > warmup * every


def detect_divergence(series: pd.Series, epochs: bool = False) -> pd.DataFrame:
    """Run the guard's divergence detector (its defaults) over a finite series; ``epochs``: a loss
    of epoch means, judged in epochs.

    Returns:
        The detector's frame in its sparse mode: the elevated rows and the last row (the
        analysis reads nothing else), indexed by step.

    Example:
        >>> s = pd.Series([2.0] * 50 + [5.0] * 250)
        >>> frame = detect_divergence(s)
        >>> int(frame["onset"].iloc[0]), bool(frame["diverged"].iloc[-1])
        (50, True)
    """
    from sentinel.detect import detect_divergence as _detect_divergence

    return _detect_divergence(series, divergence_config(series.index, epochs), sparse=True)


def divergence_config(index: pd.Index, epochs: bool = False):
    """The divergence detector's settings for a loss logged at ``index`` (see
    :func:`detect_divergence`).

    Example:
        >>> divergence_config(pd.Index(range(0, 5000, 100))).patience
        500
    """
    from sentinel.detect import DivergenceConfig

    config = DivergenceConfig()
    if len(index) > 1:
        values = _EPOCH_PATIENCE * cadence(index)  # five logged values, in steps
        # A loss of epoch means: 200 steps of patience were 200 epochs, and its 16-value median
        # lagged half a short run. Five epochs, and a median of four. Any other loss: a loss logged
        # every 200 steps met 200 steps of patience in two values (a noisy single-batch loss at the
        # head of a run, before its noise is measured, diverged at rows 4-5 of 400): a stretch holds
        # as many logged values as an epoch log's, at least.
        config = (DivergenceConfig(patience=values, level_window=_EPOCH_LEVEL_WINDOW) if epochs
                  else DivergenceConfig(patience=max(config.patience, values)))
    return config


# The divergence detector for a loss of epoch means (see detect_divergence): how many epochs it
# must stay elevated, and the values in its smoothing median.
_EPOCH_PATIENCE = 5
_EPOCH_LEVEL_WINDOW = 4
