"""Loader for any CSV / TSV / JSONL table of per-step metrics.

The table needs a step column and a loss column, recognised by name
(:data:`~sentinel.analyze.loaders.keys.STEP_ALIASES`, ``LOSS_ALIASES``) or named by the user
(``--step-col`` / ``--loss-col``). Every other numeric column is kept as a metric under
:func:`~sentinel.analyze.loaders.keys.canonical_key`; text columns are dropped.

JSONL rows may differ in their keys (train rows with ``train_loss`` and ``lr``, val rows
with ``val_loss``): each row gives its step, rows of the same step are merged, and a nested
object is flattened one level (``{"train": {"loss": 2.0}}`` -> ``train/loss``).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LoadOptions, RunData
from sentinel.analyze.loaders.keys import LOSS_ALIASES, STEP_ALIASES, canonical_key, find_column
from sentinel.analyze.loaders.textlog import order_columns, read_head, read_lines, run_name

NAME = "generic_table"
DESCRIPTION = 'CSV / TSV / JSONL tables with a step and a loss column'

# JSONL sniffing looks at this many rows: enough to see a train row and a val row.
_SNIFF_ROWS = 50


def sniff(path: str | Path) -> bool:
    """True when the file is a CSV/TSV with step and loss columns, or JSONL with such fields.

    Example:
        >>> sniff("/nonexistent.csv")
        False
    """
    head = read_head(path, limit=64 * 1024)
    if head is None:
        return False
    lines = [line.rstrip("\r") for line in head.split("\n") if line.strip()]
    if not lines:
        return False
    if lines[0].lstrip().startswith("{"):
        keys = set()
        for line in lines[:_SNIFF_ROWS]:
            row = _json_row(line)
            if row is not None:
                keys.update(_flatten(row))
        return _has_step_and_loss(keys)
    if len(lines) < 2:
        return False
    sep = _separator(lines[0])
    header = next(csv.reader([lines[0]], delimiter=sep))
    step_col = find_column(header, STEP_ALIASES)
    if step_col is None or find_column(header, LOSS_ALIASES) is None:
        return False
    first = next(csv.reader([lines[1]], delimiter=sep))
    position = header.index(step_col)
    return position < len(first) and _is_number(first[position])


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read one CSV / TSV / JSONL table.

    Args:
        path: the file.
        options: ``step_col`` / ``loss_col`` name the columns when their names are not
            recognised.

    Returns:
        One :class:`RunData`, indexed by step, ``loss`` plus every other numeric column.

    Raises:
        ValueError: no step or loss column (the message lists the columns found and names the
            option that fixes it), or a named column that does not exist.

    Example:
        >>> run = load("metrics.jsonl", LoadOptions(loss_col="nll"))[0]  # doctest: +SKIP
        >>> run.steps["loss"].idxmax()  # doctest: +SKIP
    """
    options = options or LoadOptions()
    lines, last_complete = read_lines(path)
    warnings: list[str] = []
    first = next((line for line in lines if line.strip()), "")
    if first.lstrip().startswith("{"):
        table = _read_jsonl(lines, warnings)
    else:
        if not last_complete and len(lines) > 1:
            # A cut row still parses ("2.3" from "2.3417"), so it cannot be trusted.
            warnings.append(f"last line {len(lines)} has no line end (cut off while written?): skipped")
            lines = lines[:-1]
        table = _read_delimited(lines, _separator(first), warnings)
    steps = _to_steps(table, options, path, warnings)
    return [
        RunData(
            name=run_name(path),
            path=str(path),
            source=NAME,
            steps=steps,
            meta={"format": NAME, "columns": [str(c) for c in table.columns]},
            warnings=warnings,
        )
    ]


def _read_delimited(lines: list[str], sep: str, warnings: list[str]) -> pd.DataFrame:
    kept = [line for line in lines if line.strip()]
    # The C parser: ~100x faster than the python one on long tables.
    table = pd.read_csv(io.StringIO("\n".join(kept)), sep=sep, on_bad_lines="skip")
    skipped = len(kept) - 1 - len(table)
    if skipped > 0:  # quoted multi-line fields would make this negative: no warning then
        warnings.append(f"{skipped} row(s) with more fields than the header were skipped")
    table.columns = [str(c).strip() for c in table.columns]
    return table


def _read_jsonl(lines: list[str], warnings: list[str]) -> pd.DataFrame:
    rows: list[dict[str, float]] = []
    bad: list[int] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        row = _json_row(line)
        if row is None:
            bad.append(lineno)
            continue
        rows.append(_flatten(row))
    if bad:
        warnings.append(f"{len(bad)} line(s) that are not JSON objects were skipped (first: line {bad[0]})")
    return pd.DataFrame(rows)


def _to_steps(table: pd.DataFrame, options: LoadOptions, path, warnings: list[str]) -> pd.DataFrame:
    """Pick the step and loss columns, keep numeric columns under sentinel's keys."""
    columns = list(table.columns)
    found = ", ".join(map(str, columns)) or "none"
    step_col = find_column(columns, STEP_ALIASES, options.step_col)
    if step_col is None:
        raise ValueError(f"{path}: no step column among: {found}; name it with --step-col <column>")
    loss_col = find_column(columns, LOSS_ALIASES, options.loss_col)
    if loss_col is None:
        raise ValueError(f"{path}: no loss column among: {found}; name it with --loss-col <column>")

    step = pd.to_numeric(table[step_col], errors="coerce")
    keep = step.notna().to_numpy()
    if not keep.all():
        warnings.append(f"{int((~keep).sum())} row(s) without a numeric {step_col!r} were skipped")
    step = step[keep]
    if not np.all(np.equal(np.mod(step.to_numpy(), 1), 0)):
        raise ValueError(f"{path}: step column {step_col!r} has non-integer values; name an integer one with --step-col")

    renamed: dict[str, pd.Series] = {metrics.LOSS: pd.to_numeric(table.loc[keep, loss_col], errors="coerce")}
    for col in columns:
        if col in (step_col, loss_col):
            continue
        values = pd.to_numeric(table.loc[keep, col], errors="coerce")
        if values.notna().sum() == 0:
            continue  # a text column (names, paths, timestamps)
        key = canonical_key(str(col))
        if key in renamed:  # a second loss-like or lr-like column keeps its own name
            key = str(col).strip().lower()
        if key in renamed:
            warnings.append(f"column {col!r} clashes with another of the same name: skipped")
            continue
        renamed[key] = values
    frame = pd.DataFrame(renamed).astype("float64")
    frame.index = pd.Index(step.astype("int64").to_numpy(), name=metrics.STEP)
    if frame.index.has_duplicates:
        # Rows of one step (a train row and a val row, or a step logged again after a
        # restart) merge; for a column logged twice the last value wins.
        frame = frame.groupby(level=0, sort=True).last()
    return order_columns(frame.sort_index())


def _json_row(line: str) -> dict | None:
    try:
        row = json.loads(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) else None


def _flatten(row: dict) -> dict[str, float]:
    """Numeric fields of one JSON row, nested objects one level deep as ``outer/inner``."""
    out: dict[str, float] = {}
    for key, value in row.items():
        if isinstance(value, dict):
            for inner, inner_value in value.items():
                if _is_json_number(inner_value):
                    out[f"{key}/{inner}"] = float(inner_value)
        elif _is_json_number(value):
            out[str(key)] = float(value)
    return out


def _is_json_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _has_step_and_loss(keys) -> bool:
    keys = list(keys)
    return find_column(keys, STEP_ALIASES) is not None and find_column(keys, LOSS_ALIASES) is not None


def _separator(header: str) -> str:
    return "\t" if "\t" in header else ","


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
