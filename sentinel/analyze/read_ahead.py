"""Start reading the runs named on the command line before pandas is imported.

``import pandas`` and the rules take ~0.4 s of a ``sentinel analyze`` start. Parsing the steps of
a long sentinel run takes about as long and does not hold the GIL (pyarrow); reading TensorBoard
records is mostly numpy, which lets go of it too. Started first, on a thread, the parse runs beside
the imports instead of after them. The loaders take what was parsed when they get there (a file
that changed since is read again: :mod:`sentinel.parse_ahead`), so the report is the same with
or without it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

_EVENT_FILE = "events.out.tfevents"  # the TensorBoard loader's pattern
_SWITCH_INTERVAL = 2e-4  # seconds, while a reader runs beside the imports


@contextmanager
def reading_ahead(paths: Iterable[object]) -> Iterator[None]:
    """Within this block, the runs among ``paths`` are being read on threads.

    Only a path that is itself one run is read ahead: a sentinel run directory, an event file,
    or a directory holding event files (not a directory of runs), and only when the process may
    run on more than one CPU. What the block did not take is forgotten when it ends (an analysis
    that stopped early keeps nothing).

    Example:
        >>> with reading_ahead(["logs/run1"]):  # doctest: +SKIP
        ...     from sentinel.analyze.analyzer import analyze  # pandas loads meanwhile
        ...     report = analyze("logs/run1")
    """
    cancels: list[Callable[[], None]] = []
    for path in paths if _cores() > 1 else ():  # on one core the thread would only take turns
        try:
            cancel = _start(Path(os.fspath(path))) if isinstance(path, (str, os.PathLike)) else None
        except (OSError, ValueError, TypeError):  # unreadable, a NUL in the name: the loader says so
            cancel = None
        if cancel is not None:
            cancels.append(cancel)
    # The import beside the threads is Python that holds the GIL; each numpy call of a reader
    # lets go of it and then waits for the import to hand it back, up to the switch interval
    # (5 ms by default): hundreds of such waits doubled the TensorBoard reader's time.
    interval = sys.getswitchinterval()
    if cancels:
        sys.setswitchinterval(min(interval, _SWITCH_INTERVAL))
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        for cancel in cancels:
            cancel()


def analyze_reading_ahead(*paths: object, **options: object):
    """:func:`sentinel.analyze.analyzer.analyze`, with the runs among ``paths`` read while the
    analyzer (pandas, the rules) is imported: what ``sentinel.analyze(...)`` calls.

    Example:
        >>> report = analyze_reading_ahead("logs/run1")  # doctest: +SKIP
    """
    with reading_ahead(paths):
        from sentinel.analyze.analyzer import analyze  # pandas loads here, not at import

        return analyze(*paths, **options)


def _cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def _start(path: Path) -> Callable[[], None] | None:
    """Start reading the run at ``path``; how to forget it, or None when nothing was started."""
    from sentinel.store.layout import list_segments

    if path.is_dir():
        if list_segments(path):  # a sentinel run: the loaders ask this one first
            from sentinel.store.steps_csv import cancel_read_ahead, read_ahead

            segments = read_ahead(path)
            return lambda: cancel_read_ahead(segments)
        files = sorted(p for p in path.iterdir() if _EVENT_FILE in p.name and p.is_file())
    elif _EVENT_FILE in path.name and path.is_file():
        files = [path]
    else:
        return None
    if not files:
        return None
    from sentinel.analyze.loaders.tfrecord import cancel_read_ahead as cancel_events, read_ahead as read_events

    read_events(files)
    return lambda: cancel_events(files)
