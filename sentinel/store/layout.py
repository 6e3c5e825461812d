"""File names of a run directory: the contract between the recorder and the analyzer.

```
<run>/
  meta.json              run description (versions, config), rewritten atomically
  steps.00000.csv        step records, one segment per writer open / key-set growth
  steps.00001.csv        ...
  events.jsonl           one JSON event per line, append-only
  skiplist.json          batches the guard skipped, rewritten atomically
  tb/                    TensorBoard scalars of the same keys
```
"""

from __future__ import annotations

import re
from pathlib import Path

META_FILE = "meta.json"
EVENTS_FILE = "events.jsonl"
SKIPLIST_FILE = "skiplist.json"
TB_DIR = "tb"
STEPS_PREFIX = "steps."
STEPS_SUFFIX = ".csv"

# Bumped when the on-disk layout changes in a way an older reader cannot follow.
FORMAT_VERSION = 1

_SEGMENT_RE = re.compile(r"^steps\.(\d+)\.csv$")


def segment_name(index: int) -> str:
    """File name of steps segment ``index``.

    Example:
        >>> segment_name(3)
        'steps.00003.csv'
    """
    return f"{STEPS_PREFIX}{index:05d}{STEPS_SUFFIX}"


def list_segments(run_dir: Path) -> list[tuple[int, Path]]:
    """Steps segments in ``run_dir`` as ``(index, path)``, in write order (ascending index).

    Example:
        >>> list_segments(Path("logs/run1"))  # doctest: +SKIP
        [(0, PosixPath('logs/run1/steps.00000.csv'))]
    """
    found = []
    for path in run_dir.iterdir():
        match = _SEGMENT_RE.match(path.name)
        if match and path.is_file():
            found.append((int(match.group(1)), path))
    found.sort()
    return found
