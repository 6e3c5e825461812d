"""The text reader's shortcuts give what the long way gives.

Three shortcuts: substring searches and the evaluation-line check asked of a text's distinct line
skeletons instead of the whole text (:meth:`Lines.holds_any`, ``_may_blank``), and the values
printed beside the loss merged into the loss records' own columns (``_fold_beside``) instead of as
records of their own sorted in by step. Random logs of many repeats (so the skeletons are few) with
the edits real logs have: evaluation lines, restarts, a value missing from some lines, CRLF.
"""

from __future__ import annotations

import random
import re

import pandas as pd
import pytest

from sentinel.analyze.loaders import LoadOptions, launcher_ranks, textscan
from sentinel.analyze.loaders.dialects import DIALECTS, GENERIC, HF_TRAINER
from sentinel.analyze.loaders.log_lines import Lines
from sentinel.analyze.loaders.textlogs import pick_dialect
NEEDLES = ["Running training", "Params", "Starting training from iteration 0", "/s, loss=", "/it, loss=",
           "verflow", "VERFLOW", "valid", "loss", "step 1", "step 10 ", "0.5", "\u00e9", "|", "xyz", "\r"]


PATTERN_NEEDLES = [HF_TRAINER.rewrite_needs[0], textscan.KERAS_EPOCH_HEADER, re.compile(r"loss: nan \| lr: \d"), re.compile(r"^step 1\d* ", re.M),
                   re.compile(r"grad_norm: 0\.5\d*$", re.M), re.compile(r"Params \d+\.\d M\s+step")]


def _log(rng: random.Random, dicts: bool = False) -> str:
    """``dicts``: Hugging Face dict lines among the extras, one cut at its line end."""
    heads = ["step {i}", "epoch {e} | step {i}", "iter {i}:", "Epoch {e} [{i}/900]", "[{t}] step={i}"]
    bodies = ["| loss: {l} | lr: {r} | grad_norm: {g}", "loss {l} lr {r}", "loss={l}, grad_norm={g}",
              "| loss: {l} | lr: {r}", "loss: {l} grad_norm: {g} loss_scale: 65536.0"]
    extras = ["Validation: loss {l}", "Epoch {e}/20", "  Epoch {e}/20 ", "eval loss: {l}", "step {i} | test loss {l}", "", "Params 12.3 M",
              "Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 32768.0",
              "Epoch 0: 10%| | 5/50 [00:01<00:09, 4.71it/s, loss={l}, v_num=0]", "caf\u00e9 {i}",
              "***** Running training *****", "step {i} | loss: nan | lr: {r}"]
    if dicts:
        extras += ["{{'loss': {l}, 'learning_rate': {r},", "{{'loss': {l}, 'epoch': {e}}}"]
    head, body = rng.choice(heads), rng.choice(bodies)
    lines, step = [], 0
    for i in range(rng.choice([400, 1500])):
        step = step + 1 if rng.random() > 0.02 else max(1, step - 30)  # now and then a restart
        values = dict(i=step, e=step // 300, t=i % 60, l=f"{3 / (1 + i / 200):.4f}", r=f"{3e-4:.2e}",
                      g=f"{0.5 + (i % 7) / 10:.3f}")
        line = f"{head} {body}".format(**values)
        if rng.random() < 0.05:
            line = line.replace(" | lr: ", " | ").replace(" lr ", " ")  # the lr missing from a line
        lines.append(line)
        if rng.random() < 0.03:
            lines.append(rng.choice(extras).format(**values))
    ending = rng.choice(["\n", "\n", "\r\n"])
    return ending.join(lines) + ending


def test_substring_searches_on_distinct_lines_are_searches_of_the_text():
    rng = random.Random(7)
    distinct_used = 0
    for trial in range(40):
        text = _log(rng, dicts=True)
        lines = Lines(text)
        distinct_used += lines.distinct_text() is not lines.text
        for needle in NEEDLES:
            assert lines.holds_any([needle]) == (needle in text), (trial, needle)
        assert lines.holds_any(NEEDLES[:6]) == any(n in text for n in NEEDLES[:6])
        for pattern in PATTERN_NEEDLES:
            assert lines.holds_any([pattern]) == (pattern.search(text) is not None), (trial, pattern.pattern)
        words = GENERIC.drop_words
        if not textscan._may_blank(lines, words):
            assert textscan.split_evaluation_lines(text, words)[0] == text, trial
    assert distinct_used >= 30  # the shortcut itself ran (not the whole text every time)


def _read_both_ways(monkeypatch, module, name: str, off, text: str, dialect):
    """``scan`` with ``module.name`` (a shortcut) watched, then with it answering ``off`` (the long
    way): the two reads must be the same; returns the first and what the shortcut returned."""
    calls = []
    original = getattr(module, name)
    with monkeypatch.context() as m:
        m.setattr(module, name, lambda *a: calls.append(original(*a)) or calls[-1])
        new = textscan.scan(text, dialect, LoadOptions())
        m.setattr(module, name, lambda *a: off)
        old = textscan.scan(text, dialect, LoadOptions())
    pd.testing.assert_frame_equal(new.steps, old.steps, check_exact=True)
    pd.testing.assert_frame_equal(new.events, old.events, check_exact=True)
    assert new.meta == old.meta and new.warnings == old.warnings
    return new, calls


def test_values_beside_the_loss_merged_into_its_records_as_merged_by_step(monkeypatch):
    rng = random.Random(11)
    folded = 0
    for trial in range(40):
        text = _log(rng)
        dialect = pick_dialect(text)
        new, calls = _read_both_ways(monkeypatch, textscan, "_fold_beside", False, text, dialect)
        assert "loss" in new.steps.columns, (trial, dialect.name)
        folded += any(calls)
    assert folded >= 10  # the others: a restart, or the lr missing from some lines


def test_a_shared_lines_object_reads_as_a_fresh_one():
    rng = random.Random(3)
    for trial in range(10):
        text = _log(rng)
        shared = Lines(text)
        shared.holds_any(NEEDLES)  # made and used before the read
        a = textscan.scan(text, GENERIC, LoadOptions(), shared)
        b = textscan.scan(text, GENERIC, LoadOptions())
        assert "loss" in a.steps.columns
        pd.testing.assert_frame_equal(a.steps, b.steps, check_exact=True)
        assert a.warnings == b.warnings


def test_patterns_rewritten_to_start_with_their_word_match_what_they_matched():
    """literal_first moves a leading word boundary behind the first word: every dialect's record,
    scrub and event pattern must find the same matches in the fixture logs, the real logs and
    random texts built from the words they look for."""
    import re
    from pathlib import Path

    from sentinel.analyze.loaders.dialects import LLMC
    from sentinel.analyze.loaders.pattern_prefix import literal_first

    patterns = {shape.pattern for d in (LLMC, *DIALECTS) for shape in d.shapes}
    patterns |= {shape.scrub[0] for d in (LLMC, *DIALECTS) for shape in d.shapes if shape.scrub}
    patterns |= {event.pattern for d in (LLMC, *DIALECTS) for event in d.events}
    rewritten = {p: literal_first(p) for p in patterns if literal_first(p) is not p}
    assert len(rewritten) >= 10
    here = Path(__file__).parent
    files = sorted((here / "fixtures").rglob("*.log"))
    reallogs = here.parents[1] / "shared" / "reallogs"  # where present: real logs of many tools
    if reallogs.is_dir():
        files += sorted(p for p in reallogs.rglob("*") if p.suffix in (".log", ".txt", ".out", ".md"))[::3]
    texts = [p.read_text(errors="replace")[:30_000] for p in files]
    rng = random.Random(5)
    words = ["epoch", "Epoch", "step", "steps", "iter", "eta", "loss", "Train", "Step", "completed", "_epoch",
             "xstep", "\u00e9step", "1step", "(train)", "[1]", "[ 20/100]", ": ", "=", "|", " ", "\t", "\n", "7",
             "0.5", "days", "1 day, 8:31:30,", "valid on 'valid' subset", "per-step time", "'Loss/total_loss': 2"]
    texts += ["".join(rng.choice(words) for _ in range(3000)) for _ in range(30)]
    for original, fast in rewritten.items():
        for text in texts:
            assert [m.span() for m in fast.finditer(text)] == [m.span() for m in original.finditer(text)], \
                original.pattern
            assert fast.findall(text) == original.findall(text)


def test_a_scrub_never_matches_a_body_without_one_of_its_needs():
    """Shape.scrub_needs lets the reader skip a scrub's scan: the scrub must find nothing in a
    text that holds none of those strings, and something where the dialect's values need it."""
    from sentinel.analyze.loaders.dialects import HF_TRAINER, LLMC

    shapes = [shape for d in (LLMC, *DIALECTS) for shape in d.shapes if shape.scrub_needs]
    assert HF_TRAINER.shapes[0] in shapes
    rng = random.Random(8)
    pieces = ["'loss': ", "2.5", ", ", "np.float32(", "np.float64(2.1)", "tensor(", "tensor(0.5, device='cuda:0')",
              "'remaining_time': '3h 35m'", ": '", "'", " ", ")", "(", ": ", "float", "np", "\t", "\n"]
    for shape in shapes:
        scrub = shape.scrub[0]
        matched = 0
        for _ in range(400):
            text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 40)))
            found = scrub.search(text) is not None
            matched += found
            if found:
                assert any(word in text for word in shape.scrub_needs), text
        assert matched > 50


def _megatron_log(rng: random.Random) -> str:
    fields = ["consumed samples: {s}", "elapsed time per iteration (ms): {t}", "elapsed time per iteration (s): 1.2",
              "learning rate: {r}", "global batch size: 512", "lm loss: {l}", "loss scale: 65536.0", "grad norm: {g}",
              "number of skipped iterations: 0", "number of nan iterations: 0", "tokens per sec: 32.8K",
              "throughput: 1,234,567.5", "lm loss: nan", "grad norm: inf", "note: n/a", "time=12:30:01",
              "mem = 3.5 GB", "x", "", "  ", "lm loss:2.5", "Loss Of Things: -1e-3", "9lives: 3", "a|b"]
    ending = rng.choice(["|", "|", ""])
    odd = rng.random() < 0.3  # non-ASCII or odd whitespace in a few names: read field by field
    lines = []
    for i in range(1, rng.choice([70, 300])):
        picked = rng.sample(fields, rng.randint(3, 9))
        body = " | ".join(f.format(s=i * 512, t=f"{1000 + i % 7:.1f}", r=f"{3e-4:.3E}", l=f"{3 / (1 + i / 50):.6E}",
                                   g=f"{0.5 + i % 5 / 10:.3f}") for f in picked)
        line = f" iteration {i:8d}/  100000 | {body} {ending}"
        if rng.random() < 0.03:
            line = line[: rng.randint(30, len(line))]  # cut while written
        if odd and rng.random() < 0.05:
            line = line.replace("lm loss", rng.choice(["lm\u00a0loss", "lm\x0bloss", "l\u00e9 loss"]))
        lines.append(line)
    return "\n".join(lines) + "\n"


def test_field_lists_read_with_pyarrow_as_read_field_by_field(monkeypatch):
    """Megatron's '| name: value |' fields: the pyarrow reader must give the frames, events,
    warnings and meta of the Python one, on random field lists with what real ones hold (units,
    thousands separators, nan / inf, text values, rescaled fields, cut lines, odd whitespace)."""
    from sentinel.analyze.loaders import field_lists
    from sentinel.analyze.loaders.dialects import MEGATRON

    rng = random.Random(21)
    arrow_used = 0
    for trial in range(30):
        text = _megatron_log(rng)
        new, calls = _read_both_ways(monkeypatch, field_lists, "_arrow_bodies", None, text, MEGATRON)
        arrow_used += any(c is not None for c in calls)
        assert len(new.steps) > 50
    assert arrow_used >= 15  # the others hold whitespace RE2 reads otherwise, or non-ASCII names


def test_match_starts_by_skeleton_are_the_texts_match_starts():
    """Lines.starts runs a line-local pattern once per line skeleton and adds each line's start:
    the positions must be finditer's over the whole text, for every dialect's record patterns,
    on random repeated logs (CRLF, non-ASCII lines, restarts)."""
    from sentinel.analyze.loaders.dialects import LLMC
    from sentinel.analyze.loaders.pattern_locality import line_local

    patterns = [p for p in {shape.pattern for d in (LLMC, *DIALECTS) for shape in d.shapes} if line_local(p)]
    rng = random.Random(17)
    found = 0
    for trial in range(6):
        text = _log(rng, dicts=True)
        if trial % 2 == 0:
            text = text.replace("\u00e9", "e")  # ASCII: lines start at the skeletons' byte offsets; else counted
        lines = Lines(text)
        for pattern in patterns:
            expected = [m.start() for m in pattern.finditer(text)]
            assert lines.starts(pattern).tolist() == expected, (trial, pattern.pattern[:80])
            found += len(expected)
    assert found > 1000


@pytest.mark.parametrize("syntax", launcher_ranks.SYNTAXES, ids=lambda syntax: syntax.name)
def test_ranks_found_after_line_ends_are_the_ranks_at_line_starts(syntax):
    rng = random.Random(0)
    own = {"torchrun": ["[rank0]:", "[rank12]:", "[default3]:", " [rank1]:", "[rank", "]:"],
           "mpirun": ["[1,0]<stdout>:", "[1]<stderr>:", "[2,10]<stdout>:", "[0]<stdout>:", "<stdout>:"],
           "DeepSpeed": ["[Rank 0] ", "[Rank 3] ", "[Rank 1]", "INFO "],
           "srun --label": ["0: ", "1: ", " 2: ", "10: ", "3:", "\n1: "],
           "icefall": ["INFO [train.py:878] (0/4) ", "] (1/4) ", "] (2/4) ", "] (3/4)", " (0/4) ", "INFO ["],
           "Ray": ["(RayTrainWorker pid=41, ip=10.0.0.1) ", "(pid=7) ", "(train_fn pid=41)", "\x1b[36m(pid=12)\x1b[0m ",
                   " pid=", "(pid=", "(x pid=3, ip=1.2) "]}[syntax.name]
    pieces = own * 3 + ["\n", "\n", "x", "\r\n", ":", " ", "[rank1]:", "[1,1]<stdout>:", "[Rank 2] ", "1: ", "(pid=2) "]
    told = 0
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        notes = []
        at_starts = re.compile("^" + syntax.prefix.format(rank=r"(\d+)"), re.MULTILINE).findall(text)
        expected = list(dict.fromkeys(map(int, at_starts))) if syntax.in_order else sorted({int(r) for r in at_starts})
        if syntax.every_rank and (expected != list(range(len(expected))) or len(at_starts) < 4 * len(expected)):
            expected = []
        assert syntax.ranks(text, Lines(text)) == syntax.ranks(text), text  # counted as read
        kept = launcher_ranks.one_rank(text, notes)
        # The syntaxes before this one in the list are asked first: where one of them finds ranks, it speaks.
        earlier = [s for s in launcher_ranks.SYNTAXES[:launcher_ranks.SYNTAXES.index(syntax)] if len(s.ranks(text)) >= 2]
        if earlier:
            continue
        assert bool(notes) == (len(expected) >= 2), text
        if len(expected) >= 2:
            told += 1
            assert f"rank {expected[0]}'s lines are read" in notes[0]
            others = re.compile("^" + syntax.prefix.format(rank=rf"(?!{expected[0]}\D)\d+"), re.MULTILINE)
            assert not others.search(kept) and kept.count("\n") == text.count("\n")
        else:
            assert kept == text
    assert told > 10


def test_field_lists_with_an_empty_head_field_read_as_field_by_field(monkeypatch):
    """A head group that may match nothing: " ".join leaves no token for it, so the tokens after
    it move up; the pyarrow reader must give the same records (it declines such bodies)."""
    from sentinel.analyze.loaders import field_lists
    from sentinel.analyze.loaders.dialects import Dialect, Shape

    dialect = Dialect(name="x", description="", shapes=(Shape(re.compile(r"\bit(\d*) \|([^\n]*)"), head=("step",),
                                                               fields="|"),))
    text = "".join(f"it{'' if i % 9 == 0 else i} | loss: {1 + i / 100} | gnorm: 0.5 |\n" for i in range(1, 200))
    _read_both_ways(monkeypatch, field_lists, "_arrow_bodies", None, text, dialect)


def test_evaluation_lines_split_from_the_training_lines_are_the_lines_emptied():
    rng = random.Random(1)
    words = GENERIC.drop_words
    for _ in range(3000):
        text = "".join(rng.choice(["step 1 loss 2", "valid loss 3", " test", "loss", "\n", "x", "Eval", "evaluation",
                                   "\u0130"]) for _ in range(rng.randint(0, 20)))
        rest, picked = textscan.split_evaluation_lines(text, words)
        kept, lines = rest.split("\n"), text.split("\n")
        assert len(kept) == len(lines)  # line numbers hold
        emptied = [line for now, line in zip(kept, lines) if now != line]
        assert all(now == "" for now, line in zip(kept, lines) if now != line)
        assert picked == "".join(line + "\n" for line in emptied)



def test_evaluation_lines_found_by_skeleton_are_those_found_in_the_text():
    """Which lines are emptied, asked of the distinct line skeletons, on random logs of repeated
    lines: words inside other words ("interval", "retest_"), after the loss, at a line's start and
    end, a last line without its line end."""
    rng = random.Random(5)
    words = GENERIC.drop_words
    pieces = ["step {i} loss {l}", "valid loss {l}", "Validation: loss {l}", "interval {i} loss {l}",
              "loss {l} | val loss {l}", "retest_{i} loss {l}", "test", "eval_loss {l}", "step {i} eval{i} {l}",
              "{i} Test {l}", "", "x"]
    checked = 0
    for _ in range(60):
        kinds = rng.sample(pieces, rng.randint(1, 5))
        lines = [rng.choice(kinds).format(i=rng.randint(1, 999), l=f"{rng.random():.3f}") for _ in range(400)]
        text = "\n".join(lines) + rng.choice(["\n", ""])
        fast = textscan.split_evaluation_lines_at(text, words, lines=Lines(text))
        assert fast == textscan.split_evaluation_lines_at(text, words)
        checked += bool(fast[1])
    assert checked > 30

def test_pipe_table_headers_found_by_one_search_are_the_headers_found_line_by_line(monkeypatch):
    """The '|'-table sniff looks at the lines one search names (a cell that may name the step);
    on random tables and logs it finds the table the line-by-line look finds."""
    from sentinel.analyze.loaders import pipe_table

    rng = random.Random(11)
    cells = ["Step", "STEP", " step ", "`step", "Global_Step", "it", "s", "#", "Epoch", "Training Loss", "loss",
             "Validation Loss", "lr", "12", "0.5", "", "---", ":--", "st ep", "steps", "my_step", "\u017ftep", "Iter"]
    for trial in range(300):
        lines = []
        for _ in range(rng.randint(1, 30)):
            row = [rng.choice(cells) for _ in range(rng.randint(1, 5))] if rng.random() < 0.6 else \
                [str(rng.randint(0, 900)), f"{rng.random():.3f}", f"{rng.random():.3f}"]
            line = " | ".join(row)
            line = rng.choice(["", "| ", "`", "  "]) + line + rng.choice(["", " |", "`", " "])
            lines.append(line)
        options = LoadOptions(step_col=rng.choice([None, None, "Iter", "my_step"]))
        fast = pipe_table._find(lines, options)
        with monkeypatch.context() as m:
            m.setattr(pipe_table, "_may_be_headers", lambda lines, options: range(len(lines)))
            try:
                slow = pipe_table._find(lines, options)
            except ValueError as error:  # a named column missing: the same either way
                slow = error
        assert repr(fast) == repr(slow), lines


def test_field_checks_asked_of_distinct_skeletons_are_the_checks_of_every_field(monkeypatch):
    """Megatron's fields repeat a few skeletons: the name / value split, the trimmed value and its
    number checks, made once per distinct skeleton, must be what numpy and RE2 give over every
    field, on random fields (no mark, two marks, blank or spaced values, thousands, exponents)."""
    import numpy as np
    import pyarrow as pa

    from sentinel.analyze.loaders import field_lists

    rng = random.Random(5)
    pool = [" lm loss: {x}E+00 ", " loss scale: 65536.0 ", " grad norm: {x} ", " consumed samples:  {n} ",
            " learning rate: {x}E-04", " tokens: {n},{m} ", "no mark here", " a=b: {x}", " name:", " name:   ",
            " 2nd field: 1 ", " x: 1 2 ", "", " elapsed time per iteration (ms): {x} ", " k:+.{n}e-{m}",
            " \tlr =\t{x}\t", " throughput: {n}K ", " nan iterations: nan "]
    by_skeleton = 0
    for trial in range(40):
        kinds = pool[:rng.randint(3, len(pool))]
        fields = [rng.choice(kinds).format(x=f"{rng.random() * 10:.{rng.randint(1, 4)}f}", n=rng.randint(0, 99999),
                                           m=f"{rng.randint(0, 999):03d}") for _ in range(rng.randint(64, 400))]
        segments = pa.array(fields, pa.large_string())
        by_skeleton += field_lists._parts_by_skeleton(
            np.frombuffer(segments.buffers()[1], np.int64), np.frombuffer(segments.buffers()[2], np.uint8)) is not None
        fast = field_lists._name_and_value(segments)
        with monkeypatch.context() as m:
            m.setattr(field_lists, "_parts_by_skeleton", lambda *args: None)
            slow = field_lists._name_and_value(segments)
        for a, b in zip(fast, slow):
            assert (a == b).all() if isinstance(a, np.ndarray) else a.equals(b), fields
    assert by_skeleton >= 10


def test_every_pattern_a_pick_counts_runs_once_per_line_skeleton():
    """A pattern that is not line-local is filtered over every line of the head by RE2: ~2 ms a
    pattern for each file sniffed, paid by every log whatever its format. The tool dialects' and
    the first fallbacks' (the last one is counted only where nothing else fits) run per skeleton."""
    from sentinel.analyze.loaders.dialects import FALLBACKS
    from sentinel.analyze.loaders.pattern_locality import line_local

    counted = [(d.name, p) for d in (*DIALECTS[:DIALECTS.index(FALLBACKS[-1])],)
               for p in ([d.sniff] if d.sniff is not None else [s.pattern for s in d.shapes if s.beside is None])]
    assert counted and [name for name, p in counted if not line_local(p)] == []


@pytest.mark.parametrize(("name", "text", "expected"), [
    # nanoGPT's table lines, indented and after an empty line; its iter lines
    ("nanogpt", "\n\n   12 | loss 2.5 | lr 1e-4\n13 | loss 2.4 | lr 1e-4\niter 3: loss 2.1, time 9ms\n", 3),
    # fairseq's tqdm line and its JSON line; an epoch line cut at its ':' is none
    ("fairseq", "epoch 001:  100 / 200 loss=2.5, num_updates=100\nepoch 001:\n 100 / 200 num_updates=1\n"
                '| train_inner | {"epoch": 1, "loss": "2.5", "num_updates": "100"}\n', 2),
])
def test_sniff_lines_counted_per_skeleton_are_the_lines_counted_in_the_text(name, text, expected):
    dialect = next(d for d in DIALECTS if d.name == name)
    padded = text * 200 + "x" * 5000 + "\n"  # long enough to be counted by skeleton
    assert textscan.count_records(text, dialect) == expected
    assert textscan.count_records(Lines(padded), dialect) == 200 * expected


def test_nemo_steps_printed_with_a_fraction_read_as_their_whole_step():
    nemo = next(d for d in DIALECTS if d.name == "nemo")
    lines = "".join(f"Epoch 0: 3%| {i}/90 [00:01<00:09, loss=nan, v_num=, reduced_train_loss={2 + i / 100:.3f}, "
                    f"global_step={i}{suffix}, consumed_samples=8]\n"
                    for i, suffix in zip(range(1, 5), [".0", ".0", ".5", ".0e"]))
    steps = textscan.scan(lines, nemo).steps
    assert steps.index.tolist() == [1, 2, 3, 4] and steps["loss"].tolist() == [2.01, 2.02, 2.03, 2.04]


def test_a_windows_line_end_found_from_the_first_line_ends_is_one_found_in_the_text():
    """``_crlf_in`` asks the first line ends, then searches: a ``\\r\\n`` past them is found too."""
    rng = random.Random(5)
    for _ in range(300):
        ends = rng.choice([["\n"], ["\r"], ["\n", "\r"], ["\r", "\r", "\r", "\n"]])
        pieces = [f"step {i} loss 2.{i}" + rng.choice(ends) for i in range(rng.randrange(0, 700))]
        if pieces and rng.random() < 0.5:
            pieces[rng.randrange(len(pieces))] += "\r\n"  # one Windows line end, anywhere
        text = "".join(pieces)
        assert textscan._crlf_in(text) == ("\r\n" in text)
        assert textscan.clean_text(text) == text.replace("\r\n", "\n").replace("\r", "\n")


@pytest.mark.parametrize("odd", ["[rank10]:step 7 loss 2.5\n", "[rank1]:step 7 loss 2.5\n", "", "x [rank1]:\n"])
def test_the_ranks_of_a_long_log_are_counted_as_read(odd):
    # 5,000 lines of rank 0 (counted by line skeleton) with one other line among them
    lines = [f"[rank0]:step {s} loss {3 - s / 9999:.4f}\n" for s in range(5000)]
    text = "".join(lines[:2500]) + odd + "".join(lines[2500:])
    torchrun = launcher_ranks.SYNTAXES[0]
    assert torchrun.ranks(text, Lines(text)) == torchrun.ranks(text) == ([0, 10] if "10]:" in odd else
                                                                        [0, 1] if odd.startswith("[") else [0])
