"""The demo end to end: the same faulty training twice, without and with the guard, then the report.

Run 1 records only (``rollback=False``): the bad-data stretch and the learning-rate surge ruin it.
Run 2 uses ``SentinelCallback`` with the scenario's guard options: it detects both, rolls back,
skips the bad batches and ends healthy. Then both run directories are analysed and plotted.
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import lightning as L
import torch
from lightning.pytorch.callbacks import RichProgressBar

from sentinel.callbacks import SentinelCallback
from sentinel.cli.demo.data import BadBatches
from sentinel.cli.demo.module import LRSurge
from sentinel.cli.demo.scenario import DemoScenario

UNGUARDED = "1-unguarded"
GUARDED = "2-guarded"


@dataclass(frozen=True)
class DemoRun:
    """One of the demo's two runs, as announced before it trains.

    Attributes:
        name: its directory under ``out`` (``1-unguarded``, ``2-guarded``).
        title: ``run 1 of 2: without sentinel``.
        look_for: what to watch in its progress output, with the steps of this scenario.
    """

    name: str
    title: str
    look_for: str


def fault_steps(scenario: DemoScenario) -> tuple[str, str]:
    """The steps of the bad batches and of the learning-rate surge, as ``first-last``.

    Example:
        >>> fault_steps(DemoScenario())
        ('160-164', '240-259')
    """
    bad = scenario.bad.positions
    return f"{bad[0]}-{bad[-1]}", f"{scenario.surge.start}-{scenario.surge.end - 1}"


def demo_runs(scenario: DemoScenario) -> tuple[DemoRun, DemoRun]:
    """The two runs of ``scenario`` and what to look for in each, with its fault steps.

    Example:
        >>> [run.title for run in demo_runs(DemoScenario())]
        ['run 1 of 2: without sentinel', 'run 2 of 2: with sentinel']
    """
    bad, surge = fault_steps(scenario)
    return (
        DemoRun(UNGUARDED, "run 1 of 2: without sentinel",
                f"bad batches at steps {bad} and a {scenario.surge.factor:g}x learning-rate surge at steps "
                f"{surge} go in unchecked; sentinel only records (the lines it prints are attention "
                "entropy collapsing after the surge). The loss never comes back."),
        DemoRun(GUARDED, "run 2 of 2: with sentinel",
                f"the same faults. Watch for 'update not applied' at steps {bad} (the bad batches' "
                "updates withheld), then 'rolled back' after the surge, the second time with the "
                "learning rate lowered for a cool-down. The loss recovers."),
    )


class _NamedProgressBar(RichProgressBar):
    """Lightning's progress bar, labelled with the run's name instead of "Epoch 0/-2"."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self._name = name

    def _get_train_description(self, current_epoch: int) -> str:
        return self._name


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


def prepare_out(out: str | Path) -> Path:
    """Create the demo's output directory (replacing an earlier demo's runs in it), or say in one
    line why it cannot be.

    Raises:
        ValueError: ``out`` cannot be created or written.

    Example:
        >>> prepare_out("logs/demo")  # doctest: +SKIP
        PosixPath('logs/demo')
    """
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"--out '{out}' cannot be created ({err.strerror or err}): "
                         "pass a directory you can write to") from err
    # A second demo into the same --out starts afresh: appended to the first, its runs would read
    # as restarted by another process. Only what a demo wrote is removed.
    for name in (UNGUARDED, GUARDED):
        previous = out / name
        if not previous.exists():
            continue
        if not (previous / "meta.json").is_file():
            raise ValueError(f"--out '{out}' holds '{name}', which is not a run a demo wrote: "
                             "pass another directory")
        try:
            shutil.rmtree(previous)
        except OSError as err:
            raise ValueError(f"cannot replace the previous demo run '{previous}' "
                             f"({err.strerror or err}): pass another --out") from err
    return out


def run_demo(out: str | Path = "logs/demo", steps: int = 400, progress: bool = True,
             announce: Callable[[DemoRun], None] | None = None) -> DemoResult:
    """Train the demo twice and write ``out/1-unguarded``, ``out/2-guarded``.

    Args:
        out: the directory for both runs.
        steps: optimizer steps per run (the faults move in proportion).
        progress: show Lightning's progress bar, named after the run.
        announce: called with each :class:`DemoRun` before it trains (the CLI prints it).

    Example:
        >>> result = run_demo("logs/demo", steps=400, announce=lambda run: print(run.title))  # doctest: +SKIP
        run 1 of 2: without sentinel
        run 2 of 2: with sentinel
    """
    out = prepare_out(out)
    scenario = scenario_for(steps)
    torch.set_num_threads(1)  # a tiny model: one thread is fastest, and leaves a core free
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    data = scenario.data()
    final: dict[str, float] = {}
    rollbacks = 0
    start = time.perf_counter()
    runs = demo_runs(scenario)
    for run, options in zip(runs, ({"rollback": False}, scenario.guard_options())):
        name = run.name
        if announce is not None:
            announce(run)
        lm, loader = scenario.build(faults=True, data=data)
        callback = SentinelCallback(log_dir=str(out / name), **options)
        # Rich draws Lightning's default bar; without it Lightning falls back to tqdm ("Epoch 0").
        bar = [_NamedProgressBar(name)] if progress and importlib.util.find_spec("rich") else []
        trainer = L.Trainer(accelerator="cpu", precision=scenario.precision, max_steps=scenario.steps, logger=False,
                            enable_checkpointing=False, enable_model_summary=False,
                            enable_progress_bar=progress, callbacks=[callback, *bar])
        with warnings.catch_warnings():  # Lightning 2.6 on torch 2.13: a deprecation inside Lightning
            warnings.filterwarnings("ignore", message=r".*LeafSpec.* is deprecated")
            trainer.fit(lm, loader)
        final[name] = float(callback.sentinel.last_record.get("loss", float("nan")))
        if name == GUARDED:
            rollbacks = callback.sentinel.rollbacks
    return DemoResult(out, final, rollbacks, time.perf_counter() - start)
