"""The snapshot ring restores training state exactly, survives repeated rollbacks and stays bounded."""

from __future__ import annotations

import logging
import os
import random
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from torch import nn

from sentinel.guard.snapshot import Snapshot, SnapshotConfig, SnapshotRing

# The generators' states a snapshot holds: the CPU's, and each CUDA device's where there is one.
RNG_BYTES = torch.get_rng_state().numel() + \
    (sum(s.numel() for s in torch.cuda.get_rng_state_all()) if torch.cuda.is_available() else 0)


# ------------------------------------------------------------------ the rig


def make_model(seed: int = 0, device: torch.device = torch.device("cpu")) -> nn.Module:
    torch.manual_seed(seed)
    # BatchNorm adds float and integer buffers; Dropout makes the trajectory depend on the torch
    # RNG (the CUDA generator's on a GPU).
    return nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3)).to(device)


@dataclass
class Rig:
    model: nn.Module
    optimizers: list
    schedulers: list
    scaler: torch.amp.GradScaler

    def objects(self) -> dict:
        return {"model": self.model, "optimizers": self.optimizers, "schedulers": self.schedulers,
                "scaler": self.scaler}


def make_rig(kind: str, seed: int = 0, device: torch.device = torch.device("cpu")) -> Rig:
    model = make_model(seed, device)
    first, second = list(model[0].parameters()) + list(model[1].parameters()), list(model[4].parameters())
    if kind == "adam":
        opts = [torch.optim.Adam(model.parameters(), lr=1e-2, foreach=False)]
        scheds = [torch.optim.lr_scheduler.StepLR(opts[0], step_size=2, gamma=0.5)]
    elif kind == "adamw_foreach":
        opts = [torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1, foreach=True)]
        scheds = [torch.optim.lr_scheduler.ExponentialLR(opts[0], gamma=0.9)]
    elif kind == "two_optimizers":
        opts = [torch.optim.SGD(first, lr=5e-2, momentum=0.9), torch.optim.Adam(second, lr=1e-2)]
        scheds = [torch.optim.lr_scheduler.StepLR(opts[0], step_size=3, gamma=0.5),
                  torch.optim.lr_scheduler.ExponentialLR(opts[1], gamma=0.8)]
    else:
        raise AssertionError(kind)
    # growth_interval=2: the scale and its growth tracker change every step or two.
    scaler = torch.amp.GradScaler(device.type, init_scale=2.0**8, growth_interval=2)
    return Rig(model, opts, scheds, scaler)


def batch(i: int) -> tuple[torch.Tensor, torch.Tensor]:
    # Batches come from their own generator: they depend on the step index, not on the global RNG.
    g = torch.Generator().manual_seed(1000 + i)
    return torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g)


def train_step(rig: Rig, i: int) -> None:
    device = next(rig.model.parameters()).device
    x, y = (t.to(device) for t in batch(i))
    # Draw from numpy and Python too, so the trajectory needs every RNG restored.
    x = x + torch.from_numpy(np.random.standard_normal(x.shape)).float().to(device) * 0.01 * random.random()
    rig.model.train()
    for opt in rig.optimizers:
        opt.zero_grad(set_to_none=True)
    loss = nn.functional.mse_loss(rig.model(x), y)
    rig.scaler.scale(loss).backward()
    for opt in rig.optimizers:
        rig.scaler.step(opt)
    rig.scaler.update()
    for sched in rig.schedulers:
        sched.step()


def seed_all(seed: int = 0) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def record(rig: Rig) -> dict:
    """An independent copy of everything a restore must bring back."""
    return {
        "model": {k: v.detach().clone() for k, v in rig.model.state_dict().items()},
        "opt_state": [{id_: {k: (v.clone() if torch.is_tensor(v) else v) for k, v in st.items()}
                       for id_, st in enumerate(opt.state[p] for g in opt.param_groups for p in g["params"])}
                      for opt in rig.optimizers],
        "lr": [[g["lr"] for g in opt.param_groups] for opt in rig.optimizers],
        "sched": [(s.last_epoch, list(s.get_last_lr())) for s in rig.schedulers],
        "scale": rig.scaler.get_scale(),
        "growth_tracker": rig.scaler.state_dict()["_growth_tracker"],
    }


def draws(device: torch.device = torch.device("cpu")) -> tuple:
    on_device = torch.rand(4, device=device) if device.type != "cpu" else None
    return torch.rand(4), np.random.random_sample(4), [random.random() for _ in range(4)], on_device


def assert_same(a: dict, b: dict) -> None:
    assert a["model"].keys() == b["model"].keys()
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k
    assert len(a["opt_state"]) == len(b["opt_state"])
    for sa, sb in zip(a["opt_state"], b["opt_state"]):
        assert sa.keys() == sb.keys()
        for pid in sa:
            assert sa[pid].keys() == sb[pid].keys()
            for k in sa[pid]:
                va, vb = sa[pid][k], sb[pid][k]
                assert torch.equal(va, vb) if torch.is_tensor(va) else va == vb, (pid, k)
    assert a["lr"] == b["lr"]
    assert a["sched"] == b["sched"]
    assert a["scale"] == b["scale"]
    assert a["growth_tracker"] == b["growth_tracker"]


def assert_draws_equal(a: tuple, b: tuple) -> None:
    assert torch.equal(a[0], b[0])
    assert np.array_equal(a[1], b[1])
    assert a[2] == b[2]
    assert (a[3] is None and b[3] is None) or torch.equal(a[3], b[3])


KINDS = ["adam", "adamw_foreach", "two_optimizers"]


# ------------------------------------------------------------ restore exactness


@pytest.mark.parametrize("kind", KINDS)
def test_restore_is_bit_identical_including_rng(kind, device):
    seed_all()
    rig = make_rig(kind, device=device)
    for i in range(5):
        train_step(rig, i)
    ring = SnapshotRing(SnapshotConfig(every=5, keep=2))
    snap = ring.take(5, **rig.objects(), extra={"epoch": 1})
    ref, ref_draws = record(rig), draws(device)
    assert ref["opt_state"][0][0]  # the optimizer has state to restore

    for i in range(5, 9):
        train_step(rig, i)
    moved = record(rig)
    assert moved["scale"] != ref["scale"] or moved["growth_tracker"] != ref["growth_tracker"]
    assert moved["sched"] != ref["sched"]

    assert ring.restore(snap, **rig.objects()) == {"epoch": 1}
    assert_same(record(rig), ref)
    assert_draws_equal(draws(device), ref_draws)
    assert all(p.grad is None for p in rig.model.parameters())


@pytest.mark.parametrize("kind", KINDS)
def test_rollback_twice_to_the_same_snapshot(kind, device):
    """Optimizer.load_state_dict keeps tensors it is given: the second rollback must still be exact."""
    seed_all()
    rig = make_rig(kind, device=device)
    for i in range(4):
        train_step(rig, i)
    ring = SnapshotRing(SnapshotConfig(every=4, keep=2))
    snap = ring.take(4, **rig.objects())
    ref = record(rig)

    after = []
    for _ in range(3):
        ring.restore(snap, **rig.objects())
        assert_same(record(rig), ref)
        for i in range(4, 7):
            train_step(rig, i)
        after.append(record(rig))
    assert_same(after[1], after[0])
    assert_same(after[2], after[0])


@pytest.mark.parametrize("kind", KINDS)
def test_training_after_restore_repeats_the_trajectory(kind, device):
    seed_all()
    rig = make_rig(kind, device=device)
    ring = SnapshotRing(SnapshotConfig(every=4, keep=3))
    reference = {}
    for i in range(10):
        if ring.due(i):
            ring.take(i, **rig.objects())
        train_step(rig, i)
        reference[i + 1] = record(rig)
    # A different continuation (other batches) moves everything away from the reference.
    for i in range(100, 103):
        train_step(rig, i)

    snap = ring.newest_good_before(6)
    assert snap.step == 4
    ring.restore(snap, **rig.objects())
    ring.drop_after(snap.step)
    assert [s.step for s in ring.snapshots] == [0, 4]
    for i in range(4, 10):
        train_step(rig, i)
        assert_same(record(rig), reference[i + 1])


def test_restore_puts_state_on_the_live_devices_and_keeps_parameter_identity(device):
    seed_all()
    rig = make_rig("adam", device=device)
    train_step(rig, 0)
    params = [id(p) for p in rig.model.parameters()]
    ring = SnapshotRing(SnapshotConfig(every=1))
    snap = ring.take(1, **rig.objects())
    train_step(rig, 1)
    ring.restore(snap, **rig.objects())
    assert [id(p) for p in rig.model.parameters()] == params
    opt = rig.optimizers[0]
    assert all(p in opt.state for p in rig.model.parameters())
    # The restored optimizer state is not the snapshot's memory.
    held = snap._state.optimizers[0]["state"]
    for pid, p in enumerate(opt.param_groups[0]["params"]):
        for k, v in opt.state[p].items():
            assert v.data_ptr() != held[pid][k].data_ptr(), k
            assert v.device == p.device or (k == "step" and v.device.type == "cpu"), k
            # On a GPU the snapshot is held in pinned host memory: its copies need not wait.
            assert held[pid][k].is_pinned() == (device.type == "cuda" and k != "step"), k


def test_extra_is_deep_copied_both_ways():
    rig = make_rig("adam")
    extra = {"detector": {"window": [1.0, 2.0]}, "counter": 3}
    ring = SnapshotRing()
    snap = ring.take(0, **rig.objects(), extra=extra)
    extra["detector"]["window"].append(99.0)
    got = ring.restore(snap, **rig.objects())
    assert got == {"detector": {"window": [1.0, 2.0]}, "counter": 3}
    got["detector"]["window"].clear()
    assert ring.restore(snap, **rig.objects())["detector"]["window"] == [1.0, 2.0]


def test_restore_rejects_objects_that_do_not_match_the_snapshot():
    rig = make_rig("two_optimizers")
    ring = SnapshotRing()
    snap = ring.take(0, **rig.objects())
    with pytest.raises(ValueError, match=r"holds 2 optimizer\(s\) but 1 were passed"):
        ring.restore(snap, model=rig.model, optimizers=rig.optimizers[:1], schedulers=rig.schedulers,
                     scaler=rig.scaler)
    with pytest.raises(ValueError, match="holds a grad scaler"):
        ring.restore(snap, model=rig.model, optimizers=rig.optimizers, schedulers=rig.schedulers)


# ------------------------------------------------------------------ ring bounds


def test_due_every_k_steps_from_zero():
    ring = SnapshotRing(SnapshotConfig(every=50))
    assert [s for s in range(0, 201) if ring.due(s)] == [0, 50, 100, 150, 200]


def test_drops_the_oldest_beyond_keep():
    model = nn.Linear(4, 4)
    ring = SnapshotRing(SnapshotConfig(every=1, keep=3))
    snaps = [ring.take(i, model=model) for i in range(6)]
    assert [s.step for s in ring.snapshots] == [3, 4, 5]
    assert len(ring) == 3
    assert not snaps[0].available and snaps[5].available
    with pytest.raises(ValueError, match="step 0 was dropped"):
        ring.restore(snaps[0], model=model)


def test_hold_before_keeps_the_state_from_before_a_stretch_past_the_ring_reach():
    model = nn.Linear(4, 4)
    ring = SnapshotRing(SnapshotConfig(every=1, keep=3))
    for i in range(3):
        ring.take(i, model=model)
    for i in range(3, 8):  # a stretch open since step 2: the newest snapshot before it stays
        ring.take(i, model=model, hold_before=2)
    assert [s.step for s in ring.snapshots] == [1, 6, 7]
    assert ring.newest_good_before(2).step == 1
    ring.take(8, model=model)  # the stretch is over: the ring drops the oldest again
    assert [s.step for s in ring.snapshots] == [6, 7, 8]


def test_hold_before_yields_to_keep_1_and_to_max_bytes():
    model = nn.Linear(4, 4)
    one = 4 * (16 + 4) + RNG_BYTES
    single = SnapshotRing(SnapshotConfig(every=1, keep=1))
    for i in range(3):
        single.take(i, model=model, hold_before=1)
    assert [s.step for s in single.snapshots] == [2]
    bounded = SnapshotRing(SnapshotConfig(every=1, keep=4, max_bytes=int(1.5 * one)))
    for i in range(3):
        bounded.take(i, model=model, hold_before=1)
    assert [s.step for s in bounded.snapshots] == [2]


def test_drops_the_oldest_beyond_max_bytes():
    model = nn.Linear(4, 4)
    one = 4 * (16 + 4) + RNG_BYTES  # fp32 weight and bias, plus the RNG states
    ring = SnapshotRing(SnapshotConfig(every=1, keep=10, max_bytes=int(2.5 * one)))
    for i in range(5):
        snap = ring.take(i, model=model)
        assert snap.nbytes == one
    assert [s.step for s in ring.snapshots] == [3, 4]
    assert ring.nbytes == 2 * one


def test_a_snapshot_larger_than_max_bytes_is_a_clear_error():
    model = nn.Linear(4, 4)
    one = 4 * (16 + 4) + RNG_BYTES
    ring = SnapshotRing(SnapshotConfig(max_bytes=one - 1))
    with pytest.raises(ValueError, match=rf"needs {one} bytes \(5.0 KiB\) but SnapshotConfig.max_bytes={one - 1} .*raise max_bytes to at least {one}"):
        ring.take(0, model=model)
    assert len(ring) == 0


def test_tied_weights_are_held_once():
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10, bias=False))
    model[1].weight = model[0].weight
    ring = SnapshotRing()
    snap = ring.take(0, model=model)
    assert snap.nbytes == 40 * 4 + RNG_BYTES
    with torch.no_grad():
        model[0].weight.zero_()
    ring.restore(snap, model=model)
    assert model[1].weight is model[0].weight and model[0].weight.abs().sum() > 0


def test_newest_good_before_respects_mark_bad_after():
    model = nn.Linear(2, 2)
    ring = SnapshotRing(SnapshotConfig(every=10, keep=5))
    for step in (0, 10, 20, 30):
        ring.take(step, model=model)
    assert ring.newest_good_before(35).step == 30
    assert ring.newest_good_before(30).step == 20  # strictly before
    ring.mark_bad_after(20)
    assert [s.good for s in ring.snapshots] == [True, True, False, False]
    assert ring.newest_good_before(35).step == 10
    assert ring.newest_good_before(10).step == 0
    assert ring.newest_good_before(0) is None
    ring.drop_after(10)
    assert [s.step for s in ring.snapshots] == [0, 10]


def test_taking_the_same_step_again_replaces_it():
    model = nn.Linear(2, 2)
    ring = SnapshotRing(SnapshotConfig(keep=3))
    old = ring.take(5, model=model)
    new = ring.take(5, model=model)
    assert ring.snapshots == (new,) and not old.available


# ----------------------------------------------------------------- bookkeeping


def test_bookkeeping_round_trips_in_memory():
    model = nn.Linear(2, 2)
    ring = SnapshotRing(SnapshotConfig(every=1, keep=4))
    for step in range(4):
        ring.take(step, model=model)
    ring.mark_bad_after(2)
    saved = ring.state_dict()
    assert [(e["step"], e["good"]) for e in saved["snapshots"]] == [(0, True), (1, True), (2, False), (3, False)]

    ring.take(4, model=model)  # not in the saved bookkeeping: dropped on load
    for snap in ring.snapshots:
        snap.good = True
    ring.load_state_dict(saved)
    assert [(s.step, s.good) for s in ring.snapshots] == [(1, True), (2, False), (3, False)]

    fresh = SnapshotRing(SnapshotConfig(every=1, keep=4))
    fresh.load_state_dict(saved)  # tensors were in another process's memory
    assert len(fresh) == 0


def test_on_disk_ring_writes_atomically_and_reloads_into_a_fresh_ring(tmp_path):
    seed_all()
    rig = make_rig("two_optimizers")
    config = SnapshotConfig(every=3, keep=2, directory=str(tmp_path / "snaps"))
    ring = SnapshotRing(config)
    for i in range(7):
        if ring.due(i):
            ring.take(i, **rig.objects(), extra={"step": i})
        train_step(rig, i)
    assert sorted(os.listdir(config.directory)) == ["snapshot-000000003.pt", "snapshot-000000006.pt"]
    ring.mark_bad_after(6)
    saved = ring.state_dict()

    # The reference: the live state at step 3, replayed from scratch.
    seed_all()
    replay = make_rig("two_optimizers")
    for i in range(3):
        train_step(replay, i)
    ref, ref_draws = record(replay), draws()

    fresh_ring = SnapshotRing(config)
    fresh_ring.load_state_dict(saved)
    assert [(s.step, s.good) for s in fresh_ring.snapshots] == [(3, True), (6, False)]
    snap = fresh_ring.newest_good_before(7)
    assert snap.extra == {"step": 3}
    fresh_rig = make_rig("two_optimizers", seed=123)  # other weights, no optimizer state yet
    assert fresh_ring.restore(snap, **fresh_rig.objects()) == {"step": 3}
    assert_same(record(fresh_rig), ref)
    assert_draws_equal(draws(), ref_draws)

    fresh_ring.drop_after(3)
    assert sorted(os.listdir(config.directory)) == ["snapshot-000000003.pt"]


def test_on_disk_ring_skips_an_unreadable_file_with_a_warning(tmp_path, caplog):
    model = nn.Linear(2, 2)
    config = SnapshotConfig(every=1, keep=3, directory=str(tmp_path))
    ring = SnapshotRing(config)
    for step in range(3):
        ring.take(step, model=model)
    saved = ring.state_dict()
    (tmp_path / "snapshot-000000001.pt").write_bytes(b"truncated")
    os.remove(tmp_path / "snapshot-000000002.pt")
    fresh = SnapshotRing(config)
    with caplog.at_level(logging.WARNING, logger="sentinel.guard.snapshot"):
        fresh.load_state_dict(saved)
    assert [s.step for s in fresh.snapshots] == [0]
    assert "snapshot-000000001.pt is unusable (cannot be read" in caplog.text
    assert "snapshot-000000002.pt is unusable (the file is missing)" in caplog.text


# ---------------------------------------------------------------------- config


@pytest.mark.parametrize("kwargs, fragment", [
    ({"every": 0}, "every=0"),
    ({"every": True}, "every=True"),
    ({"keep": -1}, "keep=-1"),
    ({"keep": 2.0}, "keep=2.0"),
    ({"max_bytes": 0}, "max_bytes=0"),
    ({"directory": ""}, "directory=''"),
    ({"pin_memory": "yes"}, "pin_memory='yes'"),
])
def test_config_rejects_bad_values_naming_them(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(")) as err:
        SnapshotConfig(**kwargs)
    assert ": pass" in str(err.value)


def test_defaults_reach_back_150_to_200_steps():
    config = SnapshotConfig()
    assert config.every * (config.keep - 1) >= 100
    assert config.every * config.keep <= 200
    assert isinstance(SnapshotRing(config).take(0, model=nn.Linear(1, 1)), Snapshot)


class AdoptingEma:
    """Like diffusers' EMAModel: ``load_state_dict`` keeps the tensors it is given as its shadow
    parameters (no copy into tensors of its own)."""

    def __init__(self, model: nn.Module) -> None:
        self.decay, self.shadow = 0.9, [p.detach().clone() for p in model.parameters()]

    def step(self, model: nn.Module) -> None:
        with torch.no_grad():
            for s, p in zip(self.shadow, model.parameters()):
                s.mul_(self.decay).add_(p, alpha=1 - self.decay)

    def state_dict(self) -> dict:
        return {"decay": self.decay, "shadow_params": self.shadow}

    def load_state_dict(self, state: dict) -> None:
        self.decay, self.shadow = state["decay"], state["shadow_params"]


def test_an_object_that_adopts_the_tensors_it_is_given_gets_fresh_ones_on_its_devices(device):
    seed_all()
    model = make_model(device=device)
    ema = AdoptingEma(model)
    ring = SnapshotRing(SnapshotConfig(every=1))
    snap = ring.take(0, model=model, schedulers=[ema])
    before = [s.clone() for s in ema.shadow]
    for _ in range(2):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)
        ema.step(model)
        ring.restore(snap, model=model, schedulers=[ema])
        assert all(torch.equal(s, b) for s, b in zip(ema.shadow, before))
        # On the parameters' devices (on a GPU, host copies would fail its next step), and its
        # own: the step below must not change the snapshot it came from.
        assert all(s.device == p.device for s, p in zip(ema.shadow, model.parameters()))
        ema.step(model)
