"""Loader for Stable-Baselines3's console output (its ``HumanOutputFormat``).

Each time SB3 dumps its logger it prints one block of ``| key | value |`` rows between dashed
lines, a section (``rollout/``, ``time/``, ``train/``) on a row of its own before its keys:

    ------------------------------------------
    | rollout/                |              |
    |    ep_rew_mean          | -1.19e+03    |
    | time/                   |              |
    |    total_timesteps      | 4096         |
    | train/                  |              |
    |    loss                 | 10.5         |
    |    value_loss           | 21.3         |
    ------------------------------------------

A block is a record: its keys become ``section/key`` columns (``train/loss`` is the loss where the
algorithm logs one: PPO, DQN), its step ``time/total_timesteps`` (else ``time/iterations``,
``time/episodes``, else the block's number). Values are printed with three significant digits.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel.analyze.loaders import LoadOptions, RunData
from sentinel.analyze.loaders.keys import inferred_loss_note, loss_column, step_column
from sentinel.analyze.loaders.numeric_table import table_steps
from sentinel.analyze.loaders.textlog import read_head_lines, read_text, run_name
from sentinel.analyze.loaders.textscan import clean_text

NAME = "sb3_console"
DESCRIPTION = "Stable-Baselines3 console blocks (| time/ |, |    total_timesteps | N |, |    loss | X |)"

MIN_BLOCKS = 3  # fewer is a quote, not a run
_RULE = re.compile(r"^\s*-{8,}\s*$")
_ROW = re.compile(r"^\s*\|\s*(\S(?:[^|]*\S)?)\s*\|\s*([^|]*?)\s*\|\s*$")
_STEP_KEYS = ("time/total_timesteps", "time/iterations", "time/episodes")
_STEP = "block"  # the step column where no step key was printed: the block's number


def sniff(path: str | Path) -> bool:
    """True for text holding SB3 logger blocks (``time/``, ``rollout/`` or ``train/`` keys).

    Example:
        >>> sniff("/nonexistent.txt")
        False
    """
    lines = read_head_lines(path, limit=64 * 1024)
    if not lines:
        return False
    blocks = _blocks(lines)
    if len(blocks) < MIN_BLOCKS:
        return False
    # Claimed without a loss too: the blocks are unmistakable, and load says which keys to pick.
    return any(key.startswith(("time/", "rollout/", "train/")) for block in blocks for key in block)


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read every SB3 logger block of a text file.

    Returns:
        One :class:`RunData`: ``loss`` and every other numeric key, indexed by step.

    Raises:
        ValueError: no block, or no loss among the keys (the message lists them).

    Example:
        >>> run = load("ppo_stdout.txt")[0]  # doctest: +SKIP
        >>> run.steps.index[:2].tolist()  # doctest: +SKIP
        [2048, 4096]
    """
    options = options or LoadOptions()
    blocks = _blocks(clean_text(read_text(path)).split("\n"))
    if not blocks:
        raise ValueError(f"{path}: no Stable-Baselines3 logger blocks found")
    table = pd.DataFrame.from_records(blocks)
    columns = list(table.columns)
    step_col = options.step_col or next((k for k in _STEP_KEYS if k in columns), None)
    if step_col is None:
        table.insert(0, _STEP, np.arange(1, len(table) + 1))
        step_col = _STEP
    else:
        step_column(columns, step_col)  # a named column the blocks lack: said here
    loss_col, inferred = loss_column(columns, options.loss_col)
    if loss_col is None:
        losses = ", ".join(c for c in columns if "loss" in c.lower()) or "none"
        raise ValueError(f"{path}: no single loss among the Stable-Baselines3 keys (loss-like: {losses}); "
                         "pass --loss-col <key>, e.g. --loss-col train/value_loss")
    warnings = [f"{Path(path).name}: {inferred_loss_note(loss_col, 'key')}"] if inferred else []
    steps = table_steps(table, step_col, loss_col, path, warnings)
    return [RunData(name=run_name(path), path=str(path), source=NAME, steps=steps,
                    meta={"format": NAME, "columns": columns}, warnings=warnings)]


def _blocks(lines: list[str]) -> list[dict[str, str]]:
    """Each complete block's ``{section/key: value text}``."""
    blocks: list[dict[str, str]] = []
    block: dict[str, str] | None = None
    section = ""
    for line in lines:
        if _RULE.match(line):
            if block:  # the closing rule of a block with rows
                blocks.append(block)
                block = None
            else:
                block, section = {}, ""
            continue
        if block is None:
            continue
        row = _ROW.match(line)
        if row is None:
            block = None  # not a logger block after all (a table of another shape)
            continue
        key, value = row.groups()
        if key.endswith("/") and not value:
            section = key
        else:
            block[section + key] = value
    return blocks
