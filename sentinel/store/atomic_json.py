"""Whole-file JSON documents (meta, skiplist) replaced atomically: readers see old or new, never half."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` through a temporary file and ``os.replace``.

    The temporary file is fsynced before the rename so that a crash (even a power loss)
    leaves either the previous document or the new one.

    Args:
        path: destination file.
        obj: a JSON-serialisable object (NaN/Inf are written as ``NaN``/``Infinity``).

    Raises:
        TypeError: ``obj`` holds something JSON cannot represent.

    Example:
        >>> write_json_atomic(Path("logs/run1/meta.json"), {"a": 1})  # doctest: +SKIP
    """
    # Serialise first: a TypeError must not leave a stray temporary file behind.
    text = json.dumps(obj, indent=2, sort_keys=False, default=json_default)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # Remove the temporary file, then let the error propagate unchanged.
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> Any:
    """Read one JSON document; ``ValueError`` naming the file when it is not valid JSON.

    Example:
        >>> read_json(Path("logs/run1/meta.json"))  # doctest: +SKIP
        {'sentinel_version': '0.1.0', ...}
    """
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as ex:
        raise ValueError(f"{path} is not valid JSON ({ex}): delete or repair the file") from ex


def json_default(obj: Any) -> Any:
    """``json.dumps`` fallback for numpy scalars/arrays and tensors (``.item()``/``.tolist()``).

    Only used for events, meta and skiplists, never on the per-step path.

    Example:
        >>> import numpy as np
        >>> json.dumps({"v": np.float32(0.5)}, default=json_default)
        '{"v": 0.5}'
    """
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    # numpy scalars/arrays and torch tensors all map to Python numbers/lists via tolist().
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"object of type {type(obj).__name__} is not JSON serialisable: "
                    "pass numbers, strings, lists or dicts")
