"""Loader for the text logs of many trainers, through the dialect table.

The sniffer tries each dialect of :data:`~sentinel.analyze.loaders.dialects.DIALECTS` on the
start of the file and picks the one that recognises the most record lines (the generic reader
only when no tool's dialect does). Source code and packaging files are never claimed.

Hugging Face Trainer dicts carry no step: each takes the count of the progress bar drawn beside
it (:mod:`~sentinel.analyze.loaders.progress_bar`); without one they are numbered in order and,
when the log's own banner gives the steps per epoch (``Num Epochs``, ``Total optimization
steps``), scaled by the logging interval found from the ``epoch`` field.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import (CRASHES_BEFORE_RESTARTS, LOGGED_NAN, LOSS_FROM_PERPLEXITY, RESTARTED_LENGTH,
                                      SKIPPED_UPDATES, STEP_UNIT, LoadOptions, RunData, nonfinite_name)
from sentinel.analyze.loaders.dialects import (AMP_ONLY, DIALECTS, EPOCH_LINES, EPOCH_LINES_IN_ORDER, FALLBACKS,
                                               COQUI, GENERAL_READERS, GENERIC, HF_OWN_STEPS, HF_TRAINER, KERAS_EPOCHS,
                                               LOSS_LINES, NONFINITE_ONLY, PAIRS, PROGRESS_LINES, YOLOV4_PYTORCH,
                                               hf_cut_dict, reads_bar_running_mean)
from sentinel.analyze.loaders.coqui_optimizers import generator_total
from sentinel.analyze.loaders.dialect_types import Dialect, LossTerms
from sentinel.analyze.loaders.empty_window import without_empty_window
from sentinel.analyze.loaders.crash_tail import (STOP_WORDS, TRACEBACK, crash_after, final_error, stop_line,
                                                 watchdog_at)
from sentinel.analyze.loaders.keys import (canonical_key, inferred_loss_note, is_aggregate, looks_like_loss,
                                           suggested_loss)
from sentinel.analyze.loaders.launcher_ranks import one_rank_unprefixed, prefixes_removed
from sentinel.analyze.loaders.log_lines import Lines, without_lines
from sentinel.analyze.loaders.log_words import in_english
from sentinel.analyze.loaders.loss_key import (LossKey, find_loss_key, loss_key_note, loss_keys, named_key,
                                                only_key_as_loss)
from sentinel.analyze.loaders.progress_bar import bar_steps
from sentinel.analyze.loaders.restarted_steps import split_restarted
from sentinel.analyze.loaders.skipped_updates import WORD as SKIPPED_WORD, skipped_counts
from sentinel.analyze.loaders.textlog import SNIFF_BYTES, read_head, read_tail, read_text, run_name, trainings_note
from sentinel.analyze.loaders.textscan import (KERAS_EPOCH_HEADER, KeyNotFound, clean_text, count_records,
                                               has_records, plain_numbers, scan, without_evaluations)

NAME = "textlog"
DESCRIPTION = "text logs, read as the first of these that fits:"
FORMATS = tuple(dict.fromkeys(d.description for d in DIALECTS))  # each listed by `sentinel formats`

# Files that are code or configuration, whatever numbers they print.
_NOT_LOGS = frozenset({".py", ".pyi", ".toml", ".cfg", ".ini", ".yaml", ".yml", ".ipynb", ".js", ".ts",
                       ".c", ".h", ".cc", ".cpp", ".cu", ".rs", ".go", ".java", ".sh", ".json", ".csv",
                       ".tsv", ".jsonl", ".html", ".lock", ".md", ".rst"})
_DOCUMENTS = frozenset({".md", ".rst"})
# sniff() takes ``documents`` (see discover: a file named on its own).
READS_DOCUMENTS = True
SNIFF_TAKES_OPTIONS = True  # --loss-col names the key a log's loss goes by
# A text of one line is sniffed on this much of it: the dialects' patterns, each tried at every
# position of the line, took 3 s a sniff on 600 KB (a log whose line ends were lost on the way).
_ONE_LINE_SNIFF = 16384
# The start of a head that a fallback dialect's series check reads first.
_SERIES_PREFIX = 65536
_HF_EPOCHS = re.compile(r"Num Epochs = ([\d,]+)")
_HF_TOTAL = re.compile(r"Total optimization steps = ([\d,]+)")


def pick_dialect(text: str, least: int | None = None, compete: bool = False) -> Dialect | None:
    """The dialect that recognises the most record lines in ``text``, or None.

    ``least``: the record lines a dialect needs, instead of its own ``min_records`` (a short
    paste named on its own: two lines that show a NaN are what a user brings). ``compete``: the
    general readers (:data:`FALLBACKS`) are asked even where a tool's dialect fits, and win with
    more records (a text whose loss key was written as ``loss``: a tool's shape may then fit a
    few summary lines, SAM 2's "Losses and meters: {...}" dicts taken for the Trainer's).

    Example:
        >>> pick_dialect("iter 1: loss 2.5, time 9.1ms\\niter 2: loss 2.4, time 9.0ms\\n"
        ...              "iter 3: loss 2.3, time 9.0ms\\n").name
        'nanogpt'
    """
    global _last_pick
    last = _last_pick  # one read: a reading-ahead thread may replace it meanwhile
    if last[0] == text and last[1] == (least, compete):  # a file's sniff just picked for this head; its load asks again
        return last[2]
    dialect = _pick_dialect(text, least, compete)
    _last_pick = (text, (least, compete), dialect)
    return dialect


_last_pick: tuple[str | None, tuple | None, Dialect | None] = (None, None, None)  # the last head, (least, compete), pick
# By identity: `in` a tuple of dialects compared them field by field (0.1 ms a file sniffed).
_FALLBACK_IDS = frozenset(map(id, FALLBACKS))
_GENERAL_IDS = frozenset(map(id, GENERAL_READERS))


def _pick_dialect(text: str, least: int | None, compete: bool = False) -> Dialect | None:
    lines = Lines.shared(text).derived(clean_text)  # split and grouped once for every dialect (and the llm.c sniff)
    text = lines.text
    if len(text) > _ONE_LINE_SNIFF and "\n" not in text.rstrip("\n"):
        text = text[:_ONE_LINE_SNIFF]  # a log pasted without its line ends: its start tells as well
        lines = Lines(text)
    text, lines = plain_numbers(text, lines)
    text, lines = in_english(text, lines)
    best, best_count = None, 0
    for dialect in DIALECTS:
        fallback = id(dialect) in _FALLBACK_IDS
        if id(dialect) in _GENERAL_IDS and best is not None and not compete:
            if _records_of_its_own(lines, best):
                if (best is PROGRESS_LINES or best is GENERIC) and 2 * count_records(lines, EPOCH_LINES) >= best_count \
                        and _epoch_lines_beside_bars(text, lines, best_count):  # (the count first: it is cheaper)
                    best = EPOCH_LINES  # each epoch's line, where the bars drawn are each epoch's last draw
                break
            # a tool's event lines alone (DeepSpeed's overflow lines after a bar's loss=): no records,
            # so a general reader's records win
            compete, best_count = True, 0
        count = count_records(lines, dialect)
        needed = dialect.min_records if least is None else min(least, dialect.min_records)
        if count >= needed and count > best_count:
            if fallback and not _is_series(text, dialect, needed):
                continue
            if dialect is PAIRS and _table_above_pairs(text):
                continue  # a table's rows, the longer of them not pairs: the table reader's
            best, best_count = dialect, count
    if best is None and count_records(lines, AMP_ONLY) >= AMP_ONLY.min_records:
        return AMP_ONLY  # overflow lines between lines of no format read: the loss scale is judged
    if best is None and least is not None and least <= 1 and count_records(lines, NONFINITE_ONLY):
        return NONFINITE_ONLY  # a paste of a NaN's error alone, named on its own
    return best


def _finished_bars_only(text: str) -> bool:
    """Whether every tqdm bar on a line that holds a loss (in its description or its postfix) is drawn finished
    (``113/113``), one an epoch and perhaps one more for its evaluation, no draw in between: Ignite's "ITERATION -
    loss: 1.560: 100%|...| 113/113" beside its "Training Results - Epoch: 1  Avg accuracy: 0.353 Avg loss: 1.660",
    the epoch's mean the bar's last batch only hints at.

    Example:
        >>> _finished_bars_only("loss: 1.56: 100%|##| 113/113 [01:04<00:00]\\nEpoch: 1 Avg loss: 1.66\\n")
        True
    """
    found = False
    for bar in _LOSS_BAR_COUNT.finditer(text):
        if bar.group(1) != bar.group(2):
            return False  # (a bar drawn unfinished, as most are: no search of the rest)
        found = True
    return found


# A tqdm bar's count on a line that holds a loss, in its description or its postfix ("Epoch 3/500: 100%|##| 19/19
# [00:00<00:00, 177.80batch/s, loss=2.62]": the last batch's, beside "epoch 3/500 - train loss: 1.1969, ...").
_LOSS_BAR_COUNT = re.compile(r"(?im)^(?=[^\n]*\bloss\b)[^\n]*?\d+%\|[^|\n]*\|[^\S\n]*(\d+)/(\d+)[^\S\n]*\[[^\n]*")


def _epoch_lines_beside_bars(text: str, lines: Lines, records: int) -> bool:
    """Whether ``text``'s bars holding a loss are all drawn finished and, without them, its one-line-an-epoch lines
    are half of ``records`` or more (an epoch's line beside each bar; not the bars read as epoch lines themselves:
    "Train Epoch: 3 Loss: 3.636 ...: 100%|...| 10010/10010"). ``lines``: ``text``'s, whose distinct lines are asked
    first (most logs draw no such bar)."""
    distinct = lines.distinct_text()
    if "%|" not in distinct or _LOSS_BAR_COUNT.search(distinct) is None or not _finished_bars_only(text):
        return False
    return 2 * count_records(Lines(_without_finished_bars(text)), EPOCH_LINES) >= records


def _without_finished_bars(text: str) -> str:
    """``text`` without its finished bars' lines, where one-line-an-epoch lines are read beside them: each bar's loss
    is its last batch's, the epoch's line its mean (:func:`_finished_bars_only`).

    Example:
        >>> _without_finished_bars("Epoch 1/9: 100%|#| 19/19 [00:00, loss=2.6]\\nepoch 1/9 - train loss: 5.28\\n")
        'epoch 1/9 - train loss: 5.28\\n'
    """
    return without_lines(text, _LOSS_BAR_COUNT)


def _records_of_its_own(lines: Lines, dialect: Dialect) -> bool:
    """Whether a dialect that a sniff line picked has record lines in the text, not only the lines
    its sniff counts (DeepSpeed's "OVERFLOW! ... Attempted loss scale" printed after a tqdm bar's
    ``loss=nan``: the bar's records are the general readers')."""
    # (a shape that reads a value beside the records is none: a skeleton trainer's "Eval epoch" lines where its
    # epochs print their batches, read by the general readers)
    # (a dialect that rewrites the text reads its records from what it writes: its sniff's lines stand for them)
    records = [shape.pattern for shape in dialect.shapes if shape.beside is None]
    return (dialect.sniff is None or not records or dialect.rewrite is not None
            or any(lines.count(pattern) for pattern in records))


def _table_above_pairs(text: str) -> bool:
    """Whether a header of column names stands above the step-and-loss lines (a notebook's
    ``Step    Training Loss    Validation Loss``, whose rows with a validation loss hold three
    numbers): read as lines, those rows were lost."""
    from sentinel.analyze.loaders import space_table  # pandas with it: only where pairs were found

    return space_table.holds_table(text[:_SERIES_PREFIX].split("\n"))


def sniff(path: str | Path, options: LoadOptions | None = None, documents: bool = False,
          least: int | None = None) -> bool:
    """True when a text dialect recognises the file.

    Args:
        path: the file.
        options: ``loss_col``: the key the lines' loss goes by, where none is named loss.
        documents: a Markdown or reStructuredText file may be a log (one named on its own: a
            paste kept as ``notes.md``); in a directory walk it is a README.
        least: the record lines a dialect needs (see :func:`pick_dialect`): a short paste.

    Example:
        >>> sniff("/nonexistent.log")
        False
    """
    suffix = Path(path).suffix.lower()
    if suffix in _NOT_LOGS and not (documents and suffix in _DOCUMENTS):
        return False
    head = read_head(path)
    loss_col = (options or LoadOptions()).loss_col
    if head is None:
        return False
    if _pick(head, least, loss_col)[0] is not None:
        return True
    unprefixed = _unprefixed(head, least, loss_col)  # (the rank read may print too few records on its own)
    if unprefixed is not head and _pick(unprefixed, least, loss_col)[0] is not None:
        return True
    tail = read_tail(path)  # a long log whose records come after its first megabyte
    return tail is not None and _reads_records(_pick(tail, least, loss_col)[0])


def _unprefixed(text: str, least: int | None, loss_col: str | None, warnings: list[str] | None = None) -> str:
    """``text`` with a launcher's prefix off the lines of the rank read (:func:`one_rank_unprefixed`),
    for a text no dialect reads records from as it is (the PyTorch quickstart's ``loss: 2.30  [
    0/60000]`` under torchrun's ``[rank0]:``)."""
    def records_in(ranks_text: str) -> Callable[[str], bool] | None:
        dialect, key = _pick(ranks_text[: 1 << 20], least, loss_col)
        if not _reads_records(dialect):
            return None
        return lambda rank_text: has_records(key.rewrite(rank_text) if key is not None else rank_text, dialect)
    return one_rank_unprefixed(text, [] if warnings is None else warnings, records_in)


def _pick(text: str, least: int | None, loss_col: str | None = None) -> tuple[Dialect | None, LossKey | None]:
    """:func:`pick_dialect`; where none fits, the one that fits once the key the lines' loss goes
    by (``loss_col``, or :func:`find_loss_key`'s) is written as ``loss``, and that key."""
    dialect = pick_dialect(text, least)
    if _reads_records(dialect):
        return dialect, None
    # None, or event lines alone: the lines may name their loss otherwise (DG-Net's "DLoss:nan"
    # between apex's overflow lines)
    key = find_loss_key(clean_text(text), loss_col)
    if key is None:
        return dialect, None
    named = pick_dialect(key.rewrite(text), least, compete=True)
    return (named, key) if _reads_records(named) else (dialect, None)


def _named_key_unread(head: str, dialect: Dialect | None, options: LoadOptions) -> str | None:
    """The key ``--loss-col`` names, as the lines write it, where the dialect picked reads another
    loss from them and not this key (its lines' shapes name their own keys: fast-reid's
    ``total_loss`` is read, its ``loss_cls`` beside it is no field of them); else None."""
    if options.loss_col is None or not _reads_records(dialect):
        return None
    named = named_key(head, options.loss_col)
    if named is None or named.lower() == metrics.LOSS:
        return None
    try:
        scan(head, dialect, replace(options, step_col=None))
    except KeyNotFound:
        return named
    return None


def _reads_records(dialect: Dialect | None) -> bool:
    """Whether a picked dialect reads record lines (not event lines alone, nor none)."""
    return dialect is not None and dialect is not AMP_ONLY and dialect is not NONFINITE_ONLY


# StyleGAN2/3's (and StyleGAN2-ADA's) training loop: "tick 0     kimg 0.0      time 1m 02s       sec/tick 7.5 ...".
_STYLEGAN_TICK = re.compile(r"^tick \d+[^\S\n]+kimg [\d.]+[^\S\n]", re.MULTILINE)


def why_not(path: str | Path, options: LoadOptions | None = None, least: int | None = None) -> str | None:
    """Why a text log that no dialect reads is no run, where its lines say so: they name several
    losses and none is the total (read once one is named), or ``--loss-col`` names no key of
    them; else None.

    Example:
        >>> why_not("/nonexistent.log") is None
        True
    """
    options = options or LoadOptions()
    if Path(path).suffix.lower() in _NOT_LOGS:
        return None
    head = read_head(path)
    if head is None:
        return None
    head = prefixes_removed(head)  # (every process's: the messages tell of the lines, whichever printed them)
    text = clean_text(head)
    if _STYLEGAN_TICK.search(text) and options.loss_col is None:
        return (f"'{path}': its lines are StyleGAN's progress ticks (tick, kimg, sec/tick, ...), which print no loss: "
                "pass the run folder's stats.jsonl (Loss/G/loss and Loss/D/loss at each tick) or its TensorBoard "
                "event files")
    keys = loss_keys(text)
    if options.loss_col is not None:
        named = named_key(text, options.loss_col)
        if keys and named is None:
            return (f"'{path}': no key {options.loss_col!r} in its lines (keys that may be the loss: "
                    f"{', '.join(keys)}): pass --loss-col with one of them")
        if named is not None:  # the key is there, no step beside it (BasicTS' "epoch 1 / 100" a line above)
            return (f"'{path}': its lines hold {named} but sentinel finds no step it reads with it (the step or "
                    "epoch on a line of its own, or a format it does not know): print each step's loss on the line "
                    "of its step (epoch 3 | train_mae 2.31), or pass the logger's files")
        return None
    readable = _readable_losses(head, keys, least)
    if len(readable) >= 2:
        return (f"'{path}': its lines name {len(readable)} losses ({', '.join(readable)}) and none is the total: "
                f"pass --loss-col {suggested_loss(readable)} (or another of them) to read one, or log "
                "their sum as loss")
    if keys:
        return _one_record(text, path) or _one_step_named(text, keys, path) or _nonfinite_lines(text, path) \
            or _evaluation_loss_alone(text, path)
    logged = _logged_keys(text)
    if not logged:
        if _bars_alone(text):
            return (f"'{path}': its lines are progress bars that show no loss: log the loss to the bar (tqdm's "
                    "set_postfix(loss=...), Lightning's self.log('train_loss', loss, prog_bar=True)), or pass the "
                    "logger's files (metrics.csv, event files)")
        return None
    named = [key for key in logged if looks_like_loss(key)]
    if named:
        shown = _shown(text, named[0])
        if shown and not _a_number(shown.group(1)):  # a loss under its name, printed as no number
            return (f"'{path}': its lines name {', '.join(named)} but print no number sentinel reads for it (printed "
                    f"as {shown.group(1)!r}): print the loss as a plain number (loss.item(), float(loss))")
        return (f"'{path}': its lines name {', '.join(named)}, but sentinel finds no step it reads with "
                f"{'them' if len(named) > 1 else 'it'} (each on a line of its own, or a format it does not know): "
                "print each step's loss on the line of its step (step 100 | loss 2.31), or pass the logger's files")
    internals = [key for key in logged if canonical_key(key) in _TRAINING_INTERNALS]
    if internals:  # a grad norm, an LR, a loss scale: no progress measure, and a NaN there is news
        nonfinite = [f"{key} prints {len(found)} non-finite value(s) ({', '.join(dict.fromkeys(found))})"
                     for key in internals if (found := _nonfinite_values(text, key))]
        return (f"'{path}': its lines log {', '.join(logged)} but no loss" + (f"; {'; '.join(nonfinite)}" if nonfinite
                else "") + ": sentinel judges a training loss; print or log the loss beside them")
    # (a NaN there is news all the same: FermiNet's "variance=nan E_h^2" when its energy went NaN)
    printed = [(key, found) for key in logged if (found := _nonfinite_values(text, key))]
    nonfinite = [f"{key} prints {len(found)} non-finite value(s)" for key, found in printed]
    # a total over the loss's terms first (Leela Zero's "policy=2.1 mse=0.46 reg=0.1 total=2.7": not its mse),
    # then an error the script minimises (brain.js' "error", CNTK's "mse", MXNet's "Train-mae"): maybe the loss
    # (not a total of time: CatBoost's "total: 184ms   remaining: 36.7s"; its "learn: 0.677" is its loss
    # function's value, unless an eval_metric names another)
    # (nor an error printed below 0: a score, higher the better, as CatBoost's MultiClass "learn: -2.47")
    errors = [key for key in [*(k for k in logged if k.lower() in ("total", "tot")),
                              *(k for k in logged if _ERROR_KEY.match(k))]
              if _prints_numbers(text, key, least=0.0) and not _a_time(text, key)]
    if errors:
        return (f"'{path}': its lines log {', '.join(logged)} and no key named loss" + (
            f"; {'; '.join(nonfinite)}" if nonfinite else "") + f": where {errors[0]} is what the training minimises, "
            f"pass --loss-col {errors[0]} to judge it as the loss")
    if printed:  # (RandLA-Net's "L_out=  nan" at every step: its loss under a name of its own, gone NaN)
        return (f"'{path}': its lines log {', '.join(logged)} and no key named loss; {'; '.join(nonfinite)}: where "
                f"{printed[0][0]} is what the training minimises, it went non-finite: pass --loss-col "
                f"{printed[0][0]} to judge it as the loss")
    if (unnamed := unnamed_nonfinite_note(text)) is not None:  # DeepCTR's "batch: 387 nan 0.6595617 0.72703314"
        return (f"'{path}': its lines log {', '.join(logged)} and no key named loss; {unnamed}: sentinel judges a "
                "training loss; print it under its name (loss: 0.63)")
    series = [key for key in logged if _a_series(text, key)]
    if not series:  # (a launch's settings and ranks, "GLOBAL_RANK: 0, MEMBER: 1/2", each printed a few ways: no metric)
        return None
    return (f"'{path}': its lines log {', '.join(series)} but no loss (an environment's returns, an evaluation's "
            "metrics: a rise of these is progress, not divergence): sentinel judges a training loss; print or log "
            "the loss beside them")


# Values a key prints, at least, to be a series a run logs (a metric), not a setting printed once or at each launch
# (a config's "batch_size: 32"); three for a name in capitals, an environment variable's or a launcher's
# ("GLOBAL_RANK: 0", "GLOBAL_RANK: 1"; a metric so named, "PPL", prints more). A source file's name before its line
# number ("cuda_dnn.cc:473]", a C++ logger's prefix) is none.
_SERIES_VALUES = 2
_SOURCE_FILE = re.compile(r"\.(?:cc|cpp|cu|c|h|hpp|py)$")


def _a_series(text: str, key: str) -> bool:
    """Whether ``text`` prints ``key`` as a run logs a metric (see :data:`_SERIES_VALUES`).

    Example:
        >>> _a_series("GLOBAL_RANK: 0\\nGLOBAL_RANK: 1\\n", "GLOBAL_RANK"), _a_series("acc: 0.5\\nacc: 0.6\\n", "acc")
        (False, True)
    """
    if _SOURCE_FILE.search(key):
        return False
    least = _SERIES_VALUES + 1 if key.isupper() else _SERIES_VALUES
    seen = set()
    for match in re.finditer(rf"(?<![\w/.-]){re.escape(key)}['\"]?[^\S\n]*[:=][^\S\n]*([^\s,;|]+)", text):
        seen.add(match.group(1))
        if len(seen) >= least:
            return True
    return False


# A loss printed with its value ("Loss=0.36", "loss: 2.1"), and one an evaluation's word names ("Val Loss=0.36").
_PRINTED_LOSS = re.compile(r"(?i)\bloss['\"]?[^\S\n]*[:=][^\S\n]*['\"]?[-+]?(?:\d|\.\d|nan|inf)")
_EVALUATION_LOSS = re.compile(r"(?i)\b(?:val|valid|validation|eval|evaluation|test|dev)[ _]loss['\"]?[^\S\n]*[:=]"
                              r"[^\S\n]*['\"]?[-+]?(?:\d|\.\d|nan|inf)")


def _evaluation_loss_alone(text: str, path: str | Path) -> str | None:
    """The problem of a text whose every printed loss is an evaluation's (Torch-Pruning's fine-tuning: "Epoch 0/100,
    Acc=0.8868, Val Loss=0.3655, lr=0.0100"), with the option that judges it; else None.

    Example:
        >>> _evaluation_loss_alone("Epoch 0/9, Acc=0.88, Val Loss=0.36\\n", "x.log")[:62]
        "'x.log': its lines print an evaluation's loss alone (Val Loss,"
        >>> _evaluation_loss_alone("Epoch 0, Loss=0.5, Val Loss=0.36\\n", "x.log") is None
        True
    """
    evaluated = list(_EVALUATION_LOSS.finditer(text))
    if not evaluated or len(evaluated) != len(_PRINTED_LOSS.findall(text)):
        return None
    name = re.split(r"['\"]?[^\S\n]*[:=]", evaluated[0].group(0))[0]
    line = text.count("\n", 0, evaluated[0].start()) + 1
    return (f"'{path}': its lines print an evaluation's loss alone ({name}, first on line {line}), no training loss: "
            f"sentinel judges a training loss; pass --loss-col {name!r} to judge the evaluation's as one, or log the "
            "training loss beside it")


# A value printed non-finite as a word of its own among numbers: "387 nan 0.6595617", "| nan |", UPIT's "train =
# nan(1581.14s/2500)", ESPnet2's "The grad norm is nan." (not prose's "diverged into NaN loss": no word after it).
_UNNAMED_NONFINITE = re.compile(r"^(?=[^\n]*\d)[^\n]*?(?<![\w.])[-+]?(?i:nan|inf(?:inity)?)(?!\w|\.\w|\((?![\d.]))"
                                r"(?![^\S\n]+[A-Za-z])[^\n]*$", re.MULTILINE)
# Lines read for it: a refusal's, of a file's head.
_UNNAMED_SEARCHED = 1 << 20


def unnamed_nonfinite_note(text: str) -> str | None:
    """What a text no reader takes says of values printed non-finite where no name says what they are
    (xLearn's table of "Train log_loss" columns, each row's ``nan``; DeepCTR's ``batch: 387 nan 0.6595617``):
    how many lines and the first, for a refusal to tell the news; else None.

    Example:
        >>> unnamed_nonfinite_note("batch: 386 0.69 0.62\\nbatch: 387 nan 0.65\\nbatch: 388 nan 0.69\\n")[:64]
        "2 of its lines print a non-finite value (the first, line 2: 'bat"
        >>> unnamed_nonfinite_note("nanoGPT step 3 loss 2.1\\n") is None
        True
        >>> unnamed_nonfinite_note("10000/10000 [====] - 52s - reward: nan\\n")[-32:]
        'its reward went non-finite there'
    """
    head = text[:_UNNAMED_SEARCHED]
    found = list(_UNNAMED_NONFINITE.finditer(head))
    if not found:
        return None
    first = found[0]
    line = head.count("\n", 0, first.start()) + 1
    named = _NAMED_NONFINITE.search(first.group(0))  # (the key it is printed under, where one is: an RL run's reward)
    what = f"its {named.group(1)}" if named is not None else "what it logs"
    return (f"{len(found)} of its lines print a non-finite value (the first, line {line}: "
            f"{first.group(0).strip()[:120]!r}): {what} went non-finite there")


# A value printed non-finite under its key ("reward: nan", '"episode_reward_max": NaN').
_NAMED_NONFINITE = re.compile(r"(?<![\w/.-])([A-Za-z][\w/.-]*)['\"]?[^\S\n]*[:=][^\S\n]*['\"]?\[?[-+]?"
                              r"(?i:nan|inf(?:inity)?)(?![\w.])")


# A loss printed as NaN or infinity: "Loss nan", "loss: inf", "'train_loss': NaN".
_NONFINITE_LOSS = re.compile(r"(?<![\w/])(?i:[\w/.-]*loss)['\"]?[^\S\n]*[:=]?[^\S\n]*['\"]?"
                             r"(?i:nan|[-+]?inf(?:inity)?)(?![\w.])")


def _nonfinite_lines(text: str, path: str | Path) -> str | None:
    """The problem of a text no reader takes whose lines print a non-finite loss (a federated script's
    rounds, each a block under ">> ROUND 3" with "Loss nan" in its lines): the news is said with why
    the log is not judged; else None.

    Example:
        >>> _nonfinite_lines(">> ROUND 0\\n> 10 Clients Training: Loss nan Acc 0.2345\\n", "x.log")[:63]
        "'x.log': 1 of its lines print a non-finite loss (the first: '> "
    """
    count, shown = _nonfinite_loss_lines(text)
    if not count:
        return None
    return (f"'{path}': {count} of its lines print a non-finite loss (the first: {shown!r}): the loss "
            "went non-finite; sentinel finds no step it reads with it, so the log is not judged further (print each "
            "step's loss on the line of its step: step 100 | loss 2.31)")


def _one_record(text: str, path: str | Path) -> str | None:
    """The problem of a paste that holds one step line a reader knows (the last bar of a run: "steps:
    100%|...| 3720/3720 [...,  avr_loss=2.77]"), where a file is read from two: a series is judged,
    not one value; or several lines all at one step; else None.

    Example:
        >>> _one_record("steps: 100%|##| 3720/3720 [5:40:44<00:00, 5.50s/it, avr_loss=2.77]\\n", "x.log")[:42]
        "'x.log': one step line (any text log with "
    """
    dialect = pick_dialect(text, least=1)
    if dialect is None:
        return None
    records = count_records(Lines(text), dialect)
    if records == 1:
        said = _nonfinite_in(scan(text, dialect).steps) or _nonfinite_beside(text) or _stop_after_one(text, dialect)
        return (f"'{path}': one step line ({dialect.description}){said}: sentinel judges a series of steps, not one "
                "value; paste or pass more of the log (two step lines at least)")
    steps = scan(text, dialect).steps  # (a refusal's path only: the file is read once more)
    if records > 1 and len(steps.index) == 1 and (evaluations := _evaluations_alone(text, dialect)):
        return (f"'{path}': its {records} step lines are all an evaluation's (the first: {evaluations!r}): sentinel "
                "judges a training loss: paste or pass the training's lines with them")
    if records > 1 and len(steps.index) == 1:  # Demucs pasted from four processes at one step; fairseq's num_updates=0
        said = _nonfinite_in(steps) or _nonfinite_beside(text)  # (icefall's ranks, each loss=nan at batch 1650)
        return (f"'{path}': its {records} step lines all read as one step ({int(steps.index[0])}){said}: the count "
                "that moves is not one sentinel takes for the step (pass --step-col with its key, where it has one), "
                "or the step never advanced (every process printing the same one; no update made); sentinel judges "
                "a series of steps")
    return None


# Words that mark a record line as an evaluation's (WeKWS's and WeNet's "CV Batch", "Valid", "Eval", "Test").
_EVALUATION_LINE = re.compile(r"(?i)\b(?:cv|val|valid|validation|validating|eval|evaluation|evaluating|test|testing)\b")


def _evaluations_alone(text: str, dialect: Dialect) -> str | None:
    """The first of ``text``'s record lines (``dialect``'s) where every one of them names an evaluation, else None.

    Example:
        >>> from sentinel.analyze.loaders.dialects import GENERIC
        >>> _evaluations_alone("DEBUG CV Batch 78/20 loss 0.15\\nDEBUG CV Batch 78/30 loss 24.1\\n", GENERIC)
        'DEBUG CV Batch 78/20 loss 0.15'
    """
    records = [shape.pattern for shape in dialect.shapes if shape.beside is None]
    starts = sorted({text.rfind("\n", 0, m.start()) + 1 for pattern in records for m in pattern.finditer(text)})
    lines = [text[at:(text.find("\n", at) + 1 or len(text) + 1) - 1] for at in starts]
    return lines[0].strip()[:120] if lines and all(_EVALUATION_LINE.search(line) for line in lines) else None


def _one_step_named(text: str, keys: list[str], path: str | Path) -> str | None:
    """The problem of a paste of one step line whose losses go by other names than loss, one or
    several (verl's console, a step line of 1,500-3,000 characters: ``step:2 - ... -
    actor/pg_loss:0.006 - ... - actor/grad_norm:nan - ...``): the step, the losses and each
    non-finite value it prints (the paste's news); else None.

    Example:
        >>> _one_step_named("step:2 - actor/kl_loss:0.0 - actor/pg_loss:0.006 - actor/grad_norm:nan\\n",
        ...                 ["actor/kl_loss", "actor/pg_loss"], "x.log")[:80]
        "'x.log': one step line (step 2) naming 2 losses (actor/kl_loss, actor/pg_loss), "
    """
    for key in keys:
        rewritten = LossKey(key).rewrite(text)
        dialect = pick_dialect(rewritten, least=1)
        if dialect is None or dialect.step_from_order or count_records(Lines(rewritten), dialect) != 1:
            continue  # (a line of no step of its own: no step to tell)
        steps = scan(rewritten, dialect).steps.index
        if len(steps) != 1:
            return None
        nonfinite = list(dict.fromkeys(f"{name} is {value}" for name, value in _NONFINITE_PAIR.findall(text)))
        said = (f", whose {', '.join(nonfinite[:6])}{', ...' if len(nonfinite) > 6 else ''}: the training went "
                "non-finite there" if nonfinite else "")
        losses = f"{len(keys)} losses" if len(keys) > 1 else "1 loss"
        named = (f", and --loss-col {suggested_loss(keys)} or another of them to name the loss read"
                 if len(keys) > 1 else "")
        return (f"'{path}': one step line (step {int(steps[0])}) naming {losses} ({', '.join(keys)}){said}: sentinel "
                "judges a series of steps, not one value; paste or pass more of the log (two step lines at "
                f"least{named})")
    return None


# A value printed as non-finite under its name: "actor/grad_norm:nan", "'kl': inf", "loss = NaN".
# (a sentence's period after it too: ParallelWaveGAN's "(Steps: 1000) train/generator_loss = nan.")
_NONFINITE_PAIR = re.compile(r"(?<![\w/.-])([A-Za-z][\w/.@-]*)['\"]?[^\S\n]*[:=][^\S\n]*['\"]?"
                             r"(-?(?i:nan|inf(?:inity)?))(?!\w|\.\w)")


def _nonfinite_beside(text: str) -> str:
    """``; N other lines print a non-finite loss (the first: ...)`` where lines beside the one step
    line read say the loss went non-finite (ST-GCN's "Iter 0 Done. | loss: 1.4058", then its epochs'
    "mean_loss: nan"): the paste's news, told where its one step is finite; else an empty string.

    Example:
        >>> _nonfinite_beside("Iter 0 Done. | loss: 1.4058\\n\\tmean_loss: nan\\n\\tmean_loss: nan\\n")
        "; 2 other lines print a non-finite loss (the first: 'mean_loss: nan'): the loss went non-finite"
    """
    count, shown = _nonfinite_loss_lines(text)
    if not count:
        return ""
    lines = "1 other line prints" if count == 1 else f"{count} other lines print"
    return f"; {lines} a non-finite loss (the first: {shown!r}): the loss went non-finite"


def _nonfinite_loss_lines(text: str) -> tuple[int, str]:
    """How many lines print a non-finite loss, and the first's end (at most 100 characters, up to the value)."""
    found = [(line, hit) for line in text.splitlines() if (hit := _NONFINITE_LOSS.search(line))]
    if not found:
        return 0, ""
    line, hit = found[0]
    return len(found), " ".join(line[max(0, hit.end() - 100):hit.end()].split())  # the value's end of a long line


def _stop_after_one(text: str, dialect: Dialect) -> str:
    """``, after which the run stopped: ...`` where a paste's one step line is followed by what ended
    its run (a traceback, the shell's ``Killed``, NCCL's watchdog): the paste's news, told though a
    series cannot be judged; else an empty string.

    Example:
        >>> from sentinel.analyze.loaders.dialects import GENERIC
        >>> _stop_after_one("step 1 loss 2.0\\nKilled\\n", GENERIC)
        ", after which the run stopped ('Killed', line 2)"
    """
    ends = [m.end() for shape in dialect.shapes if shape.beside is None
            for m in [shape.pattern.search(text)] if m is not None]
    if not ends:
        return ""
    after = max(ends)
    crash = crash_after(text, text.find(TRACEBACK, after), 0, False, watchdog_at(text, after))
    if crash is None:
        return ""
    what = repr(crash["error"]) if crash["error"] else "a traceback cut off before its error line"
    return f", after which the run stopped ({what}, line {crash['line']})"


def _nonfinite_in(steps: pd.DataFrame) -> str:
    """``, whose loss is nan at step N`` where the one step line read holds a non-finite loss, or
    grad norm (the paste's news, told even where a series cannot be judged); else an empty string.

    Example:
        >>> _nonfinite_in(pd.DataFrame({"loss": [float("nan")]}, index=[100000]))
        ', whose loss is nan at step 100000: the loss went non-finite by then'
        >>> _nonfinite_in(pd.DataFrame({"loss": [2.1], "grad_norm/total": [float("inf")]}, index=[50]))
        ', whose grad norm is +inf at step 50: the gradient went non-finite there'
    """
    if len(steps.index) != 1:
        return ""
    for column, name, what in ((metrics.LOSS, "loss", "the loss went non-finite by then"),
                               (metrics.GRAD_NORM_TOTAL, "grad norm", "the gradient went non-finite there")):
        value = float(steps[column].iloc[0]) if column in steps.columns else 0.0
        if not math.isfinite(value):
            return f", whose {name} is {nonfinite_name(value)} at step {int(steps.index[0])}: {what}"
    return ""


# A key that names an error a training may minimise as its loss (not an evaluation's: those keys are
# not among a log's own): "error", "err", "mse", "mae", "rmse", "Train-mae", "training_error", a
# variational circuit's "cost" (PennyLane's "iteration: 10 cost: 17.86"), an optical flow's end-point error
# (GMFlow's "step: 100  epe: 3.2").
_ERROR_KEY = re.compile(r"^(?:train(?:ing)?[-_ ]?)?(?:error|err|mse|mae|rmse|l1|l2|cost|epe|learn)$", re.IGNORECASE)


def _a_time(text: str, key: str) -> bool:
    """Whether a key is a time's where it is printed: MXNet's "Epoch[0] Time cost=177.4" (seconds, no error).

    Example:
        >>> _a_time("Epoch[0] Time cost=177.4", "cost"), _a_time("epoch 3 cost = 0.25", "cost")
        (True, False)
    """
    return re.search(rf"(?i)\b(?:time|elapsed|wall)[^\S\n]*{re.escape(key)}\b", text) is not None


# Keys of a training's own workings, no measure of its progress (keys.canonical_key's names).
_TRAINING_INTERNALS = frozenset({metrics.GRAD_NORM_TOTAL, metrics.LR, metrics.LOSS_SCALE, "grad_scale"})


def _nonfinite_values(text: str, key: str) -> list[str]:
    """The non-finite values ``text`` prints for ``key`` (``"grad_norm": Infinity``, ``grad_norm=nan``)."""
    return re.findall(rf"(?<![\w/]){re.escape(key)}['\"]?[^\S\n]*[:=][^\S\n]*['\"]?(-?(?i:nan|inf(?:inity)?))\b", text)


def several_losses(path: str | Path, least: int | None = None) -> list[str]:
    """The losses a text log's lines name, where they name two or more and none is the total (each
    read once it is named, as :func:`why_not` says); else ``[]``.

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile("w", suffix=".log") as f:
        ...     _ = f.write("".join(f"step: {i}|act_loss: 1.5|cri_loss: 0.{i}\\n" for i in range(1, 7))); f.flush()
        ...     several_losses(f.name)
        ['act_loss', 'cri_loss']
    """
    if Path(path).suffix.lower() in _NOT_LOGS:
        return []
    head = read_head(path)
    if head is None:
        return []
    readable = _readable_losses(head, loss_keys(clean_text(head)), least)
    return readable if len(readable) >= 2 else []


def _readable_losses(head: str, keys: list[str], least: int | None) -> list[str]:
    return [k for k in keys if _pick(head, least, k)[0] is not None]


# "key=3", "key: 0.5", "'key': 0.5", "key=[10.1]": a value a line logs under a name.
# (Not a bar's description before its percentage, "Training...:  42%|", nor Lightning's logger version
# "v_num=3", nor the process id Ray puts before a worker's lines, "(main_task pid=82052)", nor the
# verb of a sentence, "Total loss is :[0.14]", nor a logger's level before its time, "[ INFO :
# 2023-07-06 07:55:30,898 ] - |  3|  200|...".)
_LOGGED_PAIR = re.compile(r"(?<![\w/.-])(?!(?:v_num|pid|is|are|was|were|INFO|WARNING|WARN|DEBUG|ERROR)\b)([A-Za-z][\w/.-]*)['\"]?[^\S\n]*[:=][^\S\n]*\[?['\"]?[-+]?"
                          r"(?!\d{1,2}:\d{2})(?:\d|\.\d|(?i:nan|inf)\b)(?![\d.]*%)")
# (nor a time's hours: "Aug22-02:14:13"; a value printed non-finite counts: RandLA-Net's "L_out=  nan" at every step)
# A tqdm bar's draw: its percentage and bar, or its count and rate ("0it [00:00, ?it/s]").
_BAR_DRAW = re.compile(r"\d+%\|[^|\n]*\||\d+it \[\d")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _bars_alone(text: str) -> bool:
    """Whether a text's lines are progress bars that show no loss: bars are drawn, no line names a
    loss, and no bar has more than two numbers before it (YOLOv7's console rows, "41/299 65.1G nan
    0.01516 0 nan 1869 320: 100%|...", are a table's losses with a bar after them).

    Example:
        >>> _bars_alone("Epoch 0:  45%|####      | 9/20 [00:01<00:01, 5.10it/s, v_num=0]\\n")
        True
        >>> _bars_alone("  41/299  65.1G  nan  0.01516  0  nan  1869  320: 100%|####| 729/729 [51:52<00:00]\\n")
        False
    """
    if "loss" in text.lower():
        return False
    draws = [(line, found) for line in text.split("\n")[:20_000] if (found := _BAR_DRAW.search(line)) is not None]
    return bool(draws) and all(len(_NUMBER.findall(line[:found.start()])) <= 2 for line, found in draws)
# Lines that must log such values, at least, before a text is said to be a log of them.
_LOGGED_LINES = 5


def _shown(text: str, key: str) -> re.Match | None:
    """The first value ``text`` prints for ``key`` (group 1), or None."""
    return re.search(rf"(?<![\w/]){re.escape(key)}['\"]?[^\S\n]*[:=]?[^\S\n]*([^\s,|;]{{1,40}})", text)


def _prints_numbers(text: str, key: str, least: float | None = None) -> bool:
    """Whether the first value ``text`` prints for ``key`` is a plain number (not "184ms", "2h 56s"), and
    ``least`` or more where given."""
    shown = _shown(text, key)
    value = None if shown is None else shown.group(1).rstrip(")]}")  # (the last of a tuple: "l2: 0.037)")
    if value is None or not _a_number(value):
        return False
    return least is None or float(value.strip("'\"")) >= least


def _a_number(token: str) -> bool:
    try:
        float(token.strip("'\""))  # "[0.50" (an array's first number) is none
    except ValueError:
        return False
    return True


# A logger's own fields before each message, no value the training logs: U2PL's and its forks'
# "[2023-03-12 12:12:18,343][       train.py][line: 833][    INFO]" (its source line).
_LOGGER_FIELDS = frozenset({"line", "lineno"})


def _logged_keys(text: str, most: int = 6) -> list[str]:
    """The names a text's lines log values under, most often first (at most ``most``), where
    :data:`_LOGGED_LINES` lines or more log one; else ``[]``.

    Example:
        >>> _logged_keys("global_step=58, episodic_return=[10.1]\\n" * 6)
        ['episodic_return', 'global_step']
    """
    counts: dict[str, int] = {}
    lines = 0
    for line in text.split("\n")[:20_000]:
        found = {m.group(1) for m in _LOGGED_PAIR.finditer(line)} - _LOGGER_FIELDS
        if found:
            lines += 1
            for key in found:
                counts[key] = counts.get(key, 0) + 1
    if lines < _LOGGED_LINES:
        return []
    return sorted(counts, key=lambda k: (-counts[k], k))[:most]


def load(path: str | Path, options: LoadOptions | None = None, least: int | None = None) -> list[RunData]:
    """Read one text log with the dialect that recognises it.

    Args:
        path: the log file.
        options: ``loss_col`` / ``step_col``: a key of the log lines to use as the loss / step.
        least: the record lines a dialect needs (see :func:`pick_dialect`): a short paste.

    Returns:
        One :class:`RunData` whose ``source`` is the dialect's name; one per training where the
        file holds several that each start from their first step (:func:`fresh_starts`).

    Raises:
        ValueError: no dialect recognises the file, or an option names a key it does not have.

    Example:
        >>> run = load("train.log")[0]  # doctest: +SKIP
        >>> run.source, run.steps["loss"].idxmax()  # doctest: +SKIP
        ('fairseq', 700)
    """
    options = options or LoadOptions()
    rank_notes: list[str] = []
    text = read_text(path)
    dialect, key = _pick(text[: 1 << 20], least, options.loss_col)
    if not _reads_records(dialect) and len(text) > 1 << 20:  # its records after its first megabyte only
        dialect, key = _pick(text[text.find("\n", len(text) - (1 << 20)) + 1:], least, options.loss_col)
    if not _reads_records(dialect):  # one rank's lines with their launcher's prefix off may be read
        unprefixed = _unprefixed(text, least, options.loss_col, rank_notes)
        if unprefixed is not text:
            text = unprefixed
            dialect, key = _pick(text[: 1 << 20], least, options.loss_col)
    named = _named_key_unread(text[: 1 << 20], dialect, options) if key is None else None
    if named is not None:  # the one loss the lines hold now, read as any log's
        text = only_key_as_loss(text, named)
        dialect, key = _pick(text[: 1 << 20], least)
        key = LossKey(named, named=True) if key is None else key
        options = replace(options, loss_col=None)
    if dialect is not None and key is not None:
        text = key.rewrite(text)
        if key.named:
            options = replace(options, loss_col=None)  # it is the lines' loss now
    if dialect is EPOCH_LINES and "%|" in text and _finished_bars_only(text):
        barless = _without_finished_bars(text)  # (one line an epoch read: not its bar's last batch too)
        if count_records(Lines(barless), EPOCH_LINES) >= EPOCH_LINES.min_records:
            text = barless
    if dialect is None:
        raise ValueError(f"{path}: no known training-log lines found: pass a log with a step and a loss "
                         "on each line (`sentinel formats` lists the kinds read)")
    # Its skeletons answer the whole text's substring searches, and its reading. A file no longer
    # than a sniff's head is the head the sniffs split (and cleaned) already (kept shared no longer
    # than that). The text is cleaned here, once, for a dialect that reads it cleaned: a bar's
    # redraws were split as they are for the checks below and again once the read cleaned them.
    lines = Lines.shared(text) if len(text) <= SNIFF_BYTES else Lines(text)
    if dialect.clean:
        lines = lines.derived(clean_text)
    text = lines.text  # the readers know the lines as its by identity
    note = key.note() if key is not None else _averaged_loss_note(text, lines)
    parts = _with_unstarted_first(fresh_starts(text, lines), dialect)
    if len(parts) == 1 and dialect.epoch_trainings:
        epochs = dialect.epoch_trainings
        parts = epoch_restarts(text, epochs if isinstance(epochs, re.Pattern) else dialect.shapes[0].pattern)
    said = None  # what was left out of the text, where something was
    if dialect is KERAS_EPOCHS or dialect is GENERIC:  # (the bars' readers)
        evaluated = _without_evaluation_bars(text, lines)
        if evaluated is not None:
            text, count = evaluated
            lines = Lines(text)
            parts = fresh_starts(text, lines)
            said = (f"{Path(path).name}: {count} progress bar(s) of another length after an epoch's finished "
                    "bar, or after its validation's metrics (an evaluation's: model.evaluate() after fit, a "
                    "validation pass), not read as training")
    if (dialect is KERAS_EPOCHS or dialect is GENERIC) and _keras_headed(lines):  # (a tuner's last trial, a fit too)
        parts = [fit for part in parts for fit in _keras_fits(part)]
    if len(parts) == 1:
        runs = [_read(text, dialect, options, path, run_name(path), lines, least)]
        runs = split_restarted(runs[0], path) or runs
        if len(runs) == 1:
            _note_skipped_updates(runs[0], text, lines)
        for warning in (said, note, *rank_notes):
            if warning:
                runs[0].warnings.insert(0, warning)
        return _keyed(runs, key)
    key_note = note
    runs, empty, crashes = [], [], {}
    for k, part in enumerate(parts, 1):
        try:
            runs.append(_read(part, dialect, options, path, f"{run_name(path)}#{k}", least=least))
            _note_skipped_updates(runs[-1], part, lines)
        except ValueError:  # a training that stopped before its first logged step
            empty.append(k)
            at = part.rfind(TRACEBACK)
            error = final_error(part, at, defer_nonfinite=False) if at >= 0 else None
            if error is not None:  # (its first sentence: CUDA's out-of-memory errors differ in their numbers only)
                crashes.setdefault(error.split(". ")[0], []).append(k)
    if not runs:
        raise ValueError(_no_step_lines(path, dialect, text))
    note = trainings_note(path, len(parts))
    crashed = {k for launches in crashes.values() for k in launches}
    stops = [f"{', '.join(f'#{k}' for k in launches)} crashed before {'its' if len(launches) == 1 else 'their'} first "
             f"step: {error}" for error, launches in crashes.items()]  # (a launch that crashed at once: the news)
    if set(empty) - crashed:
        stops.append(f"{', '.join(f'#{k}' for k in empty if k not in crashed)} logged no step")
    if stops:
        note += f" ({'; '.join(stops)})"
    for run in runs:
        run.warnings.insert(0, note)
        for warning in (said, key_note, *rank_notes):
            if warning:
                run.warnings.insert(0, warning)
    return _keyed(runs, key)


def _note_skipped_updates(run: RunData, text: str, lines: Lines) -> None:
    """``run.meta[SKIPPED_UPDATES]`` from DeepSpeed's progress lines in ``text`` (``lines``: the whole
    log's, asked whether any line holds the word first: most logs stop there)."""
    if lines.holds_any((SKIPPED_WORD,)) and (counts := skipped_counts(text)) is not None:
        run.meta[SKIPPED_UPDATES] = counts


def _keyed(runs: list[RunData], key: LossKey | None) -> list[RunData]:
    """``runs`` whose meta names the key their loss was read by (``actor/pg_loss``): the analysis
    judges a loss by what it is."""
    if key is not None:
        for run in runs:
            run.meta.setdefault(LOSS_FROM_PERPLEXITY if key.perplexity else "loss_column", key.key)
    return runs


def _averaged_loss_note(text: str, lines: Lines) -> str | None:
    """The warning for a log whose one loss key, read by a dialect, is an average (kohya's
    sd-scripts bar: ``avr_loss=0.0875``): a one-step spike shows smaller there. Asked of the
    distinct lines first: most logs stop at the substring search."""
    if not lines.holds_any(("avr_loss", "avr loss", "avr/loss")):
        return None
    keys = loss_keys(text)
    return loss_key_note(keys[0]) if len(keys) == 1 and is_aggregate(keys[0]) else None


# Lines a training framework prints when a training starts from its first step. A log holding
# several is trainings appended to one file (detectron2's log.txt after each launch, a Hugging
# Face or Lightning stdout redirected with >>): read as one history, each fresh start's loss, back
# at its first level, looked like a spike that never recovered. Lightning's is the model summary's
# header, printed at each fit(). chemprop's is its "Command line", the command, "Args" at each launch.
# Unsloth's trainer prints its banner ("==((====))==  Unsloth - 2x faster free finetuning") at each train().
# Keras Tuner's "Search: Running Trial #7" opens each trial (Hyperband's go on from an earlier trial's weights at
# "Epoch 3/6": a training of its own all the same, with its own hyperparameters).
# (Searched for as such, its line start found after: a pattern that scans each line from its start
# for them took 0.23 s on a 3.7 MB log.)
_FRESH_START = re.compile(r"Starting training from iteration 0\b|\*{5} Running training \*{5}|"
                          r"==\(\(====\)\)==  Unsloth - |\|[ \t]*Name[ \t]*\|[ \t]*Type[ \t]*\|[ \t]*Params\b|"
                          r"(?m:^Command line\npython [^\n]*\nArgs$)|^Search: Running Trial #\d+$", re.MULTILINE)
_FRESH_WORDS = ("Starting training from iteration 0", "Running training", "Params", "Command line",
                "==((====))==  Unsloth - ", "'train_runtime'", "Search: Running Trial #")  # one must be
# A resume, printed after the start line: the training goes on (the Hugging Face Trainer's;
# Lightning's, for fit(ckpt_path=...), comes before its model summary).
_RESUMED = re.compile(r"Continuing training from checkpoint|Restoring states from the checkpoint path")


# Epoch lines read at most, and in each training at least, for a log's epochs to start again.
_MOST_EPOCH_LINES = 100_000
_LEAST_EPOCHS = 3


def epoch_restarts(text: str, records: re.Pattern | None = None) -> list[str]:
    """``text`` cut where its one-line-an-epoch records start again from its first epoch (a script
    run twice, its output pasted one after the other: PyG's example on the CPU, then on CUDA; one
    fit per fold; a sweep of trainings that print every 100 epochs), each part a training of its own
    (each from its first record line's line); else ``[text]``: where an epoch prints several lines, or
    a run goes on from a later epoch.

    ``records``: the pattern of a record, its first group the epoch (the one-line-an-epoch reader's
    where None).

    Example:
        >>> log = "".join(f"Epoch: {e}, Loss: {2 - e / 10}\\n" for e in (*range(5), *range(4)))
        >>> [part.count("Epoch") for part in epoch_restarts(log)]
        [5, 4]
    """
    training = without_evaluations(text, EPOCH_LINES.drop_words)  # its lines where they were
    found = []
    for match in (records or EPOCH_LINES.shapes[0].pattern).finditer(training):
        found.append((match.start(), int(match.group(1))))
        if len(found) > _MOST_EPOCH_LINES:
            return [text]
    epochs = np.array([epoch for _, epoch in found], dtype=np.int64)
    # (an epoch printed again at once is no restart: OGB's examples print the last epoch's line again with its
    # evaluation, "Run: 01, Epoch: 06, Loss: 0.1216, Train: 0.7051, ...", before the next run's "Epoch: 01")
    restarts = np.flatnonzero(np.diff(epochs) < 0) + 1
    if not len(restarts) or int(np.diff(np.r_[0, restarts, len(epochs)]).min()) < _LEAST_EPOCHS:
        return [text]
    # A fresh training's first line is its first epoch, or its first printed one where it prints every
    # k epochs: epoch k, then 2k ("Epoch: 100" after "Epoch: 2000", then 200). A fall to anywhere else
    # is a resume from an earlier epoch's checkpoint: one training.
    first, stride = epochs[restarts], epochs[restarts + 1] - epochs[restarts]
    if bool(((first > epochs[0]) & (first != stride)).any()):
        return [text]
    line_starts = [0, *(m.end() for m in re.finditer("\n", text))]
    cuts = [line_starts[training.count("\n", 0, found[k][0])] for k in restarts.tolist()]
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]


def note_crash(text: str, found, dialect: Dialect, after: int = 0, lines: Lines | None = None) -> None:
    """Where the log ends in a traceback after its last step line, in the shell's line that says the
    process died of a signal (``Killed``), or in NCCL's watchdog taking the process down,
    ``meta["crash"]`` says which error, after which step and at which line (``after``: where the last
    step line starts, where the caller knows it: the search for a traceback, absent from most logs,
    reads the text after it only; ``lines``: ``Lines(text)``, where the caller has them)."""
    if not len(found.steps.index):
        return
    at = text.rfind(TRACEBACK, max(after, 0))
    records = [shape.pattern for shape in dialect.shapes if shape.beside is None]
    if at >= 0 and any(pattern.search(text, at) for pattern in records):
        at = -1  # a step line after it: a traceback the run printed and went on from
    # The first traceback after the last step line tells the stop (a notebook's kernel runs on into
    # later cells; torchrun's summary follows a rank's error): back over those with no step line between.
    while at >= 0 and (before := text.rfind(TRACEBACK, max(after, 0), at)) >= 0 and \
            not any(pattern.search(text, before, at) for pattern in records):
        at = before
    watchdog = watchdog_at(text, max(after, 0), lines) if at < 0 else -1
    if watchdog >= 0 and any(pattern.search(text, watchdog) for pattern in records):
        watchdog = -1  # a step line after it: not what ended the run
    asked = lines is None or lines.holds_any(STOP_WORDS)  # (the distinct lines first, where the caller has them)
    stop = stop_line(text, max(after, 0)) if at < 0 and watchdog < 0 and asked else None
    if stop is not None and any(pattern.search(text, stop[1]) for pattern in records):
        stop = None  # a step line after it: not what ended the run
    crash = crash_after(text, at, int(found.steps.index[-1]), _nonfinite_read(found.events), watchdog, stop)
    if crash is not None:
        found.meta["crash"] = crash
    if RESTARTED_LENGTH in found.meta and TRACEBACK in text:
        found.meta[CRASHES_BEFORE_RESTARTS] = _crashes_before_restarts(text, records, dialect, lines)


# The time a training line says is left: detectron2's, mmengine's and the MetricLogger's "eta: 16:56:22", "eta: 1
# day, 2:03:04". A finished run's last step line says ~0; more than ETA_LEFT seconds, a run that stopped before its
# planned end (or a log cut there), where no crash tells why.
_ETA_LEFT = re.compile(r"\beta: (?:(\d+) days?, )?(\d+):(\d\d):(\d\d)\b")
ETA_LEFT = 600
# The text's end searched for the last step line (bytes).
_ETA_TAIL = 1 << 16


def _unfinished(text: str, dialect: Dialect, found) -> str | None:
    """The warning for a log whose last step line says more than :data:`ETA_LEFT` seconds are left, where no
    crash was found; else None.

    Example:
        >>> from sentinel.analyze.loaders.dialects import GENERIC
        >>> log = "iter: 10  loss: 2.0  eta: 0:00:10\\niter: 20  loss: 1.9  eta: 16:56:22\\n"
        >>> _unfinished(log, GENERIC, scan(log, GENERIC)).split(":")[0]
        'the last step line (step 20) says eta'
    """
    start = max(0, len(text) - _ETA_TAIL)
    if "crash" in found.meta or not len(found.steps.index) or text.find("eta: ", start) < 0:
        return None
    records = [shape.pattern for shape in dialect.shapes if shape.beside is None]
    last = -1
    for tail in (1 << 12, _ETA_TAIL):  # (the last lines first: a log's last step line is near its end)
        at = max(start, len(text) - tail)
        last = max((match.start() for pattern in records for match in list(pattern.finditer(text, at))[-1:]),
                   default=-1)
        if last >= 0:
            break
    if last < 0:
        return None
    line = text[text.rfind("\n", 0, last) + 1:(text.find("\n", last) + 1 or len(text) + 1) - 1]
    eta = _ETA_LEFT.search(line)
    if eta is None:
        return None
    days, hours, minutes, seconds = (int(g or 0) for g in eta.groups())
    if ((days * 24 + hours) * 60 + minutes) * 60 + seconds <= ETA_LEFT:
        return None
    return (f"the last step line (step {int(found.steps.index[-1])}) says {eta.group(0)} is left: the run stopped "
            "before its planned end (or the log was cut there)")


# How many tracebacks are asked at most (each reads the record lines around it).
_CRASHES_ASKED = 50


def _crashes_before_restarts(text: str, records: list[re.Pattern], dialect: Dialect,
                             lines: Lines | None = None) -> list[dict]:
    """The crashes that ended a training the log's next launch followed (trainings appended to one log: YOLOX's
    ``train_log.txt``, each launch after the one before; restarted_steps reads each as a run): each traceback
    between two record lines whose steps, as printed, go back, as ``meta["crash"]`` says it, the step the last
    record line before it prints.

    Example:
        >>> from sentinel.analyze.loaders.dialects import GENERIC
        >>> log = ("step 90 loss 2.1\\nTraceback (most recent call last):\\n  File \\"t.py\\"\\nIndexError: x\\n"
        ...        "step 10 loss 3.0\\n")
        >>> _crashes_before_restarts(log, [shape.pattern for shape in GENERIC.shapes], GENERIC)
        [{'error': 'IndexError: x', 'after_step': 90, 'line': 2, 'relaunched': True}]
    """
    lines = Lines.of(text, lines)
    # Where the record lines start, once (by line skeletons where the lines repeat), each traceback placed among them.
    starts = np.unique(np.concatenate([lines.starts(pattern) for pattern in records]))
    crashes, at, seen, asked = [], text.find(TRACEBACK), -1, 0
    while at >= 0 and asked < _CRASHES_ASKED:
        asked += 1
        k = int(np.searchsorted(starts, at))
        before, after = (int(starts[k - 1]) if k else -1), (int(starts[k]) if k < len(starts) else -1)
        if before > seen and after >= 0:
            seen = before
            last, first = (_printed_step(text, pos, dialect) for pos in (before, after))
            if last is not None and first is not None and first < last:
                crash = crash_after(text, at, last, False)
                if crash is not None:
                    crashes.append({**crash, "relaunched": True})
        at = text.find(TRACEBACK, at + 1)
    return crashes


def _printed_step(text: str, pos: int, dialect: Dialect) -> int | None:
    """The step the record line at offset ``pos`` prints, read alone; None where it reads none."""
    start, end = text.rfind("\n", 0, pos) + 1, text.find("\n", pos)
    try:
        steps = scan(text[start:len(text) if end < 0 else end] + "\n", dialect).steps.index
    except ValueError:
        return None
    return int(steps[-1]) if len(steps) else None


def _nonfinite_read(events) -> bool:
    return events is not None and len(events) > 0 and "kind" in events.columns and bool((events["kind"] == "nonfinite").any())


# Keras' fit prints "Epoch 1/N" on a line of its own at its first epoch only (a resumed fit, initial_epoch=10,
# starts at "Epoch 11/N"): a file that holds it twice holds two fits (a notebook's runs saved one after another).
_KERAS_FIRST_EPOCH = re.compile(r"^Epoch 1/\d+[^\S\n]*$", re.MULTILINE)
_KERAS_HEADER_SKELETON = re.compile(r"Epoch 0/0+[^\S\n]*$")  # its line's skeleton (digits as 0)


def _keras_headed(lines: Lines) -> bool:
    """Whether a line of ``lines`` may be a Keras fit's "Epoch k/K" header (asked of its distinct skeletons)."""
    skeletons = lines.skeletons()
    return skeletons is None or any(_KERAS_HEADER_SKELETON.match(line) for line in skeletons.texts())


def _keras_fits(text: str) -> list[str]:
    """``text`` cut at each Keras fit's first "Epoch 1/N" line after the first (each part from it), where
    there are two or more, or one after a fit's later epoch (a paste that opens in a fit, then a fit
    from its start: a model trained, then pruned); else ``[text]``. (Counted as a substring: the caller
    asks :func:`_keras_headed` of the distinct line skeletons first, a search of the whole text costing
    0.6 ms on 1.8 MB where no line is such a header.)

    Example:
        >>> log = "Epoch 1/2\\n3s - loss: 2.0\\nEpoch 2/2\\n3s - loss: 1.5\\n" * 2
        >>> [part.count("loss") for part in _keras_fits(log)]
        [2, 2]
    """
    fits = text.count("\nEpoch 1/") + text.startswith("Epoch 1/")
    # a paste that opens in a fit ("Epoch 2/100"): a later "Epoch 1/" is another's
    first = KERAS_EPOCH_HEADER.search(text) if fits else None
    if not fits or (fits == 1 and first is not None and first.group(0).lstrip().startswith("Epoch 1/")):
        return [text]
    cuts = [m.start() for m in _KERAS_FIRST_EPOCH.finditer(text)]
    cuts = cuts if cuts and first is not None and first.start() < cuts[0] else cuts[1:]
    return _cut_at(text, cuts) if cuts else [text]


# A Keras bar's line ("313/313 [====] - 1s 2ms/step - loss: 0.35", verbose=2's "313/313 - 1s - loss:", Keras 3's
# "313/313 ━━━━━━━━━━ 1s 2ms/step - loss: 0.35") (the "Epoch k/K" line each epoch's bars follow:
# textscan.KERAS_EPOCH_HEADER).
_KERAS_BAR_LINE = re.compile(r"^[^\S\n]*(\d+)/(\d+) (?:\[[=>.]*\] - |━+ \d|- )[^\n]*\n?", re.MULTILINE)
_KERAS_FINISHED_BAR = re.compile(r"^[^\S\n]*(\d+)/\1 (?:\[[=>.]*\] - |━+ \d|- )", re.MULTILINE)  # count at total
_FINISHED_SKELETON = re.compile(r"[^\S\n]*(0+)/\1 (?:\[=*\] - |━+ 0|- )")  # ... its line's skeleton (a bar all "=")
# The metrics Keras prints after an epoch's validation, on its finished bar: the epoch's last line.
_KERAS_VALIDATED = re.compile(r" - val_\w+: ")


def _without_evaluation_bars(text: str, lines: Lines | None = None) -> tuple[str, int] | None:
    """``text`` without the Keras bars that follow an epoch's finished bar with another length, or its
    finished bar that holds the validation's metrics (``val_loss``: nothing of the epoch is printed
    after it), and how many: ``model.evaluate()`` after ``fit`` ("313/313 [====] - loss: 0.95" under
    the last epoch's "1875/1875 [====] - loss: 0.19"; IMDB's test set as long as its training set),
    read as that epoch's loss; None where there are none. (The finished bars alone are found first,
    by one search: most logs stop there.)

    Example:
        >>> log = "Epoch 1/1\\n10/10 [==] - 1s - loss: 0.2\\n1/3 [>.] - 0s - loss: 0.8\\n3/3 [==] - 0s - loss: 0.9\\n"
        >>> _without_evaluation_bars(log)
        ('Epoch 1/1\\n10/10 [==] - 1s - loss: 0.2\\n', 2)
    """
    skeletons = Lines.of(text, lines).skeletons()
    if skeletons is not None and not any(_KERAS_HEADER_SKELETON.match(line) for line in skeletons.texts()):
        return None
    if skeletons is not None and text.isascii():  # (the lines whose skeleton is a finished bar's, alone)
        kinds = [k for k, line in enumerate(skeletons.texts()) if _FINISHED_SKELETON.match(line)]
        found = (_KERAS_FINISHED_BAR.match(text, int(at)) for at in skeletons.starts[np.isin(skeletons.codes, kinds)])
        finished = [(m.start(), int(m.group(1))) for m in found if m is not None]
    else:
        finished = [(m.start(), int(m.group(1))) for m in _KERAS_FINISHED_BAR.finditer(text)]
    if len({total for _, total in finished}) < 2 and not Lines.of(text, lines).holds_any((_KERAS_VALIDATED,)):
        return None
    headers = [m.start() for m in KERAS_EPOCH_HEADER.finditer(text)]
    if not headers:
        return None
    by_epoch: dict[int, list[tuple[int, int]]] = {}
    for at, total in finished:
        by_epoch.setdefault(bisect.bisect_right(headers, at), []).append((at, total))
    cuts = []
    for epoch, bars in by_epoch.items():
        (first, length), *later = bars  # the epoch's training bar finishes first
        end = headers[epoch] if epoch < len(headers) else len(text)
        validated = end  # the end of the epoch's bar that holds its validation's metrics: nothing of it after
        for at, _ in bars:
            line_end = text.find("\n", at)
            line_end = len(text) if line_end < 0 else line_end
            if _KERAS_VALIDATED.search(text, at, line_end):
                validated = line_end
                break
        if all(total == length for _, total in later) and validated == end:
            continue
        cuts += [bar.span() for bar in _KERAS_BAR_LINE.finditer(text, first, end)
                 if int(bar.group(2)) != length or bar.start() > validated]
    if not cuts:
        return None
    kept, start = [], 0
    for a, b in cuts:
        kept.append(text[start:a])
        start = b
    kept.append(text[start:])
    return "".join(kept), len(cuts)


def _cut_at(text: str, cuts: list[int]) -> list[str]:
    """``text`` in parts, each from one of ``cuts`` (offsets, in order) to the next; the first from the top.

    Example:
        >>> _cut_at("abcdef", [2, 4])
        ['ab', 'cd', 'ef']
    """
    bounds = [0, *cuts, len(text)]
    return [text[start:end] for start, end in zip(bounds, bounds[1:])]


def _with_unstarted_first(parts: list[str], dialect: Dialect) -> list[str]:
    """``parts`` (:func:`fresh_starts`'), its first cut at its start line where record lines come before it: a paste
    whose first training's start line was left out (detectron2's console copied from its first step on), that
    training and the next one's read as one otherwise.

    Example:
        >>> from sentinel.analyze.loaders.dialects import GENERIC
        >>> log = "iter: 19 loss: 2\\nStarting training from iteration 0\\niter: 19 loss: 3\\n"
        >>> [part.count("iter:") for part in _with_unstarted_first(fresh_starts(log + log[16:]), GENERIC)]
        [1, 1, 1]
    """
    if len(parts) < 2:
        return parts
    start = _FRESH_START.search(parts[0])
    if start is None:
        return parts
    at = parts[0].rfind("\n", 0, start.start()) + 1
    if at == 0 or not has_records(parts[0][:at], dialect):
        return parts
    return [parts[0][:at], parts[0][at:], *parts[1:]]


def _after_summaries(text: str, starts: list[int]) -> list[int]:
    """Where the line after each Hugging Face Trainer's final summary dict (``{'train_runtime': ...}``, printed at the
    end of each ``train()``) starts, where a log dict of another training follows it with no start line of its own
    between (stdout kept without the banner: an Optuna search's folds, each a ``trainer.train()``).

    Example:
        >>> log = "{'loss': 0.2, 'epoch': 1.0}\\n{'train_runtime': 3.1, 'epoch': 1.0}\\n{'loss': 0.0, 'epoch': 0.5}\\n"
        >>> [log[at:][:13] for at in _after_summaries(log, [])]
        ["{'loss': 0.0,"]
    """
    cuts = []
    summaries = list(_HF_SUMMARY.finditer(text))
    for k, summary in enumerate(summaries):
        end = text.find("\n", summary.end())
        if end < 0:
            break
        following = text.find("{'loss'", end)
        again = k + 1 < len(summaries) and summaries[k + 1].group(0) == summary.group(0)  # (its lines printed again)
        if following >= 0 and not again and not any(end < start <= following for start in starts):
            cuts.append(end + 1)
    return cuts


# The Trainer's final summary dict, at the end of each train().
_HF_SUMMARY = re.compile(r"\{'train_runtime': [^{}\n]*\}")


def fresh_starts(text: str, lines: Lines | None = None) -> list[str]:
    """``text`` cut where a training starts again from its first step (each part from its start
    line; the first part from the top). A training resumed from a checkpoint goes on with the
    part before it.

    Example:
        >>> log = "Starting training from iteration 0\\niter: 19 loss: 2\\n" * 2
        >>> [part.count("iter:") for part in fresh_starts(log)]
        [1, 1]
    """
    # Substring searches (on the distinct lines where given): most logs stop here.
    held = Lines.of(text, lines)
    if not held.holds_any(_FRESH_WORDS):
        return [text]
    starts = [text.rfind("\n", 0, m.start()) + 1 for m in _FRESH_START.finditer(text)]
    ended = _after_summaries(text, starts) if held.holds_any(("'train_runtime'",)) else []
    cuts = sorted(set(starts[1:] + ended))  # (the first start line opens the top part: its preamble is the first's)
    if not cuts:
        return [text]
    parts = _cut_at(text, cuts)
    kept = [parts[0]]
    for i, part in enumerate(parts[1:], start=1):
        # the resume line follows the start line (Hugging Face) or comes a few lines before it (Lightning)
        before = "\n".join(parts[i - 1][-4_000:].splitlines()[-10:])
        if _RESUMED.search(part, 0, 20_000) or _RESUMED.search(before):
            kept[-1] += part
        else:
            kept.append(part)
    return kept


def _read(text: str, dialect: Dialect, options: LoadOptions | None, path: str | Path, name: str,
          lines: Lines | None = None, least: int | None = None) -> RunData:
    """One run from ``text`` read with ``dialect`` (``lines``: ``Lines(text)``, where made already;
    ``least``: the records a general reader needs, as :func:`pick_dialect` takes it).

    Where the dialect's lines hold no loss and a general reader finds a series of losses in the
    script's own lines, that reading: a library prints its own lines into any script's log
    (DeepSpeed's ``[Rank 0] step=10, skipped=0, lr=[...]``; the loss is the script's to print),
    their loss perhaps under another name (MiniLLM's ``tot_loss`` beside DeepSpeed's overflow lines)."""
    run = _read_as(text, dialect, options, path, name, lines)
    if metrics.LOSS in run.steps.columns or dialect is AMP_ONLY or id(dialect) in _FALLBACK_IDS:
        return run
    other = _script_lines(text, options, path, name, Lines.of(text, lines), least)
    if other is None:
        key = find_loss_key(clean_text(text), options.loss_col if options else None)
        other = None if key is None else _script_lines_keyed(text, key, options, path, name, least)
        if other is None:
            return _loss_col_named(run, text, options, path, name, least)
        if said := key.note():
            other.warnings.insert(0, said)
        _keyed([other], key)
    other.warnings.insert(0, f"{dialect.name}'s own lines hold no loss: the loss is read from the script's own lines")
    return other


def _loss_col_named(run: RunData, text: str, options: LoadOptions | None, path: str | Path, name: str,
                    least: int | None) -> RunData:
    """``run`` (a dialect's lines with no loss, none in the script's own lines either), its warning
    naming the first loss key the lines print with which ``--loss-col`` reads a series (DeepSpeed-
    Chat's PPO "act_loss", under DeepSpeed's own lines: "no loss"), where the user named none."""
    if options is not None and options.loss_col is not None:
        return run
    cleaned = clean_text(text)
    for named in loss_keys(cleaned)[:3]:  # (each a read of the text: the few first)
        key = find_loss_key(cleaned, named)
        named_options = LoadOptions(loss_col=named)
        if key is not None and _script_lines_keyed(text, key, named_options, path, name, least) is not None:
            run.warnings = [w + f"; the lines name {named}: pass --loss-col {named} to judge it as the loss"
                            if w.startswith(f"no loss logged by {run.source}") else w for w in run.warnings]
            break
    return run


def _script_lines_keyed(text: str, key: LossKey, options: LoadOptions | None, path: str | Path, name: str,
                        least: int | None) -> RunData | None:
    """:func:`_script_lines` of ``text`` with its loss key ``key`` written as the loss (a key the user
    named is then the loss: no column of that name is asked for)."""
    keyed = key.rewrite(text)
    return _script_lines(keyed, replace(options, loss_col=None) if options and key.named else options, path, name,
                         Lines(keyed), least)


def _script_lines(text: str, options: LoadOptions | None, path: str | Path, name: str, lines: Lines,
                  least: int | None) -> RunData | None:
    """The run a general reader reads from ``text`` where its lines form a series with a loss; else None."""
    plain, plain_lines = plain_numbers(text, lines)  # as the pick counts: tensor(2.3) is 2.3
    for fallback in FALLBACKS:
        needed = fallback.min_records if least is None else min(least, fallback.min_records)
        if count_records(plain_lines, fallback) < needed or not _is_series(plain, fallback, needed):
            continue
        try:
            other = _read_as(text, fallback, options, path, name, lines)
        except ValueError:
            continue
        if metrics.LOSS in other.steps.columns:
            return other
    return None


# A loss printed as NaN on a line no step line of the dialect goes with.
# (a loss's term too: RVC's "loss_disc=nan, loss_gen=nan, ...")
_PRINTED_NAN_LOSS = re.compile(r"(?i)\bloss(?:_\w+)?['\"]?[^\S\n]*[:=][^\S\n]*\[?-?nan\b")


def _no_step_lines(path: str | Path, dialect: Dialect, text: str) -> str:
    """The message for a log that looks like ``dialect``'s but holds no step line it reads."""
    said = f"{path}: it looks like {dialect.description}, but sentinel reads no step line of it"
    nan = _PRINTED_NAN_LOSS.search(text)
    if nan is not None:
        return f"{said}; its lines print a NaN loss ({nan.group(0)!r}): the run went non-finite there; paste " \
               "its step lines with them"
    return f"{said}: paste it whole, with the lines that name each step or epoch, or pass --loss-col with the key " \
           "of its loss"


def _read_as(text: str, dialect: Dialect, options: LoadOptions | None, path: str | Path, name: str,
             lines: Lines | None = None) -> RunData:
    """:func:`_read` with ``dialect`` alone."""
    if dialect is HF_TRAINER:
        text = clean_text(text)
        text = bar_steps(text, HF_TRAINER.shapes[0].pattern, own=HF_OWN_STEPS) or text  # training and evaluation
    found = scan(text, dialect, options, lines)
    if not len(found.steps.index):
        raise ValueError(_no_step_lines(path, dialect, text))
    if dialect is GENERIC and not (options and options.loss_col):
        if said := without_empty_window(found, text, lines):
            found.warnings.append(said)
    if dialect is EPOCH_LINES:
        training = without_evaluations(clean_text(text), EPOCH_LINES.drop_words)  # not its evaluation lines
        loss_lines = len(EPOCH_LINES.shapes[0].pattern.findall(training))
        if loss_lines >= 1.5 * len(found.steps.index):  # several lines an epoch: each one a step
            epochs = len(found.steps.index)
            found = scan(text, EPOCH_LINES_IN_ORDER, options)
            found.warnings.append(f"{loss_lines} loss lines over {epochs} epochs: each line is read as a step, "
                                  "numbered 1, 2, 3, ... in order (the lines carry no step of their own)")
        else:
            found.meta[STEP_UNIT] = "epoch"  # a line per epoch: the epoch is the step
    if dialect.step_unit is not None:
        found.meta[STEP_UNIT] = dialect.step_unit
    if dialect is COQUI:
        found.steps = generator_total(found.steps, found.meta, found.warnings)
    if dialect is HF_TRAINER:
        _hf_steps(text, found)
        if (cut := hf_cut_dict(text)) is not None:
            found.warnings.append(f"the last log dict (line {text.count(chr(10), 0, cut.start()) + 1}) is cut off "
                                  "before its end: read up to its last whole field")
    if dialect is GENERIC and Lines.of(text, lines).holds_any(_EPOCH_MEAN_WORDS):
        line = _EPOCH_MEAN_LINE.search(text)  # the training lines' epoch (not the evaluation's)
        _epoch_means_undone(found, int(line.group(1)) if line is not None else 0, "PaddleClas' AverageMeter")
    if dialect is YOLOV4_PYTORCH:
        _epoch_means_undone(found, int(found.meta.get("iters_per_epoch", 0)), "YOLOv4-pytorch's mloss")
    note_crash(text, found, dialect, lines=lines if lines is not None and lines.text is text else None)
    if dialect.note is not None and metrics.LOSS in found.steps.columns and (said := dialect.note(text)):
        found.warnings.append(said)
    if dialect is LOSS_LINES and found.meta.get("step_source") in ("epoch_lines", "step_lines"):
        unit = "epoch" if found.meta["step_source"] == "epoch_lines" else "step"
        found.warnings.append(f"the loss lines carry no step: each is read at the {unit} a line above it names")
    elif dialect is LOSS_LINES:
        found.warnings.append("the loss lines carry no step: numbered 1, 2, 3, ... in order (a line every "
                              "N steps is N steps apart: the steps here count lines)")
    if dialect is GENERIC and metrics.LOSS in found.steps.columns and not (options and options.loss_col) \
            and reads_bar_running_mean(text, lines):
        found.warnings.append("the loss read is the 'loss=' of Lightning 1.x's progress bar, a running mean of "
                              "the last 20 steps: a one-step spike shows at about a twentieth of its height and "
                              "goes unseen. Log the step's loss to the bar (self.log('train_loss', loss, "
                              "prog_bar=True)), or analyze the logger's metrics.csv or event files")
    if dialect.loss_terms is not None and metrics.LOSS not in found.steps.columns:  # none picked by --loss-col
        gan_terms(found.steps, found.warnings, found.meta.get(LOGGED_NAN), dialect.loss_terms)
    if metrics.LOSS not in found.steps.columns:
        events_alone = dialect is AMP_ONLY or dialect is NONFINITE_ONLY
        who = "no loss in the file" if events_alone else f"no loss logged by {dialect.name}"
        unknown = [c for c in found.steps.columns if c not in _NO_LOSS and not c.startswith("amp/")]
        found.warnings.append(f"{who}: only {', '.join(found.steps.columns) or 'events'} were read"
                              + (": name the loss among them with --loss-col NAME" if unknown else ""))
        count, shown = _nonfinite_loss_lines(text) if events_alone else (0, "")
        if count:  # (a loss the lines print NaN that no reader took: an evaluation's "Epoch 0 loss nan acc@1 0.1000")
            found.warnings.append(f"{count} line(s) print a loss non-finite that sentinel does not read as the "
                                  f"training loss (the first: {shown!r}): a loss went non-finite there")
    if (unfinished := _unfinished(text, dialect, found)) is not None:  # (said after how the lines were read)
        found.warnings.append(unfinished)
    return RunData(name=name, path=str(path), source=dialect.name, steps=found.steps,
                   events=found.events, meta=found.meta, warnings=found.warnings, abandoned=found.abandoned)


# What a log reads beside a loss that is never one: no loss among them to name.
_NO_LOSS = frozenset({metrics.LR, metrics.LOSS_SCALE, metrics.GRAD_NORM_TOTAL, "skipped_steps_total"})


# PaddleClas prints each metric as its mean since the epoch began (AverageMeter.avg, reset at each
# epoch): "[Train][Epoch 7/10][Iter: 150/500]lr(...): ..., CELoss: 2.9, loss: 2.9, ...".
_EPOCH_MEAN_WORDS = ("[Train][Epoch ",)
_EPOCH_MEAN_LINE = re.compile(r"\[Train\]\[Epoch \d+/\d+\]\[Iter: \d+/(\d+)\]")


def _epoch_means_undone(found, length: int, whose: str) -> None:
    """The loss of each logged interval, worked out from means since the epoch began (PaddleClas',
    YOLOv4-pytorch's; ``length``: the epoch's iterations, the step ``epoch * length + i``): the mean
    at iteration ``i`` covers ``i + 1`` batches, so the interval's mean is the difference of two sums
    over the difference of the counts. Read as printed, a one-interval spike lifted every later
    value of its epoch ('not recovered', a divergence) and showed at a fraction of its height, and
    each epoch's first mean, of a few batches, jumped. In place, with a warning."""
    steps = found.steps
    if not length or metrics.LOSS not in steps.columns:
        return
    loss = steps[metrics.LOSS].to_numpy(dtype="float64")
    printed_nan = np.isin(steps.index.to_numpy(), found.meta.get(LOGGED_NAN, {}).get(metrics.LOSS, []))
    rows = np.flatnonzero(~np.isnan(loss) | printed_nan)  # the training records (not an evaluation's row)
    if len(rows) < 2:
        return
    step = steps.index.to_numpy()[rows]
    epoch, count = step // length, step % length + 1  # batches the mean covers
    total = loss[rows] * count
    same = np.r_[False, epoch[1:] == epoch[:-1]]
    with np.errstate(invalid="ignore", divide="ignore"):
        spans = np.where(same, np.diff(count, prepend=0), count)
        undone = np.where(same, (total - np.r_[0.0, total[:-1]]) / spans, loss[rows])
    if not (spans > 0).all():
        return  # counts that do not rise inside an epoch: not means of this kind
    column = loss.copy()
    column[rows] = undone
    steps[metrics.LOSS] = column
    found.warnings.append(f"the loss printed is its mean since the epoch began ({whose}): each "
                          "logged interval's loss is worked out from two of them (a spike shows at its height, not "
                          "spread over the rest of its epoch)")


# A discriminator's term by its name alone, where its prefix is not there (BicycleGAN's "D", "D2"; a fork's
# "disc"), and a quality measure printed among the terms, no term of a loss.
_CRITIC_ALONE = re.compile(r"(?:d\d*|disc|dis)$")
_QUALITY = re.compile(r"(?:psnr|ssim|lpips|fid|acc)(?:_|$)")


def _is_critic(key: str, prefix: str) -> bool:
    """Whether a term's ``key`` is a discriminator's: it opens with ``prefix`` (``d_``), or is its letter alone.

    Example:
        >>> [_is_critic(k, "d_") for k in ("d_a", "d", "d2", "disc", "dx", "g_gan")]
        [True, True, True, True, False, False]
    """
    return key.startswith(prefix) or (prefix == "d_" and bool(_CRITIC_ALONE.match(key)))


def gan_terms(steps, warnings: list[str], logged_nan: dict | None = None, names: LossTerms = LossTerms()) -> None:
    """A log's loss terms as the losses they add up to: a GAN's generator's (every term but the
    discriminators', ``d_*`` by default) as the loss, the discriminators' as ``loss_d`` (a GAN's run
    is judged on non-finite values only: the two play against each other); where ``names`` says
    so, the terms alone as the loss (BasicSR's ``l_pix`` + ``l_percep``). In place, with a warning.
    A sum is a printed NaN (``logged_nan``, by key: the terms' printed NaNs in, the sums' out)
    where one of its terms printed one; a line that lacks a term (cut in a paste) has no sum.

    Example:
        >>> import pandas as pd
        >>> t = pd.DataFrame({"d_a": [0.5, 0.4], "g_a": [0.4, float("nan")], "cycle_a": [2.0, 1.0]})
        >>> gan_terms(t, w := [], nan := {"g_a": []}); t["loss"].tolist(), nan, w[0].split(";")[0]
        ([2.4, nan], {'loss': [], 'loss_d': []}, "loss is the generator's g_a + cycle_a")
        >>> w[1][:40]
        '1 line(s) lack a term of the loss (g_a):'
        >>> t = pd.DataFrame({"lr": [1e-4], "l_pix": [0.5], "l_percep": [2.0]})
        >>> gan_terms(t, w := [], None, LossTerms(term="l_", critic="l_d_", alone=True)); t["loss"].tolist(), w
        ([2.5], ['loss is the sum of its terms l_pix + l_percep (--loss-col picks one term)'])
    """
    terms = [c for c in steps.columns if c not in (metrics.LOSS, "loss_d") and c.startswith(names.term)
             and not c[:1].isdigit()]  # (a list's later values, ComboGAN's "D: 0.111, 0.105": no names)
    critic = [c for c in terms if _is_critic(c, names.critic)]
    generator = [c for c in terms if not _is_critic(c, names.critic)]
    if not generator or not (critic or names.alone) or any(_QUALITY.match(c) for c in generator):
        return  # (a quality printed among them, a fork's psnr_img: no term of a loss; --loss-col names one)
    steps[metrics.LOSS] = steps[generator].sum(axis=1, min_count=len(generator))
    if critic:
        steps["loss_d"] = steps[critic].sum(axis=1, min_count=len(critic))
        warnings.append(f"loss is the generator's {' + '.join(generator)}; loss_d the discriminators' "
                        f"{' + '.join(critic)} (--loss-col picks one term)")
    elif len(generator) > 1:
        warnings.append(f"loss is the sum of its terms {' + '.join(generator)} (--loss-col picks one term)")
    else:
        warnings.append(inferred_loss_note(generator[0], "key"))
    if logged_nan is None:
        return
    index = steps.index.to_numpy()
    for key, side in ((metrics.LOSS, generator), ("loss_d", critic)):
        if not side:
            continue
        printed = np.isin(index, [step for term in side for step in logged_nan.get(term, ())])
        unsummed = steps[key].isna().to_numpy()
        logged_nan[key] = index[unsummed & printed].tolist()
        lacking = [term for term in side if (steps[term].isna().to_numpy() & unsummed & ~printed).any()]
        if lacking:
            warnings.append(f"{int((unsummed & ~printed).sum())} line(s) lack a term of the "
                            f"{'loss' if key == metrics.LOSS else key} ({', '.join(lacking)}): cut in a paste or "
                            "not printed there; their sum is not read")
    for term in terms:
        logged_nan.pop(term, None)


def _hf_steps(text: str, found) -> None:
    """Turn HF dict order into optimizer steps when the log says how many steps an epoch has."""
    steps = found.steps
    if found.meta.get("step_source") == "key":  # the progress bar's counts
        logged = steps.index[steps[metrics.LOSS].notna()] if metrics.LOSS in steps.columns else steps.index
        gaps = np.diff(logged.to_numpy())
        found.meta["logging_steps"] = int(np.median(gaps)) if len(gaps) else None
        found.meta["step_source"] = "progress bar"
        return
    if found.meta.get("step_source") == "step_lines":  # "Step 500" above each dict (a DPO script's print)
        found.meta["logging_steps"] = None
        found.warnings.append("HF Trainer log dicts carry no step: each is read at the step a line above it names")
        return
    epochs, total = _HF_EPOCHS.search(text), _HF_TOTAL.search(text)
    interval, told = None, None
    per_epoch = (int(total.group(1).replace(",", "")) / int(epochs.group(1).replace(",", ""))
                 if epochs and total else None)
    summary = None if per_epoch else _summary_steps(text)
    if summary is not None:  # no banner (stdout kept, stderr not): the final summary's steps
        per_epoch = summary[0] / summary[1]
    if per_epoch and "epoch" in steps.columns and len(steps.index) >= 1:
        first = steps["epoch"].dropna()
        if len(first):
            interval = int(round(first.iloc[-1] / int(first.index[-1]) * per_epoch))
    if interval and summary is not None:
        logged = int(steps[metrics.LOSS].notna().sum()) if metrics.LOSS in steps.columns else len(steps.index)
        # The Trainer logs at every interval-th step up to the last (once more with logging_first_step).
        if not logged - 1 <= summary[0] / interval <= logged + 1:
            interval = None
        else:
            told = (f"HF Trainer log dicts carry no step: logged every {interval} steps, as the final summary's "
                    f"train_runtime x train_steps_per_second ({summary[0]:.0f} steps over {summary[1]:g} epochs) "
                    "and the dicts' epoch say")
    if interval and interval >= 1:
        if told:
            found.warnings.append(told)
        steps.index = steps.index * interval
        steps.index.name = metrics.STEP
        found.meta["logging_steps"] = interval
        if not found.events.empty:
            found.events["step"] = found.events["step"] * interval
        if LOGGED_NAN in found.meta:  # the printed NaNs move with their steps
            found.meta[LOGGED_NAN] = {key: [step * interval for step in at]
                                      for key, at in found.meta[LOGGED_NAN].items()}
        for stretch in found.abandoned:  # a resumed run's replaced stretches, numbered alike
            stretch.steps.index = stretch.steps.index * interval
            stretch.resumed_at, stretch.first, stretch.last = (stretch.resumed_at * interval, stretch.first * interval,
                                                               stretch.last * interval)
            stretch.logged_nan = {key: [step * interval for step in at]
                                  for key, at in (stretch.logged_nan or {}).items()}
    else:
        found.meta["logging_steps"] = None
        found.warnings.append("HF Trainer log dicts carry no step: numbered 1, 2, 3, ... in order "
                              "(multiply by logging_steps, or read trainer_state.json)")


# The Trainer's final summary dict: {'train_runtime': 0.5529, ..., 'train_steps_per_second': 108.5,
# 'train_loss': 3.905, 'epoch': 1.875} (transformers 5 prints each value quoted).
_SUMMARY_VALUE = r"'{key}':\s*'?([0-9.eE+-]+)'?"


def _summary_steps(text: str) -> tuple[float, float] | None:
    """The optimizer steps of the run (train_runtime x train_steps_per_second) and its epochs, from
    the Trainer's final summary dict; None without one."""
    at = text.rfind("'train_runtime'")
    if at < 0:
        return None
    start, end = text.rfind("{", 0, at), text.find("}", at)
    if start < 0 or end < 0:
        return None
    summary = text[start:end]
    values = [re.search(_SUMMARY_VALUE.format(key=key), summary)
              for key in ("train_runtime", "train_steps_per_second", "epoch")]
    try:
        runtime, per_second, epochs = (float(v.group(1)) for v in values)  # type: ignore[union-attr]
    except (AttributeError, ValueError):
        return None
    steps = runtime * per_second
    return (steps, epochs) if steps >= 1 and epochs > 0 else None


def _is_series(text: str, dialect: Dialect, needed: int | None = None) -> bool:
    """A generic reader's guard: its lines must form a series, a loss at each of
    ``min_records`` distinct steps. A NaN or Inf counts: every generic line holds its loss, so
    a non-finite one was printed (a run that went NaN at its 2nd step is what a reader is for),
    and so does a loss that never changes (stuck at 0.0, or a placeholder)."""
    needed = dialect.min_records if needed is None else needed
    # Its first lines read by its record shapes alone tell for most logs (a series there is one
    # in the whole head: more lines and shapes add steps, they take none away); the whole head,
    # by the whole dialect, is read only where they do not.
    cut = text.rfind("\n", 0, _SERIES_PREFIX) + 1 if len(text) > 2 * _SERIES_PREFIX else len(text)
    for part, reader in ((text[:cut], _records_only(dialect)), (text, dialect)):
        steps = scan(part, reader).steps  # every generic record holds a loss, NaN included
        if len(steps.index) >= needed and metrics.LOSS in steps.columns:
            return True
    if dialect is EPOCH_LINES and not len(scan(text[:cut], _records_only(GENERIC)).steps.index):
        # Lines of fewer epochs than a series needs, several an epoch (a loop's print every 100 batches of a
        # one-epoch fine-tune, "Epoch: 0, Loss:  0.0013"): each line a step, as _read_as reads them, where
        # the loss moves and the lines hold no other count (not "Epoch 80 | 1152/1153 | Loss 0.4485" from
        # four processes at one step, nor "Epoch=1 Step=280 Loss=0.01" of four steps).
        steps = scan(text[:cut], _records_only(EPOCH_LINES_IN_ORDER)).steps
        return len(steps.index) >= needed and metrics.LOSS in steps.columns and steps[metrics.LOSS].nunique() > 1
    return False


def _records_only(dialect: Dialect) -> Dialect:
    """``dialect`` without its shapes that read a value beside a record (the lr beside the loss:
    16 of the generic reader's 23 shapes) and its evaluation lines: its records' steps and loss
    alone, what :func:`_is_series` asks."""
    found = _RECORDS_ONLY.get(id(dialect))
    if found is None:
        found = _RECORDS_ONLY[id(dialect)] = replace(
            dialect, shapes=tuple(shape for shape in dialect.shapes if shape.beside is None), evaluation_keys=(),
            epoch_evaluation=None, unstepped_evaluation=None)
    return found


_RECORDS_ONLY: dict[int, Dialect] = {}
