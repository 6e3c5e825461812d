"""How ``tests/fixtures/logs/lightning_rich.txt`` was made: a plain Lightning ``Trainer.fit`` (no
sentinel) with ``RichProgressBar`` drawing on a terminal (``force_terminal``: colours, "\\r" redraws,
cursor codes), 3 epochs of 30 batches, ``train_loss`` and ``val_loss`` on the bar, the loss NaN from
global step 70 on.

Usage: python lightning_rich_bar.py > tests/fixtures/logs/lightning_rich.txt 2>/dev/null
(needs ``rich``; the draws depend on timing, so the fixture is kept rather than made in each test)
"""

import time

import lightning as L
import torch
from lightning.pytorch.callbacks import RichProgressBar
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

NAN_FROM = 70


class Regression(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        time.sleep(0.03)  # a step slower than the bar's refresh, so that each one is drawn
        loss = nn.functional.mse_loss(self.net(batch[0]), batch[1])
        if self.global_step >= NAN_FROM:
            loss = loss * float("nan")
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", nn.functional.mse_loss(self.net(batch[0]), batch[1]), prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


if __name__ == "__main__":
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(480, 8), torch.randn(480, 1))
    bar = RichProgressBar(console_kwargs={"force_terminal": True, "width": 150})
    trainer = L.Trainer(max_epochs=3, callbacks=[bar], logger=False, enable_checkpointing=False,
                        enable_model_summary=False, log_every_n_steps=1)
    trainer.fit(Regression(), DataLoader(data, batch_size=16), DataLoader(data, batch_size=160))
