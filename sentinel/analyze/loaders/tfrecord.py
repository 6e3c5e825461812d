"""TensorBoard event files read in bulk: the scalars of a million events without a million
rounds of Python.

An event file is a TFRecord stream: ``length`` (8 bytes), the masked CRC32C of the length, the
payload (an ``Event`` protobuf), the masked CRC32C of the payload. Writers of scalars (torch's
``SummaryWriter``, Lightning, sentinel's own mirror) write events that differ only in their
numbers: ``wall_time``, ``step`` and one ``simple_value`` per tag, with the same tags in the same
order. The file is read 8 MB at a time into one buffer (its bytes are never all in memory);
in each segment, after a pass that follows the record lengths (in Python until they show a
period, then predicted and checked in bulk):

1. records are grouped by length, each group matched against the layouts met so far and then
   against the layout of its first record (the length's checksum, one per length, and the
   payload bytes that are not a number must be equal), and the steps (varints) and values
   (float32) of the whole group are read as numpy columns;
2. the records no layout covers have their length checksums compared (per distinct length);
3. the payload checksums of a layout's records are checked in one CRC32C pass over their rows
   (CRC32C without its initial and final values is linear: see :func:`_checksums_hold`), ~0.01
   us a record instead of a C call each, ~0.25 us; a pass that fails has a damaged record in it,
   and its records are then checked one by one.

Records that match no layout (the file-version header, TF2 tensor summaries, histograms, a
layout seen only a few times) have their payload checksums computed one by one (a C call each)
and are parsed one by one with TensorBoard's ``Event`` protobuf. Damage is handled as a
record-by-record reader would: reading stops at a truncated record, a length that fails its
checksum, or a payload that does not parse; a payload that fails its checksum is dropped and
counted.

Example:
    >>> scalars = read_scalars(Path("events.out.tfevents.1"), [])  # doctest: +SKIP
    >>> steps, values = scalars["train/loss"]  # doctest: +SKIP
"""

from __future__ import annotations

import os
import struct
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import google_crc32c
import numpy as np

from sentinel.parse_ahead import ParseAhead
from sentinel.tfrecord_crc import MASK_DELTA, masked_crc32c

_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_MAX_RECORD = 64 << 20  # no scalar event comes near this; a larger length is a damaged header
_DT_FLOAT, _DT_DOUBLE = 1, 2
# A group of records of one layout smaller than this is parsed record by record.
_MIN_GROUP = 16
# Layouts tried per record length (equal lengths, different tags) before the rest goes slow.
_MAX_LAYOUTS = 8
# Rows gathered at a time (bounded copies of the payload bytes).
_CHUNK_BYTES = 8 << 20
# Values are ordered by (record, position in the record): record << _SLOT_BITS | position.
_SLOT_BITS = 24


def read_scalars(file: Path, warnings: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """All scalar values of one event file, by tag, in file order: ``(steps int64, values float64)``.

    A record whose payload fails its CRC is dropped (counted in one warning). Reading stops at
    a truncated record, a length that fails its CRC or a payload that does not parse; what came
    before is kept and a warning names the file and the offset. A file read ahead
    (:func:`read_ahead`) and unchanged since is not read again.

    Example:
        >>> scalars = read_scalars(Path("events.out.tfevents.1"), [])  # doctest: +SKIP
        >>> scalars["train/loss"][1][:2]  # doctest: +SKIP
        array([2.31, 2.29])
    """
    ahead = _AHEAD.take(file)
    if ahead is not None:
        scalars, said = ahead
        warnings += said
        return scalars
    return _read_scalars(file, warnings)


def read_ahead(files: list[Path]) -> None:
    """Start reading ``files`` on a thread, for later :func:`read_scalars` calls (``sentinel
    analyze`` starts it before it imports pandas: most of the reading is numpy without the GIL).
    Pass the same files to :func:`cancel_read_ahead` when they may not be asked for.

    Example:
        >>> read_ahead([Path("/nonexistent")])
        >>> cancel_read_ahead([Path("/nonexistent")])  # not asked for after all: nothing kept
    """
    _AHEAD.start(files)


def cancel_read_ahead(files: list[Path]) -> None:
    """Forget what :func:`read_ahead` read of ``files`` and :func:`read_scalars` did not take."""
    _AHEAD.cancel(files)


def _read_ahead_one(file: Path) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], list[str]]:
    warnings: list[str] = []
    return _read_scalars(file, warnings), warnings


_AHEAD = ParseAhead(_read_ahead_one)


def _read_scalars(file: Path, warnings: list[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    # The file is read a segment at a time into one buffer (a record cut by a segment's end is
    # carried to the next): the bytes held stay bounded by the segment whatever the file's size,
    # and the buffer's pages are touched once, not once per megabyte of the file (a page touched
    # for the first time was ~30% of the reading time of a 113 MB file).
    state = _Reading()
    with open(file, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        buffer = bytearray(max(16, min(size, _SEGMENT_BYTES)))
        filled, base = 0, 0  # bytes in the buffer; the file offset of its first byte
        while state.stop is None:
            filled, eof = _fill(f, buffer, filled)
            consumed = _read_segment(memoryview(buffer)[:filled].toreadonly(), base, eof, state)
            if eof or state.stop is not None:
                size = max(size, base + filled)
                break
            if consumed == 0 and filled == len(buffer):  # one record longer than the buffer
                buffer = buffer + bytes(len(buffer))  # a new buffer: no view of the old one can block it
            rest = filled - consumed
            buffer[:rest] = buffer[consumed:filled]
            filled, base = rest, base + consumed
    if state.stop is not None:
        what, pos = state.stop
        warnings.append(f"{file.name}: {what} record at byte {pos} of {size}; read {state.kept} records before it")
    if state.dropped:
        warnings.append(f"{file.name}: dropped {state.dropped} record(s) whose checksum does not match "
                        f"(damaged on disk; first at byte {state.first_dropped})")
    return _by_tag(state.columns, state.records)


# Bytes read at a time (a segment; the buffer grows only for a record longer than this).
_SEGMENT_BYTES = 8 << 20


class _Reading:
    """What the segments of one file have read so far."""

    def __init__(self) -> None:
        # tag -> parts: (record numbers, position in the record, steps, values)
        self.columns: dict[str, list[tuple[np.ndarray, int, np.ndarray, np.ndarray]]] = defaultdict(list)
        self.layouts: dict[int, list[_Layout]] = defaultdict(list)  # by payload length
        self.records = 0  # records framed before the stop (numbered from the file's first)
        self.kept = 0  # of those, records whose checksums hold
        self.dropped = 0  # records whose payload checksum fails
        self.first_dropped: int | None = None  # the first one's offset
        self.stop: tuple[str, int] | None = None  # why and where reading stopped
        self.predict = 256  # records of the first round of predicted records (see _predict)


def _fill(f, buffer: bytearray, filled: int) -> tuple[int, bool]:
    """Read into ``buffer`` after its first ``filled`` bytes until it is full or the file ends:
    ``(bytes in the buffer, whether the file ended)``."""
    view = memoryview(buffer)
    while filled < len(buffer):
        n = f.readinto(view[filled:])
        if not n:
            return filled, True
        filled += n
    return filled, False


def _read_segment(data: memoryview, base: int, eof: bool, state: _Reading) -> int:
    """Read the whole records at the start of ``data`` (the file from offset ``base``) into
    ``state``; the bytes consumed (a record cut by the end of ``data`` is read with the next
    segment, unless the file ends there)."""
    starts, lengths, stop, state.predict = _frame(data, state.predict)
    buf = np.frombuffer(data, dtype=np.uint8)
    consumed = len(data)
    if stop is not None and not eof:
        # Cut by the segment's end, or damaged: a length beyond any record, or one that fails its
        # checksum, is damage wherever the segment ends.
        what, pos = stop
        length = _LENGTH.unpack_from(data, pos)[0] if pos + 8 <= len(data) else 0
        damaged = length > _MAX_RECORD or (pos + 12 <= len(data) and _CRC.unpack_from(data, pos + 8)[0]
                                           != masked_crc32c(_LENGTH.pack(length)))
        if not damaged:
            stop, consumed = None, pos
    # 1. Layouts (those of earlier segments first): records whose length checksum and fixed
    # bytes are the layout's, with their payload checksums.
    groups = _groups(lengths)
    bad = np.zeros(len(starts), dtype=bool)
    unchecked = np.ones(len(starts), dtype=bool)  # checksums not checked yet
    number = state.records  # the file's record number of this segment's first record
    columns = state.columns
    for length, rows in groups:
        known = state.layouts[length]
        for layout in known:  # found in earlier segments
            if not len(rows):
                break
            rows = _apply_layout(layout, rows, buf, starts, length, bad, unchecked, number, columns)
        for _ in range(_MAX_LAYOUTS - len(known)):
            if len(rows) < _MIN_GROUP:
                break
            first = int(starts[rows[0]])
            payload = bytes(data[first + 12:first + 12 + length])
            layout = _layout(payload) if _intact(data, first, length) else None
            if layout is None:  # damaged, or read by the protobuf: checked and read with the rest
                rows = rows[1:]
                continue
            known.append(layout)
            rows = _apply_layout(layout, rows, buf, starts, length, bad, unchecked, number, columns)
    # 2. The records no layout covers: their length checksums (reading stops at the first that
    # fails: the lengths after it cannot be trusted), then their payload checksums, one by one.
    end = len(starts)
    rest = np.flatnonzero(unchecked)
    if len(rest):
        expected = np.zeros(len(starts), dtype=np.uint32)
        for length, rows in groups:
            expected[rows] = masked_crc32c(_LENGTH.pack(length))
        wrong = np.flatnonzero(_words(buf, starts[rest] + 8, "<u4") != expected[rest])
        if len(wrong):
            end = int(rest[wrong[0]])
            stop = ("truncated or damaged", int(starts[end]))
            rest = rest[:wrong[0]]
        stored = _unmask(_words(buf, starts[rest] + 12 + lengths[rest], "<u4"))
        bad[rest] = _bad_payloads(data, starts[rest], lengths[rest], stored)
        unchecked[end:] = False  # after the stop: never read
    slow = unchecked & ~bad
    for index in np.flatnonzero(slow).tolist():
        pos = int(starts[index])
        payload = bytes(data[pos + 12:pos + 12 + int(lengths[index])])
        try:
            found = _record_scalars(payload)
        except ValueError:
            stop, end = ("damaged", pos), index
            break
        record, at_step = np.array([number + index]), {}  # one array per record and step: shared by its tags
        for slot, (tag, step, value) in enumerate(found):
            if step not in at_step:
                at_step[step] = np.array([step], dtype=np.int64)
            columns[tag].append((record, slot, at_step[step], np.array([value], dtype=np.float64)))
    dropped = np.flatnonzero(bad[:end])
    if len(dropped) and state.first_dropped is None:
        state.first_dropped = base + int(starts[dropped[0]])
    state.dropped += len(dropped)
    state.kept += end - len(dropped)
    state.records += end
    if stop is not None:
        state.stop = (stop[0], base + stop[1])
    return consumed


def _apply_layout(layout: _Layout, rows: np.ndarray, buf: np.ndarray, starts: np.ndarray, length: int,
                  bad: np.ndarray, unchecked: np.ndarray, number: int, columns: dict[str, list]) -> np.ndarray:
    """Read the records among ``rows`` (of one payload length) that have ``layout`` into
    ``columns``, marking their checksums checked (and ``bad`` where the payload's fails); the
    rows left."""
    matched, steps, values, ok = _read_layout(buf, starts[rows], length, layout)
    done = rows[matched]
    unchecked[done] = False
    if not ok.all():
        bad[done[~ok]] = True
        done, steps, values = done[ok], steps[ok], values[ok]
    if len(done):
        done = done + number  # the file's record numbers
        for slot, tag in enumerate(layout.tags):
            columns[tag].append((done, slot, steps, values[:, slot]))
    return rows[~matched]


def _by_tag(columns: dict[str, list[tuple[np.ndarray, int, np.ndarray, np.ndarray]]], end: int
            ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each tag's steps and values in file order, without those of records numbered ``end`` or
    later (read by a layout after a stop)."""
    out = {}
    # Tags read from the same records (every tag of a layout) share their steps and where each
    # part's values go: by the record and step arrays their parts came from, when no record
    # array is there twice (no tag twice in one event).
    shared: dict[tuple[int, ...], tuple[list[int], list[np.ndarray] | None, np.ndarray]] = {}
    for tag, parts in columns.items():
        key = tuple(id(a) for p in parts for a in (p[0], p[2]))
        found = shared.get(key)
        if found is None:
            # A part's records are in file order: those read after a stop are its last ones.
            cuts = [int(np.searchsorted(p[0], end)) for p in parts]
            places = _places([p[0][:cut] for p, cut in zip(parts, cuts)], [p[1] for p in parts])
            found = (cuts, places, _placed([p[2][:cut] for p, cut in zip(parts, cuts)], places))
            if len({id(p[0]) for p in parts}) == len(parts):
                shared[key] = found
        cuts, places, steps = found
        if len(steps):
            out[tag] = (steps, _placed([p[3][:cut] for p, cut in zip(parts, cuts)], places))
    return out


def _places(records: list[np.ndarray], slots: list[int]) -> list[np.ndarray] | None:
    """Where each part's values go in the tag's column in file order (parts gathered layout by
    layout and segment by segment), or None when the parts, one after the other, are in file
    order. ``records``: each part's record numbers (increasing); ``slots``: each part's position
    in its records (a tag may be twice in one record)."""
    held = [r for r in records if len(r)]
    if all(a[-1] < b[0] for a, b in zip(held, held[1:])):
        return None
    total = sum(len(r) for r in records)
    top = max(int(r[-1]) for r in held) + 1
    if top <= 8 * total:
        # One value per record (the usual case): its rank among the records that have one.
        present = np.zeros(top, dtype=bool)
        for r in records:
            present[r] = True
        if np.count_nonzero(present) == total:
            rank = np.cumsum(present) - 1
            return [rank[r] for r in records]
    order = np.concatenate([(r << _SLOT_BITS) + slot for r, slot in zip(records, slots)])
    place = np.empty(total, dtype=np.int64)
    place[np.argsort(order, kind="stable")] = np.arange(total)
    return np.split(place, np.cumsum([len(r) for r in records])[:-1])


def _placed(parts: list[np.ndarray], places: list[np.ndarray] | None) -> np.ndarray:
    """One contiguous column of the parts' values, each put where ``places`` says (see
    :func:`_places`)."""
    if places is None:
        return np.concatenate(parts) if len(parts) != 1 else np.ascontiguousarray(parts[0])
    column = np.empty(sum(len(p) for p in parts), dtype=parts[0].dtype)
    for part, place in zip(parts, places):
        column[place] = part
    return column


def _frame(data: bytes, first: int = 256) -> tuple[np.ndarray, np.ndarray, tuple[str, int] | None, int]:
    """Record starts and payload lengths, following the lengths; and the most records predicted
    in one round that held (``first``, the first round's size, when none did).

    A record's length says where the next one starts, so this is one pass in Python; but the
    lengths of a scalar file repeat with a short period (the same events step after step), so
    once the last records show a period the next ones are predicted and checked in bulk.
    """
    size = len(data)
    starts: list[int] = []  # read one by one since the last prediction
    lengths: list[int] = []
    chunks: list[tuple[np.ndarray, np.ndarray]] = []
    recent: list[int] = []  # the last lengths, for the period
    unpack = _LENGTH.unpack_from
    pos, stop = 0, None
    wait = next_try = _PERIOD_SEEN
    held = first
    while pos < size:
        if pos + 12 > size:
            stop = ("truncated", pos)
            break
        (length,) = unpack(data, pos)
        end = pos + 16 + length
        if length > _MAX_RECORD or end > size:
            stop = ("truncated or damaged", pos)
            break
        starts.append(pos)
        lengths.append(length)
        pos = end
        next_try -= 1
        if next_try == 0:
            recent = (recent + lengths[-2 * _MAX_PERIOD:])[-2 * _MAX_PERIOD:]
            ahead = _predict(data, pos, recent, first)
            if ahead is not None:
                chunks.append((np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64)))
                ahead, held = ahead[:2], max(held, ahead[2])
                chunks.append(ahead)
                starts, lengths = [], []
                recent = ahead[1][-2 * _MAX_PERIOD:].tolist()
                pos = int(ahead[0][-1] + 16 + ahead[1][-1])
            if ahead is not None and len(ahead[0]) >= _PERIOD_SEEN:
                wait = _PERIOD_SEEN
            else:
                wait = min(2 * wait, 1 << 16)  # no period, or a short one: look again later
            next_try = wait
    chunks.append((np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64)))
    return np.concatenate([c[0] for c in chunks]), np.concatenate([c[1] for c in chunks]), stop, held


# Records read one by one before a period is looked for; the longest period tried; the most
# records predicted in one round (bounded temporaries: ~40 bytes a record).
_PERIOD_SEEN = 128
_MAX_PERIOD = 64
_PREDICT = 1 << 18


def _predict(data: bytes, pos: int, lengths: list[int], first: int = 256
             ) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The records from ``pos`` on that continue the period of the last lengths: their starts and
    lengths, each one checked (its length is where the period puts it), and the most records of a
    round that held; or None.

    The period must explain the last ``2 * _MAX_PERIOD`` lengths; predictions are made in rounds
    of about ``first`` records, then rounds that double while they hold (up to ``_PREDICT``
    records), so a period that breaks soon costs little and one that holds to the end of the file
    takes a few rounds, not one per chunk. (The next segment starts where this one got.)
    """
    tail = lengths[-2 * _MAX_PERIOD:]
    if len(tail) < 2 * _MAX_PERIOD:
        return None
    for period in range(1, _MAX_PERIOD + 1):
        if tail[period:] == tail[:-period]:
            break
    else:
        return None
    pattern = np.array(tail[-period:], dtype=np.int64)
    inner = np.concatenate([[0], np.cumsum(pattern + 16)[:-1]])
    span = int(pattern.sum()) + 16 * period
    size = len(data)
    found_at, found_length = [], []
    cycles = max(1, min(first, _PREDICT) // period)
    held = 0
    while True:
        cycles = min(cycles, (size - pos) // span + 1)
        at = (pos + span * np.arange(cycles)[:, None] + inner[None, :]).ravel()
        expect = np.tile(pattern, cycles)
        outside = np.flatnonzero(at + 16 + expect > size)
        count = int(outside[0]) if len(outside) else len(at)  # records that fit in the file
        wrong = np.flatnonzero(_words(data, at[:count], "<i8") != expect[:count])
        good = int(wrong[0]) if len(wrong) else count  # each checked record starts where the last ended
        found_at.append(at[:good])
        found_length.append(expect[:good])
        if good < len(at):
            break
        held = max(held, len(at))
        pos += cycles * span
        cycles = min(2 * cycles, max(1, _PREDICT // period))
    at, expect = np.concatenate(found_at), np.concatenate(found_length)
    return (at, expect, held) if len(at) else None


def _words(data, at: np.ndarray, dtype: str) -> np.ndarray:
    """The little-endian integer ``dtype`` (``"<i8"``, ``"<u4"``) at each offset ``at`` of ``data``
    (bytes or a uint8 array); every offset must leave room for a whole word."""
    kind = np.dtype(dtype)
    buf = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    if len(buf) < kind.itemsize:
        return np.zeros(0, dtype=kind.newbyteorder("="))[at]  # no word: at is empty, or IndexError
    # A word starting at every byte (a view with a stride of one byte, unaligned), gathered at
    # once: a third faster than rows of a sliding window of bytes viewed as words.
    every = np.ndarray((len(buf) - kind.itemsize + 1,), dtype=kind, buffer=buf, strides=(1,))
    return every[at].astype(kind.newbyteorder("="), copy=False)


def _groups(lengths: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """``(length, record positions)`` per distinct payload length, positions in file order."""
    if not len(lengths):
        return []
    order = np.argsort(lengths, kind="stable")  # a merge sort: lengths come in long runs
    ordered = lengths[order]
    cuts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    return [(int(lengths[rows[0]]), rows) for rows in np.split(order, cuts)]


def _unmask(masked: np.ndarray) -> np.ndarray:
    rot = (masked - np.uint32(MASK_DELTA)).astype(np.uint32)
    return ((rot << np.uint32(15)) | (rot >> np.uint32(17))).astype(np.uint32)


def _intact(data: memoryview, start: int, length: int) -> bool:
    """Whether the record at ``start`` (a payload of ``length`` bytes) has both its checksums."""
    end = start + 12 + length
    return (_CRC.unpack_from(data, start + 8)[0] == masked_crc32c(_LENGTH.pack(length))
            and masked_crc32c(bytes(data[start + 12:end])) == _CRC.unpack_from(data, end)[0])


def _rows(buf: np.ndarray, at: np.ndarray, length: int):
    """The ``length`` bytes (at least one) at each offset of ``at``, as 2-D chunks of rows."""
    window = np.lib.stride_tricks.sliding_window_view(buf, length)
    step = max(1, _CHUNK_BYTES // length)
    for lo in range(0, len(at), step):
        yield lo, window[at[lo:lo + step]]


def _bad_payloads(data: memoryview | np.ndarray, starts: np.ndarray, lengths: np.ndarray, stored: np.ndarray) -> np.ndarray:
    """Which records fail their payload checksum (``stored``, unmasked), each computed on its own
    (~0.2 us a record)."""
    value = google_crc32c.value
    first = (starts + 12).tolist()
    crcs = np.fromiter((value(bytes(data[a:a + n])) for a, n in zip(first, lengths.tolist())),
                       dtype=np.uint32, count=len(first))
    return crcs != stored


@dataclass(frozen=True)
class _Layout:
    """Where the numbers are in a scalar event whose other bytes are fixed."""

    step_at: int  # -1: no step field (step 0)
    step_bytes: int
    value_at: tuple[int, ...]  # offset of each simple_value's float32
    tags: tuple[str, ...]
    fixed: np.ndarray  # bool per byte: must equal the first record's byte
    template: np.ndarray

    @cached_property
    def plan(self) -> _Plan:
        """Made on first use, kept for the next segments."""
        return _plan(self)


@dataclass(frozen=True)
class _Plan:
    """What reading the records of one layout in bulk needs, made once per layout. A record is
    read as a row of ``width`` bytes: the end of its length, the length's checksum, the payload
    and the payload's checksum, so that the row ends where the record does."""

    width: int  # the length's checksum, the payload and its checksum, in whole 8-byte words
    payload_at: int  # where the payload starts in the row (after the length's end and checksum)
    mask: np.ndarray  # uint64 words: the bits a record must share with the template
    want: np.ndarray  # uint64 words: those bits' values
    value_bytes: np.ndarray  # the four bytes of each value, in order
    step_bytes: np.ndarray  # the step varint's bytes
    step_shifts: np.ndarray  # each one's shift (7 bits a byte)


def _plan(layout: _Layout) -> _Plan:
    length = len(layout.template)
    width = -(-(length + 8) // 8) * 8
    crc_at = width - length - 8  # the length's checksum; before it, the end of the length
    payload_at = crc_at + 4
    # The bits a record must share with the template, compared as whole 8-byte words: the
    # length's checksum (the same for every record of that length), every bit of the fixed bytes,
    # and the continuation bits of the step's varint (set on each byte but its last).
    mask = np.zeros(width, dtype=np.uint8)
    mask[crc_at:payload_at] = 0xFF
    mask[payload_at:payload_at + length][layout.fixed] = 0xFF
    want = np.zeros(width, dtype=np.uint8)
    want[crc_at:payload_at] = np.frombuffer(_CRC.pack(masked_crc32c(_LENGTH.pack(length))), dtype=np.uint8)
    want[payload_at:payload_at + length] = layout.template
    step_at = payload_at + layout.step_at
    if layout.step_bytes:
        mask[step_at:step_at + layout.step_bytes] = 0x80
        want[step_at:step_at + layout.step_bytes - 1] = 0x80
    want &= mask
    return _Plan(
        width=width, payload_at=payload_at, mask=mask.view(np.uint64), want=want.view(np.uint64),
        value_bytes=np.array([[payload_at + v + k for k in range(4)] for v in layout.value_at]).ravel(),
        step_bytes=np.arange(step_at, step_at + layout.step_bytes),
        step_shifts=np.arange(layout.step_bytes, dtype=np.uint64) * np.uint64(7))


def _layout(payload: bytes) -> _Layout | None:
    """The layout of ``Event{wall_time, step, summary{value{tag, simple_value}}...}``, or None for
    anything else (read by the protobuf)."""
    n, i = len(payload), 0
    fixed = np.ones(n, dtype=bool)
    if i < n and payload[i] == 0x09:  # wall_time, a double
        fixed[i + 1:i + 9] = False
        i += 9
    step_at, step_bytes = -1, 0
    if i < n and payload[i] == 0x10:  # step, a varint
        step_at, i = i + 1, i + 1
        while i < n and payload[i] & 0x80:
            i += 1
        i += 1
        step_bytes = i - step_at
        if i > n or step_bytes > 10:
            return None
        fixed[step_at:i] = False
    if i >= n or payload[i] != 0x2A:  # summary
        return None
    length, i = _varint(payload, i + 1)
    if length is None or i + length != n:
        return None
    value_at, tags = [], []
    while i < n:
        if payload[i] != 0x0A:  # Summary.value
            return None
        length, i = _varint(payload, i + 1)
        if length is None:
            return None
        end = i + length
        if i >= n or payload[i] != 0x0A:  # Value.tag
            return None
        tag_length, i = _varint(payload, i + 1)
        if tag_length is None or i + tag_length + 5 != end or payload[i + tag_length] != 0x15:
            return None  # anything but tag then simple_value
        try:
            tags.append(payload[i:i + tag_length].decode("utf-8"))
        except UnicodeDecodeError:
            return None
        value_at.append(i + tag_length + 1)
        fixed[i + tag_length + 1:end] = False
        i = end
    if i != n or not tags:
        return None
    return _Layout(step_at, step_bytes, tuple(value_at), tuple(tags), fixed,
                   np.frombuffer(payload, dtype=np.uint8).copy())


def _varint(payload: bytes, i: int) -> tuple[int | None, int]:
    value, shift = 0, 0
    while i < len(payload) and shift < 64:
        byte = payload[i]
        value |= (byte & 0x7F) << shift
        i += 1
        if not byte & 0x80:
            return value, i
        shift += 7
    return None, i


def _read_layout(buf: np.ndarray, at: np.ndarray, length: int, layout: _Layout
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Which records (starting at ``at``, payloads of ``length`` bytes) have ``layout`` and the
    length checksum of that length, and of those: their steps, values and whether their payload
    checksum holds."""
    matched = np.zeros(len(at), dtype=bool)
    steps, values, holds = [], [], []
    plan = layout.plan
    width = plan.width
    zeros_crc = np.uint32(google_crc32c.value(bytes(length)))
    # Few numpy calls per chunk: the reader runs on a thread beside the imports, and each call
    # that lets go of the GIL may wait for it to come back.
    for lo, words in _rows(buf, at + (length + 16 - width), width):
        differ = words.view(np.uint64) ^ plan.want
        differ &= plan.mask
        ok = ~differ.any(axis=1)
        matched[lo:lo + len(words)] = ok
        rows = words if ok.all() else words[ok]  # usually every row has the layout: no copy of them
        if layout.step_bytes:
            step = rows[:, plan.step_bytes].astype(np.uint64)
            step &= np.uint64(0x7F)
            step <<= plan.step_shifts
            steps.append(np.bitwise_or.reduce(step, axis=1).view(np.int64))
        else:
            steps.append(np.zeros(len(rows), dtype=np.int64))
        raw = np.ascontiguousarray(rows[:, plan.value_bytes])
        values.append(raw.view("<f4").reshape(len(rows), len(layout.value_at)).astype(np.float64))
        # Each row ends with the record's stored checksum; it is replaced by what makes the
        # row's CRC register zero when the payload is intact (see _checksums_hold).
        stored = _unmask(words.view("<u4")[:, -1])
        if _checksums_hold(words, plan.payload_at, stored ^ zeros_crc):
            holds.append(np.ones(len(rows), dtype=bool))
        else:  # a damaged record among them: each matched one checked on its own
            starts = at[lo:lo + len(words)][ok]
            holds.append(~_bad_payloads(buf, starts, np.full(len(starts), length), stored[ok]))
    return (matched, np.concatenate(steps) if steps else np.zeros(0, np.int64),
            np.concatenate(values) if values else np.zeros((0, len(layout.tags))),
            np.concatenate(holds) if holds else np.zeros(0, bool))


def _checksums_hold(rows: np.ndarray, pad: int, tails: np.ndarray) -> bool:
    """Whether every payload among ``rows`` has its checksum, in one CRC32C pass over them all
    (~0.1 ns a byte with the CPU's CRC instruction, against ~1 ns for table lookups in numpy).

    Each row is ``pad`` bytes (the end of the record's header, zeroed here), a payload, and 4
    bytes where ``tails`` go: the stored checksum xor
    the checksum of as many zero bytes as the payload has. CRC32C without its initial and final
    values (the register ``R``) is linear, and a message followed by its own ``R`` in
    little-endian order leaves ``R`` zero; an intact payload's ``R`` is that tail. So with the pad
    bytes zeroed (leading zeros leave ``R`` at zero), the ``R`` of all rows one after the other is
    zero when every payload is intact. A single damaged payload always makes it non-zero (each
    row's ``R`` is shifted by a power of x, which the polynomial does not divide); several cancel
    out only by chance, about 2^-32 for damage that is not the same at every place. ``rows`` is
    overwritten.
    """
    if pad:
        rows[:, :pad] = 0
    rows.view("<u4")[:, -1] = tails
    return google_crc32c.extend(0xFFFFFFFF, rows) == 0xFFFFFFFF  # R zero: the extended value unchanged


def _record_scalars(payload: bytes) -> list[tuple[str, int, float]]:
    """``(tag, step, value)`` of the scalars of one record read on its own: a file's header and
    a scalar event of a layout seen too rarely to group are read without the protobuf (whose
    import alone is ~0.2 s), anything else with it.

    Raises:
        ValueError: the payload does not parse.
    """
    if _header_only(payload):
        return []
    layout = _layout(payload)
    if layout is None:
        return _event_scalars(payload)
    step = 0
    if layout.step_bytes:
        step = _varint(payload, layout.step_at)[0] & ((1 << 64) - 1)  # the low 64 bits, as the parser
        step = step - (1 << 64) if step >= 1 << 63 else step  # int64, two's complement
    return [(tag, step, _FLOAT32.unpack_from(payload, at)[0]) for tag, at in zip(layout.tags, layout.value_at)]


_FLOAT32 = struct.Struct("<f")


def _header_only(payload: bytes) -> bool:
    """True for an event of ``wall_time``, ``step`` and ``file_version`` only (a file's first
    record), checked as strictly as the protobuf would parse it."""
    i, n = 0, len(payload)
    while i < n:
        if payload[i] == 0x09:  # wall_time
            i += 9
        elif payload[i] == 0x10:  # step
            value, i = _varint(payload, i + 1)
            if value is None:
                return False
        elif payload[i] == 0x1A:  # file_version, a string
            length, i = _varint(payload, i + 1)
            if length is None or i + length > n:
                return False
            try:
                payload[i:i + length].decode("utf-8")
            except UnicodeDecodeError:
                return False
            i += length
        else:
            return False
    return i == n


def _event_scalars(payload: bytes) -> list[tuple[str, int, float]]:
    """``(tag, step, value)`` of every scalar in one event, through the protobuf.

    Raises:
        ValueError: the payload does not parse.
    """
    # Imported here: protobuf start-up is ~0.2 s, paid only when a record needs it.
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto.event_pb2 import Event

    try:
        event = Event.FromString(payload)
    except DecodeError as err:
        raise ValueError(str(err)) from err
    if not event.HasField("summary"):
        return []
    out = []
    for value in event.summary.value:
        number = _scalar(value)
        if number is not None:
            out.append((value.tag, event.step, number))
    return out


def _scalar(value) -> float | None:
    kind = value.WhichOneof("value")
    if kind == "simple_value":
        return value.simple_value
    if kind != "tensor":
        return None
    tensor = value.tensor
    if tensor.tensor_shape.dim:  # not a scalar
        return None
    if tensor.float_val:
        return tensor.float_val[0]
    if tensor.double_val:
        return tensor.double_val[0]
    if tensor.tensor_content and tensor.dtype in (_DT_FLOAT, _DT_DOUBLE):
        dtype = np.float32 if tensor.dtype == _DT_FLOAT else np.float64
        return float(np.frombuffer(tensor.tensor_content, dtype=dtype)[0])
    return None
