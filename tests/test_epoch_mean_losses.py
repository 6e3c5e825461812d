"""A loss logged once an epoch, as the epoch's mean, is judged as epoch means are: Lightning's
``self.log("train_loss", loss, on_step=False, on_epoch=True)`` writes it at each epoch's last step
under the step's name."""

from __future__ import annotations

import pytest

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs


def _fit(linear_fit, root, epochs: int, bad_epoch: int | None) -> None:
    """A tiny Lightning fit (20 steps an epoch) logging its loss's epoch mean to CSV; in
    ``bad_epoch`` every batch's loss is tripled (a bad shard of data)."""
    import lightning as L
    from lightning.pytorch.loggers import CSVLogger

    def on_loss(module, loss):
        logged = loss * 3 if module.current_epoch == bad_epoch else loss
        module.log("train_loss", logged.detach(), on_step=False, on_epoch=True)
        return loss

    trainer = L.Trainer(max_epochs=epochs, logger=CSVLogger(str(root), name="exp"), enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False)
    linear_fit(trainer, on_loss, lr=0.02, noise=0.5)


@pytest.mark.parametrize("bad_epoch", [None, 22])
def test_a_loss_logged_once_an_epoch_is_judged_as_epoch_means(tmp_path, linear_fit, bad_epoch):
    """Its bad epoch (x3, the 23rd value) read 'outlier batch, info', one batch's blip: it is a
    whole epoch's mean, a spike; a healthy fit has none."""
    _fit(linear_fit, tmp_path, epochs=30, bad_epoch=bad_epoch)
    (run,) = discover_runs(tmp_path / "exp")
    assert run.steps["loss"].count() == 30 and run.steps["loss"].dropna().index[0] == 19
    report = analyze_run(run)
    blips = [(i.kind, i.step) for i in report.incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert blips == ([] if bad_epoch is None else [("loss_spike", 20 * bad_epoch + 19)])
