"""Step-time overhead of ``SentinelCallback`` under Lightning DDP, 2 CPU processes (gloo).

Workload: a small ``benchmarks/gpt.py`` model (2 layers, d_model 128, 4 heads, seq 64,
vocab 1024; batch 8 per rank), AdamW, ``Trainer(strategy="ddp", accelerator="cpu",
devices=2)``. Both configurations run inside one launch: Lightning's launcher re-executes
this script for rank 1 on the first ``fit`` and sets ``LOCAL_RANK`` in rank 0, so the later
fits (each with a fresh Trainer, model and callback) reuse the same two processes and process
group. Plain and sentinel fits alternate (A B B A ...) for ``--repeats`` rounds; a step is
timed on each rank around its own batch hooks (DDP's all-reduce makes the ranks' steps equal
up to skew), the first ``--warmup`` steps of each fit are dropped, and rank 0 prints the
median step of each configuration and their ratio.

With sentinel on, every step adds two small all-reduces (the loss average and the
non-finite flag) to DDP's gradient all-reduce.

Run:
    .venv/bin/python benchmarks/ddp_overhead.py                 # ~2-3 min on 2 cores
    .venv/bin/python benchmarks/ddp_overhead.py --steps 20 --repeats 1
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import warnings

import lightning.pytorch as pl
import torch

from gpt import GPTConfig  # benchmarks/gpt.py
from overhead import FitTimes, LitGPT, StepTimer, TimedSentinelCallback, loader  # benchmarks/overhead.py

CONFIGS = ("plain", "sentinel")


def fit_once(name: str, cfg: GPTConfig, args: argparse.Namespace, log_dir: str) -> FitTimes:
    """One fresh DDP fit; this rank's step times (wall, CPU) and time inside sentinel's hooks."""
    timer = StepTimer()
    middle = [TimedSentinelCallback(log_dir=log_dir)] if name == "sentinel" else []
    torch.manual_seed(0)
    trainer = pl.Trainer(
        strategy="ddp", accelerator="cpu", devices=2, max_steps=args.warmup + args.steps,
        logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0,
        callbacks=[timer.start, *middle, timer.end])
    # Each rank's DistributedSampler takes half of the data: give it enough for max_steps.
    trainer.fit(LitGPT(cfg), loader(cfg, args.batch, 2 * (args.warmup + args.steps)))
    hooks = middle[0].hook_times[args.warmup:] if middle else []
    return FitTimes(timer.times[args.warmup:], timer.cpu_times[args.warmup:], hooks, 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="timed steps per fit")
    parser.add_argument("--warmup", type=int, default=3, help="steps dropped at the start of each fit")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of (plain, sentinel)")
    parser.add_argument("--batch", type=int, default=8, help="batch per rank")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", module="lightning")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    logging.getLogger("lightning.fabric").setLevel(logging.ERROR)
    cfg = GPTConfig(layers=2, d=128, heads=4, seq=64, vocab=1024)
    fits: dict[str, list[FitTimes]] = {n: [] for n in CONFIGS}
    # Rank 1 is a re-execution of this script: each rank gets its own temporary directory,
    # and only rank 0's sentinel writes into it.
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for name in (CONFIGS if r % 2 == 0 else CONFIGS[::-1]):
                fits[name].append(fit_once(name, cfg, args, os.path.join(tmp, f"{name}-{r}")))
    if torch.distributed.is_initialized() and torch.distributed.get_rank() != 0:
        return
    print(f"torch={torch.__version__} lightning={pl.__version__} world_size=2 backend=gloo "
          f"threads/process={torch.get_num_threads()} load(1m)={os.getloadavg()[0]:.1f}")
    print(f"{args.steps} timed steps x {args.repeats} rounds per configuration, rank 0")
    for clock in ("wall", "cpu"):
        def pooled(name: str) -> list[float]:
            return [t for ft in fits[name] for t in getattr(ft, clock)]

        base, ours = statistics.median(pooled("plain")), statistics.median(pooled("sentinel"))
        rounds = [statistics.median(getattr(s, clock)) / statistics.median(getattr(p, clock))
                  for s, p in zip(fits["sentinel"], fits["plain"])]
        print(f"{clock:4s} plain {base * 1e3:7.1f} ms, with sentinel {ours * 1e3:7.1f} ms: ratio "
              f"{ours / base:.3f} (rounds {min(rounds):.3f}-{max(rounds):.3f}), mean ratio "
              f"{statistics.fmean(pooled('sentinel')) / statistics.fmean(pooled('plain')):.3f}")
    hooks = [t for ft in fits["sentinel"] for t in ft.hooks]
    base = statistics.median([t for ft in fits["plain"] for t in ft.wall])
    print(f"inside sentinel's hooks, rank 0: mean {statistics.fmean(hooks) * 1e3:.2f} ms/step = "
          f"{statistics.fmean(hooks) / base:.2%} of a plain step (median {statistics.median(hooks) * 1e3:.2f} ms)")

if __name__ == "__main__":
    main()
