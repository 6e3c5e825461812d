"""Loader for the console blocks of the logger OpenAI's baselines made, as Stable-Baselines3
prints them (its ``HumanOutputFormat``) and as baselines' own copies do (Stable-Baselines 2, Spinning
Up, guided-diffusion, improved-diffusion, consistency models).

Each time the logger is dumped it prints one block of ``| key | value |`` rows between dashed
lines. Stable-Baselines3 puts a section (``rollout/``, ``time/``, ``train/``) on a row of its own
before its keys; baselines' copies print the keys alone:

    ------------------------------------------        -----------------------------
    | rollout/                |              |        | lg_loss_scale | 20.1      |
    |    ep_rew_mean          | -1.19e+03    |        | loss          | 0.0456    |
    | time/                   |              |        | samples       | 3.92e+07  |
    |    total_timesteps      | 4096         |        | step          | 1.53e+05  |
    | train/                  |              |        -----------------------------
    |    loss                 | 10.5         |        Found NaN, decreased lg_loss_scale to 19.1
    ------------------------------------------

A block is a record: its keys become ``section/key`` columns (``train/loss`` is the loss where the
algorithm logs one: PPO, DQN), its step ``time/total_timesteps`` (else ``time/iterations``,
``time/episodes``), or baselines' ``step``, ``total_timesteps``, ... (else the block's number).
Values are printed with three significant digits, steps too in baselines' copies (``1.53e+05``):
where blocks print the same rounded step, the steps are taken from the interval the exact ones
show (``0``, ``10``, ..., ``990``), else spread evenly up to the next printed step, with a
warning. ``lg_loss_scale`` is the loss scale's base-2 logarithm. The lines between blocks that
report an fp16 overflow (guided-diffusion's ``Found NaN, decreased lg_loss_scale to X``, apex's)
or a loss gone non-finite are events of the next block's step.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN, LoadOptions, RunData
from sentinel.analyze.loaders.amp_lines import AMP_LINES
from sentinel.analyze.loaders.crash_tail import TRACEBACK, crash_after
from sentinel.analyze.loaders.keys import (
    LOG2_LOSS_SCALE_KEYS,
    SB3_STEP,
    below_smallest_note,
    canonical_key,
    find_column,
    inferred_loss_note,
    looks_like_loss,
    loss_column,
    step_column,
)
from sentinel.analyze.loaders.nonfinite_lines import NONFINITE_LINES
from sentinel.analyze.loaders.numeric_table import table_steps
from sentinel.analyze.loaders.text_events import count_overflows, line_detail, stamp
from sentinel.analyze.loaders.textlog import events_frame, read_head, read_head_lines, read_text, run_name
from sentinel.analyze.loaders.textscan import clean_text
from sentinel.events import make_event

NAME = "sb3_console"
BASELINES = "baselines_logger"  # the source of blocks without sections
DESCRIPTION = ("Stable-Baselines3 console blocks (| time/ |, |    total_timesteps | N |, |    loss | X |) and "
               "OpenAI baselines' logger blocks (Stable-Baselines 2, guided-diffusion: | step | 1.53e+05 |)")

MIN_BLOCKS = 3  # fewer is a quote, not a run (a file named on its own is read from one)
_RULE = re.compile(r"^\s*-{8,}\s*$")
_ROW = re.compile(r"^\s*\|\s*(\S(?:[^|]*\S)?)\s*\|\s*([^|]*?)\s*\|\s*$")
_STEP_KEYS = (SB3_STEP, "time/iterations", "time/episodes")
# baselines' copies, in order of preference: the environment's steps (Stable-Baselines 2, baselines'
# ppo2 and ddpg, Spinning Up), a trainer's step (guided-diffusion), then updates and epochs.
_BASELINES_STEP_KEYS = ("total_timesteps", "misc/total_timesteps", "total/steps", "TotalEnvInteracts",
                        "TimestepsSoFar", "step", "steps", "serial_timesteps", "nupdates", "misc/nupdates",
                        "Epoch", "epoch")
_STEP = "block"  # the step column where no step key was printed: the block's number
_EVENT_LINES = AMP_LINES + NONFINITE_LINES
_EVENT_WORDS = ("verflow", "VERFLOW", "lg_loss_scale", "nan", "NaN", "inf")
_SIGNIFICANT = 3  # the digits "%-8.3g" prints
_HEAD = 64 * 1024  # the bytes a sniff reads
_DASHES = "-" * 8  # the shortest rule


def sniff(path: str | Path, least: int = MIN_BLOCKS) -> bool:
    """True for text holding ``least`` logger blocks or more: Stable-Baselines3's (``time/``,
    ``rollout/`` or ``train/`` keys), or baselines' (a step key or a loss among mostly numbers).

    Example:
        >>> sniff("/nonexistent.txt")
        False
    """
    return claims(head_blocks(path), least)


def head_blocks(path: str | Path) -> list[dict[str, str]]:
    """The complete logger blocks in the file's head (none where it has no dashed rule).

    Example:
        >>> head_blocks("/nonexistent.txt")
        []
    """
    head = read_head(path, limit=_HEAD)
    if not head or _DASHES not in head:  # one substring search: most texts stop here
        return []
    return [block for block, _ in _blocks(read_head_lines(path, limit=_HEAD))]


def claims(blocks: list[dict[str, str]], least: int = MIN_BLOCKS) -> bool:
    """Whether ``least`` or more blocks are a logger's (see :func:`sniff`).

    Example:
        >>> claims([{"loss": "0.5", "step": "10"}], least=1), claims([{"name": "resnet", "depth": "50"}], least=1)
        (True, False)
    """
    if len(blocks) < least:
        return False
    # Claimed without a loss too: the blocks are unmistakable, and load says which keys to pick.
    return any(key.startswith(("time/", "rollout/", "train/")) for block in blocks for key in block) \
        or all(_baselines_block(block) for block in blocks)


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read every logger block of a text file, and the overflow and non-finite lines between them.

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
    lines = clean_text(read_text(path)).split("\n")
    found = _blocks(lines)
    if not found:
        raise ValueError(f"{path}: no logger blocks found (| key | value | rows between dashed lines)")
    blocks = [block for block, _ in found]
    table = pd.DataFrame.from_records(blocks)
    columns = list(table.columns)
    sectioned = any("/" in str(c) and str(c).split("/", 1)[0] in ("time", "rollout", "train") for c in columns)
    name = Path(path).name
    warnings: list[str] = []
    step_col = options.step_col or (next((k for k in _STEP_KEYS if k in columns), None) if sectioned else
                                    find_column(columns, _BASELINES_STEP_KEYS))
    if step_col is None:
        table.insert(0, _STEP, np.arange(1, len(table) + 1))
        step_col = _STEP
    else:
        step_column(columns, step_col)  # a named column the blocks lack: said here
        table[step_col] = _unrounded(table[step_col], name, step_col, warnings)
    loss_col, inferred = loss_column(columns, options.loss_col)
    if loss_col is None:
        losses = [c for c in columns if "loss" in str(c).lower()]
        example = next((c for c in losses if "value" in str(c).lower()), losses[0] if losses else "train/value_loss")
        keys = "the Stable-Baselines3 keys" if sectioned else "the logger's keys"
        raise ValueError(f"{path}: no single loss among {keys} (loss-like: {', '.join(losses) or 'none'}); "
                         f"pass --loss-col <key>, e.g. --loss-col {example}")
    if inferred:
        warnings.append(f"{name}: {inferred_loss_note(loss_col, 'key')}")
    steps = table_steps(table, step_col, loss_col, path, warnings)
    events = _events(lines, [end for _, end in found], table[step_col], steps, name, warnings)
    steps = count_overflows(steps, events)
    source = NAME if sectioned else BASELINES
    meta = {"format": source, "columns": columns, "blocks": len(blocks),
            LOGGED_NAN: _printed_nan(table, step_col, loss_col, steps.columns)}
    if len(steps.index):  # a traceback, or the shell's "Killed", after the last block: the run stopped there
        text = "\n".join(lines)
        after = sum(len(line) + 1 for line in lines[:found[-1][1] + 1])
        nonfinite = any(event.get("kind") == "nonfinite" for event in events)
        crash = crash_after(text, text.find(TRACEBACK, after), int(steps.index[-1]), nonfinite)
        if crash is not None:
            meta["crash"] = crash
    return [RunData(name=run_name(path), path=str(path), source=source, steps=steps, events=events_frame(events),
                    meta=meta, warnings=warnings)]


def _printed_nan(table: pd.DataFrame, step_col: str, loss_col: str, keys) -> dict[str, list[int]]:
    """``{key: steps whose block printed it as nan}``: a block prints each value it has, so a key
    a block lacks (guided-diffusion's grad_norm on a step that overflowed) is not a NaN."""
    at = pd.to_numeric(table[step_col], errors="coerce")
    found: dict[str, list[int]] = {}
    for col in table.columns:
        key = metrics.LOSS if col == loss_col else _key(str(col))
        if col == step_col or key not in keys:
            continue
        nan = table[col].astype("string").str.strip().str.lower().eq("nan").fillna(False).to_numpy()
        if nan.any():
            found[key] = at[nan].dropna().astype("int64").tolist()
    return found


def _key(col: str) -> str:
    """The key :func:`table_steps` reads a column under."""
    key = canonical_key(col)
    return metrics.LOSS_SCALE if key in LOG2_LOSS_SCALE_KEYS else key


def _baselines_block(block: dict[str, str]) -> bool:
    """Whether a block without sections is a logger's: two rows or more, most of them numbers,
    and a step key or a loss among them (a table of settings is none)."""
    numbers = sum(_is_number(value) for value in block.values())
    return len(block) >= 2 and numbers * 2 > len(block) and (
        find_column(block, _BASELINES_STEP_KEYS) is not None or any(looks_like_loss(key) for key in block))


def _is_number(text: str) -> bool:
    return not np.isnan(_number(text)) or text.strip().lower() == "nan"


def _unrounded(printed: pd.Series, name: str, column: str, warnings: list[str]) -> pd.Series:
    """The steps of blocks whose step is printed to three significant digits (``1.53e+05``):
    where consecutive blocks print the same step, the exact steps' interval (``0``, ``10``, ...,
    ``990`` in a log kept from the start) where it gives each block's printed value, else each
    block that repeats a step spread evenly over the steps its value stands for; as printed
    otherwise.

    Example:
        >>> w = []
        >>> _unrounded(pd.Series(["980", "990", "1e+03", "1.01e+03", "1.02e+03"]), "log.txt", "step", w).tolist()
        [980.0, 990.0, 1000.0, 1010.0, 1020.0]
        >>> _unrounded(pd.Series(["1.53e+05", "1.53e+05", "1.54e+05", "1.54e+05"]), "log.txt", "step", w).tolist()
        [153000.0, 153250.0, 153500.0, 153750.0]
    """
    values = pd.to_numeric(printed, errors="coerce").to_numpy(dtype="float64")
    text = printed.astype("string").fillna("")
    rounded = text.str.contains("e", case=False).to_numpy()
    if not rounded.any():
        return printed
    with np.errstate(invalid="ignore"):
        repeats = int((values[1:] == values[:-1]).sum())
    spaced = _from_interval(values, ~rounded & ~np.isnan(values))
    if spaced is not None:  # every block's step rounds to what it printed
        if repeats:
            warnings.append(f"{name}: {column!r} is printed to {_SIGNIFICANT} significant digits ({repeats} "
                            f"block(s) repeat the one before): read from the interval of the exact ones, "
                            f"{int(spaced[1] - spaced[0]) if len(spaced) > 1 else 0}")
        return pd.Series(spaced, index=printed.index)
    if not repeats:
        warnings.append(f"{name}: {column!r} is printed to {_SIGNIFICANT} significant digits "
                        f"({text[rounded].iloc[0]}): the steps are read as printed, near the steps they stand for")
        return printed
    spread = values.copy()
    groups = _runs_of_equal(values)
    # A rounded step stands for the steps nearer to it than to the next one printed: the blocks
    # of a step printed again and again are spread between the midpoints with their neighbours.
    paces = []
    for number, (start, end) in enumerate(groups[:-1]):
        low = values[start] if number == 0 else (values[groups[number - 1][0]] + values[start]) / 2
        high = (values[start] + values[end]) / 2
        if end - start > 1 and high - low >= end - start:
            pace = (high - low) / (end - start)
            spread[start:end] = np.ceil(low + np.arange(end - start) * pace)
            paces.append(pace)
    start, end = groups[-1]
    if end - start > 1:  # the last step printed: from its midpoint, at the pace of the blocks before
        low = values[start] if len(groups) == 1 else np.ceil((values[groups[-2][0]] + values[start]) / 2)
        spread[start:end] = low + np.floor(np.arange(end - start) * (float(np.median(paces)) if paces else 1.0))
    warnings.append(f"{name}: {column!r} is printed to {_SIGNIFICANT} significant digits ({repeats} block(s) "
                    "repeat the one before): the blocks between two printed steps are spread evenly")
    return pd.Series(spread, index=printed.index)


def _runs_of_equal(values: np.ndarray) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of equal consecutive values.

    Example:
        >>> _runs_of_equal(np.array([1.0, 2.0, 2.0, 3.0]))
        [(0, 1), (1, 3), (3, 4)]
    """
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    return list(zip(starts.tolist(), np.r_[starts[1:], len(values)].tolist()))


def _from_interval(values: np.ndarray, exact: np.ndarray) -> np.ndarray | None:
    """Every block's step as the first exact step plus the exact blocks' interval per block,
    where each rounds to what its block printed; None otherwise (too few exact steps, a gap)."""
    first = np.flatnonzero(exact)
    if len(first) < 2 or not exact[first[0]:first[0] + 2].all():
        return None
    at = first[0]
    interval = values[at + 1] - values[at]
    if not interval > 0:
        return None
    steps = values[at] + (np.arange(len(values)) - at) * interval
    return steps if bool(np.all(_rounded(steps) == values)) else None


def _rounded(steps: np.ndarray) -> np.ndarray:
    """``steps`` as "%.3g" prints them, read back."""
    return np.array([float(f"{step:.{_SIGNIFICANT}g}") for step in steps])


def _events(lines: list[str], ends: list[int], block_steps: pd.Series, steps: pd.DataFrame, name: str,
            warnings: list[str]) -> list[dict]:
    """The overflow and non-finite lines outside the blocks, each of the step of the block after
    it, or the step after the last block's (the training stopped there)."""
    events: list[dict] = []
    at_step = pd.to_numeric(block_steps, errors="coerce").to_numpy(dtype="float64")
    last = int(steps.index[-1]) if len(steps.index) else 0
    after_last = 0
    block = 0
    lowered: list[float] = []  # the base-2 logarithms of the scales the lines set
    for number, line in enumerate(lines, start=1):
        while block < len(ends) and ends[block] < number - 1:
            block += 1
        if not any(word in line for word in _EVENT_WORDS):
            continue
        for rule in _EVENT_LINES:
            match = rule.pattern.search(line)
            if match is None:
                continue
            groups = {k: v for k, v in match.groupdict().items() if v is not None}
            detail = line_detail(rule, groups)
            if "new_lg" in groups:
                lowered.append(_number(groups["new_lg"]))
            if block < len(ends) and not np.isnan(at_step[block]):
                step = int(at_step[block])
            else:
                step, detail["step_estimated"] = last + 1, True
                after_last += 1
            event = make_event(rule.kind, step, line=number, source=rule.source or BASELINES, **detail)
            events.append(stamp(event, np.nan))  # the lines carry no time
            break
    if after_last:
        warnings.append(f"{name}: {after_last} line(s) after the last block were given step {last + 1}")
    note = below_smallest_note(lowered, "the lg_loss_scale its lines set") if lowered else None
    if note is not None:
        warnings.append(f"{name}: {note}")
    return events


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return np.nan


def _blocks(lines: list[str]) -> list[tuple[dict[str, str], int]]:
    """Each complete block's ``{section/key: value text}`` and the index of its closing line (the
    text's first lines are a block where they are rows up to a rule: a paste that starts inside one).

    Example:
        >>> _blocks(["| loss | 0.5 |", "| step | 10   |", "-" * 16, "Found NaN"])
        [({'loss': '0.5', 'step': '10'}, 2)]
    """
    blocks: list[tuple[dict[str, str], int]] = []
    block: dict[str, str] | None = {}  # rows before any rule: a block whose top rule a paste cut off
    section = ""
    for index, line in enumerate(lines):
        if block == {} and not blocks and not line.strip():
            continue  # blank lines before a paste's first row
        if _RULE.match(line):
            if block:  # the closing rule of a block with rows
                blocks.append((block, index))
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
