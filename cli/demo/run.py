"""The demo end to end: the same faulty training twice, without and with the guard, then the report.

Run 1 records only (``rollback=False``): the bad-data stretch and the learning-rate surge ruin it.
Run 2 uses ``SentinelCallback`` with the scenario's guard options: it detects both, rolls back,
skips the bad batches and ends healthy. Then both run directories are analysed and plotted.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path

import lightning as L
import torch

from sentinel.callbacks import SentinelCallback
from sentinel.cli.demo.data import BadBatches
from sentinel.cli.demo.module import LRSurge
from sentinel.cli.demo.scenario import DemoScenario

UNGUARDED = "1-unguarded"
GUARDED = "2-guarded"


@dataclass(frozen=True)
class DemoResult:
    """Where the demo wrote its runs, and how each ended."""

    out: Path
    final_loss: dict[str, float]
    rollbacks: int
    seconds: float


def scenario_for(steps: int) -> DemoScenario:
    """The calibrated scenario, with the faults moved in proportion when ``steps`` is not 400.

    Example:
        >>> scenario_for(200).bad.positions[0], scenario_for(200).surge.start
        (80, 120)
    """
    base = DemoScenario()
    if steps == base.steps:
        return base
    if steps < 100:
        raise ValueError(f"--steps {steps} is too short for the demo's faults: pass 100 or more")
    scale = steps / base.steps
    first = round(base.bad.positions[0] * scale)
    bad = BadBatches.stretch(start=first, length=len(base.bad.positions), mode=base.bad.mode)
    surge = LRSurge(start=round(base.surge.start * scale), end=round(base.surge.end * scale),
                    factor=base.surge.factor)
    return replace(base, steps=steps, bad=bad, surge=surge)


def run_demo(out: str | Path = "logs/demo", steps: int = 400, progress: bool = True) -> DemoResult:
    """Train the demo twice and write ``out/1-unguarded``, ``out/2-guarded``.

    Example:
        >>> result = run_demo("logs/demo", steps=400)  # doctest: +SKIP
    """
    out = Path(out)
    scenario = scenario_for(steps)
    torch.set_num_threads(1)  # a tiny model: one thread is fastest, and leaves a core free
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    data = scenario.data()
    final: dict[str, float] = {}
    rollbacks = 0
    start = time.perf_counter()
    for name, options in ((UNGUARDED, {"rollback": False}), (GUARDED, scenario.guard_options())):
        lm, loader = scenario.build(faults=True, data=data)
        callback = SentinelCallback(log_dir=str(out / name), **options)
        trainer = L.Trainer(accelerator="cpu", max_steps=scenario.steps, logger=False,
                            enable_checkpointing=False, enable_model_summary=False,
                            enable_progress_bar=progress, callbacks=[callback])
        trainer.fit(lm, loader)
        final[name] = float(callback.sentinel.last_record.get("loss", float("nan")))
        if name == GUARDED:
            rollbacks = callback.sentinel.rollbacks
    return DemoResult(out, final, rollbacks, time.perf_counter() - start)
