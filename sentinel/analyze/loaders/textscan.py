"""The line-scanning engine behind every text-log dialect.

A dialect (:mod:`sentinel.analyze.loaders.dialects`) says how a record line is recognised and
how its fields are named; this module turns a whole log into a steps frame and events with no
per-tool code. The work is done over the whole text at once, so a 20,000-step log costs a few
C-level passes, not 20,000 rounds of Python:

1. clean the text: ANSI colour codes, ``\\r`` progress-bar redraws and ``> `` markdown quoting
   (logs pasted into GitHub issues) are removed;
2. the text is split into lines once (pyarrow) and each record pattern, loosened into an RE2
   pattern that matches a superset of its lines (lookarounds dropped), picks the candidate
   lines in one vectorised pass; ``Shape.pattern.findall`` then runs only over those lines
   (a line that no shape can match costs no Python regex work);
3. the bodies are joined, the shape's separator strings become spaces, and pyarrow splits
   them into tokens: the shape's ``head`` fields first, then ``key value`` pairs;
4. every value token is converted to a number in one vectorised pass (pyarrow's parser, with
   a regex check only for a column that holds text), units such as ``41873ms`` / ``1.2s``
   becoming ``<key>_ms``; keys are dictionary-encoded, so a key costs Python work once, not
   once per line;
5. records of the same step merge; events (overflow lines) are found with their own patterns
   and given the step they belong to.

Beyond ``key value`` tokens, a shape may read a field list whose names are phrases (Megatron's
``| lm loss: 2.7 | grad norm: 0.3 |``, :attr:`Shape.fields`) and raise events from a field's
value (:class:`RecordEvent`); a dialect may keep only the last record of a step logged again
after a restart (:attr:`Dialect.restarts`) and read the lines exactly as printed
(:attr:`Dialect.clean`).

Most logs repeat one line template per record kind, with other numbers. For a pattern that
stays inside a line and cannot tell one digit from another (:func:`line_local`), steps 2-4
take a faster road that gives the same result (:func:`_read_templates`): the lines are grouped
by skeleton (each digit written as ``0``, :class:`Skeletons`), the pattern runs once per
skeleton, and the numbers of all records are cut out of the text at the spans that gives and
converted by one pyarrow cast; a shape whose lines do not allow it (a key with a digit, a
value that is not a number, hardly any repeated skeleton) is read the general way.

A record is one line: a pattern that could match across a line end (``\\s`` before a
newline) only matches within a line.

Example:
    >>> from sentinel.analyze.loaders.dialects import NANOGPT
    >>> scan("iter 1: loss 2.5, time 9.1ms, mfu 1.0%\\niter 2: loss 2.4, time 9.0ms, mfu 1.0%\\n",
    ...      NANOGPT).steps["loss"].tolist()
    [2.5, 2.4]
"""

from __future__ import annotations

import bisect
import functools
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
from sentinel.analyze.loaders.textlog import _FIRST_COLUMNS, events_frame, order_columns
from sentinel.events import EventKind, make_event

try:  # the parser behind re (Python 3.11+), for line_local
    from re import _constants as _sre
    from re import _parser as _sre_parser
except ImportError:  # Python 3.10
    import sre_constants as _sre
    import sre_parse as _sre_parser

# The most fields one record line may have; longer lines are skipped with a warning.
MAX_FIELDS = 96

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+", re.MULTILINE)
_NUMBER = r"^[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf|infinity))$"
_KEY = re.compile(r"[A-Za-z_][\w./()%-]*\Z", re.ASCII)
_SLUG = re.compile(r"[^a-z0-9/]+")
_TIMESTAMP = re.compile(r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2})(?:[,.](\d{1,6}))?")


@dataclass(frozen=True)
class RecordEvent:
    """An event raised by one field of a record line.

    Attributes:
        key: the metric key of the field (after naming).
        kind: the event kind.
        when: ``"positive"`` (the value is above zero: the detail ``detail`` = the value as an
            int) or ``"nonfinite"`` (the value is NaN or infinite: detail ``metric`` = the key
            and ``value`` = the value as text).
        source: the ``source`` detail (none when empty).
        detail: the detail field's name for ``"positive"``.
    """

    key: str
    kind: EventKind
    when: str = "positive"
    source: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Shape:
    """One kind of record line.

    Attributes:
        pattern: a regex (``re.MULTILINE``) whose first group is the record body: the ``head``
            fields, then ``key value`` pairs once ``separators`` are spaces.
        head: names of the leading fields of the body: ``step``, ``total`` (steps in the run, or
            in an epoch with ``iter``), ``epoch`` (counted from 1, or from 0 where an epoch 0 is
            logged), ``epoch0`` (counted from 0), ``iter`` (iteration inside the epoch, or a
            global step when it never falls back where the epoch changes), ``_`` (ignored).
            ``iter`` and ``total`` without an epoch: a count that starts again when an epoch
            ends (a progress bar's ``N/TOTAL``) goes on from the previous epoch's total; ``iter``
            and ``epoch`` without ``total``: the epoch's length is the largest count seen.
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
        fields: a field list: the body's last group is ``name: value`` fields each ended by this
            string (Megatron's ``| lm loss: 2.7 |``). A name is a phrase (words, brackets) and
            the value one token; a field that is not ``name: number`` is skipped, and text after
            the last separator is a field cut off (the line was cut while written): skipped, and
            counted in a warning. A name the shape's ``keys`` do not list goes through
            ``canonical_key`` when that knows it (never to the loss), else becomes a slug (each
            run of characters other than ``a-z0-9`` an ``_``); with a ``prefix``, always the slug.
            Lines of any length are read (no :data:`MAX_FIELDS` limit).
        rescale: for a field list: a field name (lower case) -> (the name it is read as, factor),
            for a value printed in another unit by some versions (seconds where others print ms).
        record_events: events raised by the value of a field on a record line (a skip count
            above zero, a logged NaN), each with its line number and the line's time.
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
    fields: str | None = None
    rescale: Mapping[str, tuple[str, float]] = field(default_factory=dict)
    record_events: tuple[RecordEvent, ...] = ()


_HEAD_ROLES = frozenset({metrics.STEP, "total", "epoch", "epoch0", "iter"})


@dataclass(frozen=True)
class EventLine:
    """A line that reports an event rather than a step (an fp16 overflow, a loss-scale change).

    Attributes:
        pattern: regex with optional named groups ``step`` (else the event belongs to the next
            record line), ``attempted`` / ``new`` (loss scales) and ``rank``.
        kind: the event kind.
        source: the tool that printed it (``deepspeed``, ``fairseq``).
        detail: fixed detail fields added to the event.
        keep_rank: the ``rank`` group is also a detail field of the event.
    """

    pattern: re.Pattern
    kind: EventKind = EventKind.OVERFLOW
    source: str = ""
    detail: Mapping[str, object] = field(default_factory=dict)
    keep_rank: bool = False


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
        joins: continuation lines: what this matches (a line end and the next line's indent) is
            replaced by a space before reading, so a record printed over several lines (Composer's
            ``[batch=16/625]:`` then one ``\t Train key: value`` line per metric) is one line.
        min_records: record lines the sniffer must see before it claims a file.
        drop_cut_line: the last line without a line end is not trusted (``3.2`` of ``3.2217``).
        warn_bad_values: say how many values were not numbers.
        sniff: what the sniffer counts instead of the record shapes (e.g. lines with a loss).
        clean: clean the text first (:func:`clean_text`); False reads the lines as printed (only
            ``\n`` ends a line, line numbers are the file's).
        timestamp: the pattern of the log's own time on a line (groups: date and time, then an
            optional fraction of a second), instead of a bare ``YYYY-MM-DD HH:MM:SS``.
        restarts: a step whose main record (the first shape's) comes again (a resumed run) keeps
            only its last main record, whole (a field the later one lacks is not taken from the
            earlier), with a warning; records of the other shapes at that step stay.
        event_rows: event lines may add steps (a step with an event and no record; the loss scale
            an overflow set); False: they are counted only at steps that have a record.
        total_meta: ``(meta key, "max" | "first")``: where the ``total`` head field goes (the
            largest one, or the first record's).
        record_word: what a record is called in warnings (``step``, ``iteration``).
        event_word: what an event line is called in warnings (default ``<name> event``).
    """

    name: str
    description: str
    shapes: tuple[Shape, ...]
    events: tuple[EventLine, ...] = ()
    step_key: str | None = None
    step_from_order: bool = False
    joins: re.Pattern | None = None
    min_records: int = 3
    drop_cut_line: bool = True
    warn_bad_values: bool = False
    sniff: re.Pattern | None = None
    clean: bool = True
    timestamp: re.Pattern | None = None
    restarts: bool = False
    event_rows: bool = True
    total_meta: tuple[str, str] = ("train_steps", "max")
    record_word: str = "step"
    event_word: str | None = None


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


class Lines:
    """A text split into lines once, to hand each pattern only the lines it may match.

    Each pattern is loosened into an RE2 pattern (:func:`line_filter`) that pyarrow runs over
    every line in one pass; the lines it keeps are joined again for Python's ``re``, which
    alone decides what matches. A pattern RE2 cannot take gets the whole text.

    Example:
        >>> Lines("noise\\nstep: 1 loss: 2\\n").matching(re.compile(r"step: (\\d+)"))
        '\\nstep: 1 loss: 2\\n'
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._lines: pa.Array | None = None
        self._skeletons: Skeletons | None | bool = False  # False: not made yet

    def skeletons(self) -> Skeletons | None:
        """The lines grouped by skeleton (made once, shared by the shapes), or None when the
        text has no line end or cannot be encoded."""
        if self._skeletons is False:
            self._skeletons = Skeletons.of(self.text)
        return self._skeletons

    def matching(self, pattern: re.Pattern) -> str:
        """The lines that may hold a match of ``pattern``, each with a line end before and after
        it (so ``^``, ``$`` and a leading ``\\s`` see what they saw in the text)."""
        loose = line_filter(pattern)
        if loose is None or "\n" not in self.text:
            return self.text
        if self._lines is None:
            self._lines = pc.split_pattern(pa.array([self.text], pa.large_string()), "\n").flatten()
        hit = pc.match_substring_regex(self._lines, loose)
        count = hit.true_count
        if count == 0:
            return ""
        if count == len(self._lines):
            return "\n" + self.text + "\n"
        # Empty first and last lines give the line ends around the picked lines (joined in
        # Arrow: adding them to a Python str would copy the whole text once more).
        ends = pa.array([""], pa.large_string())
        picked = pa.concat_arrays([ends, self._lines.filter(hit), ends])
        joined = pc.binary_join(pa.LargeListArray.from_arrays(pa.array([0, count + 2], pa.int64()), picked),
                                pa.scalar("\n", pa.large_string()))
        return joined[0].as_py()


@functools.lru_cache(maxsize=256)
def line_filter(pattern: re.Pattern) -> str | None:
    r"""An RE2 pattern that matches every line on which ``pattern`` can match, or None.

    The looser pattern drops lookarounds and word boundaries, lets ``\s`` and ``\n`` also match
    at a line's ends (the line end is not part of the line), spells Python's Unicode ``\d``,
    ``\w`` and ``\s`` in RE2's terms, keeps ``re.IGNORECASE``, and drops a tail that may match
    nothing (``[^\n]*``: RE2 would read the rest of every line for it). None when RE2 cannot
    compile the result (backreferences, conditionals, verbose mode): the caller uses the whole
    text.

    Example:
        >>> line_filter(re.compile(r"(?<![\w/])loss\s(\d+)[^\n]*"))
        'loss(?:^|$|[\\s\\x{0b}\\x{1c}-\\x{1f}\\x{85}\\pZ])(\\p{Nd}+)'
    """
    try:
        items, end = _parse(pattern.pattern, 0)
    except ValueError:
        return None
    if end != len(pattern.pattern):
        return None
    loose = _emit(_strip_tail(items))
    if pattern.flags & re.IGNORECASE:
        loose = "(?i)" + loose
    try:
        pc.match_substring_regex(pa.array([""]), loose)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return loose


# Python's Unicode classes (str patterns) in RE2's spelling, for use inside [...].
_CLASS_ESCAPES = {"d": r"\p{Nd}", "w": r"\pL\pN_", "s": r"\s\x{0b}\x{1c}-\x{1f}\x{85}\pZ"}
_LOOKAROUNDS = ("(?=", "(?!", "(?<=", "(?<!")
_QUANTIFIER = re.compile(r"[*+?]\??|\{(\d*)(?:,\d*)?\}\??")


@dataclass
class _Atom:
    """One atom of a parsed pattern: its RE2 text (or, for a group, its opening and its
    alternatives), its quantifier, and whether the quantifier allows zero repeats."""

    text: str
    quantifier: str = ""
    optional: bool = False
    group: list[list[_Atom]] | None = None


def _parse(source: str, i: int) -> tuple[list[list[_Atom]], int]:
    """Alternatives (each a list of atoms) from ``i`` up to an unmatched ``)`` or the end."""
    alternatives: list[list[_Atom]] = [[]]
    while i < len(source) and source[i] != ")":
        c = source[i]
        if c == "|":
            alternatives.append([])
            i += 1
            continue
        if c == "\\":
            length = 4 if source.startswith("\\x", i) else 2
            atom, i = _escape(source[i:i + length]), i + length
        elif c == "[":
            end = _class_end(source, i)
            if end is None:
                raise ValueError("unterminated class")
            atom, i = _Atom(_loosen_class(source[i:end])), end
        elif c == "(":
            opening = re.match(r"\((?:\?(?:P<\w+>|<?[=!]|[aiLmsux-]*:))?", source[i:]).group(0)
            inner, end = _parse(source, i + len(opening))
            if end >= len(source):
                raise ValueError("unterminated group")
            atom = _Atom("" if opening in _LOOKAROUNDS else opening, group=inner)
            i = end + 1
        else:
            atom, i = _Atom(c), i + 1
        quantifier = _QUANTIFIER.match(source, i)
        if quantifier:
            atom.quantifier = quantifier.group(0)
            atom.optional = atom.quantifier[0] in "*?" or quantifier.group(1) in ("", "0")
            i = quantifier.end()
        if atom.text:  # a lookaround or a word boundary is dropped
            alternatives[-1].append(atom)
    return alternatives, i


def _escape(escape: str) -> _Atom:
    letter = escape[1:2]
    if letter in ("b", "B"):
        return _Atom("")
    if letter == "n":
        return _Atom("(?:^|$)")
    if letter == "s":
        return _Atom(f"(?:^|$|[{_CLASS_ESCAPES['s']}])")
    if letter in _CLASS_ESCAPES:
        return _Atom(_CLASS_ESCAPES[letter] if letter == "d" else f"[{_CLASS_ESCAPES[letter]}]")
    return _Atom(escape)


def _strip_tail(alternatives: list[list[_Atom]]) -> list[list[_Atom]]:
    """Drop, from the end of each alternative, what may match nothing (a looser pattern)."""
    out = []
    for atoms in alternatives:
        atoms = list(atoms)
        while atoms:
            last = atoms[-1]
            if last.optional:
                atoms.pop()
                continue
            if last.group is not None and last.quantifier[:1] in ("", "+"):  # "(ab*){2}" is not "(a){2}"
                inner = _strip_tail(last.group)
                if all(not alt for alt in inner):
                    atoms.pop()
                    continue
                atoms[-1] = _Atom(last.text, last.quantifier, last.optional, inner)
            break
        out.append(atoms)
    return out


def _emit(alternatives: list[list[_Atom]]) -> str:
    parts = []
    for atoms in alternatives:
        text = []
        for atom in atoms:
            body = atom.text if atom.group is None else atom.text + _emit(atom.group) + ")"
            text.append(body + atom.quantifier)
        parts.append("".join(text))
    return "|".join(parts)


def _class_end(source: str, start: int) -> int | None:
    """Index just past the character class that opens at ``start``."""
    i = start + 1
    if source.startswith("^", i):
        i += 1
    if source.startswith("]", i):  # a ']' first in the class is a literal
        i += 1
    while i < len(source):
        if source[i] == "\\":
            i += 2
        elif source[i] == "]":
            return i + 1
        else:
            i += 1
    return None


def _loosen_class(cls: str) -> str:
    """One ``[...]`` in RE2 spelling; a class that takes a line end also matches at a line's ends."""
    body, negated = cls[1:-1], cls.startswith("[^")
    if negated:
        body = body[1:]
    parts, i, takes_line_end = [], 0, False
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            letter = body[i + 1]
            parts.append(_CLASS_ESCAPES.get(letter, body[i:i + 2]))
            takes_line_end |= letter in ("s", "n")
            i += 2
        else:
            parts.append(body[i])
            i += 1
    out = "[" + ("^" if negated else "") + "".join(parts) + "]"
    return f"(?:^|$|{out})" if takes_line_end and not negated else out


@dataclass
class Skeletons:
    """A text's lines grouped by skeleton: the line with each ASCII digit written as ``0``.

    Record lines of one kind differ mostly in their digits, so a log of 20,000 step lines has a
    few dozen skeletons; a :func:`line_local` pattern is run once per skeleton, not per line.

    Attributes:
        data: the text, UTF-8.
        starts: the byte offset where each line starts.
        codes: each line's skeleton (an index into ``uniques``).
        uniques: the distinct skeletons, without their line end.
        lines_of: how many lines have each skeleton.

    Example:
        >>> s = Skeletons.of("step 1\\nstep 2\\nstep 10\\n")
        >>> s.uniques.to_pylist(), s.codes.tolist()
        (['step 0', 'step 00'], [0, 0, 1])
    """

    data: pa.Buffer
    starts: np.ndarray
    codes: np.ndarray
    uniques: pa.Array
    lines_of: np.ndarray

    @classmethod
    def of(cls, text: str) -> Skeletons | None:
        if "\n" not in text:
            return None
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates
            return None
        buf = np.frombuffer(raw, np.uint8)
        offsets = np.flatnonzero(buf == 10)
        offsets += 1
        offsets = np.concatenate(([0], offsets) if offsets[-1] == len(raw) else ([0], offsets, [len(raw)]))
        skeleton = _zero_digits(raw)
        lines = pa.Array.from_buffers(pa.large_string(), len(offsets) - 1,
                                      [None, pa.py_buffer(offsets), pa.py_buffer(skeleton)])
        encoded = pc.dictionary_encode(lines)
        codes = encoded.indices.to_numpy()
        uniques = pc.utf8_rtrim(encoded.dictionary, characters="\n")
        return cls(pa.py_buffer(raw), offsets[:-1], codes, uniques, np.bincount(codes, minlength=len(uniques)))


# --------------------------------------------------------------------------- line templates


_BYTES = 0x0101010101010101  # one in each byte of a 64-bit word


def _zero_digits(raw: bytes) -> np.ndarray:
    """``raw`` with each ASCII digit written as ``0``, eight bytes at a time.

    In a word ``w``, ``t = w ^ 0x30..`` makes a digit byte 0-9; a byte of ``t`` is below 10
    exactly when ``(t & 0x7f) + 0x76`` and ``t`` both leave its top bit clear (no carry crosses
    a byte); that bit, spread over the byte, keeps ``t`` on the digit bytes, and ``w - t``
    turns them into ``0``.

    Example:
        >>> bytes(_zero_digits(b"step 1/29 x:3.5e-7"))
        b'step 0/00 x:0.0e-0'
    """
    words = np.frombuffer(raw + bytes(-len(raw) % 8), np.uint64)
    t = words ^ np.uint64(0x30 * _BYTES)
    top = t & np.uint64(0x7F * _BYTES)
    top += np.uint64(0x76 * _BYTES)
    top |= t
    np.invert(top, out=top)
    top &= np.uint64(0x80 * _BYTES)
    top >>= np.uint64(7)
    top *= np.uint64(0xFF)
    t &= top
    np.subtract(words, t, out=t)
    return t.view(np.uint8)[:len(raw)]


@functools.lru_cache(maxsize=256)
def line_local(pattern: re.Pattern) -> bool:
    r"""True when ``pattern`` reads each line on its own and cannot tell one digit from another.

    That is: no part of it can match a line end (so a match stays inside one line and sees the
    same neighbours, a line end or nothing, wherever that line is); every character class or
    literal takes all ten ASCII digits or none of them, and there are no backreferences (so a
    line matches exactly where the line with each digit written as ``0`` matches, with the same
    group spans); ``^`` / ``$`` are line anchors; it never matches an empty string. Such a
    pattern is run once per distinct line skeleton instead of once per line (:class:`Lines`).

    Example:
        >>> line_local(re.compile(r"^[ \t]*s:(\d[^\n]*)", re.M)), line_local(re.compile(r"step:\s*(\d+)"))
        (True, False)
    """
    try:
        parsed = _sre_parser.parse(pattern.pattern, pattern.flags)
    except Exception:  # noqa: BLE001 - a private module: any surprise means "no"
        return False
    if parsed.getwidth()[0] == 0 or pattern.flags & (re.VERBOSE | re.LOCALE):
        return False
    try:
        return _local_items(parsed, pattern.flags)
    except Exception:  # noqa: BLE001 - a parse tree this code does not know: "no"
        return False


_DIGITS = frozenset(range(48, 58))
_REPEATS = tuple(op for op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None))
                 if op is not None)
_ATOMIC_GROUP = getattr(_sre, "ATOMIC_GROUP", None)  # Python 3.11+
# Which of "\n" and the digits a class escape takes: (takes "\n", takes the digits).
_CATEGORY_TAKES = {
    _sre.CATEGORY_DIGIT: (False, True), _sre.CATEGORY_NOT_DIGIT: (True, False),
    _sre.CATEGORY_SPACE: (True, False), _sre.CATEGORY_NOT_SPACE: (False, True),
    _sre.CATEGORY_WORD: (False, True), _sre.CATEGORY_NOT_WORD: (True, False),
    _sre.CATEGORY_LINEBREAK: (True, False), _sre.CATEGORY_NOT_LINEBREAK: (False, True),
}


def _class_ok(items) -> bool:
    """A ``[...]`` (parsed) that takes no line end and all digits or none."""
    negate = False
    newline, digits = False, set()
    for op, av in items:
        if op is _sre.NEGATE:
            negate = True
        elif op is _sre.LITERAL:
            newline |= av == 10
            if av in _DIGITS:
                digits.add(av)
        elif op is _sre.RANGE:
            newline |= av[0] <= 10 <= av[1]
            digits.update(d for d in _DIGITS if av[0] <= d <= av[1])
        elif op is _sre.CATEGORY and av in _CATEGORY_TAKES:
            takes_newline, takes_digits = _CATEGORY_TAKES[av]
            newline |= takes_newline
            if takes_digits:
                digits |= _DIGITS
        else:
            return False
    if negate:
        newline = not newline
    return not newline and len(digits) in (0, len(_DIGITS))


def _local_items(items, flags: int) -> bool:
    for op, av in items:
        if op is _sre.LITERAL:
            if av == 10 or av in _DIGITS:
                return False
        elif op is _sre.NOT_LITERAL:
            if av != 10:
                return False
        elif op is _sre.ANY:
            if flags & re.DOTALL:
                return False
        elif op is _sre.IN:
            if not _class_ok(av):
                return False
        elif op is _sre.CATEGORY:
            if not _class_ok([(op, av)]):
                return False
        elif op is _sre.AT:
            if av in (_sre.AT_BEGINNING, _sre.AT_END):
                if not flags & re.MULTILINE:
                    return False
            elif av not in (_sre.AT_BOUNDARY, _sre.AT_NON_BOUNDARY):
                return False
        elif op in _REPEATS:
            if not _local_items(av[2], flags):
                return False
        elif op is _sre.SUBPATTERN:
            if not _local_items(av[3], (flags | av[1]) & ~av[2]):
                return False
        elif op is _sre.BRANCH:
            if not all(_local_items(branch, flags) for branch in av[1]):
                return False
        elif op is _ATOMIC_GROUP:
            if not _local_items(av, flags):
                return False
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
            if not _local_items(av[1], flags):
                return False
        else:  # backreferences, conditionals, anything new
            return False
    return True


def count_records(text: str | Lines, dialect: Dialect) -> int:
    """How many record lines of ``dialect`` the text has (for sniffing).

    Args:
        text: the text, or :class:`Lines` of it to share the line split between dialects.
        dialect: the dialect whose record lines (or ``sniff`` lines) are counted.

    Example:
        >>> from sentinel.analyze.loaders.dialects import NANOGPT
        >>> count_records("iter 1: loss 2.5, time 9.1ms\\n", NANOGPT)
        1
    """
    lines = text if isinstance(text, Lines) else Lines(text)
    if dialect.sniff is not None:
        return len(dialect.sniff.findall(lines.matching(dialect.sniff)))
    return sum(len(shape.pattern.findall(lines.matching(shape.pattern))) for shape in dialect.shapes)


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
    if dialect.clean:
        text = clean_text(text)
    if dialect.joins is not None:
        text = dialect.joins.sub(" ", text)
    lines = Lines(text)
    parts: list[tuple[Shape, dict[str, np.ndarray]]] = []
    seen_keys: set[str] = set()
    bad = 0
    late: list[str] = []  # about record lines that were cut or repeated: said last
    for shape in dialect.shapes:
        table, shape_bad, keys = _read_shape(lines, shape, dialect, options, warnings)
        bad += shape_bad
        seen_keys |= keys
        if table is not None and "_cut" in table:
            cut = np.flatnonzero(table.pop("_cut"))
            if len(cut):
                start = next(m.start() for i, m in enumerate(shape.pattern.finditer(text)) if i == cut[0])
                late.append(f"{len(cut)} {dialect.record_word} line(s) cut off (first at line "
                            f"{text.count(chr(10), 0, start) + 1}): their last field was skipped")
        if table is not None and len(table["_pos"]):
            parts.append((shape, table))
    for wanted in (options.loss_col, options.step_col):
        if parts and wanted is not None and wanted.lower() not in seen_keys:
            raise ValueError(f"key {wanted!r} not found in the {dialect.name} log lines; keys found: "
                             f"{', '.join(sorted(seen_keys))}")
    meta: dict = {"format": dialect.name}
    record_steps: dict[int, np.ndarray] = {}
    steps, logged_nan = _merge(parts, dialect, meta, late, record_steps)
    main_steps = record_steps.get(0) if parts and parts[0][0] is dialect.shapes[0] else None
    events, at = _events(text, dialect, steps, meta, warnings, main_steps)
    by_record = any(shape.record_events for shape in dialect.shapes)
    for key in (metrics.LOSS, metrics.GRAD_NORM_TOTAL) if not by_record else ():
        if key in steps.columns:
            flagged = np.isinf(steps[key].to_numpy()) | logged_nan.get(key, np.zeros(len(steps), dtype=bool))
            for step in steps.index[flagged]:
                events.append(_stamp(make_event(EventKind.NONFINITE, int(step), metric=key,
                                                value=str(steps.at[step, key])), math.nan))
    if events and len(steps.index):
        _count_overflows(steps, events, dialect.event_rows)
    elif events and dialect.event_rows:
        steps = _event_rows(events)
    if by_record:
        events = _with_record_events(text, dialect, parts, record_steps, events, at)
    warnings.extend(late)
    if bad and dialect.warn_bad_values:
        warnings.append(f"{bad} token(s) with a value that is not a number were skipped")
    return Scan(steps=order_columns(steps), events=events_frame(events), meta=meta, warnings=warnings)


# --------------------------------------------------------------------------- records


def _read_shape(lines: Lines, shape: Shape, dialect: Dialect, options: LoadOptions,
                warnings: list[str]) -> tuple[dict[str, np.ndarray] | None, int, set[str]]:
    """One shape's records as columns (``_pos`` = record order, head fields, metric columns),
    the count of values that are not numbers, and the keys seen (lower case)."""
    fast = _read_templates(lines, shape, dialect, options)
    if fast is not None:
        if fast is False:
            return None, 0, set()
        out, bad, keys_seen, fast_warnings = fast
        warnings.extend(fast_warnings)
        return out, bad, keys_seen
    bodies = shape.pattern.findall(lines.matching(shape.pattern))
    if not bodies:
        return None, 0, set()
    cut = None
    if shape.fields is not None:
        bodies, cut = _field_bodies(bodies, shape)
    joined = "\n".join(map(" ".join, bodies) if isinstance(bodies[0], tuple) else bodies)
    if shape.scrub is not None and shape.scrub[0].search(joined):
        joined = shape.scrub[0].sub(shape.scrub[1], joined)
    for sep in shape.separators if shape.fields is None else ():
        joined = joined.replace(sep, " ")
    # Arrow's split keeps an empty token for whitespace at either end of a record: trim first.
    records = pc.ascii_trim_whitespace(pc.split_pattern(pa.array([joined], pa.large_string()), "\n").flatten())
    tokens = pc.ascii_split_whitespace(records)
    flat = tokens.values
    offsets = tokens.offsets.to_numpy()
    counts = np.diff(offsets)
    counts[pc.binary_length(records).to_numpy(zero_copy_only=False) == 0] = 0  # [""] is no token
    if shape.fields is None:
        lengths = pc.binary_length(records) if joined.isascii() else pc.utf8_length(records)
        width = _widest(lengths.to_numpy(zero_copy_only=False), counts)
    else:
        width = int(counts.max()) + 2
    fits = counts <= width
    if not fits.all():
        warnings.append(f"{int((~fits).sum())} {dialect.name} line(s) with more than {width} fields were skipped")
        offsets, counts = offsets[:-1][fits], counts[fits]
    else:
        offsets = offsets[:-1]
    n = len(counts)
    h = len(shape.head)
    ok = np.ones(n, dtype=bool)
    out: dict[str, np.ndarray] = {"_pos": np.arange(n, dtype=np.int64)}
    for i, name in enumerate(shape.head):
        if name == "_":
            continue
        values, parsed = np.full(n, np.nan), np.zeros(n, dtype=bool)
        has = counts > i
        values[has], parsed[has], _ = _numbers(flat.take(offsets[has] + i))
        if name in _HEAD_ROLES:
            out["_" + name] = values
            continue
        out[name] = values
        if name in _NONFINITE_WATCHED:
            out[_NAN_PREFIX + name] = np.where(parsed & np.isnan(values), 1.0, np.nan)
    keys_seen = _check_heads(out, shape, counts, width, ok)
    # Pairs: a key at h, h + 2, ... (never in the last field of the width), its value after it.
    per_row = np.maximum(0, (np.minimum(counts - 1, width - 2) - h) // 2 + 1)
    total = int(per_row.sum())
    bad = 0
    required = np.zeros(n, dtype=bool)
    if total:
        row = np.repeat(np.arange(n), per_row)
        position = h + 2 * (np.arange(total) - np.repeat(np.cumsum(per_row) - per_row, per_row))
        key_at = offsets[row] + position
        has_value = position + 1 < counts[row]
        encoded = pc.dictionary_encode(flat.take(key_at))
        codes = encoded.indices.to_numpy()
        raw_keys = encoded.dictionary.to_pylist()
        values, parsed = np.full(total, np.nan), np.zeros(total, dtype=bool)
        suffix = np.zeros(total, dtype=np.int8)
        values[has_value], parsed[has_value], suffix[has_value] = _numbers(flat.take(key_at[has_value] + 1),
                                                                             shape.units)
        bad = int((~parsed).sum())
        lower = [key.lower() for key in raw_keys]
        if shape.fields is not None:
            lower = [key.translate(_SHOWN) for key in lower]
        keys_seen.update(lower)
        if shape.strict:
            key_ok = np.array([_KEY.match(key) is not None for key in raw_keys], dtype=bool)
            ok[row[~(parsed & key_ok[codes])]] = False
        if shape.require is not None:
            wanted = [code for code, key in enumerate(lower) if key == shape.require]
            required[row[np.isin(codes, wanted)]] = True
        _scatter(out, n, row, codes.astype(np.int64) * 256 + suffix, values, parsed,
                 lambda combo: _metric(lower[combo // 256], _unit_suffix(shape, combo % 256), shape, dialect, options))
    if shape.require is not None:
        if dialect.step_from_order:
            out["_counts"] = required  # other records (eval dicts) join the step before them
        else:
            ok &= required
    if cut is not None:
        out["_cut"] = cut
    if not ok.all():
        out = {name: column[ok] for name, column in out.items()}
    return out, bad, keys_seen


_FIELD = re.compile(r"^\s*([A-Za-z][^:|]*?)\s*:\s*(\S+)\s*$")
# A field name's spaces, hidden while the body is split into tokens (see Shape.fields).
_HIDDEN = str.maketrans({" ": "\ue000", "\t": "\ue001", "\v": "\ue002", "\f": "\ue003", "\r": "\ue004"})
_SHOWN = str.maketrans({v: k for k, v in _HIDDEN.items()})
_PHRASE_SLUG = re.compile(r"[^a-z0-9]+")


def _field_bodies(bodies: list, shape: Shape) -> tuple[list[str], np.ndarray]:
    """:attr:`Shape.fields`: each body's field list as ``name value`` tokens (the spaces of a name
    hidden), after its head fields; and which bodies had a field cut off."""
    out, cut = [], np.zeros(len(bodies), dtype=bool)
    sep, rescale = shape.fields, shape.rescale
    for i, body in enumerate(bodies):
        heads, rest = (body[:-1], body[-1]) if isinstance(body, tuple) else ((), body)
        segments = rest.split(sep)
        if segments[-1].strip():
            cut[i] = True
        tokens = list(heads)
        for segment in segments[:-1]:
            match = _FIELD.match(segment)
            if not match:
                continue
            try:
                value = float(match.group(2))
            except ValueError:
                continue
            name = match.group(1).strip().lower()
            if name in rescale:
                name, factor = rescale[name]
                value *= factor
            tokens.append(name.translate(_HIDDEN))
            tokens.append(repr(value))
        out.append(" ".join(tokens))
    return out, cut


_TOKEN = re.compile(r"[^ \t\n\v\f\r]+")  # the tokens of Arrow's ASCII whitespace split
_ASCII_SPACE = " \t\n\v\f\r"


def _check_heads(out: dict[str, np.ndarray], shape: Shape, counts: np.ndarray, width: int,
                 ok: np.ndarray) -> set[str]:
    """Clear ``ok`` (in place) for records with no step or iteration, and for a strict shape's
    records with nothing after the head; return the head's metric keys (both readers)."""
    for role in (metrics.STEP, "iter"):
        if "_" + role in out:
            ok &= ~np.isnan(out["_" + role])
    if shape.strict and len(shape.head) < width:
        ok &= counts > len(shape.head)
    return {name for name in shape.head if name not in _HEAD_ROLES and name != "_"}


def _template_shape(shape: Shape) -> bool:
    """Whether :func:`_read_templates` can read this shape: a :func:`line_local` pattern, no
    scrub, separators of one character (replacing one by a space keeps every position), units
    without digits."""
    return (shape.scrub is None and shape.fields is None
            and all(len(sep) == 1 and sep != "\n" for sep in shape.separators)
            and all(unit and unit.isascii() and not any(c.isdigit() for c in unit) for unit in shape.units)
            and line_local(shape.pattern))


@dataclass
class _Template:
    """One record on a line skeleton: its tokens (byte spans in the line, skeleton text) and
    its length in characters once trimmed, as :func:`_read_shape` would split it."""

    spans: list[tuple[int, int]]
    texts: list[str]
    length: int


def _line_templates(shape: Shape, skeleton: str) -> list[_Template] | None:
    """The records ``shape`` finds on a line with this skeleton (found as in the text, where
    each line has a line end before and after it); None when their tokens do not follow each
    other in the line."""
    padded = "\n" + skeleton + "\n"
    groups = shape.pattern.groups
    found = []
    last = 0
    to_bytes = None if skeleton.isascii() else np.cumsum([0] + [len(c.encode()) for c in skeleton]).tolist()
    for match in shape.pattern.finditer(padded):
        pieces, spans, texts = [], [], []
        for a, b in [match.span(g) for g in range(1, groups + 1)] if groups else [match.span()]:
            if a < 0:  # a group that did not take part: findall gives ""
                pieces.append("")
                continue
            if a < 1 or b > len(skeleton) + 1:
                return None
            piece = padded[a:b]
            for sep in shape.separators:
                piece = piece.replace(sep, " ")
            pieces.append(piece)
            for token in _TOKEN.finditer(piece):
                start, end = a - 1 + token.start(), a - 1 + token.end()
                if start < last:
                    return None
                last = end
                spans.append((start, end) if to_bytes is None else (to_bytes[start], to_bytes[end]))
                texts.append(token.group())
        found.append(_Template(spans, texts, len(" ".join(pieces).strip(_ASCII_SPACE))))
    return found


def _read_templates(lines: Lines, shape: Shape, dialect: Dialect, options: LoadOptions
                    ) -> tuple[dict[str, np.ndarray], int, set[str], list[str]] | None | bool:
    """The fast reader of :func:`_read_shape`, for lines that repeat a few templates.

    The shape's pattern runs once per distinct line skeleton (:class:`Skeletons`; exact for a
    :func:`line_local` pattern), which gives the token spans of every record on lines of that
    skeleton. Records whose skeletons lay out the same fields (the same heads, keys and units;
    only the numbers' widths differ) are read together: their numbers are cut out of the text
    at those spans and converted by one pyarrow cast, and each key's values go to its column
    at once: no per-line Python.

    Returns:
        What :func:`_read_shape` returns, plus the warnings to add; False when no line has a
        record; None when the general reader must do it: the shape does not allow this, the
        skeletons are nearly as many as the lines, a key holds a digit, or some value is not
        a number (the general reader then decides what it is, as it always did).
    """
    if not _template_shape(shape):
        return None
    skeletons = lines.skeletons()
    loose = line_filter(shape.pattern)
    if skeletons is None or loose is None:
        return None
    candidates = np.flatnonzero(pc.match_substring_regex(skeletons.uniques, loose).to_numpy(zero_copy_only=False))
    if len(candidates) > 32 and len(candidates) * 32 > int(skeletons.lines_of[candidates].sum()):
        return None  # a skeleton costs the Python work of ~20 lines read the general way: too few repeats
    first = np.zeros(len(skeletons.uniques), dtype=np.int64)
    per_unique = np.zeros(len(skeletons.uniques), dtype=np.int64)
    templates: list[_Template] = []
    for unique, skeleton in zip(candidates.tolist(), skeletons.uniques.take(candidates).to_pylist()):
        found = _line_templates(shape, skeleton)
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
    width = _widest(np.array([t.length for t in templates], dtype=np.int64)[rec_template], counts)
    warnings = []
    fits = counts <= width
    if not fits.all():
        warnings.append(f"{int((~fits).sum())} {dialect.name} line(s) with more than {width} fields were skipped")
        rec_line, rec_template, counts = rec_line[fits], rec_template[fits], counts[fits]
    n = len(counts)
    # Each template's layout: its number slots (heads, then pair values, in line order), which
    # head each head slot is, and each pair's key, value slot (-1: none), unit code and factor.
    h = len(shape.head)
    units = _units_order(shape.units)
    layouts: dict[tuple, int] = {}
    layout_of = np.zeros(len(templates), dtype=np.int64)
    slot_spans: list[list[tuple[int, int]]] = []
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
            code, factor = 0, 1.0
            for c, unit in enumerate(units, start=1):
                if template.texts[position + 1].endswith(unit):
                    code, factor = c, shape.units[unit][1]
                    end -= len(unit.encode())
                    break
            pairs.append((key, len(spans), code, factor))
            spans.append((start, end))
        layout_of[t] = layouts.setdefault((tuple(heads), tuple(pairs)), len(layouts))
        slot_spans.append(spans)
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
        if name in _HEAD_ROLES:
            out["_" + name] = values
            continue
        out[name] = values
        if name in _NONFINITE_WATCHED:
            out[_NAN_PREFIX + name] = np.where((counts > i) & np.isnan(values), 1.0, np.nan)
    keys_seen = _check_heads(out, shape, counts, width, ok)
    bad = 0
    noise, required = [], []
    last: dict[str, dict[int, tuple[int, float]]] = {}  # metric -> layout -> its last pair's (slot, factor)
    logged: dict[str, list[tuple[int, int]]] = {}  # watched metric -> (layout, slot) of each value
    names: dict[tuple[str, int], str] = {}
    for g, _, pairs in used:
        bad += int(per_layout[g]) * sum(column < 0 for _, column, _, _ in pairs)
        if shape.strict and any(column < 0 or _KEY.match(key) is None for key, column, _, _ in pairs):
            noise.append(g)
        for key, column, code, factor in pairs:
            lower = key.lower()
            keys_seen.add(lower)
            if lower == shape.require:
                required.append(g)
            name = names.get((lower, code))
            if name is None:
                name = names[lower, code] = _metric(lower, _unit_suffix(shape, code), shape, dialect, options)
            last.setdefault(name, {})[g] = column, factor  # a later pair of a metric replaces an earlier one
            if name in _NONFINITE_WATCHED and column >= 0:
                logged.setdefault(name, []).append((g, column))
    for name, picks in last.items():
        out[name] = _pick(numbers, rec_layout, len(layouts), picks)
    for name, picks in logged.items():
        nan = np.zeros(n, dtype=bool)
        for g, column in picks:
            nan |= np.isnan(numbers[:, column]) if len(used) == 1 else (rec_layout == g) & np.isnan(numbers[:, column])
        if nan.any():
            out[_NAN_PREFIX + name] = np.where(nan, 1.0, np.nan)
    if noise:
        ok &= ~np.isin(rec_layout, noise)
    if shape.require is not None:
        required_rows = np.isin(rec_layout, required)
        if dialect.step_from_order:
            out["_counts"] = required_rows  # other records (eval dicts) join the step before them
        else:
            ok &= required_rows
    if not ok.all():
        out = {name: column[ok] for name, column in out.items()}
    return out, bad, keys_seen, warnings


def _cut_numbers(skeletons: Skeletons, slot_spans: list[list[tuple[int, int]]], rec_line: np.ndarray,
                 rec_template: np.ndarray) -> np.ndarray | None:
    """The numbers of every record, ``(records, slots)``, NaN past a record's last slot; None
    when one is not a number (for pyarrow's cast).

    The slots' spans become the offsets of one string array over the text, valid for the
    numbers and null for the text between them, so one cast reads them where they are.
    """
    n, width = len(rec_line), max(len(spans) for spans in slot_spans)
    if not width:
        return np.zeros((n, 0))
    spans = np.zeros((len(slot_spans), width, 2), dtype=np.int64)
    filled = np.zeros((len(slot_spans), width), dtype=bool)
    for t, template in enumerate(slot_spans):
        if template:
            spans[t, :len(template)] = template
            spans[t, len(template):] = template[-1][1]  # past its last slot: empty, in order
            filled[t, :len(template)] = True
    bounds = (spans[rec_template] + skeletons.starts[rec_line][:, None, None]).ravel()
    if filled.all():
        valid = np.frombuffer(b"\x55" * ((len(bounds) + 6) // 8), np.uint8)  # every other string
    else:
        between = np.zeros(len(bounds) - 1, dtype=bool)
        between[0::2] = filled[rec_template].ravel()
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


def _scatter(out: dict[str, np.ndarray], n: int, row: np.ndarray, combos: np.ndarray, values: np.ndarray,
             parsed: np.ndarray, name_of) -> None:
    """Write each pair's value into its metric column; in a record, a later pair of the same
    metric replaces an earlier one. A logged NaN of a watched metric is marked."""
    names: dict[str, list[int]] = {}
    for combo in np.flatnonzero(np.bincount(combos)).tolist():
        names.setdefault(name_of(combo), []).append(combo)
    for name, group in names.items():
        picked = np.flatnonzero(combos == group[0]) if len(group) == 1 else np.flatnonzero(np.isin(combos, group))
        rows = row[picked]
        last = np.ones(len(rows), dtype=bool)
        last[:-1] = rows[1:] != rows[:-1]  # picked is in record order, pairs left to right
        column = out.setdefault(name, np.full(n, np.nan))
        column[rows[last]] = values[picked[last]]
        if name in _NONFINITE_WATCHED:
            logged = picked[parsed[picked] & np.isnan(values[picked])]
            if len(logged):
                out.setdefault(_NAN_PREFIX + name, np.full(n, np.nan))[row[logged]] = 1.0


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
    if shape.fields is not None:
        name = _phrase_key(raw_key, shape)
        return "logged_loss" if name == metrics.LOSS and options.loss_col is not None else name
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


def _phrase_key(name: str, shape: Shape) -> str:
    """A field-list name's key (see :attr:`Shape.fields`)."""
    if name in shape.keys:
        return shape.keys[name]
    slug = _PHRASE_SLUG.sub("_", name).strip("_")
    if shape.prefix:
        return shape.prefix + slug
    canonical = canonical_key(name)
    # Other losses on the line (MoE load balancing, MTP) are not the training loss.
    return canonical if canonical != name and canonical != metrics.LOSS else slug


def metric_key(dialect: Dialect, name: str) -> str:
    """The metric key of a field named ``name`` (as printed) on the dialect's main record line.

    Example:
        >>> from sentinel.analyze.loaders.dialects import NANOGPT
        >>> metric_key(NANOGPT, "loss")
        'loss'
    """
    return _metric(name.strip().lower(), "", dialect.shapes[0], dialect, LoadOptions())


_NONFINITE_WATCHED = (metrics.LOSS, metrics.GRAD_NORM_TOTAL)
_NAN_PREFIX = "_nan:"
_KNOWN = frozenset({metrics.LOSS, metrics.LR, metrics.GRAD_NORM_TOTAL, metrics.LOSS_SCALE})


def _numbers(tokens: pa.Array, units: Mapping[str, tuple[str, float]] | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Numbers of text tokens: ``(values, parsed, unit code)``, vectorised with pyarrow.

    Units are stripped first (the code is 0 for none, ``i + 1`` for the i-th unit of
    :func:`_units_order`). pyarrow's parser takes the tokens when they are all numbers; a
    column holding text is checked token by token against the number syntax instead.
    """
    n = len(tokens)
    suffix = np.zeros(n, dtype=np.int8)
    values, parsed = np.full(n, np.nan), np.zeros(n, dtype=bool)
    rest = np.ones(n, dtype=bool)  # tokens without a unit
    for code, unit in enumerate(_units_order(units or {}), start=1):
        ends = pc.ends_with(tokens, unit).to_numpy(zero_copy_only=False) & rest
        if ends.any():
            where = np.flatnonzero(ends)
            stripped = pc.utf8_slice_codeunits(tokens.take(where), 0, -len(unit))
            values[where], parsed[where] = _parse_numbers(stripped)
            values[where] *= units[unit][1]  # NaN stays NaN
            suffix[where] = code
            rest &= ~ends
    if rest.all():
        values, parsed = _parse_numbers(tokens)
    elif rest.any():
        where = np.flatnonzero(rest)
        values[where], parsed[where] = _parse_numbers(tokens.take(where))
    return values, parsed, suffix


def _parse_numbers(tokens: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(values, parsed)`` of text tokens: NaN and False where a token is not a number."""
    try:
        return pc.cast(tokens, pa.float64()).to_numpy(zero_copy_only=False), np.ones(len(tokens), dtype=bool)
    except pa.ArrowInvalid:  # some token is text: only the ones that are numbers count
        matches = pc.match_substring_regex(tokens, _NUMBER)
        values = pc.cast(pc.if_else(matches, tokens, pa.scalar(None, tokens.type)), pa.float64())
        return values.to_numpy(zero_copy_only=False), matches.to_numpy(zero_copy_only=False)


def _units_order(units: Mapping[str, tuple[str, float]]) -> list[str]:
    """Units longest first, so ``ms`` is tried before ``s``."""
    return sorted(units, key=len, reverse=True)


def _unit_suffix(shape: Shape, code: int) -> str:
    return "" if code == 0 else shape.units[_units_order(shape.units)[code - 1]][0]


def _widest(lengths: np.ndarray, counts: np.ndarray) -> int:
    """Fields in the widest record (at most :data:`MAX_FIELDS`, with room for two more), judged
    on the first and last 64 records and the longest one (``lengths`` in characters)."""
    longest = int(np.argmax(lengths))
    sample = np.concatenate([counts[:64], counts[-64:], counts[longest:longest + 1]])
    return min(MAX_FIELDS, int(sample.max()) + 2)


def _merge(parts: list[tuple[Shape, dict[str, np.ndarray]]], dialect: Dialect, meta: dict,
           warnings: list[str], record_steps: dict[int, np.ndarray] | None = None
           ) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """One row per step: steps from the head / step key / order, records of a step merged.

    Returns the frame and, for the loss and the grad norm, where a NaN was logged (not missing);
    ``record_steps`` gets each part's record steps (by its index in ``parts``, in record order).
    """
    tables = []
    for part, (shape, columns) in enumerate(parts):
        columns = dict(columns)
        n = len(columns["_pos"])
        step = columns.pop("_step", np.full(n, np.nan))
        iters = columns.pop("_iter", None)
        epoch, total = columns.pop("_epoch", None), columns.pop("_total", None)
        if "_epoch0" in columns:  # timm counts epochs from 0
            epoch = columns.pop("_epoch0") + 1
        if iters is not None:
            step = iters
            if epoch is None and total is not None:
                epoch = _epochs_from_wraps(iters, total, columns["_pos"], meta)
            if epoch is not None and _counts_globally(epoch, iters, columns["_pos"],
                                                      known_length=total is not None and not np.isnan(total).all()):
                epoch = None  # "epoch 2 step 1200": the step goes on across epochs already
            if epoch is not None:
                if np.nanmin(epoch) == 0:  # epochs counted from 0
                    epoch = epoch + 1
                total = _epoch_length(iters) if total is None else \
                    np.where(np.isnan(total), _epoch_length(iters), total)
                # mmengine / MMDetection count iterations inside an epoch: make them global.
                step = (epoch - 1) * total + step
                meta["iters_per_epoch"] = int(np.nanmax(total))
        for name in ("_step_key", "_step_col"):
            if name in columns:
                key = columns.pop(name)
                step = np.where(np.isnan(key), step, key)
        if total is not None and epoch is None:
            name, rule = dialect.total_meta
            meta.setdefault(name, int(np.nanmax(total) if rule == "max" else total[np.argmin(columns["_pos"])]))
        if record_steps is not None:
            record_steps[part] = step
        if dialect.restarts and shape is dialect.shapes[0] and n > 1:
            columns, step = _last_records(columns, step, dialect, warnings)
            n = len(step)
        columns["_step"] = step
        columns["_fills"] = np.full(n, shape.fills)
        tables.append(columns)
    if not tables:
        return pd.DataFrame(index=pd.Index([], dtype="int64", name=metrics.STEP), dtype="float64"), {}
    table = tables[0] if len(tables) == 1 else _concat(tables)
    if dialect.step_from_order:
        order = np.argsort(table["_pos"], kind="stable")
        table = {name: column[order] for name, column in table.items()}
        counts = table.pop("_counts").astype(bool) if "_counts" in table else np.ones(len(order), bool)
        table["_step"] = np.cumsum(counts).astype("float64")
        meta["step_source"] = "order"
    step = table.pop("_step")
    fills = table.pop("_fills").astype(bool)
    del table["_pos"]
    known = ~np.isnan(step)
    if not known.all():
        table = {name: column[known] for name, column in table.items()}
        step, fills = step[known], fills[known]
    if not fills.any() and (len(step) < 2 or bool((step[1:] >= step[:-1]).all())):
        # Records in step order: merge runs with numpy, and build the frame in its final
        # column order without the NaN marks (no copy later).
        index, columns = _last_per_step(table, step)
        logged_nan = {name[len(_NAN_PREFIX):]: columns.pop(name) == 1.0
                      for name in [c for c in columns if c.startswith(_NAN_PREFIX)]}
        first = [c for c in _FIRST_COLUMNS if c in columns]
        main = pd.DataFrame({name: columns[name] for name in first + sorted(c for c in columns if c not in first)},
                            index=index)
        return main.astype("float64", copy=False), logged_nan
    else:
        frame = pd.DataFrame(table)
        frame["_step"] = step
        main = frame[~fills].groupby("_step", sort=True).last()
        if fills.any():
            main = main.combine_first(frame[fills].groupby("_step", sort=True).last())
        main.index = main.index.astype("int64")
    main.index.name = metrics.STEP
    logged_nan = {}
    for column in [c for c in main.columns if c.startswith(_NAN_PREFIX)]:
        logged_nan[column[len(_NAN_PREFIX):]] = (main.pop(column) == 1.0).to_numpy()
    return main.astype("float64", copy=False), logged_nan


def _last_records(columns: dict[str, np.ndarray], step: np.ndarray, dialect: Dialect, warnings: list[str]
                  ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """:attr:`Dialect.restarts`: of the records (in text order) of one step, only the last one."""
    order = np.argsort(columns["_pos"], kind="stable")
    in_order = step[order]
    _, first = np.unique(in_order, return_index=True)
    again = np.ones(len(in_order), dtype=bool)
    again[first] = False
    if not again.any():
        return columns, step
    _, last = np.unique(in_order[::-1], return_index=True)
    keep = np.sort(order[len(in_order) - 1 - last])
    warnings.append(f"{int(again.sum())} {dialect.record_word}(s) logged more than once (first: "
                    f"{int(in_order[np.argmax(again)])}), e.g. after a restart: the last occurrence was kept")
    return {name: column[keep] for name, column in columns.items()}, step[keep]


def _epochs_from_wraps(iters: np.ndarray, total: np.ndarray, pos: np.ndarray, meta: dict) -> np.ndarray | None:
    """Epochs (from 1) of records that count iterations inside an epoch with no epoch field (a
    progress bar's ``N/TOTAL``), or None when the count never starts again.

    In file order, a count that falls back after reaching its last logging interval of the epoch
    (within two of the usual gaps between logged counts of ``TOTAL``) starts a new epoch; one that
    falls back from the middle of an epoch is a restart (a resumed run) and keeps its epoch, so
    its steps are logged again, as in any other log.

    Example:
        >>> _epochs_from_wraps(np.array([10., 20., 30., 10., 20.]), np.full(5, 30.), np.arange(5), {}).tolist()
        [1.0, 1.0, 1.0, 2.0, 2.0]
    """
    order = np.argsort(pos, kind="stable")
    i, t = iters[order], total[order]
    ok = ~(np.isnan(i) | np.isnan(t))
    if ok.sum() < 2:
        return None
    prev_i, prev_t, cur_i = i[:-1], t[:-1], i[1:]
    gaps = np.diff(i[ok])
    gap = float(np.median(gaps[gaps > 0])) if (gaps > 0).any() else 1.0
    wraps = (cur_i < prev_i) & (prev_i >= prev_t - 2 * gap) & ok[1:] & ok[:-1]
    if not wraps.any():
        return None
    epoch_sorted = np.concatenate([[1.0], 1.0 + np.cumsum(wraps)])
    meta["epochs_from_counter"] = int(epoch_sorted[-1])
    epoch = np.empty_like(epoch_sorted)
    epoch[order] = epoch_sorted
    return epoch


def _counts_globally(epoch: np.ndarray, iters: np.ndarray, pos: np.ndarray, known_length: bool = False) -> bool:
    """Whether a count logged beside an epoch goes on across epochs (a global step) rather than
    starting again in each: where the epoch changes, the count never falls back. With one epoch
    only there is no telling: the count is taken as the step unless the log gives the epoch's
    length (``known_length``, "[i/N]").

    Example:
        >>> _counts_globally(np.array([1., 1., 2.]), np.array([100., 200., 300.]), np.arange(3))
        True
        >>> _counts_globally(np.array([1., 1., 2.]), np.array([100., 200., 100.]), np.arange(3))
        False
    """
    order = np.argsort(pos, kind="stable")
    e, i = epoch[order], iters[order]
    changes = np.flatnonzero((e[1:] != e[:-1]) & ~np.isnan(e[1:]) & ~np.isnan(e[:-1]))
    if not len(changes):
        return not known_length
    return bool((i[changes + 1] >= i[changes]).all())


def _epoch_length(iters: np.ndarray) -> float:
    """Iterations in an epoch when the log does not say: the largest count logged, plus one
    logging interval when counts start below one interval (from 0: the last one logged is not
    the epoch's end).

    Example:
        >>> _epoch_length(np.array([100., 200., 300., 100.])), _epoch_length(np.array([0., 100., 200., 0.]))
        (300.0, 300.0)
    """
    finite = np.unique(iters[~np.isnan(iters)])
    if not len(finite):
        return math.nan
    gap = float(np.median(np.diff(finite))) if len(finite) > 1 else 1.0
    return float(finite[-1] + (gap if finite[0] < gap else 0.0))


def _concat(tables: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Columns of several shapes' records one after the other; NaN where a shape lacks a column."""
    names = list(dict.fromkeys(name for table in tables for name in table))
    out = {}
    for name in names:
        pieces = []
        for table in tables:
            n = len(table["_pos"])
            pieces.append(table[name] if name in table else np.full(n, False if name == "_fills" else np.nan))
        out[name] = np.concatenate(pieces)
    return out


def _last_per_step(table: dict[str, np.ndarray], step: np.ndarray) -> tuple[pd.Index, dict[str, np.ndarray]]:
    """``groupby(step).last()`` for records already in step order: the steps, and each column's
    last value that is not NaN among the records of a step."""
    starts = np.flatnonzero(np.r_[True, step[1:] != step[:-1]]) if len(step) else np.zeros(0, dtype=np.int64)
    index = pd.Index(step[starts].astype("int64"), name=metrics.STEP)
    if len(starts) == len(step):
        return index, table
    # Only steps with several records need a merge; the others keep their one record.
    sizes = np.diff(np.r_[starts, len(step)])
    several = np.flatnonzero(sizes > 1)
    size = sizes[several]
    rows = np.repeat(starts[several] - np.cumsum(size) + size, size) + np.arange(int(size.sum()))
    run_starts = np.cumsum(size) - size
    out = {}
    for name, column in table.items():
        merged = column[starts]
        picked = column[rows]
        last = np.maximum.reduceat(np.where(np.isnan(picked), -1, rows), run_starts)
        merged[several] = np.where(last >= 0, column[np.maximum(last, 0)], np.nan)
        out[name] = merged
    return index, out


# --------------------------------------------------------------------------- events


def _events(text: str, dialect: Dialect, steps: pd.DataFrame, meta: dict, warnings: list[str],
            record_steps: np.ndarray | None = None) -> tuple[list[dict], list[int]]:
    """Event lines, each given its own step or that of the next record line, and where each is."""
    if not dialect.events:
        return [], []
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
        return [], []
    found.sort(key=lambda item: item[0])
    positions, record_steps = _record_positions(text, dialect, steps, record_steps)
    # After the last record line: the step after that line's (not the largest step: a restart).
    last_step = int(record_steps[-1]) if len(record_steps) else int(steps.index[-1]) if len(steps.index) else None
    events: list[dict] = []
    at: list[int] = []
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
                detail[f"{name}_scale"] = _number_or_none(groups[name])
        if rule.keep_rank and "rank" in groups:
            detail["rank"] = int(groups["rank"])
        event = make_event(rule.kind, -1, line=text.count("\n", 0, pos) + 1, source=rule.source or dialect.name,
                           **detail)
        time = _timestamp(text, match.end() - 1, dialect.timestamp)
        _stamp(event, time if not math.isnan(time) else _timestamp(text, pos, dialect.timestamp))
        if "step" in groups:
            event["step"] = int(groups["step"])
        else:
            nxt = int(np.searchsorted(positions, pos)) if len(positions) else 0
            if nxt < len(positions):
                event["step"] = int(record_steps[nxt])
            else:
                last = last_step if last_step is not None else pending
                event["step"] = last + 1
                event["step_estimated"] = True
                pending += 1
        events.append(event)
        at.append(pos)
    word = dialect.event_word or f"{dialect.name} event"
    if pending and len(steps.index):
        warnings.append(f"{pending} {word} line(s) after the last {dialect.record_word} line were given step "
                        f"{last_step + 1}")
    elif pending:
        warnings.append(f"no {dialect.record_word} lines: the {pending} {word} line(s) were numbered 1, 2, 3, ... in order")
    return events, at


def _with_record_events(text: str, dialect: Dialect, parts: list[tuple[Shape, dict[str, np.ndarray]]],
                        record_steps: dict[int, np.ndarray], events: list[dict], at: list[int]) -> list[dict]:
    """The events of :attr:`Shape.record_events`, among the event lines in text order."""
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
                hit = np.isinf(values) | (table.get(_NAN_PREFIX + rule.key, np.zeros(len(values))) == 1.0)
            flagged.append(hit)
        if not flagged or not np.logical_or.reduce(flagged).any():
            continue
        starts = [m.start() for m in shape.pattern.finditer(text)]
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
                    logged = table.get(_NAN_PREFIX + rule.key)
                    if not (math.isinf(value) or (logged is not None and logged[row] == 1.0)):
                        continue
                    detail = {"source": rule.source} if rule.source else {}
                    detail.update(metric=rule.key, value=str(value))
                event = make_event(rule.kind, int(steps[row]), line=line, **detail)
                found.append((pos, len(found), _stamp(event, time)))
    found.sort(key=lambda item: (item[0], item[1]))
    return [event for _, _, event in found]


def _record_positions(text: str, dialect: Dialect, steps: pd.DataFrame, record_steps: np.ndarray | None = None
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Where the main record lines start, and their steps (only needed when events exist);
    ``record_steps``: the step of each main record in text order, when known."""
    if not len(steps.index):
        return np.array([], dtype=np.int64), np.array([], dtype=np.int64)
    shape = dialect.shapes[0]
    starts = [m.start() for m in shape.pattern.finditer(text)]
    if record_steps is not None and len(record_steps) == len(starts) and not np.isnan(record_steps).any():
        return np.array(starts, dtype=np.int64), record_steps.astype(np.int64)
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


def _count_overflows(steps: pd.DataFrame, events: list[dict], event_rows: bool = True) -> None:
    """``amp/overflow`` per step and the loss scale each overflow set, from the event lines
    (``event_rows`` False: only at the steps that have a record, the loss scale as logged)."""
    overflow = [e for e in events if e["kind"] == EventKind.OVERFLOW.value]
    if not overflow:
        return
    counts = pd.Series([e["step"] for e in overflow]).value_counts()
    if event_rows:
        for step in counts.index.difference(steps.index):
            steps.loc[int(step)] = np.nan
        steps.sort_index(inplace=True)
    steps[metrics.AMP_OVERFLOW] = counts.reindex(steps.index, fill_value=0).astype("float64")
    if not event_rows:
        return
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


def _number_or_none(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _stamp(event: dict, time: float) -> dict:
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
