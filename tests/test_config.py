"""Flat options route onto the parts of SentinelConfig; the guard's detector defaults hold."""

from __future__ import annotations

import pytest

from sentinel.config import SentinelConfig


def test_defaults_judge_nothing_before_the_warm_up():
    config = SentinelConfig()
    assert config.loss_spike.min_history == config.loss_spike.warmup == 20
    assert config.grad_spike.atol == 0.0 and config.divergence.skip_nan


def test_options_route_by_name_and_prefix():
    config = SentinelConfig.from_options(rollback=False, attention_every=10, spike_threshold=4.0,
                                         grad_spike_window=32, divergence_patience=50)
    assert not config.guard.rollback and config.record.attention_every == 10
    assert config.loss_spike.threshold == 4.0 and config.grad_spike.threshold == 6.0
    assert config.grad_spike.window == 32 and config.loss_spike.window == 64
    assert config.divergence.patience == 50
    assert config.grad_spike.atol == 0.0 and config.divergence.skip_nan  # untouched defaults stay


def test_a_shorter_warm_up_moves_the_first_judgement_with_it():
    config = SentinelConfig.from_options(spike_warmup=5)
    assert config.loss_spike.warmup == config.loss_spike.min_history == 5


def test_unknown_option_names_itself():
    with pytest.raises(TypeError, match="unknown sentinel option 'spike_treshold'"):
        SentinelConfig.from_options(spike_treshold=3.0)
