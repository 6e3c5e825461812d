"""Harmless hard batches in real Lightning runs: tier 1 answers each, nothing is rolled back.

A dozen isolated batches with shuffled labels (a loss many times the run's level, back to normal
on the next batch) are what healthy runs look like to the spike rule. The guard must withhold
exactly those updates, never roll back nor give up, and end where a run that never applied them
ends, close to the clean run.
"""

from __future__ import annotations

import json

import lightning as L
import pytest
import torch

from sentinel.callbacks import SentinelCallback
from sentinel.store import read_skiplist

BATCH = 16
STEPS = 210  # optimizer steps
# Twelve hard batches, 8 optimizer steps apart, once the loss has settled (the loss falls by
# 100x over the first ~80 updates; a window that holds that descent judges jumps loosely).
HARD_STEPS = [110 + 8 * k for k in range(12)]


class ShuffledLabels(torch.utils.data.Dataset):
    """The tiny regression task; in the batches at ``hard`` positions every sample gets another
    sample's label (rotated by half a batch), times 3: a loss of about 10x the label variance,
    whatever the batch, where the run's own loss is ~0.01."""

    def __init__(self, data, hard: list[int] = ()) -> None:
        self.data, self.hard = data, set(hard)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int):
        item = self.data[i]
        if i // BATCH in self.hard:
            start = i - i % BATCH
            item = {**item, "y": 3 * self.data.y[start + (i % BATCH + BATCH // 2) % BATCH]}
        return item


class LitRegression(L.LightningModule):
    """``withhold``: optimizer steps whose update this module drops by itself (the reference
    run: what the guard should do, done by hand)."""

    def __init__(self, net, mse, withhold=()) -> None:
        super().__init__()
        self.net, self.mse, self.withhold = net, mse, set(withhold)

    def training_step(self, batch, batch_idx):
        return self.mse(self.net, batch)

    def on_before_optimizer_step(self, optimizer):
        if self.global_step in self.withhold:
            for p in self.parameters():
                p.grad = None

    def configure_optimizers(self):
        opt = torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def _fit(tmp_path, tiny_task, *, hard=(), withhold=(), guard=False, **trainer_kwargs):
    Data, Net, mse, _ = tiny_task
    L.seed_everything(0, verbose=False)
    data = Data(n=BATCH * STEPS * trainer_kwargs["accumulate_grad_batches"])
    loader = torch.utils.data.DataLoader(ShuffledLabels(data, hard), batch_size=BATCH, shuffle=False)
    module = LitRegression(Net(), mse, withhold)
    callbacks = [SentinelCallback(log_dir=str(tmp_path / "run"), tensorboard=False)] if guard else []
    trainer = L.Trainer(accelerator="cpu", max_epochs=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=callbacks,
                        **trainer_kwargs)
    trainer.fit(module, loader)
    with torch.no_grad():
        final = float(mse(module.net, {"x": data.x[-512:], "y": data.y[-512:]}))
    return final, module


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
@pytest.mark.parametrize("accumulate", [1, 2])
def test_a_dozen_hard_batches_are_withheld_updates_and_the_run_ends_with_the_clean_one(
        tmp_path, tiny_task, precision, accumulate):
    options = {"precision": precision, "accumulate_grad_batches": accumulate}
    # One hard micro-batch in each of those optimizer steps, first or second in turn.
    hard = [step * accumulate + k % accumulate for k, step in enumerate(HARD_STEPS)]
    clean, _ = _fit(tmp_path / "clean", tiny_task, **options)
    reference, ref_module = _fit(tmp_path / "ref", tiny_task, hard=hard, withhold=HARD_STEPS, **options)
    final, module = _fit(tmp_path / "guarded", tiny_task, hard=hard, guard=True, **options)

    events = [json.loads(line) for line in (tmp_path / "guarded" / "run" / "events.jsonl").read_text().splitlines()]
    kinds = {e["kind"] for e in events}
    skips = [e for e in events if e["kind"] == "skip_step"]
    # Each hard batch is one withheld update on its own, nothing more.
    assert [e["step"] for e in skips] == HARD_STEPS
    assert all(e["streak"] == 1 and e["reason"] == "loss_spike" for e in skips), skips
    assert not kinds & {"rollback", "gave_up", "skip", "nonfinite"}, kinds
    # The guarded run is the run that never applied those updates, to the bit.
    for (name, p), ref in zip(module.named_parameters(), ref_module.parameters()):
        assert torch.equal(p, ref), name
    assert final == reference
    assert final <= clean * 1.10, (final, clean)  # 12 of 210 updates fewer
    # The skip list names the hard batches only, not the healthy micro-batch beside each one.
    listed = {e["batch_idx"] for e in read_skiplist(tmp_path / "guarded" / "run")}
    assert listed == set(hard)
