"""Step records on disk: segmented wide CSV, one write syscall per record.

Format: ``steps.NNNNN.csv`` files, read in ascending ``NNNNN``. Each segment starts with a
header ``step,<key>,<key>,...`` and holds one line per record; a field is empty where the
record had no value for that key. A writer starts a new segment when it is opened (a resumed
run never touches the old files) and whenever a record brings a key the header lacks (new
modules, sparse metrics that appear at step 50). The key set of a run is small and grows a
handful of times, so a run has a handful of segments.

Why this format (``benchmarks/store_formats.py``, 1,000,000 steps with loss, lr,
grad_norm/total, loss_scale every step and 12 per-module grad norms + 12 attention entropies
every 50 steps; 2-core CPU shared with other work, load average ~5, so idle figures are lower):

    format                      write us/step   load 1M steps   size
    segmented wide CSV (this)        13.4          0.78 s *      115 MB
    long CSV (step,key,value)         8.5          7.3 s         193 MB
    JSONL                            20.6         13.2 s         191 MB
    Arrow IPC, batch per step       371           56 s (est.)    2 GB (est., 20k measured)
    * best of two loads; 0.84 s in a separate run, 4.6 s in one run under heavier contention.

Wide CSV is the only candidate that loads 1M steps well under 2 s (pyarrow's multithreaded
CSV parser, explicit float64 column types, no pivot); its write cost is a ``repr`` per value
present plus one ``os.write`` (~1.8 us), so write-through is cheap and no buffer is kept.
Long CSV writes a little faster but needs a pivot on load; JSONL parses one object per line in
Python; Arrow IPC pays a full batch (schema, metadata) per one-row write.

Crash safety: each record is one ``os.write`` of one complete line on an ``O_APPEND`` file
descriptor, so once :meth:`StepSegmentWriter.write` returns the record is in the kernel and
survives SIGKILL of the process (no Python-side buffer to lose). A record torn by a crash of
the machine shows up as a last line without its newline; the reader drops it and says so.
Floats are written with ``repr`` (shortest exact round trip) and ``nan``/``inf``/``-inf``
parse back as NaN/Inf.
"""

from __future__ import annotations

import io
import logging
import operator
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from sentinel.metrics import BATCH_IDX, EPOCH, STEP
from sentinel.parse_ahead import ParseAhead
from sentinel.store.layout import list_segments, segment_name

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

# Characters a key cannot hold: they would break the CSV header.
_FORBIDDEN_KEY_CHARS = frozenset(',"\n\r')
# Bookkeeping columns first, then metrics in the order they first appeared.
_LEADING_COLUMNS = (EPOCH, BATCH_IDX)
# Parse blocks of 16 MiB, not pyarrow's 1 MiB: a 1M-step segment (80 MB) becomes 5 chunks per
# column instead of 80, still enough blocks for the parser's threads, and the conversion to
# pandas has fewer pieces to join (`sentinel analyze` of 1M steps: ~0.3 s less CPU, 200 MiB
# less peak RSS; benchmarks/analyze.py).
_READ_OPTIONS = pa_csv.ReadOptions(block_size=16 << 20)


class StepSegmentWriter:
    """Appends step records to ``steps.NNNNN.csv`` segments of one run directory.

    Args:
        run_dir: an existing, writable run directory.

    Example:
        >>> w = StepSegmentWriter(Path("logs/run1"))  # doctest: +SKIP
        >>> w.write({"step": 0, "loss": 2.3, "lr": 1e-3})  # doctest: +SKIP
        >>> w.close()  # doctest: +SKIP
    """

    def __init__(self, run_dir: Path) -> None:
        self._run_dir = run_dir
        existing = list_segments(run_dir)
        self._next_index = existing[-1][0] + 1 if existing else 0
        self._fd: int | None = None
        self.path: Path | None = None  # the segment being written
        self._columns: list[str] = []  # header after "step"
        self._pos: dict[str, int] = {}  # column -> its field in a row
        self._blank: list[str] = []  # a row with every field empty
        self._known: set[str] = {STEP}
        self._header: str | None = None  # pending header of a fresh segment
        self._closed = False

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record; it reaches the OS before this returns.

        Args:
            record: ``{"step": int, key: number, ...}``; ``None`` values count as absent.

        Raises:
            ValueError: no integer ``step``, a key that cannot be a CSV column, a value that
                is not a number, or the writer is closed.
        """
        if self._closed:
            raise ValueError("write_step on a closed RunWriter: open a new RunWriter on the run dir")
        step = record.get(STEP)
        if type(step) is not int:
            step = _as_step(step)
        # issuperset over the dict's keys: ~0.3 us, the only per-record key check.
        if not self._known.issuperset(record):
            self._start_segment(record)
        # The record's own keys into a row of empty fields: a step that records a few metrics
        # under a header of a thousand (per-module norms of a wide model) costs its few fields,
        # not a pass over the header. Floats take the repr fast path.
        fields = self._blank.copy()
        pos = self._pos
        for k, v in record.items():
            if k != STEP:
                fields[pos[k]] = repr(v) if type(v) is float else _format_value(k, v)
        line = f"{step},{','.join(fields)}\n"
        if self._header is not None:
            # A fresh segment's header goes out in the same syscall as its first record.
            line, self._header = self._header + line, None
        _write_all(self._fd, line.encode())

    def sync(self) -> None:
        """fsync the open segment (durability across a machine crash, not only a process kill)."""
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """Close the open segment; idempotent."""
        self._closed = True
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _start_segment(self, record: Mapping[str, Any]) -> None:
        new_keys = [k for k in record if k not in self._known]
        for key in new_keys:
            if not isinstance(key, str) or not key or _FORBIDDEN_KEY_CHARS.intersection(key):
                raise ValueError(
                    f"step record key {key!r} cannot be a column name: use a non-empty string "
                    "without commas, quotes or newlines (e.g. 'grad_norm/blocks.0.attn')")
        self._columns.extend(new_keys)
        self._known.update(new_keys)
        self._pos = {key: i for i, key in enumerate(self._columns)}
        self._blank = [""] * len(self._columns)
        if self._fd is not None:
            os.close(self._fd)
        path = self.path = self._run_dir / segment_name(self._next_index)
        self._next_index += 1
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._header = ",".join([STEP, *self._columns]) + "\n"
        log.debug("steps segment %s started with %d columns", path.name, len(self._columns))


def _as_step(step: Any) -> int:
    if step is None or isinstance(step, bool):
        raise ValueError(f"step record needs an integer 'step', got {step!r}: "
                         "pass {'step': global_step, ...}")
    try:
        return operator.index(step)
    except TypeError:
        raise ValueError(f"step record 'step' must be an integer, got {step!r} "
                         f"({type(step).__name__}): pass int(global_step)") from None


def _format_value(key: str, value: Any) -> str:
    if value is None:
        return ""
    if type(value) is int:  # epoch, batch_idx
        return str(value)
    if isinstance(value, (int, float)):  # bool, float subclasses
        return repr(float(value))
    try:
        return repr(float(value))  # numpy scalars, 0-d tensors
    except (TypeError, ValueError):
        raise ValueError(f"step record value for {key!r} is {value!r} ({type(value).__name__}): "
                         "pass a number (read tensors to the host once per step)") from None


def _write_all(fd: int, data: bytes) -> None:
    # A regular file only takes a short write when the disk is full; finish or raise OSError.
    while data:
        written = os.write(fd, data)
        data = data[written:]


def read_steps(run_dir: Path) -> tuple[pd.DataFrame, list[str]]:
    """Read every steps segment of ``run_dir`` into one DataFrame.

    Rows are indexed by int ``step``, sorted, one column per key (float64, NaN where a record
    had no value). When the steps go back (a process resumed from an earlier checkpoint), the
    later history replaces the earlier one from that step on; ``steps.attrs["restarts"]`` lists
    those steps. A truncated last line, a damaged row or a segment that cannot be read (not UTF-8, no
    permission, not a regular file) is skipped and reported by name; the others are read.

    Args:
        run_dir: a run directory.

    Returns:
        ``(steps, warnings)``.

    Example:
        >>> steps, warnings = read_steps(Path("logs/run1"))  # doctest: +SKIP
        >>> steps["loss"].iloc[-1]  # doctest: +SKIP
        0.42
    """
    # Imported here: the writer (a training process) and the parse started ahead of time by
    # `sentinel analyze` need neither.
    import pandas as pd

    from sentinel.store.history import latest_history

    warnings: list[str] = []
    tables = []
    for _, path in list_segments(run_dir):
        parsed = _AHEAD.take(path) or _ParsedSegment.read(path)  # parsed ahead and unchanged, or now
        warnings += parsed.warnings
        if parsed.table is not None and parsed.table.num_rows:
            tables.append(parsed.table)
        del parsed
    if not tables:
        return pd.DataFrame(index=pd.Index([], dtype="int64", name=STEP)), warnings
    table = pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]
    del tables  # the table is the only owner of the parsed buffers, so they can be freed below
    # split_blocks: one array per column, no copy into a consolidated 2-D block (~0.1-0.6 s
    # saved at 1M rows x 29 columns); self_destruct frees Arrow buffers as they are converted.
    steps = table.to_pandas(split_blocks=True, self_destruct=True).set_index(STEP)
    del table
    # Arrow's allocator keeps the freed parse buffers for reuse that never comes (the analyzer
    # allocates through numpy): hand them back. 1M steps: peak RSS of `sentinel analyze`
    # 910 -> 610 MiB, and less system time, since fresh pages are what costs on a small VM.
    pa.default_memory_pool().release_unused()
    # A resumed process records again from its checkpoint's step: from there on its history
    # replaces the earlier process's (kept rows are then increasing; restarts noted in attrs).
    keep, restarts = latest_history(steps.index.to_numpy())
    if restarts:
        steps = steps[keep]
    steps.attrs["restarts"] = restarts
    leading = [c for c in _LEADING_COLUMNS if c in steps.columns]
    if leading and list(steps.columns[: len(leading)]) != leading:
        steps = steps[leading + [c for c in steps.columns if c not in leading]]
    return steps, warnings


@dataclass(slots=True)
class _ParsedSegment:
    """One segment parsed: its table (None when skipped) and what was said about it."""

    table: pa.Table | None
    warnings: list[str]

    @classmethod
    def read(cls, path: Path) -> _ParsedSegment:
        """Parse one segment; one that cannot be read is skipped with a warning naming it."""
        warnings: list[str] = []
        try:
            table = _read_segment(path, warnings)
        except UnicodeDecodeError:
            warnings.append(f"{path.name}: header is not UTF-8 text; segment skipped")
            table = None
        except OSError as ex:  # no read permission, an I/O error (list_segments lists regular files only)
            warnings.append(f"{path.name}: cannot read it ({ex.strerror or ex}); segment skipped")
            table = None
        return cls(table, warnings)


# Segments parsed on a thread before `read_steps` asks for them: `sentinel analyze` starts the
# parse (pyarrow, without the GIL) before it imports pandas, so the two run side by side.
_AHEAD = ParseAhead(_ParsedSegment.read)


def read_ahead(run_dir: str | Path) -> list[Path]:
    """Start parsing the steps segments of ``run_dir`` on a thread, for a later :func:`read_steps`.

    ``read_steps`` takes each parsed segment once and parses again one that changed since (a
    run still being written), so its result is the same with or without this. Pass what this
    returns to :func:`cancel_read_ahead` when ``read_steps`` may not come, so nothing is kept.

    Returns:
        The segments being parsed (none: ``run_dir`` is no directory holding segments).

    Example:
        >>> read_ahead("/nonexistent")
        []
    """
    try:
        segments = [path for _, path in list_segments(Path(run_dir))]
    except (OSError, ValueError):  # not a directory, unreadable, a NUL in the name
        return []
    _AHEAD.start(segments)
    return segments


def cancel_read_ahead(segments: list[Path]) -> None:
    """Forget the parses of ``segments`` (from :func:`read_ahead`) that :func:`read_steps` did not take."""
    _AHEAD.cancel(segments)


def _read_segment(path: Path, warnings: list[str]) -> pa.Table | None:
    with open(path, "rb") as f:
        header = f.readline()
        if not header:
            return None  # created, killed before its first write: holds no record
        if not header.endswith(b"\n"):
            warnings.append(f"{path.name}: header line is truncated; segment skipped")
            return None
        columns = header.decode("utf-8").rstrip("\r\n").split(",")
        if columns[0] != STEP:
            warnings.append(f"{path.name}: first column is {columns[0]!r}, not 'step'; segment skipped")
            return None
        f.seek(0, io.SEEK_END)
        size = f.tell()
        f.seek(size - 1)
        source: Any = path
        if f.read(1) != b"\n":
            f.seek(0)
            data = f.read()
            keep = data.rfind(b"\n") + 1
            warnings.append(f"{path.name}: dropped a truncated last line ({len(data) - keep} bytes)")
            source = io.BytesIO(data[:keep])
    types = {c: pa.float64() for c in columns}
    types[STEP] = pa.int64()
    convert = pa_csv.ConvertOptions(column_types=types)
    try:
        return pa_csv.read_csv(_reopen(source), read_options=_READ_OPTIONS, convert_options=convert)
    except pa.ArrowInvalid as ex:
        first_error = ex
    # Slow path, only for a damaged file (a flipped byte, a line written over): the rows that do
    # not parse are skipped and counted, the rest is read.
    table, skipped = _read_damaged(source, columns, types)
    if table is None:
        warnings.append(f"{path.name}: unreadable ({first_error}); segment skipped")
        return None
    warnings.append(f"{path.name}: skipped {skipped} malformed line(s)")
    return table


# A value the writer writes (repr of a float, an int, nan / inf / -inf); and the cells pyarrow's
# CSV reader takes as null by default.
_VALUE = r"^[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf|infinity))$"
_NULL_VALUES = list(pa_csv.ConvertOptions().null_values)
_INTEGER = r"^[-+]?\d+$"


def _read_damaged(source: Any, columns: list[str], types: dict[str, pa.DataType]) -> tuple[pa.Table | None, int]:
    """A damaged segment's rows that hold the header's number of fields and a number (or
    nothing) in each, as the fast path would read them; and how many rows were skipped. Bytes
    that are not UTF-8 become U+FFFD first, so the row that holds them is skipped (pyarrow hands
    a bad row to the handler as text: a byte it cannot decode raised inside its callback)."""
    data = source.getvalue() if isinstance(source, io.BytesIO) else Path(source).read_bytes()
    data = data.decode("utf-8", errors="replace").encode("utf-8")
    wrong_width = 0

    def skip_row(row: Any) -> str:
        nonlocal wrong_width
        wrong_width += 1
        return "skip"

    try:
        text = pa_csv.read_csv(io.BytesIO(data), read_options=_READ_OPTIONS,
                               convert_options=pa_csv.ConvertOptions(column_types={c: pa.string() for c in columns}),
                               parse_options=pa_csv.ParseOptions(invalid_row_handler=skip_row))
    except pa.ArrowInvalid:
        return None, 0
    nulls = pa.array(_NULL_VALUES, pa.string())  # what the fast path reads as null ("", "nan")
    good = pa.array([True] * text.num_rows, pa.bool_())
    for name in columns:
        cells = text.column(name)
        fits = pc.match_substring_regex(cells, _INTEGER) if name == STEP else \
            pc.or_(pc.is_in(cells, value_set=nulls), pc.match_substring_regex(cells, _VALUE))
        good = pc.and_(good, pc.fill_null(fits, False))
    kept = text.filter(good)
    try:
        cells = {name: kept.column(name) for name in columns}
        table = pa.table({name: pc.cast(pc.if_else(pc.is_in(cells[name], value_set=nulls), None, cells[name]), types[name])
                          for name in columns})
    except pa.ArrowInvalid:  # a value the pattern let through and pyarrow does not read: none known
        return None, 0
    return table, wrong_width + text.num_rows - kept.num_rows


def _reopen(source: Any) -> Any:
    if isinstance(source, io.BytesIO):
        source.seek(0)
    return source
