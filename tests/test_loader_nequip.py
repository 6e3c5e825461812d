"""NequIP's console log (its run's ``log`` file): per-batch tables under "# Epoch batch loss ..." lines, then each
epoch's summary rows under "Train # Epoch wal LR ..." headers. Read as a table, the batch lines gave a batch index
as the step and a validation batch's force error as the loss (0.289 for a final training loss of 0.00048)."""

from __future__ import annotations

import math

import pytest

from sentinel.analyze import analyze
from sentinel.analyze.discover import discover_runs

_BATCH_HEADER = "# Epoch batch         loss       loss_f       loss_e        f_mae"
_SUMMARY_HEADER = "  Train      #    Epoch      wal       LR       loss_f       loss_e         loss        f_mae"


def _log(tmp_path, loss=lambda e: 0.8 * math.exp(-e / 5)):
    lines = ["Torch device: cuda", "! Starting training ...", "validation", _BATCH_HEADER,
             "      0     1          3.1        0.988         2.11        0.715",
             "  Initialization     #    Epoch      wal       LR       loss_f       loss_e         loss        f_mae",
             "! Initial Validation          0    1.590    0.005        0.988         2.11          3.1        0.715"]
    for e in range(1, 21):
        lines += ["training", _BATCH_HEADER, f"      {e}    16        0.217        0.178       0.0382        0.289",
                  "validation", _BATCH_HEADER, f"      {e}     1        0.219        0.162       0.0567        0.288",
                  _SUMMARY_HEADER,
                  f"! Train          {e:6d}    8.080    0.005         0.46        0.365   {loss(e):10.4g}        0.466",
                  f"! Validation     {e:6d}    8.080    0.005        0.162       0.0567   {loss(e) * 1.1:10.4g}        0.288",
                  f"Wall time: {8.08 * e}", f"! Best model   {e:6d}    0.219"]
    path = tmp_path / "log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_summary_rows_are_read_not_the_batch_tables(tmp_path):
    (run,) = discover_runs(_log(tmp_path))
    assert run.source == "nequip" and run.steps.index.tolist() == list(range(0, 21))
    assert run.steps["loss"].iloc[-1] == pytest.approx(0.8 * math.exp(-4), rel=1e-3)
    assert run.steps["val_loss"].iloc[0] == 3.1 and run.steps["lr"].iloc[-1] == 0.005
    assert analyze(_log(tmp_path)).runs[0].verdict == "healthy"


def test_a_nan_training_loss_is_told_at_its_epoch(tmp_path):
    report = analyze(_log(tmp_path, lambda e: math.nan if e >= 12 else 0.8 * math.exp(-e / 5)))
    (incident,) = [i for i in report.runs[0].incidents if i.message.startswith("loss non-finite")]
    assert incident.step == 12 and incident.severity == "critical"
