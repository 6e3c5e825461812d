"""Loader for Lightning ``CSVLogger`` output (``metrics.csv``).

Lightning writes one row per ``log_metrics`` call: training rows, validation rows and epoch
rows share one header, so empty cells are normal. Rows of the same step are merged.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN, LOGGED_NAN_KEYS, AbandonedHistory, LoadOptions, RunData
from sentinel.analyze.loaders.keys import STEP_ALIASES, canonical_key, find_column, inferred_loss_note, loss_column
from sentinel.analyze.loaders.numeric_table import (
    PRINTED_NAN_ROWS,
    TEXT_LOSS_ROWS,
    choose_columns,
    loss_values,
    merge_steps,
    read_columns,
    read_header,
    step_values,
    went_back_rows,
)
from sentinel.analyze.loaders.textlog import as_float64, text_encoding

log = logging.getLogger(__name__)

NAME = "lightning_csv"
DESCRIPTION = "Lightning CSVLogger metrics.csv"
FILE_NAME = "metrics.csv"


def sniff(path: str | Path) -> bool:
    """True for a ``metrics.csv`` (or a directory holding one) whose header has a step column.

    Example:
        >>> sniff("/nonexistent/metrics.csv")
        False
    """
    path = Path(path)
    if path.is_dir():
        path = path / FILE_NAME
    if path.name != FILE_NAME or not path.is_file():
        return False
    with open(path, encoding=text_encoding(path), errors="replace") as f:
        header = f.readline(64 * 1024).strip().split(",")
    return find_column(header, STEP_ALIASES) is not None


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read one ``metrics.csv`` into a run, keys mapped to sentinel's names.

    Args:
        path: the file, or the directory holding it.
        options: ``step_col`` / ``loss_col`` chosen by the user.

    Reading is bounded and tolerant (see :mod:`~sentinel.analyze.loaders.numeric_table`):
    chunked parsing, at most ``MAX_COLUMNS`` columns, damaged rows dropped and counted.

    Raises:
        ValueError: a column named in ``options`` does not exist, or the file has no step
            column.

    Example:
        >>> run = load("lightning_logs/version_0")[0]  # doctest: +SKIP
        >>> run.steps["loss"].head()  # doctest: +SKIP
    """
    options = options or LoadOptions()
    path = Path(path)
    if path.is_dir():
        path = path / FILE_NAME
    warnings: list[str] = []
    names, sep = read_header(path, sep=",")
    step_col = find_column(names, STEP_ALIASES, options.step_col)
    if step_col is None:
        raise ValueError(f"{path}: no step column among {', '.join(map(str, names[:50])) or 'none'}: "
                         "pass --step-col NAME")
    loss_col, inferred = loss_column(names, options.loss_col)
    if inferred:
        warnings.append(f"{path.name}: {inferred_loss_note(loss_col)}")
    positions = choose_columns(path, names, step_col, loss_col, warnings)
    frame = read_columns(path, sep, names, positions, loss_col, warnings, step_col)
    step, keep = step_values(frame[step_col], step_col, path, warnings)
    text_rows = frame.attrs.get(TEXT_LOSS_ROWS)
    printed_rows = frame.attrs.get(PRINTED_NAN_ROWS)
    use = keep.copy()
    if loss_col is not None:
        text = text_rows[keep] if text_rows is not None else loss_values(frame[loss_col][keep])[1]
        if text.any():
            warnings.append(f"{path.name}: {int(text.sum())} row(s) whose {loss_col!r} is text, not a "
                            "number, were skipped")
            use[np.flatnonzero(keep)[text]] = False
            step = step[~text]
    # Columns as numpy arrays (read_columns made them float), indexed only when rows drop out.
    every = bool(use.all())
    columns = {}
    for position, column in enumerate(frame.columns):
        if column == step_col:
            continue
        values = frame.iloc[:, position]
        if column == loss_col and values.dtype != np.float64:
            values = loss_values(values)[0]
        elif values.dtype != np.float64:
            values = pd.to_numeric(values, errors="coerce")
        values = values.to_numpy(dtype="float64", na_value=np.nan)
        columns[position] = values if every else values[use]
    kept = [c for c in frame.columns if c != step_col]
    frame = pd.DataFrame(columns, index=pd.Index(step, name=step_col), copy=False)
    frame.columns = kept
    abandoned: list[AbandonedHistory] = []
    if loss_col is not None:  # a resumed run appending to the file: its rows replace the earlier ones
        frame = went_back_rows(frame, abandoned, loss_col)
    steps = merge_steps(frame)  # train and val rows of one step merge
    steps.index.name = metrics.STEP
    renames = {}
    for column in steps.columns:
        renames[column] = metrics.LOSS if column == loss_col else canonical_key(str(column))
        if renames[column] == metrics.LOSS and column != loss_col:
            renames[column] = str(column).strip().lower()  # only the chosen column is "loss"
    steps = steps.rename(columns=renames)
    steps = steps.loc[:, ~steps.columns.duplicated()]
    empty = [c for c in steps.columns if c != metrics.LOSS and steps[c].isna().all()]
    # (a column whose every value is "nan", not an empty cell: an evaluation that is NaN at each epoch is news)
    printed_nan = _printed_nan_columns(path, sep, names, step_col, {renames[n]: n for n in renames}, empty)
    steps = steps.drop(columns=[c for c in empty if c not in printed_nan])
    for stretch in abandoned:  # named as the run's columns are
        replaced = stretch.steps.rename(columns=renames)
        stretch.steps = replaced.loc[:, ~replaced.columns.duplicated()].rename_axis(metrics.STEP)
    if loss_col is None:
        warnings.append(f"{path.name}: no loss column among {', '.join(map(str, names[:50]))}: "
                        "pass --loss-col NAME")
    meta = {"loss_column": loss_col, "step_column": step_col}
    if printed_rows is not None and metrics.LOSS in steps.columns:
        meta.update(_printed_nan_steps(step[printed_rows[use]], steps[metrics.LOSS]))
    if printed_nan:
        meta[LOGGED_NAN] = {**meta.get(LOGGED_NAN, {}), **printed_nan}
        meta[LOGGED_NAN_KEYS] = (*meta.get(LOGGED_NAN_KEYS, ()), *printed_nan)
    name = path.parent.name or path.name
    return [RunData(name=name, path=str(path), source=NAME, steps=as_float64(steps),
                    meta=meta, warnings=warnings, abandoned=abandoned)]


def _printed_nan_columns(path: Path, sep: str, names: list, step_col, originals: dict, keys: list[str]
                         ) -> dict[str, np.ndarray]:
    """For each of ``keys`` (the run's names of columns with no finite value, ``originals`` their header names), the
    steps where its cell holds a NaN or an infinity as written (``nan``, ``inf``), where it holds one; a column of
    empty cells only (a metric never logged) is none. Read cell by cell, as text, for those columns only."""
    found: dict[str, np.ndarray] = {}
    for key in keys:
        name = originals.get(key)
        if name not in names or step_col not in names:
            continue
        try:
            cells = pd.read_csv(path, sep=sep, usecols=[names.index(step_col), names.index(name)], dtype=str,
                                keep_default_na=False, na_filter=False, encoding=text_encoding(path),
                                encoding_errors="replace", on_bad_lines="skip")
        except (ValueError, OSError):  # the table was read; this second look must not lose it
            continue
        text = cells[name].str.strip().str.lower()
        nonfinite = text.isin(("nan", "inf", "-inf", "+inf", "infinity", "-infinity")).to_numpy()
        if nonfinite.any():
            steps = pd.to_numeric(cells[step_col][nonfinite], errors="coerce").dropna().to_numpy(dtype="int64")
            found[key] = np.unique(steps)
    return found


def _printed_nan_steps(printed: np.ndarray, loss: pd.Series) -> dict:
    """The meta entries that say where the loss was logged as NaN: the CSVLogger writes a NaN as
    ``nan`` and a metric a row did not log as an empty cell, so a training row's NaN at the step of
    a validation row is told from that row's empty loss (before, rows merged by step lost it)."""
    at = np.unique(printed)
    at = at[np.isnan(loss.reindex(at).to_numpy(dtype="float64"))]  # a step logged again later holds its value
    return {LOGGED_NAN: {metrics.LOSS: at}, LOGGED_NAN_KEYS: (metrics.LOSS,)}
