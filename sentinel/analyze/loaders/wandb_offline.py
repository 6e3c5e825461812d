"""Loader for a W&B run's ``files/wandb-history.jsonl`` (``wandb/offline-run-*/``, ``wandb/run-*/``).

Older wandb versions wrote one JSON row per ``wandb.log`` (step in ``_step``) to this file; it is
read directly. Current versions keep the history only in the binary ``run-<id>.wandb`` file,
read by :mod:`~sentinel.analyze.loaders.wandb_binary`. ``files/output.log`` is the console
capture and goes to the text-log dialects.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN, LoadOptions, RunData
from sentinel.analyze.loaders.keys import canonical_key
from sentinel.analyze.loaders.textlog import read_lines, rows_to_steps
from sentinel.analyze.loaders.trainer_steps import at_trainer_steps

NAME = "wandb"
DESCRIPTION = "W&B history files (files/wandb-history.jsonl, older wandb)"


def sniff(path: str | Path) -> bool:
    """True for a W&B history file (``wandb-history.jsonl``).

    Example:
        >>> sniff("/nonexistent/files/wandb-history.jsonl")
        False
    """
    p = Path(path)
    return p.name == "wandb-history.jsonl" and p.is_file()


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read a W&B offline run's history.

    Args:
        path: ``files/wandb-history.jsonl``.
        options: ``loss_col`` names the loss key when it is not recognised.

    Raises:
        ValueError: no step rows.

    Example:
        >>> run = load("wandb/offline-run-x/files/wandb-history.jsonl")[0]  # doctest: +SKIP
    """
    options = options or LoadOptions()
    p = Path(path)
    rows: dict[int, dict[str, float]] = {}
    lines, _ = read_lines(p)
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict) or not isinstance(row.get("_step"), int):
            continue
        out = rows.setdefault(row["_step"], {})
        for key, value in row.items():
            if key.startswith("_") or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            chosen = options.loss_col is not None and key.lower() == options.loss_col.lower()
            out[metrics.LOSS if chosen else canonical_key(key)] = float(value)
    if not rows:
        raise ValueError(f"{path}: no history rows with a _step")
    run_dir = p.parent.parent if p.parent.name == "files" else p.parent
    # (a row without the loss leaves its cell empty: no NaN the run logged)
    logged_nan: dict[str, list[int]] = {}
    for step, row in rows.items():
        for key, value in row.items():
            if math.isnan(value):
                logged_nan.setdefault(key, []).append(step)
    meta = {"format": NAME, LOGGED_NAN: {key: sorted(at) for key, at in logged_nan.items()}}
    return at_trainer_steps(RunData(name=run_dir.name, path=str(p), source=NAME, steps=rows_to_steps(rows), meta=meta))
