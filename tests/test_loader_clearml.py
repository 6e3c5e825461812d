"""ClearML's scalars as Task.get_reported_scalars() returns them and a plot's Download JSON."""

from __future__ import annotations

import json
import math

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs


def _loss(step: int, spike_at: int | None = None, nan_from: int | None = None) -> float:
    if nan_from is not None and step >= nan_from:
        return float("nan")
    return 9.0 if step == spike_at else 1 + 2 * math.exp(-step / 500) + 0.02 * math.sin(step)


def test_reported_scalars_by_title_and_series(tmp_path):
    """{"train": {"loss": {"x", "y"}, "lr": ...}, "validation": {"loss": ...}, ":monitor:gpu": ...}
    saved with json.dump: 'not a log format sentinel reads'."""
    steps = list(range(0, 3000, 10))
    scalars = {"train": {"loss": {"x": steps, "y": [_loss(s, spike_at=1500) for s in steps]},
                         "lr": {"x": steps, "y": [1e-3] * len(steps)}},
               "validation": {"loss": {"x": steps[::25], "y": [1.2] * len(steps[::25])}},
               ":monitor:gpu": {"gpu_0_utilization": {"x": steps[::30], "y": [97.0] * len(steps[::30])}}}
    path = tmp_path / "reported_scalars.json"
    path.write_text(json.dumps(scalars))
    (run,) = discover_runs(path)
    assert run.source == "clearml" and run.steps["loss"].index.tolist() == steps
    assert "validation/loss" in run.steps.columns and not any("monitor" in c for c in run.steps.columns)
    assert [i.step for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")] == [1500]
    scalars["train"]["loss"]["y"] = [_loss(s, nan_from=2000) for s in steps]  # json.dump writes NaN
    path.write_text(json.dumps(scalars))
    (run,) = discover_runs(path)
    (nonfinite,) = [i for i in analyze_run(run).incidents if i.kind == "nonfinite"]
    assert (nonfinite.step, nonfinite.end_step) == (2000, 2990)


def test_a_plots_download_json_its_title_in_the_file_name(tmp_path):
    steps = list(range(0, 3000, 10))
    traces = [{"x": steps, "y": [_loss(s, spike_at=1200) for s in steps], "name": "loss", "type": "scatter",
               "mode": "lines", "line": {"color": "#4d66ff"}},
              {"x": steps, "y": [1e-3] * len(steps), "name": "lr", "type": "scatter", "mode": "lines"}]
    path = tmp_path / "train.json"
    path.write_text(json.dumps(traces))
    (run,) = discover_runs(path)
    assert run.steps["loss"].index.tolist() == steps and run.steps["lr"].eq(1e-3).all()
    assert [i.step for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")] == [1200]
