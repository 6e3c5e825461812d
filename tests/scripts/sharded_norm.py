"""Sentinel in a raw loop under DDP and FSDP2 (2 gloo processes).

Usage: python sharded_norm.py OUT_DIR {ddp|fsdp|fsdp_rollback}.
ddp / fsdp: rank 0 writes OUT_DIR/norms.json with the norms sentinel recorded and the reference
norms of one process on the global batch. fsdp_rollback: rank 1's batch at step 25 is poisoned;
rank 0 writes OUT_DIR/rollback.json with the events and whether the gathered weights are finite.
"""

import functools
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from sentinel import Sentinel, load_run

STEPS, B = 5, 4



@functools.cache
def _cpu_mesh():
    """The gloo ranks' mesh on the CPU: without one, FSDP2 puts the shards on a GPU where there is one."""
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (dist.get_world_size(),))

def make_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1))


def batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(B, 8, generator=g)
    return x, x.sum(1, keepdim=True)


def reference_norms() -> list[float]:
    """One process, the global batch (both ranks' batches), plain SGD: the same trajectory."""
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    norms = []
    for step in range(STEPS):
        parts = [batch(step, r) for r in range(2)]
        x, y = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        norms.append(float(torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])))
        opt.step()
    return norms


def train(sen: Sentinel, model: nn.Module, opt: torch.optim.Optimizer, rank: int, steps: int,
          poison_step: int | None = None) -> None:
    """The raw loop of the README, on this rank's batches; inputs scaled by 1e4 at poison_step."""
    for step in range(steps):
        x, y = batch(step, rank)
        if step == poison_step:
            x = x * 1e4
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        if sen.check(loss):
            opt.step()
        sen.end_step()
    sen.close()


def rollback_run(rank: int, out: str) -> None:
    from torch.distributed.fsdp import fully_shard

    model = make_model()
    for layer in (model[0], model[2], model[4]):
        fully_shard(layer, mesh=_cpu_mesh())
    fully_shard(model, mesh=_cpu_mesh())
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    sen = Sentinel(model, opt, log_dir=f"{out}/run", tensorboard=False, snapshot_every=5)
    train(sen, model, opt, rank, steps=40, poison_step=25 if rank == 1 else None)
    full = {k: v.full_tensor() for k, v in model.state_dict().items()}  # collective: every rank
    if rank == 0:
        events = load_run(f"{out}/run").events
        with open(f"{out}/rollback.json", "w") as f:
            json.dump({"kinds": list(events["kind"]),
                       "restored": [int(v) for v in events.loc[events["kind"] == "rollback", "restored_step"]]
                       if "restored_step" in events else [],
                       "skipped": [int(v) for v in events.loc[events["kind"] == "skip_step", "step"]],
                       "finite": all(bool(torch.isfinite(v).all()) for v in full.values())}, f)


def worker(rank: int, out: str, mode: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("SENTINEL_TEST_PORT", "29541"))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.set_num_threads(1)
    if mode == "fsdp_rollback":
        rollback_run(rank, out)
        _leave()
    model = make_model()
    if mode == "ddp":
        wrapped = nn.parallel.DistributedDataParallel(model)
    else:
        from torch.distributed.fsdp import fully_shard

        for layer in (model[0], model[2], model[4]):
            fully_shard(layer, mesh=_cpu_mesh())
        wrapped = fully_shard(model, mesh=_cpu_mesh())
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.05)
    sen = Sentinel(wrapped, opt, log_dir=f"{out}/run", tensorboard=False, rollback=False)
    train(sen, wrapped, opt, rank, steps=STEPS)
    dist.barrier()
    if rank == 0:
        recorded = load_run(f"{out}/run").steps["grad_norm/total"].tolist()
        with open(f"{out}/norms.json", "w") as f:
            json.dump({"recorded": recorded, "reference": reference_norms()}, f)
    _leave()


def _leave() -> None:
    """Both ranks done (results written) before either leaves, without tearing the gloo group
    down: its C++ teardown aborted now and then under load ("terminate called without an active
    exception", SIGABRT) after the work was done and checked."""
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1], sys.argv[2]), nprocs=2)
