"""A loss printed alone on its own line under a line that names the epoch, with two words before "loss":
FourCastNet's trainer (and NERSC's weather tutorial) logs "Time taken for epoch 1 is 61.4 sec" then
"  Avg train loss=0.577775" through Python's "%(asctime)s - %(name)s - %(levelname)s - %(message)s"; the
PhysicsNeMo examples print "--- Epoch 1 Summary ---" then "Avg Train Loss: 0.976610". Both were refused."""

from __future__ import annotations

import math

import pytest

from sentinel.analyze import analyze
from sentinel.analyze.discover import discover_runs


def _fourcastnet(epoch: int, loss: float) -> list[str]:
    return [f"2024-11-08 22:23:44,157 - root - INFO - Time taken for epoch {epoch} is 61.425346 sec, avg 8.3 samples/sec",
            f"2024-11-08 22:23:44,157 - root - INFO -   Avg train loss={loss:.6f}",
            f"2024-11-08 22:23:49,532 - root - INFO -   Avg val loss={loss * 0.9:.6f}",
            "2024-11-08 22:23:49,532 - root - INFO -   Total validation time: 4.699830055236816 sec"]


def _physicsnemo(epoch: int, loss: float) -> list[str]:
    return [f"--- Epoch {epoch} Summary ---", f"Avg Train Loss: {loss:.6f}", f"Avg Test Loss: {loss * 0.9:.6f}",
            "Learning Rate: 0.001000"]


@pytest.mark.parametrize("lines", [_fourcastnet, _physicsnemo])
def test_epoch_summaries_with_their_loss_below_the_epoch_line(tmp_path, lines):
    path = tmp_path / "train.log"
    path.write_text("\n".join(line for e in range(1, 9) for line in lines(e, 1.0 / e)) + "\n")
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(1, 9))
    assert run.steps["loss"].tolist() == pytest.approx([1.0 / e for e in range(1, 9)], abs=1e-6)
    assert analyze(path).runs[0].verdict == "healthy"


def test_an_evaluations_own_batch_count_is_no_training_step(tmp_path):
    """DPR's train_dense_encoder prints "Eval step: 99 , used_time=46.5 sec., loss=0.112810" over each validation
    pass's batches, its count from the start again at each pass: read as validation losses at steps 99..1599 and
    again at 1798.., the noisy batch losses made an "overfitting (+17692375%)" finding."""
    lines = []
    for epoch in range(2):
        lines += [f"Epoch: {epoch}: Step: {s}/3258, loss={0.5 * math.exp(-(epoch * 3258 + s) / 2000):.6f}, lr=0.000007"
                  for s in range(1, 3258, 100)]
        lines += [f"Eval step: {b} , used_time=46.501453 sec., loss={(b * 7919 % 5000) / 1000:.6f}"
                  for b in range(99, 1600, 100)]
        lines.append("NLL Validation: loss = 0.735069. correct prediction ratio  5307/6516 ~  0.814457")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    (run,) = discover_runs(path)
    assert "val_loss" not in run.steps.columns or run.steps["val_loss"].count() <= 2
    assert any("count their own batches" in w for w in run.warnings)
    assert not [i for i in analyze(path).runs[0].incidents if i.kind == "overfitting"]
