"""Loader for W&B offline runs (``wandb/offline-run-*/``).

``files/wandb-history.jsonl`` (one JSON row per ``wandb.log``, step in ``_step``) is read
directly; ``files/output.log`` is the console capture and goes to the text-log dialects. The
binary ``run-*.wandb`` file is W&B's own protobuf stream: without a readable history beside it,
loading it says to install ``wandb`` or run ``wandb sync``.
"""

from __future__ import annotations

import json
from pathlib import Path

from sentinel import metrics
from sentinel.analyze.loaders import LoadOptions, RunData
from sentinel.analyze.loaders.keys import canonical_key
from sentinel.analyze.loaders.textlog import read_lines, rows_to_steps

NAME = "wandb"
DESCRIPTION = "W&B offline runs (files/wandb-history.jsonl)"


def sniff(path: str | Path) -> bool:
    """True for a W&B history file, or a binary ``.wandb`` run file with nothing readable beside it.

    Example:
        >>> sniff("/nonexistent/files/wandb-history.jsonl")
        False
    """
    p = Path(path)
    if not p.is_file():
        return False
    if p.name == "wandb-history.jsonl":
        return True
    if p.suffix == ".wandb" and p.name.startswith("run-"):
        files = p.parent / "files"
        return not (files / "wandb-history.jsonl").is_file() and not (files / "output.log").is_file()
    return False


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read a W&B offline run's history.

    Args:
        path: ``files/wandb-history.jsonl`` or the run's ``.wandb`` file.
        options: ``loss_col`` names the loss key when it is not recognised.

    Raises:
        ValueError: a binary ``.wandb`` file (the message says how to read it), or no step rows.

    Example:
        >>> run = load("wandb/offline-run-x/files/wandb-history.jsonl")[0]  # doctest: +SKIP
    """
    options = options or LoadOptions()
    p = Path(path)
    if p.suffix == ".wandb":
        raise ValueError(f"{path}: a binary W&B run file, which sentinel does not decode: run `wandb sync "
                         f"{p.parent}` and export the history, or pass the run's files/output.log")
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
    return [RunData(name=run_dir.name, path=str(p), source=NAME, steps=rows_to_steps(rows), meta={"format": NAME})]
