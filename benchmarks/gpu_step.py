"""sentinel's cost on a GPU: a GPT trained in bf16 at the defaults against a plain loop, and the
grad-norm probe against Lightning's ``grad_norm``.

Part 1, the step (``--workloads``): each workload trains identically seeded copies of one GPT
(``benchmarks/gpt.py``, AdamW, forward under ``torch.autocast(dtype=torch.bfloat16)``) in one
process, ``--block`` steps at a time (25: one snapshot per block at the defaults), the copies
taking turns block by block (the order rotated every block, so drift hits all alike). A block is
timed from one ``torch.cuda.synchronize()`` to the next: what the GPU and the host together take
for those steps, the queue included. Copies:

  plain        zero_grad, forward, backward, ``opt.step()``: nothing is read back, the host runs ahead
  plain+item   the same and ``loss.item()`` every step, as a loop that logs its loss every step
  sentinel     ``Sentinel(model, opt, log_dir=..., loss_fn=...)`` at its defaults (TensorBoard, the
               guard, a snapshot every 25 steps into pinned host memory, RNG capture for the NaN
               replay, attention sampled every 50 steps, per-module norms every 10) in a raw loop:
               its one read back per step
  no-rollback  the same with ``rollback=False``: record and report only (no snapshots, every
               update applied; detection still runs)
  minimal      the total grad norm, the loss and the steps file only (``rollback=False,
               tensorboard=False, localize_nonfinite=False``, attention and per-module norms
               never): the one read back per step and the judging of it

``--ablate``: more copies, each ``sentinel`` with one part off (``-snapshots``: one snapshot at the
start only; ``-attention``, ``-tb``, ``-rng``: no NaN-replay RNG capture, ``-modules``: no
per-module norms), and ``min-guard``: ``minimal`` with the guard on (one snapshot at the start).
``--only=NAMES`` runs those copies alone, beside ``plain`` and ``plain+item`` (with ``=``: the
ablations' names start with a dash). ``--fused``: every copy's AdamW is ``fused=True``.

Reported per copy: the median step over blocks, its ratio to ``plain`` and to ``plain+item``, and
the wall time inside sentinel's calls (``batches``' next, ``check``, ``end_step``) per step: host
work plus, in ``check``, the wait for the GPU to finish the backward. ``--profile`` then runs
``--block`` more steps of the ``sentinel`` copy under cProfile and prints where the host time goes.

  gpt-s   4 layers, d 256, seq 128, vocab 4096, batch 16: a step of a few milliseconds, where
          the host has to keep ahead of the GPU
  gpt-m   12 layers, d 768, 12 heads, seq 512, vocab 8192, batch 8 (GPT-2 small's shape)

Part 2, grad norms of the gpt-m model after one backward (148 parameter tensors), each way taken
to the host as its user gets the numbers, alternating calls, median:

  lightning grad_norm         ``grad_norm(model, norm_type=2)``: its total is taken with
                              ``torch.tensor`` of the per-tensor norms, one read back each
  lightning grad_norm + log   the same, then each value read, as ``self.log_dict(norms)`` does
  sentinel probe, 1 read      ``GradNormProbe.compute()`` and one read, as the engine does

Run (CUDA; ``--device cpu --tiny`` checks the script itself on any machine in seconds):
    python benchmarks/gpu_step.py
    python benchmarks/gpu_step.py --workloads gpt-s --blocks 20
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from gpt import GPT, GPTConfig, lm_loss, random_tokens  # benchmarks/gpt.py
from sentinel import Sentinel
from sentinel.probes.grad_norm import GradNormProbe

WORKLOADS = {
    "gpt-s": (GPTConfig(vocab=4096, seq=128, d=256, layers=4, heads=4), 16),
    "gpt-m": (GPTConfig(vocab=8192, seq=512, d=768, layers=12, heads=12), 8),
}
NEVER = 10**9
ABLATIONS: dict[str, dict[str, Any]] = {
    "-snapshots": {"snapshot_every": NEVER}, "-attention": {"attention_every": NEVER},
    "-tb": {"tensorboard": False}, "-rng": {"localize_nonfinite": False}, "-modules": {"module_every": NEVER},
    "min-guard": {"snapshot_every": NEVER, "tensorboard": False, "localize_nonfinite": False,
                  "attention_every": NEVER, "module_every": NEVER},
}
TINY = (GPTConfig(vocab=64, seq=16, d=32, layers=2, heads=2), 4)
# copy name -> Sentinel options (None: a plain loop)
COPIES: dict[str, dict[str, Any] | None] = {
    "plain": None, "plain+item": None, "sentinel": {}, "no-rollback": {"rollback": False},
    "minimal": {"rollback": False, "tensorboard": False, "localize_nonfinite": False,
                "attention_every": 10**9, "module_every": 10**9},
}


@dataclass
class Copy:
    """One identically seeded model with its optimizer and its way of taking a step."""

    name: str
    model: nn.Module
    opt: torch.optim.Optimizer
    sen: Sentinel | None = None
    batches: Iterator[Any] | None = None
    per_step: list[float] = field(default_factory=list)  # seconds, one value per timed block
    calls: list[float] = field(default_factory=list)  # host seconds inside sentinel's calls, per step
    parts: dict[str, list[float]] = field(default_factory=dict)  # the same, per call


def _bf16_loss(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    with torch.autocast(tokens.device.type, dtype=torch.bfloat16):
        return lm_loss(model, tokens)


def _forever(batches: torch.Tensor) -> Iterator[torch.Tensor]:
    while True:
        yield from batches


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def take_step(copy: Copy, tokens: Iterator[torch.Tensor]) -> None:
    if copy.sen is None:
        batch = next(tokens)
        copy.opt.zero_grad(set_to_none=True)
        loss = _bf16_loss(copy.model, batch)
        loss.backward()
        copy.opt.step()
        if copy.name == "plain+item":
            loss.item()
        return
    t0 = time.perf_counter()
    batch = next(copy.batches)
    t_next = time.perf_counter() - t0
    copy.opt.zero_grad(set_to_none=True)
    loss = _bf16_loss(copy.model, batch)
    loss.backward()
    t0 = time.perf_counter()
    apply = copy.sen.check(loss)
    t_check = time.perf_counter() - t0
    if apply:
        copy.opt.step()
    t0 = time.perf_counter()
    copy.sen.end_step()
    t_end = time.perf_counter() - t0
    copy.calls.append(t_next + t_check + t_end)
    for part, t in (("next", t_next), ("check", t_check), ("end_step", t_end)):
        copy.parts.setdefault(part, []).append(t)


def copy_table(args: argparse.Namespace) -> dict[str, dict[str, Any] | None]:
    """The copies to run: the defaults' (and the ablations'), ``--only`` among them, ``plain`` and
    ``plain+item`` always (every ratio is to them)."""
    table: dict[str, dict[str, Any] | None] = {**COPIES, **(ABLATIONS if args.ablate else {})}
    if not args.only:
        return table
    wanted = {name.strip() for name in args.only.split(",") if name.strip()}
    unknown = sorted(wanted - table.keys())
    if unknown:
        raise SystemExit(f"--only: unknown copies {', '.join(unknown)}; choose from {', '.join(table)}"
                         + ("" if args.ablate else " (the ablations need --ablate)"))
    return {k: v for k, v in table.items() if k in wanted or k in ("plain", "plain+item")}


def step_cost(name: str, cfg: GPTConfig, batch: int, args: argparse.Namespace, tmp: str) -> None:
    device = torch.device(args.device)
    data = random_tokens(cfg, batch=batch, count=8).to(device)
    copies = []
    table = copy_table(args)
    for copy_name, options in table.items():
        torch.manual_seed(0)
        model = GPT.from_config(cfg).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1, fused=args.fused)
        copy = Copy(copy_name, model, opt)
        if options is not None:
            copy.sen = Sentinel(model, opt, log_dir=f"{tmp}/{name}-{copy_name}", loss_fn=_bf16_loss, **options)
            copy.batches = iter(copy.sen.batches(_forever(data)))
        copies.append(copy)
    tokens = {c.name: _forever(data) for c in copies}
    for block in range(args.warmup_blocks + args.blocks):
        turn = block % len(copies)
        for copy in copies[turn:] + copies[:turn]:
            _sync(device)
            t0 = time.perf_counter()
            for _ in range(args.block):
                take_step(copy, tokens[copy.name])
            _sync(device)
            if block >= args.warmup_blocks:
                copy.per_step.append((time.perf_counter() - t0) / args.block)
            else:
                copy.calls.clear()
                copy.parts.clear()
    if args.profile:
        profiler = cProfile.Profile()
        copy = next(c for c in copies if c.name == "sentinel")
        profiler.enable()
        for _ in range(args.block):
            take_step(copy, tokens[copy.name])
        profiler.disable()
    for copy in copies:
        if copy.sen is not None:
            if copy.sen.rollbacks:
                raise SystemExit(f"{name}: the guard rolled back {copy.sen.rollbacks} times on random tokens")
            copy.sen.close()

    n_params = sum(p.numel() for p in copies[0].model.parameters())
    print(f"\n{name}: {cfg.layers} layers, d {cfg.d}, seq {cfg.seq}, vocab {cfg.vocab}, batch {batch} "
          f"({n_params / 1e6:.1f}M parameters, {sum(1 for _ in copies[0].model.parameters())} tensors), "
          f"bf16 autocast, AdamW{' (fused)' if args.fused else ''}; {args.blocks} blocks of {args.block} steps per copy, taking turns")
    plain = statistics.median(copies[0].per_step)
    item = statistics.median(copies[1].per_step)
    print(f"{'copy':12s} {'step ms':>9s} {'vs plain':>9s} {'vs +item':>9s} {'calls med ms':>13s} {'calls mean ms':>14s}")
    for copy in copies:
        med = statistics.median(copy.per_step)
        calls = (f"{statistics.median(copy.calls) * 1e3:13.3f} {statistics.fmean(copy.calls) * 1e3:14.3f}"
                 if copy.calls else "")
        print(f"{copy.name:12s} {med * 1e3:9.3f} {med / plain:9.3f} {med / item:9.3f} {calls}")
    for copy in copies:
        if copy.parts:
            print(f"  {copy.name} per call, median ms: " + ", ".join(
                f"{part} {statistics.median(ts) * 1e3:.3f}" for part, ts in copy.parts.items()))
    if args.profile:
        print(f"\n{name}: {args.block} steps of the sentinel copy under cProfile, by own time")
        stats = pstats.Stats(profiler)
        stats.sort_stats("cumulative").print_stats(r"(sentinel|sentinel_ref)/", 40)
        stats.sort_stats("tottime").print_stats(40)


def grad_norm_cost(cfg: GPTConfig, args: argparse.Namespace) -> None:
    from lightning.pytorch.utilities import grad_norm

    device = torch.device(args.device)
    torch.manual_seed(0)
    model = GPT.from_config(cfg).to(device)
    _bf16_loss(model, random_tokens(cfg, batch=2, count=1)[0].to(device)).backward()
    probe = GradNormProbe(model, depth=None)

    def lightning() -> dict[str, torch.Tensor]:
        return grad_norm(model, norm_type=2)

    def lightning_logged() -> list[float]:
        return [v.item() for v in grad_norm(model, norm_type=2).values()]

    def probe_one_read() -> list[float]:
        return torch.stack(list(probe.compute().values())).tolist()

    ours = probe.compute()["grad_norm/total"].item()
    theirs = grad_norm(model, norm_type=2)["grad_2.0_norm_total"].item()
    if abs(ours - theirs) > 1e-4 * abs(theirs):
        raise SystemExit(f"total grad norms disagree: probe {ours} vs lightning {theirs}")
    fns: dict[str, Callable[[], list[float]]] = {
        "lightning grad_norm": lightning, "lightning grad_norm + log": lightning_logged,
        "sentinel probe, 1 read": probe_one_read}
    times: dict[str, list[float]] = {k: [] for k in fns}
    for i in range(5 + args.gradnorm_calls):
        for name, fn in fns.items():
            _sync(device)
            t0 = time.perf_counter()
            fn()
            if i >= 5:
                times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["lightning grad_norm + log"])
    print(f"\ngrad norms, {cfg.layers}-layer GPT d {cfg.d} ({sum(1 for _ in model.parameters())} tensors), "
          f"{args.gradnorm_calls} alternating calls each, median; total norm {ours:.6f} (Lightning {theirs:.6f})")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:28s} {med * 1e6:9.1f} us   {base / med:6.1f}x faster than grad_norm + log")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--workloads", default="gpt-s,gpt-m", help="comma-separated: " + ", ".join(WORKLOADS))
    parser.add_argument("--blocks", type=int, default=10, help="timed blocks per copy")
    parser.add_argument("--block", type=int, default=25, help="steps per block")
    parser.add_argument("--warmup-blocks", type=int, default=2)
    parser.add_argument("--gradnorm-calls", type=int, default=50)
    parser.add_argument("--profile", action="store_true", help="profile the sentinel copy's host time")
    parser.add_argument("--ablate", action="store_true", help="copies with one part of the defaults off")
    parser.add_argument("--only", default="", help="comma-separated copies to run besides plain and plain+item")
    parser.add_argument("--fused", action="store_true", help="fused AdamW in every copy")
    parser.add_argument("--tiny", action="store_true", help="tiny models: a check of the script, not a measurement")
    args = parser.parse_args()
    if args.profile and "sentinel" not in copy_table(args):
        raise SystemExit("--profile profiles the sentinel copy: add sentinel to --only")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device here; pass --device cpu --tiny to check the script")
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device {name}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        for workload in args.workloads.split(","):
            if workload not in WORKLOADS:
                raise SystemExit(f"--workloads: unknown {workload!r}; choose from {', '.join(WORKLOADS)}")
            cfg, batch = TINY if args.tiny else WORKLOADS[workload]
            step_cost(workload, cfg, batch, args, tmp)
    grad_norm_cost(TINY[0] if args.tiny else WORKLOADS["gpt-m"][0], args)


if __name__ == "__main__":
    main()
