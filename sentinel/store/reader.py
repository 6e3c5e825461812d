"""``load_run``: a run directory back into pandas, read as far as it is valid."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sentinel.store.atomic_json import read_json
from sentinel.store.events_log import EVENT_COLUMNS, read_events
from sentinel.store.history import supersede_events
from sentinel.store.layout import EVENTS_FILE, META_FILE, SKIPLIST_FILE, list_segments
from sentinel.store.skiplist import read_skiplist
from sentinel.store.steps_csv import read_steps

log = logging.getLogger(__name__)


@dataclass
class Run:
    """One sentinel run directory, loaded.

    Attributes:
        path: the run directory.
        meta: ``meta.json`` (``{}`` when missing or unreadable, with a warning).
        steps: one row per step, indexed by int ``step``, sorted; one float64 column per key
            (``epoch`` and ``batch_idx`` first), NaN where a record had no value. A step
            recorded more than once (rollback, resume) holds its last record.
        events: ``events.jsonl`` in file order, at least ``step``, ``time``, ``kind`` columns.
        skiplist: the skipped batches (``[]`` when none).
        warnings: what was skipped while reading (truncated lines, unreadable files).
        restarts: steps at which a later process (a resumed run) took over; its history
            replaces the earlier one's from there (steps and events alike).
    """

    path: Path
    meta: dict[str, Any]
    steps: pd.DataFrame
    events: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(EVENT_COLUMNS)))
    skiplist: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    restarts: list[int] = field(default_factory=list)


def load_run(path: str | Path) -> Run:
    """Load a run directory written by :class:`sentinel.store.RunWriter`.

    Damage (a truncated last line, a malformed line, an unreadable meta or skiplist, a file
    without read permission, a FIFO or directory where a file belongs, JSON nested too deeply
    to parse, a segment that is not UTF-8) never raises: the valid part is returned and
    ``Run.warnings`` names each file that was skipped and why.

    Args:
        path: the run directory.

    Returns:
        The loaded :class:`Run`.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: ``path`` is not a sentinel run directory (no ``meta.json`` and no steps).

    Example:
        >>> run = load_run("logs/run1")  # doctest: +SKIP
        >>> run.steps["loss"].idxmax(), list(run.events["kind"])  # doctest: +SKIP
        (120, ['spike', 'rollback'])
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"run directory '{path}' does not exist: "
                                "pass the directory a RunWriter wrote (it holds meta.json)")
    meta_path = path / META_FILE
    if not path.is_dir() or (not meta_path.exists() and not list_segments(path)):
        raise ValueError(f"'{path}' is not a sentinel run directory (no meta.json and no "
                         "steps.*.csv): pass the directory a RunWriter wrote")
    warnings: list[str] = []
    meta = _read_meta(meta_path, warnings)
    steps = _read_steps(path, warnings)
    events = _read_events(path / EVENTS_FILE, warnings)
    skiplist = _read_skiplist(path / SKIPLIST_FILE, warnings)
    events, event_restarts = supersede_events(events)
    restarts = sorted(set(steps.attrs.get("restarts", [])) | set(event_restarts))
    for warning in warnings:
        log.warning("%s: %s", path, warning)
    return Run(path=path, meta=meta, steps=steps, events=events, skiplist=skiplist,
               warnings=warnings, restarts=restarts)


def _read_meta(meta_path: Path, warnings: list[str]) -> dict[str, Any]:
    if not meta_path.exists():
        warnings.append(f"{META_FILE} is missing; meta is empty")
        return {}
    if not _regular_file(meta_path, warnings):
        return {}
    try:
        meta = read_json(meta_path)
    except ValueError as ex:  # not JSON, or not UTF-8
        warnings.append(f"{META_FILE} ignored: {ex}")
        return {}
    except OSError as ex:
        warnings.append(f"{META_FILE} ignored: cannot read it ({ex.strerror or ex}); meta is empty")
        return {}
    except RecursionError:
        warnings.append(f"{META_FILE} ignored: its JSON is nested too deeply to read; meta is empty")
        return {}
    if not isinstance(meta, dict):
        warnings.append(f"{META_FILE} holds a {type(meta).__name__}, not an object; ignored")
        return {}
    return meta


def _regular_file(path: Path, warnings: list[str]) -> bool:
    """False (with a warning) for a directory, FIFO or device where a file belongs: opening a
    FIFO would wait forever for a writer."""
    if path.is_file():
        return True
    warnings.append(f"{path.name} ignored: it is not a regular file")
    return False


def _read_steps(path: Path, warnings: list[str]) -> pd.DataFrame:
    steps, step_warnings = read_steps(path)  # an unreadable segment is skipped there, by name
    warnings += step_warnings
    return steps


def _read_events(path: Path, warnings: list[str]) -> pd.DataFrame:
    empty = pd.DataFrame(columns=list(EVENT_COLUMNS))
    if not path.exists():
        return empty
    if not _regular_file(path, warnings):
        return empty
    try:
        events, event_warnings = read_events(path)
    except OSError as ex:
        warnings.append(f"{path.name} ignored: cannot read it ({ex.strerror or ex}); no events")
        return empty
    warnings += event_warnings
    return events


def _read_skiplist(path: Path, warnings: list[str]) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    if not _regular_file(path, warnings):
        return []
    try:
        return read_skiplist(path)
    except ValueError as ex:
        warnings.append(f"skiplist ignored: {ex}")
    except OSError as ex:
        warnings.append(f"skiplist ignored: cannot read {path.name} ({ex.strerror or ex})")
    except RecursionError:
        warnings.append(f"skiplist ignored: {path.name} nests JSON too deeply to read")
    return []
