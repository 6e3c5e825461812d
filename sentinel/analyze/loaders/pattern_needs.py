"""The words a pattern cannot match without: a check that costs a substring search.

The generic dialect's shapes open with a lookahead that scans the line for their keyword
(``^(?=[^\\n]{0,1024}?(?i:\\bepoch...))``); run on each distinct line of a log, two dozen of them
took ~12 us a line (7 ms of a 30 ms read of a Lightning bar log, whose redraws make many distinct
lines). A line that holds none of a pattern's needed words cannot match it, and ``word in line``
says so in a fraction of a microsecond. Read from the parse tree of Python's own regex parser;
kept apart from the readers, which only ask :func:`may_match`.

Example:
    >>> needs = needed_words(re.compile(r"(?i:\\bloss)[:=] *(\\d+)|val_loss=(\\d+)"))
    >>> may_match(needs, "Epoch 0: LOSS=2"), may_match(needs, "step 5 acc=0.3")
    (True, False)
"""

from __future__ import annotations

import functools
import re

try:  # the parser behind re (Python 3.11+)
    from re import _constants as _sre
    from re import _parser as _sre_parser
except ImportError:  # Python 3.10
    import sre_constants as _sre
    import sre_parse as _sre_parser

# Groups of words: a match holds at least one word of each group. A word is (text, ignores case).
Needs = tuple[tuple[tuple[str, bool], ...], ...]

_REPEATS = tuple(op for op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None))
                 if op is not None)
_ATOMIC_GROUP = getattr(_sre, "ATOMIC_GROUP", None)
# The characters that re.IGNORECASE takes for an ASCII letter although their lower case is no
# ASCII letter (found by trying every code point): written as that letter before lowering.
_FOLD_TO_ASCII = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
# A line's digits are zeros in its skeleton: so are a word's.
_ZERO_DIGITS = str.maketrans("123456789", "000000000")
# Words shorter than this tell little and cost a search each.
_SHORTEST = 2


@functools.lru_cache(maxsize=512)
def needed_words(pattern: re.Pattern) -> Needs:
    """The groups of ASCII words that every match of ``pattern`` holds one of (empty: nothing
    known). Only what must match is read: a run of literal characters, and what a sequence, a
    repeat of at least one, a group or a lookahead must match; an alternation needs a word of
    each branch (none where a branch needs none). Case-insensitive words are lowered, digits
    written as ``0`` (a skeleton's).

    Example:
        >>> needed_words(re.compile(r"step (\\d+).*?(?:val_loss|acc)="))
        ((('step ', False),), (('val_loss', False), ('acc', False)))
    """
    if not isinstance(pattern.pattern, str) or pattern.flags & re.VERBOSE:
        return ()
    try:
        parsed = _sre_parser.parse(pattern.pattern, pattern.flags)
        return tuple(_needs(parsed, pattern.flags))
    except Exception:  # noqa: BLE001 - a private module: any surprise means "nothing known"
        return ()


def may_match(needs: Needs, text: str, folded: str | None = None) -> bool:
    """False only where ``text`` lacks every word of a group of ``needs``: the pattern cannot
    match it. ``folded``: :func:`fold` of ``text``, where made already (for case-insensitive words).

    Example:
        >>> may_match(((("epoch", True),),), "EPOCH 3"), may_match(((("epoch", True),),), "step 3")
        (True, False)
    """
    for group in needs:
        for word, ignores_case in group:
            if ignores_case:
                if folded is None:
                    folded = fold(text)
                if word in folded:
                    break
            elif word in text:
                break
        else:
            return False
    return True


def fold(text: str) -> str:
    """``text`` lowered as re.IGNORECASE compares it with ASCII words (``\u212a`` is ``k``).

    Example:
        >>> fold("Loss \u212aL")
        'loss kl'
    """
    return text.translate(_FOLD_TO_ASCII).lower()


def _needs(items, flags: int) -> list[tuple[tuple[str, bool], ...]]:
    groups: list[tuple[tuple[str, bool], ...]] = []
    run: list[str] = []
    run_case = False

    def flush() -> None:
        if len(run) >= _SHORTEST:
            word = "".join(run).translate(_ZERO_DIGITS)
            groups.append(((word.lower() if run_case else word, run_case),))
        run.clear()

    for op, av in items:
        if op is _sre.LITERAL and av < 128 and av != 10:  # a word never holds the line end
            ignores_case = bool(flags & re.IGNORECASE)
            if run and ignores_case != run_case:
                flush()
            run.append(chr(av))
            run_case = ignores_case
            continue
        flush()
        if op is _sre.SUBPATTERN:
            groups += _needs(av[3], (flags | av[1]) & ~av[2])
        elif op is _ATOMIC_GROUP:
            groups += _needs(av, flags)
        elif op is _sre.ASSERT and av[0] == 1:  # a lookahead: what follows must match it too
            groups += _needs(av[1], flags)
        elif op in _REPEATS and av[0] >= 1:
            groups += _needs(av[2], flags)
        elif op is _sre.BRANCH:
            words = []
            for branch in av[1]:
                needed = _needs(branch, flags)
                if not needed:
                    break  # a branch that needs no word: the alternation needs none
                words.append(max(needed, key=lambda group: min(len(w) for w, _ in group)))
            else:
                groups.append(tuple(w for group in words for w in group))
        # anything else (a class, a category, an anchor, a lookbehind, a negative lookahead)
        # needs no word and ends the run of literal characters
    flush()
    return groups
