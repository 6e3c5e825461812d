"""DeepSpeed's own count of skipped optimizer steps (``[Rank 0] step=N, skipped=K, lr=[...]``), read
beside whatever prints the loss and judged: a run that skips most of its steps does not train, though
its loss lines go on (a T5 fine-tuned in fp16 under DeepSpeed: ``step=2000, skipped=1999``, lr 0.0); and MindYOLO's
overflow lines, each a step whose loss scale fell."""

from __future__ import annotations

import pytest

from sentinel.analyze import analyze
from sentinel.analyze.loaders.skipped_updates import skipped_counts

# deepspeed/runtime/engine.py, every steps_per_print steps: log_dist(f"step={self.global_steps},
# skipped={self.skipped_steps}, lr={lr}, mom={mom}", ranks=[0])
_PROGRESS = ("[2021-11-22 19:51:55,198] [INFO] [logging.py:69:log_dist] [Rank 0] step={}, skipped={}, "
             "lr=[{}, {}], mom=[0.0, 0.0]")


def _hf_with_deepspeed(tmp_path, skipped_at, lr: float = 3e-5):
    """A Hugging Face Trainer's log dicts every 100 steps, DeepSpeed's progress line every 100 steps
    between them; ``skipped_at(step)``: the skipped count DeepSpeed prints at ``step``."""
    lines = []
    for k in range(1, 31):
        step = 100 * k
        lines.append(_PROGRESS.format(step, skipped_at(step), lr, lr))
        lines.append(str({"loss": round(2.5 - 0.03 * k, 4), "learning_rate": lr, "epoch": round(k / 30, 2)}))
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    return analyze(path).runs[0]


def test_a_run_that_skipped_nearly_every_step_is_unhealthy(tmp_path):
    run = _hf_with_deepspeed(tmp_path, lambda step: step - 1, lr=0.0)
    (incident,) = [i for i in run.incidents if i.kind == "overflow_rate"]
    assert run.verdict == "unhealthy" and incident.severity == "critical"
    assert "DeepSpeed skipped 2999 of its 3000 optimizer steps" in incident.message
    assert "no update was applied" in incident.message


def test_a_start_up_search_and_a_few_overflows_are_healthy(tmp_path):
    run = _hf_with_deepspeed(tmp_path, lambda step: 14 + step // 1000)  # the scaler's search from 2**16, then a few
    assert run.verdict == "healthy"
    assert not [i for i in run.incidents if i.kind == "overflow_rate"]


def test_a_run_skipping_a_tenth_of_its_steps_is_warned_of(tmp_path):
    run = _hf_with_deepspeed(tmp_path, lambda step: 14 + step // 10)
    (incident,) = [i for i in run.incidents if i.kind == "overflow_rate"]
    assert incident.severity == "warning" and incident.details["resolved"] is False
    assert "skipped=314" in incident.message and "still at its last line" in incident.message


@pytest.mark.parametrize("log, expected", [
    ("step=10, skipped=4, lr=[1e-5]\nstep=20, skipped=4, lr=[1e-5]\nstep=30, skipped=5, lr=[1e-5]\n",
     {"first": [10, 4], "before_last": [20, 4], "last": [30, 5]}),
    ("step=20, skipped=9, lr=[1e-5]\nstep=10, skipped=2, lr=[1e-5]\n", None),  # launches appended: not judged
    ("step 10 loss 2.0\n", None),
])
def test_the_counts_read(log, expected):
    assert skipped_counts(log) == expected


def test_mindyolos_overflow_lines_are_overflows_with_their_scale(tmp_path):
    """MindYOLO's train step warns "overflow, still update, loss scale adjust to 1024.0" (mindyolo#441): unread,
    a run whose scale fell at every step was healthy."""
    from sentinel.analyze.discover import discover_runs

    lines, scale = [], 65536.0
    for step in range(1, 61):
        if step > 30:
            scale /= 2
            lines.append(f"2025-04-10 16:54:20,197 [WARNING] overflow, still update, loss scale adjust to {scale}")
        lines.append(f"2025-04-10 16:49:32,284 [INFO] Epoch {(step - 1) // 4 + 1}/300, Step {(step - 1) % 4 + 1}/4, "
                     f"imgsize (640, 640), loss: {0.5 - step / 1000:.4f}, lbox: 0.1035, cur_lr: 0.0088")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    (run,) = discover_runs(path)
    assert run.steps["amp/overflow"].sum() == 30 and run.steps["loss_scale"].min() == 65536.0 / 2 ** 30
    kinds = {i.kind: i.severity for i in analyze(path).runs[0].incidents}
    assert kinds["loss_scale_collapse"] == "critical"
