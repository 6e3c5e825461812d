"""Tables in long form: one row per (step, metric) or per (step, split)."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs
from sentinel.analyze.loaders import long_table
from sentinel.cli.main import main

LOSSES = [round(3.0 - 0.01 * i, 2) for i in range(60)]  # short decimals: parsed alike by every pandas
LOSSES[40:43] = [9.0] * 3  # a spike
LOSSES[50] = math.nan


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_step_metric_value_rows_become_columns(tmp_path):
    lines = ["step,metric,value"]
    for i, loss in enumerate(LOSSES):
        lines += [f"{10 * i},train/loss,{loss}", f"{10 * i},lr,0.0003"]
        if i % 20 == 19:
            lines.append(f"{10 * i},val/loss,{loss + 0.5}")
    path = _write(tmp_path / "metrics_long.csv", lines)
    (run,) = discover_runs(path)
    assert run.source == "long_table" and run.steps.index.tolist() == list(range(0, 600, 10))
    assert run.steps["loss"].tolist()[:40] == LOSSES[:40] and math.isnan(run.steps.loc[500, "loss"])
    assert run.steps["lr"].eq(0.0003).all()
    assert run.steps["val/loss"].dropna().index.tolist() == [190, 390, 590]
    kinds = {(i.kind, i.step) for i in analyze_run(run).incidents}
    assert ("loss_spike", 400) in kinds and ("nonfinite", 500) in kinds
    # It was refused, with a message that named --loss-col, which cannot help a long table.
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 0 and "long_table" in result.output


def test_a_split_column_keeps_evaluation_rows_out_of_the_training_loss(tmp_path):
    # Read as a plain table, each evaluation row (loss + 3) stood in for its step's training loss.
    lines = ["step,split,loss,accuracy"]
    for i, loss in enumerate(LOSSES[:40]):
        lines.append(f"{i},train,{loss},0.5")
        if i % 10 == 9:
            lines.append(f"{i},val,{loss + 3},0.4")
    path = _write(tmp_path / "log.csv", lines)
    (run,) = discover_runs(path)
    assert run.steps["loss"].tolist() == LOSSES[:40]
    assert run.steps["val/loss"].dropna().tolist() == [LOSSES[i] + 3 for i in (9, 19, 29, 39)]
    assert run.steps["val/accuracy"].dropna().eq(0.4).all() and run.steps["train/accuracy"].eq(0.5).all()
    assert run.warnings[0].startswith("log.csv: rows of 2 splits (train, val) in the 'split' column")
    assert analyze_run(run).verdict.value == "healthy"


@pytest.mark.parametrize("lines", [
    ["step,type,loss", "1,a,2.0", "2,b,1.9", "3,a,1.8"],  # a type column that names no training rows
    ["step,loss,lr", "1,2.0,0.1", "2,1.9,0.1", "3,1.8,0.1"],  # a wide table
    ["step,name,value,loss", "1,exp1,3,2.0", "2,exp1,4,1.9", "3,exp1,5,1.8"],  # "name": the run's, beside a loss
])
def test_other_tables_are_left_to_the_wide_reader(tmp_path, lines):
    path = _write(tmp_path / "t.csv", lines)
    assert not long_table.sniff(path)
    (run,) = discover_runs(path)
    assert run.source == "generic_table"


def test_names_that_are_numbers_are_no_long_table(tmp_path):
    assert not long_table.sniff(_write(tmp_path / "t.csv", ["step,name,value", "1,3,2.0", "2,4,1.9", "3,5,1.8"]))


def test_jsonl_rows_that_name_their_split_keep_evaluation_numbers_apart(tmp_path):
    # mmcv's json log: {"mode": "train", ...} and {"mode": "val", ...} rows at the same iteration.
    # Merged by step, the val row's loss replaced the training loss and ended the run at 5.0.
    import json

    lines = []
    for i, loss in enumerate(LOSSES[:40]):
        lines.append(json.dumps({"mode": "train", "epoch": 1, "iter": 10 * i, "lr": 0.02, "loss": loss}))
        if i % 10 == 9:
            lines.append(json.dumps({"mode": "val", "epoch": 1, "iter": 10 * i, "loss": 5.0, "bbox_mAP": 0.3}))
    (run,) = discover_runs(_write(tmp_path / "20240101_000000.log.json", lines))
    assert run.source == "generic_table" and run.steps["loss"].tolist() == LOSSES[:40]
    assert run.steps["val/loss"].dropna().tolist() == [5.0] * 4 and run.steps["lr"].eq(0.02).all()
    assert analyze_run(run).verdict.value == "healthy"


def _loss_at(step: int, spike_at: int | None = None) -> float:
    return 9.0 if step == spike_at else 1 + 2 * math.exp(-step / 400) + 0.02 * math.sin(step)


def test_mlflow_chart_download_of_two_runs_is_two_runs(tmp_path):
    """MLflow's chart 'Download CSV' of runs compared: 'Run,Run ID,metric,step,timestamp,value'.
    Read as one table, the second run's rows replaced the first's at every step: its spike gone."""
    lines = ["Run,Run ID,metric,step,timestamp,value"]
    for run, run_id, spike in (("bemused-carp-42", "3f2b8c9d", 1000), ("gentle-fox-7", "9a8b7c6d", None)):
        lines += [f"{run},{run_id},train_loss,{s},{1714560000000 + s},{_loss_at(s, spike)}" for s in range(0, 2000, 10)]
    path = tmp_path / "train_loss.csv"
    path.write_text("\n".join(lines) + "\n")
    runs = discover_runs(path)
    assert [r.name for r in runs] == ["bemused-carp-42", "gentle-fox-7"]
    assert all(r.steps["loss"].index.tolist() == list(range(0, 2000, 10)) for r in runs)
    spikes = [[i.step for i in analyze_run(r).incidents if i.kind in ("loss_spike", "outlier_batch")] for r in runs]
    assert spikes == [[1000], []]


def test_an_empty_value_of_a_metric_history_is_a_logged_nan(tmp_path):
    """pd.DataFrame of MlflowClient().get_metric_history(...) to_csv: a NaN is written empty. Each
    row is a value logged, so the run went NaN at 1000; the rows were dropped ('healthy')."""
    lines = ["key,value,timestamp,step"] + [f"train_loss,{'' if s >= 1000 else _loss_at(s)},{1714560000000 + s},{s}"
                                            for s in range(0, 2000, 10)]
    path = tmp_path / "metric_history.csv"
    path.write_text("\n".join(lines) + "\n")
    (run,) = discover_runs(path)
    (nonfinite,) = [i for i in analyze_run(run).incidents if i.kind == "nonfinite"]
    assert (nonfinite.step, nonfinite.end_step) == (1000, 1990)


def test_aims_metric_rows_name_their_split_beside_their_metric(tmp_path):
    """Aim's query_metrics().dataframe(): 'metric.name' and 'metric.context.subset' on each row."""
    lines = ["idx,step,value,epoch,time,run.hash,metric.name,metric.context.subset"]
    for s in range(500):
        lines.append(f"{s},{s},{_loss_at(s, 300)},0,2024-05-01 10:40:00,8b1f,loss,train")
        if s % 50 == 49:
            lines.append(f"{s},{s},{_loss_at(s) + 0.3},0,2024-05-01 10:40:00,8b1f,loss,val")
    path = tmp_path / "query_metrics.csv"
    path.write_text("\n".join(lines) + "\n")
    (run,) = discover_runs(path)
    assert run.steps["loss"].index.tolist() == list(range(500)) and run.steps["loss"].iloc[300] == 9.0
    assert run.steps["val/loss"].dropna().index.tolist() == list(range(49, 500, 50))
    assert [i.step for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")] == [300]


def test_comets_metric_rows_as_its_api_returns_them(tmp_path):
    """Comet's experiment.get_metrics(): a JSON array of {"metricName", "metricValue" (a string),
    "step", "timestamp", "epoch"} rows, the loss's beside the lr's. 'Not a log format sentinel
    reads' (and --step-col/--loss-col could not help)."""
    rows = []
    for step in range(1, 601):
        rows.append({"metricName": "loss", "metricValue": str(_loss_at(step, 400)), "step": step,
                     "timestamp": 1714560000310 + step, "epoch": 0, "runContext": None})
        rows.append({"metricName": "lr", "metricValue": "0.001", "step": step, "timestamp": 1714560000310 + step,
                     "epoch": 0, "runContext": None})
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(rows, indent=1))
    (run,) = discover_runs(path)
    assert run.steps["loss"].index.tolist() == list(range(1, 601)) and run.steps["lr"].eq(0.001).all()
    assert [i.step for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")] == [400]
