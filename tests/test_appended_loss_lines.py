"""Logs whose loss lines carry no step, several trainings appended: chemprop's cross-validation
(``Fold N``, then ``Epoch 0`` again above its ``Loss = X, PNorm = ...`` lines) and its launches appended
to one file (``Command line``, the command, ``Args`` at each). Read as one history, each fold's first
loss, back at its start, was a critical spike that never recovered."""

from __future__ import annotations

import math

from sentinel.analyze import analyze


def _chemprop_training(epochs: int, lines_per_epoch: int = 6, header: bool = False) -> list[str]:
    # chemprop v1 (train/run_training.py, train/train.py): debug(f"Epoch {epoch}"), then every log_frequency
    # batches debug(f"Loss = {loss_avg:.4e}, PNorm = {pnorm:.4f}, GNorm = {gnorm:.4f}, {lrs_str}")
    lines = ["Command line", "python chemprop_train --data_path data.csv --dataset_type regression", "Args",
             "{'epochs': 30}"] if header else []
    k = 0
    for epoch in range(epochs):
        lines.append(f"Epoch {epoch}")
        for _ in range(lines_per_epoch):
            lines.append(f"Loss = {1.2 * math.exp(-k / 25) + 0.01:.4e}, PNorm = {112 + k / 10:.4f}, GNorm = 1.3789, "
                         f"lr_0 = 1.0000e-04")
            k += 1
        lines.append(f"Validation rmse = {30 * math.exp(-epoch / 10) + 5:.6f}")
    return lines


def test_cross_validation_folds_are_trainings_of_their_own(tmp_path):
    lines = []
    for fold in range(4):
        lines += [f"Fold {fold}", "Splitting data with seed 0", "Building model 0", *_chemprop_training(20)]
    path = tmp_path / "verbose.log"
    path.write_text("\n".join(lines) + "\n")
    report = analyze(path)
    assert len(report.runs) == 4 and {run.verdict for run in report.runs} == {"healthy"}
    assert [run.steps for run in report.runs] == [120] * 4
    assert not [i for run in report.runs for i in run.incidents if i.kind == "loss_spike"]


def test_launches_of_a_few_epochs_each_are_told_by_their_command_line_header(tmp_path):
    lines = _chemprop_training(2, header=True) + _chemprop_training(1, header=True) + _chemprop_training(2, header=True)
    path = tmp_path / "verbose.log"
    path.write_text("\n".join(lines) + "\n")
    report = analyze(path)
    assert len(report.runs) == 3 and {run.verdict for run in report.runs} == {"healthy"}
