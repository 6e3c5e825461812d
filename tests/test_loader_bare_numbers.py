"""A file of numbers with no header, named on its own: np.savetxt's losses, a loop's step and loss."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from sentinel.analyze.discover import NoRunsError, discover_runs
from sentinel.cli.main import main


def _losses(n: int = 300) -> np.ndarray:
    losses = 3.0 * np.exp(-np.arange(n) / 100) + 1.0 + 0.01 * np.sin(np.arange(n))
    losses[200:206] *= 4  # a spike of six steps
    return losses


def test_np_savetxt_losses_are_the_loss_in_order(tmp_path):
    path = tmp_path / "losses.txt"
    np.savetxt(path, _losses(), header="training loss per step")  # a "# ..." line first
    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    (run,) = json.loads(result.stdout)["runs"]
    assert (run["source"], run["steps"], run["first_step"]) == ("bare_numbers", 300, 1)
    assert any("one number per line and no header: read as the loss" in w for w in run["warnings"])
    assert [(i["kind"], i["step"]) for i in run["incidents"] if i["kind"] == "loss_spike"] == [("loss_spike", 201)]


@pytest.mark.parametrize("sep, suffix", [("\t", ".tsv"), (",", ".csv"), (" ", ".log")])
def test_a_step_and_a_loss_per_line(tmp_path, sep, suffix):
    path = tmp_path / f"train{suffix}"
    path.write_text("".join(f"{10 * i}{sep}{float(loss)!r}\n" for i, loss in enumerate(_losses(50))))
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(0, 500, 10))
    assert run.steps["loss"].tolist() == _losses(50).tolist()


def test_what_is_not_read_says_why(tmp_path):
    three = tmp_path / "metrics.tsv"
    three.write_text("".join(f"{i}\t{3 - i / 100}\t0.001\n" for i in range(50)))
    result = CliRunner().invoke(main, ["analyze", str(three)])
    assert result.exit_code == 1
    assert "holds 3 numbers per line and no header: pass the columns' numbers, counted from 1" in result.output
    back = tmp_path / "pairs.csv"
    back.write_text("".join(f"{i % 7},{3 - i / 100}\n" for i in range(50)))  # the first column goes back
    result = CliRunner().invoke(main, ["analyze", str(back)])
    assert result.exit_code == 1 and "the first not a step" in result.output and "Traceback" not in result.output
    late = tmp_path / "late.txt"
    late.write_text("".join(f"{3 - i / 1e5:.6f}\n" for i in range(20000)) + "oops\n")  # past the sniffed start
    result = CliRunner().invoke(main, ["analyze", str(late)])
    assert result.exit_code == 1 and "then a line that is not" in result.output and "Traceback" not in result.output
    comma = tmp_path / "losses_de.txt"
    comma.write_text("2,5\n2,4\n2,3\n2,2\n")  # a decimal comma: not steps 2, 2, 2, 2
    result = CliRunner().invoke(main, ["analyze", str(comma)])
    assert result.exit_code == 1 and "the first not a step" in result.output


def test_a_table_written_without_its_header_is_read_by_the_columns_named(tmp_path):
    # A script's own CSV of epoch, loss, accuracies and a time of day, each line ending in a comma:
    # the refusal names the columns of numbers, and the options it names read them.
    path = tmp_path / "log.txt"
    path.write_text("".join(f"{e}, {1.6 - e / 400:.5f}, {78 + e % 3:.5f}, {90.8 + e % 2 / 10:.5f}, "
                            f"Aug{21 + e // 30}-{e % 24:02d}:56:49,\n" for e in range(168, 230)))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "holds 6 fields per line and no header, numbers in columns 1-4 (counted from 1)" in result.output
    assert "pass the step's and the loss's columns (--step-col 1 --loss-col 2)" in result.output
    result = CliRunner().invoke(main, ["analyze", str(path), "--step-col", "1", "--loss-col", "2", "--format", "json"])
    assert result.exit_code == 0, result.output
    (run,) = json.loads(result.output)["runs"]
    assert (run["first_step"], run["last_step"], run["steps"]) == (168, 229, 62)
    assert run["final_loss"] == pytest.approx(1.6 - 229 / 400)
    assert "6 fields per line and no header: column 2 read as the loss, column 1 as the step" in run["warnings"][0]
    # a column of words named as the loss: refused, with the columns that hold numbers
    result = CliRunner().invoke(main, ["analyze", str(path), "--step-col", "1", "--loss-col", "5"])
    assert result.exit_code == 1 and "numbers in columns 1-4" in result.output and "Traceback" not in result.output
    # no column of whole numbers that rise: the loss's alone is asked for (the rows then numbered)
    path.write_text("".join(f"{1.6 - e / 400:.5f}, {e % 7}, 19-{e % 24:02d}:56,\n" for e in range(40)))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert "numbers in columns 1-2 (counted from 1): pass the loss's column (--loss-col 1)" in result.output
    # a logger's prefix of several words before the numbers: lines of a log, not a table's cells
    path.write_text("".join(f"2024-04-04 12:0{e % 10}:31,821\tINFO\t[{2.8 - e / 100}, 1.9, {e * 200}]\n"
                            for e in range(40)))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and "fields per line" not in result.output


def test_in_a_directory_a_file_of_numbers_is_data(tmp_path):
    np.savetxt(tmp_path / "losses.txt", _losses())
    with pytest.raises(NoRunsError):
        discover_runs(tmp_path)


@pytest.mark.parametrize("wrap", ["tensor({v}, device='cuda:0')", "tensor({v}, device='cuda:0', grad_fn=<NllLossBackward0>)",
                                  "np.float32({v})"])
def test_one_number_a_line_printed_as_a_tensor(tmp_path, wrap):
    """A LoRA loop printed loss.detach().float() each step: "tensor(3.2207, device='cuda:0')", then
    "tensor(nan, device='cuda:0')" for every step after (ChatGLM-finetune-LoRA#32): "its lines log
    cuda but no loss" (the device's "cuda:0" read as a key's value)."""
    values = [f"{v:.4f}" for v in _losses(30)] + ["nan"] * 9
    path = tmp_path / "out.txt"
    path.write_text("\n".join(wrap.format(v=v) for v in values) + "\n")
    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    (run,) = json.loads(result.stdout)["runs"]
    assert (run["source"], run["steps"]) == ("bare_numbers", 39)
    assert run["warnings"][0].startswith("out.txt: 39 lines of one number each, printed as a tensor or a NumPy scalar")
    assert [(i["kind"], i["step"]) for i in run["incidents"] if i["kind"] == "nonfinite"] == [("nonfinite", 31)]


def test_an_mlflow_metric_file_out_of_its_run_folder_is_read_by_its_step(tmp_path):
    """An MLflow metric file pasted alone ('<timestamp ms> <value> <step>'): refused, its hint '--step-col 1'
    reading the timestamp as the step."""
    path = tmp_path / "loss"
    path.write_text("".join(f"{1628697792090 + 3700 * k} {332.68 - 10 * k} {k}\n" for k in range(10)))
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(10)) and run.steps["loss"].iloc[1] == pytest.approx(322.68)
    assert "an MLflow metric file (<timestamp ms> <value> <step> a line)" in run.warnings[0]
