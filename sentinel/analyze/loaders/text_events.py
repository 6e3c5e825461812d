"""The events of a text log: event lines given their step, and events raised by record fields.

Events are found after the records are merged (an event line without a step takes the step of
the next record line), so this part of the engine reads the steps frame and adds to it
(``amp/overflow`` counts, loss scales); it shares no code with the record readers.

Example:
    >>> stamp({"kind": "overflow"}, 1.5)
    {'kind': 'overflow', 'time': 1.5}
"""

from __future__ import annotations

import bisect
import math
import re

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders.amp_lines import AMP_LINES, WORDS as AMP_WORDS
from sentinel.analyze.loaders.announced_lines import ANNOUNCED_LINES, WORDS as ANNOUNCED_WORDS
from sentinel.analyze.loaders.nonfinite_lines import NONFINITE_LINES, WORDS as NONFINITE_WORDS
from sentinel.analyze.loaders.dialect_types import Dialect, EventLine, Shape
from sentinel.analyze.loaders.keys import STEP_LIMIT, scales_of_log2
from sentinel.analyze.loaders.log_lines import Lines
from sentinel.analyze.loaders.pattern_locality import line_local
from sentinel.analyze.loaders.pattern_prefix import literal_first
from sentinel.analyze.loaders.record_fields import NAN_PREFIX
from sentinel.events import EventKind, make_event


_TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:[,.](\d{1,6}))?")


def read_events(text: str, dialect: Dialect, steps: pd.DataFrame, meta: dict, warnings: list[str],
                train_steps: list[tuple[Shape, np.ndarray]] | None = None, lines: Lines | None = None
                ) -> tuple[list[dict], list[int]]:
    """Event lines, each given its own step or that of the next record line, and where each is.
    A dialect without event lines of its own reads, where it says so (:attr:`Dialect.amp_lines`),
    the mixed-precision overflow lines any script's log may hold
    (:mod:`~sentinel.analyze.loaders.amp_lines`); any dialect, the lines of a library that says the loss went
    non-finite or that it changed the loss (:mod:`~sentinel.analyze.loaders.announced_lines`). ``lines``:
    ``Lines(text)``, where made already."""
    lines = Lines.of(text, lines)
    holds = lines.holds_any
    rules = dialect.events + (AMP_LINES if dialect.amp_lines and holds(AMP_WORDS) else ()) \
        + (NONFINITE_LINES if holds(NONFINITE_WORDS) else ()) + (ANNOUNCED_LINES if holds(ANNOUNCED_WORDS) else ())
    if not rules:
        return [], []
    found = []
    claimed: list[tuple[int, int]] = []
    for rule in rules:  # earlier rules win where two describe the same lines
        if line_local(rule.pattern) and not holds((rule.pattern,)):
            continue  # no distinct line has one: most logs never print most event lines
        spans = sorted(claimed)
        for match in literal_first(rule.pattern).finditer(text):
            at = bisect.bisect_right(spans, (match.start(), math.inf)) - 1
            if at >= 0 and spans[at][1] > match.start():
                continue
            found.append((match.start(), rule, match))
            claimed.append(match.span())
            if rule.running:
                break  # non-finite from there on: the first tells it
    if not found:
        return [], []
    found.sort(key=lambda item: item[0])
    positions, record_steps = _record_positions(text, dialect, steps, train_steps or [], lines)
    # After the last record line: the step after that line's (not the largest step: a restart).
    last_step = int(record_steps[-1]) if len(record_steps) else int(steps.index[-1]) if len(steps.index) else None
    events: list[dict] = []
    at: list[int] = []
    pending = numbered = too_large = 0
    rank0 = None
    overflowed: dict[int, dict] = {}  # the iterations an overflow line names: the event of each
    for pos, rule, match in found:
        groups = {k: v for k, v in match.groupdict().items() if v is not None}
        if "rank" in groups:
            rank = int(groups["rank"])
            rank0 = rank if rank0 is None else rank0
            if rank != rank0:
                continue  # every rank reports the same overflow: count it once
        detail = line_detail(rule, groups)
        event = make_event(rule.kind, -1, line=text.count("\n", 0, pos) + 1, source=rule.source or dialect.name,
                           **detail)
        time = _timestamp(text, match.end() - 1, dialect.timestamp)
        stamp(event, time if not math.isnan(time) else _timestamp(text, pos, dialect.timestamp))
        if "step" in groups:
            event["step"] = int(groups["step"])
            if abs(event["step"]) >= STEP_LIMIT:
                too_large += 1
                continue
            if rule.kind is EventKind.OVERFLOW:
                first = overflowed.get(event["step"])
                if first is not None:  # the iteration's overflow again: each rank printing it (DeepSpeed, no rank)
                    for key, value in event.items():
                        if _missing(first.get(key)) and not _missing(value):
                            first[key] = value  # what the first line did not say (the scale set)
                    continue
                overflowed[event["step"]] = event
        else:
            nxt = int(np.searchsorted(positions, pos)) if len(positions) else 0
            if nxt > 0 and (rule.running or _the_records_nan(rule, steps, record_steps[nxt - 1], positions[nxt - 1],
                                                             text.rfind("\n", 0, pos) + 1)):
                nxt -= 1  # printed on a record line: that line's step
            if nxt < len(positions):
                event["step"] = int(record_steps[nxt])
            else:
                # With no record line, an overflow line counts a step (each skipped one); the lines that say
                # the loss went non-finite tell one failure (TensorFlow's error, each logger printing it).
                one_failure = rule.kind is EventKind.NONFINITE
                last = last_step if last_step is not None else numbered
                event["step"] = last + 1
                event["step_estimated"] = True
                pending += 1
                numbered += not one_failure
        events.append(event)
        at.append(pos)
    word = dialect.event_word or ("overflow" if rules is AMP_LINES else f"{dialect.name} event")
    if too_large:
        warnings.append(f"{too_large} {word} line(s) with a step too large for a 64-bit integer (e.g. 1e30) "
                        "were skipped")
    if pending and len(steps.index):
        warnings.append(f"{pending} {word} line(s) after the last {dialect.record_word} line were given step "
                        f"{last_step + 1}")
    elif numbered:
        warnings.append(f"no {dialect.record_word} lines: the {numbered} {word} line(s) were numbered 1, 2, 3, ... in order")
    if pending > numbered and not len(steps.index):
        warnings.append(f"no {dialect.record_word} lines: the {pending - numbered} line(s) that say the loss went "
                        "non-finite tell one failure, numbered as the step after the lines before them")
    return events, at


def _the_records_nan(rule: EventLine, steps: pd.DataFrame, step: float, record_at: int, line_at: int) -> bool:
    """Whether a line that says the loss went non-finite is the record line before it, whose own loss
    is non-finite (cryoDRGN's "# =====> Epoch: 2 ... total loss = nan": the epoch's record, not a line
    before the next one). (An overflow printed after a bar's draw on its line, the bar drawn without
    a line end, is the next step's.)"""
    if rule.kind is not EventKind.NONFINITE or rule.detail.get("metric") != metrics.LOSS or record_at < line_at:
        return False
    if metrics.LOSS not in steps.columns or step not in steps.index:
        return False
    return not np.isfinite(steps.at[step, metrics.LOSS])


def line_detail(rule: EventLine, groups: dict[str, str]) -> dict:
    """An event line's detail fields: the rule's own, the loss scales its groups print
    (``attempted``, ``new``; ``new_lg``, the new one's base-2 logarithm; ``ratio``, the factor the
    attempted one is multiplied by), its rank where the rule
    keeps it, and what it names (the operation or parameter, the value).

    Example:
        >>> from sentinel.analyze.loaders.amp_lines import AMP_LINES
        >>> line_detail(AMP_LINES[-1], {"new_lg": "19.5"})["new_scale"]
        741455.2001894653
    """
    detail = dict(rule.detail)
    for name in ("attempted", "new"):
        if name in groups:
            detail[f"{name}_scale"] = _number_or_none(groups[name])
    if "ratio" in groups and detail.get("attempted_scale") is not None:  # "decrease to: {scale}*{ratio}" (Paddle)
        ratio = _number_or_none(groups["ratio"])
        detail["new_scale"] = None if ratio is None else detail["attempted_scale"] * ratio
    if "new_lg" in groups:  # the scale's base-2 logarithm (OpenAI's diffusion trainers)
        lg = _number_or_none(groups["new_lg"])
        detail["new_scale"] = None if lg is None else float(scales_of_log2(lg))
    if rule.keep_rank and "rank" in groups:
        detail["rank"] = int(groups["rank"])
    for name in ("module", "value"):
        if name in groups:
            detail[name] = groups[name]
    return detail


def with_record_events(text: str, dialect: Dialect, parts: list[tuple[Shape, dict[str, np.ndarray]]],
                       record_steps: dict[int, np.ndarray], events: list[dict], at: list[int],
                       lines: Lines | None = None) -> list[dict]:
    """The events of :attr:`Shape.record_events`, among the event lines in text order
    (``lines``: ``Lines(text)``, where made already)."""
    found = list(zip(at, range(len(at)), events))
    for i, (shape, table) in enumerate(parts):
        if not shape.record_events:
            continue
        flagged = []
        for rule in shape.record_events:
            if rule.key not in table:
                continue
            values = table[rule.key]
            if rule.when == "positive":
                hit = values > 0
            else:
                hit = np.isinf(values) | (table.get(NAN_PREFIX + rule.key, np.zeros(len(values))) == 1.0)
            flagged.append(hit)
        if not flagged or not np.logical_or.reduce(flagged).any():
            continue
        lines = Lines.of(text, lines)
        starts = lines.starts(shape.pattern).tolist()
        steps = record_steps[i]
        if len(starts) != len(steps):  # some matches were not records (noise): no line to tell
            starts = [len(text)] * len(steps)
        for row in np.flatnonzero(np.logical_or.reduce(flagged)).tolist():
            pos = starts[row]
            line = text.count("\n", 0, pos) + 1 if pos < len(text) else None
            time = _timestamp(text, pos, dialect.timestamp) if pos < len(text) else math.nan
            for rule in shape.record_events:
                if rule.key not in table:
                    continue
                value = float(table[rule.key][row])
                if rule.when == "positive":
                    if not value > 0:
                        continue
                    detail = {"source": rule.source} if rule.source else {}
                    detail[rule.detail] = int(value)
                else:
                    logged = table.get(NAN_PREFIX + rule.key)
                    if not (math.isinf(value) or (logged is not None and logged[row] == 1.0)):
                        continue
                    detail = {"source": rule.source} if rule.source else {}
                    detail.update(metric=rule.key, value=str(value))
                event = make_event(rule.kind, int(steps[row]), line=line, **detail)
                found.append((pos, len(found), stamp(event, time)))
    found.sort(key=lambda item: (item[0], item[1]))
    return [event for _, _, event in found]


def _record_positions(text: str, dialect: Dialect, steps: pd.DataFrame,
                      train_steps: list[tuple[Shape, np.ndarray]], lines: Lines | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Where the training record lines start, and their steps, in text order (only needed when
    events exist); ``train_steps``: each training shape that has records, with the step of each
    of its records in text order. The main (first) shape's records when it has any, else those
    of every other shape that can be placed (a generic log's lines may all be of another shape)."""
    if not len(steps.index):
        return np.array([], dtype=np.int64), np.array([], dtype=np.int64)
    lines = Lines.of(text, lines)
    shape = dialect.shapes[0]
    starts = lines.starts(shape.pattern)
    placed = dict((id(s), st) for s, st in train_steps)
    record_steps = placed.get(id(shape))
    if record_steps is not None and len(record_steps) == len(starts) and not np.isnan(record_steps).any():
        return starts, record_steps.astype(np.int64)
    if not len(starts) and train_steps:
        found = [(lines.starts(s.pattern), st) for s, st in train_steps]
        found = [(at, st) for at, st in found if len(at) == len(st) and not np.isnan(st).any()]
        if found:
            at, st = np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found])
            order = np.argsort(at, kind="stable")
            return at[order], st[order].astype(np.int64)
    if len(starts) != len(steps.index) and not dialect.step_from_order:
        # Records merged by step: find each start's step by re-reading its head.
        found = []
        for m in literal_first(shape.pattern).finditer(text):
            body = m.group(1)
            for sep in shape.separators:
                body = body.replace(sep, " ")
            parts = body.split()
            found.append(_number(parts[0]) if parts else math.nan)
        steps_at = np.array(found)
        keep = ~np.isnan(steps_at)
        return starts[keep], steps_at[keep].astype(np.int64)
    return starts, steps.index.to_numpy()[: len(starts)]


def count_overflows(steps: pd.DataFrame, events: list[dict], event_rows: bool = True) -> pd.DataFrame:
    """``steps`` with ``amp/overflow`` per step and the loss scale each overflow set, from the
    event lines (``event_rows`` False: only at the steps that have a record, the loss scale as
    logged)."""
    overflow = [e for e in events if e["kind"] == EventKind.OVERFLOW.value]
    if not overflow:
        return steps
    counts = pd.Series([e["step"] for e in overflow]).value_counts()
    if event_rows:
        for step in counts.index.difference(steps.index):
            steps.loc[int(step)] = np.nan
        steps = steps.sort_index()
    steps[metrics.AMP_OVERFLOW] = counts.reindex(steps.index, fill_value=0).astype("float64")
    if not event_rows:
        return steps
    scales = {e["step"]: e["new_scale"] for e in overflow if not _missing(e.get("new_scale"))}
    if scales:
        column = steps[metrics.LOSS_SCALE] if metrics.LOSS_SCALE in steps else pd.Series(np.nan, steps.index)
        steps[metrics.LOSS_SCALE] = column.fillna(pd.Series(scales, dtype="float64"))
    return steps


def event_rows(events: list[dict]) -> pd.DataFrame:
    """A steps frame made of event lines alone (a DeepSpeed log that prints no loss)."""
    steps = pd.DataFrame(index=pd.Index(sorted({e["step"] for e in events}), dtype="int64", name=metrics.STEP))
    return count_overflows(steps, events)


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _number_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def stamp(event: dict, time: float) -> dict:
    event["time"] = time
    return event


def _timestamp(text: str, pos: int, pattern: re.Pattern | None = None) -> float:
    """The log's own time on the line at ``pos`` (NaN when it has none)."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    match = (pattern or _TIMESTAMP).search(text, start, end if end >= 0 else len(text))
    if not match:
        return math.nan
    stamp = pd.Timestamp(match.group(1).replace("T", " "))
    fraction = match.group(2) or "0"
    return stamp.timestamp() + int(fraction) / 10 ** len(fraction)
