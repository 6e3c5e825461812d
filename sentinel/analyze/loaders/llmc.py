"""Loader for llm.c and modded-nanogpt text logs.

Two line shapes, each ``key:value`` tokens after a step:

- llm.c ``main.log`` (and early modded-nanogpt): ``s:120 trl:5.4321 lr:0.000600 norm:1.23``
  for a training step and ``s:250 tel:4.9876`` for a validation point.
- modded-nanogpt: ``step:120/3000 train_loss:5.4321 train_time:41873ms step_avg:349.0ms`` and
  ``step:125/3000 val_loss:4.9876 train_time:...``.

Keys: ``trl``/``train_loss`` -> ``loss``, ``tel``/``val_loss`` -> ``val_loss``, ``lr`` ->
``lr``, ``norm`` -> ``grad_norm/total``; times with a unit (``41873ms``, ``1.2s``) become
``<name>_ms``; anything else keeps its name through :func:`canonical_key`. Everything else
in the file (a training script printed first, nvidia-smi output) is ignored. A logged
``nan``/``inf`` loss or grad norm makes a ``nonfinite`` event.
"""

from __future__ import annotations

import re
from pathlib import Path

from sentinel import metrics
from sentinel.analyze.loaders import LoadOptions, RunData
from sentinel.analyze.loaders.keys import canonical_key
from sentinel.analyze.loaders.textlog import (
    events_frame,
    is_nonfinite,
    parse_number,
    read_head,
    read_lines,
    rows_to_steps,
    run_name,
)
from sentinel.events import EventKind, make_event

NAME = "llmc"
DESCRIPTION = 'llm.c / modded-nanogpt logs ("s:N trl:X", "step:N/M train_loss:X")'

VAL_LOSS = "val_loss"

_LLMC_LINE = re.compile(r"^\s*s:(\d+)((?:\s+[A-Za-z_]\w*:\S+)+)\s*$")
_NANOGPT_LINE = re.compile(r"^\s*step:(\d+)/(\d+)((?:\s+[A-Za-z_]\w*:\S+)+)\s*$")
_TOKEN = re.compile(r"([A-Za-z_]\w*):(\S+)")
_VALUE = re.compile(r"^(.*?)(ms|s)?$")
_TOKEN_KEYS = {
    "trl": metrics.LOSS,
    "train_loss": metrics.LOSS,
    "tel": VAL_LOSS,
    "val_loss": VAL_LOSS,
    "lr": metrics.LR,
    "norm": metrics.GRAD_NORM_TOTAL,
}
# The line must carry a loss: a bare "step:5/100 train_time:..." alone is not enough to claim a file.
_LOSS_TOKENS = re.compile(r"\b(?:trl|tel|train_loss|val_loss):")


def sniff(path: str | Path) -> bool:
    """True when the file has llm.c (``s:N trl:X``) or modded-nanogpt (``step:N/M train_loss:X``) lines.

    Example:
        >>> sniff("/nonexistent.log")
        False
    """
    head = read_head(path)
    if head is None:
        return False
    for line in head.split("\n"):
        if _LOSS_TOKENS.search(line) and (_LLMC_LINE.match(line) or _NANOGPT_LINE.match(line)):
            return True
    return False


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read one llm.c / modded-nanogpt log.

    Args:
        path: the log file.
        options: unused; the tokens of these logs have fixed names.

    Returns:
        One :class:`RunData` with a row per step (``loss``, ``lr``, ``grad_norm/total``,
        ``val_loss``, ...; a step with both a train and a val line has both).

    Raises:
        ValueError: the file has no step line.

    Example:
        >>> run = load("records/llmc/main.log")[0]  # doctest: +SKIP
        >>> run.steps["loss"].count()  # doctest: +SKIP
        19560
    """
    del options
    lines, last_complete = read_lines(path)
    warnings: list[str] = []
    if not last_complete and lines:
        # A cut line still parses ("trl:3.2" from "trl:3.2217"), so it cannot be trusted.
        warnings.append(f"last line {len(lines)} has no line end (cut off while written?): skipped")
        lines = lines[:-1]
    rows: dict[int, dict[str, float]] = {}
    events: list[dict] = []
    meta: dict = {"format": NAME}
    bad_tokens = 0
    for lineno, line in enumerate(lines, start=1):
        if ":" not in line:
            continue
        match = _LLMC_LINE.match(line)
        if match:
            step, tokens = int(match.group(1)), match.group(2)
        else:
            match = _NANOGPT_LINE.match(line)
            if not match:
                continue
            step, tokens = int(match.group(1)), match.group(3)
            meta.setdefault("train_steps", int(match.group(2)))
        fields, bad = _parse_tokens(tokens)
        bad_tokens += bad
        rows.setdefault(step, {}).update(fields)
        for key in (metrics.LOSS, metrics.GRAD_NORM_TOTAL):
            if key in fields and is_nonfinite(fields[key]):
                events.append(make_event(EventKind.NONFINITE, step, metric=key, value=str(fields[key]), line=lineno))
    if not rows:
        raise ValueError(f"{path}: no llm.c ('s:N trl:X') or modded-nanogpt ('step:N/M train_loss:X') lines found")
    if bad_tokens:
        warnings.append(f"{bad_tokens} token(s) with a value that is not a number were skipped")
    steps = rows_to_steps(rows)
    if metrics.LOSS not in steps.columns:
        warnings.append("no training-loss lines: only validation points were found")
        steps.insert(0, metrics.LOSS, float("nan"))
    for event in events:
        event["time"] = float("nan")  # these logs carry no wall-clock time
    return [
        RunData(
            name=run_name(path),
            path=str(path),
            source=NAME,
            steps=steps,
            events=events_frame(events),
            meta=meta,
            warnings=warnings,
        )
    ]


def _parse_tokens(tokens: str) -> tuple[dict[str, float], int]:
    """``trl:3.2 lr:0.0006 train_time:41873ms`` -> keys and values, and how many were not numbers."""
    fields: dict[str, float] = {}
    bad = 0
    for name, raw in _TOKEN.findall(tokens):
        text, unit = _VALUE.match(raw).groups()
        value = parse_number(text)
        if value is None:
            # "step_avg:nanms" is a number; "0.5x" or "ok" is not.
            bad += 1
            continue
        if unit:
            fields[f"{name.lower()}_ms"] = value * (1000.0 if unit == "s" else 1.0)
        else:
            fields[_TOKEN_KEYS.get(name, canonical_key(name))] = value
    return fields, bad
