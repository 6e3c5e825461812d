"""Loader for Megatron-LM / Megatron-DeepSpeed / NeMo stdout logs.

The training loop prints one line per logged iteration, mixed with everything else on stdout::

     iteration     7001/  159576 | consumed samples: 1 | elapsed time per iteration (ms): 9.1 |
     learning rate: 5.998E-05 | global batch size: 96 | lm loss: 2.733351E+00 |
     loss scale: 4096.0 | grad norm: 0.329 | number of skipped iterations:   0 |
     number of nan iterations:   0 |

(one line in the log). Fields come and go between versions (bf16 runs have no loss scale, a
diverged step has no lm loss), so every ``name: number`` field is read and named through
:data:`_FIELD_KEYS` or a slug of its name. NeMo 2 prints the same shape
(``Training epoch 0, iteration 10/99 | lr: ... | global_step: 10 | reduced_train_loss: ...``);
its ``global_step`` is used as the step when present.

Also read:

- ``validation loss at iteration N | lm loss value: X | lm loss PPL: Y |`` -> ``val_loss``,
  ``val_ppl`` at step N.
- DeepSpeed's ``OVERFLOW! Rank 0 Skipping step. Attempted loss scale: X, reducing to Y``
  -> an ``overflow`` event. DeepSpeed prints it inside the optimizer step of an iteration,
  before Megatron prints that iteration's line, so the event is given the step of the next
  iteration line; overflows after the last iteration line get the last step + 1 and
  ``step_estimated=True``. With a log interval > 1 the step is the end of the interval it
  happened in. ``amp/overflow`` counts them per logged step.
- ``number of skipped iterations: N`` -> ``amp/skipped_steps``; N > 0 also makes an
  ``overflow`` event (Megatron skips an update only when the fp16 grads held an Inf/NaN).
- ``number of nan iterations: N`` -> ``nan_iterations``; N > 0, or a logged ``nan``/``inf``
  loss or grad norm, makes a ``nonfinite`` event.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from pathlib import Path

import pandas as pd

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

NAME = "megatron"
DESCRIPTION = 'Megatron-LM / Megatron-DeepSpeed / NeMo stdout logs (" iteration N/M | lm loss: ... |")'

NAN_ITERATIONS = "nan_iterations"
VAL_LOSS = "val_loss"
VAL_PPL = "val_ppl"
ITER_TIME_MS = "iter_time_ms"

_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_VALIDATION = re.compile(r"\bvalidation loss at iteration\s+(\d+)\b[^|]*\|")
_FIELD = re.compile(r"^\s*([A-Za-z][^:|]*?)\s*:\s*(\S+)\s*$")
# DeepSpeed ZeRO ("OVERFLOW! Rank 0 Skipping step.") and its older fp16 optimizer
# ("fp16 dynamic loss scale overflow! Skipping step.") say the same thing.
_OVERFLOW = re.compile(
    r"overflow!\s*(?:Rank\s+(\d+)\s+)?Skipping step\.?\s*"
    r"Attempted loss scale:\s*([-+\w.]+),\s*reducing to\s*([-+\w.]+)",
    re.IGNORECASE,
)
_TIMESTAMP = re.compile(r"\[(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:[,.](\d{1,6}))?\]")
# A sniffed file must show an iteration line carrying at least one training field.
_SNIFF = re.compile(
    r"\biteration\s+\d+\s*/\s*\d+\s*\|[^\n]*?"
    r"(?:lm loss|learning rate|loss scale|grad norm|reduced_train_loss|\blr)\s*:",
)

_FIELD_KEYS = {
    "lm loss": metrics.LOSS,
    "lm_loss": metrics.LOSS,  # GPT-NeoX
    "reduced_train_loss": metrics.LOSS,
    "learning rate": metrics.LR,
    "lr": metrics.LR,
    "grad norm": metrics.GRAD_NORM_TOTAL,
    "loss scale": metrics.LOSS_SCALE,
    "number of skipped iterations": metrics.AMP_SKIPPED_STEPS,
    "number of nan iterations": NAN_ITERATIONS,
    "samples per second": metrics.SAMPLES_PER_SEC,
    "elapsed time per iteration (ms)": ITER_TIME_MS,
}
_VAL_FIELD_KEYS = {"lm loss value": VAL_LOSS, "lm loss ppl": VAL_PPL}
_SLUG = re.compile(r"[^a-z0-9]+")


def sniff(path: str | Path) -> bool:
    """True when the file holds Megatron-style iteration lines.

    Example:
        >>> sniff("/nonexistent.log")
        False
    """
    head = read_head(path)
    return head is not None and _SNIFF.search(head) is not None


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read one Megatron / Megatron-DeepSpeed / NeMo stdout log.

    Args:
        path: the log file.
        options: ``loss_col`` names another field of the iteration lines as the loss
            (as printed, e.g. ``"mtp loss"``); the step is always the iteration.

    Returns:
        One :class:`RunData`: a row per logged iteration (``loss``, ``lr``, ``grad_norm/total``,
        ``loss_scale``, ``amp/skipped_steps``, ``nan_iterations``, ``val_loss``, ...) and
        ``overflow`` / ``nonfinite`` events.

    Raises:
        ValueError: the file has no iteration line.

    Example:
        >>> runs = load("logs/train.out")  # doctest: +SKIP
        >>> runs[0].steps[["loss", "loss_scale"]].tail()  # doctest: +SKIP
    """
    parser = _Parser()
    lines, _ = read_lines(path)
    for lineno, line in enumerate(lines, start=1):
        parser.feed(lineno, line)
    parser.finish()
    if not parser.rows:
        raise ValueError(f"{path}: no Megatron iteration lines found; is this a Megatron/NeMo stdout log?")
    steps = rows_to_steps(parser.rows)
    if options is not None and options.loss_col:
        steps = _use_as_loss(steps, options.loss_col, path)
    meta = {"format": NAME, **parser.meta}
    if len(steps.index) > 1:
        meta["log_interval"] = int(steps.index.to_series().diff().median())
    return [
        RunData(
            name=run_name(path),
            path=str(path),
            source=NAME,
            steps=steps,
            events=events_frame(parser.events),
            meta=meta,
            warnings=parser.warnings,
        )
    ]


class _Parser:
    """Line-by-line state: rows by step, events, and overflows waiting for their iteration."""

    def __init__(self) -> None:
        self.rows: dict[int, dict[str, float]] = {}
        self.events: list[dict] = []
        self.warnings: list[str] = []
        self.meta: dict = {}
        self._pending: list[dict] = []
        self._overflow_rank: int | None = None
        self._overflow_counts: dict[int, float] = {}
        self._last_step: int | None = None
        self._cut_lines: list[int] = []
        self._repeated: list[int] = []
        self._seen: set[int] = set()

    def feed(self, lineno: int, line: str) -> None:
        if "|" in line:
            match = _ITERATION.search(line)
            if match:
                self._iteration(lineno, line, match)
                return
            match = _VALIDATION.search(line)
            if match:
                self._validation(line, match)
                return
        if "kipping step" in line:  # cheap pre-check before the regex
            match = _OVERFLOW.search(line)
            if match:
                self._overflow(lineno, line, match)

    def finish(self) -> None:
        if self._pending:
            # No iteration line followed: the overflow happened after the last logged one.
            step = (self._last_step if self._last_step is not None else -1) + 1
            for event in self._pending:
                event.update(step=step, step_estimated=True)
                self._overflow_counts[step] = self._overflow_counts.get(step, 0.0) + 1.0
            self.warnings.append(
                f"{len(self._pending)} overflow line(s) after the last iteration line were given step {step}"
            )
            self.events.extend(self._pending)
            self._pending = []
        if self._overflow_counts:
            for step, row in self.rows.items():
                row[metrics.AMP_OVERFLOW] = self._overflow_counts.get(step, 0.0)
        if self._cut_lines:
            self.warnings.append(
                f"{len(self._cut_lines)} iteration line(s) cut off (first at line {self._cut_lines[0]}): "
                "their last field was skipped"
            )
        if self._repeated:
            self.warnings.append(
                f"{len(self._repeated)} iteration(s) logged more than once (first: {self._repeated[0]}), "
                "e.g. after a restart: the last occurrence was kept"
            )

    def _iteration(self, lineno: int, line: str, match: re.Match) -> None:
        segments = line[match.end():].split("|")
        if segments[-1].strip():
            # A finished line ends with '|': anything after the last one was cut off.
            self._cut_lines.append(lineno)
        fields = _fields(segments[:-1], _FIELD_KEYS)
        step = int(fields.pop("global_step", int(match.group(1))))
        self.meta.setdefault("train_iters", int(match.group(2)))
        if step in self._seen:
            self._repeated.append(step)
            self.rows[step] = {k: v for k, v in self.rows[step].items() if k.startswith("val_")}
        self._seen.add(step)
        self.rows.setdefault(step, {}).update(fields)
        self._last_step = step
        for event in self._pending:
            event["step"] = step
            self._overflow_counts[step] = self._overflow_counts.get(step, 0.0) + 1.0
        self.events.extend(self._pending)
        self._pending = []

        skipped = fields.get(metrics.AMP_SKIPPED_STEPS, 0.0)
        if skipped > 0:
            self.events.append(_event(EventKind.OVERFLOW, step, line, lineno, source=NAME, skipped_iterations=int(skipped)))
        nan_iters = fields.get(NAN_ITERATIONS, 0.0)
        if nan_iters > 0:
            self.events.append(_event(EventKind.NONFINITE, step, line, lineno, source=NAME, nan_iterations=int(nan_iters)))
        for key in (metrics.LOSS, metrics.GRAD_NORM_TOTAL):
            if key in fields and is_nonfinite(fields[key]):
                self.events.append(_event(EventKind.NONFINITE, step, line, lineno, metric=key, value=str(fields[key])))

    def _validation(self, line: str, match: re.Match) -> None:
        fields = _fields(line[match.end():].split("|"), _VAL_FIELD_KEYS, prefix="val_")
        self.rows.setdefault(int(match.group(1)), {}).update(fields)

    def _overflow(self, lineno: int, line: str, match: re.Match) -> None:
        rank = int(match.group(1)) if match.group(1) is not None else None
        if self._overflow_rank is None:
            self._overflow_rank = rank
        elif rank != self._overflow_rank:
            return  # several ranks report the same overflow: count it once
        event = _event(
            EventKind.OVERFLOW, -1, line, lineno, source="deepspeed",
            attempted_scale=parse_number(match.group(2)), new_scale=parse_number(match.group(3)),
        )
        if rank is not None:
            event["rank"] = rank
        self._pending.append(event)


def _fields(segments: list[str], known: dict[str, str], prefix: str = "") -> dict[str, float]:
    """Parse ``name: number`` segments into metric keys; other segments are ignored."""
    out: dict[str, float] = {}
    for segment in segments:
        match = _FIELD.match(segment)
        if not match:
            continue
        value = parse_number(match.group(2))
        if value is None:
            continue
        name = match.group(1).strip().lower()
        if name == "elapsed time per iteration (s)":
            name, value = "elapsed time per iteration (ms)", value * 1000.0
        out[_field_key(name, known, prefix)] = value
    return out


def _use_as_loss(steps: pd.DataFrame, field: str, path: str | Path) -> pd.DataFrame:
    """The column of the field the user named (``--loss-col``) becomes ``loss``."""
    key = field if field in steps.columns else _field_key(field.strip().lower(), _FIELD_KEYS, "")
    if key == metrics.LOSS:
        return steps
    if key not in steps.columns:
        raise ValueError(f"{path}: no field {field!r} on the iteration lines; --loss-col takes a field as "
                         "printed (e.g. 'lm loss') or one of: "
                         + ", ".join(c for c in steps.columns))
    return steps.drop(columns=[metrics.LOSS], errors="ignore").rename(columns={key: metrics.LOSS})


def _field_key(name: str, known: dict[str, str], prefix: str) -> str:
    """Name a field: a known Megatron name, a key sentinel knows, else a slug of the name."""
    if name in known:
        return known[name]
    if name == "global_step" or prefix:
        return prefix + _SLUG.sub("_", name).strip("_")
    canonical = canonical_key(name)
    # Other losses on the line (MoE load balancing, MTP) are not the training loss.
    if canonical != name and canonical != metrics.LOSS:
        return canonical
    return _SLUG.sub("_", name).strip("_")


def _event(kind: EventKind, step: int, line: str, lineno: int, **detail) -> dict:
    """An event stamped with the log's own time when the line has one (else NaN)."""
    event = make_event(kind, step, line=lineno, **detail)
    event["time"] = _timestamp(line)
    return event


def _timestamp(line: str) -> float:
    match = _TIMESTAMP.search(line)
    if not match:
        return math.nan
    stamp = dt.datetime.fromisoformat(match.group(1).replace("T", " "))
    fraction = match.group(2) or "0"
    return stamp.timestamp() + int(fraction) / 10 ** len(fraction)
