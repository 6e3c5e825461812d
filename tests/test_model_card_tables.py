"""The "Training Logs" table of a sentence-transformers model card, pasted as a Markdown table: a cell
``-`` is a value that row did not log (no NaN), and two fit() calls' logs one after another are two
trainings, each from its first step."""

from __future__ import annotations

from sentinel.analyze import analyze
from sentinel.analyze.discover import discover_runs

_HEADER = ("| Epoch  | Step | Training Loss | Validation Loss | eval_cosine_accuracy |\n"
           "|:------:|:----:|:-------------:|:---------------:|:--------------------:|\n")


def _rows(losses, val_losses, start_epoch_row: bool = False) -> str:
    rows = ["| 0      | 0    | -             | -               | 0.7212               |"] if start_epoch_row else []
    for k, (loss, val) in enumerate(zip(losses, val_losses), 1):
        rows.append(f"| {k - 0.5:<6} | {100 * k - 50:<4} | {loss:<13} | -               | -                    |")
        rows.append(f"| {k:<6.1f} | {100 * k:<4} | -             | {val:<15} | 0.9                  |")
    return "\n".join(rows) + "\n"


def test_a_dash_is_no_nan_and_two_fits_are_two_trainings(tmp_path):
    path = tmp_path / "README.md.txt"
    path.write_text("### Training Logs\n" + _HEADER + _rows([3.9, 3.8, 3.7], [3.79, 3.78, 3.77], start_epoch_row=True)
                    + _rows([0.66, 0.35, 0.2], [0.12, 0.07, 0.06]))
    report = analyze(path)
    assert len(report.runs) == 2 and {run.verdict for run in report.runs} == {"healthy"}
    assert not [i for run in report.runs for i in run.incidents if i.kind == "nonfinite"]
    first, second = discover_runs(path)
    assert first.steps["loss"].dropna().tolist() == [3.9, 3.8, 3.7]
    assert second.steps["loss"].dropna().tolist() == [0.66, 0.35, 0.2]


def test_a_validation_loss_printed_nan_is_still_told(tmp_path):
    path = tmp_path / "README.md.txt"
    path.write_text(_HEADER + _rows([3.9, 3.8, 3.7, 3.6], [3.79, "nan", 3.77, 3.76]))
    (run,) = analyze(path).runs
    (incident,) = [i for i in run.incidents if i.kind == "nonfinite"]
    assert incident.step == 200 and "validation loss" in incident.message
