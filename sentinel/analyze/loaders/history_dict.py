"""Loader for a training history kept as one dict of lists, one value per epoch.

Keras' ``History.history`` saved with ``json.dump`` or printed (``{'loss': [2.3, 1.9, ...],
'val_loss': [...], 'accuracy': [...]}``), and the same shape written by many scripts. The
printed form is Python's repr: single quotes, ``nan``, ``np.float32(2.3)`` under NumPy 2; it is
turned into JSON text and parsed as data (never evaluated). Epochs are numbered from 1, as Keras
prints them (``Epoch 1/30``); a list of steps beside them (``{"step": [...], "loss": [...]}``)
gives the steps, and pandas' ``DataFrame.to_json()`` (``{"loss": {"0": 3.3, ...}}``) its rows'
labels.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN, STEP_UNIT, LoadOptions, RunData, epoch_unit
from sentinel.analyze.loaders.keys import (canonical_key, looks_like_eval_loss, looks_like_loss, loss_column,
                                           rises_by_whole_numbers, step_columns)
from sentinel.analyze.loaders.textlog import head_matches, read_head, read_text, run_name

NAME = "history_dict"
DESCRIPTION = "a history dict of per-epoch lists (Keras' History.history: {'loss': [...], 'val_loss': [...]})"

# A dict (its first character) whose loss-like key holds a list of numbers, near the start of the
# text, perhaps after other lists ({"step": [...], "loss": [...]}, a frame's to_dict("list")).
_OPENS_A_DICT = re.compile(r"^\s*\{")
_LIST_KEY = re.compile(r"['\"]([\w/ .-]*(?:loss|Loss|LOSS)[\w/ .-]*)['\"]\s*:\s*(?:\[\s*"
                       r"(?:np\.float\d+\(|numpy\.float\d+\()?[-+\d.nNiI\]]"
                       r"|\{\s*['\"]-?\d+['\"]\s*:\s*[-+\d.nNiI])")  # or pandas' to_json(): {"0": 3.3, ...}
_SNIFF_BYTES = 8192
MAX_BYTES = 64 << 20
# Python's repr of the dict, made JSON: numpy scalars unwrapped, quotes, nan/inf.
_NUMPY_SCALAR = re.compile(r"\b(?:np|numpy)\.(?:float|int)\d+\(([^()]*)\)")
_PY_WORDS = re.compile(r"(?<![\w\"])(nan|inf|-inf|None|True|False)(?![\w\"])")
_JSON_WORDS = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity", "None": "null", "True": "true",
               "False": "false"}


def sniff(path: str | Path) -> bool:
    """True for a dict of per-epoch lists with a loss-like key.

    Example:
        >>> sniff("/nonexistent.json")
        False
    """
    if not head_matches(path, _OPENS_A_DICT, _SNIFF_BYTES, MAX_BYTES):
        return False
    head = read_head(path, limit=_SNIFF_BYTES) or ""
    # A loss's list, not a setting's ("loss_weights": [1.0, 0.5] in a config).
    return any(looks_like_loss(m.group(1)) or looks_like_eval_loss(m.group(1)) for m in _LIST_KEY.finditer(head))


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read one history dict.

    Returns:
        One :class:`RunData`, one row per epoch (from 1), every list of numbers a column.

    Raises:
        ValueError: the text is not such a dict, or has no loss (the message lists its keys).

    Example:
        >>> run = load("history.json")[0]  # doctest: +SKIP
        >>> run.steps.index[0], list(run.steps.columns)[:2]  # doctest: +SKIP
        (1, ['loss', 'val_loss'])
    """
    options = options or LoadOptions()
    history, rows = _columns_as_lists(_parse(path))
    series = {str(k): v for k, v in history.items()
              if isinstance(v, list) and v and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                   or x is None for x in v)}
    if not series:
        raise ValueError(f"{path}: a dict with no list of numbers: not a training history")
    loss_col, _ = loss_column(list(series), options.loss_col)
    if loss_col is None:
        raise ValueError(f"{path}: no loss among the history's keys ({', '.join(series)}): pass --loss-col <key>")
    epochs = max(len(v) for v in series.values())
    warnings = []
    if any(len(v) != epochs for v in series.values()):
        warnings.append(f"{Path(path).name}: lists of different lengths: the shorter ones are read as the first "
                        "epochs")
    index = pd.Index(np.arange(1, epochs + 1) if rows is None else rows, name=metrics.STEP)
    step_key = _step_list(series, epochs)
    unit = {STEP_UNIT: "epoch"} if rows is None else {}  # one row per epoch, numbered from 1
    if step_key is not None:  # {"step": [...], "loss": [...]}: the steps are given
        index = pd.Index(np.array(series.pop(step_key), dtype="int64"), name=metrics.STEP)
        unit = epoch_unit(step_key)
    columns: dict[str, np.ndarray] = {}
    logged_nan: dict[str, list[int]] = {}  # a NaN written as such, not a null (a value not logged)
    for name, values in series.items():
        key = metrics.LOSS if name == loss_col else canonical_key(name)
        if key in columns or (key == metrics.LOSS and name != loss_col):
            key = name.strip().lower()
        padded = np.full(epochs, np.nan)
        padded[:len(values)] = np.array([np.nan if x is None else x for x in values], dtype="float64")
        columns[key] = padded
        nan_at = [i for i, x in enumerate(values) if x is not None and x != x]
        logged_nan[key] = index[nan_at].tolist()
    steps = pd.DataFrame(columns, index=index)
    return [RunData(name=run_name(path), path=str(path), source=NAME, steps=steps,
                    meta={"format": NAME, "columns": list(series), LOGGED_NAN: logged_nan, **unit},
                    warnings=warnings)]


def _columns_as_lists(history: dict) -> tuple[dict, list[int] | None]:
    """pandas' ``DataFrame.to_json()`` (``{"loss": {"0": 3.3, "1": 3.2}, ...}``): each column as a
    list over the rows' labels (whole numbers, in order), and those labels; ``history`` as it is
    where no value is such a column.

    Example:
        >>> _columns_as_lists({"loss": {"0": 3.3, "10": 3.1}, "lr": {"10": 0.1}})
        ({'loss': [3.3, 3.1], 'lr': [None, 0.1]}, [0, 10])
    """
    columns = {k: v for k, v in history.items() if isinstance(v, dict) and v
               and all(isinstance(label, str) and label.lstrip("-").isdigit() for label in v)}
    if not columns:
        return history, None
    rows = sorted({int(label) for column in columns.values() for label in column})
    out = {k: v for k, v in history.items() if k not in columns}
    for key, column in columns.items():
        by_row = {int(label): value for label, value in column.items()}
        out[key] = [by_row.get(row) for row in rows]
    return out, rows


def _step_list(series: dict[str, list], length: int) -> str | None:
    """The key of a list of steps (a step alias, not ``epoch``): whole numbers that rise, one for
    each value of the longest list; None where there is none.

    Example:
        >>> _step_list({"global_step": [10, 20, 30], "loss": [2.0, 1.5, 1.2]}, 3)
        'global_step'
        >>> _step_list({"step": [1, 1, 2], "loss": [2.0, 1.5, 1.2]}, 3) is None
        True
    """
    for key in step_columns(list(series)):
        values = np.array([np.nan if v is None else v for v in series[key]], dtype="float64")
        if len(values) == length and rises_by_whole_numbers(values):
            return key
    return None


def _parse(path: str | Path) -> dict:
    text = read_text(path).strip()
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        found = None
    if found is None:  # Python's repr of the dict
        text = _NUMPY_SCALAR.sub(r"\1", text)
        text = _PY_WORDS.sub(lambda m: _JSON_WORDS[m.group(1)], text.replace("'", '"'))
        try:
            found = json.loads(text)
        except (ValueError, RecursionError) as err:  # RecursionError: nested past Python's depth
            raise ValueError(f"{path}: not a history dict ({{'loss': [...], ...}}): {err}") from None
    if not isinstance(found, dict):
        raise ValueError(f"{path}: not a history dict ({{'loss': [...], ...}})")
    return found
