"""The run directory: the contract between the recorder and the analyzer.

``RunWriter`` appends step records, events, the skiplist and meta to a run directory,
crash-safe (every record reaches the OS when written) and with TensorBoard scalars written
off the training thread; ``load_run`` reads it back into pandas as far as it is valid.

Example:
    >>> from sentinel.store import RunWriter, load_run
    >>> with RunWriter("logs/run1") as w:  # doctest: +SKIP
    ...     w.write_step({"step": 0, "loss": 2.3})
    >>> load_run("logs/run1").steps.loc[0, "loss"]  # doctest: +SKIP
    2.3
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sentinel.store.reader import Run, load_run
    from sentinel.store.skiplist import read_skiplist
    from sentinel.store.tb_sink import TensorBoardSinkConfig
    from sentinel.store.writer import RunWriter, ensure_run_dir

# Public names, imported on first use: a submodule (the steps segments' parser, which
# `sentinel analyze` starts on a thread before it imports pandas) can be imported without
# the reader's pandas.
_LAZY = {
    "Run": "sentinel.store.reader",
    "load_run": "sentinel.store.reader",
    "read_skiplist": "sentinel.store.skiplist",
    "TensorBoardSinkConfig": "sentinel.store.tb_sink",
    "RunWriter": "sentinel.store.writer",
    "ensure_run_dir": "sentinel.store.writer",
}

__all__ = ["Run", "RunWriter", "TensorBoardSinkConfig", "ensure_run_dir", "load_run", "read_skiplist"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sentinel.store' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
