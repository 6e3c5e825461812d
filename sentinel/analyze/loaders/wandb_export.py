"""Loader for a W&B chart exported as CSV (a panel's menu: Export, CSV).

The web app writes the chart's x axis first (``Step``, or the key the chart is drawn against,
e.g. ``trainer/global_step``), then for every run in the chart ``<run name> - <key>`` and the
bucket range ``<run name> - <key>__MIN`` / ``__MAX``. A cell is empty where that run has no
value at that step. Each run becomes a :class:`RunData` of its own; the ``__MIN`` / ``__MAX``
columns are left out (they bound the drawn value, they are not a measurement of their own).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from sentinel.analyze.loaders import LoadOptions, RunData
from sentinel.analyze.loaders.keys import STEP_ALIASES, find_column, inferred_loss_note, loss_column
from sentinel.analyze.loaders.numeric_table import read_csv_skipping, table_steps
from sentinel.analyze.loaders.textlog import read_head_lines

NAME = "wandb_export"
DESCRIPTION = "W&B chart exports (CSV: Step, '<run> - <key>', '<run> - <key>__MIN', '__MAX')"

# "<run> - <key>" with an optional statistic suffix; the run is split off at the last " - " (a
# run's display name may hold one; a logged key rarely does).
_SERIES = re.compile(r"^(?P<run>.+) - (?P<key>\S.*?)(?P<stat>__MIN|__MAX)?$")
# The x axes a chart can be drawn against besides a step key (said to be no step when loaded).
_OTHER_X_AXES = frozenset({"relative time (process)", "relative time (wall)", "wall time", "epoch"})


def sniff(path: str | Path) -> bool:
    """True for a CSV whose header is an x axis followed by ``<run> - <key>`` columns.

    Example:
        >>> sniff("/nonexistent.csv")
        False
    """
    lines = read_head_lines(path, limit=64 * 1024)
    if len(lines) < 2:
        return False
    try:
        header, first = next(csv.reader([lines[0]])), next(csv.reader([lines[1]]))
    except csv.Error:
        return False
    x_axis = header[0].strip() if header else ""
    if not (_is_step(x_axis) or x_axis.lower() in _OTHER_X_AXES) or not first:
        return False
    try:
        float(first[0])
    except ValueError:
        return False
    return _series(header) is not None


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read every run of an exported chart.

    Args:
        path: the CSV.
        options: ``loss_col`` names the key to read as the loss (``train/loss``, or a column as
            written, ``my-run - train/loss``); ``step_col`` the x axis when it is not a step.

    Returns:
        One :class:`RunData` per run in the chart, in column order.

    Raises:
        ValueError: the x axis is not a step (wall time), or no run has a loss column.

    Example:
        >>> runs = load("wandb_export_2026-01-01.csv")  # doctest: +SKIP
        >>> [r.name for r in runs]  # doctest: +SKIP
        ['gpt2-lr3e-4', 'gpt2-lr1e-3']
    """
    options = options or LoadOptions()
    path = Path(path)
    skipped: list[str] = []  # said for every run of the chart
    table = read_csv_skipping(path, path.name, skipped, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    header = [str(c) for c in table.columns]
    series = _series(header)
    if series is None:
        raise ValueError(f"{path}: not a W&B chart export (an x axis, then '<run> - <key>' columns)")
    x_axis = header[0]
    if x_axis != options.step_col and not _is_step(x_axis):
        raise ValueError(f"{path}: the chart is drawn against {x_axis!r}, not a step: export it with "
                         "Step as the x axis, or name the column with --step-col")
    runs, problems = [], []
    for run, columns in series.items():
        keys = list(columns)
        warnings: list[str] = list(skipped)
        wanted = options.loss_col
        if wanted is not None and wanted in header:  # named as written: it must be this run's
            wanted = next((key for key, col in columns.items() if col == wanted), None)
            if wanted is None:
                continue
        try:
            loss_key, inferred = loss_column(keys, wanted)
        except ValueError as err:
            problems.append(f"{run}: {err}")
            continue
        if loss_key is None:
            problems.append(f"{run}: no loss among {', '.join(keys)}")
            continue
        if inferred:
            warnings.append(inferred_loss_note(loss_key))
        sub = table[[x_axis, *columns.values()]]
        sub = sub[(sub[list(columns.values())] != "").any(axis=1)]  # the steps this run has
        sub.columns = [x_axis, *keys]
        steps = table_steps(sub, x_axis, loss_key, path, warnings)
        runs.append(RunData(name=run, path=str(path), source=NAME, steps=steps,
                            meta={"format": NAME, "columns": list(columns.values())}, warnings=warnings))
    if not runs:
        raise ValueError(f"{path}: no run in the chart has a loss ({'; '.join(problems) or 'no match'}): "
                         "name the key with --loss-col")
    return runs


def _is_step(x_axis: str) -> bool:
    return find_column([x_axis], STEP_ALIASES) is not None


def _series(header: list[str]) -> dict[str, dict[str, str]] | None:
    """``{run: {key: column}}`` for a chart export's header, None for any other header."""
    if len(header) < 2:
        return None
    out: dict[str, dict[str, str]] = {}
    for column in header[1:]:
        match = _SERIES.match(column)
        if match is None:
            return None
        if match["stat"] is None:
            out.setdefault(match["run"], {})[match["key"]] = column
    return out or None
