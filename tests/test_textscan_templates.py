"""The text engine's template reader (one regex run per line skeleton, numbers cast at once)
against its general reader (Python's ``re`` on every line): the same steps, events, meta and
warnings on lines that follow one template, several, or break it."""

from __future__ import annotations

import math
import random
import re

import pandas as pd
import pytest

from sentinel.analyze.loaders import LoadOptions
from sentinel.analyze.loaders import textscan
from sentinel.analyze.loaders.dialects import DIALECTS, LLMC, MEGATRON, NANOGPT, TF, Dialect, Shape
from sentinel.analyze.loaders.log_lines import Lines
from sentinel.analyze.loaders.pattern_locality import line_local
from sentinel.analyze.loaders.template_reader import read_templates

BY_NAME = {d.name: d for d in (LLMC, *DIALECTS)}


def _general(monkeypatch, text: str, dialect: Dialect, options: LoadOptions | None = None):
    with monkeypatch.context() as m:
        m.setattr(textscan, "read_templates", lambda *args: None)
        return textscan.scan(text, dialect, options)


def _template_used(text: str, dialect: Dialect, options: LoadOptions | None = None) -> bool:
    lines = Lines(textscan.clean_text(text))
    return any(read_templates(lines, shape, dialect, options or LoadOptions()) not in (None, False)
               for shape in dialect.shapes)


def _same(monkeypatch, text: str, dialect: Dialect, options: LoadOptions | None = None, fast: bool | None = True):
    """Both readers agree; ``fast``: the template reader must (True) / must not (False) take the text."""
    if fast is not None:
        assert _template_used(text, dialect, options) is fast
    new = textscan.scan(text, dialect, options)
    old = _general(monkeypatch, text, dialect, options)
    pd.testing.assert_frame_equal(new.steps, old.steps, check_exact=True)
    pd.testing.assert_frame_equal(new.events, old.events, check_exact=True)
    assert new.meta == old.meta
    assert new.warnings == old.warnings
    return new


def _modded(step: int, loss: str = "3.2500", time: str = "41873ms", avg: str = "349.00ms") -> str:
    return f"step:{step}/3000 train_loss:{loss} train_time:{time} step_avg:{avg}"


def test_one_template(monkeypatch):
    text = "".join(_modded(s, f"{10 / s:.4f}", f"{s * 349}ms") + "\n" for s in range(1, 300))
    text += "step:300/3000 val_loss:2.5\n"
    got = _same(monkeypatch, text, LLMC)
    assert got.steps.loc[1, "loss"] == 10.0 and got.steps.loc[299, "train_time_ms"] == 299 * 349
    assert got.steps.loc[300, "val_loss"] == 2.5 and got.meta["train_steps"] == 3000


@pytest.mark.parametrize("odd, fast", [
    ("step:7/3000 train_loss:1.5x train_time:5ms step_avg:1.0ms", True),  # a malformed number: text
    ("step:7/3000 train_loss:-.5e-3 train_time:5ms step_avg:nanms", True),
    ("step:7/3000 train_loss:inf train_time:5s step_avg:Infinity", True),  # units: s -> _ms * 1000
    ("step:7/3000 train_loss:NaN train_time:5ms step_avg:-infms", True),  # a logged NaN loss: an event
    ("step:7/3000 train_time:5ms step_avg:1.0ms", True),  # the loss key missing
    ("step:7/3000 train_loss:2.0 train_time:5ms step_avg:1.0ms lr:0.1 norm:1e3", True),  # more keys
    ("step:7/3000 train_loss:2.0 train_loss:2.5 train_time:5ms", True),  # a key twice: the later one
    ("step:7/3000 train_loss:2.0 trl:2.5 train_time", True),  # two names for the loss, a key with no value
    ("step:7/3000 train_loss", True),
    ("step:7/3000", True),
    ("step:7/3000 2.0 train_time:5ms", False),  # a number where a key is
    ("step:7/3000 @:2.0 train_time:5ms", True),  # strict: a key that is not a name makes the line noise
    ("step:7/3000 top1:0.5 train_loss:2.0", False),  # a key with a digit
    ("step:7/3000 train_loss:2.0 eta:1:02:03", False),  # a key "02"
    ("step:7/3000 train_loss:2.0 msg:ms", True),  # a unit with no number
    ("step:7/3000 train_loss:2.0 \u00e9t\u00e9:1.5 train_time:5ms", True),  # non-ASCII key
    ("step:\u0667/3000 train_loss:2.0", False),  # an Arabic-Indic digit: not a number for pyarrow
    ("step:7/3000 train_loss:\u0662.5", False),  # ... where a number is
    ("   step:7/3000 train_loss:2.0", True),
    ("step:7/3000 train_loss:2.0|x", True),
    ("step:7/3000 train_loss:2.0 " + " ".join(f"k{i}:1" for i in range(60)), False),
    ("step:7/3000 train_loss:2.0 " + " ".join(f"k:{i}" for i in range(60)), True),  # too many fields
    ("noise step:7/3000 train_loss:2.0", True),  # not at the start of a line: no record
    ("s:7 trl:2.0 lr:0.1 norm:1.5", True),  # the other shape
])
def test_lines_that_break_the_template(monkeypatch, odd, fast):
    lines = [_modded(s) for s in range(1, 13)]
    lines[6] = odd
    lines.insert(3, "step:3/3000 val_loss:2.75 train_time:100ms step_avg:3.00ms")
    _same(monkeypatch, "\n".join(lines) + "\n", LLMC, fast=fast)


def test_every_record_wider_than_the_widest_kept(monkeypatch):
    """One record line of more fields than any record may have (a log pasted without its line
    ends, read by a shape that takes the rest of the line): skipped with a warning both ways,
    not an error from an empty cast."""
    wide = "step:1/3000 train_loss:2.0 " + " ".join(f"k:{i}" for i in range(150)) + "\n"
    got = _same(monkeypatch, wide * 3, LLMC)
    assert got.steps.empty and "with more than 96 fields were skipped" in got.warnings[0]


def test_bad_values_are_counted_per_line(monkeypatch):
    lines = [_modded(s) for s in range(1, 13)]
    lines[4], lines[8], lines[10] = "step:5/3000 train_loss", "step:9/3000 train_loss", "step:11/3000 lr:1 norm"
    got = _same(monkeypatch, "\n".join(lines) + "\n", LLMC)
    assert got.warnings == ["3 token(s) with a value that is not a number were skipped"]


def test_values_that_are_text(monkeypatch):
    """torchtitan prints fields that are not numbers ("memory: 30.00GiB(37.50%)", "tps: 5,000"):
    the template reader reads the numbers beside them and counts the text as the general reader
    does, a value it skips; in a strict shape the line is noise."""
    rng = random.Random(7)
    lines = [f"[rank0]:[titan] - INFO - step: {s:2}  loss: {3 - s / 100:7.4f}  "
             f"memory: {rng.choice([18.5, 30.25]):5.2f}GiB({rng.choice([19.5, 37.75]):.2f}%)  "
             f"tps: {rng.choice([900, 5000, 123456]):,}  "
             f"mfu: {rng.choice(['30.00%', 'n/a%', '7%'])}" for s in range(1, 120)]
    text = "\n".join(lines) + "\n"
    got = _same(monkeypatch, text, BY_NAME["torchtitan"])
    assert got.steps["loss"].notna().all() and got.steps["memory"].isna().all()
    printed = [line.split("tps: ")[1].split()[0] for line in lines]
    assert got.steps["tps"].tolist() == [900.0 if p == "900" else pytest.approx(math.nan, nan_ok=True)
                                         for p in printed]
    assert got.steps["mfu"].isna().sum() == sum("n/a%" in line for line in lines)
    skipped = len(lines) + sum(p != "900" for p in printed) + sum("n/a%" in line for line in lines)
    titan = BY_NAME["torchtitan"]
    assert read_templates(Lines(text), titan.shapes[0], titan, LoadOptions())[1] == skipped
    strict = [_modded(s) for s in range(1, 40)]
    strict[9] = "step:10/3000 train_loss:2.0 train_time:5,000ms step_avg:1.0ms"
    got = _same(monkeypatch, "\n".join(strict) + "\n", LLMC)
    assert 10 not in got.steps.index and len(got.steps) == 38


@pytest.mark.parametrize("from_order", [True, False])
def test_a_required_key(monkeypatch, from_order):
    """HF-style dicts (no scrub, so the template reader takes them): a record counts only with
    its required key; with ``step_from_order``, other records join the step before them."""
    shape = Shape(re.compile(r"\{('(?:loss|eval_[a-z_]+|step)': [^{}\n]*)\}"), head=(),
                  separators=("'", '"', ":", ","), require="loss")
    dialect = Dialect(name="dicts", description="", shapes=(shape,), step_from_order=from_order,
                      step_key=None if from_order else "step")
    text = "".join(f"{{'loss': {1 / s:.4f}, 'learning_rate': 1e-05, 'step': {s}}}\n"
                   + (f"{{'eval_loss': {2 / s:.4f}, 'step': {s}}}\n" if s % 3 == 0 else "") for s in range(1, 30))
    got = _same(monkeypatch, text, dialect)
    assert got.steps["loss"].notna().sum() == 29
    # Records with no number at all (a key alone), two records on one line.
    text += "{'loss': } {'loss': 0.5, 'step': 31} {'eval_x': }\n{'loss': 0.25, 'step': 32}{'loss': }\n"
    _same(monkeypatch, text, dialect)


def test_terminal_and_paste_junk(monkeypatch):
    body = [_modded(s, f"{1 + s / 100:.4f}") for s in range(1, 40)]
    ansi = "\n".join(f"\x1b[32m{line}\x1b[0m" for line in body) + "\n"
    progress = "\n".join(f"{line}\r 50%|#####     | {s}/40\r" for s, line in enumerate(body)) + "\n"
    quoted = "```\n" + "\n".join(f"> {line}" for line in body) + "\n```\n"
    interleaved = "\n".join(f"{line}\nsaving checkpoint {s}/40 took 1.5s\n{'=' * s}"
                            for s, line in enumerate(body)) + "\n"
    cut = "\n".join(body) + "\nstep:40/3000 train_loss:3.2"
    for text in (ansi, progress, quoted, interleaved, cut):
        assert _same(monkeypatch, text, LLMC).steps["loss"].notna().sum() == 39


def test_options_and_multiline_shapes(monkeypatch):
    text = "".join(f"iter {i}: loss {3 - i / 100:.4f}, time {90 + i % 7:.2f}ms, mfu {i % 5:.2f}%\n" for i in range(50))
    text += "step 50: train loss 2.5000, val loss 2.6000\n"
    _same(monkeypatch, text, NANOGPT)
    _same(monkeypatch, text, NANOGPT, LoadOptions(loss_col="mfu"))
    _same(monkeypatch, text, NANOGPT, LoadOptions(step_col="time"))
    with pytest.raises(ValueError):
        textscan.scan(text, NANOGPT, LoadOptions(loss_col="nope"))
    # Two records on one line, and lines with one or the other.
    tf = "".join(f"loss = {1 / (s + 1):.3f}, step = {s} loss = {1 / (s + 2):.3f}, step = {s + 1}\n"
                 for s in range(0, 40, 2))
    tf += "".join(f"step {s} took 1s, loss = {1 / s:.4f}\n" for s in range(40, 60))
    _same(monkeypatch, tf, TF)


def test_not_strict_shapes(monkeypatch):
    """Shapes that keep a line with a key and no value (a later one empties the metric) and
    that read the loss as a head field (a logged NaN there is an event)."""
    text = "".join(f"iter {i}: loss {3 - i / 100:.4f}, time {90 + i % 7:.2f}ms, mfu 1.00%\n" for i in range(20))
    text += "iter 20: loss 2.5, time 3.0ms, loss\niter 21: loss 2.5, time 3.0ms, mfu\n"
    got = _same(monkeypatch, text, NANOGPT)
    assert got.steps["loss"].isna().tolist()[-2:] == [True, False]
    tf = "".join(f"loss = {v}, step = {s}\n" for s, v in enumerate(["2.5", "nan", "1.5", "inf", "NaN", "0.5"] * 5))
    got = _same(monkeypatch, tf, TF)
    assert (got.events["kind"] == "nonfinite").sum() == 15


def test_random_perturbations(monkeypatch):
    """Template lines with random edits: a dropped, added, repeated or unit-changed field, a bad
    number, junk, non-ASCII; every variant must read the same both ways."""
    rng = random.Random(1234)
    keys = ["train_loss", "val_loss", "lr", "norm", "train_time", "tel", "trl", "grad_norm"]
    values = ["2.5", "0.0003", "1e-05", "-1.5E+02", "nan", "inf", "-Infinity", "41873ms", "1.2s", ".5", "7.",
              "+3", "1.5x", "ms", "--1", "1e", "\u00bd", "\u0663"]
    for trial in range(60):
        lines = []
        for step in range(rng.randint(1, 80)):
            fields = [f"{k}:{rng.choice(values[:3]) if rng.random() < 0.9 else rng.choice(values)}"
                      for k in keys[: rng.choice([2, 4, 4, 4, 5])]]
            if rng.random() < 0.1:
                del fields[rng.randrange(len(fields))]
            if rng.random() < 0.05:
                fields.insert(rng.randrange(len(fields) + 1), rng.choice(keys))
            head = f"step:{step * rng.choice([1, 1, 1, 7])}/{rng.choice([100, 3000])}" if rng.random() < 0.95 \
                else f"s:{step}"
            line = " ".join([head, *fields])
            if rng.random() < 0.05:
                line = rng.choice(["  ", "\t", "> ", "x "]) + line
            lines.append(line)
            if rng.random() < 0.1:
                lines.append(rng.choice(["", "loading 3/4 shards", "step: 5", "\u2500" * 5, "step:1/2 \u00e9:1"]))
        text = "\n".join(lines) + rng.choice(["\n", ""])
        for dialect in (LLMC, BY_NAME["text"], BY_NAME["torchtitan"]):
            _same(monkeypatch, text, dialect, fast=None)


def test_scrubs_and_separators_of_several_characters(monkeypatch):
    """mmengine's lines: separators ": " and ", ", an ETA scrubbed out ("eta: 1 day, 8:31:30,"),
    random odd fields; where the scrub joins two tokens into one the general reader reads it."""
    rng = random.Random(99)
    mmengine = BY_NAME["mmengine"]
    fields = ["lr: 1.000e-02", "time: 0.512", "data_time: 0.010", "memory: 3456", "loss_cls: 0.345",
              "grad_norm: inf", "loss: nan", "note: a: b", "eta:", "x: , y: 1.5", "top1: 0.5", "lr:1e-3"]
    taken = 0
    for trial in range(40):
        order = rng.sample(fields[:5], rng.choice([1, 3, 5])) + ["loss: {loss}", "{eta}"]
        rng.shuffle(order)
        sep, kind = rng.choice([", ", "  ", "\t"]), rng.randrange(3)
        lines = []
        for i in range(1, rng.randint(2, 120)):
            eta = f"eta: {rng.choice(['', '1 day, ', '3 days, '])}{rng.randint(0, 23)}:{rng.randint(10, 59)}:05"
            body = [field.format(loss=f"{2 + rng.random():.4f}", eta=eta) for field in order]
            if rng.random() < 0.03:  # one such line sends the shape to the general reader
                body.insert(rng.randrange(len(body) + 1), rng.choice(fields))
            head = (f"Epoch(train)  [{1 + i // 50}][{i % 50:4d}/50]", f"Epoch [{1 + i // 50}][{i % 50}/50]",
                    f"Iter(train) [{i:5d}/9000]")[kind]
            lines.append(f"2024/01/01 10:00:00 - mmengine - INFO - {head}  {sep.join(body)}{rng.choice(['', ','])}")
        text = "\n".join(lines) + "\n"
        taken += _template_used(text, mmengine)
        _same(monkeypatch, text, mmengine, fast=None)
    assert taken >= 10
    merged = "".join(f"Epoch(train) [1][{i}/200]  lr: 1.0e-04eta: 0:01:0{i % 10}  loss: {3 - i / 200:.4f}\n"
                     for i in range(1, 200))
    _same(monkeypatch, merged, mmengine, fast=False)
    # The widest record is judged by its length as the general reader joins it (", " -> " "): a
    # line of 40 short fields in the middle is shorter than one of 10 long names, and is skipped.
    normal = [f"Epoch(train) [1][{i}/300]  lr: 1.0e-04, loss: {2 + i / 1000:.4f}" for i in range(300)]
    normal[100] = "Epoch(train) [1][100/300]  " + ", ".join(["k: 1"] * 40)
    normal[150] = "Epoch(train) [1][150/300]  " + ", ".join(f"a_long_key_name{chr(97 + j)}: 1" for j in range(10))
    wide = _same(monkeypatch, "\n".join(normal) + "\n", mmengine)
    assert wide.warnings == ["1 mmengine line(s) with more than 25 fields were skipped"]


def test_a_scrub_with_nothing_to_act_on(monkeypatch):
    """Hugging Face dicts: the scrub of np.float32(...) / tensor(...) / quoted text cannot run per
    skeleton; a log without them is read by the template reader, one with them by the general."""
    hf = BY_NAME["hf_trainer"]
    plain = "".join(f"{{'loss': {2 - s / 100:.4f}, 'grad_norm': {1 + s % 3}.5, 'learning_rate': 5e-05, "
                    f"'epoch': {s / 100:.2f}}}\n" for s in range(1, 90))
    assert _same(monkeypatch, plain, hf).steps["loss"].notna().sum() == 89
    for odd in ("'grad_norm': np.float32(1.25)", "'grad_norm': tensor(1.25, device='cuda:0')",
                "'remaining_time': '3h 35m 58s'"):
        wrapped = plain.replace("'grad_norm': 2.5", odd, 1)
        assert _same(monkeypatch, wrapped, hf, fast=False).steps["loss"].notna().sum() == 89


def _megatron_line(rng: random.Random, step: int, fields: list[str], end: str) -> str:
    return f" iteration {step:8d}/{rng.choice(['  100000', '100000'])} | " + " | ".join(fields) + end


def test_field_lists(monkeypatch):
    """Megatron's ``| name: value |`` lines read per skeleton: values in units (nanotron's 32.8K),
    rescaled fields (seconds read as ms), logged NaN/Inf, fields left out (text, nothing), lines
    that end with the separator or not, a line cut short; the values the template cannot cut out
    as they are (a thousands separator, ``1_0``, a unit on a rescaled field) leave the log to the
    general reader. Every variant reads the same both ways."""
    megatron = MEGATRON
    rng = random.Random(7)
    odd = ["tokens per sec: 32.8K", "tokens per sec: infE", "tokens per sec: abcK", "x: 1_0", "y: 1,024",
           "elapsed time per iteration (s): 1.5K", "note: a b", "empty:", "lm loss: nan", "grad norm: -inf",
           "9x: 2", "a=1.5", "z: \u00bd", "skipped: +3", "w: 1e400"]
    taken = 0
    for trial in range(40):
        names = rng.sample(["consumed samples: {n}", "learning rate: 3.000E-04", "lm loss: {loss}",
                            "loss scale: 65536.0", "grad norm: {gn}", "number of skipped iterations:   0",
                            "elapsed time per iteration (s): {t}", "tflops: {t}G"], rng.randint(2, 8))
        end = rng.choice([" |", " |", ""])
        lines = []
        for step in range(1, rng.randint(2, 400)):
            fields = [name.format(n=step * 512, loss=f"{3 - step / 1e3:.6E}", gn=f"{rng.random():.3f}",
                                  t=f"{rng.random() * 10:.2f}") for name in names]
            if rng.random() < 0.02:
                fields.insert(rng.randrange(len(fields) + 1), rng.choice(odd))
            lines.append(_megatron_line(rng, step, fields, end if rng.random() < 0.98 else " |"))
        if rng.random() < 0.3:
            lines[-1] = lines[-1][: rng.randrange(len(lines[-1]))]
        if rng.random() < 0.3:
            lines.insert(rng.randrange(len(lines)), f" validation loss at iteration {len(lines)} | lm loss value: "
                                                    f"2.5E+00 | lm loss PPL: 1.2E+01 |")
        text = "\n".join(lines) + "\n"
        taken += _template_used(text, megatron)
        _same(monkeypatch, text, megatron, fast=None)
    assert taken >= 15
    plain = [_megatron_line(rng, s, [f"lm loss: {3 - s / 1e3:.6E}", "elapsed time per iteration (s): 1.25",
                                     "tokens per sec: 32.8K"], " |") for s in range(1, 300)]
    got = _same(monkeypatch, "\n".join(plain) + "\n", megatron)
    assert got.steps["iter_time_ms"].eq(1250.0).all() and got.steps["tokens_per_sec"].eq(32800.0).all()
    for unread in ("consumed samples: 1,024", "x: 1_0", "elapsed time per iteration (s): 1.5K"):
        odd_line = plain[:150] + [plain[150] + f" {unread} |"] + plain[151:]
        got = _same(monkeypatch, "\n".join(odd_line) + "\n", megatron, fast=False)
    assert got.steps.loc[151, "iter_time_ms"] == 1.5e6


_TOOL_LINES = {
    "fairseq": lambda s: f"epoch 001:    {s:4d} / 1000 loss={9 - s / 100:.3f}, nll_loss=8.1, gnorm=1.2, lr=5e-05, "
                         f"num_updates={s}, wall=12",
    "timm": lambda s: f"Train: 0 [{s:4d}/1000 ({s // 10:3d}%)]  Loss: {6 - s / 500:.4f} (5.9)  LR: 1.000e-03",
    "gan": lambda s: f"[0/5][{s}/1583]\tLoss_D: {1 + s / 1e3:.4f}\tLoss_G: {5 - s / 1e3:.4f}\tD(x): 0.5",
    "litgpt": lambda s: f"Epoch 1 | iter {s} step {s // 4} | loss train: {3 - s / 1e3:.3f}, val: n/a | "
                        "iter time: 81.00 ms",
    "nanogpt": lambda s: f"{s} | loss {4 - s / 1e3:.4f} | lr 1.000000e-04 | 95.12ms | mfu 1.20%",
}


@pytest.mark.parametrize("name", sorted(_TOOL_LINES))
def test_tools_lines_read_per_skeleton(monkeypatch, name):
    """The tools' record patterns keep to one line ([^\\S\\n] where they allow spaces), so the
    template reader takes their logs; a blank line or a line of spaces between records changes
    nothing."""
    lines = [_TOOL_LINES[name](s) for s in range(1, 400)]
    lines[100:100] = ["", "   "]
    got = _same(monkeypatch, "\n".join(lines) + "\n", BY_NAME[name])
    assert got.steps["loss"].notna().sum() == 399


def test_line_local():
    assert line_local(re.compile(r"^[ \t]*step:(\d+/\d[^\n]*)", re.M))
    assert line_local(re.compile(r"\biter (\d+: loss [^\n]*)"))
    assert not line_local(re.compile(r"step:\s*(\d+)"))  # \s takes a line end
    assert not line_local(re.compile(r"step (1\d*)"))  # tells 1 from other digits
    assert not line_local(re.compile(r"step ([0-5]+)"))
    assert not line_local(re.compile(r"step ([^x]+)"))  # [^x] takes a line end
    assert not line_local(re.compile(r"(\d)\1"))  # a backreference
    assert not line_local(re.compile(r"^step (\d+)"))  # ^ at the start of the text only
    assert not line_local(re.compile(r"(?s)step.(\d+)"))
    assert not line_local(re.compile(r"(\d*)"))  # may match nothing


def test_a_pattern_that_is_not_line_local_uses_the_general_reader(monkeypatch):
    shape = Shape(re.compile(r"\bstep:\s*(\d+\s+loss:[^\n]*)"))
    dialect = Dialect(name="x", description="", shapes=(shape,))
    text = "step: 1 loss: 2.0\nstep: 2 loss: 1.5\n"
    assert not _template_used(text, dialect)
    assert textscan.scan(text, dialect).steps["loss"].tolist() == [2.0, 1.5]


def _general_count(lines: Lines, pattern: re.Pattern) -> int:
    return len(pattern.findall(lines.matching(pattern)))


def test_counting_by_skeleton_is_counting_every_line():
    """A sniff counts each dialect's record lines; a line-local pattern is counted once per line
    skeleton, times the lines of that skeleton. The counts must be those of reading every line,
    for every dialect, on texts of many repeats (the skeleton count runs) with random edits."""
    rng = random.Random(99)
    fields = ["loss: 2.5", "loss 2.5,", "train_loss:3.1", "lr: 1e-4", "| loss 2.1 |", "Loss=nan", "\u0663",
              "time 9.1ms", "grad_norm: 0.5", "s:1 trl:2.5", "\t", "epoch 3", "[1/20]", "\u00e9:1"]
    heads = ["step {i}", "iter {i}:", "step:{i}/900", "Epoch {e} [{i}/900]", "{i} |", "steps: {i}",
             "global_step={i}", "Epoch {e}: {p}%|###  | {i}/900"]
    patterns = {shape.pattern for d in (LLMC, *DIALECTS) for shape in d.shapes} | \
        {d.sniff for d in (LLMC, *DIALECTS) if d.sniff is not None}
    local = [p for p in patterns if line_local(p)]
    assert len(local) > 20  # most shapes are line-local: the skeleton count is what sniffs use
    for trial in range(12):
        picked = rng.sample(heads, 2)
        bodies = [" ".join(rng.sample(fields, rng.choice([1, 2, 3]))) for _ in range(3)]
        lines = []
        for i in range(rng.choice([800, 2000])):
            head = rng.choice(picked).format(i=i * rng.choice([1, 1, 10]), e=i // 300, p=i % 100)
            body = rng.choice(bodies)
            lines.append(f"{head} {body}" if rng.random() < 0.97 else rng.choice(["", "noise 1 2 3", head]))
        ending = rng.choice(["\n", "", "\r\n"])
        text = ending.join(lines) + rng.choice(["\n", ""]) if ending else "\n".join(lines)
        shared = Lines(text)
        assert shared.skeletons() is not None and len(shared.skeletons().uniques) * 8 <= len(lines)
        for pattern in local:
            assert shared.count(pattern) == _general_count(Lines(text), pattern), (trial, pattern.pattern)
