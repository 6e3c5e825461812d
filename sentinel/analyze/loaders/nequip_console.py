"""NequIP's (and Allegro's) console log: the ``log`` file its trainer writes, what it prints.

After each epoch it prints a header and a summary row per phase, the values under the names in
order::

      Train      #    Epoch      wal       LR       loss_f       loss_e         loss        f_mae ...
    ! Train               1    8.080    0.005         0.46        0.365        0.825        0.466 ...
    ! Validation          1    8.080    0.005        0.162       0.0567        0.219        0.288 ...

(``! Initial Validation`` under an ``Initialization`` header before the first epoch). Between them
it prints each batch's metrics under ``# Epoch batch loss ...`` lines, a header over training and
validation batches alike: read as a table, those gave a batch index as the step and a validation
batch's force error as the loss. The summary rows are read: the training row's ``loss`` the loss
(its terms and metrics under their names), the validation row's the ``val_loss`` (``val_`` before
each of its names), the epoch the step.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN, LOGGED_NAN_KEYS, STEP_UNIT, LoadOptions, RunData
from sentinel.analyze.loaders.log_lines import Lines
from sentinel.analyze.loaders.textlog import read_head, read_text, run_name
from sentinel.analyze.loaders.textscan import clean_text

NAME = "nequip"
DESCRIPTION = 'NequIP\'s / Allegro\'s console log ("! Train  N  wal  LR  loss_f  loss_e  loss ..." under its header)'
# The header's names after its "#", and each summary row's values after its phase.
_LINE = re.compile(r"^[^\S\n]*(?:Train|Initialization)[^\S\n]+#[^\S\n]+(?P<names>Epoch[^\S\n]+wal[^\S\n]+LR\b[^\n]*)$|"
                   r"^! (?P<phase>Train|Validation|Initial Validation)[^\S\n]+(?P<values>\d[^\n]*)$", re.MULTILINE)
_WORDS = ("! Train", "! Validation", "! Initial Validation")  # one is on a distinct line of every such log


def sniff(path: str | Path) -> bool:
    """True for a text whose head holds NequIP's summary rows under their header.

    Example:
        >>> sniff("/nonexistent/log")
        False
    """
    head = read_head(path)
    # (the head's lines cleaned, as the text readers' sniff splits them: shared with it)
    if not head or not Lines.shared(head).derived(clean_text).holds_any(_WORDS):
        return False
    kinds = {"names" if m.group("names") else "phase" for m in _LINE.finditer(head)}
    return kinds == {"names", "phase"}


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read NequIP's console log: a row per epoch, ``loss`` (or the name ``--loss-col`` gives), ``lr``,
    ``val_loss``, the other names of its header (``val_`` before a validation row's).

    Raises:
        ValueError: no summary row under a header, or no column named as the loss.

    Example:
        >>> run = load("results/aspirin/example/log")[0]  # doctest: +SKIP
        >>> run.steps[["loss", "val_loss"]].iloc[0].tolist()  # doctest: +SKIP
        [0.825, 0.219]
    """
    options = options or LoadOptions()
    train, valid = _rows(read_text(path))
    if not train:
        raise ValueError(f"{path}: NequIP's summary header but no '! Train' row under it: pass the log of a "
                         "training that ran an epoch, or its metrics_epoch.csv")
    wanted = options.loss_col or "loss"
    names = list(next(iter(train.values())))
    if wanted not in names:
        raise ValueError(f"{path}: no column {wanted!r} in NequIP's summary rows (columns: {', '.join(names)}): "
                         "pass --loss-col with one of them")
    epochs = sorted(set(train) | set(valid))
    columns: dict[str, list[float]] = {}
    for kind, rows, prefix in (("train", train, ""), ("valid", valid, "val_")):
        for name in dict.fromkeys(n for row in rows.values() for n in row):
            if name in ("Epoch", "wal") or (kind == "valid" and name == "LR"):
                continue
            key = {"train": {wanted: metrics.LOSS, "LR": metrics.LR}, "valid": {wanted: metrics.VAL_LOSS}}[kind].get(
                name, prefix + name)
            columns[key] = [rows[e].get(name, np.nan) if e in rows else np.nan for e in epochs]
    steps = pd.DataFrame(columns, index=pd.Index(epochs, name="step"))
    loss = steps[metrics.LOSS].to_numpy()
    nan = {metrics.LOSS: steps.index[np.isnan(loss) & np.isin(steps.index, list(train))].tolist()}
    return [RunData(name=run_name(path), path=str(path), source=NAME, steps=steps,
                    meta={"format": NAME, STEP_UNIT: "epoch", LOGGED_NAN: nan, LOGGED_NAN_KEYS: (metrics.LOSS,)})]


def _rows(text: str) -> tuple[dict[int, dict[str, float]], dict[int, dict[str, float]]]:
    """The training and the validation summary rows by epoch, each ``{name: value}`` under the header
    printed last before it (a row whose values do not fit its header's names is skipped).

    Example:
        >>> log = ("  Train      #    Epoch      wal       LR       loss_f         loss\\n"
        ...        "! Train               1    8.080    0.005         0.46        0.825\\n")
        >>> _rows(log)[0]
        {1: {'Epoch': 1.0, 'wal': 8.08, 'LR': 0.005, 'loss_f': 0.46, 'loss': 0.825}}
    """
    train: dict[int, dict[str, float]] = {}
    valid: dict[int, dict[str, float]] = {}
    names: list[str] | None = None
    for match in _LINE.finditer(text):
        if match.group("names"):
            names = match.group("names").split()
            continue
        values = match.group("values").split()
        if names is None or len(values) != len(names):
            continue
        try:
            row = {name: float(value) for name, value in zip(names, values)}
        except ValueError:
            continue
        if not np.isfinite(row["Epoch"]):
            continue
        (train if match.group("phase") == "Train" else valid)[int(row["Epoch"])] = row
    return train, valid
