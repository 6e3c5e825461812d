"""Loader for per-step metrics written in long form: one row per metric, or one row per split.

Two shapes that scripts write and tools export:

* a name column and a value column, ``step,metric,value`` (``100,train/loss,2.31`` and
  ``100,lr,3e-4`` on rows of their own): each name becomes a column;
* a split column beside the numbers, ``step,split,loss`` (``100,train,2.31`` and
  ``100,val,2.60``): each number becomes ``<split>/<column>`` (``train/loss``, ``val/loss``).
  Read as a plain table, a step's evaluation row stood in for its training loss: every
  evaluation looked like a spike.

Both at once too: Aim's ``query_metrics`` dataframe names each row's metric (``metric.name``) and
its split (``metric.context.subset``): ``train/loss``, ``val/loss``.

The wide table is then read as any other (:mod:`generic_table`'s rules): the loss found among
the columns, every other numeric column kept under its canonical key. The whole file is read (a
long table holds a few numbers per row). A run column (MLflow's chart download, ``Run,Run ID,
metric,step,timestamp,value``, of several runs compared) makes a run of each. In the first form a
row is a value logged: an empty value cell is a NaN written by pandas (``to_csv`` of a metric
history), not a metric absent.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN, LOGGED_NAN_KEYS, LoadOptions, RunData
from sentinel.analyze.loaders.generic_table import JSON_ARRAY, is_number, pick_columns, separator
from sentinel.analyze.loaders.keys import SPLIT_COLUMNS, TRAIN_WORDS, find_column, loss_column, step_column
from sentinel.analyze.loaders.numeric_table import step_values, table_steps
from sentinel.analyze.loaders.textlog import read_head, read_head_lines, read_json, run_name, text_encoding

NAME = "long_table"
DESCRIPTION = "CSV / TSV tables in long form (step, metric, value; or step, split, loss)"
SNIFF_TAKES_OPTIONS = True  # --step-col names the step column a sniff looks for

NAME_COLUMNS = ("metric", "metric_name", "key", "name", "tag", "series", "variable", "metric.name")
VALUE_COLUMNS = ("value", "metric_value", "val", "y")
# A run's id, then its name: a table of several runs' rows (MLflow's chart download).
RUN_COLUMNS = ("run id", "run_id", "runid", "run_uuid", "run.hash", "run", "run name", "run_name", "run.name")
_RUN_NAME_COLUMNS = ("run", "run name", "run_name", "run.name")
_SNIFF_ROWS = 200


def sniff(path: str | Path, options: LoadOptions | None = None) -> bool:
    """True for a CSV / TSV in one of the two long forms (see the module's docstring), or a JSON
    array of metric rows (Comet's ``get_metrics()``: ``metricName``, ``metricValue``, ``step``).

    Example:
        >>> sniff("/nonexistent.csv")
        False
    """
    return _shape(path, options or LoadOptions()) is not None or _json_keys(path) is not None


# A JSON array of one metric value a row, as Comet's API returns it (its value a string).
_JSON_NAME_KEYS = ("metricName", "metric_name", "metric", "name", "key")
_JSON_VALUE_KEYS = ("metricValue", "metric_value", "value")
_JSON_STEP_KEYS = ("step", "global_step", "iteration")
_JSON_KEY = re.compile(r'"([A-Za-z_]\w*)"\s*:')
# The largest such array read whole (a run's metrics: tens of MB).
_MAX_JSON_BYTES = 256 << 20


def _json_keys(path: str | Path) -> tuple[str, str, str] | None:
    """``(name key, value key, step key)`` of a JSON array of metric rows, from its first rows."""
    head = read_head(path, limit=4096)  # the size the other JSON sniffs read (one read of the file for all)
    if not head or not JSON_ARRAY.match(head):
        return None
    keys = set(_JSON_KEY.findall(head))
    found = [next((k for k in choices if k in keys), None) for choices in (_JSON_NAME_KEYS, _JSON_VALUE_KEYS, _JSON_STEP_KEYS)]
    if None in found or loss_column(sorted(keys))[0] is not None:
        return None  # a wide row of its own loss is generic_table's
    return found[0], found[1], found[2]


def _json_table(path: Path, keys: tuple[str, str, str]) -> pd.DataFrame:
    """The array's rows as text cells under the keys' names (a null value an empty cell)."""
    size = path.stat().st_size
    if size > _MAX_JSON_BYTES:
        raise ValueError(f"{path}: a JSON array of {size >> 20} MiB: more than is read whole; save the metrics as "
                         "CSV or JSON lines")
    rows = read_json(path, "valid JSON: save the metrics again")
    if not isinstance(rows, list):
        raise ValueError(f"{path}: not a JSON array of metric rows")
    cells = {key: [] for key in keys}
    for row in rows:
        if isinstance(row, dict):
            for key in keys:
                value = row.get(key)
                cells[key].append("" if value is None else str(value))
    return pd.DataFrame(cells, dtype=str)


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read a long table as one run: its metrics side by side, indexed by step.

    Raises:
        ValueError: not a long table, or no loss among its metrics (the message lists them and
            names ``--loss-col``).

    Example:
        >>> run = load("metrics_long.csv")[0]  # doctest: +SKIP
        >>> list(run.steps.columns)  # doctest: +SKIP
        ['loss', 'lr', 'val_loss']
    """
    options = options or LoadOptions()
    shape = _shape(path, options)
    keys = _json_keys(path) if shape is None else None
    if shape is None and keys is None:
        raise ValueError(f"{path}: not a table in long form (step, metric, value; or step, split, loss)")
    if keys is not None:  # Comet's metric rows
        shape = (",", keys[2], keys[0], keys[1], None)
        table = _json_table(Path(path), keys)
    else:
        table = pd.read_csv(path, sep=shape[0], dtype=str, keep_default_na=False, encoding=text_encoding(path),
                            encoding_errors="replace", on_bad_lines="skip", skipinitialspace=True)
    step_col = shape[1]
    warnings: list[str] = []
    step, keep = step_values(table[step_col], step_col, path, warnings)
    table = table[keep]
    run_col = find_column(list(table.columns), RUN_COLUMNS)
    if run_col is None or table[run_col].nunique() < 2:
        return [_run(path, table, step, shape, options, warnings, run_name(path))]
    name_col = find_column(list(table.columns), _RUN_NAME_COLUMNS)
    runs = []
    for run in pd.unique(table[run_col]):  # in the order the file first shows them
        rows = (table[run_col] == run).to_numpy()
        name = str(table.loc[rows, name_col].iloc[0]).strip() if name_col is not None else str(run).strip()
        runs.append(_run(path, table[rows], step[rows], shape, options, list(warnings), name or str(run)))
    return runs


def _run(path: str | Path, table: pd.DataFrame, step, shape: tuple, options: LoadOptions, warnings: list[str],
         name: str) -> RunData:
    """One run of a long table's rows (``step``: theirs, as integers)."""
    _, step_col, name_col, value_col, split_col = shape
    nan_rows = None
    if name_col is not None:
        names = table[name_col].astype(str).str.strip()
        if split_col is not None:  # Aim's metric.context.subset beside metric.name
            names = table[split_col].astype(str).str.strip().str.lower() + "/" + names
        values = table[value_col].astype(str).str.strip()
        # every row is a value logged: an empty cell is a NaN pandas wrote empty
        nan_rows = pd.DataFrame({"step": step, "name": names.to_numpy()})[values.str.lower().isin(["", "nan"]).to_numpy()]
        parts = [pd.DataFrame({"step": step, "name": names.to_numpy(), "value": values.replace("", "nan").to_numpy()})]
    else:
        splits = table[split_col].astype(str).str.strip().str.lower()
        parts = [pd.DataFrame({"step": step, "name": (splits + "/" + str(col)).to_numpy(), "value": table[col].to_numpy()})
                 for col in table.columns if col not in (step_col, split_col)]
    if split_col is not None:
        seen = sorted(set(table[split_col].astype(str).str.strip().str.lower()))
        warnings.append(f"{Path(path).name}: rows of {len(seen)} splits ({', '.join(seen)}) in the "
                        f"{split_col!r} column: each split's numbers are read as columns of their own "
                        "(train/loss, val/loss, ...)")
    rows = pd.concat(parts, ignore_index=True)
    rows = rows[rows["value"].astype(str).str.strip() != ""]  # a metric not logged at that row
    wide = rows.drop_duplicates(["step", "name"], keep="last").pivot(index="step", columns="name", values="value")
    wide.columns = [str(c) for c in wide.columns]
    wide = wide.reset_index()
    wide_step, loss_col = pick_columns(list(wide.columns), LoadOptions("step", options.loss_col), path, warnings)
    steps = table_steps(wide, wide_step, loss_col, path, warnings, keep_nan_eval=True)
    meta = {"format": NAME, "columns": [c for c in wide.columns if c != "step"]}
    if nan_rows is not None:  # the loss's rows that hold a NaN: logged, where other rows are absent
        meta[LOGGED_NAN] = {metrics.LOSS: sorted(int(s) for s in nan_rows.loc[nan_rows["name"] == loss_col, "step"])}
        meta[LOGGED_NAN_KEYS] = (metrics.LOSS,)
    return RunData(name=name, path=str(path), source=NAME, steps=steps, meta=meta, warnings=warnings)


def _shape(path: str | Path, options: LoadOptions) -> tuple[str, str, str | None, str | None, str | None] | None:
    """``(sep, step column, name column, value column, split column)`` of a long table, or None."""
    lines = read_head_lines(path, limit=64 * 1024)
    if len(lines) < 3 or lines[0].lstrip().startswith("{"):
        return None
    sep = separator(lines[0])
    try:
        rows = list(csv.reader(lines[: _SNIFF_ROWS + 1], delimiter=sep, skipinitialspace=True))
    except csv.Error:
        return None
    header = [name.strip() for name in rows[0]]
    body = [row for row in rows[1:] if len(row) == len(header)]
    if len(body) < 2:
        return None
    try:
        step_col = step_column(header, options.step_col)
    except ValueError:
        return None
    if step_col is None:
        return None
    name_col, value_col = find_column(header, NAME_COLUMNS), find_column(header, VALUE_COLUMNS)
    split_col = _split_column(header)
    # A table with a loss column of its own is wide, whatever else it holds ("name" a run's name).
    if name_col is not None and value_col is not None and loss_column(header)[0] is None:
        names = [row[header.index(name_col)].strip() for row in body]
        if not all(name and not is_number(name) for name in names):
            return None
        if split_col is not None and not {row[header.index(split_col)].strip().lower() for row in body} & TRAIN_WORDS:
            split_col = None  # a column that names no training rows is not their split
        return sep, step_col, name_col, value_col, split_col
    if split_col is None or len(header) < 3:
        return None
    splits = {row[header.index(split_col)].strip().lower() for row in body}
    # a split column names its training rows with one of TRAIN_WORDS
    if not splits & TRAIN_WORDS or not all(s.replace("_", "").isalpha() for s in splits):
        return None
    return sep, step_col, None, None, split_col


def _split_column(header: list[str]) -> str | None:
    """The column that names each row's split: one of :data:`SPLIT_COLUMNS`, or a dotted name
    ending with one (Aim's ``metric.context.subset``)."""
    found = find_column(header, SPLIT_COLUMNS)
    if found is not None:
        return found
    return next((c for c in header if "." in c and c.rsplit(".", 1)[1].strip().lower() in SPLIT_COLUMNS), None)

