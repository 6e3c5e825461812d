"""Files parsed ahead of time on a thread, each result taken once if the file has not changed.

``sentinel analyze`` spends ~0.4 s importing pandas and its rules before a loader reads a byte.
The parsers of the long files (pyarrow's CSV reader for a run directory's steps, numpy for
TensorBoard records) mostly run without the GIL, so started first, on a thread, they run beside
those imports. A loader then asks :meth:`ParseAhead.take` for its file: the result, when it was
parsed ahead and the file is unchanged since (same inode, size and modification time, taken
before the parse); otherwise None, and the loader parses the file itself. Either way it gets
what a parse of the file as it is now gives.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def signature(path: str | Path) -> tuple | None:
    """What changes when a file is written to or replaced (None: it cannot be stat'ed)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)


class _Batch:
    """Some files parsed one after the other on one thread."""

    def __init__(self, parse: Callable[[Path], Any], files: list[Path]) -> None:
        self.results: dict[Path, tuple[tuple | None, Any]] = {}
        self.thread = threading.Thread(target=self._run, args=(parse, files), name="parse-ahead")
        self.thread.start()

    def _run(self, parse: Callable[[Path], Any], files: list[Path]) -> None:
        for file in files:
            before = signature(file)
            try:
                result = parse(file)
            except BaseException:  # noqa: BLE001 -- the loader parses it again and says what failed
                log.debug("parse ahead of %s stopped", file, exc_info=True)
                return
            self.results[file] = (before, result)


class ParseAhead:
    """``parse(file)`` run ahead on a thread for files a loader will read; each result taken once.

    Args:
        parse: the loader's own parse of one file (what it would call itself).

    Example:
        >>> ahead = ParseAhead(lambda file: file.read_bytes())
        >>> ahead.start([Path("/nonexistent")])
        >>> ahead.take(Path("/nonexistent")) is None  # it failed there: the loader reads it itself
        True
    """

    def __init__(self, parse: Callable[[Path], Any]) -> None:
        self._parse = parse
        self._pending: dict[Path, _Batch] = {}
        self._lock = threading.Lock()

    def start(self, files: Iterable[str | Path]) -> None:
        """Parse ``files`` on a thread, in order (files already pending are left to their thread)."""
        keys = []
        for file in files:
            key = _key(file)
            if key is not None and key not in self._pending and key not in keys:
                keys.append(key)
        if not keys:
            return
        with self._lock:
            batch = _Batch(self._parse, keys)
            for key in keys:
                self._pending[key] = batch

    def cancel(self, files: Iterable[str | Path]) -> None:
        """Forget the parses of ``files`` not taken (a thread still running finishes on its own;
        its results are freed then)."""
        with self._lock:
            for file in files:
                key = _key(file)
                if key is not None:
                    self._pending.pop(key, None)

    def take(self, file: str | Path) -> Any | None:
        """The result of ``parse(file)`` when it was parsed ahead and is unchanged since; once."""
        if not self._pending:
            return None
        key = _key(file)
        with self._lock:
            batch = self._pending.pop(key, None) if key is not None else None
        if batch is None:
            return None
        batch.thread.join()
        before, result = batch.results.pop(key, (None, None))
        if before is None or before != signature(key):
            return None
        return result


def _key(file: str | Path) -> Path | None:
    try:
        return Path(file).resolve()
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL in the name
        return None
