"""The console output of a real Hugging Face ``Trainer.train()`` (no sentinel in it), as a user
pastes it: the log dicts carry no step, the tqdm bar drawn beside each has it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from sentinel.analyze.analyzer import analyze_run  # noqa: E402
from sentinel.analyze.loaders import textlogs  # noqa: E402
from sentinel.analyze.loaders.progress_bar import bar_steps  # noqa: E402

SCRIPT = Path(__file__).parent / "scripts" / "hf_console_log.py"
DICT = re.compile(r"\{'(?:loss|eval_[a-z_]+)': [^{}\n]*\}")


def console(tmp_path: Path, logging_steps: int, *extra: str) -> Path:
    """Run the script as a user would (``python train.py > train.log 2>&1``): stdout and
    stderr into one file, in the order they were written."""
    log = tmp_path / f"train-{logging_steps}.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TRANSFORMERS_VERBOSITY": "warning"}
    with open(log, "wb") as out:
        subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "out"), str(logging_steps), *extra],
                       stdout=out, stderr=subprocess.STDOUT, env=env, check=True, timeout=600)
    return log


def test_steps_come_from_the_progress_bar_and_evaluations_keep_theirs(tmp_path):
    log = console(tmp_path, 3, "--eval")
    text = log.read_bytes().decode()
    assert "\r" in text and "it/s]" in text and "{'loss': '" in text  # the real bar, quoted values
    (run,) = textlogs.load(log)
    loss = run.steps["loss"].dropna()
    assert loss.index.tolist() == list(range(3, 61, 3))  # logging_steps=3 of max_steps=60
    assert run.steps["eval_loss"].dropna().index.tolist() == [20, 40, 60]  # eval_steps=20
    assert run.meta["step_source"] == "progress bar" and run.meta["logging_steps"] == 3
    assert not any("carry no step" in w for w in run.warnings)


def test_a_bad_batch_in_a_real_trainer_console_log_is_found_at_its_step(tmp_path):
    (run,) = textlogs.load(console(tmp_path, 1))
    report = analyze_run(run)
    assert [(i.kind, i.step) for i in report.incidents] == [("outlier_batch", 30)]
    assert report.verdict == "healthy"


BAR = " {pct:3d}%|##        | {n}/{total} [00:01<00:09, 10.00it/s]"


def _bar(n: int, total: int = 100) -> str:
    return BAR.format(pct=100 * n // total, n=n, total=total)


def test_the_evaluation_bar_is_not_the_training_bar():
    lines = []
    for step in (10, 20):
        lines += [_bar(step - 1), f"{{'loss': {1 / step}, 'epoch': {step / 100}}}", _bar(step)]
        lines += [f"  {p}%|###| {n}/4 [00:00<00:00]" for p, n in ((0, 0), (50, 2), (100, 4))]
        lines += [f"{{'eval_loss': {2 / step}, 'epoch': {step / 100}}}", _bar(step)]
    out = bar_steps("\n".join(lines) + "\n", DICT)
    assert re.findall(r"'step': (\d+)", out) == ["10", "10", "20", "20"]


@pytest.mark.parametrize("case,lines", [
    ("no bar", ["{'loss': 1.0}", "{'loss': 0.9}"]),
    ("a terminal screen: the dicts above the bar", [f"{{'loss': {x}}}" for x in (1.0, 0.9, 0.8, 0.7)] + [_bar(40)]),
    ("two runs in one paste", ["{'loss': 1.0}", _bar(5), "{'loss': 0.9}", _bar(6), _bar(1), "{'loss': 0.8}", _bar(2)]),
])
def test_without_a_training_bar_beside_the_dicts_they_are_numbered_in_order(tmp_path, case, lines):
    assert bar_steps("\n".join(lines) + "\n", DICT) is None
    log = tmp_path / "paste.txt"
    log.write_text("\n".join(lines) + "\n")
    (run,) = textlogs.load(log)
    assert run.meta["step_source"] == "order" and any("carry no step" in w for w in run.warnings)


def test_a_paste_cut_after_a_dict_goes_on_at_the_logging_interval(tmp_path):
    log = tmp_path / "paste.txt"
    log.write_text("\n".join(["{'loss': 1.0, 'epoch': 0.05}", _bar(5), "{'loss': 0.9, 'epoch': 0.1}", _bar(10),
                              "{'loss': 0.8, 'epoch': 0.15}", _bar(15), "{'loss': 0.7, 'epoch': 0.2}"]) + "\n")
    (run,) = textlogs.load(log)
    assert run.steps["loss"].to_dict() == {5: 1.0, 10: 0.9, 15: 0.8, 20: 0.7}


def test_llamafactory_prints_each_step_twice_before_the_bar(tmp_path):
    # Its LogCallback's line, then the Trainer's dict of the same step, then the bar's redraw.
    lines = []
    for step, lr in ((75, 4.998452110450943e-05), (80, 4.998223113110496e-05), (85, 4.9979783305842495e-05)):
        lines += [f"[INFO|2024-12-08 01:09:59] llamafactory.train.callbacks:157 >> {{'loss': 0.5000, "
                  f"'learning_rate': {lr:.4e}, 'epoch': {step / 2000:.2f}}}",
                  f"{{'loss': 0.5, 'grad_norm': 1.5, 'learning_rate': {lr}, 'epoch': {step / 2000:.2f}}}"]
        if step < 85:  # the paste ends with the last step's two dicts
            lines.append(BAR.format(pct=1, n=step, total=6249))
    log = tmp_path / "llamafactory.txt"
    log.write_text("\n".join(lines) + "\n")
    (run,) = textlogs.load(log)
    assert run.steps.index.tolist() == [75, 80, 85] and run.meta["logging_steps"] == 5
    assert run.steps["grad_norm/total"].tolist() == [1.5, 1.5, 1.5]


def test_dicts_glued_after_the_draws_of_a_copied_terminal_take_the_draw_before_them(tmp_path):
    # LLaMA-Factory's PPO loop writes each dict through its bar; a terminal's copy keeps each line's
    # last draw, the dict glued after it, and none of the redraws: the first draw after a dict is
    # the next logging interval's.
    bar = "  {pct}%|#4        | {n}/860 [00:43<1:05:18,  4.60s/it]"
    lines = [bar.format(pct=1, n=9) + "{'loss': nan, 'reward': 0.2684, 'learning_rate': 9.9e-06, 'epoch': 0.01}",
             bar.format(pct=2, n=19) + "{'loss': nan, 'reward': -0.3129, 'learning_rate': 9.8e-06, 'epoch': 0.02}",
             bar.format(pct=3, n=27)]
    log = tmp_path / "ppo.txt"
    log.write_text("\n".join(lines) + "\n")
    (run,) = textlogs.load(log)
    assert run.steps.index.tolist() == [9, 19]
    # a file's redraws kept: the draw after each dict is its own, as before
    lines = [bar.format(pct=1, n=9), bar.format(pct=1, n=10) + "{'loss': 0.5, 'epoch': 0.01}", bar.format(pct=1, n=10),
             bar.format(pct=2, n=20) + "{'loss': 0.4, 'epoch': 0.02}", bar.format(pct=2, n=20)]
    log.write_text("\n".join(lines) + "\n")
    (run,) = textlogs.load(log)
    assert run.steps.index.tolist() == [10, 20]
