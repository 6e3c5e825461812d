"""The fast record reader for logs that repeat a few line templates.

A :func:`~sentinel.analyze.loaders.pattern_locality.line_local` pattern runs once per line
skeleton; the numbers of all records are then cut out of the text at the spans that gives and
converted by one pyarrow cast. It gives what the general reader
(:func:`sentinel.analyze.loaders.textscan.scan`) gives, or declines (None) and leaves the shape to
it; it is kept apart because it is a second road to the same columns, with its own data
structures (templates, layouts, slots).

Example:
    >>> from sentinel.analyze.loaders import LoadOptions
    >>> from sentinel.analyze.loaders.dialects import NANOGPT
    >>> text = "".join(f"iter {i}: loss 2.5, time 9.1ms, mfu 1.0%\\n" for i in range(3))
    >>> read_templates(Lines(text), NANOGPT.shapes[0], NANOGPT, LoadOptions())[0]["loss"].tolist()
    [2.5, 2.5, 2.5]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sentinel.analyze.loaders import LoadOptions
from sentinel.analyze.loaders.dialect_types import HEAD_ROLES, Dialect, Shape
from sentinel.analyze.loaders.field_lists import FIELD, THOUSANDS
from sentinel.analyze.loaders.log_lines import Lines, Skeletons
from sentinel.analyze.loaders.pattern_locality import line_local
from sentinel.analyze.loaders.pattern_re2 import line_filter
from sentinel.analyze.loaders.record_fields import (KEY, NAN_PREFIX, NUMBER_SYNTAX, check_heads, marks_nan, metric_name,
                                                    prefixed, unit_suffix, units_order, widest)


_TOKEN = re.compile(r"[^ \t\n\v\f\r]+")  # the tokens of Arrow's ASCII whitespace split
# Whether a value is a number does not depend on its digits: asked of its skeleton.
_IS_NUMBER = re.compile(NUMBER_SYNTAX, re.ASCII).match
_ASCII_SPACE = " \t\n\v\f\r"
# Whitespace to Python's str.split and \s, not to Arrow's ASCII split (a field list holding one is
# left to the general reader).
_SPACES_APART = "\v\x1c\x1d\x1e\x1f"


def _template_shape(shape: Shape, scrub: tuple | None) -> bool:
    """Whether :func:`read_templates` can read this shape: a :func:`line_local` pattern, a scrub
    (if any) that is line-local too and replaces by plain text (none for a field list),
    separators without a line end or a digit (a skeleton holds each digit as ``0``), units
    without digits."""
    scrub_ok = scrub is None or (isinstance(scrub[1], str) and "\\" not in scrub[1] and line_local(scrub[0])
                                 and shape.fields is None)
    separators = shape.separators if shape.fields is None else (shape.fields,)
    return (scrub_ok
            and all(sep and "\n" not in sep and not any(c.isdigit() for c in sep) for sep in separators)
            and all(unit and unit.isascii() and not any(c.isdigit() for c in unit) for unit in shape.units)
            and line_local(shape.pattern))


@dataclass
class _Template:
    """One record on a line skeleton: its tokens (byte spans in the line, skeleton text) and
    its length in characters once trimmed, as the general reader
    (:func:`~sentinel.analyze.loaders.textscan._read_shape`) would split it."""

    spans: list[tuple[int, int]]
    texts: list[str]
    length: int
    # A field list's record (:attr:`Shape.fields`): each field's factor (its unit's times, or its
    # rescale), and whether a field was cut off after the last separator.
    factors: list[float] | None = None
    cut: bool = False


def _replaced(body: str, source: list[int], spans: list[tuple[int, int]], by: str) -> tuple[str, list[int]]:
    """``body`` with each span replaced by ``by``, and where each character came from in the line
    (-1: from no character of it)."""
    out, where, at = [], [], 0
    for start, end in spans:
        out += [body[at:start], by]
        where += source[at:start] + [-1] * len(by)
        at = end
    return "".join(out) + body[at:], where + source[at:]


def _occurrences(body: str, sep: str) -> list[tuple[int, int]]:
    """Where ``str.replace`` replaces ``sep``: left to right, never overlapping."""
    found, at = [], body.find(sep)
    while at >= 0:
        found.append((at, at + len(sep)))
        at = body.find(sep, at + len(sep))
    return found


def _line_templates(shape: Shape, skeleton: str, scrub: tuple | None, ended: bool = False) -> list[_Template] | None:
    """The records ``shape`` finds on a line with this skeleton (found as in the text, where
    each line has a line end before and after it); None when a token is not one piece of the
    line or the tokens do not follow each other in it.

    Each record's body is built as the general reader builds it (its groups joined by a space,
    the scrub, each separator replaced by a space), keeping where each character came from; a
    field list's as :func:`_field_template` says (``ended``: whether the text's field lists end
    with the separator)."""
    padded = "\n" + skeleton + "\n"
    groups = shape.pattern.groups
    found = []
    last = 0
    to_bytes = None if skeleton.isascii() else np.cumsum([0] + [len(c.encode()) for c in skeleton]).tolist()
    for match in shape.pattern.finditer(padded):
        if shape.fields is not None:
            template = _field_template(shape, padded, match, ended)
            if template is None or (template.spans and template.spans[0][0] < last):
                return None
            if template.spans:
                last = template.spans[-1][1]
            if to_bytes is not None:
                template.spans = [(to_bytes[a], to_bytes[b]) for a, b in template.spans]
            found.append(template)
            continue
        pieces, source = [], []
        for k, (a, b) in enumerate([match.span(g) for g in range(1, groups + 1)] if groups else [match.span()]):
            if k:
                pieces.append(" ")
                source.append(-1)
            if a < 0:  # a group that did not take part: findall gives ""
                continue
            if a < 1 or b > len(skeleton) + 1:
                return None
            pieces.append(padded[a:b])
            source += range(a - 1, b - 1)
        body = "".join(pieces)
        if scrub is not None:
            body, source = _replaced(body, source, [m.span() for m in scrub[0].finditer(body)], scrub[1])
        for sep in shape.separators:
            body, source = _replaced(body, source, _occurrences(body, sep), " ")
        spans, texts = [], []
        for token in _TOKEN.finditer(body):
            start, end = source[token.start()], source[token.end() - 1] + 1
            if start < last or end - start != token.end() - token.start() or -1 in source[token.start():token.end()]:
                return None
            last = end
            spans.append((start, end) if to_bytes is None else (to_bytes[start], to_bytes[end]))
            texts.append(token.group())
        found.append(_Template(spans, texts, len(body.strip(_ASCII_SPACE))))
    return found


def _fields_group(shape: Shape, match: re.Match) -> tuple[int, int]:
    """The span of a field list's fields: the pattern's last group (the match where it has none)."""
    return match.span(shape.pattern.groups) if shape.pattern.groups else match.span()


def _field_template(shape: Shape, padded: str, match: re.Match, ended: bool) -> _Template | None:
    """One field-list record on a line skeleton, as :func:`~sentinel.analyze.loaders.field_lists.
    field_bodies` makes its tokens: each head group one token, then ``name value`` for each field
    whose value is a number (a unit read, a rescale), the other fields left out. None where the
    two could differ or a value's number cannot be cut out of the line as it is: a head that is
    not one token, fields that are not plain ASCII, a thousands separator, a value that float()
    reads but the number syntax does not (``1_000``), a unit on a rescaled field."""
    spans, texts = [], []
    groups = shape.pattern.groups
    for g in range(1, groups):  # the head groups: one token each, as both field readers take them
        a, b = match.span(g)
        if a < 1 or b > len(padded) - 1 or _TOKEN.fullmatch(padded, a, b) is None:
            return None
        spans.append((a - 1, b - 1))
        texts.append(padded[a:b])
    a, b = _fields_group(shape, match)
    rest = padded[a:b]
    if a < 1 or b > len(padded) - 1 or not rest.isascii() or any(c in rest for c in _SPACES_APART):
        return None
    sep = shape.fields
    segments = rest.split(sep)
    if not ended:
        segments.append("")
    factors = []
    at = a - 1  # the segment's place in the line
    for segment in segments[:-1]:
        field = FIELD.match(segment)
        if field is not None:
            made = _field_value(shape, field.group(1).strip().lower(), field.group(2))
            if made is None:
                return None
            name, cut_unit, factor = made
            if name:  # a number: the field's tokens
                spans += [(at + field.start(1), at + field.end(1)),
                          (at + field.start(2), at + field.end(2) - cut_unit)]
                texts += [name, field.group(2)[:len(field.group(2)) - cut_unit]]
                factors.append(factor)
        at += len(segment) + len(sep)
    return _Template(spans, texts, 0, factors, ended and bool(segments[-1].strip()))


def _field_value(shape: Shape, name: str, value: str) -> tuple[str, int, float] | None:
    """A field's ``(key, characters of unit to cut off its value, factor)`` as
    :func:`~sentinel.analyze.loaders.field_lists._field_tokens` reads it from its skeleton; the
    key empty where the value is no number; None where the template cannot read it."""
    if THOUSANDS.match(value):
        return None
    cut_unit, factor = 0, 1.0
    if not _IS_NUMBER(value):
        try:
            float(value)
            return None  # float() reads it, pyarrow's cast may not ("1_000", " 1")
        except ValueError:
            pass
        for unit in units_order(shape.units):
            if value.endswith(unit):
                number = value[:-len(unit)]
                if not _IS_NUMBER(number):
                    try:
                        float(number)
                        return None
                    except ValueError:
                        return "", 0, 1.0
                name += shape.units[unit][0]
                cut_unit, factor = len(unit), shape.units[unit][1]
                break
        else:
            return "", 0, 1.0
    if name in shape.rescale:
        if factor != 1.0:
            return None  # two factors: multiplied in turn there, once here
        name, factor = shape.rescale[name]
    return name, cut_unit, factor


def read_templates(lines: Lines, shape: Shape, dialect: Dialect, options: LoadOptions
                   ) -> tuple[dict[str, np.ndarray], int, set[str], list[str]] | None | bool:
    """The fast reader of :func:`~sentinel.analyze.loaders.textscan._read_shape`, for lines that
    repeat a few templates.

    The shape's pattern runs once per distinct line skeleton (:class:`Skeletons`; exact for a
    :func:`line_local` pattern), which gives the token spans of every record on lines of that
    skeleton. Records whose skeletons lay out the same fields (the same heads, keys and units;
    only the numbers' widths differ) are read together: their numbers are cut out of the text
    at those spans and converted by one pyarrow cast, and each key's values go to its column
    at once: no per-line Python.

    Returns:
        What :func:`~sentinel.analyze.loaders.textscan._read_shape` returns, plus the warnings to
        add; False when no line has a record; None when the general reader must do it: the shape
        does not allow this, the skeletons are nearly as many as the lines, a key holds a digit,
        or a value's text cannot be told a number or not from its skeleton (non-ASCII, or a
        head field).
    """
    scrub = shape.scrub
    if scrub is not None and shape.scrub_needs and not lines.holds_any(shape.scrub_needs):
        scrub = None  # nothing in this text for it to act on (Hugging Face dicts of plain numbers)
    if not _template_shape(shape, scrub):
        return None
    skeletons = lines.skeletons()
    loose = line_filter(shape.pattern)
    if skeletons is None or loose is None:
        return None
    candidates = skeletons.matching(loose, shape.pattern)
    if len(candidates) > 32 and len(candidates) * 32 > int(skeletons.lines_of[candidates].sum()):
        return None  # a skeleton costs the Python work of ~20 lines read the general way: too few repeats
    first = np.zeros(len(skeletons.uniques), dtype=np.int64)
    per_unique = np.zeros(len(skeletons.uniques), dtype=np.int64)
    templates: list[_Template] = []
    candidate_skeletons = skeletons.pick(candidates)
    ended = shape.fields is not None and any(  # a field list ends with its separator somewhere in the text
        padded[slice(*_fields_group(shape, match))].rstrip().endswith(shape.fields)
        for padded in ("\n" + skeleton + "\n" for skeleton in candidate_skeletons)
        for match in shape.pattern.finditer(padded))
    for unique, skeleton in zip(candidates.tolist(), candidate_skeletons):
        found = _line_templates(shape, skeleton, scrub, ended)
        if found is None:
            return None
        first[unique], per_unique[unique] = len(templates), len(found)
        templates.extend(found)
    if not templates:
        return False
    # The records in text order: the line and the template of each.
    with_records = np.flatnonzero(per_unique[skeletons.codes])
    line_codes = skeletons.codes[with_records]
    per_line = per_unique[line_codes]
    if bool((per_line == 1).all()):
        rec_line, rec_template = with_records, first[line_codes]
    else:
        rec_line = np.repeat(with_records, per_line)
        within = np.arange(len(rec_line)) - np.repeat(np.cumsum(per_line) - per_line, per_line)
        rec_template = np.repeat(first[line_codes], per_line) + within
    counts = np.array([len(t.spans) for t in templates], dtype=np.int64)[rec_template]
    if shape.fields is None:
        width = widest(np.array([t.length for t in templates], dtype=np.int64)[rec_template], counts)
    else:
        width = int(counts.max()) + 2  # a field list of any length is read
    warnings = []
    fits = counts <= width
    if not fits.all():
        warnings.append(f"{int((~fits).sum())} {dialect.name} line(s) with more than {width} fields were skipped")
        rec_line, rec_template, counts = rec_line[fits], rec_template[fits], counts[fits]
    n = len(counts)
    # Each template's layout: its number slots (heads, then pair values, in line order), which
    # head each head slot is, and each pair's key, value slot (-1: none), unit code and factor.
    h = len(shape.head)
    units = units_order(shape.units)
    layouts: dict[tuple, int] = {}
    layout_of = np.zeros(len(templates), dtype=np.int64)
    slot_spans: list[list[tuple[int, int]]] = []
    not_numbers: dict[int, set[str]] = {}  # unit code -> the texts of values that are not numbers
    for t, template in enumerate(templates):
        count = len(template.spans)
        spans, heads, pairs = [], [], []
        for i, name in enumerate(shape.head[:count]):
            if name != "_":
                heads.append((i, len(spans)))
                spans.append(template.spans[i])
        for position in range(h, min(count - 1, width - 2) + 1, 2):
            key = template.texts[position]
            if "0" in key:
                return None  # the key may differ from line to line
            if position + 1 >= count:
                pairs.append((key, -1, 0, 1.0))
                continue
            start, end = template.spans[position + 1]
            value = template.texts[position + 1]
            code, factor = 0, 1.0
            if template.factors is not None:  # a field: its unit already read, its value a number
                pairs.append((key, len(spans), 0, template.factors[(position - h) // 2]))
                spans.append((start, end))
                continue
            for c, unit in enumerate(units, start=1):
                if value.endswith(unit):
                    code, factor = c, shape.units[unit][1]
                    end -= len(unit.encode())
                    value = value[:-len(unit)]
                    break
            if not _IS_NUMBER(value):  # text ("5,000"): no value, as a key without one
                if not value.isascii():
                    return None
                not_numbers.setdefault(code, set()).add(value)
                pairs.append((key, -1, code, factor))
                continue
            pairs.append((key, len(spans), code, factor))
            spans.append((start, end))
        layout_of[t] = layouts.setdefault((tuple(heads), tuple(pairs)), len(layouts))
        slot_spans.append(spans)
    if not _general_reader_agrees(not_numbers):
        return None
    rec_layout = layout_of[rec_template]
    per_layout = np.bincount(rec_layout, minlength=len(layouts))
    used = [(g, heads, pairs) for g, (heads, pairs) in enumerate(layouts) if per_layout[g]]
    numbers = _cut_numbers(skeletons, slot_spans, rec_line, rec_template)
    if numbers is None:
        return None
    # The columns, as the general reader makes them (every value here is a number).
    out: dict[str, np.ndarray] = {"_pos": np.arange(n, dtype=np.int64)}
    ok = np.ones(n, dtype=bool)
    for i, name in enumerate(shape.head):
        if name == "_":
            continue
        values = _pick(numbers, rec_layout, len(layouts),
                       {g: (column, 1.0) for g, heads, _ in used for head, column in heads if head == i})
        if name in HEAD_ROLES:
            out["_" + name] = values
            continue
        out[prefixed(shape, name)] = values
        if marks_nan(name, dialect):
            out[NAN_PREFIX + prefixed(shape, name)] = np.where((counts > i) & np.isnan(values), 1.0, np.nan)
    keys_seen = check_heads(out, shape, counts, width, ok)
    bad = 0
    noise, required = [], []
    last: dict[str, dict[int, tuple[int, float]]] = {}  # metric -> layout -> its last pair's (slot, factor)
    logged: dict[str, list[tuple[int, int]]] = {}  # watched metric -> (layout, slot) of each value
    names: dict[tuple[str, int], str] = {}
    for g, _, pairs in used:
        bad += int(per_layout[g]) * sum(column < 0 for _, column, _, _ in pairs)
        if shape.strict and any(column < 0 or KEY.match(key) is None for key, column, _, _ in pairs):
            noise.append(g)
        for key, column, code, factor in pairs:
            lower = key.lower()
            keys_seen.add(lower)
            if lower == shape.require:
                required.append(g)
            name = names.get((lower, code))
            if name is None:
                name = names[lower, code] = metric_name(lower, unit_suffix(shape, code), shape, dialect, options)
            last.setdefault(name, {})[g] = column, factor  # a later pair of a metric replaces an earlier one
            if column >= 0 and marks_nan(name, dialect):
                logged.setdefault(name, []).append((g, column))
    for name, picks in last.items():
        out[name] = _pick(numbers, rec_layout, len(layouts), picks)
    for name, picks in logged.items():
        nan = np.zeros(n, dtype=bool)
        for g, column in picks:
            nan |= np.isnan(numbers[:, column]) if len(used) == 1 else (rec_layout == g) & np.isnan(numbers[:, column])
        if nan.any():
            out[NAN_PREFIX + name] = np.where(nan, 1.0, np.nan)
    if noise:
        ok &= ~np.isin(rec_layout, noise)
    if shape.require is not None:
        required_rows = np.isin(rec_layout, required)
        if dialect.step_from_order:
            out["_counts"] = required_rows  # other records (eval dicts) join the step before them
        else:
            ok &= required_rows
    if shape.fields is not None:
        out["_cut"] = np.array([t.cut for t in templates], dtype=bool)[rec_template]
    if not ok.all():
        out = {name: column[ok] for name, column in out.items()}
    return out, bad, keys_seen, warnings


def _general_reader_agrees(not_numbers: dict[int, set[str]]) -> bool:
    """Whether the general reader also takes these values for text. It casts the values of one
    unit at once with pyarrow and, where that fails, asks :data:`NUMBER_SYNTAX` of each; a text
    pyarrow would read (none known) leaves the shape to it."""
    for texts in not_numbers.values():
        try:
            pc.cast(pa.array(sorted(texts), pa.large_string()), pa.float64())
        except pa.ArrowInvalid:
            continue
        return False
    return True


def _cut_numbers(skeletons: Skeletons, slot_spans: list[list[tuple[int, int]]], rec_line: np.ndarray,
                 rec_template: np.ndarray) -> np.ndarray | None:
    """The numbers of every record, ``(records, slots)``, NaN past a record's last slot; None
    when one is not a number (for pyarrow's cast).

    The slots' spans become the offsets of one string array over the text, valid for the
    numbers and null for the text between them, so one cast reads them where they are.
    """
    n, width = len(rec_line), max(len(spans) for spans in slot_spans)
    if not width or not n:  # no number, or every record skipped (more fields than the widest)
        return np.zeros((n, width))
    spans = np.zeros((len(slot_spans), width, 2), dtype=np.int64)
    filled = np.zeros((len(slot_spans), width), dtype=bool)
    for t, template in enumerate(slot_spans):
        if template:
            spans[t, :len(template)] = template
            spans[t, len(template):] = template[-1][1]  # past its last slot: empty, in order
            filled[t, :len(template)] = True
    # Rows taken from a 2-D view and the line starts added in place: indexing the 3-D array by
    # record and adding a broadcast copy took 9x as long (1.6 ms for 30,000 records of 3 slots).
    bounds = spans.reshape(len(slot_spans), -1).take(rec_template, axis=0)
    bounds += skeletons.starts[rec_line][:, None]
    bounds = bounds.ravel()
    if filled.all():
        valid = np.frombuffer(b"\x55" * ((len(bounds) + 6) // 8), np.uint8)  # every other string
    else:
        between = np.zeros(len(bounds) - 1, dtype=bool)
        between[0::2] = filled.take(rec_template, axis=0).ravel()
        valid = np.packbits(between, bitorder="little")
        if not filled.any(axis=1).all():
            bounds = np.maximum.accumulate(bounds)  # a record with no number: its empty slots in order
    if bool((bounds[1:] < bounds[:-1]).any()):
        return None  # not in text order: cannot happen for the shapes read here
    pieces = pa.Array.from_buffers(pa.large_string(), len(bounds) - 1,
                                   [pa.py_buffer(valid), pa.py_buffer(bounds), skeletons.data])
    try:
        cast = pc.cast(pieces, pa.float64())
    except pa.ArrowInvalid:
        return None
    return cast.to_numpy(zero_copy_only=False)[0::2].reshape(n, width)


def _pick(numbers: np.ndarray, rec_layout: np.ndarray, layouts: int, picks: dict[int, tuple[int, float]]) -> np.ndarray:
    """One column: for the records of each layout in ``picks``, the number in its slot times its
    factor (NaN for slot -1); NaN for the records of the other layouts."""
    slots = {slot for slot, _ in picks.values()}
    factors = {factor for _, factor in picks.values()}
    if len(slots) == 1 and len(factors) == 1 and -1 not in slots:
        (slot,), (factor,) = slots, factors
        column = numbers[:, slot] * factor if factor != 1.0 else numbers[:, slot].copy()
        if len(picks) < layouts:
            picked = np.zeros(layouts, dtype=bool)
            picked[list(picks)] = True
            column[~picked[rec_layout]] = np.nan
        return column
    slot_of = np.full(layouts, -1, dtype=np.int64)
    factor_of = np.ones(layouts)
    for g, (slot, factor) in picks.items():
        slot_of[g], factor_of[g] = slot, factor
    chosen = slot_of[rec_layout]
    column = numbers[np.arange(len(rec_layout)), np.maximum(chosen, 0)] * factor_of[rec_layout]
    column[chosen < 0] = np.nan
    return column
