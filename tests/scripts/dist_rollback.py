"""Rollbacks across 2 gloo processes in a raw loop (DDP or FSDP2); run as a script.

Usage: python dist_rollback.py OUT_DIR {ddp|fsdp} {none|newest|all}

The head's weights are scaled by 30 on every rank after step FAULT (damage behind the guard's
back, identical on every rank): the loss stays high whatever is skipped, so the guard rolls back.
``newest`` / ``all``: just then, rank 1 alone overwrites the snapshot file the rollback will ask
for (``newest``), or every snapshot file it holds (``all``), with garbage.

Each rank writes OUT_DIR/rank<r>.json: whether it gave up, the step restored by each rollback it
saw, and whether the full weights right after that rollback are bitwise those recorded after that
many steps; and OUT_DIR/weights_rank<r>.pt, its full weights at the end.
"""

import functools
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from sentinel import Sentinel, TrainingGaveUp

STEPS, B, FAULT = 50, 8, 30
SNAPSHOT_EVERY = 5



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
    return x, x.sum(1, keepdim=True) / 8**0.5


def mse(model: nn.Module, b) -> torch.Tensor:
    return nn.functional.mse_loss(model(b[0]), b[1])


def full_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The whole model's weights on every rank (under FSDP an all-gather: a collective)."""
    out = {}
    for key, value in model.state_dict().items():
        value = value.full_tensor() if hasattr(value, "full_tensor") else value
        out[key.removeprefix("module.")] = value.detach().clone()
    return out


def damage(snap_dir: Path, which: str) -> None:
    files = sorted(snap_dir.glob("snapshot-*.pt"))
    # The rollback that answers a spike at FAULT asks for the newest snapshot at least
    # min_rollback_distance (5) steps before it: FAULT - 5.
    wanted = [p for p in files if int(p.stem.split("-")[1]) == FAULT - 5] if which == "newest" else files
    assert wanted, files
    for path in wanted:
        path.write_bytes(os.urandom(64) + b"PK\x03\x04" + os.urandom(512))


def run(rank: int, out: str, mode: str, which: str) -> None:
    model = make_model()
    if mode == "ddp":
        model = nn.parallel.DistributedDataParallel(model)
        head = model.module[4]
    else:
        from torch.distributed.fsdp import fully_shard

        for layer in (model[0], model[2], model[4]):
            fully_shard(layer, mesh=_cpu_mesh())
        fully_shard(model, mesh=_cpu_mesh())
        head = model[4]
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    snap_root = Path(out) / "snaps"
    # Snapshots on disk when a file is to be damaged, else in host memory (the default).
    sen = Sentinel(model, opt, log_dir=f"{out}/run", loss_fn=mse, tensorboard=False,
                   snapshot_every=SNAPSHOT_EVERY, snapshot_dir=None if which == "none" else str(snap_root))
    states = {0: full_state(model)}  # full weights after k steps
    rollbacks: list[dict] = []
    gave_up = None
    try:
        for b in sen.batches([batch(step, rank) for step in range(STEPS)]):
            step = sen.step
            opt.zero_grad()
            loss = mse(model, b)
            loss.backward()
            if sen.check(loss):
                opt.step()
            restored_before = sen.last_restored_step
            sen.end_step()
            if sen.last_restored_step != restored_before:  # this step rolled back
                now = full_state(model)
                r = sen.last_restored_step
                rollbacks.append({"step": step, "restored": r,
                                  "equal": all(torch.equal(now[k], states[r][k]) for k in now)})
            states[sen.step] = full_state(model)
            if sen.step == FAULT and not rollbacks:
                with torch.no_grad():  # every rank scales its part of the head: the same damage
                    weight = head.weight.to_local() if hasattr(head.weight, "to_local") else head.weight
                    weight.mul_(30.0)
                if rank == 1 and which != "none":
                    damage(snap_root / "rank1", which)
                dist.barrier()
    except TrainingGaveUp as err:
        gave_up = str(err)
    sen.close()
    final = full_state(model)
    torch.save(final, f"{out}/weights_rank{rank}.pt")
    with open(f"{out}/rank{rank}.json", "w") as f:
        json.dump({"gave_up": gave_up, "rollbacks": rollbacks,
                   "finite": all(bool(torch.isfinite(v).all()) for v in final.values())}, f)


def worker(rank: int, out: str, mode: str, which: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("SENTINEL_TEST_PORT", "29641"))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.set_num_threads(1)
    try:
        run(rank, out, mode, which)
        # Both ranks done (their results written) before either leaves.
        dist.barrier()
    except BaseException:
        dist.destroy_process_group()
        raise
    # Leave without tearing the gloo group down: its C++ teardown aborted now and then under load
    # ("terminate called without an active exception", SIGABRT) after the work was done and
    # checked, also with a barrier before destroy_process_group. Results are on disk already.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    mp.spawn(worker, args=tuple(sys.argv[1:4]), nprocs=2)
