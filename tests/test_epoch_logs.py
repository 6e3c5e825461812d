"""Logs of one row per epoch (Keras' CSVLogger and History, Ultralytics' results.csv, a line per
epoch): the report speaks of epochs, as their authors do, and a one-row jump of the loss is an
epoch gone wrong (a spike), not one outlier batch."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from sentinel.analyze import analyze
from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs
from sentinel.analyze.render.plot import plot_figure
from sentinel.cli.main import main


def _keras_csv(path, epochs: int = 40, jump_at: int | None = 21):
    """What tf.keras.callbacks.CSVLogger writes: epochs from 0, the metrics sorted by name."""
    rng = np.random.default_rng(0)
    rows = ["epoch,accuracy,loss,val_accuracy,val_loss"]
    for e in range(epochs):
        loss = 0.3 + 2 / math.sqrt(e + 1) + rng.normal(0, 0.005)
        loss *= 3 if e == jump_at else 1
        rows.append(f"{e},{0.5 + e / 100:.4f},{loss:.4f},{0.5 + e / 120:.4f},{0.9 + 1.5 / math.sqrt(e + 1):.4f}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_a_keras_csvlogger_table_is_read_in_epochs(tmp_path):
    (run,) = discover_runs(_keras_csv(tmp_path / "training.csv"))
    report = analyze_run(run)
    assert report.step_unit == "epoch"
    (spike,) = [i for i in report.incidents if i.kind in ("loss_spike", "outlier_batch")]
    # Each row is an epoch's mean: tripled for one epoch is a whole epoch gone wrong.
    assert (spike.kind, spike.step, spike.severity.value, spike.resolved) == ("loss_spike", 21, "warning", True)
    assert "at epoch 21" in spike.message and "recovered in 1 epoch (epoch 22)" in spike.message
    assert "step" not in spike.message
    assert report.verdict.value == "recovered"
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "training.csv")])
    assert "  epochs 40 (0..39)" in result.output and "\n  epoch  sev" in result.output
    doc = json.loads(CliRunner().invoke(main, ["analyze", str(tmp_path / "training.csv"), "--format", "json"]).output)
    assert doc["runs"][0]["step_unit"] == "epoch"
    markdown = CliRunner().invoke(main, ["analyze", str(tmp_path / "training.csv"), "--format", "markdown"]).output
    assert "| epoch | severity | kind | message |" in markdown
    assert plot_figure(analyze(tmp_path / "training.csv")).axes[-1].get_xlabel() == "epoch"


def test_a_keras_history_dict_is_read_in_epochs(tmp_path):
    losses = [2.0 / math.sqrt(e + 1) + 0.3 for e in range(30)]
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"loss": losses, "val_loss": [v + 0.1 for v in losses]}), encoding="utf-8")
    (run,) = discover_runs(path)
    assert analyze_run(run).step_unit == "epoch"


@pytest.mark.parametrize("step", ["step", "iter"])
def test_a_table_of_steps_keeps_its_one_row_blips_as_outlier_batches(tmp_path, step):
    path = _keras_csv(tmp_path / "metrics.csv", epochs=400, jump_at=210)
    path.write_text(path.read_text().replace("epoch,", f"{step},", 1))
    report = analyze_run(discover_runs(path)[0])
    assert report.step_unit == "step"
    assert [(i.kind, i.step) for i in report.incidents if i.kind in ("loss_spike", "outlier_batch")] == \
        [("outlier_batch", 210)]
    assert "at step 210" in next(i.message for i in report.incidents if i.kind == "outlier_batch")


def test_ultralytics_results_csv_is_read_in_epochs(tmp_path):
    """results.csv as Ultralytics writes it: names padded with spaces, the loss in three parts."""
    header = ["epoch", "train/box_loss", "train/cls_loss", "train/dfl_loss", "metrics/mAP50(B)", "val/box_loss",
              "val/cls_loss", "val/dfl_loss", "lr/pg0"]
    rows = [",".join(f"{name:>25}" for name in header)]
    for e in range(1, 31):
        box, cls, dfl = 1.5 / math.sqrt(e), 2.0 / math.sqrt(e), 1.2 / math.sqrt(e)
        rows.append(",".join(f"{v:>25}" for v in (e, f"{box:.5f}", f"{cls:.5f}", f"{dfl:.5f}", "0.5", "1.1", "1.2",
                                                 "1.0", "0.001")))
    path = tmp_path / "results.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    report = analyze_run(discover_runs(path)[0])
    assert report.step_unit == "epoch" and report.first_step == 1 and report.last_step == 30


def _keras_tensorboard(root, batches: bool = False, every: int = 1):
    """What tf.keras.callbacks.TensorBoard writes: train/ and validation/ event files, the mean loss
    of each epoch as 'epoch_loss' at the epoch's number (with update_freq, 'batch_loss' too)."""
    from torch.utils.tensorboard import SummaryWriter

    train, validation = SummaryWriter(str(root / "train")), SummaryWriter(str(root / "validation"))
    for e in range(30):
        loss = 0.3 + math.exp(-e / 8) + (2.5 if e == 20 else 0.0)
        train.add_scalar("epoch_loss", loss, e * every)
        train.add_scalar("epoch_accuracy", 0.9, e * every)
        validation.add_scalar("epoch_loss", loss + 0.05, e * every)
        if batches:
            for b in range(10):
                train.add_scalar("batch_loss", 0.3 + math.exp(-(e * 10 + b) / 80), e * 10 + b)
    train.close()
    validation.close()
    return root


def test_kerass_tensorboard_epoch_loss_is_read_in_epochs(tmp_path):
    (run,) = discover_runs(_keras_tensorboard(tmp_path / "logs" / "fit" / "20240101-000000"))
    assert run.meta["step_unit"] == "epoch" and len(run.steps) == 30
    report = analyze_run(run)
    (spike,) = [i for i in report.incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert spike.kind == "loss_spike" and spike.step == 20 and "at epoch 20" in spike.message
    assert report.verdict.value == "recovered"


def test_a_batch_loss_beside_it_or_epochs_logged_at_global_steps_stay_steps(tmp_path):
    (run,) = discover_runs(_keras_tensorboard(tmp_path / "a", batches=True))
    assert run.meta["tags"]["batch_loss"] == "loss" and "step_unit" not in run.meta
    (run,) = discover_runs(_keras_tensorboard(tmp_path / "b", every=100))
    assert "step_unit" not in run.meta


def test_runs_in_epochs_and_runs_in_steps_are_plotted_on_axes_of_their_own(tmp_path):
    """30 epochs beside 5,000 steps on one axis were a sliver at its left: a column of panels per
    unit, each axis named; a panel one column's runs did not log says so."""
    _keras_tensorboard(tmp_path / "keras")
    rows = ["step,loss,grad_norm"] + [f"{s},{2 + 8 * math.exp(-s / 1500):.4f},1.1" for s in range(100, 5100, 100)]
    (tmp_path / "steps.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    fig = plot_figure(analyze(tmp_path / "keras", tmp_path / "steps.csv"))
    axes = fig.axes
    assert len(axes) == 4  # loss and grad norm, in two columns
    assert [ax.get_xlabel() for ax in axes if ax.get_xlabel()] == ["epoch", "step"]
    epoch_loss = axes[0].get_lines()[0].get_xdata()
    assert max(epoch_loss) == 29 and axes[0].get_xlim()[1] < 40  # the epoch column's own scale
    assert any(t.get_text() == "not logged by these runs" for t in axes[2].texts)
    alone = plot_figure(analyze(tmp_path / "steps.csv"))
    assert len(alone.axes) == 2 and alone.axes[-1].get_xlabel() == "step"


def test_an_epochs_mean_repeated_at_four_epochs_is_stuck(tmp_path):
    """RecBole-MetaRec's issue: "train loss: 1.3043" at each of five epochs (the model learned
    nothing): healthy, as a stuck stretch needed eight rows. A mean over an epoch's batches does
    not repeat to all its printed digits by chance: four epochs are enough."""
    lines = []
    for epoch in range(5):
        lines += [f"27 Nov 14:49    INFO  epoch {epoch} training [time: 1.82s, train loss: 1.3043]",
                  f"27 Nov 14:49    INFO  epoch {epoch} evaluating [time: 0.07s, valid_score: 0.428900]"]
    path = tmp_path / "recbole.log"
    path.write_text("\n".join(lines) + "\n")
    (incident,) = analyze_run(discover_runs(path)[0]).incidents
    assert (incident.kind, incident.step, incident.end_step) == ("loss_stuck", 0, 4)
    lines = [line.replace("1.3043", f"1.30{43 - i}") if "training" in line else line for i, line in enumerate(lines)]
    path.write_text("\n".join(lines) + "\n")
    assert analyze_run(discover_runs(path)[0]).incidents == []


@pytest.mark.parametrize("line", [
    # demucs' and svoice's solver (their logger's prefix before it)
    "[2024-10-03 09:27:16,231][svoice.solver][INFO] - Epoch {e}: train={t:.5f} valid={v:.5f} best={v:.5f}",
    # a script's own f-string
    "Epoch {e:3d}/60: Train={t:.4f} Val={v:.4f} [12s elapsed, ~600s remaining]",
])
def test_a_loss_named_by_its_set_alone_beside_the_evaluations(tmp_path, line):
    """"Epoch 3: train=0.0878 valid=0.0781": the training and the evaluation loss named by their
    sets alone. It was "its lines log best, train, valid ... but no loss", the "valid" beside
    "train" making each line an evaluation's; a jump of the training value at epoch 12 is a spike."""
    path = tmp_path / "train.log"
    path.write_text("".join(line.format(e=e, t=(4.6 - e / 20) * (3 if e == 12 else 1), v=13.2 - e / 10) + "\n"
                            for e in range(30)))
    (run,) = discover_runs(path)
    assert run.steps["loss"].iloc[:2].tolist() == pytest.approx([4.6, 4.55])
    assert run.steps["val_loss"].iloc[0] == pytest.approx(13.2)
    report = analyze_run(run)
    assert [(i.kind, i.step) for i in report.incidents] == [("loss_spike", 12)]


def test_a_value_named_train_after_a_metrics_name_is_no_loss(tmp_path):
    """The same two values after a metric's name are that metric's, no loss: still refused."""
    path = tmp_path / "train.log"
    path.write_text("".join(f"Epoch {e}: accuracy train={0.5 + e / 100:.3f} val={0.5 + e / 120:.3f}\n" for e in range(30)))
    with pytest.raises(ValueError, match="no loss"):
        discover_runs(path)


def test_a_plateau_in_a_log_of_epochs_is_judged_over_epochs(tmp_path):
    """A Keras U-Net's dice loss flat at -0.0191 for twelve epochs ("my model does not learn"): the plateau
    window of 1,000 steps was 1,000 epochs, never reached. In a log of epochs it is 10 epochs."""
    values = [-0.0190, -0.0191, -0.0192, -0.0191, -0.0192, -0.0191, -0.0192, -0.0191, -0.0192, -0.0191, -0.0192,
              -0.0191, -0.0192]
    path = tmp_path / "train.log"
    path.write_text("".join(f"Epoch {e}/50\n - 120s - loss: {v:.4f} - dice_coef: {-v:.4f} - val_loss: -0.0190\n"
                            for e, v in enumerate(values, 1)))
    (run,) = discover_runs(path)
    report = analyze_run(run)
    assert report.step_unit == "epoch"
    (plateau,) = [i for i in report.incidents if i.kind == "plateau"]
    assert "10 epochs" in plateau.message


def _fit_linear(tmp_path, log_every: int, samples: int, epochs: int, log_every_n_steps: int, test: bool = False) -> str:
    """A real Lightning fit of a linear model with a CSVLogger, its batch loss logged as train_loss every
    ``log_every`` batches (and, with ``test``, trainer.test() logging test_loss on step and on epoch): its log dir."""
    import warnings

    import lightning as L
    import torch
    from lightning.pytorch.loggers import CSVLogger

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            loss = torch.nn.functional.mse_loss(self.net(batch[0]), batch[1])
            if batch_idx % log_every == 0:
                self.log("train_loss", loss)
            return loss

        def test_step(self, batch, batch_idx):
            self.log("test_loss", torch.nn.functional.mse_loss(self.net(batch[0]), batch[1]), on_step=True,
                     on_epoch=True)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(samples, 4), torch.randn(samples, 1))
    logger = CSVLogger(str(tmp_path), name="logs")
    trainer = L.Trainer(max_epochs=epochs, logger=logger, log_every_n_steps=log_every_n_steps,
                        enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
                        accelerator="cpu")
    model = Model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(model, torch.utils.data.DataLoader(data, batch_size=4))
        if test:
            trainer.test(model, torch.utils.data.DataLoader(data, batch_size=8), verbose=False)
    return logger.log_dir


def test_a_test_loss_logged_per_step_and_per_epoch_is_no_nan(tmp_path):
    """trainer.test() with self.log("test_loss", loss, on_step=True, on_epoch=True): the CSVLogger writes
    test_loss_step on each test batch's row and test_loss_epoch on a row of its own. The epoch column's empty cells on
    the batch rows were 'test_loss_epoch non-finite (nan) at 20 of 21 evaluations', a warning on a healthy run."""
    (run,) = discover_runs(_fit_linear(tmp_path, log_every=1, samples=64, epochs=2, log_every_n_steps=1, test=True))
    assert {"test_loss_step", "test_loss_epoch"} <= set(run.steps.columns)
    report = analyze_run(run)
    assert [i.message for i in report.incidents if i.kind == "nonfinite"] == [] and report.verdict == "healthy"


def test_a_loss_logged_now_and_then_is_read_once_per_value(tmp_path):
    """self.log("train_loss", loss) every 8th batch under log_every_n_steps=2: Lightning's CSVLogger writes each value
    again at the next logging steps, four rows a value. Read as steps, a held value then a jump was a spike scored in
    the billions (held rows have no noise) and a 'divergence' over each high value's rows; each value is read once."""
    (run,) = discover_runs(_fit_linear(tmp_path, log_every=8, samples=256, epochs=3, log_every_n_steps=2))
    assert run.steps["loss"].count() == 96  # the file as written: each value four times
    report = analyze_run(run)
    assert any("repeats each value at 4 logged steps in a row (24 values over 96 rows" in w for w in report.warnings)
    assert all(i.severity != "critical" for i in report.incidents)
    assert all(i.details.get("score", 0) < 1e6 for i in report.incidents)
