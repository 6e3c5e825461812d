"""``RunWriter``: the recorder's only way into a run directory."""

from __future__ import annotations

import logging
import os
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any, Mapping

from sentinel.store.atomic_json import read_json, write_json_atomic
from sentinel.store.events_log import EventLogWriter
from sentinel.store.layout import EVENTS_FILE, META_FILE, TB_DIR
from sentinel.store.meta import merge_meta
from sentinel.store.skiplist import write_skiplist
from sentinel.store.steps_csv import StepSegmentWriter
from sentinel.store.tb_sink import TensorBoardSink, TensorBoardSinkConfig

log = logging.getLogger(__name__)


class RunWriter:
    """Append-only, crash-safe writer of one run directory.

    Every step record and event is handed to the OS (one ``write`` syscall) before the call
    returns, so a process killed with SIGKILL loses nothing it wrote; ``meta.json`` and
    ``skiplist.json`` are replaced atomically. Opening an existing run directory appends (a
    new steps segment; events appended) and never truncates. TensorBoard scalars of the same
    keys go to ``tb/`` from a background thread. Use from one thread.

    A write the disk refuses (full, quota, I/O error) never raises into training: one error
    names the file and the cause, step records and events stop being written (what is on
    disk stays valid), and ``skiplist.json`` is still attempted at every change (the skip
    list also lives in memory and in checkpoints). :attr:`stopped` then holds that message.

    Args:
        log_dir: the run directory; created with its parents if absent.
        meta: JSON-serialisable fields for ``meta.json`` (config, model summary, world size);
            sentinel/torch/python versions and the creation time are added.
        tensorboard: also write TensorBoard scalars under ``tb/``.
        tb_config: queue size and flush interval of the TensorBoard writer.

    Raises:
        ValueError: ``log_dir`` cannot be created or written, or ``meta`` is not a JSON dict.

    Example:
        >>> with RunWriter("logs/run1", meta={"config": {"lr": 1e-3}}) as w:  # doctest: +SKIP
        ...     w.write_step({"step": 0, "epoch": 0, "batch_idx": 0, "loss": 2.3, "lr": 1e-3})
        ...     w.write_event(make_event("spike", 0, metric="loss", value=2.3))
    """

    def __init__(self, log_dir: str | Path, meta: dict[str, Any] | None = None,
                 tensorboard: bool = True, *, tb_config: TensorBoardSinkConfig | None = None) -> None:
        self.path = Path(log_dir)
        if meta is not None and not isinstance(meta, dict):
            raise ValueError(f"meta must be a dict or None, got {type(meta).__name__}: "
                             "pass e.g. {'config': {...}}")
        ensure_run_dir(self.path)
        self._meta = merge_meta(self._existing_meta(), meta)
        self._write_meta(probe=True)
        self._closed = False
        self.stopped: str | None = None  # why recording stopped (the disk refused a write)
        self.lost = 0  # step records and events not written since then
        self._steps = StepSegmentWriter(self.path)
        self._events = EventLogWriter(self.path / EVENTS_FILE)
        self._tb = TensorBoardSink(self.path / TB_DIR, tb_config) if tensorboard else None
        # Forgotten close(): still drain TensorBoard and close the files at exit or collection.
        self._finalizer = weakref.finalize(self, _close_parts, self._steps, self._events, self._tb)

    @property
    def meta(self) -> dict[str, Any]:
        """A copy of what ``meta.json`` holds now."""
        return dict(self._meta)

    @property
    def tb_dropped(self) -> int:
        """Step records TensorBoard did not get (its queue was full); ``steps.*`` has them all."""
        return self._tb.dropped if self._tb is not None else 0

    def write_step(self, record: Mapping[str, Any]) -> None:
        """Append one step record (hot path: a few microseconds, one write syscall).

        Args:
            record: ``{"step": int, "epoch": int, "batch_idx": int, key: float, ...}``; only
                ``step`` is required, keys may differ between records, ``None`` = absent,
                NaN/Inf are kept.

        Raises:
            ValueError: no integer ``step``, a key that cannot be a column, a non-numeric value.

        Example:
            >>> w.write_step({"step": 7, "loss": float("nan"), "grad_norm/total": 3.2})  # doctest: +SKIP
        """
        if self._append(self._steps, record) and self._tb is not None:
            self._tb.put(record)

    def write_event(self, event: Mapping[str, Any]) -> None:
        """Append one event as a JSON line of ``events.jsonl``.

        Args:
            event: a dict from :func:`sentinel.events.make_event`.

        Example:
            >>> w.write_event(make_event(EventKind.ROLLBACK, 130, spike_step=120, restored_step=100,
            ...                          skipped_batches=[118, 119, 120]))  # doctest: +SKIP
        """
        self._check_open("write_event")
        self._append(self._events, event)

    def write_skiplist(self, entries: list[dict[str, Any]]) -> None:
        """Replace ``skiplist.json`` atomically with ``entries`` (the whole list, not a delta).

        Example:
            >>> w.write_skiplist([{"step": 120, "batch_idx": 120, "sample_indices": [480]}])  # doctest: +SKIP
        """
        self._check_open("write_skiplist")
        try:
            write_skiplist(self.path, entries)
        except OSError as ex:  # the previous file stays whole (atomic replace)
            log.error("sentinel: cannot update %s (%s): its %d entries are kept in memory and in "
                      "checkpoints; free disk space so that a restarted process finds them",
                      self.path / "skiplist.json", _reason(ex), len(entries))

    def update_meta(self, **fields: Any) -> None:
        """Merge ``fields`` into ``meta.json`` and rewrite it atomically.

        Example:
            >>> w.update_meta(world_size=2, model_summary={"params": 1_234_567})  # doctest: +SKIP
        """
        self._check_open("update_meta")
        previous = self._meta
        self._meta = {**self._meta, **fields}
        try:
            self._write_meta()
        except ValueError:
            self._meta = previous
            raise
        except OSError as ex:
            log.error("sentinel: cannot update %s (%s); training goes on", self.path / META_FILE, _reason(ex))

    def flush(self) -> None:
        """Make everything written so far durable: fsync steps and events, drain TensorBoard.

        Not needed for SIGKILL safety (records are already in the kernel); this guards
        against a machine crash and brings TensorBoard up to date. Idempotent.
        """
        if self._closed:
            return
        try:
            self._steps.sync()
            self._events.sync()
        except OSError as ex:
            self._stop(self.path, ex)
        if self._tb is not None:
            self._tb.flush()

    def close(self) -> None:
        """Drain and close TensorBoard, close the files; idempotent."""
        if self._closed:
            return
        if self._tb is not None:
            self._tb.close()
            if self._tb.dropped:
                self._meta["tb_dropped"] = self._meta.get("tb_dropped", 0) + self._tb.dropped
                try:
                    self._write_meta()
                except OSError as ex:
                    log.error("sentinel: cannot update %s (%s)", self.path / META_FILE, _reason(ex))
        self._closed = True
        self._finalizer()
        if self.lost:
            log.error("sentinel: %d step records and events were not written to %s after the disk "
                      "refused a write", self.lost, self.path)

    def _append(self, part: StepSegmentWriter | EventLogWriter, item: Mapping[str, Any]) -> bool:
        """``part.write(item)`` unless recording has stopped; a write the disk refuses stops it.
        True when the item reached the file."""
        if self.stopped is not None:
            self.lost += 1
            return False
        try:
            part.write(item)
        except OSError as ex:
            self._stop(part.path or self.path, ex)
            return False
        return True

    def _stop(self, path: Path, ex: OSError) -> None:
        self.stopped = (f"cannot write {path} ({_reason(ex)}): recording to {self.path} stops here; "
                        "training and the guard go on, and what is on disk stays readable. Free "
                        "disk space and resume from a checkpoint to record again")
        log.error("sentinel: %s", self.stopped)
        if self._tb is not None:  # one disk: TensorBoard would fail next, with its own message
            self._tb.close()
            self._tb = None

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise ValueError(f"{what} on a closed RunWriter for {self.path}: "
                             "open a new RunWriter on the run dir to append")

    def _existing_meta(self) -> dict[str, Any]:
        path = self.path / META_FILE
        if not path.exists():
            return {}
        try:
            existing = read_json(path)
        except ValueError as ex:
            log.warning("%s; it is replaced by a fresh meta.json", ex)
            return {}
        if not isinstance(existing, dict):
            log.warning("%s holds a %s, not an object; it is replaced by a fresh meta.json",
                        path, type(existing).__name__)
            return {}
        return existing

    def _write_meta(self, probe: bool = False) -> None:
        try:
            write_json_atomic(self.path / META_FILE, self._meta)
        except TypeError as ex:
            raise ValueError(f"meta is not JSON serialisable ({ex}): "
                             "pass numbers, strings, lists and dicts") from ex
        except OSError as ex:
            if not probe:
                raise
            # The first meta write doubles as the writability check of the run directory.
            raise ValueError(f"log_dir '{self.path}' is not writable ({ex.strerror}): "
                             "pass a directory you can write to") from ex


def ensure_run_dir(path: str | Path) -> Path:
    """Create a run directory (parents too) or say in one sentence why it cannot be used.

    Example:
        >>> ensure_run_dir("logs/run1")  # doctest: +SKIP
        PosixPath('logs/run1')
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"log_dir '{path}' is a file, not a directory: pass a directory path")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as ex:
        raise ValueError(f"log_dir '{path}' cannot be created ({ex.strerror or ex}): "
                         "pass a directory you can write to") from ex
    if not os.access(path, os.W_OK):
        raise ValueError(f"log_dir '{path}' is not writable: pass a directory you can write to")
    return path


def _reason(ex: OSError) -> str:
    return f"[Errno {ex.errno}] {ex.strerror}" if ex.strerror else str(ex)


def _close_parts(steps: StepSegmentWriter, events: EventLogWriter,
                 tb: TensorBoardSink | None) -> None:
    if tb is not None:
        tb.close()
    steps.close()
    events.close()
