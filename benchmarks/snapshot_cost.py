"""Snapshot ring cost against a training step of a small GPT.

Workload: a GPT-style decoder (4 layers, d_model=256, 4 heads, seq 128, batch 8, vocab
4096, tied embeddings), AdamW, one forward/backward/step per training step. Baseline: the
median training step. Measured in the same run:

  take        SnapshotRing.take (model + AdamW state + scheduler + RNG) into host memory
  take_disk   the same into an on-disk ring (tmp file, fsync, os.replace)
  restore     SnapshotRing.restore from memory / from disk

and printed as ratios to the step: per snapshot, and amortised over the default interval
``SnapshotConfig().every`` (the budget is <= 1%).

Run:
    .venv/bin/python benchmarks/snapshot_cost.py                 # CPU, ~1-2 minutes on 2 cores
    .venv/bin/python benchmarks/snapshot_cost.py --device cuda   # pinned, asynchronous copies
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch
from torch.nn import functional as F

from gpt import GPT  # benchmarks/gpt.py: the workload shared by the benchmarks
from sentinel.guard.snapshot import SnapshotConfig, SnapshotRing


def timed(fn, repeats: int, sync) -> list[float]:
    out = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=10, help="timed training steps")
    parser.add_argument("--repeats", type=int, default=5, help="timed takes / restores")
    parser.add_argument("--vocab", type=int, default=4096)
    args = parser.parse_args()

    device = torch.device(args.device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
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
