"""A 2-process DDP run on CPU (gloo) with a fault on rank 1 only; run as a script.

Usage: python ddp_run.py OUT_DIR {poison|nan}
Each rank saves its final weights to OUT_DIR/weights_rank<r>.pt.
"""

import os
import sys

import lightning as L
import torch
from torch import nn

from sentinel.callbacks import SentinelCallback

B, STEPS = 8, 80


class Data(torch.utils.data.Dataset):
    def __init__(self, fault: str) -> None:
        g = torch.Generator().manual_seed(0)
        n = 2 * B * STEPS
        self.x = torch.randn(n, 8, generator=g)
        self.y = self.x @ torch.randn(8, 1, generator=g) / 8**0.5
        # DistributedSampler(shuffle=False) gives rank r the indices r, r+2, ...: batch 40 of rank 1.
        rank1_batch40 = {2 * (40 * B + j) + 1 for j in range(B)}
        self.bad = rank1_batch40 if fault == "poison" else {min(rank1_batch40)}
        self.fault = fault

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        if i in self.bad:
            x = x * 1e3 if self.fault == "poison" else torch.full_like(x, float("nan"))
        return {"x": x, "y": self.y[i], "index": torch.tensor(i)}


class Lit(L.LightningModule):
    def __init__(self, fault: str) -> None:
        super().__init__()
        self.fault = fault
        self.blocks = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

    def train_dataloader(self):
        # An explicit unshuffled sampler, so the faulty samples land in batch 40 of rank 1.
        data = Data(self.fault)
        sampler = torch.utils.data.DistributedSampler(data, num_replicas=2, rank=self.global_rank, shuffle=False)
        return torch.utils.data.DataLoader(data, batch_size=B, sampler=sampler)

    def training_step(self, batch, batch_idx):
        return nn.functional.mse_loss(self.blocks(batch["x"]), batch["y"])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)


def main(out: str, fault: str) -> None:
    L.seed_everything(0, verbose=False)
    module = Lit(fault)
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=1, logger=False,
                        use_distributed_sampler=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False,
                        callbacks=[SentinelCallback(log_dir=f"{out}/run", tensorboard=False,
                                                    snapshot_every=10)])
    trainer.fit(module)
    torch.save(module.state_dict(), f"{out}/weights_rank{trainer.global_rank}.pt")
    trainer.strategy.barrier()  # both ranks' results on disk before either leaves
    # Leave without the gloo group's C++ teardown: at interpreter exit it aborted now and then under
    # load ("terminate called without an active exception", SIGABRT) after the work was done.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
