"""Loader for a table a training loop prints to its console, cells apart by spaces or tabs.

A header line of column names, then a row of numbers per epoch or step under it, aligned by
spaces (or tab-separated, as a notebook's table copied out of the browser):

    epoch     train_loss  valid_loss  accuracy  time        <- fastai
    0         0.512340    0.401230    0.871000  00:12

          Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size      <- Ultralytics
           1/30      2.25G      1.234      3.456      1.345         45        640: 100%|###| 16/16 [...]

A header underlined by a rule of dashes gives each column the width of its dashes, so a name
may hold a space (spaCy's ``E  #  LOSS TOK2VEC  LOSS NER  ENTS_F``, tabulate's plain tables):

    E    #       LOSS TOK2VEC  LOSS NER  ENTS_F  ENTS_P  ENTS_R  SCORE      <- spaCy
    ---  ------  ------------  --------  ------  ------  ------  ------
      0     200         59.52   2335.50   48.48   53.85   44.09    0.48

A header whose names hold a space and stand two or more spaces apart (the Hugging Face Trainer's
notebook table copied as text) is read by those gaps, its rows too; a row that ends early (an
empty last cell: no validation loss at that step) has its missing cells empty:

    Step    Training Loss    Validation Loss
    10    2.385890
    100    1.599843    1.702990

A DataFrame printed by pandas (``print(df)``) is such a table: its header indented over the index,
each row led by the index (left out; it numbers the rows where no column is the step), a named
index's name on the line under the header; where pandas left out the middle rows (``...``, and
``[200 rows x 3 columns]`` under it) a warning says how many are there.

A row may end in its progress bar after a colon (Ultralytics); a step written ``N/M`` is ``N``;
the header may be printed again before each row, with other tables between (a validation table
under its own header is not this table). A row drawn again and again (a progress bar's ``\\r``
redraws: the running mean of the epoch so far) keeps its last draw per step. Where no column is
the total loss and the rows are a training progress bar's, the loss columns are that loop's
components (Ultralytics' ``box_loss``, ``cls_loss``, ``dfl_loss``) and the loss is their sum, as in
its ``results.csv``.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LOSS_SUMS_GROWING_BATCHES, LoadOptions, RunData
from sentinel.analyze.loaders.keys import (
    NONFINITE_TEXT,
    inferred_loss_note,
    loss_column,
    loss_components,
    sniff_columns,
    step_column,
    yolov5_terms,
)
from sentinel.analyze.loaders.numeric_table import (STEP_OF_TOTAL, numbered_names, step_unit, sum_loss_components,
                                                    table_steps, table_trainings)
from sentinel.analyze.loaders.textlog import read_head, read_head_lines, read_text, run_name, trainings_note
from sentinel.analyze.loaders.textscan import clean_text

NAME = "space_table"
DESCRIPTION = ("tables printed by a training loop, cells apart by spaces (fastai's epoch train_loss, "
               "Ultralytics' Epoch box_loss, a notebook's Step    Training Loss copied as text, "
               "a history DataFrame pandas printed)")
SNIFF_TAKES_OPTIONS = True  # --step-col / --loss-col name columns a sniff counts

MIN_ROWS = 3  # a header and a row or two are a quote, not a run
# Header-like lines looked at, at most: each is followed by a pass over the rest of the text, so
# a text of many word-only lines naming a step and a loss would otherwise take quadratic time.
MAX_HEADERS = 64
# Tables after the first looked at, at most, for a later training's (a notebook's trainer.train() run again).
LATER_TABLES = 8
_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$|^[-+]?(?:nan|inf)$", re.IGNORECASE)
_RULE = re.compile(r"^\s*[-=]{2,}(?:[ \t]+[-=]{2,})+\s*$")  # "---  ------  ----": a header's underline
_DASHES = re.compile(r"[-=]+")
_PANDAS_SHAPE = re.compile(r"\[(\d+) rows x \d+ columns\]\s*$")  # under a DataFrame pandas printed in part
_GAP = re.compile(r"\t| {2,}")  # between the cells of a header whose names hold a space
# A header written as a comment: "#  step  rmse_trn ..." (DeePMD-kit's lcurve.out), np.savetxt's
# header= ("# step loss"); not a "#" column of its own after others (spaCy's "E  #  LOSS TOK2VEC").
_COMMENT_MARK = re.compile(r"^([^\S\n]*)#(?=[^\S\n]*[A-Za-z])")
# A row of numbers alone (DeePMD's lcurve.out: "   1000      8.96e+00      3.79e-02      2.83e-01    1.0e-03").
_NUMBERS_ROW = re.compile(r"[^\S\n]*(?:[-+]?(?:\d[\d.]*(?:[eE][-+]?\d+)?|\.\d+|nan|inf)[^\S\n]*)+", re.IGNORECASE)


# A logger's prefix before every line: "[2020/04/27 12:33:22] - " (the robust-overfitting trainers'
# logging.basicConfig), "2024-01-02 10:00:00,123 - INFO - ", "[12:00:01] INFO ".
_LOGGER_PREFIX = re.compile(r"^(?:\[[^]\n]{1,64}\]|\d{2,4}[-/]\d\d[-/]\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)"
                            r"(?:[^\S\n]*[-|:]?[^\S\n]*(?:(?:DEBUG|INFO|WARNING|ERROR)\b[^\S\n]*[-|:]?[^\S\n]*)?)")
# Of the lines that hold something, the share that must begin with such a prefix for it to be left out.
_PREFIXED_SHARE = 0.8


def without_logger_prefix(lines: list[str]) -> list[str] | None:
    """``lines`` with a logger's prefix (a bracketed or dated stamp, a level) taken off each line
    that begins with one, where most lines do (the table a script logs through ``logging``); None
    where they do not.

    Example:
        >>> without_logger_prefix(["[2020/04/27 12:33:22] - Epoch \\t Loss", "[2020/04/27 12:43:48] - 0 \\t 1.95"])
        ['Epoch \\t Loss', '0 \\t 1.95']
    """
    held = [line for line in lines if line.strip()]
    if not held or _LOGGER_PREFIX.match(held[0]) is None:
        return None
    stripped = [_LOGGER_PREFIX.sub("", line, count=1) for line in lines]
    prefixed = sum(a != b for a, b in zip(lines, stripped) if a.strip())
    return stripped if prefixed >= _PREFIXED_SHARE * len(held) else None


def _only_its_rows(lines: list[str], header: str) -> bool:
    """Whether a file is a commented header's table alone, printed again where its rows go on (DeePMD-kit
    writes its lcurve.out header again at each restart): every line the header, a row of numbers, or blank.

    Example:
        >>> _only_its_rows(["# step loss", "0 2.5", "# step loss", "0 2.4"], "# step loss")
        True
        >>> _only_its_rows(["training", "# Epoch batch loss", "1 16 0.2", "validation", "# Epoch batch loss"],
        ...                "# Epoch batch loss")
        False
    """
    fullmatch = _NUMBERS_ROW.fullmatch
    return all(line == header or not line.strip() or fullmatch(line) for line in lines)
_TRAIN = "train/"  # the prefix that names a progress bar's loss columns as training components


# A header line naming an epoch or a step, then a loss, its names two or more spaces (or a tab) apart.
_LATER_HEADER = re.compile(r"(?im)^[^\S\n]*(?:epoch|step|iter)\w*(?:[^\S\n]{2,}|\t)[^\n]*?loss")


def sniff(path: str | Path, options: LoadOptions | None = None) -> bool:
    """True for text holding a space-aligned table with a step and a loss column and rows of numbers.

    Example:
        >>> sniff("/nonexistent.txt")
        False
    """
    lines = read_head_lines(path, limit=64 * 1024)
    if any("\x1b" in line for line in lines):  # a terminal's codes before each row (Chainer's PrintReport), as load reads it
        lines = [line for line in clean_text("\n".join(lines)).split("\n") if line.strip()]
    if bool(lines) and _find(lines, options or LoadOptions()) is not None:
        return True
    # A table further on, under a header naming an epoch or a step and a loss (a notebook's output, its pip installs
    # and dataset downloads first: Ultralytics' "Epoch  GPU_mem  box_loss ..." 230 KB in): the lines from it on.
    later = read_head(path) if len(lines) and sum(map(len, lines)) >= 60 * 1024 else None
    found = _LATER_HEADER.search(later) if later else None
    if found is None:
        return False
    rest = [line for line in clean_text(later[found.start():found.start() + 64 * 1024]).split("\n") if line.strip()]
    return _find(rest, options or LoadOptions()) is not None


def holds_table(lines: list[str], options: LoadOptions | None = None) -> bool:
    """Whether ``lines`` hold a table this loader reads (a header naming a step and a loss, rows
    of numbers under it).

    Example:
        >>> holds_table(["Step    Training Loss", "10    2.5", "20    2.4", "30    2.3"])
        True
    """
    return _find(lines, options or LoadOptions()) is not None


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read the first space-aligned table of a text file (every printing of its header), and the
    later tables of its step and loss columns under another header (a notebook's second
    ``trainer.train()`` naming another score).

    Returns:
        One :class:`RunData` per training (the steps starting again: ``<name>#1``, ``#2``, ...):
        ``loss`` and every other numeric column, indexed by step.

    Raises:
        ValueError: the text holds no such table.

    Example:
        >>> run = load("fastai_console.txt")[0]  # doctest: +SKIP
        >>> run.steps["loss"].tolist()[:2]  # doctest: +SKIP
        [0.51234, 0.40123]
    """
    options = options or LoadOptions()
    lines = clean_text(read_text(path)).split("\n")
    tables = _tables(lines, options)
    found = next(tables, None)
    if found is None and (plain := without_logger_prefix(lines)) is not None:
        lines = plain
        tables = _tables(lines, options)
        found = next(tables, None)
    if found is None:
        raise ValueError(f"{path}: no table with a step and a loss column found (a header of column "
                         "names, rows of numbers under it): name them with --step-col/--loss-col")
    header, rows, step_col, loss_col, bar, where, header_line = found
    warnings: list[str] = []
    shape = next((m for m in map(_PANDAS_SHAPE.match, lines[-3:]) if m), None)
    if shape is not None and int(shape.group(1)) > len(rows):
        warnings.append(f"{Path(path).name}: the table printed shows {len(rows)} of its {shape.group(1)} rows (pandas "
                        "leaves out the middle as '...'): print it whole (pd.set_option('display.max_rows', None)) "
                        "or save it with to_csv")
    header = numbered_names(header)
    table = pd.DataFrame(rows, columns=header)
    totals = table[step_col].str.extract(_OF_TOTAL, expand=False)
    table[step_col] = table[step_col].str.replace(STEP_OF_TOTAL, r"\1", regex=True)
    parts, how = None, None
    if loss_col is not None and not bar:  # a training's table, perhaps one of several (two trainer.train())
        # Where the lines outside its rows could hold another (a file of one table, DeePMD's 100,000-row
        # lcurve.out, is not scanned again).
        joined = False
        if len(lines) - lines.count("") - len(where) > MIN_ROWS:
            rows_before = len(table)
            table = _with_later_tables(table, where, tables, step_col, loss_col)
            joined = len(table) > rows_before
            if next(tables, None) is not None:  # (one pass more, where eight were taken)
                warnings.append(f"{Path(path).name}: tables after the first {LATER_TABLES + 1} were not read (each "
                                "may be another training's): pass each training's log on its own")
        # (a table printed under one header line is one training: its steps going back, a resume's)
        parts = table_trainings(table, step_col, loss_col) if joined or lines.count(header_line) > 1 else None
        if parts is not None:
            # A table displayed again, whole or in part (a notebook's live display, then its last), repeats
            # its rows: no training of its own.
            table = table[~table.duplicated()].reset_index(drop=True)
            parts = table_trainings(table, step_col, loss_col)
    if parts is None and (parts := _runs_of_each_total(totals)) is not None:
        # (YOLOv8's "26/100" ... "32/100", stopped early, then another run's "150/150")
        how = f"of {', then '.join(dict.fromkeys(totals.dropna()))} epochs (its step written N/M, M changing)"
    if parts is None:
        return [_run(table, header, step_col, loss_col, bar, path, run_name(path), options, warnings)]
    note = trainings_note(path, len(parts), how or "that each start from their first step (each under a table "
                          "of its own: a training loop run again)")
    return [_run(table.iloc[rows].reset_index(drop=True), header, step_col, loss_col, bar, path,
                 f"{run_name(path)}#{k}", options, [note, *warnings]) for k, rows in enumerate(parts, 1)]


_OF_TOTAL = r"^\d+/(\d+)$"


def _runs_of_each_total(totals: pd.Series) -> list[np.ndarray] | None:
    """The rows of each stretch whose step is written ``N/M`` with one ``M``, where ``M`` changes
    (two trainings of different lengths pasted one after another: each its own run; a row without
    ``M`` joins the stretch before it); else None.

    Example:
        >>> [rows.tolist() for rows in _runs_of_each_total(pd.Series(["100", "100", None, "150"]))]
        [[0, 1, 2], [3]]
    """
    known = totals.ffill()
    if known.nunique() < 2:
        return None
    starts = np.flatnonzero((known != known.shift()).to_numpy() & known.notna().to_numpy())
    bounds = [*starts.tolist(), len(totals)]
    bounds[0] = 0
    return [np.arange(a, b) for a, b in zip(bounds, bounds[1:])]


def _run(table: pd.DataFrame, header: list[str], step_col: str, loss_col: str | None, bar: bool, path,
         name: str, options: LoadOptions, warnings: list[str]) -> RunData:
    """One run of a table's rows (the table's, or one training's where it holds several)."""
    if loss_col is None:  # a progress bar's loss components, summed (as its results.csv is)
        parts = _components(header, bar)
        if options.loss_col is not None:  # a name the table lacks: not passed over in silence
            raise ValueError(f"{path}: no column '{options.loss_col}' in its table (its loss's terms: "
                             f"{', '.join(parts)}): pass --loss-col with one of them, or none for their sum")
        table.columns = [_TRAIN + c if c in parts else c for c in header]
        parts = [_TRAIN + c for c in parts]
        sum_loss_components(table, parts, path, warnings)
        loss_col = metrics.LOSS
    else:
        step_column(header, options.step_col)  # a named column the table lacks: said here
        chosen, chosen_by_its_words = _chosen_loss(header, options)
        loss_col, inferred = loss_column(header, chosen)
        if inferred or chosen_by_its_words:
            warnings.append(f"{Path(path).name}: {inferred_loss_note(loss_col)}")
    steps = table_steps(table, step_col, loss_col, path, warnings, batch_rows=not bar)  # a bar's redraws: its last
    spacy = _is_spacy(header, step_col)
    if spacy:
        steps = _spacy_first_row_out(steps, path, warnings)
    steps, unit = step_unit(step_col, steps, path, warnings)
    meta = {"format": NAME, "columns": [str(c) for c in table.columns], **unit}
    if spacy:
        meta[LOSS_SUMS_GROWING_BATCHES] = True
    return RunData(name=name, path=str(path), source=NAME, steps=steps, meta=meta, warnings=warnings)


def _with_later_tables(table: pd.DataFrame, where: list[int], tables, step_col: str, loss_col: str) -> pd.DataFrame:
    """``table`` (its rows at line numbers ``where``) with the rows of the later ``tables`` (as
    :func:`_tables` yields them) of the same step and loss column under another header, in line
    order: a notebook's second ``trainer.train()`` whose table names another score (``Mcc Score``
    after ``F1 Score``), from its own first step, or one that goes on after the steps before it.
    A table of other columns, or one that goes back into the steps before it, is not taken."""
    parts = [(where, table)]
    taken = set(where)
    for header, rows, step, loss, bar, at, _ in itertools.islice(tables, LATER_TABLES):  # (each a pass over the rest)
        if step != step_col or loss != loss_col or bar:
            continue
        keep = [i for i, line in enumerate(at) if line not in taken]
        if len(keep) < MIN_ROWS:
            continue
        later = pd.DataFrame([rows[i] for i in keep], columns=numbered_names(header))
        later[step_col] = later[step_col].str.replace(STEP_OF_TOTAL, r"\1", regex=True)
        before = pd.concat([pd.to_numeric(part[step_col], errors="coerce") for _, part in parts])
        steps = pd.to_numeric(later[step_col], errors="coerce").dropna().to_numpy()
        fresh = len(steps) >= 2 and (steps[0] <= before.min() or steps[0] <= steps[1] - steps[0])
        if not (fresh or (len(steps) >= 2 and steps[0] > before.max())):
            continue
        parts.append(([at[i] for i in keep], later))
        taken.update(at[i] for i in keep)
    if len(parts) == 1:
        return table
    order = np.argsort(np.concatenate([np.asarray(lines) for lines, _ in parts]), kind="stable")
    return pd.concat([part for _, part in parts], ignore_index=True).iloc[order].reset_index(drop=True)


def _is_spacy(header: list[str], step_col: str) -> bool:
    """Whether the table is spaCy's ``spacy train`` table (``E  #  LOSS TOK2VEC  LOSS NER ...``)."""
    return step_col == "#" and any(name.startswith("LOSS ") for name in header)


def _spacy_first_row_out(steps: pd.DataFrame, path: str | Path, warnings: list[str]) -> pd.DataFrame:
    """``steps`` without the row at update 0 of spaCy's table: each row's losses are summed over the
    updates since the evaluation before, 200 by default, and the first row's over one update (49
    against 2,288 after it: every healthy run diverged from its first row)."""
    if 0 not in steps.index or len(steps.index) < 3:
        return steps
    warnings.append(f"{Path(path).name}: spaCy sums each row's losses over the updates since the evaluation "
                    f"before; the row at update 0 sums one update's and is left out")
    return steps.drop(index=0)


def _cells(line: str, gapped: bool = False) -> list[str]:
    """The line's cells: apart by tabs, else by spaces (``gapped``: by two spaces or more)."""
    if gapped:
        cells = _GAP.split(line.strip())
    else:
        cells = line.split("\t") if "\t" in line else line.split()
    return [cell.strip() for cell in cells if cell.strip()]


def _gapped(line: str, header: list[str]) -> list[str] | None:
    """The header's names cut at gaps of two spaces or more, where one holds a space (``Training
    Loss``); None where that cuts no differently."""
    names = _cells(line, gapped=True)
    return names if len(names) != len(header) and len(names) >= 2 and "\t" not in line else None


def _is_number(cell: str) -> bool:
    return bool(_NUMBER.match(cell) or STEP_OF_TOTAL.match(cell))


def _components(header: list[str], bar: bool) -> list[str]:
    """The loss columns of a progress bar's table whose sum is the loss (none: not such a table)."""
    if not bar:
        return []
    return [c[len(_TRAIN):] for c in loss_components([_TRAIN + c for c in header])] or yolov5_terms(header)


def _ruled(line: str, rule: str) -> list[str] | None:
    """The header's names cut where the rule under it starts each column (a name may hold a
    space), or None where a cut falls inside a word or leaves a column without a name."""
    starts = [m.start() for m in _DASHES.finditer(rule)]
    if len(starts) < 2 or (starts[0] > 0 and not line[: starts[0]].isspace()):  # text left of the rule
        return None
    ends = starts[1:] + [len(line)]
    if any(0 < cut < len(line) and not line[cut - 1].isspace() for cut in starts[1:]):
        return None
    cells = [line[a:b].strip() for a, b in zip(starts, ends)]
    return cells if all(cells) else None


def _find(lines: list[str], options: LoadOptions):
    """``(header, rows, step column, loss column or None for a sum, rows carry a bar)`` of the
    first table (of the lines without a logger's prefix where they have one), or None."""
    first = next(_tables(lines, options), None)
    if first is None and (plain := without_logger_prefix(lines)) is not None:
        first = next(_tables(plain, options), None)
    return None if first is None else first[:5]


def _chosen_loss(header: list[str], options: LoadOptions) -> tuple[str | None, bool]:
    """``--loss-col`` as the header names it (a progress bar's loss column by the name its sum's
    warning gives it too: Ultralytics' ``train/box_loss`` for the bar's ``box_loss``, as its
    results.csv names it), else spaCy's task column (:func:`_spacy_task_loss`), and whether it was
    chosen so, by its words (its warning says so); ``(None, False)`` for neither.

    Example:
        >>> _chosen_loss(["Epoch", "box_loss", "cls_loss"], LoadOptions(loss_col="train/box_loss"))
        ('box_loss', False)
    """
    named = options.loss_col
    if named is not None and named.startswith(_TRAIN) and named not in header and named[len(_TRAIN):] in header:
        return named[len(_TRAIN):], False
    if named is not None:
        return named, False
    task = _spacy_task_loss(header)
    return task, task is not None


# spaCy's embedding layers, whose loss column is what the components above them sent back (its width cuts a
# transformer's name: "LOSS TRANS..."): the task's column is the loss.
_SPACY_EMBEDDINGS = ("TOK2VEC", "TRANSFORMER", "TRANS")


def _spacy_task_loss(header: list[str]) -> str | None:
    """spaCy's one task component's loss column beside its embedding layer's (``LOSS TRANS...  LOSS NER``: "LOSS
    NER"), else None.

    Example:
        >>> _spacy_task_loss(["E", "#", "LOSS TRANS...", "LOSS NER", "ENTS_F"]), _spacy_task_loss(["step", "loss"])
        ('LOSS NER', None)
    """
    if "#" not in header:
        return None
    losses = [name for name in header if name.startswith("LOSS ")]
    tasks = [name for name in losses if name[5:].rstrip(".").upper() not in _SPACY_EMBEDDINGS]
    return tasks[0] if len(tasks) == 1 and len(losses) > 1 else None


def _tables(lines: list[str], options: LoadOptions):
    """Each table of ``lines`` in the order its header is printed first: ``(header, rows, step
    column, loss column or None for a sum, rows carry a bar, each row's line number, the header's line)``."""
    tried: set[tuple[str, ...]] = set()
    comments: Counter | None = None
    only_rows: dict[str, bool] = {}  # a commented line printed again: whether the file is its table alone
    for at, line in enumerate(lines):
        # A header written as a comment, once, at a file's head: its names apart by spaces (one
        # space, some of them), no DataFrame's index under it. (One printed again before each
        # table is a console's: NequIP's "# Epoch batch loss ..." over its training and its
        # validation batches alike.)
        commented = _COMMENT_MARK.match(line) is not None
        if commented:
            comments = comments or Counter(c for c in lines if _COMMENT_MARK.match(c))
            if comments[line] > 1 and line not in only_rows:  # (asked once per header's text: each scans the file)
                only_rows[line] = _only_its_rows(lines, line)
            commented = comments[line] == 1 or only_rows[line]
        if commented:
            line = _COMMENT_MARK.sub(r"\1", line)
        header = _cells(line)
        ruled = _ruled(line, lines[at + 1]) if at + 1 < len(lines) and _RULE.match(lines[at + 1]) else None
        gapped = None if ruled is not None or commented else _gapped(line, header)
        if ruled is not None and len(ruled) != len(header):
            header, printed = ruled, header  # names with spaces: the rule says where each ends
        elif gapped is not None:
            header, printed = gapped, gapped  # names with spaces, two or more spaces apart
        else:
            printed = header
        named_index = _index_name(lines, at) if ruled is None and gapped is None and not commented else None
        if named_index is not None:
            header = [named_index, *header]  # print(df) of a frame with a named index: its name below
        indexed = named_index is None and line[:1].isspace() and not commented
        if len(header) < (1 if indexed else 2) or tuple(header) in tried or any(_is_number(c) for c in header):
            continue
        step_col, (loss_col, _) = sniff_columns(header, options.step_col, _chosen_loss(header, options)[0])
        if step_col is None and indexed and loss_col is not None:
            # print(df) of a frame without a step column (pd.DataFrame(history.history)): its index
            # numbers the rows, as a to_csv index does
            header, step_col, indexed = ["", *header], "", False
        if step_col is None or (loss_col is None and not loss_components([_TRAIN + c for c in header])
                                and not yolov5_terms(header)):
            continue
        if len(tried) == MAX_HEADERS:
            return
        tried.add(tuple(header))
        # indexed, print(df): the header indented over the index, each row led by it (0, 1, 2, ...)
        starts = _name_starts(line, header) if ruled is None and gapped is None and not indexed else None
        spans = [m.span() for m in _DASHES.finditer(lines[at + 1])] if ruled is not None else None
        where: list[int] = []
        rows, bar = _rows(lines[at + 1:], header, header.index(step_col), printed,
                          _header_gap(line) if gapped is not None else 0, indexed, starts, where, spans,
                          header.index(loss_col) if loss_col in header else None)
        losses = [loss_col] if loss_col is not None else _components(header, bar)
        if losses and (len(rows) >= MIN_ROWS or _prints_nan(rows, [header.index(c) for c in losses])):
            yield header, rows, step_col, loss_col, bar, [at + 1 + i for i in where], lines[at]


def _prints_nan(rows: list[list[str]], columns: list[int]) -> bool:
    """Whether a row prints its loss (or a term of it) as NaN: a paste of a run's first rows up to
    where it went NaN is a run, however few (Ultralytics' "1/100  2.37G  nan  nan  nan  nan  16  640:
    100%|...|", then the traceback it stopped with).

    Example:
        >>> _prints_nan([["1/100", "2.37G", "nan", "nan"]], [2, 3]), _prints_nan([["1", "2.3"]], [1])
        (True, False)
    """
    return any(row[i].strip().lower() in NONFINITE_TEXT for row in rows for i in columns if i < len(row))


def _header_gap(line: str) -> int:
    """The narrowest gap of two spaces or more between a header's names (a tab counts as one)."""
    return min((len(m.group(0)) for m in _GAP.finditer(line.strip())), default=2)


def _index_name(lines: list[str], at: int) -> str | None:
    """The index's name where ``lines[at]`` is the header of a printed DataFrame with a named index
    (``df.set_index("step")``): pandas indents the header over the index and prints the index's
    name alone at the start of the next line. None otherwise."""
    if at + 1 >= len(lines) or not lines[at][:1].isspace() or lines[at + 1][:1].isspace():
        return None
    below = _cells(lines[at + 1])
    return below[0] if len(below) == 1 and not _is_number(below[0]) else None


def _padded(line: str, cells: list[str], width: int, gap: int) -> list[str]:
    """A row of a table whose cells are ``gap`` spaces apart (or more) that has fewer cells than its
    header: an empty cell where two cells stand twice that gap apart or more (a column left empty
    between them), the rest empty at the end (a validation loss not printed at that step).

    Example:
        >>> _padded("100        1.70", ["100", "1.70"], 3, 4), _padded("10    2.38", ["10", "2.38"], 3, 4)
        (['100', '', '1.70'], ['10', '2.38', ''])
    """
    gaps = [len(m.group(0)) for m in _GAP.finditer(line.strip())]
    wide = [i for i, run in enumerate(gaps) if run >= 2 * gap]
    out = list(cells)
    if len(wide) <= width - len(cells) and len(gaps) == len(cells) - 1:
        for i in reversed(wide):
            out.insert(i + 1, "")
    return out + [""] * (width - len(out))


def _name_starts(line: str, header: list[str]) -> list[int] | None:
    """Where each of the header's names starts on its line, where they are left-aligned columns
    two or more spaces apart (Chainer's PrintReport pads each name and value to its column's
    width); else None."""
    found = [m for m in re.finditer(r"\S+", line)]
    if len(found) != len(header) or any(b.start() - a.end() < 2 for a, b in zip(found, found[1:])):
        return None
    return [m.start() for m in found]


def _by_starts(line: str, starts: list[int], width: int) -> list[str] | None:
    """A row cut at its header's name starts (:func:`_name_starts`), its blank cells empty (a value
    not reported at that row: PrintReport's validation cells between evaluations); None where a cut
    falls inside a word or text stands left of the first column."""
    if (starts[0] > 0 and line[: starts[0]].strip()) or any(
            0 < cut < len(line) and not line[cut - 1].isspace() and not line[cut].isspace() for cut in starts[1:]):
        return None
    cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], len(line)])]
    return cells if len(cells) == width and " " not in "".join(cells) else None


def _by_rule(line: str, spans: list[tuple[int, int]]) -> list[str] | None:
    """A row with each cell in the column whose rule's dashes it stands over, the rest empty (skorch's
    table: its checkpoint column "cp" blank where the epoch saved nothing); None where a cell stands
    over no column's dashes or two, or two cells over one.

    Example:
        >>> _by_rule("   5  0.27    2.2", [(3, 4), (6, 10), (12, 14), (16, 19)])
        ['5', '0.27', '', '2.2']
    """
    cells = [""] * len(spans)
    for word in re.finditer(r"\S+", line):
        over = [i for i, (a, b) in enumerate(spans) if word.start() < b and word.end() > a]
        if len(over) != 1 or cells[over[0]]:
            return None
        cells[over[0]] = word.group(0)
    return cells


def _rows(lines: list[str], header: list[str], step_at: int, printed: list[str] | None = None,
          gapped: int = 0, indexed: bool = False, starts: list[int] | None = None,
          where: list[int] | None = None, spans: list[tuple[int, int]] | None = None,
          loss_at: int | None = None) -> tuple[list[list[str]], bool]:
    """The rows under each printing of ``header`` (its line's cells as split by spaces:
    ``printed``; a row under another header is another table's), and whether they carry a
    progress bar. ``gapped``: the header's gap, where its cells are two or more spaces apart: a row
    with fewer cells has them empty where its gaps say, else at its end (:func:`_padded`).
    ``indexed``: a row may be led by one cell more, an integer (a printed DataFrame's index), left
    out. ``starts``: where the header's names start, where they are left-aligned columns: a row
    with fewer cells is cut there (:func:`_by_starts`). ``spans``: the dashes of the rule under the
    header, a row with fewer cells has each under the dashes it stands over (:func:`_by_rule`), unless it
    is the text's last line and its cell of the loss (``loss_at``) is blank (a paste cut in its row:
    "  6     600       2223" read a NaN).
    ``where`` (if given) gets each row's index in ``lines``."""
    width = len(header)
    rows: list[list[str]] = []
    bar = False
    mine = True  # under this table's header, not another's
    last = next((k for k in range(len(lines) - 1, -1, -1) if lines[k].strip()), -1)  # (a paste cut in it: no row)
    for number, line in enumerate(lines):
        if line.lstrip().startswith("#"):
            continue  # a comment under the header (DeePMD's "# If there is no available reference data, ..."): no row
        cells = _cells(line, gapped)
        if gapped and 1 < len(cells) < width and step_at < len(cells):
            cells = _padded(line, cells, width, gapped)
        if not cells or _RULE.match(line):  # a header's underline: no row, no other table
            continue
        if cells == header or cells == printed:
            mine = True
            continue
        drawn = False  # the row of a progress bar
        if len(cells) > width and cells[width - 1].endswith(":"):  # the row, then its progress bar
            cells, tail = [c.rstrip(":") for c in cells[:width]], cells[width:]
            drawn = any("|" in c or c.endswith("%") for c in tail)
        elif indexed and len(cells) == width + 1 and cells[0].isdigit():
            cells = cells[1:]  # the index pandas prints before each row
        elif len(cells) != width:
            cut = None
            if 1 < len(cells) < width:
                cut = (_by_starts(line, starts, width) if starts is not None
                       else _by_rule(line, spans) if spans is not None and len(spans) == width else None)
            if cut is None or not cut[step_at] or number == last and loss_at is not None and not cut[loss_at]:
                continue
            cells = cut
        if not _is_number(cells[step_at]):
            if not any(_is_number(c) for c in cells):
                mine = False  # another table's header
            continue
        # A bar's row with its step as N/M is this table's under another's header too: a paste that
        # kept the header once, the validation tables between the epochs.
        if mine or (drawn and STEP_OF_TOTAL.match(cells[step_at])):
            rows.append(cells)
            bar = bar or drawn  # (a row's bar: not a line of other output, "Success Rate: 100.0%")
            if where is not None:
                where.append(number)
    return rows, bar
