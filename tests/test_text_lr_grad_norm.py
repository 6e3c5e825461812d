"""The learning rate, grad norm and loss scale printed beside the loss on a generic text log line
are read, on the loss's step; a line without a loss adds no step."""

from __future__ import annotations

import math

import pytest

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs
from sentinel.analyze.loaders import LoadOptions


def _run(tmp_path, lines):
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (run,) = discover_runs(path)
    return run


@pytest.mark.parametrize("line", [
    "step {i} | loss {loss:.4f} | lr {lr:.3e} | grad_norm {g:.3f}",
    "2024-05-01 10:00:00 INFO step={i} loss={loss:.4f} learning_rate={lr:.3e} grad norm={g:.3f} tok/s=1200",
    "[rank0] Step {i}: lr: {lr:.3e}, loss: {loss:.4f}, gnorm: {g:.3f}",  # the lr before the loss
    "lr={lr:.3e} grad_norm={g:.3f} | step {i} | loss {loss:.4f}",  # both before the step
    "global_step: {i}, train_loss: {loss:.4f}, LR: {lr:.3e}, Grad-Norm: {g:.3f}",
])
def test_step_lines(tmp_path, line):
    rows = [(i, 3 - i / 100, 1e-4 * (1 + i / 50), 0.5 + i / 1000) for i in range(1, 61)]
    run = _run(tmp_path, [line.format(i=i, loss=loss, lr=lr, g=g) for i, loss, lr, g in rows])
    assert run.steps.index.tolist() == [i for i, *_ in rows]
    assert run.steps["lr"].tolist() == pytest.approx([lr for *_, lr, _ in rows], rel=1e-3)
    assert run.steps["grad_norm/total"].tolist() == pytest.approx([g for *_, g in rows], rel=1e-3)


def test_epoch_lines_put_the_lr_on_the_global_step(tmp_path):
    # A count inside each epoch of 20: the loss shape makes it global, and so must the lr's.
    lines = [f"Epoch {e} | Step {i}/20 | Loss {2 + 0.01 * (20 * e + i):.3f} | LR {1e-3 * (e + 1):.1e} | grad_norm 0.5"
             for e in range(3) for i in range(1, 21)]
    run = _run(tmp_path, lines)
    assert run.steps.index.tolist() == list(range(1, 61))
    assert run.steps["lr"].tolist() == [1e-3] * 20 + [2e-3] * 20 + [3e-3] * 20
    assert run.steps["grad_norm/total"].eq(0.5).all()


def test_lines_without_a_loss_add_no_step_and_evaluations_no_lr(tmp_path):
    lines = []
    for i in range(1, 31):
        lines.append(f"step {i} | loss {3 - i / 100:.3f} | lr 1.0e-04")
        if i % 10 == 0:
            lines.append(f"step {i + 5} | lr 9.9e-01 | scheduler warmup done")  # no loss: no step 15, 25, 35
            lines.append(f"step {i} | eval loss {2.5:.3f} | lr 5.0e-01")  # an evaluation's lr: not read
    run = _run(tmp_path, lines)
    assert run.steps.index.tolist() == list(range(1, 31))
    assert run.steps["lr"].eq(1e-4).all()


def test_an_exploding_grad_norm_in_a_text_log_is_judged(tmp_path):
    lines = []
    for i in range(1, 401):
        grad = 1.0 if i < 300 else 1.0 * 10 ** ((i - 299) / 10)  # grows tenfold every 10 steps
        loss = 3 - i / 400 if i < 320 else 3 + (i - 320) / 5
        lines.append(f"step {i} | loss {loss:.4f} | lr 3.0e-04 | grad_norm {grad:.4g}")
    run = _run(tmp_path, lines)
    assert math.isclose(run.steps.at[310, "grad_norm/total"], 10 ** 1.1, rel_tol=1e-3)
    kinds = {incident.kind for incident in analyze_run(run).incidents}
    assert "grad_norm_explosion" in kinds, kinds


def test_a_progress_bar_count_with_the_lr_in_its_postfix(tmp_path):
    lines = [f"Training: {i // 2}%|####      | {i}/200 [00:01<00:10, 4.1it/s, loss={2 + 1 / i:.4f}, lr={1e-4 * i:.3e}, "
             f"grad_norm={i / 100:.2f}]" for i in range(1, 121)]
    run = _run(tmp_path, lines)
    assert run.steps.index.tolist() == list(range(1, 121))
    assert run.steps["lr"].tolist() == pytest.approx([1e-4 * i for i in range(1, 121)], rel=1e-2)
    assert run.steps["grad_norm/total"].tolist() == pytest.approx([i / 100 for i in range(1, 121)])


def test_one_line_per_epoch_with_its_lr(tmp_path):
    run = _run(tmp_path, [f"Epoch {e}/30 - loss: {2 + 1 / e:.4f} - lr: {1e-3 * 0.9 ** e:.3e}" for e in range(1, 31)])
    assert run.steps.index.tolist() == list(range(1, 31))
    assert run.steps["lr"].tolist() == pytest.approx([1e-3 * 0.9 ** e for e in range(1, 31)], rel=1e-3)


@pytest.mark.parametrize("every_line", [True, False])
def test_values_beside_the_loss_of_lines_numbered_in_order(tmp_path, every_line):
    """Epoch lines printed several times an epoch are numbered in order: a validation loss on the
    same line joins that line's step (it doubled the steps, every other one without a loss); where
    it is on some lines only, it cannot be placed and is left out, said in a warning."""
    lines = [f"epoch: [{e}/10], lr: 0.001, loss: {2 + 1 / e + k / 100:.4f}"
             + (f", val_loss: {3 + e / 100 + k / 1000:.4f}" if every_line or k == 2 else "")
             for e in range(1, 11) for k in range(3)]
    run = _run(tmp_path, lines)
    assert run.steps.index.tolist() == list(range(1, 31))
    assert run.steps["loss"].notna().all() and run.steps["lr"].eq(0.001).all()
    if every_line:
        assert run.steps["val_loss"].tolist() == pytest.approx([3 + e / 100 + k / 1000 for e in range(1, 11)
                                                                for k in range(3)])
    else:
        assert "val_loss" not in run.steps.columns
        assert any("10 val_loss value(s), printed beside the loss on some of its lines only" in w
                   for w in run.warnings), run.warnings


def test_a_collapsing_loss_scale_beside_the_loss_is_judged(tmp_path):
    lines, scale = [], 65536.0
    for i in range(1, 801):
        if i > 500 and i % 10 == 0:
            scale /= 2  # halved every 10 steps: overflow after overflow
        lines.append(f"step {i} | loss {2 + math.exp(-i / 200):.4f} | loss_scale {scale:g} | lr 1e-4")
    run = _run(tmp_path, lines)
    assert run.steps.at[800, "loss_scale"] == pytest.approx(65536.0 / 2 ** 30, rel=1e-5)  # printed with :g
    kinds = {incident.kind for incident in analyze_run(run).incidents}
    assert "loss_scale_collapse" in kinds, kinds


def test_a_keras_bar_with_its_learning_rate(tmp_path):
    # The count starts again each epoch (1875/1875): the steps come from the loss records and the
    # "Epoch e/E" lines between them; the lr beside each loss takes that record's step (worked out
    # on its own, every lr landed on one step).
    lines = []
    for e in range(1, 21):
        lines += [f"Epoch {e}/20", f"1875/1875 ━━━━━━━━━━━━━━━━━━━━ 5s 3ms/step - accuracy: 0.9 - loss: {2 / e + 0.5:.4f}"
                  f" - val_loss: {2 / e + 0.6:.4f} - learning_rate: {1e-3 * 0.9 ** e:.4e}"]
    run = _run(tmp_path, lines)
    assert run.steps.index.tolist() == list(range(1, 21)) and run.meta["step_unit"] == "epoch"  # a finished bar an epoch
    assert run.steps["lr"].tolist() == pytest.approx([1e-3 * 0.9 ** e for e in range(1, 21)], rel=1e-4)


def test_keras_fit_verbose_2_lines_keep_each_epochs_validation_loss(tmp_path):
    """Keras' fit(verbose=2) prints one line an epoch, its own val_loss at its end. Read as a bar's
    validation loss shown until the next validation, each value went to the epoch before, and a
    value equal to the one before (a NaN stretch: 90 epochs) was dropped as shown again: 'val_loss
    non-finite at 1 of 192 evaluations ... the training loss is finite'."""
    lines = []
    for e in range(1, 31):
        val = "nan" if e >= 20 else "0.5000" if e in (5, 6) else f"{2 / e + 0.6:.4f}"
        loss = "nan" if e >= 20 else f"{2 / e + 0.5:.4f}"
        lines += [f"Epoch {e}/30", f"1875/1875 - 3s - 2ms/step - accuracy: 0.9875 - loss: {loss} - "
                  f"val_accuracy: 0.9725 - val_loss: {val}"]
    run = _run(tmp_path, lines)
    assert run.steps.index.tolist() == list(range(1, 31))  # a finished bar an epoch: read in epochs
    val = run.steps["val_loss"]
    assert val.loc[1] == pytest.approx(2.6) and val.loc[5] == val.loc[6] == 0.5
    assert val.loc[19] == pytest.approx(2 / 19 + 0.6, abs=1e-4) and val.loc[20:].isna().all()
    (nan,) = [i for i in analyze_run(run).incidents if i.kind == "nonfinite" and "val_loss" in i.message]
    assert nan.step == 20 and "at 11 of 30 evaluations" in nan.message


def test_an_lr_printed_on_some_step_lines_only(tmp_path):
    # Every tenth line adds the lr: on step lines each value has its own step, kept where it is.
    lines = [f"step {i} | loss {3 - i / 100:.3f}" + (f" | lr {i * 1e-5:.2e}" if i % 10 == 0 else "")
             for i in range(1, 61)]
    run = _run(tmp_path, lines)
    assert run.steps.index.tolist() == list(range(1, 61))
    assert run.steps["lr"].dropna().index.tolist() == [10, 20, 30, 40, 50, 60]
    assert run.steps.at[30, "lr"] == pytest.approx(3e-4)
    assert not any("could not be put" in w for w in run.warnings)


@pytest.mark.parametrize("key", ["train/grad_norm", "optim/grad_norm", "actor/grad_norm"])
def test_a_grad_norm_under_a_section(tmp_path, key):
    """verl's SFT prints "step:N - train/loss:X - train/grad_norm:Y", OLMo "optim/grad_norm": the
    trainer's own section is its total grad norm (its NaN was unseen). A section naming one model of
    several (verl's PPO "actor/grad_norm" beside "critic/grad_norm") is not the total."""
    lines = [f"step:{i} - train/loss:{2.3 - i / 100:.3f} - {key}:{0.5 if i < 30 else math.nan:.3f} - train/lr(1e-3):0.010"
             for i in range(1, 41)]
    run = _run(tmp_path, lines)
    assert run.steps.index.tolist() == list(range(1, 41))
    if key.startswith("actor/"):
        assert "grad_norm/total" not in run.steps
        return
    assert run.steps["grad_norm/total"].isna().tolist() == [i >= 30 for i in range(1, 41)]
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.step, incident.details["metric"]) == ("nonfinite", 30, "grad_norm/total")


@pytest.mark.parametrize("loss_col", ["actor/pg_loss", "critic/vf_loss"])
def test_the_grad_norm_of_the_model_whose_loss_is_read(tmp_path, loss_col):
    """verl's PPO prints the actor's and the critic's losses and grad norms on one line: read with one
    model's loss (--loss-col), the grad norm read is that model's."""
    lines = [f"step:{i} - critic/vf_loss:{0.5 - i / 100:.3f} - critic/grad_norm:{5.0 + i / 10:.3f} - "
             f"actor/pg_loss:{-0.01 + i / 1000:.3f} - actor/grad_norm:{0.25 + i / 100:.3f} - actor/lr:0.000"
             for i in range(1, 41)]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (run,) = discover_runs(path, LoadOptions(loss_col=loss_col))
    expected = [0.25 + i / 100 for i in range(1, 41)] if loss_col.startswith("actor") else [5.0 + i / 10 for i in range(1, 41)]
    assert run.steps["grad_norm/total"].tolist() == pytest.approx(expected, abs=1e-3)
