"""A run whose data gets harder (a new stage of the data mix) is not a divergence to roll back.

A tiny regression trains on clean targets, then on targets with 5x the noise from step SHIFT:
its loss settles several times higher and stays there, as a curriculum's or a data mix's next
stage does. Rolling back cannot cure that (the next batches are as hard), and every rollback
counts toward the give-up; the guard re-runs the last batch applied before the level rose, finds it scoring what it scored
then on the current weights (damaged weights would score it higher), and accepts the new level.
"""

from __future__ import annotations

import json

import torch
from torch import nn

from sentinel import Sentinel, TrainingGaveUp

BATCH, STEPS, SHIFT = 16, 700, 300


class Stages(torch.utils.data.Dataset):
    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(BATCH * STEPS, 8, generator=g)
        w = torch.randn(8, 1, generator=g)
        noise = torch.randn(BATCH * STEPS, 1, generator=g)
        noise[: BATCH * SHIFT] *= 0.1  # the first stage: nearly clean targets
        noise[BATCH * SHIFT:] *= 0.5  # the next stage: harder, for good
        self.y = self.x @ w + noise

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


def mse(model: nn.Module, batch) -> torch.Tensor:
    return nn.functional.mse_loss(model(batch[0]), batch[1])


def _train(tmp_path, data, creep_from: int | None = None) -> tuple[Sentinel, list[dict]]:
    """A guarded raw loop. From ``creep_from`` on, the learning rate is 0 (a schedule that ended)
    and the head's weights grow 0.5% a step behind the guard's back: damage that comes on too
    slowly for the spike rule, only the level rises, and no update of the run can undo it."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=False)
    sen = Sentinel(model, opt, log_dir=str(tmp_path / "run"), loss_fn=mse, tensorboard=False, max_rollbacks=2)
    try:
        for batch in sen.batches(loader):
            opt.zero_grad()
            loss = mse(model, batch)
            loss.backward()
            if sen.check(loss):
                opt.step()
            sen.end_step()
            if creep_from is not None and sen.step >= creep_from:
                for group in opt.param_groups:
                    group["lr"] = 0.0
                with torch.no_grad():
                    model[2].weight.mul_(1.005)
    except TrainingGaveUp:  # the events say why
        pass
    sen.close()
    return sen, [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]


def test_a_harder_stage_of_data_is_a_new_level_not_a_rollback(tmp_path):
    sen, events = _train(tmp_path, Stages())
    kinds = [e["kind"] for e in events]
    assert "rollback" not in kinds and "gave_up" not in kinds and sen.step == STEPS
    (divergence,) = [e for e in events if e["kind"] == "divergence"]
    assert divergence["accepted"] is True and divergence["onset"] >= SHIFT
    # The last batch applied before the level rose scores now what it scored then.
    check = divergence["weights_check"]
    assert check["weights_ok"] is True and check["batch_idx"] < divergence["onset"]
    assert abs(check["loss"] - check["baseline"]) < 0.5 * check["baseline"]
    assert divergence["level"] > 3 * divergence["best"]  # the new stage's level, several times higher
    skipped = [e for e in events if e["kind"] == "skip_step"]
    assert len(skipped) < 30  # the new stage's first, highest batches withheld, then trained on


class OneStage(Stages):
    def __init__(self) -> None:
        super().__init__()
        self.y = self.x @ torch.linalg.lstsq(self.x[:BATCH * SHIFT], self.y[:BATCH * SHIFT]).solution


def test_weights_that_creep_away_still_roll_back(tmp_path):
    # The same level rise, from damage: the batch applied before it scores higher now.
    _, events = _train(tmp_path, OneStage(), creep_from=SHIFT)
    rollbacks = [e for e in events if e["kind"] == "rollback" and e["reason"] == "divergence"]
    assert rollbacks and rollbacks[0]["weights_check"]["weights_ok"] is False
    # Called ``patience`` steps into the stretch, further back than the ring reaches: the state
    # restored is the one kept from before the stretch began, not a diverged one from inside it.
    (divergence,) = [e for e in events if e["kind"] == "divergence"]
    assert divergence["step"] - divergence["onset"] >= 200
    assert rollbacks[0]["spike_step"] == divergence["onset"]
    assert divergence["onset"] - 25 <= rollbacks[0]["restored_step"] < divergence["onset"]
    assert not [e for e in events if e["kind"] == "divergence" and e.get("accepted")]
