"""TensorBoard scalars written off the training thread, through a bounded queue.

``SummaryWriter.add_scalar`` costs ~50-80 us per scalar on the calling thread. Here the
training thread only enqueues a copy of the step record; a background thread writes one
TensorBoard event per step holding all of that step's scalars (:mod:`sentinel.store.tb_events`,
with a C CRC: TensorBoard's pure-Python CRC held the GIL ~170 us per record, and the training
thread waited for it). When the queue is full the
record is dropped and counted rather than blocking training: ``steps.*`` on disk is the source
of truth, TensorBoard is a view."""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

log = logging.getLogger(__name__)

_STOP = object()
_SINK_THREAD = threading.local()  # .active on the sinks' own threads
_BATCH = 64  # step records per hand-over to the writer thread


@dataclass(frozen=True)
class TensorBoardSinkConfig:
    """Settings of the background TensorBoard writer.

    Attributes:
        queue_size: hand-overs (batches of up to 64 step records) held while the writer catches
            up (4096: far more backlog than a writer at ~20 us per record ever builds).
        flush_secs: how often the event file is flushed (2 s: TensorBoard lags the run by at
            most that, and a killed run loses at most that much of its TensorBoard view).
    """

    queue_size: int = 4096
    flush_secs: float = 2.0

    def __post_init__(self) -> None:
        if not isinstance(self.queue_size, int) or self.queue_size < 1:
            raise ValueError(f"tb queue_size={self.queue_size!r} must be a positive integer: "
                             "pass e.g. 4096")
        if not self.flush_secs > 0:
            raise ValueError(f"tb flush_secs={self.flush_secs!r} must be > 0: pass e.g. 2.0")


class TensorBoardSink:
    """Writes step records as TensorBoard scalars from a background thread.

    Args:
        log_dir: directory for the event files (created by the writer).
        config: queue and flush settings.

    Example:
        >>> sink = TensorBoardSink(Path("logs/run1/tb"))  # doctest: +SKIP
        >>> sink.put({"step": 0, "loss": 2.3})  # doctest: +SKIP
        >>> sink.close()  # doctest: +SKIP
    """

    def __init__(self, log_dir: Path, config: TensorBoardSinkConfig | None = None) -> None:
        self._config = config or TensorBoardSinkConfig()
        self._log_dir = log_dir
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=self._config.queue_size)
        # Two counters, each written by one thread only, so no lock is needed.
        self._pending: list[dict[str, Any]] = []  # records not yet handed to the writer thread
        self._handed_at = time.monotonic()
        self._dropped_full = 0  # training thread: queue was full
        self._dropped_failed = 0  # writer thread: writer could not write
        self._failed = False
        self._closed = False
        self._stop_when_drained = False  # closed where the stop item found the queue full
        self._thread = threading.Thread(target=self._run, name="sentinel-tensorboard", daemon=True)
        self._thread.start()

    def put(self, record: Mapping[str, Any]) -> None:
        """Enqueue a copy of ``record`` (``{"step": int, key: number, ...}``); never blocks.

        Records are handed to the writer thread in batches (every ``_BATCH`` records or half a
        flush interval): waking that thread for every step made the training thread wait for the
        GIL at every step.
        """
        self._pending.append(dict(record))
        now = time.monotonic()
        if len(self._pending) >= _BATCH or now - self._handed_at > self._config.flush_secs / 2:
            self._hand_over(now)

    def _hand_over(self, now: float) -> None:
        if not self._pending:
            return
        batch, self._pending, self._handed_at = self._pending, [], now
        try:
            self._queue.put_nowait(batch)
        except queue.Full:
            self._dropped_full += len(batch)

    @property
    def dropped(self) -> int:
        """Records not written to TensorBoard (queue full or writer failed)."""
        return self._dropped_full + self._dropped_failed

    def flush(self) -> None:
        """Block until every record enqueued so far is written and the event file flushed."""
        self._hand_over(time.monotonic())
        done = threading.Event()
        if self._send(done):
            while not done.wait(0.1) and self._thread.is_alive():
                pass

    def close(self) -> None:
        """Write what is queued, close the event file and join the thread; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._hand_over(time.monotonic())
        if getattr(_SINK_THREAD, "active", False):
            # A writer dropped without close() is finalised by whichever thread collects it: on a
            # sink's own thread (this one's, or another's that this one may be waiting for), it
            # only asks this sink to stop after its queued records, never waits.
            try:
                self._queue.put_nowait(_STOP)
            except queue.Full:
                self._stop_when_drained = True
            return
        self._send(_STOP)
        self._thread.join()
        if self.dropped:
            log.warning("TensorBoard view of %s is missing %d step record(s) (queue full or "
                        "writer failed); steps.* holds them all", self._log_dir, self.dropped)

    def _send(self, item: Any) -> bool:
        # Blocking put for control items, but never wait on a thread that has exited.
        while self._thread.is_alive():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        _SINK_THREAD.active = True
        writer = None
        last_flush = time.monotonic()
        try:
            from sentinel.store.tb_events import EventFile

            writer = EventFile(self._log_dir)
        except (ImportError, OSError) as ex:
            log.error("TensorBoard writer for %s could not start (%s); steps.* is unaffected",
                      self._log_dir, ex)
            self._failed = True
        while True:
            if self._stop_when_drained and self._queue.empty():
                break  # closed on a sink thread while the queue was full: no stop item came
            item = self._queue.get()
            if item is _STOP:
                break
            if isinstance(item, threading.Event):
                if writer is not None and not self._failed:
                    try:
                        writer.flush()
                    except OSError as ex:
                        self._fail(ex)
                item.set()
                continue
            if self._failed:
                self._dropped_failed += len(item)
                continue
            try:
                for record in item:
                    writer.write_scalars(int(record["step"]), {k: v for k, v in record.items()
                                                               if k != "step" and v is not None})
                if time.monotonic() - last_flush > self._config.flush_secs:
                    writer.flush()
                    last_flush = time.monotonic()
            except Exception as ex:  # noqa: BLE001 - a dead thread would hang close(); log and keep draining
                self._fail(ex)
                self._dropped_failed += len(item)
        if writer is not None:
            try:
                writer.close()
            except OSError as ex:
                if not self._failed:
                    log.error("TensorBoard writer for %s could not close cleanly: %s", self._log_dir, ex)

    def _fail(self, ex: Exception) -> None:
        # One line, no traceback: a full disk is the usual cause, and steps.* says the rest.
        log.error("TensorBoard writer for %s failed (%s: %s); further scalars are dropped, "
                  "steps.* is unaffected", self._log_dir, type(ex).__name__, ex)
        self._failed = True
