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
    _assert_analyzer_takes_the_guards_word(tmp_path / "run", divergence["step"])


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


def _train_reweighted(tmp_path, weight_from: int, guarded: bool = True,
                      **options) -> tuple[Sentinel | None, list[dict], float]:
    """A regression whose loss is multiplied by 10 from step ``weight_from`` (a new loss weight,
    an extra term switched on, a target network synced): the loss jumps and stays there on any
    weights. Returns the events and the final loss on held-out data, unweighted."""
    g = torch.Generator().manual_seed(1)
    w = torch.randn(8, 1, generator=g)
    x = torch.randn(64 * 800 + 4096, 8, generator=g)
    y = torch.tanh(x @ w) + 0.5 * torch.randn(len(x), 1, generator=g)
    batches = [(x[i:i + 64], y[i:i + 64]) for i in range(0, 64 * 800, 64)]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 64), nn.Tanh(), nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    weight = [1.0]

    def loss_fn(model, batch):
        return weight[0] * mse(model, batch)

    sen = Sentinel(model, opt, log_dir=str(tmp_path / "run"), loss_fn=loss_fn, tensorboard=False,
                   **options) if guarded else None
    for i, batch in enumerate(sen.batches(batches) if sen is not None else batches):
        weight[0] = 10.0 if (sen.step if sen is not None else i) >= weight_from else 1.0
        opt.zero_grad()
        loss = loss_fn(model, batch)
        loss.backward()
        if sen is None or sen.check(loss):
            opt.step()
        if sen is not None:
            sen.end_step()
    if sen is None:
        return None, [], mse(model, (x[-4096:], y[-4096:])).item()
    sen.close()
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    return sen, events, mse(model, (x[-4096:], y[-4096:])).item()


def test_a_loss_that_changes_on_any_weights_is_accepted_after_one_rollback(tmp_path):
    """The re-run of the last applied batch gives the tenfold loss too (the loss function changed),
    so the guard rolls back once; on the restored weights, which scored normally when they were
    saved, the loss is as high: the new level is accepted instead of rolling back again and again
    until the give-up, and that rollback does not count toward it."""
    sen, events, final = _train_reweighted(tmp_path, weight_from=400)
    kinds = [e["kind"] for e in events]
    assert "gave_up" not in kinds and sen.step == 800 - 5  # the 5 batches after the rollback dropped
    (rollback,) = [e for e in events if e["kind"] == "rollback"]
    (level,) = [e for e in events if e["kind"] == "new_level"]
    assert rollback["step"] < level["step"] <= rollback["step"] + 5 + 3 + 1  # skip_after, then a streak
    assert level["restored_step"] == rollback["restored_step"] and level["rollbacks"] == 0
    assert level["returned_to"] == rollback["step"]  # back to the state the rollback left
    assert level["loss"] > 5 * level["loss_baseline"]
    assert sen.rollbacks == 0
    # Trained on from there: the level is the baseline, its batches are applied.
    assert not [e for e in events if e["kind"] == "skip_step" and e["step"] > level["step"] + 20]
    _, _, plain_final = _train_reweighted(tmp_path, weight_from=400, guarded=False)
    assert final < 1.2 * plain_final  # as good as the same run unguarded
    _assert_analyzer_takes_the_guards_word(tmp_path / "run", level["step"])


def _assert_analyzer_takes_the_guards_word(run_dir, accepted_at: int) -> None:
    """The loss curve alone shows a spike that never came back and a divergence; the guard
    checked the weights and found them sound, and the report says so instead of 'unhealthy'."""
    from sentinel.analyze.analyzer import analyze_run
    from sentinel.analyze.discover import discover_runs

    (run,) = discover_runs(run_dir)
    report = analyze_run(run)
    assert report.verdict != "unhealthy"
    moved = [i for i in report.incidents if i.kind in ("divergence", "loss_spike", "rollback")]
    assert moved and all(i.severity == "info" and i.details["accepted_level"] == accepted_at for i in moved)
    assert "accepted it at step" in moved[0].message


def test_the_return_to_the_state_a_rollback_left_works_from_disk_and_leaves_nothing(tmp_path):
    """With snapshot_dir the state the rollback left is a file of its own, beside the ring's, gone
    once it has been returned to; training goes on from the same weights as in memory."""
    _, events, final = _train_reweighted(tmp_path / "mem", weight_from=400)
    _, disk_events, disk_final = _train_reweighted(tmp_path / "disk", weight_from=400,
                                                   snapshot_dir=str(tmp_path / "snaps"))
    (level,) = [e for e in disk_events if e["kind"] == "new_level"]
    assert level["returned_to"] == [e for e in events if e["kind"] == "new_level"][0]["returned_to"]
    assert disk_final == final
    assert sorted(p.name for p in (tmp_path / "snaps").iterdir()) == \
        [f"snapshot-{s:09d}.pt" for s in (700, 725, 750, 775)]

