"""A Jupyter notebook named on its own is read from what its cells printed (its code never run)."""

from __future__ import annotations

import nbformat
import pytest
from click.testing import CliRunner
from nbclient import NotebookClient

from sentinel.analyze import discover
from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import NoRunsError, discover_runs
from sentinel.cli.main import main

# A training loop a notebook runs: a tiny regression whose loss is printed every 10 steps, a batch of
# outliers at step 150; then the Hugging Face Trainer's progress table as the notebook shows it (HTML).
_TRAINING = """
import torch
torch.manual_seed(0)
x = torch.randn(256, 4); y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0])
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(1, 301):
    batch = torch.randint(0, 256, (32,))
    target = y[batch] * (40.0 if step == 150 else 1.0)
    loss = torch.nn.functional.mse_loss(model(x[batch]).squeeze(1), target)
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 10 == 0:
        print(f"step {step} | loss {loss.item():.4f}")
"""
_TRAINER_TABLE = """
from IPython.display import HTML, display
rows = "".join(f"<tr><td>{s}</td><td>{2.0 / (1 + s / 500):.6f}</td><td>{2.2 / (1 + s / 600):.6f}</td></tr>"
               for s in range(100, 2100, 100))
display(HTML('<div><progress value="2000" max="2000"></progress> [2000/2000 05:23, Epoch 3/3]</div>'
             '<table border="1" class="dataframe"><thead><tr style="text-align: left;"><th>Step</th>'
             '<th>Training Loss</th><th>Validation Loss</th></tr></thead><tbody>' + rows + '</tbody></table><p>'))
"""


def _executed(tmp_path, *sources: str):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    path = tmp_path / "train.ipynb"
    nbformat.write(nb, path)
    return path


def test_a_notebooks_printed_training_and_trainer_table_are_read(tmp_path):
    """A notebook trained in Colab keeps its log in its cells' outputs: `sentinel analyze train.ipynb` was "source
    code, not a training log". Its printed lines are read as a pasted log; the Trainer's table, HTML only, by rows."""
    path = _executed(tmp_path, _TRAINING)
    (run,) = discover_runs(path)
    assert run.path == str(path) and run.steps.index.tolist() == list(range(10, 301, 10))
    assert [i.step for i in analyze_run(run).incidents if i.kind == "loss_spike"] == [150]
    path = _executed(tmp_path, "print('Tokenizing...')", _TRAINER_TABLE)
    (run,) = discover_runs(path)
    assert run.steps["loss"].dropna().index.tolist() == list(range(100, 2100, 100))
    assert run.steps["loss"].iloc[0] == pytest.approx(2.0 / 1.2, abs=1e-6)


def test_a_notebook_with_no_output_or_no_json_says_so(tmp_path):
    empty = tmp_path / "empty.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("train()")]), empty)
    result = CliRunner().invoke(main, ["analyze", str(empty)])
    assert result.exit_code == 1 and "a notebook that holds no output (not run, or saved without its outputs)" in \
        result.output
    broken = tmp_path / "broken.ipynb"
    broken.write_text('{"cells": [', encoding="utf-8")
    result = CliRunner().invoke(main, ["analyze", str(broken)])
    assert result.exit_code == 1 and "is no Jupyter notebook (not JSON data)" in result.output
    # JSON of a notebook's shape with other types where lists go: no output read, not "a bug in sentinel".
    odd = tmp_path / "odd.ipynb"
    odd.write_text('{"nbformat": 4, "cells": [{"outputs": 5}, {"outputs": [{"output_type": "error", "traceback": 3}]}]}',
                   encoding="utf-8")
    result = CliRunner().invoke(main, ["analyze", str(odd)])
    assert result.exit_code == 1 and "a notebook that holds no output" in result.output
    # A lone surrogate escaped in its JSON ("\ud800", a terminal's broken byte) is read past, not an encoding error.
    lone = tmp_path / "lone.ipynb"
    lone.write_text('{"nbformat": 4, "cells": [{"outputs": [{"output_type": "stream", "text": "'
                    + "".join(f"step {s} | loss {2 - s / 10} \\ud800\\n" for s in range(1, 6)) + '"}]}]}',
                    encoding="utf-8")
    assert len(discover_runs(lone)[0].steps) == 5
    # Outputs that hold no training: the text reader's refusal, under the notebook's name.
    printed = tmp_path / "printed.ipynb"
    cell = nbformat.v4.new_code_cell("print('hello')", outputs=[nbformat.v4.new_output("stream", text="hello\n")])
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), printed)
    with pytest.raises(NoRunsError) as caught:
        discover_runs(printed)
    assert str(printed) in str(caught.value) and "sentinel-notebook-" not in str(caught.value)


def test_a_notebook_in_a_directory_walk_is_source_code(tmp_path):
    """Named on its own a notebook is its outputs; in a walk it is one of a repository's files."""
    cell = nbformat.v4.new_code_cell("fit()", outputs=[nbformat.v4.new_output(
        "stream", text="".join(f"step {s} | loss {2 - s / 1000:.4f}\n" for s in range(10, 300, 10)))])
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), tmp_path / "train.ipynb")
    (tmp_path / "train.log").write_text("".join(f"step {s} | loss {2 - s / 1000:.4f}\n" for s in range(10, 300, 10)))
    found = discover.discover(tmp_path)
    assert [run.path for run in found.runs] == [str(tmp_path / "train.log")]
    assert [s.path for s in found.skipped] == [str(tmp_path / "train.ipynb")]


def test_a_keras_evaluate_cell_is_no_epoch_of_the_fit_before_it(tmp_path):
    """A course notebook's model.fit cell, then cells of model.evaluate (another model's test set among them): each
    evaluate bar ('18/18 [====] - 0s 2ms/step - loss: 638.3') was read as the fit's last epoch, a 5.79x "spike" at
    epoch 100 of a healthy fit. A cell that printed no 'Epoch k/K' line prints no epoch of a fit."""
    fit = "".join(f"Epoch {e}/20\n1875/1875 [==============================] - 2s 1ms/step - loss: {1 / e:.4f}\n"
                  for e in range(1, 21))
    evaluate = "18/18 [==============================] - 0s 2ms/step - loss: 638.3000 - mae: 638.3000\n"
    keras3 = "\x1b[1m313/313\x1b[0m \x1b[32m━━━━━━━━━━━━━━━━━━━━\x1b[0m\x1b[37m\x1b[0m \x1b[1m1s\x1b[0m 2ms/step - loss: 9.1\n"
    cells = [nbformat.v4.new_code_cell(source, outputs=[nbformat.v4.new_output("stream", text=text)])
             for source, text in [("model.fit(x, y, epochs=20)", fit), ("model.evaluate(x_test, y_test)", evaluate),
                                  ("other.evaluate(x2, y2)", keras3)]]
    path = tmp_path / "course.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(1, 21)) and run.steps["loss"].iloc[-1] == pytest.approx(0.05)
    assert analyze_run(run).verdict.value == "healthy"


def _trainer_table(metric: str, steps: range, start: float) -> str:
    """A cell that displays the Trainer's progress table (HTML only) of a training logged at ``steps``."""
    return f"""
from IPython.display import HTML, display
rows = "".join(f"<tr><td>{{s}}</td><td>{{{start} / (1 + s / 500):.6f}}</td><td>{{0.5 + s / 5000:.6f}}</td></tr>"
               for s in {steps!r})
display(HTML('<table border="1" class="dataframe"><thead><tr style="text-align: left;"><th>Step</th>'
             '<th>Training Loss</th><th>{metric}</th></tr></thead><tbody>' + rows + '</tbody></table>'))
"""


def test_each_trainer_table_of_a_notebook_is_a_training_of_its_own(tmp_path):
    """A notebook that trains twice (two `trainer.train()` cells, a second model) shows two tables: the second,
    naming another score ("Mcc Score" after "F1 Score") and logged every 100 steps after every 50, was dropped
    without a word; under the same header, its rows replaced the first training's. Each is a run of its own."""
    path = _executed(tmp_path, "print('Tokenizing...\\nMap: 100%\\nSome weights were not initialized' * 3)",
                     _trainer_table("F1 Score", range(50, 1050, 50), 2.0),
                     "print('F1 on the test set: 0.93')", _trainer_table("Mcc Score", range(100, 1100, 100), 3.0))
    first, second = discover_runs(path)
    assert (first.name, second.name) == (f"{tmp_path.name}#1", f"{tmp_path.name}#2")  # train.ipynb: its folder
    assert first.steps.index.tolist() == list(range(50, 1050, 50)) and first.steps["loss"].iloc[0] == pytest.approx(1.8181818)
    assert second.steps.index.tolist() == list(range(100, 1100, 100)) and second.steps["loss"].iloc[0] == pytest.approx(2.5)
    assert first.source == "space_table" and "holds 2 trainings" in first.warnings[0]
    assert "a table of its own" in first.warnings[0]
    path = _executed(tmp_path, _trainer_table("F1 Score", range(50, 1050, 50), 2.0),
                     _trainer_table("F1 Score", range(50, 1050, 50), 3.0))
    first, second = discover_runs(path)  # (the tables alone: read as a CSV is)
    assert first.steps["loss"].iloc[-1] == pytest.approx(2.0 / 3) and second.steps["loss"].iloc[-1] == pytest.approx(1.0)
    # the same table displayed again (a live display, then its last state) is the same training
    path = _executed(tmp_path, "print('Tokenizing...\\nMap: 100%\\nSome weights were not initialized' * 3)",
                     _trainer_table("F1 Score", range(50, 550, 50), 2.0) + "\nprint('sample output')\n" +
                     _trainer_table("F1 Score", range(50, 1050, 50), 2.0))
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(50, 1050, 50))
    # a second table that goes on where the first stopped (a resumed training) is the same run
    path = _executed(tmp_path, _trainer_table("F1 Score", range(50, 550, 50), 2.0),
                     _trainer_table("Mcc Score", range(550, 1050, 50), 2.0))
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(50, 1050, 50))
