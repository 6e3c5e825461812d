"""The README's code is run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sentinel import load_run

README = Path(__file__).resolve().parents[1] / "README.md"


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
