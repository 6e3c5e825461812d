"""Loader for an MLflow file store run, read from its documented layout (no mlflow needed).

``mlruns/<experiment>/<run>/metrics/<key>`` holds one line per logged value,
``<timestamp ms> <value> <step>``; nested keys (``train/loss``) are subfolders. A run is
claimed through its first metric file (in walk order) so that it is read once.
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from sentinel.analyze.loaders import LOGGED_NAN, LoadOptions, RunData, files_in_walk_order
from sentinel.analyze.loaders.numeric_table import step_values, timed_series

NAME = "mlflow"
DESCRIPTION = "MLflow file store runs (mlruns/<exp>/<run>/metrics/<key>)"


def sniff(path: str | Path) -> bool:
    """True for the first metric file of an MLflow run (``<run>/metrics/...`` beside ``meta.yaml``).

    Example:
        >>> sniff("/nonexistent/metrics/loss")
        False
    """
    run = _run_dir(Path(path))
    return run is not None and _metric_files(run)[:1] == [Path(path)]


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read every metric of the MLflow run that ``path`` belongs to.

    Args:
        path: a metric file of the run (or the run directory).
        options: ``loss_col`` names the loss metric when it is not recognised.

    Returns:
        One :class:`RunData` named after the run's ``run_name`` tag (else its id).

    Raises:
        ValueError: not inside an MLflow run, or no loss metric.

    Example:
        >>> run = load("mlruns/0/3f2a.../metrics/loss")[0]  # doctest: +SKIP
    """
    options = options or LoadOptions()
    p = Path(path)
    run = p if (p / "metrics").is_dir() else _run_dir(p)
    if run is None:
        raise ValueError(f"{path}: not inside an MLflow run directory (<run>/metrics/<key>)")
    timed = {}  # each metric's records in the order written
    warnings: list[str] = []
    for file in _metric_files(run):
        key = file.relative_to(run / "metrics").as_posix()
        table = pd.read_csv(io.StringIO(file.read_text(encoding="utf-8")), sep=" ", header=None,
                            names=["time", "value", "step"], usecols=[0, 1, 2])
        # a step that is not a whole number or does not fit int64 drops its row, with a warning
        step, keep = step_values(table["step"], "step", f"metrics/{key}", warnings)
        numbers = {name: pd.to_numeric(table[name], errors="coerce").to_numpy(dtype="float64")[keep]
                   for name in ("time", "value")}
        timed[key] = pd.DataFrame({"time": numbers["time"], "step": step, "value": numbers["value"]})
    # A run resumed into the same MLflow run logs its steps again from its checkpoint: later wins.
    logged_nan: dict[str, list[int]] = {}
    steps, abandoned = timed_series(timed, options.loss_col, run, warnings, "column", logged_nan=logged_nan)
    tag = run / "tags" / "mlflow.runName"
    name = tag.read_text(encoding="utf-8").strip() if tag.is_file() else run.name
    return [RunData(name=name, path=str(run), source=NAME, steps=steps,
                    meta={"format": NAME, "experiment": run.parent.name, "run_id": run.name, LOGGED_NAN: logged_nan},
                    warnings=warnings, abandoned=abandoned)]


def _run_dir(path: Path) -> Path | None:
    for parent in path.parents:
        if parent.name == "metrics":
            run = parent.parent
            return run if (run / "meta.yaml").is_file() else None
    return None


def _metric_files(run: Path) -> list[Path]:
    """Metric files in the order a top-down sorted walk meets them."""
    return files_in_walk_order(run / "metrics")
