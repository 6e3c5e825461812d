"""The state a loss rollback left (sentinel.guard.return_point): kept beside the snapshot ring,
gone back to when the rollback cured nothing, dropped otherwise; a failure to keep it never
stops training."""

from __future__ import annotations

import logging

import torch

from sentinel.guard.return_point import ReturnPoint
from sentinel.guard.snapshot import SnapshotConfig, SnapshotRing


def _model_and_opt():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def _train(model, opt, steps=3):
    for _ in range(steps):
        opt.zero_grad()
        model(torch.ones(8, 4)).square().mean().backward()
        opt.step()


def _rolled_back(directory=None, max_bytes=None):
    """A ring with the snapshot of step 0, weights trained since, a point kept at step 3, and the
    rollback to step 0 done: what the engine has when it asks to go back."""
    model, opt = _model_and_opt()
    objects = dict(model=model, optimizers=[opt], schedulers=[], scaler=None)
    ring = SnapshotRing(SnapshotConfig(every=1, keep=2, max_bytes=max_bytes, directory=directory))
    ring.take(0, **objects)
    _train(model, opt)
    left = model.weight.detach().clone()
    point = ReturnPoint(directory)
    point.keep(3, ring, **objects)
    ring.restore(ring.snapshots[-1], **objects)
    return model, objects, ring, point, left


def test_going_back_restores_the_state_the_rollback_left():
    model, objects, ring, point, left = _rolled_back()
    restored = model.weight.detach().clone()
    assert point.kept and not torch.equal(restored, left)
    seen = []
    step = point.go_back(5, ring, lambda: seen.append(model.weight.detach().clone()) or True, **objects)
    assert step == 3 and torch.equal(model.weight, left) and not point.kept
    assert torch.equal(seen[0], left)  # judged on the state before the rollback


def test_a_point_that_scores_worse_leaves_the_restored_weights():
    model, objects, ring, point, _ = _rolled_back()
    restored = model.weight.detach().clone()
    for verdict in (False, None):  # worse, or not known (the re-run failed): the restored weights stay
        model2, objects2, ring2, point2, _ = _rolled_back()
        assert point2.go_back(5, ring2, lambda v=verdict: v, **objects2) is None
        assert torch.equal(model2.weight, restored) and not point2.kept


def test_nothing_is_kept_past_the_rings_memory_bound():
    model, opt = _model_and_opt()
    objects = dict(model=model, optimizers=[opt], schedulers=[], scaler=None)
    probe = SnapshotRing(SnapshotConfig(every=1, keep=1))
    one = probe.take(0, **objects).nbytes
    ring = SnapshotRing(SnapshotConfig(every=1, keep=2, max_bytes=int(1.5 * one)))
    ring.take(0, **objects)
    point = ReturnPoint(None)
    point.keep(3, ring, **objects)
    assert not point.kept
    assert point.go_back(5, ring, lambda: True, **objects) is None


def test_on_disk_it_lives_in_return_and_the_folder_goes_with_it(tmp_path):
    model, objects, ring, point, left = _rolled_back(directory=str(tmp_path))
    kept = list((tmp_path / "return").iterdir())
    assert [p.name for p in kept] == ["snapshot-000000003.pt"]
    assert point.go_back(5, ring, lambda: True, **objects) == 3
    assert torch.equal(model.weight, left) and not (tmp_path / "return").exists()


def test_a_point_that_cannot_be_written_is_a_warning_and_training_goes_on(tmp_path, caplog):
    (tmp_path / "return").write_text("a file where the folder should be")
    model, opt = _model_and_opt()
    objects = dict(model=model, optimizers=[opt], schedulers=[], scaler=None)
    ring = SnapshotRing(SnapshotConfig(every=1, keep=2))
    ring.take(0, **objects)
    point = ReturnPoint(str(tmp_path))
    with caplog.at_level(logging.WARNING):
        point.keep(3, ring, **objects)
    assert not point.kept
    assert "the state before the rollback could not be kept" in caplog.text
