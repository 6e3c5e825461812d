"""Loader for a table of steps pasted with ``|`` between its cells.

What a notebook's training table becomes in an issue or a chat (the Hugging Face Trainer's
``Step | Training Loss | Validation Loss``, TRL's ``Step | Training Loss | reward | kl``), as
Markdown (``| Step | Training Loss |`` with a ``|---|---|`` rule) or as text (``Step | Training
Loss``, ``-- | --``). Text around the table (a question, code fences) is ignored; the header is
the first line whose cells name a step and a loss (by name, or as ``--step-col`` / ``--loss-col``
say), and its rows are the lines after it with as many cells and a number for the step.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN, LOGGED_NAN_KEYS, LoadOptions, RunData, epoch_unit
from sentinel.analyze.loaders.keys import (STEP_ALIASES, canonical_key, inferred_loss_note, looks_like_loss,
                                          loss_column, sniff_columns, step_column)
from sentinel.analyze.loaders.numeric_table import STEP_OF_TOTAL, loss_cells, table_steps, table_trainings
from sentinel.analyze.loaders.record_fields import watches_nonfinite
from sentinel.analyze.loaders.textlog import read_head_lines, read_text, run_name, trainings_note

NAME = "pipe_table"
DESCRIPTION = "tables pasted with '|' between cells (Step | Training Loss | Validation Loss)"
SNIFF_TAKES_OPTIONS = True  # --step-col / --loss-col name columns a sniff counts

# Rows a table needs to be one (a header and a row or two are a quote, not a run).
MIN_ROWS = 3
_RULE = re.compile(r"^:?-+:?$")  # a Markdown alignment cell: ---, :--, --:
_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")
# The names step_column() takes for a step (cells are stripped): asked of every line with a '|'
# in a sniff's head, as a set lookup (a log whose lines hold '|' has hundreds there).
_STEP_NAMES = frozenset(STEP_ALIASES) | {"epoch"}
# A progress bar's percentage against its bar: no table header holds one.
_PROGRESS_BAR = re.compile(r"\d%\|")


def sniff(path: str | Path, options: LoadOptions | None = None) -> bool:
    """True for text holding a ``|`` table with a step and a loss column and rows of numbers.

    Example:
        >>> sniff("/nonexistent.txt")
        False
    """
    lines = read_head_lines(path, limit=64 * 1024)
    return bool(lines) and _find(lines, options or LoadOptions()) is not None


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read the first ``|`` table of a text file.

    Returns:
        One :class:`RunData`: ``loss`` and every other numeric column, indexed by step.

    Raises:
        ValueError: the text holds no such table.

    Example:
        >>> run = load("issue_paste.txt")[0]  # doctest: +SKIP
        >>> run.steps["loss"].tolist()[:2]  # doctest: +SKIP
        [2.3456, 2.1]
    """
    options = options or LoadOptions()
    lines = read_text(path).splitlines()
    found = _find(lines, options)
    if found is None:
        raise ValueError(f"{path}: no table with a step and a loss column between '|' found: "
                         "name them with --step-col/--loss-col")
    header, rows, _, _ = found
    step_col = step_column(header, options.step_col)  # a named column the table lacks: said here
    loss_col, inferred = loss_column(header, options.loss_col)
    warnings = [f"{Path(path).name}: {inferred_loss_note(loss_col)}"] if inferred else []
    table = pd.DataFrame(rows, columns=header)
    # A table of trainings one after another (a model card's logs of two fit() calls), each from its first step.
    parts = table_trainings(table, step_col, loss_col, np.flatnonzero(loss_cells(table[loss_col])[2]))
    if parts is None:
        return [_run(table, header, step_col, loss_col, path, run_name(path), warnings)]
    note = trainings_note(path, len(parts))
    return [_run(table.iloc[rows].reset_index(drop=True), header, step_col, loss_col, path, f"{run_name(path)}#{k}",
                 [note, *warnings]) for k, rows in enumerate(parts, 1)]


def _run(table: pd.DataFrame, header: list[str], step_col: str, loss_col: str, path: str | Path, name: str,
         warnings: list[str]) -> RunData:
    """One run of ``table``'s rows."""
    warnings = list(warnings)
    steps = table_steps(table, step_col, loss_col, path, warnings)
    meta = {"format": NAME, "columns": header, **epoch_unit(step_col, steps)}
    # A cell printed "nan" is the loss gone NaN (an "inf" reads as its value); an empty one, a row that logged
    # none (nolearn's table printed "nan" in its first epochs: beside their valid loss they read as evaluation
    # rows). So for an evaluation's loss: a Hugging Face model card's "-" is a row that logged none.
    watched = {metrics.LOSS: loss_col, **{canonical_key(col): col for col in header if col != loss_col
                                          and watches_nonfinite(canonical_key(col))}}
    meta[LOGGED_NAN] = {}
    for key, col in watched.items():
        if key in steps.columns:
            at = pd.to_numeric(table[step_col][loss_cells(table[col])[2]], errors="coerce").dropna().astype("int64")
            meta[LOGGED_NAN][key] = sorted(set(at.tolist()) & set(steps.index.tolist()))
    meta[LOGGED_NAN_KEYS] = tuple(meta[LOGGED_NAN])
    return RunData(name=name, path=str(path), source=NAME, steps=steps, meta=meta, warnings=warnings)


def why_not(path: str | Path, options: LoadOptions | None = None) -> str | None:
    """Why a ``|`` table with a step column and rows is not read: its columns name two losses or more
    and none is the total, or none is named as a loss (ultralytics' yolov3 results:
    ``epoch|mem|mloss0|mloss1|mloss2|mloss3|...``): one line that names them and the option; None
    otherwise.

    Example:
        >>> why_not("/nonexistent.txt") is None
        True
    """
    options = options or LoadOptions()
    lines = read_head_lines(path, limit=64 * 1024)
    if not lines or options.loss_col is not None:
        return None
    for at in _may_be_headers(lines, options):
        header = _header(lines[at])
        if header is None:
            continue
        header, below = _whole_header(header, lines[at + 1] if at + 1 < len(lines) else "")
        step_col = next((c for c in header if c.lower() in _STEP_NAMES), None)
        if step_col is None or loss_column(header)[0] is not None:
            continue
        if len(_rows(lines[at + 1 + below:], len(header), header.index(step_col))) < MIN_ROWS:
            continue
        losses = [c for c in header if looks_like_loss(c)]
        if len(losses) >= 2:
            return (f"'{path}': a table between '|' whose columns name {len(losses)} losses ({', '.join(losses)}) and "
                    f"none is the total: pass --loss-col {losses[-1]} (or another of them) to read one")
        return (f"'{path}': a table between '|' with a step column ({step_col}) and no column named as a loss among: "
                f"{', '.join(header)}; name it with --loss-col <column>")
    return None


def _header(line: str) -> list[str] | None:
    """A line's cells where they may be a header: two or more, each a name (none empty, none a number)."""
    header = _cells(line)
    if header is None or len(header) < 2 or any(_NUMBER.match(c) or not c for c in header):
        return None
    return header


def _whole_header(header: list[str], below: str) -> tuple[list[str], int]:
    """A header whose names go on in the line below it (MATLAB's ``trainNetwork`` table: ``| Epoch |
    Iteration | ... | Mini-batch | Mini-batch |`` over ``| | | ... | Accuracy | Loss |``) joined
    cell by cell, and each name repeated numbered as a CSV reader numbers it (``loss``, ``loss.1``);
    with the count of header lines after the first (0 or 1).

    Example:
        >>> _whole_header(["Epoch", "Mini-batch", "Mini-batch"], "|  | Accuracy | Loss |")
        (['Epoch', 'Mini-batch Accuracy', 'Mini-batch Loss'], 1)
        >>> _whole_header(["step", "loss", "loss"], "| 1 | 0.5 | 2.0 |")
        (['step', 'loss', 'loss.1'], 0)
    """
    more = _cells(below)
    used = 0
    if more is not None and len(more) == len(header) and any(more) and \
            not any(_NUMBER.match(c) or _RULE.match(c) for c in more if c):
        header, used = [f"{name} {rest}".strip() for name, rest in zip(header, more)], 1
    seen: dict[str, int] = {}
    numbered = []
    for name in header:
        count = seen.get(name, 0)
        seen[name] = count + 1
        numbered.append(f"{name}.{count}" if count else name)
    return numbered, used


def _cells(line: str) -> list[str] | None:
    text = line.strip().strip("`").strip()
    if "|" not in text:
        return None
    if text.startswith("|"):
        text = text[1:]
    if text.endswith("|"):
        text = text[:-1]
    return [cell.strip() for cell in text.split("|")]


@functools.lru_cache(maxsize=16)
def _step_cell(step_col: str | None) -> re.Pattern:
    """A cell that may name the step, in lines lowered and each begun with '|': a superset of
    what :func:`_find` takes (any space or backtick around it). A literal '|' first lets Python's
    ``re`` skip to the next one; ``re.IGNORECASE`` or ``^`` would try every position (3x slower)."""
    names = sorted(_STEP_NAMES | ({step_col.lower()} if step_col else set()), key=len, reverse=True)
    return re.compile(rf"\|[\s`]*(?:{'|'.join(map(re.escape, names))})[\s`]*(?=\||$)", re.MULTILINE)


def _may_be_headers(lines: list[str], options: LoadOptions) -> list[int]:
    """The lines with a cell that may name the step: the only ones a header can be (a log whose
    lines hold '|' has hundreds in a sniff's head, each split and checked in Python before)."""
    joined = ("|" + "\n|".join(lines)).lower()
    found, line, last = [], 0, 0
    for match in _step_cell(options.step_col).finditer(joined):
        line += joined.count("\n", last, match.start())
        last = match.start()
        if not found or found[-1] != line:
            found.append(line)
    return found


def _find(lines: list[str], options: LoadOptions):
    """``(header, rows, step column, loss column)`` of the first table, or None."""
    for at in _may_be_headers(lines, options):
        line = lines[at]
        if _PROGRESS_BAR.search(line):
            continue  # a tqdm bar ("step:  10%|#    | 15/150 [...]": its '#' fill is no '#' column)
        header = _header(line)
        if header is None:
            continue
        header, below = _whole_header(header, lines[at + 1] if at + 1 < len(lines) else "")
        if options.step_col not in header and _STEP_NAMES.isdisjoint(cell.lower() for cell in header):
            continue  # no step: the loss need not be looked for (a log line with '|' in it is no header)
        step_col, (loss_col, _) = sniff_columns(header, options.step_col, options.loss_col)
        if step_col is None or loss_col is None:
            continue
        rows = _rows(lines[at + 1 + below:], len(header), header.index(step_col))
        if len(rows) >= MIN_ROWS:
            return header, rows, step_col, loss_col
    return None


def _rows(lines: list[str], width: int, step_at: int) -> list[list[str]]:
    rows = []
    for line in lines:
        cells = _cells(line)
        if cells is None or len(cells) != width:
            continue
        if all(_RULE.match(c) for c in cells):
            continue
        count = STEP_OF_TOTAL.match(cells[step_at])
        if count is not None:  # "0/299": an epoch of a total (ultralytics' yolov3 results), the step its count
            cells[step_at] = count.group(1)
        if _NUMBER.match(cells[step_at]):
            rows.append(cells)
    return rows

