"""A loss logged once an epoch, as the epoch's mean, is judged as epoch means are: Lightning's
``self.log("train_loss", loss, on_step=False, on_epoch=True)`` writes it at each epoch's last step
under the step's name."""

from __future__ import annotations

import pytest

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs


def _fit(root, epochs: int, bad_epoch: int | None) -> None:
    """A tiny Lightning fit (20 steps an epoch) logging its loss's epoch mean to CSV; in
    ``bad_epoch`` every batch's loss is tripled (a bad shard of data)."""
    import lightning as L
    import torch
    from lightning.pytorch.loggers import CSVLogger
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    x = torch.randn(640, 8)
    y = x @ torch.randn(8, 1) + 0.5 * torch.randn(640, 1)

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(8, 1)

        def training_step(self, batch, _):
            loss = torch.nn.functional.mse_loss(self.net(batch[0]), batch[1])
            logged = loss * 3 if self.current_epoch == bad_epoch else loss
            self.log("train_loss", logged.detach(), on_step=False, on_epoch=True)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.02)

    trainer = L.Trainer(max_epochs=epochs, logger=CSVLogger(str(root), name="exp"), enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=False)
    trainer.fit(Model(), DataLoader(TensorDataset(x, y), batch_size=32))


@pytest.mark.parametrize("bad_epoch", [None, 22])
def test_a_loss_logged_once_an_epoch_is_judged_as_epoch_means(tmp_path, bad_epoch):
    """Its bad epoch (x3, the 23rd value) read 'outlier batch, info', one batch's blip: it is a
    whole epoch's mean, a spike; a healthy fit has none."""
    _fit(tmp_path, epochs=30, bad_epoch=bad_epoch)
    (run,) = discover_runs(tmp_path / "exp")
    assert run.steps["loss"].count() == 30 and run.steps["loss"].dropna().index[0] == 19
    report = analyze_run(run)
    blips = [(i.kind, i.step) for i in report.incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert blips == ([] if bad_epoch is None else [("loss_spike", 20 * bad_epoch + 19)])
