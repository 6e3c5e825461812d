"""Loader for a sentinel run directory (``meta.json`` + ``steps.*`` + ``events.jsonl``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from sentinel import metrics
from sentinel.analyze.loaders import LoadOptions, RunData

if TYPE_CHECKING:
    import pandas as pd

NAME = "sentinel"
DESCRIPTION = "sentinel run directory (meta.json + steps.*)"

_META = "meta.json"
_SEGMENT = re.compile(r"^steps\.\d+\.csv$")  # sentinel.store.layout's segment names


def sniff(path: str | Path) -> bool:
    """True for a directory holding ``meta.json`` or step-record segments (``steps.NNNNN.csv``).

    Example:
        >>> sniff("/nonexistent")
        False
    """
    path = Path(path)
    if not path.is_dir():
        return False
    return (path / _META).is_file() or any(_SEGMENT.match(p.name) for p in path.iterdir())


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read one sentinel run directory through the store's reader.

    The guard's skip list is kept in ``meta["skiplist"]``; the ``tb/`` mirror is not read
    (it holds the same scalars).

    Args:
        path: the run directory.
        options: ``loss_col`` names another recorded column as the loss (the recorded loss is
            then not read); the step is always the recorded step (``step_col`` may only name it).

    Raises:
        ValueError: ``loss_col`` names no recorded column, or ``step_col`` another column than
            the step.

    Example:
        >>> runs = load("logs/run1")  # doctest: +SKIP
        >>> runs[0].steps["loss"].iloc[-1]  # doctest: +SKIP
        0.42
    """
    # Imported here: the store pulls in pyarrow, which a TensorBoard-only analysis never needs.
    from sentinel.store import load_run

    path = Path(path)
    run = load_run(path)
    meta = dict(run.meta or {})
    meta["skiplist"] = list(run.skiplist or [])
    meta["restarts"] = list(run.restarts)
    steps = _with_options(run.steps, options or LoadOptions(), path)
    warnings = list(run.warnings or [])
    if not len(steps.index):
        warnings.append(_no_steps(path))
    return [RunData(name=path.name, path=str(path), source=NAME, steps=steps,
                    events=run.events, meta=meta, warnings=warnings)]


def _no_steps(path: Path) -> str:
    """Why a run directory has no step record, and where its scalars may still be."""
    segments = sorted(p.name for p in path.iterdir() if _SEGMENT.match(p.name))
    if not segments:
        why = (f"no step records: there is no steps.*.csv in '{path}' (the run never wrote a step, or its "
               "files were moved)")
    else:
        why = (f"no step records: {', '.join(segments)} hold{'s' if len(segments) == 1 else ''} no step (a run "
               "stopped before its first step was written)")
    tb = path / "tb"
    if tb.is_dir() and any("tfevents" in p.name for p in tb.iterdir()):
        return f"{why}; its TensorBoard copy has the same scalars: sentinel analyze {tb}"
    return f"{why}: pass a run directory that recorded steps"


def _with_options(steps: pd.DataFrame, options: LoadOptions, path: Path) -> pd.DataFrame:
    """The steps with the column ``--loss-col`` names as the loss; an option that names nothing
    here is refused, as the other loaders refuse it (a run without records is left to say so)."""
    if options.step_col is not None and options.step_col.strip().lower() != metrics.STEP:
        raise ValueError(f"{path}: a sentinel run's step is the step it recorded, not a column; "
                         f"--step-col {options.step_col!r} does not apply to it: leave --step-col out")
    loss_col = options.loss_col
    if loss_col is None or loss_col == metrics.LOSS or not len(steps.columns):
        return steps
    if loss_col not in steps.columns:
        raise ValueError(f"{path}: no column {loss_col!r} in the run's step records; --loss-col takes one of: "
                         + ", ".join(str(c) for c in steps.columns))
    return steps.drop(columns=[metrics.LOSS], errors="ignore").rename(columns={loss_col: metrics.LOSS})
