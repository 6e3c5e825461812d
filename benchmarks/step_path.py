"""Host cost of sentinel's step path in a hand-written loop (``check`` / ``end_step``), per step.

Workloads (CPU, one thread):

  mlp    2-layer MLP (32 -> 64 -> 1), 4 parameter tensors, SGD, batch 32: sentinel's fixed cost
  wide   1,000 ``Linear(16, 16)`` in a ``Sequential``, 2,000 tensors, AdamW, batch 8: the cost
         per parameter tensor, against one ``torch._foreach_norm`` over the same grads (a third
         copy, ``+foreach``, trains plainly and takes that norm after each backward)
  gpt    ``benchmarks/gpt.py`` defaults (4 layers, d 256, seq 128, vocab 4096), AdamW, batch 8

Each workload trains two identically seeded copies of the model in one loop, one plain and one
under ``Sentinel(model, opt, log_dir=..., loss_fn=...)`` at its defaults (guard on, snapshot
every 25 steps, TensorBoard, RNG capture for the NaN replay, attention sampled every 50 steps,
per-module norms every 10), and alternates them step by step (the order flips every step, so
the machine's load drifts over both alike). Per step it records the process CPU time (every
thread: the TensorBoard writer is included) of the whole step, and the wall time spent inside
sentinel's own calls (``batches``' next, ``check``, ``end_step``). Reported: medians, the mean
(which sees the periodic snapshot and attention sample that the median hides), and the added
time as a ratio to the plain step.

``--ablate`` adds copies with one part of the defaults switched off each (``-rng``: no RNG capture
for the NaN replay; ``-tb``: no TensorBoard; ``-guard``: no snapshots or rollback, the detectors
still run; ``-all``: the three at once): where the fixed cost goes.

``--ref REV`` also runs the sentinel of git revision ``REV`` (copied from the repository into a
temporary package ``sentinel_ref``) as a third copy in the same loop, so before and after are
measured side by side.

Run:
    .venv/bin/python benchmarks/step_path.py                         # ~3 min on 2 busy cores
    .venv/bin/python benchmarks/step_path.py --ref HEAD~3 --workloads mlp,wide
    .venv/bin/python benchmarks/step_path.py --workloads mlp --ablate
"""

from __future__ import annotations

import argparse
import functools
import importlib
import logging
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from gpt import GPT, GPTConfig, lm_loss, random_tokens  # benchmarks/gpt.py

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Workload:
    name: str
    make: Callable[[], tuple[nn.Module, torch.optim.Optimizer]]
    batch: Any
    loss_fn: Callable[[nn.Module, Any], torch.Tensor]
    steps: int


def _mse(model: nn.Module, batch: Any) -> torch.Tensor:
    return F.mse_loss(model(batch[0]), batch[1])


def _gpt_loss(model: nn.Module, batch: Any) -> torch.Tensor:
    return lm_loss(model, batch)


def workloads(args: argparse.Namespace) -> dict[str, Workload]:
    gen = torch.Generator().manual_seed(0)

    def mlp() -> tuple[nn.Module, torch.optim.Optimizer]:
        model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
        return model, torch.optim.SGD(model.parameters(), lr=0.01)

    def wide() -> tuple[nn.Module, torch.optim.Optimizer]:
        model = nn.Sequential(*[nn.Linear(16, 16) for _ in range(1000)])
        return model, torch.optim.AdamW(model.parameters(), lr=1e-4)

    def gpt() -> tuple[nn.Module, torch.optim.Optimizer]:
        model = GPT.from_config(GPTConfig())
        return model, torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)

    return {
        "mlp": Workload("mlp", mlp, (torch.randn(32, 32, generator=gen), torch.randn(32, 1, generator=gen)),
                        _mse, args.steps),
        "wide": Workload("wide", wide, (torch.randn(8, 16, generator=gen), torch.randn(8, 16, generator=gen)),
                         _mse, max(50, args.steps // 10)),
        "gpt": Workload("gpt", gpt, random_tokens(GPTConfig(), batch=8, count=1)[0], _gpt_loss, args.gpt_steps),
    }


def load_ref(rev: str, into: Path) -> Any:
    """The ``sentinel`` package of git revision ``rev``, importable as ``sentinel_ref``."""
    blob = subprocess.run(["git", "-C", str(REPO), "archive", rev, "sentinel"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    root = into / "sentinel_ref"
    (into / "sentinel").rename(root)
    bare = re.compile(r"^(\s*)import sentinel$", re.M)  # keeps the name `sentinel` in that module
    pattern = re.compile(r"((?:from|import) )sentinel(?=[. \n])|([\"'])sentinel(?=\.)")
    for path in root.rglob("*.py"):
        text = bare.sub(r"\1import sentinel_ref as sentinel", path.read_text())
        path.write_text(pattern.sub(lambda m: (m.group(1) or m.group(2)) + "sentinel_ref", text))
    sys.path.insert(0, str(into))
    return importlib.import_module("sentinel_ref.engine").Sentinel


@dataclass
class Arm:
    """One copy of the workload: a model, its optimizer and, unless plain, a Sentinel."""

    name: str
    model: nn.Module
    opt: torch.optim.Optimizer
    sen: Any = None
    batches: Any = None
    after_backward: Callable[[nn.Module], Any] | None = None  # the reference's own work
    cpu: list[float] = field(default_factory=list)
    calls: list[float] = field(default_factory=list)  # wall time inside sentinel's calls

    def step(self, w: Workload, record: bool) -> None:
        c0 = time.process_time()
        inside = 0.0
        if self.sen is not None:
            t0 = time.perf_counter()
            batch = next(self.batches)
            inside += time.perf_counter() - t0
        else:
            batch = w.batch
        self.opt.zero_grad(set_to_none=True)
        loss = w.loss_fn(self.model, batch)
        loss.backward()
        if self.after_backward is not None:
            self.after_backward(self.model)
        if self.sen is not None:
            t0 = time.perf_counter()
            apply = self.sen.check(loss)
            inside += time.perf_counter() - t0
        else:
            apply = True
        if apply:
            self.opt.step()
        if self.sen is not None:
            t0 = time.perf_counter()
            self.sen.end_step()
            inside += time.perf_counter() - t0
        if record:
            self.cpu.append(time.process_time() - c0)
            self.calls.append(inside)


def _forever(batch: Any):
    while True:
        yield batch


def foreach_norm_reference(model: nn.Module, repeats: int = 50) -> tuple[float, float]:
    """Median seconds of one ``torch._foreach_norm`` over the grads, and over one flat buffer."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    per, one = [], []
    for _ in range(repeats):
        t0 = time.process_time()
        torch.stack(torch._foreach_norm(grads, 2)).square().sum().sqrt()
        per.append(time.process_time() - t0)
        t0 = time.process_time()
        torch._foreach_norm([flat], 2)
        one.append(time.process_time() - t0)
    return statistics.median(per), statistics.median(one)


def _one_foreach_norm(model: nn.Module) -> None:
    """The reference per-tensor work: one fused norm over the grads and their total, as
    ``torch.nn.utils.get_total_norm`` computes it."""
    torch.linalg.vector_norm(torch.stack(torch._foreach_norm([p.grad for p in model.parameters()], 2)))


def run(w: Workload, tmp: str, sentinels: dict[str, Any], warmup: int) -> list[Arm]:
    arms = []
    copies: list[tuple[str, Any]] = [("plain", None)]
    if w.name == "wide":
        copies.append(("+foreach", _one_foreach_norm))
    for name, cls in copies + list(sentinels.items()):
        torch.manual_seed(0)
        model, opt = w.make()
        arm = Arm(name, model, opt)
        if name == "+foreach":
            arm.after_backward, cls = cls, None
        if cls is not None:
            arm.sen = cls(model, opt, log_dir=os.path.join(tmp, f"{w.name}-{name}"), loss_fn=w.loss_fn)
            arm.batches = arm.sen.batches(_forever(w.batch))
        arms.append(arm)
    for i in range(warmup + w.steps):
        for arm in (arms if i % 2 == 0 else arms[::-1]):
            arm.step(w, record=i >= warmup)
    for arm in arms:
        if arm.sen is not None:
            arm.sen.close()
    return arms


def report(w: Workload, arms: list[Arm]) -> None:
    plain = arms[0]
    base = statistics.median(plain.cpu)
    base_mean = statistics.fmean(plain.cpu)
    print(f"\n{w.name}: {sum(1 for _ in plain.model.parameters())} parameter tensors, {w.steps} steps "
          "per copy, alternating; process CPU time per step")
    print(f"{'copy':10s} {'median ms':>10s} {'added ms':>9s} {'ratio':>7s} {'mean ms':>9s} {'added':>8s} "
          f"{'ratio':>7s} {'calls med':>10s} {'calls mean':>10s}")
    for arm in arms:
        med, mean = statistics.median(arm.cpu), statistics.fmean(arm.cpu)
        calls = (f"{statistics.median(arm.calls) * 1e3:10.3f} {statistics.fmean(arm.calls) * 1e3:10.3f}"
                 if arm.sen is not None else "")
        print(f"{arm.name:10s} {med * 1e3:10.3f} {(med - base) * 1e3:+9.3f} {med / base:7.3f} "
              f"{mean * 1e3:9.3f} {(mean - base_mean) * 1e3:+8.3f} {mean / base_mean:7.3f} {calls}")
    if w.name == "wide":
        ref = statistics.median(arms[1].cpu) - base  # +foreach: the step plus one fused norm
        per, flat = foreach_norm_reference(plain.model)
        print(f"reference: one torch._foreach_norm (+ total) over the {sum(1 for _ in plain.model.parameters())} "
              f"grads adds {ref * 1e3:.3f} ms to the step (alone after the run: {per * 1e3:.3f} ms; over one "
              f"flat buffer of the same numbers {flat * 1e3:.3f} ms)")
        for arm in arms[2:]:
            added = statistics.median(arm.cpu) - base
            print(f"  {arm.name}: adds {added * 1e3:.3f} ms (median) = {added / ref:.2f}x the _foreach_norm; "
                  f"mean {(statistics.fmean(arm.cpu) - base_mean) * 1e3:.3f} ms = "
                  f"{(statistics.fmean(arm.cpu) - base_mean) / ref:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="mlp,wide,gpt", help="comma-separated: mlp, wide, gpt")
    parser.add_argument("--steps", type=int, default=2000, help="timed steps per copy (mlp; wide gets a tenth)")
    parser.add_argument("--gpt-steps", type=int, default=30, help="timed steps per copy of the gpt workload")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--ref", default=None, help="also time the sentinel of this git revision")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ablate", action="store_true", help="add copies with parts of the defaults off")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.disable(logging.WARNING)
    from sentinel import Sentinel

    print(f"torch={torch.__version__} threads={torch.get_num_threads()} cpus={os.cpu_count()} "
          f"load(1m)={os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        sentinels: dict[str, Any] = {}
        if args.ref:
            sentinels[f"ref {args.ref}"[:10]] = load_ref(args.ref, Path(tmp) / "ref")
        sentinels["sentinel"] = Sentinel
        if args.ablate:
            off = {"-rng": {"localize_nonfinite": False}, "-tb": {"tensorboard": False},
                   "-guard": {"rollback": False}}
            off["-all"] = {k: v for options in off.values() for k, v in options.items()}
            for name, options in off.items():
                sentinels[name] = functools.partial(Sentinel, **options)
        table = workloads(args)
        for name in args.workloads.split(","):
            w = table[name.strip()]
            report(w, run(w, tmp, sentinels, args.warmup))
            sys.stdout.flush()
    print(f"load(1m) at end={os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
