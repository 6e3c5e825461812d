"""Loaders: each turns one kind of log on disk into :class:`RunData` with sentinel's keys.

A loader is a module in this package exposing ``NAME`` (str), ``sniff(path) -> bool`` (is this
file/directory mine? judged by content where it can be) and ``load(path) -> list[RunData]``.
Register it in ``LOADERS`` below; :func:`discover_runs` walks a directory and asks each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass
class RunData:
    """One run, whatever it was read from.

    Attributes:
        name: a short label (directory or file name).
        path: where it was read from.
        source: the loader's ``NAME`` ("sentinel", "tensorboard", "csv", ...).
        steps: one row per step, indexed by integer step, columns are metric keys
            (``loss``, ``lr``, ``grad_norm/total``, ``loss_scale``, ...); missing values are NaN.
        events: recorded events (``step``, ``kind``, ...), empty when the source has none.
        meta: anything the source says about the run.
        warnings: what was skipped while reading (truncated lines, unreadable files).
    """

    name: str
    path: str
    source: str
    steps: pd.DataFrame
    events: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["step", "kind"]))
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
