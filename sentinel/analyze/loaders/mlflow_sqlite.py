"""Loader for an MLflow SQLite store (``mlflow.db``: MLflow's default store since 3.7), read with
Python's own ``sqlite3`` (no mlflow needed), opened read-only.

Its ``metrics`` table holds one row per logged value: ``key``, ``value``, ``timestamp``,
``step``, ``run_uuid``, ``is_nan``. MLflow stores a NaN as ``0`` with ``is_nan`` set, and an
infinity as the largest float of its sign; both are read back as what was logged. Each run of the
store that logged metrics is a run (named after the run's name, in its experiment); deleted runs
are left out, with a warning.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel.analyze.loaders import LOGGED_NAN, LoadOptions, RunData
from sentinel.analyze.loaders.numeric_table import timed_series

NAME = "mlflow_sqlite"
DESCRIPTION = "MLflow SQLite store (mlflow.db, MLflow 3.7+'s default): each run's metrics"

_MAGIC = b"SQLite format 3\x00"
_METRIC_COLUMNS = {"key", "value", "timestamp", "step", "run_uuid", "is_nan"}
_LARGEST = np.finfo(np.float64).max  # how MLflow stores an infinity


def sniff(path: str | Path) -> bool:
    """True for an SQLite file holding MLflow's ``metrics`` and ``runs`` tables.

    Example:
        >>> sniff("/nonexistent/mlflow.db")
        False
    """
    try:
        with open(path, "rb") as f:
            if f.read(len(_MAGIC)) != _MAGIC:
                return False
        with closing(_connect(path)) as db:
            columns = {row[1] for row in db.execute("PRAGMA table_info(metrics)")}
            runs = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'").fetchone()
    except (OSError, sqlite3.Error):
        return False
    return _METRIC_COLUMNS <= columns and runs is not None


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read every run of an MLflow SQLite store.

    Args:
        path: the store (``mlflow.db``).
        options: ``loss_col`` names the loss metric when it is not recognised.

    Returns:
        One :class:`RunData` per run that logged metrics, in the order the runs started.

    Raises:
        ValueError: the file cannot be read as an MLflow store, or no run logged a metric.

    Example:
        >>> [run.name for run in load("mlflow.db")]  # doctest: +SKIP
        ['tiny-gpt/spiky', 'tiny-gpt/eval-only']
    """
    options = options or LoadOptions()
    try:
        with closing(_connect(path)) as db:
            runs = db.execute(
                "SELECT r.run_uuid, r.name, r.lifecycle_stage, e.name FROM runs r "
                "LEFT JOIN experiments e ON e.experiment_id = r.experiment_id ORDER BY r.start_time, r.run_uuid"
            ).fetchall()
            rows = db.execute("SELECT run_uuid, key, timestamp, step, value, is_nan FROM metrics "
                              "ORDER BY run_uuid, key, timestamp, step").fetchall()
    except sqlite3.Error as err:
        raise ValueError(f"{path}: not readable as an MLflow SQLite store ({err}); pass an intact mlflow.db") from err
    logged = pd.DataFrame(rows, columns=["run", "key", "time", "step", "value", "is_nan"])
    keys = sorted(set(logged["key"]))
    if options.loss_col is not None and options.loss_col.lower() not in {k.lower() for k in keys}:
        raise ValueError(f"{path}: no metric {options.loss_col!r} in this MLflow store; metrics: {', '.join(keys)}")
    deleted = [uuid for uuid, _, stage, _ in runs if stage == "deleted"]
    found = []
    for uuid, name, stage, experiment in runs:
        own = logged[logged["run"] == uuid]
        if stage == "deleted" or own.empty:
            continue
        found.append(_run(path, uuid, name, experiment, own, options))
    if not found:
        raise ValueError(f"{path}: no run of this MLflow store logged a metric"
                         + (f" ({len(deleted)} deleted run(s) left out)" if deleted else ""))
    if deleted:
        found[0].warnings.append(f"{Path(path).name}: {len(deleted)} deleted run(s) left out")
    return found


def _run(path, uuid: str, name: str | None, experiment: str | None, rows: pd.DataFrame,
         options: LoadOptions) -> RunData:
    timed = {}  # each metric's records in the order written
    for key, group in rows.groupby("key", sort=False):
        values = group["value"].to_numpy(dtype="float64")
        values = np.where(group["is_nan"].to_numpy(dtype=bool), np.nan, values)
        values = np.where(np.abs(values) == _LARGEST, np.copysign(np.inf, values), values)
        timed[str(key)] = pd.DataFrame({"time": group["time"].to_numpy(dtype="float64"),
                                        "step": group["step"].to_numpy(dtype="int64"), "value": values})
    warnings: list[str] = []
    label = f"{experiment}/{name or uuid}" if experiment and experiment != "Default" else (name or uuid)
    # A run with no loss (an evaluation run) is reported as such, not dropped; one the user's
    # --loss-col is not in (another run's metric) has its loss found as any run's is.
    named = options.loss_col if options.loss_col is None or options.loss_col.lower() in {k.lower() for k in timed} \
        else None
    # A run resumed into the same MLflow run logs its steps again from its checkpoint: later wins.
    logged_nan: dict[str, list[int]] = {}
    steps, abandoned = timed_series(timed, named, f"{path} run {label}", warnings, "metric", require_loss=False,
                                    logged_nan=logged_nan)
    return RunData(name=label, path=str(path), source=NAME, steps=steps,
                   meta={"format": NAME, "run_id": uuid, "experiment": experiment, LOGGED_NAN: logged_nan},
                   warnings=warnings, abandoned=abandoned)


def _connect(path: str | Path) -> sqlite3.Connection:
    # Read-only: the store may be in use by a running training; nothing is written to it.
    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
