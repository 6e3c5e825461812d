"""Where a rank's snapshots live, and how many bytes they may hold."""

from __future__ import annotations

import os


def snapshot_budget(max_bytes: int | None, directory: str | None) -> int | None:
    """Bytes the snapshot ring may hold: as configured, else a quarter of physical memory split
    between the processes on this machine (snapshots on disk are not bounded by memory).

    Example:
        >>> snapshot_budget(1 << 30, None), snapshot_budget(None, "/scratch/snaps")
        (1073741824, None)
    """
    if max_bytes is not None or directory is not None:
        return max_bytes
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # a platform without sysconf: no bound
        return None
    local_processes = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    return physical // 4 // local_processes


def rank_directory(directory: str | None, rank: int, world_size: int) -> str | None:
    """Each rank keeps its snapshots apart: the same file names would overwrite each other.

    Example:
        >>> rank_directory("/scratch/snaps", 1, 4), rank_directory("/scratch/snaps", 0, 1)
        ('/scratch/snaps/rank1', '/scratch/snaps')
    """
    if directory is None or world_size == 1:
        return directory
    return os.path.join(directory, f"rank{rank}")
