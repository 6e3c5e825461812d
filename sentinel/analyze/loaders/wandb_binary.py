"""Loader for a W&B run's binary ``run-<id>.wandb`` file, read without the wandb library.

An offline run (``wandb/offline-run-<date>_<time>-<id>/``, ``WANDB_MODE=offline``) keeps its
history only in this file; online runs (``wandb/run-*/``) write one too. Each ``wandb.log`` call
is a ``HistoryRecord`` (see :mod:`~sentinel.analyze.loaders.wandb_records`): its items are the
logged keys with JSON values, ``_step`` among them. Numbers (and ``NaN``/``Infinity``) become
columns under sentinel's keys; a nested key joins its parts with ``/`` (``{"grad_norm":
{"blocks.0": x}}`` becomes ``grad_norm/blocks.0``); text, media and lists are left out.
"""

from __future__ import annotations

import functools
import json
import math
from array import array
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN, LoadOptions, RunData
from sentinel.analyze.loaders.keys import MAX_COLUMNS, STEP_LIMIT, canonical_key, is_analysis_key
from sentinel.analyze.loaders.textlog import order_columns
from sentinel.analyze.loaders.trainer_steps import at_trainer_steps
from sentinel.analyze.loaders.wandb_records import (
    MAX_RECORD_BYTES,
    RECORD_HISTORY,
    Malformed,
    Tally,
    has_header,
    history_items,
    record_field,
    records,
    run_info,
)

NAME = "wandb"
DESCRIPTION = "W&B run files (run-<id>.wandb, offline or online)"

# How deep a JSON value's dicts are followed into nested keys: W&B nests a dict per level of
# ``wandb.log({"a": {"b": ...}})``; deeper structures are media or tables, not metrics.
MAX_NESTING = 8

# Keys with a non-numeric value (text, lists, media) named in the run's meta: the first this many.
_LISTED_KEYS = 20


def sniff(path: str | Path) -> bool:
    """True for a ``.wandb`` file that starts with the W&B transaction log header, unless the run
    also has ``files/wandb-history.jsonl`` (older wandb): the same history, read from there once.

    Example:
        >>> sniff("/nonexistent/run-abc.wandb")
        False
    """
    p = Path(path)
    return (p.suffix == ".wandb" and p.is_file() and has_header(p)
            and not (p.parent / "files" / "wandb-history.jsonl").is_file())


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read the history of a W&B run from its ``run-<id>.wandb`` file.

    Damage is read around, never raised: a file cut off mid-record (a killed run), chunks with a
    bad checksum, records that are not valid protobuf and history rows without a step are
    dropped and counted in :attr:`RunData.warnings`.

    Args:
        path: the ``run-<id>.wandb`` file.
        options: ``loss_col`` names the loss key when it is not recognised.

    Returns:
        One :class:`RunData` named after the run directory, indexed by ``_step``.

    Raises:
        ValueError: not a W&B transaction log, no history row with a step in it, or a
            ``loss_col`` that no row has (the message says which).

    Example:
        >>> run = load("wandb/offline-run-20250101_120000-abc/run-abc.wandb")[0]  # doctest: +SKIP
        >>> run.steps["loss"].idxmax()  # doctest: +SKIP
    """
    options = options or LoadOptions()
    p = Path(path)
    tally = Tally()
    table = _Columns()
    dropped: set[str] = set()
    text_keys: set[str] = set()
    history = no_step = 0
    info: dict[str, str] = {}
    name_of = functools.lru_cache(maxsize=4 * MAX_COLUMNS)(lambda path: _name("/".join(path), options))
    for record in records(p, tally):
        try:
            found = record_field(record)
            if found is None:
                continue
            number, message = found
            if number != RECORD_HISTORY:
                info = info or run_info(message)
                continue
            items, step_num = history_items(message)
        except Malformed:
            tally.undecodable += 1
            continue
        history += 1
        values, step = _row(items, name_of, text_keys)
        step = step if step is not None else step_num
        if step is None:
            no_step += 1
            continue
        for key in [k for k in values if k not in table.columns]:
            if len(table.columns) >= MAX_COLUMNS and not is_analysis_key(key):
                dropped.add(key)
                del values[key]
        table.add(step, values)
    warnings = _warnings(p, tally, no_step, dropped)
    if table.steps and options.loss_col is not None and metrics.LOSS not in table.columns:
        keys = ", ".join(sorted(table.columns)[:50])
        raise ValueError(f"{p}: key {options.loss_col!r} not found in the W&B history; keys found: {keys}")
    if not table.steps:
        what = f"{history} history record(s), none with a step" if history else "no history records"
        damage = f" ({'; '.join(warnings)})" if warnings else ""
        raise ValueError(f"{p}: a W&B run file with {what}{damage}: pass a run that logged with wandb.log")
    run_dir = p.parent
    # A row that logs other keys and not the loss (the Trainer's summary after its last step) leaves the loss's
    # cell empty: no NaN the run logged.
    meta: dict[str, Any] = {"format": NAME, "history_records": history, "records": tally.records, **info,
                            LOGGED_NAN: table.logged_nan()}
    if text_keys:
        meta["non_numeric_keys"] = sorted(text_keys)
    return at_trainer_steps(RunData(name=run_dir.name or p.stem, path=str(p), source=NAME, steps=table.frame(),
                                    meta=meta, warnings=warnings))


class _Columns:
    """History rows stored by column (a step array, and per key the rows it has and its values):
    16 bytes per logged value, where a dict per row costs hundreds."""

    def __init__(self) -> None:
        self.steps = array("q")
        self.columns: dict[str, tuple[array, array]] = {}

    def add(self, step: int, values: dict[str, float]) -> None:
        row = len(self.steps)
        self.steps.append(step)
        for key, value in values.items():
            rows, column = self.columns.setdefault(key, (array("q"), array("d")))
            rows.append(row)
            column.append(value)

    def logged_nan(self) -> dict[str, list[int]]:
        """Each key's steps at which a row logged it as NaN."""
        steps = np.frombuffer(self.steps, dtype=np.int64)
        found = {}
        for key, (rows, column) in self.columns.items():
            nan = np.isnan(np.frombuffer(column, dtype=np.float64))
            if nan.any():
                found[key] = sorted({int(s) for s in steps[np.frombuffer(rows, dtype=np.int64)[nan]]})
        return found

    def frame(self) -> pd.DataFrame:
        """The steps frame; a step logged in several rows keeps each key's last value."""
        data = {}
        for key, (rows, column) in self.columns.items():
            dense = np.full(len(self.steps), np.nan)
            dense[np.frombuffer(rows, dtype=np.int64)] = np.frombuffer(column, dtype=np.float64)
            data[key] = dense
        index = pd.Index(np.frombuffer(self.steps, dtype=np.int64).copy(), name=metrics.STEP)
        frame = pd.DataFrame(data, index=index, dtype="float64")
        frame = frame.groupby(level=0, sort=True).last() if not index.is_unique else frame.sort_index(kind="stable")
        return order_columns(frame)


def _row(items, name_of, text_keys: set[str]) -> tuple[dict[str, float], int | None]:
    """The numeric values of one history row under sentinel's keys, and its ``_step``."""
    values: dict[str, float] = {}
    step = None
    for path, value_json in items:
        if path[0].startswith("_"):  # W&B's own: _step, _runtime, _timestamp, _wandb
            if path == ("_step",):
                step = _step(value_json)
            continue
        try:
            values[name_of(path)] = float(value_json)  # nearly every value: a number, NaN or Infinity
            continue
        except ValueError:
            pass
        try:
            value = json.loads(value_json)
        except (ValueError, RecursionError):
            _note(text_keys, "/".join(path))
            continue
        for inner, number in _numbers(path, value, text_keys):
            values[name_of(inner)] = number
    return values, step


def _step(value_json: str) -> int | None:
    """The ``_step`` item's value as an int, None when it is not a whole number in range."""
    try:
        step = int(value_json)
    except ValueError:
        try:
            number = float(value_json)
        except ValueError:
            return None
        if not number.is_integer():
            return None
        step = int(number)
    return step if abs(step) < STEP_LIMIT else None


def _name(key: str, options: LoadOptions) -> str:
    """Sentinel's key for a W&B key; with ``--loss-col``, only the chosen key is the loss."""
    if options.loss_col is None:
        return canonical_key(key)
    if key.lower() == options.loss_col.lower():
        return metrics.LOSS
    name = canonical_key(key)
    return "logged_loss" if name == metrics.LOSS else name  # the user chose another key as the loss


def _numbers(path: tuple[str, ...], value: Any, text_keys: set[str], depth: int = 0):
    """Yield ``(key path, float)`` for the numbers in one JSON value, following nested dicts."""
    key = "/".join(path)
    if isinstance(value, bool):
        _note(text_keys, key)
    elif isinstance(value, (int, float)):
        if isinstance(value, int) and abs(value) > 1e308:  # a JSON integer past float range
            yield path, math.inf if value > 0 else -math.inf
        else:
            yield path, float(value)
    elif isinstance(value, dict) and "_type" not in value and depth < MAX_NESTING:  # "_type": media, tables
        for name, inner in value.items():
            yield from _numbers((*path, str(name)), inner, text_keys, depth + 1)
    else:
        _note(text_keys, key)


def _note(text_keys: set[str], key: str) -> None:
    if len(text_keys) < _LISTED_KEYS:
        text_keys.add(key)


def _warnings(path: Path, tally: Tally, no_step: int, dropped: set[str]) -> list[str]:
    name = path.name
    out = []
    if tally.truncated_bytes:
        out.append(f"{name}: the file ends inside a record (the run was killed or is still writing): "
                   f"the last {tally.truncated_bytes} byte(s) were not read")
    if tally.damaged_chunks:
        skipped = f", {tally.skipped_bytes} byte(s) skipped" if tally.skipped_bytes else ""
        out.append(f"{name}: {tally.damaged_chunks} damaged chunk(s) (bad checksum or header) dropped "
                   f"with {tally.lost_records} record(s){skipped}; the rest was read")
    if tally.broken_records:
        out.append(f"{name}: {tally.broken_records} record(s) with missing chunks were dropped")
    if tally.oversized:
        out.append(f"{name}: {tally.oversized} record(s) over {MAX_RECORD_BYTES >> 20} MB were skipped")
    if tally.undecodable:
        out.append(f"{name}: {tally.undecodable} record(s) that are not valid protobuf were skipped")
    if no_step:
        out.append(f"{name}: {no_step} history row(s) without a _step were skipped")
    if dropped:
        out.append(f"{name}: {len(dropped)} key(s) dropped: at most {MAX_COLUMNS} keys are read")
    return out
