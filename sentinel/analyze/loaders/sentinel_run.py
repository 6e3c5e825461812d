"""Loader for a sentinel run directory (``meta.json`` + ``steps.*`` + ``events.jsonl``)."""

from __future__ import annotations

import re
from pathlib import Path

from sentinel.analyze.loaders import LoadOptions, RunData

NAME = "sentinel"
DESCRIPTION = "sentinel run directory (meta.json + steps.*)"

_META = "meta.json"
_SEGMENT = re.compile(r"^steps\.\d+\.csv$")  # sentinel.store.layout's segment names


def sniff(path: str | Path) -> bool:
    """True for a directory holding ``meta.json`` or step-record segments (``steps.NNNNN.csv``).

    Example:
        >>> sniff("/nonexistent")
        False
    """
    path = Path(path)
    if not path.is_dir():
        return False
    return (path / _META).is_file() or any(_SEGMENT.match(p.name) for p in path.iterdir())


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read one sentinel run directory through the store's reader.

    The guard's skip list is kept in ``meta["skiplist"]``; the ``tb/`` mirror is not read
    (it holds the same scalars).

    Example:
        >>> runs = load("logs/run1")  # doctest: +SKIP
        >>> runs[0].steps["loss"].iloc[-1]  # doctest: +SKIP
        0.42
    """
    # Imported here: the store pulls in pyarrow, which a TensorBoard-only analysis never needs.
    from sentinel.store import load_run

    path = Path(path)
    run = load_run(path)
    meta = dict(run.meta or {})
    meta["skiplist"] = list(run.skiplist or [])
    meta["restarts"] = list(run.restarts)
    steps = run.steps
    if options is not None and options.loss_col and options.loss_col in steps.columns:
        steps = steps.rename(columns={options.loss_col: "loss"})
    return [RunData(name=path.name, path=str(path), source=NAME, steps=steps,
                    events=run.events, meta=meta, warnings=list(run.warnings or []))]
