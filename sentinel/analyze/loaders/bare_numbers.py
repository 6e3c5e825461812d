"""A file of numbers with no header, named on its own: a loss per line, or a step and a loss;
or one printed list of losses.

What ``np.savetxt("loss.txt", losses)`` writes, or a loop's ``f.write(f"{step}\\t{loss}\\n")``
into a ``.tsv``: lines of one number (the loss, numbered 1, 2, 3, ... in order) or of two (the
step, a whole number that rises line by line, then the loss), apart by spaces, tabs or commas. Not a
loader of the directory walk (a folder's files of numbers are data, not runs): ``sentinel analyze``
reads such a file only where it is named on its own, and says how it read it.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LoadOptions, RunData
from sentinel.analyze.loaders.keys import rises_by_whole_numbers
from sentinel.analyze.loaders.textlog import read_head, run_name, text_encoding

NAME = "bare_numbers"
# A file larger than this is no list of losses someone saved (and read whole, it could be large).
MAX_BYTES = 512 << 20
# At least this many numbers: two or three are a quote, not a run.
MIN_ROWS = 3
# The start of a file read to tell its layout.
_HEAD_BYTES = 64 * 1024
# A printed list is read whole: at most this much text.
_LIST_BYTES = 16 << 20


def columns_of(path: str | Path) -> int | None:
    """How many numbers each line of the file's start holds (every line the same, no header, no
    words), or None; at least :data:`MIN_ROWS` lines (``#`` comment lines, as ``np.savetxt``'s
    header, left out).

    Example:
        >>> columns_of("/nonexistent.txt") is None
        True
    """
    found = layout(path)
    return found[0] if found is not None and len(found[1]) == found[0] else None


def layout(path: str | Path) -> tuple[int, tuple[int, ...]] | None:
    """The fields each line of the file's start holds (every line the same, no header) and the
    columns, from 0, that hold a number in every line; None where the lines differ, fewer than
    :data:`MIN_ROWS` are there or no column holds numbers. A table written without its header
    (``168, 1.50171, 79.38, Aug21-23:56:49,``: numbers, a time of day, the empty field after a
    trailing comma) is read by the columns a user names by their numbers.

    Example:
        >>> layout("/nonexistent.txt") is None
        True
    """
    rows = _head_rows(path)
    if rows is None or len(rows) < MIN_ROWS or len({len(row) for row in rows}) != 1:
        return None
    numeric = tuple(k for k in range(len(rows[0])) if all(_is_number(row[k]) for row in rows))
    # A word that every line holds at one place is a key's name: lines of a log ("Loss_pi 0.52
    # Loss_v 0.31"), its own readers' to read or refuse, not a table's cells; nor is a cell of
    # several words (a logger's prefix before a printed list: "12:01:31,821 INFO [2.79")
    words = [k for k in range(len(rows[0])) if k not in numeric]
    keys = any(len({row[k].strip() for row in rows}) == 1 and rows[0][k].strip() for k in words)
    phrases = any(len(row[k].split()) > 1 for k in words for row in rows)
    return (len(rows[0]), numeric) if numeric and not keys and not phrases else None


# MLflow's file store writes each metric's values "<timestamp ms> <value> <step>", a line each
# (mlruns/<experiment>/<run>/metrics/<key>): a timestamp in milliseconds (2001 to 2286), then two numbers.
_MLFLOW_METRIC_LINE = re.compile(r"1\d{12} \S+ -?\d+")


def mlflow_metric_file(path: str | Path) -> bool:
    """Whether the file's lines are those of an MLflow metric file (``<timestamp ms> <value> <step>``,
    the step a whole number that never goes back), one taken out of its run's folder.

    Example:
        >>> mlflow_metric_file("/nonexistent") is False
        True
    """
    rows = _head_rows(path)
    if not rows or len(rows) < MIN_ROWS or not all(_MLFLOW_METRIC_LINE.fullmatch(" ".join(row)) for row in rows):
        return False
    steps = np.array([int(row[2]) for row in rows])
    return bool((np.diff(steps) >= 0).all())


def _head_rows(path: str | Path) -> list[list[str]] | None:
    """The fields of each line of the file's start (``#`` comment lines and blank ones left out, a
    last line the read's limit may have cut too), or None where it cannot be read."""
    head = read_head(path, limit=_HEAD_BYTES)
    if head is None:
        return None
    lines = [line for line in head.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if len(head) >= _HEAD_BYTES and lines:
        lines = lines[:-1]  # the last line may be cut by the limit
    return [_fields(line) for line in lines]


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def problem(path: str | Path) -> str | None:
    """Why a file of numbers with no header is not read (three or more per line: which one is the
    loss?), or None.

    Example:
        >>> problem("/nonexistent.tsv") is None
        True
    """
    width, numeric = layout(path) or (0, ())
    if len(numeric) < 2 or len(numeric) == width <= 2 or mlflow_metric_file(path):  # read, not refused
        return None
    if len(numeric) == width:
        return (f"'{path}' holds {width} numbers per line and no header: pass the columns' numbers, counted from 1 "
                "(--step-col 1 --loss-col 2), or add a first line naming the columns (step, loss, ...)")
    rows = _head_rows(path) or []
    step = next((k for k in numeric if rises_by_whole_numbers(np.array([float(row[k]) for row in rows]))), None)
    loss = next(k for k in numeric if k != step)
    if step is None:  # the rows are numbered in order
        which, example = "the loss's column", f"--loss-col {loss + 1}"
    else:
        which, example = "the step's and the loss's columns", f"--step-col {step + 1} --loss-col {loss + 1}"
    return (f"'{path}' holds {width} fields per line and no header, numbers in columns {_spans(numeric)} (counted "
            f"from 1): pass {which} ({example}), or add a first line naming the columns (step, loss, ...)")


def _spans(columns: tuple[int, ...]) -> str:
    """Columns from 0 said from 1, runs of neighbours as ranges: ``(0, 1, 2, 5)`` -> ``1-3, 6``."""
    spans, start = [], columns[0]
    for previous, column in zip(columns, (*columns[1:], None)):
        if column != previous + 1:
            spans.append(f"{start + 1}" if start == previous else f"{start + 1}-{previous + 1}")
            start = column
    return ", ".join(spans)


def numbered_columns(options: LoadOptions | None, width: int | None,
                     numeric: tuple[int, ...] | None = None) -> tuple[int | None, int] | None:
    """The step's and the loss's columns (from 0) that ``--step-col`` / ``--loss-col`` name by their
    numbers, counted from 1, in a file of ``width`` fields per line (those at ``numeric``, from 0,
    numbers; all where not given); None where they name none (a name, no option, or a column of
    words). The loss's column is needed; without a step the rows are numbered.

    Example:
        >>> numbered_columns(LoadOptions(step_col="1", loss_col="3"), 6), numbered_columns(LoadOptions(loss_col="loss"), 6)
        ((0, 2), None)
        >>> numbered_columns(LoadOptions(step_col="1", loss_col="3"), 6, numeric=(0, 1)) is None  # a column of words
        True
    """
    if options is None or width is None or options.loss_col is None:
        return None
    numeric = range(width) if numeric is None else numeric
    picked = [options.step_col, options.loss_col]
    if not all(c is None or (c.isdigit() and int(c) - 1 in numeric) for c in picked):
        return None
    return (None if options.step_col is None else int(options.step_col) - 1), int(options.loss_col) - 1


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read a file of one number per line (the loss) or two (the step and the loss).

    Raises:
        ValueError: it is not such a file, a line does not hold a number, or the first of two
            columns is not a step (whole numbers that rise line by line).

    Example:
        >>> run = load("loss.txt")[0]  # doctest: +SKIP
        >>> run.steps.index[:3].tolist()  # doctest: +SKIP
        [1, 2, 3]
    """
    path = Path(path)
    width, numeric = layout(path) or (None, ())
    numbered = numbered_columns(options, width, numeric)
    mlflow = numbered is None and mlflow_metric_file(path)
    if mlflow:
        numbered = (2, 1)  # the step, the value
    if numbered is None and (width not in (1, 2) or len(numeric) != width):
        raise ValueError(f"{path}: not a file of numbers, one or two per line")
    if path.stat().st_size > MAX_BYTES:
        raise ValueError(f"{path}: {path.stat().st_size >> 20} MiB of numbers with no header: more than a saved "
                         "loss curve; add a header line (step,loss) to read it as a table")
    head = read_head(path, limit=4096) or ""
    sep = "," if "," in head else r"\s+"
    try:
        # Columns of words beside the numbers (a table written without its header) are read as text
        table = pd.read_csv(path, header=None, sep=sep, encoding=text_encoding(path), comment="#",
                            skip_blank_lines=True, dtype={column: "float64" for column in numeric})
    except ValueError as exc:  # its start held numbers alone; a later line does not
        raise ValueError(f"{path}: numbers with no header at its start, then a line that is not ({exc}): a file "
                         "of numbers is read only where every line holds them; add a header line (step,loss) to "
                         "read it as a table") from None
    if table.shape[1] != width:
        raise ValueError(f"{path}: lines of {width} and of {table.shape[1]} numbers: not one column of numbers")
    table_width = width
    if numbered is not None:  # the columns named by their numbers: as one or two columns are read
        step_at, loss_at = numbered
        table = table[[loss_at] if step_at is None else [step_at, loss_at]].T.reset_index(drop=True).T
        width = table.shape[1]
    if width == 1:
        steps = pd.DataFrame({metrics.LOSS: table[0].to_numpy()},
                             index=pd.RangeIndex(1, len(table) + 1, name=metrics.STEP))
        note = (f"{path.name}: one number per line and no header: read as the loss, numbered 1, 2, 3, ... in "
                "order (a header line naming the columns, or a step beside each, says otherwise)")
    else:
        step = table[0].to_numpy()
        # Rising strictly: "2,5" lines of a decimal comma would be read as steps 2, 2, 2.
        if not rises_by_whole_numbers(step) and numbered is not None:
            raise ValueError(f"{path}: column {numbered[0] + 1} (--step-col) is not a step: its numbers are not whole "
                             "numbers that rise line by line; pass the step's column, or --loss-col alone to number "
                             "the rows in order")
        if not rises_by_whole_numbers(step):
            raise ValueError(f"{path}: two numbers per line, the first not a step (whole numbers that rise line by "
                             "line): add a header line naming the columns (step,loss) and pass --step-col/--loss-col")
        steps = pd.DataFrame({metrics.LOSS: table[1].to_numpy()},
                             index=pd.Index(step.astype("int64"), name=metrics.STEP))
        note = f"{path.name}: two numbers per line and no header: read as the step and the loss"
    if numbered is not None:
        step_at, loss_at = numbered
        fields = "numbers" if len(numeric) == table_width else "fields"
        note = (f"{path.name}: {table_width} {fields} per line and no header: column {loss_at + 1} read as the loss"
                + (", numbered 1, 2, 3, ... in order" if step_at is None else f", column {step_at + 1} as the step"))
        if mlflow:
            note = (f"{path.name}: an MLflow metric file (<timestamp ms> <value> <step> a line): its values read as "
                    "the loss (pass its run's folder to read every metric of the run)")
    return [RunData(name=run_name(path), path=str(path), source=NAME, steps=steps.astype("float64"),
                    meta={"format": NAME, "width": width}, warnings=[note])]


# print(losses), repr(np.array(losses)), "losses = [...]", a list of tensors or NumPy scalars:
# one list of numbers, perhaps after a name, perhaps wrapped over lines (NumPy's print).
_PRINTED_LIST = re.compile(r"\s*(?:[A-Za-z_][\w.]*\s*[=:]\s*)?(?:(?:np\.)?array\(|tensor\()?\[([^\[\]]*)\]"
                           r"(?:\s*,\s*(?:dtype|device|requires_grad)=[^()]*)?\)?\s*", re.DOTALL)
_SCALAR_WRAPPER = re.compile(r"\b(?:np\.(?:float|int)\d+|tensor|Array)\(([^()]*?)(?:,[^()]*)?\)")


def printed_list(path: str | Path) -> np.ndarray | None:
    """The numbers of a file that holds one printed list of them (``print(losses)``,
    ``repr(np.array(losses))``, ``losses = [...]``; NumPy 2's ``np.float64(2.3)`` and
    ``tensor(2.3)`` items read as their numbers), or one a line, each printed as a tensor or a NumPy
    scalar (``tensor(3.2207, device='cuda:0')``); at least :data:`MIN_ROWS`; None otherwise.

    Example:
        >>> printed_list("/nonexistent.txt") is None
        True
    """
    found = _printed(path)
    return None if found is None else found[0]


def _printed(path: str | Path) -> tuple[np.ndarray, str] | None:
    """:func:`printed_list`'s numbers, and how they were printed (for the run's note)."""
    head = read_head(path, limit=_LIST_BYTES)
    if head is None or len(head) >= _LIST_BYTES:
        return None
    from sentinel.analyze.loaders.textscan import wrapped_number  # the text readers' engine: lazily

    # One number a line, each printed as the object that holds it ("tensor(3.2207, device='cuda:0')"):
    # a text of other lines stops at its first
    items = []
    for line in filter(str.strip, head.splitlines()):
        number = wrapped_number(line)
        if number is None:
            items = []
            break
        items.append(number)
    if len(items) >= MIN_ROWS:
        what = f"{len(items)} lines of one number each, printed as a tensor or a NumPy scalar"
    else:
        found = _PRINTED_LIST.fullmatch(head) if "[" in head else None
        if found is None:
            return None
        items = _SCALAR_WRAPPER.sub(r"\1", found.group(1)).replace(",", " ").split()
        what = f"one printed list of {len(items)} numbers"
    try:
        values = np.array([float(item) for item in items], dtype="float64")
    except ValueError:
        return None
    return (values, what) if len(values) >= MIN_ROWS else None


def load_printed_list(path: str | Path) -> list[RunData]:
    """Read a file of one printed list of numbers, or of one printed number a line
    (:func:`printed_list`), as the loss, numbered 1, 2, 3, ... in order.

    Raises:
        ValueError: the file holds no such list.

    Example:
        >>> load_printed_list("losses.txt")[0].steps["loss"].head()  # doctest: +SKIP
    """
    path = Path(path)
    found = _printed(path)
    if found is None:
        raise ValueError(f"{path}: not one printed list of numbers")
    values, what = found
    steps = pd.DataFrame({metrics.LOSS: values}, index=pd.RangeIndex(1, len(values) + 1, name=metrics.STEP))
    note = (f"{path.name}: {what}: read as the loss, numbered 1, 2, 3, ... in "
            "order (numbers taken every N steps are N steps apart: the steps here count them)")
    return [RunData(name=run_name(path), path=str(path), source=NAME, steps=steps,
                    meta={"format": NAME, "width": 1}, warnings=[note])]


def _fields(line: str) -> list[str]:
    return line.split(",") if "," in line else line.split()
