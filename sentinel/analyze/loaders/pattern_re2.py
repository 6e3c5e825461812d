"""A record pattern's RE2 superset, for picking candidate lines with pyarrow.

Python's ``re`` decides what matches; pyarrow's RE2 only has to pass over every line once and
keep those that may match, so each pattern is loosened (lookarounds and word boundaries dropped,
Unicode classes spelled in RE2's terms, an optional tail cut). The translation is a small parser
of regex source of its own, separate from the engine that uses it.

Example:
    >>> line_filter(re.compile(r"iter (\\d+): loss"))
    'iter (\\\\p{Nd}+): loss'
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc


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
_UPPER_BOUND = re.compile(r"^\{(\d*),\d+\}")


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
            # An upper bound is dropped ("{0,1024}?" is "{0,}?"): looser, and RE2 neither takes
            # bounds over 1,000 nor has to spell out each repeat.
            atom.quantifier = _UPPER_BOUND.sub(r"{\1,}", quantifier.group(0))
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
