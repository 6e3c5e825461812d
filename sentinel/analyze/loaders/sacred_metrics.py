"""Loader for the metrics of a Sacred run, as its ``FileStorageObserver`` writes them.

``<basedir>/<run id>/metrics.json`` holds one entry per metric logged with ``_run.log_scalar``
(or ``ex.log_scalar``): ``{"train.loss": {"steps": [...], "values": [...], "timestamps": [...]}}``,
the lists in logging order, each metric with its own steps. Beside it Sacred keeps ``run.json``,
``config.json`` and ``cout.txt`` (what the script printed: the same run, left to this file; see
:mod:`sentinel.analyze.discover`). The text is parsed as JSON data (Sacred writes ``NaN`` for a
NaN value, as Python's ``json`` does).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel.analyze.loaders import LOGGED_NAN, LoadOptions, RunData
from sentinel.analyze.loaders.numeric_table import metric_series_frame, step_values
from sentinel.analyze.loaders.textlog import head_matches, read_json, run_name

NAME = "sacred"
DESCRIPTION = "Sacred run metrics (metrics.json: {'<metric>': {'steps': [...], 'values': [...]}})"

# The first metric's dict opens with one of its three lists.
_SNIFF = re.compile(r'^\s*\{\s*"(?:[^"\\]|\\.)*"\s*:\s*\{\s*"(?:steps|timestamps|values)"\s*:\s*\[')
MAX_BYTES = 256 << 20


def sniff(path: str | Path) -> bool:
    """True for a JSON file of ``{"<metric>": {"steps": [...], "values": [...], ...}}``.

    Example:
        >>> sniff("/nonexistent/metrics.json")
        False
    """
    return head_matches(path, _SNIFF, 4096, MAX_BYTES)


def is_run_dir(folder: Path) -> bool:
    """A Sacred run directory: ``run.json`` beside a ``metrics.json`` of this shape.

    Example:
        >>> is_run_dir(Path("/nonexistent"))
        False
    """
    return (folder / "run.json").is_file() and sniff(folder / "metrics.json")


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read one Sacred ``metrics.json``.

    Args:
        path: the file.
        options: ``loss_col`` names the loss metric when it is not recognised.

    Returns:
        One :class:`RunData` named after the run's directory (its id), a column per metric.

    Raises:
        ValueError: not such a file, or no loss metric (the message lists the metrics).

    Example:
        >>> run = load("my_runs/3/metrics.json")[0]  # doctest: +SKIP
        >>> run.name, list(run.steps.columns)  # doctest: +SKIP
        ('3', ['loss', 'val_loss'])
    """
    options = options or LoadOptions()
    path = Path(path)
    found = read_json(path, "a Sacred metrics.json")
    if not isinstance(found, dict):
        raise ValueError(f"{path}: not a Sacred metrics.json (a JSON object of metrics)")
    warnings: list[str] = []
    series: dict[str, pd.Series] = {}
    for key, entry in found.items():
        got = listed_series(str(key), entry, path, warnings)
        if got is not None:
            series[str(key)] = got
    if not series:
        raise ValueError(f"{path}: no metric with 'steps' and 'values' lists of numbers: not a Sacred metrics.json")
    logged_nan: dict[str, list[int]] = {}
    steps = metric_series_frame(series, options.loss_col, path, warnings, "metric", logged_nan=logged_nan)
    return [RunData(name=run_name(path), path=str(path), source=NAME, steps=steps,
                    meta={"format": NAME, "metrics": list(series), LOGGED_NAN: logged_nan}, warnings=warnings)]


def listed_series(key: str, entry: object, path: Path, warnings: list[str],
                  lists: tuple[str, str] = ("steps", "values")) -> pd.Series | None:
    """One metric's values by step from a dict of its two lists (``lists``: their keys; the last
    value of a step logged twice), or None where the entry is not a metric (no lists, or not
    numbers).

    Example:
        >>> listed_series("loss", {"x": [0, 10], "y": [2.5, 2.0]}, Path("m.json"), [], ("x", "y")).to_dict()
        {0: 2.5, 10: 2.0}
    """
    if not isinstance(entry, dict):
        return None
    steps, values = entry.get(lists[0]), entry.get(lists[1])
    if not isinstance(steps, list) or not isinstance(values, list) or not values:
        return None
    if not all(_number(v) for v in values) or not all(_number(s) for s in steps):
        warnings.append(f"{path.name}: metric {key!r} holds values that are not numbers: left out")
        return None
    if len(steps) != len(values):
        warnings.append(f"{path.name}: metric {key!r} has {len(steps)} steps for {len(values)} values: "
                        "the first of each are paired")
    n = min(len(steps), len(values))
    raw = pd.Series([np.nan if s is None else s for s in steps[:n]], dtype="float64")
    try:
        step, keep = step_values(raw, "steps", f"{path.name} ({key})", warnings)
    except ValueError:  # no usable step at all: this metric alone is left out
        warnings.append(f"{path.name}: metric {key!r} has no whole-number steps: left out")
        return None
    vals = np.array([np.nan if v is None else v for v in values[:n]], dtype="float64")[keep]
    return pd.Series(vals, index=step).groupby(level=0).last()


def _number(value: object) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
