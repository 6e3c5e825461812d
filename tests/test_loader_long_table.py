"""Tables in long form: one row per (step, metric) or per (step, split)."""

from __future__ import annotations

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
