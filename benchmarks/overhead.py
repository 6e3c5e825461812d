"""Step-time overhead of ``SentinelCallback`` on a small GPT trained with Lightning (CPU).

Workload: ``benchmarks/gpt.py`` at its defaults (4 layers, d_model 256, 4 heads, seq 128,
vocab 4096, batch 8, SDPA attention), AdamW, plain Lightning automatic optimization.

Each configuration is one fresh ``Trainer.fit`` of ``--warmup + --steps`` steps on a fresh,
identically seeded model; configurations alternate inside every round (the order is reversed
on odd rounds, so slow drift of the machine's load hits all of them alike), for ``--repeats``
rounds. A step is timed from the first callback's ``on_train_batch_start`` to the last
callback's ``on_train_batch_end`` (forward, backward, optimizer step and every sentinel hook);
the first ``--warmup`` steps of each fit are dropped. Reported per configuration: the median
step and its ratio to the median baseline step of the same run, the spread of that ratio over
rounds, and the mean ratio (the mean sees periodic work such as a snapshot every 25 steps or
an attention sample every 50, which the median hides).

Configurations (flat ``SentinelCallback`` options):

  baseline          plain Lightning, no callback
  defaults          ``SentinelCallback(log_dir)``: everything on, as a user gets it
  grad_norms        minimal: grad norms + loss + steps file only (rollback=False,
                    tensorboard=False, localize_nonfinite=False, attention never sampled)
  +rng              minimal + localize_nonfinite (captures RNG state every step for a replay)
  +tensorboard      minimal + TensorBoard writing (background thread)
  +snapshots        minimal + rollback (guard on, snapshot every 25 steps, the default)
  +snapshot_1       minimal + rollback with a snapshot every step (the cost of one take)
  +attention_1      minimal + attention sampled every step (the cost of one sample)
  detect_anomaly    plain Lightning with ``Trainer(detect_anomaly=True)``, the reference

Then the grad-norm probe alone against ``lightning.pytorch.utilities.grad_norm(model, 2)`` on
the same gradients of a 12-layer GPT (148 parameter tensors), alternating calls, median.

Run:
    .venv/bin/python benchmarks/overhead.py                       # ~7 min on 2 busy cores
    .venv/bin/python benchmarks/overhead.py --steps 20 --repeats 2 --configs baseline,defaults
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities import grad_norm
from torch.utils.data import DataLoader, TensorDataset

from gpt import GPT, GPTConfig, lm_loss, random_tokens  # benchmarks/gpt.py
from sentinel.callbacks import SentinelCallback
from sentinel.probes.attention import AttentionProbe
from sentinel.probes.grad_norm import GradNormProbe

log = logging.getLogger(__name__)

_MINIMAL: dict[str, Any] = {"rollback": False, "tensorboard": False, "localize_nonfinite": False,
                            "attention_every": 10**9}
# name -> SentinelCallback options (None: no callback), Trainer keyword arguments.
CONFIGS: dict[str, tuple[dict[str, Any] | None, dict[str, Any]]] = {
    "baseline": (None, {}),
    "defaults": ({}, {}),
    "grad_norms": (_MINIMAL, {}),
    "+rng": ({**_MINIMAL, "localize_nonfinite": True}, {}),
    "+tensorboard": ({**_MINIMAL, "tensorboard": True}, {}),
    "+snapshots": ({**_MINIMAL, "rollback": True}, {}),
    "+snapshot_1": ({**_MINIMAL, "rollback": True, "snapshot_every": 1}, {}),
    "+attention_1": ({**_MINIMAL, "attention_every": 1}, {}),
    "detect_anomaly": (None, {"detect_anomaly": True}),
}


class LitGPT(pl.LightningModule):
    """The benchmark GPT as a LightningModule: next-token loss, AdamW."""

    def __init__(self, cfg: GPTConfig, lr: float = 3e-4) -> None:
        super().__init__()
        self.model = GPT.from_config(cfg)
        self.lr = lr

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return lm_loss(self.model, batch[0])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=0.1)


class StepTimer:
    """Per-step wall time and process CPU time, from a callback placed first to one placed last.

    Lightning runs callbacks in list order, so ``[timer.start, *others, timer.end]`` times every
    other callback's ``on_train_batch_start`` and ``on_train_batch_end`` along with the step.
    Wall time (``perf_counter``) is what a user waits for; process CPU time (``process_time``,
    every thread of this process, the TensorBoard writer included) is the work done, and on a
    machine shared with other jobs it moves far less with their load.

    Example:
        >>> timer = StepTimer()
        >>> callbacks = [timer.start, SentinelCallback("logs/x"), timer.end]  # doctest: +SKIP
    """

    def __init__(self) -> None:
        self.times: list[float] = []
        self.cpu_times: list[float] = []
        self._t0 = self._c0 = 0.0
        timer = self

        class _Start(pl.Callback):
            def on_train_batch_start(self, *args: Any) -> None:
                timer._t0, timer._c0 = time.perf_counter(), time.process_time()

        class _End(pl.Callback):
            def on_train_batch_end(self, *args: Any) -> None:
                timer.cpu_times.append(time.process_time() - timer._c0)
                timer.times.append(time.perf_counter() - timer._t0)

        self.start, self.end = _Start(), _End()


class TimedSentinelCallback(SentinelCallback):
    """``SentinelCallback`` that also sums the wall time spent inside its own hooks per step.

    The hook time is the work sentinel adds on the training thread, measured directly, so it is
    far less noisy than the difference of two step times on a shared machine. It does not see
    indirect costs (module hooks firing during forward on sampled steps are inside the step but
    outside these hooks, and the TensorBoard thread competing for the GIL).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hook_times: list[float] = []
        self._acc = 0.0

    def _timed(self, hook: Any, *args: Any) -> None:
        t0 = time.perf_counter()
        hook(*args)
        self._acc += time.perf_counter() - t0

    def on_train_batch_start(self, *args: Any) -> None:
        self._timed(super().on_train_batch_start, *args)

    def on_before_backward(self, *args: Any) -> None:
        self._timed(super().on_before_backward, *args)

    def on_before_optimizer_step(self, *args: Any) -> None:
        self._timed(super().on_before_optimizer_step, *args)

    def on_train_batch_end(self, *args: Any) -> None:
        self._timed(super().on_train_batch_end, *args)
        self.hook_times.append(self._acc)
        self._acc = 0.0


def loader(cfg: GPTConfig, batch: int, steps: int, seed: int = 0) -> DataLoader:
    tokens = random_tokens(cfg, batch=batch, count=steps, seed=seed).reshape(-1, cfg.seq + 1)
    return DataLoader(TensorDataset(tokens), batch_size=batch, shuffle=False, num_workers=0)


@dataclass
class FitTimes:
    """Per-step seconds of one fit, warm-up dropped."""

    wall: list[float]
    cpu: list[float]
    hooks: list[float]  # wall time inside sentinel's hooks (empty without sentinel)
    events: int  # spike/rollback/skip/nonfinite/divergence events in the run dir


def fit_once(name: str, cfg: GPTConfig, batch: int, warmup: int, steps: int, log_dir: str) -> FitTimes:
    """One fresh fit of ``warmup + steps`` steps under configuration ``name``."""
    options, extra = CONFIGS[name]
    timer = StepTimer()
    middle = [] if options is None else [TimedSentinelCallback(log_dir=log_dir, **options)]
    torch.manual_seed(0)
    module = LitGPT(cfg)
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, max_steps=warmup + steps, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0, limit_val_batches=0, callbacks=[timer.start, *middle, timer.end],
        **extra)
    trainer.fit(module, loader(cfg, batch, warmup + steps))
    hooks = middle[0].hook_times[warmup:] if middle else []
    return FitTimes(timer.times[warmup:], timer.cpu_times[warmup:], hooks, _guard_events(log_dir))


def _guard_events(log_dir: str) -> int:
    """Spike/rollback/skip events in the run dir: a benchmark run should have none."""
    path = Path(log_dir) / "events.jsonl"
    if not path.exists():
        return 0
    kinds = [json.loads(line).get("kind") for line in path.read_text().splitlines() if line.strip()]
    return sum(k in ("rollback", "skip", "spike", "nonfinite", "divergence") for k in kinds)


def step_overhead(args: argparse.Namespace) -> None:
    cfg = GPTConfig()
    names = [n.strip() for n in args.configs.split(",")]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown configuration {unknown[0]!r}: choose from {', '.join(CONFIGS)}")
    if "baseline" not in names:
        names.insert(0, "baseline")
    fits: dict[str, list[FitTimes]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for name in (names if r % 2 == 0 else names[::-1]):
                ft = fit_once(name, cfg, args.batch, args.warmup, args.steps, os.path.join(tmp, f"{name}-{r}"))
                fits[name].append(ft)
                print(f"  round {r} {name:15s} median wall {statistics.median(ft.wall) * 1e3:7.1f} ms, "
                      f"cpu {statistics.median(ft.cpu) * 1e3:7.1f} ms", flush=True)

    def pooled(name: str, clock: str) -> list[float]:
        return [t for ft in fits[name] for t in getattr(ft, clock)]

    med = {(n, c): statistics.median(pooled(n, c)) for n in names for c in ("wall", "cpu")}
    print(f"\nstep time, {args.steps} steps x {args.repeats} rounds per configuration "
          f"(after {args.warmup} warm-up steps per fit); ratios to the baseline of this run")
    print(f"{'configuration':16s} {'wall ms':>8s} {'wall':>6s} {'rounds':>13s} {'cpu ms':>8s} {'cpu':>6s} "
          f"{'rounds':>13s} {'cpu mean':>8s} {'hooks ms':>8s} {'hooks':>7s} {'events':>6s}")
    for name in names:
        cols = []
        for clock in ("wall", "cpu"):
            ratio = med[name, clock] / med["baseline", clock]
            rounds = [statistics.median(getattr(a, clock)) / statistics.median(getattr(b, clock))
                      for a, b in zip(fits[name], fits["baseline"])]
            cols.append(f"{med[name, clock] * 1e3:8.1f} {ratio:6.3f} {min(rounds):6.3f}-{max(rounds):<6.3f}")
        mean_cpu = statistics.fmean(pooled(name, "cpu")) / statistics.fmean(pooled("baseline", "cpu"))
        hooks = pooled(name, "hooks")
        hook_mean = statistics.fmean(hooks) if hooks else 0.0
        events = sum(ft.events for ft in fits[name])
        print(f"{name:16s} {cols[0]} {cols[1]} {mean_cpu:8.3f} {hook_mean * 1e3:8.2f} "
              f"{hook_mean / med['baseline', 'wall']:7.2%} {events:6d}")
    print("wall/cpu: median step and its ratio to baseline (rounds: min-max of per-round ratios); "
          "cpu mean: ratio of mean CPU steps (sees periodic work); hooks: mean wall time inside "
          "sentinel's hooks per step, and as a share of the baseline step")
    if {"grad_norms", "+snapshot_1"} <= set(names):
        # Inside the hooks a snapshot take is measured directly; amortise it over the default 25.
        take = statistics.fmean(pooled("+snapshot_1", "hooks")) - statistics.fmean(pooled("grad_norms", "hooks"))
        print(f"one snapshot take (hooks, +snapshot_1 - grad_norms) {take * 1e3:6.1f} ms = "
              f"{take / med['baseline', 'wall']:.2%} of a step; every 25 steps: "
              f"{take / 25 / med['baseline', 'wall']:.3%}")


def attention_sample_cost(args: argparse.Namespace) -> None:
    """Forward with the attention probe armed vs not, alternating, on the benchmark GPT.

    The probe does its work inside the forward (the SDPA interception and the recomputed
    probabilities), outside sentinel's callback hooks, so it is timed here directly.
    """
    cfg = GPTConfig()
    torch.manual_seed(0)
    model = GPT.from_config(cfg)
    tokens = random_tokens(cfg, batch=args.batch, count=1)[0]
    probe = AttentionProbe(model, every=1)

    def plain() -> None:
        lm_loss(model, tokens).backward()

    def sampled() -> None:
        probe.start(0)
        loss = lm_loss(model, tokens)
        torch.stack(list(probe.stop().values())).tolist()  # the engine reads them with the step
        loss.backward()

    calls: dict[str, list[float]] = {"plain": [], "sampled": []}
    for _ in range(2):
        plain(), sampled()
    for _ in range(args.attention_calls):
        for name, fn in (("plain", plain), ("sampled", sampled)):
            model.zero_grad(set_to_none=True)
            t0 = time.process_time()
            fn()
            calls[name].append(time.process_time() - t0)
    base, ours = statistics.median(calls["plain"]), statistics.median(calls["sampled"])
    print(f"\nattention sample: forward+backward {base * 1e3:.1f} ms cpu, sampled {ours * 1e3:.1f} ms "
          f"(+{(ours - base) * 1e3:.1f} ms = {(ours - base) / base:.1%} of a forward+backward); "
          f"every 50 steps: {(ours - base) / 50 / base:.3%} ({args.attention_calls} alternating calls, median)")


def grad_norm_speed(args: argparse.Namespace, width: int) -> None:
    cfg = GPTConfig(layers=args.gradnorm_layers, d=width)
    torch.manual_seed(0)
    model = GPT.from_config(cfg)
    lm_loss(model, random_tokens(cfg, batch=2, count=1)[0]).backward()
    n_tensors = sum(1 for _ in model.parameters())
    probe = GradNormProbe(model, depth=None)

    def probe_to_host() -> list[float]:
        norms = probe.compute()
        return torch.stack(list(norms.values())).tolist()  # one transfer, as the engine does

    def lightning() -> dict[str, Any]:
        return grad_norm(model, norm_type=2)

    ours = probe.compute()["grad_norm/total"]
    theirs = lightning()["grad_2.0_norm_total"]
    if not torch.allclose(ours, theirs.to(ours.dtype), rtol=1e-5):
        raise SystemExit(f"total grad norms disagree: probe {float(ours)} vs lightning {float(theirs)}")

    fns = {"lightning grad_norm": lightning, "probe.compute": probe.compute,
           "probe + host transfer": probe_to_host}
    calls: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(5):  # warm-up
        for fn in fns.values():
            fn()
    for _ in range(args.gradnorm_calls):
        for name, fn in fns.items():  # alternate A B C A B C ...
            t0 = time.perf_counter()
            fn()
            calls[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in calls.items()}
    base = med["lightning grad_norm"]
    n_params = sum(p.numel() for p in model.parameters())
    print(f"\ngrad norms of a {cfg.layers}-layer GPT, d={width} ({n_tensors} parameter tensors, "
          f"{n_params / 1e6:.2f}M parameters, "
          f"{len(probe.group_names)} groups), {args.gradnorm_calls} alternating calls each, median")
    for name, m in med.items():
        print(f"{name:24s} {m * 1e6:9.1f} us   {base / m:6.1f}x faster than lightning grad_norm")
    print(f"total norm: probe {float(ours):.6f}, lightning {float(theirs):.6f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=24, help="timed steps per fit")
    parser.add_argument("--warmup", type=int, default=3, help="steps dropped at the start of each fit")
    parser.add_argument("--repeats", type=int, default=2, help="rounds over all configurations")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (1 on a shared 2-core box)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated subset")
    parser.add_argument("--gradnorm-layers", type=int, default=12)
    parser.add_argument("--gradnorm-calls", type=int, default=300)
    parser.add_argument("--gradnorm-widths", default="256,64",
                        help="model widths for the grad-norm comparison (64: per-tensor overhead dominates)")
    parser.add_argument("--attention-calls", type=int, default=20)
    parser.add_argument("--skip-steps", action="store_true", help="grad-norm comparison only")
    parser.add_argument("--skip-gradnorm", action="store_true", help="step overhead only")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", module="lightning")  # num_workers=0 and similar hints
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    print(f"torch={torch.__version__} lightning={pl.__version__} threads={torch.get_num_threads()} "
          f"cpus={os.cpu_count()} load(1m)={os.getloadavg()[0]:.1f}", flush=True)
    if not args.skip_gradnorm:
        for width in args.gradnorm_widths.split(","):
            grad_norm_speed(args, int(width))
    if not args.skip_steps:
        attention_sample_cost(args)
        step_overhead(args)
    print(f"load(1m) at end={os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
