"""The snapshot ring survives what goes wrong around it: tensors held only by an optimizer,
damaged or crafted files in ``snapshot_dir``, a process killed mid-run, and bad options."""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from sentinel.config import GuardConfig
from sentinel.guard.snapshot import (SnapshotConfig, SnapshotRing, SnapshotTooLarge, SnapshotUnusable,
                                     format_size)

REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ the rig


class Rig:
    """A tiny model plus a trainable temperature that only the optimizer holds."""

    def __init__(self, seed: int = 0) -> None:
        torch.manual_seed(seed)
        self.model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        self.temperature = nn.Parameter(torch.tensor([0.9896]))  # not registered in the model
        self.opt = torch.optim.Adam([{"params": self.model.parameters()},
                                     {"params": [self.temperature], "lr": 0.05}], lr=1e-2)

    def objects(self) -> dict:
        return {"model": self.model, "optimizers": [self.opt]}

    def step(self, i: int, poison: bool = False) -> None:
        g = torch.Generator().manual_seed(100 + i)
        x, y = torch.randn(16, 4, generator=g), torch.randn(16, 1, generator=g)
        if poison:
            y = y * 1e3  # a spike: every parameter, the temperature included, jumps
        self.opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(self.model(x) * self.temperature, y)
        loss.backward()
        self.opt.step()

    def state(self) -> dict:
        return {"model": {k: v.clone() for k, v in self.model.state_dict().items()},
                "temperature": self.temperature.detach().clone(),
                "adam": {k: v.clone() for k, v in self.opt.state[self.temperature].items()}}


def assert_state(rig: Rig, ref: dict) -> None:
    now = rig.state()
    for k in ref["model"]:
        assert torch.equal(now["model"][k], ref["model"][k]), k
    assert torch.equal(now["temperature"], ref["temperature"])
    for k in ref["adam"]:
        assert torch.equal(now["adam"][k], ref["adam"][k]), k


def run(ring: SnapshotRing, rig: Rig, steps: range, states: dict) -> None:
    for i in steps:
        if ring.due(i):
            ring.take(i, **rig.objects(), extra={"step": i})
            states[i] = rig.state()
        rig.step(i)


@pytest.fixture(params=["memory", "disk"])
def ring_config(request, tmp_path) -> SnapshotConfig:
    directory = None if request.param == "memory" else str(tmp_path / "snaps")
    return SnapshotConfig(every=5, keep=4, directory=directory)


# ------------------------------------------------- optimizer-held parameters


def test_rollback_restores_parameters_the_model_does_not_hold(ring_config):
    rig, ring, states = Rig(), SnapshotRing(ring_config), {}
    run(ring, rig, range(11), states)
    rig.step(11, poison=True)
    assert not torch.equal(rig.temperature.detach(), states[10]["temperature"])
    live = rig.temperature

    ring.restore(ring.newest_good_before(11), **rig.objects())
    assert_state(rig, states[10])
    assert rig.temperature is live and rig.opt.param_groups[1]["params"][0] is live
    assert rig.temperature.grad is None


def test_rolling_back_twice_restores_optimizer_held_parameters_both_times(ring_config):
    rig, ring, states = Rig(), SnapshotRing(ring_config), {}
    run(ring, rig, range(6), states)
    snap = ring.newest_good_before(6)
    after = []
    for _ in range(2):
        ring.restore(snap, **rig.objects())
        assert_state(rig, states[5])
        for i in range(5, 9):
            rig.step(i)
        after.append(rig.state())
    assert torch.equal(after[0]["temperature"], after[1]["temperature"])


def test_restore_rejects_optimizers_holding_other_outside_parameters():
    rig, ring = Rig(), SnapshotRing(SnapshotConfig(every=1))
    snap = ring.take(0, **rig.objects())
    other = torch.optim.SGD(list(rig.model.parameters()), lr=0.1)
    with pytest.raises(ValueError, match="parameter"):
        ring.restore(snap, model=rig.model, optimizers=[other])


# ----------------------------------------------------------- damaged files


class Payload:
    """Writes a marker file when unpickled: code a crafted snapshot would run at load."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def truncate(path: Path, marker: Path) -> str:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return "truncated"


def empty(path: Path, marker: Path) -> str:
    path.write_bytes(b"")
    return "empty"


def delete(path: Path, marker: Path) -> str:
    path.unlink()
    return "deleted"


def garbage(path: Path, marker: Path) -> str:
    path.write_bytes(os.urandom(64) + b"PK\x03\x04" + os.urandom(4096))
    return "garbage"


def crafted_torch(path: Path, marker: Path) -> str:
    torch.save({"version": 2, "step": 10, "model": Payload(marker)}, path)
    return "crafted"


def crafted_pickle(path: Path, marker: Path) -> str:
    path.write_bytes(pickle.dumps({"model": Payload(marker)}, protocol=2))
    return "crafted"


DAMAGE = [truncate, empty, delete, garbage, crafted_torch, crafted_pickle]


def disk_ring(tmp_path: Path, keep: int = 4) -> tuple[Rig, SnapshotRing, dict]:
    rig, ring, states = Rig(), SnapshotRing(SnapshotConfig(every=5, keep=keep, directory=str(tmp_path))), {}
    run(ring, rig, range(11), states)
    for i in range(11, 14):
        rig.step(i, poison=True)
    return rig, ring, states


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__)
def test_a_bad_newest_file_falls_back_to_the_older_snapshot(tmp_path, caplog, damage):
    rig, ring, states = disk_ring(tmp_path)
    newest = ring.newest_good_before(14)
    assert newest.step == 10
    marker = tmp_path / "code-ran"
    damage(tmp_path / "snapshot-000000010.pt", marker)

    with caplog.at_level(logging.WARNING, logger="sentinel.guard.snapshot"):
        extra = ring.restore(newest, **rig.objects())
    assert not marker.exists()  # nothing in the file ran
    assert extra == {"step": 5}
    assert ring.last_restored is not None and ring.last_restored.step == 5
    assert_state(rig, states[5])
    assert "snapshot-000000010.pt" in caplog.text and "step 5" in caplog.text
    # The unusable snapshot leaves the ring (and the disk); the one used stays.
    assert [s.step for s in ring.snapshots] == [0, 5]
    assert not newest.available
    assert sorted(os.listdir(tmp_path)) == ["snapshot-000000000.pt", "snapshot-000000005.pt"]


def test_the_fallback_snapshot_can_be_rolled_back_to_again(tmp_path):
    rig, ring, states = disk_ring(tmp_path)
    truncate(tmp_path / "snapshot-000000010.pt", tmp_path / "x")
    ring.restore(ring.newest_good_before(14), **rig.objects())
    used = ring.last_restored
    after = []
    for _ in range(2):
        for i in range(5, 9):
            rig.step(i)
        after.append(rig.state())
        ring.restore(used, **rig.objects())
        assert ring.last_restored is used
        assert_state(rig, states[5])
    assert torch.equal(after[0]["temperature"], after[1]["temperature"])
    for k in after[0]["model"]:
        assert torch.equal(after[0]["model"][k], after[1]["model"][k])


def test_no_usable_snapshot_is_one_clear_error_and_leaves_the_state_alone(tmp_path, caplog):
    rig, ring, _ = disk_ring(tmp_path)
    marker = tmp_path / "code-ran"
    truncate(tmp_path / "snapshot-000000010.pt", marker)
    crafted_torch(tmp_path / "snapshot-000000005.pt", marker)
    delete(tmp_path / "snapshot-000000000.pt", marker)
    before = rig.state()

    with caplog.at_level(logging.WARNING, logger="sentinel.guard.snapshot"):
        with pytest.raises(SnapshotUnusable) as err:
            ring.restore(ring.newest_good_before(14), **rig.objects())
    assert not marker.exists()
    assert [os.path.basename(p) for p in err.value.paths] == [
        "snapshot-000000010.pt", "snapshot-000000005.pt", "snapshot-000000000.pt"]
    assert err.value.step == 10
    message = str(err.value)
    assert "snapshot-000000005.pt" in message and "no snapshot" in message
    assert ring.last_restored is None and len(ring) == 0
    assert_state(rig, before)  # nothing was half-restored


def test_a_snapshot_file_of_another_step_is_unusable(tmp_path):
    rig, ring, states = disk_ring(tmp_path)
    os.replace(tmp_path / "snapshot-000000000.pt", tmp_path / "snapshot-000000010.pt")
    ring.restore(ring.newest_good_before(14), **rig.objects())
    assert ring.last_restored.step == 5
    assert_state(rig, states[5])


def loadable(**parts) -> dict:
    """A file a weights-only load reads, with the given parts (the rest empty)."""
    payload = {"version": 2, "step": 10, "nbytes": 1, "extra": {}, "model": {}, "optimizers": [],
               "schedulers": [], "scaler": None, "rng": {}, "optimizer_params": []}
    payload.update(parts)
    return payload


WRONG_CONTENT = {
    "wider head": lambda rig: loadable(
        model=nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).state_dict(),
        optimizers=[rig.opt.state_dict()]),
    "optimizer groups not dicts": lambda rig: loadable(
        model=rig.model.state_dict(), optimizers=[{"state": {}, "param_groups": [1, 2]}]),
    "no rng": lambda rig: loadable(model=rig.model.state_dict(), optimizers=[rig.opt.state_dict()]),
    "not a dict": lambda rig: [1, 2, 3],
}


@pytest.mark.parametrize("content", WRONG_CONTENT.values(), ids=WRONG_CONTENT.keys())
def test_a_loadable_file_with_the_wrong_content_is_unusable_and_nothing_is_half_restored(tmp_path, content):
    rig, ring, states = disk_ring(tmp_path)
    torch.save(content(rig), tmp_path / "snapshot-000000010.pt")
    ring.restore(ring.newest_good_before(14), **rig.objects())
    assert ring.last_restored.step == 5
    assert_state(rig, states[5])


@pytest.mark.parametrize("damage", [truncate, garbage, crafted_torch], ids=lambda f: f.__name__)
def test_a_fresh_ring_skips_a_bad_file_without_running_it(tmp_path, caplog, damage):
    _, ring, _ = disk_ring(tmp_path)
    saved = ring.state_dict()
    marker = tmp_path / "code-ran"
    damage(tmp_path / "snapshot-000000005.pt", marker)
    fresh = SnapshotRing(ring.config)
    with caplog.at_level(logging.WARNING, logger="sentinel.guard.snapshot"):
        fresh.load_state_dict(saved)
    assert not marker.exists()
    assert [s.step for s in fresh.snapshots] == [0, 10]
    assert "snapshot-000000005.pt" in caplog.text


def test_take_refuses_extra_state_a_safe_load_could_not_read_back(tmp_path):
    ring = SnapshotRing(SnapshotConfig(every=1, directory=str(tmp_path)))
    with pytest.raises(TypeError, match="extra"):
        ring.take(0, model=nn.Linear(2, 2), extra={"where": Path("/tmp")})
    assert os.listdir(tmp_path) == []


def test_numpy_scalars_and_deques_in_extra_come_back_as_plain_values(tmp_path):
    import collections

    import numpy as np

    ring = SnapshotRing(SnapshotConfig(every=1, directory=str(tmp_path)))
    ring.take(0, model=nn.Linear(2, 2), extra={"history": collections.deque([np.float64(1.5), 2.0])})
    fresh = SnapshotRing(ring.config)
    fresh.load_state_dict(ring.state_dict())
    assert fresh.snapshots[0].extra == {"history": [1.5, 2.0]}


# ------------------------------------------------------- a killed process


CHILD = textwrap.dedent("""
    import os, signal, sys
    import torch
    from torch import nn
    from sentinel.guard.snapshot import SnapshotConfig, SnapshotRing

    directory, first, kill_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    real_replace = os.replace
    def replace(src, dst):
        # Killed while the snapshot at `kill_at` is half written: its temporary file stays.
        if dst.endswith(f"snapshot-{kill_at:09d}.pt"):
            os.kill(os.getpid(), signal.SIGKILL)
        real_replace(src, dst)
    os.replace = replace

    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ring = SnapshotRing(SnapshotConfig(every=1, keep=4, directory=directory))
    for step in range(first, first + 1000):
        if ring.due(step):
            ring.take(step, model=model, optimizers=[opt])
            assert len(os.listdir(directory)) <= 4 + 2, os.listdir(directory)  # + the two foreign files
        opt.zero_grad()
        model(torch.randn(3, 4)).sum().backward()
        opt.step()
""")


def killed_run(directory: Path, first: int, kill_at: int) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(directory), str(first), str(kill_at)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


def snapshot_files(directory: Path) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".pt") and n.startswith("snapshot-"))


def test_a_ring_after_a_killed_process_keeps_the_directory_within_keep(tmp_path):
    foreign = {"notes.txt": b"mine", "snapshot-best.pt": b"not a ring file"}
    for name, data in foreign.items():
        (tmp_path / name).write_bytes(data)

    killed_run(tmp_path, first=0, kill_at=9)
    assert ".snapshot-000000009.pt.tmp" in os.listdir(tmp_path)
    assert len(snapshot_files(tmp_path)) == 4  # 6..8 (5 made room for 9) and the foreign one

    # A restart that is killed too, at other steps: still never more than `keep` ring files.
    killed_run(tmp_path, first=100, kill_at=103)
    names = os.listdir(tmp_path)
    assert not any(n.endswith(".tmp") and n != ".snapshot-000000103.pt.tmp" for n in names)
    assert snapshot_files(tmp_path) == ["snapshot-000000100.pt", "snapshot-000000101.pt",
                                        "snapshot-000000102.pt", "snapshot-best.pt"]

    ring = SnapshotRing(SnapshotConfig(every=1, keep=4, directory=str(tmp_path)))
    assert not any(n.endswith(".tmp") for n in os.listdir(tmp_path))
    model = nn.Linear(4, 2)
    for step in range(6):
        ring.take(step, model=model)
        assert len(snapshot_files(tmp_path)) <= 4 + 1
    assert snapshot_files(tmp_path) == ["snapshot-000000002.pt", "snapshot-000000003.pt",
                                        "snapshot-000000004.pt", "snapshot-000000005.pt", "snapshot-best.pt"]
    for name, data in foreign.items():  # files outside the naming scheme are never touched
        assert (tmp_path / name).read_bytes() == data


def test_leftovers_stay_within_keep_and_only_the_resumed_ones_are_adopted(tmp_path):
    model = nn.Linear(2, 2)
    old = SnapshotRing(SnapshotConfig(every=1, keep=3, directory=str(tmp_path)))
    for step in range(3):
        old.take(step, model=model)
    saved = old.state_dict()
    (tmp_path / "snapshot-000000008.pt").write_bytes(b"written after the checkpoint of `saved`")

    fresh = SnapshotRing(SnapshotConfig(every=1, keep=3, directory=str(tmp_path)))
    assert snapshot_files(tmp_path) == ["snapshot-000000001.pt", "snapshot-000000002.pt",
                                        "snapshot-000000008.pt"]  # the oldest went first
    fresh.load_state_dict({"snapshots": [e for e in saved["snapshots"] if e["step"] >= 1]})
    assert [s.step for s in fresh.snapshots] == [1, 2]
    assert snapshot_files(tmp_path) == ["snapshot-000000001.pt", "snapshot-000000002.pt"]


# ------------------------------------------------------------------ options


GUARD_NUMBERS = [f.name for f in dataclasses.fields(GuardConfig) if f.type in ("int", "float", "int | None")]


def test_every_numeric_guard_option_is_covered():
    assert {"snapshot_keep", "snapshot_every", "snapshot_max_bytes", "lr_factor",
            "loss_scale_floor"} <= set(GUARD_NUMBERS)


@pytest.mark.parametrize("name", GUARD_NUMBERS)
def test_a_numeric_guard_option_of_the_wrong_type_names_value_and_type(name):
    with pytest.raises(TypeError, match=rf"{name}='4'.*str.*(int|number)"):
        GuardConfig(**{name: "4"})


@pytest.mark.parametrize("name", [n for n in GUARD_NUMBERS
                                  if dict((f.name, f.type) for f in dataclasses.fields(GuardConfig))[n] != "float"])
def test_an_integer_guard_option_refuses_floats_and_bools(name):
    for bad in (4.0, True):
        with pytest.raises(TypeError, match=rf"{name}={bad!r}.*int"):
            GuardConfig(**{name: bad})


def test_float_guard_options_take_integers():
    assert GuardConfig(lr_factor=1, loss_scale_floor=2).lr_factor == 1


def test_snapshot_max_bytes_must_be_positive():
    with pytest.raises(ValueError, match="snapshot_max_bytes"):
        GuardConfig(snapshot_max_bytes=0)


# ------------------------------------------------------------ too large


@pytest.mark.parametrize("nbytes, text", [(0, "0 bytes"), (812, "812 bytes"), (5136, "5.0 KiB"),
                                          (3 * 2**20 + 2**19, "3.5 MiB"), (5 * 2**30, "5.0 GiB"),
                                          (2**41, "2.0 TiB")])
def test_format_size_picks_the_unit(nbytes, text):
    assert format_size(nbytes) == text


@pytest.mark.parametrize("directory", [None, "snaps"])
def test_too_large_carries_sizes_and_whether_a_directory_is_used(tmp_path, directory):
    directory = None if directory is None else str(tmp_path / directory)
    ring = SnapshotRing(SnapshotConfig(max_bytes=100, directory=directory))
    with pytest.raises(SnapshotTooLarge) as err:
        ring.take(3, model=nn.Linear(4, 4))
    e = err.value
    assert e.max_bytes == 100 and e.nbytes > 5000 and e.step == 3
    assert e.directory == directory
    assert format_size(e.nbytes) in str(e)
