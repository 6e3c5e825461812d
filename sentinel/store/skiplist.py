"""``skiplist.json``: the batches the guard skipped, so that a resumed run skips them too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sentinel.store.atomic_json import read_json, write_json_atomic
from sentinel.store.layout import SKIPLIST_FILE


def read_skiplist(path: str | Path) -> list[dict[str, Any]]:
    """Read the skiplist of a run.

    Args:
        path: a run directory, or the ``skiplist.json`` file itself.

    Returns:
        The entries, in the order they were written; ``[]`` when there is no skiplist.

    Raises:
        ValueError: the file exists but is not a JSON list of objects.

    Example:
        >>> read_skiplist("logs/run1")  # doctest: +SKIP
        [{'step': 120, 'epoch': 0, 'batch_idx': 120, 'sample_indices': [480, 481]}]
    """
    path = Path(path)
    if path.name != SKIPLIST_FILE:
        path = path / SKIPLIST_FILE
    # Open, never check-then-open: another rank may be creating the run directory right now.
    try:
        entries = read_json(path)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except IsADirectoryError:
        raise ValueError(f"{path} is a directory, not a skip list: remove it") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 JSON: delete or repair the file") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError(f"{path} must hold a JSON list of objects, found {type(entries).__name__}: "
                         "delete it or write it with RunWriter.write_skiplist")
    return entries


def write_skiplist(run_dir: Path, entries: list[dict[str, Any]]) -> None:
    """Replace ``skiplist.json`` in ``run_dir`` atomically with ``entries``.

    Raises:
        ValueError: ``entries`` is not a list of dicts.
        TypeError: an entry holds something JSON cannot represent.

    Example:
        >>> write_skiplist(Path("logs/run1"), [{"step": 120, "batch_idx": 120}])  # doctest: +SKIP
    """
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError(f"skiplist must be a list of dicts, got {type(entries).__name__}: "
                         "pass e.g. [{'step': 120, 'batch_idx': 120}]")
    write_json_atomic(run_dir / SKIPLIST_FILE, entries)
