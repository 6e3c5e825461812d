"""Loaders of the analyzer, on real files: TensorBoard event files written by torch's
SummaryWriter, Lightning CSVLogger output of a real Trainer run, sentinel run dirs written by
the store; and discovery of runs in a directory."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import NoRunsError, discover_runs
from sentinel.analyze.loaders import LoadOptions, lightning_csv, sentinel_run, tensorboard
from sentinel.events import make_event
from sentinel.store import RunWriter


def write_tb(log_dir: Path, n: int = 30, nan_at: int | None = None) -> dict[str, list[float]]:
    """Scalars with tags as another trainer would name them; returns what was written (as f32)."""
    from torch.utils.tensorboard import SummaryWriter

    rng = np.random.default_rng(0)
    loss = (2.0 + rng.random(n)).astype(np.float32)
    if nan_at is not None:
        loss[nan_at] = np.nan
    lr = np.full(n, 1e-3, dtype=np.float32)
    writer = SummaryWriter(str(log_dir))
    for step in range(n):
        writer.add_scalar("train/loss", float(loss[step]), step)
        writer.add_scalar("lr-AdamW", float(lr[step]), step)
        if step % 10 == 0:
            writer.add_scalar("grad_norm/blocks.0", 0.5 + step, step)
    writer.close()
    return {"loss": loss.tolist(), "lr": lr.tolist()}


def test_tensorboard_loader_reads_summarywriter_scalars_exactly(tmp_path):
    written = write_tb(tmp_path / "tb_run", nan_at=7)
    assert tensorboard.sniff(tmp_path / "tb_run")
    (run,) = tensorboard.load(tmp_path / "tb_run")
    assert run.source == "tensorboard" and run.warnings == []
    assert list(run.steps.index) == list(range(30))
    np.testing.assert_array_equal(run.steps["loss"].to_numpy(), np.asarray(written["loss"], dtype=np.float64))
    assert math.isnan(run.steps.loc[7, "loss"])
    assert run.steps["lr"].eq(np.float32(1e-3)).all()
    # Sparse tag: present every 10 steps, NaN elsewhere.
    grad = run.steps["grad_norm/blocks.0"]
    assert grad.dropna().to_dict() == {0: 0.5, 10: 10.5, 20: 20.5}


def test_tensorboard_loader_agrees_with_event_accumulator(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    write_tb(tmp_path / "r")
    acc = EventAccumulator(str(tmp_path / "r"), size_guidance={"scalars": 0})
    acc.Reload()
    (run,) = tensorboard.load(tmp_path / "r")
    ref = pd.Series({e.step: e.value for e in acc.Scalars("train/loss")}, dtype="float64")
    pd.testing.assert_series_equal(run.steps["loss"], ref, check_names=False, check_index_type=False)


@pytest.mark.parametrize("cut", ["mid_record", "garbage_tail"])
def test_tensorboard_loader_reads_valid_part_of_damaged_file(tmp_path, cut):
    write_tb(tmp_path / "r")
    (file,) = (tmp_path / "r").iterdir()
    data = file.read_bytes()
    if cut == "mid_record":
        file.write_bytes(data[:-30])
    else:
        file.write_bytes(data + b"\xff" * 40)
    (run,) = tensorboard.load(tmp_path / "r")
    assert len(run.warnings) == 1 and file.name in run.warnings[0]
    assert "record at byte" in run.warnings[0]
    assert 28 <= len(run.steps["loss"].dropna()) <= 30


def test_tensorboard_loss_col_picks_the_tag(tmp_path):
    write_tb(tmp_path / "r")
    (run,) = tensorboard.load(tmp_path / "r", LoadOptions(loss_col="lr-AdamW"))
    assert run.steps["loss"].eq(np.float32(1e-3)).all()
    with pytest.raises(ValueError, match="tag 'nope' not found; available: "):
        tensorboard.load(tmp_path / "r", LoadOptions(loss_col="nope"))


def _analyze_json(*args: str) -> tuple[int, dict]:
    import json

    from click.testing import CliRunner

    from sentinel.cli.main import main

    result = CliRunner().invoke(main, ["analyze", *args, "--format", "json"])
    return result.exit_code, json.loads(result.output)


def test_summary_writer_add_scalars_series_are_one_run(tmp_path):
    """``SummaryWriter.add_scalars("losses", {"train": ..., "val": ...})`` writes each key into a
    subdirectory ``losses_<key>`` under the tag ``losses``, and a header-only file above them:
    one run with the series ``losses/train`` and ``losses/val``, its loss the train one."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(tmp_path / "exp")
    for step in range(200):
        loss = 3.0 - step / 100 + (4.0 if step in (150, 151, 152) else 0.0)
        writer.add_scalars("losses", {"train": loss, "val": 3.1 - step / 100}, step)
        writer.add_scalar("lr", 1e-3, step)
    writer.close()
    (run,) = discover_runs(tmp_path / "exp")
    assert run.name == "exp" and run.meta["add_scalars_dirs"] == ["losses_train", "losses_val"]
    assert run.steps["loss"].iloc[-1] == pytest.approx(1.01, abs=1e-6)
    assert run.steps["losses/val"].iloc[-1] == pytest.approx(1.11, abs=1e-6)
    assert run.warnings == []  # losses/train is a name the loaders know
    code, report = _analyze_json(str(tmp_path))  # from above: the subdirectories are not runs again
    assert code == 0 and [r["name"] for r in report["runs"]] == ["exp"] and report["problems"] == []
    assert [i["kind"] for i in report["runs"][0]["incidents"]].count("loss_spike") == 1
    code, report = _analyze_json(str(tmp_path / "exp"), "--loss-col", "losses/val")
    assert code == 0 and report["runs"][0]["final_loss"] == pytest.approx(1.11, abs=1e-6)
    (alone,) = discover_runs(tmp_path / "exp" / "losses_val")  # one key's directory named on its own
    assert alone.steps["loss"].iloc[-1] == pytest.approx(1.11, abs=1e-6)


def test_summary_writer_add_hparams_folder_is_a_record_of_its_run_not_a_run(tmp_path):
    """``add_hparams(hparams, {"hparam/loss": ...})`` writes into a subdirectory named time.time():
    a walk read it as a second run of one value, 'loss read from hparam/loss', 'only 1 finite loss
    value'."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(tmp_path / "exp")
    for step in range(100):
        writer.add_scalar("train/loss", 3.0 - step / 100, step)
    writer.add_hparams({"lr": 1e-3, "batch_size": 32}, {"hparam/loss": 2.01})
    writer.close()
    (record,) = [c.name for c in (tmp_path / "exp").iterdir() if c.is_dir()]
    for where in (tmp_path, tmp_path / "exp"):
        (run,) = discover_runs(where)
        assert run.name == "exp" and record in run.meta["add_scalars_dirs"]
        assert run.steps["loss"].iloc[-1] == pytest.approx(2.01, abs=1e-6)
    (alone,) = discover_runs(tmp_path / "exp" / record)  # named on its own it is still read
    assert alone.steps["loss"].tolist() == [pytest.approx(2.01)]


def test_a_subdirectory_that_is_not_add_scalars_output_stays_a_run(tmp_path):
    """Only a subdirectory named ``<its one tag>_<key>`` is folded: a nested run is still a run."""
    from torch.utils.tensorboard import SummaryWriter

    for where, tag in ((tmp_path / "exp", "loss"), (tmp_path / "exp" / "loss_finetune", "train/loss"),
                       (tmp_path / "exp" / "other", "loss")):
        writer = SummaryWriter(where)
        for step in range(30):
            writer.add_scalar(tag, 2.0, step)
        writer.close()
    runs = discover_runs(tmp_path / "exp")
    assert [r.name for r in runs] == ["exp", "loss_finetune", "other"]
    assert all("add_scalars_dirs" not in r.meta or r.meta["add_scalars_dirs"] == [] for r in runs)


def test_tensorboardx_add_scalars_folders_are_the_runs_series(tmp_path):
    """tensorboardX's add_scalars("loss", {"train": x}) writes <logdir>/loss/train/ under the tag "loss" (torch's
    writes <logdir>/loss_train/): LIIF's tensorboard/ beside its lr was read as three runs, two of them "no loss"."""
    from torch.utils.tensorboard import SummaryWriter

    root = tmp_path / "tensorboard"
    for where, tag in ((root, "lr"), (root / "loss" / "train", "loss"), (root / "psnr" / "val", "psnr")):
        with SummaryWriter(str(where)) as writer:
            for step in range(1, 30):
                writer.add_scalar(tag, {"lr": 1e-4, "loss": 0.1 / step, "psnr": 30 + step / 10}[tag], step)
    (run,) = discover_runs(tmp_path)
    assert run.name == "tensorboard" and run.steps["loss"].iloc[-1] == pytest.approx(0.1 / 29)


def test_event_files_without_scalars_are_named_as_such(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(tmp_path / "hist")
    writer.add_histogram("weights", torch.randn(100), 0)
    writer.close()
    code, report = _analyze_json(str(tmp_path / "hist"))
    assert code == 1
    assert "its event files hold no scalars" in report["error"]
    # files of 0 bytes (a writer that never flushed) are said to be empty, not to hold "a header, histograms ..."
    for k in range(2):
        (tmp_path / "empty" / f"events.out.tfevents.16{k}.host.1.0").parent.mkdir(exist_ok=True)
        (tmp_path / "empty" / f"events.out.tfevents.16{k}.host.1.0").write_bytes(b"")
    code, report = _analyze_json(str(tmp_path / "empty"))
    assert code == 1 and "its event files are empty (0 bytes): the writer never flushed" in report["error"]


def test_a_table_beside_event_files_without_scalars_is_read(tmp_path):
    """detectron2's output/ of a run whose event file holds its header alone (a crash before the first flush)
    beside its 90-row metrics.json: 'nothing to analyse: its event files hold no scalars', the table unread."""
    from torch.utils.tensorboard import SummaryWriter

    out = tmp_path / "output"
    SummaryWriter(out).close()  # the header alone
    (out / "metrics.json").write_text("".join(
        f'{{"iteration": {it}, "lr": 0.00025, "total_loss": {2.0 - it / 1000:.4f}, "loss_cls": 0.5}}\n'
        for it in range(19, 1800, 20)))
    (run,) = discover_runs(out)
    assert run.source == "generic_table" and len(run.steps["loss"].dropna()) == 90
    assert any("event files beside it hold no scalars" in w for w in run.warnings)


@pytest.mark.parametrize("tags, chosen", [
    (("Loss/train", "Loss/test"), "Loss/train"),  # the PyTorch TensorBoard tutorial's tags
    (("train/loss_epoch", "val_loss"), "train/loss_epoch"),  # Lightning's on_epoch aggregate alone
    (("total_loss", "loss_cls", "loss_bbox", "loss_scale"), "total_loss"),
])
def test_tensorboard_loss_tag_found_by_its_words(tmp_path, tags, chosen):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(tmp_path / "r")
    for step in range(100):
        for i, tag in enumerate(tags):
            writer.add_scalar(tag, (1.0 + i) * (9.0 if tag == chosen and step == 60 else 1.0), step)
    writer.close()
    (run,) = tensorboard.load(tmp_path / "r")
    assert run.meta["tags"][chosen] == "loss"
    assert run.steps["loss"].max() == 9.0 * (1 + tags.index(chosen))
    assert run.warnings == [f"loss read from {chosen!r} (no tag is named loss; --loss-col picks another)"]


def test_tensorboard_loss_tag_left_to_the_user_when_two_fit_equally(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(tmp_path / "r")
    for step in range(20):
        writer.add_scalar("loss_ce", 2.0, step)
        writer.add_scalar("loss_kl", 0.1, step)
    writer.close()
    (run,) = tensorboard.load(tmp_path / "r")
    assert "loss" not in run.steps.columns
    assert run.warnings == ["no loss tag among loss_ce, loss_kl: pass --loss-col TAG"]


def _lightning_run(root: Path, lr: float = 0.1, on_epoch: bool = True, nan_step: int | None = None,
                   tensorboard: bool = False) -> Path:
    """A real Lightning Trainer run (two epochs of 8 steps, CSVLogger, validation every epoch);
    ``nan_step``: the step whose logged loss is NaN (its value only: the update stays finite);
    ``tensorboard``: a TensorBoardLogger beside the CSVLogger."""
    import lightning as L
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            if self.global_step == nan_step:
                loss = loss + torch.tensor(float("nan"))
            self.log("train_loss", loss, on_step=True, on_epoch=on_epoch)
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=lr)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    logger = CSVLogger(str(root), name="lightning_logs")
    loggers = [logger, TensorBoardLogger(str(root), name="tb_logs")] if tensorboard else logger
    trainer = L.Trainer(max_epochs=2, logger=loggers, log_every_n_steps=1, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False, accelerator="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(Model(), loader, loader)
    return Path(logger.log_dir)


@pytest.fixture(scope="module")
def lightning_csv_dir(tmp_path_factory) -> Path:
    """A real Lightning Trainer run (a few steps, CSVLogger, validation every epoch)."""
    return _lightning_run(tmp_path_factory.mktemp("lightning"))


def test_lightning_csv_loader_merges_rows_and_maps_loss(lightning_csv_dir):
    raw = pd.read_csv(lightning_csv_dir / "metrics.csv")
    assert raw.isna().any().any()  # Lightning leaves cells empty: that is the normal case
    assert lightning_csv.sniff(lightning_csv_dir)
    (run,) = lightning_csv.load(lightning_csv_dir)
    assert run.source == "lightning_csv" and run.name == lightning_csv_dir.name
    steps = raw.dropna(subset=["train_loss_step"]).set_index("step")["train_loss_step"]
    pd.testing.assert_series_equal(run.steps["loss"].dropna(), steps.astype("float64"),
                                   check_names=False, check_index_type=False)
    assert run.steps.index.is_unique and len(run.steps) == 16
    assert "val_loss" in run.steps.columns and run.steps["val_loss"].notna().sum() == 2


def test_a_run_logged_to_csv_and_tensorboard_is_one_run(tmp_path):
    """Two loggers of one Trainer: the same loss at every step, reported once; two runs of one
    format with the same curve (a seeded run repeated) stay two."""
    _lightning_run(tmp_path / "both", tensorboard=True)
    (run,) = discover_runs(tmp_path / "both")
    assert len(run.steps["loss"].dropna()) == 16
    assert any(w.startswith("also logged as") and "one training read twice" in w for w in run.warnings)
    _lightning_run(tmp_path / "again" / "a")
    _lightning_run(tmp_path / "again" / "b")
    assert len(discover_runs(tmp_path / "again")) == 2


def test_two_files_of_one_logger_in_one_folder_are_one_run(tmp_path):
    """MMEngine's LocalVisBackend writes each launch's scalars to vis_data/<time>.json and again to
    vis_data/scalars.json: one training reported twice, its incidents counted twice in the summary.
    The same files in two folders (a seeded run repeated) stay two runs."""
    rows = "".join(f'{{"lr": 1e-05, "loss": {3.0 - 0.01 * it:.4f}, "iter": {it}, "step": {it}}}\n'
                   for it in range(10, 510, 10))
    for folder in ("work_dir/20250315_103803/vis_data", "seeds/a/vis_data", "seeds/b/vis_data"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "scalars.json").write_text(rows)
    (tmp_path / "work_dir/20250315_103803/vis_data/20250315_103803.json").write_text(rows)
    (run,) = discover_runs(tmp_path / "work_dir")
    assert len(run.steps["loss"].dropna()) == 50
    assert any(w.startswith("also logged as") and "two files of one logger" in w for w in run.warnings)
    assert len(discover_runs(tmp_path / "seeds")) == 2


def test_lightning_csv_without_loss_column_warns(tmp_path):
    (tmp_path / "metrics.csv").write_text("epoch,step,val_acc\n0,9,0.5\n1,19,0.6\n")
    (run,) = lightning_csv.load(tmp_path)
    assert run.warnings == ["metrics.csv: no loss column among epoch, step, val_acc: pass --loss-col NAME"]
    (run,) = lightning_csv.load(tmp_path, LoadOptions(loss_col="val_acc"))
    assert run.steps["loss"].tolist() == [0.5, 0.6]


def test_lightning_csv_nan_cells_stay_nan(tmp_path):
    (tmp_path / "metrics.csv").write_text("epoch,step,train_loss\n0,0,1.0\n0,1,nan\n0,2,inf\n")
    (run,) = lightning_csv.load(tmp_path)
    values = run.steps["loss"].tolist()
    assert values[0] == 1.0 and math.isnan(values[1]) and values[2] == math.inf


def test_lightning_csv_nan_at_a_validation_step_is_a_logged_nan(tmp_path):
    """A real Trainer logs a NaN loss (its value only: the update stays finite, as where a scaler
    skips an overflowed step) at the last step of an epoch, the step its validation row shares.
    CSVLogger writes it as ``nan`` and the validation row's loss cell empty: the rows merge into
    one step, and the NaN is still a logged one, reported; the empty cells are not."""
    from sentinel.analyze.analyzer import analyze_run

    log_dir = _lightning_run(tmp_path, lr=0.01, on_epoch=False, nan_step=7)  # the epoch's last batch
    raw = (log_dir / "metrics.csv").read_text()
    assert "0,7,nan," in raw and "0,7,,0." in raw  # the training row's NaN, the validation row beside it
    (run,) = lightning_csv.load(log_dir)
    assert run.meta["logged_nan"]["loss"].tolist() == [7]
    assert math.isnan(run.steps.at[7, "loss"]) and run.steps.at[7, "val_loss"] > 0
    report = analyze_run(run)
    (nonfinite,) = [i for i in report.incidents if i.kind == "nonfinite"]
    assert (nonfinite.step, nonfinite.end_step, report.steps, report.last_step) == (7, 7, 16, 15)
    # Empty loss cells of validation rows are no NaN; a step logged again with a value is not either.
    (tmp_path / "metrics.csv").write_text("epoch,step,train_loss,val_loss\n0,0,2.0,\n0,1,1.9,\n0,1,,1.8\n"
                                          "0,2,nan,\n0,2,1.7,\n0,3,1.6,\n")
    (run,) = lightning_csv.load(tmp_path)
    assert run.meta["logged_nan"]["loss"].tolist() == []
    assert not [i for i in analyze_run(run).incidents if i.kind == "nonfinite"]


def write_sentinel_run(path: Path, n: int = 40, tb: bool = False, torn: bool = False) -> Path:
    with RunWriter(path, {"name": path.name}, tensorboard=tb) as writer:
        for step in range(n):
            writer.write_step({"step": step, "loss": 2.0 - 0.01 * step, "lr": 1e-3})
        writer.write_event(make_event("spike", 5, metric="loss", value=9.0))
    if torn:
        with open(path / "events.jsonl", "ab") as f:
            f.write(b'{"step": 7, "kind": "sp')
    return path


def test_sentinel_run_loader_wraps_the_store(tmp_path):
    run_dir = write_sentinel_run(tmp_path / "run1", torn=True)
    assert sentinel_run.sniff(run_dir) and not sentinel_run.sniff(tmp_path)
    (run,) = sentinel_run.load(run_dir)
    assert run.source == "sentinel" and run.name == "run1"
    assert run.steps["loss"].tolist() == [2.0 - 0.01 * s for s in range(40)]
    assert list(run.events["kind"]) == ["spike"]
    assert run.warnings == ["events.jsonl: skipped truncated last line (23 bytes)"]
    assert run.meta["skiplist"] == []


def test_discover_runs_walks_a_directory_of_runs(tmp_path, lightning_csv_dir):
    import shutil

    write_sentinel_run(tmp_path / "logs" / "a_sentinel", tb=True)
    write_tb(tmp_path / "logs" / "b_tb" / "version_0")
    shutil.copytree(lightning_csv_dir, tmp_path / "logs" / "c_csv")
    (tmp_path / "logs" / "notes.txt").write_text("nothing to see\n")
    assert any((tmp_path / "logs" / "a_sentinel" / "tb").iterdir())
    runs = discover_runs(tmp_path / "logs")
    # The sentinel run's tb/ mirror is not a second run.
    assert [(r.name, r.source) for r in runs] == [
        ("a_sentinel", "sentinel"), ("version_0", "tensorboard"), ("c_csv", "lightning_csv")]


def test_discover_runs_bad_paths(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        discover_runs(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NoRunsError, match="is empty"):
        discover_runs(tmp_path / "empty")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "readme.md").write_text("# hello\n")
    with pytest.raises(NoRunsError, match=r"no training logs found in .*\(skipped 1 file: 1 documentation\).*`sentinel formats` lists"):
        discover_runs(tmp_path / "junk")


def test_stylegan_stats_jsonl(tmp_path):
    """StyleGAN2-ADA's and StyleGAN3's stats.jsonl (training_stats: each statistic a {"num", "mean", "std"}
    object, a row each tick): "not a log format", and with --step-col and --loss-col as well."""
    import json

    from sentinel.analyze.analyzer import analyze_run

    def stat(mean, num=32):
        return {"num": num, "mean": mean, "std": 0.5}

    rows = []
    for tick in range(60):
        g_loss = float("nan") if tick >= 50 else 3.5 - tick / 40
        rows.append({"Loss/scores/fake": stat(-3.1, 64), "Loss/G/loss": stat(g_loss), "Loss/G/reg": stat(0.03, 16),
                     "Loss/D/loss": stat(0.17 + tick / 500), "Loss/r1_penalty": stat(1.7),
                     "Progress/tick": stat(float(tick), 1), "Progress/kimg": stat(4.0 * tick, 1),
                     "Timing/sec_per_kimg": stat(602.0, 1), "timestamp": 1620000000.0 + 60 * tick})
    path = tmp_path / "stats.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))  # json.dumps writes NaN as NaN
    (run,) = discover_runs(path)
    assert run.steps.index[[0, -1]].tolist() == [0, 59] and run.steps["loss"].iloc[1] == pytest.approx(3.475)
    report = analyze_run(run)
    assert any("a GAN's run" in w for w in report.warnings)  # Loss/D/loss the discriminator's
    assert [(i.kind, i.step) for i in report.incidents] == [("nonfinite", 50)]


def test_a_count_of_loss_tokens_is_no_loss_and_a_mean_nll_is_one(tmp_path):
    """Tinker's supervised fine-tuning metrics.jsonl logs num_loss_tokens (the tokens its loss was taken over)
    beside train_mean_nll: the count was read as the loss (final 1080, best 26), the run 'healthy'."""
    import json

    from sentinel.analyze.analyzer import analyze_run

    rows = [{"step": s, "epoch": 0, "learning_rate": 2e-5, "num_sequences": 4, "num_tokens": 900 + s,
             "num_loss_tokens": float(500 + 37 * s % 600), "train_mean_nll": float("nan") if s >= 90 else 2.4 - s / 100,
             "time/step": 1.35} for s in range(120)]
    rows[0]["test/nll"] = 1.17
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (run,) = discover_runs(path)
    assert run.steps["loss"].iloc[1] == pytest.approx(2.39)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents if i.severity.value == "critical"] == [("nonfinite", 90)]


def test_a_log_and_its_json_copy_at_other_steps_are_one_run(tmp_path):
    """MMDetection 2.x writes <time>.log ('Epoch [1][50/1265]') and <time>.log.json ('"epoch": 1, "iter": 50', no
    epoch length) for each run: two runs, the table's steps counted by the last iteration logged (1250), every
    incident told twice at two steps. One run, at the log's steps."""
    text, rows = [], []
    for epoch in (1, 2, 3):
        for it in range(50, 1266, 50):
            loss = 1.8 * math.exp(-((epoch - 1) * 1265 + it) / 800) + 0.15 + 0.00123 * (it % 7)  # 4 digits, 5
            text.append(f"2021-04-28 00:01:23,456 - mmdet - INFO - Epoch [{epoch}][{it}/1265]\tlr: 1.000e-04, eta: 1 day, "
                        f"3:01:02, time: 0.512, data_time: 0.101, memory: 10233, loss_cls: 1.2000, loss: {loss:.4f}, "
                        "grad_norm: 10.2000")
            rows.append(f'{{"mode": "train", "epoch": {epoch}, "iter": {it}, "lr": 0.0001, "memory": 10233, '
                        f'"data_time": 0.101, "loss_cls": 1.2, "loss": {loss:.5f}, "grad_norm": 10.2, "time": 0.512}}')
    work = tmp_path / "work_dirs" / "cornernet"
    work.mkdir(parents=True)
    (work / "20210427_235944.log").write_text("\n".join(text) + "\n")
    (work / "20210427_235944.log.json").write_text('{"env_info": "sys.platform: linux", "seed": 0}\n' + "\n".join(rows) + "\n")
    (run,) = discover_runs(tmp_path / "work_dirs")
    assert run.path.endswith(".log") and run.steps["loss"].dropna().index[-1] == 2 * 1265 + 1250
    assert any("the same losses in the same order at other steps" in w for w in run.warnings)


def test_a_lightning_csv_val_loss_written_nan_at_every_evaluation_is_told(tmp_path):
    """CSVLogger writes a NaN as 'nan' and a metric a row did not log as an empty cell: a val_loss that is 'nan' at
    each epoch's evaluation was dropped as a column never logged (an empty validation split unsaid); one never
    written stays dropped."""
    rows = ["epoch,step,train_loss,val_loss,val_acc"]
    for epoch in range(5):
        rows += [f"{epoch},{epoch * 100 + s * 10 + 9},{2.0 - epoch / 10 - s / 200:.4f},," for s in range(10)]
        rows.append(f"{epoch},{epoch * 100 + 99},,nan,")
    (tmp_path / "metrics.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (run,) = lightning_csv.load(tmp_path)
    assert "val_acc" not in run.steps.columns and "val_loss" in run.steps.columns
    (found,) = analyze_run(run).incidents
    assert found.kind == "nonfinite" and found.message.startswith("val_loss non-finite (nan) at 5 of 5 evaluations")
