"""A pattern's needed words rule a line out only where the pattern cannot match it: the lines of
every fixture log (and the same lines upper-cased, or written with the characters that
re.IGNORECASE takes for ASCII letters) against every dialect pattern."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sentinel.analyze.loaders import dialects
from sentinel.analyze.loaders.log_lines import Skeletons
from sentinel.analyze.loaders.pattern_needs import fold, may_match, needed_words
from sentinel.analyze.loaders.textlog import read_text

LOGS = Path(__file__).parent / "fixtures" / "logs"


def _patterns() -> list[re.Pattern]:
    found = set()
    for dialect in (*dialects.DIALECTS, dialects.AMP_ONLY, dialects.EPOCH_LINES_IN_ORDER):
        found.update(shape.pattern for shape in dialect.shapes)
        found.update(event.pattern for event in dialect.events)
        if dialect.sniff is not None:
            found.add(dialect.sniff)
    return sorted(found, key=lambda p: p.pattern)


def _lines() -> list[str]:
    lines = set()
    for path in sorted(LOGS.rglob("*")):
        if path.is_file() and path.suffix not in (".gz", ".db", ".parquet", ".npy", ".pt"):
            try:
                skeletons = Skeletons.of(read_text(path))
            except (OSError, ValueError):
                continue
            if skeletons is not None:
                lines.update(text for text in skeletons.texts()[:2000] if len(text) < 2000)
    lines = sorted(lines)
    folded_alike = [line.replace("i", "\u0131").replace("s", "\u017f").replace("k", "\u212a").replace("I", "\u0130")
                    for line in lines]
    return lines + [line.upper() for line in lines] + folded_alike


def test_no_line_a_pattern_matches_is_ruled_out():
    patterns, lines = _patterns(), _lines()
    with_needs = [p for p in patterns if needed_words(p)]
    assert len(with_needs) > 40 and len(lines) > 1000
    ruled_out = 0
    for pattern in with_needs:
        needs = needed_words(pattern)
        for line in lines:
            if not may_match(needs, line, fold(line)):
                ruled_out += 1
                assert pattern.search("\n" + line + "\n") is None, (pattern.pattern, line)
    assert ruled_out > len(lines)  # the check rules out most lines of most patterns


@pytest.mark.parametrize(("source", "line", "expected"), [
    (r"(?i:kiss) (\d+)", "\u212a\u0131\u017fS 5", True),  # what re.IGNORECASE takes for k, i, s
    (r"(?i:kiss) (\d+)", "\u0130SS 5", False),  # no k
    (r"step (\d+)|iter (\d+)", "iter 5", True),
    (r"step (\d+)|(\d+) it", "it 5", False),
    (r"(?:val_)?loss=(\d+)", "loss=3", True),  # an optional word is not needed
    (r"(?:loss|x)=(\d+)", "acc=3", True),  # a branch that needs no word: nothing needed
    (r"^(?=.*?epoch)step (\d+)", "step 5", False),  # a lookahead's word is needed
    (r"(?<=train )loss (\d+)", "loss 5", True),  # a lookbehind's is not (it may read the line end)
    (r"(?!eval)loss (\d+)", "eval loss 5", True),
    (r"(?:grad ){2,}(\d+)", "norm 5", False),
    (r"(?:grad ){0,3}norm (\d+)", "norm 5", True),
])
def test_needed_words_are_what_every_match_holds(source, line, expected):
    pattern = re.compile(source)
    assert may_match(needed_words(pattern), line) is expected
    if not expected:
        assert pattern.search(line) is None


def test_digits_of_a_word_are_read_as_a_skeletons_zeros():
    needs = needed_words(re.compile(r"fp16 loss (\d+)"))
    assert needs == ((("fp00 loss ", False),),) and may_match(needs, "fp00 loss 0")


def test_patterns_it_cannot_read_need_nothing():
    assert needed_words(re.compile(rb"loss (\d+)")) == ()
    assert needed_words(re.compile(r"loss (\d+)  # the loss", re.VERBOSE)) == ()


def test_skeletons_a_pattern_is_run_on_are_those_it_matches(tmp_path):
    """Skeletons.matching (the words first, then Python's re where few lines are left, else the
    RE2 filter) picks every skeleton each pattern matches (and only those where the lines are
    few), on logs of few and of many distinct lines."""
    from sentinel.analyze.loaders.pattern_locality import line_local
    from sentinel.analyze.loaders.pattern_re2 import line_filter

    patterns = [p for p in _patterns() if line_local(p) and line_filter(p) is not None]
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from text_log_samples import write_all  # the formats of common trainers, many lines each

    samples = write_all(tmp_path, steps=600)
    texts = [read_text(path) for path in [*sorted(LOGS.glob("*.log")), *sorted(LOGS.glob("*.txt")), *samples]]
    many = "".join(f"step {i} {'x' * (i % 300)} loss: {i} eval {'y' * (i % 7)}\n" for i in range(2000))
    picked = 0
    for text in [*texts, many]:
        skeletons = Skeletons.of(text)
        lines = skeletons.texts()
        for pattern in patterns:
            truth = [i for i, line in enumerate(lines) if len(line) < 4096 and pattern.search("\n" + line + "\n")]
            found = skeletons.matching(line_filter(pattern), pattern).tolist()
            # every line it matches; where the RE2 filter picks, a superset (its pattern is looser)
            assert set(truth) <= set(found), pattern.pattern
            if len(skeletons.uniques) <= 48:
                assert [i for i in found if len(lines[i]) < 4096] == truth, pattern.pattern
            picked += len(truth)
    assert len(texts) >= 5 and picked > 100


def test_a_short_text_is_counted_as_its_whole_text_is():
    """A text of up to 4 KB goes whole to Python's re: one without a pattern's words counts 0
    without the search (a folder of small notes, each sniffed by every dialect)."""
    import random

    from sentinel.analyze.loaders.log_lines import Lines
    from sentinel.analyze.loaders.pattern_prefix import literal_first

    rng = random.Random(2)
    lines, patterns = _lines(), _patterns()
    skipped = 0
    for _ in range(150):
        text = "\n".join(rng.sample(lines, rng.randint(1, 12)))[:4000] + "\n"
        for pattern in patterns:
            expected = len(literal_first(pattern).findall(text))
            assert Lines(text).count(pattern) == expected, (pattern.pattern, text)
            skipped += not may_match(needed_words(pattern), text)
    assert skipped > 1000
