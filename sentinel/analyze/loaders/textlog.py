"""Reading log files as text, tolerantly: what the text loaders share.

Logs people actually have are stdout captures: mixed encodings, a byte-order mark, carriage
returns, and a last line cut off when the job was killed. These helpers turn a file into clean
lines (saying whether the last one was finished) and per-step records into a steps frame.
"""

from __future__ import annotations

import codecs
import json
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics

# Sniffing reads at most this much: logs often start with pages of arguments or source code
# (Megatron prints every argument; modded-nanogpt prints its whole training script first).
SNIFF_BYTES = 1 << 20

# Column order of a steps frame: the metrics every rule reads first, then the rest by name.
_FIRST_COLUMNS = (metrics.LOSS, metrics.LR, metrics.GRAD_NORM_TOTAL, metrics.LOSS_SCALE)

# Names that say nothing about the run; the parent directory names it better.
# Ray Tune / Ray Train name every trial's files result.json and progress.csv: the trial is the folder.
_GENERIC_STEMS = frozenset({"metrics", "main", "train", "log", "logs", "stdout", "output", "out", "result",
                            "results", "progress"})


# The quoting a paste into an issue or an e-mail adds before each line ("> ", "> > ").
QUOTE_MARKS = re.compile(r"^[ \t]*(?:>[ \t]?)+", re.MULTILINE)


# What Windows PowerShell's ">" and Out-File write: UTF-16 with a byte-order mark.
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def text_encoding(path: str | Path) -> str:
    """The encoding to read a text file with: ``utf-16`` where it starts with a UTF-16 byte-order
    mark (Windows PowerShell's ``python train.py > train.log``), else ``utf-8-sig``.

    Example:
        >>> text_encoding("/nonexistent")
        'utf-8-sig'
    """
    try:
        with open(path, "rb") as f:
            start = f.read(2)
    except OSError:
        return "utf-8-sig"
    return "utf-16" if start in _UTF16_BOMS else "utf-8-sig"


# A binary file shows a NUL among its first bytes (a record length, a magic number: TensorBoard
# event files, checkpoints, archives, executables); a text log can hold NULs further on, where a
# machine crashed while the file grew (the file system's zero padding) or a stray write landed.
_BINARY_PROBE = 64
_NULS = re.compile(rb"\x00+")


def decode(raw: bytes) -> str:
    r"""Text of a file's bytes: UTF-16 after a UTF-16 byte-order mark, else UTF-8 (its BOM
    dropped); undecodable bytes replaced, and each run of NUL bytes (a crash's zero padding)
    a line end, so the record written after it starts a line of its own.

    Example:
        >>> decode("step 1".encode("utf-16")), decode(b"\xef\xbb\xbfstep 1"), decode(b"step 1\x00\x00step 2")
        ('step 1', 'step 1', 'step 1\nstep 2')
    """
    if raw[:2] in _UTF16_BOMS:
        return raw.decode("utf-16", errors="replace")
    if b"\x00" in raw:
        raw = _NULS.sub(b"\n", raw)
    return raw.decode("utf-8-sig", errors="replace")


# The heads read while one file is claimed and read (see heads_shared); None outside it.
_HEADS: ContextVar[dict | None] = ContextVar("sentinel_heads", default=None)


@contextmanager
def heads_shared() -> Iterator[None]:
    """Inside it, :func:`read_head` and :func:`read_head_lines` read and decode each file's head
    once: the sniffs of twenty loaders ask one file for its first megabyte or 64 KB, each reading,
    decoding and splitting it again (~3 ms a file). Per thread (a reading-ahead thread has its
    own); a nested one shares the outer one's heads; nothing is kept after it.

    Example:
        >>> with heads_shared():
        ...     read_head("/nonexistent") is None
        True
    """
    if _HEADS.get() is not None:
        yield
        return
    token = _HEADS.set({})
    try:
        yield
    finally:
        _HEADS.reset(token)


def read_head(path: str | Path, limit: int = SNIFF_BYTES) -> str | None:
    """Return the start of a regular text file, or None when it is not one.

    Args:
        path: the file to look at.
        limit: the most bytes read.

    Returns:
        The decoded head (UTF-8, or UTF-16 after its byte-order mark; undecodable bytes
        replaced), or None for a directory, an unreadable file or a binary file (a NUL byte
        among its first 64, e.g. a TensorBoard event file's record length).

    Example:
        >>> read_head("/nonexistent") is None
        True
    """
    memo = _HEADS.get()
    if memo is None:
        return _read_head(Path(path), limit)
    key = (str(path), limit)
    if key not in memo:
        memo[key] = _read_head(Path(path), limit)
    return memo[key]


def _read_head(p: Path, limit: int) -> str | None:
    if not p.is_file():
        return None
    try:
        with p.open("rb") as f:
            raw = f.read(limit)
    except OSError:
        return None
    if raw[:2] in _UTF16_BOMS:
        return decode(raw[: len(raw) & ~1])  # whole code units: a cut pair is one replaced character
    if b"\x00" in raw[:_BINARY_PROBE] and not _text_after_nuls(raw):
        return None
    return decode(raw)


def read_tail(path: str | Path, limit: int = SNIFF_BYTES) -> str | None:
    """The end of a text file longer than ``limit`` bytes, from the first line that starts in its last
    ``limit`` (the lines a training printed last: a log whose first megabyte is launches that crashed and
    their models' printouts); None for a file no longer than that, or one :func:`read_head` reads as no text.

    Example:
        >>> read_tail("/nonexistent") is None
        True
    """
    if read_head(path) is None:
        return None
    try:
        with Path(path).open("rb") as f:
            size = f.seek(0, 2)
            if size <= limit:
                return None
            f.seek(size - limit)
            raw = f.read(limit)
    except OSError:
        return None
    return decode(raw[raw.find(b"\n") + 1:])


def _text_after_nuls(raw: bytes) -> bool:
    """Whether ``raw`` is a run of NUL bytes, then text: a log truncated while its writer kept its
    offset (``logrotate``'s copytruncate, a ``>`` redirect emptied by hand) grows again past a hole
    the file system fills with zeros."""
    rest = raw.lstrip(b"\x00")
    if len(rest) == len(raw) or not rest:
        return False
    probe = rest[:_BINARY_PROBE]
    return all(32 <= b < 127 or b in (9, 10, 13) or b >= 0x80 for b in probe)


def head_matches(path: str | Path, pattern: re.Pattern, limit: int, max_bytes: int) -> bool:
    """Whether a text file starts with what ``pattern`` matches (``re.match`` on its first
    ``limit`` bytes) and holds at most ``max_bytes``: the sniff of a format read whole.

    Example:
        >>> head_matches("/nonexistent.json", re.compile(r"\\{"), 64, 1 << 20)
        False
    """
    head = read_head(path, limit=limit)
    if not head or not pattern.match(head):
        return False
    try:
        return Path(path).stat().st_size <= max_bytes
    except OSError:
        return False


def read_head_lines(path: str | Path, limit: int = SNIFF_BYTES) -> list[str]:
    """The non-blank lines of :func:`read_head` (none for a file that is not text). Universal
    line ends: a bare ``\\r`` (a progress bar's redraw) ends a line too, as ``csv`` insists.

    Example:
        >>> read_head_lines("/nonexistent")
        []
    """
    memo = _HEADS.get()
    key = ("lines", str(path), limit)
    if memo is not None and key in memo:
        return list(memo[key])
    head = read_head(path, limit)
    lines = [] if head is None else [line for line in head.splitlines() if line.strip()]
    if memo is not None:
        memo[key] = lines
        return list(lines)  # a caller's own list: the memo's stays as read
    return lines


# A file unchanged for this long is not being written: its last line is whole even without a
# line end (a log pasted into a file rarely ends with one, and its last line is often the NaN).
SETTLED_SECONDS = 60.0


# A last line ending in one of these may be a number cut while it was written ("2.3" of "2.3417",
# "2.34e" of "2.34e-05": read as 2.34, a spike).
_CUT_ENDS = frozenset("0123456789.+-eE")


def last_line_whole(text: str) -> bool:
    """Whether the last line of ``text`` (after its last line end) is whole although it has no
    line end: it ends in something no number is cut to (a unit, a bracket, a space, ``nan``,
    ``inf``). A log pasted into a file just now ends so more often than not, its last line the
    NaN; a line that ends in a digit, a point, a sign or an exponent's ``e`` may be one being
    written.

    Example:
        >>> last_line_whole("step 5 loss nan"), last_line_whole("iter 5: loss 2.2, time 9ms")
        (True, True)
        >>> last_line_whole("step 5 loss 2.3"), last_line_whole("step 5 loss 2.3e")
        (False, False)
    """
    tail = text[max(text.rfind("\n"), text.rfind("\r")) + 1:]
    return not tail or tail[-1] not in _CUT_ENDS


def settled(path: str | Path) -> bool:
    """Whether nothing has written to ``path`` for :data:`SETTLED_SECONDS`: a last line without a
    line end is then the end of the log, not a line being written (whose number may be cut,
    ``2.3`` of ``2.3417``).

    Example:
        >>> settled("/nonexistent.log")
        False
    """
    try:
        return time.time() - Path(path).stat().st_mtime > SETTLED_SECONDS
    except OSError:
        return False


def read_text(path: str | Path) -> str:
    """Read a whole text file, tolerantly (a byte-order mark dropped, bad bytes replaced). A file
    that does not end with a line end gets one where its last line is whole
    (:func:`last_line_whole`) or the file is settled (:func:`settled`): its last line is then read
    like the others; else it is left to the reader to skip (it may be a line being written).

    Example:
        >>> import tempfile, os
        >>> fd, p = tempfile.mkstemp(); _ = os.write(fd, b"\\xef\\xbb\\xbfloss nan\\xff"); os.close(fd)
        >>> read_text(p)
        'loss nan\ufffd\\n'
    """
    text = decode(Path(path).read_bytes())
    return text + "\n" if text and not text.endswith("\n") and (last_line_whole(text) or settled(path)) else text


def read_json(path: str | Path, what: str):
    """The JSON data of a file read whole (:func:`read_text`; Python's ``json`` reads ``NaN``).

    Raises:
        ValueError: the text is no JSON: ``"<path>: not <what> (<why>)"``.

    Example:
        >>> read_json("/nonexistent.json", "a metrics file")  # doctest: +SKIP
    """
    try:
        return json.loads(read_text(path))
    except (ValueError, RecursionError) as err:
        raise ValueError(f"{path}: not {what} ({err})") from None


def read_lines(path: str | Path) -> tuple[list[str], bool]:
    """Read a text file as lines without their line ends.

    Only ``\\n`` (with an optional ``\\r`` before it) ends a line, so unicode separators inside
    a line do not split it.

    Args:
        path: the file.

    Returns:
        ``(lines, last_complete)``: ``last_complete`` is False when the file does not end with a
        line end, i.e. its last line may have been cut off while it was being written.

    Example:
        >>> import tempfile, os
        >>> fd, p = tempfile.mkstemp(); _ = os.write(fd, b"a\\r\\nb"); os.close(fd)
        >>> read_lines(p)
        (['a', 'b'], False)
    """
    text = decode(Path(path).read_bytes())
    if not text:
        return [], True
    last_complete = text.endswith("\n")
    lines = text.split("\n")
    if last_complete:
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines], last_complete


# How the runs of a file that holds several trainings came apart, as its warning says it.
APPENDED = "that each start from their first step (runs appended to one file)"


def trainings_note(path: str | Path, count: int, how: str = APPENDED, name: str | None = None) -> str:
    """The warning of a file (or folder) read as ``count`` trainings, each a run named ``<name>#k``
    (``name``: :func:`run_name` of ``path`` unless given).

    Example:
        >>> trainings_note("logs/train.log", 2)
        'train.log holds 2 trainings that each start from their first step (runs appended to one file): each is read as a run of its own, logs#1 to #2'
    """
    name = run_name(path) if name is None else name
    return f"{Path(path).name} holds {count} trainings {how}: each is read as a run of its own, {name}#1 to #{count}"


def run_name(path: str | Path) -> str:
    """Name a run after its file, or after its directory when the file name is generic.

    Example:
        >>> run_name("runs/lr_3e-4/metrics.jsonl"), run_name("logs/tr11.verbatim.txt")
        ('lr_3e-4', 'tr11.verbatim')
    """
    p = Path(path)
    stem = p.stem
    if stem.lower() in _GENERIC_STEMS and p.parent.name:
        return p.parent.name
    return stem


def rows_to_steps(rows: Mapping[int, Mapping[str, float]]) -> pd.DataFrame:
    """Build a steps frame (int index ``step``, float metric columns) from per-step records.

    Example:
        >>> rows_to_steps({2: {"lr": 0.1, "loss": 3.0}, 1: {"loss": 4.0}}).columns.tolist()
        ['loss', 'lr']
    """
    if not rows:
        return pd.DataFrame(index=pd.Index([], dtype="int64", name=metrics.STEP), dtype="float64")
    frame = pd.DataFrame.from_dict(dict(rows), orient="index", dtype="float64")
    frame.index = frame.index.astype("int64")
    frame.index.name = metrics.STEP
    return order_columns(frame.sort_index())


def as_float64(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every column float64: itself where they are already (no copy, under pandas 2
    as under 3, whose ``astype(copy=False)`` is going away).

    Example:
        >>> f = pd.DataFrame({"loss": [2.0]}); as_float64(f) is f
        True
    """
    return frame if all(dtype == np.float64 for dtype in frame.dtypes) else frame.astype("float64")


def order_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """Put ``loss``, ``lr``, ``grad_norm/total``, ``loss_scale`` first, the rest by name.

    Example:
        >>> order_columns(pd.DataFrame(columns=["z", "lr", "loss"])).columns.tolist()
        ['loss', 'lr', 'z']
    """
    first = [c for c in _FIRST_COLUMNS if c in frame.columns]
    rest = sorted(c for c in frame.columns if c not in first)
    if list(frame.columns) == first + rest:
        return frame  # already in order: no copy
    return frame[first + rest]


def events_frame(events: list[dict]) -> pd.DataFrame:
    """Build an events frame sorted by step; an empty one still has ``step`` and ``kind``.

    Example:
        >>> events_frame([]).columns.tolist()
        ['step', 'kind']
    """
    if not events:
        return pd.DataFrame(columns=[metrics.STEP, "kind"])
    return pd.DataFrame(events).sort_values(metrics.STEP, kind="stable").reset_index(drop=True)
