"""Loader for a DVCLive run, read from its documented layout (no dvclive needed).

``Live(dir="dvclive").log_metric("train/loss", x)`` appends ``timestamp, step, loss`` to
``dvclive/plots/metrics/train/loss.tsv``: one tab-separated file per metric, nested keys as
folders, beside a ``metrics.json`` of the latest values. The run is the folder that holds
``plots/metrics``; it is claimed through its first metric file (in walk order) so that it is
read once, and its other metric files and ``metrics.json`` are the same run.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sentinel.analyze.loaders import LOGGED_NAN, LoadOptions, RunData, files_in_walk_order
from sentinel.analyze.loaders.numeric_table import metric_series_frame, step_values
from sentinel.analyze.loaders.textlog import text_encoding

NAME = "dvclive"
DESCRIPTION = "DVCLive runs (dvclive/plots/metrics/<key>.tsv: timestamp, step, value)"


def sniff(path: str | Path) -> bool:
    """True for a metric file of a DVCLive run (``<run>/plots/metrics/**.tsv``): named on its
    own it stands for its run; a directory walk offers only the first (:func:`part_of_run`).

    Example:
        >>> sniff("/nonexistent/dvclive/plots/metrics/train/loss.tsv")
        False
    """
    path = Path(path)
    return path.suffix == ".tsv" and path.is_file() and run_dir(path) is not None


def part_of_run(path: str | Path) -> bool:
    """A file of a DVCLive run that its first metric file reads for it: another metric file, or
    the run's ``metrics.json`` (its latest values).

    Example:
        >>> part_of_run("/nonexistent/dvclive/metrics.json")
        False
    """
    path = Path(path)
    if path.name == "metrics.json":
        return (path.parent / "plots" / "metrics").is_dir() and bool(_metric_files(path.parent))
    run = run_dir(path)
    return run is not None and path.suffix == ".tsv" and _metric_files(run)[:1] != [path]


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read every metric of the DVCLive run that ``path`` belongs to.

    Args:
        path: a metric file of the run (or the run's folder).
        options: ``loss_col`` names the loss metric (``train/loss``) when it is not recognised.

    Returns:
        One :class:`RunData`, named after the folder that holds the run's folder when that is
        called ``dvclive`` (the default), else after the run's folder.

    Raises:
        ValueError: not inside a DVCLive run, or no loss metric.

    Example:
        >>> run = load("dvclive/plots/metrics/train/loss.tsv")[0]  # doctest: +SKIP
        >>> run.steps.columns.tolist()  # doctest: +SKIP
        ['loss', 'eval/loss', 'train/acc']
    """
    options = options or LoadOptions()
    path = Path(path)
    run = path if (path / "plots" / "metrics").is_dir() else run_dir(path)
    if run is None:
        raise ValueError(f"{path}: not inside a DVCLive run (<run>/plots/metrics/<key>.tsv)")
    metrics_dir = run / "plots" / "metrics"
    series: dict[str, pd.Series] = {}
    warnings: list[str] = []
    for file in _metric_files(run):
        key = file.relative_to(metrics_dir).with_suffix("").as_posix()
        table = pd.read_csv(file, sep="\t", encoding=text_encoding(file), encoding_errors="replace",
                            on_bad_lines="skip")
        value_col = file.stem if file.stem in table.columns else table.columns[-1]
        if "step" not in table.columns or value_col == "step":
            warnings.append(f"plots/metrics/{key}.tsv: no step and value columns (it has: "
                            f"{', '.join(map(str, table.columns))}): skipped")
            continue
        # a step that is not a whole number or does not fit int64 drops its row, with a warning
        step, keep = step_values(table["step"], "step", f"plots/metrics/{key}.tsv", warnings)
        values = pd.to_numeric(table[value_col], errors="coerce").to_numpy(dtype="float64")[keep]
        series[key] = pd.Series(values, index=step).groupby(level=0).last()
    logged_nan: dict[str, list[int]] = {}
    steps = metric_series_frame(series, options.loss_col, run, warnings, what="metric", logged_nan=logged_nan)
    parent = run.resolve().parent.name
    name = parent if run.name == "dvclive" and parent else run.name
    return [RunData(name=name, path=str(run), source=NAME, steps=steps,
                    meta={"format": NAME, "metrics": list(series), LOGGED_NAN: logged_nan}, warnings=warnings)]


def run_dir(path: Path) -> Path | None:
    """The run folder a path inside ``<run>/plots/metrics`` belongs to, else None."""
    for parent in path.parents:
        if parent.name == "metrics" and parent.parent.name == "plots":
            return parent.parent.parent
    return None


def _metric_files(run: Path) -> list[Path]:
    """The ``.tsv`` metric files in the order a top-down sorted walk meets them."""
    return files_in_walk_order(run / "plots" / "metrics", suffix=".tsv")
