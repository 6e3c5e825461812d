"""The line-scanning engine behind every text-log dialect.

A dialect (:mod:`sentinel.analyze.loaders.dialects`) says how a record line is recognised and
how its fields are named; this module turns a whole log into a steps frame and events with no
per-tool code. The work is done over the whole text at once, so a 20,000-step log costs a few
C-level passes, not 20,000 rounds of Python:

1. clean the text: ANSI colour codes, ``\\r`` progress-bar redraws and ``> `` markdown quoting
   (logs pasted into GitHub issues) are removed;
2. ``Shape.pattern.findall`` picks the body of every record line (the step and the fields);
3. the bodies are joined, the shape's separator strings become spaces, and pandas' C parser
   splits them into a table: the shape's ``head`` fields first, then ``key value`` pairs;
4. each pair column is converted to numbers in one vectorised pass (pyarrow), units such as
   ``41873ms`` / ``1.2s`` becoming ``<key>_ms``;
5. records of the same step merge; events (overflow lines) are found with their own patterns
   and given the step they belong to.

Example:
    >>> from sentinel.analyze.loaders.dialects import NANOGPT
    >>> scan("iter 1: loss 2.5, time 9.1ms, mfu 1.0%\\niter 2: loss 2.4, time 9.0ms, mfu 1.0%\\n",
    ...      NANOGPT).steps["loss"].tolist()
    [2.5, 2.4]
"""

from __future__ import annotations

import bisect
import csv
import io
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from sentinel import metrics
from sentinel.analyze.loaders import LoadOptions
from sentinel.analyze.loaders.keys import canonical_key
from sentinel.analyze.loaders.textlog import events_frame, order_columns
from sentinel.events import EventKind, make_event

# The most fields one record line may have; longer lines are skipped with a warning.
MAX_FIELDS = 96

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+", re.MULTILINE)
_NUMBER = r"^[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf|infinity))$"
_KEY = r"^[A-Za-z_][\w./()%-]*$"
_SLUG = re.compile(r"[^a-z0-9/]+")
_TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:[,.](\d{1,6}))?")


@dataclass(frozen=True)
class Shape:
    """One kind of record line.

    Attributes:
        pattern: a regex (``re.MULTILINE``) whose first group is the record body: the ``head``
            fields, then ``key value`` pairs once ``separators`` are spaces.
        head: names of the leading fields of the body: ``step``, ``total`` (steps in the run),
            ``epoch``, ``iter`` (iteration inside the epoch), ``_`` (ignored).
        separators: strings turned into spaces before splitting (``":"``, ``"="``, ``","``, ``"|"``).
        keys: the tool's key (lower case) -> sentinel's metric key; others go through
            :func:`~sentinel.analyze.loaders.keys.canonical_key` (never to ``loss``: a loss-like
            key the dialect does not name is another loss, e.g. ``nll_loss``).
        prefix: put before every key of this shape (``val_`` for validation lines).
        require: a key a record must have to count (HF ``loss``); records without it are dropped.
        fills: True for summary lines (fairseq's end of epoch): they only fill values missing
            at their step, never replace a per-step value.
        units: value suffix -> (key suffix, factor), e.g. ``{"ms": ("_ms", 1.0)}``.
        strict: every key must look like an identifier and have a number, else the line is noise.
        scrub: ``(pattern, replacement)`` applied to the bodies first (values that hold a
            separator, e.g. mmengine's ``eta: 1 day, 2:03:04``).
    """

    pattern: re.Pattern
    head: tuple[str, ...] = (metrics.STEP,)
    separators: tuple[str, ...] = (":",)
    keys: Mapping[str, str] = field(default_factory=dict)
    prefix: str = ""
    require: str | None = None
    fills: bool = False
    units: Mapping[str, tuple[str, float]] = field(default_factory=dict)
    strict: bool = False
    scrub: tuple[re.Pattern, str] | None = None


_HEAD_ROLES = frozenset({metrics.STEP, "total", "epoch", "iter"})


@dataclass(frozen=True)
class EventLine:
    """A line that reports an event rather than a step (an fp16 overflow, a loss-scale change).

    Attributes:
        pattern: regex with optional named groups ``step`` (else the event belongs to the next
            record line), ``attempted`` / ``new`` (loss scales) and ``rank``.
        kind: the event kind.
        source: the tool that printed it (``deepspeed``, ``fairseq``).
        detail: fixed detail fields added to the event.
    """

    pattern: re.Pattern
    kind: EventKind = EventKind.OVERFLOW
    source: str = ""
    detail: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Dialect:
    """How one tool's text log is read: its record shapes, event lines and step rule.

    Attributes:
        name: short name, also ``RunData.source``.
        description: for error messages and the README table.
        shapes: record shapes, the first one is the main training line.
        events: event lines.
        step_key: a field that is the step when present (``num_updates``, ``global_step``).
        step_from_order: records carry no step: number them 1, 2, 3 (HF Trainer dicts).
        min_records: record lines the sniffer must see before it claims a file.
        drop_cut_line: the last line without a line end is not trusted (``3.2`` of ``3.2217``).
        warn_bad_values: say how many values were not numbers.
        sniff: what the sniffer counts instead of the record shapes (e.g. lines with a loss).
    """

    name: str
    description: str
    shapes: tuple[Shape, ...]
    events: tuple[EventLine, ...] = ()
    step_key: str | None = None
    step_from_order: bool = False
    min_records: int = 3
    drop_cut_line: bool = True
    warn_bad_values: bool = False
    sniff: re.Pattern | None = None


@dataclass
class Scan:
    """What :func:`scan` found: the steps frame, events, meta and warnings."""

    steps: pd.DataFrame
    events: pd.DataFrame
    meta: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def clean_text(text: str) -> str:
    """Remove what terminals and issue trackers add: ANSI codes, ``\\r`` redraws, ``> `` quoting.

    Example:
        >>> clean_text("> \\x1b[31mstep: 1\\x1b[0m loss: 2\\r\\n")
        'step: 1 loss: 2\\n'
    """
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\x08" in text:
        text = text.replace("\x08", "")
    if ">" in text and _QUOTE.search(text[: 1 << 16]):
        text = _QUOTE.sub("", text)
    return text


def count_records(text: str, dialect: Dialect) -> int:
    """How many record lines of ``dialect`` the text has (for sniffing).

    Example:
        >>> from sentinel.analyze.loaders.dialects import NANOGPT
        >>> count_records("iter 1: loss 2.5, time 9.1ms\\n", NANOGPT)
        1
    """
    if dialect.sniff is not None:
        return len(dialect.sniff.findall(text))
    return sum(len(shape.pattern.findall(text)) for shape in dialect.shapes)


def scan(text: str, dialect: Dialect, options: LoadOptions | None = None) -> Scan:
    """Read a whole log text with one dialect.

    Args:
        text: the file's text (decoded).
        dialect: how its lines are recognised and named.
        options: ``loss_col`` / ``step_col``: a key of the log to use as the loss / the step.

    Returns:
        A :class:`Scan`; its steps frame is empty when no record line was found.

    Raises:
        ValueError: ``options`` name a key that no record line has (the message lists the keys).

    Example:
        >>> from sentinel.analyze.loaders.dialects import TORCHTITAN
        >>> scan("step:  1  loss:  9.5  grad_norm:  1.2\\n", TORCHTITAN).steps["grad_norm/total"].tolist()
        [1.2]
    """
    options = options or LoadOptions()
    warnings: list[str] = []
    if dialect.drop_cut_line and text and not text.endswith("\n"):
        cut = text.rfind("\n") + 1
        warnings.append(f"last line {text.count(chr(10)) + 1} has no line end (cut off while written?): skipped")
        text = text[:cut]
    text = clean_text(text)
    parts: list[tuple[Shape, pd.DataFrame]] = []
    seen_keys: set[str] = set()
    bad = 0
    for shape in dialect.shapes:
        table, shape_bad, keys = _read_shape(text, shape, dialect, options, warnings)
        bad += shape_bad
        seen_keys |= keys
        if len(table):
            parts.append((shape, table))
    for wanted in (options.loss_col, options.step_col):
        if parts and wanted is not None and wanted.lower() not in seen_keys:
            raise ValueError(f"key {wanted!r} not found in the {dialect.name} log lines; keys found: "
                             f"{', '.join(sorted(seen_keys))}")
    meta: dict = {"format": dialect.name}
    steps, logged_nan = _merge(parts, dialect, meta, warnings)
    events = _events(text, dialect, steps, meta, warnings)
    for key in (metrics.LOSS, metrics.GRAD_NORM_TOTAL):
        if key in steps.columns:
            flagged = np.isinf(steps[key].to_numpy()) | logged_nan.get(key, np.zeros(len(steps), dtype=bool))
            for step in steps.index[flagged]:
                events.append(_stamp(make_event(EventKind.NONFINITE, int(step), metric=key,
                                                value=str(steps.at[step, key])), math.nan))
    if events and len(steps.index):
        _count_overflows(steps, events)
    elif events:
        steps = _event_rows(events)
    if bad and dialect.warn_bad_values:
        warnings.append(f"{bad} token(s) with a value that is not a number were skipped")
    return Scan(steps=order_columns(steps), events=events_frame(events), meta=meta, warnings=warnings)


# --------------------------------------------------------------------------- records


def _read_shape(text: str, shape: Shape, dialect: Dialect, options: LoadOptions,
                warnings: list[str]) -> tuple[pd.DataFrame, int, set[str]]:
    """One shape's records as a frame (``_pos`` = record order, head fields, metric columns)."""
    bodies = shape.pattern.findall(text)
    if not bodies:
        return pd.DataFrame(), 0, set()
    if isinstance(bodies[0], tuple):
        bodies = [" ".join(b) for b in bodies]
    joined = "\n".join(bodies)
    if shape.scrub is not None and shape.scrub[0].search(joined):
        joined = shape.scrub[0].sub(shape.scrub[1], joined)
    for sep in shape.separators:
        joined = joined.replace(sep, " ")
    width = min(MAX_FIELDS, _widest(bodies, joined) + 2)
    raw = pd.read_csv(io.StringIO(joined), sep=r"\s+", header=None, names=range(width), engine="c",
                      quoting=csv.QUOTE_NONE, keep_default_na=False, na_values=[""], index_col=False,
                      on_bad_lines="skip", dtype=object, skip_blank_lines=False)
    if len(raw) != len(bodies):
        warnings.append(f"{len(bodies) - len(raw)} {dialect.name} line(s) with more than {width} fields were skipped")
    n = len(raw)
    ok = np.ones(n, dtype=bool)
    out: dict[str, np.ndarray] = {"_pos": np.arange(n, dtype=np.int64)}
    for i, name in enumerate(shape.head):
        if name in _HEAD_ROLES:
            out["_" + name] = _floats(raw[i])[0]
        elif name != "_":
            values, parsed, _ = _floats(raw[i])
            out[name] = values
            if name in _NONFINITE_WATCHED:
                out[_NAN_PREFIX + name] = np.where(parsed & np.isnan(values), 1.0, np.nan)
    for role in (metrics.STEP, "iter"):
        if "_" + role in out:
            ok &= ~np.isnan(out["_" + role])
    if shape.strict and len(shape.head) < width:
        ok &= raw[len(shape.head)].notna().to_numpy()
    bad = 0
    keys_seen: set[str] = {name for name in shape.head if name not in _HEAD_ROLES and name != "_"}
    required = np.zeros(n, dtype=bool)
    for k in range(len(shape.head), width - 1, 2):
        key_col = raw[k]
        present = key_col.notna().to_numpy()
        if not present.any():
            break
        values, parsed, suffix = _floats(raw[k + 1], shape.units)
        if shape.strict:
            ok &= ~present | (parsed & _matches(key_col, _KEY))
        bad += int((present & ~parsed).sum())
        for raw_key in pd.unique(key_col[present]):
            mask = present & (key_col == raw_key).to_numpy()
            lower = str(raw_key).lower()
            keys_seen.add(lower)
            if shape.require is not None and lower == shape.require:
                required |= mask
            for code in np.unique(suffix[mask]):
                where = mask & (suffix == code)
                name = _metric(lower, _unit_suffix(shape, code), shape, dialect, options)
                column = out.setdefault(name, np.full(n, np.nan))
                column[where] = values[where]
                if name in _NONFINITE_WATCHED:
                    nan_mask = out.setdefault(_NAN_PREFIX + name, np.full(n, np.nan))
                    nan_mask[where & parsed & np.isnan(values)] = 1.0
    if shape.require is not None:
        if dialect.step_from_order:
            out["_counts"] = required  # other records (eval dicts) join the step before them
        else:
            ok &= required
    frame = pd.DataFrame(out)[ok]
    return frame, bad, keys_seen


def _metric(raw_key: str, unit: str, shape: Shape, dialect: Dialect, options: LoadOptions) -> str:
    """Name one field: the user's choice, the dialect's table, else sentinel's canonical key."""
    if options.step_col is not None and raw_key == options.step_col.lower():
        return "_step_col"
    if options.loss_col is not None:
        if raw_key == options.loss_col.lower():
            return metrics.LOSS
    key = raw_key + unit
    if dialect.step_key is not None and raw_key == dialect.step_key:
        return "_step_key"
    if raw_key in shape.keys and not unit:
        name = shape.keys[raw_key]
    else:
        name = canonical_key(key)
        if name == metrics.LOSS:
            name = key  # a loss-like key the dialect did not name is another loss
    if name == metrics.LOSS and options.loss_col is not None:
        name = "logged_loss"  # the user chose another key as the loss
    name = _SLUG.sub("_", name.lower()).strip("_") if name not in _KNOWN else name
    return shape.prefix + name if shape.prefix and not name.startswith(shape.prefix) else name


_NONFINITE_WATCHED = (metrics.LOSS, metrics.GRAD_NORM_TOTAL)
_NAN_PREFIX = "_nan:"
_KNOWN = frozenset({metrics.LOSS, metrics.LR, metrics.GRAD_NORM_TOTAL, metrics.LOSS_SCALE})


def _floats(column: pd.Series, units: Mapping[str, tuple[str, float]] | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Numbers of one text column: ``(values, parsed, unit key suffix)``, vectorised with pyarrow."""
    arr = pa.array(column.to_numpy(dtype=object), type=pa.string(), from_pandas=True)
    suffix = np.zeros(len(arr), dtype=np.int8)  # 0: no unit, i + 1: the i-th unit of _units_order
    factor = np.ones(len(arr))
    if units:
        for code, unit in enumerate(_units_order(units), start=1):
            ends = pc.fill_null(pc.ends_with(arr, unit), False).to_numpy(zero_copy_only=False)
            ends &= suffix == 0
            if ends.any():
                suffix[ends] = code
                factor[ends] = units[unit][1]
                stripped = pc.utf8_slice_codeunits(arr, 0, -len(unit))
                arr = pc.if_else(pa.array(ends), stripped, arr)
    parsed = pc.fill_null(pc.match_substring_regex(arr, _NUMBER), False)
    values = pc.cast(pc.if_else(parsed, arr, None), pa.float64()).to_numpy(zero_copy_only=False)
    values = np.where(np.isnan(values), values, values * factor)
    return values, parsed.to_numpy(zero_copy_only=False), suffix


def _units_order(units: Mapping[str, tuple[str, float]]) -> list[str]:
    """Units longest first, so ``ms`` is tried before ``s``."""
    return sorted(units, key=len, reverse=True)


def _unit_suffix(shape: Shape, code: int) -> str:
    return "" if code == 0 else shape.units[_units_order(shape.units)[code - 1]][0]


def _widest(bodies: list[str], joined: str) -> int:
    """Fields in the widest record (after separators became spaces), from the longest bodies."""
    lines = joined.split("\n")
    sample = lines[:64] + lines[-64:] + [max(lines, key=len)]
    return max(len(line.split()) for line in sample)


def _matches(column: pd.Series, pattern: str) -> np.ndarray:
    arr = pa.array(column.to_numpy(dtype=object), type=pa.string(), from_pandas=True)
    return pc.fill_null(pc.match_substring_regex(arr, pattern), False).to_numpy(zero_copy_only=False)


def _merge(parts: list[tuple[Shape, pd.DataFrame]], dialect: Dialect, meta: dict,
           warnings: list[str]) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """One row per step: steps from the head / step key / order, records of a step merged.

    Returns the frame and, for the loss and the grad norm, where a NaN was logged (not missing).
    """
    frames = []
    for shape, frame in parts:
        frame = frame.copy()
        step = frame["_step"].to_numpy() if "_step" in frame else np.full(len(frame), np.nan)
        if "_iter" in frame:
            step = frame["_iter"].to_numpy()
            if "_epoch" in frame and "_total" in frame:
                # mmengine / MMDetection count iterations inside an epoch: make them global.
                step = (frame["_epoch"].to_numpy() - 1) * frame["_total"].to_numpy() + step
                meta["iters_per_epoch"] = int(np.nanmax(frame["_total"]))
        if "_step_key" in frame:
            key = frame.pop("_step_key").to_numpy()
            step = np.where(np.isnan(key), step, key)
        if "_step_col" in frame:
            key = frame.pop("_step_col").to_numpy()
            step = np.where(np.isnan(key), step, key)
        if "_total" in frame and "_epoch" not in frame:
            meta.setdefault("train_steps", int(np.nanmax(frame["_total"])))
        frame["_step"] = step
        frame["_fills"] = shape.fills
        frames.append(frame.drop(columns=[c for c in ("_epoch", "_iter", "_total") if c in frame]))
    if not frames:
        return pd.DataFrame(index=pd.Index([], dtype="int64", name=metrics.STEP), dtype="float64"), {}
    table = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if dialect.step_from_order:
        table = table.sort_values("_pos", kind="stable")
        counts = table.pop("_counts").to_numpy(dtype=bool) if "_counts" in table else np.ones(len(table), bool)
        table["_step"] = np.cumsum(counts)
        meta["step_source"] = "order"
    table = table[table["_step"].notna()]
    fills = table.pop("_fills").to_numpy(dtype=bool)
    table = table.drop(columns=["_pos"])
    main = table[~fills].groupby("_step", sort=True).last()
    if fills.any():
        main = main.combine_first(table[fills].groupby("_step", sort=True).last())
    main.index = main.index.astype("int64")
    main.index.name = metrics.STEP
    logged_nan = {}
    for column in [c for c in main.columns if c.startswith(_NAN_PREFIX)]:
        logged_nan[column[len(_NAN_PREFIX):]] = (main.pop(column) == 1.0).to_numpy()
    return main.astype("float64"), logged_nan


# --------------------------------------------------------------------------- events


def _events(text: str, dialect: Dialect, steps: pd.DataFrame, meta: dict, warnings: list[str]) -> list[dict]:
    """Event lines, each given its own step or that of the next record line."""
    if not dialect.events:
        return []
    found = []
    claimed: list[tuple[int, int]] = []
    for rule in dialect.events:  # earlier rules win where two describe the same lines
        spans = sorted(claimed)
        for match in rule.pattern.finditer(text):
            at = bisect.bisect_right(spans, (match.start(), math.inf)) - 1
            if at >= 0 and spans[at][1] > match.start():
                continue
            found.append((match.start(), rule, match))
            claimed.append(match.span())
    if not found:
        return []
    found.sort(key=lambda item: item[0])
    positions, record_steps = _record_positions(text, dialect, steps)
    events: list[dict] = []
    pending = 0
    rank0 = None
    for pos, rule, match in found:
        groups = {k: v for k, v in match.groupdict().items() if v is not None}
        if "rank" in groups:
            rank = int(groups["rank"])
            rank0 = rank if rank0 is None else rank0
            if rank != rank0:
                continue  # every rank reports the same overflow: count it once
        detail = dict(rule.detail)
        for name in ("attempted", "new"):
            if name in groups:
                detail[f"{name}_scale"] = _number(groups[name])
        event = make_event(rule.kind, -1, source=rule.source or dialect.name,
                           line=text.count("\n", 0, pos) + 1, **detail)
        time = _timestamp(text, match.end() - 1)
        _stamp(event, time if not math.isnan(time) else _timestamp(text, pos))
        if "step" in groups:
            event["step"] = int(groups["step"])
        else:
            nxt = int(np.searchsorted(positions, pos)) if len(positions) else 0
            if nxt < len(positions):
                event["step"] = int(record_steps[nxt])
            else:
                last = int(steps.index[-1]) if len(steps.index) else pending
                event["step"] = last + 1
                event["step_estimated"] = True
                pending += 1
        events.append(event)
    if pending and len(steps.index):
        warnings.append(f"{pending} {dialect.name} event line(s) after the last step line were given step "
                        f"{int(steps.index[-1]) + 1}")
    elif pending:
        warnings.append(f"no step lines: the {pending} {dialect.name} event line(s) were numbered 1, 2, 3, ... in order")
    return events


def _record_positions(text: str, dialect: Dialect, steps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Where the main record lines start, and their steps (only needed when events exist)."""
    if not len(steps.index):
        return np.array([], dtype=np.int64), np.array([], dtype=np.int64)
    shape = dialect.shapes[0]
    starts = [m.start() for m in shape.pattern.finditer(text)]
    if len(starts) != len(steps.index) and not dialect.step_from_order:
        # Records merged by step: find each start's step by re-reading its head.
        found = []
        for m in shape.pattern.finditer(text):
            body = m.group(1)
            for sep in shape.separators:
                body = body.replace(sep, " ")
            parts = body.split()
            found.append(_number(parts[0]) if parts else math.nan)
        steps_at = np.array(found)
        keep = ~np.isnan(steps_at)
        return np.array(starts)[keep], steps_at[keep].astype(np.int64)
    return np.array(starts), steps.index.to_numpy()[: len(starts)]


def _count_overflows(steps: pd.DataFrame, events: list[dict]) -> None:
    """``amp/overflow`` per step and the loss scale each overflow set, from the event lines."""
    overflow = [e for e in events if e["kind"] == EventKind.OVERFLOW.value]
    if not overflow:
        return
    counts = pd.Series([e["step"] for e in overflow]).value_counts()
    for step in counts.index.difference(steps.index):
        steps.loc[int(step)] = np.nan
    steps.sort_index(inplace=True)
    steps[metrics.AMP_OVERFLOW] = counts.reindex(steps.index, fill_value=0).astype("float64")
    scales = {e["step"]: e["new_scale"] for e in overflow if not _missing(e.get("new_scale"))}
    if scales:
        column = steps[metrics.LOSS_SCALE] if metrics.LOSS_SCALE in steps else pd.Series(np.nan, steps.index)
        steps[metrics.LOSS_SCALE] = column.fillna(pd.Series(scales, dtype="float64"))


def _event_rows(events: list[dict]) -> pd.DataFrame:
    """A steps frame made of event lines alone (a DeepSpeed log that prints no loss)."""
    steps = pd.DataFrame(index=pd.Index(sorted({e["step"] for e in events}), dtype="int64", name=metrics.STEP))
    _count_overflows(steps, events)
    return steps


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _stamp(event: dict, time: float) -> dict:
    event["time"] = time
    return event


def _timestamp(text: str, pos: int) -> float:
    """The log's own time on the line at ``pos`` (NaN when it has none)."""
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    match = _TIMESTAMP.search(text, start, end if end >= 0 else len(text))
    if not match:
        return math.nan
    stamp = pd.Timestamp(match.group(1).replace("T", " "))
    fraction = match.group(2) or "0"
    return stamp.timestamp() + int(fraction) / 10 ** len(fraction)
