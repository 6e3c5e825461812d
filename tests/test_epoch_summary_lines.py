"""A loss printed alone on its own line under a line that names the epoch, with two words before "loss":
FourCastNet's trainer (and NERSC's weather tutorial) logs "Time taken for epoch 1 is 61.4 sec" then
"  Avg train loss=0.577775" through Python's "%(asctime)s - %(name)s - %(levelname)s - %(message)s"; the
PhysicsNeMo examples print "--- Epoch 1 Summary ---" then "Avg Train Loss: 0.976610". Both were refused."""

from __future__ import annotations

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
