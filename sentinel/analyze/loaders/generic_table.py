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
import json
import re
import warnings as pywarnings
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN, LOGGED_NAN_KEYS, AbandonedHistory, LoadOptions, RunData
from sentinel.analyze.loaders.json_array import items_before_damage, objects_in_sequence
from sentinel.analyze.loaders.keys import (
    LOSS_ALIASES,
    MAX_COLUMNS,
    SB3_STEP,
    SPLIT_COLUMNS,
    STEP_ALIASES,
    TRAIN_WORDS,
    canonical_key,
    inferred_loss_note,
    rises_by_whole_numbers,
    is_analysis_key,
    looks_like_eval_loss,
    looks_like_loss,
    loss_column,
    loss_components,
    sniff_columns,
    step_column,
    step_columns,
)
from sentinel.analyze.loaders.numeric_table import (
    LARGE_TABLE_BYTES,
    PRINTED_NAN_ROWS,
    ROW_STEPS,
    TEXT_LOSS_ROWS,
    choose_columns,
    epoch_column,
    read_columns,
    read_header,
    step_unit,
    step_values,
    sum_loss_components,
    table_steps,
    table_trainings,
)
from sentinel.analyze.loaders.textlog import (QUOTE_MARKS, read_head, read_head_lines, run_name, text_encoding,
                                             trainings_note)

NAME = "generic_table"
DESCRIPTION = "CSV / TSV / JSONL tables, and JSON arrays of rows, with a step and a loss column"
SNIFF_TAKES_OPTIONS = True  # --step-col / --loss-col name columns a sniff counts

# A "name: 3" or "name=3" cell: a log line's field, never a column's name.
_VALUE_IN_NAME = re.compile(r"[:=]\s*[-+]?\.?\d")
# JSONL sniffing looks at this many rows: enough to see a train row and a val row.
_SNIFF_ROWS = 50
# A top-level-looking key of a JSON row cut off by the sniffing limit: "name": <number>.
# (Escapes kept: pandas' to_json writes "train\/loss".)
_JSON_KEY = re.compile(r'"((?:[^"\\]|\\.){1,100})"\s*:\s*[-\d]')
# A JSON array of rows is parsed whole: past this, its rows should be JSON lines (streamed).
MAX_JSON_ARRAY_BYTES = 256 << 20
# "[" then "{": a JSON array of row objects.
JSON_ARRAY = re.compile(r"\A\s*\[\s*\{")


def sniff(path: str | Path, options: LoadOptions | None = None) -> bool:
    """True when the file is a CSV/TSV with step and loss columns, or JSONL with such fields.

    Columns named in ``options`` (``--step-col``, ``--loss-col``) count as those columns.

    Example:
        >>> sniff("/nonexistent.csv")
        False
    """
    lines = read_head_lines(path, limit=64 * 1024)
    if not lines:
        return False
    head = "\n".join(lines[:_SNIFF_ROWS * 20])
    if JSON_ARRAY.match(head):  # a JSON array of rows: the keys its first rows show
        return None not in _sniffed(_head_keys(head), options, path)
    below = _json_rows_below(lines)
    if _unquoted(lines[0]).startswith("{") or below is not None:
        keys = set()
        for line in lines[below or 0:][:_SNIFF_ROWS]:
            row = _json_row(line)
            if row is not None:
                keys.update(_flatten(row))
            else:  # a row longer than the head: its key names still show
                keys.update(_head_keys(line))
        return None not in _sniffed(keys, options, path)
    if len(lines) < 2:
        return False
    sep = separator(lines[0])
    try:
        header = [name.strip() for name in next(csv.reader([lines[0]], delimiter=sep))]
        first = next(csv.reader([lines[1]], delimiter=sep))
    except csv.Error:  # not a table's lines (a NUL byte, a stray quote)
        return False
    if _aligned_by_tabs(header, sep) or runs_table(header):
        return False
    step_col, loss_col = _sniffed(header, options, path)
    if step_col is None or loss_col is None:
        return False
    position = header.index(step_col)
    return position < len(first) and is_number(first[position])


# JSON lines under the lines a program printed as it started (DNABERT's banner, its "1 processor started !"
# lines, then its {"learning_rate": ..., "loss": ..., "step": ...} rows): the lines above the first row, at most.
_JSON_PREAMBLE_LINES = 32


def _json_rows_below(lines: list[str]) -> int | None:
    """Where JSON rows start in a file's head ``lines`` under lines that are none: the first row's index, where
    every line from it on (three at least; the head's last may be cut) is a JSON object; else None (0 is never
    given: rows from the first line are read as they are).

    Example:
        >>> _json_rows_below(["=====", "1 processor started !", *['{"loss": 0.7, "step": %d}' % s for s in (1, 2, 3)]])
        2
    """
    start = next((i for i, line in enumerate(lines[:_JSON_PREAMBLE_LINES]) if _unquoted(line).startswith("{")), None)
    if not start:
        return None
    rows = [line for line in lines[start:start + _SNIFF_ROWS] if line.strip()]
    if len(rows) < 3 or not all(_json_row(line) is not None for line in rows[:-1]):
        return None
    return start


# A table pasted from a notebook sits under a few lines that are no table (the Hugging Face
# Trainer's "[500/500 05:23, Epoch 3/3]" above its "Step  Training Loss  Validation Loss").
_PREAMBLE_LINES = 5


def header_below(path: str | Path, options: LoadOptions | None = None) -> int | None:
    """The line (0-based, blank lines counted) of a table's header under a few lines that are no
    table: a header :func:`sniff` would take, its next line a row whose step is a number, where
    the file's first line is no such header. None otherwise.

    Example:
        >>> header_below("/nonexistent.txt") is None
        True
    """
    head = read_head(path, limit=64 * 1024)
    if not head or head.lstrip().startswith("{") or JSON_ARRAY.match(head):
        return None
    lines = head.splitlines()
    filled = [i for i, line in enumerate(lines) if line.strip()]
    for k, i in enumerate(filled[:_PREAMBLE_LINES + 1]):
        if k + 1 >= len(filled):
            return None
        header, first = lines[i], lines[filled[k + 1]]
        sep = separator(header)
        if sep not in header:
            continue
        try:
            names = [name.strip() for name in next(csv.reader([header], delimiter=sep))]
            row = next(csv.reader([first], delimiter=sep))
        except csv.Error:
            continue
        if _aligned_by_tabs(names, sep):
            return None
        step_col, loss_col = _sniffed(names, options, path)
        if step_col is not None and loss_col is not None and names.index(step_col) < len(row) \
                and is_number(row[names.index(step_col)]):
            return i if k else None  # a header on the first line is the table sniff's own
    return None


def _aligned_by_tabs(names: list[str], sep: str) -> bool:
    """Whether a tab-separated header has an empty name between its names: a console's table aligned by tabs
    ("LR \\t \\t Train Loss", its rows' empty cells elsewhere), whose cells :mod:`space_table` reads apart.

    Example:
        >>> _aligned_by_tabs(["Epoch", "LR", "", "Train Loss"], chr(9)), _aligned_by_tabs(["", "step", "loss"], chr(9))
        (True, False)
    """
    return sep == "\t" and "" in names[1:-1]


def why_not(path: str | Path) -> str | None:
    """For a CSV / TSV (or JSON rows) with a step column whose loss column is not known (none is
    named like a loss, or several are, as Ultralytics' train/box_loss, train/cls_loss, ...), or a loss column
    and no step column it knows (``total timesteps``): one line that lists its columns and names
    the option. None for anything else.

    Example:
        >>> why_not("/nonexistent.csv") is None
        True
    """
    lines = read_head_lines(path, limit=64 * 1024)
    if len(lines) < 2:
        return None
    if lines[0].lstrip().startswith("{"):  # JSON rows: the keys of their first rows, as the columns
        rows = [row for row in map(_json_row, lines[:_SNIFF_ROWS]) if row is not None]
        header = list(dict.fromkeys(key for row in rows for key in _flatten(row)))
        if len(rows) < 2:
            return None
    else:
        try:
            header = [name.strip() for name in next(csv.reader([lines[0]], delimiter=separator(lines[0])))]
        except csv.Error:
            return None
    if len(header) < 2 or any(_VALUE_IN_NAME.search(name) or _NUMBER_TOKEN.search(name) for name in header):
        # "step_i: 0, training loss: 3.2", MobileFaceNet's "epoch 5, total_step 349550, total loss is
        # 6.06": a log line with commas, not a header
        return None
    shown = ", ".join(header[:30]) + (f", ... ({len(header)} in all)" if len(header) > 30 else "")
    if _wandb_runs([name.lower() for name in header]):
        return (f"{path}: W&B's runs table (one row per run: its config and last values), not a training history: "
                "pass a run's history (a chart's 'Download CSV', or wandb.Api().run(path).history() saved as CSV)")
    if runs_table(header):
        return (f"{path}: a table of one row per run (run_id, metrics.*: mlflow.search_runs()), not a training "
                "history: pass a run's metric history (its mlruns/<experiment>/<run> folder, or "
                "MlflowClient().get_metric_history() saved as CSV)")
    loss = loss_column(header)[0]
    if step_column(header) is None and loss is not None:  # an RL logger's "total timesteps"
        return (f"{path}: a table with a loss column {loss!r} but no step column among: {shown}; "
                "name it with --step-col <column>")
    step = step_column(header)
    if step is None or loss is not None or loss_components(header):
        return None
    others = [name for name in header if name != step]  # (X-VLM's "epoch", its step, is no loss to name)
    shown = ", ".join(others[:30]) + (f", ... ({len(others)} in all)" if len(others) > 30 else "")
    return (f"{path}: a table with a step column, {step!r}, but no single loss column among: {shown}; name it with "
            "--loss-col <column>")


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read one CSV / TSV / JSONL table.

    Reading is bounded (see :mod:`~sentinel.analyze.loaders.numeric_table`): at most
    :data:`~sentinel.analyze.loaders.keys.MAX_COLUMNS` columns, CSVs parsed in chunks, a
    large file keeping only the columns the analysis reads; damaged rows are dropped and
    counted in :attr:`RunData.warnings`.

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
    warnings: list[str] = []
    head = read_head(path, limit=4096) or ""
    first = next((line for line in head.split("\n") if line.strip()), "")
    nan_rows: dict[str, list[int]] = {}
    array = JSON_ARRAY.match(head) is not None
    below = _json_rows_below(head.split("\n")) is not None  # (its lines above them: skipped, with a warning)
    if array or below or _unquoted(first).startswith("{"):
        table = _json_reader(head, first)(Path(path), warnings, nan_rows)
        step_col, loss_col = pick_columns(list(table.columns), options, path, warnings)
        if options.step_col is None:  # a step key in a few rows only (a summary row's) is not the step
            step_col = max(step_columns(table.columns) or [step_col], key=lambda c: table[c].notna().sum())
    else:
        names, sep = read_header(path)
        step_col, loss_col = pick_columns(names, options, path, warnings)
        read_loss = loss_col if loss_col in names else None
        positions = choose_columns(path, names, step_col, read_loss, warnings)
        positions += [names.index(c) for c in loss_components(names) if names.index(c) not in positions]
        table = read_columns(path, sep, names, positions, read_loss, warnings, step_col)
        for col in [c for c in table.columns if c != loss_col and looks_like_eval_loss(str(c))]:
            if table[col].isna().all() and _never_written(path, sep, names.index(col)):
                table = table.drop(columns=col)  # a column named, never logged: no NaN to report
    if loss_col not in table.columns:  # the sum of the loss's components (see pick_columns)
        sum_loss_components(table, loss_components(table.columns), path, warnings)
    json_rows = array or below or first.lstrip().startswith("{")
    parts = table_trainings(table, step_col, loss_col, nan_rows.get(loss_col, ()))
    if parts is None:
        return [_run(table, step_col, loss_col, nan_rows, json_rows, path, run_name(path), warnings)]
    note = trainings_note(path, len(parts))
    runs = []
    for k, rows in enumerate(parts, 1):
        part = table.iloc[rows].reset_index(drop=True)
        for key in (TEXT_LOSS_ROWS, PRINTED_NAN_ROWS):  # the reader's masks of the table's rows, the part's
            if table.attrs.get(key) is not None:
                part.attrs[key] = np.asarray(table.attrs[key])[rows]
        at = {row: i for i, row in enumerate(rows.tolist())}
        part_nan = {col: [at[r] for r in found if r in at] for col, found in nan_rows.items()}
        runs.append(_run(part, step_col, loss_col, part_nan, json_rows, path, f"{run_name(path)}#{k}",
                         [note, *warnings]))
    return runs


def _run(table: pd.DataFrame, step_col: str, loss_col: str, nan_rows: dict[str, list[int]], json_rows: bool,
         path, name: str, warnings: list[str]) -> RunData:
    """One run of a table's rows (:func:`load`'s, or one training's)."""
    if nan_rows.get(loss_col):  # a JSON row's NaN loss is a row of its own (where the rows are numbered)
        printed = np.zeros(len(table), dtype=bool)
        printed[nan_rows[loss_col]] = True
        table.attrs[PRINTED_NAN_ROWS] = printed
    abandoned: list[AbandonedHistory] = []
    steps = table_steps(table, step_col, loss_col, path, warnings, keep_nan_eval=True, abandoned=abandoned)
    steps, unit = step_unit(step_col, steps, path, warnings, abandoned)
    meta = {"format": NAME, "columns": [str(c) for c in table.columns], "loss_column": str(loss_col), **unit}
    if json_rows:  # a JSON row tells a NaN it holds from a key it lacks
        meta[LOGGED_NAN] = _logged_nan(table, nan_rows, step_col, loss_col, steps.columns, steps.attrs.get(ROW_STEPS))
    elif table.attrs.get(PRINTED_NAN_ROWS) is not None and loss_col in table.columns and (
            {"epoch", "step"} <= {str(c) for c in table.columns} or SB3_STEP in table.columns):
        # Lightning's CSVLogger (its metrics.csv under another name: a paste, a renamed file) writes a
        # NaN as 'nan' and a metric a row did not log as an empty cell: its empty step-loss cells at
        # the rows of a metric logged once an epoch were "non-finite". So does Stable-Baselines3's
        # progress.csv (its rows of a rollout before any update, of an evaluation). (Any other CSV's
        # empty cell, a transcription's, may be the NaN a log printed as nothing.)
        printed = {loss_col: np.flatnonzero(table.attrs[PRINTED_NAN_ROWS]).tolist()}
        meta[LOGGED_NAN] = _logged_nan(table, printed, step_col, loss_col, steps.columns, steps.attrs.get(ROW_STEPS))
        meta[LOGGED_NAN_KEYS] = (metrics.LOSS,)  # the other columns' cells are not told apart here
    return RunData(name=name, path=str(path), source=NAME, steps=steps, meta=meta, warnings=warnings,
                   abandoned=abandoned)


# A table read with its rows numbered is read whole: at most this much, and at least this many rows.
_ROWS_IN_ORDER_BYTES = 256 << 20
MIN_ROWS = 3
_NUMBER_TOKEN = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?![\w.])")  # a value, not part of a name


# A JSON row's length, at most, for rows read in order (DETR's log.txt: 92 keys and its COCO stats, 5 KB).
_JSON_ROW_BYTES = 64 * 1024


def load_rows_in_order(path: str | Path, options: LoadOptions | None = None) -> list[RunData] | None:
    """A CSV / TSV / JSONL table named on its own with a loss column and no step column
    (``pd.DataFrame({"loss": losses}).to_csv(path, index=False)``): its rows numbered 1, 2, 3, ...
    in order, with a warning; None for any other file (never in a directory walk, where such a
    table may be anything).

    Example:
        >>> load_rows_in_order("/nonexistent.csv") is None
        True
    """
    options = options or LoadOptions()
    path = Path(path)
    head = read_head(path, limit=4096)
    if not head or options.step_col is not None or path.stat().st_size > _ROWS_IN_ORDER_BYTES:
        return None
    if head.lstrip().startswith("{") and "\n" not in head:
        head = read_head(path, limit=_JSON_ROW_BYTES) or head  # JSON rows of many keys (DETR's log.txt: 5 KB)
    first = next((line for line in head.split("\n") if line.strip()), "")
    if "\n" not in head and len(head) >= 4096:
        return None  # a first line of kilobytes: no table's header (a log pasted without its line ends)
    warnings: list[str] = []
    rows_of_json = JSON_ARRAY.match(head) is not None or first.lstrip().startswith("{")
    try:
        names, sep = ([], ",") if rows_of_json else read_header(path)
        # A header of names, one of them the loss's, before the file is read: a log line read as a
        # header ("step 1 loss=tensor([2.5") holds values.
        if not rows_of_json and (not _a_header_of_a_loss(names, options) or runs_table(names)):
            return None
        if rows_of_json:
            table = _json_reader(head, first)(path, warnings, {})
        else:
            with pywarnings.catch_warnings():  # rows longer than the header: a console's bar after them
                pywarnings.simplefilter("ignore", pd.errors.ParserWarning)
                table = pd.read_csv(path, sep=sep, encoding=text_encoding(path), encoding_errors="replace",
                                    on_bad_lines="skip", header=0, names=names, index_col=False)
    except (ValueError, OSError, csv.Error):
        return None
    columns = [str(c) for c in table.columns]
    if not _a_header_of_a_loss(columns, options) or any(
            len(table.index) > 1 and rises_by_whole_numbers(pd.to_numeric(table[c], errors="coerce").to_numpy())
            for c in table.columns):
        return None  # a column that may be the step under a name not known ("total timesteps"): the user's
    loss_col, inferred = loss_column(columns, options.loss_col)
    if not len(table.index):
        return None
    if inferred:
        warnings.append(f"{path.name}: {inferred_loss_note(loss_col)}")
    table.columns = columns
    table.insert(0, "_row", np.arange(1, len(table.index) + 1))
    steps = table_steps(table, "_row", loss_col, path, warnings, keep_nan_eval=True)
    if len(steps.index) < max(MIN_ROWS, len(table.index) // 2):
        return None  # most rows hold no number in that column: no table of losses
    steps, unit = step_unit("_row", steps, path, epochs := [])
    warnings.insert(0, epochs[0] if epochs else f"{path.name}: no step column among {', '.join(columns[:20])}: rows "
                    "numbered 1, 2, 3, ... in order (--step-col names one)")
    return [RunData(name=run_name(path), path=str(path), source=NAME, steps=steps,
                    meta={"format": NAME, "columns": columns, "step_source": "order", **unit}, warnings=warnings)]


def runs_table(names) -> bool:
    """Whether a header is that of a table of runs, one row each (``mlflow.search_runs()``: a run
    id and the runs' last ``metrics.*``): no history, whatever its columns' names say.

    Example:
        >>> runs_table(["run_id", "status", "metrics.loss", "metrics.val_loss"]), runs_table(["step", "loss"])
        (True, False)
    """
    lowered = [str(name).strip().lower() for name in names]
    return any(name in ("run_id", "run id", "run_uuid") for name in lowered) and \
        any(name.startswith("metrics.") for name in lowered) or _wandb_runs(lowered)


def _wandb_runs(lowered: list[str]) -> bool:
    """Whether lower-cased column names are those of the W&B runs table's CSV export: ``Name``, then
    ``State``, ``Notes``, ``User``, ``Tags``, ``Created``, ``Runtime`` (some hidden), each run's config and
    summary values after them.

    Example:
        >>> _wandb_runs(["name", "state", "notes", "created", "runtime", "lr", "loss"]), _wandb_runs(["name", "loss"])
        (True, False)
    """
    return bool(lowered) and lowered[0] == "name" and "runtime" in lowered and "created" in lowered


def _a_header_of_a_loss(names: list[str], options: LoadOptions) -> bool:
    """Whether ``names`` are a table's column names with a loss among them and no step: names,
    not values (no ``key: 3``, no number of their own), at most :data:`MAX_COLUMNS` of them."""
    if not names or len(names) > MAX_COLUMNS or step_column(names) is not None:
        return False
    if any(_VALUE_IN_NAME.search(n) or _NUMBER_TOKEN.search(n) for n in names):
        return False
    try:
        return loss_column(names, options.loss_col)[0] is not None
    except ValueError:  # --loss-col names no column of it
        return False


def _never_written(path: str | Path, sep: str, position: int) -> bool:
    """Whether every cell of a CSV column is empty: a key that a tracker's history names (W&B's
    export of a run, a DataFrame's ``to_csv``) and no row logged, not a value ``nan`` at every
    row (Ultralytics' results.csv prints that for a validation that failed). Read only for a
    column that came out NaN at every row."""
    try:
        cells = pd.read_csv(path, sep=sep, usecols=[position], dtype=str, keep_default_na=False, na_filter=False,
                            encoding=text_encoding(path), encoding_errors="replace", on_bad_lines="skip").iloc[:, 0]
    except (ValueError, OSError):  # the table was read; this second look must not lose it
        return False
    return bool((cells.str.strip() == "").all())


def _logged_nan(table: pd.DataFrame, nan_rows: dict[str, list[int]], step_col: str, loss_col: str,
                keys, row_steps: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The steps each key was logged as NaN at (``NaN``, ``null`` or ``"nan"`` in its row), by the
    steps frame's key: a step where a key is absent (a summary row, an evaluation row) is no NaN.
    ``row_steps``: each row's step where the rows were numbered (their step column an epoch)."""
    out: dict[str, np.ndarray] = {}
    for col, rows in nan_rows.items():
        key = metrics.LOSS if col == loss_col else canonical_key(col)
        if key not in keys or col == step_col:
            continue
        if row_steps is not None:
            steps = row_steps[rows]
            out[key] = steps[steps >= 0]
            continue
        steps, _ = step_values(table[step_col].iloc[rows], step_col, "", [])
        out[key] = steps
    return out


def _json_reader(head: str, first: str):
    """How a file of JSON rows is read: as an array, as objects printed over several lines each
    (a line of "{" alone: ``json.dumps(indent=...)``), or as JSON lines."""
    if JSON_ARRAY.match(head):
        return _read_json_array
    return _read_json_objects if first.strip() == "{" else _read_jsonl


def _whole_json_text(path: Path, what: str) -> str:
    """The text of JSON that is parsed whole (``what`` it holds, for the message).

    Raises:
        ValueError: larger than :data:`MAX_JSON_ARRAY_BYTES`."""
    size = path.stat().st_size
    if size > MAX_JSON_ARRAY_BYTES:
        raise ValueError(f"{path}: {what} of {size >> 20} MiB: more than is read whole; write the rows as JSON "
                         "lines (one object per line), which are streamed")
    with open(path, encoding=text_encoding(path), errors="replace") as f:
        return f.read()


def _read_json_objects(path: Path, warnings: list[str], nan_rows: dict[str, list[int]]) -> pd.DataFrame:
    """Objects printed over several lines each, one after another (a paste of some of
    ``trainer_state.json``'s ``log_history``: its objects without the array around them), read
    as JSONL rows are; where one is not whole (the paste cut), the whole ones before it.

    Raises:
        ValueError: larger than :data:`MAX_JSON_ARRAY_BYTES`, or no object comes whole."""
    text = _whole_json_text(path, "JSON objects")
    items, damaged = objects_in_sequence(text)
    if len(items) == 1 and damaged is None:
        raise ValueError(f"{path}: one JSON object, not rows of a history (a run's summary, its config): pass the "
                         "file its training logged step by step")
    if damaged is not None:
        line = text.count("\n", 0, damaged) + 1
        if not items:
            raise ValueError(f"{path}: JSON objects damaged at line {line}, before the first complete one: mend "
                             "the file there")
        warnings.append(f"{path.name}: the JSON objects stop being whole at line {line} (cut off?): the "
                        f"{len(items)} complete one(s) before it are read")
    numbered = ((i, item if isinstance(item, dict) else None) for i, item in enumerate(items, start=1))
    return _rows_table(numbered, path, warnings, nan_rows, "value(s) that are not objects", "value")


def _read_jsonl(path: Path, warnings: list[str], nan_rows: dict[str, list[int]]) -> pd.DataFrame:
    """Stream the rows; keys past :data:`MAX_COLUMNS` (or, in a large file, keys the analysis
    does not read) are dropped and counted. ``nan_rows`` gets, per key, the rows that hold it as
    NaN (``NaN``, ``null`` or ``"nan"``)."""
    # Universal line ends: a JSON row cannot hold a raw "\r", so a CR-only file splits safely.
    with open(path, encoding=text_encoding(path), errors="replace", newline=None) as f:
        numbered = ((lineno, _json_row(line)) for lineno, line in enumerate(f, start=1) if line.strip())
        return _rows_table(numbered, path, warnings, nan_rows, "line(s) that are not JSON objects", "line")


def _read_json_array(path: Path, warnings: list[str], nan_rows: dict[str, list[int]]) -> pd.DataFrame:
    """A JSON array of row objects (``json.dump(trainer.state.log_history, f)``, a DataFrame's
    ``to_json(orient="records")``), read as JSONL rows are.

    Raises:
        ValueError: not a JSON array, or larger than :data:`MAX_JSON_ARRAY_BYTES`."""
    text = _whole_json_text(path, "a JSON array")
    try:
        items = json.loads(text)
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply to be a table of rows") from None
    except ValueError as exc:
        items, closed = items_before_damage(text)
        where = f"line {exc.lineno}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else "its start"
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        if not items:
            raise ValueError(f"{path}: a JSON array of rows damaged at {where} ({why}), before its first "
                             "complete row: mend the file there") from None
        warnings.append(f"{path.name}: text after the JSON array, at {where} (a second one appended?): the "
                        f"array's {len(items)} row(s) are read, not what follows" if closed else
                        f"{path.name}: the JSON array is damaged at {where} ({why}; cut off while written?): "
                        f"the {len(items)} complete row(s) before it are read")
    if not isinstance(items, list):
        raise ValueError(f"{path}: not a JSON array of rows")
    numbered = ((i, item if isinstance(item, dict) else None) for i, item in enumerate(items, start=1))
    return _rows_table(numbered, path, warnings, nan_rows, "item(s) of the array that are not objects", "item")


def _rows_table(numbered, path: Path, warnings: list[str], nan_rows: dict[str, list[int]], what: str,
                unit: str) -> pd.DataFrame:
    """The table of JSON row objects, ``numbered`` as ``(number, row or None)`` (None: not an
    object, counted as ``what``)."""
    large = path.stat().st_size > LARGE_TABLE_BYTES
    rows: list[dict] = []
    bad: list[int] = []
    known: dict[str, None] = {}
    dropped: set[str] = set()
    nan_keys: list[str] = []
    for lineno, row in numbered:
        if row is None:
            bad.append(lineno)
            continue
        flat = _flatten(row, keep_text=True, nan_keys=nan_keys)
        split = _split_of(row)
        if split is not None:  # an evaluation row's numbers are its own: val/loss, not the loss
            flat = {k if _is_step_key(k) else f"{split}/{k}": v for k, v in flat.items()}
            nan_keys[:] = [k if _is_step_key(k) else f"{split}/{k}" for k in nan_keys]
        for key in nan_keys:
            nan_rows.setdefault(key, []).append(len(rows))
        nan_keys.clear()
        for key in [k for k in flat if k not in known]:
            wanted = not large or is_analysis_key(canonical_key(key)) or _is_role(key)
            if wanted and (len(known) < MAX_COLUMNS or _is_role(key)):
                known[key] = None
            else:
                dropped.add(key)
                del flat[key]
        rows.append(flat)
    if bad:
        warnings.append(f"{len(bad)} {what} were skipped (first: {unit} {bad[0]})")
    if dropped:
        why = ("keys the analysis does not read are not loaded from a file over "
               f"{LARGE_TABLE_BYTES >> 20} MB" if large and len(known) < MAX_COLUMNS
               else f"at most {MAX_COLUMNS} keys are read")
        warnings.append(f"{path.name}: {len(dropped)} key(s) dropped: {why}")
    return pd.DataFrame.from_records(rows, columns=list(known)) if rows else pd.DataFrame(columns=list(known))


def _split_of(row: dict) -> str | None:
    """The split a JSON row names that is not training (``{"mode": "val", ...}``, mmcv's json
    log; ``{"split": "test", ...}``), or None."""
    for key in SPLIT_COLUMNS:
        value = row.get(key)
        if isinstance(value, str) and value.strip().isalpha() and value.strip().lower() not in TRAIN_WORDS:
            return value.strip().lower()
    return None


def _is_step_key(key: str) -> bool:
    return key.strip().lower() in STEP_ALIASES or key.strip().lower() == "epoch"


def _is_role(key: str) -> bool:
    """A key that can be the step or the loss (always kept, whatever the cap)."""
    lower = key.strip().lower()
    return lower in STEP_ALIASES or lower in LOSS_ALIASES or looks_like_loss(key)


def pick_columns(columns: list[str], options: LoadOptions, path, warnings: list[str]) -> tuple[str, str]:
    """A table's step and loss columns: named in ``options``, else found by name; a loss taken
    from an inferred column adds a warning; several loss terms and no total give ``loss`` (their
    sum, added by the loader).

    Raises:
        ValueError: no step or no loss column; the message lists the columns found.

    Example:
        >>> pick_columns(["global_step", "train_loss", "lr"], LoadOptions(), "t.csv", [])
        ('global_step', 'train_loss')
    """
    found = ", ".join(map(str, columns)) or "none"
    if len(columns) > 50:
        found = ", ".join(map(str, columns[:50])) + f", ... ({len(columns)} in all)"
    step_col = step_column(columns, options.step_col)
    if step_col is None:
        raise ValueError(f"{path}: no step column among: {found}; name it with --step-col <column>")
    named_by_file = value_named_by_file(path, columns, options.loss_col)
    if named_by_file is not None:
        warnings.append(f"{Path(path).name}: loss read from {named_by_file!r} (the file's name says what it "
                        "holds; --loss-col picks another)")
        return step_col, named_by_file
    loss_col, inferred = loss_column(columns, options.loss_col)
    if loss_col is None and loss_components(columns):
        return step_col, metrics.LOSS  # added by load: their sum
    if loss_col is None:
        raise ValueError(f"{path}: no loss column among: {found}; name it with --loss-col <column>")
    if inferred:
        warnings.append(f"{Path(path).name}: {inferred_loss_note(loss_col)}")
    return step_col, loss_col


def _json_row(line: str) -> dict | None:
    """One JSON line's object, or None; a line quoted for an issue or an e-mail (``> {...}``) is
    the object it quotes.

    Example:
        >>> _json_row('> {"loss": 0.5, "step": 1}'), _json_row("[1, 2]")
        ({'loss': 0.5, 'step': 1}, None)
    """
    try:
        row = json.loads(_unquoted(line) if line.lstrip().startswith(">") else line)  # the regex on quoted rows only
    except (ValueError, RecursionError):  # RecursionError: nested too deeply to be a record
        return None
    return row if isinstance(row, dict) else None


def _unquoted(line: str) -> str:
    """``line`` without its leading blanks and the quote marks of a paste (``> {...}``)."""
    return QUOTE_MARKS.sub("", line, count=1).lstrip()


def _flatten(row: dict, keep_text: bool = False, nan_keys: list[str] | None = None) -> dict:
    """Numeric fields of one JSON row, nested objects one level deep as ``outer/inner``.

    With ``keep_text``, string values are kept too (a loss logged as text is damage the loader
    counts; other text columns are dropped later). ``nan_keys`` gets the keys whose value is a
    NaN: ``NaN``, ``"nan"``, or ``null`` (how JSON writers without NaN spell it) in a row that
    logs a training step (:func:`_logs_training`).
    """
    out: dict = {}
    nulls: list[str] = []
    for key, value in _fields(row):
        if isinstance(value, str) and _NUMBER_TEXT.match(value):
            value = float(value)  # a number written as text: ALBEF's and BLIP's log.txt, "train_loss_ita": "3.29523"
        if _is_json_number(value):
            out[str(key)] = value = float(value)
            if nan_keys is not None and value != value:
                nan_keys.append(str(key))
        elif keep_text and isinstance(value, str):
            out[str(key)] = value
            if nan_keys is not None and value.strip().lower() in _NAN_TEXT:
                nan_keys.append(str(key))
        elif nan_keys is not None and value is None:
            nulls.append(str(key))
    if nulls and _logs_training(out):
        nan_keys.extend(key for key in nulls if looks_like_loss(key) or canonical_key(key) == metrics.GRAD_NORM_TOTAL)
    return out


def _logs_training(flat: dict) -> bool:
    """Whether a row holds its learning rate or grad norm as a number: a training step's row, whose
    ``null`` for a training loss or the grad norm is a NaN its writer could not spell. Elsewhere a
    ``null`` is a value not logged (LLaMA-Factory's ``trainer_log.jsonl``: ``"eval_loss": null`` in
    its training rows, ``"loss": null`` in its evaluation rows, its last row's nulls throughout)."""
    return any(canonical_key(key) in (metrics.LR, metrics.GRAD_NORM_TOTAL) and value == value
               for key, value in flat.items() if isinstance(value, float))


_NAN_TEXT = frozenset({"nan", "-nan", "+nan"})
# A number written as text, as "{:.5f}".format(...) writes one (not "1e-4x", not "12 it/s").
_NUMBER_TEXT = re.compile(r"^[ \t]*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?[ \t]*$")


# A statistic's summary as one object: StyleGAN2-ADA's and StyleGAN3's stats.jsonl ({"num": 32, "mean":
# 3.48, "std": 0.89} under "Loss/G/loss"), read as its mean under its own name.
_SUMMARY_FIELDS = frozenset({"num", "mean", "std"})


def _fields(row: dict):
    """``(key, value)`` of a row's fields, a nested object's one level deep as ``outer/inner``, a
    statistic's summary (``num``, ``mean``, ``std``) as its mean.

    Example:
        >>> list(_fields({"Loss/G/loss": {"num": 32, "mean": 3.48, "std": 0.89}, "opt": {"lr": 0.1}}))
        [('Loss/G/loss', 3.48), ('opt/lr', 0.1)]
    """
    for key, value in row.items():
        if isinstance(value, dict) and value.keys() == _SUMMARY_FIELDS:
            yield key, value["mean"]
        elif isinstance(value, dict):
            for inner, inner_value in value.items():
                if not isinstance(inner_value, dict):  # two levels deep: not a metric
                    yield f"{key}/{inner}", inner_value
        else:
            yield key, value


def _is_json_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _head_keys(text: str) -> set[str]:
    """The names of the numeric fields that ``text`` (JSON, perhaps cut off) shows, unescaped.

    Example:
        >>> sorted(_head_keys('[{"_step": 0, "train\\\\/loss": 3.0, "note": "x"}, {"_st'))
        ['_step', 'train/loss']
    """
    keys = set()
    for raw in _JSON_KEY.findall(text):
        try:
            keys.add(json.loads(f'"{raw}"'))
        except ValueError:  # a bad escape: the name as written
            keys.add(raw)
    return keys


def _sniffed(keys, options: LoadOptions | None, path: str | Path | None = None) -> tuple[str | None, str | None]:
    """The step and loss columns of a header as sniffing sees them (see :func:`sniff_columns`)."""
    options = options or LoadOptions()
    step, (loss, _) = sniff_columns(keys, options.step_col, options.loss_col)
    if loss is None and options.loss_col is None and loss_components(keys):
        loss = metrics.LOSS  # the sum of its components
    if loss is None and step is not None and path is not None:
        loss = value_named_by_file(path, keys, options.loss_col)
    return step, loss


# A metric written to a file of its own names it in the file's name alone: its value column goes by
# one of these, beside the step and perhaps a time.
_VALUE_NAMES = frozenset({"value", "values", "y"})
# ... and what exports write beside them: a time, the epoch, a row number (pandas' unnamed index,
# Aim's idx).
_BESIDE_A_VALUE = frozenset({"wall time", "wall_time", "walltime", "timestamp", "time", "wall_clock", "epoch",
                             "idx", "index", "", "unnamed: 0"})


def value_named_by_file(path: str | Path, columns, loss_col: str | None = None) -> str | None:
    """The value column of a metric's own file, where the file's name calls the metric a training
    loss (``train_loss.csv`` of ``step,value`` rows, as a per-metric export writes them); None for
    any other table, or where ``--loss-col`` names a column.

    Example:
        >>> value_named_by_file("exports/train_loss.csv", ["step", "value"])
        'value'
        >>> value_named_by_file("train_loss.csv", ["", "step", "value", "timestamp"])  # Neptune's, to_csv
        'value'
        >>> value_named_by_file("exports/lr.csv", ["step", "value"]), value_named_by_file("loss.csv", ["step", "a", "b"])
        (None, None)
    """
    columns = [str(c) for c in columns]
    step = step_column(columns)
    values = [c for c in columns if c.strip().lower() in _VALUE_NAMES]
    others = [c for c in columns if c != step and c not in values and c.strip().lower() not in _BESIDE_A_VALUE]
    if loss_col is not None or step is None or len(values) != 1 or others:
        return None
    return values[0] if looks_like_loss(Path(path).stem) else None


def separator(header: str) -> str:
    """The cell separator of a CSV or TSV table, from its header line.

    Example:
        >>> separator("step,loss"), separator(chr(9).join(["step", "loss"])) == chr(9)
        (',', True)
    """
    return "\t" if "\t" in header else ","


def is_number(text: str) -> bool:
    """Whether a cell reads as a number (``float`` does: spaces around it, ``nan``, ``1e-3``).

    Example:
        >>> is_number(" 1.05"), is_number("loss")
        (True, False)
    """
    try:
        float(text)  # surrounding spaces too: "1, 1.0528, 4.0179" (Ultralytics' results.csv)
    except ValueError:
        return False
    return True
