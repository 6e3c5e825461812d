"""A log text split into lines once, shared by every shape and dialect that reads it.

:class:`Lines` hands each pattern only the lines it may match (one pyarrow pass with the
pattern's RE2 superset) and keeps the lines grouped by skeleton (:class:`Skeletons`, digits
written as ``0``) for the template reader; both are made once per text, which is why they live
apart from the readers.

Example:
    >>> Skeletons.of("loss 1.5\\nloss 2.25\\n").uniques.to_pylist()
    ['loss 0.0', 'loss 0.00']
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sentinel.analyze.loaders.pattern_locality import line_local, spans_lines
from sentinel.analyze.loaders.pattern_needs import fold, may_match, needed_words
from sentinel.analyze.loaders.pattern_prefix import literal_first
from sentinel.analyze.loaders.pattern_re2 import line_filter


# A text this short goes whole to Python's re: a pyarrow filter costs ~0.1 ms to compile per
# pattern, ~3 ms per file over every dialect (10,000 tiny text files beside the logs took a minute).
_SMALL_TEXT = 4096
# Lines per skeleton, at least, for a count to go by skeletons: each costs a Python findall, a
# line of the general count costs a share of one pyarrow filter and one findall over them all.
_COUNT_REPEATS = 8
# Lines per skeleton, at least, for distinct_text to stand for the text: below it the joined
# skeletons are nearly as long as the text, and one search of the text costs no more.
_DISTINCT_REPEATS = 4
# Skeletons up to which a pattern's needed words are looked for in each first (pattern_needs):
# ~0.3 us a skeleton, where the pyarrow filter it may spare costs ~0.2 ms to compile.
_WORD_CHECKED_SKELETONS = 512
# Skeletons up to which a line-local pattern picks its skeletons with Python's re (see
# Skeletons.matching): ~3 us a skeleton against ~0.2 ms for compiling a pyarrow filter.
_FEW_SKELETONS = 48
# ... as long as none is longer than this: the generic patterns' gaps and lookaheads, tried at each
# position of a line of log lines joined without their line ends, take minutes on a megabyte.
_SEARCHED_LINE = 4096


class Lines:
    """A text split into lines once, to hand each pattern only the lines it may match.

    Each pattern is loosened into an RE2 pattern (:func:`line_filter`) that pyarrow runs over
    every line in one pass; the lines it keeps are joined again for Python's ``re``, which
    alone decides what matches. A pattern RE2 cannot take, and a short text, get the whole text.

    Example:
        >>> text = "noise\\n" * 5000 + "step: 1 loss: 2\\n"
        >>> Lines(text).matching(re.compile(r"step: (\\d+)"))
        '\\nstep: 1 loss: 2\\n'
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._lines: pa.Array | None = None
        self._skeletons: Skeletons | None | bool = False  # False: not made yet
        self._distinct: str | None = None  # see distinct_text()
        self._derived: dict = {}  # see derived()

    def skeletons(self) -> Skeletons | None:
        """The lines grouped by skeleton (made once, shared by the shapes), or None when the
        text has no line end or cannot be encoded."""
        if self._skeletons is False:
            self._skeletons = Skeletons.of(self.text)
        return self._skeletons

    @classmethod
    def of(cls, text: str, lines: Lines | None = None) -> Lines:
        """``lines`` where they are the lines of this very text (a caller made them already),
        else ``Lines(text)``.

        Example:
            >>> made = Lines("loss 1\\n"); Lines.of(made.text, made) is made, Lines.of("other", made) is made
            (True, False)
        """
        return lines if lines is not None and lines.text is text else cls(text)

    def derived(self, transform) -> Lines:
        """The lines of ``transform(self.text)``, made once per transform (``self`` where it
        gives the text back): a log's sniff and its read each clean the same text (a progress
        bar's ``\\r`` redraws), and each split the cleaned text again.

        Example:
            >>> lines = Lines("step 1\\r\\nstep 2\\r\\n")
            >>> lines.derived(str.rstrip) is lines.derived(str.rstrip), lines.derived(str.rstrip).text
            (True, 'step 1\\r\\nstep 2')
        """
        made = self._derived.get(transform)
        if made is None:
            text = transform(self.text)
            made = self._derived[transform] = self if text is self.text else Lines(text)
        return made

    @classmethod
    def shared(cls, text: str) -> Lines:
        """``Lines(text)``, the same object as the last call's where the text is the same: the
        sniffs of several loaders read one file's head, each splitting and grouping it again.

        Example:
            >>> Lines.shared("loss 1\\n") is Lines.shared("loss 1\\n")
            True
        """
        last = _last_shared[0]  # one read: a reading-ahead thread may replace it meanwhile
        if last is not None and last.text == text:
            return last
        lines = cls(text)
        _last_shared[0] = lines
        return lines

    def distinct_text(self) -> str:
        """The text's distinct line skeletons, one a line, where its lines repeat (a log of 30,000
        step lines: a few hundred bytes); else the text itself. A word without digits, or a line
        emptied or kept for what it holds, is in the one where it is in the other.

        Example:
            >>> Lines("step 1 loss 2\\n" * 2000).distinct_text()
            'step 0 loss 0'
        """
        if self._distinct is None:
            skeletons = self.skeletons() if len(self.text) > _SMALL_TEXT else None
            repeats = skeletons is not None and len(skeletons.uniques) * _DISTINCT_REPEATS <= len(skeletons.codes)
            self._distinct = "\n".join(skeletons.texts()) if repeats else self.text
        return self._distinct

    def holds_any(self, needles) -> bool:
        """Whether the text holds one of ``needles`` (``any(n in text for n in needles)``; a
        compiled pattern among them: whether it matches), asked of :meth:`distinct_text` first:
        one search over a few hundred bytes instead of one over the whole text per needle. A
        string with digits found there (as its skeleton) is then looked for in the text; a
        pattern that is not :func:`line_local` is searched for in the text.

        Example:
            >>> lines = Lines("iter 10 loss 2\\n" * 2000)
            >>> lines.holds_any(["nan", "Running"]), lines.holds_any(["iter 10 "]), lines.holds_any(["iter 11"])
            (False, True, False)
            >>> lines.holds_any([re.compile(r"loss \\d+$", re.M)])
            True
        """
        distinct = self.distinct_text()
        for needle in needles:
            if isinstance(needle, re.Pattern):
                local = line_local(needle)  # matches a line where it matches the line's skeleton
                found = (needle.search(distinct) if local else literal_first(needle).search(self.text)) is not None
            elif distinct is self.text or "\n" in needle:
                found = needle in self.text
            else:
                skeleton = needle.translate(_ZERO_ASCII_DIGITS)
                found = skeleton in distinct and (skeleton == needle or needle in self.text)
            if found:
                return True
        return False

    def count(self, pattern: re.Pattern) -> int:
        """How many matches of ``pattern`` the text has, each line read with a line end before
        and after it (``len(pattern.findall(self.matching(pattern)))``).

        A :func:`line_local` pattern is run once per line skeleton, its matches counted once
        for every line of that skeleton (exact: such a pattern matches a line where it matches
        its skeleton); a text of few repeats is counted the general way.

        Example:
            >>> Lines("step: 1 loss: 2\\n" * 5000).count(re.compile(r"step: (\\d+)"))
            5000
        """
        by_skeleton = self._by_skeleton(pattern)
        if by_skeleton is None:
            if len(self.text) <= _SMALL_TEXT and not may_match(needed_words(pattern), self.text):
                return 0  # a short text without the pattern's words (a folder of notes: each sniffed)
            return len(literal_first(pattern).findall(self.matching(pattern)))
        skeletons, candidates = by_skeleton
        lines_of = skeletons.lines_of[candidates].tolist()
        return sum(len(pattern.findall("\n" + skeleton + "\n")) * n
                   for skeleton, n in zip(skeletons.pick(candidates), lines_of))

    def starts(self, pattern: re.Pattern) -> np.ndarray:
        """Where each match of ``pattern`` starts, in text order (``[m.start() for m in
        pattern.finditer(text)]``). A :func:`line_local` pattern in a text of repeated lines runs
        once per line skeleton, its starts within the line added to each line's start (counted in
        characters, not the skeletons' bytes, where the text is not ASCII: a tqdm bar's blocks); the
        general patterns of a plain-text log take ~10 us a line.

        Example:
            >>> Lines("x\\n" + "step 1 loss 2\\n" * 2000).starts(re.compile(r"loss \\d"))[:2].tolist()
            [9, 23]
            >>> Lines("\u2588\\n" + "\u2588 loss 2\\n" * 2000).starts(re.compile(r"loss \\d"))[:2].tolist()
            [4, 13]
        """
        by_skeleton = self._by_skeleton(pattern)
        if by_skeleton is None:
            return np.array([m.start() for m in literal_first(pattern).finditer(self.text)], dtype=np.int64)
        skeletons, candidates = by_skeleton
        within: list[int] = []
        count = np.zeros(len(skeletons.uniques), dtype=np.int64)
        first = np.zeros(len(skeletons.uniques), dtype=np.int64)
        texts = skeletons.texts()
        for unique in candidates.tolist():
            skeleton = texts[unique]
            found = [m.start() - 1 for m in pattern.finditer("\n" + skeleton + "\n")]  # no match takes a line end
            first[unique], count[unique] = len(within), len(found)
            within.extend(found)
        per_line = count[skeletons.codes]
        lines = np.repeat(np.arange(len(per_line)), per_line)
        nth = np.arange(len(lines)) - np.repeat(np.cumsum(per_line) - per_line, per_line)
        line_starts = skeletons.starts if self.text.isascii() else self._char_line_starts(len(skeletons.starts))
        return line_starts[lines] + np.array(within, dtype=np.int64)[first[skeletons.codes][lines] + nth]

    def _char_line_starts(self, count: int) -> np.ndarray:
        """Where each of the text's first ``count`` lines starts, in characters (the skeletons' are bytes)."""
        lengths = np.fromiter(map(len, self.text.split("\n")), dtype=np.int64, count=-1)[:count] + 1
        return np.concatenate(([0], np.cumsum(lengths)[:-1]))

    def _by_skeleton(self, pattern: re.Pattern) -> tuple[Skeletons, np.ndarray] | None:
        """The skeletons, and those that may hold a match of ``pattern``, where it can be run once
        per skeleton (a :func:`line_local` pattern, a text of repeated lines); else None."""
        skeletons = self.skeletons() if len(self.text) > _SMALL_TEXT and line_local(pattern) else None
        if skeletons is None or len(skeletons.uniques) * _COUNT_REPEATS > len(skeletons.codes):
            return None
        loose = line_filter(pattern)
        return skeletons, (np.arange(len(skeletons.uniques)) if loose is None else skeletons.matching(loose, pattern))

    def matching(self, pattern: re.Pattern) -> str:
        """The lines that may hold a match of ``pattern``, each with a line end before and after
        it (so ``^``, ``$`` and a leading ``\\s`` see what they saw in the text)."""
        if len(self.text) <= _SMALL_TEXT or spans_lines(pattern):
            # (a small text: Python's re reads it faster than pyarrow compiles the filter; a match
            # across a line end: no line alone holds it)
            return self.text
        loose = line_filter(pattern)
        if loose is None:
            return self.text
        # A text of one line is filtered too: a sniff head cut from a 1 MB line (no line end)
        # would otherwise go whole to Python's re, whose lazy scans are quadratic on it.
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


_last_shared: list[Lines | None] = [None]  # Lines.shared's last text


@dataclass
class Skeletons:
    """A text's lines grouped by skeleton: the line with each ASCII digit written as ``0``.

    Record lines of one kind differ mostly in their digits, so a log of 20,000 step lines has a
    few dozen skeletons; a :func:`~sentinel.analyze.loaders.pattern_locality.line_local` pattern
    is run once per skeleton, not per line.

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
    _texts: list[str] | None = field(default=None, repr=False)  # ``uniques`` as Python strings, once asked
    _folded_texts: list[str] | None = field(default=None, repr=False)  # ... folded for case-insensitive words

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
        skeleton = zero_digits(raw)
        lines = pa.Array.from_buffers(pa.large_string(), len(offsets) - 1,
                                      [None, pa.py_buffer(offsets), pa.py_buffer(skeleton)])
        encoded = pc.dictionary_encode(lines)
        codes = encoded.indices.to_numpy()
        uniques = pc.utf8_rtrim(encoded.dictionary, characters="\n")
        return cls(pa.py_buffer(raw), offsets[:-1], codes, uniques, np.bincount(codes, minlength=len(uniques)))

    def matching(self, loose: str, pattern: re.Pattern | None = None) -> np.ndarray:
        """The indices of the skeletons that may hold a match: those ``loose`` (a pattern's RE2
        superset, :func:`line_filter`) finds in. Where ``pattern`` (a :func:`line_local` one) is
        given, the skeletons without its needed words (:func:`needed_words`) are ruled out first
        (up to 512 skeletons); where a few dozen short ones are left, those ``pattern`` itself
        finds in, each read with a line end before and after it: Python's ``re`` over a few dozen
        short lines takes less than compiling the RE2 filter (~0.2 ms, once per pattern and text).

        Example:
            >>> s = Skeletons.of("step 1 loss 2\\nnoise\\n")
            >>> s.matching("loss"), s.matching("loss", re.compile(r"loss (\\d+)"))
            (array([0]), array([0]))
        """
        if pattern is None:
            return self._filtered(loose)
        candidates = range(len(self.uniques))
        needs = needed_words(pattern) if len(self.uniques) <= _WORD_CHECKED_SKELETONS else ()
        if needs:  # a substring search rules out most lines first (the generic shapes' keyword lookaheads)
            texts, folded = self.texts(), self._folded()
            candidates = [i for i in candidates if may_match(needs, texts[i], folded[i])]
        if not candidates:
            return np.zeros(0, dtype=np.int64)
        if len(candidates) <= _FEW_SKELETONS:
            texts = self.texts()
            if max(len(texts[i]) for i in candidates) <= _SEARCHED_LINE:
                search = pattern.search
                return np.array([i for i in candidates if search("\n" + texts[i] + "\n")], dtype=np.int64)
        found = self._filtered(loose)
        return found if isinstance(candidates, range) else np.intersect1d(found, candidates)

    def _filtered(self, loose: str) -> np.ndarray:
        """The skeletons the RE2 pattern ``loose`` finds in (one pyarrow pass)."""
        return np.flatnonzero(pc.match_substring_regex(self.uniques, loose).to_numpy(zero_copy_only=False))

    def texts(self) -> list[str]:
        """``uniques`` as Python strings (made once)."""
        if self._texts is None:
            self._texts = self.uniques.to_pylist()
        return self._texts

    def pick(self, indices: np.ndarray) -> list[str]:
        """The skeletons at ``indices``, as Python strings (from :meth:`texts` where made: a
        pyarrow take costs ~10 us, asked once per shape and dialect).

        Example:
            >>> Skeletons.of("a 1\\nb 2\\n").pick(np.array([1]))
            ['b 0']
        """
        if self._texts is None and len(indices) * 4 < len(self.uniques):
            return self.uniques.take(indices).to_pylist()
        texts = self.texts()
        return [texts[i] for i in indices.tolist()]

    def _folded(self) -> list[str]:
        """:meth:`texts` as case-insensitive words are looked for in them (made once)."""
        if self._folded_texts is None:
            self._folded_texts = [fold(text) for text in self.texts()]
        return self._folded_texts


_ZERO_ASCII_DIGITS = str.maketrans("123456789", "000000000")  # a string's skeleton, as zero_digits makes it
# The same for bytes: one table lookup per byte in C (a numpy pass eight bytes at a time made
# seven temporaries of the text's size and took 2-3x as long on a few MB).
_ZERO_DIGIT_BYTES = bytes(ord("0") if ord("0") <= i <= ord("9") else i for i in range(256))


def zero_digits(raw: bytes) -> bytes:
    """``raw`` with each ASCII digit written as ``0``.

    Example:
        >>> zero_digits(b"step 1/29 x:3.5e-7")
        b'step 0/00 x:0.0e-0'
    """
    return raw.translate(_ZERO_DIGIT_BYTES)


def without_lines(text: str, pattern: re.Pattern, drop=lambda match: True) -> str:
    """``text`` without the whole lines ``pattern`` matches (a multiline pattern from a line's start to its end) that
    ``drop`` (given each match) says go, each with its line end.

    Example:
        >>> without_lines("a 1\\nb 2\\na 3", re.compile(r"^a \\d$", re.MULTILINE))
        'b 2\\n'
    """
    kept, at = [], 0
    for match in pattern.finditer(text):
        if drop(match):
            end = match.end() + (text[match.end():match.end() + 1] == "\n")
            kept.append(text[at:match.start()])
            at = end
    kept.append(text[at:])
    return "".join(kept)
