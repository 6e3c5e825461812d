"""Whether a record pattern is line-local: it reads each line alone and never tells digits apart.

Such a pattern can run once per line skeleton (the line with its digits written as ``0``)
instead of once per line (:mod:`~sentinel.analyze.loaders.template_reader`). The answer comes
from the parse tree of Python's own regex parser, walked here apart from the readers.

Example:
    >>> line_local(re.compile(r"\\biter (\\d+: loss [^\\n]*)")), line_local(re.compile(r"(\\d)\\1"))
    (True, False)
"""

from __future__ import annotations

import functools
import re

try:  # the parser behind re (Python 3.11+), for line_local
    from re import _constants as _sre
    from re import _parser as _sre_parser
except ImportError:  # Python 3.10
    import sre_constants as _sre
    import sre_parse as _sre_parser


@functools.lru_cache(maxsize=256)
def line_local(pattern: re.Pattern) -> bool:
    r"""True when ``pattern`` reads each line on its own and cannot tell one digit from another.

    That is: no part of it can match a line end (so a match stays inside one line and sees the
    same neighbours, a line end or nothing, wherever that line is); every character class or
    literal takes all ten ASCII digits or none of them, and there are no backreferences (so a
    line matches exactly where the line with each digit written as ``0`` matches, with the same
    group spans); ``^`` / ``$`` are line anchors; it never matches an empty string. Such a
    pattern is run once per distinct line skeleton instead of once per line
    (:class:`~sentinel.analyze.loaders.log_lines.Lines`).

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


@functools.lru_cache(maxsize=256)
def spans_lines(pattern: re.Pattern) -> bool:
    r"""True when every match of ``pattern`` crosses a line end: a ``\n`` it must match (at its top
    level, or in a group it must match) with more it must match after it (VITS-family trainers print
    their step on one line and its losses on the next: ``\[(\d+), [^\]]*\]\n[^\n]*loss_disc=``).
    No line alone holds such a match: a filter that keeps the lines a pattern can match on must not
    be asked of it.

    Example:
        >>> spans_lines(re.compile(r"\[(\d+)\]\n[^\n]*loss=(\d+)")), spans_lines(re.compile(r"loss=(\d+)\n?"))
        (True, False)
    """
    try:
        parsed = _sre_parser.parse(pattern.pattern, pattern.flags)
    except Exception:  # noqa: BLE001 - a private module: any surprise means "no"
        return False
    try:
        return _crosses(list(parsed), parsed.state)
    except Exception:  # noqa: BLE001 - a parse tree this code does not know: "no"
        return False


def _crosses(items: list, state) -> bool:
    """Whether ``items`` (a parsed sequence) must match a line end with more to match after it."""
    for at, (op, av) in enumerate(items):
        required_after = _sre_parser.SubPattern(state, items[at + 1:]).getwidth()[0] > 0
        if op is _sre.LITERAL and av == 10 and required_after:
            return True
        if op is _sre.SUBPATTERN and required_after and _ends_in_line_end(list(av[-1])):
            return True
        if op is _sre.SUBPATTERN and _crosses(list(av[-1]), state):
            return True
    return False


def _ends_in_line_end(items: list) -> bool:
    """Whether a parsed sequence must match a ``\\n`` (at its own top level)."""
    return any(op is _sre.LITERAL and av == 10 for op, av in items)
