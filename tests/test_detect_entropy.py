"""The entropy-collapse rule: online (recorder) and offline (analyzer) flag the same samples."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sentinel.detect.entropy import EntropyConfig, EntropyWatch, collapsed

values = st.lists(st.floats(min_value=0.0, max_value=5.0, allow_nan=False), min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(series=values, previous=st.integers(min_value=1, max_value=5),
       ratio=st.floats(min_value=0.05, max_value=0.95))
def test_online_and_offline_agree(series, previous, ratio):
    config = EntropyConfig(ratio=ratio, previous=previous)
    offline = collapsed(pd.Series(series, dtype="float64"), config).tolist()
    watch = EntropyWatch(config)
    online = [watch.update("m", v) for v in series]
    assert online == offline


def test_slow_sharpening_is_not_a_collapse_but_halving_is():
    slow = [3.2 - 0.1 * i for i in range(20)]
    watch = EntropyWatch()
    assert not any(watch.update("a", v) for v in slow)
    assert watch.update("a", slow[-1] * 0.4)


def test_state_round_trips_and_modules_are_separate():
    watch = EntropyWatch()
    for v in (3.0, 2.9, 2.8):
        watch.update("a", v)
    fresh = EntropyWatch()
    fresh.load_state_dict(watch.state_dict())
    assert fresh.state_dict() == watch.state_dict()
    assert fresh.update("a", 1.0) and not fresh.update("b", 1.0)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="ratio"):
        EntropyConfig(ratio=1.5)
