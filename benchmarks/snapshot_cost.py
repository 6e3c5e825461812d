"""Snapshot ring cost against a training step of a small GPT.

Workload: a GPT-style decoder (4 layers, d_model=256, 4 heads, seq 128, batch 8, vocab
4096, tied embeddings), AdamW, one forward/backward/step per training step. Baseline: the
median training step. Measured in the same run:

  take        SnapshotRing.take (model + AdamW state + scheduler + RNG) into host memory
  take_disk   the same into an on-disk ring (tmp file, fsync, os.replace)
  restore     SnapshotRing.restore from memory / from disk

and printed as ratios to the step: per snapshot, and amortised over the default interval
``SnapshotConfig().every`` (the budget is <= 1%).

Then the cost per model size (``--sizes``, GPT widths): a take in the steady state (the ring
full, so each take copies into the buffers of the snapshot it drops), and the first takes
(fresh buffers), as bytes per second against one ``Tensor.copy_`` of the same number of bytes
between two preallocated flat buffers (the memory bandwidth a copy can reach) and one
``clone()`` of a flat buffer (a copy into fresh memory). With ``--ref REV`` the snapshot ring of
git revision ``REV`` is timed beside it on the same model. Takes and references alternate;
medians. On CUDA the take returns before its copies land (they are non-blocking into pinned
memory): the time until the host is free and the time until the copies are done are both
shown.

Run:
    .venv/bin/python benchmarks/snapshot_cost.py                 # CPU, ~2-3 minutes on 2 cores
    .venv/bin/python benchmarks/snapshot_cost.py --device cuda   # pinned, asynchronous copies
    .venv/bin/python benchmarks/snapshot_cost.py --skip-step --sizes 64,256,1024 --ref HEAD~5
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

from gpt import GPT  # benchmarks/gpt.py: the workload shared by the benchmarks
from sentinel.guard.snapshot import SnapshotConfig, SnapshotRing
from step_path import load_ref  # benchmarks/step_path.py: an earlier revision as sentinel_ref


def timed(fn, repeats: int, sync) -> list[float]:
    out = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return out


def per_size(args: argparse.Namespace, device: torch.device, sync, rings: dict[str, Any]) -> None:
    """Take cost per model size, in bytes per second, against plain copies of as many bytes."""
    print(f"\nsnapshot take per model size (GPT 4 layers, vocab {args.vocab}, AdamW; {args.repeats * 2} "
          "takes each, alternating, median); GB/s = snapshot bytes / time")
    head = f"{'d':>5s} {'MiB':>7s} {'copy_ GB/s':>10s} {'clone GB/s':>10s}"
    for name in rings:
        head += f" {name + ' ms':>14s} {'GB/s':>6s} {'first ms':>9s}"
    if device.type == "cuda":
        head += f" {'host free ms':>12s}"
    print(head)
    for d in [int(x) for x in args.sizes.split(",")]:
        torch.manual_seed(0)
        model = GPT(args.vocab, 128, d, 4, 4).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
        data = torch.randint(0, args.vocab, (2, 129), device=device)
        logits = model(data[:, :-1])
        F.cross_entropy(logits.reshape(-1, args.vocab), data[:, 1:].reshape(-1)).backward()
        opt.step()  # creates the AdamW state
        model.zero_grad(set_to_none=True)
        objs = {"model": model, "optimizers": [opt]}
        nbytes = sum(t.numel() * t.element_size() for t in
                     [*model.state_dict().values(), *(v for st in opt.state.values() for v in st.values()
                                                      if torch.is_tensor(v))])
        src = torch.empty(nbytes // 4, device=device)
        dst = torch.empty(nbytes // 4, pin_memory=device.type == "cuda")
        times: dict[str, list[float]] = {"copy_": [], "clone": []}
        first: dict[str, float] = {}
        host_free: list[float] = []
        built = {name: ring_cls(config_cls(every=1, keep=2)) for name, (ring_cls, config_cls) in rings.items()}
        for name, ring in built.items():  # the first takes allocate; from the third, the ring is full
            t0 = time.perf_counter()
            ring.take(0, **objs)
            sync()
            first[name] = time.perf_counter() - t0
            ring.take(1, **objs)
        step = 2
        for _ in range(args.repeats * 2):
            times["copy_"] += timed(lambda: dst.copy_(src, non_blocking=device.type == "cuda"), 1, sync)
            times["clone"] += timed(lambda: (src.cpu() if device.type == "cuda" else src.clone()), 1, sync)
            for name, ring in built.items():
                times.setdefault(name, []).extend(timed(lambda: ring.take(step, **objs), 1, sync))
                if name == "sentinel" and device.type == "cuda":
                    t0 = time.perf_counter()
                    ring.take(step, **objs)  # not synchronised: the time until the host can go on
                    host_free.append(time.perf_counter() - t0)
                    sync()
                step += 1
        med = {k: statistics.median(v) for k, v in times.items()}
        line = f"{d:5d} {nbytes / 2**20:7.1f} {nbytes / med['copy_'] / 1e9:10.2f} {nbytes / med['clone'] / 1e9:10.2f}"
        for name in rings:
            line += f" {med[name] * 1e3:14.2f} {nbytes / med[name] / 1e9:6.2f} {first[name] * 1e3:9.2f}"
        if device.type == "cuda":
            line += f" {statistics.median(host_free) * 1e3:12.2f}"
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=10, help="timed training steps")
    parser.add_argument("--repeats", type=int, default=5, help="timed takes / restores")
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--sizes", default="64,128,256,512", help="GPT widths for the per-size table ('' skips it)")
    parser.add_argument("--ref", default=None, help="also time the snapshot ring of this git revision")
    parser.add_argument("--skip-step", action="store_true", help="only the per-size table")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    device = torch.device(args.device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    if args.sizes:
        rings: dict[str, Any] = {}
        with tempfile.TemporaryDirectory() as tmp:
            if args.ref:
                load_ref(args.ref, Path(tmp) / "ref")
                ref = importlib.import_module("sentinel_ref.guard.snapshot")
                rings[f"ref {args.ref}"[:10]] = (ref.SnapshotRing, ref.SnapshotConfig)
            rings["sentinel"] = (SnapshotRing, SnapshotConfig)
            per_size(args, device, sync, rings)
    if args.skip_step:
        return
    torch.manual_seed(0)
    model = GPT(args.vocab, 128, 256, 4, 4).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 100))
    data = torch.randint(0, args.vocab, (8, 129), device=device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        logits = model(data[:, :-1])
        F.cross_entropy(logits.reshape(-1, args.vocab), data[:, 1:].reshape(-1)).backward()
        opt.step()
        sched.step()

    objs = {"model": model, "optimizers": [opt], "schedulers": [sched]}
    timed(step, 3, sync)  # warm-up; also creates the AdamW state
    step_s = statistics.median(timed(step, args.steps, sync))

    config = SnapshotConfig()
    ring = SnapshotRing(config)
    counter = iter(range(10**9))
    take_s = statistics.median(timed(lambda: ring.take(next(counter), **objs), args.repeats, sync))
    snap = ring.snapshots[-1]
    restore_s = statistics.median(timed(lambda: ring.restore(snap, **objs), args.repeats, sync))

    with tempfile.TemporaryDirectory() as tmp:
        disk = SnapshotRing(SnapshotConfig(directory=tmp))
        take_disk_s = statistics.median(timed(lambda: disk.take(next(counter), **objs), args.repeats, sync))
        dsnap = disk.snapshots[-1]
        restore_disk_s = statistics.median(timed(lambda: disk.restore(dsnap, **objs), args.repeats, sync))

    n_params = sum(p.numel() for p in model.parameters())
    ms = 1e3
    print(f"device={device} torch={torch.__version__} threads={torch.get_num_threads()} "
          f"params={n_params / 1e6:.2f}M every={config.every} keep={config.keep}")
    print(f"train step          {step_s * ms:8.1f} ms")
    print(f"take (memory)       {take_s * ms:8.1f} ms   {take_s / step_s:6.1%} of a step, "
          f"amortised every {config.every}: {take_s / (config.every * step_s):.3%}")
    print(f"take (disk)         {take_disk_s * ms:8.1f} ms   {take_disk_s / step_s:6.1%} of a step, "
          f"amortised every {config.every}: {take_disk_s / (config.every * step_s):.3%}")
    print(f"restore (memory)    {restore_s * ms:8.1f} ms   {restore_s / step_s:6.1%} of a step")
    print(f"restore (disk)      {restore_disk_s * ms:8.1f} ms   {restore_disk_s / step_s:6.1%} of a step")
    print(f"bytes per snapshot  {snap.nbytes / 2**20:8.1f} MiB  ({snap.nbytes / (4 * n_params):.2f}x fp32 weights)")
    print(f"bytes held, full    {ring.nbytes / 2**20:8.1f} MiB  ({len(ring)} snapshots)")


if __name__ == "__main__":
    main()
