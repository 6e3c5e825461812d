"""A loss that does not change (the same float at many logged steps), and text logs whose loss
is NaN from the start or never changes: read, and judged as their authors saw them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs
from sentinel.analyze.loaders import RunData
from sentinel.analyze.rule_stuck import stuck_loss_incidents


def _series(values, every: int = 10) -> pd.Series:
    return pd.Series(values, index=pd.Index(range(0, every * len(values), every), name="step"), dtype="float64")


def test_a_loss_of_exactly_zero_that_never_changes():
    (incident,) = stuck_loss_incidents(_series([2.3, 1.1] + [0.0] * 12))
    assert (incident.kind, incident.step, incident.end_step) == ("loss_stuck", 20, 130)
    assert incident.details["resolved"] is False and incident.severity == "warning"
    assert "loss exactly 0 at 12 logged steps in a row (20-130)" in incident.message


def test_a_stretch_that_ends_is_resolved_and_the_longest_is_told():
    values = [4.0] + [3.0517578125e-05] * 9 + [2.5, 2.4] + [10.825932] * 8 + [2.3]
    (incident,) = stuck_loss_incidents(_series(values))
    assert incident.details == {"value": 3.0517578125e-05, "rows": 9, "stretches": 2, "resolved": True}
    assert incident.message.endswith("it changes at step 100")


@pytest.mark.parametrize("values", [
    [0.0123] * 20,  # a running mean printed with 4 decimals can repeat: too few digits to tell
    [1.0, 1e-2, 1e-4, 1e-7, 1e-12] + [0.0] * 10,  # a model that fits its data exactly converges to 0
    [2.5, 2.4] * 10,  # alternating, never the same twice in a row
    [-1.0] * 7,  # too short a stretch
])
def test_not_stuck(values):
    assert stuck_loss_incidents(_series(values)) == []


def test_a_float32_loss_that_stops_moving_makes_the_run_unhealthy():
    rng = np.random.default_rng(0)
    values = np.float32(3.0 - np.arange(200) / 100 + rng.normal(0, 0.01, 200)).astype("float64")
    values[150:] = values[149]  # the weights froze at step 149
    report = analyze_run(RunData("r", "r", "test", pd.DataFrame({"loss": values})))
    assert [i.kind for i in report.incidents] == ["loss_stuck"]
    assert report.incidents[0].step == 149 and report.verdict == "unhealthy"


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_text_log_that_goes_nan_at_its_second_line_is_read(tmp_path):
    """A custom script's print that went NaN early: one finite loss, then NaN to the end."""
    path = _write(tmp_path / "train.log", [
        f"[2019/06/24 16:19:{i:02d} __main__ INFO] - Epoch 1 Step {i * 100}/1500 Loss {v} ({v}) AngleError 27.6"
        for i, v in enumerate(["48.9613"] + ["nan"] * 9)])
    (run,) = discover_runs(path)
    report = analyze_run(run)
    assert report.steps == 10 and report.verdict == "unhealthy"
    (incident,) = report.incidents
    assert (incident.kind, incident.step, incident.end_step) == ("nonfinite", 100, 900)


def test_a_text_log_whose_loss_never_changes_is_read_and_flagged(tmp_path):
    path = _write(tmp_path / "pretrain.log", [
        f"iter {i} step {i} | loss: 10.8259, iter time: 1210.5ms" for i in range(1, 13)])
    (run,) = discover_runs(path)
    report = analyze_run(run)
    assert [i.kind for i in report.incidents] == ["loss_stuck"] and report.verdict == "unhealthy"
