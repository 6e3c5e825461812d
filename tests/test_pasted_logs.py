"""Logs as people paste them into issues, read and judged as their authors saw them: a loss that
does not change (the same float at many logged steps), a loss NaN from the 2nd line, a grep of
validation lines, DeepSpeed's pipeline engine lines. Each log is written here from the tool's own
format string."""

from __future__ import annotations

import json
import math
import re
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from click.testing import CliRunner

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import NoRunsError, discover, discover_runs
from sentinel.analyze.loaders import LoadOptions, RunData, space_table
from sentinel.analyze.rule_chance import chance_incidents
from sentinel.analyze.rule_stuck import collapse_incidents, stuck_loss_incidents
from sentinel.cli.main import main


def _series(values, every: int = 10) -> pd.Series:
    return pd.Series(values, index=pd.Index(range(0, every * len(values), every), name="step"), dtype="float64")


def test_a_loss_of_exactly_zero_that_never_changes():
    (incident,) = stuck_loss_incidents(_series([2.3, 1.1] + [0.0] * 12))
    assert (incident.kind, incident.step, incident.end_step) == ("loss_stuck", 20, 130)
    assert incident.details["resolved"] is False and incident.severity == "warning"
    assert "loss exactly 0 at 12 logged steps in a row (20-130)" in incident.message


def test_a_stretch_that_ends_is_resolved_and_the_longest_is_told():
    values = [4.0] + [3.0517578125e-05] * 9 + [2.5, 2.4] + [10.825932] * 8 + [2.3]
    (incident,) = stuck_loss_incidents(_series(values))
    assert incident.details == {"value": 3.0517578125e-05, "rows": 9, "stretches": 2, "resolved": True}
    assert incident.message.endswith("it changes at step 100")


@pytest.mark.parametrize("values", [
    [0.0123] * 20,  # a running mean printed with 4 decimals can repeat: too few digits to tell
    [1.0, 1e-2, 1e-4, 1e-7, 1e-12] + [0.0] * 10,  # a model that fits its data exactly converges to 0
    [2.5, 2.4] * 10,  # alternating, never the same twice in a row
    [2.5] * 7,  # too short a stretch
    [0.0] * 3,  # ... of zeros too
    [-1.0] * 3,  # ... and of a negative placeholder
])
def test_not_stuck(values):
    assert stuck_loss_incidents(_series(values)) == []


def test_a_loss_of_exactly_zero_at_every_epoch_of_a_short_paste(tmp_path):
    """A LoRA trained with kohya's sd-scripts whose bar showed avr_loss=0 at each of six epochs
    ("Training Successful... But not really??"): healthy, as six rows were under the eight a stuck
    stretch needs. No batch's mean lands on exactly 0 by chance: four zeros in a row are enough."""
    lines = []
    for epoch in range(11, 17):
        lines += [f"epoch {epoch}/50", f"steps:  {epoch * 2}%|███▌      | {epoch * 16}/800 [00:46<02:44,  3.79it/s, avr_loss=0]"]
    report = analyze_run(discover_runs(_write(tmp_path / "lora.log", lines))[0])
    (incident,) = report.incidents
    assert (incident.kind, incident.severity, incident.step, incident.end_step) == ("loss_stuck", "warning", 176, 256)


def test_a_zero_loss_that_opens_a_paste_of_a_runs_late_part_is_information(tmp_path):
    """DocRED's "| epoch 195 | step 15050 | ms/b 5017.40 | train loss 0.000 | NA acc: 1.00 | not NA acc: 0.93"
    (three decimals) pasted from step 15,050 was "loss exactly 0 ... nothing is learned", the run unhealthy: no
    value before the zeros shows a jump, and a loss printed with three decimals reads 0 below 0.0005."""
    lines = [f"| epoch {195 + k // 2} | step {15050 + 50 * k} |  ms/b 5017.40 | train loss 0.000 | NA acc: 1.00 | "
             f"not NA acc: 0.9{k % 2 + 2}  | tot acc: 1.00" for k in range(8)]
    report = analyze_run(discover_runs(_write(tmp_path / "train.log", lines))[0])
    (incident,) = report.incidents
    assert (incident.kind, incident.severity, incident.step) == ("loss_stuck", "info", 15050)
    assert "loss 0 at 8 logged steps" in incident.message and "exactly" not in incident.message
    assert report.verdict == "healthy"
    # from the run's start, or jumped into from a loss above it, a run of zeros stays a warning
    (incident,) = stuck_loss_incidents(_series([0.0] * 8))
    assert incident.severity == "warning"
    (incident,) = stuck_loss_incidents(pd.Series([2.3] + [0.0] * 8, index=range(15000, 15450, 50)))
    assert incident.severity == "warning" and "exactly" in incident.message
    # ... and where another logged value stands still with it: a dead GAN (Keras DCGAN's "48: [D loss: 7.971192,
    # acc: 0.500000]  [A loss: 0.000000, acc: 1.000000]" from its 48th step on)
    lines = [f"{i}: [D loss: 7.971192, acc: 0.500000]  [A loss: 0.000000, acc: 1.000000]" for i in range(48, 63)]
    report = analyze_run(discover_runs(_write(tmp_path / "dcgan.log", lines))[0])
    assert [(i.kind, i.severity) for i in report.incidents] == [("loss_stuck", "warning")]


def test_a_pipeline_stages_placeholder_loss_of_minus_one(tmp_path):
    """torchtitan under pipeline parallelism: a rank whose stage does not compute the loss logs
    -1.0 (#1232's paste, the only rank logged): four steps of it were "healthy", under the eight a
    stuck stretch needed. A negative constant is a placeholder after four, as 0 is."""
    lines = [f"[rank0]:[titan] 2025-05-28 21:1{s}:37,816 - root - INFO - step: {s:2d}  loss: -1.0000  memory: "
             f"42.78GiB(54.06%)  tps: 8  tflops: 1.81  mfu: 0.58%" for s in range(1, 5)]
    report = analyze_run(discover_runs(_write(tmp_path / "titan.log", lines))[0])
    (incident,) = report.incidents
    assert (incident.kind, incident.severity, incident.step, incident.end_step) == ("loss_stuck", "warning", 1, 4)
    assert "a placeholder (a rank that did not compute it)" in incident.message


def test_a_float32_loss_that_stops_moving_makes_the_run_unhealthy():
    rng = np.random.default_rng(0)
    values = np.float32(3.0 - np.arange(200) / 100 + rng.normal(0, 0.01, 200)).astype("float64")
    values[150:] = values[149]  # the weights froze at step 149
    report = analyze_run(RunData("r", "r", "test", pd.DataFrame({"loss": values})))
    assert [i.kind for i in report.incidents] == ["loss_stuck"]
    assert report.incidents[0].step == 149 and report.verdict == "unhealthy"


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_text_log_that_goes_nan_at_its_second_line_is_read(tmp_path):
    """A custom script's print that went NaN early: one finite loss, then NaN to the end."""
    path = _write(tmp_path / "train.log", [
        f"[2019/06/24 16:19:{i:02d} __main__ INFO] - Epoch 1 Step {i * 100}/1500 Loss {v} ({v}) AngleError 27.6"
        for i, v in enumerate(["48.9613"] + ["nan"] * 9)])
    (run,) = discover_runs(path)
    report = analyze_run(run)
    assert report.steps == 10 and report.verdict == "unhealthy"
    (incident,) = report.incidents
    assert (incident.kind, incident.step, incident.end_step) == ("nonfinite", 100, 900)


def test_a_text_log_whose_loss_never_changes_is_read_and_flagged(tmp_path):
    path = _write(tmp_path / "pretrain.log", [
        f"iter {i} step {i} | loss: 10.8259, iter time: 1210.5ms" for i in range(1, 13)])
    (run,) = discover_runs(path)
    report = analyze_run(run)
    assert [i.kind for i in report.incidents] == ["loss_stuck"] and report.verdict == "unhealthy"


def test_a_modded_nanogpt_log_of_validation_lines_alone_judges_the_validation_loss(tmp_path):
    """``grep val_loss`` of a healthy record run: no train lines, so no NaN training loss either."""
    path = _write(tmp_path / "val.txt", [
        f"step:{s}/1480 val_loss:{v} train_time:{s * 120}ms step_avg:120.00ms"
        for s, v in zip(range(0, 876, 125), [7.7109, 4.3719, 3.9876, 3.8012, 3.7011, 3.6404, 3.5780, 3.5501])])
    (run,) = discover_runs(path)
    report = analyze_run(run)
    assert report.verdict == "healthy" and report.incidents == [] and report.final_loss == 3.5501
    assert "no training-loss lines: the validation loss is judged instead" in report.warnings


def test_deepspeed_pipeline_engine_steps_and_a_nan_after_overflows(tmp_path):
    """DeepSpeed's PipelineEngine prints f"steps: {global_steps} loss: {loss:0.4f} iter time (s):
    ..." beside the engine's step=, skipped= lines and its overflow lines."""
    lines = []
    for step, loss in zip(range(220, 230), ["7.5012", "7.4870", "7.4702", "7.4655", "7.4551", "7.4490",
                                           "7.4402", "7.4369", "nan", "nan"]):
        if step >= 228:
            lines.append("[2022-02-15 18:51:45,705] [INFO] [stage_1_and_2.py:1644:step] [deepscale] OVERFLOW! "
                         "Rank 0 Skipping step. Attempted loss scale: 4096, reducing to 2048.0")
        lines.append(f"[2022-02-15 18:51:45,706] [INFO] [logging.py:69:log_dist] [Rank 0] step={step}, "
                     f"skipped={max(0, step - 227)}, lr=[0.0003043, 0.0003043], mom=[(0.95, 0.99)]")
        lines.append(f"steps: {step} loss: {loss} iter time (s): 34.995 samples/sec: 73.153")
    (run,) = discover_runs(_write(tmp_path / "ds.log", lines))
    assert run.source == "deepspeed"
    assert run.steps["loss"].index.tolist() == list(range(220, 230))
    report = analyze_run(run)
    nonfinite = [i for i in report.incidents if i.kind == "nonfinite"]
    assert [(i.step, i.end_step) for i in nonfinite] == [(228, 229)] and report.verdict == "unhealthy"


@pytest.mark.parametrize("printed", ["{}", "tensor({:.4f}, device='cuda:0', grad_fn=<NllLossBackward0>)"])
def test_deepspeed_engine_lines_beside_a_scripts_own_loss_lines(tmp_path, printed):
    """DeepSpeed-Chat's step-1 script prints f"Epoch: {epoch}, Step: {step}, Rank: {rank}, loss =
    {loss}"; the engine prints its own step=, skipped=, lr= line every 10 steps and its overflow
    lines. The engine's lines won the pick and hold no loss: 'nothing to analyse'."""
    lines, scale = ["***** Running training *****"], 65536
    for step in range(300):
        if step in (3, 5):
            scale //= 2
            lines.append("[2024-02-01 10:00:01,111] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! "
                         f"Rank 0 Skipping step. Attempted loss scale: {scale * 2}, reducing to {scale}")
        loss = 9.0 if step == 200 else 2.5 - step / 300 + 0.05 * np.sin(step * 1.7)
        lines.append(f"Epoch: 0, Step: {step}, Rank: 0, loss = {printed.format(loss)}")  # --print_loss: a tensor
        if step % 10 == 9:
            lines.append(f"[2024-02-01 10:00:09,123] [INFO] [logging.py:96:log_dist] [Rank 0] step={step + 1}, "
                         f"skipped=2, lr=[9.6462800998614895e-06], mom=[(0.9, 0.95)]")
    (run,) = discover_runs(_write(tmp_path / "training.log", lines))
    assert run.steps["loss"].index.tolist() == list(range(300))
    assert "deepspeed's own lines hold no loss" in run.warnings[0]
    assert run.events["step"].tolist() == [3, 5] and run.steps["loss_scale"].dropna().tolist() == [32768, 16384]
    assert run.steps["loss"].iloc[10] == pytest.approx(2.5 - 10 / 300 + 0.05 * np.sin(17), abs=1e-4)
    (spike,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert spike.step == 200


def test_verl_ppo_lines_a_policy_gradient_loss_and_a_time_per_step(tmp_path):
    """verl's console: 'step:N - actor/pg_loss:X - ... - timing_s/step:70.300 - ...'. The time
    per step was read as the step of a NaN line (a phantom 'non-finite at step 70'), and the
    surrogate objective, near 0 either side, as a loss with spikes 'against a baseline at or below
    0'. The time is no step; the surrogate is judged for non-finite values alone."""
    rng = np.random.default_rng(3)

    def line(step, pg_loss):
        return (f"(TaskRunner pid=23871) step:{step} - actor/entropy:0.45 - actor/pg_loss:{pg_loss:.3f} - "
                f"actor/pg_clipfrac:0.002 - actor/grad_norm:0.21 - critic/score/mean:{0.1 + step / 600:.3f} - "
                f"critic/rewards/mean:{0.1 + step / 600:.3f} - timing_s/gen:30.100 - timing_s/step:70.300 - "
                "perf/total_num_tokens:500000.000")
    healthy = [line(step, rng.normal(0, 0.01) + (0.05 if step % 37 == 0 else 0)) for step in range(1, 436)]
    (run,) = discover_runs(_write(tmp_path / "ppo.log", healthy))
    assert run.steps.index.tolist() == list(range(1, 436))
    report = analyze_run(run)
    assert report.incidents == [] and "a policy gradient's surrogate objective" in " ".join(report.warnings)
    assert " ".join(report.warnings).endswith("non-finite values are reported")  # a whole sentence
    broken = healthy[:299] + [line(step, float("nan")) for step in range(300, 436)]
    (nonfinite,) = analyze_run(discover_runs(_write(tmp_path / "nan.log", broken))[0]).incidents
    assert (nonfinite.kind, nonfinite.step, nonfinite.end_step) == ("nonfinite", 300, 435)


def test_ignite_progress_bar_its_epochs_counts_and_results_lines(tmp_path):
    """Ignite's ProgressBar draws f"Epoch [{e}/{E}]: [{n}/{N}] {pct}%|{bar}, loss=X [..]" with '\\r'
    redraws, and its examples print 'Training Results - Epoch: e ... Avg loss: X' after each epoch.
    The count was not read: 1,060 lines numbered in order (the results lines among them)."""
    text, n_batches = "", 300
    for epoch in range(1, 6):
        for n in range(10, n_batches + 1, 10):
            step = (epoch - 1) * n_batches + n
            loss = 0.9 if step == 810 else 0.3 + np.exp(-step / 400)
            text += f"\rEpoch [{epoch}/5]: [{n}/{n_batches}]  {100 * n // n_batches:3d}%|##   , loss={loss:.3g} [00:01<00:09]"
        text += f"\nTraining Results - Epoch: {epoch}  Avg accuracy: 0.91 Avg loss: 0.28\n"
        text += f"Validation Results - Epoch: {epoch}  Avg accuracy: 0.90 Avg loss: 0.26\n"
    path = tmp_path / "ignite.log"
    path.write_text(text)
    (run,) = discover_runs(path)
    assert run.steps["loss"].index.tolist() == list(range(10, 5 * n_batches + 1, 10))
    assert run.steps["val_loss"].dropna().index.tolist() == [300, 600, 900, 1200, 1500]
    (spike,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert spike.step == 810


@pytest.mark.parametrize("timed", [True, False])
def test_coqui_trainer_steps_and_their_loss_lines(tmp_path, timed):
    """Coqui's Trainer prints a step's header, then one '| > key: value  (average)' line per loss
    (the grad norm a tensor), and after each epoch's evaluation '--> EVAL PERFORMANCE' with its
    avg_loss: 'not a log format sentinel reads'."""
    bold, end = "\033[1m", "\033[0m"
    lines = [" > Training Environment:", " | > Backend: Torch", " | > Num. of GPUs: 1", ""]
    for step in range(0, 2000, 25):
        loss = float("nan") if step >= 1800 else (7.0 if step == 1000 else 1 + 2 * np.exp(-step / 300))
        when = "TIME: 2023-05-02 11:03:59 -- " if timed else ""
        lines += ["", f"{bold}   --> {when}STEP: {step % 400}/400 -- GLOBAL_STEP: {step}{end}",
                  f"     | > loss: {loss}  ({loss * 1.1})", f"     | > log_mle: {loss / 2}  ({loss / 2})",
                  f"     | > grad_norm: tensor(9.0351, device='cuda:0')  (tensor(8.8072, device='cuda:0'))",
                  "     | > current_lr: 0.0001 ", "     | > step_time: 0.3599  (0.33585486494222094)", ""]
        if step % 400 == 375:
            lines += [f"{bold} > EVALUATION {end}", "", f"{bold}   --> STEP: 0{end}", "     | > loss: 9.9  (9.9)", "",
                      f"  {bold}--> EVAL PERFORMANCE{end}", f"     | > avg_loader_time: 0.0061 {end}(+0)",
                      f"     | > avg_loss:\033[92m {2 - step / 1000} {end}(-0.1)", ""]
    (run,) = discover_runs(_write(tmp_path / "trainer_0_log.txt", lines))
    assert run.source == "coqui" and run.steps.index.tolist() == list(range(0, 2000, 25))
    assert run.steps["loss"].iloc[1] == pytest.approx(1 + 2 * np.exp(-25 / 300))  # the step's, not its average
    assert run.steps["grad_norm/total"].iloc[0] == 9.0351 and run.steps["lr"].iloc[0] == 0.0001
    assert run.steps["val_loss"].dropna().to_dict() == pytest.approx({375: 1.625, 775: 1.225, 1175: 0.825, 1575: 0.425, 1975: 0.025})
    incidents = analyze_run(run).incidents
    assert [i.step for i in incidents if i.kind in ("loss_spike", "outlier_batch")] == [1000]
    assert [(i.step, i.end_step) for i in incidents if i.kind == "nonfinite"] == [(1800, 1975)]


def _yolox_log(l1_from: int, announced: bool, diverge_from: int | None = None, l1_size: float = 1.5) -> list[str]:
    rng = np.random.default_rng(5)
    lines = []
    for epoch in range(1, 81):
        lines.append(f"2024-03-04 10:03:47.292 | INFO     | yolox.core.trainer:before_epoch:218 - ---> start train epoch{epoch}")
        if epoch == l1_from and announced:
            lines += ["2024-03-04 10:03:47.190 | INFO     | yolox.core.trainer:before_epoch:221 - --->No mosaic aug now!",
                      "2024-03-04 10:03:47.013 | INFO     | yolox.core.trainer:before_epoch:223 - --->Add additional L1 loss now!"]
        for it in range(10, 101, 10):
            step = (epoch - 1) * 100 + it
            l1 = l1_size if epoch >= l1_from else 0.0
            rise = 0.004 * (step - diverge_from) if diverge_from is not None and step > diverge_from else 0.0
            total = (4 + 10 * np.exp(-step / 800)) * (1 + 0.06 * rng.standard_normal()) + l1 + rise
            lines.append(f"2024-03-04 10:03:51.864 | INFO     | yolox.core.trainer:after_iter:270 - epoch: {epoch}/80, "
                         f"iter: {it}/100, gpu mem: 6211Mb, mem: 11.3Gb, iter_time: 0.451s, data_time: 0.002s, "
                         f"total_loss: {total:.1f}, iou_loss: 2.1, l1_loss: {l1:.1f}, conf_loss: 1.5, cls_loss: 0.9, "
                         f"lr: 1.000e-04, size: 640, ETA: 0:30:00")
    return lines


def test_yolox_announces_the_l1_term_it_adds_before_its_last_epochs(tmp_path):
    """YOLOX adds an L1 term to its total loss for the last 15 epochs, after printing '--->Add
    additional L1 loss now!': the loss steps up x1.3 and stays, a critical 'divergence ... still
    diverged' on a healthy run. The log's own line says the objective changed."""
    (run,) = discover_runs(_write(tmp_path / "train_log.txt", _yolox_log(66, announced=True)))
    report = analyze_run(run)
    assert report.verdict == "healthy" and not [i for i in report.incidents if i.severity != "info"]
    # MMDetection's YOLOX prints the same line into mmengine's log
    rows = []
    for epoch in range(1, 81):
        if epoch == 66:
            rows.append("2024/03/04 10:03:47 - mmengine - INFO - Add additional L1 loss now!")
        rows += [f"2024/03/04 10:03:51 - mmengine - INFO - Epoch(train)  [{epoch}][{it}/100]  lr: 1.0000e-03  "
                 f"loss: {4 + 10 * np.exp(-((epoch - 1) * 100 + it) / 800) + (1.5 if epoch >= 66 else 0):.4f}"
                 for it in (50, 100)]
    (run,) = discover_runs(_write(tmp_path / "mmdet.log", rows))
    assert run.source == "mmengine" and run.events["step"].tolist() == [6550]
    assert not [i for i in analyze_run(run).incidents if i.severity != "info"]
    # a step up large enough for the spike rule: told, as information
    (run,) = discover_runs(_write(tmp_path / "large.txt", _yolox_log(66, announced=True, l1_size=5.5)))
    (spike,) = [i for i in analyze_run(run).incidents if i.kind == "loss_spike"]
    assert spike.severity == "info" and "the log says the loss itself changed at step 6510" in spike.message
    # the same curve without the line is judged by the curve
    (run,) = discover_runs(_write(tmp_path / "silent.txt", _yolox_log(66, announced=False)))
    assert [i.severity for i in analyze_run(run).incidents if i.kind == "divergence"] == ["critical"]
    # a climb long after the announcement is no part of it: judged from the new level's best
    (run,) = discover_runs(_write(tmp_path / "later.txt", _yolox_log(20, announced=True, diverge_from=6000)))
    alarms = [(i.kind, i.step) for i in analyze_run(run).incidents if i.severity != "info"]
    assert alarms and all(step > 6000 for _, step in alarms) and ("divergence", 6130) in alarms


def test_a_scripts_prints_after_a_tqdm_bar_drawn_without_a_line_end(tmp_path):
    """x-transformers' examples print f'training loss: {loss}' inside a tqdm loop; the bar redraws
    (every ten seconds) with no line end, so a print lands on the bar's line. The 60 bar lines
    were read as steps and the 2,940 other loss lines dropped: a spike at 1801 was 'info' at
    'step 1800'."""
    text = ""
    for i in range(3000):
        if i % 50 == 0:
            text += f"\rtraining:  {i // 30:2d}%|#         | {i}/3000 [00:17<17:12, 2.86it/s]"
        text += f"training loss: {9.0 if i == 1800 else 1 + 3 * np.exp(-i / 500) + 0.05 * np.sin(i)}\n"
        if i % 100 == 0:
            text += f"validation loss: {1.1 + 3 * np.exp(-i / 500)}\n"
    path = tmp_path / "enwik8.log"
    path.write_text(text)
    (run,) = discover_runs(path)
    assert run.steps["loss"].index.tolist() == list(range(1, 3001))
    assert run.steps["val_loss"].dropna().index.tolist() == list(range(1, 3001, 100))
    (spike,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert spike.step == 1801


def test_a_metric_loggers_count_as_wide_as_its_total_is_still_read(tmp_path):
    """DINOv2's MetricLogger pads the count to the total's width: 'Training  [ 99990/125000]', then
    'Training  [100000/125000]' with no space inside the bracket. From iteration 100,000 on the
    lines were dropped without a word (a resumed run from 100k: 'not a log format')."""
    lines = [f"I20230412 11:06:48 3091 dinov2 helpers.py:103] Training  [{it:6d}/125000]  eta: 20:20:06  "
             f"lr: 0.0006 (0.0003)  wd: 0.0406 (0.0402)  total_loss: {9.0 - it / 100000:.4f} (9.7355)  "
             f"dino_local_crops_loss: 5.1 (5.2)" for it in range(95000, 111000, 10)]
    (run,) = discover_runs(_write(tmp_path / "dinov2.log", lines))
    assert run.steps["loss"].index.tolist() == list(range(95000, 111000, 10))
    (run,) = discover_runs(_write(tmp_path / "from_100k.log", lines[500:]))
    assert run.steps.index[0] == 100000


def test_setfit_embedding_loss_beside_the_trainers_final_train_loss(tmp_path):
    """SetFit renames the Trainer's loss to embedding_loss; the final summary prints train_loss
    once. That one line's key was taken for the loss: 'not a log format sentinel reads'."""
    lines = [f"{{'embedding_loss': {9.0 if i == 30 else 0.3 * np.exp(-i / 20) + 0.02:.4f}, 'grad_norm': 1.1, "
             f"'learning_rate': 1e-05, 'epoch': {i / 41:.2f}}}" for i in range(41)]
    lines.append("{'train_runtime': 120.5, 'train_samples_per_second': 265.6, 'train_steps_per_second': 16.6, "
                 "'train_loss': 0.0412, 'epoch': 1.0}")
    (run,) = discover_runs(_write(tmp_path / "setfit.log", lines))
    assert len(run.steps["loss"].dropna()) == 41 and "loss read from 'embedding_loss'" in " ".join(run.warnings)
    (spike,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert spike.details["peak"] == 9.0


@pytest.mark.parametrize("new", [False, True])
def test_wenet_batch_lines_name_the_epoch_then_the_batch(tmp_path, new):
    """WeNet logs f"TRAIN Batch {epoch}/{batch} loss X loss_att Y loss_ctc Z lr L rank 0" (newer:
    "TRAIN | steps/sec S| Batch {epoch}/{step} ...", the step across epochs), its evaluation's
    batches as "CV Batch ..." and each epoch's "Epoch E [Step S] CV info ... cv_loss X". The
    "E/N" was read as a count of a total: 30 steps of epochs, the spike in epoch 16 gone."""
    rng = np.random.default_rng(2)
    lines, length = [], 1200
    for epoch in range(30):
        lines.append(f"2024-01-10 12:00:10,000 INFO Epoch {epoch} TRAIN info lr 0.001")
        for batch in range(0, length, 100):
            step = epoch * length + batch
            loss = 9.0 * 40 if step == 19300 else (40 * np.exp(-step / 8000) + 5) * (1 + 0.05 * rng.standard_normal())
            count = step if new else batch
            where = "TRAIN | steps/sec 2.381| " if new else "TRAIN "
            lines.append(f"2024-01-10 12:00:52,000 DEBUG {where}Batch {epoch}/{count} loss {loss:.6f} "
                         f"loss_att {loss * 0.8:.6f} loss_ctc {loss * 1.3:.6f} lr 0.00100000 rank 0")
        lines += [f"2024-01-10 12:08:34,000 DEBUG CV Batch {epoch}/{b} loss 89.2 loss_att 76.9 history loss 87.4 rank 0"
                  for b in (0, 10, 20)]
        step_then = f"Step {(epoch + 1) * length} " if new else ""
        lines.append(f"2024-01-10 12:08:34,000 INFO Epoch {epoch} {step_then}CV info lr 0.001 cv_loss {30 - epoch / 2} rank 0")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "wenet" and len(run.steps["loss"].dropna()) == 360
    assert run.steps["loss"].dropna().index[:3].tolist() == [0, 100, 200]
    assert run.steps["val_loss"].dropna().iloc[:2].tolist() == [30.0, 29.5]
    (spike,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert spike.step == 19300


def test_a_paste_of_evaluation_lines_alone_is_refused_as_such(tmp_path):
    """WeKWS's 'CV Batch 78/20 loss 0.157 acc 99.0 history loss 0.18' lines alone, its validation pass: refused as '13
    step lines all read as one step (78)', with --step-col offered (the validation's batches judged as training)."""
    lines = [f"2026-05-09 04:10:57,296 DEBUG CV Batch 78/{b} loss {0.15 + b:.8f} acc 99.02343750 history loss 0.18"
             for b in range(20, 150, 10)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "cv.log", lines))])
    assert result.exit_code == 1
    assert "its 13 step lines are all an evaluation's (the first: '2026-05-09" in result.output
    assert "--step-col" not in result.output


def test_wenet_lines_of_every_rank_are_read_from_the_lowest(tmp_path):
    """WeNet on three GPUs: every rank prints its own batch's loss, its line ending in 'rank N': the last printed of
    each step was read, rank 2's at one step and rank 0's at the next ('every rank printing?')."""
    lines = []
    for step in (203700, 203800, 203900, 204000):
        for rank in (2, 0, 1):
            lines.append(f"2023-01-30 18:47:07,107 DEBUG TRAIN Batch 4/{step} loss {12.0 + rank + step / 1e5:.6f} "
                         f"loss_att 10.9 loss_ctc 16.6 lr 0.00032621 rank {rank}")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["loss"].tolist() == pytest.approx([12.0 + s / 1e5 for s in (203700, 203800, 203900, 204000)])
    assert not any("every rank" in w for w in run.warnings)


@pytest.mark.parametrize("fork", ["pjreddie", "alexeyab", "classifier"])
def test_darknet_iteration_lines_give_the_batch_its_loss_and_the_rate(tmp_path, fork):
    """Darknet prints "%d: %f, %f avg, %f rate, %lf seconds, %d images" after each batch (AlexeyAB:
    "... avg loss, ..., %f hours left"; the classifier "%ld, %.3f: ..." with the epoch), between
    Region lines whose "-nan" is normal where a layer saw no object. Not read at all: "its lines
    log Obj, count, IOU, ... but no loss"."""
    rng = np.random.default_rng(4)
    lines, avg = ["Learning Rate: 0.001, Momentum: 0.9, Decay: 0.0005", "Loaded: 0.000050 seconds"], -1.0
    for i in range(1, 401):
        loss = 40.0 if i in (250, 251) else (1400 * np.exp(-i / 40) + 4) * (1 + 0.05 * rng.standard_normal())
        avg = loss if avg < 0 else 0.9 * avg + 0.1 * loss
        lines.append("Region 106 Avg IOU: -nan, Class: -nan, Obj: -nan, No Obj: 0.001735, .5R: -nan, .75R: -nan,  count: 0")
        if fork == "pjreddie":
            lines.append(f"{i}: {loss:f}, {avg:f} avg, 0.001000 rate, 3.100732 seconds, {64 * i} images")
        elif fork == "alexeyab":
            lines.append(f"\n {i}: {loss:f}, {avg:f} avg loss, 0.001000 rate, 2.871123 seconds, {64 * i} images, "
                         "4.318590 hours left")
        else:
            lines.append(f"{i}, {i * 64 / 50000:.3f}: {loss:f}, {avg:f} avg, 0.100000 rate, 0.51 seconds, {64 * i} images")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "darknet" and run.steps.index[[0, -1]].tolist() == [1, 400]
    assert run.steps["loss"].iloc[0] > 1000 and run.steps["lr"].iloc[-1] in (0.001, 0.1)
    report = analyze_run(run)
    assert [(i.kind, i.step) for i in report.incidents if i.severity.value != "info"] == [("loss_spike", 250)]
    assert not any(i.kind == "nonfinite" for i in report.incidents)


def _tool_lines(tool: str, step: int, loss: float) -> list[str]:
    """One logging interval of ``tool`` as its source prints it (see test_tools_not_read_before)."""
    if tool == "marian":  # marian-dev src/training/scheduler.h, formatLoss with --disp-label-counts
        cost = "-nan" if math.isnan(loss) else f"{loss:.8f}"
        lines = [f"[2024-06-01 10:01:59] Ep. 1 : Up. {step} : Sen. 247,141 : Cost {cost} * 7,469,268 @ 14,704 "
                 f"after 7,469,268 : Time 119.38s : 62566.37 words/s : gNorm 1.2908 : L.r. 3.0000e-04"]
        if step % 5000 == 0:
            lines.append(f"[2024-06-01 10:20:31] [valid] Ep. 1 : Up. {step} : ce-mean-words : 2.5000 : new best")
        return lines
    if tool == "nanot5":  # nanoT5 utils/logging_utils.py
        lines = [f"06/01/2024 10:00:40 - INFO - Main - [train] Step {step} out of 65536 | Loss --> {loss:.3f} | "
                 f"Grad_l2 --> 2.775 | Weights_l2 --> 7043.800 | Lr --> 0.010 | Seconds_per_step --> 0.407 | "]
        if step % 5000 == 0:
            lines.append(f"06/01/2024 10:00:41 - INFO - Main - [eval] Step {step} out of 65536 | Loss --> 2.500 | "
                         "Accuracy --> 0.593 | Time --> 41.127 | ")
        return lines
    if tool == "opennmt_tf":  # opennmt/training.py TrainingStats.log, opennmt/evaluation.py
        lines = [f"2024-03-01 09:00:41.666000: I training.py:608] Step = {step} ; steps/s = 2.44, tokens/s = 23376 "
                 f"(11022 source, 12354 target) ; Learning rate = 0.000395 ; Loss = {loss:f}"]
        if step % 5000 == 0:
            lines.append(f"2024-03-01 09:35:13.333000: I evaluation.py:365] Evaluation result for step {step}: "
                         f"loss = 2.500000 ; perplexity = 12.182494")
        return lines
    if tool == "pixart":  # PixArt-alpha train_scripts/train.py; its val_loss is not printed: none read
        return [f"2024-10-31 09:21:54,830 - PixArt - INFO - Step/Epoch [{step}/{step // 2000 + 1}][{step % 2000 + 1}/2000]"
                f":total_eta: 7:53:18, epoch_eta:0:47:18, time_all:1.437, time_data:0.005, lr:2.000e-05, s:(32, 32), "
                f"loss:{loss:.4f}, grad_norm:0.0349"]
    if tool == "trax":  # trax/supervised/training.py: 'Step % 6d: %s' of '%s %s | % .8f'
        return ["", f"Step {step:6d}: Ran 99 train steps in 3.82 secs",
                f"Step {step:6d}: train CrossEntropyLoss | {loss: .8f}",
                f"Step {step:6d}: eval  CrossEntropyLoss | {1.1 * loss: .8f}",
                f"Step {step:6d}: eval          Accuracy |  0.60299537"]
    epoch, batch = divmod(step, 400)  # MXNet's Speedometer, batches counted inside the epoch
    lines = [f"2019-04-01 10:18:30,797 Node[0] Epoch[{epoch}] Batch [{batch - 50}-{batch}]\tSpeed: 2470.23 "
             f"samples/sec\taccuracy=0.707589\tcross-entropy={loss:f}"] if batch else []
    if batch == 350:
        lines += [f"2019-04-01 10:18:43,261 Node[0] Epoch[{epoch}] Train-cross-entropy={loss:f}",
                  f"2019-04-01 10:18:44,000 Node[0] Epoch[{epoch}] Validation-cross-entropy={1.1 * loss:f}"]
    return lines


@pytest.mark.parametrize("tool", ["marian", "nanot5", "trax", "mxnet", "opennmt_tf", "pixart"])
def test_tools_not_read_before(tmp_path, tool):
    """Marian's "Ep. E : Up. N : ... : Cost X ...", nanoT5's "[train] Step N out of M | Loss --> X",
    Trax's "Step N: train CrossEntropyLoss |  X" and MXNet's Speedometer "Epoch[E] Batch [A-B]\tSpeed:
    ...\tcross-entropy=X" were not read ("not a log format", or "its lines log ... but no loss": MXNet's
    loss metric is named cross-entropy); of OpenNMT-tf's "Step = N ; ... ; Loss = X", only the
    evaluations' "Evaluation result for step N: loss = X" were read, as the training loss; PixArt's
    "Step/Epoch [G/E][I/N]:..., loss:X" was read as epochs of a total (the spike at "step 20000001")."""
    rng = np.random.default_rng(9)
    lines, steps = [], range(50, 20050, 50)
    for k, step in enumerate(steps):
        loss = (3 * np.exp(-k / 100) + 2) * (1 + 0.01 * rng.standard_normal())
        loss = loss * 4 if k in (200, 201) else float("nan") if k >= 300 else loss
        lines += _tool_lines(tool, step, loss)
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == tool and len(run.steps["loss"]) >= 350
    report = analyze_run(run)
    (spike,) = [i for i in report.incidents if i.kind == "loss_spike"]
    (nan,) = [i for i in report.incidents if i.kind == "nonfinite" and i.details.get("metric", "loss") == "loss"]
    assert run.steps["loss"].loc[spike.step] > 8 and run.steps["loss"].loc[:spike.step].iloc[:-1].max() < 6
    assert np.isnan(run.steps["loss"].loc[nan.step]) and run.steps["loss"].loc[:nan.step].iloc[:-1].notna().all()
    if tool != "mxnet":  # the step each line names
        assert (spike.step, nan.step) == (steps[200], steps[300])
    assert "val_loss" in run.steps.columns or tool == "pixart"


def test_catalyst_console_lines_by_epoch(tmp_path):
    """Catalyst's ConsoleLogger prints "train (E/N) accuracy01: A | loss: X | loss/mean: X | lr: L" and
    "valid (E/N) ..." after each epoch, under the loader's tqdm bar. The bars alone were read, a bar
    whose rounded values matched the one before dropped as a redraw, its steps counted as bars kept
    x 1875: a spike at epoch 151 told at "step 270000" (epoch 144); without the bars (stderr), "not a
    log format"."""
    lines = []
    for e in range(1, 101):
        loss = "nan" if e >= 80 else str(4.0 if e == 50 else 1 / e + 0.1)
        bar = f"{e}/100 * Epoch (train): 100%|##########| 1875/1875 [00:20<00:00, 92.87it/s, loss=0.103, lr=0.020]"
        lines += [bar, f"train ({e}/100) accuracy01: 0.9 | loss: {loss} | loss/mean: {loss} | lr: 0.02",
                  f"valid ({e}/100) accuracy01: 0.8 | loss: {loss} | loss/mean: {loss} | lr: 0.02",
                  f"* Epoch ({e}/100) lr: 0.02 | momentum: 0.9"]
    for kept in (lines, [line for line in lines if "it/s" not in line]):
        (run,) = discover_runs(_write(tmp_path / "train.log", kept))
        assert run.source == "catalyst" and run.steps.index.tolist() == list(range(1, 101))
        assert run.steps.at[2, "loss"] == 0.6 and run.steps.at[2, "val_loss"] == 0.6 and run.steps.at[2, "lr"] == 0.02
        report = analyze_run(run)
        assert [(i.kind, i.step) for i in report.incidents if i.kind == "loss_spike"] == [("loss_spike", 50)]
        assert any(i.kind == "nonfinite" and i.step == 80 and i.severity.value == "critical" for i in report.incidents)


def test_big_vision_metric_lines(tmp_path):
    """big_vision's BigVisionMetricWriter logs one metric a line, "\\x1b[35m[STEP]\\x1b[0m name = value",
    through absl: not a log format. Its train.py then raises "The loss became nan or inf somewhere
    within steps [a, b]" after logging the NaN: one incident, not a second one at the step after."""
    lines = ["I0311 09:15:02.000000 140398223427392 train.py:101] Workdir: /tmp/vit_s16"]
    for k in range(1, 301):
        step, loss = 100 * k, 4 * np.exp(-k / 80) + 2
        loss = loss * 4 if k in (150, 151) else float("nan") if k == 300 else loss
        lines += [f"I0311 09:15:14.300000 140398223427392 utils.py:928] \x1b[35m[{step}]\x1b[0m {name} = {value}"
                  for name, value in (("global_schedule", 1e-3), ("training_loss", loss), ("l2_grads", 1.2),
                                      ("progress", k / 300))]
    lines += ["Traceback (most recent call last):", '  File "big_vision/train.py", line 417, in main',
              "RuntimeError: The loss became nan or inf somewhere within steps [29900, 30000]"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "big_vision" and run.steps.index[[0, -1]].tolist() == [100, 30000]
    assert run.steps.at[100, "grad_norm/total"] == 1.2
    report = analyze_run(run)
    assert [(i.kind, i.step) for i in report.incidents if i.severity.value != "info"] == [
        ("loss_spike", 15000), ("nonfinite", 30000)]


@pytest.mark.parametrize("scaled", [True, False])
def test_mindspore_model_zoo_outputs_lines(tmp_path, scaled):
    """MindSpore's model zoo prints "epoch: E, step: N, outputs are (Tensor(shape=[1], dtype=Float32,
    value= [ 1.03e+01]), Tensor(shape=[], dtype=Bool, value= False), Tensor(shape=[], dtype=Float32,
    value= 65536))" (the loss, the overflow flag, the loss scale), or the loss's Tensor alone:
    "its lines log epoch, shape, step, value, time but no loss"."""
    lines, scale = [], 65536.0
    for k in range(1, 301):
        loss = 10 * np.exp(-k / 60) + 2
        loss = loss * 4 if k in (150, 151) else float("nan") if k >= 250 else loss
        if k >= 250:
            scale = max(1.0, scale / 2)
        value = "nan" if np.isnan(loss) else f"{loss:.8e}"
        head = f"epoch: {k // 100 + 1}, step: {100 * k}, outputs are "
        if scaled:
            lines.append(head + f"(Tensor(shape=[1], dtype=Float32, value= [ {value}]), Tensor(shape=[], dtype=Bool, "
                                f"value= {k >= 250}), Tensor(shape=[], dtype=Float32, value= {scale:g}))")
        else:
            lines.append(head + f"Tensor(shape=[], dtype=Float32, value= {value})")
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.source == "mindspore" and run.steps.index[[0, -1]].tolist() == [100, 30000]
    kinds = {(i.kind, i.step) for i in analyze_run(run).incidents if i.severity.value != "info"}
    assert {("loss_spike", 15000), ("nonfinite", 25000)} <= kinds
    assert any(kind == "loss_scale_collapse" for kind, _ in kinds) == scaled


def test_the_trainers_nan_filter_zeros_are_a_non_finite_loss(tmp_path):
    """The Hugging Face Trainer (logging_nan_inf_filter, on by default) logs 'loss': 0.0 for a window
    whose every step was NaN: read as written, "a collapse to 0: the model sees its targets" and "a
    loss stuck at 0", warnings, and the evaluation's NaN "while the training loss is finite"."""
    dicts, rows = [], []
    for k in range(1, 301):
        step, nan = 10 * k, k > 210
        loss = 0.0 if nan else 2 * np.exp(-k / 100) + 0.8
        grad = "nan" if nan else "0.9"
        dicts.append(f"{{'loss': {loss:.4f}, 'grad_norm': {grad}, 'learning_rate': 1e-05, 'epoch': {k / 100:.2f}}}")
        rows.append(json.dumps({"current_steps": step, "total_steps": 3000, "loss": round(loss, 4), "lr": 1e-05,
                                "epoch": k / 100, "percentage": k / 3}))
        if k % 50 == 0:
            value = "nan" if nan else "1.2"
            dicts.append(f"{{'eval_loss': {value}, 'eval_runtime': 19.8, 'epoch': {k / 100:.2f}}}")
            rows.append(f'{{"current_steps": {step}, "total_steps": 3000, "eval_loss": {"NaN" if nan else 1.2}}}')
    for name, lines in (("train.log", dicts), ("trainer_log.jsonl", rows)):
        (run,) = discover_runs(_write(tmp_path / name, lines))
        report = analyze_run(run)
        bad = [(i.kind, i.severity.value) for i in report.incidents if i.severity.value != "info"]
        assert ("loss_collapse", "warning") not in bad and ("loss_stuck", "warning") not in bad, name
        (zeros,) = [i for i in report.incidents if i.details.get("nan_filter")]
        assert zeros.severity.value == "critical" and zeros.step == run.steps["loss"].dropna().index[210]
        evaluation = [i for i in report.incidents if i.kind == "nonfinite" and "eval" in i.details.get("metric", "")]
        assert evaluation and all("the training loss was non-finite then too" in i.message for i in evaluation)
    # the Trainer's notebook table (Unsloth's notebooks print it so): "Step  Training Loss"
    table = ["Step\tTraining Loss", *[f"{10 * k}\t{0.0 if k > 210 else 2 * np.exp(-k / 100) + 0.8:.6f}"
                                      for k in range(1, 301)]]
    (run,) = discover_runs(_write(tmp_path / "notebook.txt", table))
    (zeros,) = [i for i in analyze_run(run).incidents if i.details.get("nan_filter")]
    assert zeros.step == 2110 and zeros.severity.value == "critical"
    # a loss that reaches 0 and stays, with nothing non-finite beside it, outside the Trainer: as before
    plain = _write(tmp_path / "plain.log", [f"step {10 * k} | loss {0.0 if k > 210 else 2 - k / 150:.4f}"
                                            for k in range(1, 301)])
    kinds = {i.kind for i in analyze_run(discover_runs(plain)[0]).incidents}
    assert "loss_stuck" in kinds and not any(i.details.get("nan_filter") for i in analyze_run(discover_runs(plain)[0]).incidents)


@pytest.mark.parametrize("finite", [0, 5])
def test_the_trainers_nan_filter_zeros_are_not_counted_as_finite_values(tmp_path, finite):
    """PINK's stage 1: 13 dicts of 'loss': 0.0 beside 'grad_norm': nan, told as a NaN loss from the start ("final loss
    nan, best loss -") while the warm-up warning said "only 13 finite loss values"."""
    dicts = [f"{{'loss': {2 - k / 10 if k < finite else 0.0}, 'grad_norm': {1.0 if k < finite else 'nan'}, "
             f"'learning_rate': 2e-05, 'epoch': {k / 13:.2f}}}" for k in range(13)]
    report = analyze_run(discover_runs(_write(tmp_path / "train.log", dicts))[0])
    counted = [w for w in report.warnings if "finite loss value" in w]
    assert counted == ([f"only {finite} finite loss values (the Trainer's 0.0 for its non-finite steps not counted), "
                        "within the spike detector's warm-up of 20: too little history to judge spikes fully (only "
                        "large jumps are flagged); non-finite values and the final loss are reported"] if finite else
                       ["no finite loss value (the Trainer's 0.0 for its non-finite steps not counted): the non-finite "
                        "values are reported"])

def test_the_trainers_nan_filter_zeros_in_mid_run_are_a_non_finite_loss(tmp_path):
    """A window of NaN losses the run came out of (LLaMA-Factory #5660, an fp16 scaler skipping them)
    is logged as 'loss': 0.0 beside 'grad_norm': nan: read as written, a collapse to 0 "the model sees
    its targets", a spike out of a baseline of 0 and a NaN grad norm "while the loss stayed finite"."""
    dicts = []
    for k in range(1, 61):
        hidden = 31 <= k <= 33
        loss = 0.0 if hidden else 2 * np.exp(-k / 40) + 0.8 + 0.01 * (k % 3)
        dicts.append(f"{{'loss': {loss:.4f}, 'grad_norm': {'nan' if hidden else 0.9 + 0.01 * (k % 5)}, "
                     f"'learning_rate': 1e-05, 'epoch': {k / 100:.2f}}}")
    (run,) = discover_runs(_write(tmp_path / "train.log", dicts))
    report = analyze_run(run)
    loss_nan = [i for i in report.incidents if i.kind == "nonfinite" and i.details["metric"] == "loss"]
    assert [(i.step, i.end_step, i.severity.value) for i in loss_nan] == [(31, 33, "critical")]
    assert not [i for i in report.incidents if i.kind in ("loss_collapse", "loss_spike", "loss_stuck")]
    assert not any("while the loss stayed finite" in i.message for i in report.incidents)
    assert any("logging_nan_inf_filter" in w and "31-33" in w for w in report.warnings)
    assert report.best_loss > 0.8
    # a loss of exactly 0 beside a finite grad norm is what was logged (a batch of masked labels)
    plain = [line.replace("'grad_norm': nan", "'grad_norm': 0.5") for line in dicts]
    report = analyze_run(discover_runs(_write(tmp_path / "plain.log", plain))[0])
    assert not any(i.kind == "nonfinite" for i in report.incidents)
    assert not any("logging_nan_inf_filter" in w for w in report.warnings)


def test_a_global_step_the_bar_shows_as_a_float_from_1000_on(tmp_path):
    """latent-diffusion logs self.log("global_step", ...) to Lightning 1.x's bar, which shows it
    through tqdm's format_num: "global_step=999", then "global_step=1038.0" and "global_step=2e+3".
    Every line from step 1000 on was dropped without a word (a spike at 1200 unseen)."""
    def shown(step: int) -> str:  # tqdm.format_num of a float: "{:.3g}" where shorter than str()
        short, long = f"{float(step):.3g}".replace("e+0", "e+"), str(float(step))
        return str(step) if step < 1000 else short if len(short) < len(long) else long

    lines = [f"Epoch 0:  10%|#         | {s + 1}/2100 [00:13<10:21,  1.21s/it, loss=0.137, v_num=0, "
             f"train/loss_step={(0.55 - s * 1e-4) * (4 if s in (1200, 1201) else 1):.3g}, global_step={shown(s)}]"
             for s in range(2100)]
    assert "global_step=2e+3]" in lines[2000] and "global_step=1038.0]" in lines[1038]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    # (1000-1005 all show as 1e+3, 2000-2004 as 2e+3: the bar itself tells them apart no more)
    assert run.steps.index.tolist() == sorted({int(float(shown(s))) for s in range(2100)})
    assert len(run.steps.index) > 2050
    assert [(i.kind, i.step) for i in analyze_run(run).incidents if i.severity.value != "info"] == [("loss_spike", 1200)]


def test_olmo_core_console_blocks_and_its_nan_stop(tmp_path):
    """OLMo-core's console logger prints "[step=N/M,epoch=0,eta=1h42m27s]" then a "    train/CE loss=X"
    line per metric (a bare "[step=N/M,epoch=0]" at the other steps): the ",eta=" made it "no loss
    logged by olmo". Its trainer stops with RuntimeError("nan loss encountered at step 2100"): a
    crash warning, at the step before."""
    prefix = "2026-06-22 16:08:17.400\thost:0\tolmo_core.train.callbacks.console_logger:68\tINFO\t"
    lines = []
    for step in range(1, 2100):
        if step % 10:
            lines.append(prefix + f"[step={step}/3000,epoch=0]")
            continue
        loss = 10 * np.exp(-step / 400) + 2.8
        loss = loss * 4 if step in (1500, 1510) else loss
        lines += [prefix + f"[step={step}/3000,epoch=0,eta=1h42m27s]", "    optim/LR (group 0)=2.00E-06",
                  "    optim/total grad norm=0.7725", f"    train/CE loss={loss:.4g}", "    train/Z loss=0.0002"]
    lines += ["Traceback (most recent call last):", '  File "olmo_core/train/trainer.py", line 1435, in _check',
              "RuntimeError: nan loss encountered at step 2100"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "olmo" and run.steps["loss"].dropna().index[[0, -1]].tolist() == [10, 2090]
    assert run.steps.at[10, "grad_norm/total"] == pytest.approx(0.7725)
    found = [(i.kind, i.step, i.severity.value) for i in analyze_run(run).incidents if i.severity.value != "info"]
    assert ("loss_spike", 1500, "warning") in found and ("nonfinite", 2100, "critical") in found


def test_sam2_progress_lines_not_its_epoch_summary_dicts(tmp_path):
    """SAM 2's trainer prints "Train Epoch: [E][ I/200] | ... | Losses/train_all_loss: 2.56e+01
    (2.41e+01)" every 10 iterations and "Losses and meters: {'Losses/train_all_loss': 22.99, ...,
    'Trainer/epoch': 0}" after each epoch. Its loss key written as "loss", the summary dicts were
    taken for the Hugging Face Trainer's: 40 rows numbered 1..40, the 800 progress lines dropped,
    a spike among them unseen."""
    lines = []
    for epoch in range(8):
        for it in range(0, 200, 10):
            k = epoch * 20 + it // 10
            loss = 25 * np.exp(-k / 60) + 5 if k not in (80, 81) else 120.0
            lines.append(f"INFO 2024-05-01 10:00:20,000 train_utils.py: 271: Train Epoch: [{epoch}][{it:3d}/200] | "
                         f"Batch Time: 2.49 (2.49) | Data Time: 0.06 (0.06) | Losses/train_all_loss: {loss:.2e} (2.50e+01)")
        lines.append(f"INFO 2024-05-01 10:08:20,000 trainer.py: 830: Losses and meters: {{'Losses/train_all_loss': "
                     f"{10 + 5 / (epoch + 1)}, 'Losses/train_all_loss_mask': 0.09, 'Trainer/where': 0.02, "
                     f"'Trainer/epoch': {epoch}, 'Trainer/steps_train': {200 * (epoch + 1)}}}")
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.source != "hf_trainer" and len(run.steps["loss"].dropna()) == 160
    (spike,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert spike.step == 800


def test_a_step_inside_the_epoch_beside_a_global_step(tmp_path):
    """Open-Sora's bar shows "loss=0.549, global_grad_norm=0.187, step=499, global_step=499, lr=5e-5",
    its step counting inside the epoch: the second epoch's steps overwrote the first's (700 steps
    of 1,400), a spike at global step 730 told at 30."""
    lines = []
    for g in range(1400):
        epoch, step = divmod(g, 700)
        loss = (0.7 * np.exp(-g / 500) + 0.45) * (4 if g in (730, 731) else 1)
        lines.append(f"Epoch {epoch}:  50%|#####     | {step + 1}/700 [34:10<13:44,  4.14s/it, loss={loss:.3g}, "
                     f"global_grad_norm=0.187, step={step}, global_step={g}, lr=5e-5]")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == list(range(1400))
    assert [(i.kind, i.step) for i in analyze_run(run).incidents if i.severity.value != "info"] == [("loss_spike", 730)]


def test_a_bar_drawn_at_its_new_count_before_its_description_is_set_again_is_no_second_print(tmp_path):
    """llama-recipes' bar: pbar.update(1) draws the new count with the step before's description,
    then set_description() draws it with this step's loss. 'Most steps print their loss 2 times with
    different values (every rank printing?)' was said of a healthy single-process run."""
    text, losses = "", [2 + np.exp(-i / 50) + 0.05 * np.sin(i) for i in range(300)]
    for i, loss in enumerate(losses):
        for description in (losses[i - 1] if i else None, loss):
            if description is not None:
                text += (f"\rTraining Epoch: 1/3, step {i}/300 completed (loss: tensor({description:.4f}, "
                         f"device='cuda:0')):  {i // 3:2d}%|##   | {i + 1}/300 [00:02<12:00,  2.41s/it]")
    path = tmp_path / "llama_recipes.log"
    path.write_text(text + "\n")
    (run,) = discover_runs(path)
    assert not any("print their loss" in w for w in run.warnings)
    assert run.steps["loss"].tolist() == pytest.approx([round(v, 4) for v in losses])


def _paddleclas_log(raw: list[float], epochs: int = 6, length: int = 200, every: int = 10) -> list[str]:
    """PaddleClas' log_info: each metric printed as its AverageMeter's mean since the epoch began;
    then the epoch's [Avg] line, and its evaluation's [Eval] lines (a count of 40 batches)."""
    lines = []
    for epoch in range(1, epochs + 1):
        total = 0.0
        for it in range(length):
            total += raw[(epoch - 1) * length + it]
            if it % every == 0:
                mean = total / (it + 1)
                lines.append(f"[2024/05/06 14:00:00] ppcls INFO: [Train][Epoch {epoch}/{epochs}][Iter: {it}/{length}]"
                             f"lr(LinearWarmup): 0.10000000, top1: 0.5, CELoss: {mean:.5f}, loss: {mean:.5f}, "
                             "batch_cost: 0.31766s, reader_cost: 0.00149, ips: 412.88174 samples/s, eta: 0:25:50")
        lines.append(f"[2024/05/06 14:02:35] ppcls INFO: [Train][Epoch {epoch}/{epochs}][Avg]top1: 0.5, "
                     f"CELoss: {total / length:.5f}, loss: {total / length:.5f}")
        lines += [f"[2024/05/06 14:02:35] ppcls INFO: [Eval][Epoch {epoch}][Iter: {it}/40]CELoss: {3 - epoch / 10:.5f}, "
                  f"loss: {3 - epoch / 10:.5f}, top1: 0.5, batch_cost: 0.21331s" for it in (0, 20)]
        lines.append(f"[2024/05/06 14:02:35] ppcls INFO: [Eval][Epoch {epoch}][Avg]CELoss: {3 - epoch / 10:.5f}, "
                     f"loss: {3 - epoch / 10:.5f}, top1: 0.5")
    return lines


def test_paddleclas_prints_means_since_the_epoch_began(tmp_path):
    """A 30-iteration x5 spike in epoch 4 lifted every later mean of its epoch: 'not recovered
    within 200 steps' and a divergence, both critical, at a third of its height. Each logged
    interval's loss is worked out from two means; the evaluation's own count (40 batches) is no
    training step: its loss goes to its epoch's end."""
    raw = [2 + 2 * np.exp(-i / 300) + 0.1 * np.sin(i * 1.3) for i in range(1200)]
    for i in range(750, 780):
        raw[i] *= 5
    (run,) = discover_runs(_write(tmp_path / "train.log", _paddleclas_log(raw)))
    interval = run.steps["loss"].loc[760]  # iterations 751-760
    assert interval == pytest.approx(np.mean(raw[751:761]), abs=1e-3)
    (spike,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch", "divergence")]
    assert (spike.kind, spike.step, spike.severity) == ("loss_spike", 750, "warning") and spike.resolved
    assert run.steps["val_loss"].dropna().index.tolist() == [190, 390, 590, 790, 990, 1190]


def test_onetrainers_nested_bars_are_no_pipe_table(tmp_path):
    """OneTrainer draws an epoch bar and a step bar, 'step:  10%|#         | 15/150 [..., loss=0.162,
    smooth loss=0.158]': the '|'-table reader took the bar's '#' fill for a '#' step column and
    the rest for a loss column ('nothing to analyse ... is text, not a number')."""
    text = "epoch:   0%|          | 0/10 [00:00<?, ?it/s]\n"
    for epoch in range(10):
        for n in range(1, 151):
            step = epoch * 150 + n
            loss = 0.6 if step == 700 else 0.08 + 0.1 * np.exp(-step / 300)
            full, part = divmod(n * 100 // 150, 10)  # tqdm's ASCII bar: '#' blocks, then a digit's part
            fill = "#" * full + (str(part) if part and full < 10 else "")
            text += (f"\rstep: {100 * n // 150:3d}%|{fill:<10}| {n}/150 [00:15<02:15,  1.00it/s, loss={loss:.3g}, "
                     f"smooth loss={loss * 0.9 + 0.01:.3g}]\x1b[A")
        text += f"\nepoch: {10 * (epoch + 1):3d}%|#         | {epoch + 1}/10 [02:30<22:30, 150.00s/it]\n"
    path = tmp_path / "onetrainer.log"
    path.write_text(text)
    (run,) = discover_runs(path)
    assert run.steps["loss"].index.tolist() == list(range(1, 1501))
    (spike,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert spike.step == 700


def test_nemo2_iteration_lines_end_without_a_separator(tmp_path):
    """NeMo 2.0 prints Megatron-style fields without the closing ``|``: the last field, the loss,
    is whole (a Megatron line that lacks its closing ``|`` was cut while written)."""
    lines = [f"Training epoch 0, iteration {i}/9 | lr: 0.0006 | consumed_samples: {32 * (i + 1)} | "
             f"global_batch_size: 32 | global_step: {i} | reduced_train_loss: {v}"
             for i, v in enumerate([11.02, 9.761, 9.21, 8.595, 8.1, 7.8, 7.5, 7.3, 7.113])]
    (run,) = discover_runs(_write(tmp_path / "nemo2.log", lines))
    assert run.source == "megatron" and run.steps["loss"].tolist()[-1] == 7.113
    assert run.steps["loss"].count() == 9 and not any("cut off" in w for w in run.warnings)


def test_fairseq_json_log_format(tmp_path):
    """fairseq / metaseq ``--log-format json``: the stats as JSON strings after the tag's logger
    name; the step is num_updates; validation and end-of-epoch dicts name keys with the tag."""
    import json

    lines = []
    for i in range(1, 13):
        stats = {"epoch": 1, "loss": f"{9.0 - i * 0.3:.3f}", "ppl": "100", "wps": "739601", "ups": "0.71",
                 "wpb": "1.04858e+06", "bsz": "512", "num_updates": str(i * 100), "lr": "2.80112e-07",
                 "gnorm": "16.981", "loss_scale": "64", "train_wall": "12", "wall": str(20 * i)}
        lines.append(f"slurm_procid 0 : 2022-11-11 14:05:{i:02d} | INFO | train_inner | {json.dumps(stats)}")
        if i == 6:
            valid = {"epoch": 1, "valid_loss": "6.5", "valid_ppl": "90.5", "valid_num_updates": "600"}
            lines.append(f"2022-11-11 14:06:00 | INFO | valid | {json.dumps(valid)}")
    lines.append('2022-11-11 14:07:00 | INFO | train | {"epoch": 1, "train_loss": "6.0", "train_num_updates": "1200"}')
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "fairseq"
    steps = run.steps
    assert steps.index.tolist() == list(range(100, 1201, 100))
    assert steps["loss"].tolist() == pytest.approx([9.0 - i * 0.3 for i in range(1, 13)])
    assert steps.loc[600, "val_loss"] == 6.5 and steps["val_loss"].count() == 1
    assert steps["grad_norm/total"].eq(16.981).all() and steps["loss_scale"].eq(64).all()
    assert steps.loc[1200, "loss"] == pytest.approx(5.4)  # the epoch summary fills, never replaces


def test_markdown_table_of_a_notebook_run_with_text_around_it(tmp_path):
    """The Trainer's notebook table pasted as Markdown into an issue: question, fence, rule row;
    "No log" where no training loss was logged since the previous evaluation."""
    rows = [f"| {s} | {'No log' if s == 10 else v} | {v if v == 'nan' else 2.6} |"
            for s, v in zip(range(10, 111, 10), [2.45, 2.4, 2.35, 2.3, 2.25, 2.2, 2.15, 2.1, 2.05, 2.0, "nan"])]
    path = _write(tmp_path / "issue.txt", ["Loss goes nan at the end, why?", "", "```",
                                           "| Step | Training Loss | Validation Loss |",
                                           "|-----:|--------------:|----------------:|", *rows, "```"])
    (run,) = discover_runs(path)
    assert run.source == "pipe_table"
    assert run.steps.index.tolist() == list(range(10, 111, 10))
    assert run.steps["validation loss"].count() == 10
    assert run.warnings == ["issue.txt: loss read from 'Training Loss' (no column is named loss; "
                            "--loss-col picks another)"]  # "No log" is no value, not damage
    report = analyze_run(run)  # the training loss's NaN, and the validation loss's printed beside it
    assert [(i.kind, i.step, i.severity) for i in report.incidents] == [("nonfinite", 110, "critical"),
                                                                          ("nonfinite", 110, "warning")]
    assert "the training loss was non-finite then too" in report.incidents[1].message


def test_grpo_table_whose_loss_starts_at_zero_is_not_stuck(tmp_path):
    """GRPO's loss is 0 while the policy is still the reference (TRL logs reward and kl beside it):
    a text table with '-- | --' rules, as a notebook's table copies into an issue."""
    lines = ["Step | Training Loss | reward | reward_std | kl", "-- | -- | -- | -- | --"]
    lines += [f"{s} | {0.0 if s <= 9 else 0.0001 * (s - 9):.6f} | {-17.25 + s:.6f} | 1.5 | {0.00001 * s:.6f}"
              for s in range(1, 13)]
    (run,) = discover_runs(_write(tmp_path / "grpo.txt", lines))
    report = analyze_run(run)
    assert report.incidents == [] and report.verdict == "healthy"
    assert run.steps["reward"].iloc[0] == -16.25


def test_llama2c_train_lines(tmp_path):
    """llama2.c's train.py: f"{iter_num} | loss {lossf:.4f} | lr {lr:e} | {dt*1000:.2f}ms | mfu ..."
    and nanoGPT's evaluation line between them."""
    lines = []
    for i in range(490, 651, 10):
        lines.append(f"{i} | loss {5.75 - (i - 490) / 400:.4f} | lr {i * 1e-7:e} | 8060.78ms | mfu 0.21%")
        if i == 500:
            lines += ["step 500: train loss 5.7373, val loss 5.9544", "saving checkpoint to out"]
    lines[-1] = "650 | loss nan | lr 6.500000e-05 | 8101.12ms | mfu 0.21%"
    (run,) = discover_runs(_write(tmp_path / "out.txt", lines))
    assert run.source == "nanogpt"
    assert run.steps["loss"].count() == 16 and run.steps.loc[500, "val_loss"] == 5.9544
    assert run.steps.loc[490, "lr"] == pytest.approx(4.9e-05)
    report = analyze_run(run)
    assert [(i.kind, i.step) for i in report.incidents] == [("nonfinite", 650)]


def test_a_nanogpt_log_pasted_without_its_line_ends(tmp_path):
    """nanoGPT's train.py lines joined by spaces (a chat or a web form ate the line ends): each
    "iter N: loss X, ..." is still one step, not one line of hundreds of fields (which had ended
    in an error from the reader)."""
    lines = [f"iter {i}: loss {4.2 - i / 100:.4f}, time 95.12ms, mfu 1.20%" for i in range(120)]
    lines[90] = "iter 90: loss 9.8000, time 95.12ms, mfu 1.20%"
    (tmp_path / "paste.txt").write_text(" ".join(lines))
    (run,) = discover_runs(tmp_path / "paste.txt")
    assert run.source == "nanogpt" and run.steps["loss"].count() == 120
    assert run.steps.loc[7, "time_ms"] == 95.12 and run.steps.loc[90, "loss"] == 9.8
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("outlier_batch", 90)]  # one batch, back at 91


def test_litgpt_micro_batch_lines_keep_a_spike_in_one_of_them(tmp_path):
    """An older lit-gpt printed each micro-batch's loss (4 per optimizer step here): the iteration
    is the step, as litgpt's loggers write it, so a jump inside a step is not overwritten."""
    lines = [f"iter {i} step {i // 4}: loss {1.70 if i < 1152 else 11.2 + (i % 3) / 10:.4f}, "
             f"iter time: 190.12ms{' (optimizer.step)' if i % 4 == 3 else ''}" for i in range(1136, 1168)]
    (run,) = discover_runs(_write(tmp_path / "lit.log", lines))
    assert run.source == "litgpt" and run.steps.index.tolist() == list(range(1136, 1168))
    assert run.steps.loc[1152, "optimizer_step"] == 288
    report = analyze_run(run)
    assert report.verdict == "unhealthy"
    assert [i.step for i in report.incidents if i.kind in ("loss_spike", "divergence")][0] == 1152


def test_grad_norm_in_a_runs_first_steps_is_not_an_explosion(tmp_path):
    """torchtitan's first steps, as a PR pastes them: the grad norm rises while the loss falls;
    a run's first steps are its warm-up for the grad norm (a loss that jumps there is still
    judged)."""
    lines = [f"[rank0]:[titan] 2025-03-01 10:00:0{s} - root - INFO - step: {s:2}  loss: {8.0 - s / 10:7.4f}  "
             f"grad_norm: {g:7.4f}  memory: 9.46GiB(64.99%)  tps: 7,282  tflops: 101.2  mfu: 10.23%"
             for s, g in zip(range(1, 6), [10.5, 12.1, 20.3, 26.625, 46.5])]
    (run,) = discover_runs(_write(tmp_path / "titan.log", lines))
    assert analyze_run(run).incidents == []


def test_grad_norm_jump_on_the_last_row_is_information(tmp_path):
    rng = np.random.default_rng(1)
    loss = 3.0 - np.arange(100) / 100 + rng.normal(0, 0.01, 100)
    grad = 1.0 + rng.normal(0, 0.05, 100)
    grad[-1] = 9.0  # nothing follows it: whether it mattered cannot be told
    report = analyze_run(RunData("r", "r", "test", pd.DataFrame({"loss": loss, "grad_norm/total": grad})))
    (incident,) = report.incidents
    assert incident.kind == "grad_norm_spike" and incident.severity == "info"
    assert "at the last logged step" in incident.message and report.verdict == "healthy"


def test_a_nan_grad_norm_before_its_first_finite_value_is_named(tmp_path):
    lines = ["{'loss': 0.1474, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.01}"]
    lines += [f"{{'loss': {0.15 + i / 1000}, 'grad_norm': {0.2 + i / 10}, 'learning_rate': 1e-05, "
              f"'epoch': {0.01 * (i + 2):.2f}}}" for i in range(8)]
    (run,) = discover_runs(_write(tmp_path / "hf.log", lines))
    (incident,) = analyze_run(run).incidents
    assert incident.kind == "nonfinite" and incident.step == 1
    assert incident.details["metric"] == "grad_norm/total" and incident.message.startswith("grad_norm/total non-finite")


def test_olmo_metric_blocks_and_a_loss_that_collapses(tmp_path):
    """OLMo prints f"[step={step}/{max_steps},epoch={epoch}]" and one indented name=value line per
    metric (thousands separators included); a cross-entropy that falls from 12 to 1e-6 in one
    step is a model that sees its targets."""
    blocks = []
    for step, (ce, gn) in enumerate([(12.18, 231.7), (1.7872662283480167e-06, 0.0002), (0.0, 7.7e-08)], 1):
        blocks += [f"2024-08-06 09:59:26.181 node:0  olmo.train:908  INFO    [step={step}/739328,epoch=0]",
                   f"    optim/total_grad_norm={gn}", f"    train/CrossEntropyLoss={ce}",
                   "    train/Perplexity=195,153", f"    throughput/total_tokens={step * 1048576:,}",
                   "    System/Peak GPU Memory (MB)=46,911"]
    (run,) = discover_runs(_write(tmp_path / "olmo.log", blocks))
    assert run.source == "olmo"
    assert run.steps["loss"].tolist() == [12.18, 1.7872662283480167e-06, 0.0]
    assert run.steps["grad_norm/total"].tolist() == [231.7, 0.0002, 7.7e-08]
    assert run.steps["throughput_total_tokens"].tolist() == [1048576, 2097152, 3145728]
    report = analyze_run(run)
    (incident,) = report.incidents
    assert (incident.kind, incident.step, incident.end_step) == ("loss_collapse", 1, 2)
    assert report.verdict == "unhealthy"


@pytest.mark.parametrize("values", [
    [2.3, 1.9, 1.5, 1.2, 1.0, 0.8],  # an ordinary descent
    [1.0, 0.5, 0.1, 0.01, 1e-4, 1e-6],  # a regression that converges, step by step
    [0.5, 1e-6],  # from below 1: not judged
    # GFPGAN's paste opens on a batch of 2535 (l_identity 2319), then 1.7, 1.3 as before it: an
    # outlier's return, no level to fall from
    [2535.0, 1.70, 1.28, 1.35, 1.31],
])
def test_not_a_collapse(values):
    from sentinel.analyze.rule_stuck import collapse_incidents

    assert collapse_incidents(_series(values)) == []


def test_a_spike_returning_to_a_tiny_loss_is_no_collapse():
    from sentinel.analyze.rule_stuck import collapse_incidents

    assert collapse_incidents(_series([1e-12] * 6 + [6775.0, 1.4e-17, 1e-12])) == []


def test_a_four_step_spike_returning_to_the_trend_is_no_collapse():
    from sentinel.analyze.rule_stuck import collapse_incidents

    assert collapse_incidents(_series([0.09] * 30 + [866.0, 866.8, 883.4, 883.4, 0.0707, 0.09])) == []


@pytest.mark.parametrize("values", [
    # a PINN's L-BFGS-B: 6.3e-4 where Adam left it, one step to 2e5, 3.42, then back at 5.9e-4 ("the model sees
    # its targets (a label leak ...)" of a blow-up's end)
    [6.3e-4, 2.0e5, 3.42, 5.9e-4, 5.0e-4, 5.0e-4],
    # a hand-written loop's launch: 173.9, then 3.3e5 and 8e5, then 316.7 and 464 (near where it started)
    [173.9, 332601.9, 797965.5, 316.7, 464.1, 1239.9],
])
def test_a_fall_back_to_where_the_loss_had_been_is_no_collapse(values):
    from sentinel.analyze.rule_stuck import collapse_incidents

    assert collapse_incidents(_series(values)) == []
    below_any_seen = values[:-3] + [1e-9, 1e-9]  # the same rise, then a fall far below anything before it
    assert [i.kind for i in collapse_incidents(_series(below_any_seen))] == ["loss_collapse"]

@pytest.mark.parametrize("losses, verdict", [
    (["0.6242", "0.4101", "0.3302", "0.2801", "0.2488", "0.2200"], "healthy"),
    (["0.6242"] + ["nan"] * 5, "unhealthy"),
])
def test_keras_fit_one_finished_bar_per_epoch(tmp_path, losses, verdict):
    """Keras fit(verbose=1) pasted as its final bar per epoch: the count is N/N on every line, so
    each line with another loss is the next epoch (one with the same finite loss is a redraw). Each
    row is an epoch's mean, read in epochs (it was at step 9595 x the epoch)."""
    lines = []
    for epoch, loss in enumerate(losses, 1):
        lines += [f"Epoch {epoch}/10", f"9595/9595 [==============================] - 1s - loss: {loss} - acc: 0.6295 "
                                       f"- val_loss: {loss} - val_acc: 0.7470"]
    if verdict == "healthy":
        lines.append(lines[-1])  # the last bar drawn twice (a NaN bar drawn twice counts twice)
    (run,) = discover_runs(_write(tmp_path / "keras.txt", lines))
    assert run.steps.index.tolist() == list(range(1, len(losses) + 1)) and run.meta["step_unit"] == "epoch"
    assert analyze_run(run).verdict == verdict


def test_keras_fit_stuck_at_chance_is_one_epoch_per_bar(tmp_path):
    """A classifier that does not learn prints the same loss (ln 10) in every epoch's finished bar:
    with an "Epoch k/K" line before each bar they are epochs, not one bar redrawn (the paste was
    'not a log format' with every bar merged into one step)."""
    lines = ["50000/50000 [==============================] - 455s - loss: 2.3030 - acc: 0.0994"]
    for epoch in range(34, 43):
        lines += [f"Epoch {epoch}/400", "50000/50000 [==============================] - 455s - loss: "
                                        f"{'2.3030' if epoch % 3 else '2.3029'} - acc: 0.0971"]
    (run,) = discover_runs(_write(tmp_path / "keras.txt", lines))
    assert len(run.steps.index) == 10
    report = analyze_run(run)
    assert report.verdict == "unhealthy" and "ln(10)" in report.incidents[0].message


@pytest.mark.parametrize("headers", [True, False])
@pytest.mark.parametrize("bar", ["━━━━━━━━━━━━━━━━━━━━ 2s 2ms/step", "[==============================] - 2s 2ms/step"])
def test_keras_fit_bars_redrawn_with_a_nan_epoch_keep_their_epochs(tmp_path, bar, headers):
    """Keras 3 (and tf.keras) redraws its bar with "\\r" and draws the last count again at the
    epoch's end with the validation values. An epoch whose loss is NaN drew NaN twice at 1000/1000:
    that was taken for the next epoch's bar, and every later epoch moved on by one. Without its
    "Epoch k/K" lines (cut from a paste) the bar's fall back to its first count says so."""
    lines = []
    for e in range(1, 21):
        loss = "nan" if e in (14, 15) else f"{0.8 * np.exp(-e / 5) + 0.1:.4f}"
        draws = [f"{b:4d}/1000 {bar} - accuracy: 0.9000 - loss: {loss}" for b in (1, 500, 1000)]
        draws.append(f"1000/1000 {bar} - accuracy: 0.9000 - loss: {loss} - val_accuracy: 0.8800 - "
                     f"val_loss: {0.5 * np.exp(-e / 5) + 0.2:.4f}")
        lines += ([f"Epoch {e}/20"] if headers else []) + ["\r".join(draws)]
    (run,) = discover_runs(_write(tmp_path / "keras.txt", lines))
    assert run.steps.index.tolist() == [(e - 1) * 1000 + b for e in range(1, 21) for b in (1, 500, 1000)]
    assert run.steps.loc[20000, "loss"] == pytest.approx(0.8 * np.exp(-4) + 0.1, abs=1e-4)
    nan = run.steps["loss"].isna()
    assert run.steps.index[nan].tolist() == [13001, 13500, 14000, 14001, 14500, 15000]


def test_a_keras_paste_that_opens_with_the_epoch_before_its_first_header(tmp_path):
    """A Keras paste cut in the middle of epoch 129: its finished bar, then "Epoch 130/200". Every
    epoch was read one on (the first bar taken for epoch 130's)."""
    lines = []
    for epoch in range(129, 139):
        if epoch > 129:
            lines.append(f"Epoch {epoch}/200")
        lines.append(f"1562/1562 [==============================] - 477s - loss: {0.84 + 0.003 * (epoch - 129):.4f} "
                     f"- acc: 0.7277 - val_loss: 0.8182 - val_acc: 0.7592")
    (run,) = discover_runs(_write(tmp_path / "keras.txt", lines))
    assert run.steps.index.tolist() == list(range(129, 139))
    assert run.steps["loss"].iloc[0] == 0.84


def test_json_lines_quoted_in_an_issue(tmp_path):
    """ms-swift's logging.jsonl rows pasted into an issue as a Markdown quote ("> {...}"): "not a log
    format" for the quote marks; unquoted they were read."""
    lines = ["> " + json.dumps({"loss": 0.0 if s > 4 else 2.0 - 0.1 * s, "grad_norm": 0.0 if s > 4 else 1.5,
                                "learning_rate": 1.5e-05 * s, "epoch": round(0.0071 * s, 6),
                                "global_step/max_steps": f"{s}/420"})
             for s in range(1, 13)]
    (run,) = discover_runs(_write(tmp_path / "logging.jsonl", lines))
    assert run.source == "generic_table" and len(run.steps.index) == 12
    assert run.steps["loss"].iloc[0] == pytest.approx(1.9)


def test_keras_epoch_header_glued_to_a_bar_is_not_its_value(tmp_path):
    """A fit nested in each epoch's (a callback's) printed its "Epoch 1/1000" right after the bar's
    value, without a line end: "loss: 0.2445Epoch 1/1000". The line was lost, a loss of 0 read in
    its place (a critical "spike to 0.2445 against a baseline at or below 0"), and the NaN epoch's
    bar with it; the glued header is dropped and the bar read."""
    lines = []
    for epoch in range(300, 312):
        loss = "nan" if epoch >= 309 else f"{0.2445 + (308 - epoch) * 0.001:.4f}"
        lines += [f"Epoch {epoch}/1000", f" 99/100 [============================>.] - ETA: 2s - loss: {loss}Epoch 1/1000",
                  f"100/100 [==============================] - 328s 3s/step - loss: {loss} - val_loss: "
                  + ("nan" if epoch >= 309 else "0.2342")]
    (run,) = discover_runs(_write(tmp_path / "keras.txt", lines))
    assert run.steps["loss"].min() == pytest.approx(0.2445) and len(run.steps.index) == 24
    report = analyze_run(run)
    assert {i.kind for i in report.incidents if i.severity == "critical"} == {"nonfinite"}
    (nan,) = [i for i in report.incidents if i.kind == "nonfinite" and i.severity == "critical"]
    assert nan.step == 30899  # the NaN epoch's first bar


def test_paddledetection_quoted_losses_and_a_wobble_is_no_rise(tmp_path):
    """PaddleDetection prints a dict's repr, loss keys and values quoted; an excerpt whose first
    row is low and whose others hover 1.25-1.38 has not "risen" on one row of evidence."""
    lines = [f"2020-12-22 08:01:34,034-INFO: iter: {it}, lr: 0.013559, 'loss_cls': '0.539213', "
             f"'loss_bbox': '0.010017', 'loss': '{v}', eta: 8:56:30, batch_cost: 0.32392 sec"
             for it, v in zip(range(620, 741, 20), [1.024392, 1.377929, 1.337946, 1.34156, 1.255523, 1.248285, 1.377799])]
    (run,) = discover_runs(_write(tmp_path / "ppdet.log", lines))
    assert run.steps["loss"].tolist()[:2] == [1.024392, 1.377929] and run.steps["loss"].count() == 7
    report = analyze_run(run)
    assert report.incidents == [] and report.verdict == "healthy"


def test_a_large_grad_norm_jump_in_a_runs_first_steps_is_still_told(tmp_path):
    """x9 and x1000 the first steps' grad norm (a pasted unsloth run with its spikes marked):
    told, where x1.75 is not."""
    norms = [14.98, 9.78, 7.64, 92.10, 29.00, 5.21, 7.83, 7.79, 11140.00]
    lines = [f"{{'loss': {loss}, 'grad_norm': {g}, 'learning_rate': 2e-4, 'epoch': {0.01 * i:.2f}}}"
             + ("    <-- spike" if g > 50 else "")
             for i, (loss, g) in enumerate(zip([1.46, 1.28, 1.60, 1.14, 1.54, 1.61, 1.36, 1.36, 1.51], norms), 1)]
    (run,) = discover_runs(_write(tmp_path / "unsloth.log", lines))
    report = analyze_run(run)
    assert [(i.kind, i.step) for i in report.incidents] == [("grad_norm_spike", 4), ("grad_norm_spike", 9)]


def test_an_evaluation_line_that_names_its_epoch_alone_is_that_epochs_evaluation(tmp_path):
    """A hand-written loop's f"Epoch [{e}/10], Step [{i}/100], Loss: {x:.4f}" lines and, after
    each epoch, f"Epoch [{e}/10], Validation Loss: {v:.4f}": the validation loss is that epoch's
    last training step's val_loss (before, a line without a step was left out, and a run that
    overfits read as a healthy one with no evaluation at all)."""
    lines = []
    for e in range(1, 11):
        lines += [f"Epoch [{e}/10], Step [{i}/100], Loss: {3 / (1 + (e * 100 + i) / 200):.4f}" for i in range(10, 101, 10)]
        lines.append(f"Epoch [{e}/10], Validation Loss: {2.0 + max(0, e - 5) * 0.2:.4f}")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    val = run.steps["val_loss"].dropna()
    assert val.index.tolist() == list(range(100, 1001, 100)) and val.iloc[-1] == pytest.approx(3.0)
    assert run.steps["loss"].count() == 100
    assert [i.kind for i in analyze_run(run).incidents] == ["overfitting"]
    # An evaluation line that names a step as well is that step's (not its epoch end's, not twice).
    lines.insert(55, "Epoch [6/10], Step [50/100], Validation Loss: 2.1000")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.at[550, "val_loss"] == 2.1 and run.steps["val_loss"].count() == 11
    # Training lines that do not name their epoch: there is no telling where an epoch ends.
    plain = [f"step {s} | loss {3 / (1 + s / 200):.4f}" for s in range(10, 1001, 10)]
    plain[49:49] = ["Epoch 5, validation loss: 2.5"]
    (run,) = discover_runs(_write(tmp_path / "plain.log", plain))
    assert "val_loss" not in run.steps.columns and run.steps["loss"].count() == 100


@pytest.mark.parametrize("train, evaluation", [
    ("epoch {e} step {s} loss {x}", "epoch {e} val_loss {v}"),
    ("Epoch {e} | step {s} | loss: {x}", "Epoch {e} | val loss: {v}"),
    ("epoch={e} step={s} loss={x}", "epoch={e} eval_loss={v}"),
    ("Epoch {e} | Step {s} | loss {x}", "Epoch {e} | validation_loss {v} | accuracy 0.{e}"),
])
def test_an_epochs_evaluation_loss_named_by_its_key(tmp_path, train, evaluation):
    """A script's own prints: a step line every 10 steps, and after each epoch a line of its
    validation loss under a key of its own (val_loss, "val loss", eval_loss), with no step."""
    lines, s = [], 0
    for e in range(1, 11):
        for _ in range(10):
            s += 10
            lines.append(train.format(e=e, s=s, x=f"{3 / (1 + s / 200):.4f}"))
        lines.append(evaluation.format(e=e, v=f"{2.0 + max(0, e - 5) * 0.2:.4f}"))
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["val_loss"].dropna().index.tolist() == list(range(100, 1001, 100))
    assert run.steps["loss"].count() == 100
    assert [i.kind for i in analyze_run(run).incidents] == ["overfitting"]


def test_a_real_lightning_tqdm_bar_its_steps_and_its_validation_loss(tmp_path):
    """What a Trainer's tqdm bar writes (stdout of a real run that memorises noise): each step is
    drawn with its count, then again with its new train_loss, the last count too; after each
    validation the bar shows val_loss=... at every redraw until the next one. The steps are the
    run's (8 a epoch, not 16: the last count's redraw is no next epoch), and the validation loss
    is read at each epoch's last step, once, so its rise is seen."""
    import contextlib
    import io
    import warnings

    import lightning as L
    import torch
    from lightning.pytorch.callbacks import TQDMProgressBar

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))

        def training_step(self, batch, batch_idx):
            loss = torch.nn.functional.mse_loss(self.net(batch[0]), batch[1])
            self.log("train_loss", loss, prog_bar=True)
            return loss

        def validation_step(self, batch, batch_idx):
            self.log("val_loss", torch.nn.functional.mse_loss(self.net(batch[0]), batch[1]), prog_bar=True)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), 1e-2)

    torch.manual_seed(0)
    train = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    held_out = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        L.Trainer(max_epochs=30, callbacks=[TQDMProgressBar()], logger=False, enable_checkpointing=False,
                  enable_model_summary=False, accelerator="cpu", num_sanity_val_steps=0).fit(
            Model(), torch.utils.data.DataLoader(train, batch_size=8), torch.utils.data.DataLoader(held_out, batch_size=64))
    (tmp_path / "bar.log").write_text(printed.getvalue())
    (run,) = discover_runs(tmp_path / "bar.log")
    assert run.steps.index.tolist() == list(range(1, 241))
    val = run.steps["val_loss"].dropna()
    assert set(val.index) <= set(range(8, 241, 8)) and len(val) >= 20 and val.iloc[-1] > 2 * val.iloc[0]
    assert [i.kind for i in analyze_run(run).incidents] == ["overfitting"]


def test_a_real_lightning_tqdm_bar_whose_loss_went_nan(tmp_path):
    """A real Trainer's bar whose loss went NaN: it draws each epoch's last count again with the
    new values, NaN then NaN (unequal as numbers); the epochs after the NaN keep their steps."""
    import contextlib
    import io
    import warnings

    import lightning as L
    import torch
    from lightning.pytorch.callbacks import TQDMProgressBar

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(8, 1)

        def training_step(self, batch, batch_idx):
            loss = torch.nn.functional.mse_loss(self.net(batch[0]), batch[1])
            if self.global_step >= 20:
                loss = loss * float("nan")
            self.log("train_loss", loss, prog_bar=True)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), 1e-2)

    torch.manual_seed(0)
    train = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        L.Trainer(max_epochs=5, callbacks=[TQDMProgressBar()], logger=False, enable_checkpointing=False,
                  enable_model_summary=False, accelerator="cpu").fit(Model(), torch.utils.data.DataLoader(train, batch_size=8))
    (tmp_path / "bar.log").write_text(printed.getvalue())
    (run,) = discover_runs(tmp_path / "bar.log")
    assert run.steps.index.tolist() == list(range(1, 41))
    assert run.steps.index[run.steps["loss"].isna()].tolist() == list(range(21, 41))


def test_evaluation_lines_are_not_training_steps_in_a_generic_log(tmp_path):
    """An old fairseq log read by the generic reader: its "valid on 'valid' subset 1000 / 1311
    loss=1.60" line is an evaluation, not a training step; "test_acc" beside a loss is no such
    word. An evaluation line that names its step is read as the evaluation loss of that step."""
    lines = [f"| epoch 010  {i * 1000} / 8223 loss={v}, wps=962, lr=0.001, gnorm=2.1427 test_acc=0.9"
             for i, v in enumerate([1.27, 1.28, 0.91, 0.95, 1.56, 0.86, 1.33], 2)]
    lines += ["| epoch 010 | valid on 'valid' subset  1000 / 1311 loss=9.60",
              "| epoch 010 | Validation: 1311 / 1311 loss=9.5", "Step 300 | Eval loss: 9.1"]
    (run,) = discover_runs(_write(tmp_path / "old_fairseq.log", lines))
    assert run.steps["loss"].max() == 1.56 and run.steps["loss"].count() == 7
    assert run.steps["val_loss"].dropna().to_dict() == {300: 9.1}  # "Step 300 | Eval loss: 9.1"


@pytest.mark.parametrize("nan_from", [None, 6])
def test_llamafactory_prints_each_step_twice(tmp_path, nan_from):
    """LLaMA-Factory's LogCallback prints the step's dict (4 decimals) beside the Trainer's own:
    one step, not two, a NaN loss printed twice too; two real steps of one epoch value are still
    two."""
    lines = []
    for i in range(1, 10):
        lr = 0.05 * (1 - i / 977)  # a schedule's value: many digits, as the Trainer prints it
        loss = float("nan") if nan_from and i >= nan_from else 2 - i / 100
        lines.append(f"03/12/2024 11:24:33 - INFO - llmtuner.extras.callbacks - {{'loss': {loss:.4f}, "
                     f"'learning_rate': {lr:.4e}, 'epoch': {i / 100:.2f}}}")
        lines.append(f"{{'loss': {loss}, 'grad_norm': {1 + i / 10}, 'learning_rate': {lr!r}, 'epoch': {i / 100:.2f}}}")
    lines.append(f"{{'loss': 1.9, 'grad_norm': 2.0, 'learning_rate': {0.05 * 0.99!r}, 'epoch': 0.09}}")  # a real next step
    (run,) = discover_runs(_write(tmp_path / "lf.log", lines))
    assert run.steps.index.tolist() == list(range(1, 11))
    assert run.steps["grad_norm/total"].tolist()[:2] == [1.1, 1.2]
    if nan_from:
        assert run.steps.index[run.steps["loss"].isna()].tolist() == list(range(nan_from, 10))


def test_full_width_punctuation_is_read_as_ascii(tmp_path):
    """A CJK input method types full-width colons and commas: "Epoch：1，Step：10，Loss：2.3"."""
    lines = [f"Epoch：1，Step：{s}，Loss：{v}" for s, v in zip(range(10, 70, 10), ["2.3", "2.1", "2.0", "nan", "nan", "nan"])]
    (run,) = discover_runs(_write(tmp_path / "训练.log", lines))
    assert run.steps.index.tolist() == list(range(10, 70, 10))
    report = analyze_run(run)
    assert [(i.kind, i.step) for i in report.incidents] == [("nonfinite", 40)]


@pytest.mark.parametrize("template", [
    "epoch {e} loss: {x}",
    "Epoch {e}, Loss: {x}",
    "Epoch {e}: train loss: {x} - validation loss: 9.9",  # the evaluation after the training loss
    "epoch {e} loss = {x}",
    "Epoch {e} | train_loss {x} | val_loss 9.9",
])
def test_one_line_per_epoch_the_epoch_is_the_step(tmp_path, template):
    """The prints forum posts paste most: a loop's own line per epoch."""
    values = [2.31, 2.2, 2.1, 2.05, 9.0, 2.0, 1.95]
    (run,) = discover_runs(_write(tmp_path / "out.txt", [template.format(e=e, x=x) for e, x in enumerate(values, 1)]))
    assert run.steps.index.tolist() == list(range(1, 8)) and run.steps["loss"].tolist() == values


def test_an_epoch_line_with_a_count_inside_it_keeps_its_own_reading(tmp_path):
    lines = [f"Epoch [1/5], Step [{i * 100}/600], Loss: {2 - i / 10:.4f}" for i in range(1, 7)]
    (run,) = discover_runs(_write(tmp_path / "out.txt", lines))
    assert run.steps.index.tolist() == [100, 200, 300, 400, 500, 600]


def _results_csv(path, val_nan: bool):
    """Ultralytics' results.csv: one row per epoch, cells padded after each comma."""
    header = ("epoch, train/box_loss, train/cls_loss, train/dfl_loss, metrics/mAP50(B), val/box_loss, "
              "val/cls_loss, val/dfl_loss, lr/pg0")
    rows = [f"{e}, {1.05 - e / 50:.5g}, {4.0 / e:.5g}, {1.01 - e / 100:.5g}, 0.42, "
            + ("nan, nan, nan" if val_nan else "0.9, 1.1, 1.0") + f", {0.0033 * e:.5g}" for e in range(1, 11)]
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def test_ultralytics_results_csv_sums_its_loss_components_and_reports_nan_validation(tmp_path):
    path = _results_csv(tmp_path / "results.csv", val_nan=True)
    code, report = _analyze(str(path))
    (run,) = report["runs"]
    assert code == 0 and run["steps"] == 10
    assert any("loss is the sum of train/box_loss + train/cls_loss + train/dfl_loss" in w for w in run["warnings"])
    assert run["final_loss"] == pytest.approx((1.05 - 10 / 50) + 4.0 / 10 + (1.01 - 10 / 100), abs=1e-4)
    (incident,) = run["incidents"]  # the three validation losses NaN at every epoch: one warning
    assert (incident["kind"], incident["severity"], incident["step"], incident["end_step"]) == \
        ("nonfinite", "warning", 1, 10)
    assert incident["message"].startswith("val/box_loss, val/cls_loss, val/dfl_loss non-finite (nan) at 10 of 10")
    code, report = _analyze(str(_results_csv(tmp_path / "ok.csv", val_nan=False)))
    assert report["runs"][0]["incidents"] == [] and report["runs"][0]["verdict"] == "healthy"
    code, report = _analyze(str(path), "--loss-col", "train/box_loss")
    assert report["runs"][0]["final_loss"] == pytest.approx(1.05 - 10 / 50)


def test_a_table_of_two_losses_without_a_common_prefix_is_left_to_the_user(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("step,loss_ce,loss_kl\n" + "".join(f"{s},{2 - s / 100},{0.1}\n" for s in range(20)))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1
    assert "no loss column among step, loss_ce, loss_kl: pass --loss-col NAME" in result.output


def test_a_notebook_table_whose_validation_loss_was_never_logged_is_no_nan(tmp_path):
    rows = "\n".join(f"| {s} | {2 - s / 100:.4f} | No log |" for s in range(10, 110, 10))
    path = tmp_path / "notebook.txt"
    path.write_text("| Step | Training Loss | Validation Loss |\n|---|---|---|\n" + rows + "\n")
    code, report = _analyze(str(path))
    assert code == 0 and report["runs"][0]["incidents"] == []


def test_keras_csvlogger_epoch_is_the_step(tmp_path):
    path = tmp_path / "training.log"
    path.write_text("epoch,accuracy,loss,val_accuracy,val_loss\n" + "".join(
        f"{e},0.5,{1 - e / 20},0.5,0.9\n" for e in range(10)), encoding="utf-8")
    (run,) = discover_runs(tmp_path / "training.log")
    assert run.steps.index.tolist() == list(range(10)) and run.steps["loss"].iloc[-1] == 0.55


def _analyze(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["analyze", *args, "--format", "json"])
    return result.exit_code, json.loads(result.output)


def test_a_misspelt_column_of_a_pasted_table_is_named_not_ignored(tmp_path):
    path = _write(tmp_path / "t.txt", ["Step | Training Loss | Validation Loss", "-- | -- | --",
                                       *[f"{i} | 2.{i} | 3.0" for i in range(1, 6)]])
    result = CliRunner().invoke(main, ["analyze", str(path), "--loss-col", "Traning Loss"])
    assert result.exit_code == 1
    assert result.output == (f"Error: {path}: column 'Traning Loss' not found; available: Step, Training Loss, "
                             "Validation Loss\n")


def test_an_evaluation_loss_printed_as_nan_is_a_warning_not_a_training_nan(tmp_path):
    # transformers' ProgressCallback: a NaN evaluation (fp16 evaluation, or labels all -100).
    lines = []
    for step in range(1, 31):
        lines.append(f"{{'loss': {2.0 / step ** 0.3:.4f}, 'learning_rate': 1e-05, 'epoch': {step / 10:.1f}}}")
        if step % 10 == 0:
            value = "nan" if step < 30 else "1.25"
            lines.append(f"{{'eval_loss': {value}, 'eval_wer': 100.0, 'eval_runtime': 22.4, 'epoch': {step / 10:.1f}}}")
    log = tmp_path / "whisper.txt"
    log.write_text("\n".join(lines) + "\n")
    (run,) = discover_runs(log)
    report = analyze_run(run)
    (incident,) = report.incidents
    assert (incident.kind, incident.severity, incident.step, incident.end_step) == ("nonfinite", "warning", 10, 20)
    assert incident.message.startswith("eval_loss non-finite (nan) at 2 of 3 evaluations (steps 10, 20)")
    assert incident.details["resolved"] is True and "training loss is finite" in incident.message


def test_a_table_whose_validation_loss_is_nan_where_its_accuracy_was_logged(tmp_path):
    rows = ["step,loss,val_loss,val_acc"]
    for step in range(0, 300, 10):
        val = (f"{'nan' if step >= 200 else 1.5},0.6") if step % 50 == 0 else ","
        rows.append(f"{step},{2.0 - step / 1000:.3f},{val}")
    path = tmp_path / "metrics.csv"
    path.write_text("\n".join(rows) + "\n")
    (run,) = discover_runs(path)
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.severity, incident.step, incident.end_step) == ("nonfinite", "warning", 200, 250)
    assert "never finite again" in incident.message


def test_a_finite_evaluation_loss_is_no_incident_and_a_training_nan_stays_critical(tmp_path):
    lines = [f"{{'loss': {v}, 'learning_rate': 1e-05, 'epoch': {i / 10:.1f}}}"
             for i, v in enumerate(["2.0", "1.9", "nan", "1.8"], 1)]
    lines.insert(2, "{'eval_loss': 1.95, 'eval_runtime': 1.0, 'epoch': 0.2}")
    log = tmp_path / "train.txt"
    log.write_text("\n".join(lines) + "\n")
    (run,) = discover_runs(log)
    assert [(i.kind, i.severity) for i in analyze_run(run).incidents] == [("nonfinite", "critical")]


@pytest.mark.parametrize("template", ["{t} {loss}", "({t}, {loss})", "  {t}  {loss}", "{t}:\t{loss}"])
def test_lines_of_a_step_and_a_loss_alone(tmp_path, template):
    # print(t, loss.item()) in the PyTorch tutorial; print((t, loss)) / Python 2's print(t, loss.data[0]);
    # NVIDIA WaveGlow's print("{}:\t{:.9f}".format(iteration, reduced_loss)) ('not a log format').
    losses = [663.2, 4.51, 0.0327, 7.5, 0.00027, 2.6e-06, 2.7e-08, 1.1e-09]
    log = tmp_path / "tutorial.txt"
    log.write_text("loss goes down:\n" + "\n".join(template.format(t=99 + 100 * i, loss=v)
                                                   for i, v in enumerate(losses)) + "\n")
    (run,) = discover_runs(log)
    assert run.steps["loss"].to_dict() == {99 + 100 * i: v for i, v in enumerate(losses)}


def test_a_fall_across_a_gap_in_an_excerpt_is_no_collapse():
    # Steps 0-5 then 300-: 295 steps of a regression fitting its targets exactly, not one step.
    loss = pd.Series([91.7, 76.9, 63.4, 51.5, 40.9, 31.8, 2.17e-12, 1.9e-12, 2.3e-12],
                     index=[0, 1, 2, 3, 4, 5, 300, 301, 302])
    assert collapse_incidents(loss) == []
    assert collapse_incidents(pd.Series(loss.to_numpy(), index=range(9)))[0].step == 5


def test_a_fall_over_a_thousand_steps_between_two_rows_is_learnt(tmp_path):
    """DeepXDE prints a row every 1,000 steps: a physics-informed network's summed residuals, 58.8 at step 0
    and 0.00297 at step 1,000, were "collapsed ... the model sees its targets (a label leak)". No optimizer
    step learns that much, but a thousand may; a fall between rows a step or a few apart is still one."""
    rows = [(0, "[5.88e+01, 5.99e-01, 9.40e-17]"), (1000, "[2.96e-03, 5.18e-06, 4.33e-06]"),
            (2000, "[9.78e-04, 1.88e-06, 1.86e-06]"), (3000, "[3.68e-04, 1.61e-07, 1.71e-07]"),
            (4000, "[1.68e-04, 2.44e-07, 2.21e-07]"), (5000, "[9.32e-05, 8.01e-07, 7.72e-07]")]
    lines = ["Step      Train loss                        Test loss                         Test metric   "]
    lines += [f"{step:<10d}{train}    [7.38e+01, 0.00e+00, 0.00e+00]    [1.12e+01]    " for step, train in rows]
    (run,) = discover_runs(_write(tmp_path / "deepxde.txt", lines))
    assert run.steps.index.tolist() == [0, 1000, 2000, 3000, 4000, 5000]
    assert not any(i.kind == "loss_collapse" for i in analyze_run(run).incidents)
    assert collapse_incidents(pd.Series(run.steps["loss"].to_numpy(), index=range(6)))[0].step == 0
    assert collapse_incidents(pd.Series(run.steps["loss"].to_numpy(), index=range(0, 600, 100)))[0].step == 0


def test_a_classifier_at_chance_from_the_start_is_not_learning(tmp_path):
    # "my loss does not decrease at all, it always stays the same equal to 2.30" (ten classes).
    values = [2.308579206466675, 2.297269344329834, 2.3083386421203613, 2.3027005195617676,
              2.304455518722534, 2.305694341659546]
    log = tmp_path / "train.txt"
    log.write_text("".join(f"epoch {e} loss = {v}\n" for e, v in enumerate(values)))
    (run,) = discover_runs(log)
    report = analyze_run(run)
    (incident,) = report.incidents
    assert (incident.kind, incident.severity, incident.step, incident.end_step) == ("loss_stuck", "warning", 0, 5)
    assert incident.details["chance"] == 10 and "ln(10) = 2.3026" in incident.message
    assert report.verdict == "unhealthy"


def test_a_gnn_on_cora_and_swav_at_chance(tmp_path):
    """keras-gat's loss at 1.9459-1.9462 for ten epochs is ln 7, a uniform guess over Cora's seven classes;
    SwAV's at 8.0065-8.0068 is ln 3000, its default prototypes (the maintainers: it should fall to ~3).
    Both were "healthy"; DINO's ln 65536 said "a vocabulary", which its head is not."""
    values = [1.9460, 1.9459, 1.9459, 1.9459, 1.9460, 1.9462, 1.9462, 1.9460, 1.9459, 1.9457]
    (run,) = discover_runs(_write(tmp_path / "gat.log", [
        f"Epoch: {e:04d} train_loss= {v:.4f} train_acc= 0.1429 val_loss= 1.9464 val_acc= 0.1120" for e, v in enumerate(values)]))
    (incident,) = analyze_run(run).incidents
    assert incident.details["chance"] == 7 and "7 classes" in incident.message
    (incident,) = chance_incidents(_series([8.0066, 8.0065, 8.0068, 8.0066, 8.0065, 8.0068]))
    assert incident.details["chance"] == 3000 and "3,000 prototypes" in incident.message
    (incident,) = chance_incidents(_series([11.0905, 11.0902, 11.0904, 11.0906, 11.0903]))
    assert "65,536 outputs" in incident.message and "DINO's head" in incident.message


def _lm_curve(n: int, end: float, seed: int = 0) -> pd.Series:
    rng = np.random.default_rng(seed)
    steps = np.arange(n)
    curve = end + (10.9 - end) * np.exp(-steps / (n / 8))
    return _series(curve * (1 + 0.003 * rng.standard_normal(n)))


@pytest.mark.parametrize("losses", [
    _lm_curve(400, 2.303),  # a language model that came down to 2.30: it learnt
    _series([0.69, 0.55, 0.45, 0.40, 0.38, 0.37, 0.36]),  # a binary classifier that learns
    _series([0.71, 0.69, 0.60, 0.693, 0.6931, 0.6929, 0.6932, 0.6931]),  # was clearly better than chance
    _series(2.0 - np.arange(1, 60) / 1000),  # falling through ln 7 = 1.9459 from 2.0: passing by
    _series([8.0] * 16),  # a loss of 8.0 is no ln 3000 = 8.0064
])
def test_not_at_chance(losses):
    assert chance_incidents(losses) == []


def test_a_language_model_that_collapses_to_a_uniform_guess_over_its_vocabulary():
    values = np.r_[_lm_curve(300, 3.5).to_numpy(), 10.8259 + 0.002 * np.sin(np.arange(12))]
    (incident,) = chance_incidents(_series(values))
    assert incident.details["chance"] == 50304 and incident.details["rows"] == 12
    assert "vocabulary of 50,304 tokens" in incident.message
    # The same value printed identically every step: loss_stuck says it, naming the vocabulary.
    (stuck,) = stuck_loss_incidents(_series([3.4, 3.3] + [10.825919] * 10))
    assert "10.825919 is ln(50304)" in stuck.message


def test_a_loss_that_grows_every_epoch_is_a_divergence_not_a_spike(tmp_path):
    # Keras SGD on unscaled inputs: x3.55 an epoch for 13 epochs (the log never reaches the
    # divergence detector's patience of 200 steps: its steps are epochs).
    losses = [450.9794 * 3.5546 ** e for e in range(13)]
    log = tmp_path / "keras.txt"
    log.write_text("".join(f"Epoch {e + 1}/13\n1/1 [==============================] - 0s 1ms/step - loss: {v:.4f}\n"
                           for e, v in enumerate(losses)))
    (run,) = discover_runs(log)
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.severity, incident.step, incident.end_step) == ("divergence", "critical", 1, 13)
    assert "rose at each of the last 12 logged epochs" in incident.message and incident.details["runaway"]


@pytest.mark.parametrize("values", [
    [6.37, 6.60, 7.31, 9.12, 10.24],  # BigScience exp2's rise: 4 rows, x1.6
    [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6],  # rising every row, but x1.6
    [9.0, 1.0, 2.0, 4.0, 8.0, 7.0],  # turned before the log ends
])
def test_no_runaway(values):
    from sentinel.analyze.rule_divergence import runaway_incidents

    assert runaway_incidents(_series(values)) == []


def test_a_megatron_log_before_its_first_lm_loss_is_judged_on_its_loss_scale(tmp_path):
    # fp16 warm-up: every iteration skipped while the loss scale comes down, no "lm loss" yet.
    line = (" iteration {it:8d}/  120000 | elapsed time per iteration (ms): 1993.9 | learning rate: 0.000E+00 | "
            "loss scale: {scale:.1f} | number of skipped iterations: {skipped:3d} | number of nan iterations:   0 |")
    log = tmp_path / "megatron.out"
    log.write_text("training ...\n" + "\n".join(line.format(it=it, scale=2.0 ** (33 - it), skipped=5)
                                               for it in range(5, 30, 5)) + "\n")
    result = CliRunner().invoke(main, ["analyze", str(log), "--format", "json"])
    assert result.exit_code == 0, result.output
    (run,) = json.loads(result.output)["runs"]
    assert run["steps"] == 5 and run["final_loss"] is None
    assert any(w.startswith("no loss printed yet (lm loss)") for w in run["warnings"])
    assert not any("--loss-col" in w for w in run["warnings"])


@pytest.mark.parametrize("redraw", ["\r", ""])  # a log file, or a paste whose "\r" was lost
def test_nemo1_progress_bar_reads_reduced_train_loss_not_the_bars_nan(tmp_path, redraw):
    draw = ("Epoch 0:   {pct}%|▎         | {n}/20101 [2:12:19<76:15:08, 14.05s/it, loss=nan, v_num=, "
            "val_loss_step=11.30, reduced_train_loss={loss:.3f}, gradient_norm=1.010, parameter_norm=1552.0, "
            "global_step={step}.0, consumed_samples=1.44e+5, throughput=19.00]")
    losses = [3.92 - 0.01 * i for i in range(30)]
    losses[20] = 9.5
    text = "".join(redraw + draw.format(pct=3, n=600 + i, loss=v, step=563 + i) for i, v in enumerate(losses))
    log = tmp_path / "nemo.log"
    log.write_text(text + "\n", encoding="utf-8")
    (run,) = discover_runs(log)
    assert run.source == "nemo" and run.steps.index.tolist() == list(range(563, 593))
    assert run.steps["loss"].iloc[0] == 3.92 and run.steps["loss"].notna().all()
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("outlier_batch", 583)]


def test_maxtext_lines_even_three_of_them(tmp_path):
    line = ("completed step: {s}, seconds: 2.167, TFLOP/s/device: 36.722, Tokens/s/device: 3780.512, "
            "total_weights: 65536, loss: {loss:.3f}")
    log = tmp_path / "maxtext.txt"
    log.write_text("\n".join(line.format(s=s, loss=v) for s, v in ((15107, 2.191), (15108, 2.173), (15109, 2.191))) + "\n")
    (run,) = discover_runs(log)
    assert run.source == "maxtext" and run.steps["loss"].to_dict() == {15107: 2.191, 15108: 2.173, 15109: 2.191}


def test_a_chinese_tutorials_training_count_is_the_step(tmp_path):
    # print("训练次数：{}, Loss：{}".format(total_train_step, loss.item())), full-width colons.
    losses = [1.98, 1.91, 1.73, 1.55, 1.60, 7.5, 1.62, 1.50]
    log = tmp_path / "train.txt"
    log.write_text("-------第 1 轮训练开始------\n" + "".join(f"训练次数：{100 * (i + 1)}, Loss：{v}\n"
                                                         for i, v in enumerate(losses))
                   + "整体测试集上的Loss: 262.62\n", encoding="utf-8")
    (run,) = discover_runs(log)
    assert run.steps["loss"].to_dict() == {100 * (i + 1): v for i, v in enumerate(losses)}


_APEX = "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {}"  # apex/amp/handle.py


def test_apex_overflow_lines_alone_are_judged_on_the_loss_scale(tmp_path):
    """A paste of apex amp's lines alone (the script's own lines cut away): the scale halving
    every step down to 1e-205 is a collapse, not "not a log format"."""
    path = _write(tmp_path / "apex.txt", [_APEX.format(8.165126103939127e-202 / 2 ** i) for i in range(14)])
    (run,) = discover_runs(path)
    report = analyze_run(run)
    assert run.source == "amp_overflow" and report.verdict == "unhealthy"
    (collapse,) = report.incidents  # the rows are the overflow lines: no share of steps to tell
    assert collapse.kind == "loss_scale_collapse" and collapse.severity == "critical"
    assert "(3.9 orders of magnitude)" in collapse.message
    assert "no loss in the file: only loss_scale, amp/overflow were read" in report.warnings


# deepspeed/runtime/fp16/loss_scaler.py: f"[deepspeed] OVERFLOW! Rank {rank} Skipping step. Attempted loss
# scale: {cur_scale}, reducing to {next_scale}", next_scale = max(cur_scale / scale_factor, min_scale).
_DS_OVERFLOW = ("[2024-09-11 17:52:{:02d},320] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! "
                "Rank 0 Skipping step. Attempted loss scale: {:g}, reducing to {:g}")


def test_deepspeed_overflow_lines_alone_are_no_overflow_rate(tmp_path):
    """A paste of DeepSpeed's overflow lines alone, numbered 1, 2, 3: every row overflowed by
    construction, so "6 of 6 steps overflowed (100%)" said nothing of the training. The start-up
    search down from 2**32 is no incident."""
    lines = [_DS_OVERFLOW.format(i, 2.0 ** (32 - i), 2.0 ** (31 - i)) for i in range(6)]
    (run,) = discover_runs(_write(tmp_path / "ds.log", lines))
    report = analyze_run(run)
    assert run.steps["amp/overflow"].tolist() == [1.0] * 6
    assert report.incidents == [] and report.verdict == "no loss"


def test_deepspeed_scale_at_its_minimum_and_still_overflowing(tmp_path):
    """DeepSpeed's scaler at min_loss_scale (1) halves no further: "Attempted loss scale: 1,
    reducing to 1" on every step is a run that applies no update, critical; a scale that halves
    to 1 and then takes clean steps is none."""
    lines = [_DS_OVERFLOW.format(i, scale, max(scale / 2, 1)) for i, scale in enumerate([4, 2, 1, 1, 1])]
    (run,) = discover_runs(_write(tmp_path / "ds.log", lines))
    (stuck,) = analyze_run(run).incidents
    assert (stuck.kind, stuck.severity, stuck.step, stuck.end_step) == ("loss_scale_collapse", "critical", 3, 5)
    assert stuck.details["skipped_at_minimum"] == 3 and not stuck.details["resolved"]
    assert "loss scale at its minimum (1) and still overflowing" in stuck.message
    # With step lines between them: the scale reaches 1 once and the steps go on clean.
    lines = []
    for step in range(1, 41):
        if step in (19, 20):
            lines.append(_DS_OVERFLOW.format(step, 2 ** (21 - step), 2 ** (20 - step)))
        lines.append(f"steps: {step} loss: {2.5 - step * 0.01:.4f} iter time (s): 1.2 samples/sec: 8.0")
    (run,) = discover_runs(_write(tmp_path / "ds2.log", lines))
    assert [i.kind for i in analyze_run(run).incidents if i.kind == "loss_scale_collapse"] == []


def test_deepspeed_gives_up_at_the_minimum_scale(tmp_path):
    """DeepSpeed's raise_error_at_min_scale ends the run in "Current loss scale already at minimum":
    the stop is the scaler's, critical, not a plain crash warning."""
    lines = [f"steps: {s} loss: {2.5 - s * 0.01:.4f} iter time (s): 1.2 samples/sec: 8.0" for s in range(1, 31)]
    lines += ["Traceback (most recent call last):", '  File "train.py", line 80, in <module>',
              "    engine.step()",
              "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run."]
    (run,) = discover_runs(_write(tmp_path / "ds.log", lines))
    (crash,) = [i for i in analyze_run(run).incidents if i.kind == "crash"]
    assert crash.severity == "critical" and crash.step == 30
    assert "loss scale was at its minimum" in crash.message


def test_fairseq_epoch_lines_with_a_scale_below_one_are_its_normal_range(tmp_path):
    """fairseq goes on below a loss scale of 1 (its --min-loss-scale is 1e-4): a scale between 0.5
    and 1 at one overflow an epoch of ~250 updates is healthy, not "collapsed from 0.5 to 0.5" and
    "1 of 4 steps overflowed (25%)"; the overflow lines join the epoch line after them."""
    lines = []
    for k, epoch in enumerate(range(51, 57)):
        lines.append(f"| WARNING: overflow detected, setting loss scale to: {0.5 if k % 2 == 0 else 1.0}")
        lines.append(f"| epoch {epoch:03d} | loss {3.622 - k * 0.004:.3f} | nll_loss 1.919 | ppl 3.78 | wps 397237 "
                     f"| ups 0.7 | num_updates {12960 + 255 * k} | lr 0.000555556 | gnorm 0.279 | clip 0% | oom 0 "
                     f"| loss_scale {0.5 if k % 2 == 0 else 1.0:.3f} | wall 19720 | train_wall 18944")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["amp/overflow"].tolist() == [1.0] * 6 and run.steps.index[0] == 12960
    report = analyze_run(run)
    assert [i.kind for i in report.incidents if i.severity != "info"] == [] and report.verdict == "healthy"


def test_fairseq_scale_halving_again_and_again_under_one_is_a_warning(tmp_path):
    """Under 1, fairseq's scale halving on and on (0.0625 to 0.0039 in 300 updates: "a bunch of
    overflows in a row usually means the loss is exploding", before "Minimum loss scale reached")
    is a warning, though the scale is far above fairseq's own floor of 1e-4."""
    lines, scale = [], 0.0625
    for k, (iter_, halvings) in enumerate([(200, 0), (300, 0), (400, 1), (500, 3), (600, 0)]):
        for _ in range(halvings):
            scale /= 2
            lines.append(f"| WARNING: overflow detected, setting loss scale to: {scale}")
        lines.append(f"| epoch 001:    {iter_} / 1374 loss={14.351 - 0.5 * k:.3f}, ppl=20899.56, wps=49604, ups=0, "
                     f"num_updates={iter_ - 10}, lr=4.8e-06, gnorm=3.901, clip=0.000, oom=0.000, "
                     f"loss_scale={scale:.3f}, wall=1061")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    (fell,) = analyze_run(run).incidents
    assert (fell.kind, fell.severity, fell.step) == ("loss_scale_collapse", "warning", 490)
    assert "under 1: overflow after overflow" in fell.message


def test_apex_overflow_lines_between_a_scripts_own_lines_join_the_next_step(tmp_path):
    """apex prints its lines between any script's prints: they are read beside a generic log's
    steps (here of the epoch-then-step shape), each joining the step line after it."""
    lines, scale = [], 65536.0
    for s in range(1, 41):
        if s > 25:
            for _ in range(3):
                scale /= 2
                lines.append(_APEX.format(scale))
        lines.append(f"Epoch 1 step {s * 10} loss {2.5 - s * 0.01:.4f} lr 0.001")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["amp/overflow"].loc[260:].tolist() == [3.0] * 15
    assert run.steps["amp/overflow"].loc[:250].sum() == 0
    assert run.steps.loc[400, "loss_scale"] == 65536.0 / 2 ** 45
    report = analyze_run(run)
    assert [i.kind for i in report.incidents] == ["overflow_rate", "loss_scale_collapse"]


def test_fairseq_overflow_lines_after_the_last_step_are_no_nan_loss(tmp_path):
    """fairseq's "overflow detected" lines after the last step line make a row of their own: a row
    where nothing but the overflow was logged, not a NaN loss (the loss scale still collapses)."""
    lines = ["| epoch 027 | loss 6.343 | nll_loss 4.984 | ppl 31.65 | wps 164346 | ups 0.4 | num_updates 10198 "
             "| lr 0.000626286 | gnorm 0.390 | clip 0% | oom 0 | loss_scale 0.500 | wall 23080 | train_wall 21383"]
    lines += [f"| WARNING: overflow detected, setting loss scale to: {0.5 / 2 ** i}" for i in range(1, 13)]
    (run,) = discover_runs(_write(tmp_path / "fairseq.log", lines))
    report = analyze_run(run)
    # (two rows, one of them the overflows': no rate of them; the scale's fall is the incident)
    assert [i.kind for i in report.incidents] == ["loss_scale_collapse"]
    assert "(3.6 orders of magnitude)" in report.incidents[0].message
    assert report.final_loss == 6.343


def test_the_imagenet_examples_progress_meter(tmp_path):
    """pytorch/examples imagenet/main.py (copied into many repositories): ProgressMeter prints
    "Epoch: [{epoch}]" + "[{batch:4d}/{num_batches}]" and each AverageMeter as "{name} {val} ({avg})";
    the loss is the value, not its running average, and the batch count becomes a global step."""
    lines = []
    losses = iter([6.91, 6.85, 6.80, 6.71, 6.66, 6.60, 6.52, float("nan"), float("nan"), float("nan")])
    for epoch in (0, 1):
        for batch in range(0, 5005, 1001):
            loss = next(losses, None)
            if loss is None:
                break
            lines.append(f"Epoch: [{epoch}][{batch:4d}/5005]\tTime  0.123 ( 0.456)\tData  0.001 ( 0.050)\t"
                         f"Loss {loss:.4e} (6.9102e+00)\tAcc@1   0.00 (  0.10)\tAcc@5   0.39 (  0.49)")
    (run,) = discover_runs(_write(tmp_path / "imagenet.log", lines))
    assert run.steps["loss"].index.tolist() == [0, 1001, 2002, 3003, 4004, 5005, 6006, 7007, 8008, 9009]
    assert run.steps["loss"].iloc[0] == 6.91  # the value, not the average in brackets
    report = analyze_run(run)
    (incident,) = [i for i in report.incidents if i.kind == "nonfinite"]
    assert (incident.step, report.verdict) == (7007, "unhealthy")


def test_hf_trainer_dicts_nan_from_the_first_are_read(tmp_path):
    """transformers' ProgressCallback printed {'loss': nan, ...} from the first log on: the file
    is an HF console log all the same (it was 'not a log format'), and the run is unhealthy."""
    lines = [f"{{'loss': nan, 'learning_rate': {5e-05 - i * 2e-6}, 'epoch': {0.12 * (i + 1):.2f}}}" for i in range(6)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    report = analyze_run(run)
    assert run.source == "hf_trainer" and report.verdict == "unhealthy"
    assert [(i.kind, i.step, i.end_step) for i in report.incidents] == [("nonfinite", 1, 6)]


def test_ms_swift_dicts_without_a_progress_bar_take_their_step_from_the_dict(tmp_path):
    """ms-swift prints 'global_step/max_steps': '615/940' in each dict; without its progress bar
    (--disable_tqdm, a file log) the dicts were numbered 1, 2, 3 in order: a NaN from step 615
    read as 'at steps 123-188'."""
    lines = []
    for s in range(5, 945, 5):
        loss = "nan" if s >= 615 else f"{2 - s / 1000:.6f}"
        lines.append(f"{{'loss': {loss}, 'grad_norm': 0.97, 'learning_rate': 1e-05, 'token_acc': 0.35, "
                     f"'epoch': {s / 940:.4f}, 'global_step/max_steps': '{s}/940', 'percentage': '{s / 9.4:.2f}%', "
                     "'elapsed_time': '10s', 'remaining_time': '31m 10s', 'memory(GiB)': 17.96, 'train_speed(iter/s)': 0.5}")
        if s % 100 == 0:
            lines.append(f"{{'eval_loss': 1.6, 'eval_token_acc': 0.4, 'epoch': {s / 940:.4f}, "
                         f"'global_step/max_steps': '{s}/940', 'percentage': '{s / 9.4:.2f}%'}}")
    (run,) = discover_runs(_write(tmp_path / "swift.log", lines))
    assert run.steps["loss"].index.tolist() == list(range(5, 945, 5))
    assert run.steps["eval_loss"].dropna().index.tolist() == list(range(100, 945, 100))
    assert not any("carry no step" in w for w in run.warnings)
    (nonfinite,) = [i for i in analyze_run(run).incidents if i.kind == "nonfinite" and i.details["metric"] == "loss"]
    assert (nonfinite.step, nonfinite.end_step) == (615, 940)


def test_ms_swift_dicts_glued_to_their_bar_keep_their_own_step(tmp_path):
    """ms-swift's dict printed after its bar's draw on one line, "Train:   8%|8  | 5/60 [03:52<43:40]{'loss': ...,
    'global_step/max_steps': '5/60', ...}": each dict took the next draw's count (steps 5..55 for 1, 5, ..., 50)."""
    steps = [1, *range(5, 55, 5)]
    lines = ["Train:   0%|          | 0/60 [00:00<?, ?it/s][INFO:swift] use_logits_to_keep: True"]
    for s in steps:
        lines.append(f"Train:  {s * 100 // 60}%|#   | {s}/60 [00:42<41:47, 42.51s/it]{{'loss': '{0.4 - s / 200:.4f}', "
                     f"'grad_norm': '0.89', 'learning_rate': '3.3e-05', 'epoch': '{s / 12:.4f}', "
                     f"'global_step/max_steps': '{s}/60', 'elapsed_time': '43s'}}")
        if s % 25 == 0:  # an evaluation: its own bar, its dict on a line of its own
            lines += ["", "Val: 100%|##########| 8/8 [00:15<00:00,  1.91s/it]",
                      f"{{'eval_loss': '0.0346', 'epoch': '{s / 12:.4f}', 'global_step/max_steps': '{s}/60'}}"]
    (run,) = discover_runs(_write(tmp_path / "swift.log", lines))
    assert run.source == "hf_trainer" and run.steps["loss"].dropna().index.tolist() == steps
    assert run.steps["eval_loss"].dropna().index.tolist() == [25, 50]


def test_a_step_printed_before_each_dict_is_its_step(tmp_path):
    """text-generation-webui's LoRA trainer prints "Step:      3 {'loss': 2.4395, 'grad_norm': inf, ...}": the dicts
    were numbered 1..171 with a warning that they carry no step."""
    lines = [f"Step: {s:6d} {{'loss': {2.5 - s / 1000:.4f}, 'grad_norm': 1.2, 'learning_rate': 8e-06, "
             f"'epoch': {s / 171:.4f}}}" for s in range(3, 683, 4)]
    (run,) = discover_runs(_write(tmp_path / "lora.log", lines))
    assert run.source == "hf_trainer" and run.steps.index.tolist() == list(range(3, 683, 4))
    assert not any("carry no step" in w for w in run.warnings)

def test_an_iterations_overflow_printed_by_every_rank_counts_once(tmp_path):
    """DeepSpeed-Chat's DPO stage: eight processes without a rank prefix each print "Grad overflow on iteration 0":
    148 overflowed steps were counted (6.3%, a warning) where DeepSpeed's own count says skipped=21."""
    lines = []
    for step in range(0, 400):
        if step % 20 == 0:
            for _ in range(8):
                lines += ["[2025-01-02 15:47:32,711] [INFO] [fused_optimizer.py:392:_update_scale]",
                          f"Grad overflow on iteration {step}",
                          "[2025-01-02 15:47:32,712] [INFO] [fused_optimizer.py:393:_update_scale] Reducing dynamic "
                          "loss scale from 65536 to 32768.0"]
            lines.append("[2025-01-02 15:47:32,713] [INFO] [logging.py:128:log_dist] [Rank 0] Overflow detected. "
                         "Skipping step. Attempted loss scale: 65536, reducing to 32768.0")
        if step % 10 == 0:
            lines.append(f"[2025-01-02 16:14:33,160] [INFO] [logging.py:128:log_dist] [Rank 0] step={step}, "
                         f"skipped={step // 20 + 1}, lr=[2.7e-08, 2.7e-08], mom=[(0.9, 0.95), (0.9, 0.95)]")
    (run,) = discover_runs(_write(tmp_path / "dpo.log", lines))
    assert run.steps["amp/overflow"].sum() == 20
    assert run.steps["loss_scale"].dropna().eq(32768.0).all()

def test_hf_trainer_dicts_wrapped_over_several_lines_are_read_whole(tmp_path):
    """A paste hard-wrapped at a terminal's width splits each printed dict over lines: each is one
    record again (it was 'no hf_trainer step lines found'), eval dicts too."""
    import textwrap

    lines = []
    for i in range(1, 41):
        loss = "nan" if i == 40 else f"{2.0 - i / 100 + (6.0 if i == 32 else 0):.4f}"
        lines += textwrap.wrap(f"{{'loss': {loss}, 'grad_norm': 0.8123, 'learning_rate': 1.9999999999e-05, "
                               f"'epoch': {i / 40:.2f}}}", 50)
        if i == 30:
            lines += textwrap.wrap("{'eval_loss': 1.9, 'eval_runtime': 12.5, 'eval_samples_per_second': 80.1, "
                                   "'epoch': 0.75}", 50)
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "hf_trainer" and run.steps.index.tolist() == list(range(1, 41))
    assert run.steps.loc[19, "loss"] == 1.81 and run.steps.loc[30, "eval_loss"] == 1.9
    report = analyze_run(run)
    assert [(i.kind, i.step) for i in report.incidents] == [("outlier_batch", 32), ("nonfinite", 40)]


def test_llamafactory_trainer_log_jsonl_steps_are_its_current_steps(tmp_path):
    """LLaMA-Factory writes trainer_log.jsonl beside its checkpoints: the step is current_steps
    (its float epoch column was taken for the step, and the file refused)."""
    rows = [{"current_steps": s, "total_steps": 1287, "loss": 2.0 - s / 1000, "eval_loss": None,
             "learning_rate": 1e-5, "epoch": round(s / 1287, 2), "percentage": round(100 * s / 1287, 2),
             "elapsed_time": "0:11:19", "remaining_time": "22:34:33"} for s in range(10, 310, 10)]
    rows[-1]["loss"] = float("nan")
    path = tmp_path / "trainer_log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run,) = discover_runs(path)
    assert run.steps["loss"].index.tolist() == list(range(10, 310, 10))
    report = analyze_run(run)
    assert [(i.kind, i.step) for i in report.incidents] == [("nonfinite", 300)]


def test_ms_swift_logging_jsonl_steps_are_the_n_of_its_n_slash_m(tmp_path):
    """ms-swift's logging.jsonl: the step is "global_step/max_steps": "12/2353", and a last row
    holds the whole log_history under a numeric global_step and no loss. That row's step was
    taken for the step, every other row skipped, and its missing loss called a NaN: a healthy
    run came out as one non-finite step, critical."""
    rows = [{"loss": 2.0 - s / 1000, "grad_norm": 30.0, "learning_rate": 1e-5, "epoch": s / 4000,
             "global_step/max_steps": f"{s}/300", "elapsed_time": "6s", "remaining_time": "3h 35m 58s"}
            for s in range(1, 301)]
    rows.append({"train_runtime": 442.3, "train_loss": 1.85, "epoch": 0.075, "global_step/max_steps": "300/300"})
    rows.append({"model_parameter_info": "25805.9M Params", "global_step": 300, "memory": 76.6,
                 "log_history": [{"loss": 2.0, "step": 1}]})
    path = tmp_path / "logging.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run,) = discover_runs(path)
    assert run.steps["loss"].index.tolist() == list(range(1, 301))
    assert run.steps["loss"].iloc[-1] == 1.7
    assert analyze_run(run).incidents == []


def test_evaluation_rows_off_the_logging_grid_do_not_cut_a_nan_stretch(tmp_path):
    """A loss logged every 5 steps goes NaN at 615 for good, and an evaluation's row lands at 698,
    798, 898 (off the grid): the one stretch was told as four, each 'never finite again'."""
    rows = []
    for s in range(5, 945, 5):
        rows.append({"loss": float("nan") if s >= 615 else 2.0 - s / 1000, "learning_rate": 1e-5, "epoch": s / 940,
                     "global_step/max_steps": f"{s}/940"})
        if s % 100 == 95:
            rows.append({"eval_loss": 1.9, "global_step/max_steps": f"{s + 3}/940"})
    path = tmp_path / "logging.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run,) = discover_runs(path)
    (nonfinite,) = [i for i in analyze_run(run).incidents if i.kind == "nonfinite" and i.details["metric"] == "loss"]
    assert (nonfinite.step, nonfinite.end_step, nonfinite.details["count"]) == (615, 940, 66)
    # a finite loss logged between two NaN stretches still parts them
    rows = [{"loss": float("nan") if s in (300, 305, 315) else 2.0, "learning_rate": 1e-5, "epoch": s / 940,
             "global_step/max_steps": f"{s}/940"} for s in range(5, 400, 5)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run,) = discover_runs(path)
    assert [(i.step, i.end_step) for i in analyze_run(run).incidents if i.kind == "nonfinite"] == [(300, 305), (315, 315)]
    # a grad norm printed on a few training rows alone, Inf each time: the rows between part them
    rows = [{"loss": 2.0 - s / 1000, "learning_rate": 1e-5, "epoch": s / 940, "global_step/max_steps": f"{s}/940",
             **({"grad_norm": float("inf")} if s in (100, 200) else {})} for s in range(5, 400, 5)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run,) = discover_runs(path)
    assert [(i.step, i.end_step) for i in analyze_run(run).incidents if i.kind == "nonfinite"] == [(100, 100), (200, 200)]


@pytest.mark.parametrize("spelling", ["NaN", "null", '"nan"'])
def test_a_jsonl_row_without_the_loss_is_no_nan_but_one_that_logs_it_nan_is(tmp_path, spelling):
    """A JSON row tells a key it lacks (an evaluation's or a summary's row) from one it holds as
    NaN (``NaN``, or ``null`` from a writer without NaN, or a string)."""
    lines = [json.dumps({"step": s, "loss": 3 - s / 100, "grad_norm": 1.0}) for s in range(1, 50)]
    absent = tmp_path / "absent.jsonl"
    absent.write_text("\n".join(lines + ['{"step": 50, "grad_norm": 1.0}']) + "\n")
    (run,) = discover_runs(absent)
    assert analyze_run(run).incidents == []
    logged = tmp_path / "logged.jsonl"
    logged.write_text("\n".join(lines + [f'{{"step": 50, "loss": {spelling}, "grad_norm": 1.0}}']) + "\n")
    (run,) = discover_runs(logged)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 50)]


def test_paddles_padded_nan_is_a_nan(tmp_path):
    """PaddleOCR prints each value as f"{v:x<6f}": a NaN comes out "nanxxx" (nothing else is short
    enough to be padded). It was not a number: a run that went NaN was read up to its last finite
    line and called healthy, or refused when every line was NaN."""
    line = ("[2023/10/06 13:26:{s:02d}] ppocr INFO: epoch: [1/500], global_step: {step}, lr: 0.000093, acc: 0.0, "
            "CTCLoss: {v}, SARLoss: {v}, loss: {v}, avg_reader_cost: 0.00016 s, eta: 3 days, 18:09:07")
    values = [f"{3.5 - i / 100:.6f}" for i in range(10)] + ["nanxxx"] * 20
    path = _write(tmp_path / "train.log", [line.format(s=i % 60, step=10 * (i + 1), v=v) for i, v in enumerate(values)])
    (run,) = discover_runs(path)
    assert len(run.steps) == 30 and run.steps["loss"].isna().sum() == 20
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.step, incident.severity) == ("nonfinite", 110, "critical")


def test_a_log_kept_as_markdown_is_read_when_named_but_a_readme_is_not(tmp_path):
    """A paste from an issue kept as notes.md, named on its own, is read; the same in a directory
    walk, and prose with a few log-like lines named on its own, stay documentation."""
    lines = ["> iter 2990: loss 3.8851, time 512.31ms, mfu 30.12%"] + \
        [f"> iter {3000 + 10 * i}: loss {'nan' if i > 3 else 3.88}, time 512.31ms, mfu 30.12%" for i in range(10)]
    path = _write(tmp_path / "notes.md", ["# fp16 NaN", "", "Here is my log:", "", *lines])
    (run,) = discover_runs(path)
    assert run.source == "nanogpt" and len(run.steps) == 11
    readme = _write(tmp_path / "README.md", ["# project", "Run it:", "", "    iter 10: loss 2.5, time 1ms", "", "Done."])
    result = CliRunner().invoke(main, ["analyze", str(readme)])
    assert result.exit_code == 1 and "is documentation, not a training log" in result.output, result.output


def test_yolov5_event_files_sum_the_loss_parts_and_a_run_with_no_loss_is_not_healthy(tmp_path):
    """YOLOv5 writes train/box_loss, train/obj_loss, train/cls_loss and no total, as in its
    results.csv (read as their sum); its event files were refused, and in a directory walk the
    run was called healthy with no loss read at all."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "exp"))
    for epoch in range(30):
        for part, scale in (("box", 0.05), ("obj", 0.03), ("cls", 0.01)):
            writer.add_scalar(f"train/{part}_loss", scale * (1 - epoch / 60), epoch)
            writer.add_scalar(f"val/{part}_loss", scale, epoch)
        writer.add_scalar("metrics/mAP_0.5", epoch / 30, epoch)
    writer.close()
    (run,) = discover_runs(tmp_path / "exp")
    assert run.steps["loss"].iloc[0] == pytest.approx(0.09) and len(run.steps["loss"]) == 30
    assert any(w.startswith("loss is the sum of train/box_loss + train/obj_loss + train/cls_loss") for w in run.warnings)
    assert analyze_run(run).verdict.value == "healthy"
    writer = SummaryWriter(str(tmp_path / "map_only"))
    for epoch in range(30):
        writer.add_scalar("metrics/mAP_0.5", epoch / 30, epoch)
    writer.close()
    code, report = _analyze(str(tmp_path))
    verdicts = {run["name"]: run["verdict"] for run in report["runs"]}
    assert code == 0 and verdicts == {"exp": "healthy", "map_only": "no loss"}, verdicts


def test_a_test_loss_logged_once_at_the_end_is_no_nan_on_the_validation_rows(tmp_path):
    """Lightning's metrics.csv: trainer.test() logs test_loss once, after fit; the validation rows
    leave its cell empty. Those empty cells were NaN test losses "at 5 of 6 evaluations", and a
    healthy run came out "recovered". A NaN validation loss beside its accuracy still counts."""
    rows = ["epoch,step,test_loss,train_loss,val_accuracy,val_loss"]
    for epoch in range(6):
        rows += [f"{epoch},{epoch * 100 + s},,{1 / (epoch * 100 + s):.5f},," for s in range(9, 100, 10)]
        rows.append(f"{epoch},{epoch * 100 + 99},,,0.97,{0.07 if epoch != 3 else 'nan'}")
    rows.append("5,599,0.032,,,")
    path = _write(tmp_path / "metrics.csv", rows)
    (incident,) = [i for i in analyze_run(discover_runs(path)[0]).incidents if i.kind == "nonfinite"]
    assert incident.details["metric"] == "val_loss" and incident.step == 399


def test_a_grad_norm_of_exactly_zero_with_a_loss_that_does_not_come_down_is_reported(tmp_path):
    """OLMo's console log of a run whose gradient never reached the weights: optim/total_grad_norm=0.0
    at every logged step, the loss at ~10.3 (ln of the vocabulary). It was called healthy."""
    lines = []
    for i, step in enumerate(range(10, 120, 10)):
        lines += [f"2025-12-27 21:43:{i:02d}.931\thost:0\tolmo.train:990\tINFO\t[step={step}/10000,epoch=0]",
                  "    optim/total_grad_norm=0.0", f"    train/CrossEntropyLoss={10.40 - 0.01 * i:.2f}",
                  "    train/Perplexity=32,713"]
    (run,) = discover_runs(_write(tmp_path / "output.log", lines))
    report = analyze_run(run)
    (incident,) = report.incidents
    assert (incident.kind, incident.step, incident.end_step) == ("zero_grad", 10, 110)
    assert report.verdict.value == "unhealthy"
    # The same norms with a loss that comes down: a placeholder 0, not reported.
    falling = [line.replace(f"CrossEntropyLoss={10.40 - 0.01 * i:.2f}", f"CrossEntropyLoss={10.40 - 0.5 * i:.2f}")
               for i, line in zip([k // 4 for k in range(len(lines))], lines)]
    (run,) = discover_runs(_write(tmp_path / "falling.log", falling))
    assert run.steps["loss"].iloc[-1] == pytest.approx(5.4)
    assert analyze_run(run).incidents == []


def test_a_grad_norm_of_exactly_zero_beside_a_loss_that_climbs_is_a_placeholder(tmp_path):
    """GaLore under the Trainer logs grad_norm 0.0 (no norm computed) while its loss diverged, 1.27 to 1053:
    beside the divergence came "no gradient reaches the weights (a loss detached from the model, ...)",
    the wrong cause. A loss the weights do not move wanders about its level; this one climbed with them."""
    losses = [1.2678, 7.793, 14.9705, 22.4244, 60.9344, 1052.9999]
    lines = [f"{{'loss': {v}, 'grad_norm': 0.0, 'learning_rate': 0.001, 'epoch': {0.01 * (i + 1):.2f}}}"
             for i, v in enumerate(losses)]
    report = analyze_run(discover_runs(_write(tmp_path / "galore.log", lines))[0])
    assert [i.kind for i in report.incidents] == ["divergence"]
    # A loss that stays at its level beside the same zeros is a gradient that never arrives.
    flat = [line.replace(f"'loss': {v},", f"'loss': {2.3 + 0.01 * (i % 2)},") for i, (v, line) in
            enumerate(zip(losses, lines))]
    assert [i.kind for i in analyze_run(discover_runs(_write(tmp_path / "flat.log", flat))[0]).incidents] == \
        ["zero_grad"]


def test_a_global_count_each_launch_started_again_goes_on_across_launches(tmp_path):
    """PaddleOCR 2.x's train.log, resumed 13 times: 'epoch: [62/200], iter: 20' after epoch 61's iter 14349,
    the global count started again by each launch while the epochs went on. Read as a count inside each
    epoch, its steps ran to 4,296,825 where the launches logged about 53,000 iterations between them."""
    lines, per_epoch = [], 5
    for launch, epochs in enumerate([range(1, 9), range(8, 15), range(15, 21)]):
        count = 0
        for epoch in epochs:
            for _ in range(per_epoch):
                count += 20
                loss = 5.0 / (1 + epoch + count / 1000)
                lines.append(f"[2021/12/26 15:39:06] root INFO: epoch: [{epoch}/20], iter: {count}, lr: 0.000500, "
                             f"loss: {loss:.6f}, acc: 0.529295, reader_cost: 0.26782 s, batch_cost: 1.01592 s")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.max() == 20 * per_epoch * 20  # 20 epochs of five records, 20 iterations apart
    assert len(run.steps) == 20 * per_epoch  # the second launch's epoch 8 replaces the first's
    # A count inside the epoch logged every 100 steps of an 82-step epoch moves on at most epoch changes
    # too ("iteration:2 step:18/82", "iteration:3 step:36/82", ..., "iteration:6 step:8/82"): it stays one.
    lines = [f"2021-04-12 23:35:32,903 - log/train.log - INFO - iteration:{g // 82 + 1} step:{g % 82}/82, "
             f"NER loss:{30 / (1 + g / 100):.6f}" for g in range(100, 8201, 100)]
    (run,) = discover_runs(_write(tmp_path / "ner.log", lines))
    assert run.steps.index.tolist() == list(range(100, 8201, 100))


def test_pytorch_yolov3s_losses_group_reads_its_total(tmp_path):
    """PyTorch-YOLOv3's early print, kept by its pruning forks: "[Epoch 1/2, Batch 4310/4807] [Losses: x 0.56, ...,
    total nan, recall: 0.00000, precision: 1.00000]" was refused as a log of recall and precision with no loss, its
    NaN unseen. The total is the loss, the batch a count inside the epoch."""
    lines = [f"[Epoch {e}/2, Batch {b}/50] [Losses: x 0.559568, y 0.449969, w 0.1, h 0.1, conf 8.89, cls 1.14, "
             f"total {10.0 - e - b / 100 if (e, b) < (2, 30) else float('nan'):f}, recall: 0.00000, precision: 1.00000]"
             for e in (1, 2) for b in range(0, 50, 5)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == [e * 50 + b for e in (0, 1) for b in range(0, 50, 5)]
    assert run.steps["loss"].iloc[0] == pytest.approx(9.0)
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.step) == ("nonfinite", 80)


def test_step_lines_whose_loss_wrapped_onto_the_next_line_say_so(tmp_path):
    """torchtitan's lines pasted into a pull request wrapped at 80 columns: 'step:  1  loss:' with its value on the next
    line. Five steps and no loss were 'only 0 finite loss value(s) ... non-finite values ... are still reported', as if
    the losses were there and NaN."""
    lines = []
    for step in range(1, 6):
        lines += [f"[rank0]:[titan] 2026-07-16 11:20:4{step},921 - root - INFO - step:  {step}  loss:",
                  f"{8.0 - step / 10:.5f}  grad_norm:  3.7762  memory:  3.87GiB(2.17%)  tps: 1,578"]
    code, report = _analyze(str(_write(tmp_path / "titan.log", lines)))
    (run,) = report["runs"]
    assert code == 0 and run["verdict"] == "no loss"
    assert run["warnings"] == ["no loss value at any of its 5 steps: its lines name the loss but no value of it was "
                               "read (a paste whose lines wrapped between a key and its value? paste the log as it "
                               "was written)"]


def test_a_count_and_a_colon_that_open_the_message_then_the_loss(tmp_path):
    """DPPO's pretraining under Hydra's logger, f"{self.epoch}: train loss {loss_train:8.4f} | t:{timer():8.4f}": "[...]
    [agent.pretrain.train_diffusion_agent][INFO] - 87: train loss   0.1508 | t: 56.9872" was not a log format."""
    lines = [f"[2024-11-12 17:{i:02d}:26,296][agent.pretrain.train_diffusion_agent][INFO] - {87 + i}: train loss   "
             f"{0.1508 - i / 10000:.4f} | t: 56.9872" for i in range(12)]
    (run,) = discover_runs(_write(tmp_path / "run.log", lines))
    assert run.steps.index.tolist() == list(range(87, 99)) and run.steps["loss"].iloc[-1] == pytest.approx(0.1497)


def test_paddleslims_epoch_lines_are_no_torchtitan_lines_and_their_evaluation_no_training(tmp_path):
    """PaddleSlim's "epoch:394 train step:190  loss:  1.2416 lr: 0.000028" was read as torchtitan's "step: N  loss: X",
    its "epoch:394 valid step:0    loss:  1.4642 top1: ..." lines as training steps 0-20 before the training's 190-270."""
    lines = [f"2020-09-17 02:50:44,995-INFO: epoch:394 train step:{s}  loss:  {1.0 + (s % 30) / 100:.4f} lr: 0.000028 "
             "elapse: 0.275s" for s in range(190, 280, 10)]
    lines += ["2020-09-17 02:51:07,579-INFO: END epoch:394 train loss_avg:  1.2111  elapse_sum: 75.699s"]
    lines += [f"2020-09-17 02:51:07,936-INFO: epoch:394 valid step:{s}    loss:  1.4642 top1: 0.7031 top5: 0.9062 "
              "elapse: 0.357s" for s in (0, 10, 20)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source != "torchtitan" and run.steps["loss"].dropna().index.tolist() == list(range(190, 280, 10))
    # torchtitan's own lines, with a validation line among them, are torchtitan's training.
    lines = [f"[rank0]:[titan] 2025-01-01 11:20:41,921 - root - INFO - step: {s:2}  loss: {8 - s / 10:7.4f}  grad_norm: "
             f"{1.2:7.4f}  memory: 3.87GiB(2.17%)  tps: 1,578" for s in range(1, 11)]
    lines.insert(5, "[rank0]:[titan] 2025-01-01 11:20:41,921 - root - INFO - validate step: 5  loss: 9.1000")
    (run,) = discover_runs(_write(tmp_path / "titan.log", lines))
    assert run.source == "torchtitan" and run.steps["loss"].max() == pytest.approx(7.9)


def test_crestereos_epoch_and_batch_in_one_bracket(tmp_path):
    """CREStereo's "2022/06/01 14:17:25 0.66 b/s,passed:00:13:16,...,lr:0.0004,[2/100:5/500] ==> loss:26.19" was not a
    log format; the batch counts inside the epoch."""
    lines = [f"2022/06/01 14:17:25 0.66 b/s,passed:00:13:16,eta:21:41:36,data_time:0.16,lr:0.0004,[{e}/100:{b}/500] ==> "
             f"loss:{20 - e - b / 100:.2f}" for e in (2, 3) for b in range(5, 505, 100)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == [(e - 1) * 500 + b for e in (2, 3) for b in range(5, 505, 100)]
    assert run.steps["loss"].iloc[0] == pytest.approx(17.95)


def test_a_count_inside_the_epoch_stays_one_across_a_pastes_gap(tmp_path):
    """CenterPoint's lines pasted from epochs 2 and 5 ("Epoch [2/6][20/50]", then "Epoch [5/6][40/50]"): the count rose
    across the one epoch change the paste shows, so it was taken for a global step (10..45), the epochs lost. Past its
    second epoch a global count exceeds the epoch's length; one that never does counts inside the epoch."""
    lines = [f"Epoch [{e}/6], Step [{i}/50], Loss: {30 - e / 10 - i / 1000:.4f}" for e, i in
             [(2, 10), (2, 15), (2, 20), (5, 40), (5, 45)]]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == [60, 65, 70, 240, 245]
    # A count that goes on across epochs stays the step.
    lines = [f"Epoch [{e}/6], Step [{i}/300], Loss: {30 - i / 1000:.4f}" for e, i in
             [(1, 10), (1, 40), (2, 60), (2, 90), (3, 110), (3, 140)]]
    (run,) = discover_runs(_write(tmp_path / "global.log", lines))
    assert run.steps.index.tolist() == [10, 40, 60, 90, 110, 140]


def test_a_step_in_brackets_after_a_ctime_is_read(tmp_path):
    """pytorch-deepglr's print(time.ctime(), f"[{epoch}] loss: {loss:.3f}, time elapsed: ..."): "Fri Apr  3 16:41:06 2020
    [1] loss: 9261402.918, time elapsed: 84.31" was not a log format, its loss's climb to 9e15 unseen."""
    lines = [f"Fri Apr  3 16:{40 + e:02d}:06 2020 [{e}] loss: {9261402.918 * 10 ** e:.3f}, time elapsed: 84.3124577999115"
             for e in range(1, 8)]
    (run,) = discover_runs(_write(tmp_path / "exp1.txt", lines))
    assert run.steps.index.tolist() == list(range(1, 8)) and run.steps["loss"].iloc[0] == pytest.approx(92614029.18)


def test_matlabs_trainnetwork_table_with_its_two_header_lines(tmp_path):
    """MATLAB's trainNetwork prints its header over two lines ('| Mini-batch | Mini-batch |' over '| Accuracy | Loss
    |'): the first alone named no loss, and --loss-col Mini-batch, as the refusal advised, was "a bug in sentinel"
    (a column name twice). The lines are joined; a name repeated is numbered as a CSV reader numbers it."""
    rule = "|" + "=" * 88 + "|"
    lines = ["Initializing input data normalization.", rule,
             "|  Epoch  |  Iteration  |  Time Elapsed  |  Mini-batch  |  Mini-batch  |  Base Learning  |",
             "|         |             |   (hh:mm:ss)   |   Accuracy   |     Loss     |      Rate       |", rule]
    lines += [f"|{e:8d} |{i:12d} |       00:00:05 |{50 + e:12.2f}% |{2.3 / e:13.4f} |          0.0100 |"
              for e, i in zip(range(1, 13), range(50, 650, 50))]
    lines.append(rule)
    (run,) = discover_runs(_write(tmp_path / "train.txt", lines))
    assert run.steps.index.tolist() == list(range(50, 650, 50)) and run.steps["loss"].iloc[-1] == pytest.approx(0.1917)
    # One header line whose name repeats: numbered, read where named, and no crash either way.
    lines = ["| step | loss | loss |", "|---|---|---|"] + [f"| {s} | {1 / s:.3f} | {2 / s:.3f} |" for s in range(1, 6)]
    path = _write(tmp_path / "twice.txt", lines)
    assert discover_runs(path)[0].steps["loss"].iloc[0] == 1.0
    code, report = _analyze(str(path), "--loss-col", "loss.1")
    assert code == 0 and report["runs"][0]["final_loss"] == pytest.approx(0.4)


def test_a_pipe_tables_nan_cells_are_the_loss_gone_nan(tmp_path):
    """nolearn's epoch table printed 'nan' as its train loss in epochs 1-2 (and a mid-run NaN the same): beside their
    valid loss those rows read as an evaluation's, the run healthy. A cell printed 'nan' is the loss gone NaN; an
    empty cell ('No log' in the Trainer's table) is a row that logged none."""
    lines = [" Epoch  |  Train loss  |  Valid loss  |  Valid acc", "--------|--------------|--------------|----------"]
    lines += [f"     {e}  |  {'nan' if e in (5, 6) else f'{2 - e / 10:.6f}'}  |  1.000000  |  52.17%" for e in range(1, 11)]
    (run,) = discover_runs(_write(tmp_path / "nolearn.txt", lines))
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.step, incident.end_step) == ("nonfinite", 5, 6)
    # The Trainer's "No log" is no NaN.
    lines = ["Step | Training Loss | Validation Loss", "-- | -- | --"]
    lines += [f"{s} | {'No log' if s == 100 else f'{2 - s / 1000:.6f}'} | 2.100000" for s in range(100, 1100, 100)]
    (run,) = discover_runs(_write(tmp_path / "trainer.txt", lines))
    assert not [i for i in analyze_run(run).incidents if i.kind == "nonfinite"]


def test_paddlepaddle_v2s_pass_batch_cost_lines(tmp_path):
    """PaddlePaddle v2's event handler, as its book prints it: "Pass 0, Batch 100, Cost 2.261713, {'classification_
    error_evaluator': 0.8359375}" (dots between) was 'its lines log ... but no loss'. The cost is the loss, the pass
    an epoch from 0, the batch a count inside it."""
    lines = []
    for p in range(2):
        for b in range(0, 500, 100):
            lines += [f"Pass {p}, Batch {b}, Cost {2.4 - p / 2 - b / 1000:.6f}, {{'classification_error_evaluator': 0.8}}",
                      "." * 99]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == [0, 100, 200, 300, 400, 500, 600, 700, 800, 900]
    assert run.steps["loss"].iloc[-1] == pytest.approx(1.5)


def test_deeplearning4js_score_at_iteration_is_its_loss(tmp_path):
    """Deeplearning4j's ScoreIterationListener, "o.d.o.l.ScoreIterationListener - Score at iteration 60 is NaN": 'not a
    log format', the NaN unsaid. The score is what its network minimises, its loss."""
    lines = [f"09:54:{s // 10:02d}.023 [main] INFO  o.d.o.l.ScoreIterationListener - Score at iteration {s} is "
             f"{2.3 - s / 100 if s < 60 else 'NaN'}" for s in range(0, 140, 20)]
    (run,) = discover_runs(_write(tmp_path / "dl4j.log", lines))
    assert run.steps.index.tolist() == list(range(0, 140, 20)) and run.steps["loss"].iloc[0] == pytest.approx(2.3)
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.step) == ("nonfinite", 60)


def test_makemores_step_of_the_total_and_its_loss(tmp_path):
    """Karpathy's makemore and Zero to Hero loops, print(f'{i:7d}/{max_steps:7d}: {loss.item():.4f}'), in countless
    notebooks: "      0/ 200000: 3.3167" was not a log format."""
    lines = [f"{i:7d}/{200000:7d}: {3.3 - i / 100000:.4f}" for i in range(0, 200000, 10000)]
    (run,) = discover_runs(_write(tmp_path / "makemore.txt", lines))
    assert run.steps.index.tolist() == list(range(0, 200000, 10000)) and run.steps["loss"].iloc[-1] == pytest.approx(1.4)


def test_cntks_minibatch_lines_read_its_training_criterion(tmp_path):
    """CNTK's ' Epoch[ 2 of 300]-Minibatch[  11-  20, 0.00%]: CrossEntropyWithSoftmax = 2.30 * 640; EvalClassificationError
    = 0.9 * 640; time = ...' were refused, --loss-col included: the first value is the training criterion's."""
    lines = [f" Epoch[{e:2d} of 300]-Minibatch[{b - 9:4d}-{b:4d}, 0.00%]: CrossEntropyWithSoftmax = {2.3 - e / 10 - b / 1000:.7f} "
             f"* 640; EvalClassificationError = 0.9 * 640; time = 0.0159s; samplesPerSecond = 62703.8"
             for e in (1, 2) for b in range(10, 60, 10)]
    (run,) = discover_runs(_write(tmp_path / "cntk.log", lines))
    assert run.steps.index.tolist() == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert run.steps["loss"].iloc[0] == pytest.approx(2.19)


def test_cntk_1s_minibatch_lines_and_windows_nan(tmp_path):
    """CNTK 1 prints its samples' count first, " Epoch[ 1 of 1]-Minibatch[ 501-1000]: SamplesSeen = 500;
    TrainLossPerSample =  1.#QNAN000; ...", and Windows' old C runtime a NaN as "1.#QNAN000": the loss was read as
    500 at every line and a run that stopped in "EXCEPTION occurred: The training criterion is not a number (NAN)"
    was healthy."""
    losses = ["5.87155566", "3.10000000", "2.50000000", "1.#QNAN000"]
    lines = ["Starting minibatch loop."]
    lines += [f" Epoch[ 1 of 1]-Minibatch[{500 * k + 1:4d}-{500 * (k + 1):4d}]: SamplesSeen = 500; "
              f"TrainLossPerSample =  {loss}; EvalErr[0]PerSample = 0.27600000; TotalTime = 2.7641s"
              for k, loss in enumerate(losses)]
    lines += ["", "[CALL STACK]", "    >Microsoft::MSR::CNTK::TracingGPUMemoryAllocator::operator=", "",
              "EXCEPTION occurred: The training criterion is not a number (NAN). Stop"]
    (run,) = discover_runs(_write(tmp_path / "cntk.log", lines))
    assert run.steps["loss"].iloc[:3].tolist() == [5.87155566, 3.1, 2.5] and np.isnan(run.steps["loss"].iloc[-1])
    report = analyze_run(run)
    assert report.verdict == "unhealthy" and [i.step for i in report.incidents if i.kind == "nonfinite"] == [2000]


def _allennlp_bar(loss: float, done: int, total: int, tail: str = "") -> str:
    return (f"accuracy: 0.1656, accuracy3: 0.3559, loss: {loss:.4f} ||: {100 * done // total:3d}%|##########| "
            f"{done}/{total} [00:37<00:00,  3.32it/s]{tail}")


def test_allennlps_bars_end_their_description_in_its_loss(tmp_path):
    """AllenNLP draws its metrics as the bar's description, ended by " ||" ("loss: 3.5716 ||: 100%|###| 125/125"):
    every log refused, a CRF loss run down to -4033 and the IndexError that ended it unsaid. A validation's bar after
    each epoch's (31 batches for 125) is an evaluation's, also where a paste glued a stray "[" to a bar's end."""
    lines = []
    for epoch in range(8):
        lines += [f"2019-10-15 12:45:23,697 - INFO - allennlp.training.trainer - Epoch {epoch}/39",
                  "2019-10-15 12:45:23,739 - INFO - allennlp.training.trainer - Training"]
        lines += [_allennlp_bar(3.6 - 0.3 * epoch - 0.01 * k, k, 125) for k in (25, 75, 125)]
        lines += ["2019-10-15 12:46:01,372 - INFO - allennlp.training.trainer - Validating",
                  _allennlp_bar(3.3 - 0.3 * epoch, 31, 31)]
    (run,) = discover_runs(_write(tmp_path / "allennlp.log", lines))
    assert len(run.steps) == 24 and run.steps["loss"].iloc[-1] == pytest.approx(3.6 - 2.1 - 1.25)
    bars = [_allennlp_bar(3.6 - 0.3 * epoch, 125, 125, "[" if epoch % 2 else "") for epoch in range(8)]
    lines = [line for epoch, bar in enumerate(bars) for line in (bar, _allennlp_bar(3.3 - 0.3 * epoch, 31, 31))]
    (run,) = discover_runs(_write(tmp_path / "finished.log", lines))
    assert run.steps.index.tolist() == list(range(1, 9)) and run.steps["loss"].iloc[-1] == pytest.approx(1.5)


def test_a_launchs_settings_are_no_metrics_a_refusal_names(tmp_path):
    """Lightning's DDP launch printed "initializing ddp: GLOBAL_RANK: 0, MEMBER: 1/2" and "LOCAL_RANK: 0 -
    CUDA_VISIBLE_DEVICES: [0,1]" for each rank, then no step: refused as "its lines log CUDA_VISIBLE_DEVICES,
    GLOBAL_RANK, LOCAL_RANK, MEMBER ... but no loss (an environment's returns, an evaluation's metrics: a rise of
    these is progress)". A key a run logs prints more than two values; an episode's return still is named."""
    lines = []
    for launch in range(3):
        for rank in range(2):
            lines += [f"initializing ddp: GLOBAL_RANK: {rank}, MEMBER: {rank + 1}/2",
                      f"LOCAL_RANK: {rank} - CUDA_VISIBLE_DEVICES: [0,1]"]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "ddp.log", lines))])
    assert result.exit_code == 1 and "is not a log format sentinel reads" in result.output
    assert "environment's returns" not in result.output
    lines = [f"global_step={58 * k}, episodic_return={10.1 + k}" for k in range(8)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "ppo.log", lines))])
    assert "its lines log episodic_return, global_step but no loss (an environment's returns" in result.output


def test_keras_rl_episode_lines_are_read_at_the_environments_step(tmp_path):
    """keras-rl's " 11087/50000: episode: 81, duration: 5.514s, ..., loss: 357252075666430719164416.000000, ...": the
    episode read as the step (81..84, where the log counts environment steps); a DQN's loss at 1e+23, then 1e+26,
    still judged."""
    losses = [3.5725e23, 2.0903e24, 1.2394e26, 6.1484e25]
    lines = [f" {11087 + 150 * k}/50000: episode: {81 + k}, duration: 5.514s, episode steps: 164, steps per second: "
             f"30, episode reward: -752.191, mean reward: -4.587 [-100.000, 3.757], "
             f"loss: {loss:f}, mean_absolute_error: 29897897984.0, mean_q: 1.2" for k, loss in enumerate(losses)]
    (run,) = discover_runs(_write(tmp_path / "dqn.log", lines))
    assert run.source == "keras_rl" and run.steps.index.tolist() == [11087, 11237, 11387, 11537]
    assert analyze_run(run).verdict == "unhealthy"


def test_a_refusal_names_the_key_that_went_non_finite(tmp_path):
    """keras-rl's interval lines, "10000/10000 [====] - 52s - reward: nan", then "50 episodes - episode_reward: nan
    [nan, nan] - loss: 6.731": refused with "what it logs went non-finite there", which read as a training that blew
    up where only the episodes' reward had. The key printed non-finite is named."""
    lines = []
    for k, reward in enumerate(["-0.6625", "-0.6625", "nan"], start=1):
        lines += [f"Interval {k} ({10000 * (k - 1)} steps performed)",
                  f"10000/10000 [==============================] - 44s - reward: {reward}", ""]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "ddpg.log", lines))])
    assert result.exit_code == 1 and "its reward went non-finite there" in result.output


def test_a_log_of_an_error_and_no_loss_names_the_option(tmp_path):
    """brain.js' 'iterations: 430, training error: 0.0316', MXNet's 'Train-mae=31.3': 'its lines log error ... but no loss
    (an environment's returns, an evaluation's metrics: a rise of these is progress ...)', the reason wrong for an error
    a training minimises. The refusal names --loss-col with it, which reads it."""
    lines = [f"2016-11-02 15:51:19,011 Node Epoch[0] Batch [{b}]\tSpeed: 2017.78 samples/sec\tTrain-mae={31 - b / 100:.6f}"
             for b in range(50, 550, 50)]
    path = _write(tmp_path / "mxnet.log", lines)
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and "pass --loss-col Train-mae to judge it as the loss" in " ".join(result.output.split())
    code, report = _analyze(str(path), "--loss-col", "Train-mae")
    assert code == 0 and report["runs"][0]["final_loss"] == pytest.approx(26.0)


def test_deep_learning_with_pythons_gan_loop_is_a_gans(tmp_path):
    """Deep Learning with Python's GAN loop prints 'discriminator loss at step 100: 0.69' and 'adversarial loss at step
    100: 0.81': both were read as the loss, "100 of 100 steps print their loss 2 times ... (every rank printing?)". The
    adversarial model's loss is the generator's, the discriminator's loss_d, the run judged as a GAN's."""
    lines = []
    for step in range(0, 3000, 100):
        lines += [f"discriminator loss at step {step}: {0.69 + step % 300 / 1000}",
                  f"adversarial loss at step {step}: {0.8 + step % 700 / 1000}"]
    (run,) = discover_runs(_write(tmp_path / "gan.txt", lines))
    assert run.source == "gan" and run.steps["loss_d"].iloc[1] == pytest.approx(0.79)
    assert run.steps["loss"].iloc[1] == pytest.approx(0.9) and not any("2 times" in w for w in run.warnings)


def test_alphaposes_epoch_lines(tmp_path):
    """AlphaPose's model zoo logs, f"{set}-{epoch:d} epoch | loss:{loss:.8f} | acc:{acc:.4f}" ("Train-0 epoch | loss:0.00107745
    | acc:0.1478"): 'not a log format', the epoch before its word."""
    lines = [f"Train-{e} epoch | loss:{0.001 / (1 + e / 10):.8f} | acc:{0.15 + e / 100:.4f}" for e in range(30)]
    (run,) = discover_runs(_write(tmp_path / "training.log", lines))
    assert run.steps.index.tolist() == list(range(30)) and run.steps["loss"].iloc[0] == pytest.approx(0.001)


def test_rasbts_gen_dis_loss_pair_is_a_gans(tmp_path):
    """rasbt's deeplearning-models GAN notebooks print "Epoch: 001/100 | Batch 100/469 | Gen/Dis Loss: 5.1797/0.0280": the
    pair was read as one loss, the generator's judged as any loss (five divergences, three critical, on a healthy GAN).
    The generator's is the loss, the discriminator's loss_d, the run judged as a GAN's."""
    lines = []
    for e in range(1, 31):
        lines += [f"Epoch: {e:03d}/100 | Batch {b:03d}/469 | Gen/Dis Loss: {0.7 + (e * 7 + b) % 13 / 4:.4f}/{0.1 + e / 100:.4f}"
                  for b in range(0, 500, 100)]
        lines.append(f"Time elapsed: {e * 0.26:.2f} min")
    (run,) = discover_runs(_write(tmp_path / "gan.txt", lines))
    assert run.source == "gan" and "loss_d" in run.steps.columns and run.steps.index[-1] == 29 * 469 + 400
    assert not [i for i in analyze_run(run).incidents if i.severity != "info"]


def test_detectron2s_nan_stop_in_its_traceback_is_the_runs_nan(tmp_path):
    """detectron2 stops with FloatingPointError("Loss became infinite or NaN at iteration=N!"): its
    last step line is finite, and the run was called healthy."""
    lines = [f"[11/01 20:14:{i:02d} d2.utils.events]: eta: 5:41:49  iter: {19 + 20 * i}  total_loss: {1.9 - i / 100:.3f}  "
             f"loss_cls: 1.184  loss_box_reg: 0.475  time: 0.2293  data_time: 0.0033  lr: 0.003796  max_mem: 3782M"
             for i in range(25)]
    lines += ["Traceback (most recent call last):", '  File "train_loop.py", line 239, in _detect_anomaly',
              "    self.iter, loss_dict", "FloatingPointError: Loss became infinite or NaN at iteration=512!",
              "loss_dict = {'loss_cls': tensor(nan, device='cuda:0'), 'loss_box_reg': tensor(nan, device='cuda:0')}"]
    report = analyze_run(discover_runs(_write(tmp_path / "log.txt", lines))[0])
    (incident,) = report.incidents
    assert (incident.kind, incident.step, incident.severity) == ("nonfinite", 512, "critical")
    assert report.verdict.value == "unhealthy"


def test_a_short_paste_named_on_its_own_is_read_but_is_no_run_in_a_directory(tmp_path):
    """Caffe's issue #1105: four lines, the last three NaN. Fewer lines than a dialect needs to
    claim a file in a directory walk, so it was "not a log format"; named on its own it is read."""
    lines = ["I0915 14:32:28.447811 solver.cpp:87] Iteration 0, loss = 2.30264",
             "I0915 14:33:01.106441 solver.cpp:87] Iteration 200, loss = nan",
             "I0915 14:33:33.773283 solver.cpp:87] Iteration 400, loss = nan",
             "I0915 14:34:06.409385 solver.cpp:87] Iteration 600, loss = nan"]
    (tmp_path / "paste").mkdir()
    path = _write(tmp_path / "paste" / "caffe.txt", lines)
    code, report = _analyze(str(path))
    (run,) = report["runs"]
    assert code == 0 and run["steps"] == 4 and run["verdict"] == "unhealthy"
    assert any(w.startswith("only 4 step lines: read because the file was named on its own") for w in run["warnings"])
    _write(tmp_path / "paste" / "one.txt", ["step 1 loss 2.0"])
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "paste" / "one.txt")])
    assert result.exit_code == 1 and "one step line" in result.output  # (refused: a series is judged)
    # a directory walk reads so few lines only where it finds no other log
    (tmp_path / "runs").mkdir()
    _write(tmp_path / "runs" / "caffe.txt", lines)
    _write(tmp_path / "runs" / "train.log", [f"step {s} | loss {2.5 - s / 100:.3f}" for s in range(1, 30)])
    code, report = _analyze(str(tmp_path / "runs"))
    assert [run["path"] for run in report["runs"]] == [str(tmp_path / "runs" / "train.log")]
    (run,) = _analyze(str(tmp_path / "paste"))[1]["runs"]
    assert f"only 4 step lines: read because no other log was found in '{tmp_path / 'paste'}'" in run["warnings"]
    (tmp_path / "paste" / "caffe.txt").unlink()
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "paste")])
    assert result.exit_code == 1 and "no training logs found" in result.output


@pytest.mark.parametrize("tail", [2, 0])
def test_mmengine_grad_norm_nan_under_a_falling_loss_is_a_skipped_update(tmp_path, tail):
    """mmengine logs each interval's mean grad norm: NaN while any of its steps overflowed in fp16,
    which the loss scaler skipped ("grad_norm: nan for a while happens, it usually clears", an
    xtuner maintainer). NaN at the last two lines of a paste, the loss finite and falling there,
    was a critical "never finite again"; the rows after the first say the weights were sound."""
    lines = []
    for k, it in enumerate(range(200, 260 + 10 * tail, 10)):
        grad = "nan" if it in (240, 250) else f"{3.06 - 0.1 * k:.4f}"
        lines.append(f"10/30 22:18:{k:02d} - mmengine - INFO - Epoch(train) [1][{it}/735]  lr: 1.9870e-04  "
                     f"eta: 2:46:39  time: 2.8906  data_time: 0.0042  memory: 10762  loss: {2.75 - 0.05 * k:.4f}  "
                     f"grad_norm: {grad}")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    report = analyze_run(run)
    (nan,) = [i for i in report.incidents if i.kind == "nonfinite"]
    assert (nan.step, nan.end_step, nan.severity) == (240, 250, "info") and nan.details["update_skipped"]
    assert report.verdict == "healthy"


def test_xlnet_absl_lines_with_the_step_in_brackets(tmp_path):
    """XLNet's train_gpu.py logs through absl: "[step] | gnorm G lr L | loss X | pplx P, bpc B", the
    loss after a space (its issue's paste of a rising pretraining loss): "not a log format"."""
    lines = [f"I0704 22:15:42.730550 140514656708352 train_gpu.py:303] [{500 * k}] | gnorm 0.25 lr 0.000223 "
             f"| loss {7.64 + 0.02 * k:.2f} | pplx 2081.29, bpc 11.0233" for k in range(1, 13)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == [500 * k for k in range(1, 13)]
    assert run.steps["loss"].iloc[-1] == pytest.approx(7.88)


def test_yolov5_and_yolov7_console_tables(tmp_path):
    """YOLOv5's and YOLOv7's train.py print "Epoch gpu_mem box obj cls total labels img_size" before
    each epoch's bar, the validation table after it: the loss is "total" (box + obj + cls), which no
    reader took for it ("not a log format", a YOLOv7 issue's paste of a NaN box loss)."""
    lines = []
    for e in range(8):
        box, total = ("nan", "nan") if e >= 6 else (f"{0.05 - 0.002 * e:.4f}", f"{0.09 - 0.003 * e:.4f}")
        lines += ["     Epoch   gpu_mem       box       obj       cls     total    labels  img_size",
                  f"     {e}/299     65.1G    {box}    0.0151         0    {total}      1963       320: 100%|#####| "
                  "1049/1049 [08:05<00:00,  2.16it/s]",
                  "               Class      Images      Labels           P           R      mAP@.5  mAP@.5:.95: "
                  "100%|#####| 82/82 [00:30<00:00,  2.70it/s]",
                  "                 all       20987      129965       0.848       0.542       0.609       0.332", ""]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == list(range(8)) and run.steps["loss"].iloc[0] == 0.09
    (nan,) = [i for i in analyze_run(run).incidents if i.kind == "nonfinite"]
    assert (nan.step, nan.end_step, nan.severity) == (6, 7, "critical")


@pytest.mark.parametrize("pair", [("d_loss", "g_loss"), ("loss_D", "loss_G")])
def test_a_gans_generator_and_discriminator_keys(tmp_path, pair):
    """A GAN script's own lines ("batch: N  d_loss: X  g_loss: Y", BMSG-GAN's issue): two losses and
    neither named loss, so "none is the total". The generator's is the loss, as the GAN dialect
    reads it, and the run is judged as a GAN's (the generator's rises are the game)."""
    d_key, g_key = pair
    lines = [f"batch: {b}  {d_key}: {0.5 + 0.1 * np.sin(b):.6f}  {g_key}: {6 + 4 * abs(np.sin(b / 300)):.6f}"
             for b in range(100, 3100, 100)]
    (run,) = discover_runs(_write(tmp_path / "gan.log", lines))
    assert run.steps["loss"].iloc[0] == pytest.approx(6 + 4 * abs(np.sin(1 / 3)), abs=1e-6)
    report = analyze_run(run)
    assert any(w.startswith("a GAN's run") for w in report.warnings)
    assert f"loss read from {g_key!r}" in " ".join(report.warnings)


def test_a_jump_past_twice_a_wobbling_windows_top_is_seen(tmp_path):
    """tensorflow-deeplab-lfov's issue: the loss wobbles between 0.4 and 1.8 for twenty steps, then
    jumps to 5.1 (x5.8). The wobble widened the detector's spread: 5.2 sigmas, under its 6, and the
    largest jump of the paste went untold. A value past twice every value of the window before it
    is flagged (here an outlier batch: back at once)."""
    rng = np.random.default_rng(3)
    losses = [0.43 + 0.02 * rng.standard_normal() for _ in range(8)]
    losses += [0.45 + (1.3 if k % 2 else 0.3) * abs(np.sin(k / 1.7)) for k in range(22)]  # the wobble: 0.45 .. 1.73
    losses += [5.128, 0.86, 0.9]
    lines = [f"step {12972 + k} \t loss = {v:.3f}, (1.019 sec/step)" for k, v in enumerate(losses)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    jump = [i for i in analyze_run(run).incidents if i.step == 13002]
    assert [(i.kind, i.severity) for i in jump] == [("outlier_batch", "info")]
    assert "5.128" in jump[0].message


@pytest.mark.parametrize("last", ["nan", "inf", "0.652"])
def test_two_lines_named_on_their_own_are_read(tmp_path, last):
    """The line before the NaN and the NaN (pytorch-kaldi's epoch lines, pasted into its issue) are
    what a user brings, and so are two finite lines (3DGS's bar at 7,000 and 30,000 steps, "loss
    not going down"; between two values a jump counts past x3, a warning where nothing after it
    tells whether it recovered): two record lines are read, with a warning that says so."""
    lines = ["ep=22 tr=['train_clean_100'] loss=0.671 err=0.214 valid=dev_clean loss=0.693 err=0.212 "
             "lr_architecture1=6.25e-06 time(s)=17255",
             f"ep=23 tr=['train_clean_100'] loss={last} err=0.218 valid=dev_clean loss={last} err=0.911 "
             "lr_architecture1=3.125e-06 time(s)=17416"]
    path = _write(tmp_path / "res.txt", lines)
    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    if last == "0.652":
        (run,) = json.loads(result.output)["runs"]
        assert result.exit_code == 0 and run["verdict"] == "healthy" and run["steps"] == 2
        assert "only 2 step lines: read because the file was named on its own" in " ".join(run["warnings"])
        path.write_text(path.read_text().replace("loss=0.652", "loss=1.8"))  # x2.7: a noisy batch, as far as two tell
        assert json.loads(CliRunner().invoke(main, ["analyze", str(path), "--format", "json"]).output)["runs"][0][
            "incidents"] == []
        path.write_text(path.read_text().replace("loss=1.8", "loss=3.4"))  # x5: told, its end not known
        (jump,) = json.loads(CliRunner().invoke(main, ["analyze", str(path), "--format", "json"]).output)["runs"][0][
            "incidents"]
        assert (jump["kind"], jump["step"], jump["severity"]) == ("loss_spike", 23, "warning")
        assert "the log ends at it: whether it recovers is not known" in jump["message"]
        path.write_text(path.read_text().replace("loss=3.4", "loss=9.4"))  # x14: an order of magnitude
        (jump,) = json.loads(CliRunner().invoke(main, ["analyze", str(path), "--format", "json"]).output)["runs"][0][
            "incidents"]
        assert (jump["kind"], jump["step"], jump["severity"]) == ("loss_spike", 23, "critical")
        return
    (run,) = json.loads(result.output)["runs"]
    assert result.exit_code == 0 and run["steps"] == 2 and run["verdict"] == "unhealthy"
    (nan,) = run["incidents"]
    assert (nan["kind"], nan["step"], nan["severity"]) == ("nonfinite", 23, "critical")


def test_keras_terminate_on_nan_glued_to_its_bar(tmp_path):
    """Keras' TerminateOnNaN prints "Batch 3: Invalid loss, terminating training" right after the
    bar drawn without its line end: the bar's loss was lost with it, and the paste was not read."""
    lines = ["Epoch 1/10",
             "  3/234 [..............................] - ETA: 33:37:24 - loss: 44.4110"
             "Batch 3: Invalid loss, terminating training",
             "  4/234 [..............................] - ETA: 25:09:00 - loss: inf "]
    (run,) = discover_runs(_write(tmp_path / "keras.txt", lines))
    assert run.steps["loss"].tolist() == [44.411, float("inf")]
    (nan,) = analyze_run(run).incidents
    assert (nan.kind, nan.severity, nan.step) == ("nonfinite", "critical", 4)


@pytest.mark.parametrize("epoch_word", ["epoch", "Epoch"])
@pytest.mark.parametrize("kind", ["cyclegan", "pix2pix"])
def test_cyclegan_and_pix2pix_loss_logs(tmp_path, kind, epoch_word):
    """pytorch-CycleGAN-and-pix2pix's loss_log.txt: "(epoch: E, iters: I, time: T, data: D)" then one
    term per name. It was "not a log format". The generator's terms add up to the loss. Forks print
    "(Epoch: E, ..." (a CycleGAN issue's paste of a run diverging at epoch 101)."""
    terms = {"cyclegan": ("D_A", "G_A", "cycle_A", "idt_A", "D_B", "G_B", "cycle_B", "idt_B"),
             "pix2pix": ("G_GAN", "G_L1", "D_real", "D_fake")}[kind]
    lines = ["================ Training Loss (Wed Oct 30 10:43:06 2024) ================"]
    for epoch in (1, 2):
        for it in range(100, 1100, 100):
            values = " ".join(f"{t}: {'nan' if epoch == 2 and it > 800 else f'{0.5 + 0.01 * i + 0.1 / it:.4f}'}"
                              for i, t in enumerate(terms))
            lines.append(f"({epoch_word}: {epoch}, iters: {it}, time: 2.416, data: 9.430) {values} ")
    (run,) = discover_runs(_write(tmp_path / "loss_log.txt", lines))
    assert run.source == "cyclegan" and len(run.steps) == 20 and run.steps.index[10] == 1100
    generator = [0.5 + 0.01 * i + 0.001 for i, t in enumerate(terms) if not t.startswith("D_")]
    assert run.steps["loss"].iloc[0] == pytest.approx(sum(generator))
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.step) == ("nonfinite", 1900)


def test_cyclegans_counts_printed_by_the_global_count_give_the_epochs_length(tmp_path):
    """pytorch-CycleGAN-and-pix2pix prints at total_iters % print_freq == 0: an epoch of 1,096 samples
    prints iters 100 .. 1000, the next 4, 104, ...: the largest count seen (1,004) made the epoch 1,012 long,
    "epoch 2, iters 4" 16 steps after "epoch 1, iters 1000" (not 100). Its length is 1000 + 100 - 4."""
    lines, total = [], 0
    for _ in range(3 * 1096):
        total += 1
        epoch, it = (total - 1) // 1096 + 1, (total - 1) % 1096 + 1
        if total % 100 == 0:
            lines.append(f"[Rank 0] (epoch: {epoch}, iters: {it}, time: 0.109, data: 0.097) , D_A: 0.306, "
                         f"G_A: {0.5 + 1 / total:.4f}, cycle_A: 2.065, D_B: 0.338, G_B: 0.404, cycle_B: 0.661")
    (run,) = discover_runs(_write(tmp_path / "loss_log.txt", lines))
    assert run.steps.index.tolist() == list(range(100, 3 * 1096 + 1, 100))


@pytest.mark.parametrize("bad", [None, "act_loss", "cri_loss"])
def test_several_losses_and_no_total_one_going_non_finite_is_read(tmp_path, bad):
    """DeepSpeed-Chat's step 3 prints "act_loss: X|cri_loss: Y" and no total: "none is the total,
    pass --loss-col", exit 1, on a paste whose losses went inf. The first loss that goes non-finite is
    read, with a warning naming the others; in a healthy one the actor's, beside its critic's and its pretraining
    term. Its act_loss is the actor's (PPO's surrogate objective): OpenRLHF's, read so, had 86 spikes."""
    lines = []
    for step in range(3180, 3186):
        values = {"act_loss": 30.9 - step % 7 / 10, "cri_loss": 30.5 + step % 5 / 10, "unsuper_loss": 0.0}
        if bad is not None and step >= 3184:
            values[bad] = float("inf")
        lines += [f"epoch: 0|step: {step}|ppo_ep: 1|" + "|".join(f"{k}: {v}" for k, v in values.items()),
                  "average reward score: -7.80859375", "-" * 40]
    path = _write(tmp_path / "step3.log", lines)
    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    (run,) = json.loads(result.output)["runs"]
    if bad is None:
        assert "none is the total: act_loss is read, the actor's policy loss" in run["warnings"][0]
        assert not run["incidents"]
        return
    assert run["warnings"][0].startswith(f"its lines name 3 losses (act_loss, cri_loss, unsuper_loss) and none is the "
                                         f"total: {bad} is read, the first of them that goes non-finite")
    (nan,) = run["incidents"]
    assert (nan["kind"], nan["severity"], nan["step"]) == ("nonfinite", "critical", 3184)
    # the actor's loss is PPO's surrogate objective (act_loss, as actor_loss): not judged for spikes
    assert any("policy gradient's surrogate objective" in w for w in run["warnings"]) == (bad == "act_loss")


@pytest.mark.parametrize("bad", [None, "cri_loss"])
def test_several_losses_and_no_total_in_a_folder(tmp_path, bad):
    """A folder of runs, one of them DeepSpeed-Chat's step 3 whose critic's loss went inf: the walk
    reads it as a file named on its own is read (its lines are enough for a walk); a file none of
    whose losses goes non-finite is read by its actor's loss, as a file named on its own."""
    lines = []
    for step in range(3180, 3190):
        values = {"act_loss": 30.9 - step % 7 / 10, "cri_loss": 30.5 + step % 5 / 10}
        if bad is not None and step >= 3186:
            values[bad] = float("inf")
        lines.append(f"epoch: 0|step: {step}|ppo_ep: 1|" + "|".join(f"{k}: {v}" for k, v in values.items()))
    (tmp_path / "runs").mkdir()
    _write(tmp_path / "runs" / "step3.log", lines)
    _write(tmp_path / "runs" / "sft.log", [f"step: {i} loss: {2.5 - i / 100}" for i in range(1, 30)])
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "runs"), "--format", "json"])
    runs = {run["name"]: run for run in json.loads(result.output)["runs"]}
    assert list(runs) == ["sft", "step3"]
    if bad is None:
        assert "act_loss is read, the actor's policy loss" in runs["step3"]["warnings"][0]
        return
    assert runs["step3"]["warnings"][0].startswith("its lines name 2 losses (act_loss, cri_loss) and none is the "
                                                   "total: cri_loss is read")
    assert [(i["kind"], i["step"]) for i in runs["step3"]["incidents"]] == [("nonfinite", 3186)]


def test_a_bar_whose_every_loss_goes_nan_is_read(tmp_path):
    """EveryVoice's Lightning bar logs five losses and no total; on CPU each went NaN at the second
    step (printed "nan.0"), and the paste was refused: "none is the total"."""
    names = ("pitch_loss", "energy_loss", "duration_loss")
    lines = [f"Epoch 0:   {s * 4}%|▎         | {s}/28 [00:12<05:50,  0.08it/s, v_num=base, "
             + ", ".join(f"training/{n}={'nan.0' if s > 1 else f'0.9{i}0'}" for i, n in enumerate(names)) + "]"
             for s in range(1, 5)]
    (run,) = discover_runs(_write(tmp_path / "bar.log", lines))
    assert "training/duration_loss is read, the first of them that goes non-finite" in run.warnings[0]
    (nan,) = analyze_run(run).incidents
    assert (nan.kind, nan.severity, nan.step) == ("nonfinite", "critical", 2)


def test_a_loss_a_script_printed_as_0_in_place_of_its_nan_is_the_nan(tmp_path):
    """deepspeech.pytorch says "received a nan loss, setting loss value to 0", skips the update and
    prints "Loss 0.0000" on the step's line: read as written, that was "loss collapsed from 40.6 to 0:
    the model sees its targets". The 0 is the NaN it said it had."""
    lines = []
    for i in range(4686, 4700):
        if i == 4692:
            lines += ["WARNING: received a nan loss, setting loss value to 0", "Skipping grad update"]
        loss = 0.0 if i == 4692 else 40 + i % 7
        lines.append(f"Epoch: [1][{i}/6051]\tTime 1.781 (1.857)\tData 0.005 (0.005)\tLoss {loss:.4f} (73.3981)\t")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert math.isnan(run.steps["loss"][4692]) and run.steps["loss"].drop(4692).gt(0).all()
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.severity, incident.step, incident.end_step) == ("nonfinite", "critical", 4692, 4692)
    assert incident.resolved


def test_markdown_bold_marks_in_a_paste_do_not_hide_its_nan(tmp_path):
    """An mmdetection issue's paste, written outside a code block, made its NaN bold: "acc:
    92.77**39, loss_bbox: nan, loss: nan**". The line was not read and the run was healthy. A banner's
    run of asterisks stays as printed."""
    lines = ["***** Running training *****"]
    for i, loss in enumerate((1.6522, 1.0415, None, 1.0595), start=1):
        tail = "acc: 92.77**39, loss_bbox: nan, loss: nan**" if loss is None else f"acc: 91.48, loss: {loss}"
        lines.append(f"2021-08-18 19:36:00,257 - mmdet - INFO - Epoch [1][{i * 50}/5808]\tlr: 1.000e-02, eta: 5:02:49, "
                     f"time: 0.784, data_time: 0.085, memory: 8104, loss_cls: 0.8811, {tail}")
    (run,) = discover_runs(_write(tmp_path / "paste.txt", lines))
    assert run.steps.index.tolist() == [50, 100, 150, 200] and run.steps["acc"][150] == pytest.approx(92.7739)
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.severity, incident.step) == ("nonfinite", "critical", 150)


def test_lines_pasted_as_inline_code_are_read(tmp_path):
    """NAFNet's issue pasted BasicSR's lines each in backticks: the closing one glued to the last
    value ("l_pix: -2.8745e+01`") made three of four lines lack their loss. A code block's fence and
    a backtick inside a line stay."""
    lines = ["```"] + [f"`2022-06-03 03:0{i}:12,848 INFO: [NAFNe..][epoch:{200 + i}, iter:{70_400 + 200 * i:8,d}, "
                       f"lr:(7.242e-04,)] [eta: 15:02:14, time (data): 0.399 (0.008)] l_pix: {loss:.4e}`"
                       + " " * (i % 2) for i, loss in enumerate((-28.745, -29.588, -28.007, float("nan")))] + ["```"]
    (run,) = discover_runs(_write(tmp_path / "paste.txt", lines))
    assert run.steps["loss"].iloc[:3].tolist() == [-28.745, -29.588, -28.007]
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.step) == ("nonfinite", 71_000)


def test_wetts_cv_lines_are_the_evaluations_not_training_steps(tmp_path):
    """WeTTS prints "Epoch 0 [CV] progress 290/341 loss nan ..." for its evaluation's batches (a NaN
    where a batch has no target of a head) beside "[TRAIN]" lines: read as training steps, the
    evaluation's NaN was a critical non-finite loss of a run whose loss fell."""
    lines = [f"Epoch 0 [TRAIN] progress {i}/2754 loss {0.9 - i / 20000:.6f} polyphone_loss 0.45 prosody_loss 0.6"
             for i in range(0, 2750, 10)]
    lines += [f"Epoch 0 [CV] progress {i}/341 loss nan polyphone_loss nan prosody_loss 0.56" for i in range(0, 341, 10)]
    lines += [f"Epoch 1 [TRAIN] progress {i}/2754 loss {0.7 - i / 20000:.6f} polyphone_loss 0.44 prosody_loss 0.6"
              for i in range(0, 300, 10)]
    report = analyze_run(discover_runs(_write(tmp_path / "train.log", lines))[0])
    assert not [i for i in report.incidents if i.kind == "nonfinite"] and report.verdict.value == "healthy"


def test_hifigan_steps_lines(tmp_path):
    """HiFi-GAN's "Steps : N, Gen Loss Total : X, Mel-Spec. Error : Y, s/b : T" (its issue: "a
    learning loss explosion occurred", 6.5e7 then nan printed " nan") was "logs Steps, s/b, Error,
    Total but no loss"."""
    values = [101.3, 135.1, 106.8, 94.1, 141.4, 196.5, 64922832.0, 199.7] + [float("nan")] * 4
    lines = ["Epoch: 1"] + [f"Steps : {i * 5}, Gen Loss Total : {v:4.3f}, Mel-Spec. Error : {1.8:4.3f}, "
                            f"s/b : 0.454" for i, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "hifigan" and run.steps.index[-1] == 55 and run.steps["mel_error"].eq(1.8).all()
    found = {(i.kind, i.severity, i.step) for i in analyze_run(run).incidents}
    # (196.5 after 141.4 stays within the paste's own spread of 94-141: the explosion is at step 30)
    assert found == {("loss_spike", "critical", 30), ("nonfinite", "critical", 40)}, found


def test_trainer_dicts_a_paste_opens_with_above_the_first_bar_keep_their_steps(tmp_path):
    """A VG-LLM issue's paste starts mid-run: the dicts of steps 50 and 60, then the bar's draws 60
    to 70, then step 70's dict (loss 8195.8, grad_norm nan) and nothing after. Both first dicts took
    the bar's 60 ("every rank printing?") and the last one 61. One step printed twice (LLaMA-Factory's
    line and the Trainer's dict, the same loss) still shares its draw."""
    bar = "  1%|▏         | {n}/4967 [13:53<17:02:36, 12.53s/it]"
    lines = ["{'loss': 14.6804, 'grad_norm': 86.93, 'learning_rate': 3.3e-06, 'epoch': 0.01}",
             "{'loss': 14.3597, 'grad_norm': 90.60, 'learning_rate': 4.0e-06, 'epoch': 0.01}"]
    lines += [bar.format(n=n) for n in range(60, 71)]
    lines += ["{'loss': 8195.7664, 'grad_norm': nan, 'learning_rate': 4.7e-06, 'epoch': 0.01}"]
    (run,) = discover_runs(_write(tmp_path / "paste.txt", lines))
    assert run.steps["loss"].to_dict() == {50: 14.6804, 60: 14.3597, 70: 8195.7664}
    assert not any("print their loss" in w for w in run.warnings)
    twice = ["[INFO|callbacks:157] >> {'loss': 14.3597, 'learning_rate': 4.0e-06, 'epoch': 0.01}", lines[1]]
    (run,) = discover_runs(_write(tmp_path / "twice.txt", twice + lines[2:]))
    assert run.steps["loss"].dropna().index.tolist() == [60, 70]


_TF_NAN_TRACEBACK = ["Traceback (most recent call last):", '  File "train.py", line 184, in <module>',
                     "    tf.app.run()"]


@pytest.mark.parametrize("lines, step", [
    # the TF Object Detection API's first step, then its check_numerics error
    (["INFO:tensorflow:global step 1: loss = 12.6485 (3.511 sec/step)",
      "I1013 12:07:05.569523 140401173534464 tf_logging.py:116] global step 1: loss = 12.6485 (3.511 sec/step)",
      "INFO:tensorflow:Error reported to Coordinator: <class 'tensorflow.python.framework.errors_impl."
      "InvalidArgumentError'>, LossTensor is inf or nan. : Tensor had NaN values"], 2),
    # tensor2tensor's last loss line, quoted, then the NanTensorHook's error
    (["> INFO:tensorflow:loss = 1.8717, step = 31601 (182.200 sec)",
      "> INFO:tensorflow:Saving checkpoints for 31622 into /tmp/model.ckpt.",
      "> ERROR:tensorflow:Model diverged with loss = NaN.", *("> " + line for line in _TF_NAN_TRACEBACK)], 31602),
    # no step line at all: each logger's copy of the error is one failure
    (["INFO:tensorflow:examples/sec: 11.7567", "ERROR:tensorflow:Model diverged with loss = NaN.",
      "E0402 11:01:06.344348 140192889546560 basic_session_run_hooks.py:760] Model diverged with loss = NaN.",
      *_TF_NAN_TRACEBACK,
      "tensorflow.python.training.basic_session_run_hooks.NanLossDuringTrainingError: NaN loss during training."], 1),
    # Composer's NaNMonitor; DiffWave's check names its step
    (["[batch=16/625]: Train loss/train/total: 2.31", "RuntimeError: Train loss contains a NaN."], None),
    (["Epoch 3: 100%|##########| 120/120 [00:31<00:00, 3.85it/s]",
      "RuntimeError: Detected NaN loss at step 36120."], 36120),
])
def test_a_paste_of_one_step_line_or_none_and_the_error_that_the_loss_went_nan(tmp_path, lines, step):
    """TensorFlow's issues: a paste of the step line before the NaN (or none) and the error that
    stopped the run ("LossTensor is inf or nan", "Model diverged with loss = NaN.",
    NanLossDuringTrainingError) was "not a log format": one record line is under a paste's least,
    and the error lines were no event. Named on its own, such a file is read: a critical non-finite
    loss; in a directory walk beside another log it is no run, alone it is read as named."""
    (tmp_path / "paste").mkdir()
    path = _write(tmp_path / "paste" / "train.txt", lines)
    code, report = _analyze(str(path))
    (run,) = report["runs"]
    assert code == 0 and run["verdict"] == "unhealthy", report
    (incident,) = [i for i in run["incidents"] if i["kind"] == "nonfinite"]
    assert incident["severity"] == "critical" and (step is None or incident["step"] == step)
    _write(tmp_path / "paste" / "other.log", [f"step {s} | loss {2.5 - s / 100:.3f}" for s in range(1, 30)])
    code, report = _analyze(str(tmp_path / "paste"))
    assert [run["path"] for run in report["runs"]] == [str(tmp_path / "paste" / "other.log")]


@pytest.mark.parametrize("printed", ["nan", ""])
def test_a_cyclegan_line_cut_in_a_paste_is_no_printed_nan(tmp_path, printed):
    """A CycleGAN issue's paste ends in a line cut after "G_B: 150." (no cycle_B, no idt_B): the
    generator's terms summed to NaN there and it was a critical non-finite loss. A term printed as
    nan still is one; a term not printed leaves the line without a sum, with a warning."""
    terms = ("D_A", "G_A", "cycle_A", "idt_A", "D_B", "G_B", "cycle_B", "idt_B")
    lines = [f"(epoch: 1, iters: {it}, time: 0.253, data: 0.003) "
             + " ".join(f"{t}: {0.2 + 0.01 * i:.3f}" for i, t in enumerate(terms)) for it in range(100, 1100, 100)]
    last = f"(epoch: 2, iters: 100, time: 0.253, data: 0.309) D_A: 61.812 G_A: 108.169 cycle_A: 0.783 idt_A: 0.103 " \
           "D_B: 86.232 G_B: 150."
    lines.append(last + (" cycle_B: nan idt_B: 0.05" if printed else ""))
    (run,) = discover_runs(_write(tmp_path / "loss_log.txt", lines))
    assert run.steps["loss_d"].iloc[-1] == pytest.approx(61.812 + 86.232)
    assert math.isnan(run.steps["loss"].iloc[-1])
    incidents = analyze_run(run).incidents
    cut = [w for w in run.warnings if "lack a term" in w]
    if printed:
        assert not cut and [(i.kind, i.severity, i.step) for i in incidents] == [("nonfinite", "critical", 1100)]
    else:
        assert cut == ["1 line(s) lack a term of the loss (cycle_b, idt_b): cut in a paste or not printed there; "
                       "their sum is not read"]
        assert not [i for i in incidents if i.kind == "nonfinite"]

def test_several_loss_lines_an_epoch_with_no_step_are_each_a_step(tmp_path):
    """PaddleOCR without its global_step: "epoch: [1/10], lr: ..., loss: 38.9" every N iterations.
    The epoch was read as the step, so 46 lines became 10 and the lowest losses vanished silently."""
    lines = []
    values = [40 * np.exp(-i / 8) + 3 for i in range(46)]
    for i, v in enumerate(values):
        lines.append(f"[2025/07/22 00:22:10] ppocr INFO: epoch: [{i // 5 + 1}/10], lr: 0.000024, acc: 0.1, "
                     f"CTCLoss: {v - 2:.6f}, SARLoss: 2.0, loss: {v:.6f}, eta: 4:30:02")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["loss"].tolist() == pytest.approx([round(v, 6) for v in values])
    assert any(w.startswith("46 loss lines over 10 epochs") for w in run.warnings)
    # One line an epoch: the epoch is the step, as before.
    (run,) = discover_runs(_write(tmp_path / "epochs.log", lines[::5]))
    assert run.steps.index.tolist() == list(range(1, 11)) and not any("loss lines over" in w for w in run.warnings)


def test_hf_dicts_with_quoted_text_values_make_no_column_per_word(tmp_path):
    """ms-swift prints its dicts with quoted values, text ones with spaces in them ('remaining_time':
    '3h 35m 58s'): each word became a column (3,000 empty ones over a run), and the dict's pairs
    after it could shift."""
    lines = [f"{{'loss': '{2.0 - s / 100:.3f}', 'grad_norm': '32.75', 'learning_rate': '4e-08', "
             f"'global_step/max_steps': '{s}/40', 'elapsed_time': '{s}s', 'remaining_time': '3h {s}m 58s', "
             f"'tokens_this_step': '919', 'memory(GiB)': '64.91'}}" for s in range(1, 41)]
    (run,) = discover_runs(_write(tmp_path / "stdout.log", lines))
    assert run.steps["loss"].iloc[0] == 1.99 and run.steps["grad_norm/total"].eq(32.75).all()
    assert not [c for c in run.steps.columns if c[0].isdigit()], list(run.steps.columns)
    assert run.steps["tokens_this_step"].eq(919).all()


def test_a_stuck_loss_that_differs_in_its_8th_digit_is_still_stuck():
    """DINO's log.txt, loss stuck at ln(65536) (its output head's size): an epoch's mean of the same
    float32 loss came out 11.090352058 then 11.090352177, and the stretch was called over."""
    values = [11.090352058410645] * 10 + [11.090352177619934]
    (incident,) = stuck_loss_incidents(_series(values, every=1))
    assert incident.details["rows"] == 11 and incident.details["resolved"] is False
    assert "ln(65536)" in incident.message


def test_a_bracketed_iteration_count_and_a_loss_total_among_other_losses(tmp_path):
    """A research script's print: "Iter: [600/1348]  Freq 248.2  loss_source 2.152 ... loss_total
    116.117": the step is in brackets, and of its several losses loss_total is the training loss."""
    values = ["116.117", "114.824", "113.704", "112.419", "111.489", "110.485", "nan", "nan"]
    lines = [f"  Iter: [{600 + 100 * i}/1348]   Freq 248.2   loss_source 2.152   loss_st 0.781   "
             f"loss_ml 3458.865   loss_target 0.000   loss_total {v}   [2019-10-31 09:07:41]" for i, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["loss"].index.tolist() == list(range(600, 1400, 100))
    assert run.steps["loss"].iloc[0] == 116.117
    report = analyze_run(run)
    assert [(i.kind, i.step, i.end_step) for i in report.incidents] == [("nonfinite", 1200, 1300)]


def test_an_epoch_line_with_a_nan_validation_loss_warns(tmp_path):
    """text_gcn's print: "Epoch: 0111 train_loss= 0.00122 train_acc= 0.04547 val_loss= nan ..." on
    every epoch: the validation loss is read beside the training loss, its NaN a warning."""
    lines = [f"Epoch: {e:04d} train_loss= {0.0012 + e * 1e-6:.5f} train_acc= 0.04547 val_loss= nan "
             f"val_acc= 0.06101 time= 8.46537" for e in range(111, 121)]
    (run,) = discover_runs(_write(tmp_path / "gcn.log", lines))
    assert run.steps["val_loss"].isna().all() and run.steps["loss"].notna().all()
    report = analyze_run(run)
    (incident,) = report.incidents
    assert (incident.kind, incident.severity, incident.step) == ("nonfinite", "warning", 111)
    assert incident.message.startswith("val_loss non-finite (nan) at 10 of 10 evaluations")


def test_an_iteration_count_that_starts_again_each_epoch_goes_on_across_epochs(tmp_path):
    """A script printing "batch count: 280/308, iter: 280, ..., loss: X" whose iter starts again at
    0 each epoch: the NaN of the 9th epoch's 60th iteration is the last step, not one sorted in
    among the 8th epoch's (the verdict was 'recovered')."""
    rows = [(8, 280, "0.089525"), (8, 300, "0.088858"), (9, 0, "0.093358"), (9, 20, "0.092165"),
            (9, 40, "0.090984"), (9, 60, "nan")]
    lines = [f"[2023-03-10 20:01:35,500]     batch count: {i}/308, iter: {i}, bpp_loss: 0.012437, "
             f"xyz_loss: 0.077088, loss: {v}, aux_loss: 164.087860" for _, i, v in rows]
    lines.insert(2, "[2023-03-10 20:01:38,652] Training at epoch 9 (total 9) with lr 0.0008 and aux_lr 0.005")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    # (each epoch at the count the line above it names: 8 x 320 + 280, ..., 9 x 320 + 60)
    assert run.steps["loss"].index.tolist() == [2840, 2860, 2880, 2900, 2920, 2940]
    report = analyze_run(run)
    assert report.verdict == "unhealthy" and report.final_loss != report.final_loss  # NaN


def test_a_resumed_run_whose_steps_fall_back_is_no_new_epoch(tmp_path):
    lines = [f"step {s} loss {3.0 - s / 1000:.4f}" for s in range(0, 1001, 100)]
    lines += [f"step {s} loss {3.0 - s / 1000:.4f}" for s in range(800, 1201, 100)]  # resumed from 800
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.max() == 1200


_ULTRALYTICS_HEADER = "      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size"


def _ultralytics_console(epochs: int, nan_from: int | None = None, redraws: int = 1, header_once: bool = False) -> str:
    """Ultralytics' console as its trainer prints it: per epoch its header, the training bar's row
    (box, cls and dfl losses: running means over the epoch, each ``\\r`` redraw a new one), then
    the validation table under its own header. ``header_once``: a paste that kept the first."""
    out = []
    for e in range(1, epochs + 1):
        draws = []
        for i in range(1, redraws + 1):
            losses = [1.5 - e / 50 + i / 1000, 3.0 - e / 20, 1.4 - e / 60]
            cells = ["nan" if nan_from and e >= nan_from else f"{v:.4g}" for v in losses]
            pct = i * 100 // redraws
            draws.append(f"{e:>11}/{epochs}      2.25G " + " ".join(f"{c:>10}" for c in cells)
                         + f"         45        640: {pct:3d}%|#####     | {i}/{redraws} [00:05<00:00,  2.95it/s]")
        out += ["", _ULTRALYTICS_HEADER] if e == 1 or not header_once else []
        out += ["\r".join(draws),
                "                 Class     Images  Instances      Box(P          R      mAP50  mAP50-95): "
                "100%|##########| 2/2 [00:00<00:00,  4.01it/s]",
                "                   all         30        120      0.123      0.234      0.111     0.0567"]
    return "\n".join(out) + "\n"


def test_two_ultralytics_runs_of_different_lengths_in_one_paste(tmp_path):
    """A YOLOv8 run's epochs 26-32 of 100 (stopped early), then another run's "150/150": read as one run, "epochs 8
    (26..150)", its final loss the second run's. A step written N/M whose M changes starts another training."""
    first = _ultralytics_console(32).split("\n")
    second = [line.replace("/32 ", "/150 ").replace("32/150", "150/150") for line in first
              if "32/32 " in line or line.strip() == "" or "Epoch    GPU_mem" in line]
    path = tmp_path / "train.txt"
    pasted = first[-5 * 7 - 1:] + ["Stopping training early.", ""] + second[-3:]  # epochs 26-32, then 150
    path.write_text("\n".join(pasted) + "\n", encoding="utf-8")
    runs = discover_runs(path)
    assert [run.steps.index.tolist() for run in runs] == [list(range(26, 33)), [150]]
    assert "2 trainings of 32, then 150 epochs" in runs[0].warnings[0]

@pytest.mark.parametrize("redraws, header_once", [(1, False), (16, False), (1, True), (16, True)])
def test_ultralytics_console_sums_the_bars_losses_per_epoch(tmp_path, redraws, header_once):
    path = tmp_path / "train.txt"
    path.write_text(_ultralytics_console(30, nan_from=22, redraws=redraws, header_once=header_once), encoding="utf-8")
    code, report = _analyze(str(path))
    (run,) = report["runs"]
    assert code == 0 and run["source"] == "space_table" and run["steps"] == 30
    assert any("loss is the sum of train/box_loss + train/cls_loss + train/dfl_loss" in w for w in run["warnings"])
    (incident,) = run["incidents"]  # the validation table's rows are not this table's
    assert (incident["kind"], incident["severity"], incident["step"], incident["end_step"]) == \
        ("nonfinite", "critical", 22, 30)
    path.write_text(_ultralytics_console(30, redraws=redraws, header_once=header_once), encoding="utf-8")
    code, report = _analyze(str(path))
    (run,) = report["runs"]
    assert run["verdict"] == "healthy" and run["incidents"] == [] and run["steps"] == 30
    # The epoch's last draw: its mean over every batch.
    last = (1.5 - 30 / 50 + redraws / 1000) + (3.0 - 30 / 20) + (1.4 - 30 / 60)
    assert run["final_loss"] == pytest.approx(last, abs=1e-3)


def test_fastai_epoch_table(tmp_path):
    rows = ["epoch     train_loss  valid_loss  accuracy  time    "]
    rows += [f"{e:<10}{('nan' if e >= 9 else f'{0.5 / (e + 1):.6f}'):<12}{0.4 / (e + 1):<12.6f}0.900000  00:12     "
             for e in range(12)]
    path = _write(tmp_path / "fit.txt", rows)
    code, report = _analyze(str(path))
    (run,) = report["runs"]
    assert run["source"] == "space_table" and run["steps"] == 12
    assert [(i["kind"], i["severity"], i["step"], i["end_step"]) for i in run["incidents"]] == \
        [("nonfinite", "critical", 9, 11)]


@pytest.mark.parametrize("lines", [
    # two losses, no total, no progress bar: which one is the loss is the user's choice
    ["step  loss_ce  loss_kl", *[f"{s}  {2 - s / 100}  0.1" for s in range(10)]],
    # a table of settings
    ["name  value", "lr  0.1", "wd  0.01", "epochs  3"],
])
def test_tables_that_are_not_a_run_are_not_claimed(tmp_path, lines):
    path = _write(tmp_path / "t.txt", lines)
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and "space_table" not in result.output


def _losses(n: int = 60, nan_from: int = 45) -> list[str]:
    return ["nan" if i >= nan_from else f"{3.0 * np.exp(-i / 30) + 1.0:.4f}" for i in range(1, n + 1)]


@pytest.mark.parametrize("name,line,first_step,every", [
    # the diffusers training examples: progress_bar.set_postfix(step_loss=..., lr=...), keys sorted
    ("diffusers", "Steps: {pct:3d}%|##        | {i}/60 [00:{i:02d}<01:00, 1.67it/s, lr=1e-05, step_loss={v}]", 1, 1),
    # kohya's sd-scripts: the bar's postfix names its loss avr_loss
    ("kohya", "steps: {pct:3d}%|##        | {i}/60 [00:{i:02d}<01:00, 1.67it/s, avr_loss={v}]", 1, 1),
    # OpenNMT-py: xent is the loss (ppl its exponential)
    ("onmt", "[2023-01-01 10:00:00,000 INFO] Step {s}/200000; acc: 10.5; ppl: 50.2; xent: {v}; lr: 0.00001; "
             "1000/2000 tok/s; {i} sec", 100, 100),
    # torchtune's bar: epoch|global step|Loss
    ("torchtune", "1|{i}|Loss: {v}: {pct:3d}%|##        | {i}/60 [00:{i:02d}<01:00, 1.00it/s]", 1, 1),
    # Lightning's bar for self.log("train_loss", on_step=True, on_epoch=True): the step value
    ("lightning_step", "Epoch 0: {pct:3d}%|##        | {i}/60 [00:05<00:06,  8.5it/s, v_num=0, "
                       "train_loss_step={v}, train_loss_epoch=2.400]", 1, 1),
    # a script printing its metrics dict each epoch
    ("dict", "{{'epoch': {i}, 'train_loss': {v}, 'lr': 0.001}}", 1, 1),
    # CLU's LoggingWriter (JAX)
    ("clu", "I1203 10:00:00.000 140 train.py:300] [{s}] train/loss={v}, train/learning_rate=0.001", 100, 100),
    # absl-logged JAX loops: the pairs apart by spaces
    ("jax_absl", "I1203 10:00:00.000 140 train.py:200] [{s}] loss={v} learning_rate=0.001", 100, 100),
    # a JSON record after a logger's prefix
    ("json_after_prefix", '2024-01-01 10:00:00 INFO {{"step": {s}, "train_loss": {v}, "lr": 0.0003}}', 100, 100),
    # a reinforcement-learning script: the episode is the step
    ("episodes", "Episode {i}\tReward: 10.0\tLoss: {v}", 1, 1),
    # a loss, then the count it was taken at
    ("after_batches", "Loss: {v} after {s} batches", 100, 100),
    # pytorch/examples fast_neural_style: samples seen in the epoch, the total is the loss
    ("fast_neural_style", "Mon Jan  1 10:00:00 2024\tEpoch 1:\t[{s}/83000]\tcontent: 1.5\tstyle: 2.5\ttotal: {v}",
     100, 100),
    # pytorch/examples word_language_model: its "ms/batch 45.60" is a time, not a batch count
    ("word_lm", "| epoch   1 | {s2:5d}/12000 batches | lr 20.00 | ms/batch 45.60 | loss {v} | ppl 2448.66",
     200, 200),
    # pytorch/examples super_resolution: the count in parentheses
    ("super_resolution", "===> Epoch[1]({i}/60): Loss: {v}", 1, 1),
    # the PyTorch quickstart tutorial: the samples seen in the epoch after the loss
    ("quickstart", "loss: {v}  [{s:>5d}/60000]", 100, 100),
    # a script printing its loss alone: the lines are numbered in order
    ("loss_alone", "loss: {v}", 1, 1),
    ("training_loss_alone", "Training loss = {v}", 1, 1),
    # ... after a logger's time, level and name
    ("loss_alone_logged", "2024-01-01 12:00:00,123 - INFO - loss: {v}", 1, 1),
    ("loss_alone_basic_config", "INFO:__main__:Training loss = {v}", 1, 1),
    ("loss_alone_time", "[12:00:00] loss = {v}", 1, 1),
    # a tqdm bar whose description holds the loss: the bar's count is the step
    ("tqdm_description", "loss={v}: {pct:3d}%|##        | {i}/60 [00:{i:02d}<01:00,  1.00it/s]", 1, 1),
    # fairseq-hydra-train with --log-format json: the logger's name in brackets
    ("fairseq_hydra", '[2024-01-01 10:00:00,000][train_inner][INFO] - {{"epoch": 1, "update": 0.1, "loss": "{v}", '
                      '"nll_loss": "1.2", "num_updates": "{s}", "lr": "0.0001", "gnorm": "1.2", "loss_scale": "128"}}',
     100, 100),
    # a script's own step forms: "Steps:", "iters", the step in brackets, "[N/TOTAL]" at the line's start
    ("steps_plural", "Steps: {i}, Loss: {v}", 1, 1),
    ("iters", "iters {s} loss {v}", 100, 100),
    ("bracketed_step", "[{s}] loss: {v}", 100, 100),
    ("bracketed_count", "[{i}/60] loss: {v}", 1, 1),
    # a script that counts batches (not inside an epoch here), or updates
    ("batch_count", "Batch {i}, Loss: {v}", 1, 1),
    ("updates", "update {s} | loss {v} | lr 0.0001", 100, 100),
    # DCGAN's print kept by a script with one loss: a count inside the epoch (here one epoch, from 1)
    ("dcgan_one_loss", "[1/5][{i}/60]\tLoss: {v}", 1, 1),
    # ESPnet2's trainer: the epoch, then the batch count inside it
    ("espnet", "[host] 2024-01-01 10:00:00,000 (trainer:732) INFO: {i}epoch:train:1-100batch: iter_time=1.0e-04, "
               "loss_ctc=50.1, loss_att={v}, acc=0.1, loss={v}, backward_time=0.1, optim0_lr0=1.0e-05", 100, 100),
])
def test_more_tools_progress_lines(tmp_path, name, line, first_step, every):
    path = _write(tmp_path / f"{name}.txt", [line.format(i=i, s=i * 100, s2=i * 200, pct=i * 100 // 60, v=v)
                                            for i, v in enumerate(_losses(), start=1)])
    code, report = _analyze(str(path))
    (run,) = report["runs"]
    assert code == 0 and run["steps"] == 60, run
    (incident,) = run["incidents"]
    assert (incident["kind"], incident["severity"], incident["step"], incident["end_step"]) == \
        ("nonfinite", "critical", 45 * every + first_step - every, 60 * every + first_step - every)
    # kohya's avr_loss is an average over recent steps: said so, as for an inferred avg_loss.
    averaged = [w for w in run["warnings"] if "a one-step spike shows smaller" in w]
    assert averaged == (["loss read from 'avr_loss' (no key of the lines is named loss): an average over steps, in "
                         "which a one-step spike shows smaller"] if name == "kohya" else [])


@pytest.mark.parametrize("logged", ["train_loss", "train_loss_step", None])
def test_lightning_1_bar_reads_the_step_loss_not_the_bars_running_mean(tmp_path, logged):
    # Lightning 1.x's tqdm bar: "..., 8.50it/s, loss=<mean of the last 20 losses>, v_num=0,
    # train_loss=<this step's>]"; the mean shows a spike at a twentieth of its height.
    losses = [3.0 - 0.01 * i for i in range(60)]
    losses[30] = 9.0
    draws = []
    for i, v in enumerate(losses, start=1):
        mean = sum(losses[max(0, i - 20):i]) / min(i, 20)
        extra = "" if logged is None else f", {logged}={v:.3f}" + (", train_loss_epoch=2.900" if "step" in logged else "")
        draws.append(f"\rEpoch 0: {i * 100 // 60:3d}%|##        | {i}/60 [00:05<00:06,  8.50it/s, loss={mean:.3f}, "
                     f"v_num=0{extra}]")
    path = tmp_path / "pl.log"
    path.write_text("".join(draws) + "\n", encoding="utf-8")
    (run,) = discover_runs(path)
    said = [w for w in run.warnings if "running mean" in w]
    if logged is None:  # the bar's loss is all there is: it is read, and the report says what it is
        assert run.steps["loss"].iloc[-1] == round(sum(losses[-20:]) / 20, 3)
        assert len(said) == 1 and "a twentieth of its height" in said[0], run.warnings
        return
    assert not said, run.warnings
    assert run.steps["loss"].tolist() == [round(v, 3) for v in losses]
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("outlier_batch", 31)]


def _nnunet(values: list[str], val_values: list[str]) -> list[str]:
    t = "2023-05-01 10:00:00.000000: "
    lines = [t + "Using optimizer SGD"]
    for epoch, (v, w) in enumerate(zip(values, val_values)):
        lines += [t, f"{t}Epoch {epoch}", f"{t}Current learning rate: 0.00999", f"{t}train_loss {v}",
                  f"{t}val_loss {w}", f"{t}Pseudo dice [0.8, 0.7]", f"{t}Epoch time: 120.1 s"]
    return lines


def test_nnunet_training_log_and_an_evaluation_nan_that_follows_the_training_nan(tmp_path):
    # nnU-Net's loss has a Dice term: it is below zero once training works.
    train = [f"{-0.9 + 0.8 * np.exp(-e / 20):.4f}" for e in range(45)] + ["nan"] * 15
    path = _write(tmp_path / "training_log_2023_5_1_10_00_00.txt", _nnunet(train, train))
    code, report = _analyze(str(path))
    (run,) = report["runs"]
    assert run["source"] == "nnunet" and run["steps"] == 60
    loss, val = run["incidents"]
    assert (loss["kind"], loss["severity"], loss["step"], loss["end_step"]) == ("nonfinite", "critical", 45, 59)
    assert (val["kind"], val["severity"], val["step"]) == ("nonfinite", "warning", 45)
    assert "the training loss was non-finite then too" in val["message"] and "is finite" not in val["message"]
    # An evaluation NaN beside a finite training loss keeps its own explanation.
    path = _write(tmp_path / "training_log_2.txt", _nnunet(train[:45], train[:40] + ["nan"] * 5))
    code, report = _analyze(str(path))
    (val,) = report["runs"][0]["incidents"]
    assert val["severity"] == "warning" and "the training loss is finite: the evaluation's own NaN, a mean over " \
        "nothing (an empty validation split or mask" in val["message"]


def test_an_nnunet_epoch_holding_a_python_warnings_indented_line(tmp_path):
    """numpy's two-line warning before a NaN epoch's losses ("RuntimeWarning: invalid value encountered in scalar
    divide", then its indented source line) cut the epoch there: the run, NaN from epoch 0, was refused as 'no loss
    logged by nnunet: only lr were read'."""
    lines = ["2024-07-09 13:31:30.147868: ", "2024-07-09 13:31:30.162810: Epoch 0",
             "2024-07-09 13:31:30.168464: Current learning rate: 0.01",
             r"D:\nnunetv2\training\nnUNetTrainer\nnUNetTrainer.py:1119: RuntimeWarning: invalid value encountered in "
             "scalar divide",
             "  global_dc_per_class = [i for i in [2 * i / (2 * i + j + k) for i, j, k in zip(tp, fp, fn)]]",
             "2024-07-09 13:35:54.727426: train_loss nan", "2024-07-09 13:35:54.740389: val_loss nan",
             "2024-07-09 13:35:54.745506: Pseudo dice [nan, 0.0, 0.0]",
             "2024-07-09 13:35:54.754245: Epoch time: 264.58 s"]
    (run,) = discover_runs(_write(tmp_path / "training_log_2024_7_9_13_31_29.txt", lines))
    assert run.source == "nnunet" and run.steps["loss"].isna().all() and run.steps.index.tolist() == [0]
    (nan,) = [i for i in analyze_run(run).incidents if i.kind == "nonfinite" and i.details["metric"] == "loss"]
    assert nan.step == 0 and nan.severity.value == "critical"

@pytest.mark.parametrize("version", ["v2", "v1"])
def test_nnunet_lines_ending_in_a_space_and_prints_without_a_time(tmp_path, version):
    """nnU-Net v2's print joins its arguments with a space: pasted from a console, each line ends in
    one ("train_loss 0.3602 "): "no nnunet step lines found" (nnUNet#2290). A data loader's "using
    pin_memory on device 0" between an epoch's lines dropped that epoch (nnUNet#2140); the epoch's
    lr was never read. nnU-Net v1 printed "epoch:  6" without a time, "train loss : -0.6584",
    "validation loss: -0.7226", "lr: 0.009937": read as lines without a step."""
    t = "2024-06-12 18:20:21.593942: "
    losses = [0.3602, 0.1213, 0.5986, 0.4011]
    lines = [t + "Using optimizer SGD "]
    for epoch, loss in enumerate(losses):
        lr = 0.01 * (1 - epoch / 1000)
        if version == "v2":
            lines += [t + " ", f"{t}Epoch {epoch} ", f"{t}Current learning rate: {lr:.5g} ", "using pin_memory on device 0",
                      f"{t}train_loss {loss} ", f"{t}val_loss {loss + 0.1:.4f} ", f"{t}Pseudo dice [0.0, 0.0] ",
                      f"{t}Epoch time: 354.87 s "]
        else:
            lines += [t, f"epoch:  {epoch}", f"{t}train loss : {-loss:.4f}", f"{t}validation loss: {-loss - 0.1:.4f}",
                      f"{t}Average global foreground Dice: [0.8837]", f"{t}lr: {lr:.6f}", f"{t}This epoch took 137.1 s", ""]
    (run,) = discover_runs(_write(tmp_path / "training_log.txt", lines))
    sign = 1 if version == "v2" else -1
    assert run.source == "nnunet" and run.steps.index.tolist() == [0, 1, 2, 3]
    assert run.meta["step_unit"] == "epoch"  # a row an epoch, its means: the report speaks of epochs
    assert run.steps["loss"].tolist() == pytest.approx([sign * loss for loss in losses])
    assert run.steps["val_loss"].tolist() == pytest.approx([sign * (loss + 0.1) for loss in losses])
    assert run.steps["lr"].tolist() == pytest.approx([0.01 * (1 - e / 1000) for e in range(4)], rel=1e-4)


def test_nnunet_starting_its_network_over_after_100_epochs_of_dice_0_says_so(tmp_path):
    """nnU-Net v1 at epoch 100 with a foreground Dice of 0 reinitializes the network and lowers its momentum, and says
    so in its log: 'healthy', no word of it."""
    t = "2020-06-19 00:32:05.059271: "
    lines = []
    for epoch in (99, 100):
        lines += [t, f"epoch:  {epoch} ", f"{t}train loss : {-0.34 - epoch / 1000:.4f} ",
                  f"{t}validation loss: -0.3713 ", f"{t}Average global foreground Dice: [0.0] ", f"{t}lr: 0.009086 "]
    lines.append(f"{t}At epoch 100, the mean foreground Dice was 0. This can be caused by a too high momentum. High "
                 "momentum (0.99) is good for datasets where it works, but sometimes causes issues such as this one. "
                 "Momentum has now been reduced to 0.95 and network weights have been reinitialized")
    (run,) = discover_runs(_write(tmp_path / "training_log.txt", lines))
    assert any(w.startswith("at epoch 100 nnU-Net reinitialized the network's weights") for w in run.warnings)


def test_many_header_like_lines_are_not_each_followed_by_a_pass_over_the_text(tmp_path, monkeypatch):
    from sentinel.analyze.loaders import space_table

    passes = []
    real_rows = space_table._rows
    monkeypatch.setattr(space_table, "_rows", lambda *a: passes.append(1) or real_rows(*a))
    path = _write(tmp_path / "words.txt", [f"step loss w{i}" for i in range(5000)])
    assert not space_table.sniff(path)
    assert len(passes) == space_table.MAX_HEADERS


def _sb3_block(it: int, rows: dict[str, str]) -> list[str]:
    """One dump of Stable-Baselines3's logger as its HumanOutputFormat prints it."""
    out = ["-" * 41]
    for section in ("rollout/", "time/", "train/"):
        keys = {k.split("/", 1)[1]: v for k, v in rows.items() if k.startswith(section)}
        if keys:
            out.append(f"| {section:<23} | {'':<13} |")
            out += [f"|    {k:<20} | {v:<13} |" for k, v in keys.items()]
    return out + ["-" * 41]


def _sb3_log(blocks: int, train: Callable[[int], dict[str, str]], seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    lines = ["Using cpu device", "Wrapping the env with a `Monitor` wrapper"]
    for it in range(1, blocks + 1):
        rows = {"rollout/ep_len_mean": "200", "rollout/ep_rew_mean": f"{-1200 + 8 * it + rng.normal(0, 30):.3g}",
                "time/fps": "1234", "time/iterations": str(it), "time/total_timesteps": str(2048 * it)}
        if it > 1:  # PPO logs its training statistics from the second dump on
            rows.update({f"train/{k}": v for k, v in train(it).items()})
        lines += _sb3_block(it, rows)
    return lines


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stable_baselines3_ppo_whose_value_loss_grows_with_the_returns_is_healthy(tmp_path, seed):
    rng = np.random.default_rng(seed)

    def train(it: int) -> dict[str, str]:
        value = (2 + 28 * min(it / 200, 1)) * float(np.exp(rng.normal(0, 0.6)))  # follows the returns
        return {"approx_kl": "0.0123", "entropy_loss": "-1.41", "loss": f"{value / 2:.3g}",
                "policy_gradient_loss": "-0.0101", "value_loss": f"{value:.3g}"}

    path = _write(tmp_path / "ppo.txt", _sb3_log(300, train, seed))
    code, report = _analyze(str(path))
    (run,) = report["runs"]
    assert run["source"] == "sb3_console" and run["steps"] == 299 and run["verdict"] == "healthy"
    assert run["incidents"] == []
    assert any("reinforcement-learning run" in w for w in run["warnings"])


def test_stable_baselines3_nan_loss_and_an_algorithm_without_a_single_loss(tmp_path):
    path = _write(tmp_path / "dqn.txt", _sb3_log(40, lambda it: {
        "learning_rate": "0.0001", "loss": "nan" if it >= 30 else f"{1 / it:.3g}", "n_updates": str(it)}))
    code, report = _analyze(str(path))
    (incident,) = report["runs"][0]["incidents"]
    assert (incident["kind"], incident["severity"], incident["step"], incident["end_step"]) == \
        ("nonfinite", "critical", 30 * 2048, 40 * 2048)
    path = _write(tmp_path / "a2c.txt", _sb3_log(40, lambda it: {
        "entropy_loss": "-1.4", "policy_loss": "0.1", "value_loss": f"{it:.3g}"}))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1
    assert "no single loss among the Stable-Baselines3 keys (loss-like: train/entropy_loss, train/policy_loss, " \
           "train/value_loss); pass --loss-col <key>" in result.output
    code, report = _analyze(str(path), "--loss-col", "train/value_loss")
    assert code == 0 and report["runs"][0]["final_loss"] == 40


def test_a_space_table_with_a_repeated_column_name_is_read(tmp_path):
    path = _write(tmp_path / "t.txt", ["step  loss  loss", *[f"{s}  {2 - s / 100}  {3 - s / 100}" for s in range(10)]])
    code, report = _analyze(str(path))
    (run,) = report["runs"]
    assert code == 0 and run["source"] == "space_table" and run["final_loss"] == pytest.approx(1.91)


def _tb_points(n: int = 100, nan_from: int = 80) -> list[tuple[float, int, float]]:
    return [(1.7e9 + 10.5 * i, 10 * i, float("nan") if i >= nan_from else 3 * np.exp(-i / 50) + 1) for i in range(n)]


def test_a_scalar_downloaded_from_tensorboards_page_as_csv_or_json(tmp_path):
    points = _tb_points()
    csv = tmp_path / "run-version_0-tag-train_loss.csv"
    csv.write_text("Wall time,Step,Value\n" + "".join(f"{w},{s},{v}\n" for w, s, v in points))
    (tmp_path / "run-version_0-tag-train_loss.json").write_text(json.dumps([list(p) for p in points]))
    for path in sorted(tmp_path.iterdir()):
        code, report = _analyze(str(path))
        (run,) = report["runs"]
        assert (run["source"], run["name"], run["steps"]) == ("tensorboard_download", "version_0", 100)
        (incident,) = run["incidents"]
        assert (incident["kind"], incident["severity"], incident["step"]) == ("nonfinite", "critical", 800)
    # TensorBoard names the tag in the file name only: a renamed download is read as the loss, said so.
    renamed = tmp_path / "curve.csv"
    renamed.write_text(csv.read_text())
    code, report = _analyze(str(renamed))
    assert any("read as the loss" in w for w in report["runs"][0]["warnings"])


def test_a_tensorboard_download_of_the_learning_rate_alone_is_refused_and_the_loss_beside_it_read(tmp_path):
    rows = "".join(f"{w},{s},{1e-3}\n" for w, s, _ in _tb_points())
    (tmp_path / "run-.-tag-lr-AdamW.csv").write_text("Wall time,Step,Value\n" + rows)
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "run-.-tag-lr-AdamW.csv")])
    assert result.exit_code == 1
    assert "TensorBoard's download of the tag 'lr-AdamW' (lr) alone: nothing to judge without the loss" in result.output
    (tmp_path / "run-.-tag-Loss_train.csv").write_text(
        "Wall time,Step,Value\n" + "".join(f"{w},{s},{v}\n" for w, s, v in _tb_points(nan_from=200)))
    result = CliRunner().invoke(main, ["analyze", str(tmp_path)])
    assert result.exit_code == 0 and result.stdout.startswith("run-.-tag-Loss_train (tensorboard_download)")
    assert "lr-AdamW" in result.stderr


def _history(n: int = 35, nan_from: int = 30) -> dict[str, list[float]]:
    loss = [float("nan") if e >= nan_from else 3 * float(np.exp(-e / 10)) + 0.5 for e in range(n)]
    return {"loss": loss, "accuracy": [0.5] * n, "val_loss": [v + 0.1 for v in loss], "val_accuracy": [0.5] * n}


@pytest.mark.parametrize("form", ["json", "printed", "numpy2"])
def test_a_keras_history_dict_saved_or_printed(tmp_path, form):
    history = _history()
    if form == "json":
        text = json.dumps(history)
    elif form == "printed":
        text = str(history)
    else:  # NumPy 2 prints its scalars with their type
        text = "{" + ", ".join(f"'{k}': [" + ", ".join(f"np.float32({v})" for v in values) + "]"
                               for k, values in history.items()) + "}"
    path = tmp_path / "history.txt"
    path.write_text(text + "\n")
    code, report = _analyze(str(path))
    (run,) = report["runs"]
    assert (run["source"], run["steps"]) == ("history_dict", 35)
    loss, val = run["incidents"]
    assert (loss["kind"], loss["severity"], loss["step"], loss["end_step"]) == ("nonfinite", "critical", 31, 35)
    assert (val["kind"], val["severity"]) == ("nonfinite", "warning")


def test_a_history_dict_is_parsed_as_data_never_run(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / "history.txt"
    path.write_text("{'loss': [2.0, 1.5, __import__('pathlib').Path(%r).touch()]}\n" % str(marker))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and "not a history dict" in result.output
    assert not marker.exists()
    path.write_text(json.dumps({"acc": [0.1, 0.2, 0.3], "val_loss": [1.0, 0.9, 0.8]}))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1


def _sacred_run(folder, metrics: dict[str, tuple[list, list]]) -> None:
    """A run directory as Sacred's FileStorageObserver writes it (save_json: sort_keys, indent 2;
    json writes NaN as NaN), with the script's printed copy beside it."""
    folder.mkdir(parents=True)
    saved = {name: {"values": values, "steps": steps, "timestamps": ["2026-12-03T10:00:00.000000"] * len(values)}
             for name, (steps, values) in metrics.items()}
    (folder / "metrics.json").write_text(json.dumps(saved, sort_keys=True, indent=2))
    (folder / "run.json").write_text(json.dumps({"status": "COMPLETED", "experiment": {"name": "mnist"}}, indent=2))
    (folder / "config.json").write_text(json.dumps({"lr": 0.1, "seed": 1}, indent=2))
    (folder / "cout.txt").write_text("".join(f"step {s} loss 2.5\n" for s in range(50)))


def test_a_sacred_run_directory_is_one_run_read_from_its_metrics(tmp_path):
    steps = list(range(0, 3000, 10))
    loss = [float("nan") if s >= 2900 else 3 * float(np.exp(-s / 500)) + 0.5 for s in steps]
    _sacred_run(tmp_path / "my_runs" / "7", {"train.loss": (steps, loss), "val.loss": (steps[::10], loss[::10]),
                                             "lr": (steps, [0.1] * len(steps))})
    (tmp_path / "my_runs" / "_sources").mkdir()
    code, report = _analyze(str(tmp_path / "my_runs"))
    (run,) = report["runs"]
    assert (run["name"], run["source"], run["steps"]) == ("7", "sacred", 300)
    assert "loss read from 'train.loss'" in " ".join(run["warnings"])
    skipped = {Path(s["path"]).name: s["reason"] for s in report["skipped"]}
    assert skipped["cout.txt"].startswith("copy of a tracked run")  # the same run, not a second one
    (incident,) = [i for i in run["incidents"] if i["kind"] == "nonfinite" and i["severity"] == "critical"]
    assert incident["step"] == 2900


def test_a_sacred_metrics_file_with_broken_entries_is_read_where_it_can_be(tmp_path):
    _sacred_run(tmp_path / "3", {"loss": ([1, 2, 3, 4], [2.0, 1.9, 1.8]), "note": ([1], ["text"])})
    code, report = _analyze(str(tmp_path / "3" / "metrics.json"))
    (run,) = report["runs"]
    assert run["steps"] == 3
    warnings = " ".join(run["warnings"])
    assert "'loss' has 4 steps for 3 values" in warnings and "'note' holds values that are not numbers" in warnings
    (tmp_path / "3" / "metrics.json").write_text('{"loss": {"steps": [1, 2], "values": [2.0, ')
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "3" / "metrics.json")])
    assert result.exit_code == 1 and "not a Sacred metrics.json" in result.output and "Traceback" not in result.output
    (tmp_path / "3" / "metrics.json").write_text(json.dumps({"acc": {"steps": [1, 2], "values": [0.1, 0.2]}}))
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "3" / "metrics.json")])
    assert result.exit_code == 1 and "no loss metric among: acc; name it with --loss-col" in result.output


def test_a_nan_stretch_across_epochs_whose_length_is_no_multiple_of_the_logging_interval_is_one_incident(tmp_path):
    # mmengine logs every 50 iterations of a 1583-iteration epoch: the steps' cadence breaks at
    # each epoch; the printed NaNs still make one stretch, and the run ends NaN.
    lines = [f"2024/01/01 10:00:00 - mmengine - INFO - Epoch(train)  [{e}][{i:4d}/1583]  lr: 2.0000e-02  "
             f"eta: 1:00:00  time: 0.5000  data_time: 0.0100  memory: 3000  "
             f"loss: {'nan' if (e == 3 and i > 600) else f'{2.0 - e * 0.1 - i / 20000:.4f}'}  loss_cls: 0.5000"
             for e in range(1, 4) for i in range(50, 1584, 50)]
    code, report = _analyze(str(_write(tmp_path / "20240101_100000.log", lines)))
    (run,) = report["runs"]
    assert run["final_loss"] is None or np.isnan(run["final_loss"])
    (incident,) = run["incidents"]
    assert (incident["kind"], incident["severity"], incident["step"], incident["end_step"]) == \
        ("nonfinite", "critical", 2 * 1583 + 650, 2 * 1583 + 1550)


@pytest.mark.parametrize("line", [
    "[{e}/5][{i}/1583]\tLoss_D: {d}\tLoss_G: {g}\tD(x): 0.7123\tD(G(z)): 0.2345 / 0.1234",  # PyTorch DCGAN tutorial
    "[Epoch {e}/200] [Batch {i}/1583] [D loss: {d}] [G loss: {g}]",  # PyTorch-GAN
])
def test_gan_prints_are_judged_on_non_finite_values_only(tmp_path, line):
    rng = np.random.default_rng(0)

    def lines(nan_from: int | None) -> list[str]:
        out = []
        for e in range(5):
            for i in range(0, 1583, 50):
                # The discriminator improves, so the generator's loss climbs: the game, not a divergence.
                d, g = abs(rng.normal(0.8, 0.3)), abs(rng.normal(2.0 + 1.5 * e, 1.0))
                bad = nan_from is not None and e * 1583 + i >= nan_from
                out.append(line.format(e=e, i=i, d="nan" if bad else f"{d:.4f}", g="nan" if bad else f"{g:.4f}"))
        return out

    code, report = _analyze(str(_write(tmp_path / "gan.txt", lines(None))))
    (run,) = report["runs"]
    assert (run["source"], run["steps"], run["verdict"], run["incidents"]) == ("gan", 160, "healthy", [])
    assert any("a GAN's run" in w for w in run["warnings"])
    code, report = _analyze(str(_write(tmp_path / "gan.txt", lines(4 * 1583 + 800))))
    (incident,) = report["runs"][0]["incidents"]
    assert (incident["kind"], incident["severity"], incident["step"]) == ("nonfinite", "critical", 4 * 1583 + 800)


def test_the_pytorch_quickstart_loop_goes_on_across_epochs_and_its_test_lines_are_not_steps(tmp_path):
    lines = []
    for t in range(1, 4):
        lines += [f"Epoch {t}", "-------------------------------"]
        lines += [f"loss: {2.3 - t / 10 - b / 10000:>7f}  [{b * 64 + 64:>5d}/60000]" for b in range(0, 938, 100)]
        lines += ["Test Error: ", f" Accuracy: {50 + t}.0%, Avg loss: {2.4 - t / 10:>8f} ", ""]
    code, report = _analyze(str(_write(tmp_path / "quickstart.txt", lines + ["Done!"])))
    (run,) = report["runs"]
    assert run["steps"] == 30 and run["final_loss"] == pytest.approx(2.3 - 0.3 - 0.09)
    assert run["verdict"] == "healthy"


@pytest.mark.parametrize("loggers", [("absl", "tf"), ("tf",)])
def test_tensorflow_object_detection_steps_and_their_loss_dicts(tmp_path, loggers):
    prefix = {"absl": "I1203 10:00:01.123456 140131 model_lib_v2.py:{n}] ", "tf": "INFO:tensorflow:"}
    lines = []
    for i, v in enumerate(_losses(), start=1):
        for name in loggers:
            lines.append(prefix[name].format(n=705) + f"Step {i * 100} per-step time 0.432s")
        for name in loggers:
            lines += [prefix[name].format(n=708) + f"{{'Loss/classification_loss': {v},",
                      " 'Loss/localization_loss': 0.1,", " 'Loss/regularization_loss': 0.2,",
                      f" 'Loss/total_loss': {v},", " 'learning_rate': 0.0133}"]
    code, report = _analyze(str(_write(tmp_path / "train.log", lines)))
    (run,) = report["runs"]
    assert (run["source"], run["steps"]) == ("tf_object_detection", 60)
    (incident,) = run["incidents"]
    assert (incident["kind"], incident["severity"], incident["step"], incident["end_step"]) == \
        ("nonfinite", "critical", 4500, 6000)
    (loaded,) = discover_runs(tmp_path / "train.log")
    assert loaded.steps["lr"].iloc[0] == pytest.approx(0.0133)
    # Its releases of 2020 print the loss on the step's line: "Step 200 per-step time 0.831s loss=1.192"
    # ("no tf_object_detection step lines found" before).
    lines = [prefix[name].format(n=652) + f"Step {i * 100} per-step time 0.831s loss={v}"
             for i, v in enumerate(_losses(), start=1) for name in loggers]
    code, report = _analyze(str(_write(tmp_path / "step_lines.log", lines)))
    (run,) = report["runs"]
    assert (run["source"], run["steps"]) == ("tf_object_detection", 60)
    (incident,) = run["incidents"]
    assert (incident["kind"], incident["step"], incident["end_step"]) == ("nonfinite", 4500, 6000)


def test_hf_trainer_dicts_scaled_by_the_banners_logging_interval_keep_their_nan(tmp_path):
    # No progress bar beside the dicts: the banner's epochs and total steps give logging_steps (10),
    # and the printed NaNs must move with the steps they were printed at.
    lines = ["***** Running training *****", "  Num examples = 6,000", "  Num Epochs = 1",
             "  Total optimization steps = 600"]
    lines += [f"{{'loss': {v}, 'grad_norm': 1.0, 'learning_rate': 5e-05, 'epoch': {i / 60:.2f}}}"
              for i, v in enumerate(_losses(), start=1)]
    code, report = _analyze(str(_write(tmp_path / "train.log", lines)))
    (run,) = report["runs"]
    assert run["steps"] == 60
    (incident,) = run["incidents"]
    assert (incident["kind"], incident["severity"], incident["step"], incident["end_step"]) == \
        ("nonfinite", "critical", 450, 600)


def test_a_modded_nanogpt_log_of_validation_lines_alone_keeps_its_printed_nan(tmp_path):
    values = [7.7109, 4.3719, 3.9876, 3.8012, 3.7011, 3.6404, "nan", "nan"]
    path = _write(tmp_path / "val.txt", [f"step:{s}/1480 val_loss:{v} train_time:{s * 120}ms step_avg:120.00ms"
                                         for s, v in zip(range(0, 876, 125), values)])
    report = analyze_run(discover_runs(path)[0])
    (incident,) = report.incidents
    assert (incident.kind, incident.severity, incident.step, incident.end_step) == ("nonfinite", "critical", 750, 875)


def test_a_tensorboard_download_with_odd_rows_skips_them_and_says_so(tmp_path):
    path = tmp_path / "run-r-tag-loss.csv"
    rows = "".join(f"{1.7e9 + s},{s},{2 - s / 100}\n" for s in range(30))
    path.write_text("Wall time,Step,Value\n" + rows + f"1,{'9' * 25},1.0\n2,31,oops\n3,32.5,1.0\n")
    code, report = _analyze(str(path))
    (run,) = report["runs"]
    assert code == 0 and run["steps"] == 30
    warnings = " ".join(run["warnings"])
    assert "1 row(s) with a 'Step' too large for a 64-bit step" in warnings
    assert "1 row(s) whose Value is not a number were skipped" in warnings


FIXTURE_LOGS = Path(__file__).parent / "fixtures" / "logs"


def _detectron2_training(first_iter: int = 19, lines: int = 20) -> list[str]:
    out = [f"[03/01 10:00:00 d2.engine.train_loop]: Starting training from iteration {first_iter - 19}"]
    for k in range(lines):
        it = first_iter + 20 * k
        loss = 2.0 * 0.995**it + 0.01 * (k % 3)
        out.append(f"[03/01 10:00:{k:02d} d2.utils.events]:  eta: 0:10:00  iter: {it}  total_loss: {loss:.3f}  "
                   f"loss_cls: {loss / 2:.3f}  loss_box_reg: {loss / 2:.3f}  time: 0.2  data_time: 0.01  "
                   "lr: 0.0002  max_mem: 1000M")
    return out


def test_trainings_appended_to_one_log_are_read_as_runs_of_their_own(tmp_path):
    """detectron2 appends each launch to log.txt, "Starting training from iteration 0" first: read
    as one history, each new training's first losses (back at 2) were taken for a spike and a
    divergence, both critical, and the run "unhealthy"."""
    (single,) = discover_runs(_write(tmp_path / "one.log", _detectron2_training()))
    assert analyze_run(single).verdict.value == "healthy"
    path = _write(tmp_path / "log.txt", _detectron2_training() * 3)
    runs = discover_runs(path)
    base = tmp_path.name  # a file named log.txt is named by its folder
    assert [r.name for r in runs] == [f"{base}#1", f"{base}#2", f"{base}#3"]
    for run in runs:
        pd.testing.assert_frame_equal(run.steps, single.steps)
        assert run.warnings[0].startswith("log.txt holds 3 trainings that each start from their first step")
    code, report = _analyze(str(path))
    assert code == 0 and [r["verdict"] for r in report["runs"]] == ["healthy"] * 3


def _crashed_launch(error: str) -> list[str]:
    return ["[03/01 10:00:00 d2.engine.train_loop]: Starting training from iteration 0",
            "[03/01 10:00:01 d2.engine.hooks]: Total training time: 0:00:01 (0:00:00 on hooks)",
            "Traceback (most recent call last):", '  File "train_net.py", line 312, in <module>', "    main(args)",
            error]


def test_launches_that_crashed_before_their_first_step_are_named_with_their_error(tmp_path):
    """Mask2Former's log.txt of twelve launches, eight crashed at iteration 0 (ValueError x4, CUDA out of memory x3,
    an AssertionError): '4 runs: 1 unhealthy, 3 healthy', the crashes '#1, #2, ... logged no step'."""
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {} MiB. GPU 0 has a total capacity of 24 GiB"
    lines = (_crashed_launch("ValueError: too many dimensions 'Boxes'") * 2 + _detectron2_training()
             + _crashed_launch(oom.format(192)) + _crashed_launch(oom.format(336))
             + ["[03/01 10:00:00 d2.engine.train_loop]: Starting training from iteration 0"] + _detectron2_training())
    runs = discover_runs(_write(tmp_path / "log.txt", lines))
    assert len(runs) == 2
    assert runs[0].warnings[0].endswith("(#1, #2 crashed before their first step: ValueError: too many dimensions "
                                        "'Boxes'; #4, #5 crashed before their first step: torch.OutOfMemoryError: "
                                        "CUDA out of memory; #6 logged no step)"), runs[0].warnings[0]


def test_a_log_whose_last_step_line_says_hours_are_left_says_the_run_stopped_before_its_end(tmp_path):
    """detectron2 at iteration 16,009 of 111,000, 'eta: 17:59:33' on its last line, and no traceback: healthy, no word
    that the run never finished. A finished run's last line says ~0 left; a crash is told as such."""
    def training(eta_last: str) -> list[str]:
        lines = _detectron2_training()
        return lines[:-1] + [lines[-1].replace("eta: 0:10:00", f"eta: {eta_last}")]

    (stopped,) = discover_runs(_write(tmp_path / "stopped.log", training("17:59:33")))
    assert "the last step line (step 399) says eta: 17:59:33 is left: the run stopped before its planned end" in \
        " ".join(stopped.warnings)
    for name, lines in [("done", training("0:00:00")), ("crashed", training("17:59:33") + _crashed_launch(
            "RuntimeError: CUDA error: an illegal memory access was encountered")[2:])]:
        (run,) = discover_runs(_write(tmp_path / f"{name}.log", lines))
        assert not any("planned end" in w for w in run.warnings), name


def test_a_log_whose_step_lines_come_after_its_first_megabyte_is_read(tmp_path):
    """detectron2's log.txt of 18 launches, 1.6 MB: the first 17 crashed or stopped after printing their config and
    model, the step lines of the last are the file's last lines: refused, 'its lines name 2 losses
    (FOCAL_LOSS_ALPHA, FOCAL_LOSS_GAMMA)' of the config dumps."""
    config = ["[09/27 16:36:36] d2.engine.defaults INFO: Running with full config:", "MODEL:", "  RETINANET:",
              "    FOCAL_LOSS_ALPHA: 0.25", "    FOCAL_LOSS_GAMMA: 2.0", "    NUM_CLASSES: 80"]
    model = [f"        (conv{k}): Conv2d(256, 256, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)"
             for k in range(200)]
    lines = (config + model) * 60 + _detectron2_training(lines=3)
    path = _write(tmp_path / "log.txt", lines)
    assert path.stat().st_size > 1 << 20
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == [19, 39, 59]


def test_a_first_training_whose_start_line_was_left_out_is_a_training_of_its_own(tmp_path):
    """A detectron2 console pasted from its first step on, then three launches each opened by 'Starting training from
    iteration 0': the first two read as one run, its steps made up (19..298), the first's crash unsaid."""
    lines = _detectron2_training(lines=10)[1:] + _detectron2_training(lines=4) + _detectron2_training(lines=5)
    runs = discover_runs(_write(tmp_path / "console.log", lines))
    assert [run.steps.index.tolist() for run in runs] == [list(range(19, 200, 20)), [19, 39, 59, 79],
                                                          [19, 39, 59, 79, 99]]


def test_a_resumed_training_goes_on_in_the_same_run(tmp_path):
    # "Starting training from iteration 400": a resume, its steps go on.
    path = _write(tmp_path / "log.txt", _detectron2_training() + _detectron2_training(first_iter=419))
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(19, 800, 20))
    # The Hugging Face Trainer prints its banner on a resume too, then says it continues.
    hf = (FIXTURE_LOGS / "hf_trainer.log").read_text(encoding="utf-8")
    banner = "***** Running training *****\n"
    again = hf.replace(banner, banner + "  Continuing training from checkpoint, will skip to saved global_step\n")
    (tmp_path / "hf.log").write_text(hf + again, encoding="utf-8")
    assert len(discover_runs(tmp_path / "hf.log")) == 1
    (tmp_path / "hf2.log").write_text(hf + hf, encoding="utf-8")
    assert [r.name for r in discover_runs(tmp_path / "hf2.log")] == ["hf2#1", "hf2#2"]


def _lightning_fit(offset: float, resumed: bool = False) -> str:
    """A Lightning fit's stdout: its model summary, then three epochs of the tqdm bar (redraws
    ending in "\\r"); ``resumed``: fit(ckpt_path=...) says so before its summary and goes on from
    epoch 3."""
    head = ["Restoring states from the checkpoint path at ckpt/last.ckpt"] if resumed else []
    head += ["LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0]", "", "  | Name | Type   | Params | Mode ",
             "0 | net  | Linear | 10     | train", ""]
    first = 3 if resumed else 0
    bars = []
    for epoch in range(first, first + 3):
        draws = "".join(f"\rEpoch {epoch}: {i}%|#    | {i}/100 [00:01<00:10, 10.00it/s, v_num=0, "
                        f"train_loss={3 * np.exp(-(epoch * 100 + i) / 100) + 1 + offset:.3f}]" for i in range(1, 101, 5))
        bars.append(draws)
    return "\n".join(head) + "\n" + "\n".join(bars) + "\n"


def test_two_lightning_fits_in_one_stdout_are_two_runs_and_a_resumed_fit_is_one(tmp_path):
    # Read as one history, the second fit's first loss was a critical spike that never recovered.
    path = tmp_path / "fits.log"
    path.write_text(_lightning_fit(0.0) + _lightning_fit(0.2), encoding="utf-8")
    runs = discover_runs(path)
    assert [r.name for r in runs] == ["fits#1", "fits#2"]
    assert [analyze_run(r).verdict.value for r in runs] == ["healthy", "healthy"]
    path.write_text(_lightning_fit(0.0) + _lightning_fit(0.0, resumed=True), encoding="utf-8")
    (run,) = discover_runs(path)
    assert run.steps.index.max() > 500  # epochs 3-5 go on after 0-2


def test_paxml_step_i_lines_are_read_and_not_taken_for_a_table(tmp_path):
    """Paxml's trainer logs "step_i: N, training loss: X" through absl. The comma made the file
    look like a table to the table reader's message ("a loss column 'training loss: 4.05' but no
    step column"), and step_i was no step key: the log was not read."""
    rng = np.random.default_rng(0)
    loss = 3.0 * np.exp(-np.arange(0, 600, 10) / 300) + 1.0 + rng.normal(0, 0.02, 60)
    loss[40:43] += 4.0  # steps 400-420: a spike that lasts three logged steps
    lines = [f"I1203 10:00:{i % 60:02d}.123456 139 programs.py:400] step_i: {i * 10}, training loss: {v:.5f}"
             for i, v in enumerate(loss)]
    path = _write(tmp_path / "paxml.log", lines)
    (run,) = discover_runs(path)
    assert run.steps.index.tolist()[:3] == [0, 10, 20] and run.steps["loss"].iloc[0] == pytest.approx(loss[0], abs=1e-5)
    report = analyze_run(run)
    assert [(i.kind, i.step) for i in report.incidents] == [("loss_spike", 400)]
    # A log line is never a table header, whatever the loader says of it.
    from sentinel.analyze.loaders.generic_table import why_not

    assert why_not(path) is None
    header_only = _write(tmp_path / "kv.log", ["epoch: 1, loss: 2.0", "epoch: 2, loss: 1.9"])
    assert why_not(header_only) is None


def _ray_rows(n=300):
    rng = np.random.default_rng(4)
    loss = 2.0 * np.exp(-np.arange(n) / 100) + 0.5 + rng.normal(0, 0.01, n)
    loss[200:203] += 3.0  # a spike over three reports
    return [{"loss": float(v), "accuracy": 0.9, "timestamp": 1_700_000_000 + i, "checkpoint_dir_name": None,
             "done": i == n, "training_iteration": i, "trial_id": "5c2f1_00000", "date": "2024-01-01_10-00-00",
             "time_this_iter_s": 0.1, "time_total_s": 0.1 * i, "pid": 4242, "hostname": "node", "node_ip": "10.0.0.1",
             "config": {"lr": 0.01}, "time_since_restore": 0.1 * i, "iterations_since_restore": i}
            for i, v in enumerate(loss, 1)]


def test_a_ray_tune_trial_is_one_run_named_after_its_folder(tmp_path):
    """Ray Tune / Ray Train write each trial's reports twice: result.json (JSON lines, nested
    config) and progress.csv (flat), beside params.json. Their step is training_iteration, which
    was no step name ('a table with a loss column but no step column'); read as a directory, the
    trial was two runs, named 'result' and 'progress'."""
    trial = tmp_path / "train_fn_2024-01-01" / "train_fn_5c2f1_00000_0_lr=0.0100"
    trial.mkdir(parents=True)
    rows = _ray_rows()
    (trial / "params.json").write_text(json.dumps({"lr": 0.01}))
    (trial / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    flat = [{k: v for k, v in r.items() if k != "config"} | {"config/lr": 0.01} for r in rows]
    pd.DataFrame(flat).to_csv(trial / "progress.csv", index=False)
    code, report = _analyze(str(tmp_path))
    (run,) = report["runs"]
    assert code == 0 and run["name"] == trial.name and run["path"].endswith("result.json")
    assert (run["first_step"], run["last_step"], run["steps"]) == (1, 300, 300)
    assert [(i["kind"], i["step"]) for i in run["incidents"]] == [("loss_spike", 201)]
    # progress.csv named on its own is read too, with the same step
    (alone,) = discover_runs(trial / "progress.csv")
    assert alone.name == trial.name and alone.steps.index[0] == 1 and alone.steps.index[-1] == 300


def test_a_table_whose_header_names_hold_spaces_is_cut_by_the_rule_under_it(tmp_path):
    """spaCy's `spacy train` prints its table with names like 'LOSS NER' and the step under '#',
    the header underlined by dashes; tabulate's plain tables the same way. Split at spaces, the
    header had more names than the rows had cells, and the log was 'not a log format'. Each row
    sums the losses since the evaluation before, the first (update 0) one update's: every healthy
    run diverged from it (49 against 2,288), and it is left out."""
    rng = np.random.default_rng(6)
    ner = 2000 * np.exp(-np.arange(30) / 8) + 150 + rng.normal(0, 5, 30)
    ner[0] = 49.29  # one update's loss
    ner[20] = 40_000.0  # one evaluation interval gone wrong, back at the next
    head = ["\u2714 Created output directory: training", "\u2139 Saving to output directory: training",
            "\u2139 Using CPU", "", "=========================== Initializing pipeline ===========================",
            "\u2714 Initialized pipeline", "",
            "============================= Training pipeline =============================",
            "\u2139 Pipeline: ['tok2vec', 'ner']", "\u2139 Initial learn rate: 0.001",
            "E    #       LOSS TOK2VEC  LOSS NER  ENTS_F  ENTS_P  ENTS_R  SCORE ",
            "---  ------  ------------  --------  ------  ------  ------  ------"]
    rows = [f"{i // 10:>3}  {i * 200:>6}  {12.5 + i:>12.2f}  {v:>8.2f}  {50 + i:>6.2f}  {55.0:>6.2f}  "
            f"{45.0:>6.2f}  {0.5:>6.2f}" for i, v in enumerate(ner)]
    tail = ["\u2714 Saved pipeline to output directory", "training/model-last"]
    path = _write(tmp_path / "spacy_train.txt", head + rows + tail)
    (run,) = discover_runs(path)
    assert run.source == "space_table" and run.steps.index.tolist()[:3] == [200, 400, 600]
    assert run.steps["loss"].tolist() == pytest.approx([float(f"{v:.2f}") for v in ner[1:]])  # LOSS NER, named
    assert any("'LOSS NER'" in w for w in run.warnings)
    assert any("the row at update 0 sums one update's and is left out" in w for w in run.warnings)
    assert "loss tok2vec" in run.steps.columns  # the other columns, under their names lower-cased
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("outlier_batch", 4000)]
    # tabulate's plain format: names right-aligned over their dashes
    table = ["  step    train loss    val loss", "------  ------------  ----------",
             *[f"{s:>6}  {2.5 - 0.01 * k:>12.4f}  {2.6 - 0.01 * k:>10.4f}" for k, s in enumerate(range(100, 1100, 100))]]
    (plain,) = discover_runs(_write(tmp_path / "table.txt", table))
    assert plain.steps.index.tolist()[:2] == [100, 200] and plain.steps["loss"].iloc[0] == pytest.approx(2.5)


def test_spacys_transformer_table_and_a_row_cut_at_the_pastes_end(tmp_path):
    """A transformer pipeline's table, "E  #  LOSS TRANS...  LOSS NER  ENTS_F ...", was refused (two loss columns, no
    choice between them; a tok2vec pipeline's was read by chance: its name has more words). The embedding layer's
    column is what the components above it sent back: the task's is the loss. A paste cut inside its last row,
    "  6     600       2223", read a blank LOSS NER there, a NaN."""
    head = ["E    #       LOSS TRANS...  LOSS NER  ENTS_F  ENTS_P  ENTS_R  SCORE ",
            "---  ------  -------------  --------  ------  ------  ------  ------"]
    rows = [f"{k:>3}  {200 * k:>6}  {179.58 * (k + 1):>13.2f}  {17320.93 / (k + 1):>8.2f}" + "    0.00" * 4
            for k in range(8)]
    (run,) = discover_runs(_write(tmp_path / "spacy.txt", head + rows + ["  8    1600       2223"]))
    assert run.steps.index.tolist() == [200 * k for k in range(1, 8)]
    assert run.steps["loss"].iloc[-1] == pytest.approx(17320.93 / 8, abs=0.01)
    assert not [i for i in analyze_run(run).incidents if i.kind == "nonfinite"]


def test_chainers_print_report_behind_its_terminal_codes(tmp_path):
    """Chainer's PrintReport writes "\\033[J" before each row (and its ProgressBar, between them,
    "\\033[4A" to go back up): in a file the codes stay, the header read "\\x1b[4Aepoch", and the
    table was "its lines log finish, Minibatch-size, epoch, unit but no loss"."""
    header = "epoch       main/loss   validation/main/loss  main/accuracy  validation/main/accuracy  elapsed_time"
    lines = ["Device: @numpy", "# Minibatch-size: 128", "# epoch: 30", ""]
    for e in range(1, 31):
        lines += ["\x1b[J     total [##........................................]  3.33%",
                  "this epoch [######################################............] 76.73%",
                  f"       {e * 390} iter, {e - 1} epoch / 30 epochs",
                  "    21.535 iters/sec. Estimated time to finish: 1:31:32.957746."]
        loss = "nan" if e >= 20 else f"{2 / e + 0.1:<10g}"
        val = "nan" if e >= 20 else "1.5"
        row = f"{e:<10g}  {loss:<10}  {val:<20}  {0.9:<13g}  {0.6:<24g}  {21.4 * e:<12g}"
        lines.append(("\x1b[4A" + header + "\n" if e == 1 else "") + "\x1b[J" + row)
    (run,) = discover_runs(_write(tmp_path / "log", lines))
    assert run.source == "space_table" and run.steps.index.tolist() == list(range(1, 31))
    assert run.steps["loss"].iloc[0] == pytest.approx(2.1) and run.steps["loss"].loc[20:].isna().all()
    (nan,) = [i for i in analyze_run(run).incidents if i.kind == "nonfinite" and i.severity.value == "critical"]
    assert nan.step == 20


def test_a_print_report_table_with_blank_validation_cells(tmp_path):
    """ESPnet1 has Chainer's PrintReport print a row every 100 iterations, its validation cells
    blank (spaces to the column's width) but on the row after each evaluation: only the rows with
    every cell were read, 14 of 442, and a spike between evaluations was gone."""
    names = ["epoch", "iteration", "main/loss", "validation/main/loss", "main/acc", "elapsed_time"]
    widths = [max(len(n), 10) for n in names]
    lines = ["".join(f"{n:<{w}}  " for n, w in zip(names, widths))]
    for k in range(1, 301):
        loss = 400 * np.exp(-k / 60) + 50 + (400 if k in (150, 151) else 0)
        values = [k // 30, 100 * k, loss, 60.0 if k % 30 == 0 else None, 0.5, 24.4 * k]
        lines.append("\x1b[J" + "".join(" " * (w + 2) if v is None else f"{v:<{w}g}  " for v, w in zip(values, widths)))
    (run,) = discover_runs(_write(tmp_path / "log", lines))
    assert run.source == "space_table" and run.steps.index.tolist() == [100 * k for k in range(1, 301)]
    assert run.steps["validation/main/loss"].dropna().index.tolist() == [3000 * k for k in range(1, 11)]
    (spike,) = [i for i in analyze_run(run).incidents if i.kind == "loss_spike"]
    assert spike.step == 15000


def test_a_wandb_history_csv_is_read_by_its_trainer_step_and_a_key_never_logged_is_no_nan(tmp_path):
    """A W&B run's history saved as CSV (the run page's export, or api.run(...).history().to_csv()):
    the step columns are W&B's _step (log calls) and, from the Hugging Face Trainer,
    train/global_step; neither was a step name ('no step column'). A key the history names but no
    row logged (empty cells throughout) was an evaluation NaN at every row, a false warning; a
    value printed as nan at every row still is one."""
    rng = np.random.default_rng(8)
    loss = 3 * np.exp(-np.arange(300) / 80) + 1 + rng.normal(0, 0.02, 300)
    head = '"_step","_runtime","_timestamp","train/loss","train/learning_rate","train/global_step","eval/loss"'
    rows = [f"{i},{1.5 * i},{1_700_000_000 + i},{v},2e-05,{10 * i}," for i, v in enumerate(loss)]
    path = _write(tmp_path / "wandb_export.csv", [head, *rows])
    (run,) = discover_runs(path)
    assert run.steps.index.tolist()[:3] == [0, 10, 20]  # train/global_step, before W&B's own _step
    assert "eval/loss" not in run.steps.columns
    report = analyze_run(run)
    assert report.verdict == "healthy" and report.incidents == []
    printed = _write(tmp_path / "nan_eval.csv", [head, *[r + "nan" for r in rows]])
    (run,) = discover_runs(printed)
    assert [i.kind for i in analyze_run(run).incidents] == ["nonfinite"]  # logged as nan: told
    only_step = _write(tmp_path / "history.csv", ["_step,loss", *[f"{i},{v}" for i, v in enumerate(loss)]])
    assert discover_runs(only_step)[0].steps.index.tolist()[:2] == [0, 1]


def test_a_wandb_history_evaluation_row_without_its_training_row_is_no_nan(tmp_path):
    """run.history().to_csv(): pandas' index first, and the Hugging Face Trainer's train/epoch and
    train/global_step on the evaluation rows too. history() samples 500 rows: where it kept an
    evaluation row and not the training row of its step, the empty loss there was a critical
    "non-finite loss at step 5500" (train/epoch made the row look like a training row)."""
    rng = np.random.default_rng(3)
    head = ",_step,_runtime,_timestamp,train/loss,train/grad_norm,train/epoch,train/global_step,eval/loss"
    rows, k = [], 0
    for step in range(10, 3010, 10):
        if step != 1500:  # sampled out
            rows.append(f"{k},{k},{k * 5.2},{1710148507 + k},{2 * np.exp(-step / 900) + 1 + rng.normal(0, 0.01):.4f},"
                        f"0.8,{step / 2000},{step},")
            k += 1
        if step % 500 == 0:
            rows.append(f"{k},{k},{k * 5.2},{1710148507 + k},,,{step / 2000},{step},{1.3 + 200 / step:.4f}")
            k += 1
    (run,) = discover_runs(_write(tmp_path / "history.csv", [head, *rows]))
    assert np.isnan(run.steps.at[1500, "loss"]) and run.steps.at[1500, "eval/loss"] > 1
    report = analyze_run(run)
    assert not [i for i in report.incidents if i.kind == "nonfinite"] and report.verdict == "healthy"


def _dvclive_run(root, timestamp: bool):
    """What DVCLive's Live(dir=root).log_metric(...) writes: one TSV per metric under
    plots/metrics (nested keys as folders), header [timestamp,] step, <basename>."""
    rng = np.random.default_rng(10)
    loss = 3 * np.exp(-np.arange(200) / 50) + 1 + rng.normal(0, 0.02, 200)
    loss[150:153] *= 3.0  # a spike over three steps
    tables = {"train/loss": {s: v for s, v in enumerate(loss)},
              "train/acc": {s: 0.9 for s in range(200)},
              "eval/loss": {s: 1.2 for s in range(0, 200, 20)}}
    for key, rows in tables.items():
        path = root / "plots" / "metrics" / f"{key}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        name = key.rsplit("/", 1)[-1]
        head = ("timestamp\t" if timestamp else "") + f"step\t{name}"
        path.write_text("\n".join([head, *[(f"{1_700_000_000_000 + s}\t" if timestamp else "") + f"{s}\t{v}"
                                           for s, v in rows.items()]]) + "\n")
    (root / "metrics.json").write_text('{"train": {"loss": 1.0, "acc": 0.9}, "eval": {"loss": 1.2}, "step": 199}')
    (root / "params.yaml").write_text("lr: 0.001\n")


@pytest.mark.parametrize("timestamp", [True, False])
def test_a_dvclive_run_is_one_run_of_every_metric_file(tmp_path, timestamp):
    """DVCLive keeps one TSV per metric. Each was a run of its own (its eval/loss.tsv judged as a
    training loss, its metrics.json a one-step run); the run is its folder, read whole."""
    _dvclive_run(tmp_path / "project" / "dvclive", timestamp)
    code, report = _analyze(str(tmp_path))
    (run,) = report["runs"]
    assert code == 0 and (run["name"], run["source"]) == ("project", "dvclive") and run["steps"] == 200
    assert [(i["kind"], i["step"]) for i in run["incidents"]] == [("loss_spike", 150)]
    (data,) = discover_runs(tmp_path / "project" / "dvclive" / "plots" / "metrics" / "train" / "acc.tsv")
    assert data.name == "project" and {"loss", "eval/loss", "train/acc"} <= set(data.steps.columns)
    assert data.steps["eval/loss"].count() == 10 and data.steps["loss"].count() == 200
    _dvclive_run(tmp_path / "exp2", timestamp)  # Live(dir="exp2"): named after its own folder
    assert discover_runs(tmp_path / "exp2")[0].name == "exp2"


def test_mindspore_loss_monitor_lines_are_read(tmp_path):
    """MindSpore's LossMonitor prints 'epoch: E step: S, loss is X' (the step counts inside the
    epoch): 'loss is' was no key and value, and the log was 'not a log format'."""
    rng = np.random.default_rng(12)
    lines, losses = [], []
    for epoch in range(1, 4):
        for step in range(100, 1900, 100):
            loss = 3 * np.exp(-(epoch * 1800 + step) / 1500) + 0.5 + rng.normal(0, 0.01)
            if (epoch, step) == (2, 900):
                loss += 4.0  # one batch far above the trend
            losses.append(loss)
            lines.append(f"epoch: {epoch} step: {step}, loss is {loss:.4f}")
    (run,) = discover_runs(_write(tmp_path / "mindspore_train.log", lines))
    assert run.steps["loss"].tolist() == pytest.approx([float(f"{v:.4f}") for v in losses])
    assert run.steps.index.is_monotonic_increasing and len(run.steps) == 54  # steps go on across epochs
    assert [i.kind for i in analyze_run(run).incidents] == ["outlier_batch"]


def test_a_script_log_with_validation_lines_is_judged_for_overfitting(tmp_path):
    """A training script's own print of its validation loss ("step 1000: validation loss 2.31"),
    every 500 steps among the training lines: read as the evaluation loss at that step (it was
    dropped before, so a generic log could not show overfitting), never as a training loss."""
    lines = []
    for step in range(1, 4001):
        lines.append(f"step {step}: train loss {3.0 - step / 2000:.4f}, lr 3.00e-04")
        if step % 500 == 0:
            val = 2.6 - step / 5000 if step <= 1500 else 2.3 + (step - 1500) / 2000
            lines.append(f"step {step}: validation loss {val:.4f}")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["loss"].count() == 4000 and run.steps["loss"].max() < 3.0
    assert run.steps["val_loss"].dropna().index.tolist() == list(range(500, 4001, 500))
    report = analyze_run(run)
    (incident,) = [i for i in report.incidents if i.kind == "overfitting"]
    assert incident.step == 1500 and "val_loss rose from 2.3 at step 1500" in incident.message
    assert not [i for i in report.incidents if i.kind in ("loss_spike", "divergence")]


def _tqdm_epochs(path: Path, desc: str, losses: list[float], per_epoch: int, total: bool = True,
                 miniters: int = 1) -> Path:
    """What a hand-written loop's tqdm bars write to a file: one bar per epoch, its description
    naming the epoch (``desc`` formatted with ``e``, ``epochs`` and, where it holds it, the loss),
    the loss in its postfix."""
    from tqdm import tqdm

    epochs = len(losses) // per_epoch
    with open(path, "w", encoding="utf-8") as out:
        for e in range(1, epochs + 1):
            first = desc.split(",")[0]  # a loss in the description is set at each step
            bar = tqdm(range(per_epoch), desc=first.format(e=e, epochs=epochs), file=out,
                       total=per_epoch if total else None, mininterval=0, miniters=miniters, ascii=False)
            for i in bar:
                loss = losses[(e - 1) * per_epoch + i]
                if "{loss" in desc:
                    bar.set_description(desc.format(e=e, epochs=epochs, loss=loss), refresh=False)
                bar.set_postfix(loss=loss, lr=1e-4, refresh=False)
            bar.close()
    return path


@pytest.mark.parametrize("desc", ["Epoch {e}/{epochs}", "[Epoch {e}/{epochs}] train", "epoch {e}/{epochs} train",
                                  "Epoch {e}/{epochs}, loss={loss:.4f}", "Epoch {e}"])
def test_tqdm_bars_whose_description_counts_the_epochs(tmp_path, desc):
    """``tqdm(loader, desc=f"Epoch {e}/{E}")`` with ``set_postfix(loss=...)``: the epoch count in
    the description is not the step, the bar's count inside the epoch is (going on across epochs)."""
    losses = [2.0 * np.exp(-s / 60) + 0.5 + 0.01 * np.sin(s) for s in range(120)]
    losses[70] = 9.0
    path = _tqdm_epochs(tmp_path / "train.log", desc, losses, per_epoch=40)
    (run,) = discover_runs(path)
    assert run.steps.index.min() == 1 and run.steps.index.max() == 120 and len(run.steps.index) == 120
    np.testing.assert_allclose(run.steps["loss"].to_numpy(), losses, rtol=5e-3)  # tqdm shows 3 digits
    (incident,) = analyze_run(run).incidents
    assert incident.step == 71


def test_tqdm_bars_drawn_every_few_steps_and_without_a_total(tmp_path):
    """A bar drawn every 7th step keeps its counts (the steps between have no line); a bar
    without a total (an iterable dataset: ``45it [...]``) is read in order, one line a step."""
    losses = [2.0 * np.exp(-s / 60) + 0.5 for s in range(120)]
    (run,) = discover_runs(_tqdm_epochs(tmp_path / "sparse.log", "Epoch {e}/{epochs}", losses, 40, miniters=7))
    assert run.steps.index.tolist() == [e * 40 + i for e in range(3) for i in (7, 14, 21, 28, 35, 40)]
    (run,) = discover_runs(_tqdm_epochs(tmp_path / "open.log", "Epoch {e}/{epochs}", losses, 40, total=False))
    assert len(run.steps.index) == 120 and run.steps["loss"].iloc[-1] == pytest.approx(losses[-1], rel=5e-3)


def test_a_loss_printed_as_the_tensor_that_holds_it(tmp_path):
    """``print(f"step {step} loss={loss}")`` of the loss tensor itself (its repr, grad_fn and all),
    a NumPy 2 scalar, JAX's and TensorFlow's: each is its number."""
    import torch

    weight = torch.nn.Parameter(torch.tensor([1.0]))
    values = [2.0 * np.exp(-s / 60) + 0.5 for s in range(120)]
    values[70] = 9.0
    lines = []
    for s, v in enumerate(values, start=1):
        loss = ((weight * 0 + v) ** 2).sum().sqrt()  # a tensor with a grad_fn, its value v
        lines.append(f"step {s} loss={loss!s} lr={np.float32(1e-4)!r}")  # as print(loss) shows it
    (run,) = discover_runs(_write(tmp_path / "torch.log", lines))
    assert "grad_fn" in lines[0] and "np.float32(" in lines[0]
    np.testing.assert_allclose(run.steps["loss"].to_numpy(), values, rtol=1e-4)
    assert run.steps["lr"].eq(1e-4).all()
    (incident,) = analyze_run(run).incidents
    assert incident.step == 71
    for wrapped in ("Array({v:.4f}, dtype=float32)", "tf.Tensor({v:.4f}, shape=(), dtype=float32)",
                    "<tf.Tensor: shape=(), dtype=float32, numpy={v:.4f}>", "tensor([{v:.4f}], device='cuda:0')"):
        path = _write(tmp_path / "other.log", [f"step: {s}, loss: {wrapped.format(v=v)}" for s, v in
                                               enumerate(values, start=1)])
        (run,) = discover_runs(path)
        np.testing.assert_allclose(run.steps["loss"].to_numpy(), values, rtol=1e-4)
    # A tensor of several numbers is no loss value.
    path = _write(tmp_path / "many.log", [f"step {s} loss=tensor([{v:.4f}, 1.0])" for s, v in enumerate(values, 1)])
    with pytest.raises(ValueError):
        discover_runs(path)


def test_a_scripts_iter_inside_the_epoch_is_not_nanogpts_iter(tmp_path):
    """``epoch 2 iter 5: loss X`` counts inside the epoch: all three epochs are read, the count
    going on across them (nanoGPT's own "iter N: loss X, time Tms" keeps its reader)."""
    values = [2.0 * np.exp(-s / 60) + 0.5 for s in range(150)]
    lines = [f"epoch {s // 50 + 1} iter {s % 50 + 1}: loss {v:.4f}" for s, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "text" and run.steps.index.tolist() == list(range(1, 151))
    nanogpt = [f"iter {s}: loss {v:.4f}, time 31.20ms, mfu 1.00%" for s, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "nanogpt.log", nanogpt))
    assert run.source == "nanogpt" and run.steps["time_ms"].eq(31.2).all()


def test_dcgan_style_counts_of_a_script_with_one_loss_go_on_across_epochs(tmp_path):
    """``[{epoch}/{epochs}][{i}/{len(loader)}] Loss: x``, epochs and counts from 0 (DCGAN's own)."""
    values = [2.0 * np.exp(-s / 60) + 0.5 for s in range(150)]
    lines = [f"[{s // 50}/3][{s % 50}/50]\tLoss: {v:.4f}" for s, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == list(range(150))
    np.testing.assert_allclose(run.steps["loss"].to_numpy(), values, atol=1e-4)


def _mnist_example_log(path: Path, epochs: int = 12) -> Path:
    """A real run printed as pytorch/examples' mnist/main.py prints it: a small MLP memorising 256
    random labels (its test loss rises while its training loss falls)."""
    import torch

    torch.manual_seed(0)
    x, y = torch.randn(512, 20), torch.randint(0, 10, (512,))
    model = torch.nn.Sequential(torch.nn.Linear(20, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    lines = []
    for epoch in range(1, epochs + 1):
        for batch_idx in range(8):
            data, target = x[batch_idx * 32:(batch_idx + 1) * 32], y[batch_idx * 32:(batch_idx + 1) * 32]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(data), target)
            loss.backward()
            opt.step()
            if batch_idx % 2 == 0:
                lines.append('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                    epoch, batch_idx * len(data), 256, 100. * batch_idx / 8, loss.item()))
        with torch.no_grad():
            out = model(x[256:])
            test_loss = torch.nn.functional.cross_entropy(out, y[256:]).item()
            correct = int((out.argmax(1) == y[256:]).sum())
        lines.append('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
            test_loss, correct, 256, 100. * correct / 256))
    return _write(path, lines)


def test_the_mnist_examples_test_lines_are_the_evaluation_of_the_epoch_before_them(tmp_path):
    """An evaluation line that names no step or epoch ("Test set: Average loss: ...") is the
    evaluation of the last training line before it; a run that memorises reports overfitting."""
    (run,) = discover_runs(_mnist_example_log(tmp_path / "mnist.log"))
    val = run.steps["val_loss"].dropna()
    assert val.index.tolist() == [e * 256 + 192 for e in range(12)]  # each epoch's last logged count
    assert val.iloc[-1] > 1.5 * val.min() and run.steps["loss"].iloc[-1] < 0.5 * run.steps["loss"].iloc[0]
    assert "overfitting" in [i.kind for i in analyze_run(run).incidents]


@pytest.mark.parametrize("train, evaluation", [
    ("[Epoch {e}] Train Loss: {t:.4f} | Train Acc: 0.90", "[Epoch {e}] Val Loss: {v:.4f} | Val Acc: 0.80"),
    ("step {s} | train_loss {t:.4f}", "step {s} | val_loss {v:.4f}"),
    ("Epoch {e} | loss {t:.4f}", "Validation loss: {v:.4f}"),
])
def test_validation_lines_are_not_training_losses_and_are_judged(tmp_path, train, evaluation):
    """"Val Loss" lines are evaluations (not training steps); named by their step, their epoch or
    by neither (then the last training line's), they are judged for overfitting."""
    lines = []
    for e in range(1, 31):
        t = 2.3 * np.exp(-e / 5) + 0.05
        v = 2.3 * np.exp(-e / 5) + 0.3 if e < 10 else 0.6 + (e - 10) * 0.05
        lines += [train.format(e=e, s=e * 100, t=t), evaluation.format(e=e, s=e * 100, v=v)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert len(run.steps.index) == 30 and run.steps["loss"].max() < 2.3
    assert run.steps["val_loss"].notna().sum() == 30 and run.steps["val_loss"].iloc[-1] == pytest.approx(1.6)
    assert [i.kind for i in analyze_run(run).incidents] == ["overfitting"]


def test_a_best_so_far_line_is_no_evaluation(tmp_path):
    """"Best val loss: X" after each validation repeats the best: the rise stays visible."""
    lines = []
    for e in range(1, 31):
        v = 2.3 * np.exp(-e / 5) + 0.3 if e < 10 else 0.6 + (e - 10) * 0.05
        lines += [f"Epoch {e} | loss {2.3 * np.exp(-e / 5) + 0.05:.4f}", f"Validation loss: {v:.4f}",
                  f"Best val loss: {min(v, 0.6):.4f}"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["val_loss"].iloc[-1] == pytest.approx(1.6)
    assert [i.kind for i in analyze_run(run).incidents] == ["overfitting"]
    # ... nor where the line names its epoch; a line with the value and the best keeps the value
    stepped = [line.replace("Best val loss", "Epoch 30 | Best val loss") for line in lines]
    stepped = [line.replace("Validation loss:", "Epoch {} | Validation loss:") for line in stepped]
    stepped = [line.format(k // 3 + 1) if "{}" in line else line for k, line in enumerate(stepped)]
    (run,) = discover_runs(_write(tmp_path / "epochs.log", stepped))
    assert run.steps["val_loss"].iloc[-1] == pytest.approx(1.6)
    both = [line.replace("Validation loss: ", "Validation loss ") + " (best 0.6000, 2 min)"
            if line.startswith("Validation") else line for line in lines if not line.startswith("Best")]
    (run,) = discover_runs(_write(tmp_path / "both.log", both))
    assert run.steps["val_loss"].iloc[-1] == pytest.approx(1.6)


def test_one_final_test_line_and_one_before_training_are_no_evaluation_series(tmp_path):
    lines = ["Test loss before training: 2.5000"] + [f"step {s} loss {2.0 - s / 100:.4f}" for s in range(1, 60)]
    (run,) = discover_runs(_write(tmp_path / "a.log", lines + ["Test set: Average loss: 1.5000"]))
    assert "val_loss" not in run.steps.columns


def test_loss_lines_alone_with_a_validation_line_every_few(tmp_path):
    """x-transformers' examples: print(f"training loss: {loss}") each step and
    print(f"validation loss: {loss}") every 50: each validation is the step before it."""
    lines = []
    for s in range(1, 301):
        lines.append(f"training loss: {2.5 * np.exp(-s / 100) + 0.8}")
        if s % 50 == 0:
            lines.append(f"validation loss: {1.0 + max(0, s - 150) / 100:.4f}")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["val_loss"].dropna().index.tolist() == [50, 100, 150, 200, 250, 300]
    assert [i.kind for i in analyze_run(run).incidents] == ["overfitting"]


@pytest.mark.parametrize("key, average", [("avg_loss", True), ("Loss/train", False), ("trainLoss", False),
                                          ("batch_loss", False), ("running_loss", True), ("gpt_loss", False)])
def test_a_loss_under_a_key_no_reader_knows(tmp_path, key, average):
    """The lines' one key that can be the loss is read as it, and the warnings say which (and,
    for an average, that a spike shows smaller there)."""
    values = [2.5 * np.exp(-s / 100) + 0.8 for s in range(1, 301)]
    values[169] = 6.0
    lines = [f"step {s} | {key}: {v:.4f} | lr 1e-4 | val_{key.replace('/', '_')}: 0.9" for s, v in enumerate(values, 1)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    np.testing.assert_allclose(run.steps["loss"].to_numpy(), values, atol=1e-4)
    assert run.warnings[0].startswith(f"loss read from {key!r} (no key of the lines is named loss)")
    assert ("a one-step spike shows smaller" in run.warnings[0]) == average
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("outlier_batch", 170)]


def test_two_keys_that_could_each_be_the_loss_are_the_users_choice(tmp_path):
    """The message names them and the option; --loss-col (in any case) reads the one named,
    as it does a table's column; a key the lines do not have is named with those they have."""
    lines = [f"step {s} | loss_ce: 2.{s:03d} | loss_kl: 0.{s:03d} | val_loss: 2.5" for s in range(1, 300)]
    path = _write(tmp_path / "train.log", lines)
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and result.output == (
        f"Error: '{path}': its lines name 2 losses (loss_ce, loss_kl) and none is the total: pass --loss-col "
        "loss_ce (or another of them) to read one, or log their sum as loss\n")
    for named in ("loss_kl", "LOSS_KL"):
        code, report = _analyze(str(path), "--loss-col", named)
        assert code == 0 and report["runs"][0]["final_loss"] == pytest.approx(0.299), named
        assert not any("loss read from" in w for w in report["runs"][0]["warnings"])
    result = CliRunner().invoke(main, ["analyze", str(path), "--loss-col", "kl"])
    assert result.exit_code == 1 and result.output == (
        f"Error: '{path}': no key 'kl' in its lines (keys that may be the loss: loss_ce, loss_kl): pass --loss-col "
        "with one of them\n")
    # A VAE's epoch lines, pasted short.
    path = _write(tmp_path / "vae.txt", [f"Epoch {e}, recon_loss: {300 - e:.3f}, kl_loss: {5 + e / 100:.3f}"
                                         for e in range(1, 5)])
    code, report = _analyze(str(path), "--loss-col", "recon_loss")
    assert code == 0 and report["runs"][0]["steps"] == 4 and report["runs"][0]["final_loss"] == 296.0


@pytest.mark.parametrize("lines, named, wanted", [
    # fast-reid's CommonMetricPrinter: the total read, its classification loss stuck at 50.2 behind it
    ([f"[06/09 19:{s % 60:02d}:53] fastreid.utils.events INFO: eta: 0:56:11  iter: {1999 + 200 * s}  "
      f"total_loss: {68.4 - 2 * s:.3f}  loss_cls: {50.7 - 0.1 * s:.3f}  loss_triplet: {17.8 - 2 * s:.3f}  "
      "time: 0.2223  lr: 3.50e-04" for s in range(6)], "loss_cls", 50.2),
    # cryoDRGN's train_vae epoch summaries: a component ("gen loss") first, the objective last
    ([f"# =====> Epoch: {e} Average gen loss = 0.5{e:02d}, KLD = {e}.19, total loss = 0.6{e:02d}; Finished in 10:32"
      for e in range(1, 9)], "total loss", 0.608),
    # MobileFaceNet_TF: "<name> is <value>"
    ([f"epoch 0, total_step {22000 + 50 * s}, total loss is {47.1 - s / 10:.2f} , inference loss is "
      f"{47.0 - s / 5:.2f}, reg_loss is 0.09, training accuracy is 0.000000" for s in range(8)], "inference loss", 45.6),
])
def test_the_loss_named_is_read_where_the_lines_read_another(tmp_path, lines, named, wanted):
    """--loss-col named a key beside the loss a reader takes from the lines (its shapes name their
    own keys): "key 'loss_cls' not found ...; keys found: loss, lr". The key named is read."""
    code, report = _analyze(str(_write(tmp_path / "train.log", lines)), "--loss-col", named)
    assert code == 0 and report["runs"][0]["final_loss"] == pytest.approx(wanted)
    assert report["runs"][0]["steps"] == len(lines)


@pytest.mark.parametrize("template", [
    "Epoch {e}, Loss: {t}, Accuracy: 81.2, Test Loss: {v}, Test Accuracy: 85.0",  # TensorFlow 2 quickstart
    "Epoch: {e:02d} | Train Loss: {t:.3f} | Train PPL: 7.389 | Val. Loss: {v:.3f} | Val. PPL: 9.025",  # bentrevett
    "epoch {e}: train_loss={t:.4f} val_loss={v:.4f} val_acc=0.8",
])
def test_an_epoch_line_with_the_training_and_the_evaluation_loss(tmp_path, template):
    lines = [template.format(e=e, t=2.0 * np.exp(-e / 4) + 0.05, v=0.6 if e < 8 else 0.6 + (e - 8) * 0.1)
             for e in range(1, 21)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["val_loss"].notna().sum() == 20 and run.steps["loss"].iloc[0] > 1.5
    assert [i.kind for i in analyze_run(run).incidents] == ["overfitting"]


@pytest.mark.parametrize("evaluation", ["eval/loss={v:.4f}, eval/accuracy=0.5", "val_loss={v:.4f}"])
def test_clu_evaluation_lines(tmp_path, evaluation):
    """CLU's LoggingWriter writes evaluations as it writes training metrics: "[step] eval/loss=X"."""
    lines = []
    for s in range(0, 3000, 10):
        lines.append(f"I1203 10:00:00.000 140 train.py:300] [{s}] train/loss={2.5 * np.exp(-s / 1000) + 0.8:.4f}, "
                     "train/learning_rate=0.001")
        if s % 200 == 0 and s:
            v = 1.2 if s < 1500 else 1.2 + (s - 1500) / 1000
            lines.append(f"I1203 10:00:00.000 140 train.py:310] [{s}] " + evaluation.format(v=v))
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["val_loss"].dropna().index.tolist() == list(range(200, 3000, 200))
    assert [i.kind for i in analyze_run(run).incidents] == ["overfitting"]


def test_a_json_dict_of_lists_with_its_steps(tmp_path):
    """{"step": [...], "loss": [...]} (a frame's to_dict("list") dumped): the steps are the given
    ones, not epochs from 1; a config whose only list is a setting of the loss is no history."""
    values = [2.5 * np.exp(-s / 100) + 0.8 for s in range(300)]
    values[170] = 6.0
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"step": list(range(10, 3010, 10)), "loss": values, "val_loss": [1.0] * 300}))
    (run,) = discover_runs(path)
    assert run.source == "history_dict" and run.steps.index.tolist() == list(range(10, 3010, 10))
    assert "step" not in run.steps.columns
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("outlier_batch", 1710)]
    frame = tmp_path / "frame.json"  # pandas' to_json(): each column a dict over the rows' labels
    pd.DataFrame({"loss": values, "lr": 1e-4}, index=range(10, 3010, 10)).to_json(frame)
    (run,) = discover_runs(frame)
    assert run.steps.index.tolist() == list(range(10, 3010, 10))
    np.testing.assert_allclose(run.steps["loss"].to_numpy(), values)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"lr": 0.1, "loss_weights": [1.0, 0.5], "epochs": 10}))
    with pytest.raises(ValueError, match="is not a log format sentinel reads"):
        discover_runs(config)


def test_a_frame_saved_with_its_index_is_numbered_by_it(tmp_path):
    """pd.DataFrame({"loss": losses}).to_csv(path): the unnamed first column is the rows' numbers."""
    values = [2.5 * np.exp(-s / 100) + 0.8 for s in range(300)]
    values[170] = 6.0
    path = tmp_path / "losses.csv"
    pd.DataFrame({"loss": values, "lr": 1e-4}).to_csv(path)
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(300))
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("outlier_batch", 170)]
    # Nothing numbers the rows: named on its own, they are numbered in order, with a warning; in a
    # directory walk such a table is no run.
    for name, write in (("rows.csv", lambda p: pd.DataFrame({"loss": values, "lr": 1e-4}).to_csv(p, index=False)),
                        ("rows.jsonl", lambda p: pd.DataFrame({"loss": values}).to_json(p, orient="records",
                                                                                        lines=True))):
        folder = tmp_path / name.split(".")[1]
        folder.mkdir()
        write(folder / name)
        (run,) = discover_runs(folder / name)
        assert run.steps.index.tolist() == list(range(1, 301))
        assert run.warnings[0].startswith(f"{name}: no step column among loss")
        with pytest.raises(ValueError):
            discover_runs(folder)
    # A row with a cell more than the header (a note added by hand): read without it, and pandas'
    # ParserWarning is not printed beside the report.
    path = tmp_path / "noted.csv"
    path.write_text("train_loss,accuracy\n2.0,0.5,restarted\n" + "".join(f"{v:.4f},0.5\n" for v in values[:20]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (run,) = discover_runs(path)
    assert len(run.steps) == 21  # its extra cell dropped


def test_a_printed_list_of_losses_named_on_its_own(tmp_path):
    """print(losses) of a list, of a NumPy array (repr and str, wrapped over lines), of NumPy 2
    scalars, of tensors: the loss in order, with a warning; a nested list is not read."""
    import torch

    values = [2.5 * np.exp(-s / 100) + 0.8 for s in range(300)]
    values[170] = 6.0
    printed = {"list.txt": str([round(v, 6) for v in values]), "repr.txt": repr(np.array(values)),
               "str.txt": str(np.array(values)), "named.txt": "losses = " + str([np.float64(v) for v in values]),
               "tensors.txt": str([torch.tensor(v) for v in values])}
    for name, text in printed.items():
        path = tmp_path / name
        path.write_text(text + "\n", encoding="utf-8")
        (run,) = discover_runs(path)
        np.testing.assert_allclose(run.steps["loss"].to_numpy(), values, rtol=1e-3, err_msg=name)
        assert "one printed list of 300 numbers" in run.warnings[0]
        assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("outlier_batch", 171)], name
    nested = tmp_path / "nested.txt"
    nested.write_text(str([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]) + "\n")
    with pytest.raises(ValueError, match="is not a log format sentinel reads"):
        discover_runs(nested)


@pytest.mark.parametrize("template", ["step {s} | loss {v:,.2f} | tokens 1,024", "Episode {s}: reward 1,234.5, loss: {v:,.2f}",
                                      "{{'loss': '{v:,.2f}', 'step': {s}}}"])
def test_a_loss_printed_with_thousands_separators(tmp_path, template):
    """f"{loss:,.2f}": "loss 2,780.10" is 2780.1, not 2 (a spike at every thousand it crossed)."""
    values = [2000 * np.exp(-s / 100) + 800 for s in range(1, 301)]
    (run,) = discover_runs(_write(tmp_path / "train.log", [template.format(s=s, v=v) for s, v in enumerate(values, 1)]))
    np.testing.assert_allclose(run.steps["loss"].to_numpy(), values, atol=0.01)
    assert analyze_run(run).incidents == []


@pytest.mark.parametrize("template", ["step {s} | ppl {p:.2f} | lr 1e-4", "Step {s}: train perplexity = {p:.3f}"])
def test_a_log_of_perplexity_alone_is_read_as_its_logarithm(tmp_path, template):
    values = [2.5 * np.exp(-s / 100) + 0.8 for s in range(1, 301)]
    values[169] = 6.0
    lines = [template.format(s=s, p=np.exp(v)) for s, v in enumerate(values, 1)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    np.testing.assert_allclose(run.steps["loss"].to_numpy(), values, atol=2e-3)
    assert "loss read as the logarithm of" in run.warnings[0]
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("outlier_batch", 170)]


def test_a_perplexity_series_beside_its_epochs_summaries(tmp_path):
    """OpenNMT-py prints "Epoch  2,   550/  725; acc: ...; ppl:  11.85; ..." and, after each epoch,
    "Train perplexity: 14.9386" and "Validation perplexity: 11.5119": two perplexity keys, and the
    paste was "its lines log acc, ppl, ... but no loss" (MNMT#8). The key printed most is the series'."""
    lines = []
    for epoch in (2, 3):
        lines += [f"Epoch {epoch:2d}, {i:5d}/  725; acc:   0.00; ppl: {12 - epoch - i / 200:6.2f}; 5187 src tok/s; 5634 tgt tok/s;"
                  "     55 s elapsed" for i in range(50, 701, 50)]
        lines += ["Train perplexity: 14.9386", "Train accuracy: 0", "Validation perplexity: 11.5119", "Validation accuracy: 0"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.warnings[0] == "loss read as the logarithm of 'ppl' (no key of the lines is named loss; a perplexity is exp(loss))"
    assert run.steps["loss"].iloc[0] == pytest.approx(np.log(12 - 2 - 0.25), abs=1e-3) and len(run.steps) == 28


def test_a_history_dicts_null_is_a_value_not_logged_and_its_nan_a_nan(tmp_path):
    values = [2.0 * np.exp(-e / 10) + 0.5 for e in range(30)]
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"loss": values, "val_loss": [None] * 30}))
    (run,) = discover_runs(path)
    assert analyze_run(run).incidents == []
    path.write_text(json.dumps({"loss": values, "val_loss": [0.9 - e / 100 for e in range(25)] + [float("nan")] * 5}))
    (run,) = discover_runs(path)
    (nan,) = analyze_run(run).incidents
    assert (nan.kind, nan.step, nan.severity.value) == ("nonfinite", 26, "warning")


def test_every_rank_printing_its_own_loss_without_a_prefix_is_said(tmp_path):
    """Four ranks print each step's loss (their own shards'), with nothing before the lines: the
    series would mix them silently; a warning says so. A bar redrawing a count now and then and a
    log of one line per step say nothing."""
    rng = np.random.default_rng(0)
    lines = [f"step {s} | loss {2.5 * np.exp(-s / 100) + 0.8 + rng.normal(0, 0.05):.4f}"
             for s in range(1, 301) for _ in range(4)]
    (run,) = discover_runs(_write(tmp_path / "ranks.log", lines))
    assert len(run.steps.index) == 300
    assert any("300 of 300 steps print their loss 4 times with different values" in w for w in run.warnings)
    (run,) = discover_runs(_write(tmp_path / "one.log", lines[::4]))
    assert not any("times with different values" in w for w in run.warnings)
    # The Trainer's evaluation dict after each epoch's loss dict, at its step (a wav2vec2 fine-tune's
    # paste): no second print of the loss ("4 of 5 steps print their loss 2 times" before).
    lines = [f"{{'loss': {140 - e * 10:.4f}, 'learning_rate': 0.0002, 'epoch': {e}.0}}" for e in range(5)]
    lines = [line for e, loss in enumerate(lines) for line in [loss] + (
        [f"{{'eval_loss': {80 - e:.4f}, 'eval_wer': 0.07, 'eval_runtime': 325.7, 'epoch': {e}.0}}"] if e else [])]
    (run,) = discover_runs(_write(tmp_path / "hf.log", lines))
    assert run.steps["loss"].notna().sum() == 5 and not any("times with different" in w for w in run.warnings)
    # A rank that printed NaN beside one that did not still prints twice.
    lines = [f"step {s} | loss {'nan' if r else f'{2.0 - s / 1000:.4f}'}" for s in range(1, 31) for r in range(2)]
    (run,) = discover_runs(_write(tmp_path / "nan_rank.log", lines))
    assert any("30 of 30 steps print their loss 2 times" in w for w in run.warnings), run.warnings


def test_a_long_line_of_joined_log_lines_after_short_ones_is_read_in_one_pass(tmp_path):
    """Short step lines, then 200 KB of log lines joined without their line ends: each record
    pattern was tried with Python's re at every position of the long line for each skeleton (the
    text has few), which took minutes on a megabyte; a skeleton that long is picked by the RE2
    filter (linear), never searched with Python's re there."""
    import re

    from sentinel.analyze.loaders.log_lines import Lines

    short = [f"step {s} | loss {2.0 - s / 1000:.4f}" for s in range(1, 60)]
    joined = " ".join(f"2024-01-01 12:00:{s % 60:02d},123 - INFO - loss: {2.0 - s / 1e5:.4f}" for s in range(4000))
    (run,) = discover_runs(_write(tmp_path / "train.log", short + [joined]))
    assert run.steps.index.tolist()[:59] == list(range(1, 60))

    searched: list[int] = []

    class Recording:  # a pattern whose searches are counted by the length of what they search
        def __init__(self, pattern):
            self.pattern = pattern

        def search(self, text):
            searched.append(len(text))
            return self.pattern.search(text)

    skeletons = Lines("\n".join(short + [joined]) + "\n").skeletons()
    found = skeletons.matching("loss", Recording(re.compile(r"loss")))
    assert len(found) == len(skeletons.uniques) and max(searched, default=0) < 4096


def test_the_keras_guides_custom_training_loop_output(tmp_path):
    """The Keras guide "Writing a training loop from scratch": a step inside the epoch every 100
    batches (782 an epoch), "Start of epoch N" between; older versions say "for one batch"."""
    lines, loss = [], 2.4
    for epoch in range(3):
        lines += ["", f"Start of epoch {epoch}"]
        for step in range(0, 782, 100):
            loss *= 0.93
            batch = "one batch" if epoch == 0 else "1 batch"
            value = 9.5 if (epoch, step) == (2, 300) else loss
            lines += [f"Training loss (for {batch}) at step {step}: {value:.4f}", f"Seen so far: {(step + 1) * 64} samples"]
        lines += ["Training acc over epoch: 0.8774", "Validation acc: 0.8970", "Time taken: 6.93s"]
    (run,) = discover_runs(_write(tmp_path / "guide.log", lines))
    assert len(run.steps) == 24 and run.steps.index.is_monotonic_increasing
    assert run.steps["loss"].iloc[0] == pytest.approx(2.4 * 0.93, abs=1e-4)
    assert run.meta["iters_per_epoch"] == 800  # the count goes on from the epoch before
    report = analyze_run(run)
    (blip,) = [i for i in report.incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert blip.step == 2 * 800 + 300 and blip.details["peak"] == 9.5


def _notebook_table(first: str | None, trailer: bool = False) -> list[str]:
    """The Hugging Face Trainer's table as a notebook shows it, copied out of the browser (tabs),
    under its progress line; a validation loss every 10th row, the others' cells empty."""
    lines = [first] if first is not None else []
    lines.append("Step\tTraining Loss\tValidation Loss")
    for i in range(1, 51):
        loss = 7.5 if i == 30 else 0.5 + 2 * np.exp(-i / 15)
        lines.append(f"{i * 10}\t{loss:.6f}\t{'' if i % 10 else f'{loss + 0.1:.6f}'}")
    if trailer:
        lines.append("TrainOutput(global_step=500, training_loss=0.91, metrics={'train_runtime': 323.1, 'epoch': 3.0})")
    return lines


@pytest.mark.parametrize("trailer", [False, True])
def test_a_notebooks_trainer_table_under_its_progress_line(tmp_path, trailer):
    """Read as text, the rows that print a validation loss (three numbers) were lost, the spike
    at step 300 among them; read as the table under the line, every row is there."""
    path = _write(tmp_path / "paste.txt", _notebook_table(" [500/500 05:23, Epoch 3/3]", trailer))
    (run,) = discover_runs(path)
    assert run.source == "generic_table" and run.steps.index.tolist() == list(range(10, 510, 10))
    assert run.steps.loc[300, "loss"] == 7.5 and run.steps["validation loss"].notna().sum() == 5
    assert run.warnings[0] == "paste.txt: read as the table whose header is line 2 (the line above it not read)"
    assert run.path == str(path) and run.name == "paste"
    (blip,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert blip.step == 300


def test_a_table_from_its_first_line_and_a_log_of_lines_are_read_as_before(tmp_path):
    (run,) = discover_runs(_write(tmp_path / "table.txt", _notebook_table(None)))
    assert run.source == "generic_table" and not any("read as the table whose" in w for w in run.warnings)
    log = ["Namespace(lr=0.1, epochs=3)", "starting"] + [f"step {i} | loss {2 - i / 100:.3f}" for i in range(1, 50)]
    (run,) = discover_runs(_write(tmp_path / "log.txt", log))
    assert run.source == "text" and len(run.steps) == 49


def test_paddlenlp_lines_are_read_at_their_global_step(tmp_path):
    """PaddleNLP: the batch counts inside the epoch from 0 (one behind the global step in the first
    epoch, and again from 0 in the next): the global step is the step."""
    lines, step = [], 0
    for epoch in range(2):
        for batch in range(40):
            step += 1
            loss = 9.0 if step == 55 else 2 + 1 / step
            lines.append(f"[2024-01-01 10:00:00,000] [    INFO] - global step {step}/80, epoch: {epoch}, batch: {batch}, "
                         f"rank_id: 0, loss: {loss:.6f}, lr: 0.0000100000, speed: 3.2100 step/s, ips: 25.67 sequences/sec")
    (run,) = discover_runs(_write(tmp_path / "paddle.log", lines))
    assert run.source == "paddlenlp" and run.steps.index.tolist() == list(range(1, 81))
    assert run.steps.loc[55, "loss"] == 9.0 and run.steps["lr"].eq(1e-5).all()


def test_a_column_the_notebook_table_lacks_is_named_with_its_columns(tmp_path):
    path = _write(tmp_path / "paste.txt", _notebook_table(" [500/500 05:23, Epoch 3/3]"))
    result = CliRunner().invoke(main, ["analyze", str(path), "--loss-col", "nope"])
    assert result.exit_code == 1
    assert f"{path}: column 'nope' not found; available: Step, Training Loss, Validation Loss" in result.output
    (run,) = discover_runs(path, LoadOptions(loss_col="Validation Loss"))
    assert run.source == "generic_table" and run.steps["loss"].notna().sum() == 5


def _lr_log(lrs: list[float], losses: list[float]) -> list[str]:
    return [f"step {s} | loss {loss:.4f} | lr {lr:.6f}" for s, (lr, loss) in enumerate(zip(lrs, losses), start=1)]


def test_a_learning_rate_logged_as_zero_over_the_run_is_reported(tmp_path):
    """A schedule that never started (a warm-up as long as the run): lr 0.000000 at every step,
    the loss flat at 1.2. It was 'healthy, a plateau'."""
    rng = np.random.default_rng(0)
    flat = list(1.2 + 0.02 * rng.standard_normal(400))
    (run,) = discover_runs(_write(tmp_path / "train.log", _lr_log([0.0] * 400, flat)))
    report = analyze_run(run)
    (zero,) = [i for i in report.incidents if i.kind == "zero_lr"]
    assert (zero.step, zero.end_step, zero.severity.value) == (1, 400, "warning") and report.verdict.value == "unhealthy"
    assert "the run did not train" in zero.message
    # A schedule that ended before the run: the last half at 0, the loss flat there: info.
    decay = [3e-4 * (1 - s / 200) if s < 200 else 0.0 for s in range(400)]
    falling = [3 - s / 100 if s < 200 else 1.0 + 0.001 * (s % 3) for s in range(400)]
    (run,) = discover_runs(_write(tmp_path / "early.log", _lr_log(decay, falling)))
    (zero,) = [i for i in analyze_run(run).incidents if i.kind == "zero_lr"]
    assert zero.step == 201 and zero.severity.value == "info" and "trained nothing" in zero.message


@pytest.mark.parametrize("case", ["cosine_end", "warmup_start", "loss_falls"])
def test_a_rate_too_small_for_its_digits_or_a_loss_that_falls_is_not(tmp_path, case):
    """llm.c prints lr:0.000000 over the last 2% of a cosine decay; a long warm-up's first steps
    print 0 too; a loss that falls is trained by some other rate (a frozen group's 0 logged)."""
    n = 1000
    loss = [3 * np.exp(-s / 300) + 1 for s in range(n)]
    if case == "cosine_end":
        lrs = [6e-4 * 0.5 * (1 + np.cos(np.pi * s / (n - 1))) for s in range(n)]  # prints 0 near the end
    elif case == "warmup_start":
        lrs = [1e-4 * s / 20000 for s in range(n)]  # 0.000000 for the first 100 steps
    else:
        lrs = [0.0] * n
    (run,) = discover_runs(_write(tmp_path / "train.log", _lr_log(lrs, loss)))
    assert (run.steps["lr"] == 0).sum() >= 5
    assert [i for i in analyze_run(run).incidents if i.kind == "zero_lr"] == []


def _spaced_notebook_table(first: str | None, trailing: bool, no_log: bool = False) -> list[str]:
    """The notebook's Trainer table copied as text with spaces between the cells (a GitHub issue,
    a terminal): names hold a space, and a row without a validation loss ends after its training
    loss (with the separator, or stripped by an editor)."""
    lines = [first] if first is not None else []
    lines.append("Step    Training Loss    Validation Loss")
    for i in range(1, 51):
        loss = 7.5 if i == 30 else 0.5 + 2 * np.exp(-i / 15)
        shown = "No log" if no_log and i == 1 else f"{loss:.6f}"
        lines.append(f"{i * 10}    {shown}    {f'{loss + 0.1:.6f}' if i % 10 == 0 or (no_log and i == 1) else ''}")
        if not trailing:
            lines[-1] = lines[-1].rstrip()
    return lines


@pytest.mark.parametrize("first", [None, " [500/500 05:23, Epoch 3/3]"])
@pytest.mark.parametrize("trailing", [True, False])
def test_a_notebooks_trainer_table_copied_with_spaces(tmp_path, first, trailing):
    """Read as lines of a step and a loss, the rows that print a validation loss were lost, the
    spike at step 300 among them ("healthy, no incidents"); read as the table, every row is there,
    named as its header names it."""
    path = _write(tmp_path / "paste.txt", _spaced_notebook_table(first, trailing))
    (run,) = discover_runs(path)
    assert run.source == "space_table" and run.steps.index.tolist() == list(range(10, 510, 10))
    assert run.steps.loc[300, "loss"] == 7.5 and run.steps["validation loss"].notna().sum() == 5
    (blip,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert blip.step == 300
    # in a folder too: the table, not its two-number rows
    (walked,) = discover_runs(tmp_path)
    assert walked.source == "space_table" and len(walked.steps) == 50


def test_a_spaced_notebook_table_with_no_log_cells(tmp_path):
    """The Trainer prints 'No log' where no training loss was logged yet at an evaluation: that
    row has no loss (as the tab-separated table's), its validation loss is read."""
    path = _write(tmp_path / "paste.txt", _spaced_notebook_table(None, True, no_log=True))
    (run,) = discover_runs(path)
    assert run.source == "space_table" and len(run.steps) == 50 and np.isnan(run.steps.loc[10, "loss"])
    assert run.steps.loc[10, "validation loss"] == pytest.approx(0.6 + 2 * np.exp(-1 / 15), abs=1e-5)
    (tabbed,) = discover_runs(_write(tmp_path / "tabbed.txt", [line.replace("    ", "\t") for line in path.read_text().splitlines()]))
    pd.testing.assert_frame_equal(run.steps, tabbed.steps)


@pytest.mark.parametrize("sep", ["\t", "    "])
def test_a_trainer_table_whose_every_training_loss_says_no_log(tmp_path, sep):
    """logging_steps longer than the run: the Trainer prints 'No log' in every Training Loss cell.
    Read as the loss, that empty column was 'non-finite at epochs 1-4', critical, the run
    unhealthy; the validation loss is what was logged, judged instead with a warning."""
    rows = [f"{e}{sep}No log{sep}{0.7 - e / 50:.6f}{sep}{0.5 + e / 20:.6f}" for e in range(1, 5)]
    path = _write(tmp_path / "paste.txt", [sep.join(["Epoch", "Training Loss", "Validation Loss", "Accuracy"]), *rows])
    (run,) = discover_runs(path)
    assert run.steps["loss"].tolist() == pytest.approx([0.68, 0.66, 0.64, 0.62])
    assert ("paste.txt: no training loss was logged (every 'Training Loss' cell is empty or 'No log'): "
            "'Validation Loss' is judged as the loss instead") in run.warnings
    report = analyze_run(run)
    assert report.verdict.value == "healthy" and report.incidents == []
    # a loss printed as nan at every epoch is logged: non-finite, as before
    path.write_text(path.read_text().replace("No log", "nan"))
    (run,) = discover_runs(path)
    assert [(i.kind, i.severity.value) for i in analyze_run(run).incidents] == [("nonfinite", "critical")]


def test_json_rows_of_batches_under_their_epoch_keep_their_nan_rows(tmp_path):
    """MACE's results file: a JSON row per batch, {"loss": X, "mode": "opt", "epoch": E}, and an
    evaluation row per epoch. Numbered in file order, the rows whose loss was NaN were left out of
    the numbering (1,200 of 4,000) and their NaN told at their epochs (280-399) on a run counted in
    rows: "recovered", its loss NaN to the end."""
    lines = []
    for epoch in range(40):
        for batch in range(10):
            loss = "NaN" if epoch >= 28 else f"{2 * np.exp(-epoch / 10) + 0.1:.4f}"
            lines.append(f'{{"loss": {loss}, "time": 0.31, "mode": "opt", "epoch": {epoch}}}')
        lines.append(f'{{"loss": {"NaN" if epoch >= 28 else 1.5}, "mae_e": 3.6, "mode": "eval", "epoch": {epoch}}}')
    (run,) = discover_runs(_write(tmp_path / "run-123_train.txt", lines))
    assert run.steps.index.tolist() == list(range(1, 401))
    report = analyze_run(run)
    (nan,) = [i for i in report.incidents if i.kind == "nonfinite" and i.severity.value == "critical"]
    assert (nan.step, nan.end_step) == (281, 400) and report.verdict.value == "unhealthy"


@pytest.mark.parametrize("header, row", [
    ("epoch,batch,loss", lambda e, b, v: f"{e},{b},{v}"),  # a batch counted inside its epoch
    ("epoch,loss", lambda e, b, v: f"{e},{v}"),  # the epoch alone
])
def test_a_table_of_batches_under_their_epoch_is_read_row_by_row(tmp_path, header, row):
    """A loop that writes its epoch and loss at every batch: read by epoch, one row of each epoch
    was kept (5 of 500), the spike with it. Each row is a step, numbered in file order; the epoch's
    validation row joins its last batch."""
    lines, n = [header + ",val_loss"], 0
    for epoch in range(5):
        for batch in range(100):
            n += 1
            lines.append(row(epoch, batch, 9.0 if n == 301 else 2 + 2 * np.exp(-n / 100)) + ",")
        lines.append(row(epoch, "", "") + f",{2.5 - epoch / 10}")
    path = _write(tmp_path / "log.csv", lines)
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(1, 501)) and "step_unit" not in run.meta
    assert run.steps["val_loss"].dropna().to_dict() == pytest.approx({100 * (e + 1): 2.5 - e / 10 for e in range(5)})
    assert "log.csv: 500 loss rows over 5 'epoch' values: each row is read as a step" in " ".join(run.warnings)
    (blip,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert blip.step == 301
    # a table of one row per epoch is read by epoch, as before
    (run,) = discover_runs(_write(tmp_path / "epochs.csv", ["epoch,loss"] + [f"{e},{3 - e / 10}" for e in range(30)]))
    assert run.meta["step_unit"] == "epoch" and run.steps.index.tolist() == list(range(30))


def test_a_dataframe_printed_by_pandas_is_read_as_its_table(tmp_path):
    """print(df) of a training history: its index before each row (and, named, on a line of its
    own under the header); no reader took it ('not a log format sentinel reads')."""
    n = 60
    df = pd.DataFrame({"epoch": np.arange(n) // 20, "step": np.arange(1, n + 1), "loss": 2 + 2 * np.exp(-np.arange(n) / 20)})
    df.loc[40, "loss"] = 9.0
    with pd.option_context("display.max_rows", 500):
        printed = {"plain.txt": str(df), "named.txt": str(df.set_index("step")), "no_step.txt": str(df[["loss"]])}
    for name, text in printed.items():
        (tmp_path / name).write_text(text + "\n")
        (run,) = discover_runs(tmp_path / name)
        assert run.source == "space_table" and run.steps["loss"].tolist() == pytest.approx(df["loss"].tolist(), abs=1e-6)
        assert run.steps.index[0] == (0 if name == "no_step.txt" else 1)  # the index numbers the rows
        (blip,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
        assert blip.details["peak"] == 9.0
    # printed in part: the rows shown, and a warning of the rows left out
    with pd.option_context("display.max_rows", 10):
        (tmp_path / "part.txt").write_text(str(df.rename(columns={"epoch": "e"})) + "\n")
    (run,) = discover_runs(tmp_path / "part.txt")
    assert len(run.steps) == 10 and "part.txt: the table printed shows 10 of its 60 rows" in run.warnings[0]


def test_a_keras_history_frame_printed_or_saved_is_read_in_epochs_as_its_dict_is(tmp_path):
    """pd.DataFrame(history.history), printed or saved with to_csv (its index, or none): no step
    column, a validation loss on every row. Read in steps, an epoch whose mean loss jumped x2.6 was
    an 'outlier batch' at 'step 25' (the same history as JSON: a loss spike at epoch 26)."""
    n = 40
    loss = 1.2 * np.exp(-np.arange(n) / 10) + 0.3 + 0.02 * np.sin(np.arange(n) * 2.1)
    loss[25] *= 2.6
    df = pd.DataFrame({"accuracy": 1 - loss / 2, "loss": loss, "val_accuracy": 1 - loss / 2 - 0.02,
                       "val_loss": loss + 0.05})
    with pd.option_context("display.max_rows", 500):
        (tmp_path / "printed.txt").write_text(str(df) + "\n")
    df.to_csv(tmp_path / "indexed.csv")
    df.to_csv(tmp_path / "plain.csv", index=False)
    (tmp_path / "history.json").write_text(json.dumps({k: v.tolist() for k, v in df.items()}))
    for name in ("printed.txt", "indexed.csv", "plain.csv", "history.json"):
        (run,) = discover_runs(tmp_path / name)
        assert run.meta["step_unit"] == "epoch" and run.steps.index.tolist() == list(range(1, n + 1)), name
        (spike,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
        assert (spike.kind, spike.step) == ("loss_spike", 26), name
    assert "the rows are read as epochs 1, 2, 3" in " ".join(run_of(tmp_path / "indexed.csv").warnings)
    # a table of batches without a validation loss on each row keeps its rows as steps
    df.loc[df.index % 5 != 4, "val_loss"] = np.nan
    df.to_csv(tmp_path / "batches.csv")
    (run,) = discover_runs(tmp_path / "batches.csv")
    assert "step_unit" not in run.meta and run.steps.index[0] == 0


def run_of(path):
    (run,) = discover_runs(path)
    return run


def test_a_smooth_loss_printed_with_four_decimals_is_not_stuck(tmp_path):
    """A loss moving by less than its last printed digit a step (2.0035, then 2.0034 for nine
    steps, then 2.0033) was 'loss exactly 2.0034 at 9 logged steps in a row: the weights are not
    changing'. A stretch one unit of the last digit from the rows around it is rounding."""
    path = _write(tmp_path / "train.log", [f"step {s} | loss {2 + 1 / s:.4f}" for s in range(1, 301)])
    (run,) = discover_runs(path)
    assert stuck_loss_incidents(run.steps["loss"]) == [] and analyze_run(run).verdict.value == "healthy"
    # a placeholder printed at full precision between real values is still stuck
    lines = [f"step {s} | loss {2 + 1 / s:.4f}" for s in range(1, 101)] + \
            [f"step {s} | loss 10.8259" for s in range(101, 121)] + [f"step {s} | loss {2 + 1 / s:.4f}" for s in range(121, 200)]
    (run,) = discover_runs(_write(tmp_path / "placeholder.log", lines))
    (stuck,) = stuck_loss_incidents(run.steps["loss"])
    assert (stuck.step, stuck.end_step) == (101, 120)


def test_a_tables_step_that_counts_inside_each_epoch_goes_on_across_epochs(tmp_path):
    """'epoch,step,loss' with the step from 0 again each epoch: read as the step, the five
    epochs fell onto steps 0-99 (100 rows of 500, the spike at row 301 gone: 'healthy, no
    incidents'). The step is read across epochs, as the text reader reads mmengine's."""
    rows, n = ["epoch,step,loss"], 0
    for epoch in range(5):
        for step in range(100):
            n += 1
            rows.append(f"{epoch},{step},{9.0 if n == 301 else 2 + 2 * np.exp(-n / 100):.4f}")
    (run,) = discover_runs(_write(tmp_path / "log.csv", rows))
    assert run.steps.index.tolist() == list(range(500))
    assert "log.csv: 'step' counts inside each 'epoch'" in " ".join(run.warnings)
    (blip,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert blip.step == 300
    # a step that goes on across epochs is read as it is
    rows = ["epoch,step,loss"] + [f"{s // 100},{s},{2 + 2 * np.exp(-s / 100):.4f}" for s in range(500)]
    (run,) = discover_runs(_write(tmp_path / "global.csv", rows))
    assert run.steps.index.tolist() == list(range(500)) and not any("counts inside" in w for w in run.warnings)


def test_a_spaced_table_row_with_an_empty_middle_cell(tmp_path):
    """A row of the spaced table whose training loss is empty and validation loss printed: its two
    cells stand two gaps apart. Padded at the end, the validation loss was read as the training
    loss; the empty cell is where the wide gap is."""
    lines = ["Step    Training Loss    Validation Loss"]
    for i in range(1, 31):
        loss = 0.5 + 2 * np.exp(-i / 15)
        if i % 10:
            lines.append(f"{i * 10}    {loss:.6f}")
        else:
            lines.append(f"{i * 10}        {loss + 0.1:.6f}")  # no training loss logged at this step
    (run,) = discover_runs(_write(tmp_path / "paste.txt", lines))
    assert run.source == "space_table" and np.isnan(run.steps.loc[100, "loss"])
    assert run.steps["validation loss"].dropna().index.tolist() == [100, 200, 300]


@pytest.mark.parametrize("printed", ["NAN", "INF"])
def test_a_nan_printed_in_capitals_is_a_nan(tmp_path, printed):
    """Megatron-LM's first versions print the loss with "{:.6E}", which writes NaN as NAN and
    infinity as INF: the line was no record, and the NaN at iteration 700 went unseen (its step
    dropped, "8 steps" for 9 lines)."""
    lines = []
    for it in range(100, 1300, 100):
        loss = printed if it == 700 else f"{7.5 - it / 400:.6E}"
        lines.append(f" iteration {it:8d}/    3000 | elapsed time per iteration (ms): 12879.0 | learning rate "
                     f"{6.3e-6:.3E} | lm loss {loss} | loss scale 64.0 |")
    assert "| lm loss 6.000000E+00 |" in lines[5]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert len(run.steps) == 12
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.severity, incident.step) == ("nonfinite", "critical", 700)


@pytest.mark.parametrize("count", [4, 8])
def test_a_bar_whose_lines_end_in_deepspeeds_overflow_line(tmp_path, count):
    """Colossal-AI's GPT-2 example under ZeRO: each tqdm redraw ("loss=nan, lr=...") followed on its
    line by DeepSpeed's "OVERFLOW! Rank 0 Skipping step. Attempted loss scale: ...". The overflow
    lines picked DeepSpeed's reader, which reads no bar: "no loss", the NaN unseen."""
    lines, scale = [], 2.0 ** 32
    for n in range(1, count + 1):
        loss = "265.25" if n == 1 else "nan"
        lines.append(f"[Epoch 0 / Train]:   0%|          | {n}/8614 [00:00<1:03:35,  2.26it/s, loss={loss}, lr=2.5e-05, "
                     f"throughput=4.5244][deepscale] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {scale:.1f}, "
                     f"reducing to {scale / 2:.1f}")
        scale /= 2
    (run,) = discover_runs(_write(tmp_path / "gpt2.log", lines))
    assert run.source == "text" and run.steps["loss"].notna().sum() == 1
    assert int(run.steps["amp/overflow"].sum()) == count  # each of the step after it (the last: after the last record)
    kinds = {i.kind: i for i in analyze_run(run).incidents}
    assert (kinds["nonfinite"].severity, kinds["nonfinite"].step) == ("critical", 2)


@pytest.mark.parametrize("records", [2, 3])
@pytest.mark.parametrize("apex", ["Gradient overflow.  Skipping step", "Gradient overflow, skipping step"])
def test_overflow_lines_and_a_loss_named_otherwise_are_read_together(tmp_path, apex, records):
    """DG-Net's fp16 paste: "Epoch: 00 Iteration: 00000001/00100000 DLoss:nan Reg:nan" between
    apex's overflow lines (an older apex's words: "Gradient overflow, skipping step, ..."). With
    apex's lines read, they were all that was read ("no loss"), the NaN unseen; without, the
    overflows were."""
    lines, scale = [], 65536.0
    for it, loss in enumerate((6.0, math.nan, math.nan)[:records], start=1):
        lines.append(f"Epoch: 00 Iteration: {it:08d}/00100000 DLoss:{loss:.4f} Reg:0.0000")
        for _ in range(2):
            scale /= 2
            lines.append(f"{apex}, loss scaler 0 reducing loss scale to {scale}")
        lines.append(f"L_total:61.4591, L_gan:12.0000, Lx:8.2094, Recon-id:6.6183")
    (run,) = discover_runs(_write(tmp_path / "dgnet.txt", lines))
    assert run.steps["loss"].iloc[0] == 6.0 and int(run.steps["amp/overflow"].sum()) == 2 * records
    assert [i.kind for i in analyze_run(run).incidents if i.severity == "critical"] == ["nonfinite"]


@pytest.mark.parametrize("bad_grad", [False, True])
def test_several_losses_none_non_finite_but_their_grad_norm(tmp_path, bad_grad):
    """verl's GRPO prints "actor/pg_loss" and "actor/kl_loss" (no total) and "actor/grad_norm:nan" at
    every step once the gradients broke (verl#1197): "none is the total, pass --loss-col", exit 1, the
    NaN unseen. The first loss that is no KL, entropy or auxiliary term is read, with its grad norm;
    where nothing goes non-finite, so is the policy gradient's loss, the one that is no such term (a run
    judged on its non-finite values alone, whichever is read)."""
    lines = [f"step:{i} - actor/entropy:0.512 - actor/kl_loss:{0.001 * i:.3f} - actor/pg_loss:{(-1) ** i * 0.004:.3f} - "
             f"actor/grad_norm:{math.nan if bad_grad and i >= 30 else 0.3 + i / 1000:.3f} - actor/lr:0.000 - "
             f"critic/score/mean:{0.3 + 0.01 * i:.3f} - response_length/mean:301.000 - timing_s/step:70.300"
             for i in range(1, 41)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "grpo.log", lines)), "--format", "json"])
    (run,) = json.loads(result.output)["runs"]
    if not bad_grad:
        assert run["warnings"][0].startswith("its lines name 2 losses (actor/kl_loss, actor/pg_loss) and none is the "
                                             "total: actor/pg_loss is read, the one of them that is no KL, entropy or "
                                             "auxiliary term") and not run["incidents"]
        return
    assert run["warnings"][0].startswith("its lines name 2 losses (actor/kl_loss, actor/pg_loss) and none is the total: "
                                         "actor/pg_loss is read, the first of them that is no KL, entropy or auxiliary "
                                         "term: none goes non-finite, its grad norm does")
    (nan,) = run["incidents"]
    assert (nan["kind"], nan["step"], nan["details"]["metric"]) == ("nonfinite", 30, "grad_norm/total")


def test_an_actors_policy_loss_is_read_beside_its_critics_value_loss(tmp_path):
    """verl's PPO console (its baseline logs) and DeepSpeed-Chat's step 3: an actor's policy loss, a critic's value
    loss, an entropy or pretraining term: 'none is the total, pass --loss-col', refused. The actor's is read."""
    lines = [f"step:{i} - actor/entropy_loss:0.512 - actor/pg_loss:{(-1) ** i * 0.004:.3f} - "
             f"critic/vf_loss:{1 / i:.3f} - actor/grad_norm:{0.3 + i / 1000:.3f} - "
             f"critic/score/mean:{0.3 + 0.01 * i:.3f}" for i in range(1, 41)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "ppo.log", lines)), "--format", "json"])
    (run,) = json.loads(result.output)["runs"]
    assert run["warnings"][0].startswith("its lines name 3 losses (") and "actor/pg_loss is read, the actor's policy " \
        "loss: the others are a critic's value loss or a KL, entropy or auxiliary term" in run["warnings"][0]
    assert run["steps"] == 40


def test_colour_codes_a_paste_lost_their_escape_character(tmp_path):
    """AudioCraft's flashy logger colours its lines; an issue form drops the escape character and
    leaves "[36m05-07 13:05:33[0m" (audiocraft#548): the "Valid Summary" lines were read as training
    steps, the "grad_norm=NAN" the reporter asked about unseen. Read as the same lines without them."""
    lines = []
    for epoch in range(20, 31):
        grad = "NAN" if epoch == 26 else "3.381E-01"
        lines += [f"[[36m05-07 13:05:33[0m][[34mflashy.solver[0m][[32mINFO[0m] - [1mTrain Summary | Epoch {epoch} | "
                  f"lr=5.67E-02 | grad_norm={grad} | grad_scale=237436.928 | ce=0.{120 - epoch} | "
                  f"ppl={math.exp((120 - epoch) / 1000):.3f} | duration=1327.496[0m",
                  f"[[36m05-07 13:05:33[0m][[34mflashy.solver[0m][[32mINFO[0m] - [1mValid Summary | Epoch {epoch} | "
                  f"ce=0.{140 - epoch} | ppl={math.exp((140 - epoch) / 1000):.3f} | duration=22.617[0m"]
    (coloured,) = discover_runs(_write(tmp_path / "coloured.log", lines))
    plain = [line.replace("[36m", "").replace("[34m", "").replace("[32m", "").replace("[1m", "").replace("[0m", "")
             for line in lines]
    (run,) = discover_runs(_write(tmp_path / "plain.log", plain))
    pd.testing.assert_frame_equal(coloured.steps, run.steps)
    assert coloured.steps.index.tolist() == list(range(20, 31))
    assert coloured.steps["loss"].iloc[0] == pytest.approx(0.1, abs=1e-3)  # the log of its ppl
    assert [(i.kind, i.step) for i in analyze_run(coloured).incidents] == [("nonfinite", 26)]


def test_a_lightning_bar_over_a_dataset_of_no_known_length(tmp_path):
    """Lightning's bar over an IterableDataset has no total: "Epoch 2: : 17671it [1:05:34,  4.49it/s,
    loss=2.15, v_num=3hqp]" (RVT#40) was "not a log format". Its count is inside the epoch (from 0),
    drawn every few batches."""
    draws = []
    for epoch in range(2):
        for i in range(1, 41):
            loss = "nan" if epoch == 1 and i > 35 else f"{2.5 - 0.002 * (epoch * 40 + i):.3f}"
            draws.append(f"Epoch {epoch}: : {7 * i}it [00:{i // 60:02d}:{i % 60:02d},  4.49it/s, loss={loss}, v_num=3hqp]")
    path = tmp_path / "fit.log"
    path.write_text("\r".join(draws) + "\n")
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == [7 * i for i in range(1, 81)]
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 280 + 7 * 36)]


def test_progress_bars_that_show_no_loss_are_said_to(tmp_path):
    """Lightning's bars with nothing logged to them ("Sanity Checking: 0it [00:00, ?it/s]", "Epoch 0:
    45%|...| 9/20 [00:01<00:01, 5.1it/s, v_num=0]") and scvi's "Training...:  42%|...| 85/200" were
    "its lines log Training, Checking, v_num but no loss": a bar's description and the logger's
    version read as metrics. The message says what the lines are and how to get a loss into them."""
    lines = ["Sanity Checking: 0it [00:00, ?it/s]", "Sanity Checking:   0%|          | 0/2 [00:00<?, ?it/s]"]
    lines += [f"Epoch 0:  {5 * i}%|#         | {i}/20 [00:0{i % 10}<00:01,  5.10it/s, v_num=0]" for i in range(1, 21)]
    lines += [f"Training...:  {i}%|####      | {i}/200 [22:58:55<55:52:02, 1748.89s/it]" for i in range(40, 50)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "fit.log", lines))])
    assert result.exit_code == 1
    assert "its lines are progress bars that show no loss: log the loss to the bar" in result.output
    # YOLOv7's console rows are a table's losses with a bar after each: not bars that show no loss
    yolo = ["     Epoch   gpu_mem       box       obj       cls     total    labels  img_size"]
    yolo += [f"    {e}/299     65.1G       nan   0.01516         0       nan      1869       320: 100%|####| 729/729 "
             "[51:52<00:00,  4.27s/it]" for e in (41, 42)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "yolo.log", yolo))])
    assert "show no loss" not in result.output


def test_a_ray_workers_process_id_is_no_metric(tmp_path):
    """verl's workers print through Ray, "(main_task pid=82052)" before each line; a paste of W&B's
    closing summary (sparklines, no numbers) was "its lines log pid but no loss" (Agent-R1#32)."""
    lines = [f"(main_task pid=82052) wandb:                       actor/{name} ▂▅▅▂█▅▃▁" for name in
             ("pg_loss", "kl_loss", "entropy", "grad_norm", "lr", "pg_clipfrac")]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "out.log", lines))])
    assert result.exit_code == 1 and "pid" not in result.output


def test_a_checkpoints_name_glued_to_a_bar_is_no_step(tmp_path):
    """Piper's Lightning bar, a checkpoint's path logged right after the epoch's last draw:
    "...loss=49.2, v_num=8]DEBUG:fsspec.local:open file: .../checkpoints/epoch=8-step=36.ckpt": the
    name's step=36 was read as the loss's step, beside the bar's counts (piper#393)."""
    lines = []
    for epoch in range(7, 15):
        loss = 57.8 - epoch
        lines += [f"Epoch {epoch}:  67%|██████▋   | 2/3 [00:01<00:00,  1.32it/s, loss={loss + 0.5:.1f}, v_num=8]",
                  f"Epoch {epoch}: 100%|██████████| 3/3 [00:02<00:00,  1.05it/s, loss={loss:.1f}, v_num=8]DEBUG:fsspec.local:"
                  f"open file: /home/u/lightning_logs/version_8/checkpoints/epoch={epoch}-step={4 * (epoch + 1)}.ckpt"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["loss"].is_monotonic_decreasing and len(run.steps) == 16
    assert run.steps["loss"].iloc[-1] == pytest.approx(43.8)


def test_a_paste_of_wenet_lines_every_one_nan(tmp_path):
    """CosyVoice (WeNet's trainer): "DEBUG TRAIN Batch 7/100 loss nan lr 0.00055784 grad_norm nan rank 2"
    from each of four ranks, and nothing else (CosyVoice#652): "not a log format"."""
    lines = [f"2025-02-20 00:46:13,777 DEBUG TRAIN Batch 7/100 loss nan lr 0.00055784 grad_norm nan rank {rank}"
             for rank in (2, 3, 0, 1)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "wenet"
    assert {(i.kind, i.severity.value, i.details["metric"]) for i in analyze_run(run).incidents} == {
        ("nonfinite", "critical", "loss"), ("nonfinite", "critical", "grad_norm/total")}


def test_a_float_after_a_step_word_is_no_step(tmp_path):
    """MotionSeg3D's lines (a copy of RangeNet++'s trainer): "Lr: 9.859e-03 | Update: 2.510e-03 mean,4.268e-03
    std | Epoch: [2][430/1047] | ... | Loss 1.1294 (0.5892) | ...": "Update: 2.510e-03" was read as step 2
    beside the epoch's count, three phantom rows copied ahead of the six (MotionSeg3D#6)."""
    lines = [f"Lr: 9.86{i}e-03 | Update: {2.5 + i / 10:.3f}e-0{3 + i % 2} mean,4.466e-04 std | Epoch: [2][{400 + 10 * i}/1047] | "
             f"Time 1.803 (2.327) | Data 0.628 (1.183) | Loss {0.5 + i / 100:.4f} (0.5906) | acc 0.989 (0.969) | "
             f"IoU 0.595 (0.573) | [8 days, 4:37:18]" for i in range(6)]
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.steps.index.tolist() == [1047 + 400 + 10 * i for i in range(6)]
    assert run.steps["loss"].tolist() == [0.5 + i / 100 for i in range(6)]


def test_nemo_bar_redraws_pasted_on_one_line(tmp_path):
    """NeMo 1.x's bar redraws pasted without their line ends (neuronx-nemo-megatron#28): each postfix's
    "reduced_train_loss=3.910, ..., global_step=564.0, ..." runs into the next draw's "Epoch 0:   3%|",
    and the progress lines' reader took the postfix for the next bar's description and outcounted
    NeMo's: the bar's own "loss=nan" (NeMo's running loss, NaN in its loop) was a critical."""
    draws = [f"Epoch 0:   3%|▎         | {n}/20101 [2:12:19<76:15:08, 14.05s/it, loss=nan, v_num=, val_loss_step=11.30, "
             f"reduced_train_loss={3.9 + (n % 3) / 100:.3f}, gradient_norm=1.010, parameter_norm=1552.0, "
             f"global_step={n - 1}.0, consumed_samples=1.45e+5, throughput=19.00, " for n in (565, 566, 566, 567)]
    cut = "Loss=3.920, gradient_norm=1.070, parameter_norm=1536.0, global_step=563.0, consumed_samples=1.44e+5, throughput=19.00, "
    end = "Epoch 0:   3%|▎         | 568/20101 [2:12:45<76:14:00, 14.05s/it, loss=nan,"  # the paste's last draw, cut
    (run,) = discover_runs(_write(tmp_path / "nemo.log", [cut + "".join(draws) + end]))
    assert run.source == "nemo" and run.steps.index.tolist() == [564, 565, 566]
    assert analyze_run(run).incidents == []


def test_a_dict_logged_to_a_tracker_with_its_sections_step(tmp_path):
    """slime prints each rollout's dict as it logs it to W&B, ``step 28: {'train/loss': 0.145, ...,
    'train/step': 28}`` (ProRL-Agent-Server#40): the dicts were numbered 1, 2 in order. The step of
    the loss's section is the step."""
    lines = [f"step {i}: {{'train/loss': {0.1 + i / 1000}, 'train/pg_loss': {0.1 + i / 1000}, "
             f"'train/grad_norm': 2.9e9, 'train/lr': 1e-06, 'train/step': {i}}}" for i in (1, 5, 9, 28)]
    (run,) = discover_runs(_write(tmp_path / "slime.log", lines))
    assert run.steps.index.tolist() == [1, 5, 9, 28]
    assert not any("carry no step" in w for w in run.warnings)


def _minillm(it: int, tot: float, scale: float) -> str:
    # LMOps/minillm's PPO trainer: "train | data_epochs ... | global iter: {:6d}/{:6d}| tot_loss: {:.4f} | ..."
    return (f"train | data_epochs  0/10 | inner iter: {it % 8:3d}/  8 | ppo epoch:  2/ 4 | global iter: {it:6d}/  5000| "
            f"tot_loss: {tot:.4f} | rl_loss: -0.0407 | pt_loss: {tot + 0.04:.4f} | pg_loss: -0.0428 | reg_loss: 0.0021 | "
            f"reward: 0.0000 | rev_kl: 0.0000 | lr: 2.5000e-07 | scale: {scale:6.2f} | time: 1.874 | step time: 0.000")


def test_a_scripts_loss_by_another_name_beside_deepspeeds_overflow_lines(tmp_path):
    """MiniLLM prints "global iter: 13/ 5000| tot_loss: 2.3541 | ..." and DeepSpeed its "OVERFLOW!"
    lines between (LMOps#130): DeepSpeed's lines were read, "no loss". The script's lines are read,
    their loss its total, their step the global count (not the inner loop's, nor one
    inside the PPO epoch)."""
    lines = [_minillm(13, 2.3541, 128), _minillm(14, 3.1123, 128), _DS_OVERFLOW.format(29, 128, 64),
             _minillm(15, 3.2141, 64), _DS_OVERFLOW.format(32, 64, 32)]
    (run,) = discover_runs(_write(tmp_path / "minillm.log", lines))
    assert run.steps["loss"].dropna().to_dict() == {13: 2.3541, 14: 3.1123, 15: 3.2141}
    # (tot_loss the total's name, as total_loss: read as the loss with no note)
    assert not any("tot_loss" in warning for warning in run.warnings)
    # two overflows among its four steps: the scaler's search, no rate of them
    assert analyze_run(run).incidents == []
    # Its other layout (LMOps#118): an epoch, then the inner loop's count, then the global one.
    lines = [_minillm(it, 6.0 - it / 100, 2048).replace("data_epochs  0/10", "epoch   4") for it in range(69, 73)]
    (run,) = discover_runs(_write(tmp_path / "minillm2.log", lines))
    assert run.steps.index.tolist() == [69, 70, 71, 72]


def _deepxde(rows: list[tuple[int, list[float], list[float]]], header: bool = True) -> list[str]:
    # deepxde/display.py: "Step", "Train loss", "Test loss", "Test metric" each padded to its
    # column's width (10 characters a term, and 4); each loss a list of its terms "{:.2e}".
    width = len(rows[0][1]) * 10 + 4
    fmt = lambda xs: "[" + ", ".join(f"{x:.2e}" for x in xs) + "]"  # noqa: E731
    lines = ["Step".ljust(10) + "Train loss".ljust(width) + "Test loss".ljust(width) + "Test metric"] if header else []
    return lines + [str(step).ljust(10) + fmt(train).ljust(width) + fmt(test).ljust(width) + "[]" for step, train, test in rows]


def test_deepxde_rows_of_loss_terms(tmp_path):
    """DeepXDE prints each loss as the list of its terms ("1000  [2.92e+02, 4.68e+01]  [3.00e+02, ...]
    []"): "12 row(s) whose 'Train loss' is text, not a number, were skipped", and a NaN from step
    2000 unseen (deepxde#491). The loss is the terms' sum; a pasted part without its header too."""
    rows = [(s, [100.0 / (1 + s / 1000), 5.0, 0.01], [110.0 / (1 + s / 1000), 6.0, 0.0]) for s in range(0, 11000, 1000)]
    (run,) = discover_runs(_write(tmp_path / "pinn.log", _deepxde(rows)))
    assert run.source == "deepxde" and run.steps.index.tolist() == list(range(0, 11000, 1000))
    assert run.steps["loss"].iloc[0] == pytest.approx(105.01) and run.steps["val_loss"].iloc[0] == pytest.approx(116.0)
    assert analyze_run(run).verdict == "healthy"
    broken = rows[:2] + [(s, [math.nan], [math.nan]) for s in (2000, 3000)]
    broken = [(s, train[:1], test[:1]) for s, train, test in broken]
    (run,) = discover_runs(_write(tmp_path / "nan.log", _deepxde(broken)))
    critical = [i for i in analyze_run(run).incidents if i.severity == "critical"]
    assert [(i.kind, i.step, i.end_step) for i in critical] == [("nonfinite", 2000, 3000)]
    (run,) = discover_runs(_write(tmp_path / "part.log", _deepxde(rows[4:8], header=False)))
    assert run.steps.index.tolist() == [4000, 5000, 6000, 7000]
    # A paste cut inside its last row's test loss: that row's training loss is whole, and read (it was dropped).
    cut = "\n".join(_deepxde(rows[4:8]))[:-12]
    (run,) = discover_runs(_write(tmp_path / "cut.log", [cut]))
    assert run.steps.index.tolist() == [4000, 5000, 6000, 7000] and np.isnan(run.steps["val_loss"].iloc[-1])


def _lcurve(rows, names=("rmse_val", "rmse_trn", "rmse_e_val", "rmse_e_trn", "rmse_f_val", "rmse_f_trn")) -> list[str]:
    # DeePMD-kit's lcurve.out: a header written as a comment, then "%7d" steps and "%11.2e" errors.
    lines = ["#  step  " + "  ".join(f"{n:>11s}" for n in names) + "         lr",
             "# If there is no available reference data, rmse_*_{val,trn} will print nan"]
    return lines + [f"{step:7d}" + "".join(f"  {v:11.2e}" for v in values) + f"  {1e-3:10.1e}" for step, values in rows]


def test_deepmd_lcurve_its_header_a_comment(tmp_path):
    """DeePMD-kit's lcurve.out names its columns in a comment ("#  step  rmse_val  rmse_trn ..."):
    "holds 8 numbers per line and no header" (deepmd-kit#781, #4554). The header is read, and
    rmse_trn, the training loss's error (its energy and force terms beside it), is the loss; in a
    run's directory too."""
    rows = [(s, [30 / (1 + s / 100), 28 / (1 + s / 100), 0.6, 0.6, 0.9, 0.9]) for s in range(0, 5000, 100)]
    (tmp_path / "run").mkdir(), (tmp_path / "polar").mkdir()
    (run,) = discover_runs(_write(tmp_path / "run" / "lcurve.out", _lcurve(rows)))
    assert run.source == "space_table" and run.steps.index.tolist() == list(range(0, 5000, 100))
    assert run.steps["loss"].iloc[1] == pytest.approx(14.0)
    assert "loss read from 'rmse_trn'" in " ".join(run.warnings)
    assert [r.source for r in discover_runs(tmp_path)] == ["space_table"]
    # A property's fit (deepmd-kit#4554): rmse_trn 0 until reference data comes (no spike from 0).
    names = ("rmse_val", "rmse_trn", "rmse_lc_val", "rmse_lc_trn", "rmse_gl_val", "rmse_gl_trn")
    rows = [(s * 100, [0.4, trn, math.nan, math.nan, math.nan, trn / 8])
            for s, trn in enumerate([0.0, 0.0, 0.0, 0.186, 0.235, 0.220, 0.206])]
    (run,) = discover_runs(_write(tmp_path / "polar" / "lcurve.out", _lcurve(rows, names)))
    report = analyze_run(run)
    assert run.steps.index.tolist() == [0, 100, 200, 300, 400, 500, 600]
    assert report.incidents == [] and report.verdict == "healthy"
    # A header printed again before each table is a console's (NequIP's log: the same "# Epoch batch
    # loss ..." over its training batches and its validation batches): not read as one table.
    header = "# Epoch batch         loss       loss_f       loss_e"
    lines = []
    for epoch in range(1, 8):
        for split, loss in (("training", 30.0 - epoch), ("validation", 39.0 - epoch)):
            lines += [split, header, f"{epoch:7d}     5  {loss:11.3g}  {loss - 4:11.3g}  {4.0:11.3g}", ""]
    assert not space_table.holds_table(lines)


def test_a_file_of_numbers_read_by_the_columns_numbers(tmp_path):
    """A file of six numbers a line and no header ("tail lcurve.out", deepmd-kit#679) asked for
    --step-col/--loss-col "with the names it gives them": it gives none. Its columns are named by
    their numbers, counted from 1."""
    path = _write(tmp_path / "tail.txt", [f"{s:7d}  {1.6e3 + s / 1e3:11.2e}  {3.7e2:11.2e}  1.2e-01  2.5e+00  1.1e-04"
                                          for s in range(172000, 182000, 1000)])
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and "pass the columns' numbers, counted from 1 (--step-col 1 --loss-col 2)" in result.output
    (run,) = discover_runs(path, LoadOptions(step_col="1", loss_col="2"))
    assert run.steps.index[0] == 172000 and run.steps["loss"].iloc[0] == pytest.approx(1.77e3)
    assert run.warnings == ["tail.txt: 6 numbers per line and no header: column 2 read as the loss, column 1 as the step"]


def _big(num: float) -> str:
    # LeRobot's format_big_number(num): no decimals, a K, M, ... suffix from 1,000 on.
    for suffix in ("", "K", "M", "B"):
        if abs(num) < 1000.0:
            return f"{num:.0f}{suffix}"
        num /= 1000.0
    return str(num)


def _lerobot(step: int, loss: float) -> str:
    return (f"INFO 2025-10-14 04:57:11 ot_train.py:299 step:{_big(step)} smpl:{_big(step * 32)} ep:{_big(step // 50)} "
            f"epch:{step / 5000:.2f} loss:{loss:.3f} grdn:3.522 lr:1.6e-07 updt_s:4.906 data_s:0.008")


def test_lerobot_steps_rounded_to_thousands_and_episodes_that_are_no_epochs(tmp_path):
    """LeRobot prints its step through format_big_number ("step:20K" for every step from 19,500 to
    20,499) and its episodes as "ep:": read as a generic log, its episodes were the epochs and its
    steps unread. The steps are worked back from the logging interval; a NaN at step 5,400 is told
    there. Its evaluation lines (no loss) are no records."""
    lines = []
    for step in range(200, 8001, 200):
        lines.append(_lerobot(step, math.nan if step >= 5400 else 0.5 * math.exp(-step / 3000) + 0.05))
        if step % 2000 == 0:
            lines.append(f"INFO 2025-10-14 05:57:11 ot_train.py:320 step:{_big(step)} smpl:{_big(step * 32)} "
                         f"ep:{_big(step // 50)} epch:{step / 5000:.2f} ∑rwrd:1.250 success:40.0% eval_s:12.000")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "lerobot" and run.steps.index.tolist() == list(range(200, 8001, 200))
    assert "the steps are worked back from the logging interval" in " ".join(run.warnings)
    (nan,) = [i for i in analyze_run(run).incidents if i.severity == "critical"]
    assert (nan.kind, nan.step) == ("nonfinite", 5400)
    # A paste of four records whose line ends were lost (lerobot#2194): each its own loss.
    (run,) = discover_runs(_write(tmp_path / "oneline.log", [" ".join(_lerobot(s, 0.46 + s / 1000) for s in (10, 20, 30, 40))]))
    assert run.steps["loss"].to_dict() == {10: 0.47, 20: 0.48, 30: 0.49, 40: 0.5}


def test_json_rows_whose_numbers_are_written_as_text(tmp_path):
    """ALBEF, BLIP and X-VLM write log.txt rows of their MetricLogger's averages formatted as text,
    {"train_lr": "0.00007", "train_loss_itc": "3.29523", ..., "epoch": 0} (X-VLM#12): "not a log
    format". The numbers are read; where several losses stand and none is the total, the error
    lists them and names --loss-col."""
    rows = [{"train_lr": f"{1e-4:.5f}", "train_loss": f"{3.3 - e / 3:.5f}", "epoch": e} for e in range(6)]
    (run,) = discover_runs(_write(tmp_path / "log.txt", [json.dumps(r) for r in rows]))
    assert run.steps["loss"].tolist() == pytest.approx([3.3 - e / 3 for e in range(6)], abs=1e-5)
    rows = [{"train_loss_itc": f"{3.3 - e / 5:.5f}", "train_loss_itm": "0.55888", "train_loss_mlm": f"{2.6 - e / 5:.5f}",
             "train_lr": "0.00007", "epoch": e} for e in range(6)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "pretrain.txt", [json.dumps(r) for r in rows]))])
    assert result.exit_code == 1 and "no single loss column among: train_loss_itc, train_loss_itm, train_loss_mlm" in result.output
    (run,) = discover_runs(tmp_path / "pretrain.txt", LoadOptions(loss_col="train_loss_mlm"))
    assert run.steps["loss"].iloc[-1] == pytest.approx(1.6)


def _mlx(it: int, loss: float) -> str:
    # mlx-lm's tuner/trainer.py: the report of the last steps_per_report iterations
    return (f"Iter {it}: Train loss {loss:.3f}, Learning Rate {1e-4:.3e}, It/sec 0.307, Tokens/sec 301.622, "
            f"Trained Tokens {it * 980}, Peak mem 22.427 GB")


def test_mlx_trainer_reports_two_of_them_a_paste(tmp_path):
    """MLX's LoRA trainers print "Iter 10: Train loss 3.438, Learning Rate 1.000e-04, ..." and "Iter N:
    Val loss X, Val took Ts" (mlx-lm, mlx-vlm): two reports pasted between a bar's draws and the
    trainer's dicts (mlx-vlm#261) were "not a log format". A NaN report is told at its iteration."""
    lines = ["  0%|          | 0/1000 [00:00<?, ?it/s]Starting training..., iters: 1000", _mlx(10, 3.438),
             "{'Step': 10, 'Loss': '3.4376', 'Learning Rate': '1.00e-04', 'Tokens/sec': '302'}",
             "  1%|8         | 10/1000 [00:32<53:42,  3.25s/it, Loss=3.4376, LR=1.00e-04]" + _mlx(20, 3.142)]
    (run,) = discover_runs(_write(tmp_path / "lora.log", lines))
    assert run.source == "mlx" and run.steps["loss"].to_dict() == {10: 3.438, 20: 3.142}
    lines = [_mlx(it, 2.5 - it / 1000 if it < 300 else math.nan) for it in range(10, 401, 10)]
    lines.insert(20, "Iter 200: Val loss 2.410, Val took 12.055s")
    (run,) = discover_runs(_write(tmp_path / "nan.log", lines))
    assert run.steps.loc[200, "val_loss"] == 2.41
    (nan,) = [i for i in analyze_run(run).incidents if i.severity == "critical"]
    assert (nan.kind, nan.step) == ("nonfinite", 300)


def test_a_classifier_that_comes_back_up_to_chance_and_stays_has_collapsed():
    """DNABERT's fine-tune (DNABERT#98): 0.38-0.54 up to step 8,100, then 0.6931-0.6938 from 41,200 to
    the end, ln 2 for sixteen rows. A log that was clearly better than chance was never judged at
    chance; one that comes back up to it and stays twice as long as the rule asks has collapsed."""
    rng = np.random.default_rng(4)
    before = list(0.46 + 0.05 * rng.standard_normal(16))
    after = list(math.log(2) + 0.0003 * rng.standard_normal(16))
    steps = list(range(6600, 8200, 100)) + list(range(41200, 42800, 100))
    (incident,) = chance_incidents(pd.Series(before + after, index=steps))
    assert (incident.step, incident.end_step, incident.details["chance"]) == (41200, 42700, 2)
    assert "the model collapsed to one answer for every input" in incident.message
    assert chance_incidents(pd.Series(before + after[:7], index=steps[:23])) == []  # seven rows: too few to say


def test_loss_col_names_an_evaluation_lines_loss(tmp_path):
    """"--loss-col val_loss" on lines "Epoch : 1 | Train loss :  0.066 | Validation loss :  0.062"
    (donut#241) reported the training loss: the key was found (the check passed), but the field is
    named "loss" on an evaluation line and the naming never made it the loss. It is read now."""
    train, val = [0.135, 0.066, 0.052, 0.045, 0.040], [0.0696, 0.0621, 0.0655, 0.0690, 0.0724]
    lines = [f"Epoch : {e} | Train loss :  {t} | Validation loss :  {v}" for e, (t, v) in enumerate(zip(train, val))]
    path = _write(tmp_path / "donut.log", lines)
    (run,) = discover_runs(path)
    assert run.steps["loss"].tolist() == train
    (run,) = discover_runs(path, LoadOptions(loss_col="val_loss"))
    assert run.steps["loss"].tolist() == val and run.steps["logged_loss"].tolist() == train


@pytest.mark.parametrize("k", [3, 64, 256])
def test_a_loss_that_never_leaves_ln_of_its_classes_or_its_batch(k):
    """An NLI head's three classes (ln 3 = 1.0986: sentence-transformers#2449's SoftmaxLoss at
    1.08-1.10), an in-batch contrastive loss over a batch of 64 or 256 (SimCSE, CLIP: ln 64 =
    4.1589) that starts there and never leaves it: nothing is learnt."""
    rng = np.random.default_rng(k)
    values = math.log(k) * (1 + 0.003 * rng.standard_normal(12))
    (incident,) = chance_incidents(_series(values))
    assert incident.details["chance"] == k
    # a loss that comes to rest near such an ln from elsewhere learnt (3.0 falling to 2.09, ln 8 = 2.079)
    falling = 2.09 + 0.9 * np.exp(-np.arange(40) / 6)
    assert chance_incidents(_series(falling)) == []


def test_paddle_grad_scaler_lines_between_a_scripts_lines(tmp_path):
    """PaddlePaddle's GradScaler prints "Found inf or nan, current scale is: 7.5e-37, decrease to:
    7.5e-37*0.5" at each skipped step (PaddleOCR#10874: the scale halving to 1e-38, the loss frozen
    at 9.19): unread, the run was "healthy". They are overflow events with their scales."""
    lines, scale = [], 2.0 ** 15
    for step in range(10, 301, 10):
        for _ in range(5 if step > 150 else 0):
            lines.append(f"Found inf or nan, current scale is: {scale}, decrease to: {scale}*0.5")
            scale *= 0.5
        lines.append(f"[2023/09/12 08:59:36] ppocr INFO: epoch: [1/200], global_step: {step}, lr: 0.001000, "
                     f"loss: {9.5 - min(step, 150) / 100:.6f}, loss_shrink_maps: 4.588675, avg_reader_cost: 0.1 s")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["amp/overflow"].loc[160] == 5 and run.steps["loss_scale"].loc[160] == 2.0 ** 10
    kinds = {i.kind: i.severity for i in analyze_run(run).incidents}
    assert kinds["loss_scale_collapse"] == "critical"


def _avalanche_epoch(epoch: int, loss: float) -> list[str]:
    # avalanche/logging/text_logging.py: "Epoch {e} ended." then "\t{name} = {value:.4f}", sorted by name
    return ["100%|██████████| 94/94 [00:02<00:00, 37.62it/s]", f"Epoch {epoch} ended.",
            f"\tLoss_Epoch/train_phase/train_stream/Task000 = {loss:.4f}",
            f"\tLoss_MB/train_phase/train_stream/Task000 = {loss * 0.8:.4f}",
            "\tTop1_Acc_Epoch/train_phase/train_stream/Task000 = 0.8185",
            "\tTop1_Acc_MB/train_phase/train_stream/Task000 = 0.8462"]


def test_avalanche_epochs_over_its_experiences(tmp_path):
    """Avalanche's TextLogger prints "Epoch N ended." and a "\\tName = value" line per metric: "its lines
    log Loss_Epoch/train_phase/train_stream/Task003 ... but no loss" (avalanche#1271). The epoch's
    mean loss is read, the epochs numbered in order across experiences (each starts again from 0);
    the evaluation blocks between are no records. A NaN is told at its epoch."""
    lines = ["-- >> Start of training phase << --"]
    for experience, losses in enumerate(([1.9, 1.4, 1.2, 1.19], [1.8, 1.3, math.nan, math.nan])):
        lines.append(f"Start training on experience {experience}")
        for epoch, loss in enumerate(losses):
            lines += _avalanche_epoch(epoch, loss)
        lines += ["-- >> End of training phase << --", f"> Eval on experience {experience} (Task 0) from test stream ended.",
                  f"\tLoss_Exp/eval_phase/test_stream/Task000/Exp00{experience} = 6.2830",
                  f"\tTop1_Acc_Exp/eval_phase/test_stream/Task000/Exp00{experience} = 0.0000"]
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.source == "avalanche" and run.steps.index.tolist() == list(range(1, 9))
    assert run.steps["loss"].iloc[:6].tolist() == [1.9, 1.4, 1.2, 1.19, 1.8, 1.3]
    (nan,) = [i for i in analyze_run(run).incidents if i.severity == "critical"]
    assert (nan.kind, nan.step) == ("nonfinite", 7)
    # one experience pasted from its 10th epoch: the epochs as printed (they were numbered 1, 2, 3, ...)
    lines = [line for epoch in range(9, 16) for line in _avalanche_epoch(epoch, 1.19 - epoch / 1000)]
    (run,) = discover_runs(_write(tmp_path / "one.txt", lines))
    assert run.steps.index.tolist() == list(range(9, 16))


def test_a_loss_of_exactly_one_on_every_line(tmp_path):
    """PaddleOCR's DB detector printed "'total_loss': 1.0, 'loss_shrink_maps': 0.0, ..." on every line
    (PaddleOCR#461, #13159: the maintainer blames the labels' format): "healthy". A loss of exactly 1
    from the start (or jumped into) for four rows is a Dice loss over masks that never overlap; a
    loss near 1 printed with one decimal, come down to it, is not."""
    lines = [f"2020-07-31 14:30:53,131-INFO: epoch: 0, iter: {i}, 'lr': 0.002, 'total_loss': 1.0, "
             "'loss_shrink_maps': 0.0, 'loss_threshold_maps': 0.0, 'loss_binary_maps': 1.0, 'reader_cost': 0.1"
             for i in range(20, 121, 20)]
    (run,) = discover_runs(_write(tmp_path / "db.log", lines))
    (stuck,) = analyze_run(run).incidents
    assert (stuck.kind, stuck.step, stuck.end_step) == ("loss_stuck", 20, 120) and "exactly 1" in stuck.message
    coarse = [f"step {i} loss {v:.1f}" for i, v in enumerate([1.4, 1.2, 1.1, 1.04, 0.98, 1.01, 0.97, 1.02, 0.99], 1)]
    (run,) = discover_runs(_write(tmp_path / "coarse.log", coarse))
    assert [i.kind for i in analyze_run(run).incidents] == []


def test_an_epoch_column_named_epoch_num(tmp_path):
    """pointMLP's log table names its epoch "Epoch-Num" (pointMLP-pytorch#52): "a table with a loss
    column 'Train-Loss' but no step column". It is the epoch."""
    lines = ["Epoch-Num\tLearning-Rate\tTrain-Loss\tTrain-acc-B\tTrain-acc\tValid-Loss\tValid-acc-B\tValid-acc\t"]
    lines += [f"{e:.6f}\t0.009999\t{2.77 - e / 10:.6f}\t8.452000\t12.631000\t{2.57 - e / 10:.6f}\t9.5\t16.7\t"
              for e in range(12)]
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.steps.index.tolist() == list(range(12)) and run.meta["step_unit"] == "epoch"
    assert run.steps["loss"].iloc[-1] == pytest.approx(1.67)


def test_a_count_in_brackets_after_a_tab(tmp_path):
    """EasyOCR's trainer reports "[20000/300000] Train loss: 0.14954, Valid loss: 0.09600, ..." led by
    a tab (EasyOCR#1192): not read. A bracketed count after a tab starts a record as one at the
    line's start does."""
    lines = [f"\t[{i}/300000] Train loss: {0.2 - i / 1e6:.5f}, Valid loss: {0.1:.5f}, Elapsed_time: {i / 15:.5f}"
             for i in range(20000, 120001, 20000)]
    (run,) = discover_runs(_write(tmp_path / "log_train.txt", lines))
    assert run.steps.index.tolist() == list(range(20000, 120001, 20000))
    assert run.steps["loss"].iloc[0] == pytest.approx(0.18)


def test_a_progress_meter_whose_prefix_is_train(tmp_path):
    """The ImageNet example's ProgressMeter with prefix "Train: [{epoch}]" (sightseq#13: ">> Train:
    [1][109/90000]\\tTime ...\\tLoss inf (inf)"): not read, its inf unseen. Read as "Epoch: [e][i/n]" is."""
    lines = [f">> Train: [1][{i}/90000]\tTime 0.348 (0.361)\tData 0.003 (0.006)\tLoss {v} (31.5477)"
             for i, v in ((105, "31.0021"), (106, "30.9410"), (107, "30.3012"), (108, "30.0584"), (109, "inf"),
                          (110, "nan"))]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == list(range(105, 111))
    (bad,) = analyze_run(run).incidents
    assert (bad.kind, bad.step, bad.severity) == ("nonfinite", 109, "critical")


def test_flower_summaries_of_its_losses_by_round(tmp_path):
    """Flower prints its evaluation losses by round at the end of a run, "app_fit: losses_centralized
    [(0, 722.71), (1, nan), ...]" (flower#2342, a NaN from round 1 on), and from 1.5 on a "History
    (loss, distributed):" block of "round 1: 2.2907" lines: "not a log format". Each round is a
    step; the clients' aggregate is the loss, the server's own beside it."""
    line = "INFO flwr 2023-09-11 23:34:26,374 | app.py:221 | app_fit: losses_centralized [{}]"
    pairs = ", ".join(f"({r}, {v})" for r, v in enumerate([722.7143316268921, "nan", "nan", "nan", "nan"]))
    (run,) = discover_runs(_write(tmp_path / "flwr.log", ["INFO flwr | app.py:217 | app_fit: losses_distributed []",
                                                            line.format(pairs)]))
    assert run.source == "flower" and run.steps.index.tolist() == [0, 1, 2, 3, 4]
    (nan,) = analyze_run(run).incidents
    assert (nan.kind, nan.step, nan.end_step, nan.severity) == ("nonfinite", 1, 4, "critical")
    lines = ["INFO :      [SUMMARY]", "INFO :      Run finished 4 round(s) in 21.49s",
             "INFO :          History (loss, distributed):"]
    lines += [f"INFO :                  round {r}: {2.3 - r / 50:.4f}" for r in range(1, 5)]
    lines += ["INFO :          History (loss, centralized):"]
    lines += [f"INFO :                  round {r}: {2.31 - r / 50:.4f}" for r in range(0, 5)]
    (run,) = discover_runs(_write(tmp_path / "flwr15.log", lines))
    assert run.steps["loss"].dropna().to_dict() == {1: 2.28, 2: 2.26, 3: 2.24, 4: 2.22}
    assert run.steps["centralized_loss"].dropna().index.tolist() == [0, 1, 2, 3, 4]
    assert "Flower's rounds" in " ".join(run.warnings)
    # later releases: the block as pprint writes a string, its tab and line end escaped
    lines = ["INFO :      Run finished 5 rounds in 22.28s", "INFO :      History (loss, distributed):"]
    lines += [f"INFO :          {'(' if r == 1 else ' '}'\\tround {r}: {2.3 - r / 50:.4f}\\n'{')' if r == 5 else ''}"
              for r in range(1, 6)]
    (run,) = discover_runs(_write(tmp_path / "flwr18.log", lines))
    assert run.steps["loss"].dropna().to_dict() == {1: 2.28, 2: 2.26, 3: 2.24, 4: 2.22, 5: 2.2}


def test_a_bar_drawn_without_its_bar_its_description_the_loss(tmp_path):
    """torch-ngp's and nerf2mesh's bar_format, "{desc}: {percentage:3.0f}% {n_fmt}/{total_fmt} [...]",
    their description "loss=X (avg) lr=L" (nerf2mesh#58: NaN on every draw): "not a log format". The
    bar's count is the step, as for a bar drawn with its bar."""
    lines = [f"loss={v} ({v}) lr=0.007100: : {n:3d}% {n}/100 [00:00<00:00, 98.30it/s]NaN or Inf found in input tensor."
             for n, v in zip(range(86, 97), ["0.0153"] * 3 + ["nan"] * 8)]
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.steps.index.tolist() == list(range(86, 97))
    (nan,) = analyze_run(run).incidents
    assert (nan.kind, nan.step, nan.severity) == ("nonfinite", 89, "critical")
    # A description with its epoch before the loss, the bar's count the epoch's last (a Colab paste
    # of DMRGCN's bars, their glyphs lost): the epochs are the steps, as the generic reader reads them.
    lines = [f"Train Epoch: {e} Loss: 0.35977894: 100% 2785/2785 [00:53<00:00, 52.28it/s]" for e in range(16, 22)]
    (run,) = discover_runs(_write(tmp_path / "epochs.txt", lines))
    assert run.steps.index.tolist() == list(range(16, 22))


def test_mmcv_json_rows_whose_validation_rows_count_their_own_iterations(tmp_path):
    """mmcv's JSON log (MMOCR, MMDetection 2.x) writes a validation row at each epoch's end whose
    "iter" is the validation's own count ({"mode": "val", "epoch": 69, "iter": 80, ...}): the epoch's
    length was taken from it (80, not 20), the steps spread four times too far (MMOCR#1064). The
    training rows' counts give the length; a validation row sits at its epoch's end."""
    rows = []
    for epoch in range(70, 74):
        rows += [{"mode": "train", "epoch": epoch, "iter": i, "lr": 0.00478, "loss": 1.4 - epoch / 100 + i / 1000,
                  "time": 1.2} for i in (5, 10, 15, 20)]
        rows.append({"mode": "val", "epoch": epoch, "iter": 80, "lr": 0.00478, "hmean-iou:hmean": 0.80})
    (run,) = discover_runs(_write(tmp_path / "20220101_120000.log.json", [json.dumps(r) for r in rows]))
    assert run.steps["loss"].dropna().index.tolist() == [s + 20 * e for e in range(4) for s in (5, 10, 15, 20)]
    assert "20 an epoch" in " ".join(run.warnings)


def test_a_step_column_named_by_number_that_is_no_step(tmp_path):
    """--step-col 2 on a headerless file whose second column is a loss: the error named "the first"
    of "two numbers per line" and asked for --step-col/--loss-col, which the user had passed."""
    path = _write(tmp_path / "n.txt", [f"{i} {2.5 - i / 10} 0.1" for i in range(1, 6)])
    result = CliRunner().invoke(main, ["analyze", str(path), "--step-col", "2", "--loss-col", "1"])
    assert result.exit_code == 1 and "column 2 (--step-col) is not a step" in result.output
    assert "Traceback" not in result.output


def _time_series_library(epochs: int, iters_per_epoch: int = 0) -> list[str]:
    """Time-Series-Library's (and Informer's, Autoformer's) prints, from its format strings."""
    lines = []
    for e in range(1, epochs + 1):
        for i in range(100, iters_per_epoch + 1, 100):
            lines.append("\titers: {0}, epoch: {1} | loss: {2:.7f}".format(i, e, 0.5 / e + i / 1e4))
            lines.append("\tspeed: {:.4f}s/iter; left time: {:.4f}s".format(0.0656, 112.915))
        lines.append("Epoch: {} cost time: {}".format(e, 25.79011583328247))
        lines.append("Epoch: {0}, Steps: {1} | Train Loss: {2:.7f} Vali Loss: {3:.7f} Test Loss: {4:.7f}".format(
            e, 384, 0.6 / e, 0.7 / e + 0.1, 0.65 / e + 0.05))
        lines.append(f"Validation loss decreased ({0.9 / e:.6f} --> {0.7 / e + 0.1:.6f}).  Saving model ...")
        lines.append(f"Updating learning rate to {1e-4 / 2 ** e}")
    return lines


@pytest.mark.parametrize("iters", [0, 384])
def test_time_series_library_vali_loss_is_the_validation_loss_at_each_epoch(tmp_path, iters):
    """"Train Loss: ... Vali Loss: ... Test Loss: ..." on one line: the validation loss is Vali
    (the test loss was taken for it), and where the iterations' lines come between, each epoch's
    at its end (all five were one value at step 384, "Steps: 384" being the epoch's length)."""
    (run,) = discover_runs(_write(tmp_path / "train.log", _time_series_library(5, iters)))
    val = run.steps["val_loss"].dropna()
    assert val.round(6).tolist() == [round(0.7 / e + 0.1, 6) for e in range(1, 6)]
    assert val.index.tolist() == ([1, 2, 3, 4, 5] if not iters else [384 * e for e in range(1, 6)])
    assert run.steps["loss"].notna().sum() == (5 if not iters else 5 * 4)


@pytest.mark.parametrize("first", [0, 400])  # every 100th batch printed; the epoch's last alone
def test_monai_unetr_trainer_epoch_of_count_lines_and_its_epoch_summaries(tmp_path, first):
    """MONAI's UNETR / Swin-UNETR trainer: "Epoch 0/300 100/500 loss: ..." (the count bare after the
    epoch's own total), then "Final training  0/299 loss: ..." after each epoch. The count was
    read as the epoch's "0/300" (six losses a step, "every rank printing?"), and the summaries,
    a count of epochs, as steps 0, 1, 2 among the iterations' steps."""
    lines = ["0  gpu 0", "Batch size is: 1 epochs 300"]
    for epoch in range(3):
        lines.append(f"0 Tue Sep 19 07:03:25 2023 Epoch: {epoch}")
        for idx in range(first, 500, 100):
            print_args = ("Epoch {}/{} {}/{}".format(epoch, 300, idx, 500), "loss: {:.4f}".format(0.97 - 0.01 * epoch - idx / 1e5),
                          "time {:.2f}s".format(1.5))
            lines.append(" ".join(print_args))
        lines.append(" ".join(("Final training  {}/{}".format(epoch, 299), "loss: {:.4f}".format(0.96 - 0.01 * epoch),
                               "time {:.2f}s".format(1514.97))))
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == [500 * e + i for e in range(3) for i in range(first, 500, 100)]
    assert run.steps["loss"].iloc[-1] == 0.9460 and not any("times with different values" in w for w in run.warnings)


def _keras_value(v: float) -> str:
    return " %.4f" % v if abs(v) > 1e-3 else " %.4e" % v  # Keras' Progbar


@pytest.mark.parametrize("prefix", ["%ds", " - %ds", " - %ds 48ms/step"])  # Keras 1, 2.0-2.1, 2.2
def test_keras_fit_verbose_2_before_tensorflow_2_one_line_an_epoch(tmp_path, prefix):
    """Keras' fit(verbose=2) before TF 2: "Epoch 3/50" on its own line, then the epoch's line with
    no batch count ("3s - loss: 0.41 - acc: 0.86 - val_loss: 0.52"): "not a log format". A line per
    epoch, the epoch the header's, each value the epoch's."""
    lines = []
    for epoch in range(1, 9):
        lines.append("Epoch %d/100" % epoch)
        info = prefix % (230 + epoch)
        for key, value in (("loss", 6.0 / epoch), ("dice_coef", 0.1 * epoch), ("val_loss", 5.0 / epoch),
                           ("val_dice_coef", 0.09 * epoch)):
            info += " - %s:" % key + _keras_value(value)
        lines.append(info)
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == list(range(1, 9)) and run.meta.get("step_unit") == "epoch"
    assert run.steps["loss"].round(4).tolist() == [round(6.0 / e, 4) for e in range(1, 9)]
    assert run.steps["val_loss"].round(4).tolist() == [round(5.0 / e, 4) for e in range(1, 9)]


def test_an_epoch_with_its_total_is_no_count_inside_an_epoch(tmp_path):
    """"Epoch 3/50 - loss: 0.41 - val_loss: 0.52" on one line: "3/50" after the word epoch is the
    epoch, not a batch count (the count's reader took it, and each validation loss went to the
    epoch before its own)."""
    lines = [f"Epoch {e}/50 - 229s - loss: {6.0 / e:.4f} - dice_coef: 0.5 - val_loss: {5.0 / e:.4f}" for e in range(1, 9)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == list(range(1, 9))
    assert run.steps["val_loss"].round(4).tolist() == [round(5.0 / e, 4) for e in range(1, 9)]


def test_a_loss_printed_as_a_one_element_list(tmp_path):
    """PaddlePaddle's fluid scripts print the fetched array, "loss: [10.000229]", "loss: [nan]": the
    file was "not a log format" whose lines "log batch, epoch, iter, loss but no loss". TensorFlow
    1's tf.Print(total_loss, [total_loss], message="Total loss is :") prints "Total loss is :[0.14]"
    on lines of their own (DeepLab), its NaN too."""
    paddle = [f"2022-12-08 17:57:31,371-INFO: Total iter: {i * 10}, epoch: 0, batch: {i * 10}, loss: "
              f"[{'10.000229' if i == 0 else 'nan'}]" for i in range(6)]
    (run,) = discover_runs(_write(tmp_path / "paddle.log", paddle))
    assert run.steps.index.tolist() == [0, 10, 20, 30, 40, 50] and run.steps["loss"].iloc[0] == 10.000229
    nan = [i for i in analyze_run(run).incidents if i.kind == "nonfinite"]
    assert [(i.step, i.end_step) for i in nan] == [(10, 50)]
    deeplab = ["INFO:tensorflow:Saving checkpoints for 0 into train/model.ckpt."]
    for i in range(10):
        deeplab += [f"Total loss is :[{0.1406 + i * 1e-5 if i < 5 else 'nan'}]", "INFO:tensorflow:global_step/sec: 2.7"]
    (run,) = discover_runs(_write(tmp_path / "deeplab.log", deeplab))
    assert run.steps["loss"].isna().sum() == 5 and run.steps["loss"].iloc[0] == 0.1406


def test_a_loss_printed_as_no_number_is_said_so(tmp_path):
    """A loss printed as an array of several values is named as what the lines print, not as "no
    loss" beside a list of keys that holds it."""
    path = _write(tmp_path / "train.log", [f"epoch: {e}, iter: {e * 10}, loss: [0.5{e} 0.4{e}]" for e in range(8)])
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1, result.output
    assert "its lines name loss but print no number sentinel reads for it (printed as '[0.50')" in result.output


def test_sam2_trainer_all_loss_is_the_total(tmp_path):
    """SAM 2's (and SAM 3's) trainer: "Losses/train_all_loss: 7.38e+01 (1.58e+02) |
    Losses/train_default_loss: 0.00e+00 (0.00e+00)" on its ProgressMeter lines. Two losses and none
    called total: "pass --loss-col"; "all" names the sum of the terms."""
    lines = [f"INFO 2026-01-31 12:45:21,724 train_utils.py: 269: Train Epoch: [44][ {i * 50:3d}/1261] | Batch Time: "
             f"0.49 (0.72) | Data Time: 0.00 (0.22) | Mem (GB): 7.00 (7.07/10.00) | Time Elapsed: 00d 09h 59m | "
             f"Losses/train_all_loss: {70 + i:.2e} (1.58e+02) | Losses/train_default_loss: 0.00e+00 (0.00e+00)"
             for i in range(8)]
    lines.append("ERROR 2026-01-31 12:45:25,812 trainer.py: 953: Loss is nan, attempting to stop training")
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.steps["loss"].tolist() == [70.0 + i for i in range(8)]
    assert [i.kind for i in analyze_run(run).incidents] == ["nonfinite"]


def test_tf_estimator_evaluation_dict_is_the_validation_loss(tmp_path):
    """tf.estimator: "loss = 0.98, step = 1" while training, then its evaluation's "Saving dict for
    global step 2036: accuracy = 1.0, ..., loss = 4.49e-10": that loss was read as the training
    loss of step 2036 (the run's "final loss")."""
    lines = []
    for step in range(1, 2502, 500):
        lines += [f"INFO:tensorflow:loss = {1.0 / step:.7g}, step = {step} (1.9 sec)", "INFO:tensorflow:global_step/sec: 263.2"]
    lines += ["INFO:tensorflow:Loss for final step: 5.3157163e-04.",
              "INFO:tensorflow:Saving dict for global step 2536: accuracy = 0.91, auc = 0.95, global_step = 2536, loss = 0.31"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["loss"].dropna().index.tolist() == list(range(1, 2502, 500))
    assert run.steps["val_loss"].dropna().to_dict() == {2536: 0.31}


def test_gat_training_lines_of_a_loss_and_its_accuracy(tmp_path):
    """GAT's train.py: "Training: loss = %.5f, acc = %.5f | Val: loss = %.5f, acc = %.5f | Time: ...",
    one line an epoch and no step: "not a log format". Lines of a loss numbered in order, the
    accuracy after it and the validation part left; its rise from 1.70 to 6.06 is told."""
    losses = [1.69535, 1.8182, 1.93426, 1.97562, 2.17724, 2.6062, 3.08253, 3.59296, 4.1, 4.6, 5.1, 5.6, 6.056]
    lines = ["Training: loss = %.5f, acc = %.5f | Val: loss = %.5f, acc = %.5f | Time: %.5f (graph/s)"
             % (v, 0.45 - 0.02 * k, v + 0.2, 0.32 - 0.01 * k, 16.73) for k, v in enumerate(losses)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["loss"].round(5).tolist() == losses
    assert any(i.kind in ("loss_spike", "divergence") and i.severity == "critical" for i in analyze_run(run).incidents)


def test_ngcf_epoch_lines_and_its_nan_check(tmp_path):
    """NGCF / KGAT / LightGCN: "Epoch %d [%.1fs]: train==[%.5f=%.5f + %.5f]", and "Epoch %d [%.1fs +
    %.1fs]: train==[...], recall=[...], ..." where the epoch was tested: "not a log format" (and
    --loss-col train did not help). Its NaN check prints "ERROR: loss is nan." and exits."""
    lines = ["n_users=29858, n_items=40981", "n_interactions=1027370"]
    for epoch in range(12):
        loss = 266.0 / (1 + epoch)
        terms = "train==[%.5f=%.5f + %.5f]" % (loss, loss - 0.5, 0.5)
        lines.append("Epoch %d [%.1fs + %.1fs]: %s, recall=[0.1, 0.2], precision=[0.03, 0.02]" % (epoch, 60.2, 30.1, terms)
                     if epoch % 5 == 4 else "Epoch %d [%.1fs]: %s" % (epoch, 60.2, terms))
    lines.append("ERROR: loss is nan.")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["loss"].dropna().index.tolist() == list(range(12)) and run.meta.get("step_unit") == "epoch"
    assert run.steps["loss"].iloc[0] == 266.0
    assert [i.kind for i in analyze_run(run).incidents] == ["nonfinite"]


def test_losses_each_on_a_line_of_its_own_are_not_said_to_be_no_number(tmp_path):
    """lightweight-human-pose-estimation prints "Iter: 100" and then one "stage1_pafs_loss: 7.67" line
    per loss: plain numbers, on lines with no step. Not "print no number sentinel reads": read, each
    Iter's terms summed (test_pose_estimation_stage_losses_on_lines_of_their_own)."""
    lines = []
    for it in range(100, 900, 100):
        lines += [f"Iter: {it}", f"stage1_pafs_loss:     {it / 13:.13f}", f"stage1_heatmaps_loss: {it / 28:.13f}"]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "train.log", lines))])
    assert "print no number" not in result.output
    assert "(pose_stages)" in result.output and "steps 8 (100..800)" in result.output
    # each "Iter: N" after a tqdm bar drawn without its line end (lightweight-human-pose-estimation#100: refused)
    lines = [line if not line.startswith("Iter") else f" 20%|##        | 104/516 [02:42<10:42,  1.56s/it]{line}"
             for line in lines]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "bars.log", lines))])
    assert "(pose_stages)" in result.output and "steps 8 (100..800)" in result.output, result.output


@pytest.mark.parametrize("newer", [True, False])
def test_pyslowfast_json_stats(tmp_path, newer):
    """PySlowFast's logging.py: "json_stats: {...}" (json.dumps(stats, sort_keys=True)) after its
    logger's prefix, the training iterations' "_type": "train_iter" with "epoch": "1/300", "iter":
    "80/240" (older: "cur_epoch": "1", "cur_iter": "10"); epoch summaries and evaluations are no
    training records. It was "not a log format"."""
    lines = []
    for epoch in (1, 2):
        for it in range(20, 101, 20):
            stats = {"_type": "train_iter", "dt": 1.11, "eta": "22:10:54", "gpu_mem": "7.15G",
                     "loss": round(1.0 / (epoch * 100 + it), 5), "lr": 0.1, "top1_err": 50.0}
            stats.update({"epoch": f"{epoch}/300", "iter": f"{it}/100", "grad_norm": 0.2} if newer else
                         {"cur_epoch": str(epoch), "cur_iter": str(it)})
            lines.append("[11/16 11:49:18][INFO] logging.py:   99: json_stats: " + json.dumps(stats, sort_keys=True))
        lines.append("[11/16 11:59:18][INFO] logging.py:   99: json_stats: " + json.dumps(
            {"_type": "train_epoch", "epoch": f"{epoch}/300", "loss": 9.9, "lr": 0.1}, sort_keys=True))
        lines.append("[11/16 11:59:18][INFO] logging.py:   99: json_stats: " + json.dumps(
            {"_type": "val_epoch", "epoch": f"{epoch}/300", "top1_err": 40.0}, sort_keys=True))
    (run,) = discover_runs(_write(tmp_path / "stdout.log", lines))
    assert run.steps["loss"].dropna().index.tolist() == [20, 40, 60, 80, 100, 120, 140, 160, 180, 200]
    assert 9.9 not in run.steps["loss"].tolist() and run.steps["loss"].iloc[0] == round(1.0 / 120, 5)


def test_swav_progress_lines_without_the_epochs_length(tmp_path):
    """SwAV's and DeepCluster-v2's logger: "Epoch: [163][50]\\tTime ... Loss 8.0065 (8.0066)\\tLr: ...", the
    count inside the epoch with no "/TOTAL": "not a log format"."""
    lines = []
    for epoch in (0, 1):
        lines.append(f"INFO - 08/11/20 13:38:30 - 1 day, 22:12:26 - ============ Starting epoch {epoch} ... ============")
        for it in range(0, 250, 50):
            lines.append(f"INFO - 08/11/20 13:38:32 - 1 day, 22:12:28 - Epoch: [{epoch}][{it}]\tTime 1.958 (1.958)\t"
                         f"Data 1.576 (1.576)\tLoss {8.0 - epoch - it / 1000:.4f} (8.0066)\tLr: 3.1982")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    loss = run.steps["loss"].dropna()
    assert len(loss) == 10 and loss.index.is_monotonic_increasing and loss.iloc[0] == 8.0 and loss.iloc[-1] == 6.8


def test_lines_of_an_average_loss_said_in_words(tmp_path):
    """A script's "Avg Loss is 3.577977" under "===>>> Epoch 1 <<<===" headers: lines of a loss alone."""
    lines = []
    for epoch in range(1, 5):
        lines.append(f" ===>>> Epoch {epoch} <<<=== ")
        lines += [f"Avg Loss is {3.6 - 0.1 * epoch - 0.01 * k:.6f}" for k in range(4)] + ["Save best model"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert len(run.steps["loss"].dropna()) == 16 and run.steps["loss"].iloc[0] == 3.5


def test_st_gcn_batch_done_lines(tmp_path):
    """ST-GCN's and 2s-AGCN's processor: "[ Wed Jun  6 16:01:16 2018 ] \\tBatch(100/1879) done. Loss: 5.9635
    lr:0.100000" under "Training epoch: N" headers: "not a log format" (the count in parentheses)."""
    lines = []
    for epoch in (1, 2):
        lines.append(f"[ Wed Jun  6 16:01:01 2018 ] Training epoch: {epoch}")
        lines += [f"[ Wed Jun  6 16:01:16 2018 ] \tBatch({b}/500) done. Loss: {6.4 - epoch * 0.3 - b / 1000:.4f}  lr:0.100000"
                  for b in range(0, 500, 100)]
        lines.append(f"[ Wed Jun  6 16:31:16 2018 ] \tMean training loss: {6.2 - epoch * 0.3:.4f}.")
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    loss = run.steps["loss"].dropna()
    assert loss.index.tolist() == [0, 100, 200, 300, 400, 500, 600, 700, 800, 900] and loss.iloc[0] == 6.1


def test_a_count_in_parentheses_at_a_lines_start(tmp_path):
    """A meter-reading model's "(330 / 438)  Loss: nan  pointer_loss: nan ..." at every iteration: "finds no step
    it reads", the NaN run refused."""
    lines = [f"({b} / 438)  Loss: {'nan' if b >= 330 else 2.1 - b / 1000:.6}  pointer_loss: 0.3  text_loss: 0.2"
             for b in range(10, 440, 10)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index[[0, -1]].tolist() == [10, 430]
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 330)]


def test_centernet_and_fairmot_progress_lines(tmp_path):
    """CenterNet's and FairMOT's bar: "{task}/{exp_id}| train: [10][929/2658]|Tot: 0:15:44 |ETA: 0:00:00 |loss
    -0.5303 |hm_loss 0.0052 |...": the ProgressMeter's "Train: [e][i/N]" in lower case."""
    lines = [f"mot/default| train: [10][{i}/2658]|Tot: 0:15:44 |ETA: 0:00:00 |loss {-0.5 - i / 1e5:.4f} |hm_loss 0.0052 "
             f"|wh_loss 0.6878 |off_loss 0.1891 |id_loss 0.1677 |Data 0.027s(0.032s) |Net 1.015s" for i in range(929, 939)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == [9 * 2658 + i for i in range(929, 939)]
    assert run.steps["loss"].iloc[0] == -0.5093


def test_paddlevideo_epoch_then_step_is_no_torchtitan_line(tmp_path):
    """PaddleVideo: "epoch:[  1/196] train step:0    loss: 0.00000 lr: 0.010000 top1: ...": read as
    torchtitan's "step: N  loss: X", the epoch left out, every epoch's step 0 one step."""
    lines = []
    for epoch in (1, 2):
        lines += [f"[11/08 16:52:25] epoch:[{epoch:3d}/196] train step:{s:<4d} loss: {2.0 - epoch * 0.1 - s / 1000:.5f} "
                  f"lr: 0.010000 top1: 0.00000 top5: 0.00000 batch_cost: 0.26 sec, reader_cost: 0.01 sec, ips: 30.0 "
                  "instance/sec, eta: 2:32:41" for s in range(0, 30, 10)]
        lines.append(f"[11/08 16:52:25] END epoch:{epoch}   train loss_avg: 1.80000  top1_avg: 0.00000 top5_avg: 0.00000")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source != "torchtitan" and len(run.steps["loss"].dropna()) == 6
    assert run.steps["loss"].dropna().index.is_monotonic_increasing


def test_mmcv_json_rows_one_an_epoch_at_the_same_iteration(tmp_path):
    """mmaction2's JSON log of a short epoch: one training row an epoch, all at "iter": 20, and a
    validation row at "iter": 22: the rows were one step (20), five epochs one value."""
    rows = []
    for epoch in (1, 2, 14, 15, 16):
        rows.append({"mode": "train", "epoch": epoch, "iter": 20, "lr": 0.05, "loss_action_cls": 0.2 / epoch,
                     "loss": 0.2 / epoch, "grad_norm": 0.9})
        rows.append({"mode": "val", "epoch": epoch, "iter": 22, "lr": 0.05, "mAP@0.5IOU": 0.0})
    (run,) = discover_runs(_write(tmp_path / "20210101_000000.log.json", [json.dumps(r) for r in rows]))
    loss = run.steps["loss"].dropna()
    assert loss.index.tolist() == [20, 40, 280, 300, 320] and loss.iloc[-1] == 0.2 / 16


def test_a_spike_that_recovered_onto_the_trainers_nan_zeros_did_not(tmp_path):
    """A QLoRA fine-tune's HF dicts: 0.68, 0.64, 1.13, 1.28, 31.45, then 'loss': 0.0 to the end (the
    Trainer's NaN filter). The spike "recovered in 3 steps (step 6)" onto those zeros, and the run's
    best loss was 0: it went non-finite from step 6, and its best loss was 0.642."""
    losses = [0.684, 0.642, 1.1291, 1.2843, 31.4517, 0.0, 0.0]
    lines = [f"{{'loss': {v}, 'learning_rate': 3e-05, 'epoch': {0.31 * (k + 1):.2f}}}" for k, v in enumerate(losses)]
    code, report = _analyze(str(_write(tmp_path / "train.log", lines)))
    (run,) = report["runs"]
    spike = next(i for i in run["incidents"] if i["kind"] == "loss_spike")
    assert spike["severity"] == "critical" and spike["message"].endswith("then non-finite from step 6")
    assert run["best_loss"] == 0.642 and run["final_loss"] is None


def test_a_loggers_level_is_no_key_its_lines_log(tmp_path):
    """wespeaker's table rows pasted without their header ("[ INFO : 2023-07-06 07:55:30,898 ] - |  3|
    200|  0.52112| ..."): "its lines log INFO but no loss", the logger's level read as a metric."""
    lines = [f"[ INFO : 2023-07-06 07:55:30,898 ] - |         3|       {b}|   0.52112|         0|    {5.2 - b / 1e3:.4f}|"
             f"    9.7266|" for b in range(100, 1100, 100)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "train.log", lines))])
    assert result.exit_code == 1 and "INFO" not in result.output, result.output


def test_fairseq_tqdm_bars_beside_its_epoch_summaries(tmp_path):
    """fairseq's default terminal format (--log-format tqdm): "| epoch 014:  94%|▉| 33/35 [00:38<00:02,
    1.14s/it, loss=11.793, ..., num_updates=488, lr=0.00025, gnorm=0.432, ...]", redraws run into one line,
    then "| epoch 014 | loss 11.805 | ... | num_updates 490" and its validation line. The fairseq reader
    took the summaries alone: one step of seven."""
    lines, update = [], 480
    for epoch in (14, 15):
        bars = []
        for i in range(1, 5):
            update += 1
            bars.append(f"| epoch {epoch:03d}:  {i * 20:2d}%|▉| {i}/5 [00:38<00:02,  1.14s/it, loss={11.8 - update / 1e4:.3f}, "
                        f"ppl=3549.22, wps=2287, ups=0.5, wpb=2622, bsz=177, num_updates={update}, lr=0.00025, gnorm=0.432, "
                        "clip=0.000, oom=0.000, wall=1082, train_wall=551]")
        lines.append("".join(bars))
        lines.append(f"| epoch {epoch:03d} | loss 11.805 | ppl 3578.8 | wps 2239 | ups 0.5 | wpb 2560 | bsz 174 | "
                     f"num_updates {update} | lr 0.00025 | gnorm 0.448 | clip 0.000 | oom 0.000 | wall 1082 | train_wall 551")
        lines.append(f"| epoch {epoch:03d} | valid on 'valid' subset | valid_loss 12.0756 | valid_ppl 4316.30 | "
                     f"num_updates {update} | best 12.0756")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "fairseq" and run.steps["loss"].dropna().index.tolist() == list(range(481, 489))
    assert run.steps.loc[481, "loss"] == 11.752


def test_openpcdet_acc_iter_is_the_step(tmp_path):
    """OpenPCDet's logger: "epoch: 3/120, acc_iter=1084, cur_iter=270/271, batch_size=1, loss=5.03, lr=...":
    acc_iter, the iterations accumulated over epochs, is the step (the lines were numbered 1, 2, 3)."""
    lines = [f"2022-10-23 03:18:48,048   INFO  epoch: {3 + k // 4}/120, acc_iter={1084 + 36 * k}, cur_iter={(36 * k) % 271}/271, "
             f"batch_size=1, loss={5.03 - k / 100}, lr=0.00034591578674610145" for k in range(8)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == [1084 + 36 * k for k in range(8)]


def test_a_loss_summed_over_the_batch_beside_its_mean(tmp_path):
    """PaddlePaddle's Transformer: "batch: 0, sum loss: 43280.621094, avg loss: 10.858159, ppl: ...": the
    sum over the batch's tokens (43,280, its size the batch's) was read as the loss; the mean is."""
    lines = [f"batch: {b}, sum loss: {4000 * (10.9 - b / 10) * (1 + b % 3):.6f}, avg loss: {10.9 - b / 10:.6f}, "
             f"ppl: 51956.343750" for b in range(10)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["loss"].round(6).tolist() == [round(10.9 - b / 10, 6) for b in range(10)]


@pytest.mark.parametrize("late", ["", "nan"])
def test_a_lightning_csv_under_another_name_its_empty_cells_are_not_nan(tmp_path, late):
    """Lightning's CSVLogger metrics.csv pasted as a .log (HiVT): the step loss logged once (every
    50 steps, an epoch of 4), the epoch loss at each epoch's rows. Its empty step-loss cells there
    were "loss non-finite (nan) at steps 151-163"; a printed nan still is one."""
    rows = ["epoch,step,train_reg_loss_epoch,train_reg_loss_step,val_minADE,val_reg_loss"]
    for epoch in range(32, 41):
        step = 4 * epoch + 3
        rows.append(f"{epoch},{step},,,14.5,{4.7 - epoch / 100}")
        rows.append(f"{epoch},{step},{4.6 - epoch / 100},,,")
        if epoch == 37:
            rows.append(f"{epoch},{step - 2},,4.237229824066162,,")
    if late:
        rows.append(f"41,167,,{late},,")
    (run,) = discover_runs(_write(tmp_path / "hivt_metrics.log", rows))
    kinds = [i.kind for i in analyze_run(run).incidents]
    assert kinds == (["nonfinite"] if late else []), kinds


def test_det3d_and_centerpoint_step_lines_with_a_line_per_head(tmp_path):
    """Det3D / CenterPoint: "Epoch [1/20][5/50]\\tlr: 0.00031, eta: ..., memory: 2925, " then a "task : ['car'],
    loss: X, hm_loss: ..." line per detection head: "not a log format" (a NaN run missed). The step's
    loss is its heads' sum; a NaN head makes it NaN."""
    heads = [["car"], ["truck", "construction_vehicle"], ["pedestrian", "traffic_cone"]]
    lines = ["2021-02-16 19:36:24,847 - INFO - workflow: [('train', 1)], max: 6 epochs"]
    for i in range(5, 55, 5):
        lines.append(f"2021-02-16 19:36:31,442 - INFO - Epoch [1/6][{i}/50]\tlr: 0.00031, eta: 0:06:27, time: 1.313, "
                     "data_time: 0.641, transfer_time: 0.010, forward_time: 0.618, loss_parse_time: 0.000 memory: 2925, ")
        for h, names in enumerate(heads):
            loss = "nan" if i >= 45 else f"{3.0 - i / 100 + h:.4f}"
            lines.append(f"2021-02-16 19:36:31,443 - INFO - task : {names}, loss: {loss}, hm_loss: 1.5786, loc_loss: 2.7862, "
                         "loc_loss_elem: ['0.2167', '0.2029'], num_positive: 20.4000")
    (run,) = discover_runs(_write(tmp_path / "20210216_193624.log", lines))
    loss = run.steps["loss"]
    assert loss.index.tolist() == list(range(5, 55, 5)) and loss.iloc[0] == pytest.approx(3 * 2.95 + 3)
    nan = [i for i in analyze_run(run).incidents if i.kind == "nonfinite"]
    assert [(i.step, i.end_step) for i in nan] == [(45, 50)]


def test_keras_bar_redraws_pasted_on_one_line(tmp_path):
    """Keras' bar redraws pasted on one line, a space where the terminal went back: "15/360 [>....] -
    ETA: 1:34 - loss: 28.3271 - ... 16/360 [>....] - ETA: 1:34 - loss: 28.3311 - ...": "not a log
    format". Each redraw is a line (and a step)."""
    bars = [f"{i}/360 [>.............................] - ETA: 1:34 - loss: {28.3 + i / 1000:.4f} - "
            f"quant_conv2d_17_loss: 0.6805 - quant_conv2d_20_loss: 6.8247" for i in range(15, 25)]
    (run,) = discover_runs(_write(tmp_path / "train.log", ["Epoch 1/50", " ".join(bars)]))
    assert run.steps["loss"].dropna().index.tolist() == list(range(15, 25))


@pytest.mark.parametrize("pdarts", [False, True])
def test_darts_train_lines(tmp_path, pdarts):
    """DARTS' train_search.py: logging.info('train %03d %e %f %f', step, objs.avg, top1.avg, top5.avg)
    (P-DARTS: 'Train Step: %03d Objs: %e Acc: %f'), the step counted inside the epoch: "not a log
    format". Read as steps across epochs; each epoch's step 000, a mean of one batch, is no record.
    PC-DARTS' ImageNet search stuck at ln 1000 is at chance."""
    lines = []
    for epoch in range(3):
        lines.append(f"12/31 00:20:20 AM epoch {epoch} lr 4.824441e-01")
        for step in range(0, 300, 50):
            loss = 0.5 if step == 0 else 6.9105
            lines.append(f"12/31 00:20:57 AM Train Step: {step:03d} Objs: {loss:e} Acc: 0.100000" if pdarts else
                         f"12/31 00:20:57 AM train {step:03d} {loss:e} 0.095312 0.595312")
        lines.append("12/31 00:40:26 AM train_acc 0.090578")
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.source == "darts" and len(run.steps["loss"].dropna()) == 15 and run.steps["loss"].min() > 6.9
    assert run.steps.index.is_monotonic_increasing
    assert [i.kind for i in analyze_run(run).incidents] == ["loss_stuck"]


def test_speechbrain_separation_train_log(tmp_path):
    """SpeechBrain's separation recipes log "epoch: 3, lr: 1.50e-04 - train si-snr: -4.05e-01 - valid
    si-snr: -5.13e+00": its loss is the negative SI-SNR named "si-snr" (lower is better). It was "a
    metric, a rise of these is progress"; a NaN there is the run's."""
    values = [2.23, 1.66, -0.405, -0.635, -0.463, -0.97, -1.22, -2.15, "nan", "nan"]
    lines = [f"epoch: {e}, lr: 1.50e-04 - train si-snr: {v if isinstance(v, str) else f'{v:.2e}'} - valid si-snr: "
             f"{-3.86 - e / 10:.2e}" for e, v in enumerate(values, start=1)]
    (run,) = discover_runs(_write(tmp_path / "train_log.txt", lines))
    assert run.meta.get("step_unit") == "epoch" and run.steps["loss"].iloc[2] == -0.405
    assert run.steps["val_loss"].iloc[0] == pytest.approx(-3.96)
    nan = [i for i in analyze_run(run).incidents if i.kind == "nonfinite"]
    assert [(i.step, i.end_step) for i in nan] == [(9, 10)]


def test_det3d_head_lines_without_a_step_line_say_their_nan(tmp_path):
    """A paste of Det3D's "task : [...], loss: nan, ..." lines alone (no "Epoch [e/E][i/N]" line): no step to
    read, and the NaN they print is said, not only "no step lines found"."""
    lines = [f"2020-01-07 17:22:53,040 - INFO - task : {names}, loss: nan, cls_pos_loss: nan, num_pos: 26.6600"
             for names in (["car"], ["truck"], ["bus", "trailer"])]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "log.txt", lines))])
    assert result.exit_code == 1 and "print a NaN loss ('loss: nan')" in result.output, result.output


def test_a_batch_column_counting_inside_each_epoch_is_the_step(tmp_path):
    """wespeaker's "| Epoch | Batch | Lr | Margin | Loss | Acc |" table (after its logger's prefix), and an
    epoch,batch,loss CSV: the epoch was the step column, its rows numbered 1, 2, 3 in file order. The
    batch counts inside each epoch: the step across epochs (within one epoch, the batch itself)."""
    csv = _write(tmp_path / "train.csv", ["epoch,batch,loss", *[f"{e},{b},{3 - e / 10 - b / 1000}" for e in (1, 2, 3)
                                                                   for b in (100, 200, 300)]])
    (run,) = discover_runs(csv)
    assert run.steps.index.tolist() == [100, 200, 300, 400, 500, 600, 700, 800, 900]
    assert run.meta.get("step_unit") != "epoch"
    prefix = "[ INFO : 2023-01-28 11:12:05,139 ] - "
    rows = [prefix + "+----------+----------+----------+----------+----------+----------+",
            prefix + "|     Epoch|     Batch|        Lr|    Margin|      Loss|       Acc|",
            prefix + "+----------+----------+----------+----------+----------+----------+"]
    rows += [prefix + f"|         1|{b:10d}|   0.10000|         0|{9.0 - b / 1000:10.4f}|    {b / 100:6.2f}|"
             for b in range(100, 700, 100)]
    (run,) = discover_runs(_write(tmp_path / "train.log", rows))
    assert run.steps.index.tolist() == [100, 200, 300, 400, 500, 600] and run.steps["loss"].iloc[0] == 8.9


@pytest.mark.parametrize("sep", ["\t", "       "])
def test_insightfaces_lossvalue_is_the_mxnet_speedometers_loss(tmp_path, sep):
    """insightface's MXNet training logs its LossValueMetric as "lossvalue" on MXNet's Speedometer line
    (its tabs spaces where pasted): "its lines log ... but no loss", and the NaN that ends its run unseen."""
    lines = [f"INFO:root:Epoch[0] Batch [{b - 20}-{b}]{sep}Speed: 204.01 samples/sec{sep}acc=0.991797{sep}"
             f"lossvalue={'nan' if b >= 1000 else 4.5 - b / 1000:.6}" for b in range(20, 1100, 20)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines + ["lr-batch-epoch: 0.001 41999 0"]))
    assert run.source == "mxnet" and run.steps["loss"].iloc[0] == pytest.approx(4.48)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 1000)]


def test_mxnet_speedometers_loss_named_Loss_and_values_followed_by_commas(tmp_path):
    """CornerNet's own EvalMetric prints "Loss=8.776213" on MXNet's Speedometer line: the generic reader took it,
    its 0-based "Epoch[4]" the fourth epoch and each batch range's start, steps 2760.. for 3500..; Deformable
    ConvNets prints "RCNNLogLoss=0.680453,\t": the comma kept every value from reading (--loss-col: "no loss")."""
    lines = [f"Epoch[{e}] Batch [{b - 20}-{b}]\tSpeed: 6.24 samples/sec\tLoss={8.9 - b / 1000:.6f}"
             for e, last in ((4, 700), (5, 300)) for b in range(20, last + 20, 20)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "mxnet" and run.steps.index[0] == 4 * 700 + 20 and run.steps["loss"].iloc[0] == 8.88
    lines = [f"2018-10-22 18:55:52,482 Epoch[0] Batch [{b}]\tSpeed: 7.01 samples/sec\tTrain-RPNAcc=0.975624,\t"
             f"RPNLogLoss=0.073470,\tRCNNAcc=0.806356,\tRCNNLogLoss={0.7 - b / 1e6:.6f},\t"
             for b in range(100, 3100, 100)]
    (run,) = discover_runs(_write(tmp_path / "dff.log", lines), LoadOptions(loss_col="RCNNLogLoss"))
    assert run.steps["loss"].iloc[0] == pytest.approx(0.6999) and run.steps["loss"].notna().all()


def test_fastreids_epoch_and_iteration_the_iteration_is_the_step(tmp_path):
    """fast-reid prints detectron2's metric line with the epoch before the iteration, "epoch/iter: 14/3199
    total_loss: 42.13 ...": the generic reader took "iter: 14/3199" for step 14 of 3199 (every line of an
    epoch one step, "every rank printing?"), and its FloatingPointError stayed the one step read."""
    lines = [f"[07/30 11:42:39 fastreid.utils.events]:  eta: 0:46:32  epoch/iter: {i // 230}/{i}  total_loss: "
             f"{50 - i / 200:.4g}  loss_cls: {50 - i / 200:.4g}  loss_triplet: 0  time: 0.2903  data_time: 0.0060  "
             f"lr: 9.98e-03  max_mem: 6056M" for i in range(2599, 3219, 10)]
    lines += ["FloatingPointError: Loss became infinite or NaN at iteration=3223!",
              "loss_dict = {'loss_cls': nan, 'loss_triplet': nan}"]
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.source == "fastreid" and run.steps.index[:2].tolist() == [2599, 2609]
    assert run.steps["lr"].iloc[0] == pytest.approx(9.98e-3)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 3223)]


@pytest.mark.parametrize("line", [
    "Round {r:3d}, Average loss {v:.3f}, Test loss 2.264, Test accuracy: 19.67",  # LG-FedAvg
    "At round {r} training loss: {v}",  # FedProx
])
def test_a_federated_runs_round_is_its_step(tmp_path, line):
    """A federated run logs by communication round: "Round 102, Average loss 2.148, Test loss 2.264" was
    "not a log format sentinel reads", its NaN round unseen."""
    lines = [line.format(r=r, v=math.nan if r >= 60 else 2.3 - r / 100) for r in range(30, 64)]
    (run,) = discover_runs(_write(tmp_path / "fed.log", lines))
    assert run.steps.index[0] == 30 and run.steps["loss"].iloc[0] == pytest.approx(2.0)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 60)]


def test_a_log_line_of_comma_separated_words_and_numbers_is_no_tables_header(tmp_path):
    """InsightFace_TF's and MobileFaceNet_TF's "epoch 5, total_step 349550, total loss is 6.06 , inference
    loss is 5.59, ...": its first line was a CSV header ("a table with a loss column 'total loss is 6.06'
    but no step column"), and its step key unknown."""
    lines = [f"epoch 5, total_step {s}, total loss is {'nan' if s >= 351000 else round(6 - (s - 349550) / 500, 2)} , inference "
             f"loss is 5.59, reg_loss is 0.48, training accuracy is 0.000000, time 283.005 samples/sec"
             for s in range(349550, 351500, 50)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index[0] == 349550 and run.steps["loss"].iloc[0] == pytest.approx(6.0)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 351000)]


def test_bts_lines_and_its_nan_check(tmp_path):
    """BTS (and AdaBins, NeWCRFs, PixelFormer after it) prints "[epoch][s/s_per_e/gs]: [4][2564/6058/26796],
    lr: ..., loss: ..." and stops on "NaN in loss occurred. Aborting training.": not read."""
    lines = [f"{28665 + k} [epoch][s/s_per_e/gs]: [4][{2564 + k}/6058/{26796 + k}], lr: 0.000092801574, loss: "
             f"{0.6 - k / 100:.12f}" for k in range(30)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines + ["NaN in loss occurred. Aborting training."]))
    assert run.source == "bts" and run.steps.index[0] == 26796 and run.steps["lr"].iloc[0] == pytest.approx(9.28e-5, rel=1e-3)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 26826)]


def test_a_short_pastes_first_jump_within_the_spread_around_it(tmp_path):
    """BTS's paste of a noisy per-batch loss opens on 0.587, then 0.970, the rest 0.40-0.85: "a spike
    x1.65" over one value, where the rows after it, once back, spread as wide. A jump the rows around it
    never come near is still one (PSMNet's 17.4, 33.4, 36.8, 28.9, 18.6, 17.4)."""
    values = [0.587257, 0.969502, 0.852333, 0.468197, 0.398438, 0.396373, 0.725467, 0.693935, 0.809877, 0.508118]
    (run,) = discover_runs(_write(tmp_path / "train.log", [f"step {26796 + k} loss: {v}" for k, v in enumerate(values)]))
    assert analyze_run(run).incidents == []
    # PaddleSeg's legacy lines open on 0.049, then 0.23, 0.29 and 0.07-0.32 after: x4.7 over one value,
    # "a spike not recovered by the last logged step", critical
    values = [0.0491, 0.2321, 0.2925, 0.2853, 0.262, 0.2789, 0.2395, 0.0829, 0.3178, 0.0716, 0.2129, 0.2477,
              0.305, 0.2109, 0.0884, 0.1586, 0.1708, 0.2549, 0.2124]
    lines = [f"epoch=1 step={170 + 10 * k} lr=0.00093 loss={v} step/sec=5.027 | ETA 00:07:06" for k, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "paddleseg.log", lines))
    assert analyze_run(run).incidents == []
    lines = [f"Step:{s}      Loss:{v}      f/b time:0.603486" for s, v in
             zip(range(22800, 23400, 100), (17.37, 33.37, 36.77, 28.94, 18.60, 17.36))]
    (run,) = discover_runs(_write(tmp_path / "psmnet.log", lines))
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("loss_spike", 22900)]
    # CLIP4Clip's per-batch contrastive loss pasted from its lowest value, 0.0099, then 0.060 and 0.016-0.095:
    # "a spike x6.1 not recovered" (critical) of a run at its usual level, the jump never back under x1.5 of
    # the one value before it; a first value as far below the rows after it as tr8b's 2.67 is a new level
    values = [0.009868, 0.060329, 0.034017, 0.021547, 0.030214, 0.095531, 0.046146, 0.037638, 0.040964, 0.016231,
              0.018986, 0.027519, 0.022617, 0.020056]
    lines = [f"2022-10-15 15:20:07,994:INFO: Epoch: 5/5, Step: {14 + 2 * k}/156, Loss: {v:.6f}, Time/step: 0.669466"
             for k, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "clip4clip.log", lines))
    assert [(i.kind, i.step, i.severity.value) for i in analyze_run(run).incidents] == [("loss_spike", 648, "warning")]
    (run,) = discover_runs(_write(tmp_path / "level.log", [f"step {k} loss: {v}" for k, v in
                                                           enumerate([2.0, 4.0, 4.1, 3.9, 4.2, 4.0, 4.1, 3.95])]))
    assert [(i.kind, i.step) for i in analyze_run(run).incidents][:1] == [("loss_spike", 1)]


def test_a_step_numbered_with_a_hash(tmp_path):
    """Anti-DreamBooth's "Step #0, loss: 0.234, prior_loss: ..., instance_loss: ...": the "#" stopped the step's
    read, and its NaN from step 1 on was read from other lines, or not at all."""
    lines = [f"Step #{s}, loss: {'nan' if s >= 30 else 0.5 - s / 100}, prior_loss: 0.2278, instance_loss: 0.0063"
             for s in range(40)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index[:2].tolist() == [0, 1] and run.steps["loss"].iloc[1] == pytest.approx(0.49)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 30)]


def test_a_log_of_a_grad_norm_alone_says_its_nans_not_that_a_rise_is_progress(tmp_path):
    """audiocraft's metrics JSON with grad_norm and grad_scale and no loss: "no loss (an environment's
    returns, an evaluation's metrics: a rise of these is progress)", of a grad norm that printed Infinity
    and NaN. A training's own workings are no progress measure, and their non-finite values are said."""
    rows = [f'{{"grad_norm": {v}, "grad_scale": 65536.0}}' for v in ("Infinity", "NaN", "1.3156", "NaN", "1.2862")]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "metrics.log", rows))])
    assert result.exit_code == 1 and "grad_norm prints 3 non-finite value(s) (Infinity, NaN)" in result.output
    assert "progress" not in result.output, result.output


def test_ultralytics_console_of_one_nan_epoch_before_its_traceback(tmp_path):
    """A YOLOv8 paste of its first epoch's row, every loss NaN, then the traceback it stopped with: "not a
    log format sentinel reads" (a table needs three rows: one or two are a quote). A row that prints its
    loss as NaN is a run's, however few; one or two finite rows are still no run."""
    nan = _ultralytics_console(1, nan_from=1) + "Traceback (most recent call last):\n  File \"train.py\", line 10\n"
    (run,) = discover_runs(_write(tmp_path / "nan.log", nan.splitlines()))
    report = analyze_run(run)
    assert [(i.kind, i.step) for i in report.incidents] == [("nonfinite", 1)] and report.verdict == "unhealthy"
    with pytest.raises(ValueError):
        discover_runs(_write(tmp_path / "quote.log", _ultralytics_console(1).splitlines()))


def test_yolacts_terms_and_total(tmp_path):
    """YOLACT's "[  2]    1430 || B: 1.040 | C: 1.251 | M: 1.208 | S: 0.016 | T: 3.516 || ETA: 9 days,
    15:54:30 || timer: 0.610" (epoch, global iteration, its terms, T their total): "its lines log B, C,
    ETA, M, S, T but no loss (... a rise of these is progress)"."""
    lines = [f"[{it // 700:3d}] {it:7d} || B: 1.040 | C: 1.251 | M: 1.208 | S: 0.016 | T: "
             f"{'nan' if it >= 1800 else f'{4.5 - it / 1000:.3f}'} || ETA: 9 days, 15:54:30 || timer: 0.610"
             for it in range(0, 2000, 10)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "yolact" and run.steps.index[:2].tolist() == [0, 10] and run.steps["loss"].iloc[0] == 4.5
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 1800)]


def test_a_short_pastes_noisy_rows_after_a_low_first_value_are_no_unfinished_rise(tmp_path):
    """deepspeech.pytorch's ImageNet-style lines, ten rows of a per-batch loss at 2.5-5.0 after a first
    row of 2.57: once the first jump was held to the spread around it, "loss rose from step 39991 ...
    still elevated at the last logged step; too soon to tell a spike from a divergence", critical. Nine
    rows after one are measured by their own row-to-row noise (about their median step: a steady climb's
    steps are alike and it still counts), where ten were asked before."""
    values = [2.5681, 4.3603, 3.0738, 3.9250, 2.5246, 4.2818, 3.6416, 5.0185, 2.9142, 4.4609]
    lines = [f"Epoch: [21][{1390 + k}/1930]  Time 0.690 (0.986)      Data 0.004 (0.009)      Loss {v:.4f} (10.9521)"
             for k, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert analyze_run(run).incidents == []
    climb = [2.5, 2.52, 2.75, 3.0, 3.3, 3.6, 3.95, 4.3, 4.7, 5.1]
    (run,) = discover_runs(_write(tmp_path / "climb.log", [f"step {s} loss {v}" for s, v in enumerate(climb, 1)]))
    assert [i.kind for i in analyze_run(run).incidents] == ["loss_spike"]


def test_litgpt_lines_with_padded_counts(tmp_path):
    """A litgpt fork prints its counts padded, "Epoch 0 | iter  62 step  62 | loss train: 21.625, val_loss
    valid: 13.879 | iter time: 35.675 s (step)": "its lines log ... but no loss"."""
    lines = [f"Epoch 0 | iter {i:3d} step {i:3d} | loss train: {'nan' if i >= 90 else f'{8 - i / 20:.3f}'}, val_loss "
             f"valid: 13.879 | iter time: 35.675 s (step)" for i in range(62, 100)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "litgpt" and run.steps.index[0] == 62 and run.steps["loss"].iloc[0] == pytest.approx(4.9)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 90)]


def test_litgpt_lines_since_2024(tmp_path):
    """litgpt since 2024: "Ep 1 | iter 4 | step 1: loss train (curr): 1.585, val (prev val iter): None | iter time:
    181.34 ms (opt.step)", refused as "its lines log time but no loss"."""
    lines = [f"Ep 1 | iter {i} | step {i // 4}: loss train (curr): {2 - i / 100:.3f}, val (prev val iter): None | "
             f"iter time: 181.34 ms{' (opt.step)' if i % 4 == 0 else ''}" for i in range(1, 41)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "litgpt" and run.steps.index.tolist() == list(range(1, 41))
    assert run.steps["loss"].iloc[-1] == pytest.approx(1.6)


def test_kpconvs_epoch_and_iteration_lines(tmp_path):
    """KPConv's trainer (and the point cloud models built on it) prints "e001-i0405 => L=0.507 acc= 77% /
    t(ms): 174.8 206.6 652.3)": "its lines log L, timings but no loss". The iteration counts inside the
    epoch; L is the loss."""
    lines = [f"e{e:03d}-i{i:04d} => L={'nan' if e == 2 and i >= 300 else f'{1.5 - e / 5 - i / 2000:.3f}'} acc= 77% / "
             f"t(ms): 174.8 206.6 652.3)" for e in range(3) for i in range(0, 500, 50)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "kpconv" and run.steps["loss"].iloc[0] == 1.5 and len(run.steps.index) == 30
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", run.steps.index[26])]


def test_pfllibs_round_blocks(tmp_path):
    """PFLlib prints each round as a block: "-------------Round number: 0-------------", a blank line,
    "Evaluate global model", "Averaged Train Loss: 2.3069", its test accuracy and AUC, the round's time: not
    read (a paragraph of lines, no step on the loss's)."""
    lines = []
    for r in range(30):
        loss = "nan" if r >= 25 else f"{2.3 - r / 20:.4f}"
        lines += [f"-------------Round number: {r}-------------", "", "Evaluate global model",
                  f"Averaged Train Loss: {loss}", "Averaged Test Accurancy: 0.0960", "Averaged Test AUC: 0.5071",
                  "Std Test Accurancy: 0.0108", "Std Test AUC: 0.0083",
                  "------------------------- time cost ------------------------- 43.83143663406372", ""]
    (run,) = discover_runs(_write(tmp_path / "fl.log", lines))
    assert run.source == "pfllib" and run.steps.index[:2].tolist() == [0, 1] and run.steps["loss"].iloc[1] == 2.25
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 25)]


def test_a_directory_of_one_short_paste_reads_it(tmp_path):
    """verl's SFT paste of three step lines, every loss NaN, saved into a directory alone: "no training logs
    found (skipped 1 file: 1 not a training log)", where the file named on its own reads. A walk that finds
    no run reads the few files it skipped as pastes, and says so; a README beside nothing is still no run."""
    lines = [f"step:{s} - perf/max_memory_allocated_gb:41.29 - train/loss:nan - train/grad_norm:0.0 - train/lr:1e-06"
             for s in (2, 3, 4)]
    (tmp_path / "runs").mkdir()
    _write(tmp_path / "runs" / "sft.log", lines)
    (run,) = discover_runs(tmp_path / "runs")
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 2)]
    assert f"only 3 step lines: read because no other log was found in '{tmp_path / 'runs'}'" in run.warnings
    (tmp_path / "docs").mkdir()
    _write(tmp_path / "docs" / "README.md", ["# notes", "", "Training went fine."])
    with pytest.raises(ValueError, match="no training logs found"):
        discover_runs(tmp_path / "docs")


def test_dcgan_tensorflows_epochs_from_zero(tmp_path):
    """DCGAN-tensorflow prints "Epoch: [14] [ 398/1093] time: 18566.6816, d_loss: 1.38566971, g_loss:
    0.67304140", its epochs from 0: a paste of epoch 14 was read one epoch low (step 14607, not 15700),
    and not as a GAN's run."""
    lines = ["[Sample] d_loss: 1.34017193, g_loss: 0.73472393"]
    lines += [f"Epoch: [14] [{i:4d}/1093] time: 18566.6816, d_loss: 1.38566971, g_loss: {'nan' if i >= 420 else 0.673}"
              for i in range(398, 430)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "dcgan_tf" and run.steps.index[0] == 14 * 1093 + 398
    report = analyze_run(run)
    assert [(i.kind, i.step) for i in report.incidents] == [("nonfinite", 14 * 1093 + 420)]
    assert any("a GAN's run" in w for w in report.warnings)


def test_llama_factorys_trainer_log_nulls_are_values_not_logged(tmp_path):
    """LLaMA-Factory's trainer_log.jsonl writes every key in every row, None where a row does not log it:
    "eval_loss": null in its training rows, "loss": null in its evaluation rows, and nulls throughout its
    last row. Each was a NaN: "loss non-finite at step 3235", "eval_loss non-finite at 25 of 25
    evaluations", critical, of a healthy run (LLaMA-Factory#774). A null in a row that logs its learning
    rate or grad norm, for a loss or the grad norm, is still a NaN (a writer that cannot spell one)."""
    def row(step, loss=None, eval_loss=None, lr=None):
        return json.dumps({"current_steps": step, "total_steps": 250, "loss": loss, "eval_loss": eval_loss,
                           "predict_loss": None, "reward": None, "learning_rate": lr, "epoch": step / 250,
                           "percentage": step / 2.5, "elapsed_time": "0:01:00", "remaining_time": "0:10:00"})
    lines = []
    for step in range(10, 250, 10):
        lines.append(row(step, loss=2 - step / 500, lr=5e-5))
        if step % 100 == 0:
            lines.append(row(step, eval_loss=1.8 - step / 1000))
    (run,) = discover_runs(_write(tmp_path / "trainer_log.jsonl", lines + [row(250)]))
    report = analyze_run(run)
    assert report.incidents == [] and report.final_loss == pytest.approx(2 - 240 / 500)
    lines[-1] = row(240, loss=None, lr=5e-5)
    (run,) = discover_runs(_write(tmp_path / "trainer_log.jsonl", lines))
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 240)]


def test_yolov5_results_txt_rows_without_a_header(tmp_path):
    """YOLOv3's and YOLOv5's results.txt (before results.csv) has no header: "75/299  9.8G  0.02956  0.01528
    0.004182  0.04903  29  640  0.6946  0.9465  0.9261  0.6247  0.0275  0.01593  0.003726" (box, obj, cls,
    their total; targets, image size; P, R, two mAPs; the validation's three terms): "not a log format
    sentinel reads", and no --step-col / --loss-col names a column of a file without names."""
    rows = [f"{e:>10}/299 {'9.8G':>9} {0.03:>9.4g} {0.015:>9.4g} {0.004:>9.4g} {'nan' if e >= 40 else f'{0.06 - e / 2000:.4g}':>9} "
            f"{29:>9} {640:>9} {0.69:>9.4g} {0.95:>9.4g} {0.93:>9.4g} {0.62:>9.4g} {0.0275:>9.4g} {0.016:>9.4g} {0.0037:>9.4g}"
            for e in range(50)]
    (run,) = discover_runs(_write(tmp_path / "results.txt", rows))
    assert run.source == "yolo_results" and run.meta["step_unit"] == "epoch" and run.steps.index[:2].tolist() == [0, 1]
    assert run.steps["loss"].iloc[1] == pytest.approx(0.0595) and run.steps["val_box"].iloc[0] == pytest.approx(0.0275)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 40)]


def test_a_pipe_tables_step_of_a_total(tmp_path):
    """ultralytics' yolov3 results pasted with '|' between cells: "epoch|mem|mloss0|...|mloss3|..." over rows
    "0/299|7.17G| 3.28| 2.15|0.816| 6.25|...": the epoch cells "0/299" were no number, so no row was read,
    --step-col epoch --loss-col mloss3 included. A step N/M is N, as in a table apart by spaces."""
    lines = ["epoch|mem|mloss0|mloss1|mloss2|mloss3|targets|imgsize|p|r|map", "-|-|-|-|-|-|-|-|-|-|-"]
    lines += [f"{e}/299|7.17G| 3.28| 2.15|0.816| {'nan' if e >= 8 else f'{6.3 - e / 20:.2f}'}|    5|  576|0.409|0.723|0.623|"
              for e in range(10)]
    (run,) = discover_runs(_write(tmp_path / "results.txt", lines), LoadOptions(loss_col="mloss3"))
    assert run.steps.index.tolist() == list(range(10)) and run.steps["loss"].iloc[0] == 6.3
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 8)]
    # without --loss-col: its four numbered losses named, none the total by its name (mloss3 is, in yolov3)
    with pytest.raises(ValueError, match=r"whose columns name 4 losses \(mloss0, mloss1, mloss2, mloss3\) and none is "
                                         r"the total: pass --loss-col mloss3"):
        discover_runs(tmp_path / "results.txt")
    lines[0] = "epoch|mem|box_loss|obj_loss|cls_loss|extra|targets|imgsize|p|r|map"
    with pytest.raises(ValueError, match=r"name 3 losses \(box_loss, obj_loss, cls_loss\) and none is the total"):
        discover_runs(_write(tmp_path / "results.txt", lines))


def test_build_nanogpts_log_txt(tmp_path):
    """karpathy's build-nanogpt writes its log.txt as "0 train 10.955011", "250 val 6.5893", "250 hella
    0.2440", a line each: "not a log format sentinel reads", --loss-col train included."""
    lines = []
    for step in range(400):
        if step % 50 == 0:
            lines += [f"{step} val {9 - step / 100:.4f}", f"{step} hella 0.2487"]
        lines.append(f"{step} train {'nan' if step >= 380 else f'{10.95 - step / 50:.6f}'}")
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.source == "build_nanogpt" and run.steps["loss"].iloc[1] == pytest.approx(10.93)
    assert run.steps["val_loss"].dropna().index.tolist() == list(range(0, 400, 50))
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 380)]


def test_json_rows_of_kilobytes_without_a_step_are_read_in_order(tmp_path):
    """DETR's log.txt: a JSON line an epoch of 92 keys and its COCO stats (5 KB), no step key: "a table
    with a loss column 'train_loss' but no step column", as a first line of kilobytes was taken for a
    log pasted without its line ends. JSON rows are read in order as a CSV's are."""
    keys = {f"train_loss_{name}_{k}_unscaled": 1.2345678901234 for name in ("bbox", "ce", "giou") for k in range(40)}
    rows = [json.dumps({"train_lr": 1e-4, "train_loss": 26 - e / 10 if e < 40 else float("nan"), **keys,
                        "test_loss": 20 - e / 10, "test_coco_eval_bbox": [0.1] * 12}) for e in range(50)]
    assert len(rows[0]) > 4096
    (run,) = discover_runs(_write(tmp_path / "log.txt", rows))
    assert run.steps.index[:2].tolist() == [1, 2] and run.steps["loss"].iloc[0] == 26
    assert [(i.kind, i.step) for i in analyze_run(run).incidents][0] == ("nonfinite", 41)


def test_each_nodes_copy_under_its_address_is_read_once(tmp_path):
    """A LLaMA-Factory run on four nodes launched by pdsh: each node's lines after its address,
    "10.96.202.43: {'loss': 1.8673, ...}", every dict printed four times, once a node: read as four times
    the steps. The first node's lines are read, with a warning; a log of "Epoch: 3" lines has no node."""
    hosts = ["10.96.202.43", "10.96.202.17", "10.96.202.16", "10.96.202.40"]
    lines = [f"{host}: {{'loss': {2 - s / 20:.4f}, 'learning_rate': 5e-05, 'epoch': {s / 100:.2f}}}"
             for s in range(1, 31) for host in hosts]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert len(run.steps.index) == 30 and run.steps["loss"].iloc[:2].tolist() == [1.95, 1.9]
    assert any(w.startswith("4 nodes' output interleaved (10.96.202.43") for w in run.warnings)
    lines = [f"Epoch: {e} loss: {2 - e / 20:.4f}" for e in range(1, 31)]
    (run,) = discover_runs(_write(tmp_path / "epochs.log", lines))
    assert not any("nodes' output" in w for w in run.warnings) and len(run.steps.index) == 30


def test_mt_dnns_updates_and_train_loss_in_brackets(tmp_path):
    """MT-DNN prints "Task [ 0] updates[     1] train loss[0.56227] remaining[0:13:10]": "not a log format",
    --loss-col included, of a loss that climbed from 0.56 to 12.3 and went NaN."""
    lines = ["04/26/2020 03:38:34 At epoch 0"]
    lines += [f"04/26/2020 03:38:34 Task [{u % 7:2d}] updates[{u:6d}] train loss[{'nan' if u >= 6500 else f'{0.56 * 1.3 ** (u // 500):.5f}'}] "
              f"remaining[0:13:10]" for u in [1] + list(range(500, 7000, 500))]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "mt_dnn" and run.steps.index[:2].tolist() == [1, 500]
    kinds = [(i.kind, i.step) for i in analyze_run(run).incidents]
    assert ("nonfinite", 6500) in kinds and any(kind == "divergence" for kind, _ in kinds)


def test_a_spike_back_within_one_unit_of_the_printed_digit_recovered(tmp_path):
    """gsplat's bar prints each image's loss with three decimals: 0.011, 0.007, then 0.017, 0.013, 0.012,
    0.011: "not recovered within 200 steps", critical, where 0.012 is one unit of the last digit above
    the baseline of 0.011: as far back as the printing can say."""
    values = (0.011, 0.007, 0.017, 0.013, 0.012, 0.011, 0.012)
    lines = []
    for k, v in enumerate(values):
        step = 7800 + 100 * k
        lines += [f"loss={v:.3f}| sh degree=3| :  26%|██▊        | {step - 3}/30000 [04:28<07:54, 46.80it/s]"
                  f"Step {step}: 796 GSs duplicated, 23 GSs split. Now having 220096 GSs.",
                  f"Step {step}: 31 GSs pruned. Now having 220065 GSs."]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    (incident,) = analyze_run(run).incidents
    # (information: 7 rows, the jump under one robust sigma of the two before it)
    assert (incident.kind, incident.step, incident.severity.value) == ("loss_spike", 8000, "info")
    assert "recovered in 200 steps" in incident.message


def test_tacotron2s_train_loss_lines(tmp_path):
    """NVIDIA Tacotron 2's train.py (and its forks): "Train loss {} {:.6f} Grad Norm {:.6f} {:.2f}s/it", the
    step between the words and the loss: "not a log format"; its validation at each checkpoint."""
    lines = ["FP16 Run: False", "Epoch: 0"]
    for i in range(40):
        loss = "nan" if i >= 30 else f"{5 / (1 + i):.6f}"
        lines.append(f"Train loss {i} {loss} Grad Norm {'nan' if i >= 30 else f'{1 + i % 3:.6f}'} {3.99:.2f}s/it")
        if i % 10 == 0:
            lines += [f"Validation loss {i}: {4 / (1 + i):9f}  ",
                      f"Saving model and optimizer state at iteration {i} to outdir/checkpoint_{i}"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "tacotron2" and run.steps.index[[0, -1]].tolist() == [0, 39]
    assert run.steps["loss"].iloc[1] == pytest.approx(2.5) and run.steps["grad_norm/total"].iloc[2] == 3.0
    assert run.steps["val_loss"].dropna().index.tolist() == [0, 10, 20, 30]
    assert {(i.kind, i.step) for i in analyze_run(run).incidents if i.severity.value == "critical"} == {("nonfinite", 30)}


def test_epoch_lines_that_start_again_from_the_first_epoch_are_two_trainings(tmp_path):
    """DGL's pure PyG example run on the CPU, then on CUDA, pasted one after the other (epochs 0-9, then
    0-8): read as 19 lines over 10 epochs, numbered in order, the second run's first epoch "a spike"."""
    lines = []
    for device, epochs in (("cpu", 10), ("cuda", 9)):
        lines += ["python pure_pyg.py", f"device is:  {device}"]
        lines += [f"Epoch: {e}, Loss: {1.25 + 0.9 / (1 + e * e):.4f}, Accuracy: 0.6, Val Acc: 0.58" for e in range(epochs)]
        lines += ["Test Accuracy: 0.5899", "Total Training Time: 81.45 seconds"]
    runs = discover_runs(_write(tmp_path / "train.log", lines))
    assert [(run.steps.index[0], run.steps.index[-1]) for run in runs] == [(0, 9), (0, 8)]
    assert all(analyze_run(run).incidents == [] for run in runs)
    # several lines an epoch stay one training, each line a step
    lines = [f"epoch: [{e}/10], lr: 0.001, loss: {3 - e / 10 - k / 100:.3f}" for e in range(1, 4) for k in range(4)]
    (run,) = discover_runs(_write(tmp_path / "paddle.log", lines))
    assert len(run.steps) == 12


def test_a_trainers_zero_loss_from_the_first_step_beside_nan_evaluations_is_a_nan(tmp_path):
    """MedicalGPT's SFT printed 'loss': 0.0 at every step and 'eval_loss': nan at each evaluation: "loss stuck
    at 0" and "the training loss is finite: an fp16 evaluation that overflows". The Trainer's NaN filter logs
    0.0 for a window of NaN losses; from the first step on, a 0 alone may be a loss over no labelled token."""
    rows = []
    for k in range(12):
        rows.append("{'loss': 0.0, 'learning_rate': 1.0533245556287031e-07, 'epoch': 0.01}")
        if k % 5 == 0:
            rows.append("{'eval_loss': nan, 'eval_runtime': 2365.9772, 'eval_samples_per_second': 21.4, "
                        "'eval_steps_per_second': 5.35, 'epoch': 0.01}")
    (run,) = discover_runs(_write(tmp_path / "train.log", rows))
    found = [(i.kind, i.severity.value, i.step) for i in analyze_run(run).incidents]
    assert ("nonfinite", "critical", 1) in found and not any(kind == "loss_stuck" for kind, _, _ in found)
    # without a non-finite value beside them, zeros from the start stay a loss stuck at 0
    (run,) = discover_runs(_write(tmp_path / "zeros.log", [r for r in rows if "eval_loss" not in r]))
    assert [(i.kind, i.severity.value) for i in analyze_run(run).incidents] == [("loss_stuck", "warning")]


def test_point_cloud_trainers_lines(tmp_path):
    """pointnet.pytorch's "[%d: %d/%d] train loss: %f accuracy: %f" (its test lines an evaluation), DGCNN's
    "Train %d, loss: %.6f, train acc: ..." and "Test %d, loss: ..." once an epoch, Pointcept's "Train:
    [{epoch}/{max_epoch}][{iter}/{max_iter}] ... loss: X Lr: L", DGL-KE's "[proc 0][Train](N/M) average loss: X":
    each "not a log format"."""
    lines = []
    for e in range(1, 4):
        for i in range(10):
            lines.append(f"[{e}: {i}/10] train loss: {2 / (e * 10 + i):f} accuracy: 0.500000")
            if i == 5:
                lines.append(f"[{e}: {i}/10] \x1b[94mtest\x1b[0m loss: 9.000000 accuracy: 0.500000")
    (run,) = discover_runs(_write(tmp_path / "pointnet.log", lines))
    assert len(run.steps) == 30 and run.steps["loss"].max() == pytest.approx(0.2)
    lines = [f"Train {e}, loss: {3 / e:.6f}, train acc: 0.9, train avg acc: 0.7, train iou: 0.8" for e in range(1, 8)]
    lines += [line.replace("Train", "Test").replace("train", "test").replace(f"{3 / e:.6f}", "1.5") for e, line in
              enumerate(lines, 1)]
    (run,) = discover_runs(_write(tmp_path / "dgcnn.log", lines))
    assert run.source == "dgcnn" and run.steps["loss"].iloc[2] == pytest.approx(1.0) and run.steps["val_loss"].iloc[0] == 1.5
    assert analyze_run(run).step_unit == "epoch"
    lines = [f"[2024-06-09 01:49:20,995 INFO misc.py line 118 2003007] Train: [1/1][{i}/1428] Data 0.003 (0.003) "
             f"Batch 2.314 (2.247) Remain 00:47:47 loss: {1.2 - i / 1000:.4f} Lr: 0.00198" for i in range(150, 170)]
    (run,) = discover_runs(_write(tmp_path / "pointcept.log", lines))
    assert run.steps.index[0] == 150 and run.steps["loss"].iloc[0] == pytest.approx(1.05)
    lines = []
    for step in range(1000, 9000, 1000):
        for proc in (0, 1):
            lines += [f"[proc {proc}][Train]({step}/40000) average pos_loss: 0.22",
                      f"[proc {proc}][Train]({step}/40000) average loss: {0.3 - step / 1e5 + proc:.6f}",
                      f"[proc {proc}][Train] 1000 steps take 8.839 seconds"]
    (run,) = discover_runs(_write(tmp_path / "dglke.log", lines))
    assert run.source == "dgl_ke" and run.steps.index[0] == 1000 and run.steps["loss"].iloc[0] == pytest.approx(0.29)


def test_a_jump_of_x2_over_three_first_values_within_the_spread_around_it(tmp_path):
    """DiffTF's per-batch loss logged every 100 iterations: 1.70, 0.74, 0.18, then 1.64 (x2.2 its baseline)
    among 0.13-1.85 after it: "a spike not recovered", critical. A jump of x2 or more over two or three
    values is held to the rows around it as the smaller ones are."""
    values = [1.700834, 0.744101, 0.176526, 1.640736, 1.697659, 1.537047, 1.852223, 0.128740, 0.436920, 1.397576,
              1.470697, 1.625660, 1.851815]
    lines = [f"[2024-01-10 19:05:39,581][train.py][line:150][INFO] Epoch:[{295900 + 100 * k}/300001]\t loss={v:.6f}\t "
             f"psnr=14.957458" for k, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert not any(i.kind == "loss_spike" for i in analyze_run(run).incidents)


def test_a_loss_that_repeats_an_epochs_values_exactly_did_not_change_its_weights(tmp_path):
    """TRACE's LoRA run: "no change in Loss": epoch 2 printed epoch 1's per-batch losses exactly (0.9741,
    1.3742, 1.2390, ...), the weights never updated: "healthy". Exact repeats of a noisy loss printed with
    two decimals, which chance lines up, are not told."""
    epoch = [0.9741, 1.3742, 1.2390, 0.9670, 1.0386, 1.1681, 1.2240, 0.9610]
    lines = ["***** Running training *****"]
    for e in (1, 2, 3):
        lines.append(f"Beginning of Epoch {e}/18, Total Micro Batches 8")
        lines += [f"Epoch {e}, Step {i}, Loss: {v:.4f}:   1%|▏         | {8 * (e - 1) + i + 1}/144 [00:02<02:20, "
                  "1.01it/s]" for i, v in enumerate(epoch)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    (incident,) = analyze_run(run).incidents
    assert incident.kind == "loss_stuck" and incident.details["period_rows"] == 8 and incident.details["rows"] == 16
    assert "did not change" in incident.message and not incident.details["resolved"]
    rng = np.random.default_rng(0)
    noisy = np.round(0.5 + 0.01 * rng.standard_normal(3000), 2)
    (run,) = discover_runs(_write(tmp_path / "noisy.log", [f"step {s} | loss {v:.2f}" for s, v in enumerate(noisy)]))
    assert not any("repeats" in i.message for i in analyze_run(run).incidents)


def test_a_short_pastes_jump_under_x3_on_its_last_row_is_no_spike(tmp_path):
    """diffusion-pipe's Wan 2.1 LoRA, four steps: 0.0614, 0.0571, 0.0359, then 0.1193 (x2.1 its baseline) on
    the last row: "a spike", the run "unhealthy", where a diffusion loss at random timesteps moves x2-x3 from
    step to step. Over so few values with no row after it, a jump is held to x3, as over two values."""
    values = (0.0614, 0.0571, 0.0359, 0.1193)
    lines = []
    for step, v in enumerate(values, 1):
        lines += [f"[2025-09-04 15:18:01,200] [INFO] [logging.py:107:log_dist] [Rank 0] step={step}, skipped=0, "
                  "lr=[1.5968e-07], mom=[0.0]", f"steps: {step} loss: {v} iter time (s): 531.283 samples/sec: 0.008"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert analyze_run(run).incidents == []
    (run,) = discover_runs(_write(tmp_path / "jump.log", [line.replace("0.1193", "0.2193") for line in lines]))
    assert [i.kind for i in analyze_run(run).incidents] == ["loss_spike"]


def test_a_rise_over_a_single_first_value_the_paste_ends_in_is_not_known(tmp_path):
    """PaddleClas prints a mean since the epoch began: its paste from an epoch's first batch, 0.01757, then
    the intervals' 0.054, 0.054, 0.089, 0.076 (undone from the means): "a spike x5.07 not recovered by the
    last logged step", critical. Against one value a rise and a lucky low first value cannot be told apart."""
    means = (0.01757, 0.05098, 0.05253, 0.06434, 0.06668)
    lines = [f"[2024/07/31 20:24:32] ppcls INFO: [Train][Epoch 24/120][Iter: {10 * k}/304]lr(PiecewiseDecay): 0.00100000, "
             f"top1: 0.97159, CELoss: {m}, loss: {m}, batch_cost: 0.61280s, reader_cost: 0.12493, ips: 26.10981 samples/s, "
             "eta: 5:01:10" for k, m in enumerate(means)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.severity) == ("loss_spike", "warning") and "lucky low one" in incident.message


def test_a_loss_with_its_step_in_brackets_after_its_name(tmp_path):
    """GitYCC's crnn-pytorch: print('train_batch_loss[', i, ']: ', loss), "train_batch_loss[ 6590 ]:  nan":
    "not a log format", its NaN unread."""
    lines = ["valid_evaluation: loss=1.832921710359357, acc=0.7594752661693344"]
    lines += [f"train_batch_loss[ {i} ]:  {'nan' if i >= 6590 else 1.5 + (i % 30) / 100}" for i in range(6510, 6660, 10)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index[0] == 6510 and run.steps["loss"].iloc[0] == pytest.approx(1.5)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 6590)]


def test_yolov5s_console_table_without_a_total(tmp_path):
    """YOLOv5 from 6.0 on prints "Epoch gpu_mem box obj cls labels img_size": its total column gone, no
    column named a loss: "not a log format". Its three terms' sum is the loss, as in Ultralytics' later
    box_loss, cls_loss, dfl_loss."""
    lines = ["     Epoch   gpu_mem       box       obj       cls    labels  img_size"]
    for epoch in range(6, 16):
        for k, done in enumerate((7, 100, 201)):
            box = "nan" if epoch >= 14 else f"{0.05 - epoch / 1000 + k / 10000:.5f}"
            lines.append(f"     {epoch}/299     6.18G   {box}   0.00845  0.002274       477       256:  "
                         f"{done // 2}%|▎         | {done}/201 [00:02<01:09,  2.78it/s]")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index[[0, -1]].tolist() == [6, 15]
    assert run.steps["loss"].iloc[0] == pytest.approx(0.0442 + 0.00845 + 0.002274)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 14)]


def test_torchtunes_bar_read_at_its_descriptions_step(tmp_path):
    """torchtune updates its bar, then sets its description: "1|25|Loss: X: 26%|...| 26/101" is step 25's
    loss drawn at count 26. The bar's count was read as the step too (step 32 for the last line's 31), and
    behind torchx's "[trainer0|0]:" the description's step was not read: each loss one step late."""
    losses = [1.2621808, 1.2436443, 1.1958776, 1.2151892, 1.2168413, 1.1868056, 1.1992870]
    lines = []
    for step, loss in enumerate(losses, 25):
        for count in (step + 1, step + 2):
            lines.append(f"[trainer0|0]:1|{step}|Loss: {loss}:  {count * 100 // 101}%|██▌       | {count}/101 "
                         "[06:45<17:27, 13.96s/it]")
    for name, text in (("torchx.log", lines), ("plain.log", [line[len("[trainer0|0]:"):] for line in lines])):
        (run,) = discover_runs(_write(tmp_path / name, text))
        assert run.steps.index.tolist() == list(range(25, 32)) and run.steps["loss"].iloc[0] == pytest.approx(1.2621808)


def test_charlesq34s_point_cloud_blocks(tmp_path):
    """PointNet, PointNet++ and VoteNet log blocks: "**** EPOCH 002 ****", then "mean loss: X" under " ----
    batch: 010 ----" (VoteNet: a "mean <key>: X" line per statistic) or once an epoch (PointNet, its "eval mean
    loss" after it; PointNet++'s evaluation under "---- EPOCH 190 EVALUATION ----"). Read as lines of a loss
    alone, numbered in order, an evaluation's 2.6e20 was a training step."""
    lines = []
    for epoch in (2, 3):
        lines += [f"**** EPOCH {epoch:03d} ****", "Current learning rate: 0.001000", "2023-03-27 11:14:37.992102"]
        for batch in range(10, 100, 10):
            lines += [f" ---- batch: {batch:03d} ----", "mean box_loss: 0.5", "mean center_loss: 0.3",
                      f"mean loss: {30 - epoch - batch / 100:.6f}", "mean neg_ratio: 0.75", "mean vote_loss: 0.2"]
    (run,) = discover_runs(_write(tmp_path / "votenet.log", lines))
    assert run.source == "pointnet" and len(run.steps) == 18 and run.steps.index.is_monotonic_increasing
    assert run.steps["loss"].iloc[0] == pytest.approx(27.9)
    lines = ["---- EPOCH 190 EVALUATION ----", "Progress: [----------] 0.0% checking", "mean loss: 259928480659827326976.0",
             "Overall accuracy : 0.309652"]
    for epoch in range(191, 197):
        lines += [f"**** EPOCH {epoch} ****", "2023-04-03 05:09:51.769989", "----", f"mean loss: {0.05 - epoch / 10000:.6f}",
                  "accuracy: 0.99", "----", f"eval mean loss: {0.07:.6f}", "eval accuracy: 0.98"]
    (run,) = discover_runs(_write(tmp_path / "pointnet.log", lines))
    assert run.steps["loss"].dropna().index.tolist() == list(range(191, 197))
    assert run.steps["val_loss"].dropna().tolist()[:2] == [pytest.approx(2.5992848e20), pytest.approx(0.07)]
    assert analyze_run(run).step_unit == "epoch"


def test_unsloth_trains_step_and_loss_after_its_bar(tmp_path):
    """Unsloth's unsloth_train prints f"{step}, {loss}" glued to the bar drawn before it (" 4%|...| 11/312
    [02:27<1:00:48, 12.12s/it]10, 2.2398"): "its lines log steps, Epochs, GPUs ... but no loss"."""
    lines = ["==((====))==  Unsloth - 2x faster free finetuning | Num GPUs = 1",
             "    \\   /|    Num examples = 2,500 | Num Epochs = 1", "O^O/ \\_/ \\    Batch size per device = 2"]
    for step in range(0, 300, 10):
        loss = "nan" if step >= 200 else f"{2.55 - step / 1000:.4f}"
        lines.append(f" {step // 3:2d}%|▎         | {step + 1}/312 [02:27<1:00:48, 12.12s/it]{step}, {loss}")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "unsloth" and run.steps.index[[0, -1]].tolist() == [0, 290]
    assert run.steps["loss"].iloc[1] == pytest.approx(2.54)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 200)]


def test_mmdetection_2s_json_log_with_its_validation_rows_and_nans(tmp_path):
    """MMDetection 2.x's .log.json: training rows {"mode": "train", "epoch": e, "iter": i, ...} counting
    inside each epoch, then each epoch's {"mode": "val", "iter": 625, "bbox_mAP": ...} (a fall of no training
    count): the epochs piled onto one another, the last alone kept, and its lr printed as 0.0 was "a run
    that did not train". Where the loss went NaN (JSON's NaN), those rows' counts made the epoch's length
    550 (not 30000), and their NaN was marked at the first epoch's steps, the run "recovered"."""
    rows = [json.dumps({"env_info": "sys.platform: linux", "seed": 0})]
    for epoch in range(1, 6):
        for it in range(50, 1001, 50):
            loss = float("nan") if (epoch, it) >= (3, 600) else 2.0 - epoch / 10 - it / 10000
            rows.append(json.dumps({"mode": "train", "epoch": epoch, "iter": it, "lr": 0.0 if epoch == 5 else 0.02,
                                    "memory": 6034, "loss_cls": loss, "loss": loss, "grad_norm": loss, "time": 1.37}))
        rows.append(json.dumps({"mode": "val", "epoch": epoch, "iter": 625, "lr": 0.02, "bbox_mAP": 0.3}))
    path = tmp_path / "20210101_000000.log.json"
    path.write_text("\n".join(rows) + "\n")  # json.dumps writes NaN as NaN, as mmcv's logger does
    (run,) = discover_runs(path)
    loss = run.steps["loss"]
    assert loss.index.max() == 5000 and loss.dropna().index.tolist()[-1] == 2550
    report = analyze_run(run)
    nan = next(i for i in report.incidents if i.kind == "nonfinite" and i.details.get("metric") == "loss")
    assert (nan.step, nan.end_step, report.verdict.value) == (2600, 5000, "unhealthy")
    assert "never finite again" in nan.message


def test_an_evaluation_losss_term_beside_it_is_not_judged_for_overfitting(tmp_path):
    """fairseq's wav2vec 2.0 logs valid_loss and its terms valid_loss_0, _1 (the diversity penalty), _2:
    "val_loss_1 rose from 0.101 ... overfitting; a checkpoint from near step 479 evaluates best", where
    valid_loss fell every epoch. A term of an evaluation loss beside it is not judged; its total is."""
    lines = []
    for epoch in range(1, 11):
        for k in range(1, 3):
            update = (epoch - 1) * 480 + 200 * k
            lines.append(f'[2022-04-08 18:48:05,372][train_inner][INFO] - {{"epoch": {epoch}, "update": 0.4, "loss": '
                         f'"{9.3 - update / 1000:.3f}", "loss_0": "6.679", "loss_1": "0.056", "num_updates": "{update}", '
                         '"lr": "3.125e-06"}')
        lines.append(f'[2022-04-08 18:58:04,035][valid][INFO] - {{"epoch": {epoch}, "valid_loss": "{6.4 - epoch / 5:.3f}", '
                     f'"valid_loss_0": "6.216", "valid_loss_1": "{0.1 + epoch / 100:.3f}", "valid_num_updates": "{epoch * 480}"}}')
    (run,) = discover_runs(_write(tmp_path / "hydra_train.log", lines))
    assert {"val_loss", "val_loss_1"} <= set(run.steps.columns)
    assert not any(i.kind == "overfitting" for i in analyze_run(run).incidents)


def test_an_outlier_row_of_a_log_sparser_than_its_first_rows_is_an_outlier_batch(tmp_path):
    """parameter-golf's log prints its first ten steps, then one every 200: one row at 2.615 among 1.8-2.2,
    back at the next row, was "a loss spike ... recovered in 200 steps" (a warning) where such a row logged
    every step is an outlier batch: "at once" was measured against the first rows' interval of 1."""
    rng = np.random.default_rng(0)
    steps = list(range(1, 11)) + list(range(200, 40001, 200))
    lines = []
    for s in steps:
        loss = 2.6147 if s == 30000 else 2.0 + 0.05 * rng.standard_normal()
        lines.append(f"step:{s}/500000 train_loss:{loss:.4f} train_time:{s * 43}ms step_avg:43.71ms")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    found = [(i.kind, i.step) for i in analyze_run(run).incidents if i.step == 30000]
    assert found == [("outlier_batch", 30000)]


def test_a_json_table_of_trainings_appended_one_after_another(tmp_path):
    """detectron2 appends each launch's rows to one output folder's metrics.json: three trainings from
    iteration 19 each were merged by step, the last one's rows kept where steps repeat, with no word (its
    log.txt beside it is read as three runs)."""
    rows = []
    for start, length in ((109.0, 100), (110.0, 25), (108.0, 60)):
        rows += [json.dumps({"data_time": 0.01, "iteration": 19 + 20 * k, "lr": 0.0001,
                             "total_loss": start / (1 + k / 10), "loss_ce": 1.0}) for k in range(length)]
    path = tmp_path / "metrics.json"
    path.write_text("\n".join(rows) + "\n")
    runs = discover_runs(path)
    assert [run.name.split("#")[1] for run in runs] == ["1", "2", "3"]
    assert [len(run.steps) for run in runs] == [100, 25, 60] and runs[1].steps["loss"].iloc[0] == 110.0
    assert "holds 3 trainings" in runs[0].warnings[0]
    # a resume from a later step stays one run
    rows = [json.dumps({"iteration": s, "total_loss": 3.0 - s / 1000}) for s in (*range(19, 400, 20), *range(199, 600, 20))]
    path.write_text("\n".join(rows) + "\n")
    assert len(discover_runs(path)) == 1


def test_a_fit_pasted_from_a_later_epoch_then_another_fit_from_its_first(tmp_path):
    """A TinyML question: a fit's epochs 2-8 pasted ("Epoch 2/100" first), then "Output during pruning is like
    this:" and a second fit from "Epoch 1/100" at a loss of -291053: one series, the pruning's epoch 2
    replacing the fit's, and a "divergence ... vs best -2.911e+05" on the healthy fit. A fit's "Epoch 1/N"
    after another fit's later epoch starts a training of its own."""
    lines = []
    for epoch in range(2, 9):
        lines += [f"Epoch {epoch}/100", f"2412/2412 [==============================] - 20s 8ms/step - loss: "
                  f"{12 - epoch / 4:.4f} - val_loss: {12.1 - epoch / 4:.4f}"]
    lines += ["", "Output during pruning is like this:"]
    for epoch, loss in ((1, -291053.6562), (2, -287242.3438), (3, -285000.0)):
        lines += [f"Epoch {epoch}/100", f"2680/2680 [==============================] - 47s 16ms/step - loss: {loss} - "
                  "accuracy: 0.0359"]
    fit, pruning = discover_runs(_write(tmp_path / "keras.txt", lines))
    assert fit.steps.index.tolist() == list(range(2, 9)) and fit.steps["loss"].iloc[-1] == 10.0
    assert pruning.steps.index.tolist() == [1, 2, 3] and pruning.steps["loss"].iloc[0] == -291053.6562
    assert analyze_run(fit).verdict == "healthy"


def test_an_epoch_after_a_hyphen_and_centertracks_tot(tmp_path):
    """STgram-MFN prints f"Epoch-{epoch}\\tloss:{avg_loss:.5f}" (not a log format sentinel reads); CenterTrack's
    log.txt names its total loss "tot" first (its lines "log epoch but no loss")."""
    lines = [f"INFO:utils:Epoch-{e}\tloss:{11.5 - e / 100:.5f}" for e in range(151, 172)]
    (run,) = discover_runs(_write(tmp_path / "stgram.log", lines))
    assert run.steps.index.tolist() == list(range(151, 172)) and run.steps["loss"].iloc[0] == 9.99
    lines = [f"2021-02-23-19-09: epoch: {e} |tot {8.0 / e:.6f} | hm 0.780280 | wh 1.383786 | tracking {4.0 / e:.6f} | "
             "time 114.466667 | " for e in range(1, 7)]
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.steps["loss"].tolist() == [round(8.0 / e, 6) for e in range(1, 7)]


def test_a_validation_loss_alone_after_a_training_section_that_printed_none(tmp_path):
    """FACIL prints "| Train: time= loss=X, ... | Valid: time= loss=Y, ... |" each epoch; with its training
    evaluation off, "| Train: skip eval | Valid: time=  1.4s loss=5.744, TAw acc=100.0% |": the validation's
    loss was read as the training loss ("Train:" before the evaluation word made it a training line).
    A set's name makes a line a training line only where a number follows it."""
    lines = [f"| Epoch {e:3d}, time=  1.9s | Train: skip eval | Valid: time=  1.4s loss={5 + e / 10:.3f}, TAw acc="
             "100.0% |" for e in range(10, 24)]
    with pytest.raises(NoRunsError):
        discover_runs(_write(tmp_path / "facil.log", lines))
    lines = [line.replace("Train: skip eval", f"Train: time=  0.5s loss={3 - e / 10:.3f}, TAw acc= 50.0%")
             for e, line in zip(range(10, 24), lines)]
    (run,) = discover_runs(_write(tmp_path / "facil.log", lines))
    assert run.steps["loss"].iloc[0] == 2.0 and run.steps.index.tolist() == list(range(10, 24))


def test_deepmd_lcurve_of_one_property_and_a_loss_that_is_said_before_its_iteration(tmp_path):
    """DeePMD-kit's PyTorch lcurve.out of a model of one property (`# step  rmse_global_polar_val
    rmse_global_polar_trn  lr`, NaN at every row) was "no header"; NeuralPDE.jl's "Current loss is: 133.45,
    Iteration: 88" was "its lines log Iteration but no loss"."""
    lines = ["# step    rmse_global_polar_val rmse_global_polar_trn   lr      ",
             "# If there is no available reference data, rmse_*_{val,trn} will print nan"]
    lines += [f"{s:7d}           nan         nan    1.0e-03" for s in (1, *range(100, 1000, 100))]
    (run,) = discover_runs(_write(tmp_path / "lcurve.out", lines))
    assert run.steps.index.tolist() == [1, *range(100, 1000, 100)] and run.steps["loss"].isna().all()
    assert [i.kind for i in analyze_run(run).incidents] == ["nonfinite"]
    lines = [f"Current loss is: 133.45653590504156, Iteration: {i}" for i in range(88, 114)]
    (run,) = discover_runs(_write(tmp_path / "neuralpde.txt", lines))
    assert run.steps.index.tolist() == list(range(88, 114))
    assert [i.kind for i in analyze_run(run).incidents] == ["loss_stuck"]


def test_a_loop_that_prints_its_epoch_and_loss_every_n_batches_of_one_or_two_epochs(tmp_path):
    """A DistilBERT fine-tune's loop, print(f'Epoch: {epoch}, Loss:  {loss.item()}') every 5,000 steps of its
    one epoch: "its 17 step lines all read as one step (0) ... the step never advanced". Several lines an
    epoch over fewer epochs than a series needs are read as for more epochs: each line a step, in order."""
    values = [6.33, 1.2, 0.9, 0.7, 0.65, 0.6, 0.58, 0.55, 0.5, 0.52, 0.48]
    lines = [f"Epoch: 0, Loss:  {v}" for v in values]
    (run,) = discover_runs(_write(tmp_path / "train.txt", lines))
    assert run.steps["loss"].tolist() == values and run.steps.index.tolist() == list(range(1, 12))
    lines = [f"Epoch: {e}, Loss:  {v}" for e in (0, 1) for v in values[:4]]
    (run,) = discover_runs(_write(tmp_path / "train.txt", lines))
    assert len(run.steps) == 8 and "8 loss lines over 2 epochs" in " ".join(run.warnings)
    # the same line printed again and again (every process at one epoch): no series
    with pytest.raises(NoRunsError):
        discover_runs(_write(tmp_path / "train.txt", ["Epoch: 0, Loss:  2.3"] * 8))


def test_keyword_spotting_steps_an_average_over_an_epoch_and_a_circuits_cost(tmp_path):
    """TensorFlow's speech_commands trainer (and kws_streaming, ML-KWS-for-MCU built on it), "Step #5195: rate
    0.001000, accuracy 76.0%, cross entropy 0.697745", and PennyLane's TorchLayer example, "Average loss over
    epoch 100: 0.1709", were not log formats sentinel reads; PennyLane's "iteration: 10 cost: 17.86" named
    its cost and iteration as an evaluation's metrics, not the key to pass."""
    lines = [f"I1120 14:04:10.739843 139977653700352 train.py:258] Step #{s}: rate 0.001000, accuracy 76.0%, "
             f"cross entropy {1.0 - s / 10000:.6f}" for s in range(5190, 5200)]
    (run,) = discover_runs(_write(tmp_path / "kws.log", lines))
    assert run.steps.index.tolist() == list(range(5190, 5200)) and run.steps["loss"].iloc[0] == 0.481
    assert run.steps["lr"].iloc[0] == 0.001
    lines = [f"Average loss over epoch {e}: {0.2 - e / 10000:.4f}" for e in range(100, 1100, 100)]
    (run,) = discover_runs(_write(tmp_path / "qnn.log", lines))
    assert run.steps.index.tolist() == list(range(100, 1100, 100)) and run.steps["loss"].iloc[0] == 0.19
    lines = [f"iteration:  {i}  cost:  {18 - i / 100}" for i in range(0, 200, 10)]
    with pytest.raises(NoRunsError, match="pass --loss-col cost to judge it as the loss"):
        discover_runs(_write(tmp_path / "qcnn.log", lines))
    # Leela Zero's "step 1000, policy=2.1 mse=0.46 reg=0.1 total=2.7": its total, not the value head's mse
    lines = [f"step {s}, policy={2.1 - s / 1e5:.4f} mse={0.46 - s / 1e6:.4f} reg=0.1002 total={2.7 - s / 1e5:.4f} "
             "(2741.1 pos/s)" for s in range(100, 2100, 100)]
    with pytest.raises(NoRunsError, match="pass --loss-col total to judge it as the loss"):
        discover_runs(_write(tmp_path / "leela.log", lines))


def test_a_time_of_day_is_no_logged_key():
    """A headerless CSV of a script's results, each row ending in its time ("168, 1.50171, ..., Aug21-23:56:49,"),
    was refused as a log of "Aug22-02, Aug22-06, ... but no loss"."""
    from sentinel.analyze.loaders.textlogs import _logged_keys

    rows = "".join(f"{e}, 1.50171, 79.38227, 90.84000, Aug22-{e % 24:02d}:14:13,\n" for e in range(168, 180))
    assert _logged_keys(rows) == []
    assert _logged_keys("time: 12, loss: 2.5\n" * 6) == ["loss", "time"]


def test_a_nan_an_epochs_own_line_prints_is_that_epochs(tmp_path):
    """cryoDRGN prints "# =====> Epoch: 2460 Average gen loss = ..., total loss = nan" each epoch: the line that
    says an epoch's total loss went NaN was also given the next epoch's step (its rule places such a line, when
    between step lines, before the next): a second critical "non-finite at epoch 3", where 0.909 is finite."""
    lines = ["# Epoch: 1 total loss = 0.839", "# Epoch: 2 total loss = nan", "# Epoch: 3 total loss = 0.909",
             "# Epoch: 4 total loss = 0.84", "# Epoch: 5 total loss = 0.83", "# Epoch: 6 total loss = 0.82"]
    (run,) = discover_runs(_write(tmp_path / "run.log", lines))
    assert [(i.kind, i.step, i.end_step) for i in analyze_run(run).incidents] == [("nonfinite", 2, 2)]


def test_a_density_models_bits_per_dim_is_its_loss(tmp_path):
    """survae_flows prints "Training. Epoch: 1/10, Datapoint: 64/50000, Bits/dim: 9.041": its loss (a negative
    log-likelihood in bits per dimension) climbing to 7e24 was refused as a log of "Bits/dim ... a rise of
    these is progress". A key named in bits per dimension is a loss."""
    values = [9.041, 8.964, 8.8, 8.664, 12.0, 150.0, 3.1e4, 2.8e9, 1.2e15, 5.5e20, 6.96e24]
    lines = [f"Training. Epoch: 1/10, Datapoint: {64 * (k + 1)}/50000, Bits/dim: {v:.3f}" for k, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "flow.log", lines))
    assert run.steps["loss"].tolist() == [float(f"{v:.3f}") for v in values]
    assert [i.kind for i in analyze_run(run).incidents] == ["divergence"]
    from sentinel.analyze.loaders.keys import looks_like_loss

    assert looks_like_loss("bits_per_dim") and looks_like_loss("bpd") and not looks_like_loss("hidden_dim")


def test_a_bar_row_that_turned_nan_in_its_last_draw_is_a_nan(tmp_path):
    """yolov5_obb's console row, drawn again at each batch: its running means turned "nan  nan  nan  nan" at
    batch 2992 and stayed so; the epoch kept its last finite draw (merging the draws, a cell's last number
    won) and the run was "healthy". Its fourth term, theta (the angle's), was left out of the sum."""
    header = "    Epoch   gpu_mem    box     obj        cls         theta    labels       img_size "
    draw = "     {e}/119     6.51G     {v}     {v}     {v}     {v}       186      1024:  81%|########  | {b}/3683 [1:03:00<14:31,  1.26s/it]"
    lines = [header] + [draw.format(e=0, v="0.0860", b=b) for b in range(2988, 2992)]
    lines += [draw.format(e=0, v="nan", b=b) for b in range(2992, 2996)]
    (run,) = discover_runs(_write(tmp_path / "obb.txt", lines))
    assert run.steps["loss"].isna().all() and [i.kind for i in analyze_run(run).incidents] == ["nonfinite"]
    lines = [header] + [draw.format(e=e, v=v, b=3683) for e, v in ((0, "0.1000"), (1, "0.0900"), (2, "0.0800"))]
    (run,) = discover_runs(_write(tmp_path / "obb.txt", lines))
    assert run.steps["loss"].tolist() == pytest.approx([0.4, 0.36, 0.32])
    assert "train/box + train/obj + train/cls + train/theta" in " ".join(run.warnings)


def test_a_rise_beside_a_ranking_metric_that_rose_too_is_no_sure_divergence(tmp_path):
    """kbc's ComplEx on FB15K, pasted as "Epoch  Train(loss)  Valid(MRR)  Test(MRR)": its first column (the
    train MRR its learn.py prints, headed "loss" by its asker) rises 0.29 to 0.9995 with the two MRRs: a critical
    divergence. A rise while a ranking's mean reciprocal rank rose at every row is told as information."""
    lines = ["Epoch\tTrain(loss)\tValid(MRR)\tTest(MRR)"]
    lines += [f"{e}\t{1 - 0.72 * 0.8 ** e:.8f}\t{0.8 - 0.6 * 0.85 ** e:.8f}\t{0.8 - 0.6 * 0.85 ** e:.8f}" for e in range(35)]
    (run,) = discover_runs(_write(tmp_path / "kbc.txt", lines))
    (incident,) = [i for i in analyze_run(run).incidents if i.kind == "divergence"]
    assert incident.severity == "info" and "mrr) rose from" in incident.message


def test_a_key_that_goes_on_in_a_digit_is_no_loss_of_that_digit(tmp_path):
    """Facelet-Bank prints "(epoch: 11, iters: 5) loss1: 0.059 loss2: 0.312 loss3: 4.97 loss_all: 5.341": read as
    "loss" of 1 at every step, a "loss exactly 1 ... stuck" warning on a falling run. Its total, loss_all, is
    the loss."""
    lines = [f"(epoch: 11, iters: {i}) loss1: {0.06 - i / 1e4:.4f} loss2: 0.312 loss3: {5 - i / 100:.3f} "
             f"loss_all: {5.4 - i / 100:.3f}" for i in range(5, 205, 10)]
    (run,) = discover_runs(_write(tmp_path / "facelet.log", lines))
    assert run.steps["loss"].iloc[0] == 5.35 and not analyze_run(run).incidents
    # GMFlow's "step: 100  epe: 3.2": an error the training minimises, the key named in the refusal
    lines = [f"step: {s}  epe: {3.2 - s / 10000:.3f}" for s in range(100, 2100, 100)]
    with pytest.raises(NoRunsError, match="pass --loss-col epe to judge it as the loss"):
        discover_runs(_write(tmp_path / "gmflow.log", lines))


def test_deepfacelab_and_faceswap_iterations(tmp_path):
    """DeepFaceLab's "[02:43:23][#061370][4251ms] src_loss:0.286 dst_loss:0.137" (2.0: "[0.2449][0.4413]") and
    faceswap's "[00:27:25] [#00015] Loss A: 0.20026, Loss B: 0.22471" were not log formats sentinel reads: a
    jump of both losses x150 and a NaN went unsaid. The two sides' sum is the loss; faceswap's NaN protection
    ("NaN Detected. Loss: [0.21, nan]") is a non-finite event."""
    rows = [(61370, 0.286, 0.137), (61380, 0.211, 0.101), (61390, 0.221, 0.176), (61400, 0.228, 0.171),
            (61410, 18.271, 40.176), (61420, 19.1, 40.7), (61430, 18.9, 40.2), (61440, 18.8, 40.3)]
    lines = [f"[02:{k + 40}:23][#{i:06d}][4251ms] src_loss:{a} dst_loss:{b}" for k, (i, a, b) in enumerate(rows)]
    (run,) = discover_runs(_write(tmp_path / "dfl.log", lines))
    assert run.steps.index.tolist() == [i for i, _, _ in rows] and run.steps["loss"].iloc[0] == pytest.approx(0.423)
    assert [(i.kind, i.severity) for i in analyze_run(run).incidents] == [("loss_spike", "critical")]
    lines = [f"[13:5{k}:35][#{1406390 + k}][1314ms][{0.24 - k / 1000:.4f}][{0.44 - k / 1000:.4f}]" for k in range(5)]
    lines.append("[14:01:30][#1406754][1302ms][nan][nan]")
    (run,) = discover_runs(_write(tmp_path / "dfl.log", lines))
    assert [i.kind for i in analyze_run(run).incidents] == ["nonfinite"]
    lines = [f"[00:27:0{k}] [#{k:05d}] Loss A: {0.3 - k / 100:.5f}, Loss B: {0.32 - k / 100:.5f}" for k in range(1, 5)]
    lines[-1] += "09/20/2025 00:27:25 CRITICAL NaN Detected. Loss: [0.21266034245491028, nan]"
    lines.append("09/20/2025 00:27:25 ERROR    A NaN was detected and you have NaN protection enabled. Training has been "
                 "terminated.")
    (run,) = discover_runs(_write(tmp_path / "faceswap.log", lines))
    assert run.steps["loss"].iloc[0] == pytest.approx(0.6) and len(run.steps) >= 4
    assert [i.kind for i in analyze_run(run).incidents] == ["nonfinite"]


def test_tables_of_many_trainings_are_read_up_to_nine_and_said(tmp_path):
    """A text of twelve trainings' tables, each naming its own score (a notebook's sweep): each later table is a
    pass over the rest of the text, so nine are read, and the rest are said, not dropped without a word."""
    lines = ["Tokenizing...", "Map: 100%", "Some weights were not initialized", "You should train this model"]
    for k in range(12):
        lines += [f"Step    Training Loss    Score{k}"] + [f"{s}    {2.0 / (1 + s / 100 + k):.4f}    0.5"
                                                         for s in range(10, 110, 10)]
    runs = discover_runs(_write(tmp_path / "sweep.txt", lines))
    assert len(runs) == 9 and runs[1].steps["loss"].iloc[0] == pytest.approx(2.0 / 2.1, abs=1e-4)
    assert any("tables after the first 9 were not read" in w for w in runs[0].warnings)


def test_a_loss_stuck_to_float32_precision_is_not_said_exactly():
    """OpenKE's "Epoch 0 | loss: 69.314722", then 69.314723, 69.314720, 69.314720, 69.314717: stuck (a sum of
    ln 2 over its batch), but "loss exactly 69.314722" where its rows differ in their last digit."""
    (incident,) = stuck_loss_incidents(_series([69.314722, 69.314723, 69.314720, 69.314720, 69.314717]), min_rows=5)
    assert incident.message.startswith("loss 69.314722 (to float32's precision) at 5 logged steps")
    (incident,) = stuck_loss_incidents(_series([3.0, 2.5] + [10.825932] * 10))
    assert incident.message.startswith("loss exactly 10.825932 at 10 logged steps")


def test_a_keras_evaluate_bar_after_the_fit_is_no_epoch_of_it(tmp_path):
    """A Keras paste: ten epochs of `fit`, then `model.evaluate(x_test)`'s bar ("313/313 [====] - loss: 0.95")
    under the last epoch's: read as epoch 10's loss (final loss 0.95 where the fit ended at 0.177), and every
    val_loss one epoch early. A bar of another length after an epoch's finished bar is left out, and said."""
    lines, loss = [], 0.9
    for epoch in range(1, 11):
        loss *= 0.85
        lines += [f"Epoch {epoch}/10", f"1875/1875 [==============================] - 5s 3ms/step - loss: {loss:.4f} - "
                  f"accuracy: {1 - loss / 2:.4f} - val_loss: {loss * 1.1:.4f} - val_accuracy: {1 - loss / 2.2:.4f}"]
    lines += ["313/313 [==============================] - 1s 2ms/step - loss: 0.9500 - accuracy: 0.8712",
              "Test accuracy: 0.8712"]
    (run,) = discover_runs(_write(tmp_path / "keras.txt", lines))
    assert run.steps.index.tolist() == list(range(1, 11))
    assert run.steps["loss"].iloc[-1] == 0.1772 and run.steps["val_loss"].iloc[0] == 0.8415
    assert "1 progress bar(s) of another length after an epoch's finished bar" in run.warnings[0]
    # a bar printed again at its end (a snapshot, then the finished bar with the validation's metrics): the epoch's
    lines = lines[:-3] + [re.sub(" - val_.*", "", lines[-3]), lines[-3]]
    (run,) = discover_runs(_write(tmp_path / "keras.txt", lines))
    assert not any("progress bar(s)" in warning for warning in run.warnings) and run.steps["loss"].iloc[-1] == 0.1772


def _keras3_epoch(epoch: int, epochs: int, loss: float) -> list[str]:
    return [f"Epoch {epoch}/{epochs}", f"391/391 ━━━━━━━━━━━━━━━━━━━━ 60s 153ms/step - accuracy: {1 - loss / 2:.4f} - "
            f"loss: {loss:.4f} - val_accuracy: {1 - loss / 2.2:.4f} - val_loss: {loss * 1.1:.4f}"]


def test_a_keras_evaluate_bar_as_long_as_the_epochs_is_no_epoch_either(tmp_path):
    """Keras 3 on IMDB: the test set as long as the training set, so `model.evaluate()`'s bar ("391/391 ━━━━ 18s
    47ms/step - accuracy: 0.8433 - loss: 0.3416") matched the last epoch's length and was read as epoch 10, its
    loss 0.3416 the run's final where the fit ended at 0.2342. Nothing of an epoch is printed after its finished
    bar's validation metrics."""
    lines = [line for epoch in range(1, 11) for line in _keras3_epoch(epoch, 10, 0.6 - 0.0366 * epoch)]
    lines += ["391/391 ━━━━━━━━━━━━━━━━━━━━ 18s 47ms/step - accuracy: 0.8433 - loss: 0.3416", "Test Loss: 0.3416"]
    (run,) = discover_runs(_write(tmp_path / "keras.txt", lines))
    assert run.steps.index.tolist() == list(range(1, 11)) and run.steps["loss"].iloc[-1] == 0.234
    assert "1 progress bar(s) of another length after an epoch's finished bar, or after its valid" in run.warnings[0]
    # Keras 2's bars so too; and a fit without validation keeps its bars (nothing tells an evaluation's apart)
    old = [re.sub("━+ 60s", "[==============================] - 60s", line) for line in lines]
    (run,) = discover_runs(_write(tmp_path / "keras2.txt", old))
    assert run.steps["loss"].iloc[-1] == 0.234
    plain = [re.sub(" - val_.*", "", line) for line in lines[:-2]]
    (run,) = discover_runs(_write(tmp_path / "plain.txt", plain))
    assert len(run.steps) == 10 and not any("progress bar(s)" in warning for warning in run.warnings)


def test_keras_tuner_trials_are_trainings_of_their_own(tmp_path):
    """Keras Tuner's Hyperband: "Search: Running Trial #N" opens each trial, and a trial of a later round goes on
    from an earlier one's weights at "Epoch 3/6". Read by their "Epoch 1/N" alone, trials 6 and 7 (both from
    epoch 3) were joined to trial 5 and read as a restart, the search's best trial gone; the fit of the best
    hyperparameters after the last trial was joined to it."""
    lines = []
    for trial, (first, epochs) in enumerate([(1, 2)] * 5 + [(3, 6)] * 2 + [(1, 6)], start=1):
        lines += [f"Search: Running Trial #{trial}", "", "Value             |Best Value So Far |Hyperparameter",
                  "64                |64                |units", ""]
        lines += [line for k in range(first, epochs + 1) for line in _keras3_epoch(k, epochs, 0.7 - 0.05 * k)]
        lines += ["", f"Trial {trial} Complete [00h 02m 07s]", "val_accuracy: 0.8576800227165222", ""]
    lines += [line for epoch in range(1, 11) for line in _keras3_epoch(epoch, 10, 0.6 - 0.03 * epoch)]
    runs = discover_runs(_write(tmp_path / "tuner.txt", lines))
    assert [run.steps.index.tolist() for run in runs] == [[1, 2]] * 5 + [[3, 4, 5, 6]] * 2 + [list(range(1, 7)),
                                                                                              list(range(1, 11))]
    assert not any(i.kind == "restart" for run in runs for i in analyze_run(run).incidents)


def test_keras_terminate_on_nan_message_on_a_bars_line_is_no_step(tmp_path):
    """Keras' TerminateOnNaN prints "Batch 2: Invalid loss, terminating training" on the bar's line, after its
    redraw: "Batch 2" was read as the step of the bar's first NaN, "at step 2" before every other step."""
    lines = ["Epoch 5/10", "   1/1500 [..............................] - ETA: 0s - loss: 2.2759 - accuracy: 0.2188"]
    lines += [f"   {k}/1500 [..............................] - ETA: 46s - loss: nan - accuracy: 0.1719{sep}Batch {k}: "
              "Invalid loss, terminating training" for k, sep in zip(range(2, 8), ["  ", "", "", " ", "", ""])]
    (run,) = discover_runs(_write(tmp_path / "nan.txt", lines))
    assert run.steps.index.tolist() == list(range(6001, 6008))
    (incident,) = [i for i in analyze_run(run).incidents if i.kind == "nonfinite"]
    assert incident.step == 6002


def test_a_second_training_logged_at_another_interval_is_no_resume(tmp_path):
    """Two Hugging Face Trainer tables pasted one after the other, the second training logged every 100 steps
    where the first logged every 50: its first row, step 100, was read as the first training resumed there
    ("restart 1"), ten of its rows replacing the first's from step 100 on. A table that starts again from its
    own first logging step is a training of its own; one resumed from a later step is not."""
    def table(steps, start):
        return ["Step\tTraining Loss\tValidation Loss", *[f"{s}\t{start / (1 + s / 500):.6f}\t{0.5:.6f}" for s in steps]]
    path = _write(tmp_path / "paste.txt", [*table(range(50, 1050, 50), 2.0), *table(range(100, 1100, 100), 3.0)])
    first, second = discover_runs(path)
    assert first.steps.index.tolist() == list(range(50, 1050, 50)) and not first.abandoned
    assert second.steps.index.tolist() == list(range(100, 1100, 100)) and second.steps["loss"].iloc[0] == 2.5
    _write(path, [*table(range(50, 1050, 50), 2.0), *table(range(600, 1600, 100), 2.0)])
    (run,) = discover_runs(path)
    assert len(run.abandoned) == 1 and run.steps.index.min() == 50 and run.steps.index.max() == 1500


def test_a_grad_norm_that_drifts_to_a_new_level_is_no_explosion(tmp_path):
    """A TinyLlama LoRA fine-tune's trainer_state.json: its grad norm drifts from 1.2 to 2.7 while the loss
    falls smoothly: three "grad norm explosions" (x1.45-x2.0 its baseline, "no loss spike followed"), the
    run "recovered". A rise under x3 that stays, with no loss spike, is a new level (information); a jump of
    x3 or more that stays, the loss no longer falling, is still an explosion."""
    def state(jump: float) -> dict:
        rows = []
        for k, step in enumerate(range(15, 2800, 15)):
            grad = 1.2 + 1.5 * step / 2800 if step < 1500 else jump
            rows.append({"epoch": step / 1000, "grad_norm": grad, "learning_rate": 2e-4,
                         "loss": 1.6 - min(step, 1500 if jump > 3 else step) / 5000, "step": step})
        return {"global_step": 2790, "log_history": rows, "logging_steps": 15}
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(state(3.0)))
    (run,) = discover_runs(path)
    assert not any(i.kind == "grad_norm_explosion" for i in analyze_run(run).incidents)
    path.write_text(json.dumps(state(12.0)))
    (run,) = discover_runs(path)
    assert [i.kind for i in analyze_run(run).incidents if i.severity.value != "info"] == ["grad_norm_explosion"]


def test_a_grpo_runs_zero_grad_norm_where_every_completion_scored_alike(tmp_path):
    """A GRPO run's trainer_state.json: grad norm exactly 0 at steps 85-90, where every completion scored 0
    (reward_std 0, zero_std_ratio 1): "no gradient reaches the weights (a loss detached ...)". With no
    spread among a group's rewards there is no advantage, and no gradient, by design."""
    def state(flat_rewards: bool) -> dict:
        rows = []
        for step in range(1, 120):
            zero = 85 <= step <= 95
            row = {"step": step, "loss": 0.0, "grad_norm": 0.0 if zero else 0.05 + step / 1000, "learning_rate": 1e-6}
            if step % 2:
                row.update(reward=0.0 if zero else 0.4, reward_std=0.0 if zero and flat_rewards else 0.3,
                           zero_std_ratio=1.0 if zero and flat_rewards else 0.0)
            rows.append(row)
        return {"global_step": 119, "log_history": rows}
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(state(flat_rewards=True)))
    (run,) = discover_runs(path)
    assert not any(i.kind == "zero_grad" for i in analyze_run(run).incidents)
    path.write_text(json.dumps(state(flat_rewards=False)))
    (run,) = discover_runs(path)
    assert [i.kind for i in analyze_run(run).incidents if i.kind == "zero_grad"] == ["zero_grad"]


def test_phases_whose_step_starts_again_each_of_its_own_length_are_all_kept(tmp_path):
    """An expert-iteration loop's SFT phases each log "Step 7 loss: X", "Step 15 ...", from 7 again, each
    phase as long as its data: a phase that ended short of the longest was a resumed run's, merged step by
    step with the next: 336 of 867 losses gone, with no word."""
    lines = []
    for phase, length in enumerate((1330, 1441, 1200, 1463, 1390)):
        lines += [f"2025-09-18 23:55:25,453 - train - INFO - sft_data: {length}",
                  f"2025-09-18 23:55:25,453 - train - INFO - sft step {phase} start"]
        lines += [f"2025-09-18 23:55:29,715 - train - INFO - Step {s} loss: {12 - s / 200 + phase:.6f} token_entropy: 0.79"
                  for s in range(7, length, 8)]
        lines.append(f"2025-09-19 00:05:04,782 - train - INFO - ei step {phase} done, eval_acc: 0.686")
    runs = discover_runs(_write(tmp_path / "train.log", lines))  # each phase a training of its own
    assert [len(run.steps["loss"].dropna()) for run in runs] == [len(range(7, n, 8)) for n in (1330, 1441, 1200, 1463, 1390)]
    assert all(run.steps.index[0] == 7 and run.steps.index.is_monotonic_increasing for run in runs)


def test_stable_baselines3s_progress_csv(tmp_path):
    """Stable-Baselines3's progress.csv: "no step column" (its step is time/total_timesteps); named, its empty
    train/ cells (a rollout's row before any update, an evaluation's) were 100 NaN losses, critical, on a run
    whose returns rose from -1183 to +1052. SB3 writes a NaN as 'nan' and a value not logged as nothing."""
    header = ("rollout/ep_len_mean,time/time_elapsed,time/total_timesteps,rollout/ep_rew_mean,time/iterations,"
              "train/loss,train/value_loss,eval/mean_reward")
    rows = [header]
    for k in range(1, 60):
        steps = 2048 * k
        if k % 6 == 1:
            rows.append(f"600.0,{k},{steps},{-1183 + 40 * k},{k},,,{-1000 + 40 * k}")
        else:
            rows.append(f"600.0,{k},{steps},{-1183 + 40 * k},{k},{'nan' if k == 50 else 500 - 5 * k},2581.3,")
    path = tmp_path / "progress.csv"
    path.write_text("\n".join(rows) + "\n")
    (run,) = discover_runs(path)
    assert run.steps.index[0] == 2048
    assert [(i.kind, i.step) for i in analyze_run(run).incidents if i.kind == "nonfinite"] == [("nonfinite", 50 * 2048)]


def test_a_csv_of_trainings_appended_keeps_each_ones_nan(tmp_path):
    """A CSV written by two launches one after the other, the second going NaN (printed 'nan'), an empty cell
    in the first: each training a run, the NaN told in the second at its own step, the empty cell none."""
    rows = ["epoch,step,train_loss"]
    rows += [f"0,{s},{'' if s == 30 else 3.0 - s / 100}" for s in range(10, 110, 10)]
    rows += [f"0,{s},{'nan' if s >= 70 else 3.1 - s / 100}" for s in range(10, 110, 10)]
    path = tmp_path / "losses.csv"
    path.write_text("\n".join(rows) + "\n")
    first, second = discover_runs(path)
    assert [i.kind for i in analyze_run(first).incidents if i.kind == "nonfinite"] == []
    assert [(i.kind, i.step) for i in analyze_run(second).incidents if i.kind == "nonfinite"] == [("nonfinite", 70)]


def test_openai_baselines_progress_csv_steps_by_total_steps(tmp_path):
    """OpenAI baselines' DDPG writes progress.csv with its steps under total/steps: "not a log format"."""
    rows = ["rollout/return,train/loss_critic,total/steps,total/episodes,train/loss_actor"]
    rows += [f"{-1146 + 30 * k},{383 * 1.1 ** k:.2f},{2000 * k},{34 * k},{-176 + k:.2f}" for k in range(1, 40)]
    path = tmp_path / "progress.csv"
    path.write_text("\n".join(rows) + "\n")
    (run,) = discover_runs(path)
    assert run.steps.index[0] == 2000 and "loss" in run.steps.columns
    # its critic's loss grows with the returns' size: a reinforcement-learning run, its rises not judged
    assert not any(i.kind in ("divergence", "loss_spike") for i in analyze_run(run).incidents)


def test_tinygrad_prints_the_value_before_its_name(tmp_path):
    """tinygrad's trainers: f"{i:5} {ms:7.2f} ms run, ... {loss:5.2f} loss, {lr:.6f} LR, ... GB used":
    "not a log format", a NaN there unread."""
    lines = ["MODEL=llama3 python3 examples/mlperf/model_train.py", ""]
    lines += [f"{i:5} {4.3 + i / 100:7.2f} {'s' if i % 2 else 'ms'} run, {12.5:7.2f} ms python, {1.2:6.2f} ms fetch data, "
              f"{80.1:7.2f} ms NV, {'nan' if i >= 40 else f'{3.0 - i / 100:5.2f}'} loss, {i * 1e-5:.6f} LR, "
              f"{1454.57:.2f} GB used, {401488.40:9.2f} GFLOPS" for i in range(1, 46)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert list(run.steps.index[:2]) == [1, 2] and run.steps["loss"].iloc[1] == pytest.approx(2.98)
    assert run.steps["lr"].iloc[1] == pytest.approx(2e-5)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 40)]


def test_a_sweep_of_trainings_printing_every_k_epochs_is_read_as_its_trainings(tmp_path):
    """A GraphSAGE sweep's log: trainings appended, each printing "Epoch: 100, Train Loss: ..." every
    100 (or 10) epochs from its first printed epoch k, not from the log's first (10): 3,473 lines
    read as one run numbered in order, each training's start a critical "spike, not recovered"."""
    lines = []
    for training, (every, last, level) in enumerate(((10, 1000, 0.062), (100, 2000, 0.055), (100, 3000, 0.068),
                                                     (10, 500, 0.060))):
        lines += ["", f"results/best_sage_model_{training}.pt"]
        lines += [f"Epoch: {e:03d}, Train Loss: {level + 0.2 * every / (e + every) + 0.0003 * (e // every % 3):.4f}, "
                  f"Valid Loss: {level + 0.01:.4f}, Train AUC: 70.10, Valid AUC: 69.50" for e in range(every, last + 1, every)]
        lines += ["Training completed."]
    runs = discover_runs(_write(tmp_path / "train.log", lines))
    assert [(run.steps.index[0], run.steps.index[-1]) for run in runs] == [(10, 1000), (100, 2000), (100, 3000), (10, 500)]
    assert not [i for run in runs for i in analyze_run(run).incidents if i.severity.value != "info"]
    # a fall to an epoch that is not its first printed one is a resume from an earlier checkpoint: one run
    resumed = [f"Epoch: {e:03d}, Train Loss: {0.3 - e / 1000:.4f}" for e in (*range(1, 51), *range(30, 61))]
    assert len(discover_runs(_write(tmp_path / "resumed.log", resumed))) == 1


def test_a_rise_over_a_single_first_value_with_few_rows_after_it_is_not_known(tmp_path):
    """A BasicSR-style paste of a noisy per-batch loss, 3.42 then 6.29, 4.81, 4.57, 6.91 every 100 iterations:
    "a spike x1.84 not recovered within 200 steps", critical, on a run whose author asked about its speed.
    Three rows after a single first value tell neither a new level nor that value's luck."""
    values = (3.4186, 6.2904, 4.8104, 4.5715, 6.9138)
    lines = [f"24-09-18 13:27:08.905 - INFO: <epoch: 16, iter: {3800 + 100 * k:7,d}, lr:2.999e-04> l_all: {v:.4e} "
             for k, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == [3800, 3900, 4000, 4100, 4200]
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.severity) == ("loss_spike", "warning") and "lucky low one" in incident.message
    # a rise the rows after it hold, five and more, stays a level of its own
    values = (3.4186, 6.2904, 6.3, 6.25, 6.31, 6.28, 6.3)
    lines = [f"24-09-18 13:27:08.905 - INFO: <epoch: 16, iter: {3800 + 100 * k:7,d}, lr:2.999e-04> l_all: {v:.4e} "
             for k, v in enumerate(values)]
    incidents = analyze_run(discover_runs(_write(tmp_path / "level.log", lines))[0]).incidents
    assert {(i.kind, i.severity) for i in incidents} == {("loss_spike", "critical"), ("divergence", "critical")}
    # ... and so does one the loss came back from, later than it should (PSMNet's 17.37, 33.37, ..., 17.36)
    lines = [f"Step:{s}      Loss:{v}      f/b time:0.603486" for s, v in
             zip(range(22800, 23400, 100), (17.37, 33.37, 36.77, 28.94, 18.60, 17.36))]
    (incident,) = analyze_run(discover_runs(_write(tmp_path / "psmnet.log", lines))[0]).incidents
    assert (incident.kind, incident.severity) == ("loss_spike", "critical") and "not recovered within" in incident.message


def test_keras_gans_d_loss_and_g_loss_brackets(tmp_path):
    """Keras-GAN and ML-From-Scratch: print("%d [D loss: %f, acc.: %.2f%%] [G loss: %f]" % (epoch, ...)), the
    most copied Keras GAN loop: "not a log format", its NaN unread."""
    lines = ["Epoch 1/1", "**33 [D loss: 0.029268, acc.: 100.00%] [G loss: 5.641379]"]
    lines += [f"{i} [D loss: {float('nan') if i >= 40 else 0.02 + i / 1000:f}, acc.: 96.88%] [G loss: "
              f"{float('nan') if i >= 40 else 5.2 + (i % 3) / 10:f}, mse: 0.1]" for i in range(34, 46)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "gan" and run.steps.index[[0, -1]].tolist() == [33, 45]
    assert run.steps["loss"].iloc[0] == pytest.approx(5.641379) and run.steps["loss_d"].iloc[1] == pytest.approx(0.054)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 40)]
    # roatienza's DCGAN: "%d: [D loss: %f, acc: %f]  [A loss: %f, acc: %f]", the adversarial model's the loss
    lines = [f"{i}: [D loss: 7.971192, acc: 0.500000]  [A loss: {1.2 - i / 100:f}, acc: 1.000000]" for i in range(20)]
    (run,) = discover_runs(_write(tmp_path / "dcgan.log", lines))
    assert run.steps["loss"].iloc[1] == pytest.approx(1.19) and run.steps["loss_d"].iloc[0] == pytest.approx(7.971192)


def test_coqui_pastes_of_one_step_and_of_another_indent(tmp_path):
    """Coqui TTS pastes in issues hold the last step's block before a crash, or are indented one space more
    than the trainer prints ("      | > loss: X"): 'not a log format' and 'no loss logged', a NaN unread."""
    block = ["    --> STEP: 183/270 -- GLOBAL_STEP: 1061700", "      | > loss: nan  (20.22347)",
             "      | > loss_mel: 16.64367  (16.56427)", "      | > grad_norm: 459.31244  (378.85425)", "",
             "Traceback (most recent call last):", '  File "TTS/trainer.py", line 855, in fit', "    self._fit()"]
    (run,) = discover_runs(_write(tmp_path / "one.log", block))
    assert run.source == "coqui" and run.steps.index.tolist() == [1061700]
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 1061700)]
    lines = [line for step in range(100, 130) for line in (
        f"    --> STEP: {step}/270 -- GLOBAL_STEP: {step}", f"      | > loss: {3 - step / 100:.5f}  (3.0)",
        f"      | > current_lr: 0.00018 ", "")]
    (run,) = discover_runs(_write(tmp_path / "indented.log", lines))
    assert len(run.steps) == 30 and run.steps["loss"].iloc[0] == pytest.approx(2.0)


def test_kairs_g_loss_on_basicsrs_lines(tmp_path):
    """KAIR (SwinIR's training code) prints BasicSR's early "<epoch:  9, iter:   1,000, lr:2.000e-04> G_loss: X": its
    lines 'held no loss', a general reader read "1,000" as 1 and 000 (500 lines, 144 steps, the last 49005),
    and 'G_loss' made it a GAN's run, its spikes not judged."""
    lines = [f"25-10-01 09:51:{k % 60:02d}.360 : <epoch: {k // 10:2d}, iter: {10 * k:7,d}, lr:2.000e-04> "
             f"G_loss: {8.0 if k == 300 else 0.04 - k / 20000 + 0.002 * (k % 3):.3e} " for k in range(1, 501)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "basicsr" and run.steps.index[[0, -1]].tolist() == [10, 5000] and len(run.steps) == 500
    assert run.steps["lr"].iloc[0] == 2e-4
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("outlier_batch", 3000)]  # judged: no GAN


def test_a_jump_within_the_spread_of_the_few_values_before_it_is_not_known(tmp_path):
    """A maintainer's batch-size-1 litgpt run pasted from iteration 331: 0.069, 0.000, then 2.8, 2.2, 5.0, ... 11.3:
    "a spike x72.9 not recovered", critical, at a score of 0.14 (the two values before it disagree by more than
    the jump). A Trainer paste's 1258 then 2635, 1867, 1691, 1430, 2164: 'loss rose', critical, over one value."""
    values = (0.069, 0.000, 2.766, 2.219, 5.031, 2.969, 1.898, 1.297, 11.312, 2.375, 2.359, 1.914)
    lines = [f"Epoch 3 | iter {331 + k} step {331 + k} | loss train: {v:.3f}, val_loss valid: 9.515 | iter time: 38.219 s "
             "(step)" for k, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "litgpt.log", lines))
    incidents = analyze_run(run).incidents
    assert incidents and all(i.severity.value == "warning" for i in incidents)
    assert any("lucky low ones is not known" in i.message for i in incidents)
    values = (1257.61, 2634.69, 1867.06, 1691.03, 1430.48, 2163.63)
    lines = [str({"loss": v, "learning_rate": 0.002, "epoch": 0.0238 * k, "step": k}) for k, v in enumerate(values, 1)]
    (run,) = discover_runs(_write(tmp_path / "trainer.log", lines))
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.severity) == ("loss_spike", "warning") and "lucky low one is not known" in incident.message


def test_modded_nanogpt_lines_with_a_slash_in_a_key(tmp_path):
    """A speedrun fork prints modded-nanogpt's lines with "tokens/sec:1.55e+05" after them: the slash split its
    key, every training line was noise ('19328 token(s) with a value that is not a number were skipped'), and
    a 9,664-step run had no loss."""
    lines = ["step:0/300 val_loss:11.0006 train_time:223ms step_avg:nanms"]
    lines += [f"step:{s}/300 train_loss:{'nan' if s >= 250 else f'{11 - s / 50:.4f}'} train_time:{3380 + s}ms "
              f"step_avg:{'nan' if s < 10 else '220.1'}ms tokens_seen:{s * 5.24e5:.2e} tokens/sec:1.55e+05"
              for s in range(1, 301)]
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.source == "llmc" and len(run.steps) == 301 and run.steps["loss"].iloc[1] == pytest.approx(10.98)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents if i.severity.value == "critical"] == [("nonfinite", 250)]


def test_a_loss_printed_below_its_digits(tmp_path):
    """A PaiNN run prints f"Train Loss: {loss:.4f}": from its second epoch its MSE reads 0.0000, now and then
    0.0001: "final loss 0, best loss 0", "plateaued for 648 epochs: best 0", no word that the log cannot show it."""
    rng = np.random.default_rng(3)
    lines = []
    for epoch in range(1, 121):
        loss = 0.0212 if epoch == 1 else float(rng.choice([0.0, 0.0, 0.0, 0.0, 0.0001]))
        lines += [f"Epoch [{epoch}/120], Train Loss: {loss:.4f}, Train L1 Loss: {0.18 / epoch ** 0.5:.4f}",
                  f"Epoch [{epoch}/120], Validation Loss: 0.0000, Validation L1: {0.19 / epoch ** 0.5:.4f}"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    report = analyze_run(run)
    assert not [i for i in report.incidents if i.kind == "plateau"]
    (said,) = [w for w in report.warnings if "printed with 4 decimals" in w]
    assert "logged epochs from epoch " in said
    # a loss that falls to exactly 0 and stays there is the stuck rule's, not the printing's
    lines = [f"Epoch [{e}/40], Train Loss: {0.5 if e < 3 else 0.0:.4f}" for e in range(1, 41)]
    report = analyze_run(discover_runs(_write(tmp_path / "zero.log", lines))[0])
    assert not any("printed with" in w for w in report.warnings)


def test_a_short_logs_rise_that_came_back_is_held_to_its_own_noise(tmp_path):
    """TF-Agents' DQN example prints "step = N: loss = X" every 200 steps: a paste of 27 losses swinging x20 from
    row to row (253 to 234,161) rose x1.12 in its smoothed level and came back: "diverged", critical, on a run
    at CartPole's maximum return. Too short for the detector to measure its noise, it is held to all its values'."""
    values = (234161.8, 207285.2, 2464.8, 1156.2, 1075.3, 1952.6, 1658.6, 200501.8, 1741.3, 1151.8, 1370.2, 3474.3,
              3475.2, 5564.0, 2245.3, 975.4, 953.6, 1222.0, 3240.3, 253.2, 2906.2, 1646.7, 1265.3, 1648.4, 2049.6, 2011.9,
              844.2)
    lines = []
    for k, v in enumerate(values):
        step = 73200 + 200 * k
        lines.append(f"step = {step}: loss = {v}")
        if step % 1000 == 0:
            lines.append(f"step = {step}: Average Return = 200.0")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert len(run.steps) == 27
    assert not [i for i in analyze_run(run).incidents if i.kind == "divergence"]
    # a calm short loss that rises x1.5 for long and comes back still diverged
    calm = [2.0 + 0.02 * np.sin(k) + (1.0 if 20 <= k < 45 else 0.0) for k in range(60)]
    lines = [f"step = {200 * k}: loss = {v}" for k, v in enumerate(calm)]
    assert [i.kind for i in analyze_run(discover_runs(_write(tmp_path / "calm.log", lines))[0]).incidents
            if i.kind == "divergence"] == ["divergence"]


def test_launches_appended_to_one_log_each_from_its_first_step_are_trainings(tmp_path):
    """FastSpeech2 appends each launch to its log.txt: "Step 100/600000, Total Loss: 29.7486, Mel Loss: ..." from
    100 again each time. Its step was counted on across the launches (the k-th at k x 328,500): each launch's
    first loss 'a spike, not recovered', critical, on a healthy run, and every step of the last off by millions."""
    lines = []
    for stop in (3400, 300, 20000):
        for step in range(100, stop + 1, 100):
            total = 0.5 + 29.0 / (1 + step / 300)
            lines.append(f"Step {step}/600000, Total Loss: {total:.4f}, Mel Loss: {total / 2:.4f}, Mel PostNet Loss: "
                         f"{total / 3:.4f}, Pitch Loss: 0.1377, Energy Loss: 0.2311, Duration Loss: 0.0695")
    runs = discover_runs(_write(tmp_path / "log.txt", lines))
    assert [(run.steps.index[0], run.steps.index[-1]) for run in runs] == [(100, 3400), (100, 300), (100, 20000)]
    assert not [i for run in runs for i in analyze_run(run).incidents if i.severity.value == "critical"]
    assert "3 trainings whose step starts again" in runs[0].warnings[0]
    # a count inside each epoch, printed as the step, starts again from its largest value and goes on: one run
    lines = [f"iter: {it}, loss: {2.0 - (epoch * 300 + it) / 2000:.4f}" for epoch in range(3) for it in range(0, 301, 50)]
    (run,) = discover_runs(_write(tmp_path / "epochs.log", lines))
    assert len(run.steps) == 21


def test_a_divergence_over_the_logs_first_value_alone_is_not_known(tmp_path):
    """A wav2vec 2.0 fine-tune's trainer_state.json: 0.269 over its first 25 steps, then 0.46-0.97 until step 600,
    then down to 0.2 while its WER improved throughout: 'diverged, came back', critical, against a best level
    that was the first value alone."""
    import json

    values = [0.269, 0.573, 0.458, 0.574, 0.438, 0.975, 0.493, 0.726, 0.671, 0.512, 0.663, 0.653, 0.556, 0.564, 0.511,
              0.479, 0.42, 0.438, 0.444, 0.399, 0.365, 0.351, 0.416, 0.366, 0.404, 0.45, 0.34, 0.371, 0.404, 0.407]
    values += [0.35 - k / 400 for k in range(50)]
    history = [{"epoch": 0.1 * k, "learning_rate": 1e-4 * (1 - k / 80), "loss": v, "step": 25 * (k + 1)}
               for k, v in enumerate(values)]
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 2000, "log_history": history}))
    (incident,) = [i for i in analyze_run(discover_runs(path)[0]).incidents if i.kind == "divergence"]
    assert incident.severity == "warning" and "first value alone" in incident.message


def test_a_word_inside_a_hyphenated_bar_label_is_the_labels(tmp_path):
    """ai-toolkit draws its bar under the job's name, "lokr-test-2:  10%|9 | 299/3000 [..., lr: 2.0e-04 loss:
    5.226e-01]": "test" in the name made every line an evaluation's, the log 'not a log format', a NaN unread."""
    lines = [f"lokr-test-2:  {k}%|9         | {30 * k}/3000 [10:44<1:37:05,  2.16s/it, lr: 2.0e-04 loss: "
             f"{float('nan') if k >= 8 else 0.5 - k / 100:.3e}]" for k in range(1, 11)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == list(range(30, 301, 30))
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 240)]
    # a line that opens on the word is still an evaluation's ("Test-set: Average loss")
    lines = [f"step {s} loss {2 - s / 100:.3f}" for s in range(1, 9)] + ["Test-set: Average loss: 9.5"]
    (run,) = discover_runs(_write(tmp_path / "mnist.log", lines))
    assert run.steps["loss"].max() < 2


def test_rsl_rl_learning_iteration_blocks(tmp_path):
    """rsl_rl's OnPolicyRunner (legged_gym, Isaac Lab) prints a block each iteration, "Learning iteration N/M" then
    f"{'Mean value_function loss:':>{pad}} {v:.4f}" lines: 'not a log format', its value loss at inf unread."""
    width, pad = 80, 35
    lines = []
    for it in range(40):
        value = float("inf") if it >= 30 else 0.02 * 1.15 ** it  # the value loss grows with the returns
        lines += ["#" * width, f" \033[1m Learning iteration {it}/1500 \033[0m ".center(width, " "), "",
                  f"{'Computation:':>{pad}} 14963 steps/s (collection: 6.407s, learning 0.163s)",
                  f"{'Mean value_function loss:':>{pad}} {value:.4f}", f"{'Mean surrogate loss:':>{pad}} {-0.003:.4f}",
                  f"{'Mean entropy loss:':>{pad}} {17.0273:.4f}", f"{'Mean reward:':>{pad}} {0.5 * it:.2f}",
                  f"{'Mean episode length:':>{pad}} {20.0 + it:.2f}", "-" * width,
                  f"{'Iteration time:':>{pad}} 6.57s", f"{'Total time:':>{pad}} 263.83s", f"{'ETA:':>{pad}} 8922.3s", ""]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "rsl_rl" and run.steps.index.tolist() == list(range(40))
    assert run.steps["loss"].iloc[1] == pytest.approx(0.023) and "episode_reward_mean" in run.steps.columns
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 30)]


def test_pose_estimation_stage_losses_on_lines_of_their_own(tmp_path):
    """lightweight-human-pose-estimation prints 'Iter: N', then 'stageK_pafs_loss:     X' and 'stageK_heatmaps_loss: Y'
    on lines of their own: 'its lines log Iter but no loss', a run NaN from its first report unread."""
    lines = ["Loading model...", ""]
    for it in range(100, 3100, 100):
        nan = it >= 2500
        lines.append(f"Iter: {it}")
        for stage in (1, 2):
            pafs, heat = (float("nan"),) * 2 if nan else (0.002 + 0.01 / it * stage, 0.001 + 0.005 / it)
            lines += [f"stage{stage}_pafs_loss:     {pafs}", f"stage{stage}_heatmaps_loss: {heat}"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index[[0, -1]].tolist() == [100, 3000]
    assert run.steps["loss"].iloc[0] == pytest.approx(0.002 + 0.0001 + 0.001 + 0.00005 + 0.002 + 0.0002 + 0.001 + 0.00005)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents if i.severity.value == "critical"] == [("nonfinite", 2500)]


def test_chinese_ners_iteration_and_step_inside_it(tmp_path):
    """zjy-ucas/ChineseNER and its forks log "iteration:{} step:{}/{}, NER loss:{:>9.6f}" (the iteration the epoch,
    the step a count inside it): the iteration was read as the step, 1,044 losses as 101 steps 'printed 10 times
    (every rank?)', and a fork's line without the step's colon was 'not a log format'."""
    lines = ["2018-08-23 15:43:00,229 - log/train.log - INFO - num_tags       :\t13"]
    for iteration in (1, 2, 3):
        for step in range(100, 1001, 100):
            loss = float("nan") if (iteration, step) == (3, 500) else 30.0 / (iteration * 10 + step / 100)
            lines.append(f"2018-08-23 15:43:20,494 - log/train.log - INFO - iteration:{iteration} step:{step}/1044, "
                         f"NER loss:{loss:>9.6f}")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert len(run.steps) == 30 and run.steps.index[[0, 10]].tolist() == [100, 1144]
    assert [(i.kind, i.step) for i in analyze_run(run).incidents if i.severity.value == "critical"] == [("nonfinite", 2588)]
    fork = [f"2019-09-14 11:46:55,645 - log\\train.log - INFO - iteration:{e} step{s}/174,NER loss:{9 - e - s / 100:9.6f}"
            for e in (1, 2) for s in (26, 76, 126)]
    (run,) = discover_runs(_write(tmp_path / "fork.log", fork))
    assert run.steps.index.tolist() == [26, 76, 126, 200, 250, 300]


def test_hugging_face_flax_example_scripts(tmp_path):
    """transformers' run_clm_flax writes f"Step... ({cur_step} | Loss: {loss}, Learning Rate: {lr})" and its evaluations
    "Step... (N | Eval Loss: X | Eval Perplexity: P)"; diffusers' Flax text-to-image f"Epoch... ({e}/{n} | Loss: {loss})":
    'not a log format', a NaN there unread."""
    lines = ["Epoch ... (1/3)"]
    for step in range(500, 10001, 500):
        loss = float("nan") if step >= 8000 else 4.0 - step / 5000
        lines.append(f"Step... ({step} | Loss: {loss}, Learning Rate: {3e-4 * (1 - step / 20000)})")
        if step % 2500 == 0:
            lines.append(f"Step... ({step} | Eval Loss: {3.9 - step / 6000} | Eval Perplexity: 40.1)")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["loss"].dropna().index[0] == 500 and run.steps["val_loss"].dropna().index.tolist() == [2500, 5000, 7500, 10000]
    assert [(i.kind, i.step) for i in analyze_run(run).incidents if i.severity.value == "critical"] == [("nonfinite", 8000)]
    lines = [f"Epoch... ({e}/116 | Loss: {0.18 + 0.01 * (e % 3)})" for e in range(39, 60)]
    (run,) = discover_runs(_write(tmp_path / "flax_sd.log", lines))
    assert run.steps.index[[0, -1]].tolist() == [39, 59] and analyze_run(run).step_unit == "epoch"


def test_a_constant_negative_loss_names_targets_out_of_range_too(tmp_path):
    """A single-process Keras run fit binary_crossentropy to MNIST's labels 0-9: 'loss: -55.0284' at every epoch,
    told 'a placeholder, not a measurement (a rank that did not compute it)': a distributed bug hunted in vain."""
    lines = []
    for epoch in range(1, 13):
        lines += [f"Epoch {epoch}/12", "60000/60000 [==============================] - 3s 50us/step - loss: -55.0284 - "
                  "acc: 0.1124 - val_loss: -55.2166 - val_acc: 0.1135"]
    (incident,) = [i for i in analyze_run(discover_runs(_write(tmp_path / "train.log", lines))[0]).incidents
                   if i.kind == "loss_stuck"]
    assert "targets outside its range" in incident.message


def test_overfittings_training_loss_is_a_value_the_log_shows(tmp_path):
    """A Keras paste: 'val_loss rose ... while the training loss fell from 0.8579 to 0.5807': 0.8579 is nowhere in
    the log (the mean of epochs 1 and 2, 0.9452 and 0.7707): the median of an even count is its lower middle value."""
    losses = (0.9452, 0.7707, 0.5807, 0.4501, 0.3302, 0.2285, 0.1901, 0.1502)
    vals = (0.90, 0.80, 0.86, 0.93, 0.97, 1.02, 1.08, 1.15)
    lines = []
    for epoch, (loss, val) in enumerate(zip(losses, vals), 1):
        lines += [f"Epoch {epoch}/8", f" - 0s - loss: {loss:.4f} - acc: 0.61 - val_loss: {val:.4f} - val_acc: 0.58"]
    (incident,) = [i for i in analyze_run(discover_runs(_write(tmp_path / "train.log", lines))[0]).incidents
                   if i.kind == "overfitting"]
    shown = re.search(r"fell from ([\d.]+) to ([\d.]+)", incident.message).groups()
    assert all(float(v) in losses for v in shown), incident.message


def test_a_fall_the_loss_climbs_back_from_is_no_collapse(tmp_path):
    """A medical NER model's summed CRF loss of one batch, printed every 100 iterations, swings from thousands to
    hundredths: 'loss collapsed from 2304 to 0.0011: the model sees its targets (a label leak ...)' four times on a
    healthy run whose dev loss and F1 held. A fall the next rows climb back from is one easy batch's."""
    rng = np.random.default_rng(4)
    values = np.exp(rng.normal(3.5, 1.5, 120))
    values[60] = 2304.0
    values[61] = 0.0011
    lines = [f"2020-05-23 20:11:11,028 - train.log - INFO - Iter: {100 * k} | Train Loss: {v:.4f} | Dev Loss: 0.7500 | "
             "Dev F1-macro: 0.9700" for k, v in enumerate(values)]
    report = analyze_run(discover_runs(_write(tmp_path / "train.log", lines))[0])
    assert not [i for i in report.incidents if i.kind == "loss_collapse"]
    # a fall that stays near 0 is still one
    values[62:] = 1e-5
    lines = [f"Iter: {100 * k} | Train Loss: {v:.6f}" for k, v in enumerate(values)]
    report = analyze_run(discover_runs(_write(tmp_path / "leak.log", lines))[0])
    assert [i.step for i in report.incidents if i.kind == "loss_collapse"] == [6000]


def test_soundstream_lines_and_a_gans_size_running_away(tmp_path):
    """audiolm-pytorch's SoundStreamTrainer prints f"{steps}: soundstream total loss: {x:.3f}, soundstream recon loss:
    {r:.3f} | discr (scale 1) loss: {d:.3f} | ...": 'not a log format'. Read, a run that went from 4.5 to -6.5e5 ...
    1.5e7 (its size by orders of magnitude, its sign either way) was still a GAN's 'healthy' run."""
    rng = np.random.default_rng(2)
    values = list(4.5 + rng.normal(0, 0.3, 30)) + [-6.5e5, -1.5e6, -2.4e6, 2.8e6, 1.5e7, 1.2e7, 2.4e6]
    lines = ["25000: saving model to results"]
    lines += [f"{25001 + k}: soundstream total loss: {v:.3f}, soundstream recon loss: 0.001 | discr (scale 1) loss: "
              f"{2.2 + k / 100:.3f} | discr (scale 0.5) loss: 1.894 | discr (scale 0.25) loss: 1.829" for k, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "soundstream" and run.steps["loss_d"].iloc[0] == pytest.approx(2.2)
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.severity, incident.step) == ("divergence", "critical", 25031)
    # a GAN's loss that wanders within its own size is no runaway
    lines = lines[:31]
    assert analyze_run(discover_runs(_write(tmp_path / "calm.log", lines))[0]).incidents == []


def test_yolov4_pytorchs_running_mean_lines(tmp_path):
    """argusswift's YOLOv4-pytorch logs "  === Epoch:[{:3}/{}],step:[{:3}/{}],img_size:[{}],total_loss:{:.4f}|..." every
    10 batches, the loss mloss, its mean since the epoch began. Read by the general reader, the epoch's [e/E] was a
    count too (2,400 lines as 2,490 steps); read as printed, each epoch's first mean of a few batches was 'a spike'."""
    rng = np.random.default_rng(6)
    lines = ["train img size is 416"]
    for epoch in range(12):
        total, count = 0.0, 0
        for i in range(198):
            batch = 3.0 / (1 + epoch) + rng.normal(0, 0.4)
            total, count = total + batch, count + 1
            if i % 10 == 0:
                mloss = total / count
                lines.append(f"[2021-01-08 16:24:27,151]-[train.py line:229]:  === Epoch:[{epoch:3}/120],step:[{i:3}/197],"
                             f"img_size:[416],total_loss:{mloss:.4f}|loss_ciou:1.4793|loss_conf:{mloss - 2:.4f}|loss_cls:1.0815|"
                             f"lr:{0.0001:.4f}")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "yolov4_pytorch" and len(run.steps) == 12 * 20
    assert any("mean since the epoch began" in w for w in run.warnings)
    assert not [i for i in analyze_run(run).incidents if i.severity.value != "info"]


def test_keras_fits_saved_one_after_another_are_runs_of_their_own(tmp_path):
    """A notebook's Keras fits saved into one training log, each from "Epoch 1/N": lined up by epoch, the later fit
    overwrote the earlier one's epochs, and the seam was 'a loss spike not recovered', critical."""
    lines = []
    for fit, (epochs, start) in enumerate(((19, 2.0), (14, 1.2))):
        for epoch in range(1, epochs + 1):
            loss = start / epoch ** 0.8
            lines += [f"Epoch {epoch}/{epochs}", f" - 4s - loss: {loss:.4f} - acc: 0.{50 + epoch} - val_loss: {loss * 1.1:.4f}"]
    runs = discover_runs(_write(tmp_path / "training_log.txt", lines))
    assert [(run.steps.index[0], run.steps.index[-1]) for run in runs] == [(1, 19), (1, 14)]
    assert not [i for run in runs for i in analyze_run(run).incidents if i.severity.value != "info"]
    # a fit resumed with initial_epoch goes on from its epoch: one run
    resumed = lines[:20] + [line.replace("Epoch 1/14", "Epoch 11/24") for line in lines[38:40]]
    assert len(discover_runs(_write(tmp_path / "resumed.txt", resumed))) == 1


def test_a_paste_of_one_step_line_says_so(tmp_path):
    """A LoRA thread's paste of the run's last bar alone ("steps: 100%|...| 3720/3720 [...,  avr_loss=2.77]", is that
    normal?) was 'not a log format sentinel reads', though the same line twice is read: one step line is the cause."""
    line = "steps: 100%|██████████| 3720/3720 [5:40:44<00:00,  5.50s/it, avr_loss=2.77]saving checkpoint: out/lora.safetensors"
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "train.log", [line]))])
    assert result.exit_code == 1 and "one step line" in result.output and "not a log format" not in result.output
    assert CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "two.log", [line, line.replace("3720/", "3719/")]))]
                              ).exit_code == 0


@pytest.mark.parametrize("line, step, shown", [
    ("100000 | loss nan | lr 0.000000e+00 | 2006.12ms | mfu 1.68%", 100000, "nan"),  # llama2.c's last line
    ("170 / 178 : loss = nan;1076660156255;", 170, "nan"),
    ("100000 | loss inf | lr 0.000000e+00 | 2006.12ms | mfu 1.68%", 100000, "+inf"),  # named as the rules name it
])
def test_a_paste_of_one_step_line_whose_loss_is_nan_says_so(tmp_path, line, step, shown):
    """A thread's paste of the one line where the loss was NaN ('one step line ...: sentinel judges a series of
    steps') left out the paste's news: the refusal says the loss is non-finite there."""
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "train.log", [line]))])
    assert result.exit_code == 1 and "one step line" in result.output
    assert f"whose loss is {shown} at step {step}" in " ".join(result.output.split())


def test_a_paste_of_one_step_line_whose_grad_norm_is_inf_says_so(tmp_path):
    """SOLOFusion's one pasted mmdet line, its grad_norm inf: 'one step line ...', the inf never named."""
    line = ("2023-08-05 20:33:00,438 - mmdet - INFO - Iter [50/5274] lr: 2.500e-05, eta: 1:52:54, time: 1.297, "
            "loss_depth: 17.8610, loss: 21809.0703, grad_norm: inf")
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "train.log", [line]))])
    assert result.exit_code == 1 and "whose grad norm is +inf at step 50" in " ".join(result.output.split())


def test_a_paste_of_one_finite_step_line_then_nan_lines_says_so(tmp_path):
    """ST-GCN's log: one "Iter 0 Done. | loss: 1.4058 | lr: 0.010000" line, then each epoch's "mean_loss: nan":
    refused as one step line, the NaN of every epoch unsaid."""
    lines = ["[02.06.24|21:04:38] Training epoch: 0",
             "[02.06.24|21:13:26] \tIter 0 Done. | loss: 1.4058 | lr: 0.010000"]
    for epoch in range(1, 5):
        lines += ["[02.06.24|21:13:31] \tmean_loss: nan", "[02.06.24|21:13:31] Done.",
                  f"[02.06.24|21:13:31] Training epoch: {epoch}"]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "log.txt", lines))])
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and "one step line" in said
    assert "4 other lines print a non-finite loss (the first: '[02.06.24|21:13:31] mean_loss: nan')" in said


def test_a_log_no_reader_takes_whose_lines_print_a_nan_loss_says_so(tmp_path):
    """A federated script's rounds, each a block under '>> ROUND 3' with 'Loss nan' on its lines: 'not a log format
    sentinel reads', the NaN in every round unsaid."""
    lines = []
    for r in range(3):
        lines += [f">> ROUND {r}", "> pre-client selection 10/100", "selected clients: [0, 16, 32, 42]",
                  "> 10 Clients Training: Loss nan Acc 0.2345", "> ALL Clients Testing: Loss nan Acc 0.0715", ""]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "fl.log", lines))])
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and "6 of its lines print a non-finite loss" in said and "not a log format" not in said


def test_a_log_of_no_loss_names_its_non_finite_values(tmp_path):
    """FermiNet logs "Step 03455: nan E_h, variance=nan E_h^2, pmove=0.51" (its energy unnamed): refused as 'its lines
    log pmove, variance but no loss', with no word that they went NaN."""
    lines = [f"INFO:absl:Step {s:05d}: {'nan' if s >= 3455 else -14.91} E_h, variance={'nan' if s >= 3455 else 0.06} E_h^2, "
             "pmove=0.52" for s in range(3447, 3460)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "train.log", lines))])
    assert result.exit_code == 1 and "variance prints 5 non-finite value(s)" in result.output


def test_a_key_of_its_own_printed_non_finite_is_named_for_loss_col(tmp_path):
    """RandLA-Net prints "Step 00000050 L_out=  nan Acc=0.00 --- 1408.79 ms/batch": refused as 'its lines log Acc, IOU,
    accuracy but no loss' (a key whose values were NaN was no key), the NaN unsaid; --loss-col L_out reads it."""
    lines = ["****EPOCH 0****"] + [f"Step {s:08d} L_out=  nan Acc=0.00 --- 1408.79 ms/batch" for s in range(50, 900, 50)]
    path = _write(tmp_path / "log_train.txt", lines)
    result = CliRunner().invoke(main, ["analyze", str(path)])
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and "L_out prints 17 non-finite value(s)" in said and "--loss-col L_out" in said
    report = analyze_run(discover_runs(path, LoadOptions(loss_col="L_out"))[0])
    assert [(i.kind, i.step) for i in report.incidents] == [("nonfinite", 50)]

def test_a_librarys_lines_without_a_loss_name_the_scripts_loss_keys(tmp_path):
    """DeepSpeed-Chat's PPO stage prints DeepSpeed's "step=10, skipped=0, lr=[...]" beside its own "epoch: 0|step: 0|
    ppo_ep: 1|act_loss: 0.21|cri_loss: 0.12|unsuper_loss: 0.0": "no loss", the keys unnamed; --loss-col act_loss
    reads all 477 steps."""
    lines, rng = [], np.random.default_rng(0)
    for step in range(60):
        lines += [f"epoch: 0|step: {step}|ppo_ep: 1|act_loss: {rng.normal(0, 0.3):.4f}|cri_loss: "
                  f"{0.12 + step / 900:.4f}|unsuper_loss: 0.0", f"average reward score: {step / 100 - 0.3:.4f}",
                  "-" * 85, "|E2E latency=3.73s |Gather latency=0.00s (0.00%) |Generate time=2.78s (74.61%) |"]
        if step % 10 == 9:
            lines.append(f"[2023-04-18 01:46:52,554] [INFO] [logging.py:96:log_dist] [Rank 0] step={step + 1}, "
                         "skipped=0, lr=[9.65e-06, 9.65e-06], mom=[(0.9, 0.95), (0.9, 0.95)]")
    (run,) = discover_runs(_write(tmp_path / "step3.log", lines))
    assert any(w.endswith("; the lines name act_loss: pass --loss-col act_loss to judge it as the loss")
               for w in run.warnings), run.warnings
    (run,) = discover_runs(tmp_path / "step3.log", LoadOptions(loss_col="act_loss"))
    assert run.steps.index.tolist() == list(range(60))

def test_step_lines_all_at_one_step_say_so(tmp_path):
    """A fairseq paste from several GPUs whose every bar line shows num_updates=0 (no update was ever made: the
    asker's real problem) and a Demucs paste of four processes at batch 1152 were 'not a log format'."""
    lines = [f"| epoch 001:   0%| | {38 + k % 3}/11265 [01:55<9:15:41,  2.97s/it, loss=0.000, ppl=1.00, wps=0, ups=0.0, "
             "wpb=0, bsz=0, num_updates=0, lr=1e-07," for k in range(10)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "train.log", lines))])
    assert result.exit_code == 1 and "its 10 step lines all read as one step (0)" in result.output


@pytest.mark.parametrize("blank", ["\n", ""])
def test_keras_epoch_lines_pasted_without_their_time(tmp_path, blank):
    """A question's paste of Keras 2's fit(verbose=2) with the time cut along with the bar: 'Epoch 3/5', a blank line,
    'loss: 0.5807 - acc: 0.7657 - val_loss: 0.9144 - val_acc: 0.6345' ('not a log format'). Each epoch read once,
    its val_loss the evaluation's, so the overfitting the asker asked about is told."""
    losses = (0.9452, 0.7707, 0.5807, 0.3736, 0.2285, 0.1701)
    vals = (0.8440, 0.8234, 0.9144, 1.1982, 1.5770, 1.7012)
    lines = ["Train on 212135 samples, validate on 69472 samples", ""]
    for epoch, (loss, val) in enumerate(zip(losses, vals), 1):
        lines += [f"Epoch {epoch}/6" + blank, f"loss: {loss:.4f} - acc: 0.6711 - val_loss: {val:.4f} - val_acc: 0.6433"]
    (run,) = discover_runs(_write(tmp_path / "keras.txt", lines))
    assert run.steps.index.tolist() == [1, 2, 3, 4, 5, 6] and run.meta["step_unit"] == "epoch"
    assert run.steps["loss"].tolist() == list(losses)
    assert "overfitting" in [i.kind for i in analyze_run(run).incidents]


def test_keras_callback_lines_between_an_epochs_header_and_its_line(tmp_path):
    """Keras 2's callbacks print before the epoch's own line: ModelCheckpoint(verbose=1)'s 'Epoch 00003: val_loss
    improved ...' under every header (the log refused: 'no keras_epochs step lines found'), EarlyStopping's 'Epoch
    00008: early stopping' under the last (that epoch's line dropped: a run's last epoch lost)."""
    losses = (0.91, 0.51, 0.42, 0.37, 0.33, 0.30)
    callbacks = ["Epoch 0000{e}: val_loss improved from 0.6 to 0.5, saving model to best.h5"] * 4 + [
        "Epoch 0000{e}: ReduceLROnPlateau reducing learning rate to 0.0001.\nEpoch 0000{e}: val_loss did not improve",
        "Epoch 0000{e}: early stopping"]
    lines = ["Train on 60000 samples, validate on 10000 samples"]
    for epoch, (loss, said) in enumerate(zip(losses, callbacks), 1):
        lines += [f"Epoch {epoch}/10", said.format(e=epoch), f" - 3s - loss: {loss:.4f} - val_loss: {loss + 0.1:.4f}"]
    (run,) = discover_runs(_write(tmp_path / "keras.txt", lines))
    assert run.source == "keras_epochs" and run.meta["step_unit"] == "epoch"
    assert run.steps.index.tolist() == [1, 2, 3, 4, 5, 6] and run.steps["loss"].tolist() == list(losses)

def test_loss_lines_with_no_epoch_header_are_not_keras_epochs(tmp_path):
    """'loss: 0.28' lines under no 'Epoch k/K' header stay another reader's: the timeless Keras line needs the
    ' - key: ' that follows Keras' loss."""
    lines = [f"loss: {1 / (i + 1):.9f}" for i in range(30)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source != "keras_epochs" and len(run.steps.index) == 30


@pytest.mark.parametrize("line, unit", [
    ("Cost after iteration {i}: {v:f}", "step"),  # the course notebooks' print("Cost after iteration %i: %f" % (i, cost))
    ("Cost after epoch {i}: {v:f}", "epoch"),
    ("Loss at step {i}: {v:.4f}", "step"),
    ("Training loss after iteration {i} is {v:.4f}", "step"),
    ("After {i} training step(s), loss on training batch is {v:g}.", "step"),  # TensorFlow 1's textbook MNIST
])
def test_a_loss_or_cost_named_before_its_step(tmp_path, line, unit):
    """'Cost after iteration 100: 0.693147' was 'not a log format' (and --loss-col cost did not help), so was 'After 100
    training step(s), loss on training batch is 0.69.': each line is the cost (the loss) at that iteration or epoch; the
    cost that went NaN is told."""
    values = [0.69 * math.exp(-i / 800) + 0.05 for i in range(0, 3000, 100)]
    values[20:] = [math.nan] * 10
    lines = [line.format(i=i, v=v) for i, v in zip(range(0, 3000, 100), values)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == list(range(0, 3000, 100))
    assert run.steps["loss"].iloc[:20].tolist() == pytest.approx(values[:20], abs=1e-4)
    assert run.meta.get("step_unit", "step") == unit
    report = analyze_run(run)
    assert report.verdict == "unhealthy" and any(i.kind == "nonfinite" and i.step == 2000 for i in report.incidents)


def test_a_loss_named_before_its_epoch_and_batch(tmp_path):
    """hualin95's DeepLabV3+ (and its forks): logger.info("The train loss of epoch{}-batch-{}:{}"). 'epoch58-batch-50:0.11'
    was read as epoch 5 with loss 8 (a confident 'healthy' on made-up numbers); with one-digit epochs the file was
    refused, its keys 'epoch1-batch-0, epoch1-batch-100'. The validation's average loss between is not read."""
    lines, values = [], []
    for epoch in range(0, 12):
        for batch in range(0, 400, 50):
            loss = 0.5 * math.exp(-(epoch * 400 + batch) / 2000) + 0.05
            loss = math.nan if (epoch, batch) == (10, 200) else loss
            values.append(loss)
            lines.append(f"2018-12-13 16:57:46,880 - root - INFO - The train loss of epoch{epoch}-batch-{batch}:{loss}")
        lines.append(f"2018-12-13 17:26:53,338 - root - INFO - The average loss of val loss:{0.9 + epoch / 100}")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert len(run.steps.index) == 96 and run.steps["loss"].max() < 0.56
    assert run.steps["loss"].iloc[:8].tolist() == pytest.approx(values[:8])
    report = analyze_run(run)
    assert [i.kind for i in report.incidents if i.severity.value != "info"] == ["nonfinite"]


def test_an_evaluation_loss_named_before_its_step_is_no_training_loss(tmp_path):
    """'Validation loss at step 100: 2.1' beside the training's 'Loss at step 100: 2.0' is the evaluation's."""
    lines = []
    for i in range(0, 3000, 100):
        lines += [f"Loss at step {i}: {2 - i / 3000:.4f}", f"Validation loss at step {i}: {9:.4f}"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["loss"].max() < 2.01


def test_a_loss_named_before_a_step_that_counts_inside_each_epoch_keeps_every_epoch(tmp_path):
    """A TF2 PointNet port's 'Training loss at step 300: 0.93' under each 'Epoch: 31' header counts inside
    the epoch: three epochs of 0-300 were read as four steps, each epoch's records replacing the last's
    with no word, the final loss the last epoch's at step 300 among them. The count goes on across epochs."""
    lines, value = [], 1.7
    for epoch in range(1, 4):
        lines.append(f"Epoch: {epoch}")
        for step in range(0, 400, 100):
            value -= 0.05
            lines.append(f"Training loss at step {step}: {value:.4f}, accuracy: 0.05")
        lines.append(f"Training accuracy at epoch {epoch}: 0.06")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert len(run.steps) == 12 and run.steps["loss"].is_monotonic_decreasing
    assert run.steps["loss"].iloc[-1] == pytest.approx(1.1)


@pytest.mark.parametrize("nan_at", [None, 120])
def test_a_dvclive_step_the_loss_was_not_logged_at_is_no_nan_loss(tmp_path, nan_at):
    """DVCLive's Hugging Face callback logs the loss at each logging step and the training's summary (train/loss,
    train/runtime, epoch) one step past the loss's last: the loss's missing row there was 'loss non-finite (nan) at
    step 150 ... never finite again', critical, on a smooth run. A NaN the loss file holds is one all the same."""
    root = tmp_path / "densegpt" / "dvclive"
    metrics_dir = root / "plots" / "metrics"
    (metrics_dir / "train").mkdir(parents=True)
    losses = {s: 6.2 * math.exp(-s / 40) + 2.3 for s in range(150)}
    if nan_at is not None:
        losses.update({s: math.nan for s in range(nan_at, 150)})
    tables = {"loss": losses, "learning_rate": {s: 5e-5 * (1 - s / 150) for s in range(150)},
              "epoch": {**{s: round(s / 150, 2) for s in range(150)}, 150: 1.0},
              "train/loss": {150: 3.09}, "train/runtime": {150: 1694.1}}
    for key, rows in tables.items():
        (metrics_dir / f"{key}.tsv").write_text("step\t" + key.rsplit("/", 1)[-1] + "\n"
                                                + "".join(f"{s}\t{v}\n" for s, v in rows.items()))
    (run,) = discover_runs(root)
    report = analyze_run(run)
    nonfinite = [i.step for i in report.incidents if i.kind == "nonfinite"]
    if nan_at is None:
        assert report.verdict == "healthy" and nonfinite == [], [i.message for i in report.incidents]
    else:
        assert report.verdict == "unhealthy" and nonfinite == [nan_at]


# A GPT-2 fine-tune's CSVLogger metrics.csv (TurnGPT): one batch's loss every 50 steps, one epoch.
_TURNGPT_LOSS = (2.37, 2.23, 2.2, 2.96, 2.17, 2.68, 2.18, 2.5, 2.44, 3.13, 2.28, 2.39, 2.89, 2.94, 2.35, 1.86, 2.17,
                 2.15, 1.83, 2.03, 1.75, 2.37, 1.88, 2.18, 2.97, 2.07, 2.27, 2.24, 1.89, 2.28, 1.82, 1.95, 2.7, 1.54,
                 1.24, 2.0, 1.89, 2.33, 1.84, 2.01, 2.53, 2.4, 3.15, 2.87, 2.64, 3.02, 2.41, 2.02, 2.77, 2.24)


def test_a_short_noisy_logs_level_up_at_its_end_is_no_divergence(tmp_path):
    """50 rows of a single batch's loss swinging 1.2-3.1, its last ten x1.1 over its best level: 'loss diverged ...
    still diverged at the last step', critical, on a healthy fine-tune. Within the noise of so short a log it is told
    as information; a climb beyond that noise stays critical."""
    path = tmp_path / "lightning_logs" / "version_0" / "metrics.csv"
    path.parent.mkdir(parents=True)
    path.write_text("epoch,loss,step\n" + "".join(f"0,{v},{49 + 50 * k}\n" for k, v in enumerate(_TURNGPT_LOSS)))
    report = analyze_run(discover_runs(path)[0])
    (level,) = [i for i in report.incidents if i.kind == "divergence"]
    assert level.severity == "info" and report.verdict == "healthy" and "within the noise" in level.message
    climbed = list(_TURNGPT_LOSS[:40]) + [v * 2.5 for v in _TURNGPT_LOSS[40:]]
    path.write_text("epoch,loss,step\n" + "".join(f"0,{v},{49 + 50 * k}\n" for k, v in enumerate(climbed)))
    report = analyze_run(discover_runs(path)[0])
    assert report.verdict == "unhealthy" and any(i.severity == "critical" for i in report.incidents)


@pytest.mark.parametrize("first, verdict", [(64.0, "no loss"), (32.0, "unhealthy")])
def test_a_scalers_first_overflow_logs_the_scale_it_halved_to(tmp_path, first, verdict):
    """fairseq's start-up search from its initial scale of 128, pasted as its overflow lines (wav2vec 2.0: 'NOTE:
    overflow detected, setting loss scale to: 64.0' ... 4.0 at the start of epoch 1; its maintainer: 'this is normal'):
    'loss scale fell from 64 at step 1 to 4 ... repeated overflows', a warning. The first line's 64 is the scale an
    overflow halved 128 to; a first line of 32 came from 64, no start-up scale."""
    lines = ["2021-01-26 03:01:31 | INFO | fairseq.trainer | begin training epoch 1"]
    scale = first
    for minute in range(5):
        lines.append(f"2021-01-26 03:{2 + 10 * minute:02d}:32 | INFO | fairseq.trainer | NOTE: overflow detected, "
                     f"setting loss scale to: {scale}")
        scale /= 2
    report = analyze_run(discover_runs(_write(tmp_path / "train.log", lines))[0])
    assert report.verdict == verdict, [i.message for i in report.incidents]


def test_a_fairseq_paste_whose_scale_is_under_one_from_its_first_line_is_told(tmp_path):
    """A paste from late in a fairseq run that then stopped at 'Minimum loss scale reached': its summary lines print
    the scale rounded, 'loss_scale 0', then two overflows set it to 0.00049 and 0.00024 (its floor is 1e-4):
    'healthy'. A scale that far under 1 from the paste's first value fell before it: a warning."""
    lines = ["2020-03-23 11:38:13 | INFO | train | epoch 002 | loss 9.803 | nll_loss 8.89 | ppl 474.37 | wps 31194.9 | "
             "ups 0.07 | wpb 430468 | bsz 14485.4 | num_updates 695 | lr 0.00017375 | gnorm 55.005 | loss_scale 0 | "
             "train_wall 4512 | wall 9786",
             "2020-03-23 11:39:44 | INFO | train_inner | epoch 003:      5 / 356 loss=9.44, nll_loss=8.44, ppl=347.28, "
             "wps=30690.8, ups=0.07, wpb=427295, bsz=14390.4, num_updates=700, lr=0.000175, gnorm=156.036, "
             "loss_scale=0, train_wall=1281, wall=9877",
             "2020-03-23 11:41:18 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 0.00048828125",
             "2020-03-23 11:48:04 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 0.000244140625"]
    report = analyze_run(discover_runs(_write(tmp_path / "train.log", lines))[0])
    (fell,) = [i for i in report.incidents if i.kind == "loss_scale_collapse"]
    assert fell.severity == "warning" and "under 1 from the first step logged" in fell.message


def test_apex_overflow_lines_between_yolacts_own_are_read(tmp_path):
    """A YOLACT fork trained with apex: its 'Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to
    1.52587890625e-05' lines between YOLACT's own were not read ('healthy', byte for byte the same without them). The
    scale, under 1 from the paste's first overflow, had collapsed before it."""
    lines = []
    for k, step in enumerate(range(1440, 1540, 10)):
        if step in (1520, 1540):
            lines.append(_APEX.format(1.52587890625e-05 if step == 1520 else 7.62939453125e-06))
        lines.append(f"[  1]    {step} || B: 5.495 | C: 3.668 | M: {6.9 + 0.01 * k:.3f} | S: 1.564 | "
                     f"T: {17.6 - 0.05 * k:.3f} || ETA: 197 days, 23:50:39 || timer: 0.298")
    lines.append(_APEX.format(7.62939453125e-06))
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "yolact" and run.steps["loss_scale"].dropna().tolist()[0] == 1.52587890625e-05
    (collapse,) = [i for i in analyze_run(run).incidents if i.kind == "loss_scale_collapse"]
    assert collapse.severity == "critical" and "from the first step logged" in collapse.message


@pytest.mark.parametrize("last_norms, verdict", [((3.77, 14.4), "unhealthy"), ((0.28, 0.27), "healthy")])
def test_a_grad_norm_explosion_still_up_at_the_end_is_not_got_past(tmp_path, last_norms, verdict):
    """A fine-tune's Trainer dicts whose grad norm jumped from 0.27 to 17-23 and was still 14 at the last line (its
    loss rising from 0.48 to 0.8-1.0, the asker's problem): 'grad_norm_explosion ... no loss spike followed', marked
    got past, the run 'recovered'. Still up at the end, it is not; one back down is information."""
    norms = [0.24, 0.27, 1.36, 1.28, 17.2, 7.1, 21.8, 23.0, *last_norms]
    losses = [1.3587, 0.4827, 0.5813, 0.7004, 0.6607, 1.0354, 0.6606, 0.6845, 0.8643, 0.8247]
    lines = [f"{{'loss': {loss}, 'grad_norm': {norm}, 'learning_rate': 0.0005, 'epoch': {0.01 * k:.2f}}}"
             for k, (loss, norm) in enumerate(zip(losses, norms))]
    report = analyze_run(discover_runs(_write(tmp_path / "train.log", lines))[0])
    assert report.verdict == verdict, [i.message for i in report.incidents]


def test_triplet_reids_min_avg_max_line_reads_its_mean(tmp_path):
    """triplet-reid's log.info('iter:{:6d}, loss min|avg|max: {:.3f}|{:.3f}|{:6.3f}, batch-p@{}: {:.2%}, ETA: ...'):
    'its lines log ETA, iter, max but no loss (an environment's returns ...)'. The batch's mean is the step's loss."""
    lines = []
    for it in range(1, 61):
        avg = math.nan if it >= 50 else 1.0 - it / 200
        lines.append(f"2020-02-25 16:09:20,295 [INFO] train: iter: {it:5d}, loss min|avg|max: {avg * 0.7:.3f}|{avg:.3f}|"
                     f"{avg * 3:6.3f}, batch-p@3: 16.15%, ETA: 2:26:17 (0.35s/it)")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "triplet_reid" and run.steps["loss"].iloc[:3].tolist() == [0.995, 0.99, 0.985]
    report = analyze_run(run)
    assert report.verdict == "unhealthy" and [i.step for i in report.incidents if i.kind == "nonfinite"] == [50]


@pytest.mark.parametrize("every", [3, 50])
def test_a_grad_norm_that_grows_while_the_loss_falls_is_no_explosion(tmp_path, every):
    """A D-FINE detector's MMEngine scalars.json: its pre-clip grad norm (clip_grad max_norm 0.1) climbs from
    13 to 134 over 60 logged iterations while the loss falls from 35 to 25 ("grad_norm_explosion ... still up
    at the last logged step", the run unhealthy); logged every 50 iterations the same growth is x4 in one row,
    the loss 29 -> 10 after it. A gradual climb, or one the loss falls on through, is information; a jump
    the loss rises after stays a warning."""
    rows = []
    for it in range(1, 651, every):
        norm = 13.0 if it < 140 else min(13.0 * 1.045 ** (it - 140), 135.0)
        loss = 36.0 * np.exp(-it / 400) + 2.0
        rows.append({"lr": 1e-05, "grad_norm": norm, "loss": loss, "iter": it, "step": it})
    path = tmp_path / "vis_data" / "scalars.json"
    path.parent.mkdir()
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    report = analyze_run(discover_runs(path)[0])
    (grad,) = [i for i in report.incidents if i.kind.startswith("grad_norm")]
    assert report.verdict == "healthy" and grad.severity.value == "info", grad.message
    assert ("rose gradually" in grad.message) == (every == 3) and ("went on falling" in grad.message) == (every == 50)
    # the same jump in one row, the loss rising after it: an explosion
    for row in rows:
        row["loss"] = 3.0 + (0.02 * row["iter"] if row["grad_norm"] > 100 else 0.0)
        row["grad_norm"] = 13.0 if row["grad_norm"] < 100 else 135.0
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    kinds = {(i.kind, i.severity.value) for i in analyze_run(discover_runs(path)[0]).incidents}
    assert ("grad_norm_explosion", "warning") in kinds, kinds


# pytorch-semseg's ICNet (train.py's print("Iter [%d/%d]  Loss: %.4f  Time/Image: %.4f")): one batch's loss
# every 50 iterations, its asker's mIoU stuck; the loss noisy and flat.
_ICNET_LOSS = (0.6206, 0.8367, 1.2830, 0.5665, 0.7296, 1.2682, 0.8238, 1.1979, 0.6620, 1.0504, 0.6693, 0.5275,
               0.8949, 1.2642, 0.7971, 0.9097, 1.1369)


def test_a_pasted_dozen_noisy_rows_level_up_is_no_divergence(tmp_path):
    """17 rows swinging 0.53-1.28, the smoothed level x1.44 over the first value (taken for the best): 'loss
    diverged ... still diverged at the last step', critical. Ten rows have a noise of their own: information.
    The same rows climbing x3 stay critical."""
    def lines(values):
        return [f"Iter [{199050 + 50 * k}/300000]  Loss: {v:.4f}  Time/Image: 0.0998" for k, v in enumerate(values)]
    report = analyze_run(discover_runs(_write(tmp_path / "icnet.log", lines(_ICNET_LOSS)))[0])
    (level,) = [i for i in report.incidents if i.kind == "divergence"]
    assert level.severity == "info" and report.verdict == "healthy" and "within the noise" in level.message
    climbed = list(_ICNET_LOSS[:8]) + [v * 3 for v in _ICNET_LOSS[8:]]
    report = analyze_run(discover_runs(_write(tmp_path / "climbed.log", lines(climbed)))[0])
    assert report.verdict == "unhealthy" and any(i.kind == "divergence" and i.severity == "critical"
                                                 for i in report.incidents)



@pytest.mark.parametrize("epochs_apart, collapse", [(50.0, False), (0.05, True)])
def test_a_fall_over_many_epochs_between_two_dicts_is_no_collapse(tmp_path, epochs_apart, collapse):
    """ChatGLM-Tuning #271: a LoRA on a few examples for 300 epochs, its Trainer dicts 50 epochs apart, numbered
    1, 2, 3 (they carry no step): 1.141, then 0.0003 - 'no optimizer step learns that much; the model sees its
    targets'. Fifty passes over the data between two rows learn it; a fall within one logging window of one
    epoch is still a collapse."""
    losses = [1.141, 0.0003, 0.0001, 0.0001, 0.0001, 0.0001]
    lines = [f"{{'loss': {loss}, 'learning_rate': {8e-05 - 1e-05 * k:.3e}, 'epoch': {epochs_apart * (k + 1):.2f}}}"
             for k, loss in enumerate(losses)]
    report = analyze_run(discover_runs(_write(tmp_path / "train.log", lines))[0])
    assert any(i.kind == "loss_collapse" for i in report.incidents) == collapse


def _yolox_lines(launches, losses):
    lines = []
    for iters, epochs in launches:
        lines.append("2023-01-13 18:48:45.259 | INFO     | yolox.core.trainer:before_train:130 - args: Namespace("
                     "batch_size=16, devices=2, fp16=True, resume=False, start_epoch=None)")
        for epoch in range(1, epochs + 1):
            for it in range(10, iters + 1, 10):
                lines.append(f"2023-01-13 19:36:11.931 | INFO     | yolox.core.trainer:after_iter:253 - epoch: "
                             f"{epoch}/{epochs}, iter: {it}/{iters}, mem: 4605Mb, iter_time: 0.671s, data_time: 0.001s, "
                             f"total_loss: {losses(len(lines), epoch, it)}, iou_loss: 2.0, l1_loss: 0.0, conf_loss: 6.7, "
                             "cls_loss: 3.0, lr: 9.965e-08, size: 640, ETA: 0:24:55")
    return lines


def test_launches_appended_to_one_log_from_their_first_epoch_are_trainings(tmp_path):
    """YOLOX appends each launch to train_log.txt: 20 epochs of 112 iterations, then a launch of 14 an epoch, both
    from 'epoch: 1/20, iter: 10/...'. Read as one run, the second's records fell among the first's steps (10, 24,
    38, ...), five of them overwriting the first's, the final loss the wrong training's, without a word."""
    def losses(k, epoch, it):  # k: the line's number; the second launch's records from line 222
        return f"{10 * math.exp(-k / 40) + 1:.3f}" if k < 221 else f"{9 * math.exp(-(k - 222) / 5) + 1:.3f}"
    (first, second) = discover_runs(_write(tmp_path / "train_log.txt", _yolox_lines([(112, 20), (14, 20)], losses)))
    assert first.steps.index[[0, -1]].tolist() == [10, 2238] and len(first.steps) == 220
    assert second.steps.index.tolist() == [14 * (e - 1) + 10 for e in range(1, 21)]
    assert any("holds 2 trainings" in w for w in first.warnings)
    assert first.steps["loss"].iloc[-1] < 1.1 and second.steps["loss"].iloc[0] > 8
    # one launch alone, or epochs that start again while the loss goes on down (a loop around the fit), stay one
    (run,) = discover_runs(_write(tmp_path / "one.log", _yolox_lines([(112, 20)], lambda k, e, i: f"{3 - k / 1000:.3f}")))
    assert len(run.steps) == 220
    (run,) = discover_runs(_write(tmp_path / "loop.log", _yolox_lines([(112, 3)] * 3, lambda k, e, i: f"{3 - k / 1000:.3f}")))
    assert not any("trainings" in w for w in run.warnings)


def test_runs_whose_last_epoch_line_is_printed_again_with_its_evaluation_are_trainings(tmp_path):
    """OGB's ClusterGCN example run twice: each run ends by printing its last epoch's line again with the evaluation
    ('Run: 01, Epoch: 06, Loss: 0.1216, Train: 0.7051, Valid: ...'): read as one run of 14 lines in order, the second
    run's first epoch a 'spike', the run 'recovered'."""
    lines = []
    for run in (1, 2):
        losses = [0.5451, 0.2046, 0.1638, 0.1439, 0.1327, 0.1216]
        lines += [f"Run: {run:02d}, Epoch: {e:02d}, Loss: {loss:.4f}" for e, loss in enumerate(losses, 1)]
        lines += ["Evaluating full-batch GNN on CPU...",
                  f"Run: {run:02d}, Epoch: 06, Loss: 0.1216, Train: 0.7051, Valid: 0.6286, Test: 0.6278",
                  "ClusterGCN", f"Run {run:02d}:", "Highest Train: 0.7051", "Final Test: 0.6278"]
    runs = discover_runs(_write(tmp_path / "ogb.log", lines))
    assert [run.steps.index.tolist() for run in runs] == [list(range(1, 7))] * 2
    assert all(analyze_run(run).verdict.value == "healthy" for run in runs)


def test_overfitting_quotes_an_epoch_logs_training_loss_at_the_epochs_it_names(tmp_path):
    """fastai's CSVLogger history.csv: 'valid_loss rose from 0.231 at epoch 6 to 0.6912 at epoch 18 while the
    training loss fell from 0.2903 to 0.1353': the medians of the five epochs before each (epochs 4 and 16's
    values). Each row is an epoch's mean already: the values at the epochs named, 0.187 and 0.1068."""
    train = [0.81, 0.62, 0.507, 0.3836, 0.2903, 0.2114, 0.187, 0.1598, 0.154, 0.153, 0.1387, 0.1216, 0.1135, 0.1232,
             0.1449, 0.1493, 0.1353, 0.1243, 0.1068]
    valid = [0.4619, 0.4183, 0.3396, 0.3164, 0.2872, 0.3167, 0.231, 0.3044, 0.3637, 0.3918, 0.392, 0.3877, 0.3877,
             0.5288, 0.3265, 0.4388, 0.6141, 0.4026, 0.6912]
    path = tmp_path / "history.csv"
    path.write_text("epoch,train_loss,valid_loss,accuracy,time\n" + "".join(
        f"{e},{t},{v},0.9,04:39\n" for e, (t, v) in enumerate(zip(train, valid))))
    (found,) = [i for i in analyze_run(discover_runs(path)[0]).incidents if i.kind == "overfitting"]
    assert "at epoch 6" in found.message and "fell from 0.187 to 0.1068" in found.message, found.message


def test_a_loss_at_chance_above_it_at_each_epochs_first_batches_is_still_at_chance():
    """A multiple-choice QA model (4 answers) fine-tuned 20 epochs with the Trainer: 1.383-1.389 at every logged step
    but the first of each epoch, ~1.41 (the first batches after a shuffle), eval_loss 1.38629 throughout, accuracy
    0.25: 'healthy', a plateau, as no five rows in a row lay within 1% of ln 4."""
    epoch = [1.4103, 1.3886, 1.3884]
    loss = pd.Series([*epoch * 20, 1.3849, 1.3872], index=range(50, 3150, 50))
    (found,) = chance_incidents(loss)
    assert found.details["chance"] == 4 and found.details["rows"] == 62
    assert "or of two binary guesses summed, ln 2 each: a link predictor's positive and negative pairs" in found.message
    assert chance_incidents(pd.Series([*[1.52, 1.50, 1.49] * 20, 1.47, 1.48], index=range(62))) == []


def _swin_lines(lrs, losses):
    return [f"[2024-02-27 18:28:51 swin_tiny_patch4_window7_224] (main.py 222): INFO Train: [0/300][{10 * k}/195]\t"
            f"eta 0:08:17 lr {lr:.6f}\t wd 0.0500\ttime 0.2361 (0.4570)\tloss {loss:.4f} (6.9814)\t"
            "grad_norm 2.5340 (2.5801)\tloss_scale 65536.0000 (65536.0000)\tmem 9189MB"
            for k, (lr, loss) in enumerate(zip(lrs, losses))]


@pytest.mark.parametrize("warming", [True, False])
def test_a_loss_at_chance_while_the_learning_rate_warms_up_is_too_early_to_tell(tmp_path, warming):
    """Swin's launches stopped in the first epoch of a 20-epoch warm-up from 0 (lr 0.000000 to 0.000006): 'loss at
    chance level ... ln(1000): the model is not learning', a warning, the run unhealthy. While the learning rate
    still rises it is information; at a learning rate that had warmed up, a warning as before."""
    losses = [6.92 + 0.02 * math.sin(k) for k in range(40)]
    lrs = [1.5e-7 * k for k in range(40)] if warming else [2.5e-4] * 40
    (run,) = discover_runs(_write(tmp_path / "log_rank0.txt", _swin_lines(lrs, losses)))
    report = analyze_run(run)
    (chance,) = [i for i in report.incidents if i.kind == "loss_stuck"]
    assert chance.severity.value == ("info" if warming else "warning") and "ln(1000)" in chance.message
    assert ("still warming up" in chance.message) == warming


def test_each_ranks_log_of_one_training_is_read_once(tmp_path):
    """Swin writes log_rank0.txt and log_rank1.txt (each process its own batches' loss, the same steps); detectron2
    writes log.txt and log.txt.rank1: each training was reported once per rank, its incidents counted twice.
    The lowest rank's is read; the others are skipped, said so."""
    (tmp_path / "swin").mkdir()
    for name in ("log_rank0.txt", "log_rank1.txt"):
        _write(tmp_path / "swin" / name, _swin_lines([2.5e-4] * 40, [6.9 - 0.05 * k + 0.01 * len(name) for k in range(40)]))
    found = discover(tmp_path / "swin")
    assert [Path(run.path).name for run in found.runs] == ["log_rank0.txt"]
    assert [Path(s.path).name for s in found.skipped if "another rank" in s.reason] == ["log_rank1.txt"]
    (run,) = discover_runs(tmp_path / "swin" / "log_rank1.txt")  # named on its own, it is read
    assert run.steps["loss"].iloc[0] == pytest.approx(6.9 + 0.13)


@pytest.mark.parametrize("line, first", [
    # Chinese-CLIP's training line: its global step, then the epoch's sample count
    ("2024-10-10,14:21:10 | INFO | Rank 0 | Global Steps: {k}/3200 | Train Epoch: 1 [{n}/40960 ({p}%)] | Loss: {v:.6f} | "
     "Image2Text Acc: 3.91 | LR: 0.000145 | logit_scale: 4.605 | Global Batch Size: 128", 1),
    # PaddleSpeech's 2021 trainer: a step, then the batch inside the epoch
    ("[INFO 2021/06/19 16:01:34 model.py:61] Train: Rank: 0, epoch: 1, step: {s}, batch : {k}/1876, lr: 0.00000100, "
     "data time: 0.000s, train time: 3.019s, batch size: 64, train_loss: {v:.6f}", 1),
])
def test_a_line_two_shapes_read_is_one_record(tmp_path, line, first):
    """A line with a step and also an epoch's count was read by two shapes of the generic reader: every point twice
    (Chinese-CLIP at step 29 and again at sample 3712), a false 'loss repeats' and a plateau between the two."""
    values = [4.4 - 0.003 * k + 0.02 * math.sin(k) for k in range(1, 61)]
    lines = [line.format(k=k, s=k + 3750, n=128 * k, p=k * 100 // 320, v=v) for k, v in zip(range(1, 61), values)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == list(range(first, first + 60))
    assert run.steps["loss"].tolist() == pytest.approx(values, abs=1e-6)
    assert not any(i.kind == "loss_repeats" for i in analyze_run(run).incidents)


@pytest.mark.parametrize("line", [
    "Epoch 1 train Loc Loss: {a:.4f} Cls Loss: {b:.4f} Tot Loss: {t:.4f} Accu :0.0018",  # WLASL's I3D
    "Iter {s}: Loc Loss: {a:.4f} Cls Loss: {b:.4f} Tot Loss: {t:.4f}",
    "step {s} | cls loss {b:.4f} | reg loss {a:.4f} | total loss {t:.4f}",
    "Epoch 1, step {s}, rpn loss: {a:.4f}, cls loss: {b:.4f}, Total Loss: {t:.4f}",
])
def test_a_terms_loss_before_the_lines_total_is_not_the_loss(tmp_path, line):
    """A line of "<term> Loss: x" keys and then the total (WLASL's "Loc Loss: 0.0057 Cls Loss: 0.0075 Tot
    Loss: 0.0066", detection scripts' "cls loss ... reg loss ... total loss") was read by its first term:
    the localisation loss judged as the run's. The total is the loss."""
    terms = [(0.5 - i / 200, 1.5 - i / 100) for i in range(40)]
    lines = [line.format(s=(i + 1) * 10, a=a, b=b, t=a + b) for i, (a, b) in enumerate(terms)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["loss"].iloc[-1] == pytest.approx(sum(terms[-1]), abs=1e-4) and len(run.steps) == 40


def test_a_loss_before_a_total_is_still_the_loss_where_it_is_no_term(tmp_path):
    """The rule above asks of a term's name before "loss" alone: a bare loss, an average's, a training's, stay
    the loss beside a total (a sum over the epoch)."""
    for line in ("step {s} | loss: {a:.4f} | total loss: {t:.4f}", "Epoch {s}: avg loss: {a:.4f}, total loss: {t:.4f}",
                 "step {s} train loss {a:.4f} total_loss {t:.4f}"):
        lines = [line.format(s=s, a=2 - s / 100, t=(2 - s / 100) * 50) for s in range(1, 41)]
        (run,) = discover_runs(_write(tmp_path / "train.log", lines))
        assert run.steps["loss"].iloc[-1] == pytest.approx(2 - 40 / 100), line


def _gcn_log(epochs, losses, val_losses, ms_g3d: bool = True, batches: bool = False) -> list[str]:
    # print_log of ST-GCN's line of trainers: "[ <time.asctime()> ] " before each message
    lines = []
    for epoch, loss, val in zip(epochs, losses, val_losses):
        at = f"[ Thu Oct 17 {epoch % 24:02d}:33:04 2019 ] "
        lines.append(at + (f"Training epoch: {epoch}, LR: 0.1000" if ms_g3d else f"Training epoch: {epoch}"))
        if batches:
            lines += [at + f"\tBatch({b}/589) done. Loss: {loss + b / 10000:.4f}  lr:0.100000"
                      for b in range(0, 500, 100)]
        lines.append(at + (f"\tMean training loss: {loss:.4f} (BS 32: {loss:.4f})." if ms_g3d
                           else f"\tMean training loss: {loss:.4f}.  Mean training acc: 31.93%."))
        lines += [at + "\tTime consumption: [Data]00%, [Network]97%", at + f"Eval epoch: {epoch}",
                  at + f"\tMean test loss of 398 batches: {val}.", at + "\tTop1: 32.72%", at + "\tTop5: 67.80%"]
    return lines


def test_skeleton_action_recognition_trainers_epochs(tmp_path):
    """MS-G3D's, CTR-GCN's and TD-GCN's logs ("[ <time> ] Training epoch: 1, LR: 0.1000", "\\tMean training loss:
    3.2698 (BS 32: 3.2698).", "Eval epoch: 1", "\\tMean test loss of 398 batches: 2.5316.") were not read: a
    loss that rose from chance went unsaid. Each epoch's mean training loss is the loss, the test loss its
    val_loss; a paste cut between one epoch's first line and a later epoch's lines gives the first no loss."""
    losses = [3.27, 1.95, 1.51, 1.20, 1.02, 0.93]
    lines = _gcn_log(range(1, 7), losses, [2.53, 1.93, 1.61, 1.40, 1.31, 1.25])
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.source == "skeleton_gcn" and run.meta["step_unit"] == "epoch"
    assert run.steps["loss"].tolist() == losses and run.steps["val_loss"].iloc[0] == 2.53
    assert run.steps["lr"].tolist() == [0.1] * 6
    # CTR-GCN's lines, a paste cut after epoch 3's first line and going on at epoch 57
    lines = _gcn_log(range(1, 4), losses[:3], [2.5] * 3, ms_g3d=False)
    lines += [lines[0].replace("epoch: 1", "epoch: 4"), *_gcn_log(range(57, 60), [0.028, 0.0276, 0.0266], [0.67] * 3,
                                                                  ms_g3d=False)]
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.steps.index.tolist() == [1, 2, 3, 57, 58, 59] and run.steps["loss"].iloc[3] == 0.028
    # a rise from 4.2 (chance over 60 classes) to 7.7: the run diverged
    lines = _gcn_log(range(1, 9), [4.2, 4.5, 5.1, 5.8, 6.4, 7.0, 7.4, 7.7], [4.3] * 8)
    report = analyze_run(discover_runs(_write(tmp_path / "log.txt", lines))[0])
    assert report.verdict != "healthy"
    # where each epoch prints its batches, those are read (per batch, the finer record)
    lines = _gcn_log(range(1, 5), [3.2, 2.9, 2.7, 2.5], [3.0] * 4, batches=True)
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.source != "skeleton_gcn" and run.steps["loss"].dropna().index[5] == 589 and len(run.steps) == 20


def test_videopose3d_epochs(tmp_path):
    """VideoPose3D's run.py and its forks (PoseFormer, MixSTE) print '[%d] time %.2f lr %f 3d_train %f 3d_eval %f
    3d_valid %f' each epoch: "not a log format" (its loss, 3d_train, the MPJPE in mm, under a key no reader
    knew). 3d_train is the loss, 3d_valid its val_loss; without an evaluation the line ends at 3d_train."""
    rows = [(1, 88.13, 63.5, 67.0), (2, 52.57, 51.9, 60.8), (3, 43.45, 46.1, 57.6), (4, 38.52, 41.0, 56.8)]
    lines = []
    for epoch, train, evaluated, valid in rows:
        lines += [f"[{epoch}] time 43.30 lr {4e-5 * 0.99 ** epoch:.6f} 3d_train {train:.6f} 3d_eval {evaluated:.6f} "
                  f"3d_valid {valid:.6f}", "save best checkpoint"]
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.source == "videopose3d" and run.meta["step_unit"] == "epoch"
    assert run.steps["loss"].tolist() == [r[1] for r in rows] and run.steps["val_loss"].tolist() == [r[3] for r in rows]
    lines = [f"[{epoch}] time 12.01 lr 0.001000 3d_train {value}" for epoch, value in
             enumerate(["45.2", "41.0", "39.8", "nan", "nan"], start=1)]
    report = analyze_run(discover_runs(_write(tmp_path / "log.txt", lines))[0])
    assert report.verdict == "unhealthy" and report.incidents[0].kind == "nonfinite"


def test_torch_ngp_trainers_bars(tmp_path):
    """stable-dreamfusion (torch-ngp's Trainer) prints "==> Start Training ... Epoch 82/300, lr=0.050000 ...", a bar
    "loss=1.0000 (1.0000), lr=0.050000: :  50% 50/100 [...]" and its evaluation's bar "loss=0.0000 (0.0000): : 100%
    8/8":
    read as two trainings (the evaluation's bar a step), the NaN at "steps 151-154". The epochs' bars are the
    steps, (82 - 1) x 100 + 51 for the first NaN; the evaluations are left out."""
    lines = []
    for epoch in (81, 82):
        lines.append(f"==> [2023-07-17_21-23-40] Start Training /var/lib/trial Epoch {epoch}/300, lr=0.050000 ...")
        for i in range(1, 101, 1 if epoch == 82 else 33):
            loss = "nan" if epoch == 82 and i > 50 else f"{1.2 - i / 1000:.4f}"
            lines.append(f"loss={loss} ({loss}), lr=0.050000: : {i:3d}% {i}/100 [00:09<00:09,  5.36it/s]"
                         + ("NaN or Inf found in input tensor." if loss == "nan" else ""))
            if epoch == 82 and i == 54:
                break
        if epoch == 81:
            lines += ["==> [2023-07-17_21-23-59] Finished Epoch 81/300. CPU=3.9GB, GPU=8.0GB.",
                      "++> Evaluate /var/lib/trial at epoch 81 ...",
                      "loss=0.0000 (0.0000): : 100% 8/8 [00:00<00:00, 53.78it/s]",
                      "++> Evaluate epoch 81 Finished."]
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.source == "torch_ngp" and run.steps.index[0] == 8001 and 0.0 not in run.steps["loss"].tolist()
    (incident,) = analyze_run(run).incidents
    assert incident.kind == "nonfinite" and incident.step == 8151


def test_a_bar_of_no_known_length_whose_description_is_the_loss(tmp_path):
    """Wav2Lip's SyncNet trainer: prog_bar.set_description('Loss: {}'.format(running_loss / (step + 1))) over a
    loader of no length, each epoch's bar left on its line: "Loss: 0.5212869264862754: : 11it [00:06,  1.59it/s]".
    Not a log format sentinel read; each line is read as the loss, numbered in order."""
    values = [0.6931 - k / 500 for k in range(12)] + [float("nan")] * 3
    lines = [f"Loss: {v}: : 11it [00:06,  1.5{k % 10}it/s]" + (" " if k % 3 else "") for k, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == list(range(1, 16)) and run.steps["loss"].iloc[0] == 0.6931
    assert [i.kind for i in analyze_run(run).incidents] == ["nonfinite"]


def test_a_short_pastes_jump_within_the_spread_before_it_is_information(tmp_path):
    """CSRNet trains with one image a batch and a summed loss: "Epoch: [0][300/960] ... Loss 3413.5181 (394.3032)"
    among 782, 139, 585, 10 and 4907, the running mean flat. Its jumps, flagged by their height alone in a paste
    under the detector's warm-up, were "recovered" spikes, the run not healthy; under one robust sigma of the values
    before them they are information. A jump far out of a quiet paste's spread stays a warning."""
    values = [782.0785, 139.2142, 3413.5181, 584.6290, 10.1923, 4906.9761, 29.9215, 28.5599]
    lines = [f"Epoch: [0][{i * 150}/960]\tTime 0.622 (0.622)\tData 0.025 (0.025)\tLoss {v:.4f} (390.0000)"
             for i, v in enumerate(values)]
    report = analyze_run(discover_runs(_write(tmp_path / "csrnet.log", lines))[0])
    assert report.incidents and {(i.kind, i.severity) for i in report.incidents} == {("loss_spike", "info")}
    assert report.verdict == "healthy"
    assert "within the spread of the few values before it" in report.incidents[0].message
    values = [2.01, 1.99, 2.0, 1.98, 2.02, 9.5, 2.0, 1.97, 1.99]
    lines = [f"Epoch: [0][{i * 10}/960]\tTime 0.622 (0.622)\tData 0.025 (0.025)\tLoss {v:.4f} (2.0000)"
             for i, v in enumerate(values)]
    (incident,) = analyze_run(discover_runs(_write(tmp_path / "quiet.log", lines))[0]).incidents
    assert (incident.kind, incident.severity) == ("loss_spike", "warning")


def test_a_pastes_jump_within_the_spread_before_it_at_the_warm_ups_length_is_information(tmp_path):
    """The PyTorch MNIST example's batch losses, 20 lines pasted from a Kubernetes pod (0.004 to 0.26): 0.3838 at
    3.9x their median was a "recovered" spike, the run not healthy, where 19 lines would have been information; 20
    values are within the detector's warm-up, as the analyzer's own warning says."""
    values = [0.217422, 0.004375, 0.066934, 0.208920, 0.229430, 0.014528, 0.130294, 0.071659, 0.098376, 0.383814,
              0.263688, 0.123490, 0.051283, 0.092157, 0.150230, 0.037749, 0.118214, 0.069122, 0.135197, 0.067576]
    lines = [f"        Train Epoch: 1 [{21120 + 640 * i}/60000 ({35 + i}%)]\tLoss: {v:.6f}"
             for i, v in enumerate(values)]
    report = analyze_run(discover_runs(_write(tmp_path / "mnist.log", lines))[0])
    assert report.verdict == "healthy"
    assert [(i.kind, i.severity) for i in report.incidents if i.kind == "loss_spike"] == [("loss_spike", "info")]


def test_a_count_that_starts_again_under_each_epochs_line_is_epochs(tmp_path):
    """UniMatch logs "===========> Epoch: 8, LR: 0.0005, Previous best: 70.17", then "Iters: 0, Total loss: 0.045,
    ..." to "Iters: 2170" (its loss a mean since the epoch's start: the first line one batch's). Each epoch was read
    as a training of its own ("launches appended to one file"), each with a critical spike from its first line.
    A count that starts again under a line naming a rising epoch is that epoch's; a paste that skips epochs
    keeps their numbers."""
    lines = []
    for epoch in (8, 9, 12, 76):
        lines.append(f"[2022-11-25 18:51:04,888][    INFO] ===========> Epoch: {epoch}, LR: 0.0005, "
                     "Previous best: 70.17")
        for k, it in enumerate(range(0, 2480, 310)):
            mean = 0.085 - epoch / 2000 if k else 0.045 - epoch / 4000
            lines.append(f"[2022-11-25 18:53:37,571][    INFO] Iters: {it}, Total loss: {mean:.3f}, Loss x: 0.099, "
                         f"Loss s: 0.119, Loss w_fp: 0.014, Mask: 0.752")
        lines.append("[2022-11-25 19:12:21,983][    INFO] ***** Evaluation original ***** >>>> meanIOU: 70.08")
    (run,) = discover_runs(_write(tmp_path / "unimatch.log", lines))
    assert run.steps.index[0] == 8 * 2480 and run.steps.index[-1] == 76 * 2480 + 2170
    assert all(i.severity == "info" for i in analyze_run(run).incidents)
    # a launch appended, its epoch lines starting over: no rise, the rule stands aside (trainings, as before)
    lines += lines[:10]
    assert len(discover_runs(_write(tmp_path / "twice.log", lines))) >= 2


def test_a_searchs_best_loss_so_far_is_no_training_loss(tmp_path):
    """hyperopt's TPE under NNI logs "TPE using 5/5 trials with best loss -0.971961": read as the loss, "stuck"
    at one negative value (a placeholder, labels out of range), the run unhealthy. The lowest loss so far is
    no step's loss."""
    lines = []
    for k in range(1, 9):
        lines += [f"[01/03/2020, 09:2{k}:51 AM] INFO (hyperopt.tpe/Thread-1) tpe_transform took 0.015616 seconds",
                  f"[01/03/2020, 09:2{k}:51 AM] INFO (hyperopt.tpe/Thread-1) TPE using {k}/{k} trials with best loss "
                  "-0.971961"]
    with pytest.raises(NoRunsError):
        discover_runs(_write(tmp_path / "dispatcher.log", lines))


def test_ultralytics_console_loss_col_by_the_name_its_warning_gives(tmp_path):
    """The Ultralytics console's sum is said as "loss is the sum of train/box_loss + train/cls_loss + ...
    (--loss-col picks one)"; --loss-col train/box_loss was passed over in silence (the bar names it box_loss),
    as was a name the table lacks. Either name of a column reads it; a name of none is refused, with the terms."""
    path = tmp_path / "console.log"
    path.write_text(_ultralytics_console(6))
    for name in ("train/box_loss", "box_loss"):
        (run,) = discover_runs(path, LoadOptions(loss_col=name))
        assert run.steps["loss"].iloc[0] == pytest.approx(1.5 - 1 / 50 + 1 / 1000, abs=1e-3), name
    result = CliRunner().invoke(main, ["analyze", str(path), "--loss-col", "foo"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "no column 'foo' in its table (its loss's terms: box_loss, cls_loss, dfl_loss)" in result.output


def test_a_loggers_source_line_field_is_no_logged_key(tmp_path):
    """U2PL's logger puts "[line: 833]" (its source line) before each message: a paste whose losses go by names
    sentinel does not know ("Sup 1.7095 Unsup 0.3211 Contra 0.0") was refused as "its lines log line but no loss"."""
    lines = [f"[2023-03-12 12:12:18,343][       train.py][line: 833][    INFO] [none] iter [{i}/49000] LR 0.00245 "
             f"Sup {1.71 - i / 1e5:.4f} Unsup 0.3211 Contra 0.0000 mIoU 63.57" for i in range(1020, 1200, 10)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "train.log", lines))])
    assert result.exit_code == 1 and "Traceback" not in result.output and "log line" not in result.output


def test_a_loss_that_is_the_sum_of_the_others_is_their_total(tmp_path):
    """A DANN regression script prints "Epoch [1/10] - T_Loss:2.7179, R_loss:2.016,D_loss:0.702,D_acc:50.117%":
    refused as three losses none of which is the total, though T_Loss is R_loss + D_loss on every line. A key
    that is the others' sum, to the digits printed, is the loss; three that sum to nothing stay the user's choice."""
    lines = []
    for e in range(1, 9):
        r, d = 2.016 - e / 20, 0.702 + e / 1000
        lines += [f"Epoch [{e}/10] - T_Loss:{r + d:.4f}, R_loss:{r:.3f},D_loss:{d:.3f},D_acc:50.117%",
                  "Val_Loss(MSE):2.262,Val_MAE:1.242,Val_R2:0.633", "lr [0.0001]"]
    (run,) = discover_runs(_write(tmp_path / "dann.log", lines))
    assert run.steps["loss"].iloc[0] == pytest.approx(2.016 - 1 / 20 + 0.702 + 1 / 1000, abs=1e-4)
    lines = [f"Epoch [{e}/10] - A_loss:{2.0 - e / 20:.4f}, B_loss:{1.1 - e / 30:.3f},C_loss:0.702" for e in range(1, 9)]
    with pytest.raises(NoRunsError, match="none is the total"):
        discover_runs(_write(tmp_path / "three.log", lines))


def test_the_pytorch_transfer_learning_tutorials_epochs(tmp_path):
    """The PyTorch transfer-learning tutorial's train_model prints "Epoch 0/24", dashes, "train Loss: 0.5814 Acc:
    0.6967" and "val Loss: 0.2474 Acc: 0.9085" (layumi's re-ID baseline, "train Loss: 0.4552 Reg: 0.0000 Acc: ..."
    after lines of its own): "not a log format". Each epoch's train loss is the loss, its val loss the val_loss."""
    lines = []
    for e, (train, val) in enumerate([(0.5814, 0.2474), (0.4870, 0.2651), (0.4570, 0.2231), (0.4012, 0.2101)]):
        lines += [f"Epoch {e}/24", "-" * 10, "batch = 405", f"train Loss: {train} Reg: 0.0000 Acc: 0.6967",
                  f"val Loss: {val} Acc: 0.9085", ""]
    lines += ["Training complete in 1m 7s", "Best val Acc: 0.915033"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "transfer_tutorial" and run.meta["step_unit"] == "epoch"
    assert run.steps.index.tolist() == [0, 1, 2, 3] and run.steps["loss"].tolist() == [0.5814, 0.4870, 0.4570, 0.4012]
    assert run.steps["val_loss"].tolist() == [0.2474, 0.2651, 0.2231, 0.2101]


def test_the_transfer_tutorials_epochs_named_after_each_model_trained_in_turn(tmp_path):
    """A script that trains resnet-50, -34 and -18 in turn with the tutorial's loop prints "resnet-50 - Epoch 1/100":
    refused, "no transfer_tutorial step lines found" (a reader's name, no fix). Each model's epochs are a run."""
    lines = []
    for model, level in (("resnet-50", 0.3), ("resnet-34", 0.25), ("resnet-18", 0.2)):
        for e in range(1, 9):
            lines += [f"{model} - Epoch {e}/8", "-" * 10, "lr: [0.0002]",
                      f"train Loss: {level + 2 / e:.4f} Top-1 Acc: 4.8644 Top-5 Acc: 29.1611",
                      f"test Loss: {level + 2.2 / e:.4f} Top-1 Acc: 4.1501 Top-5 Acc: 35.7653"]
    runs = discover_runs(_write(tmp_path / "train.log", lines))
    assert [run.source for run in runs] == ["transfer_tutorial"] * 3
    assert all(run.steps.index.tolist() == list(range(1, 9)) for run in runs)
    assert [run.steps["loss"].iloc[-1] for run in runs] == [0.55, 0.5, 0.45]
    _write(tmp_path / "cut.log", ["train Loss: 0.5 Acc: 0.1", "val Loss: 0.6 Acc: 0.1"] * 3)  # no epoch header
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "cut.log")])
    assert result.output.startswith(f"Error: {tmp_path / 'cut.log'}: it looks like the PyTorch transfer-learning "
                                    "tutorial's train_model") and "with the lines that name each step" in result.output

@pytest.mark.parametrize("line", [
    "{i} {p}% (0m 12s) {loss} Coelho / Portuguese ✗ (Italian)",  # the name classifier
    "0m 16s ({i} {p}%) {loss}",  # the name generator
    "1m 20s (- 19m 1s) ({i} {p}%) {loss}",  # the seq2seq translator
])
def test_the_pytorch_nlp_from_scratch_tutorials(tmp_path, line):
    """The char-RNN classifier's "35000 35% (1m 4s) nan Nam / Russian ✗ (Korean)": "not a log format", its NaN
    unsaid; the generator's and the translator's prints likewise. The iteration is the step."""
    losses = ["2.4177", "2.5862", "1.1451", "2.3326", "1.5165", "2.5533", "nan", "nan", "nan"]
    lines = [line.format(i=5000 * k, p=5 * k, loss=loss) for k, loss in enumerate(losses, 1)]
    (run,) = discover_runs(_write(tmp_path / "rnn.log", lines))
    assert run.source == "nlp_tutorials" and run.steps.index.tolist() == [5000 * k for k in range(1, 10)]
    assert run.steps["loss"].iloc[:6].tolist() == [float(v) for v in losses[:6]]
    (nan,) = [i for i in analyze_run(run).incidents if i.kind == "nonfinite"]
    assert (nan.step, nan.severity.value) == (35000, "critical")

def test_tflearns_training_steps_each_read_once(tmp_path):
    """TFLearn prints "Training Step: 8  | total loss: 2.03040 | time: 0.275s", then "| Adam | epoch: 001 | loss:
    2.03040 - acc: 0.2720 -- iter: 00512/55000": each loss was read twice (at step 8 and at 512), then "loss repeats
    exactly the values it had 6 logged steps earlier" made a healthy MNIST run unhealthy."""
    lines = []
    for step in range(8, 40):
        loss = 2.2 * 0.97 ** step
        lines.append(f"Training Step: {step}  | total loss: {loss:.5f} | time: 0.275s")
        val = f" | val_loss: {loss * 0.8:.5f} - val_acc: 0.5097" if step % 10 == 0 else ""
        lines.append(f"| Adam | epoch: 001 | loss: {loss:.5f} - acc: 0.2720{val} -- iter: {step * 64:05d}/55000")
    (run,) = discover_runs(_write(tmp_path / "tflearn.log", lines))
    assert run.source == "tflearn" and run.steps.index.tolist() == list(range(8, 40))
    assert run.steps["val_loss"].dropna().index.tolist() == [10, 20, 30]
    assert analyze_run(run).verdict.value == "healthy"

def test_llama_recipes_bar_read_by_its_description_not_its_count(tmp_path):
    """llama-recipes' bar counts optimizer steps under gradient accumulation ("3/9"), its description each batch:
    "Training Epoch: 1/3, step 10/36 completed (loss: 0.52): 33%|...| 3/9": read at the bar's count, three of four
    losses were dropped as one step's several, the best loss one of those left."""
    lines, rng = [], np.random.default_rng(0)
    for epoch in (1, 2):
        for step in range(36):
            loss = 0.6 * 0.97 ** ((epoch - 1) * 36 + step) + 0.05 * rng.random()
            done = step // 4
            lines.append(f"Training Epoch: {epoch}/3, step {step}/36 completed (loss: {loss}):  {done * 11}%|###   "
                         f"| {done}/9 [03:17<06:31, 65.28s/it]")
    (run,) = discover_runs(_write(tmp_path / "finetune.log", lines))
    assert run.source == "llama_recipes" and run.steps.index.tolist() == list(range(72))
    assert not any("print their loss" in w for w in run.warnings)

def test_a_bars_percentage_after_the_loss_is_no_step(tmp_path):
    """NVIDIA's BERT SQuAD fine-tuning prints its DLLogger line with the bar glued after it: "Training Iteration: 3522
    step_loss : 0.0633 learning_rate : 1.18e-05   Iteration:  29%|####": the steps were read as 29, 31, 32."""
    lines = [f"DLL 2022-04-05 05:16:41.743855 - Training Epoch: 1 Training Iteration: {it}  step_loss : "
             f"{0.9 - it / 10000:.6f}  learning_rate : 1.18e-05{' ' * 40}Iteration:  {it // 120}%|#####   "
             for it in range(3522, 4022, 50)]
    (run,) = discover_runs(_write(tmp_path / "squad.log", lines))
    assert run.steps.index.tolist() == list(range(3522, 4022, 50))

def test_a_count_past_its_epochs_length_is_global(tmp_path):
    """MinkowskiEngine's "===> Epoch[4](1280/301): Loss 0.7165": 301 batches an epoch, the count global; read as a count
    inside the epoch, steps 2183..2303 for 1280..1400. open_clip's sample count passes its epoch's length late in the
    epoch ("[115264/109468 (105%)]"): a count inside the epoch still."""
    lines = [f"===> Epoch[4]({it}/301): Loss {0.7 - it / 20000:.4f}\tLR: 9.9e-02\tScore nan"
             for it in range(1280, 1440, 40)]
    (run,) = discover_runs(_write(tmp_path / "minkowski.log", lines))
    assert run.steps.index.tolist() == list(range(1280, 1440, 40))
    clip = [f"Train Epoch: {e} [{n:6d}/109468 ({100 * n // 109468}%)] Loss: {1 - n / 1e6:.5f} (1.067) LR: 0.000001"
            for e in (0, 3) for n in range(64, 140000, 6400) if e == 3 or n < 40000]
    (run,) = discover_runs(_write(tmp_path / "open_clip.log", clip))
    assert run.steps.index.min() == 64 and run.steps.index.max() > 3 * 109468

def test_open3d_ml_epochs(tmp_path):
    """Open3D-ML's pipelines print "=== EPOCH 0/100 ===", then "loss train: 1.981  eval: 2.344" and the other metrics'
    lines: "its lines log eval, train but no loss". The epoch (from 0) is the step, the eval value the val_loss."""
    lines = ["Initializing from scratch.", "Started training"]
    for e in range(8):
        lines += [f"=== EPOCH {e}/100 ===", f"loss train: {2 - e / 10:.3f}  eval: {2.3 - e / 20:.3f}",
                  "acc train: 0.188  eval: 0.155", "iou train: 0.086  eval: 0.046",
                  f"Epoch {e:3d}: save ckpt to ./logs/RandLANet_Semantic3D_torch/checkpoint"]
    (run,) = discover_runs(_write(tmp_path / "randla.log", lines))
    assert run.source == "open3d_ml" and run.steps.index.tolist() == list(range(8))
    assert run.steps["val_loss"].tolist() == [round(2.3 - e / 20, 3) for e in range(8)]


def test_pointnet2_pytorch_epochs_and_a_resume(tmp_path):
    """yanx27's Pointnet_Pointnet2_pytorch: "**** Epoch 1 (4/128) ****" (the launch's count, then the training's
    epoch), "Training mean loss: 0.817511", its evaluation's "eval mean loss": "not a log format". A resumed launch
    counts from 1 again beside the epoch it resumed at: the epoch in brackets is the step."""
    lines = []
    for launch, epochs in enumerate((range(1, 6), range(4, 12))):
        for k, e in enumerate(epochs, 1):
            lines += [f"2021-03-21 01:22:39,266 - Model - INFO - **** Epoch {k} ({e}/128) ****",
                      "2021-03-21 01:22:39,267 - Model - INFO - Learning rate:0.001000",
                      f"2021-03-21 02:50:07,309 - Model - INFO - Training mean loss: {0.8 / e ** 0.5:.6f}",
                      "2021-03-21 02:50:07,309 - Model - INFO - Training accuracy: 0.766915",
                      f"2021-03-21 02:50:07,992 - Model - INFO - ---- EPOCH {e:03d} EVALUATION ----",
                      f"2021-03-21 03:44:13,933 - Model - INFO - eval mean loss: {0.9 / e ** 0.4:.6f}"]
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.source == "pointnet2" and run.steps.index.tolist() == list(range(1, 12))
    assert run.steps["val_loss"].notna().all()


def test_nlp_tutorial_cost_lines_and_two_runs_in_one_paste(tmp_path):
    """graykode's nlp-tutorial prints "Epoch: 0010 cost = 15.205759" (its every model): "its lines log Epoch, cost, lr
    but no loss". Two runs pasted one after the other (each from epoch 10) are two trainings."""
    lines = []
    for lr in (0.01, 0.0001):
        lines += [f"**when lr={lr}**", "```"]
        lines += [f"Epoch: {e:04d} cost = {20 / e ** 0.5:.6f}" for e in range(10, 110, 10)]
        lines += ["```", ""]
    runs = discover_runs(_write(tmp_path / "bert.md", lines))
    assert [run.source for run in runs] == ["nlp_tutorial_cost"] * 2
    assert all(run.steps.index.tolist() == list(range(10, 110, 10)) for run in runs)

@pytest.mark.parametrize("skipped_every", [1, 40])
def test_espnet2s_skipped_updates_are_counted(tmp_path, skipped_every):
    """ESPnet2's trainer warns "The grad norm is nan. Skipping updating the model." for each update it skips: the lines
    were read as nothing (a run whose every update was skipped, healthy)."""
    lines = []
    for b in range(1, 61):
        if b % skipped_every == 0:
            lines += ["[user] 2021-04-23 19:22:52,420 (trainer:581) WARNING: The grad norm is nan. Skipping updating "
                      "the model."] * 2
        lines.append(f"[user] 2021-04-23 19:22:56,245 (trainer:636) INFO: 2epoch:train:{b * 2 - 1}-{b * 2}batch: "
                     f"iter_time=3.163e-04, forward_time=0.110, loss={65 - b / 3:.3f}, loss_att=124.079, acc=0.065, "
                     "optim0_lr0=1.485e-04")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["amp/overflow"].sum() == 2 * (60 // skipped_every)
    rate = [i for i in analyze_run(run).incidents if i.kind == "overflow_rate"]
    assert len(rate) == (skipped_every == 1)

def test_a_named_key_with_no_step_beside_it_is_said(tmp_path):
    """BasicTS prints "epoch 1 / 100", then "train:: [train_time: 94.49 (s), lr: 1.00e-02, train_MAE: 2.8285, ...]":
    --loss-col train_MAE, the key its refusal listed, got "not a log format" back. The refusal says the key is
    there and no step is read beside it."""
    lines = []
    for e in range(1, 9):
        lines += [f"2022-02-28 19:24:49,638 - easytorch-training - INFO - epoch {e} / 100",
                  f"2022-02-28 19:26:24,131 - easytorch-training - INFO - train:: [train_time: 94.49 (s), lr: 1.00e-02, "
                  f"train_MAE: {2.8 - e / 10:.4f}, train_RMSE: 4.7895, train_MAPE: 0.0685]"]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "train.log", lines)), "--loss-col", "train_MAE"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "its lines hold train_MAE but sentinel finds no step it reads with it" in " ".join(result.output.split())


def test_a_loss_with_its_average_named_after_it(tmp_path):
    """freerec's Coach logs "[Coach] >>> TRAIN @Epoch: 1    >>>  || LOSS Avg: 0.18426" each epoch: "not a log
    format" (the loss key followed by the word for its average). Each epoch's average is the loss."""
    lines = [f"2023-10-06 09:11:01,505:\t[Coach] >>> TRAIN @Epoch: {e}    >>>  || LOSS Avg: {0.18 / e:.5f}"
             for e in range(1, 9)]
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.steps.index.tolist() == list(range(1, 9)) and run.steps["loss"].iloc[0] == 0.18


def test_a_rise_over_a_first_value_that_a_later_row_draws_again_is_information(tmp_path):
    """A Ray Train worker's per-batch loss in the PyTorch quickstart, pasted from 0.518: 0.905, 0.917, 0.833, 1.198,
    1.418, 0.934, 0.549, ...: 'diverged from step 8000, still diverged at the last step', critical, on a run its
    author called healthy (the thread was about CUDA_VISIBLE_DEVICES). The 0.549 draws the first value again."""
    values = [0.518008, 0.905233, 0.916595, 0.832843, 1.197762, 1.417728, 0.934103, 0.548713, 1.103186, 0.891098,
              0.824542]
    lines = [f"(BaseWorkerMixin pid=46105) loss: {v:>7f}  [{6400 + 1600 * k:>5d}/30000]" for k, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "ray.log", lines))
    report = analyze_run(run)
    (incident,) = [i for i in report.incidents if i.kind == "divergence"]
    assert incident.severity == "info" and "(0.5487 at step 17600)" in incident.message
    assert report.verdict == "healthy"
    # A loss that jumped to a level of its own and never came back to its first value stays a divergence.
    values = [6.44] + [11.42, 9.8, 9.1, 8.6, 8.3, 8.1, 8.2, 7.9, 8.0, 7.8]
    lines = [f"loss: {v:>7f}  [{6400 + 1600 * k:>5d}/30000]" for k, v in enumerate(values)]
    (run,) = discover_runs(_write(tmp_path / "jump.log", lines))
    (incident,) = [i for i in analyze_run(run).incidents if i.kind == "divergence"]
    assert incident.severity == "critical"


def test_loss_lines_under_a_line_naming_their_epoch_are_read_at_that_epoch(tmp_path):
    """HLFormer's logger prints "Epoch: 14    A Relative Failure Epoch", then "Average Loss: nan" and its recalls:
    the NaN was placed at "steps 1-2" (the loss lines numbered in order), not at epochs 14 and 15."""
    block = ["{t} - INFO - " + "=" * 60, "{t} - INFO - Epoch: {e}    A Relative Failure Epoch",
             "{t} - INFO - Average Loss: {loss}", "{t} - INFO - R@1: 0.0", "{t} - INFO - Rsum: 2.7"]
    lines = [line.format(t="2025-08-01 15:38:59,879", e=e, loss="nan" if e >= 14 else f"{0.9 - e / 50:.4f}")
             for e in range(11, 16) for line in block]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == [11, 12, 13, 14, 15] and run.meta.get("step_unit") == "epoch"
    assert any("read at the epoch a line above it names" in w for w in run.warnings)
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.step) == ("nonfinite", 14)
    # Several loss lines an epoch: no epoch line above each, numbered in order as before.
    lines = [f"Epoch: {e}" if k == 0 else f"loss: {1 - e / 10 - k / 100:.4f}" for e in range(1, 4) for k in range(4)]
    (run,) = discover_runs(_write(tmp_path / "several.log", lines))
    assert run.steps.index.tolist() == list(range(1, 10)) and run.meta.get("step_unit") != "epoch"


def _verl_line(step: int, grad_norm: str = "0.279", pg_loss: float = 0.01) -> str:
    """A step line of verl's console (``concat_dict_to_str``): every metric as ``key:value``, joined by " - "."""
    return (f"(TaskRunner pid=4072644) step:{step} - global_seqlen/min:210047.000 - "
            f"actor/entropy_loss:0.32{step % 10} - actor/kl_loss:0.00{step % 10} - actor/kl_coef:0.001 - "
            f"actor/pg_loss:{pg_loss:.3f} - actor/pg_clipfrac:0.001 - actor/ppo_kl:0.000 - "
            f"actor/grad_norm:{grad_norm} - actor/lr:0.000 - critic/score/mean:0.5{step % 10} - "
            "response_length/mean:326.241 - timing_s/step:1630.262")


def test_verl_console_lines_are_read_by_the_one_loss_that_is_no_regulariser(tmp_path):
    """verl's GRPO console names actor/pg_loss, actor/kl_loss and actor/entropy_loss: 'its lines name 3 losses and none
    is the total' for a whole log, 'not a log format' for a paste of two step lines. The KL and entropy terms are
    a regulariser's: the policy gradient's loss is read, said."""
    for steps in (range(1, 40), range(7, 9)):
        (run,) = discover_runs(_write(tmp_path / "verl.log", [_verl_line(s, pg_loss=0.01 - s / 1000) for s in steps]))
        assert run.steps.index.tolist() == list(steps)
        assert run.steps["loss"].iloc[-1] == pytest.approx(0.01 - steps[-1] / 1000, abs=1e-3)
        assert any("actor/pg_loss is read, the one of them that is no KL, entropy or auxiliary term" in w
                   for w in run.warnings)


def test_a_paste_of_one_verl_step_line_says_its_step_losses_and_nan(tmp_path):
    """verl's step lines are 1,500-3,000 characters: threads paste one. Its actor/grad_norm:nan at step 2 got 'not a
    log format sentinel reads', the NaN unsaid."""
    path = _write(tmp_path / "verl.log", [_verl_line(2, grad_norm="nan")])
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1
    assert "one step line (step 2) naming 3 losses (actor/entropy_loss, actor/kl_loss, actor/pg_loss)" in result.output
    assert "actor/grad_norm is nan" in result.output and "--loss-col actor/pg_loss" in result.output
    assert "Traceback" not in result.output


def test_a_rise_of_one_unit_of_the_last_printed_digit_is_no_spike(tmp_path):
    """mlx's DPO example prints its loss with three decimals: 0.693 at Iter 1, 0.000 from Iter 63, then 0.001 at 66
    and 69: 'loss spike to 0.001 (against a baseline at or below 0: no ratio, score 231)', critical, the run
    unhealthy, on a demo whose loss came down as DPO's does."""
    values = [0.693, 0.666, 0.610, 0.560, 0.000, 0.000, 0.000, 0.001, 0.000, 0.000, 0.001]
    iters = [1, 2, 3, 4, 63, 64, 65, 66, 67, 68, 69]
    lines = [f"Iter {i}: Train loss {v:.3f}, Chosen reward -8.056, Rejected reward -16.406, Learning Rate 1.000e-05, "
             f"It/sec 1.133, Tokens/sec 601.667, Trained Tokens 34211.0, Peak mem 2.334 GB"
             for i, v in zip(iters, values)]
    (run,) = discover_runs(_write(tmp_path / "dpo.log", lines))
    assert not [i for i in analyze_run(run).incidents if i.kind == "loss_spike"]
    # Three units and more is a rise the print shows: 0.000 then 0.009 stays a spike.
    lines[-1] = lines[-1].replace("Train loss 0.001", "Train loss 0.009")
    (run,) = discover_runs(_write(tmp_path / "dpo.log", lines))
    assert [i.step for i in analyze_run(run).incidents if i.kind == "loss_spike"] == [69]


def test_wenets_older_batch_of_the_epochs_count(tmp_path):
    """WeNet's executor before September 2021 printed f"TRAIN Batch {batch_idx}/{num_total_batch} loss ...": four
    ranks' NaN at batch 20,100 of 282,164 (wenet#496) was 'at step 282164', and a longer log's steps came out near
    1e9 (epoch 20,100 times the batches of one). Where every line's second number is the same and the first moves
    under it (or stands above 1,000 at one batch), it is the batch of the epoch's count."""
    lines = [f"2021-07-07 04:50:41,080 DEBUG TRAIN Batch 20100/282164 loss nan loss_att nan loss_ctc nan lr 0.00004021 "
             f"rank {rank}" for rank in (3, 0, 2, 1)]
    (run,) = discover_runs(_write(tmp_path / "nan.log", lines))
    assert run.steps.index.tolist() == [20100]
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 20100)]
    lines = [f"2021-07-07 04:{b // 100 % 60:02d}:41,080 DEBUG TRAIN Batch {b}/282164 loss {90 - b / 1000:.6f} loss_att "
             f"80.1 loss_ctc 100.3 lr 0.00004021 rank 0" for b in range(100, 3100, 100)]
    (run,) = discover_runs(_write(tmp_path / "old.log", lines))
    assert run.steps.index.tolist() == list(range(100, 3100, 100)) and run.source == "wenet"
    # The newer lines, epoch then batch, as before: an epoch's count restarting under each epoch.
    lines = [f"DEBUG TRAIN Batch {e}/{b} loss {90 - e - b / 1000:.6f} lr 0.0004 rank 0" for e in range(2) for b in
             range(0, 1000, 100)]
    (run,) = discover_runs(_write(tmp_path / "new.log", lines))
    assert run.steps["loss"].is_monotonic_decreasing and len(run.steps) == 20
    # ... and one line an epoch (CosyVoice's, its epochs 0, 1, 2, ... at step 100 of each): epochs still.
    lines = [f"DEBUG TRAIN Batch {e}/100 loss {2.8 - e / 10:.6f} acc 0.3 lr 0.0008 grad_norm 0.0 rank 0" for e in range(6)]
    (run,) = discover_runs(_write(tmp_path / "cosyvoice.log", lines))
    assert run.steps.index.tolist() == [100, 200, 300, 400, 500, 600]
    # A part of a log with the word but no batch line (a training cut at its fresh start) is given back as it is.
    from sentinel.analyze.loaders.dialects import _wenet_batch_of_total
    assert _wenet_batch_of_total("TRAIN starts\n") == "TRAIN starts\n"


def test_a_zero_padded_nan_is_a_nan(tmp_path):
    """A TensorFlow script printed its loss with "%07.5f": Python pads a NaN with zeros, "loss = 0000nan" at step 80,
    where its run went NaN (tensorflow#42834); the line was dropped and the run 'healthy'."""
    lines = [f"Step {s:>7d} ({s / 3.4:.2f}%): loss = {3.1 - s / 100:07.5f} EER=0.00000" for s in range(10, 80, 10)]
    lines.append(f"Step      80 (23.64%): loss = {float('nan'):07.5f} EER=0.00000")
    assert lines[-1].endswith("loss = 0000nan EER=0.00000")
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 80)]


def test_every_ranks_line_at_one_batch_printing_nan_says_the_nan(tmp_path):
    """icefall under SageMaker's mpirun: eight ranks' "(5/8) Epoch 7, batch 1650, loss[loss=nan, simple_loss=inf, ...]",
    all at one batch (icefall#1869): refused as 'its 4 step lines all read as one step (1650)', the NaN unsaid."""
    lines = [f"[1,mpirank:{r},algo-1]<stderr>:2025-01-19 09:00:32,064 INFO [finetune.py:1142] ({r}/8) Epoch 7, "
             "batch 1650, loss[loss=nan, simple_loss=inf, pruned_loss=inf, ctc_loss=nan, over 3310.00 frames. ], "
             "tot_loss[over 792510.56 frames. ], batch size: 14, lr: 4.28e-03, grad_scale: 2.0" for r in (5, 0, 6, 3)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "train.log", lines))])
    assert result.exit_code == 1 and "all read as one step (1650), whose loss is nan at step 1650" in result.output


def test_nemo_0x_step_lines_above_their_loss_and_its_nan_warning(tmp_path):
    """NeMo 0.x's callbacks log "Step: 2100", then "Loss: 100.46" and "training_batch_WER: 100.00%", each a line of
    its own; its AMP run went NaN, "WARNING: Loss is NaN or inf tensor(nan, ...)" (NeMo#272): steps 1-3, 'healthy'."""
    lines = []
    for step, loss in ((2100, 100.46298217773438), (2200, 148.91075134277344), (2300, 110.98063659667969)):
        lines += [f"2020-01-20 10:56:56,094 - INFO - Step: {step}", f"2020-01-20 10:56:56,099 - INFO - Loss: {loss}",
                  "2020-01-20 10:56:56,099 - INFO - training_batch_WER:  100.00%",
                  "2020-01-20 10:56:56,099 - INFO - Step time: 0.5234289169311523 seconds"]
    lines += ["2020-01-20 11:00:16,715 - WARNING - WARNING: Loss is NaN or inf tensor(nan, device='cuda:0', "
              "grad_fn=<MeanBackward0>)"] * 3
    (run,) = discover_runs(_write(tmp_path / "nemo.log", lines))
    assert run.steps.index.tolist() == [2100, 2200, 2300]
    assert any("read at the step a line above it names" in w for w in run.warnings)
    assert [(i.kind, i.severity.value) for i in analyze_run(run).incidents] == [("nonfinite", "critical")]


def test_log_dicts_under_a_line_naming_their_step(tmp_path):
    """A DPO script printed "Step 500", then the Trainer's log dict, every 500 steps (a thread of eric-mitchell's DPO):
    the dicts were numbered 1, 2 in order. Each is read at the step above it, and said so."""
    lines = []
    for step in range(500, 3001, 500):
        lines += [f"Step {step}", f"{{'loss': {0.7 - step / 10000:.4f}, 'learning_rate': 0.0004, "
                                  f"'rewards/chosen': -2.3, 'rewards/margins': 7.0, 'epoch': {step / 3000:.2f}}}", ""]
    (run,) = discover_runs(_write(tmp_path / "dpo.log", lines))
    assert run.steps.index.tolist() == list(range(500, 3001, 500))
    assert any("each is read at the step a line above it names" in w for w in run.warnings)


def test_a_last_log_dict_cut_before_its_end_is_read_to_its_last_whole_field(tmp_path):
    """A DPO thread's paste (its Trainer log dicts) ended in "{'loss': 631.0259, 'learning_rate': 0.000496922085148784",
    cut by the window it was copied from: the dict that showed the loss explode was dropped unsaid, the run read
    as 0.69, 27.3, 16.9. It is read up to its last whole field, said; and a jump of x10 or more over the one value
    before it, not back down at the log's end, stays critical (one value has no spread to hold it to)."""
    lines = [f"{{'loss': {loss}, 'learning_rate': 0.0004998, 'rewards/chosen': 0.0, 'rewards/margins': 0.0, "
             f"'epoch': {0.06 * k:.2f}}}" for k, loss in enumerate((0.6931, 27.3212, 16.8992), 1)]
    lines.append("{'loss': 631.0259, 'learning_rate': 0.000496922085148784")
    (run,) = discover_runs(_write(tmp_path / "dpo.log", lines))
    assert run.steps["loss"].tolist() == [0.6931, 27.3212, 16.8992, 631.0259]
    assert any("the last log dict (line 4) is cut off before its end" in w for w in run.warnings)
    (spike,) = [i for i in analyze_run(run).incidents if i.kind == "loss_spike"]
    assert spike.severity == "critical" and "not recovered" in spike.message


def test_a_tables_steps_each_printed_by_every_rank_are_said(tmp_path):
    """tf_cnn_benchmarks under an MPIJob, 16 ranks without a tag: each step's table row printed 16 times, each with
    its rank's total_loss (mpi-operator#46). The rows of a step were merged to the last, unsaid; the text readers
    say it of their lines, and so does the table reader now."""
    lines = ["Done warm up", "Step\tImg/sec\ttotal_loss"]
    for step in (1, 10, 20, 30):
        lines += [f"{step}\timages/sec: 3.7 +/- 0.0 (jitter = 0.0)\t{9.2 - step / 100 + rank / 50:.3f}"
                  for rank in range(16)]
    (run,) = discover_runs(_write(tmp_path / "mpijob.log", lines))
    assert run.steps.index.tolist() == [1, 10, 20, 30]
    assert any(w.startswith("4 of 4 steps print their loss 16 times with different values") for w in run.warnings)


def _trl_ppo_dict(step: int, policy: str, value: float = 0.3) -> str:
    """A log dict of TRL's PPOTrainer (0.11+; its RLOOTrainer's alike), as the Trainer prints it: no 'loss' key, the
    losses under loss/, the sample count as 'episode', the Trainer's 'epoch' last."""
    return (f"{{'eps': 3, 'objective/kl': 0.0{step % 10}, 'objective/entropy': 61.2, 'objective/non_score_reward': "
            f"-0.0{step % 10}, 'objective/rlhf_reward': -1.{step % 10}, 'objective/scores': -1.1, 'policy/approxkl_avg': "
            f"0.001, 'policy/clipfrac_avg': 0.01, 'loss/policy_avg': {policy}, 'loss/value_avg': {value}, "
            f"'val/clipfrac_avg': 0.02, 'policy/entropy_avg': 2.1, 'val/ratio': 1.0, 'val/ratio_var': 1.4e-05, "
            f"'val/num_eos_tokens': 8, 'lr': 2.9e-06, 'episode': {64 * step}, 'epoch': {step / 100}}}")


def test_trl_ppo_dicts_without_a_loss_key_are_read_by_their_policy_loss(tmp_path):
    """TRL's PPOTrainer prints Trainer dicts that open on 'eps' and hold no 'loss' key: 'not a log format sentinel
    reads', and with --loss-col loss/policy_avg 'finds no step it reads with it'. They are the Trainer's dicts: read
    in order, the policy gradient's loss by itself (its value loss by --loss-col), a NaN in it reported."""
    lines = [_trl_ppo_dict(s, f"{0.01 - s / 1000:.4f}", value=1.0 / s) for s in range(1, 31)]
    path = _write(tmp_path / "ppo.log", lines)
    (run,) = discover_runs(path)
    assert run.source == "hf_trainer" and run.steps.index.tolist() == list(range(1, 31))
    assert run.steps["loss"].iloc[-1] == pytest.approx(-0.02)
    (run,) = discover_runs(path, LoadOptions(loss_col="loss/value_avg"))
    assert run.steps["loss"].iloc[-1] == pytest.approx(1 / 30)
    lines[-5:] = [_trl_ppo_dict(s, "nan") for s in range(26, 31)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "ppo_nan.log", lines))])
    assert result.exit_code == 0 and "loss non-finite (nan) at steps 26-30" in result.output, result.output


@pytest.mark.parametrize(("blocks", "epochs"), [("|████████  | ", 4), (" ", 6)])
def test_lightning_bars_last_frame_of_each_epoch_are_read_in_epoch_order(tmp_path, blocks, epochs):
    """A terminal (or a notebook, without the bar's blocks) keeps each epoch's last frame of Lightning 1.x's bar, each
    stopped at another count: 'Epoch 96: 80% 966/1200', 'Epoch 97: 78% 938/1200', ... were read as steps 966, 938,
    900, 945: the epochs out of order, the final loss epoch 96's, and a falling loss a spike. Each count is read in the
    epoch its bar's description names."""
    frames = [(96, 966, 0.144), (97, 938, 0.142), (98, 900, 0.143), (99, 945, 0.137), (100, 951, 0.135),
              (101, 917, 0.133)][:epochs]
    lines = []
    for epoch, count, loss in frames:
        lines.append(f"Epoch {epoch}:  {count * 100 // 1200}%{blocks}{count}/1200 [01:16<00:18, 12.63it/s, "
                     f"loss={loss}, v_num=xyj4, val/accuracy=0.866, val/loss=0.527]")
        lines.append(f"Epoch {epoch}, global step {(epoch + 1) * 900 - 1}: val/accuracy was not in top 1")
    (run,) = discover_runs(_write(tmp_path / "bar.log", lines))
    assert run.steps["loss"].tolist() == [loss for _, _, loss in frames]
    assert run.steps.index.is_monotonic_increasing  # (in epochs, or in steps counted on over them)
    assert [i.kind for i in analyze_run(run).incidents] == []


def test_lightning_bars_keep_the_epochs_a_paste_shows(tmp_path):
    """Lightning's finished bars of every other epoch ("Epoch 1: 100%|...| 172/172", then "Epoch 3:", ..., "Epoch 19:")
    were read as epochs 1..10, the best loss at "epoch 6" where the log has it at Epoch 11; a paste that cut epochs
    3-11 out of a bar redrawn every 300 steps ("Epoch 2: 16% 300/1871", then "Epoch 12: 64% 1200/1871") read epoch
    12 as epoch 3. Lightning's epochs count from 0: Epoch N is reported as epoch N + 1, as a paste from Epoch 0 is."""
    lines = [f"Epoch {epoch}: 100%|██████████| 172/172 [00:28<00:00,  6.05it/s, v_num=4, "
             f"train/loss_step={1 / (epoch + 1):.3f}, train/loss_epoch={1.2 / (epoch + 1):.3f}]"
             for epoch in range(1, 20, 2)]
    (run,) = discover_runs(_write(tmp_path / "finished.log", lines))
    assert run.steps.index.tolist() == list(range(2, 21, 2)) and run.meta["step_unit"] == "epoch"
    lines = []
    for epoch in (1, 2, 12, 13):
        lines += [f"Epoch {epoch}:  {count * 100 // 1871}%|_| {count}/1871 [17:33<1:31:56,  3.51s/it, "
                  f"loss={0.2 - 0.001 * epoch:.3f}, v_num=0]" for count in range(0, 1871, 300)]
    (run,) = discover_runs(_write(tmp_path / "cut.log", lines))
    assert run.steps.index[0] == 1871 and run.steps.index[-1] == 13 * 1871 + 1800
    assert 12 * 1871 + 300 in run.steps.index


def test_lightnings_checkpoint_message_on_a_bars_line_is_no_step(tmp_path):
    """ModelCheckpoint prints "Epoch 0, global step 51: 'val_accuracy' reached 0.02 (best 0.02), saving model to ..."
    where the bar stood drawn, on its line: its global step was read as the bar's step (two "epochs", 51 and 103, the
    bar's own draws without it dropped; a plateau from a bar's count to the global step at which it stopped)."""
    lines = []
    for count, step in ((500, None), (1007, 51), (1500, None), (2014, 103), (2015, None)):
        said = "" if step is None else (f"Epoch 0, global step {step}: 'val_accuracy' reached 0.02055 (best "
                                        f"0.02055), saving model to 'out/epoch=0-step={step}.ckpt' as top 3")
        lines.append(f"Epoch 0:  {count * 100 // 2015}%|#####| {count}/2015 [04:03<04:03,  4.14it/s, "
                     f"loss={2.0 - count / 2015:.3f}, v_num={said or '0]'}")
    (run,) = discover_runs(_write(tmp_path / "bar.log", lines))
    assert run.steps.index.tolist() == [500, 1007, 1500, 2014, 2015]


def test_a_tab_after_a_bracketed_round_is_read_as_a_space_is(tmp_path):
    """XGBoost ('[%d]\\t%s' with its metrics joined by tabs) and LightGBM (f'[{iteration}]\\t{result}') print a tab after
    the round: 'not a log format sentinel reads', where the same lines with spaces were read. The train metric is the
    loss; a NaN at a round is reported."""
    losses = [0.69 * 0.95 ** i for i in range(30)]
    xgboost = [f"[{i}]\ttrain-logloss:{v:.5f}\teval-logloss:{v * 1.05:.5f}" for i, v in enumerate(losses)]
    lightgbm = [f"[{i + 1}]\ttraining's binary_logloss: {v:g}\tvalid_1's binary_logloss: {v * 1.05:g}"
                for i, v in enumerate(losses)]
    for name, lines, first in (("xgb", xgboost, 0), ("lgb", lightgbm, 1)):
        (run,) = discover_runs(_write(tmp_path / f"{name}.log", lines))
        assert run.steps.index.tolist() == list(range(first, first + 30))
        assert run.steps["loss"].iloc[-1] == pytest.approx(losses[-1], rel=1e-4)
    xgboost[20:] = [f"[{i}]\ttrain-logloss:nan\teval-logloss:nan" for i in range(20, 30)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "xgb_nan.log", xgboost))])
    assert "loss non-finite (nan) at steps 20-29" in result.output, result.output


def test_a_loggers_month_and_day_before_its_clock_is_no_count(tmp_path):
    """Torch-Pruning's benchmark logger (detectron2's and fvcore's datefmt, '%m/%d %H:%M:%S') opens each line with
    '[04/01 21:48:48 name]: ': the date was read as a count, 4 of 1, and the epochs 0, 1, 2, ... as steps 4, 5, 6, ...
    (a reference run judged unhealthy once its loss was named). The lines are read at their epochs."""
    lines = ["[04/01 21:46:14 cifar10-global-group_sl-resnet56]: Regularizing..."]
    lines += [f"[04/01 21:{46 + e // 2:02d}:{e * 30 % 60:02d} cifar10-global-group_sl-resnet56]: Epoch {e}/100, "
              f"Acc={0.9 - e / 1000:.4f}, Train Loss={0.3 * 0.97 ** e:.4f}, lr=0.0100" for e in range(30)]
    (run,) = discover_runs(_write(tmp_path / "prune.log", lines))
    assert run.steps.index.tolist() == list(range(30)) and run.meta.get("step_unit") == "epoch"


def test_a_count_keyed_with_its_totals_name_is_counted_inside_its_epoch(tmp_path):
    """'Epoch 11, step/total_step: 55/60 91.67% Loss:0.6943' (a course's loop): the count's key named with its total's
    was read as the step, starting again each epoch, and a 100-epoch log as that many trainings appended. It is the
    count inside the epoch the line names."""
    lines = []
    for epoch in range(10, 14):
        lines += [f"Epoch {epoch}, step/total_step: {s}/60 {s / 60:.2%} Loss:{2 / (epoch + s / 60):.4f}"
                  for s in range(5, 61, 5)]
        lines += ["保存模型...", f"Epoch {epoch}, Val Loss:{4 - epoch / 100:.4f}"]
    (run,) = discover_runs(_write(tmp_path / "course.log", lines))
    assert run.steps.index[0] == 9 * 60 + 5 and run.steps.index[-1] == 13 * 60 and len(run.steps) == 48
    assert not any("trainings" in w for w in run.warnings)


def test_catboosts_console_refusal_names_learn_not_its_elapsed_total(tmp_path):
    """CatBoost prints 'N:\\tlearn: X\\ttotal: 184ms\\tremaining: 36.7s': the refusal said 'where total is what the
    training minimises, pass --loss-col total', the elapsed time, and following it read nothing. Its learn value is the
    loss function's (unless an eval_metric names another): that is the key named, and it reads."""
    lines = [f"{i}:\tlearn: {0.677 * 0.97 ** i:.7f}\ttotal: {184 + 110 * i}ms\tremaining: {36.7 - i / 10:.1f}s"
             for i in range(26)]
    path = _write(tmp_path / "catboost.log", lines)
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and "pass --loss-col learn" in result.output
    assert "--loss-col total" not in result.output
    (run,) = discover_runs(path, LoadOptions(loss_col="learn"))
    assert run.steps.index.tolist() == list(range(26))


def test_numbered_losses_are_losses_and_their_nan_is_reported(tmp_path):
    """SK-VM++ prints its two heads' losses as 'loss1u: nan, loss2u: nan' from its first line: 'its lines log iter, lr
    but no loss', the NaN unsaid. A loss word with a number after it is a loss; the first to go non-finite is read; a
    finite pair is the user's to choose between."""
    nan = [f"train: epoch 1, iter:{i * 10}, loss1u: nan, loss2u: nan, lr: 0.001" for i in range(8)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "nan.log", nan))])
    assert "loss non-finite (nan) at steps 0-70" in result.output and "loss1u" in result.output, result.output
    finite = [f"train: epoch 1, iter:{i * 10}, loss1u: {1 / (i + 1):.4f}, loss2u: {2 / (i + 1):.4f}, lr: 0.001"
              for i in range(30)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "finite.log", finite))])
    assert result.exit_code == 1 and "2 losses (loss1u, loss2u)" in result.output, result.output
    (run,) = discover_runs(tmp_path / "finite.log", LoadOptions(loss_col="loss2u"))
    assert run.steps["loss"].iloc[-1] == pytest.approx(2 / 30, abs=1e-4)


def test_deepspeech_epochs_with_several_dev_sets_are_read_in_epochs(tmp_path):
    """DeepSpeech's and Coqui STT's bars print 'Epoch N |   Training | ... | Steps: 2267 | Loss: X' at each epoch's end,
    its Steps the epoch's batches (the same number each epoch), then a Validation line per dev set: with two dev sets
    the log was read as one step, 2267, every epoch's loss but the last dropped unsaid."""
    lines = []
    for epoch in range(8):
        lines.append(f"Epoch {epoch} |   Training | Elapsed Time: 0:28:35 | Steps: 2267 | Loss: {40 / (epoch + 1):.6f}")
        for name, steps, factor in (("lingua_libre_dev.csv", 53, 30), ("cv-fr/clips/dev.csv", 91, 35)):
            lines.append(f"Epoch {epoch} | Validation | Elapsed Time: 0:00:04 | Steps: {steps} | "
                         f"Loss: {factor / (epoch + 1):.6f} | Dataset: /mnt/extracted/data/{name}")
        lines.append(f"I Saved new best validating model with loss {30 / (epoch + 1):.6f} to: /ckpt/best_dev-2267")
    (run,) = discover_runs(_write(tmp_path / "deepspeech.log", lines))
    assert run.steps.index.tolist() == list(range(8)) and run.meta.get("step_unit") == "epoch"
    assert run.steps["loss"].tolist() == pytest.approx([40 / (e + 1) for e in range(8)], rel=1e-6)
    assert run.steps["val_loss"].notna().all()


def test_records_at_one_step_are_said_where_other_lines_put_the_steps_out_of_order(tmp_path):
    """An epoch's lines whose only step key is the epoch's batch count ('Epoch 3 | Train | ... | Steps: 2267 | Loss:
    X', the same count each epoch), between dev-set lines with counts of their own: every epoch's loss at one step,
    the last kept, and nothing said (the check of several losses a step ran only where the steps came in order).
    The dev-set lines' counts start again at each evaluation: no training step; each epoch's loss is read at it."""
    lines = []
    for epoch in range(8):
        lines.append(f"Epoch {epoch} |      Train | Elapsed Time: 0:28:35 | Steps: 2267 | Loss: {40 / (epoch + 1):.6f}")
        for steps, factor in ((53, 30), (91, 35)):
            lines.append(f"Epoch {epoch} | Validation | Elapsed Time: 0:00:04 | Steps: {steps} | "
                         f"Loss: {factor / (epoch + 1):.6f} | Dataset: /data/dev{steps}.csv")
    (run,) = discover_runs(_write(tmp_path / "epochs.log", lines))
    assert run.steps.index.tolist() == list(range(8))
    assert run.steps["loss"].tolist() == pytest.approx([40 / (epoch + 1) for epoch in range(8)])


@pytest.mark.parametrize("bar", [False, True])
def test_kobert_batch_id_is_the_count_inside_the_epoch(tmp_path, bar):
    """KoBERT's NSMC notebook, copied widely: print("epoch {} batch id {} loss {} train acc {}"). 'batch id' was no
    count: the lines were numbered 1, 2, 3, ...; drawn after a tqdm bar's count on the same line, each loss was read at
    the bar's count but the first line's (before the bar), and with the count, twice. The batch id is the count
    inside the epoch; the bar's reading of the same lines goes."""
    lines = []
    for epoch in (1, 2):
        for i, batch in enumerate(range(1, 1400, 200)):
            shown = f"{i * 200 * 100 // 1473:3d}%|##   | {i * 200}/1473 [01:23<08:51,  2.40it/s]" if bar and i else ""
            lines.append(f"{shown}epoch {epoch} batch id {batch} loss {2.0 / (i + epoch):.10f} "
                         f"train acc {0.5 + i / 100:.10f}")
        lines.append(f"epoch {epoch} train acc 0.8")
    (run,) = discover_runs(_write(tmp_path / "kobert.log", lines))
    assert len(run.steps) == 14 and run.steps.index.is_monotonic_increasing
    assert run.steps["loss"].tolist() == pytest.approx([2.0 / (i + e) for e in (1, 2) for i in range(7)])
    assert run.steps.index[1] - run.steps.index[0] == 200


def test_paddlenlp_trainer_dicts_are_read_at_their_global_step(tmp_path):
    """PaddleNLP's Trainer prints the Hugging Face-like dicts with the step in them, {'loss': 0.1856, 'learning_rate':
    4.5e-05, 'global_step': 150, 'epoch': 2.0}: they were numbered 1, 2, 3, ... with a warning that they carry no
    step."""
    lines = [f"{{'loss': {0.2 - s / 10000:.4f}, 'learning_rate': 4.5e-05, 'global_step': {s}, 'epoch': {s / 75:.2f}}}"
             for s in range(10, 310, 10)]
    (run,) = discover_runs(_write(tmp_path / "paddlenlp.log", lines))
    assert run.steps.index.tolist() == list(range(10, 310, 10))
    assert not any("carry no step" in w for w in run.warnings)


def test_num_epoch_is_an_epoch_key(tmp_path):
    """OneFlow's L-BFGS example prints 'num_epoch: 1, loss: 14.48055' a line an epoch: 'not a log format sentinel
    reads' (its epoch word joined to 'num_' by an underscore)."""
    lines = ["oneflow："] + [f"num_epoch: {e}, loss: {14.5 / e:.6f}" for e in range(1, 45)]
    (run,) = discover_runs(_write(tmp_path / "oneflow.log", lines))
    assert run.steps.index.tolist() == list(range(1, 45)) and run.meta.get("step_unit") == "epoch"


def test_gluoncv_yolo3s_box_scale_loss_is_one_of_its_losses(tmp_path):
    """GluonCV's YOLOv3 prints 'ObjLoss=47.971, BoxCenterLoss=15.363, BoxScaleLoss=6.625, ClassLoss=43.281': the
    refusal named 3 losses, BoxScaleLoss taken for a setting of the loss (as loss_scale is). A setting's word before
    the loss word names a loss of it."""
    lines = [f"INFO:root:[Epoch 2][Batch {b}], LR: 1.00E-03, Speed: 31.578 samples/sec, ObjLoss={48 - b / 100:.3f}, "
             f"BoxCenterLoss=15.363, BoxScaleLoss={6.6 - b / 1000:.3f}, ClassLoss=43.281" for b in range(99, 3000, 100)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "yolo3.log", lines))])
    assert "4 losses (BoxCenterLoss, BoxScaleLoss, ClassLoss, ObjLoss)" in result.output, result.output
    (run,) = discover_runs(tmp_path / "yolo3.log", LoadOptions(loss_col="BoxScaleLoss"))
    assert run.steps["loss"].iloc[0] == pytest.approx(6.501)


def test_an_error_printed_below_zero_is_not_named_as_the_loss(tmp_path):
    """CatBoost prints its MultiClass metric as a log-likelihood, 'learn: -2.4688156' rising to -0.3: the refusal said
    'where learn is what the training minimises, pass --loss-col learn', and read so, the worst value was the best
    loss. An error the script minimises is never below 0: a key printed below it is not named."""
    lines = [f"{i}:\tlearn: {-2.47 + i / 100:.7f}\ttotal: {79 * (i + 1)}ms\tremaining: 15.7s" for i in range(30)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "catboost.log", lines))])
    assert result.exit_code == 1 and "--loss-col learn" not in result.output, result.output


def test_a_piece_of_log_history_pasted_is_read(tmp_path):
    """ms-swift#3617 pasted a stretch of trainer_state.json's log_history, beginning inside an entry: "not a log
    format sentinel reads", and --step-col/--loss-col did not help. Its whole entries are read, with a note."""
    entries = [{"epoch": round(0.78 + k / 200, 4), "grad_norm": 85.3, "learning_rate": 3.5e-06,
                "loss": round(5.2 + k / 100, 4), "step": 3720 + 20 * k, "token_acc": 0.2} for k in range(6)]
    text = ",\n".join(json.dumps(e, indent=2) for e in entries)
    path = tmp_path / "issue.log"
    path.write_text(text[text.index('"grad_norm"'):])  # from inside the first entry, as pasted
    (run,) = discover_runs(path)
    assert run.source == "hf_trainer_state" and run.steps.index.tolist() == [3720 + 20 * k for k in range(6)]
    assert run.steps["loss"].iloc[-1] == 5.25 and "a piece of a trainer_state.json's log_history" in run.warnings[0]


def test_an_epochs_results_line_is_read_where_its_bars_are_drawn_finished_alone(tmp_path):
    """Ignite's tutorial loop: each epoch's bar drawn finished ('ITERATION - loss: 0.000: 100%|...| 113/113'), once for
    the training and once more for the evaluator, then 'Training Results - Epoch: 130  Avg accuracy: 0.998 Avg loss:
    0.027': the bars' last batches were read as the epochs, a rounded 0.000 the final 'collapse' of a healthy run."""
    lines = []
    for epoch, (bar, mean) in enumerate([(1.560, 1.660), (1.348, 1.616), (1.017, 1.263), (0.512, 0.701),
                                         (0.0, 0.027)], 1):
        draw = f"ITERATION - loss: {bar:.3f}: 100%|##########| 113/113 [01:04<00:00,  6.67it/s]"
        lines += [draw, "", f"Training Results - Epoch: {epoch}  Avg accuracy: 0.353 Avg loss: {mean:.3f}", "", draw,
                  "", f"Validation Results - Epoch: {epoch}  Avg accuracy: 0.318 Avg loss: 1.720", ""]
    (run,) = discover_runs(_write(tmp_path / "fer.log", lines))
    assert run.steps["loss"].tolist() == [1.66, 1.616, 1.263, 0.701, 0.027]
    assert analyze_run(run).verdict.value == "healthy"


def test_an_epochs_line_is_read_beside_its_bar_whose_postfix_holds_the_last_batchs_loss(tmp_path):
    """A House Prices MLP: each epoch's bar 'Epoch 3/500: 100%|##| 19/19 [..., loss=0.893]' (the last batch's), then
    'epoch 3/500 - train loss: 1.1969, validation loss: 0.9084, ...': the bars were read, the best loss one batch."""
    lines = []
    for epoch, (bar, mean) in enumerate([(2.62, 5.285), (1.27, 1.6328), (0.893, 1.1969), (0.151, 1.0166),
                                         (1.09, 0.9446), (1.05, 0.8695)], 1):
        lines += [f"Epoch {epoch}/500: 100%|##########| 19/19 [00:00<00:00, 177.80batch/s, loss={bar}]",
                  f"epoch {epoch}/500 - train loss: {mean:.4f}, validation loss: 0.6312, validation R²: -9.07, "
                  "time: 0.12s"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps["loss"].tolist() == [5.285, 1.6328, 1.1969, 1.0166, 0.9446, 0.8695]


def _conv_tasnet_log(epochs: int = 6, passes: bool = True) -> list[str]:
    """Dual-Path-RNN-Pytorch's trainer (Conv-TasNet, DPRNN): its training and its validation lines print one
    format string, told apart only by the line that opens each pass."""
    def line(number: int, message: str) -> str:
        return f"20-02-03 21:36:55 [/data/trainer/trainer_Tasnet.py:{number} - INFO ] {message}"

    out = [line(66, "Building the model of Conv-Tasnet")]
    for epoch in range(1, epochs + 1):
        out.append(line(70, f"Start training from epoch: {epoch}, iter: 0"))
        for it in (100, 200, 300):
            loss = 2.0 - epoch - it / 300
            out.append(line(102, f"<epoch:{epoch}, iter:{it}, lr:1.000e-03, loss:{loss:.3f}>"))
        out.append(line(108, f"Finished *** <epoch:{epoch}, iter:346, lr:1.000e-03, loss:{1.5 - epoch:.3f}, "
                             "Total time:11.065 min> "))
        if passes:
            out.append(line(113, f"Start Validation from epoch: {epoch}, iter: 0"))
            out += [line(139, f"<epoch:{epoch}, iter:{it}, lr:1.000e-03, loss:{6.0 - epoch:.3f}>") for it in (100, 200)]
            out.append(line(145, f"Finished *** <epoch:{epoch}, iter:220, lr:1.000e-03, loss:{6.0 - epoch:.3f}, "
                                 "Total time:4.164 min> "))
    return out


def test_lines_of_evaluation_passes_opened_by_a_line_of_their_own_are_no_training_steps(tmp_path):
    """JusperLee's Conv-TasNet log: each validation pass (its count starting again) was read as training: 20
    restarts, the validation's values at the steps of the training lines they replaced. The lines between
    "Start Validation" and the next "Start training" are evaluation lines."""
    (run,) = discover_runs(_write(tmp_path / "conv-tasnet.log", _conv_tasnet_log()))
    (alone,) = discover_runs(_write(tmp_path / "train-only.log", _conv_tasnet_log(passes=False)))
    pd.testing.assert_series_equal(run.steps["loss"], alone.steps["loss"])
    assert len(run.steps) == 24 and run.steps["loss"].iloc[-1] == -4.5
    assert any("18 line(s) of evaluation passes (each opened by a line such as 'Start Validation from epoch: 1, "
               "iter: 0') read as evaluation, not training" in w for w in run.warnings)
    assert "restart" not in {i.kind for i in analyze_run(run).incidents}


def test_a_loss_read_from_a_perplexity_is_at_chance_only_over_a_vocabulary(tmp_path):
    """OpenNMT (Lua) at 'Perplexity 5.91' on an English-French model of 38,376 target words, its validation perplexity
    improving: ln 5.9 = 1.78 read as 'loss at chance level ... a uniform guess over 6 classes', unhealthy."""
    lines = [f"[05/06/17 14:50:04 INFO] Epoch 21 ; Iteration {500 * k}/1588 ; Learning rate 1.0000 ; "
             f"Source tokens/s 5272 ; Perplexity {ppl}"
             for k, ppl in enumerate([5.91, 5.99, 5.98, 5.92, 6.03, 5.95], 1)]
    report = analyze_run(discover_runs(_write(tmp_path / "train.log", lines))[0])
    assert report.verdict.value == "healthy" and not [i for i in report.incidents if i.kind == "loss_stuck"]
    # A vocabulary's ln is still chance: 10.37 = ln 32,000, a model that learned nothing.
    lines = [line.rsplit(" ", 1)[0] + f" {31900 + 20 * k}" for k, line in enumerate(lines)]
    (found,) = [i for i in analyze_run(discover_runs(_write(tmp_path / "vocab.log", lines))[0]).incidents
                if i.kind == "loss_stuck"]
    assert found.details["chance"] == 32000


def _unsloth_train(losses, grad_norm="nan", steps=20):
    lines = ["==((====))==  Unsloth 2025.8.6: Fast Qwen3 patching. Transformers: 4.55.2. vLLM: 0.8.5.post1.",
             "==((====))==  Unsloth - 2x faster free finetuning | Num GPUs used = 1",
             f"   \\\\   /|    Num examples = 12,709 | Num Epochs = 1 | Total steps = {steps}"]
    lines += [f"{{'loss': {loss}, 'grad_norm': {grad_norm}, 'learning_rate': 5e-06, 'rewards/accuracy': 0.25, "
              f"'kl': 0.0, 'epoch': {k / 100}}}" for k, loss in enumerate(losses, 1)]
    return lines + [f"{{'train_runtime': 1021.5, 'train_samples_per_second': 0.626, 'train_steps_per_second': 0.02, "
                    f"'train_loss': -3.3993273973464965e-09, 'epoch': {len(losses) / 100}}}"]


def test_unsloth_trainings_appended_to_one_log_are_runs_of_their_own(tmp_path):
    """Two GRPO trainings under Unsloth in one paste, its banner printed at each train(): read as one run, the first's
    NaN grad norm 'recovered' by the second's finite ones."""
    lines = _unsloth_train(["-0.0", "0.0"] * 10) + _unsloth_train(["0.0", "-0.0"] * 12, grad_norm="0.57", steps=24)
    runs = discover_runs(_write(tmp_path / "grpo.log", lines))
    assert [len(run.steps) for run in runs] == [20, 24]


def test_trainer_fits_each_ended_by_its_summary_dict_are_trainings_of_their_own(tmp_path):
    """An Optuna search's folds, each a trainer.train() whose stdout kept no banner, each ended by its
    '{'train_runtime': ...}' summary: read as one run of 84 steps, the finished first fit 'non-finite by then'. The
    last fit's lines printed again by a redrawn console (its same summary after them) are no training of their own."""
    def fit(losses, runtime):
        dicts = [f"{{'loss': {loss}, 'grad_norm': {'nan' if loss == 0.0 else 0.04}, 'learning_rate': 1e-4, "
                 f"'epoch': {0.35 * k:.2f}}}" for k, loss in enumerate(losses, 1)]
        return dicts + [f"{{'train_runtime': {runtime}, 'train_samples_per_second': 954.274, 'train_steps_per_second': "
                        f"59.681, 'train_loss': {sum(losses) / len(losses)}, 'epoch': 4.0}}"]
    first = fit([0.18 - k / 1000 for k in range(20)], 312.4)
    lines = first + fit([0.0] * 11, 19.9) + fit([0.0] * 11, 39.0)
    lines += lines[-3:] * 3  # (the console's reprints)
    runs = discover_runs(_write(tmp_path / "optuna.log", lines))
    assert len(runs) == 3 and len(runs[0].steps) == 20
    assert analyze_run(runs[0]).verdict.value == "healthy"


def test_a_banner_then_fits_ended_by_their_summaries_leave_no_training_of_the_preamble_alone(tmp_path):
    """The Trainer's banner once, after the lines a script printed first, then two fits each ended by its summary:
    the lines above the banner were cut off as a training of their own ('#1 logged no step')."""
    def fit(runtime):
        return [f"{{'loss': {0.5 - k / 10}, 'learning_rate': 1e-4, 'epoch': {k}.0}}" for k in range(1, 4)] + [
            f"{{'train_runtime': {runtime}, 'train_steps_per_second': 1.0, 'train_loss': 0.4, 'epoch': 3.0}}"]
    lines = ["loading model", "***** Running training *****", "  Num examples = 500"] + fit(3.1) + fit(4.2)
    runs = discover_runs(_write(tmp_path / "train.log", lines))
    assert [len(run.steps) for run in runs] == [3, 3]
    assert not any("logged no step" in w for w in runs[0].warnings)


def test_a_loss_of_minus_0_is_no_trainer_nan_filter_zero(tmp_path):
    """GRPO's loss, ~0 while the policy is the reference, logged rounded to 4 decimals: '-0.0' and '0.0' beside a
    NaN grad norm were 'the Trainer's NaN filter: the loss went non-finite from the start'. Its filter's sum is +0.0."""
    report = analyze_run(discover_runs(_write(tmp_path / "grpo.log", _unsloth_train(["-0.0", "0.0"] * 10)))[0])
    assert not [i for i in report.incidents if i.details.get("nan_filter")]
    assert [i.details["metric"] for i in report.incidents if i.kind == "nonfinite"] == ["grad_norm/total"]


def test_a_line_of_other_output_ending_in_a_percentage_is_no_progress_bar_of_a_table(tmp_path):
    """A notebook's SFT table, then its GRPO table, then an evaluation's '   Success Rate: 100.0%': the percentage
    was taken for the first table's rows' progress bar, so its later tables were not read (the GRPO run and its
    spikes at steps 100 and 150, unsaid)."""
    lines = ["Step\tTraining Loss"] + [f"{10 * k}\t{3.4 / k:.6f}" for k in range(1, 8)] + ["Unsloth: training again"]
    lines += ["Step\tTraining Loss\treward\tkl"] + [f"{10 * k}\t{0.003 + (3.39 if k == 10 else 0):.6f}\t4.4\t1.3"
                                                   for k in range(1, 47)]
    lines += ["Evaluating...", "   Success Rate: 100.0%"]
    runs = space_table.load(_write(tmp_path / "notebook.log", lines))  # (the reader a notebook's mixed output gets)
    assert [len(run.steps) for run in runs] == [7, 46]


def test_a_table_after_its_files_first_64_kb_is_found(tmp_path):
    """A Colab notebook's output: pip's install lines and a dataset's download first, Ultralytics' epoch table 230 KB
    in: 'its lines log CUDA, momentum, ping ... but no loss', its 455 epochs unread."""
    lines = [f"Requirement already satisfied: package{k} in /usr/local/lib/python3.10/dist-packages (1.{k})"
             for k in range(1000)]
    for epoch in range(1, 9):
        lines += ["      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size",
                  f"{epoch:>7}/500      2.44G      {1.1 - epoch / 50:.3f}      {4.3 - epoch / 10:.3f}      1.455"
                  f"          9        640: 100% 63/63 [00:21<00:00,  2.98it/s]"]
    path = _write(tmp_path / "notebook.log", lines)
    assert path.stat().st_size > 64 * 1024
    (run,) = discover_runs(path)
    assert run.source == "space_table" and len(run.steps) == 8


def test_a_skorch_table_reads_the_rows_whose_checkpoint_cell_is_blank(tmp_path):
    """skorch's history table: 'cp' is '+' where the epoch saved a checkpoint, blank where it did not; the rows
    with the blank cell, one cell short, were left out: 5 of 12 epochs read, the final loss epoch 8's."""
    rows = [(1, 0.5862, "+"), (2, 0.4481, "+"), (3, 0.3849, "+"), (4, 0.3242, "+"), (5, 0.2787, ""), (6, 0.2156, ""),
            (7, 0.1714, ""), (8, 0.1336, "+"), (9, 0.0950, ""), (10, 0.0738, ""), (11, 0.0596, ""), (12, 0.0476, "")]
    lines = ["  epoch    train_loss    valid_acc    valid_loss    cp     dur",
             "-------  ------------  -----------  ------------  ----  ------"]
    lines += [f"{e:>7}  {loss:>12.4f}  {0.8:>11.4f}  {0.45:>12.4f}  {cp:>4}  {2.2838:>6.4f}" for e, loss, cp in rows]
    lines.append("Stopping since valid_acc has not improved in the last 5 epochs.")
    (run,) = discover_runs(_write(tmp_path / "skorch.log", lines))
    assert run.steps["loss"].tolist() == [loss for _, loss, _ in rows]


def test_an_evaluations_batches_printed_as_the_trainings_with_a_shorter_count_are_no_training_steps(tmp_path):
    """apex's ImageNet example (ResNet-18, O2): its ProgressMeter prints the validation's batches as
    'Epoch: [0][ 99/782]' after the epoch's 'Epoch: [0][4999/5005]': read as training, two runs, a restart, and
    the validation's losses the final ones."""
    lines = []
    for epoch in range(3):
        lines += [f"Epoch: [{epoch}][{it:4d}/5005]\tLoss {5.0 - epoch - it / 5000:.4e} (5.0e+00)\tAcc@1  25.00 ( 12.26)"
                  for it in range(99, 5005, 100)]
        lines.append(f" * Train Acc@1 {12 + 20 * epoch:.3f} Train Acc@5 27.688")
        lines += [f"Epoch: [{epoch}][{it:3d}/782]\tLoss {3.9 - epoch:.4e} (3.9e+00)\tAcc@1  28.12 ( 22.33)"
                  for it in range(99, 782, 100)]
        lines.append(f" * Val Acc@1 {22 + 20 * epoch:.3f} Val Acc@5 45.598")
    (run,) = discover_runs(_write(tmp_path / "imagenet.log", lines))
    train = run.steps["loss"].dropna()
    assert len(train) == 150 and train.iloc[-1] == pytest.approx(5.0 - 2 - 4999 / 5000, abs=1e-4)
    assert any("21 line(s) counting to 782 after an epoch's lines counting to 5005" in w for w in run.warnings)
    assert analyze_run(run).verdict.value == "healthy"


def test_an_evaluations_tqdm_bar_of_a_shorter_total_after_each_training_bar_is_no_training_step(tmp_path):
    """A notebook's LSTM stemmer: each epoch's bar 'loss 4.2e-05, accuracy 1.0: 100%|#| 91780/91780 [...]', then the
    test set's 'loss 0.0431, accuracy 0.987: 100%|#| 313/313 [...]': the test losses read as training steps."""
    lines = []
    for epoch in range(5):
        lines += [f"loss {1e-4 / (epoch + 1):.6g}, accuracy 1.0: 100%|#| 91780/91780 [32:01<00:00, 47.7it/s]",
                  f"loss {0.04 - epoch / 1000:.6g}, accuracy 0.987: 100%|#| 313/313 [00:01<00:00, 200.1it/s]"]
    (run,) = discover_runs(_write(tmp_path / "stemmer.log", lines))
    assert run.steps["loss"].max() < 1e-3 and len(run.steps) == 5
    assert any("5 line(s) counting to 313 after an epoch's lines counting to 91780" in w for w in run.warnings)
    # A batch size that changed after three epochs (ResNet-50: 10010 bars an epoch, then 5005) is no evaluation.
    lines = [f"Train Epoch: {e} Loss: {6 - e / 2:.3f} Acc@1 3.6: 100%|#| {10010 if e <= 3 else 5005}/"
             f"{10010 if e <= 3 else 5005} [59:22<00:00,  1.41it/s]" for e in range(1, 9)]
    (run,) = discover_runs(_write(tmp_path / "resnet.log", lines))
    assert len(run.steps) == 8


def test_summaries_of_a_training_and_a_validation_set_named_by_the_line_above_each(tmp_path):
    """pytorch-kaldi's epoch summary (a spiking RNN's ASR run): 'Training on [...]' and 'Validating on dev_clean',
    each above a 'Loss = X | err = Y' line: both read as training steps, the validation's the final loss."""
    lines = []
    for epoch, (train, valid) in enumerate([(2.055, 1.872), (1.955, 1.772), (1.901, 1.743)], 3):
        lines += [f"{'-' * 30} Epoch {epoch:02d} / 23 {'-' * 30}", "Training train_clean_100 chunk = 1 / 1",
                  "Validating dev_clean chunk = 1 / 1", f"----- Summary epoch {epoch:02d} / 23",
                  "Training on ['train_clean_100']", f"Loss = {train} | err = 0.523", "-----",
                  "Validating on dev_clean", f"Loss = {valid} | err = 0.490", "-----",
                  "Learning rate on architecture1 = 0.001", "Elapsed time (s) = 1274", ""]
    (run,) = discover_runs(_write(tmp_path / "res.log", lines))
    assert run.steps["loss"].tolist() == [2.055, 1.955, 1.901]
    assert any("evaluation passes (each opened by a line such as 'Validating on dev_clean')" in w for w in run.warnings)


def test_evaluations_opened_again_before_the_training_leave_every_line_as_read(tmp_path):
    # transformers' Trainer opens its training once and each evaluation again: the openings do not alternate.
    lines = ["***** Running training *****"]
    for k in range(1, 5):
        lines += [f"{{'loss': {3 - k / 10:.2f}, 'learning_rate': 1e-05, 'epoch': {k / 4}}}",
                  "***** Running Evaluation *****", "  Num examples = 500",
                  f"{{'eval_loss': {3.1 - k / 10:.2f}, 'epoch': {k / 4}}}"]
    (run,) = discover_runs(_write(tmp_path / "hf.log", lines))
    assert run.steps["loss"].dropna().tolist() == [2.9, 2.8, 2.7, 2.6]
    assert not any("evaluation passes" in w for w in run.warnings)


def test_var_metric_logger_lines_are_read_by_their_mean_loss(tmp_path):
    """VAR's MetricLogger: '[Ep]: [   0/200]  [ 417/1669]  eta: 0:28:12  tlr: 2e-05  tnm: 0.16  Lm: 8.184 (8.184)  Lt:
    8.153 (8.153)': refused, its Lm and Lt taken for 'an environment's returns, an evaluation's metrics'."""
    lines = []
    for epoch in range(3):
        for it in (0, 417, 834, 1251, 1668):
            lm = 8.3 - epoch / 2 - it / 10000
            lines.append(f"[05-10 20:46:09] (github/VAR/utils/misc.py, line 314)=> [Ep]: [{epoch:4d}/200]  "
                         f"[{it:4d}/1669]  eta: 0:28:12  tlr: 2e-05  tnm: 0.16  Lm: {lm:.3f} ({lm:.3f})  "
                         f"Lt: {lm - 0.6:.3f} ({lm - 0.6:.3f})  Accm: 0.02 (0.02)  Acct: 0.02 (0.02)  time: 1.3")
        lines.append(f"[05-10 21:13:37] (github/VAR/utils/misc.py, line 336)=> [Ep]: [{epoch:4d}/200]   "
                     "Total time:      0:36:53   (1.326 s / it)")
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.source == "var" and len(run.steps) == 15 and run.steps.index[5] == 1669
    assert run.steps["loss"].iloc[0] == 8.3 and run.steps["lr"].iloc[0] == 2e-05


@pytest.mark.parametrize("redrawn", [False, True])
def test_fasttext_progress_lines_are_read_in_order(tmp_path, redrawn):
    """fastText's status line ('Progress: 0.3%  words/sec/thread: 1802641  lr: 0.099661  loss: 1.386032  eta: 0h11m'),
    redrawn in place on a terminal: 'not a log format', its loss at ln 4 on a 4-class task unsaid."""
    draws = [f"Progress: {k / 10:.1f}%  words/sec/thread: 1802641  lr: {0.1 - k / 1e5:.6f}  "
             f"loss: {1.386032 + k / 1e6:.6f}"
             f"  eta: 0h11m" for k in range(1, 13)]
    text = "\r".join(draws) + "\n" if redrawn else "\n".join(draws) + "\n"
    path = tmp_path / "train.log"
    path.write_text("Read 0M words\nNumber of words:  2013\nNumber of labels: 4\n" + text, encoding="utf-8")
    (run,) = discover_runs(path)
    assert run.source == "fasttext" and len(run.steps) == 12 and run.steps["loss"].iloc[0] == 1.386033
    assert [i.details.get("chance") for i in analyze_run(run).incidents] == [4]


def test_espnet2_epoch_results_lines_are_read_in_epochs(tmp_path):
    """ESPnet2's trainer at each epoch's end: '7epoch results: [train] ..., loss=15.307, ... [valid] loss_ctc=9.870,
    cer_ctc=nan, ..., loss=8.1': refused, 'what it logs went non-finite there' (a CER never computed)."""
    lines = [f"[host] 2023-01-30 18:47:07,107 (trainer:338) INFO: {e}epoch results: [train] iter_time=0.002, "
             f"loss_ctc={17.2 - e / 10:.3f}, loss_transducer=10.153, loss={15.3 - e / 10:.3f}, optim0_lr0=4.951e-04, "
             f"time=3 hours, 11 minutes and 16.97 seconds, [valid] loss_ctc=9.870, cer_ctc=nan, cer_transducer=0.083, "
             f"loss={8.5 - e / 20:.3f}, [att_plot] time=1.27 seconds, total_count=2" for e in range(1, 6)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "espnet2" and run.meta["step_unit"] == "epoch" and run.steps.index.tolist() == [1, 2, 3, 4, 5]
    assert run.steps["loss"].iloc[0] == 15.2 and run.steps["val_loss"].iloc[0] == 8.45
    assert analyze_run(run).verdict.value == "healthy"


def test_a_bracketed_step_after_pythons_logging_prefix_is_read(tmp_path):
    """absl through Python logging's default format: 'INFO:absl:[0] kl_div=0.17, log_cond=-1.08, loss=1.26' (a JAX
    variational model's 200 lines): 'not a log format sentinel reads'."""
    lines = [f"INFO:absl:[{k}] kl_div={0.17 + k / 1000:.4f}, log_cond={-1.08 + k / 300:.4f}, loss={1.26 - k / 200:.4f}"
             for k in range(200)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index[[0, -1]].tolist() == [0, 199] and run.steps["loss"].iloc[0] == 1.26


@pytest.mark.parametrize("prefix", ["", "#> "])
def test_luz_epoch_metrics_lines_are_read_in_epochs(tmp_path, prefix):
    """luz, R's torch trainer: 'Epoch 1/20', 'Train metrics: Loss: 0.6782', 'Valid metrics: Loss: 0.4433' (its docs knit
    each line after '#> '): 'not a log format sentinel reads'."""
    lines = []
    for epoch, (train, valid) in enumerate([(0.6782, 0.4433), (0.3705, 0.3331), (0.315, 0.2999), (0.29, 0.31)], 1):
        lines += [f"{prefix}Epoch {epoch}/20", f"{prefix}Train metrics: Loss: {train} - AUC: 0.6086      ",
                  f"{prefix}Valid metrics: Loss: {valid} - AUC: 0.61"]
    (run,) = discover_runs(_write(tmp_path / "luz.log", lines))
    assert run.source == "luz" and run.meta["step_unit"] == "epoch" and run.steps.index.tolist() == [1, 2, 3, 4]
    assert run.steps["loss"].tolist() == [0.6782, 0.3705, 0.315, 0.29] and run.steps["val_loss"].iloc[-1] == 0.31


def test_gpt2_simple_counter_lines_are_read(tmp_path):
    """gpt-2-simple (and nshepperd's gpt-2 train.py): '[{counter} | {time:2.2f}] loss={loss:2.2f} avg={avg:2.2f}',
    the counter going on from the checkpoint resumed: "not a log format", its NaN unread."""
    lines = ["Loading checkpoint checkpoint/run1/model-2000", "Loading dataset...", "Training..."]
    lines += [f"[{2000 + 10 * k} | {16.4 * k:.2f}] loss={'nan' if k >= 30 else f'{2.5 - k / 40:.2f}'} avg={2.3:.2f}"
              for k in range(1, 36)]
    lines.insert(20, "Saving checkpoint/run1/model-2170")
    (run,) = discover_runs(_write(tmp_path / "gpt2.log", lines))
    assert run.source == "gpt2_simple" and run.steps.index[:2].tolist() == [2010, 2020]
    assert run.steps["loss"].iloc[0] == 2.48 and len(run.steps) == 35
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 2300)]


def test_a_step_padded_to_its_width_is_the_step_of_its_loss(tmp_path):
    """Pyro's forecaster logs 'step {: >4d} loss = {:0.6g}': the tf reader took one space after "step", so of a
    paste of 25 lines only the 5 from step 1000 on were read (the loss at 3.6e9 at step 50 unseen)."""
    lines = [f"INFO \t step {s: >4d} loss = {v:0.6g}" for s, v in
             zip(range(0, 1250, 50), [58519, 3.61814e9, 965.5, *[2.0 - k / 25 for k in range(22)]])]
    (run,) = discover_runs(_write(tmp_path / "forecast.log", lines))
    assert run.steps.index.tolist() == list(range(0, 1250, 50)) and run.steps["loss"].iloc[1] == 3.61814e9


def test_a_spike_whose_next_row_is_far_and_back_down_recovered(tmp_path):
    """A TensorBoard download keeps a thousand rows of a long run at uneven steps: a spike at 10049 whose next row,
    247 steps on, is back down was "not recovered within 200 steps", critical, the run unhealthy."""
    rng = np.random.default_rng(3)
    steps = np.cumsum(rng.integers(5, 60, size=400))
    loss = 0.008 * (1 + 0.1 * rng.standard_normal(len(steps)))
    at = 300
    steps[at + 1:] += 247 - (steps[at + 1] - steps[at])  # the next row far on
    loss[at] = 0.0957
    rows = ["Wall time,Step,Value"] + [f"{1575618724 + s},{s},{v}" for s, v in zip(steps, loss)]
    (run,) = discover_runs(_write(tmp_path / "run-.-tag-loss.csv", rows))
    (spike,) = [i for i in analyze_run(run).incidents if i.kind == "loss_spike"]
    assert spike.step == steps[at] and spike.severity == "warning"
    assert f"recovered in 247 steps (step {steps[at + 1]})" in spike.message


def _robust_overfitting_log(prefix: bool) -> list[str]:
    """Rice et al.'s robust_overfitting trainers (and AWP's, after it): a table logged through ``logging`` with
    '%(asctime)s - %(message)s', its cells aligned by ' \\t ' and ' \\t \\t '."""
    stamp = "[2020/04/27 12:33:22] - " if prefix else ""
    lines = [f"{stamp}Namespace(attack='pgd', epochs=200, lr_max=0.1)",
             f"{stamp}Epoch \t Train Time \t Test Time \t LR \t \t Train Loss \t Train Acc \t Train Robust Loss \t "
             "Train Robust Acc \t Test Loss \t Test Acc \t Test Robust Loss \t Test Robust Acc"]
    for e in range(40):
        train, robust = 1.9 - e / 25, 2.1 - e / 30
        test_robust = 1.9 - e / 40 if e < 20 else 1.4 + (e - 20) / 20
        lines.append(f"{stamp}{e} \t 518.4 \t \t 108.2 \t \t 0.1000 \t {train:.4f} \t 0.2840 \t {robust:.4f} \t \t "
                     f"0.2006 \t \t 1.7513 \t 0.3696 \t {test_robust:.4f} \t \t 0.2595")
    return lines


@pytest.mark.parametrize("prefix", [True, False])
def test_a_table_logged_with_a_loggers_prefix_and_tabs_for_alignment_is_read(tmp_path, prefix):
    """A robust-overfitting run's log was "not a log format" (every line under '[date] - '), and without the
    prefix read with its cells shifted (the learning rate as the loss): the double tabs are alignment."""
    (run,) = discover_runs(_write(tmp_path / "output.log", _robust_overfitting_log(prefix)))
    assert run.source == "space_table" and run.steps.index.tolist() == list(range(40))
    assert run.steps["loss"].iloc[1] == 1.86 and run.steps["test robust loss"].iloc[-1] == 2.35
    assert "overfitting" in {i.kind for i in analyze_run(run).incidents}


def test_a_refused_log_that_ends_in_a_traceback_says_the_crash(tmp_path):
    """KAIR's log of a SwinIR training that crashed before its first step (a NameError after the network's
    printout) was refused for logging no loss, the crash unsaid."""
    lines = ["23-05-01 10:00:00.000 :   task: swinir_sr", "Params:",
             *[f" |  0.00{k} | -0.048 |  0.049 |  0.023 | torch.Size([64]) || layers.{k}.bias" for k in range(40)],
             "Traceback (most recent call last):", '  File "main_train_psnr.py", line 266, in <module>', "    main()",
             '  File "main_train_psnr.py", line 217, in main', "    if current_epoch % 10 == 0:",
             "NameError: name 'current_epoch' is not defined"]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "train.log", lines))])
    assert result.exit_code == 1
    assert result.output.rstrip().endswith("It ends in a crash (line 43): NameError: name 'current_epoch' is not "
                                           "defined")
    lines.append("step 1 loss 2.0")
    lines += [f"note {k}" for k in range(6)]  # a traceback gone on from: no crash at the end
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "train.log", lines))])
    assert "crash" not in result.output


def test_a_log_of_an_evaluations_loss_alone_says_so_and_the_option(tmp_path):
    """Torch-Pruning's fine-tuning logs 'Epoch 0/100, Acc=0.8868, Val Loss=0.3655, lr=0.0100' alone: "not a log
    format ... for a table", though --loss-col 'Val Loss' reads it."""
    lines = [f"[08/28 23:21:16] cifar10-resnet56 INFO: Epoch {e}/100, Acc={0.88 + e / 1000:.4f}, "
             f"Val Loss={0.36 - e / 1000:.4f}, lr=0.0100" for e in range(30)]
    path = _write(tmp_path / "prune.log", lines)
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1
    assert result.output == (f"Error: '{path}': its lines print an evaluation's loss alone (Val Loss, first on line "
                             "1), no training loss: sentinel judges a training loss; pass --loss-col 'Val Loss' to "
                             "judge the evaluation's as one, or log the training loss beside it\n")
    code, report = _analyze(str(path), "--loss-col", "Val Loss")
    assert code == 0 and report["runs"][0]["steps"] == 30


@pytest.mark.parametrize("as_json", [True, False])
def test_a_tensorboard_download_of_three_sessions_is_read_by_session_under_any_name(tmp_path, as_json):
    """TensorBoard's 'Download JSON' of a logdir written by three launches: saved as a .log it was "not a log format";
    as run-.-tag-loss.json its points were sorted by step together, the sessions' losses interleaved (a critical
    divergence on a run its author reported at 99% accuracy)."""
    points = []
    for session, (start, level) in enumerate(((2.8, 0.6), (0.6, 0.02), (0.02, 0.002))):
        points += [[1575618724.7 + 1000 * session + k, 40 + 50 * k, level + (start - level) * 0.97 ** k]
                   for k in range(80)]
    path = tmp_path / "aocr_loss.log"
    path.write_text(json.dumps(points) if as_json else
                    "Wall time,Step,Value\n" + "".join(f"{t},{s},{v}\n" for t, s, v in points))
    runs = discover_runs(path)
    assert [run.name for run in runs] == ["aocr_loss#1", "aocr_loss#2", "aocr_loss#3"]
    assert all(run.source == "tensorboard_download" and len(run.steps) == 80 for run in runs)
    assert runs[1].steps["loss"].iloc[0] == pytest.approx(0.6)
    assert not [i for run in runs for i in analyze_run(run).incidents if i.severity == "critical"]


def test_a_tensor_printed_over_two_lines_is_its_number(tmp_path):
    """A Mamba loop printing its bf16 loss: the first prints wrapped ('dtype=torch.bfloat16,' then 'grad_fn=...' on
    a line of its own), the rest NaN: refused ("its lines log cuda"), the NaN run unjudged."""
    lines = []
    for i in range(0, 20, 2):
        value = "10.4375" if i == 0 else "nan"
        tail = ",\n       grad_fn=<NllLossBackward0>)" if i == 0 else ", grad_fn=<NllLossBackward0>)"
        lines += [f"tensor({value}, device='cuda:0', dtype=torch.bfloat16{tail}",
                  f"{i} tensor({value}, device='cuda:0', dtype=torch.bfloat16{tail}"]
    (run,) = discover_runs(_write(tmp_path / "mamba.log", lines))
    assert run.steps.index.tolist() == list(range(0, 20, 2)) and run.steps["loss"].iloc[0] == 10.4375
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 2)]


def test_a_crash_that_ended_a_launch_before_the_next_one_is_that_trainings(tmp_path):
    """YOLOX appends each launch to its train_log.txt: the first crashed in its evaluation (an IndexError's
    traceback), the next launch trained on; read as two runs, both "healthy", the crash unsaid."""
    def iteration(epoch: int, it: int, loss: float) -> str:
        return (f"2021-12-04 23:41:02.640 | INFO     | yolox.core.trainer:after_iter:246 - epoch: {epoch}/300, "
                f"iter: {it}/89, mem: 5995Mb, iter_time: 0.185s, data_time: 0.001s, total_loss: {loss:.1f}, "
                f"iou_loss: 2.6, l1_loss: 0.0, conf_loss: 2.5, cls_loss: 1.0, lr: 1.000e-02, size: 416, ETA: 1:23:45")

    lines = [iteration(e, it, 9.0 - e / 2 - it / 100) for e in (1, 2, 3) for it in range(10, 90, 10)]
    lines += ["2021-12-04 23:41:25.706 | INFO     | yolox.core.trainer:after_train:184 - Training of experiment done",
              "Traceback (most recent call last):", '  File "tools/train.py", line 132, in <module>',
              "IndexError: list index out of range",
              "2021-12-05 00:00:00.000 | INFO     | yolox.core.launch - args: ..."]
    lines += [iteration(e, it, 8.0 - e / 2 - it / 100) for e in (1, 2, 3, 4) for it in range(10, 90, 10)]
    first, second = discover_runs(_write(tmp_path / "train_log.txt", lines))
    (crash,) = [i for i in analyze_run(first).incidents if i.kind == "crash"]
    assert crash.step == 258 and crash.message == (
        "the training stopped after step 258 with IndexError: list index out of range (its traceback before the "
        "log's next launch, line 26): it did not finish")
    assert not [i for i in analyze_run(second).incidents if i.kind == "crash"]


def test_a_spike_coming_back_when_a_short_log_ends_is_no_sure_damage(tmp_path):
    """fairseq's FSDP example of 10 updates: 16.48, then 25.22 after two fp16 overflows, back down to 17.56 at
    its last update: a critical "not recovered", the documented example run unhealthy."""
    losses = [16.475, 16.446, 25.22, 18.079, 23.729, 20.429, 18.965, 18.345, 18.262, 17.556]
    lines = [f'2021-03-08 12:31:36 | INFO | train_inner | {{"epoch": 1, "update": 0.0, "loss": "{loss}", '
             f'"ppl": "91120.8", "num_updates": "{k}", "lr": "2e-05", "gnorm": "20.751", "loss_scale": "4"}}'
             for k, loss in enumerate(losses, 1)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    (spike,) = [i for i in analyze_run(run).incidents if i.kind == "loss_spike"]
    assert spike.step == 3 and spike.severity == "warning"
    assert spike.message.endswith("coming back: 17.56 by the last logged step 10 (1.07x its baseline); whether it "
                                  "recovers fully is not known")


def test_a_nan_loss_no_reader_takes_beside_overflow_lines_is_said(tmp_path):
    """hysts' pytorch_image_classification under apex O1: 'Epoch 0 loss nan acc@1 0.1000' (its evaluation before
    training) and an overflow line: "no loss ... no incidents", the NaN unsaid."""
    lines = ["[2020-10-27 13:50:36] __main__ INFO: Val 0",
             "[2020-10-27 13:51:32] __main__ INFO: Epoch 0 loss nan acc@1 0.1000 acc@5 0.5002",
             "[2020-10-27 13:51:32] __main__ INFO: Train 1 0",
             "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0"]
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.warnings[-1] == ("1 line(s) print a loss non-finite that sentinel does not read as the training loss "
                                "(the first: '[2020-10-27 13:51:32] __main__ INFO: Epoch 0 loss nan'): a loss went "
                                "non-finite there")


@pytest.mark.parametrize("generator_first", [True, False])
def test_coqui_vits_reads_its_generators_numbered_total(tmp_path, generator_first):
    """Coqui's Trainer prints each optimizer's loss as loss_0, loss_1; which is the generator's changed between
    releases. The loss was 'loss_gen', the generator's adversarial term alone (2.44 of a total of 20.48)."""
    lines = []
    for k in range(1, 31):
        total, disc = 20.5 - k / 10, 3.2 + (k % 3) / 10
        generator = [f"     | > loss_gen: {2.4 + (k % 2) / 10:.5f}  (2.17)",
                     f"     | > loss_mel: {16.6 - k / 20:.5f}  (16.5)",
                     f"     | > loss_{0 if generator_first else 1}: {total:.5f}  (20.2)",
                     f"     | > grad_norm_{0 if generator_first else 1}: 459.31244  (378.8)"]
        discriminator = [f"     | > loss_disc: {disc:.5f}  (3.6)",
                         f"     | > loss_{1 if generator_first else 0}: {disc:.5f}  (3.6)",
                         f"     | > grad_norm_{1 if generator_first else 0}: 115.9  (216.1)"]
        lines += [f"   --> STEP: {k}/270 -- GLOBAL_STEP: {1061000 + k}",
                  *(generator + discriminator if generator_first else discriminator + generator),
                  "     | > step_time: 1.02200  (0.88802)", ""]
    (run,) = discover_runs(_write(tmp_path / "trainer_0_log.txt", lines))
    assert run.steps["loss"].iloc[0] == pytest.approx(20.4) and run.steps["grad_norm/total"].iloc[0] == 459.31244
    numbered = "loss_0" if generator_first else "loss_1"
    assert any(w.startswith(f"loss read from '{numbered}', the generator's total") for w in run.warnings)


def test_parallel_wavegans_generator_total_is_its_loss(tmp_path):
    """ParallelWaveGAN logs '(Step: N) train_gen_loss = X.' beside its terms and the discriminator's
    train_dis_loss: its 'train_' prefix hid the pair, a paste's refusal offered --loss-col train_adversarial_loss."""
    keys = ("train_adversarial_loss", "train_subband_spectral_convergence_loss", "train_gen_loss", "train_real_loss",
            "train_fake_loss", "train_dis_loss")
    lines = [f"[WARNING] (Step: {s}) {k} = {4.7 - s / 5000 if k == 'train_gen_loss' else 1.0:.4f}."
             for s in range(200, 5001, 200) for k in keys]
    path = _write(tmp_path / "train.log", lines)
    (run,) = discover_runs(path)
    assert run.steps["loss"].iloc[0] == pytest.approx(4.66)
    assert "warning: a GAN's run (a generator's and a discriminator's loss)" in CliRunner().invoke(
        main, ["analyze", str(path)]).output
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "paste.log", lines[:6]))])
    assert "--loss-col train_gen_loss or another of them" in result.output


def test_kaggle_notebooks_save_best_lines_are_no_loss_of_their_own(tmp_path):
    """The Kaggle notebooks' template: 'Epoch {e} - avg_train_loss: X  avg_val_loss: Y  time: Ts', then 'Epoch {e} -
    Save Best Loss: Y Model' (and '... Save Best Score: S Model'): a healthy 131-epoch run was "not a log format"."""
    lines = ["2022-05-04 10:26:49,100 INFO [Train model] start"]
    for e in range(1, 31):
        lines += [f"2022-05-04 10:40:01,819 DEBUG   Epoch {e} - avg_train_loss: {2.3 / e:.4f}  "
                  f"avg_val_loss: {2.2 / e ** 0.5:.4f} F1: 0.17  Accuracy: 0.18 time: 793s",
                  f"2022-05-04 10:40:01,819 DEBUG   Epoch {e} - Save Best Accuracy: 0.179167 Model",
                  f"2022-05-04 10:40:02,178 DEBUG   Epoch {e} - Save Best Loss: {2.2 / e ** 0.5:.4f} Model"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == list(range(1, 31)) and run.steps["loss"].iloc[1] == 1.15


def test_keras_bars_over_a_dataset_of_no_known_length_are_read_across_epochs(tmp_path):
    """Keras' bar over a tf.data pipeline of unknown length: '     23/Unknown - 0s 13ms/step - loss: 0.0640 - ...'
    (Ray AIR's Keras example): "not a log format"; with '/100' for '/Unknown' it was read."""
    lines = []
    for epoch in range(3):
        lines.append(f"Epoch {epoch + 1}/3")
        lines += [f"     {k}/Unknown - 1s 13ms/step - loss: {0.08 - epoch / 100 - k / 2000:.4f} - "
                  f"mean_squared_error: 0.0639" for k in range(1, 41)]
    (run,) = discover_runs(_write(tmp_path / "fit.log", lines))
    assert len(run.steps) == 120 and run.steps.index.is_monotonic_increasing
    assert run.steps["loss"].iloc[40] == pytest.approx(0.0695)


def test_a_dev_sets_loss_line_after_the_trainings_is_an_evaluation(tmp_path):
    """nn4nlp-code's loops print 'iter 0: train loss/word=7.6407, ...' then 'iter 0: dev loss/word=7.9544, ...':
    both read as the training loss, the dev line's kept ("printed 2 times ... every rank printing?"), a falling
    loss read as rising."""
    lines = []
    for it in range(6):
        lines += [f"started iter {it}", f"iter {it}: train loss/word={7.64 / (it + 1):.4f}, ppl=2081.2178, time=21.92s",
                  f"iter {it}: dev loss/word={7.95 + it / 5:.4f}, ppl=2848.0582, time=0.57s", "saving embedding files"]
    (run,) = discover_runs(_write(tmp_path / "cbow.log", lines))
    assert run.steps["loss"].tolist() == [round(7.64 / (it + 1), 4) for it in range(6)]
    assert not any("printed" in w for w in run.warnings)


def test_json_rows_under_a_programs_start_lines_are_read(tmp_path):
    """DNABERT logs its {"learning_rate", "loss", "step"} rows under its banner and 'N processor started !' lines:
    "not a log format", its collapse to ln 2 unsaid."""
    lines = [" " + "=" * 60, "<class 'transformers.tokenization_dna.DNATokenizer'>", "finish loading examples",
             *[f"{k} processor started !" for k in range(1, 9)]]
    lines += [json.dumps({"learning_rate": 1e-5, "loss": 0.7 - s / 4000 if s < 1500 else 0.6931, "step": s})
              for s in range(100, 3001, 100)]
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.source == "generic_table" and run.steps.index.tolist() == list(range(100, 3001, 100))
    assert "11 line(s) that are not JSON objects were skipped (first: line 1)" in run.warnings
