"""MLflow's SQLite store (mlflow.db, its default since MLflow 3.7), read without mlflow.

The fixture was written by mlflow 3 itself (``fixtures/logs/mlflow_sqlite/make_mlflow_db.py``):
run "spiky" of experiment "tiny-gpt" logs ``train/loss`` with a spike at step 60 and a NaN at
step 90 (its grad norm inf there); run "eval-only" logs an accuracy alone.
"""

from __future__ import annotations

import gzip
import math
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover, discover_runs
from sentinel.analyze.loaders import LoadOptions, mlflow_sqlite
from sentinel.cli.main import main

FIXTURE = Path(__file__).parent / "fixtures" / "logs" / "mlflow_sqlite" / "mlflow.db.gz"


@pytest.fixture
def store(tmp_path) -> Path:
    path = tmp_path / "mlflow.db"
    with gzip.open(FIXTURE) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


def test_each_run_of_the_store_is_read_with_what_it_logged(store):
    assert mlflow_sqlite.sniff(store)
    spiky, evaluation = discover_runs(store)
    assert (spiky.name, spiky.source, evaluation.name) == ("tiny-gpt/spiky", "mlflow_sqlite", "tiny-gpt/eval-only")
    loss = spiky.steps["loss"]
    assert loss.index.tolist() == list(range(100)) and loss[60] == 9.0
    assert math.isnan(loss[90]) and loss[89] == pytest.approx(3.0 * math.exp(-89 / 40) + 1.0)
    assert spiky.steps.loc[90, "grad_norm/total"] == math.inf  # stored as the largest float
    assert spiky.steps["val/loss"].dropna().index.tolist() == [0, 25, 50, 75]
    kinds = [(i.kind, i.step) for i in analyze_run(spiky).incidents]
    assert ("outlier_batch", 60) in kinds and ("nonfinite", 90) in kinds
    # A run with no loss is reported as such, not dropped.
    assert "loss" not in evaluation.steps.columns and evaluation.steps["accuracy"].count() == 5
    assert evaluation.warnings == [f"{store} run tiny-gpt/eval-only: no loss metric among: accuracy; "
                                   "name it with --loss-col"]


def test_a_store_is_read_in_a_directory_walk_and_others_are_binary(store):
    folder = store.parent
    with closing(sqlite3.connect(folder / "cache.db")) as other:  # some other SQLite file
        other.execute("CREATE TABLE t (x)")
    (folder / "broken.db").write_bytes(b"SQLite format 3\x00" + b"\x01" * 200)
    found = discover(folder)
    assert [run.name for run in found.runs] == ["tiny-gpt/spiky", "tiny-gpt/eval-only"]
    assert sorted((Path(s.path).name, s.reason) for s in found.skipped) == [("broken.db", "binary data"),
                                                                            ("cache.db", "binary data")]


def test_deleted_runs_are_left_out_and_the_store_is_never_written(store):
    with closing(sqlite3.connect(store)) as db:
        db.execute("UPDATE runs SET lifecycle_stage = 'deleted' WHERE name = 'eval-only'")
        db.commit()
    before = store.read_bytes()
    (run,) = discover_runs(store)
    assert run.name == "tiny-gpt/spiky" and run.warnings == ["mlflow.db: 1 deleted run(s) left out"]
    assert store.read_bytes() == before
    with closing(sqlite3.connect(store)) as db:
        db.execute("UPDATE runs SET lifecycle_stage = 'deleted'")
        db.commit()
    result = CliRunner().invoke(main, ["analyze", str(store)])
    assert result.exit_code == 1
    assert result.output == (f"Error: {store}: no run of this MLflow store logged a metric (2 deleted run(s) "
                             "left out)\n")


def test_a_loss_col_no_run_logged_is_one_clear_message(store):
    """--loss-col naming no metric of the store is refused with the metrics it has (it was a
    warning on each run, and the runs read with their own loss); a metric one run logged is that
    run's loss, the others keep theirs."""
    result = CliRunner().invoke(main, ["analyze", str(store), "--loss-col", "nope"])
    assert result.exit_code == 1 and result.output == (
        f"Error: {store}: no metric 'nope' in this MLflow store; metrics: accuracy, lr, train/grad_norm, train/loss, "
        "val/loss\n")
    spiky, evaluation = discover_runs(store, LoadOptions(loss_col="accuracy"))
    assert evaluation.steps["loss"].count() == 5 and spiky.steps["loss"].count() == 99


RESUMED = FIXTURE.with_name("resumed.db.gz")


def test_a_run_resumed_into_the_same_mlflow_run(tmp_path):
    """``mlflow.start_run(run_id=...)`` after a checkpoint, written by mlflow itself
    (``make_resumed_db.py``): the training blew up after step 80 and died at 99, and was resumed
    from step 60 into the same run, logging 61-149 again. A step logged twice kept its last value
    and the blow-up was gone without a word ("healthy")."""
    path = tmp_path / "mlflow.db"
    with gzip.open(RESUMED) as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(150)) and run.steps["loss"].max() < 4.1
    assert run.steps["lr"].loc[61:].eq(1.5e-4).all()  # the resumed run's, every metric
    (stretch,) = run.abandoned
    assert (stretch.resumed_at, stretch.first, stretch.last) == (61, 61, 99)
    report = analyze_run(run)
    assert [(i.kind, i.step) for i in report.incidents] == [("restart", 61), ("loss_spike", 81)]
    assert report.verdict.value == "recovered"


def test_a_run_resumed_into_the_same_mlflow_file_store_run(tmp_path):
    """The same in MLflow's file store (``mlruns/``): each metric's file, one
    ``timestamp value step`` line per record in the order written."""
    run_dir = tmp_path / "mlruns" / "1" / "0a1b2c3d4e"
    (run_dir / "metrics" / "train").mkdir(parents=True)
    (run_dir / "meta.yaml").write_text("run_id: 0a1b2c3d4e\nexperiment_id: '1'\nstatus: 3\n", encoding="utf-8")
    first = [(1_700_000_000_000 + s * 100, s, 3.0 * math.exp(-s / 40) + 1.0 + (6.0 if s > 80 else 0.0))
             for s in range(100)]
    second = [(1_700_000_100_000 + s * 100, s, 3.0 * math.exp(-s / 40) + 1.0) for s in range(61, 150)]
    (run_dir / "metrics" / "train" / "loss").write_text(
        "".join(f"{t} {v} {s}\n" for t, s, v in first + second), encoding="utf-8")
    (run_dir / "metrics" / "lr").write_text(
        "".join(f"{t} {3e-4 if t < 1_700_000_100_000 else 1.5e-4} {s}\n" for t, s, _ in first + second),
        encoding="utf-8")
    (run,) = discover_runs(tmp_path / "mlruns")
    assert run.steps["loss"].max() < 4.1 and run.steps["lr"].loc[61:].eq(1.5e-4).all()
    (stretch,) = run.abandoned
    assert (stretch.resumed_at, stretch.first, stretch.last) == (61, 61, 99)
    assert analyze_run(run).verdict.value == "recovered"


def test_metrics_logged_without_a_step_are_numbered_in_time_order(tmp_path):
    """``mlflow.log_metric("train/loss", v)`` without a step writes every record at step 0: one
    value of 300 was read ('healthy'). They are numbered in the order written, with a warning."""
    run_dir = tmp_path / "mlruns" / "1" / "0a1b2c3d4e"
    (run_dir / "metrics" / "train").mkdir(parents=True)
    (run_dir / "meta.yaml").write_text("run_id: 0a1b2c3d4e\nexperiment_id: '1'\nstatus: 3\n", encoding="utf-8")
    losses = [9.0 if i in (200, 201) else 2 + 2 * math.exp(-i / 60) for i in range(300)]
    (run_dir / "metrics" / "train" / "loss").write_text(
        "".join(f"{1_700_000_000_000 + i * 1000} {v} 0\n" for i, v in enumerate(losses)), encoding="utf-8")
    (run_dir / "metrics" / "lr").write_text(
        "".join(f"{1_700_000_000_000 + i * 1000} 0.0003 0\n" for i in range(300)), encoding="utf-8")
    (run,) = discover_runs(tmp_path / "mlruns")
    assert run.steps.index.tolist() == list(range(1, 301)) and run.steps["loss"].tolist() == losses
    assert any("train/loss (300 records at 1 step(s))" in w for w in run.warnings)
    (spike,) = [i for i in analyze_run(run).incidents if i.kind == "loss_spike"]
    assert (spike.step, spike.end_step) == (201, 202)


@pytest.mark.parametrize("nan_at", [None, 90])
def test_a_step_an_mlflow_file_store_run_did_not_log_its_loss_at_is_no_nan_loss(tmp_path, nan_at):
    """A metric logged at a step past the loss's last (the final epoch's summary) left the loss's cell empty there:
    a 'non-finite loss' the run never logged. A NaN the loss's own file holds is one."""
    run_dir = tmp_path / "mlruns" / "1" / "0a1b2c3d4e"
    (run_dir / "metrics").mkdir(parents=True)
    (run_dir / "meta.yaml").write_text("run_id: 0a1b2c3d4e\nexperiment_id: '1'\nstatus: 3\n", encoding="utf-8")
    losses = [math.nan if nan_at is not None and s >= nan_at else 3.0 * math.exp(-s / 40) + 1.0 for s in range(100)]
    (run_dir / "metrics" / "loss").write_text(
        "".join(f"{1_700_000_000_000 + s * 100} {v} {s}\n" for s, v in enumerate(losses)), encoding="utf-8")
    (run_dir / "metrics" / "epoch").write_text(
        "".join(f"{1_700_000_000_000 + s * 100} {s // 10} {s}\n" for s in range(101)), encoding="utf-8")
    (run,) = discover_runs(tmp_path / "mlruns")
    report = analyze_run(run)
    assert [i.step for i in report.incidents if i.kind == "nonfinite"] == ([] if nan_at is None else [nan_at])
