"""Restoring FSDP2's sharded state (DTensors): a copy's ``non_blocking`` is asked of the local
shard, since torch 2.11's DTensor has no sharding rule for ``is_pinned`` (a rollback under FSDP2
raised NotImplementedError on a GPU machine)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from sentinel.guard import snapshot

DTensor = pytest.importorskip("torch.distributed.tensor").DTensor


@pytest.fixture
def one_rank(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_a_sharded_tensor_is_copied_whatever_its_is_pinned_does(one_rank, monkeypatch):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (1,))
    saved = distribute_tensor(torch.arange(6.0), mesh, [Shard(0)])

    def no_rule(self):
        raise NotImplementedError("Operator aten.is_pinned.default does not have a sharding strategy registered.")

    monkeypatch.setattr(DTensor, "is_pinned", no_rule)  # as torch 2.11's DTensor answers
    assert snapshot._is_pinned(saved) is False
    fresh = snapshot._fresh(saved, torch.device("cpu"))
    assert isinstance(fresh, DTensor) and torch.equal(fresh.to_local(), saved.to_local())
    fresh.to_local().add_(1)
    assert torch.equal(saved.to_local(), torch.arange(6.0))  # a copy, not the saved tensor
