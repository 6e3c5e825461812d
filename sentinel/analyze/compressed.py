"""Logs kept compressed (``train.log.gz``, ``metrics.csv.xz``, a rotated ``slurm-123.out.1.bz2``):
decompressed into a temporary file and read as the file they hold.

Only single-file compression that Python reads without extra packages (gzip, bzip2, xz); an
archive of several files (``.tar.gz``, ``.zip``) is named as such, with the command that unpacks
it. The decompressed text is bounded (:data:`MAX_BYTES`): a small file that would expand without
end (a decompression bomb) stops there with a message, never fills the disk.
"""

from __future__ import annotations

import bz2
import contextlib
import lzma
import os
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

# suffix -> (a fresh decompressor, the magic bytes a file of that kind starts with)
_KINDS = {
    ".gz": (lambda: zlib.decompressobj(16 + zlib.MAX_WBITS), b"\x1f\x8b"),
    ".bz2": (bz2.BZ2Decompressor, b"BZh"),
    ".xz": (lzma.LZMADecompressor, b"\xfd7zXZ\x00"),
}
_ARCHIVES = {".tgz": "tar xzf", ".tbz2": "tar xjf", ".txz": "tar xJf", ".zip": "unzip", ".tar": "tar xf"}
# The most bytes a compressed log may expand to (a text log of 10 million steps is ~1 GB).
MAX_BYTES = 8 << 30
_CHUNK = 1 << 20
_DAMAGED = (zlib.error, OSError, EOFError, lzma.LZMAError)


def is_compressed(path: Path) -> bool:
    """A single compressed file by its suffix and first bytes (not an archive such as ``.tar.gz``).

    Example:
        >>> is_compressed(Path("/nonexistent.log.gz"))
        False
    """
    kind = _KINDS.get(path.suffix.lower())
    if kind is None or archive_command(path) is not None:
        return False
    try:
        with open(path, "rb") as f:
            return f.read(len(kind[1])) == kind[1]
    except OSError:
        return False


def suffix_of(head: bytes) -> str:
    r"""The suffix of the compression whose magic bytes ``head`` starts with, else ``""`` (a log
    piped in compressed is kept under that suffix, to be read as the file it holds).

    Example:
        >>> suffix_of(b"\x1f\x8b\x08\x00"), suffix_of(b"step 1 loss 2.0")
        ('.gz', '')
    """
    return next((suffix for suffix, (_, magic) in _KINDS.items() if head.startswith(magic)), "")


def archive_command(path: Path) -> str | None:
    """The command that unpacks ``path`` when it is an archive of several files, else None.

    Example:
        >>> archive_command(Path("logs.tar.gz")), archive_command(Path("train.log.gz"))
        ('tar xzf logs.tar.gz', None)
    """
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    if suffixes[-1:] and suffixes[-1] in _ARCHIVES:
        return f"{_ARCHIVES[suffixes[-1]]} {path.name}"
    if len(suffixes) == 2 and suffixes[0] == ".tar" and suffixes[1] in _KINDS:
        flag = {".gz": "z", ".bz2": "j", ".xz": "J"}[suffixes[1]]
        return f"tar x{flag}f {path.name}"
    return None


@contextlib.contextmanager
def decompressed(path: Path, limit: int = MAX_BYTES,
                 first: int | None = None) -> Iterator[tuple[Path, str | None]]:
    """The file ``path`` holds, decompressed into a temporary directory while the block runs, and
    a note when its data ended early (a log still being written through ``| gzip``): what could
    be read is read.

    The copy keeps the name without the compression suffix and sits in a folder named like the
    original's, so a run named after its file or folder gets the same name; its modification
    time is the original's (a log that has not changed for a minute is read to its last line).
    Concatenated streams (``cat a.gz b.gz``) are read one after the other, as ``zcat`` does.

    With ``first``, only the first that many bytes are decompressed (what a sniffer looks at).

    Raises:
        ValueError: the data is damaged (not only cut off), or expands past ``limit`` bytes.

    Example:
        >>> with decompressed(Path("logs/train.log.gz")) as (plain, note):  # doctest: +SKIP
        ...     text = plain.read_text()
    """
    new, _ = _KINDS[path.suffix.lower()]
    with tempfile.TemporaryDirectory(prefix="sentinel-") as tmp:
        folder = Path(tmp) / (path.resolve().parent.name or "log")
        folder.mkdir()
        plain = folder / path.stem
        written, streams, note, done = 0, 0, None, False
        with open(path, "rb") as src, open(plain, "wb") as dst:
            decoder, fed = new(), False
            data = src.read(_CHUNK)
            while data:
                pieces = _decode(decoder, data)
                while True:
                    try:
                        out = next(pieces, None)
                    except _DAMAGED as err:
                        if streams and not fed:  # bytes after a whole stream that start none: as zcat, ignored
                            note = f"{len(data)}+ bytes after the compressed data are not compressed data: ignored"
                            done = True
                            break
                        raise ValueError(f"{path}: damaged compressed data after {written} bytes ({err}): check "
                                         "the file, or decompress what can be read of it yourself") from None
                    if out is None:
                        break
                    if first is not None and written + len(out) >= first:
                        dst.write(out[:first - written])
                        written, done = first, True
                        break
                    written += len(out)
                    if written > limit:
                        raise ValueError(f"{path}: expands past {limit >> 30} GiB when decompressed: decompress the "
                                         f"part you need yourself (e.g. zcat {path.name} | tail -n 100000)")
                    dst.write(out)
                if done:
                    break
                fed = True
                if decoder.eof:  # a stream ended: another may follow it
                    data, decoder, fed = decoder.unused_data or src.read(_CHUNK), new(), False
                    streams += 1
                else:
                    data = src.read(_CHUNK)
        stat = path.stat()
        os.utime(plain, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        if fed and not done:
            note = f"the compressed data ends early (still being written?): read up to there ({written} bytes)"
        yield plain, note


def _decode(decoder, data: bytes) -> Iterator[bytes]:
    """What ``decoder`` makes of ``data``, at most :data:`_CHUNK` bytes at a time (a small input
    that expands enormously never sits in memory whole)."""
    if hasattr(decoder, "unconsumed_tail"):  # zlib
        while data:
            yield decoder.decompress(data, _CHUNK)
            data = decoder.unconsumed_tail
            if decoder.eof:
                return
        return
    yield decoder.decompress(data, _CHUNK)
    while not decoder.eof and not decoder.needs_input:
        yield decoder.decompress(b"", _CHUNK)
