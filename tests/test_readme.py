"""The README's code is run as written, and its command-output blocks are what the commands print."""

from __future__ import annotations

import math
import os
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from sentinel import load_run
from sentinel.cli.main import main

README = Path(__file__).resolve().parents[1] / "README.md"
REGEN = os.environ.get("SENTINEL_REGEN_README") == "1"


def _block(name: str) -> str:
    text = README.read_text()
    section = re.search(rf"<!-- {name}:start -->(.*?)<!-- {name}:end -->", text, re.S)
    assert section, f"README has no {name} block"
    code = re.search(r"```python\n(.*?)```", section.group(1), re.S)
    return code.group(1)


def test_raw_loop_from_the_readme_runs_and_records(tmp_path, monkeypatch):
    code = _block("raw-loop")
    loop_lines = code[code.index("sen = Sentinel"):].strip().splitlines()
    assert len(loop_lines) <= 15, "the README promises a loop of at most 15 lines"
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    run = load_run(tmp_path / "logs" / "raw")
    assert len(run.steps) == 2 * 4096 // 32
    assert run.steps["loss"].iloc[-1] < run.steps["loss"].iloc[0]
    assert {"lr", "grad_norm/total", "grad_norm/0", "grad_norm/2"} <= set(run.steps.columns)


def test_hugging_face_trainer_example_from_the_readme_runs_and_records(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    code = _block("hf-trainer")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    run = load_run(tmp_path / "logs" / "hf")
    assert len(run.steps) == 60 and run.meta["trainer"]["gradient_accumulation_steps"] == 2
    assert run.steps["loss"].iloc[-1] < run.steps["loss"].iloc[0]
    assert {"lr", "grad_norm/total"} <= set(run.steps.columns)



# --------------------------------------------------------------------------- command output blocks
#
# A README block between <!-- output:NAME:start --> and <!-- output:NAME:end --> is a fence whose
# first line is "$ sentinel ..." and whose other lines are what that command prints (for a block
# named in _EXCERPTS, the part that function cuts, ending in "..."). The test runs the command and
# compares; SENTINEL_REGEN_README=1 writes what it printed into README.md instead. The demo's run
# directory is the session's `demo_run`, written logs/demo as in the README.
#
# Words and integers (steps, counts) must match exactly and in order, spacing and line breaks are
# free; other numbers must be within 2%, so that the demo's training digits, which can differ in the
# last place on another CPU, do not fail the comparison.

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?")
_OUTPUT = re.compile(r"<!-- output:(?P<name>[\w-]+):start -->\n```\n(?P<body>.*?)```\n<!-- output:(?P=name):end -->",
                     re.S)


def _demo_banners(lines: list[str]) -> list[str]:
    """What `sentinel demo` says before training starts and between its runs."""
    end = next(i for i, line in enumerate(lines) if line.startswith("sentinel analyze "))
    while not lines[end - 1].strip():
        end -= 1
    return lines[:end] + ["..."]


_EXCERPTS = {"demo-start": _demo_banners}
_BLOCKS = ("demo-start", "demo-guarded", "real-log")


def _run_command(command: str, demo: tuple[Path, str]) -> str:
    """What ``command`` prints, with the demo's directory written as logs/demo."""
    out, demo_output = demo
    args = shlex.split(command)
    assert args[0] == "sentinel", f"README output block runs {command!r}: only sentinel commands are run"
    if args[1] == "demo":
        assert args[2:] == ["--out", "logs/demo"], "the README's demo block must be `sentinel demo --out logs/demo`"
        printed = demo_output
    else:
        args = [str(out) + a[len("logs/demo"):] if a.startswith("logs/demo") else a for a in args[1:]]
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code in (0, 3), result.output
        printed = result.output
    return printed.replace(str(out), "logs/demo")


def _tokens(lines: list[str]) -> list[str]:
    """Words, punctuation runs and numbers, whitespace dropped."""
    return [t for line in lines for word in line.split() for t in re.split(f"({_NUMBER.pattern})", word) if t]


def _same(want: str, got: str) -> bool:
    if not _NUMBER.fullmatch(want) or not _NUMBER.fullmatch(got) or re.fullmatch(r"-?\d+", want):
        return want == got
    return math.isclose(float(want), float(got), rel_tol=0.02)


def _first_difference(expected: list[str], printed: list[str]) -> str | None:
    want, got = _tokens(expected), _tokens(printed)
    for i, (w, g) in enumerate(zip(want, got)):
        if not _same(w, g):
            return f"{' '.join(want[max(0, i - 8):i + 4])!r} vs now {' '.join(got[max(0, i - 8):i + 4])!r}"
    if len(want) != len(got):
        return f"{len(want)} tokens in the README, {len(got)} printed now"
    return None


def _regenerate(name: str, command: str, lines: list[str]) -> None:
    text = README.read_text()
    match = next(m for m in _OUTPUT.finditer(text) if m.group("name") == name)
    body = "\n".join([command, *lines]) + "\n"
    README.write_text(text[:match.start("body")] + body + text[match.end("body"):])


@pytest.mark.parametrize("name", _BLOCKS)
def test_readme_command_output_is_what_the_command_prints(name, demo_run, monkeypatch):
    monkeypatch.chdir(README.parent)  # the README's paths are relative to the repository
    blocks = {m.group("name"): m.group("body") for m in _OUTPUT.finditer(README.read_text())}
    assert name in blocks, f"README has no output:{name} block"
    command, *expected = blocks[name].rstrip("\n").splitlines()
    assert command.startswith("$ "), f"README block {name} must start with the command it shows"
    printed = _run_command(command[2:], demo_run).rstrip("\n").splitlines()
    printed = _EXCERPTS.get(name, lambda lines: lines)(printed)
    if REGEN:
        _regenerate(name, command, printed)
        return
    difference = _first_difference(expected, printed)
    assert difference is None, (f"README block {name!r} is not what `{command[2:]}` prints now: {difference}. "
                                "Run SENTINEL_REGEN_README=1 pytest tests/test_readme.py to write the current "
                                "output into README.md, then read the diff")


def test_readme_output_comparison_allows_wrapping_and_digits_but_not_words_or_steps():
    assert _first_difference(["loss spike to 8.073 at step 163", "(5.92x)"], ["loss spike to 8.08 at", "step 163 (5.92x)"]) is None
    assert _first_difference(["loss spike to 8.073 at step 163"], ["loss spike to 8.073 at step 164"]) is not None
    assert _first_difference(["loss spike to 8.073"], ["loss spike to 9.1"]) is not None
    assert _first_difference(["grad_norm_explosion 1"], ["grad_norm_explosion 2"]) is not None
    assert _first_difference(["a b"], ["a b c"]) is not None
