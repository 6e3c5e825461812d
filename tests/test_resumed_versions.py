"""A Lightning fit resumed from a checkpoint with a new Trainer logs into the next version_N folder:
one training, read as one run (the first version's blow-up reported as the stretch the resume
replaced). Fits that start afresh stay runs of their own."""

from __future__ import annotations

import pandas as pd
import pytest

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs
from sentinel.analyze.loaders import RunData
from sentinel.analyze.resumed_versions import join_resumed_versions


def _fit(linear_fit, root, epochs: int, blow_after: int | None = None, ckpt: str | None = None,
         every: int = 1) -> None:
    """A tiny Lightning fit (20 steps an epoch) logging to CSV under root/exp, checkpoints under
    root/ckpt; ``blow_after``: the loss scaled x20 from that global step on (the weights diverge)."""
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger

    def on_loss(module, loss):
        if blow_after is not None and module.global_step >= blow_after:
            loss = loss * 20
        module.log("train_loss", loss)
        return loss

    trainer = L.Trainer(max_epochs=epochs, logger=CSVLogger(str(root), name="exp"), log_every_n_steps=every,
                        enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=True,
                        callbacks=[ModelCheckpoint(dirpath=str(root / "ckpt"), save_top_k=-1, every_n_epochs=1)])
    linear_fit(trainer, on_loss, ckpt_path=ckpt)


def test_a_fit_resumed_from_an_earlier_checkpoint_is_one_run_with_the_blow_up_replaced(tmp_path, linear_fit):
    _fit(linear_fit, tmp_path, epochs=8, blow_after=110)  # diverges in epoch 5, after the step-100 checkpoint
    _fit(linear_fit, tmp_path, epochs=12, ckpt=str(tmp_path / "ckpt" / "epoch=4-step=100.ckpt"))
    (run,) = discover_runs(tmp_path / "exp")
    assert run.name == "version_0" and run.steps.index.tolist() == list(range(240))
    assert any("version_1/metrics.csv is this training resumed from a checkpoint at step 100" in w
               for w in run.warnings)
    (stretch,) = run.abandoned
    assert (stretch.resumed_at, stretch.first, stretch.last) == (100, 100, 159)
    report = analyze_run(run)
    assert report.verdict.value == "recovered"
    restart = [i for i in report.incidents if i.kind == "restart"]
    replaced = [i for i in report.incidents if i.details.get("replaced")]
    assert len(restart) == 1 and replaced and all(i.step >= 100 for i in replaced)


def test_fits_that_start_afresh_stay_runs_of_their_own(tmp_path, linear_fit):
    _fit(linear_fit, tmp_path, epochs=3)
    _fit(linear_fit, tmp_path, epochs=3, every=5)  # another fit logging less often: its first step is 4
    runs = discover_runs(tmp_path / "exp")
    assert [r.name for r in runs] == ["version_0", "version_1"]


def _run(name: str, path: str, losses: list[float], first: int, epoch: list[int] | None = None,
         source: str = "tensorboard") -> RunData:
    columns = {"loss": losses} if epoch is None else {"loss": losses, "epoch": epoch}
    return RunData(name, path, source, pd.DataFrame(columns, index=range(first, first + 10 * len(losses), 10)))


@pytest.mark.parametrize(("later", "joined"), [
    (_run("version_1", "lg/version_1", [2.1, 2.0], 30, epoch=[1, 1]), True),  # resumed mid-history
    (_run("version_1", "lg/version_1", [2.1, 2.0], 60, epoch=[2, 2]), True),  # from the last checkpoint
    (_run("version_1", "lg/version_1", [2.1, 2.0], 80), False),  # starts three intervals after the end
    (_run("version_1", "lg/version_1", [2.1, 2.0], 30, epoch=[0, 0]), False),  # a fresh fit's epoch 0
    (_run("version_1", "lg/version_1", [2.15, 2.0], 30), True),  # no epoch: its loss goes on from there
    (_run("version_1", "lg/version_1", [3.0, 2.0], 30), False),  # ... or starts high again
    (_run("version_1", "other/version_1", [2.1, 2.0], 30, epoch=[1, 1]), False),  # another folder
    (_run("version_1", "lg/version_1", [2.1, 2.0], 30, epoch=[1, 1], source="lightning_csv"), False),
])
def test_what_a_resumed_version_is(later, joined):
    before = _run("version_0", "lg/version_0", [3.0, 2.6, 2.4, 2.2, 2.1, 2.05], 0, epoch=[0, 0, 0, 1, 1, 1])
    runs = join_resumed_versions([before, later])
    assert len(runs) == (1 if joined else 2)


def _hf_launch(runs_dir, started: str, steps: range, loss) -> None:
    """One launch of the Hugging Face Trainer's TensorBoard callback: runs/<%b%d_%H-%M-%S>_<host>
    (its default logging_dir, PyTorch's SummaryWriter default too), its train/ tags every 10 steps."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(runs_dir / f"{started}_gpu-node-1"))
    for step in steps:
        writer.add_scalar("train/loss", loss(step), step)
        writer.add_scalar("train/learning_rate", 5e-5, step)
        writer.add_scalar("train/epoch", step / 800, step)
    writer.close()


def _hf_loss(step: int, blow_from: int | None = None) -> float:
    return 9.0 if blow_from is not None and step >= blow_from else 2 + 2 * 0.9995 ** step


def test_a_hugging_face_trainer_resumed_into_a_new_runs_folder_is_one_run(tmp_path):
    """Its first launch blew up at step 1500; the second, train(resume_from_checkpoint=
    'checkpoint-1000'), logged from step 1010 into a new runs/<time>_<host>. Without the
    checkpoints' trainer_state.json they were two runs, the first 'unhealthy'."""
    runs_dir = tmp_path / "out" / "runs"
    _hf_launch(runs_dir, "Dec05_10-00-00", range(10, 2001, 10), lambda s: _hf_loss(s, blow_from=1500))
    _hf_launch(runs_dir, "Dec05_12-30-00", range(1010, 3001, 10), _hf_loss)
    _hf_launch(runs_dir, "Dec05_16-00-00", range(10, 501, 10), _hf_loss)  # a fresh launch: its own run
    first, fresh = discover_runs(tmp_path / "out")
    assert first.name == "Dec05_10-00-00_gpu-node-1" and fresh.name == "Dec05_16-00-00_gpu-node-1"
    assert first.steps.index.tolist() == list(range(10, 3001, 10)) and len(fresh.steps) == 50
    (stretch,) = first.abandoned
    assert (stretch.resumed_at, stretch.first, stretch.last) == (1010, 1010, 2000)
    assert analyze_run(first).verdict.value == "recovered"
