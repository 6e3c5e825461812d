"""``events.jsonl``: one JSON object per line, appended with one write syscall per event."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from sentinel.store.atomic_json import json_default

# Columns every events frame has, even an empty one.
EVENT_COLUMNS = ("step", "time", "kind")


class EventLogWriter:
    """Appends events to ``events.jsonl``; each event is in the kernel when ``write`` returns.

    Args:
        path: the events file; created if absent, appended to if present.

    Example:
        >>> from sentinel.events import make_event
        >>> w = EventLogWriter(Path("logs/run1/events.jsonl"))  # doctest: +SKIP
        >>> w.write(make_event("spike", 120, metric="loss", value=9.1))  # doctest: +SKIP
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        # A crash may have left a line without its newline: end it, so that our first event
        # is not glued to it (the torn line is reported by the reader).
        if os.fstat(self._fd).st_size and not _ends_with_newline(path):
            os.write(self._fd, b"\n")

    def write(self, event: Mapping[str, Any]) -> None:
        """Append one event (``{"step", "time", "kind", ...}``; ``time`` is added if missing).

        Raises:
            ValueError: the event lacks ``step`` or ``kind``, or the writer is closed.
            TypeError: a detail value is not JSON serialisable.
        """
        if self._fd is None:
            raise ValueError("write_event on a closed RunWriter: open a new RunWriter on the run dir")
        if "step" not in event or "kind" not in event:
            raise ValueError(f"event {dict(event)!r} needs 'step' and 'kind': "
                             "build it with sentinel.events.make_event")
        if "time" not in event:
            event = {**event, "time": time.time()}
        line = json.dumps(event, default=json_default, separators=(",", ":")) + "\n"
        data = line.encode("utf-8")
        while data:
            data = data[os.write(self._fd, data):]

    def sync(self) -> None:
        """fsync the file (durability across a machine crash)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Close the file; idempotent."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def read_events(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """Read ``events.jsonl``; lines that are not JSON objects are skipped and reported.

    A line that cannot be parsed (torn by a crash, not JSON, nested too deeply for the parser)
    costs that line only: every other event is kept.

    Args:
        path: the events file (absent means no events).

    Returns:
        ``(events, warnings)``; ``events`` has at least ``step``, ``time``, ``kind`` columns,
        one row per event in file order.

    Example:
        >>> events, warnings = read_events(Path("logs/run1/events.jsonl"))  # doctest: +SKIP
        >>> list(events["kind"])  # doctest: +SKIP
        ['spike', 'rollback']
    """
    warnings: list[str] = []
    if not path.exists():
        return pd.DataFrame(columns=list(EVENT_COLUMNS)), warnings
    with open(path, "rb") as f:
        data = f.read()
    records = []
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        last = number == len(lines)  # no newline after it: written by a writer that died
        try:
            record = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            record = None
        except RecursionError:  # e.g. 100,000 nested brackets: this line only, not the file
            warnings.append(f"{path.name}: skipped line {number}: its JSON is nested too deeply to read "
                            f"({len(raw)} bytes)")
            continue
        if not isinstance(record, dict) or "step" not in record or "kind" not in record:
            what = "truncated last line" if last else f"malformed line {number}"
            warnings.append(f"{path.name}: skipped {what} ({len(raw)} bytes)")
            continue
        records.append(record)
    events = pd.DataFrame.from_records(records) if records else pd.DataFrame()
    for column in EVENT_COLUMNS:
        if column not in events.columns:
            events[column] = pd.Series(dtype="float64" if column == "time" else "object")
    events = events[list(EVENT_COLUMNS) + [c for c in events.columns if c not in EVENT_COLUMNS]]
    if records and pd.api.types.is_integer_dtype(events["step"]):
        events["step"] = events["step"].astype("int64")
    return events, warnings
