"""Records of a W&B transaction log (``run-<id>.wandb``), read from its format without wandb.

The file is a 7-byte W&B header (``:W&B``, magic ``0xBEE1`` little-endian, version 0) followed
by the LevelDB log format: 32 KiB blocks, counted from the start of the file, of chunks that
never cross a block boundary::

    checksum: uint32 LE | length: uint16 LE | type: uint8 (1 FULL, 2 FIRST, 3 MIDDLE, 4 LAST) | payload

A record is one FULL chunk, or a FIRST chunk, any MIDDLE chunks and a LAST chunk; a block tail
shorter than a chunk header is zero padding. The checksum is the IEEE CRC-32 of the type byte
and the payload (what wandb-core's transaction log writer and the older Python datastore both
write, not LevelDB's masked CRC-32C). Each record is a protobuf ``wandb.proto.Record``; the few
fields the analysis reads are decoded here from the protobuf wire format:

    Record:        history = 2 (HistoryRecord), run = 17 (RunRecord)
    HistoryRecord: item = 1 (repeated HistoryItem), step = 2 (HistoryStep: num = 1)
    HistoryItem:   key = 1, nested_key = 2 (repeated), value_json = 16
    RunRecord:     run_id = 1, project = 3, display_name = 8

Reading is tolerant and bounded: one block and one record in memory at a time; a damaged
chunk is dropped (with the record it belonged to) and reading resumes at the next chunk, or at
the next block when the damage reaches the chunk header; a file that ends inside a chunk (a
run killed while writing) yields every record before it. :class:`Tally` counts what was lost.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HEADER = struct.Struct("<4sHB")  # ident, magic, version
IDENT = b":W&B"
MAGIC = 0xBEE1
VERSION = 0

BLOCK = 32 * 1024
CHUNK_HEADER = struct.Struct("<IHB")  # checksum, length, type
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4

# A record larger than this is dropped unread: history rows are kilobytes; a record this big
# is a file listing or a damaged chain of chunks, and would be held in memory whole.
MAX_RECORD_BYTES = 16 << 20

# Field numbers of wandb.proto messages (wandb/proto/wandb_internal.proto).
RECORD_HISTORY, RECORD_RUN = 2, 17
HISTORY_ITEM, HISTORY_STEP, STEP_NUM = 1, 2, 1
ITEM_KEY, ITEM_NESTED_KEY, ITEM_VALUE_JSON = 1, 2, 16
RUN_ID, RUN_PROJECT, RUN_DISPLAY_NAME = 1, 3, 8

_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


@dataclass
class Tally:
    """What reading a transaction log dropped.

    Attributes:
        records: records read whole.
        damaged_chunks: chunks whose checksum, type or length was wrong.
        lost_records: records dropped with a damaged chunk.
        broken_records: records dropped because a chunk of theirs is missing (a FIRST chunk with
            no LAST, a MIDDLE or LAST chunk with no FIRST).
        skipped_bytes: bytes passed over to find the next readable chunk.
        oversized: records over :data:`MAX_RECORD_BYTES`, dropped unread.
        truncated_bytes: bytes at the end of the file that do not finish a chunk or a record
            (non-zero for a run killed, or still running, while writing).
        undecodable: records that are not valid protobuf.
    """

    records: int = 0
    damaged_chunks: int = 0
    lost_records: int = 0
    broken_records: int = 0
    skipped_bytes: int = 0
    oversized: int = 0
    truncated_bytes: int = 0
    undecodable: int = 0


class Malformed(ValueError):
    """Bytes that are not valid protobuf wire format."""


def has_header(path: str | Path) -> bool:
    """True when the file starts with the W&B transaction log identifier ``:W&B``.

    Example:
        >>> has_header("/nonexistent.wandb")
        False
    """
    try:
        with open(path, "rb") as f:
            return f.read(len(IDENT)) == IDENT
    except OSError:
        return False


def records(path: str | Path, tally: Tally) -> Iterator[bytes]:
    """Yield the payload of every intact record of a transaction log, in file order.

    Args:
        path: a ``run-<id>.wandb`` file.
        tally: counts what was dropped; updated as records are read.

    Raises:
        ValueError: the file does not start with a W&B header of version 0.

    Example:
        >>> tally = Tally()
        >>> n = sum(1 for _ in records("run-abc.wandb", tally))  # doctest: +SKIP
    """
    with open(path, "rb") as f:
        head = f.read(HEADER.size)
        if len(head) < HEADER.size or not head.startswith(IDENT):
            raise ValueError(f"{path}: not a W&B transaction log (it does not start with ':W&B'): "
                             "pass the run-<id>.wandb file of a W&B run directory")
        _, magic, version = HEADER.unpack(head)
        if magic != MAGIC or version != VERSION:
            raise ValueError(f"{path}: W&B header with magic {magic:#06x} version {version}, expected "
                             f"{MAGIC:#06x} version {VERSION}: the file is damaged or from an unknown wandb")
        parts: list[bytes] = []  # chunks of the record being assembled
        size = 0
        resync = False  # a record's start was lost: skip its MIDDLE/LAST chunks quietly
        block = head + f.read(BLOCK - HEADER.size)
        pos = HEADER.size
        while True:
            while pos + CHUNK_HEADER.size <= len(block):
                checksum, length, kind = CHUNK_HEADER.unpack_from(block, pos)
                end = pos + CHUNK_HEADER.size + length
                if checksum == 0 and length == 0 and kind == 0:  # zero fill: nothing more in this block
                    break
                if end > len(block) and len(block) < BLOCK:  # the file ends inside this chunk
                    break
                payload = block[pos + CHUNK_HEADER.size:end]
                bad_header = end > len(block) or kind not in (FULL, FIRST, MIDDLE, LAST)
                if bad_header or checksum != zlib.crc32(block[pos + CHUNK_HEADER.size - 1:end]):
                    tally.damaged_chunks += 1
                    # The record being assembled is lost, and so is the record this chunk starts;
                    # a damaged continuation belongs to a record already counted.
                    tally.lost_records += bool(parts) + (kind not in (MIDDLE, LAST) or not (parts or resync))
                    parts, size, resync = [], 0, True
                    if bad_header:  # its length is not to be trusted: resume at the next block
                        tally.skipped_bytes += len(block) - pos
                        pos = len(block)
                        break
                    pos = end
                    continue
                pos = end
                if kind in (FULL, FIRST):
                    if parts:  # the previous record never got its LAST chunk
                        tally.broken_records += 1
                    parts, size, resync = [payload], length, False
                elif not parts:
                    if not resync:  # a continuation with no start
                        tally.broken_records += 1
                        resync = True
                    continue
                else:
                    parts.append(payload)
                    size += length
                if size > MAX_RECORD_BYTES:
                    tally.oversized += 1
                    parts, size, resync = [], 0, True
                    continue
                if kind in (FULL, LAST):
                    tally.records += 1
                    yield parts[0] if len(parts) == 1 else b"".join(parts)
                    parts, size = [], 0
            if len(block) < BLOCK:  # the last block
                cut = bool(block[pos:].strip(b"\x00"))  # the file ends inside a chunk
                if cut or parts:
                    tally.truncated_bytes += len(block) - pos + size
                return
            block = f.read(BLOCK)
            pos = 0
            if not block:
                tally.truncated_bytes += size
                return


# ----------------------------------------------------------------------------- protobuf wire format


def fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)`` for each field of one protobuf message, in order.

    A varint's value is an int; a length-delimited or fixed-size field's is its bytes. Groups
    (wire types 3 and 4, unused by wandb) are malformed here. Tags and lengths under 128 (nearly
    all of them in a history record) take a one-byte path.

    Raises:
        Malformed: the bytes are not a valid message.

    Example:
        >>> fields(bytes([0x08, 0x96, 0x01, 0x12, 0x01, 0x61]))
        [(1, 0, 150), (2, 2, b'a')]
    """
    out = []
    pos, end = 0, len(buf)
    while pos < end:
        tag = buf[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == _BYTES or wire == _VARINT:  # a varint: the value, or the length of the bytes
            value = buf[pos] if pos < end else 0x80
            if value < 0x80:
                pos += 1
            else:
                value, pos = _varint(buf, pos)
            if wire == _BYTES:
                value, pos = buf[pos:pos + value], pos + value
        elif wire in (_FIXED64, _FIXED32):
            n = 8 if wire == _FIXED64 else 4
            value, pos = buf[pos:pos + n], pos + n
        else:
            raise Malformed(f"wire type {wire}")
        if pos > end or number == 0:
            raise Malformed("a field runs past the end of its message" if number else "field number 0")
        out.append((number, wire, value))
    return out


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while pos < len(buf):
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            break
    raise Malformed("a varint runs past the end of its message or over 10 bytes")


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise Malformed("a string field that is not length-delimited")
    return value.decode("utf-8", errors="replace")


def record_field(record: bytes) -> tuple[int, bytes] | None:
    """The record type this module reads and its message: ``(RECORD_HISTORY | RECORD_RUN, bytes)``,
    or None for any other record (summary, config, output, telemetry, ...).

    Raises:
        Malformed: the record is not a valid message.
    """
    for number, wire, value in fields(record):
        if number in (RECORD_HISTORY, RECORD_RUN) and wire == _BYTES:
            return number, value
    return None


def history_items(message: bytes) -> tuple[list[tuple[tuple[str, ...], str]], int | None]:
    """Decode a ``HistoryRecord``: its items as ``(key path, value_json)`` and its step number.

    The key path is ``nested_key`` when present (wandb-core writes every key so, ``("grad",
    "blocks.0")`` for a nested dict), else ``(key,)``. The step is ``step.num`` (None when the
    record has no step field; protobuf omits a zero, so a present empty step is step 0).

    Raises:
        Malformed: the message is not valid.
    """
    items: list[tuple[tuple[str, ...], str]] = []
    step: int | None = None
    for number, wire, value in fields(message):
        if number == HISTORY_ITEM and wire == _BYTES:
            key, nested, value_json = "", [], ""
            for inner, inner_wire, inner_value in fields(value):
                if inner == ITEM_KEY:
                    key = _text(inner_value)
                elif inner == ITEM_NESTED_KEY:
                    nested.append(_text(inner_value))
                elif inner == ITEM_VALUE_JSON:
                    value_json = _text(inner_value)
            items.append((tuple(nested) if nested else (key,), value_json))
        elif number == HISTORY_STEP and wire == _BYTES:
            step = 0
            for inner, inner_wire, inner_value in fields(value):
                if inner == STEP_NUM and inner_wire == _VARINT:
                    step = inner_value - (1 << 64) if inner_value >= 1 << 63 else inner_value  # int64
    return items, step


def run_info(message: bytes) -> dict[str, str]:
    """Decode the identifying fields of a ``RunRecord``: ``run_id``, ``project``, ``display_name``.

    Raises:
        Malformed: the message is not valid.
    """
    names = {RUN_ID: "run_id", RUN_PROJECT: "project", RUN_DISPLAY_NAME: "display_name"}
    info = {}
    for number, wire, value in fields(message):
        if number in names and wire == _BYTES:
            info[names[number]] = _text(value)
    return info
