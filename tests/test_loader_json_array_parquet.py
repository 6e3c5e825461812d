"""Two ways a history DataFrame or a trainer's log_history is saved: a JSON array of rows, Parquet."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from sentinel.analyze.discover import discover, discover_runs
from sentinel.analyze.loaders import generic_table
from sentinel.cli.main import main


def _history(n: int = 200) -> pd.DataFrame:
    loss = 3.0 * np.exp(-np.arange(n) / 80) + 1.0
    loss[120:125] *= 3  # a spike
    return pd.DataFrame({"_step": np.arange(n), "train/loss": loss, "train/lr": 1e-4})


def test_a_dataframe_saved_as_a_json_array(tmp_path):
    path = tmp_path / "history.json"
    _history().to_json(path, orient="records")  # pandas writes "train\/loss"
    (run,) = discover_runs(path)
    assert run.source == "generic_table" and sorted(run.steps.columns) == ["loss", "lr"]
    assert run.steps["loss"].tolist() == pytest.approx(_history()["train/loss"].tolist(), rel=1e-9)  # 10 digits


def test_a_trainers_log_history_as_a_json_array(tmp_path):
    # json.dump(trainer.state.log_history, f, indent=2): training rows, and evaluation rows at
    # some of their steps.
    rows = []
    for step in range(10, 501, 10):
        rows.append({"loss": round(2 * math.exp(-step / 150) + 0.3, 4), "grad_norm": 1.0, "learning_rate": 2e-5,
                     "epoch": step / 100, "step": step})
        if step % 100 == 0:
            rows.append({"eval_loss": 0.5 + step / 1000, "eval_runtime": 1.0, "epoch": step / 100, "step": step})
    path = tmp_path / "log_history.json"
    path.write_text(json.dumps(rows, indent=2))
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(10, 501, 10))
    assert {"loss", "lr", "grad_norm/total", "eval_loss"} <= set(run.steps.columns)
    assert run.steps["eval_loss"].dropna().index.tolist() == [100, 200, 300, 400, 500]


def test_a_json_array_cut_off_while_written_keeps_its_complete_rows(tmp_path):
    """json.dump of a log history killed mid-write: the rows before the cut are the run's, with a
    warning; damage before the first whole row, or an array with text after it, is said so."""
    rows = [{"loss": round(2 * math.exp(-s / 150) + 0.3, 4), "learning_rate": 2e-5, "step": s} for s in range(10, 501, 10)]
    text = json.dumps(rows, indent=2)
    path = tmp_path / "log_history.json"
    path.write_text(text[: text.index('"step": 310') + 5])
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(10, 301, 10))
    line = text[: text.index('"step": 310') + 5].count("\n") + 1
    assert run.warnings == [f"log_history.json: the JSON array is damaged at line {line}, column 5 (Unterminated string "
                            "starting at; cut off while written?): the 30 complete row(s) before it are read"]
    path.write_text(text + "\n" + json.dumps(rows[:3]))
    (run,) = discover_runs(path)
    assert len(run.steps) == 50 and "text after the JSON array" in run.warnings[0]
    path.write_text('[{"loss": 2.1, "step": }, ' + text[1:])
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and result.output == (
        f"Error: {path}: a JSON array of rows damaged at line 1, column 24 (Expecting value), before its first "
        "complete row: mend the file there\n")


def test_what_a_json_array_cannot_be(tmp_path, monkeypatch):
    numbers = tmp_path / "values.json"
    numbers.write_text(json.dumps([1.0, 2.0, 3.0]))
    assert not generic_table.sniff(numbers)
    big = tmp_path / "big.json"
    _history().to_json(big, orient="records")
    monkeypatch.setattr(generic_table, "MAX_JSON_ARRAY_BYTES", 1000)
    result = CliRunner().invoke(main, ["analyze", str(big)])
    assert result.exit_code == 1 and "write the rows as JSON lines" in result.output and "Traceback" not in result.output


def test_a_dataframe_saved_as_parquet(tmp_path):
    pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "history.parquet"
    _history().to_parquet(path)
    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    (run,) = json.loads(result.stdout)["runs"]
    assert (run["source"], run["steps"]) == ("parquet_table", 200)
    assert [i["step"] for i in run["incidents"] if i["kind"] == "loss_spike"] == [120]


def test_a_parquet_file_whose_pages_are_damaged(tmp_path):
    """Its footer reads, a data page does not (bytes flipped in it): one message that says so,
    not the permissions advice an unreadable file gets."""
    pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "history.parquet"
    _history().to_parquet(path)
    data = bytearray(path.read_bytes())
    data[20:120] = bytes(range(100))  # inside the first column chunk's page, after the magic
    path.write_bytes(bytes(data))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and "a damaged Parquet file: its footer reads, its data does not" in result.output
    assert "permissions" not in result.output and "Traceback" not in result.output


def test_parquet_files_that_are_not_runs(tmp_path):
    pytest.importorskip("pyarrow.parquet")
    shard = tmp_path / "train-00000-of-00002.parquet"
    pd.DataFrame({"id": np.arange(5), "text": ["a"] * 5}).to_parquet(shard)
    result = CliRunner().invoke(main, ["analyze", str(shard)])
    assert result.exit_code == 1 and "a Parquet table with no step and loss columns it knows among: id, text" \
        in result.output
    fake = tmp_path / "fake.parquet"
    fake.write_bytes(b"PAR1 but no footer")
    result = CliRunner().invoke(main, ["analyze", str(fake)])
    assert result.exit_code == 1 and "named .parquet but not a Parquet file" in result.output
    # In a folder beside a run, a data shard is passed over, not an error and not a run.
    _history().to_parquet(tmp_path / "history.parquet")
    found = discover(tmp_path)
    assert [r.name for r in found.runs] == ["history"]
    assert [(s.path.rsplit("/", 1)[1], s.reason) for s in found.skipped if s.path.endswith(".parquet")] == \
        [("fake.parquet", "a .parquet file with no step and loss columns (data, not a run)"),
         ("train-00000-of-00002.parquet", "a .parquet file with no step and loss columns (data, not a run)")]


def test_a_paste_of_some_of_a_log_historys_objects(tmp_path):
    """A paste of trainer_state.json's log_history, its objects without the array around them
    (ms-swift#3617: "no step column among: none"): read as the array's rows; a paste cut inside an
    object keeps the whole ones before it."""
    rows = []
    for step in range(20, 401, 20):
        rows.append({"epoch": step / 4000, "grad_norm": 2.7 if step < 300 else 40.0, "learning_rate": 5e-6,
                     "loss": 2.25 if step < 300 else 4.1, "step": step, "token_acc": 0.57})
        if step % 100 == 0:
            rows.append({"epoch": step / 4000, "eval_loss": 2.33, "eval_runtime": 557.0, "step": step})
    body = json.dumps(rows, indent=2)[1:].rstrip("]")  # "  {\n    ..." to the last "}"
    path = tmp_path / "paste.log"
    path.write_text(body.replace("\n  ", "\n    ").lstrip("\n") + "\n  ],\n")
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(20, 401, 20))
    assert run.steps["eval_loss"].dropna().index.tolist() == [100, 200, 300, 400]
    assert run.warnings == []
    cut = body[: body.index('"step": 360') + 6]
    path.write_text(cut)
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(20, 341, 20))
    line = cut[:cut.rfind("{")].count("\n") + 1  # where the object cut starts
    assert run.warnings == [f"paste.log: the JSON objects stop being whole at line {line} (cut off?): the 20 "
                            "complete one(s) before it are read"]


def test_one_json_object_is_no_history(tmp_path):
    """A run's summary saved with indent (AllenNLP's metrics_epoch_N.json, one object) is no history
    of rows: said so, not read as a run of one row."""
    path = tmp_path / "metrics_epoch_3.json"
    path.write_text(json.dumps({"epoch": 3, "training_loss": 0.41, "validation_loss": 0.52}, indent=4))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and "one JSON object, not rows of a history" in result.output
