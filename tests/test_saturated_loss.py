"""A loss at the ceiling of a clipped logarithm (Keras' -ln 1e-7, a log clamped at -100): told, not healthy."""

from __future__ import annotations

import math

import pandas as pd

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs
from sentinel.analyze.rule_saturated import saturated_incidents

KERAS_CEILING = -math.log(1e-7)


def _report(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (run,) = discover_runs(path)
    return analyze_run(run)


def _keras_lines(accuracies, start=5420):
    # A batch mean of a saturated softmax: each wrong example costs the ceiling, each right one ~0.
    return [f"Batch {start + 20 * k}, Loss {(1 - a) * KERAS_CEILING:.6f}, Accuracy {a:.6f}"
            for k, a in enumerate(accuracies)]


def test_a_classifier_whose_batches_keep_costing_keras_ceiling_is_unhealthy(tmp_path):
    """An UrbanSound classifier in TensorFlow: 'Loss 16.118095, Accuracy 0.000000' on most lines, 4.53 once, the
    authors' 'loss never changed': healthy before, no incident (never eight equal values in a row)."""
    accuracies = [0, 0, 0, 0, 0.71875, 0.25, 0.03125, 0.0625, 0.09375, 0.0625, 0.03125, 0.03125, 0, 0.03125, 0, 0]
    report = _report(tmp_path / "train.log", _keras_lines(accuracies))
    (found,) = [i for i in report.incidents if i.kind == "loss_stuck"]
    assert report.verdict.value == "unhealthy"
    assert found.message.startswith("loss at 16.12 = -ln(1e-7) on 7 of the last 16 logged steps (5420-5720)")
    assert "Keras" in found.message and found.details["ceiling"] == KERAS_CEILING


def test_opennmt_perplexity_capped_at_e100_on_every_report_is_unhealthy(tmp_path):
    """OpenNMT-py with Adam at a learning rate of 1.0: 'ppl: 26881171418161356094253400435962903554686976.00' (e^100,
    its cap) on every report, read as a loss of 100: healthy before."""
    accuracies = [0.41, 0.28, 0.08, 1.11, 0.5]
    lines = [f"Epoch  1, {50 * k:5d}/21692; acc:   {a:.2f}; ppl: 26881171418161356094253400435962903554686976.00; "
             f"3324 src tok/s; 4592 tgt tok/s;     {15 * k} s elapsed" for k, a in enumerate(accuracies, 1)]
    report = _report(tmp_path / "train.log", lines)
    (found,) = [i for i in report.incidents if i.kind == "loss_stuck"]
    assert report.verdict.value == "unhealthy" and found.message.startswith("loss at 100 on 5 of the last 5")


def test_a_classifier_that_saturated_early_and_then_learned_is_not_told(tmp_path):
    """The same saturated batches, then the run learns: its last rows are far below the ceiling."""
    accuracies = [0, 0, 0, 0, 0, 0.1, 0.3, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.92, 0.94, 0.95]
    report = _report(tmp_path / "train.log", _keras_lines(accuracies))
    assert not [i for i in report.incidents if "ceiling" in i.message]


def test_values_near_a_ceiling_that_are_not_at_it_are_not_told():
    """A loss printed with two decimals near 16.12, and a regression loss near 100 printed as 100.0 now and then
    (not on every last row), are losses that happen to lie there."""
    coarse = pd.Series([16.12, 16.11, 16.12, 16.13, 16.12, 16.12], index=range(6))
    near_100 = pd.Series([100.0, 100.3, 100.0, 99.8, 100.0, 100.0, 99.6], index=range(7))
    assert saturated_incidents(coarse) == [] and saturated_incidents(near_100) == []
    assert saturated_incidents(pd.Series([100.0] * 2 + [100.3] + [100.0] * 4, index=range(7)))
