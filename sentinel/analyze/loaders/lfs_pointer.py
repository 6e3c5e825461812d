"""Git LFS pointer files: a repository cloned without ``git lfs pull`` holds, in place of each
tracked file (event files, CSVs, logs), a text stub of about 130 bytes naming its object. Read as
the file, a pointer was "a truncated or damaged record at byte 0" or "not a log format".

Example:
    >>> LFS_FIX.startswith("run `git lfs pull`")
    True
"""

from __future__ import annotations

from pathlib import Path

# The spec line every pointer opens with (https://git-lfs.github.com/spec/v1), and a pointer's
# largest size: three short lines (version, oid sha256, size), extensions aside.
_SPEC = b"version https://git-lfs.github.com/spec/"
_MOST_BYTES = 1024
LFS_FIX = "run `git lfs pull` in its repository (or download the files themselves) and analyze again"


def is_lfs_pointer(path: str | Path) -> bool:
    """True for a Git LFS pointer file in place of the file it names.

    Example:
        >>> is_lfs_pointer("/nonexistent/events.out.tfevents.1")
        False
    """
    try:
        with open(path, "rb") as f:
            head = f.read(_MOST_BYTES + 1)
    except OSError:
        return False
    return len(head) <= _MOST_BYTES and head.startswith(_SPEC)
