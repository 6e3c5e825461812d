"""A disk that refuses writes mid-run: one message naming the file, training and the guard go on,
the skip list stays consistent, nothing already recorded is lost, no traceback.

Real refusals, not patched functions: ``/dev/full`` answers every write with ENOSPC, and (where
this process may mount) a tmpfs of a few hundred KiB fills up for real.
"""

from __future__ import annotations

import math
import os
import subprocess
import uuid
from pathlib import Path

import pytest
import torch

from sentinel import Sentinel, load_run
from sentinel.store import read_skiplist

BATCH = 16


@pytest.fixture
def small_disk(tmp_path):
    """Mount a tmpfs of ``size`` bytes; skip where mounting is not permitted."""
    mounted: list[Path] = []

    def mount(size: int) -> Path:
        where = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                              capture_output=True)
        if done.returncode != 0:
            pytest.skip("cannot mount a small tmpfs here (needs root): the /dev/full tests still run")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _loop(log_dir, tiny_task, *, steps=120, corrupt_at=None, **options):
    """A raw guarded loop; ``corrupt_at``: the head's weights are scaled by 30 after that step,
    damage that only a rollback cures."""
    Data, Net, mse, _ = tiny_task
    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(Data(n=BATCH * steps), batch_size=BATCH, shuffle=False)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    with Sentinel(model, opt, log_dir=str(log_dir), loss_fn=mse, **options) as sen:
        for batch in sen.batches(loader):
            opt.zero_grad()
            loss = mse(model, batch)
            loss.backward()
            if sen.check(loss):
                opt.step()
            sen.end_step()
            if sen.step == corrupt_at:
                with torch.no_grad():
                    model.head.weight.mul_(30.0)
    clean = Data(n=BATCH * steps)
    with torch.no_grad():
        final = float(mse(model, {"x": clean.x[-512:], "y": clean.y[-512:]}))
    return final, sen


def _errors(caplog):
    return [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]


def test_events_refused_at_the_rollback_keep_the_skip_list_and_the_restore(tmp_path, tiny_task, caplog, capfd):
    run = tmp_path / "run"
    run.mkdir()
    os.symlink("/dev/full", run / "events.jsonl")  # every event meets ENOSPC, from the first
    final, sen = _loop(run, tiny_task, corrupt_at=60, tensorboard=True)
    assert sen.rollbacks == 1 and math.isfinite(final) and final < 0.05
    (error,) = [e for e in _errors(caplog) if "cannot write" in e]
    assert str(run / "events.jsonl") in error and "No space left on device" in error
    assert "training and the guard go on" in error
    # The rollback's culprits reached skiplist.json (another file) and the in-memory list alike.
    on_disk = read_skiplist(run)
    assert on_disk and on_disk == sen.skiplist.entries
    assert "Traceback" not in capfd.readouterr().err
    steps = load_run(run).steps  # what was written before the refusal stays readable
    assert 0 < len(steps) < 120 and steps.index[0] == 0


def test_a_disk_that_fills_up_mid_run(small_disk, tiny_task, caplog, capfd):
    disk = small_disk(48 * 1024)
    final, sen = _loop(disk / "run", tiny_task, steps=400, corrupt_at=300, tensorboard=True,
                       grad_norm_depth=2)
    assert sen.writer.stopped is not None and sen.writer.lost > 0
    errors = [e for e in _errors(caplog) if "cannot write" in e]
    assert len(errors) == 1 and str(disk / "run") in errors[0] and "No space left" in errors[0]
    # The guard worked on after the disk filled: the late damage was rolled back.
    assert sen.rollbacks == 1 and math.isfinite(final) and final < 0.05
    assert sen.state_dict()["skiplist"]  # kept for the checkpoint even if the file could not be
    assert "Traceback" not in capfd.readouterr().err
    steps = load_run(disk / "run").steps
    assert len(steps) > 0 and list(steps.index) == list(range(len(steps)))


def test_a_snapshot_dir_that_fills_up_keeps_the_older_snapshots(small_disk, tmp_path, tiny_task, caplog, capfd):
    disk = small_disk(256 * 1024)
    final, sen = _loop(tmp_path / "run", tiny_task, steps=200, corrupt_at=180, tensorboard=False,
                       snapshot_dir=str(disk), snapshot_every=10, snapshot_keep=100)
    refused = [e for e in _errors(caplog) if "cannot write snapshot" in e]
    assert len(refused) == 1 and str(disk) in refused[0]
    assert sen.rollbacks == 1 and math.isfinite(final) and final < 0.05
    (rollback,) = [e for e in load_run(tmp_path / "run").events.to_dict("records") if e["kind"] == "rollback"]
    assert rollback["restored_step"] < 180
    assert not list(disk.glob("*.tmp*"))  # no partial file left on the full disk
    assert "Traceback" not in capfd.readouterr().err
