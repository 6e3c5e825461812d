"""The few collectives sentinel needs, so that every rank decides the same thing.

All of them are no-ops in a single process. Small tensors go through the process group's own
device (CUDA for NCCL, CPU for gloo).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


def ready() -> bool:
    """True inside an initialised process group."""
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    """This process's rank (0 outside a process group)."""
    return dist.get_rank() if ready() else 0


def world_size() -> int:
    """Number of ranks (1 outside a process group)."""
    return dist.get_world_size() if ready() else 1


def _device() -> torch.device:
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def mean_loss_and_any_bad(loss: float, bad: bool) -> tuple[float, bool]:
    """Mean loss over ranks (NaN if any rank's is) and whether any rank's step went bad.

    One all-reduce: every rank's detectors then see the same series and take the same decision.

    Example:
        >>> mean_loss_and_any_bad(2.0, False)   # one process
        (2.0, False)
    """
    if world_size() == 1:
        return loss, bad
    t = torch.tensor([loss, 1.0 if bad else 0.0], dtype=torch.float64, device=_device())
    dist.all_reduce(t)
    loss_sum, bad_ranks = t.tolist()
    return loss_sum / world_size(), bad_ranks > 0


def any_rank(flag: bool) -> bool:
    """True on every rank when ``flag`` is True on at least one.

    Example:
        >>> any_rank(True)
        True
    """
    if world_size() == 1:
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def min_and_max(value: int) -> tuple[int, int]:
    """The lowest and the highest of every rank's ``value`` (an integer), on every rank.

    One all-reduce; what the snapshot rings use to agree on one step to restore.

    Example:
        >>> min_and_max(25)   # one process
        (25, 25)
    """
    if world_size() == 1:
        return value, value
    t = torch.tensor([-float(value), float(value)], dtype=torch.float64, device=_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    neg_lowest, highest = t.tolist()
    return int(-neg_lowest), int(highest)


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum a small tensor over ranks (e.g. per-rank squared norms of sharded gradients).

    Example:
        >>> all_reduce_sum(torch.tensor([4.0]))   # one process
        tensor([4.])
    """
    if world_size() == 1:
        return t
    out = t.to(_device())
    dist.all_reduce(out)
    return out.to(t.device)


def gather(item: Any) -> list[Any]:
    """Every rank's ``item`` (any picklable object), in rank order, on every rank.

    Example:
        >>> gather({"rank": 0})
        [{'rank': 0}]
    """
    if world_size() == 1:
        return [item]
    out: list[Any] = [None] * world_size()
    dist.all_gather_object(out, item)
    return out


def broadcast_from_zero(item: Any) -> Any:
    """Rank 0's ``item`` (any picklable object) on every rank; other ranks' values are ignored.

    What only rank 0 can read (its log directory may be the only one holding a file, on a
    cluster with node-local disks) reaches every rank this way.

    Example:
        >>> broadcast_from_zero([1, 2])   # one process
        [1, 2]
    """
    if world_size() == 1:
        return item
    box = [item if rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]
