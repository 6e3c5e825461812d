"""Loss / grad-norm spike rule: one definition, an online and an offline execution mode.

The rule, for a finite value ``x`` judged against the last ``window`` finite values before it
(its *history*, ``n`` values), all in log space (``y = log(max(x, 1e-12))``):

* ``baseline`` = the lower of the median of the history and the median of its last ``recent``
  values; ``noise`` = median of ``|diff|`` of the history
  (median = the element of rank ``n // 2``, so both modes select the same float)
  divided by 0.9539 (the median of ``|N(0, 2 sigma^2)|`` is ``0.9539 sigma``), so ``noise`` is a
  robust per-step sigma. Measuring the spread on *differences* rather than on levels is what
  keeps an early fast descent from setting it: a falling curve moves the level a lot over a
  window but each step only a little.
  The recent median is what keeps a steep descent from hiding spikes: there the window's
  median lags ~``window / 2`` steps behind the curve (a loss falling 10x in 30 steps had
  x2-x3 batches judged against a level 2x too high); the last ``recent`` values follow it, and
  the lower of the two can only make the rule stricter, never blind it to a spike that
  lasts (from a multi-step spike's 5th step the recent median is the spike, the window's is not).
* ``excess = y - baseline`` (the log of ``ratio = x / baseline``), ``score = excess / noise``.
* ``x`` is a spike when ALL of:

  - relative part: ``ratio > 1 + rtol`` (``1 + short_rtol`` while ``n < warmup``);
  - absolute part: ``x - baseline > atol`` (a loss near zero has huge relative noise; a batch
    going from 1e-5 to 0.1 is not an incident);
  - outlier part: ``score > threshold`` (skipped while ``n < warmup``: too few points to trust
    a spread, so only the stricter ``short_rtol`` jump counts);
  - ``n >= min_history``.

* Only upward excursions count. Non-finite values are never spikes (the engine reports them
  as non-finite) and never enter the history, in both modes.

Flagged values DO enter the history. The median and the median of ``|diff|`` are robust: a
5-step spike moves each by at most a few ranks out of ``window``, so the 2nd..5th step of a
multi-step spike are still judged against the pre-spike level (tested). Keeping the history
free of decisions is also what makes the offline mode exactly reproducible and fast: two
rolling order statistics (``scipy.ndimage.rank_filter``), no sequential pass. A level shift that lasts is
absorbed after about ``window / 2`` values; telling it apart from a spike is the divergence
detector's job (:mod:`sentinel.detect.divergence`).

Both modes compute the window statistics with exact order statistics (an element, or the mean
of two), and apply the same rule (:func:`_rule` on arrays, :func:`_rule_one` its line-for-line
scalar form for the online step), so they agree bit for bit; a property test checks it.

Measured (``python benchmarks/detector_scores.py``, defaults):

* synthetic, 5 seeds x 5,000 steps, LM-like curve with warm-up, cosine decay, two LR restarts,
  3 % multiplicative noise and +0.3 benign blips, 15 injected spikes per series (x1.3 .. x10,
  1, 3 and 5 steps long): step recall 1.00 for x1.5 .. x10 and 0.78 for x1.3 (a x1.3 spike under
  3 % noise often lands below ``rtol``); precision 1.00; zero flags on the same curves without
  injected spikes; the near-zero curve (loss to 1e-5, batches up to 0.1) gives no flag and the
  jump 1e-4 -> 1.6e5 after an early descent is flagged, as DESIGN.md requires.
* real logs: llm.c GPT-2 124M (19,560 steps) and modded-nanogpt AdamW (9,536): 0 spikes;
  CS336 TinyStories sweep: lr <= 3e-2 0 spikes, lr 3e-1 44 and lr 1 19 flagged points (lr 1e-1
  has none: its worst excursion, x1.17, is below the stable 3e-2 run's x1.20; it is caught as a
  divergence); BigScience excerpts: the labelled jump found in 6 of 7 (exp2's x1.38-x1.47 rise
  stays under ``short_rtol`` against 1-4 rows of history).
* offline speed: 1,000,000 points in ~0.4 s on one idle CPU core (~1.3x one pandas
  ``rolling(64).median()``); online ~4 us per update.
"""

from __future__ import annotations

import bisect
import logging
import math
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)

# Values <= 0 (a loss of exactly 0, a zero grad norm) are clipped here before the log.
_LOG_FLOOR = 1e-12
# Median of |N(0, 2)|: turns the median absolute step difference into a per-step sigma.
_DIFF_MAD_TO_SIGMA = 0.9539
# A perfectly flat history has zero spread; keep the score finite.
_NOISE_FLOOR = 1e-9
_STATE_VERSION = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class SpikeConfig:
    """Settings of the spike rule (see the module docstring for the rule itself).

    Attributes:
        window: history length in finite values. 64: between Lightning ``SpikeDetection``
            (10, too short for a robust spread) and OLMo-core's skip-step optimizer (128) /
            llm-foundry ``KillLossSpike`` (100); 64 keeps the online step cheap and absorbs a
            lasting level shift in ~32 steps.
        threshold: outlier part, in robust sigmas of the per-step log change. 6.0, as OLMo-core
            (``sigma_factor=6``).
        rtol: relative part, minimum ``value / baseline - 1``. 0.25: llm-foundry's
            ``outlier_multiplier`` is 2 (x2) and Lightning's ``rtol`` 2.0 (x3), both blind to
            the x1.4-x1.6 jumps BigScience reported as spikes; x1.25 stays above ordinary batch
            noise (the stable llm.c / modded-nanogpt runs never exceed x1.11, the CS336 stable
            sweep x1.20).
        atol: absolute part, minimum ``value - baseline`` in the metric's units. 0.2 (nats for a
            cross-entropy loss): a loss that fell to 1e-5 with single batches up to 0.1 is
            healthy. Use 0.0 for a metric without natural units when it never nears zero.
        warmup: values of history before the outlier part is used. 20: fewer differences do
            not give a spread worth a 6-sigma test.
        min_history: values of history before anything is judged. Between ``min_history`` and
            ``warmup`` only a jump above ``1 + short_rtol`` (and ``atol``) counts, so short log
            excerpts (a handful of rows around an incident) can still show a large jump.
        short_rtol: relative part while the history is shorter than ``warmup``. 0.5 (x1.5):
            stricter than ``rtol`` because there is no spread to back it.
        recent: the baseline is the lower of the history's median and the median of its last
            ``recent`` values (``recent >= window``: the history's median alone). 8: follows
            a steep descent within ~4 steps, and a spike of up to 4 steps does not move it.

    Example:
        >>> SpikeConfig(window=32, warmup=10).window
        32
    """

    window: int = 64
    threshold: float = 6.0
    rtol: float = 0.25
    atol: float = 0.2
    warmup: int = 20
    min_history: int = 1
    short_rtol: float = 0.5
    recent: int = 8

    def __post_init__(self) -> None:
        if not isinstance(self.window, int) or self.window < 4:
            raise ValueError(f"SpikeConfig.window={self.window!r} is too short: pass an int >= 4")
        if not (self.threshold > 0 and np.isfinite(self.threshold)):
            raise ValueError(
                f"SpikeConfig.threshold={self.threshold!r} must be a positive finite number of sigmas"
            )
        for name in ("rtol", "short_rtol", "atol"):
            val = getattr(self, name)
            if not (val >= 0 and np.isfinite(val)):
                raise ValueError(f"SpikeConfig.{name}={val!r} must be a finite number >= 0")
        if not isinstance(self.warmup, int) or not 2 <= self.warmup <= self.window:
            raise ValueError(
                f"SpikeConfig.warmup={self.warmup!r} must be an int in [2, window={self.window}]"
            )
        if not isinstance(self.recent, int) or self.recent < 2:
            raise ValueError(f"SpikeConfig.recent={self.recent!r} must be an int >= 2")
        if not isinstance(self.min_history, int) or not 1 <= self.min_history <= self.warmup:
            raise ValueError(
                f"SpikeConfig.min_history={self.min_history!r} must be an int in [1, warmup={self.warmup}]"
            )


@dataclass(frozen=True, slots=True)
class SpikeVerdict:
    """What the rule says about one value.

    Attributes:
        is_spike: the value is a spike.
        score: ``log(ratio)`` in robust sigmas of the per-step change (NaN with < 2 history
            values or for a non-finite value). The analyzer can grade severity with it.
        baseline: median of the history, in the metric's units (NaN without history).
        log_ratio: ``log(value / baseline)`` (NaN without history or for a non-finite value).
        history: number of finite values the verdict was judged against.
    """

    is_spike: bool
    score: float
    baseline: float
    log_ratio: float
    history: int

    @property
    def ratio(self) -> float:
        """``value / baseline`` (taken from :attr:`log_ratio` when asked: the step path never does)."""
        return float(np.exp(self.log_ratio))


def to_log(values: np.ndarray) -> np.ndarray:
    """The rule's log space: ``log(max(x, 1e-12))``, elementwise.

    Example:
        >>> to_log(np.array([1.0, 0.0])).round(2).tolist()
        [0.0, -27.63]
    """
    return np.log(np.maximum(values, _LOG_FLOOR))


def _rule(
    value: np.ndarray,
    y: np.ndarray,
    base: np.ndarray,
    noise: np.ndarray,
    n: np.ndarray,
    config: SpikeConfig,
) -> tuple[np.ndarray, np.ndarray]:
    """The spike rule on arrays (or 0-d arrays); :func:`_rule_one` is its scalar form.

    Returns:
        ``(is_spike, score)``.
    """
    excess = y - base
    with np.errstate(invalid="ignore", divide="ignore"):
        score = excess / np.maximum(noise, _NOISE_FLOOR)
    short = n < config.warmup
    min_excess = np.where(short, np.log1p(config.short_rtol), np.log1p(config.rtol))
    outlier = short | (score > config.threshold)
    is_spike = (
        (n >= config.min_history)
        & (excess > min_excess)
        & (value - np.exp(base) > config.atol)
        & outlier
    )
    return is_spike, score


def _rule_one(value: float, y: float, base: float, base_value: float, noise: float, n: int,
              config: SpikeConfig, min_excess: tuple[float, float]) -> tuple[bool, float]:
    """:func:`_rule` for one value, on Python floats (the online mode's ~5 us of numpy calls on
    0-d arrays, saved at every step). Operation for operation the same IEEE arithmetic, so the
    two modes still agree bit for bit (``tests/test_detect.py`` checks it on random series).

    ``base_value``: ``np.exp(base)``, which the caller reports too; ``min_excess``:
    ``(log1p(short_rtol), log1p(rtol))`` computed with ``np.log1p``.
    """
    excess = y - base
    score = excess / max(noise, _NOISE_FLOOR) if noise == noise else math.nan  # NaN noise: NaN score
    short = n < config.warmup
    is_spike = (
        n >= config.min_history
        and excess > min_excess[0 if short else 1]
        and value - base_value > config.atol
        and (short or score > config.threshold)
    )
    return is_spike, score


def above_baseline(value: float, baseline: float, config: SpikeConfig) -> bool:
    """The rule's relative and absolute parts alone, for one value against a known baseline.

    Where there is no history to measure a spread on (a single re-run of a batch judged
    against the detector's baseline), these are the parts of the spike rule that still apply:
    more than ``rtol`` above the baseline and more than ``atol`` above it.

    Example:
        >>> above_baseline(3.0, 2.0, SpikeConfig()), above_baseline(2.1, 2.0, SpikeConfig())
        (True, False)
    """
    return value > baseline * (1.0 + config.rtol) and value - baseline > config.atol


def _middle(values: np.ndarray) -> np.float64:
    """The element of rank ``len // 2`` (the upper median for an even count).

    An element, never an average, so that every implementation (this one online,
    ``scipy.ndimage.rank_filter`` offline) returns the same float bit for bit.
    """
    k = len(values) // 2
    return np.partition(values, k)[k]


class SpikeDetector:
    """Online mode: judge one value per step against a fixed window of history.

    The history is kept sorted as well as in order (``bisect``: O(window) memory moves in C,
    ~1 us), so the two medians are a list lookup; the rule is :func:`_rule_one`, the scalar
    form of :func:`_rule`. About 4 us per update.

    Args:
        config: the rule's settings.

    Example:
        >>> det = SpikeDetector(SpikeConfig(warmup=5, window=8))
        >>> verdicts = [det.update(2.0 + 0.01 * (i % 3)) for i in range(10)]
        >>> det.update(9.0).is_spike
        True
    """

    def __init__(self, config: SpikeConfig = SpikeConfig()) -> None:
        if not isinstance(config, SpikeConfig):
            raise TypeError(f"config must be a SpikeConfig, got {type(config).__name__}")
        self.config = config
        # The relative parts, as _rule selects them (np.log1p, so both modes use the same float).
        self._min_excess = (float(np.log1p(config.short_rtol)), float(np.log1p(config.rtol)))
        self.reset()

    def reset(self) -> None:
        """Forget the history (for a new run; a rollback should restore a state_dict instead)."""
        w = self.config.window
        self._chrono: deque[float] = deque(maxlen=w)  # log history, oldest first (state_dict)
        self._diff_chrono: deque[float] = deque(maxlen=w - 1)  # |y_i - y_{i-1}| of the history
        self._sorted: list[float] = []  # the same values, sorted: order statistics by index
        self._sorted_diffs: list[float] = []
        self._recent = min(self.config.recent, w)
        self._sorted_recent: list[float] = []  # the last `recent` values, sorted

    def update(self, value: float) -> SpikeVerdict:
        """Judge one value and, when it is finite, add it to the history.

        Args:
            value: a Python float (read device tensors in one batched transfer first).

        Returns:
            The :class:`SpikeVerdict` for this value.
        """
        x = float(value)
        n = len(self._sorted)
        if not math.isfinite(x):
            return SpikeVerdict(False, math.nan, math.nan, math.nan, n)
        y = float(np.log(max(x, _LOG_FLOOR)))  # np.log: the same float as the offline mode's
        if n == 0:
            self._push(y)
            return SpikeVerdict(False, math.nan, math.nan, math.nan, 0)
        base = self._sorted[n // 2]  # the element of rank n // 2, as _middle
        recent = self._sorted_recent[len(self._sorted_recent) // 2]
        if recent < base:
            base = recent
        nd = len(self._sorted_diffs)
        noise = self._sorted_diffs[nd // 2] / _DIFF_MAD_TO_SIGMA if nd else math.nan
        base_value = float(np.exp(base))
        is_spike, score = _rule_one(x, y, base, base_value, noise, n, self.config, self._min_excess)
        self._push(y)
        return SpikeVerdict(is_spike, score, base_value, y - base, n)

    def rebase(self, keep: int) -> None:
        """Forget all but the last ``keep`` values: they are the level from now on (the guard found
        that the loss moved for a reason that is not damage). The rule is in its warm-up again.

        Example:
            >>> det = SpikeDetector(SpikeConfig(warmup=5))
            >>> _ = [det.update(v) for v in [1.0] * 30 + [3.0] * 3]
            >>> det.rebase(3); det.update(3.1).is_spike
            False
        """
        last = list(self._chrono)[-keep:] if keep > 0 else []
        self.reset()
        for y in last:
            self._push(y)

    def _push(self, y: float) -> None:
        if self._chrono:
            diff = abs(y - self._chrono[-1])
            if len(self._diff_chrono) == self._diff_chrono.maxlen:
                _remove(self._sorted_diffs, self._diff_chrono[0])
            self._diff_chrono.append(diff)
            bisect.insort(self._sorted_diffs, diff)
        if len(self._chrono) >= self._recent:
            _remove(self._sorted_recent, self._chrono[-self._recent])
        if len(self._chrono) == self._chrono.maxlen:
            _remove(self._sorted, self._chrono[0])
        self._chrono.append(y)
        bisect.insort(self._sorted, y)
        bisect.insort(self._sorted_recent, y)

    def state_dict(self) -> dict[str, Any]:
        """The history (log values, oldest first) as plain floats for a snapshot or checkpoint."""
        return {"version": _STATE_VERSION, "history": list(self._chrono)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict`; the window keeps the newest ``config.window`` values."""
        history = state.get("history")
        if history is None:
            raise ValueError("spike detector state has no 'history': pass a dict from state_dict()")
        self.reset()
        for y in history[-self.config.window :]:
            self._push(float(y))


def _remove(ordered: list[float], value: float) -> None:
    del ordered[bisect.bisect_left(ordered, value)]


def _check_series(series: pd.Series, what: str) -> np.ndarray:
    if not isinstance(series, pd.Series):
        raise TypeError(f"{what} expects a pandas Series indexed by step, got {type(series).__name__}")
    if not series.index.is_monotonic_increasing:
        raise ValueError(f"{what}: the series index (steps) is not increasing: call series.sort_index() first")
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def _window_stats(y: np.ndarray, w: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    """``(baseline, noise)`` of every value's history, as :meth:`SpikeDetector.update` has them
    (``r``: the recent values' count, at most ``w``)."""
    from scipy import ndimage  # ~0.2 s to import: only where every value is judged

    m = len(y)
    base = np.full(m, np.nan)
    noise = np.full(m, np.nan)
    absd = np.abs(np.diff(y))  # absd[i] = |y[i+1] - y[i]|
    # Partial histories at the head: at most `window` small windows, same code as online.
    for j in range(1, min(m, w)):
        base[j] = min(_middle(y[:j]), _middle(y[max(0, j - r):j]))
        if j >= 2:
            noise[j] = _middle(absd[: j - 1]) / _DIFF_MAD_TO_SIGMA
    if m > w:
        # Full histories: y[j-w:j] and its w-1 differences absd[j-w:j-1]. rank_filter with
        # origin (size-1)//2 is a trailing window ending at the output index (inclusive).
        rf = ndimage.rank_filter(y, w // 2, size=w, origin=(w - 1) // 2, mode="nearest")
        rr = ndimage.rank_filter(y, r // 2, size=r, origin=(r - 1) // 2, mode="nearest")
        base[w:] = np.minimum(rf[w - 1 : m - 1], rr[w - 1 : m - 1])
        k = w - 1
        rd = ndimage.rank_filter(absd, k // 2, size=k, origin=(k - 1) // 2, mode="nearest")
        noise[w:] = rd[w - 2 : m - 2] / _DIFF_MAD_TO_SIGMA
    return base, noise


def detect_spikes(series: pd.Series, config: SpikeConfig = SpikeConfig(), *, sparse: bool = False) -> pd.DataFrame:
    """Offline mode: the same rule as :class:`SpikeDetector`, vectorised over a whole series.

    Args:
        series: metric values indexed by step (increasing); NaN/inf are skipped like online.
        config: the rule's settings.
        sparse: judge only the values that can be spikes, for long series. A spike lies more
            than ``log1p(min(rtol, short_rtol))`` above its baseline, so above the lowest value
            of its history: block minima (a few passes, no median, no array the length of the
            series kept) pick those values, and the window medians are taken for them and the
            two finite values after each (the rows a span of spikes can hold) alone. The frame
            then holds those rows only, with the same numbers as without ``sparse``; every other
            finite value is not a spike. 10,000,000 healthy values: ~0.3 s and a few MB instead
            of ~4 s and ~1 GB.

    Returns:
        A DataFrame with the series' index (with ``sparse``, the judged rows of it) and columns
        ``is_spike`` (bool), ``score``, ``baseline``, ``ratio`` (float) and ``history`` (int),
        equal to what :meth:`SpikeDetector.update` returns value by value.

    Example:
        >>> s = pd.Series([2.0, 2.1, 2.0, 2.05, 9.0], index=[10, 20, 30, 40, 50])
        >>> detect_spikes(s)["is_spike"].tolist()
        [False, False, False, False, True]
        >>> detect_spikes(s, sparse=True).index.tolist()  # the values that can be spikes
        [50]
    """
    values = _check_series(series, "detect_spikes")
    if sparse:
        return _detect_sparse(values, series.index, config)
    total = len(values)
    finite = np.isfinite(values)
    x = values[finite]
    m = len(x)
    w = config.window
    is_spike = np.zeros(total, dtype=bool)
    score = np.full(total, np.nan)
    baseline = np.full(total, np.nan)
    ratio = np.full(total, np.nan)
    # History size of each finite value: how many finite values came before it, capped.
    n_fin = np.minimum(np.arange(m), w)
    history = np.zeros(total, dtype=np.int64)
    # A non-finite value is judged against the history it would have seen.
    history[:] = np.minimum(np.cumsum(finite, dtype=np.int64) - finite, w)
    if m:
        y = to_log(x)
        base, noise = _window_stats(y, w, min(config.recent, w))
        spk, sc = _rule(x, y, base, noise, n_fin, config)
        is_spike[finite] = spk
        score[finite] = sc
        baseline[finite] = np.exp(base)
        ratio[finite] = np.exp(y - base)
    return pd.DataFrame(  # copy=False: the fresh arrays become the columns (no 2-D block copy)
        {"is_spike": is_spike, "score": score, "baseline": baseline, "ratio": ratio, "history": history},
        index=series.index, copy=False,
    )


# Sparse mode: values taken into the log at a time (bounded temporaries).
_SPARSE_CHUNK = 1 << 20


def _detect_sparse(values: np.ndarray, index: pd.Index, config: SpikeConfig) -> pd.DataFrame:
    """:func:`detect_spikes` with ``sparse=True``."""
    finite = np.isfinite(values)
    where = None if finite.all() else np.flatnonzero(finite)  # finite value -> row
    x = values if where is None else values[where]
    w = config.window
    judged = _possible_spikes(x, config)
    base, noise = _window_stats_at(x, w, min(config.recent, w), judged)
    xj = x[judged]
    yj = to_log(xj)
    n = np.minimum(judged, w)
    spk, sc = _rule(xj, yj, base, noise, n, config)
    rows = judged if where is None else where[judged]
    return pd.DataFrame(
        {"is_spike": spk, "score": sc, "baseline": np.exp(base), "ratio": np.exp(yj - base), "history": n},
        index=index[rows], copy=False,
    )


def _possible_spikes(x: np.ndarray, config: SpikeConfig) -> np.ndarray:
    """Positions (into the finite values ``x``) of the values that can be spikes, and of the two
    after each.

    The rule needs ``y - baseline > log1p(rtol)`` (``short_rtol`` while the history is short,
    ``y`` the log); the baseline is an element of the history, so at least any lower bound of
    the history's logs, and IEEE subtraction is monotonic: ``y - bound`` is at least the excess
    the rule computes. The bound: the exact running minimum over the first ``window`` values,
    then the lower minimum of the two aligned blocks of ``window`` values that hold a value's
    history (a wider window, so a lower bound). Logs are taken a chunk at a time, twice (once
    when a single chunk holds every value).
    """
    w, m = config.window, len(x)
    least_excess = min(np.log1p(config.rtol), np.log1p(config.short_rtol))
    found = []
    head = min(m, w + 1)
    y_head = to_log(x[:head])
    floor = np.full(head, np.inf)
    floor[1:] = np.minimum.accumulate(y_head[:-1])
    found.append(np.flatnonzero(y_head - floor > least_excess))
    if m > w + 1:
        blocks = -(-m // w)
        lows = np.empty(blocks)
        chunk = max(w, _SPARSE_CHUNK // w * w)
        kept = None  # the logs of all values, when one chunk holds them (the second pass reuses them)
        for lo in range(0, m, chunk):  # block minima of the logs
            y = to_log(x[lo:lo + chunk])
            if len(y) == m:
                kept = y
            full = len(y) // w * w
            lows[lo // w:(lo + full) // w] = y[:full].reshape(-1, w).min(axis=1)
            if full < len(y):
                lows[-1] = y[full:].min()
        # Values of block k (k >= 1): their history lies in blocks k - 1 and k.
        bound = np.minimum(lows[:-1], lows[1:])
        for lo in range(w, m, chunk):  # blocks 1..: values w.. (those up to w are the head)
            y = to_log(x[lo:lo + chunk]) if kept is None else kept[lo:lo + chunk]
            # lo is a multiple of w: row i of the (-1, w) view is block lo // w + i, bound k - 1
            full, first = len(y) // w * w, lo // w - 1
            excess = y[:full].reshape(-1, w) - bound[first:first + full // w, None]
            hit = np.flatnonzero(excess > least_excess)
            if full < len(y):
                tail = np.flatnonzero(y[full:] - bound[first + full // w] > least_excess) + full
                hit = np.concatenate((hit, tail))
            hit += lo
            found.append(hit[hit > w])
    possible = np.concatenate(found)
    around = np.unique(np.concatenate([possible, possible + 1, possible + 2]))
    return around[around < m]


def _window_stats_at(x: np.ndarray, w: int, r: int, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_window_stats` for the positions ``at`` of the finite values ``x`` only: the same
    elements (logs taken of the same values), so the same floats."""
    base = np.full(len(at), np.nan)
    noise = np.full(len(at), np.nan)
    head = at < w
    if head.any():
        y = to_log(x[:w])
        absd = np.abs(np.diff(y))
        for out_i in np.flatnonzero(head):  # partial histories: the online code, value by value
            j = int(at[out_i])
            if j >= 1:
                base[out_i] = min(_middle(y[:j]), _middle(y[max(0, j - r):j]))
            if j >= 2:
                noise[out_i] = _middle(absd[: j - 1]) / _DIFF_MAD_TO_SIGMA
    full = np.flatnonzero(~head)
    for lo in range(0, len(full), 1 << 14):  # bounded copies: 16k windows at a time
        part = full[lo:lo + (1 << 14)]
        y = to_log(np.lib.stride_tricks.sliding_window_view(x, w)[at[part] - w])  # y[j-w:j]
        base[part] = np.minimum(np.partition(y, w // 2, axis=1)[:, w // 2],
                                np.partition(y[:, w - r:], r // 2, axis=1)[:, r // 2])
        k = w - 1
        diffs = np.abs(np.diff(y, axis=1))  # absd[j-w:j-1]
        noise[part] = np.partition(diffs, k // 2, axis=1)[:, k // 2] / _DIFF_MAD_TO_SIGMA
    return base, noise