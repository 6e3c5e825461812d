"""The guard in a hand-written loop: real training, poison injected at known steps."""

from __future__ import annotations

import copy
import json
import math
import re

import numpy as np
import pytest
import torch

from sentinel import Sentinel, TrainingGaveUp, analyze, load_run
from sentinel.store import read_skiplist

BATCH = 16
STEPS = 120


def _train(tmp_path, tiny_task, *, poison_steps=(), nan_steps=(), guard=True, steps=STEPS,
           states=None, resume=None, lr_surge=None, corrupt_steps=(), grad_gain_from=None, grad_gain_at=(),
           ema=None, tensor_lr=False, **options):
    """A raw guarded loop. ``lr_surge`` maps scheduler positions to an LR multiplier: a schedule
    that surges damages the weights through an update whose own loss and gradients look normal,
    the case skipping cannot answer (and a rollback replays, since it restores the scheduler).
    ``corrupt_steps``: after these steps the head's weights are scaled by 30 behind the guard's
    back, once (silent damage, e.g. a bad update the detectors could not see). ``grad_gain_from``:
    from that step on every gradient is 100x (with the LR cut 100x, the same updates): a lasting new
    level of the grad norm with a normal loss; ``grad_gain_at``: the same at these steps alone.
    ``ema``: a dict that gets an EMA copy of the model (decay 0.99, updated after each update,
    before ``end_step``) under ``"model"``, its state after each step under ``"after"`` and, at the first rollback,
    its state once the rollback is done under ``"rolled_back"``; ``rollback_with="ema"`` hands
    it to sentinel. ``tensor_lr``: the optimizer's LR is a tensor (as capturable or compiled
    optimizer steps keep it)."""
    Data, Net, mse, batches_at = tiny_task
    torch.manual_seed(0)
    nan = {min(batches_at(nan_steps, BATCH))} if nan_steps else set()  # one sample of the batch
    data = Data(n=BATCH * steps, poison=batches_at(poison_steps, BATCH), nan=nan)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=False)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=torch.tensor(0.01) if tensor_lr else 0.01, momentum=0.9)
    surge, corrupt = dict(lr_surge or {}), set(corrupt_steps)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10) * surge.get(s, 1.0))
    if not guard:
        options.setdefault("rollback", False)
    if ema is not None:
        from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

        ema["model"] = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.99))
        if options.pop("rollback_with", None) == "ema":
            options["rollback_with"] = [ema["model"]]
    sen = Sentinel(model, opt, scheduler=sched, log_dir=str(tmp_path / "run"), loss_fn=mse,
                   tensorboard=False, **options)
    if resume is not None:  # as from a checkpoint: weights, optimizer, schedule and sentinel's progress
        model.load_state_dict(resume.model.state_dict())
        opt.load_state_dict(resume.optimizers[0].state_dict())
        sched.load_state_dict(resume.schedulers[0].state_dict())
        sen.load_state_dict(resume.state_dict())
    for batch in sen.batches(loader):
        opt.zero_grad()
        loss = mse(model, batch)
        loss.backward()
        gain = (grad_gain_from is not None and sen.step >= grad_gain_from) or sen.step in grad_gain_at
        if gain:
            for p in model.parameters():
                p.grad.mul_(100.0)
        if sen.check(loss):
            if gain:
                for group in opt.param_groups:
                    group["lr"] /= 100.0
            opt.step()
            if gain:
                for group in opt.param_groups:
                    group["lr"] *= 100.0
        sched.step()
        if ema is not None:  # after the update, before end_step: a snapshot holds this step's average
            ema["model"].update_parameters(model)
        rollbacks = sen.rollbacks
        sen.end_step()
        if ema is not None:
            if sen.rollbacks > rollbacks and "rolled_back" not in ema:  # restored: the next step starts here
                ema["rolled_back"] = copy.deepcopy(ema["model"].state_dict())
            else:
                ema.setdefault("after", {})[sen.step] = copy.deepcopy(ema["model"].state_dict())
        if sen.step in corrupt:
            corrupt.discard(sen.step)
            with torch.no_grad():
                model.head.weight.mul_(30.0)
        if states is not None:
            states[sen.step] = copy.deepcopy(model.state_dict())  # state after sen.step steps
    sen.close()
    clean = Data(n=BATCH * steps)  # the same task, without faults
    with torch.no_grad():
        final = float(mse(model, {"x": clean.x[-512:], "y": clean.y[-512:]}))
    return final, sen, tmp_path / "run"


def _events(run_dir, kind):
    return [e for e in map(json.loads, (run_dir / "events.jsonl").read_text().splitlines()) if e["kind"] == kind]


def test_a_rollback_puts_an_ema_of_the_weights_back_too(tmp_path, tiny_task):
    # The head's weights scaled by 30 after step 60: rolled back. An EMA (decay 0.99) updated after
    # every step kept the damaged steps' weights unless it was rolled back with the model.
    kept, rewound = {}, {}
    _, sen, _ = _train(tmp_path / "kept", tiny_task, corrupt_steps={60}, ema=kept)
    final, sen_ema, run = _train(tmp_path / "rewound", tiny_task, corrupt_steps={60}, ema=rewound,
                                 rollback_with="ema")
    assert sen.rollbacks == sen_ema.rollbacks == 1 and math.isfinite(final)
    (rollback,) = _events(run, "rollback")
    restored = rollback["restored_step"]
    assert restored < 60 <= rollback["spike_step"]
    # Rewound: the EMA is what it was after step `restored`, bit for bit, damage and all gone.
    at_restore = rewound["after"][restored]
    assert all(torch.equal(rewound["rolled_back"][k], at_restore[k]) for k in at_restore)
    # Kept: it still holds the steps after it, the damaged head among them.
    assert not torch.equal(kept["rolled_back"]["module.head.weight"], kept["after"][restored]["module.head.weight"])
    assert torch.isfinite(rewound["model"].module.head.weight).all()


def test_rollback_with_refuses_what_cannot_be_put_back(tmp_path):
    model = torch.nn.Linear(2, 1)
    with pytest.raises(TypeError, match="rollback_with holds <builtins.int>, which has no state_dict"):
        Sentinel(model, torch.optim.SGD(model.parameters(), lr=0.1), log_dir=str(tmp_path), rollback_with=[3])


def test_poison_without_guard_ruins_the_run(tmp_path, tiny_task):
    clean, _, _ = _train(tmp_path / "clean", tiny_task)
    bad, _, run = _train(tmp_path / "bad", tiny_task, poison_steps=(60, 61, 62), guard=False)
    assert not math.isfinite(bad) or bad > 10 * clean
    assert _events(run, "spike") or _events(run, "nonfinite")


def test_poisoned_batches_are_skipped_updates_not_rollbacks(tmp_path, tiny_task):
    clean, _, _ = _train(tmp_path / "clean", tiny_task)
    final, sen, run = _train(tmp_path / "guarded", tiny_task, poison_steps=(60, 61, 62))
    assert math.isfinite(final) and final <= clean * 1.05 + 1e-3, (final, clean)
    skips = _events(run, "skip_step")
    assert [e["step"] for e in skips] == [60, 61, 62] and [e["streak"] for e in skips] == [1, 2, 3]
    # At the third outlier the guard re-ran step 59's batch: still normal, so the data is bad.
    assert "weights_check" not in skips[0] and skips[2]["weights_check"]["weights_ok"] is True
    assert not _events(run, "rollback")
    entries = read_skiplist(run)
    assert {i for e in entries for i in e["indices"]} == tiny_task[3]((60, 61, 62), BATCH)
    assert {e["reason"] for e in entries} == {"outlier"}


def test_a_lasting_new_grad_norm_level_is_withheld_briefly_then_applied(tmp_path, tiny_task):
    clean, _, _ = _train(tmp_path / "clean", tiny_task)
    final, sen, run_dir = _train(tmp_path / "gain", tiny_task, grad_gain_from=60)
    spikes = [e["step"] for e in _events(run_dir, "spike") if e["metric"] == "grad_norm/total"]
    withheld = [e["step"] for e in _events(run_dir, "skip_step")]
    assert spikes[:3] == [60, 61, 62]  # the detector calls the new level an outlier for a while
    assert withheld == [60, 61]  # spike_patience - 1 updates withheld, then the level is accepted
    assert [e["streak"] for e in _events(run_dir, "skip_step")] == [1, 2]
    assert read_skiplist(run_dir) == []  # not bad batches: a resumed run trains on them
    assert sen.rollbacks == 0 and not _events(run_dir, "rollback")
    assert final <= 1.1 * clean


def test_a_grad_norm_outlier_with_a_normal_loss_is_withheld_but_not_skip_listed(tmp_path, tiny_task):
    """Its batch gave a normal loss: no bad data to drop again in later epochs or on resume (a
    fixed-order loader's one-sample last batch was dropped in every epoch after such a step)."""
    _, sen, run_dir = _train(tmp_path, tiny_task, grad_gain_at=(70,))
    assert [(e["step"], e["reason"]) for e in _events(run_dir, "skip_step")] == [(70, "grad_norm_spike")]
    assert _events(run_dir, "skip_step")[0]["batches"]  # the event still names its batch
    assert read_skiplist(run_dir) == [] and sen.rollbacks == 0


def test_a_skipped_update_leaves_the_weights_untouched(tmp_path, tiny_task):
    states: dict[int, dict] = {}
    _, sen, run = _train(tmp_path, tiny_task, poison_steps=(60,), states=states, steps=70)
    assert [e["step"] for e in _events(run, "skip_step")] == [60]
    for key, value in states[60].items():  # the state after 60 steps, and after the skipped 61st
        assert torch.equal(states[61][key], value), key


def test_damaged_weights_roll_back_and_drop_only_culprits(tmp_path, tiny_task):
    clean, _, _ = _train(tmp_path / "clean", tiny_task)
    states: dict[int, dict] = {}
    final, sen, run = _train(tmp_path / "guarded", tiny_task, corrupt_steps={60}, states=states)
    unguarded, _, _ = _train(tmp_path / "unguarded", tiny_task, corrupt_steps={60}, guard=False)
    assert math.isfinite(final) and final <= clean * 1.25 and not final >= unguarded, (final, clean, unguarded)
    rollback = _events(run, "rollback")[0]
    assert rollback["reason"] in ("loss_spike", "nonfinite") and rollback["weights_check"]["weights_ok"] is False
    assert rollback["restored_step"] <= rollback["spike_step"] - sen.config.guard.min_rollback_distance
    # Snapshot k is the state after k steps; the step that rolled back ends in exactly that state.
    for key, value in states[rollback["restored_step"]].items():
        assert torch.equal(states[rollback["step"] + 1][key], value), key
    # The skip list holds the streak's batches and the skip_after after the rollback, not the
    # healthy batches between the snapshot and the spike.
    entries = read_skiplist(run)
    assert [s["step"] for s in rollback["skipped"]] == list(range(rollback["spike_step"], rollback["step"] + 1))
    assert min(e["step"] for e in entries) == rollback["spike_step"]
    assert sum(e["reason"] == "after_rollback" for e in entries) == sen.config.guard.skip_after
    assert len(entries) == len(rollback["skipped"]) + sen.config.guard.skip_after


@pytest.mark.parametrize("tensor_lr", [False, True])
def test_a_spike_that_comes_back_after_a_rollback_lowers_the_lr(tmp_path, tiny_task, tensor_lr):
    # The surge is in the schedule: a rollback restores the scheduler and replays it.
    final, sen, run = _train(tmp_path, tiny_task, lr_surge={60: 1000.0}, cooldown=10, tensor_lr=tensor_lr)
    unguarded, _, _ = _train(tmp_path / "unguarded", tiny_task, lr_surge={60: 1000.0}, guard=False)
    rollbacks = _events(run, "rollback")
    assert len(rollbacks) >= 2 and not _events(run, "gave_up")
    assert rollbacks[0]["lr_scale"] == 1.0 and rollbacks[1]["lr_scale"] == pytest.approx(0.1)
    assert math.isfinite(final) and (not math.isfinite(unguarded) or final < unguarded / 100)
    lr = load_run(run).steps["lr"]
    at = rollbacks[1]["step"]
    assert lr.loc[at + 1] == pytest.approx(0.01 * 0.1)  # the cool-down's lowered updates
    assert lr.loc[20] == pytest.approx(0.01)  # past the warm-up, outside any cool-down


def test_nan_in_one_batch_is_a_skipped_update_that_names_the_input(tmp_path, tiny_task):
    final, _, run = _train(tmp_path, tiny_task, nan_steps=(70,))
    assert math.isfinite(final)
    nonfinite = _events(run, "nonfinite")
    assert nonfinite and nonfinite[0]["module"] == "<input>" and nonfinite[0]["phase"] == "input"
    assert [e["reason"] for e in _events(run, "skip_step")] == ["nonfinite"]
    assert not _events(run, "rollback")


def test_parameters_no_optimizer_updates_are_left_out_of_the_grad_norm(tmp_path, caplog):
    """An optimizer over an adapter alone, its base left trainable (a common fine-tuning slip):
    the base's gradients add up step after step, as nothing zeroes them. Measured, they made a
    growing grad norm that the guard took for spikes, and after one NaN batch the run was
    non-finite at every step, every update withheld. They are left out, and said once."""
    torch.manual_seed(0)
    base = torch.nn.Linear(8, 8)
    adapter = torch.nn.Linear(8, 1)
    model = torch.nn.Sequential(base, torch.nn.Tanh(), adapter)
    opt = torch.optim.SGD(adapter.parameters(), lr=0.05)
    x = torch.randn(512, 8)
    data = list(torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8))

    def loss_fn(m, batch):
        return torch.nn.functional.mse_loss(m(batch[0]), batch[1])

    with caplog.at_level("WARNING", logger="sentinel"):
        sen = Sentinel(model, opt, log_dir=str(tmp_path / "run"), loss_fn=loss_fn)
    assert "2 parameter tensor(s) of the model take gradients but no optimizer updates them (e.g. '0.weight')" \
        in caplog.text
    applied = []
    for step, batch in enumerate(sen.batches(data)):
        opt.zero_grad()
        loss = loss_fn(model, batch)
        if step == 30:
            loss = loss * float("nan")
        loss.backward()
        applied.append(sen.check(loss))
        if applied[-1]:
            opt.step()
        if step == 40:
            expected = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in adapter.parameters()]))
            assert sen._values["grad_norm/total"] == pytest.approx(float(expected))
        sen.end_step()
    sen.close()
    assert [i for i, a in enumerate(applied) if not a] == [30]
    assert not torch.isfinite(base.weight.grad).all()  # the NaN batch's gradient piled up there, left alone
    assert all(math.isfinite(v) for v in load_run(tmp_path / "run").steps["grad_norm/total"].drop(index=30))


def test_a_backbone_unfrozen_later_joins_the_grad_norm(tmp_path):
    """Progressive unfreezing: the head trains first, then the backbone is made trainable and
    given to the optimizer (``add_param_group``): from then on its gradients are measured too."""
    torch.manual_seed(0)
    backbone, head = torch.nn.Linear(8, 8), torch.nn.Linear(8, 1)
    model = torch.nn.Sequential(backbone, torch.nn.Tanh(), head)
    backbone.requires_grad_(False)
    opt = torch.optim.SGD(head.parameters(), lr=0.05)
    x = torch.randn(256, 8)
    data = list(torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8))
    sen = Sentinel(model, opt, log_dir=str(tmp_path / "run"))
    for step, (xb, yb) in enumerate(sen.batches(data)):
        if step == 10:
            backbone.requires_grad_(True)
            opt.add_param_group({"params": list(backbone.parameters()), "lr": 0.01})
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        loss.backward()
        if sen.check(loss):
            opt.step()
        if step in (5, 20):
            trained = list(model.parameters()) if step == 20 else list(head.parameters())
            expected = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in trained]))
            assert sen._values["grad_norm/total"] == pytest.approx(float(expected))
        sen.end_step()
    sen.close()


def test_a_run_the_guard_cannot_cure_gives_up_and_keeps_the_last_good_weights(tmp_path, tiny_task):
    states: dict[int, dict] = {}
    surge = {s: 3000.0 for s in range(60, STEPS)}  # a permanently wrong schedule
    with pytest.raises(TrainingGaveUp, match="gave up .* after 2 rollbacks.*weights of step \\d+ are restored"):
        _train(tmp_path, tiny_task, lr_surge=surge, max_rollbacks=2, states=states, lr_factor=0.5)
    (gave_up,) = _events(tmp_path / "run", "gave_up")
    assert len(_events(tmp_path / "run", "rollback")) == 2
    restored = gave_up["restored_step"]
    assert restored is not None and restored <= 60


def test_run_directory_loads_with_metrics(tmp_path, tiny_task):
    _, _, run = _train(tmp_path, tiny_task, steps=40)
    loaded = load_run(run)
    assert list(loaded.steps.index[:3]) == [0, 1, 2]
    for key in ("loss", "lr", "grad_norm/total", "grad_norm/blocks.0.0", "grad_norm/head"):
        assert key in loaded.steps.columns, key
    assert loaded.steps["grad_norm/blocks.0.0"].notna().sum() == 4  # every module_every=10 steps


def _train_amp(tmp_path, tiny_task, inf_grad_steps=(), *, steps=100, init_scale=2.0**10, lr=0.01,
               loss_factor=1.0, poison_steps=(), **options):
    """A raw loop with a real GradScaler; inf written into one gradient at the given steps.

    ``loss_factor`` scales the loss (and so the gradients) to make a high initial scale overflow.
    """
    Data, Net, mse, batches_at = tiny_task
    torch.manual_seed(0)
    data = Data(n=BATCH * steps, poison=batches_at(poison_steps, BATCH))
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
    with Sentinel(model, opt, scaler=scaler, log_dir=str(tmp_path / "run"), loss_fn=mse,
                  tensorboard=False, **options) as sen:
        for batch in sen.batches(loader):
            opt.zero_grad()
            loss = mse(model, batch) * loss_factor
            scaler.scale(loss).backward()
            if sen.step in inf_grad_steps:
                model.head.weight.grad[0, 0] = float("inf")
            scaler.unscale_(opt)
            if sen.check(loss):
                scaler.step(opt)
            scaler.update()
            sen.end_step()
    return load_run(tmp_path / "run")


def test_one_amp_overflow_is_the_scaler_doing_its_job(tmp_path, tiny_task):
    run = _train_amp(tmp_path, tiny_task, inf_grad_steps={40})
    assert run.steps.loc[40, "amp/overflow"] == 1.0 and run.steps["amp/overflow"].sum() == 1.0
    assert run.steps.loc[41, "loss_scale"] == run.steps.loc[40, "loss_scale"] / 2
    assert run.steps.loc[99, "amp/skipped_steps"] == 1.0
    kinds = list(run.events["kind"])
    assert kinds.count("overflow") == 1 and "rollback" not in kinds and "nonfinite" not in kinds


def test_repeated_amp_overflows_roll_back(tmp_path, tiny_task):
    run = _train_amp(tmp_path, tiny_task, inf_grad_steps=set(range(60, 70)), overflow_patience=3)
    rollbacks = run.events[run.events["kind"] == "rollback"]
    assert len(rollbacks) >= 1 and rollbacks.iloc[0]["reason"] == "overflow_streak"
    assert rollbacks.iloc[0]["spike_step"] == 62


def test_batch_fingerprints_name_batches_without_indices(tmp_path):
    # A TensorDataset batch carries no indices: the skip list names it by content.
    torch.manual_seed(0)
    x = torch.randn(16 * 100, 8)
    x[16 * 60: 16 * 61] *= 1e3
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x[:, :1].clone()), batch_size=16)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with Sentinel(model, opt, log_dir=str(tmp_path / "run"), tensorboard=False) as sen:
        _raw_loop(sen, model, opt, loader, lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1]))
    from sentinel.guard.batch_id import fingerprint

    entries = read_skiplist(tmp_path / "run")
    poisoned = fingerprint([x[16 * 60: 16 * 61], x[16 * 60: 16 * 61, :1]])
    assert poisoned in {e["fingerprint"] for e in entries}


def _raw_loop(sen, model, opt, batches, loss_fn):
    """The raw loop of the README: check() after backward, the update only where it says so."""
    for batch in sen.batches(batches):
        opt.zero_grad()
        loss = loss_fn(model, batch)
        loss.backward()
        if sen.check(loss):
            opt.step()
        sen.end_step()


def test_dataclass_batches_are_named_by_their_tensors_not_their_repr(tmp_path):
    """A batch object (a dataclass) was named by its repr, which shows only a tensor's corners: every
    image batch with a zero border had one fingerprint, and after one bad batch was skip-listed a
    different, clean batch was dropped in every later epoch. Its samples per second were 0."""
    import dataclasses

    @dataclasses.dataclass
    class Batch:
        images: torch.Tensor
        target: torch.Tensor

    def make(g, bad=False):
        x = torch.zeros(32, 1, 12, 12)
        x[:, :, 3:9, 3:9] = torch.rand(32, 1, 6, 6, generator=g)  # zero border: the repr shows zeros only
        return Batch(x, x.mean(dim=(1, 2, 3)).unsqueeze(1) * (300 if bad else 10))

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(144, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    trained = []
    with Sentinel(model, opt, log_dir=str(tmp_path / "run"), tensorboard=False) as sen:
        for epoch in range(3):
            batches = [make(g, bad=(epoch == 0 and i == 25)) for i in range(40)]
            count = 0
            for batch in sen.batches(batches):
                opt.zero_grad()
                loss = torch.nn.functional.mse_loss(model(batch.images), batch.target)
                loss.backward()
                if sen.check(loss):
                    opt.step()
                sen.end_step()
                count += 1
            trained.append(count)
    assert trained == [40, 40, 40]
    assert len({e["fingerprint"] for e in read_skiplist(tmp_path / "run")}) == len(read_skiplist(tmp_path / "run"))
    assert (load_run(tmp_path / "run").steps["samples_per_sec"] > 0).all()


@pytest.mark.parametrize("bad", ["nan", "outlier"])
def test_a_withheld_step_leaves_batchnorm_running_statistics_as_they_were(tmp_path, bad):
    """A withheld step has run its forward: BatchNorm folded the batch into its running mean and
    variance. A NaN sample made them NaN for good (every eval output NaN, the run "recovered")."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    w = torch.randn(8, 1)
    data = [(x, x @ w) for x in (torch.randn(32, 8) for _ in range(60))]
    if bad == "nan":
        data[30][0][5, 3] = float("nan")
    else:
        data[30] = (data[30][0] * 1e3, data[30][1] * 1e3)
    loss_fn = lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1])  # noqa: E731
    before = {}
    with Sentinel(model, opt, log_dir=str(tmp_path / "run"), loss_fn=loss_fn, tensorboard=False) as sen:
        for i, batch in enumerate(sen.batches(data)):
            if i == 30:
                before = {k: v.clone() for k, v in model[0].state_dict().items()}
            opt.zero_grad()
            loss = loss_fn(model, batch)
            loss.backward()
            applied = sen.check(loss)
            if applied:
                opt.step()
            sen.end_step()
            if i == 30:
                assert not applied
                for key, value in model[0].state_dict().items():
                    assert torch.equal(value, before[key]), key
    model.eval()
    assert torch.isfinite(model(torch.randn(16, 8))).all()


def test_a_rollback_to_before_add_param_group_keeps_the_added_group(tmp_path):
    """Fine-tuning that unfreezes a backbone mid-run (opt.add_param_group, as Lightning's
    BackboneFinetuning does); a rollback to a snapshot from before it raised a ValueError from the
    snapshot code and stopped training. The added group is kept, its parameters' state fresh."""
    torch.manual_seed(0)
    backbone, head = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU()), torch.nn.Linear(32, 1)
    model = torch.nn.Sequential(backbone, head)
    backbone.requires_grad_(False)
    frozen = [p.detach().clone() for p in backbone.parameters()]
    opt = torch.optim.Adam(head.parameters(), lr=1e-2)
    w = torch.randn(8, 1)
    data = [(x, x @ w) for x in (torch.randn(32, 8) for _ in range(80))]
    loss_fn = lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1])  # noqa: E731
    with Sentinel(model, opt, log_dir=str(tmp_path / "run"), loss_fn=loss_fn, tensorboard=False) as sen:
        for step, batch in enumerate(sen.batches(data)):
            if step == 30:
                backbone.requires_grad_(True)
                opt.add_param_group({"params": list(backbone.parameters()), "lr": 1e-3})
            opt.zero_grad()
            loss = loss_fn(model, batch)
            loss.backward()
            if sen.check(loss):
                opt.step()
            sen.end_step()
            if step == 40:  # damaged weights
                with torch.no_grad():
                    head.weight.mul_(30)
            if sen.rollbacks and step == 43:  # just restored: the backbone as it was at step 25
                assert all(torch.equal(p, f) for p, f in zip(backbone.parameters(), frozen))
                assert len(opt.param_groups) == 2 and opt.param_groups[1]["lr"] == 1e-3
                assert all(p not in opt.state for p in backbone.parameters())
        assert sen.rollbacks == 1
    assert all(not torch.equal(p, f) for p, f in zip(backbone.parameters(), frozen))  # trained on after


def test_an_exception_in_a_sampled_step_leaves_nothing_armed_after_close(tmp_path):
    """Ctrl-C during the forward of a step sampled for attention (step 0 always is) left the probe's
    function mode on torch's stack, even after close(): the next run in the process failed."""
    from torch.overrides import _get_current_function_mode_stack

    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = [(torch.randn(16, 8), torch.randn(16, 1)) for _ in range(10)]
    sen = Sentinel(model, opt, log_dir=str(tmp_path / "one"), tensorboard=False)
    with pytest.raises(KeyboardInterrupt):
        for x, _ in sen.batches(data):
            model(x)
            raise KeyboardInterrupt
    sen.close()
    assert _get_current_function_mode_stack() == []
    with Sentinel(model, opt, log_dir=str(tmp_path / "two"), tensorboard=False) as sen:
        _raw_loop(sen, model, opt, data, lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1]))
    assert sen.step == 10


def test_a_loop_that_bypasses_batches_is_told_and_its_rollback_drops_nothing(tmp_path, caplog):
    """An existing loop with check()/end_step() added but not sen.batches(): a rollback said it was
    "dropping 0 culprit batches and the next 5" while all five were trained on, and nothing said why."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    w = torch.randn(8, 1)
    data = [(x, x @ w) for x in (torch.randn(32, 8) for _ in range(80))]
    loss_fn = lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1])  # noqa: E731
    with Sentinel(model, opt, log_dir=str(tmp_path / "run"), loss_fn=loss_fn, tensorboard=False) as sen:
        for step, batch in enumerate(data):
            opt.zero_grad()
            loss = loss_fn(model, batch)
            loss.backward()
            if sen.check(loss):
                opt.step()
            sen.end_step()
            if step == 45:
                with torch.no_grad():
                    model[2].weight.mul_(30)
        assert sen.rollbacks == 1
    told = [r.getMessage() for r in caplog.records if "does not iterate through sen.batches" in r.getMessage()]
    assert len(told) == 1
    (rolled,) = [r.getMessage() for r in caplog.records if "rolled back to step" in r.getMessage()]
    assert "no batch dropped (the loop does not pass its batches through sen.batches())" in rolled
    (event,) = [e for e in load_run(tmp_path / "run").events.to_dict("records") if e["kind"] == "rollback"]
    assert event["skip_after"] == 0


def test_a_resumed_process_writes_its_start_before_its_first_events(tmp_path):
    """The resumed process wrote its first step's NaN source and withheld update before its start
    event, and the analyzer dropped them as the earlier process's abandoned trajectory."""
    torch.manual_seed(0)
    w = torch.randn(8, 1)
    data = [(x, x @ w) for x in (torch.randn(32, 8) for _ in range(60))]
    data[40][0][0, 0] = float("nan")  # the first batch after the resume point
    loss_fn = lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1])  # noqa: E731
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)

    def train(batches, state=None):
        with Sentinel(model, opt, log_dir=str(tmp_path / "run"), loss_fn=loss_fn, tensorboard=False) as sen:
            if state is not None:
                sen.load_state_dict(state)
            _raw_loop(sen, model, opt, batches, loss_fn)
        return sen.state_dict()

    train(data[40:], train(data[:40]))
    run = load_run(tmp_path / "run")
    at_40 = [e for e in run.events.to_dict("records") if e["step"] == 40]
    assert [e["kind"] for e in at_40][:1] == ["start"]
    assert {"nonfinite", "skip_step"} <= {e["kind"] for e in at_40}
    (report,) = analyze(tmp_path / "run").runs
    assert ("skipped_update", 40) in [(i.kind, i.step) for i in report.incidents]
    assert any(i.kind == "nonfinite" and "<input>" in i.message for i in report.incidents)


def test_a_resumed_process_knows_the_epoch_length_for_the_skip_share(tmp_path, caplog):
    """Epochs of 40 batches, one bad batch in each process: 2 of 40 is under the skip-share warning,
    but the resumed process took the epoch's length from the 3 batches it had seen ("67% of an epoch
    of 3")."""
    torch.manual_seed(0)
    w = torch.randn(8, 1)
    epoch = [(x, x @ w) for x in (torch.randn(32, 8) for _ in range(40))]
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    loss_fn = lambda m, b: torch.nn.functional.mse_loss(m(b[0]), b[1])  # noqa: E731

    def train(bad_at, state=None):
        with Sentinel(model, opt, log_dir=str(tmp_path / "run"), loss_fn=loss_fn, tensorboard=False) as sen:
            if state is not None:
                sen.load_state_dict(state)
            for bad in bad_at:
                data = [(b[0], b[1] * 30) if i == bad else b for i, b in enumerate(epoch)]
                _raw_loop(sen, model, opt, data, loss_fn)
        return sen.state_dict()

    train([2], train([None, 30]))
    assert len(read_skiplist(tmp_path / "run")) == 2
    assert not any("the skip list names" in r.getMessage() for r in caplog.records)


def test_end_step_without_check_judges_the_gradients_only(tmp_path, tiny_task, caplog):
    Data, Net, mse, _ = tiny_task
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Data(n=16 * 30), batch_size=16)
    with Sentinel(model, opt, log_dir=str(tmp_path / "run"), tensorboard=False) as sen:
        for batch in sen.batches(loader):
            opt.zero_grad()
            mse(model, batch).backward()
            opt.step()
            sen.end_step()  # no check(loss): no loss recorded, grads still measured
    run = load_run(tmp_path / "run")
    assert len(run.steps) == 30 and run.steps["grad_norm/total"].notna().all()
    (warning,) = [r.getMessage() for r in caplog.records if "end_step() without check(loss)" in r.getMessage()]
    assert "at step 0" in warning and "sen.check(loss)" in warning
    assert "nonfinite" not in set(run.events["kind"]) and "rollback" not in set(run.events["kind"])


@pytest.mark.parametrize("use_batches", [True, False], ids=["sen.batches", "plain loader"])
def test_end_step_twice_is_ignored_with_a_warning(tmp_path, tiny_task, caplog, use_batches):
    Data, Net, mse, _ = tiny_task
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Data(n=16 * 20), batch_size=16)
    with Sentinel(model, opt, log_dir=str(tmp_path / "run"), tensorboard=False) as sen:
        for batch in (sen.batches(loader) if use_batches else loader):
            opt.zero_grad()
            loss = mse(model, batch)
            loss.backward()
            if sen.check(loss):
                opt.step()
            sen.end_step()
            sen.end_step()  # a second call for the same step
        assert sen.step == 20
    run = load_run(tmp_path / "run")
    assert list(run.steps.index) == list(range(20)) and run.steps["loss"].notna().all()
    warnings = [r.getMessage() for r in caplog.records if "end_step() called again" in r.getMessage()]
    assert len(warnings) == 1 and "at step 1 " in warnings[0]


def test_a_new_sentinel_on_the_same_log_dir_skips_the_recorded_batches(tmp_path, tiny_task):
    _, first, run = _train(tmp_path, tiny_task, poison_steps=(60, 61))
    poison = tiny_task[3]((60, 61), BATCH)
    assert poison <= {i for e in read_skiplist(run) for i in e["indices"]}
    n_events = len(_events(run, "skip"))
    # A restarted process on the same data and log_dir, resumed from the end of the first run.
    final, second, _ = _train(tmp_path, tiny_task, poison_steps=(60, 61), resume=first)
    again = _events(run, "skip")[n_events:]
    assert {e["reason"] for e in again} == {"skiplist"}
    assert poison <= {i for e in again for i in e["indices"]}
    assert not _events(run, "rollback")[1:]  # no new rollback: the poison never reached the model
    assert math.isfinite(final)


def test_snapshots_on_disk(tmp_path, tiny_task):
    final, _, run = _train(tmp_path, tiny_task, corrupt_steps={60}, snapshot_dir=str(tmp_path / "snaps"))
    assert math.isfinite(final) and len(_events(run, "rollback")) >= 1
    files = sorted(p.name for p in (tmp_path / "snaps").iterdir())
    assert files and all(name.startswith("snapshot-") and name.endswith(".pt") for name in files)


def test_the_scalers_start_up_search_is_not_an_overflow_streak(tmp_path, tiny_task):
    # An initial scale far too high: the first steps overflow until the scaler has halved enough
    # (gradients of ~1e3 overflow float32 at a scale of 2**127).
    run = _train_amp(tmp_path, tiny_task, steps=40, init_scale=2.0**127, lr=1e-5, loss_factor=1e3,
                     overflow_patience=2)
    assert run.steps["amp/overflow"].iloc[:3].sum() == 3  # the search really happened
    assert "rollback" not in set(run.events["kind"])


def test_a_rollback_to_a_snapshot_from_the_scalers_start_up_keeps_the_scale_it_found(tmp_path, tiny_task):
    # The start-up search: three overflows before the first clean step, then an overflow streak.
    run = _train_amp(tmp_path, tiny_task, inf_grad_steps={0, 1, 2, 12, 13, 14}, steps=40,
                     init_scale=2.0**127, overflow_patience=3)
    (rollback,) = run.events[run.events["kind"] == "rollback"].itertuples()
    assert rollback.restored_step == 0  # the only snapshot: taken before the scaler had settled
    after = run.steps.loc[rollback.step + 1:, "loss_scale"]
    # The scale the search (and the poisoned step's overflow) found, not the initial 2**127 again.
    assert after.iloc[0] <= 2.0**124 and (after == after.iloc[0]).all()


def test_a_run_left_non_finite_is_localised_once_not_every_step(tmp_path, tiny_task):
    final, _, run = _train(tmp_path, tiny_task, poison_steps=(60, 61, 62), guard=False)
    assert not math.isfinite(final)
    events = _events(run, "nonfinite")
    first_of_streaks = [e for e in events if "streak" not in e]
    # Recording only applies every update, so the run stays non-finite: every step is recorded,
    # one replay.
    assert len(first_of_streaks) == 1 and len(events) > 40


def test_recording_only_keeps_no_batch_history(tmp_path, tiny_task):
    _, sen, _ = _train(tmp_path, tiny_task, guard=False, steps=60)
    assert not sen._step_batches and sen._reference is None and len(sen.ring) == 0  # nothing held for a rollback


def test_gradient_accumulation_in_a_raw_loop(tmp_path, tiny_task):
    Data, Net, mse, _ = tiny_task
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Data(n=BATCH * 40), batch_size=BATCH)
    micro_losses = []
    with Sentinel(model, opt, log_dir=str(tmp_path / "run"), tensorboard=False) as sen:
        for i, batch in enumerate(sen.batches(loader)):
            loss = mse(model, batch) / 2  # two micro-batches per update
            loss.backward()
            sen.add_loss(loss)
            micro_losses.append(loss.item())
            if i % 2 == 1:
                if sen.check():
                    opt.step()
                opt.zero_grad()
                sen.end_step()
    run = load_run(tmp_path / "run")
    assert len(run.steps) == 20
    expected = [micro_losses[2 * k] + micro_losses[2 * k + 1] for k in range(20)]
    assert list(run.steps["loss"]) == pytest.approx(expected, rel=1e-6)


def test_a_model_too_large_for_the_snapshot_budget_fails_before_training(tmp_path, tiny_task):
    _, Net, _, _ = tiny_task
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sen = Sentinel(model, opt, log_dir=str(tmp_path / "run"), tensorboard=False, snapshot_max_bytes=1000)
    with pytest.raises(ValueError, match=r"needs \d+\.\d KiB, more than snapshot_max_bytes=1000 \(1000 bytes\): pass snapshot_dir"):
        sen.begin_batch({"x": torch.zeros(2, 8)}, 0)  # the first batch takes the first snapshot
    # By default the budget is a quarter of physical memory.
    default = Sentinel(model, opt, log_dir=str(tmp_path / "run2"), tensorboard=False)
    assert 0 < default.ring.config.max_bytes


def test_a_skip_list_looks_at_a_batch_only_where_it_names_one():
    from sentinel.guard.skiplist import SkipList

    class Untouchable(dict):
        def get(self, *args):
            raise AssertionError("the batch was read at a position the skip list does not name")

    skips = SkipList([{"step": 3, "batch_idx": 3, "indices": [6, 7]}])
    assert not skips.listed_at(4)  # decided without the batch: no index read, no fingerprint
    assert skips.listed_at(3) and skips.matches({"x": torch.zeros(2), "index": torch.tensor([7, 6])})
    assert not (skips.listed_at(5) and skips.matches(Untouchable()))
    assert SkipList([{"indices": [1]}]).listed_at(99)  # an entry from an older list: anywhere


def test_a_loss_that_is_not_one_tensor_is_refused_with_what_to_pass(tmp_path, tiny_task):
    _, Net, _, _ = tiny_task
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with Sentinel(model, opt, log_dir=str(tmp_path / "run"), tensorboard=False) as sen:
        with pytest.raises(TypeError, match="got float: pass the tensor you called backward"):
            sen.check(1.5)
        with pytest.raises(ValueError, match=r"must be a scalar, got shape \(16,\)"):
            sen.check(torch.ones(16))


def _optimizer_cases():
    cases = [("sgd_momentum", lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9)),
             ("adamw_foreach", lambda p: torch.optim.AdamW(p, lr=1e-3, foreach=True))]
    try:  # fused AdamW on CPU needs a torch that has the kernel
        torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], fused=True)
        cases.append(("adamw_fused", lambda p: torch.optim.AdamW(p, lr=1e-3, fused=True)))
    except (RuntimeError, ValueError):
        pass
    return cases


@pytest.mark.parametrize("name,make_opt", _optimizer_cases(), ids=[c[0] for c in _optimizer_cases()])
def test_a_withheld_update_changes_no_parameter_nor_optimizer_state(tmp_path, tiny_task, name, make_opt):
    Data, Net, mse, batches_at = tiny_task
    torch.manual_seed(0)
    data = Data(n=BATCH * 45, poison=batches_at((40,), BATCH))
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=False)
    model = Net()
    opt = make_opt(model.parameters())
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
    with Sentinel(model, opt, scheduler=sched, log_dir=str(tmp_path / "run"), loss_fn=mse,
                  tensorboard=False) as sen:
        for batch in sen.batches(loader):
            if sen.step == 40:
                params = copy.deepcopy(model.state_dict())
                state = copy.deepcopy(opt.state_dict())
                lr_before = sched.get_last_lr()
            opt.zero_grad()
            loss = mse(model, batch)
            loss.backward()
            applied = sen.check(loss)
            opt.step()  # even when told not to: the gradients are None, so nothing changes
            sched.step()
            sen.end_step()
            if sen.step == 41:
                assert not applied
                assert all(torch.equal(v, params[k]) for k, v in model.state_dict().items())
                after = opt.state_dict()
                for i, s in state["state"].items():  # moments, momentum buffers and step counts
                    assert after["state"][i].keys() == s.keys()
                    assert all(torch.equal(torch.as_tensor(after["state"][i][k]), torch.as_tensor(v))
                               for k, v in s.items()), (name, i)
                # The LR schedule still steps: the withheld update used up its slot.
                assert sched.get_last_lr() != lr_before and sched.last_epoch == 41


def test_loss_outliers_that_recur_are_a_part_of_the_data_and_applied():
    """Every 10th batch from a harder task (3x the loss): each is a loss outlier, and withholding
    each would mean the harder task is never learned. The first 20 are withheld as blips; from
    the 21st start within 1,000 steps they are a part of the data, and applied. A streak of them
    is still judged as one."""
    from sentinel.config import GuardConfig, SentinelConfig
    from sentinel.guard.judge import FREQUENT_EPISODES, StepJudge
    from sentinel.guard.policy import Action, GuardState, decide

    rng = np.random.default_rng(0)
    judge, state, config = StepJudge(SentinelConfig()), GuardState(), GuardConfig()
    outliers, withheld = [], []
    for step in range(1500):
        loss = (3.0 if step % 10 == 5 else 1.0) * (1 + 0.02 * rng.standard_normal())
        signals = judge.judge(step, loss, 1.0)
        decision = decide(signals, state, config)
        state = decision.state
        if signals.loss_spike:
            outliers.append(step)
            if decision.action is not Action.APPLY:
                withheld.append(step)
    assert len(outliers) > 100 and withheld == outliers[:FREQUENT_EPISODES]
    # Two in a row, then a third: a streak is judged as before (no re-run here: a rollback).
    for step in range(1500, 1503):
        decision = decide(judge.judge(step, 3.0, 1.0), state, config)
        state = decision.state
    assert decision.action is Action.ROLLBACK


def test_a_loss_below_zero_is_recorded_but_no_longer_acted_on(tmp_path, caplog):
    """A Gaussian likelihood settling just below zero: relative jumps in log space mean nothing
    there (a loss of -0.01 after -0.02 is no 'spike'); the guard says so once and withholds
    nothing for the loss, in a real raw loop."""
    torch.manual_seed(0)
    x = torch.randn(4096, 4)
    y = x @ torch.randn(4, 1) + 0.6 * torch.randn(4096, 1)  # its NLL settles near -0.01
    model = torch.nn.Linear(4, 2)  # mean and log-variance
    opt = torch.optim.Adam(model.parameters(), lr=0.02)

    def nll(model, batch):
        mean, log_var = model(batch[0]).chunk(2, dim=1)
        return (0.5 * (log_var + (batch[1] - mean) ** 2 / log_var.exp())).mean()

    sen = Sentinel(model, opt, log_dir=str(tmp_path / "run"), loss_fn=nll, tensorboard=False)
    losses = []
    with caplog.at_level("WARNING", logger="sentinel"):
        for i in range(600):
            batch = (x[(i * 4) % 4096:(i * 4) % 4096 + 4], y[(i * 4) % 4096:(i * 4) % 4096 + 4])
            opt.zero_grad()
            loss = nll(model, batch)
            loss.backward()
            if sen.check(loss):
                opt.step()
            sen.end_step()
            losses.append(loss.item())
    sen.close()
    first = next(i for i, v in enumerate(losses) if v < 0)
    assert min(losses[first:]) < -0.3 and max(losses[first:]) > 0.3  # batches cross zero on both sides
    assert sen.judge.negative_loss_step == first
    skipped = [e for e in _events(tmp_path / "run", "skip_step") if e["reason"] == "loss_spike"]
    assert not [e for e in skipped if e["step"] >= first]
    assert not _events(tmp_path / "run", "rollback")
    assert sum("the loss is below zero" in r.getMessage() for r in caplog.records) == 1


def test_batches_of_any_layout_are_named_without_stopping_training():
    """A batch holding a sparse or nested tensor, a complex one, or containers nested past reason
    (or holding themselves) is named all the same: the outlier step that names it must not raise
    (a sparse adjacency matrix stopped training at its first outlier)."""
    from sentinel.guard.batch_id import batch_identity, fingerprint

    deep: list = []
    node = deep
    for _ in range(5000):
        node.append([])
        node = node[0]
    looped: list = [torch.ones(2)]
    looped.append(looped)
    batches = [{"adj": torch.eye(4).to_sparse(), "x": torch.ones(4)},
               {"adj": torch.eye(4).to_sparse_csr(), "x": torch.ones(4)},
               {"seq": torch.nested.nested_tensor([torch.ones(2), torch.zeros(3)])},
               {"z": torch.ones(3, dtype=torch.complex64)}, deep, looped]
    for batch in batches:
        assert fingerprint(batch) == fingerprint(batch)
        assert set(batch_identity(batch)) == {"fingerprint"}
    other = {"adj": (2 * torch.eye(4)).to_sparse(), "x": torch.ones(4)}
    assert fingerprint(other) != fingerprint(batches[0])  # the values of a sparse tensor count


def test_a_model_with_complex_parameters_trains_guarded(tmp_path):
    class Diagonal(torch.nn.Module):  # an S4D-like layer: a complex diagonal state matrix
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(8, 1)
            self.lam = torch.nn.Parameter(torch.randn(4, dtype=torch.cfloat))

        def forward(self, x):
            return self.lin(x) + self.lam.abs().sum()

    torch.manual_seed(0)
    model = Diagonal()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sen = Sentinel(model, opt, log_dir=str(tmp_path / "run"), tensorboard=False)
    for x in sen.batches([torch.randn(4, 8) for _ in range(30)]):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        if sen.check(loss):
            opt.step()
        sen.end_step()
    sen.close()
    run = load_run(tmp_path / "run")
    assert len(run.steps) == 30 and (run.steps["grad_norm/total"] > 0).all()


@pytest.mark.parametrize("args, named", [
    (lambda opt, sched: (sched, opt), "optimizer=<torch.optim.lr_scheduler.StepLR"),  # swapped
    (lambda opt, sched: ("adam",), "optimizer='adam' is a str"),
    (lambda opt, sched: (opt, sched, opt), "scaler=<torch.optim.sgd.SGD> is an optimizer"),
])
def test_a_wrong_object_for_the_optimizer_scheduler_or_scaler_is_named_at_construction(tmp_path, args, named):
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, 10)
    with pytest.raises(TypeError, match=re.escape(named)):
        Sentinel(model, *args(opt, sched), log_dir=str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()  # refused before anything was written


@pytest.mark.parametrize("model, named", [
    ("gpt2", "model='gpt2' is a str, not a torch.nn.Module: pass the model first"),
    ("opt", "model=<torch.optim.sgd.SGD> is an optimizer, not a torch.nn.Module"),  # swapped with it
])
def test_a_model_that_is_not_a_module_is_named_at_construction(tmp_path, model, named):
    """It failed deep inside the grad-norm probe with "'str' object has no attribute 'named_parameters'"."""
    net = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with pytest.raises(TypeError, match=re.escape(named)):
        Sentinel(opt if model == "opt" else model, opt if model != "opt" else net, log_dir=str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_a_misspelt_option_is_named_with_the_one_meant(tmp_path):
    net = torch.nn.Linear(4, 1)
    with pytest.raises(TypeError, match="unknown sentinel option 'spike_threshhold'; did you mean 'spike_threshold'"):
        Sentinel(net, torch.optim.SGD(net.parameters(), lr=0.1), log_dir=str(tmp_path / "run"), spike_threshhold=3)


@pytest.mark.parametrize("state, why", [
    ([1, 2], "a list, not a dict"),
    ({"step": "abc"}, "invalid literal for int()"),
    ({"step": 3, "detectors": None}, "NoneType"),
    ({"step": 3, "skiplist": {"a": 1}}, "'skiplist' is not a list"),
])
def test_a_saved_state_of_the_wrong_shape_is_one_clear_error(tmp_path, state, why):
    model = torch.nn.Linear(4, 1)
    sen = Sentinel(model, torch.optim.SGD(model.parameters(), lr=0.1), log_dir=str(tmp_path / "run"))
    with pytest.raises(ValueError, match=r"sentinel: the saved state is malformed \(.*" + re.escape(why)):
        sen.load_state_dict(state)
    sen.close()


def test_after_real_damage_a_stretch_of_hard_batches_does_not_send_training_back_to_it(tmp_path, tiny_task):
    """Damaged weights roll back; the batches after the skipped ones are hard too (outliers on the
    restored, good weights: taken as a new level). The state the rollback left scores such a batch
    far worse than the restored weights do: training stays on the restored weights."""
    clean, _, _ = _train(tmp_path / "clean", tiny_task)
    final, sen, run = _train(tmp_path / "guarded", tiny_task, corrupt_steps={60}, poison_steps=range(66, 72))
    (rollback, *_), (level, *_) = _events(run, "rollback"), _events(run, "new_level")
    assert rollback["weights_check"]["weights_ok"] is False and level["step"] > rollback["step"]
    assert level["returned_to"] is None and level["weights_check"]["weights_ok"] is False
    assert not _events(run, "gave_up") and final <= 2 * clean
