"""Record bodies that are field lists (:attr:`Shape.fields`), made into ``name value`` tokens.

Megatron prints each iteration as ``| name: value |`` fields: ``| lm loss: 2.7E+00 | loss scale:
65536.0 | grad norm: 0.8 |``. A field's name is a phrase (its spaces hidden so that the body splits
into tokens), its value one token (a thousands separator read, a unit such as nanotron's ``32.8K``
worked out, a field rescaled where the shape says); a field that is not ``name: number`` is left
out. Two readers give the same tokens: one with pyarrow over every field at once, for ASCII text
whose whitespace RE2 and Python agree on, and one in Python for the rest and for the values that
need a unit or a rescale. They live apart from the line engine
(:mod:`~sentinel.analyze.loaders.textscan`), which turns the tokens into columns.

Example:
    >>> from sentinel.analyze.loaders.dialect_types import Shape
    >>> shape = Shape(re.compile(r"iteration (\\d+) \\|([^\\n]*)"), head=("step",), fields="|")
    >>> field_bodies([("3", " lm loss: 2.5 | skipped: 0 |")], shape)[0]
    ['3 lm\\ue000loss 2.5 skipped 0.0']
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sentinel.analyze.loaders.dialect_types import Shape
from sentinel.analyze.loaders.log_lines import zero_digits
from sentinel.analyze.loaders.record_fields import units_order

FIELD = re.compile(r"^\s*([A-Za-z][^:=|]*?)\s*[:=]\s*(\S+)\s*$")
# A field name's spaces, hidden while the body is split into tokens.
HIDDEN = str.maketrans({" ": "\ue000", "\t": "\ue001", "\v": "\ue002", "\f": "\ue003", "\r": "\ue004"})
SHOWN = str.maketrans({v: k for k, v in HIDDEN.items()})

# The same patterns for RE2. On ASCII text without \v or \x1c-\x1f, RE2's \s and \S and Python's
# take the same characters, so they match the same spans.
_NAME_RE2 = r"^\s*[A-Za-z][^:=|]*$"  # before a field's first ':' or '='
_VALUE_RE2 = r"^\s*\S+\s*$"  # after it
_THOUSANDS_RE2 = r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$"
THOUSANDS = re.compile(_THOUSANDS_RE2)
# A value that float() and pyarrow's cast both read, to the same double: kept as printed.
_PLAIN_RE2 = r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$"
# Whitespace to Python's str.split / strip / \s, not to RE2's \s (bytes: each looked for by memchr).
_SPACES_APART = (b"\x0b", b"\x1c", b"\x1d", b"\x1e", b"\x1f")
# The same checks in Python's re, for one distinct skeleton at a time (ASCII, no line end in a
# field: they agree with RE2).
_NAME, _VALUE, _PLAIN = (re.compile(p, re.ASCII) for p in (_NAME_RE2, _VALUE_RE2, _PLAIN_RE2))
_ASCII_SPACE = " \t\n\v\f\r"  # what pyarrow's ascii_trim_whitespace trims
# Segments per distinct skeleton, at least, for the checks to be asked of the skeletons.
_SEGMENT_REPEATS = 8

def field_bodies(bodies: list, shape: Shape) -> tuple[list[str] | pa.LargeListArray, np.ndarray]:
    """Each body's field list as ``name value`` tokens after its head fields, and which bodies
    had a field cut off (text after the last separator, where the lines end fields with it).
    The tokens come as a text a body (split at whitespace by the caller) or, from the pyarrow
    reader (64 bodies or more), as a list of tokens a body: the same tokens.

    ``bodies``: ``findall`` results of ``shape.pattern`` (tuples: head groups, then the fields;
    or the fields alone).

    Example:
        >>> from sentinel.analyze.loaders.dialect_types import Shape
        >>> shape = Shape(re.compile(r"([^\\n]*)"), fields="|")
        >>> field_bodies([" loss: 2.5 | lr: 1,000 |", " loss: 2.4 | lm lo"], shape)
        (['loss 2.5 lr 1000.0', 'loss 2.4'], array([False,  True]))
    """
    rests = [body[-1] if isinstance(body, tuple) else body for body in bodies]
    fast = _arrow_bodies(bodies, rests, shape) if len(bodies) >= 64 else None
    return fast if fast is not None else _python_bodies(bodies, rests, shape)


def _python_bodies(bodies: list, rests: list[str], shape: Shape) -> tuple[list[str], np.ndarray]:
    """:func:`field_bodies`, a body and a field at a time."""
    out, cut = [], np.zeros(len(bodies), dtype=bool)
    sep = shape.fields
    # Megatron ends every field with the separator, so text after the last one is a field cut
    # off; NeMo 2 ("... | global_step: 3 | reduced_train_loss: 8.595") ends none: where no line
    # ends with it, the last field is whole.
    ended = any(rest.rstrip().endswith(sep) for rest in rests)
    for i, body in enumerate(bodies):
        heads, rest = (body[:-1], body[-1]) if isinstance(body, tuple) else ((), body)
        segments = rest.split(sep)
        if not ended:
            segments.append("")
        elif segments[-1].strip():
            cut[i] = True
        tokens = list(heads)
        for segment in segments[:-1]:
            match = FIELD.match(segment)
            if match:
                field = _field_tokens(match.group(1), match.group(2), shape)
                if field is not None:
                    tokens.extend(field)
        out.append(" ".join(tokens))
    return out, cut


def _field_tokens(name: str, raw: str, shape: Shape) -> tuple[str, str] | None:
    """One field's ``(name, value)`` tokens, or None where its value is no number."""
    name = name.strip().lower()
    try:
        value = float(raw.replace(",", "") if THOUSANDS.match(raw) else raw)
    except ValueError:
        found = _with_unit(raw, shape.units)
        if found is None:
            return None
        value, key_suffix = found
        name += key_suffix
    if name in shape.rescale:
        name, factor = shape.rescale[name]
        value *= factor
    return name.translate(HIDDEN), repr(value)


def _arrow_bodies(bodies: list, rests: list[str], shape: Shape) -> tuple[pa.LargeListArray, np.ndarray] | None:
    """:func:`field_bodies` over every field at once, each body's tokens as a list; None where the
    text is not ASCII, holds whitespace RE2 reads otherwise than Python, has an empty head field,
    or the shape scrubs its bodies (a scrub reads text). A value is kept as printed where float()
    and pyarrow read it alike (a plain decimal, a thousands separator dropped); the others (units,
    ``nan``, rescaled fields) go through :func:`_field_tokens`."""
    sep = shape.fields
    text = pa.array(rests, pa.large_string())
    if shape.scrub is not None or len(text) == 0:
        return None
    data = text.buffers()[2]
    raw = data.to_pybytes() if data is not None else b""
    if not raw.isascii() or any(space in raw for space in _SPACES_APART):
        return None
    heads = [pa.array([body[k] for body in bodies], pa.large_string())
             for k in range(len(bodies[0]) - 1)] if isinstance(bodies[0], tuple) else []
    if any(pc.min(pc.binary_length(head)).as_py() == 0 for head in heads):
        return None  # " ".join skips no empty head field: it would shift the tokens after it
    n = len(rests)
    ended = pc.any(pc.ends_with(pc.ascii_rtrim_whitespace(text), sep)).as_py()
    lists = pc.split_pattern(text, sep)
    offsets = lists.offsets.to_numpy()
    segments = lists.values
    record = np.repeat(np.arange(n), np.diff(offsets))
    cut = np.zeros(n, dtype=bool)
    if ended:  # the text after each body's last separator is no field; where it is not blank, one cut off
        last = offsets[1:] - 1
        tail = pc.ascii_trim_whitespace(segments.take(pa.array(last)))
        cut = pc.binary_length(tail).to_numpy(zero_copy_only=False) > 0
        keep = np.ones(len(segments), dtype=bool)
        keep[last] = False
        segments, record = segments.filter(pa.array(keep)), record[keep]
    found, raw_names, values, thousands, plain = _name_and_value(segments)
    coded = pc.dictionary_encode(pc.ascii_lower(pc.ascii_trim_whitespace(raw_names)))
    lower = coded.dictionary.to_pylist() or [""]  # the few distinct names: worked out in Python
    codes = pa.array(coded.indices.fill_null(0))
    rescaled = np.array([name in shape.rescale for name in lower], dtype=bool)[codes.to_numpy()]
    as_printed = pa.array(found & (plain | thousands) & ~rescaled)
    none = pa.scalar(None, pa.large_string())
    names = pc.if_else(as_printed, pa.array([name.translate(HIDDEN) for name in lower], pa.large_string()).take(codes),
                       none)
    numbers = pc.if_else(as_printed, pc.if_else(pa.array(thousands), pc.replace_substring(values, ",", ""), values),
                         none)
    by_python = np.flatnonzero(found & ~as_printed.to_numpy(zero_copy_only=False))
    if len(by_python):
        where = pa.array(by_python)
        made = [_field_tokens(name, raw, shape) or (None, None)
                for name, raw in zip(raw_names.take(where).to_pylist(), values.take(where).to_pylist())]
        mask = np.zeros(len(names), dtype=bool)
        mask[by_python] = True
        names = pc.replace_with_mask(names, pa.array(mask), pa.array([m[0] for m in made], pa.large_string()))
        numbers = pc.replace_with_mask(numbers, pa.array(mask), pa.array([m[1] for m in made], pa.large_string()))
    kept = _bools(names.is_valid())
    return _token_lists(heads, names.filter(pa.array(kept)), numbers.filter(pa.array(kept)), record[kept], n), cut


def _token_lists(heads: list[pa.Array], names: pa.Array, values: pa.Array, record: np.ndarray,
                 n: int) -> pa.LargeListArray:
    """Each body's tokens: its head fields, then each field's name and value (``names`` and
    ``values`` in text order, ``record`` the body of each)."""
    k, f = len(heads), len(names)
    fields_of = np.bincount(record, minlength=n)
    offsets = np.r_[0, np.cumsum(k + 2 * fields_of)]
    order = np.empty(int(offsets[-1]), dtype=np.int64)  # where each token comes from in `sources`
    for h in range(k):
        order[offsets[:-1] + h] = h * n + np.arange(n)
    nth = np.arange(f) - np.repeat(np.cumsum(fields_of) - fields_of, fields_of)  # the field's place in its body
    at = offsets[record] + k + 2 * nth
    order[at], order[at + 1] = k * n + np.arange(f), k * n + f + np.arange(f)
    sources = pa.concat_arrays([*heads, names, values])
    return pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), sources.take(pa.array(order)))


def _name_and_value(segments: pa.Array) -> tuple[np.ndarray, pa.Array, pa.Array, np.ndarray, np.ndarray]:
    """Which ASCII segments are fields as :data:`FIELD` reads them, each one's name (the
    whitespace around it kept), its value (trimmed), and whether the value is a number with
    thousands separators / a plain decimal. The first ``:`` or ``=`` parts them (a name holds
    neither).

    Every check reads the segment's skeleton (digits as ``0``) alike, so where the segments repeat
    a few skeletons (a log's fields: the same names, numbers of a few widths) each check runs once
    per distinct skeleton, in Python; else over every segment, with numpy and RE2 patterns without
    groups (RE2's group extraction took 245 ms on 200,000 fields, this ~30 ms)."""
    segments = pa.array(segments, pa.large_string()) if segments.type != pa.large_string() else segments
    segments = pc.fill_null(segments, "")
    bounds = np.frombuffer(segments.buffers()[1], np.int64)[segments.offset:segments.offset + len(segments) + 1]
    data = segments.buffers()[2]
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    parts = _parts_by_skeleton(bounds, raw) if len(segments) >= 64 else None
    if parts is None:
        parts = _parts_by_marks(bounds, raw)
    found, cuts, checked = parts
    # Name, mark and whitespace, value, whitespace of each segment as strings over the same bytes.
    pieces = pa.Array.from_buffers(pa.large_string(), len(cuts) - 1,
                                   [None, pa.py_buffer(cuts), data if data is not None else pa.py_buffer(b"")])
    names = pieces.take(pa.array(np.arange(0, len(cuts) - 1, 4)))
    values = pieces.take(pa.array(np.arange(2, len(cuts) - 1, 4)))
    if checked is not None:
        return found, names, values, *checked
    found &= _bools(pc.match_substring_regex(names, _NAME_RE2)) & _bools(pc.match_substring_regex(values, _VALUE_RE2))
    values = pc.ascii_trim_whitespace(values)
    return (found, names, values, _bools(pc.match_substring_regex(values, _THOUSANDS_RE2)),
            _bools(pc.match_substring_regex(values, _PLAIN_RE2)))


def _cuts(starts: np.ndarray, ends: np.ndarray, first: np.ndarray, lead: np.ndarray, trail: np.ndarray) -> np.ndarray:
    """Offsets of four pieces a segment: name ``[start, first)``, mark and space, value, space."""
    has = first < ends
    cuts = np.empty(4 * len(starts) + 1, dtype=np.int64)
    cuts[0:-1:4] = starts
    cuts[1:-1:4] = first
    cuts[2:-1:4] = np.where(has, first + 1 + lead, ends)
    cuts[3:-1:4] = np.where(has, ends - trail, ends)
    cuts[-1] = ends[-1] if len(ends) else 0
    return cuts


def _parts_by_marks(bounds: np.ndarray, raw: np.ndarray):
    """Each segment's first mark found with numpy over the bytes; the value piece is all that
    follows the mark (``lead`` and ``trail`` 0): its check reads it whole, and it is trimmed after."""
    marks = np.flatnonzero((raw == ord(":")) | (raw == ord("=")))
    starts, ends = bounds[:-1], bounds[1:]
    first = np.append(marks, len(raw))[np.searchsorted(marks, starts)]
    has = first < ends
    first = np.where(has, first, ends)
    zero = np.zeros(len(starts), dtype=np.int64)
    return has, _cuts(starts, ends, first, zero, zero), None


def _parts_by_skeleton(bounds: np.ndarray, raw: np.ndarray):
    """:func:`_parts_by_marks` with the value trimmed and every check made, asked of each
    distinct skeleton once; None where the skeletons are not few."""
    n = len(bounds) - 1
    skeleton = pa.Array.from_buffers(pa.large_string(), n, [None, pa.py_buffer(np.ascontiguousarray(bounds)),
                                                            pa.py_buffer(zero_digits(raw.tobytes()))])
    coded = pc.dictionary_encode(skeleton)
    uniques = coded.dictionary.to_pylist()
    if len(uniques) * _SEGMENT_REPEATS > n:
        return None
    table = np.array([_skeleton_parts(u) for u in uniques], dtype=np.int64).reshape(len(uniques), 6)
    rows = table[coded.indices.to_numpy()]
    starts, ends = bounds[:-1], bounds[1:]
    first = np.where(rows[:, 0] >= 0, starts + rows[:, 0], ends)
    cuts = _cuts(starts, ends, first, rows[:, 1], rows[:, 2])
    has = rows[:, 0] >= 0
    return has & (rows[:, 3] == 1), cuts, (rows[:, 4] == 1, rows[:, 5] == 1)


def _skeleton_parts(segment: str) -> tuple[int, int, int, int, int, int]:
    """One segment's ``(mark, lead, trail, is a field, thousands, plain)``: where its first
    ``:`` or ``=`` is (-1: none), the whitespace before and after its value, and the checks."""
    marks = [at for at in (segment.find(":"), segment.find("=")) if at >= 0]
    if not marks:
        return -1, 0, 0, 0, 0, 0
    mark = min(marks)
    after = segment[mark + 1:]
    value = after.strip(_ASCII_SPACE)
    lead = len(after) - len(after.lstrip(_ASCII_SPACE))
    trail = len(after) - len(after.rstrip(_ASCII_SPACE)) if value else 0
    field = _NAME.match(segment, 0, mark) is not None and _VALUE.match(after) is not None
    thousands, plain = THOUSANDS.match(value) is not None, _PLAIN.match(value) is not None
    return mark, lead, trail, int(field), int(thousands), int(plain)


def _bools(array: pa.Array) -> np.ndarray:
    """A boolean array as numpy, null as False."""
    return pc.fill_null(array, False).to_numpy(zero_copy_only=False)


def _with_unit(raw: str, units: Mapping[str, tuple[str, float]]) -> tuple[float, str] | None:
    """``(value, key suffix)`` of a field value printed with one of the shape's units
    (nanotron's ``32.8K``), or None where it is not a number."""
    for unit in units_order(units):
        if raw.endswith(unit):
            try:
                return float(raw[:-len(unit)]) * units[unit][1], units[unit][0]
            except ValueError:
                return None
    return None
