"""The rules' shortcuts for long runs against the full computations they stand in for, on data
made to break their assumptions (irregular steps, duplicates, ties, several chunks)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sentinel.analyze.rule_amp as rule_amp
import sentinel.analyze.rule_plateau as rule_plateau
import sentinel.detect.spike as spike
from sentinel.analyze.config import AnalyzeConfig
from sentinel.analyze.rule_attention import _collapsed
from sentinel.analyze.spans import cadence, group_positions, group_runs, group_steps
from sentinel.detect import SpikeConfig, detect_spikes
from sentinel.detect.entropy import EntropyConfig, collapsed


def _steps(rng: np.random.Generator, n: int) -> np.ndarray:
    kind = rng.integers(4)
    if kind == 0:
        return np.arange(n) * int(rng.integers(1, 5))
    if kind == 1:  # a regular cadence with rows missing
        return np.flatnonzero(rng.random(n * 2) > rng.choice([0.01, 0.2, 0.6]))[:n]
    if kind == 2:  # random gaps, repeated steps among them
        return np.cumsum(rng.integers(0, 4, n))
    return np.cumsum(rng.choice([1, 1, 1, 50], n))


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 400), window=st.integers(1, 300))
def test_rows_back_is_the_binary_search(seed, n, window):
    rng = np.random.default_rng(seed)
    steps = _steps(rng, n)
    n = len(steps)
    if n < 2:
        return
    expect = rule_plateau._last_step_at_or_before(steps, steps - window, None)
    shift = n - 1 - int(expect[-1])
    for lo, hi in ((0, n), (0, n // 2), (n // 3, n)):
        got = rule_plateau._rows_back(steps, lo, hi, window, shift)
        assert np.array_equal(got, expect[lo:hi])
    # any guess gives the same rows (a wrong one is searched for)
    assert np.array_equal(rule_plateau._rows_back(steps, 0, n, window, int(rng.integers(1, n + 1))), expect)


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 3000), window=st.sampled_from([1, 7, 50, 1000]))
def test_plateau_shortcuts_match_the_general_path(seed, n, window):
    rng = np.random.default_rng(seed)
    steps = _steps(rng, n)
    loss = 2.0 + np.exp(-np.arange(len(steps)) / rng.uniform(5, 500)) + rng.choice([0, 1e-3, 0.05]) * rng.random(len(steps))
    series = pd.Series(loss, index=steps)
    config = AnalyzeConfig(plateau_window=window)
    got = rule_plateau.plateau_incidents(series, config)
    original = rule_plateau._cadence
    try:  # the general path: the reference row searched for every row, no regular cadence
        rule_plateau._cadence = lambda s: None
        expect = rule_plateau.plateau_incidents(series, config)
        rule_plateau._rows_back = _searched
        searched = rule_plateau.plateau_incidents(series, config)
    finally:
        rule_plateau._cadence = original
        rule_plateau._rows_back = _ROWS_BACK
    assert [i.to_dict() for i in got] == [i.to_dict() for i in expect] == [i.to_dict() for i in searched]


_ROWS_BACK = rule_plateau._rows_back


def _searched(steps, lo, hi, window, shift):
    return rule_plateau._last_step_at_or_before(steps, steps[lo:hi] - window, None)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 300))
def test_cadence_is_the_most_common_forward_gap(seed, n):
    rng = np.random.default_rng(seed)
    steps = _steps(rng, n) if n else np.zeros(0, dtype=int)
    gaps = np.diff(steps)
    values, counts = np.unique(gaps[gaps > 0], return_counts=True)
    expect = 1 if len(steps) < 2 or not len(values) else int(values[np.argmax(counts)])
    assert cadence(pd.Index(steps)) == expect


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 200))
def test_group_positions_is_group_steps(seed, n):
    rng = np.random.default_rng(seed)
    steps = _steps(rng, n) if n else np.zeros(0, dtype=int)
    flags = rng.random(len(steps)) < rng.choice([0.05, 0.5])
    for gap in (1, 2, 3):
        assert group_positions(np.flatnonzero(flags), steps, gap) == group_steps(pd.Series(flags, index=steps), gap)
    assert group_runs(flags, steps) == group_steps(pd.Series(flags, index=steps), 1)
    assert group_runs(~flags, steps) == group_steps(pd.Series(~flags, index=steps), 1)


@pytest.mark.parametrize("scale", [
    [65536.0] * 50, [2.0 ** i for i in range(30)], [0.5] * 10, [0.5, 1.0, 2.0], [4.0, 2.0, 2.0, 8.0],
    [65536.0] * 10 + [1.0] * 5, [1.0, 1.0, 0.25, 0.5], [2.0, np.nan, 1.0, 4.0], [1e9] + [1.0] * 20,
    [3.0], [0.1], [np.inf, 2.0, 2.0], [0.0, 1.0, 2.0],
])
def test_a_scale_that_never_fell_is_judged_as_in_full(scale, monkeypatch):
    series = pd.Series(scale, index=np.arange(len(scale)) * 3)
    for config in (AnalyzeConfig(), AnalyzeConfig(loss_scale_floor=2.0), AnalyzeConfig(loss_scale_drop_orders=1e-9)):
        got = rule_amp.loss_scale_incidents(series, config)
        with monkeypatch.context() as m:
            m.setattr(rule_amp, "_never_fell", lambda values, config: False)
            expect = rule_amp.loss_scale_incidents(series, config)
        assert [i.to_dict() for i in got] == [i.to_dict() for i in expect]


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 60), previous=st.sampled_from([1, 2, 3, 4, 5, 7]),
       ratio=st.sampled_from([0.5, 0.9, 0.999]))
def test_numpy_entropy_collapse_is_the_pandas_one(seed, n, previous, ratio):
    rng = np.random.default_rng(seed)
    values = [rng.random(n) * 3, np.round(rng.random(n) * 3, 1), np.full(n, 2.0), rng.random(n) * 1e-300,
              rng.normal(size=n)][rng.integers(5)]
    series = pd.Series(values, index=np.arange(n) * 50)
    rule = EntropyConfig(ratio=ratio, previous=previous)
    got, expect = _collapsed(series, rule), collapsed(series, rule)
    assert got.index.equals(expect.index) and np.array_equal(got.to_numpy(), expect.to_numpy())


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 700), window=st.sampled_from([4, 9, 64]),
       chunk=st.sampled_from([4, 64, 100, 1 << 20]))
def test_sparse_spikes_in_several_chunks_agree_with_the_full_mode(seed, n, window, chunk):
    """The candidates' logs are reused from the first pass when one chunk holds the series, and
    taken again per chunk otherwise: both give the full mode's rows."""
    rng = np.random.default_rng(seed)
    values = np.exp(rng.normal(0.0, rng.choice([0.01, 0.1, 0.6]), n))
    jumps = rng.integers(0, n, rng.integers(0, 8))
    values[jumps] *= rng.uniform(1.05, 30.0, len(jumps))
    values[rng.random(n) < 0.03] = np.nan
    series = pd.Series(values, index=np.arange(n) * 10)
    config = SpikeConfig(window=window, warmup=min(4, window), atol=0.0)
    full = detect_spikes(series, config)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(spike, "_SPARSE_CHUNK", chunk)
        sparse = detect_spikes(series, config, sparse=True)
    pd.testing.assert_frame_equal(sparse, full.loc[sparse.index], check_exact=True)
    assert full.index[full["is_spike"]].tolist() == sparse.index[sparse["is_spike"]].tolist()


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 500), k=st.sampled_from([1, 2, 3, 16, 32]),
       rows=st.sampled_from([1, 7, 64, 4096]))
def test_rolling_median_in_a_reused_buffer_is_np_partition(seed, n, k, rows):
    """The divergence level's windows, partitioned in place a few at a time (ties and
    repeated values included), are the elements np.partition selects."""
    import sentinel.detect.divergence as divergence

    if n < k:
        return
    rng = np.random.default_rng(seed)
    x = np.round(rng.normal(size=n), int(rng.integers(0, 3)))
    expect = np.partition(np.lib.stride_tricks.sliding_window_view(x, k), k // 2, axis=1)[:, k // 2]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(divergence, "_ROLLING_ROWS", rows)
        assert np.array_equal(divergence._rolling_middle(x, k), expect)
