"""DeepXDE's loss.dat: a comma header naming groups over rows of numbers apart by spaces."""

from __future__ import annotations

import numpy as np
from click.testing import CliRunner

from sentinel import metrics
from sentinel.analyze.discover import discover_runs
from sentinel.analyze.loaders import LoadOptions
from sentinel.cli.main import main


def _save_loss_history(path, steps, train, test, metric=None):
    """What DeepXDE's save_loss_history writes: np.savetxt of step, terms, test terms, metrics."""
    parts = [np.asarray(steps, dtype=float)[:, None], train, test] + ([metric[:, None]] if metric is not None else [])
    np.savetxt(path, np.hstack(parts), header="step, loss_train, loss_test, metrics_test")
    return path


def _terms(n=30, blow_up_at=None):
    steps = np.arange(n) * 1000
    train = np.stack([0.5 * np.exp(-np.arange(n) / 8) + 1e-3, 0.2 * np.exp(-np.arange(n) / 5) + 1e-4], axis=1)
    if blow_up_at is not None:
        train[blow_up_at:, 0] = np.nan
    return steps, train, train * 1.1


def test_a_converging_pinn_is_healthy_with_the_terms_summed(tmp_path):
    steps, train, test = _terms()
    (run,) = discover_runs(_save_loss_history(tmp_path / "loss.dat", steps, train, test), LoadOptions())
    assert run.source == "deepxde" and run.steps.index.tolist() == steps.tolist()
    assert np.allclose(run.steps[metrics.LOSS], train.sum(axis=1))
    assert np.allclose(run.steps[metrics.VAL_LOSS], test.sum(axis=1))
    assert run.warnings[0] == "loss.dat: 4 numbers after the step read as 2 loss term(s), training then test; " \
                              "the loss is the training terms' sum"
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "loss.dat")])
    assert result.exit_code == 0 and "-- healthy" in result.output and "nonfinite" not in result.output


def test_a_test_metric_after_the_terms_and_a_nan_run(tmp_path):
    steps, train, test = _terms(blow_up_at=20)
    path = _save_loss_history(tmp_path / "loss.dat", steps, train, test, metric=np.linspace(1, 0.1, 30))
    (run,) = discover_runs(path, LoadOptions())
    assert np.allclose(run.steps["metric_test0"], np.linspace(1, 0.1, 30))
    assert run.steps[metrics.LOSS].isna().tolist() == [False] * 20 + [True] * 10
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert "loss non-finite (nan) at steps 20000-29000" in result.output, result.output


def test_rows_of_other_lengths_are_refused_with_one_message(tmp_path):
    path = tmp_path / "loss.dat"
    path.write_text("# step, loss_train, loss_test, metrics_test\n0 1.0 1.1\n1000 0.5\n")
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and "rows of 2, 3 numbers, not rows of one length" in result.output
    assert "Traceback" not in result.output


def test_a_row_whose_step_is_no_whole_number_is_refused_with_one_message(tmp_path):
    path = tmp_path / "loss.dat"
    path.write_text("# step, loss_train, loss_test, metrics_test\n0 1.0 1.1\nnan 0.5 0.6\n")
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and "is no step (a whole number)" in result.output
    assert "Traceback" not in result.output and "Warning" not in result.output
