"""Reading a delimited table of per-step numbers, bounded in columns and in memory.

Shared by the table loaders (:mod:`generic_table`, :mod:`lightning_csv`). Hostile or damaged
tables are read as far as they are valid, each problem counted in one warning naming the file:

- columns: at most :data:`~sentinel.analyze.loaders.keys.MAX_COLUMNS`; a table larger than
  :data:`LARGE_TABLE_BYTES` keeps only the step, the loss and the columns the analysis reads
  (``lr``, ``grad_norm*``, ``loss_scale``, ``amp/*``, ``attn_*``);
- memory: the file is parsed in chunks of :data:`CHUNK_ROWS` rows, so the parser's own buffers
  stay at one chunk; what is kept is 8 bytes per kept cell (10 million rows of step, loss and
  lr: ~240 MB), never the file's text;
- steps: a step that is not an integer, or does not fit int64 (``1e30``), drops its row;
- loss: a cell holding text drops its row (it was not a measurement); only ``nan``/``inf``
  spellings count as a logged non-finite loss; an empty cell is "not logged".
"""

from __future__ import annotations

import csv
import dataclasses
import re
import warnings as pywarnings
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import COUNTED_ACROSS_EPOCHS, ROWS_NUMBERED, STEP_UNIT, AbandonedHistory, epoch_unit
from sentinel.analyze.loaders.epoch_counts import steps_across_epochs
from sentinel.analyze.loaders.repeated_steps import several_losses_per_step
from sentinel.analyze.loaders.shared_steps import number_shared_steps
from sentinel.analyze.loaders.went_back import fall_backs, replaced_stretches, survivors
from sentinel.analyze.loaders.keys import (
    EPOCH_ALIASES,
    LOG2_LOSS_SCALE_KEYS,
    MAX_COLUMNS,
    NONFINITE_TEXT,
    STEP_LIMIT,
    below_smallest_note,
    canonical_key,
    inferred_loss_note,
    is_analysis_key,
    looks_like_eval_loss,
    loss_column,
    scales_of_log2,
)
from sentinel.analyze.loaders.textlog import last_line_whole, order_columns, settled, text_encoding

# Above this size a table keeps only the columns the analysis reads (see the module docstring).
LARGE_TABLE_BYTES = 64 << 20
# Rows parsed at a time: ~1M rows x a handful of columns is tens of MB of parser buffers.
CHUNK_ROWS = 1 << 20
# The longest header line read (a header of 2 million column names is ~20 MB).
_MAX_HEADER_BYTES = 64 << 20
# Where read_columns leaves the mask of rows whose loss cell was text.
TEXT_LOSS_ROWS = "text_loss_rows"
# Where table_steps leaves the step it gave each of the table's rows, where it numbered them or made
# their counts inside each epoch steps across epochs.
ROW_STEPS = "row_steps"
# Where read_columns leaves the mask of rows whose loss cell printed NaN (not left empty).
PRINTED_NAN_ROWS = "printed_nan_rows"
# Where read_columns says the loss cells that were text are all numbers with a decimal comma (2,5).
DECIMAL_COMMA = "decimal_comma"
_DECIMAL_COMMA = r"\s*[-+]?\d+,\d+\s*"
_TEXT_LOSS = "__text_loss__"
# Cells that mean "no value" in a loss column (the loss was not logged at that step).
# "No log": the Hugging Face Trainer's notebook table, where no training loss was logged since the
# previous evaluation row.
_MISSING_TEXT = frozenset({"", "na", "n/a", "null", "none", "#n/a", "<na>", "no log", "-"})
# A line end as the table parser sees one: "\n", "\r\n", or a bare "\r".
_LINE_END = re.compile(r"\r\n?|\n")
# Cells that mean "no value" in the other numeric columns: pandas' defaults.
# A step or epoch cell written N/M, of a total (Ultralytics' "1/100", yolov3's "0/299"): the step is N.
STEP_OF_TOTAL = re.compile(r"^(\d+)/\d+$")
_NA_VALUES = ["", "NA", "N/A", "n/a", "NaN", "nan", "-NaN", "-nan", "null", "NULL", "None", "#N/A", "<NA>"]


def read_header(path: str | Path, sep: str | None = None) -> tuple[list[str], str]:
    """The column names of a delimited file and its separator (tab when the header has one).

    A name that repeats is numbered (``loss``, ``loss.1``), so every column has its own name.

    Example:
        >>> read_header("/nonexistent.csv")  # doctest: +SKIP
        FileNotFoundError: ...
    """
    with open(path, encoding=text_encoding(path), errors="replace", newline="") as f:
        line = f.readline(_MAX_HEADER_BYTES)
    # A bare "\r" ends the line too (classic Mac, some spreadsheet exports), as for the parser.
    text = _LINE_END.split(line, maxsplit=1)[0]
    if sep is None:
        sep = "\t" if "\t" in text else ","
    if not text.strip():
        return [], sep
    return numbered_names(c.strip() for c in next(csv.reader([text], delimiter=sep))), sep


def numbered_names(names) -> list[str]:
    """Column names with each repeat numbered, as pandas does: ``loss``, ``loss.1``.

    Example:
        >>> numbered_names(["step", "loss", "loss"])
        ['step', 'loss', 'loss.1']
    """
    out: list[str] = []
    seen: set[str] = set()
    last: dict[str, int] = {}  # each name's last number: a run of repeats is numbered in one pass
    for name in names:
        base, n = name, last.get(name, 0)
        while name in seen:
            n += 1
            name = f"{base}.{n}"
        last[base] = n
        seen.add(name)
        out.append(name)
    return out


def sum_loss_components(table: pd.DataFrame, parts: list[str], path, warnings: list[str]) -> None:
    """Add the loss as the sum of its component columns (NaN where one is missing), and say so.

    Example:
        >>> t = pd.DataFrame({"train/a_loss": ["1", "2"], "train/b_loss": [0.5, None]})
        >>> sum_loss_components(t, ["train/a_loss", "train/b_loss"], "r.csv", w := []); t["loss"].tolist(), w
        ([1.5, nan], ['r.csv: loss is the sum of train/a_loss + train/b_loss (no column is the total; --loss-col picks one)'])
    """
    with pywarnings.catch_warnings():  # (a table of hundreds of columns is fragmented: pandas says so)
        pywarnings.simplefilter("ignore", pd.errors.PerformanceWarning)
        table[metrics.LOSS] = table[parts].apply(pd.to_numeric, errors="coerce").sum(axis=1, min_count=len(parts))
    printed = np.zeros(len(table), dtype=bool)
    for part in parts:  # a term printed as NaN: the sum's NaN was printed (a bar's "nan  nan  nan" row)
        if not pd.api.types.is_numeric_dtype(table[part].dtype):
            printed |= loss_cells(table[part])[2]
    if printed.any():
        table.attrs[PRINTED_NAN_ROWS] = printed
    warnings.append(f"{Path(path).name}: loss is the sum of {' + '.join(parts)} (no column is the total; "
                    "--loss-col picks one)")


def choose_columns(path: str | Path, names: list[str], step_col: str, loss_col: str | None,
                   warnings: list[str]) -> list[int]:
    """Positions of the columns to read: step and loss first, then the others, bounded.

    Example:
        >>> choose_columns("m.csv", ["step", "loss", "tokens"], "step", "loss", [])  # doctest: +SKIP
        [0, 1, 2]
    """
    path = Path(path)
    large = path.stat().st_size > LARGE_TABLE_BYTES
    first = [names.index(step_col)] + ([names.index(loss_col)] if loss_col is not None else [])
    rest = [i for i, name in enumerate(names) if i not in first
            and (not large or is_analysis_key(canonical_key(name)))]
    if large and len(first) + len(rest) < len(names):
        warnings.append(f"{path.name}: {len(names) - len(first) - len(rest)} column(s) the analysis does not "
                        f"read were not loaded (a table over {LARGE_TABLE_BYTES >> 20} MB keeps step, loss, "
                        "lr, grad_norm*, loss_scale, amp/*, attn_*)")
    room = MAX_COLUMNS - len(first)
    if len(rest) > room:
        warnings.append(f"{path.name}: {len(rest) - room} of {len(names)} columns dropped: "
                        f"at most {MAX_COLUMNS} columns are read")
        rest = rest[:room]
    return first + rest


def read_columns(path: str | Path, sep: str, names: list[str], positions: list[int],
                 loss_col: str | None, warnings: list[str], step_col: str | None = None) -> pd.DataFrame:
    """Read the chosen columns in chunks; the rows whose loss was text are in
    ``table.attrs[TEXT_LOSS_ROWS]``.

    Each chunk is reduced at once to numpy columns: the loss and every other column to float64
    (text is NaN; the loss through :func:`loss_values`, so text is also flagged), the step column
    (``step_col``) kept as int64 while every chunk is integer. The parser's own frames never
    accumulate, and a loss column of numbers is parsed by the C parser, not as Python strings.

    A last line without its line end (a run killed while writing) and rows with more fields
    than the header are dropped and counted.
    """
    path = Path(path)
    labels = [f"c{i}" for i in range(len(names))]
    loss_label = labels[names.index(loss_col)] if loss_col is not None else None
    step_label = labels[names.index(step_col)] if step_col is not None else None
    kept = [labels[i] for i in positions]
    na_values = {labels[i]: _NA_VALUES for i in positions if labels[i] != loss_label}
    chunks = _quotes_as_text_if_need_be(
        lambda quoting: _Chunks(path, sep, labels, positions, na_values, kept, loss_label, step_label, quoting),
        path.name, warnings)
    parts, text_parts, printed_parts = chunks.parts, chunks.text_parts, chunks.printed_parts
    integer_steps, decimal_comma = chunks.integer_steps, chunks.decimal_comma
    _say_skipped(chunks.caught, path.name, warnings)
    columns: dict[str, np.ndarray] = {}
    for label in kept:
        pieces = parts.pop(label)  # freed column by column: one column's copy at a time
        if label == step_label and not integer_steps:
            pieces = [p.astype("float64") for p in pieces]
        columns[label] = np.concatenate(pieces) if pieces else np.zeros(0)
        del pieces
    text = np.concatenate(text_parts) if text_parts else None
    printed = np.concatenate(printed_parts) if printed_parts else None
    rows = len(next(iter(columns.values()))) if columns else 0
    if rows > 0 and not _ends_with_newline(path) and not settled(path) and not _last_line_whole(path):
        # A cut row still parses ("2.3" from "2.3417"), so it cannot be trusted while the file
        # is being written.
        warnings.append(f"{path.name}: last line has no line end (cut off while written?): skipped (it is "
                        "read once the file has not changed for a minute)")
        columns = {label: column[:-1] for label, column in columns.items()}
        text = text[:-1] if text is not None else None
        printed = printed[:-1] if printed is not None else None
    table = pd.DataFrame(columns, copy=False)
    table.columns = [names[i] for i in positions]  # header names, duplicates and all
    if text is not None:
        table.attrs[TEXT_LOSS_ROWS] = text
        table.attrs[PRINTED_NAN_ROWS] = printed
    table.attrs[DECIMAL_COMMA] = bool(decimal_comma)
    return table


_STEP_OF_TOTAL = r"^\s*(\d+)\s*/\s*\d+\s*$"


def step_values(raw: pd.Series, column: str, path: str | Path, warnings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Integer steps and the mask of rows that have one.

    Rows without a numeric step, with a non-integral one, or with one that does not fit int64
    are dropped (each kind counted in a warning).

    Raises:
        ValueError: no row has a usable step (the message names the column and the fix).

    Example:
        >>> steps, keep = step_values(pd.Series([0, 1.5, 1e30, 3]), "step", "m.csv", [])
        >>> steps.tolist(), keep.tolist()
        ([0, 3], [True, False, False, True])
    """
    name = Path(path).name
    if raw.dtype == np.int64:  # every step an integer that fits (2**63 - 1 too: not via float64)
        return raw.to_numpy(), np.ones(len(raw), dtype=bool)
    if not pd.api.types.is_numeric_dtype(raw.dtype):  # "12/2353": a step out of the run's steps (ms-swift's global_step/max_steps)
        counts = raw.astype("string").str.extract(_STEP_OF_TOTAL, expand=False)
        if counts.notna().any():
            raw = raw.where(counts.isna(), counts)
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype="float64")
    numeric = ~np.isnan(values)
    if (~numeric).any():
        warnings.append(f"{name}: {int((~numeric).sum())} row(s) without a numeric {column!r} were skipped")
    with np.errstate(invalid="ignore"):
        fits = numeric & (np.abs(values) < STEP_LIMIT)
        integral = fits & (np.mod(values, 1) == 0)
    if (numeric & ~fits).any():
        warnings.append(f"{name}: {int((numeric & ~fits).sum())} row(s) with a {column!r} too large for a "
                        "64-bit step (e.g. 1e30) were skipped")
    if (fits & ~integral).any():
        if not integral.any():
            raise ValueError(f"{path}: step column {column!r} has non-integer values; "
                             "name an integer one with --step-col")
        warnings.append(f"{name}: {int((fits & ~integral).sum())} row(s) with a non-integer {column!r} were skipped")
    if pd.api.types.is_integer_dtype(raw.dtype):
        return raw.to_numpy(dtype="int64")[integral], integral
    return values[integral].astype("int64"), integral


class _Chunks:
    """The chosen columns of a CSV read in chunks, each reduced at once to numpy arrays (see
    :func:`read_columns`); ``caught``: the parser's warnings (rows skipped)."""

    def __init__(self, path: Path, sep: str, labels: list[str], positions: list[int], na_values: dict,
                 kept: list[str], loss_label: str | None, step_label: str | None, quoting: int) -> None:
        self.parts: dict[str, list[np.ndarray]] = {label: [] for label in kept}
        self.text_parts: list[np.ndarray] = []
        self.printed_parts: list[np.ndarray] = []
        self.integer_steps = True
        self.decimal_comma: bool | None = None  # every text loss cell a number with a decimal comma
        with pywarnings.catch_warnings(record=True) as caught:
            pywarnings.simplefilter("always", pd.errors.ParserWarning)
            reader = pd.read_csv(path, sep=sep, header=0, names=labels, usecols=positions,
                                 keep_default_na=False, na_values=na_values, on_bad_lines="warn",
                                 encoding=text_encoding(path), encoding_errors="replace", skip_blank_lines=True,
                                 chunksize=CHUNK_ROWS, low_memory=True, quoting=quoting)
            with reader:
                for chunk in reader:
                    for label in kept:
                        self._add(label, chunk[label], loss_label, step_label)
                    del chunk
        self.caught = caught

    def _add(self, label: str, column: pd.Series, loss_label: str | None, step_label: str | None) -> None:
        parts = self.parts[label]
        if label == loss_label:
            values, text, printed = loss_cells(column)  # numbers parsed by the C parser are float
            parts.append(values.to_numpy(dtype="float64"))
            self.text_parts.append(text)
            self.printed_parts.append(printed)
            if text.any():
                self.decimal_comma = self.decimal_comma is not False and bool(
                    column[text].astype(str).str.fullmatch(_DECIMAL_COMMA).all())
        elif label == step_label and pd.api.types.is_integer_dtype(column.dtype):
            parts.append(column.to_numpy(dtype="int64"))
        else:
            if label == step_label:
                self.integer_steps = False
            numbers = pd.to_numeric(column, errors="coerce")
            parts.append(numbers.to_numpy(dtype="float64", na_value=np.nan))


def _quotes_as_text_if_need_be(read, name: str, warnings: list[str]):
    """``read(csv.QUOTE_MINIMAL)``; where a quote mark opens a cell that never closes (pandas'
    parser then stops at the end of the file), ``read(csv.QUOTE_NONE)`` with a warning: the rows
    holding quote marks have text cells and drop out, counted, and the rest of the run is read.

    Raises:
        ValueError: the parser stops even so (one message naming the file).
    """
    try:
        return read(csv.QUOTE_MINIMAL)
    except pd.errors.ParserError as error:
        warnings.append(f"{name}: {_quote_problem(error)}: read again with quote marks taken as text")
    try:
        return read(csv.QUOTE_NONE)
    except pd.errors.ParserError as again:
        raise ValueError(f"{name}: the CSV parser stopped ({again}): check the file's separators and "
                         "quote marks") from None


def _quote_problem(error: Exception) -> str:
    """pandas' tokenizer error in words: ``EOF inside string starting at row 6``."""
    row = re.search(r"inside string starting at row (\d+)", str(error))
    if row is None:
        return f"the CSV parser stopped ({error})"
    return f"a quote mark on line {int(row.group(1)) + 1} opens a cell that never closes"


def read_csv_skipping(source, name: str, warnings: list[str], **kwargs) -> pd.DataFrame:
    """``pd.read_csv(source, **kwargs)`` with rows of more fields than the header skipped and
    counted in ``warnings`` (a stray separator in a cell, two rows run together), where the
    parser would stop the whole read with its own message.

    Example:
        >>> import io
        >>> read_csv_skipping(io.StringIO("a,b\\n1,2\\n3,4,5\\n"), "t.csv", w := []).shape, w
        ((1, 2), ['t.csv: 1 row(s) with more fields than the header were skipped'])
    """
    def read(quoting: int) -> pd.DataFrame:
        if hasattr(source, "seek"):
            source.seek(0)
        table = pd.read_csv(source, on_bad_lines="warn", quoting=quoting, **kwargs)
        if quoting == csv.QUOTE_NONE:  # the header's own quote marks taken off
            table.columns = [_unquoted(str(c)) for c in table.columns]
        return table

    with pywarnings.catch_warnings(record=True) as caught:
        pywarnings.simplefilter("always", pd.errors.ParserWarning)
        table = _quotes_as_text_if_need_be(read, name, warnings)
    _say_skipped(caught, name, warnings)
    return table


def _unquoted(name: str) -> str:
    """A header cell read with quote marks taken as text, as the csv format means it."""
    return name[1:-1].replace('""', '"') if len(name) >= 2 and name[0] == name[-1] == '"' else name


def _say_skipped(caught: list, name: str, warnings: list[str]) -> None:
    bad = sum(str(w.message).count("Skipping line") for w in caught if issubclass(w.category, pd.errors.ParserWarning))
    if bad:
        warnings.append(f"{name}: {bad} row(s) with more fields than the header were skipped")


def loss_values(raw: pd.Series) -> tuple[pd.Series, np.ndarray]:
    """The loss as float64, and the mask of cells that hold text (not a number).

    Empty cells and NA markers are NaN (not logged); ``nan``/``inf`` spellings are NaN/Inf
    (logged non-finite values); any other text is NaN and flagged in the mask.

    Example:
        >>> values, text = loss_values(pd.Series(["2.5", "nan", "", "oops", "-inf"]))
        >>> values.tolist(), text.tolist()
        ([2.5, nan, nan, nan, -inf], [False, False, False, True, False])
    """
    values, text, _ = loss_cells(raw)
    return values, text


def loss_cells(raw: pd.Series) -> tuple[pd.Series, np.ndarray, np.ndarray]:
    """:func:`loss_values`, and the mask of cells that printed NaN (``nan``, ``-NaN``: a logged
    NaN, told from an empty cell or a missing marker such as ``NA``).

    Example:
        >>> loss_cells(pd.Series(["2.5", "nan", "", "NULL", "-NaN", "inf"]))[2].tolist()
        [False, True, False, False, True, False]
    """
    if pd.api.types.is_numeric_dtype(raw.dtype):
        values = raw.astype("float64")
        return values, np.zeros(len(raw), dtype=bool), np.isnan(values.to_numpy())
    numbers = pd.to_numeric(raw, errors="coerce").astype("float64")
    unparsed = np.flatnonzero(numbers.isna().to_numpy())
    text = np.zeros(len(raw), dtype=bool)
    printed = np.zeros(len(raw), dtype=bool)
    if len(unparsed):
        # Empty cells are most of them in a table of train and val rows: no word to read there.
        rest = unparsed[(raw.iloc[unparsed] != "").to_numpy()]
        if len(rest):
            cells = raw.iloc[rest]
            is_str = cells.map(lambda v: isinstance(v, str)).to_numpy(dtype=bool)
            words = cells.astype(str).str.strip().str.lower()
            nonfinite = is_str & words.isin(NONFINITE_TEXT).to_numpy()
            missing = ~is_str | words.isin(_MISSING_TEXT).to_numpy()
            text[rest] = ~(nonfinite | missing)
            infinite = words.str.contains("inf").to_numpy() & nonfinite
            numbers.iloc[rest] = np.where(infinite, np.where(words.str.startswith("-").to_numpy(), -np.inf, np.inf),
                                          np.nan)
            printed[rest] = nonfinite & ~infinite
    return numbers, text, printed


def merge_steps(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (indexed by step) with one row per step, in step order: rows of one step (a
    train row and a val row, or a step logged again after a restart) merge, the last non-empty
    cell of each column winning. A frame already in strictly increasing steps is returned as is.
    """
    step = frame.index.to_numpy()
    if len(step) < 2 or bool((step[1:] > step[:-1]).all()):
        return frame
    if frame.index.has_duplicates:
        return frame.groupby(level=0, sort=True).last()
    return frame.sort_index()


def timed_series(timed: dict[str, pd.DataFrame], loss_col: str | None, where: str | Path, warnings: list[str],
                 what: str = "metric", require_loss: bool = True, logged_nan: dict[str, list[int]] | None = None
                 ) -> tuple[pd.DataFrame, list[AbandonedHistory]]:
    """:func:`metric_series_frame` of a tracker's records that carry their time (``time``,
    ``step``, ``value`` columns, in the order written: MLflow's), and the stretches a resumed run
    replaced. Where the loss's steps go back in time order (a run resumed from an earlier
    checkpoint into the same tracker run), every metric's records written before the later history
    began, at its first step or after, are replaced (a step logged twice keeps its last value).
    ``logged_nan``: as :func:`metric_series_frame`'s.

    Example:
        >>> rec = lambda t, s, v: pd.DataFrame({"time": t, "step": s, "value": v})
        >>> timed = {"loss": rec([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 3, 4], [3.0, 2.0, 9.0, 9.5, 1.9, 1.8])}
        >>> frame, replaced = timed_series(timed, None, "run", [])
        >>> frame["loss"].tolist(), [(r.resumed_at, r.first, r.last) for r in replaced]
        ([3.0, 2.0, 1.9, 1.8], [(3, 3, 4)])
    """
    loss_key = loss_column(list(timed), loss_col)[0]
    timed = _numbered_where_shared(timed, loss_key, warnings)
    resumes: list[tuple[float, int]] = []  # each later history's (time, first step)
    abandoned: list[AbandonedHistory] = []
    if loss_key is not None:
        loss = timed[loss_key]
        steps = loss["step"].to_numpy(dtype="float64")
        starts = fall_backs(steps)
        times = loss["time"].to_numpy(dtype="float64")
        resumes = [(times[k], steps[k]) for k in starts]
        for stretch in replaced_stretches(steps, starts):
            k = stretch.index
            before = {key: _replaced_by(records, resumes[:k], until=resumes[k][0], since=steps[stretch.rows[0]])
                      for key, records in timed.items()}
            nan_before: dict[str, list[int]] = {}
            frame = metric_series_frame(_last_per_step(before), loss_key, where, [], what, require_loss=False,
                                        logged_nan=nan_before)
            abandoned.append(AbandonedHistory(stretch.resumed_at, stretch.first, stretch.last, frame,
                                              logged_nan=nan_before))
    kept = {key: _replaced_by(records, resumes) for key, records in timed.items()}
    frame = metric_series_frame(_last_per_step(kept), loss_col, where, warnings, what, require_loss=require_loss,
                                logged_nan=logged_nan)
    return frame, abandoned


def _numbered_where_shared(timed: dict[str, pd.DataFrame], loss_key: str | None,
                           warnings: list[str]) -> dict[str, pd.DataFrame]:
    """``timed`` with the records of a key that share their steps (``mlflow.log_metric(key, v)``
    without a step: all at step 0) numbered in time order (:func:`number_shared_steps`)."""
    written = {key: (records["step"].to_numpy(dtype="int64"), records["value"].to_numpy())
               for key, records in timed.items()}
    steps_before = {key: steps for key, (steps, _) in written.items()}
    number_shared_steps(written, loss_key, warnings)
    return {key: (records if written[key][0] is steps_before[key] else records.assign(step=written[key][0]))
            for key, records in timed.items()}


def _replaced_by(records: pd.DataFrame, resumes: list[tuple[float, int]], until: float | None = None,
                 since: float | None = None) -> pd.DataFrame:
    """``records`` without those a later history replaced (written before it, at or past its first
    step); with ``until``, only those written before that time, and with ``since``, from that step."""
    time, step = records["time"].to_numpy(dtype="float64"), records["step"].to_numpy(dtype="float64")
    keep = np.ones(len(records), dtype=bool) if until is None else time < until
    for at, first in resumes:
        keep &= ~((time < at) & (step >= first))
    if since is not None:
        keep &= step >= since
    return records[keep]


def _last_per_step(timed: dict[str, pd.DataFrame]) -> dict[str, pd.Series]:
    """Each metric's value by step (a step logged twice keeps its last value, in time order)."""
    return {key: pd.Series(records["value"].to_numpy(dtype="float64"),
                           index=records["step"].to_numpy(dtype="int64")).groupby(level=0).last()
            for key, records in timed.items() if len(records)}


def metric_series_frame(series: dict[str, pd.Series], loss_col: str | None, where: str | Path,
                        warnings: list[str], what: str = "column", require_loss: bool = True,
                        logged_nan: dict[str, list[int]] | None = None) -> pd.DataFrame:
    """One steps frame of a tracker's metrics, each on its own steps (MLflow's files, Sacred's
    lists): the loss picked among their names (the user's ``--loss-col``, a known name, else by its
    words, said in ``warnings``), the others under sentinel's keys; int64 steps, float64 values.
    ``require_loss=False``: a run with no loss among several (an evaluation run) is read without
    one, the message in ``warnings``. ``logged_nan``, where given, is filled with each column's
    steps whose value its series holds as NaN (``RunData.meta[LOGGED_NAN]``): each metric lists
    its own steps, so a step one metric has and the loss lacks is no NaN loss (DVCLive's Hugging
    Face callback writes the training's summary at a step past the loss's last).

    Raises:
        ValueError: no loss among the names (the message lists them and names the option), where
            one is required.

    Example:
        >>> frame = metric_series_frame({"train.loss": pd.Series([2.0, 1.5], index=[1, 2])}, None, "m", [])
        >>> frame.columns.tolist(), frame.index.tolist()
        (['loss'], [1, 2])
    """
    loss_key, inferred = loss_column(list(series), loss_col)
    if loss_key is None:
        problem = f"{where}: no loss metric among: {', '.join(series)}; name it with --loss-col"
        if require_loss:
            raise ValueError(problem)
        warnings.append(problem)
    if inferred:
        warnings.append(inferred_loss_note(loss_key, what))
    columns = {}
    for key, values in series.items():
        name = metrics.LOSS if key == loss_key else canonical_key(key)
        columns[name if name != metrics.LOSS or key == loss_key else key] = values
    if logged_nan is not None:
        for name, values in columns.items():
            at = values.index[np.isnan(values.to_numpy(dtype="float64"))]
            if len(at):
                logged_nan[name] = [int(step) for step in at]
    steps = pd.DataFrame(columns).sort_index()
    steps.index = steps.index.astype("int64")
    steps.index.name = metrics.STEP
    return steps.astype("float64")


def _last_line_whole(path: Path) -> bool:
    """:func:`last_line_whole` of the file's end (a row ending in ``nan`` was not cut)."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        f.seek(max(f.tell() - 256, 0))
        tail = f.read()
    return last_line_whole(tail.decode(text_encoding(path) or "utf-8", errors="replace"))


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(0, 2)
        if f.tell() == 0:
            return True
        f.seek(max(f.tell() - 2, 0))
        last = f.read(2)
    # A bare "\r" ends a line too (see _LINE_END); in UTF-16 a line end is two bytes.
    return last[-1:] in (b"\n", b"\r") or last in ("\n".encode("utf-16-le"), "\r".encode("utf-16-le"))


def table_steps(table: pd.DataFrame, step_col: str, loss_col: str, path, warnings: list[str],
                keep_nan_eval: bool = False, abandoned: list[AbandonedHistory] | None = None,
                batch_rows: bool = True) -> pd.DataFrame:
    """A table's steps frame: its numeric columns under sentinel's keys (the loss column as
    ``loss``), indexed by integer step; rows without a step or whose loss is text are dropped
    and counted in ``warnings``. A column with no number is dropped (text), except, with
    ``keep_nan_eval``, an evaluation loss printed as ``nan`` at every row (a CSV's float column).
    Where the steps of the rows with a loss go back (a resumed run appending to the file), the
    rows written after replace the earlier ones from their first step; each stretch replaced goes
    to ``abandoned`` (where given). Where the step is an epoch column that holds several loss rows
    each, the rows are numbered in file order (:func:`_rows_of_epochs`), unless ``batch_rows`` is
    False (a progress bar's redraws of one row: its last draw is the epoch's).

    Columns are taken as numpy arrays and indexed only when rows are dropped, so a large table
    that needs no row dropped, merged or sorted becomes the frame without a copy.

    Example:
        >>> t = pd.DataFrame({"iter": [1, 2], "nll": ["2.5", "oops"], "lr": [0.1, 0.1]})
        >>> table_steps(t, "iter", "nll", "m.csv", w := []).to_dict("list"), w
        ({'loss': [2.5], 'lr': [0.1]}, ["m.csv: 1 row(s) whose 'nll' is text, not a number, were skipped"])
    """

    loss_col = _logged_loss_column(table, loss_col, path, warnings)
    columns = list(table.columns)
    step, keep = step_values(table[step_col], step_col, path, warnings)
    loss, text, printed = _loss_cells_of(table, loss_col)
    if text[keep].any():
        comma = bool(table.attrs.get(DECIMAL_COMMA))
        warnings.append(f"{Path(path).name}: {int(text[keep].sum())} row(s) whose {loss_col!r} is text, "
                        "not a number, were skipped" + (" (numbers written with a decimal comma, as 2,5: "
                                                       "export them with a decimal point)" if comma else ""))
    use = keep & ~text  # rows with a step and no text loss
    every = bool(use.all())
    if not every:
        step = step[~text[keep]]

    def rows(values: np.ndarray) -> np.ndarray:
        return values if every else values[use]

    renamed: dict[str, np.ndarray] = {metrics.LOSS: rows(loss.to_numpy(dtype="float64"))}
    for col in columns:
        if col in (step_col, loss_col):
            continue
        column = table[col]
        if column.dtype != np.float64:
            column = pd.to_numeric(column, errors="coerce")
        full = column.to_numpy(dtype="float64", na_value=np.nan)
        if np.isnan(full if every else full[keep]).all() and not (
                keep_nan_eval and table[col].dtype == np.float64 and looks_like_eval_loss(str(col))):
            continue  # a text column (names, paths, timestamps); an evaluation's loss that is NaN stays
        values = rows(full)
        key = canonical_key(str(col))
        if key in LOG2_LOSS_SCALE_KEYS:  # the scale's base-2 logarithm
            note = below_smallest_note(values, repr(col))
            if note is not None:
                warnings.append(f"{Path(path).name}: {note}")
            key, values = metrics.LOSS_SCALE, scales_of_log2(values)
        if key in renamed:  # a second loss-like or lr-like column keeps its own name
            key = str(col).strip().lower()
        if key in renamed:
            warnings.append(f"column {col!r} clashes with another of the same name: skipped")
            continue
        renamed[key] = values
    counted = _batches_of_epochs(step, table, columns, step_col, rows, path, warnings) \
        if epoch_unit(step_col) else None
    if counted is not None:
        step = counted
    numbered = _rows_of_epochs(step, renamed[metrics.LOSS], None if printed is None else rows(printed), step_col,
                               path, warnings) if batch_rows and counted is None else None
    across = None
    if numbered is None:
        # (a training row whose loss is a printed NaN is a training row: its count is the epoch's)
        trained = ~np.isnan(np.asarray(renamed[metrics.LOSS], dtype="float64"))
        if printed is not None:
            trained |= rows(np.asarray(printed, dtype=bool))
        across = _count_across_epochs(step, table, columns, step_col, rows, path, warnings, trained)
        across, step = (None if across is step else across), across
    frame = pd.DataFrame(renamed, index=pd.Index(step if numbered is None else numbered, name=metrics.STEP), copy=False)
    if abandoned is not None:
        frame = went_back_rows(frame, abandoned)
    # (a bar's redraws of one row alone: elsewhere a printed "NaN" may be a cell pandas showed empty)
    gone_nan = _last_printed_nan(frame, rows(np.asarray(printed, dtype=bool))) \
        if printed is not None and not batch_rows else None
    # (16 ranks' untagged rows a step; not a bar's redraws of its running mean, whose last is the epoch's)
    if batch_rows and metrics.LOSS in frame.columns and frame.index.has_duplicates:
        said = several_losses_per_step(frame.index.to_numpy(), frame[metrics.LOSS].to_numpy(dtype="float64"))
        if said is not None:
            warnings.append(said)
    frame = order_columns(merge_steps(frame))
    if gone_nan is not None and len(gone_nan):
        frame.loc[gone_nan, metrics.LOSS] = np.nan
    if counted is not None:
        frame.attrs[COUNTED_ACROSS_EPOCHS] = True
    if numbered is not None:
        frame.attrs[ROWS_NUMBERED] = True
    if numbered is not None or across is not None or counted is not None:
        per_row = np.full(len(table), -1, dtype=np.int64)
        per_row[use] = numbered if numbered is not None else step
        frame.attrs[ROW_STEPS] = per_row  # each table row's step (-1: no row of the frame)
    return frame


# The names a table's rows go by where it has no step column of its own: its index (``""``, or
# ``Unnamed: 0`` once pandas read it) and the loaders' numbering in order.
ROW_NUMBER_NAMES = ("", "unnamed: 0", "_row")


# Rows with a loss, at least, in each training of a table that holds several (see table_trainings).
TRAINING_ROWS = 2


def table_trainings(table: pd.DataFrame, step_col: str, loss_col: str, nan_rows=()) -> list[np.ndarray] | None:
    """The rows of each training where a table holds several written one after another (detectron2's
    metrics.json of each launch into one output folder; a notebook's two ``trainer.train()``
    tables): its rows with a loss go back and start again from the first step, or from their own
    first logging interval (``100, 200, ...`` after a training that logged from 50), each stretch
    two such rows or more; else None (a resume from a later step is the went-back rows' business).
    ``nan_rows``: rows whose loss was printed as NaN (a row with a loss).

    Example:
        >>> t = pd.DataFrame({"iteration": [19, 39, 59, 19, 39], "total_loss": [3.0, 2.5, 2.0, 3.1, 2.4]})
        >>> [part.tolist() for part in table_trainings(t, "iteration", "total_loss")]
        [[0, 1, 2], [3, 4]]
    """
    if loss_col not in table.columns or step_col not in table.columns:
        return None
    step = pd.to_numeric(table[step_col], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    logged = pd.to_numeric(table[loss_col], errors="coerce").notna().to_numpy().copy()
    logged[list(nan_rows)] = True
    rows = np.flatnonzero(logged & ~np.isnan(step))
    if len(rows) < 2 * TRAINING_ROWS:
        return None
    steps = step[rows]
    # From its first logging point: the step no further from 0 than from the step after it.
    first_interval = np.r_[steps[1:-1] <= steps[2:] - steps[1:-1], False]
    again = (steps[1:] < steps[:-1]) & ((steps[1:] <= steps[0]) | first_interval)
    epoch_col = epoch_column(table.columns, step_col)
    if epoch_col is not None:  # a count inside the epoch starts again as the epoch moves on: no new training
        epoch = pd.to_numeric(table[epoch_col], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)[rows]
        again &= ~(epoch[1:] > epoch[:-1])
    again = np.flatnonzero(again) + 1
    if not len(again) or int(np.diff(np.r_[0, again, len(rows)]).min()) < TRAINING_ROWS:
        return None
    cuts = rows[again]  # each training from its first row with a loss (rows before it: the one before)
    return [np.arange(a, b) for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(table)])]


def step_unit(step_col: str, steps: pd.DataFrame, path: str | Path, warnings: list[str],
              abandoned: list[AbandonedHistory] | None = None) -> tuple[pd.DataFrame, dict[str, str]]:
    """``steps`` and their unit for a run's meta (:func:`epoch_unit`). A table without a step column
    of its own (its rows numbered) whose every row holds a validation loss beside the training
    loss is a history kept once an epoch (``pd.DataFrame(history.history)`` printed or saved, as
    Keras' History holds it): read in epochs counted from 1 (``abandoned``, the stretches a later
    history replaced, with them), with a warning.

    Example:
        >>> t = pd.DataFrame({"loss": [2.0, 1.5, 1.2], "val_loss": [2.1, 1.7, 1.4]}, index=[0, 1, 2])
        >>> steps, unit = step_unit("", t, "h.csv", w := [])
        >>> steps.index.tolist(), unit
        ([1, 2, 3], {'step_unit': 'epoch'})
    """
    unit = epoch_unit(step_col, steps)
    if unit or str(step_col).strip().lower() not in ROW_NUMBER_NAMES or not _evaluated_every_row(steps):
        return steps, unit
    if steps.index[0] == 0:  # an index counts from 0, epochs from 1
        steps = _shifted(steps)
        if abandoned:
            abandoned[:] = [dataclasses.replace(
                a, resumed_at=a.resumed_at + 1, first=a.first + 1, last=a.last + 1, steps=_shifted(a.steps),
                logged_nan=None if a.logged_nan is None else {k: [s + 1 for s in v] for k, v in a.logged_nan.items()})
                for a in abandoned]
    warnings.append(f"{Path(path).name}: no step column, and a validation loss on every row: the rows are read as "
                    "epochs 1, 2, 3, ... (a history kept once an epoch; --step-col names a step column)")
    return steps, {STEP_UNIT: "epoch"}


def _shifted(steps: pd.DataFrame) -> pd.DataFrame:
    return steps.set_axis(pd.Index(steps.index.to_numpy() + 1, name=steps.index.name))


def _evaluated_every_row(steps: pd.DataFrame) -> bool:
    """Whether a validation loss stands beside each of two or more training losses."""
    if metrics.LOSS not in steps.columns:
        return False
    logged = steps[metrics.LOSS].notna().to_numpy()
    if logged.sum() < 2:
        return False
    return any(bool(steps[c].notna().to_numpy()[logged].all()) for c in steps.columns
               if c != metrics.LOSS and (c == metrics.VAL_LOSS or looks_like_eval_loss(str(c))))


def _last_printed_nan(frame: pd.DataFrame, printed: np.ndarray) -> np.ndarray | None:
    """The steps whose last row with a loss printed it as NaN, where rows share a step (a bar's row
    drawn again and again: YOLOv5's epoch row turned "nan  nan  nan" at its 2992nd batch, its last draw;
    merging them, a cell's last finite value won); None where no step has two rows.

    Example:
        >>> f = pd.DataFrame({"loss": [0.2, 0.3, np.nan, 0.1]}, index=[0, 0, 0, 1])
        >>> _last_printed_nan(f, np.array([False, False, True, False])).tolist()
        [0]
    """
    if not frame.index.has_duplicates or len(printed) != len(frame.index) or not printed.any():
        return None
    loss = frame[metrics.LOSS].to_numpy(dtype="float64")
    has = ~np.isnan(loss) | printed
    last = pd.Series(printed[has], index=frame.index.to_numpy()[has]).groupby(level=0).last()
    return last.index[last.to_numpy(dtype=bool)].to_numpy()


def _loss_cells_of(table: pd.DataFrame, loss_col: str) -> tuple[pd.Series, np.ndarray, np.ndarray | None]:
    """:func:`loss_cells` of a table's loss column, with the masks the chunked CSV reader left
    where it parsed the column already (:data:`TEXT_LOSS_ROWS`, :data:`PRINTED_NAN_ROWS`); the
    printed-NaN mask is None where a float column's empty cells and printed ``nan`` read alike."""
    raw = table[loss_col]
    if pd.api.types.is_numeric_dtype(raw.dtype):
        values, text, printed = raw.astype("float64"), np.zeros(len(raw), dtype=bool), table.attrs.get(PRINTED_NAN_ROWS)
    else:
        values, text, printed = loss_cells(raw)
    return values, table.attrs.get(TEXT_LOSS_ROWS, text), printed


def _count_across_epochs(step: np.ndarray, table: pd.DataFrame, columns: list, step_col: str, rows, path,
                         warnings: list[str], trained: np.ndarray | None = None) -> np.ndarray:
    """``step``, or where it counts inside each epoch of an ``epoch`` column (``epoch, step, loss``
    with the step from 0 again each epoch) the step across epochs, with a warning
    (:func:`_across_epochs`; ``trained``: the rows with a training loss, whose counts give the
    epoch's length, where some rows have none)."""
    # (Without an epoch column a step that falls back to its first is a training written again
    # into the file, as a CSV logger appends: went_back_rows' business, not this.)
    epoch_col = epoch_column(columns, step_col)
    if epoch_col is None or not len(step):
        return step
    counted = trained if trained is not None and trained.any() and not trained.all() else None
    found = _across_epochs(step, _numbers(table, epoch_col, rows), step_col, epoch_col, path, warnings, counted)
    return step if found is None else found


def epoch_column(columns, step_col: str):
    """The column beside ``step_col`` that counts epochs, or None.

    Example:
        >>> epoch_column(["iter", "epoch", "loss"], "iter")
        'epoch'
    """
    return next((c for c in columns if c != step_col and str(c).strip().lower() in EPOCH_ALIASES), None)


# A column beside the epoch that counts inside it (read where the epoch is the step column).
_COUNT_NAMES = frozenset({"batch", "iter", "iteration", "it", "step"})


def _batches_of_epochs(epoch: np.ndarray, table: pd.DataFrame, columns: list, step_col: str, rows, path,
                       warnings: list[str]) -> np.ndarray | None:
    """Where the step column is the epoch and a ``batch`` (``iter``, ...) column beside it counts
    inside each epoch (wespeaker's "Epoch | Batch | Lr | Margin | Loss | Acc"), the step across
    epochs from that count, with a warning; else None (its rows were numbered in file order)."""
    count_col = next((c for c in columns if c != step_col and str(c).strip().lower() in _COUNT_NAMES), None)
    if count_col is None or not len(epoch):
        return None
    count = _numbers(table, count_col, rows)
    if np.isnan(count).any() or np.isnan(epoch).any():
        return None
    if (epoch == epoch[0]).all() and bool((np.diff(count) >= 0).all()):  # one epoch: its count is the step
        warnings.append(f"{Path(path).name}: {count_col!r} counts inside {step_col!r} {epoch[0]:g}: read as the step")
        return count.astype(np.int64)
    return _across_epochs(count, epoch, count_col, step_col, path, warnings)


def _numbers(table: pd.DataFrame, col, rows) -> np.ndarray:
    """A column's values as float64 (text is NaN), on the rows kept (``rows``)."""
    return rows(pd.to_numeric(table[col], errors="coerce").to_numpy(dtype="float64", na_value=np.nan))


def _across_epochs(count: np.ndarray, epochs: np.ndarray, count_col, epoch_col, path, warnings: list[str],
                   counted: np.ndarray | None = None) -> np.ndarray | None:
    """The steps across epochs of a ``count_col`` that counts inside each epoch of ``epoch_col``
    (:func:`~sentinel.analyze.loaders.epoch_counts.steps_across_epochs`), with a warning; None
    where it does not."""
    found = steps_across_epochs(count, epochs, counted)
    if found is None:
        return None
    warnings.append(f"{Path(path).name}: {count_col!r} counts inside each {epoch_col!r} (from its start again as the "
                    f"epoch moves on): read as the step across epochs, {found[1]} an epoch")
    return found[0]


def _rows_of_epochs(step: np.ndarray, loss: np.ndarray, printed: np.ndarray | None, step_col: str, path,
                    warnings: list[str]) -> np.ndarray | None:
    """Where a table's step column is its epoch and most epochs hold several losses (a loop that
    writes ``epoch,loss`` at each batch), its rows numbered 1, 2, 3, ... in file order, a row
    without a loss taking the number of the loss row before it (an epoch's validation row joins
    its last batch); None otherwise. Read by epoch, one row of each epoch was kept: 5 of 500.
    ``printed``: the rows whose loss printed ``nan`` (a row of its own), where known.

    Example:
        >>> epochs, loss = np.array([0, 0, 0, 1, 1, 1]), np.array([3.0, 2.9, 2.8, 2.7, 9.0, 2.6])
        >>> _rows_of_epochs(epochs, loss, None, "epoch", "t.csv", w := [])
        array([1, 2, 3, 4, 5, 6])
    """
    if not epoch_unit(step_col):
        return None
    logged = ~np.isnan(loss)
    if printed is not None:
        logged |= np.asarray(printed, dtype=bool)
    epochs = step[logged]
    if len(epochs) < 5 or not bool((epochs[1:] >= epochs[:-1]).all()):
        return None  # few rows, or epochs that go back (a resume)
    distinct = 1 + int((epochs[1:] != epochs[:-1]).sum())
    if len(epochs) < 1.5 * distinct:
        return None
    warnings.append(f"{Path(path).name}: {len(epochs)} loss rows over {distinct} {step_col!r} values: each row is read "
                    "as a step, numbered 1, 2, 3, ... in file order (the rows carry no step of their own)")
    return np.maximum(np.cumsum(logged), 1).astype(np.int64)


_HEAD_CELLS = 10_000  # cells of the loss column looked at first for a value (see _logged_loss_column)


def _logged_loss_column(table: pd.DataFrame, loss_col: str, path, warnings: list[str]) -> str:
    """``loss_col``, or, where none of its cells holds a value (each empty or ``No log``: the
    Hugging Face Trainer's table when its logging_steps outlast the run) and an evaluation loss
    was logged, that column, said in a warning. Read as the loss, the empty column was "non-finite
    at every epoch", the run unhealthy.

    Example:
        >>> t = pd.DataFrame({"Epoch": [1, 2], "Training Loss": ["No log", "No log"], "Validation Loss": [0.69, 0.65]})
        >>> _logged_loss_column(t, "Training Loss", "t.txt", w := []), w[0].split(" (")[0]
        ('Validation Loss', 't.txt: no training loss was logged')
    """
    head = pd.to_numeric(table[loss_col].iloc[:_HEAD_CELLS], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    if np.isfinite(head).any():
        return loss_col  # a value logged among its first cells (a large table is not parsed twice)
    values, text, printed = _loss_cells_of(table, loss_col)
    if printed is None or not np.isnan(values.to_numpy(dtype="float64")).all() or text.any() or printed.any():
        return loss_col  # (None: a float column, whose empty cells and printed nan read alike)
    for col in table.columns:
        if col != loss_col and looks_like_eval_loss(str(col)) and \
                np.isfinite(pd.to_numeric(table[col], errors="coerce").to_numpy(dtype="float64")).any():
            warnings.append(f"{Path(path).name}: no training loss was logged (every {loss_col!r} cell is empty or "
                            f"'No log'): {col!r} is judged as the loss instead")
            return col
    return loss_col


def went_back_rows(frame: pd.DataFrame, abandoned: list[AbandonedHistory], loss_col: str = metrics.LOSS
                   ) -> pd.DataFrame:
    """``frame`` (indexed by step, rows in file order) without the rows a later history replaced,
    where the steps of the rows with a loss (``loss_col``) go back
    (:mod:`~sentinel.analyze.loaders.went_back`); each replaced stretch, with the rows before it
    as they stood then (merged by step, columns as in ``frame``), goes to ``abandoned``.

    Example:
        >>> f = pd.DataFrame({"loss": [3.0, 2.0, 9.0, 9.5, 1.9, 1.8]}, index=[1, 2, 3, 4, 3, 4])
        >>> kept = went_back_rows(f, out := []); kept.index.tolist(), (out[0].first, out[0].last)
        ([1, 2, 3, 4], (3, 4))
    """
    step = frame.index.to_numpy(dtype="float64")
    trained = np.flatnonzero(frame[loss_col].notna().to_numpy())
    starts = fall_backs(step[trained])
    if not len(starts):
        return frame
    start_rows = trained[starts]
    for stretch in replaced_stretches(step[trained], starts):
        k = stretch.index
        before = np.flatnonzero(survivors(step[:start_rows[k]], start_rows[:k]))
        before = before[step[before] >= step[trained[stretch.rows[0]]]]  # from the context's first row
        steps = order_columns(merge_steps(frame.iloc[before]))
        abandoned.append(AbandonedHistory(stretch.resumed_at, stretch.first, stretch.last, steps, logged_nan=None))
    return frame.iloc[np.flatnonzero(survivors(step, start_rows))]
