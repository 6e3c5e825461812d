"""Lines in which a training library says that something went non-finite, in a log whose steps
any reader reads: each is a ``nonfinite`` event naming what the line names, placed at the step
after the last record line before it (the training stopped there)."""

from __future__ import annotations

import traceback
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
import torch

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs
from sentinel.cli.main import main


def _steps(n: int = 120) -> list[str]:
    return [f"step {s} | loss {2.5 * np.exp(-s / 50) + 0.5:.4f} | lr 3.0e-04" for s in range(1, n + 1)]


def _anomaly_mode_output() -> str:
    """What a script under torch.autograd.detect_anomaly() prints when a backward makes a NaN:
    the warning with the forward call, then the traceback of the error (real messages)."""
    x = torch.tensor([0.0, 1.0], requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autograd.detect_anomaly():
                (torch.sqrt(x) * 0.0).sum().backward()
        except RuntimeError:
            error = traceback.format_exc()
    return "\n".join(str(w.message) for w in caught) + "\n" + error


def test_anomaly_modes_error_names_the_backward_function(tmp_path):
    path = tmp_path / "train.log"
    path.write_text("\n".join(_steps()) + "\n" + _anomaly_mode_output(), encoding="utf-8")
    (run,) = discover_runs(path)
    event = run.events[run.events["kind"] == "nonfinite"]
    assert event["step"].tolist() == [121] and event["module"].tolist() == ["SqrtBackward0"]
    (incident,) = analyze_run(run).incidents
    assert incident.kind == "nonfinite" and incident.severity.value == "critical"
    assert "SqrtBackward0 (backward)" in incident.message


@pytest.mark.parametrize("line, metric, module", [
    ("Loss is nan, stopping training", "loss", None),  # DeiT / MAE / ConvNeXt engine.py
    ("ValueError: Detected nan and/or inf values in `encoder.layers.3.weight`. Check your forward pass for "
     "numerically unstable operations.", None, "encoder.layers.3.weight"),  # Lightning 1.x terminate_on_nan
    ("07/01 10:00:00 - mmengine - INFO - loss become infinite or NaN!", "loss", None),
    ("Batch 57: Invalid loss, terminating training", "loss", None),  # Keras TerminateOnNaN
    ("FloatingPointError: invalid value (nan) encountered in log", None, "log"),  # JAX jax_debug_nans
    ("I20230412 11:06:48 3091 dinov2 train.py:280] NaN detected", "loss", None),  # DINOv2, then an AssertionError
    ("NaN detected in gradient of embedding.weight", None, "embedding.weight"),  # a script's own check (xLSTM's)
    ("NaN detected in parameter embedding.weight after update", None, "embedding.weight"),
    ("RuntimeError: Training loss became NaN. This may be due to invalid parameters, precision issues, or a bug "
     "in the loss computation.", "loss", None),  # OneTrainer's GenericTrainer
    ("ValueError: In epoch: 29 step: 125, loss is NAN or INF, training process cannot continue, terminating "
     "training.", "loss", None),  # MindSpore's LossMonitor
    ("ValueError: Loss is not finite and patience is exhausted. To debug, wrap `fit()` with autograd's "
     "`detect_anomaly()`, e.g.", "loss", None),  # SpeechBrain's Brain
    ("Stopping training due to NaN loss in training step", "loss", None),  # pytorch-accelerated
    ("ERROR:tensorflow:Model diverged with loss = NaN.", "loss", None),  # TensorFlow's NanTensorHook
    ("RuntimeError: Model diverged with loss = NaN.", "loss", None),  # OpenNMT-tf
    ("ValueError: Training loss is nan", "loss", None),  # RecBole
    ("ERROR 2024-05-01 12:50:44,000 trainer.py: 901: Loss is nan, attempting to stop training", "loss", None),  # SAM 2
    ("2017-11-10 10:12:11.091486: W tensorflow/core/framework/op_kernel.cc:1192] Invalid argument: Nan in summary "
     "histogram for: FeatureExtractor/MobilenetV1/Conv2d_0/weights_1", None,
     "FeatureExtractor/MobilenetV1/Conv2d_0/weights_1"),  # TensorFlow's tf.summary.histogram
    ("epoch 41 total training loss = nan", "loss", None),  # PSMNet: an epoch's sum, its steps' lines finite
    ("Epoch: 3 | mean loss: inf", "loss", None),
    ("WARNING:root:distogram loss is NaN. Skipping...", "loss", "distogram"),  # OpenFold: a term zeroed
    ("RuntimeError: ERROR: Got NaN losses 2021-10-28 23:20:46.797813", "loss", None),  # PySlowFast
    ("RuntimeError: Loss was NaN for 1 times in a row. Stopped training.", "loss", None),  # NeuralHydrology
    ("ValueError:  [x] nan loss", "loss", None),  # DDSP-SVC's solver
    ("FloatingPointError: Predicted boxes or scores contain Inf/NaN. Training has diverged.", None,
     "proposal_generator"),  # detectron2's RPN
])
def test_libraries_nonfinite_lines(tmp_path, line, metric, module):
    path = tmp_path / "train.log"
    path.write_text("\n".join(_steps() + [line]) + "\n", encoding="utf-8")
    (run,) = discover_runs(path)
    (event,) = run.events[run.events["kind"] == "nonfinite"].to_dict("records")
    assert event["step"] == 121
    if metric is not None:
        assert event["metric"] == metric
    if module is not None:
        assert event["module"] == module
    (incident,) = analyze_run(run).incidents
    assert incident.kind == "nonfinite" and (module is None or module in incident.message)


def test_an_epochs_nan_total_between_finite_step_lines_is_told(tmp_path):
    """PSMNet's loop printed "epoch 41 total training loss = nan" after each finite "Iter 496 training
    loss = 65.174": a step's NaN went into the epoch's sum, and the run was "recovered". Where the
    epoch's lines are the records themselves, their NaN is told once."""
    path = tmp_path / "train.log"
    path.write_text("".join(f"Iter {i} training loss = {60 + i % 7:.3f} , time = 2.39\n"
                            f"epoch 41 total training loss = {'nan' if i >= 510 else 2100.5}\n" for i in range(496, 530)))
    (run,) = discover_runs(path)
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.step) == ("nonfinite", 511)
    path.write_text("".join(f"Epoch {e}, average loss: {'nan' if e > 19 else 2 - e / 20}\n" for e in range(1, 22)))
    (run,) = discover_runs(path)
    assert [(i.kind, i.step, i.end_step) for i in analyze_run(run).incidents] == [("nonfinite", 20, 21)]


def test_clip_grad_norms_error_is_a_nonfinite_grad_norm(tmp_path):
    layer = torch.nn.Linear(2, 2)
    layer.weight.grad = torch.full_like(layer.weight, float("inf"))
    with pytest.raises(RuntimeError) as error:
        torch.nn.utils.clip_grad_norm_(layer.parameters(), 1.0, error_if_nonfinite=True)
    path = tmp_path / "train.log"
    path.write_text("\n".join(_steps() + [f"RuntimeError: {error.value}"]) + "\n", encoding="utf-8")
    (run,) = discover_runs(path)
    (event,) = run.events[run.events["kind"] == "nonfinite"].to_dict("records")
    assert event["metric"] == "grad_norm/total" and event["step"] == 121


def test_a_line_before_the_next_record_takes_its_step_and_a_log_without_them_has_none(tmp_path):
    lines = _steps()
    lines.insert(60, "Loss is inf, stopping training")  # a resumed run went on after it
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (run,) = discover_runs(path)
    assert run.events[run.events["kind"] == "nonfinite"]["step"].tolist() == [61]
    path.write_text("\n".join(_steps() + ["the loss is nan-free", "Loss is 0.5, stopping training"]) + "\n",
                    encoding="utf-8")
    (run,) = discover_runs(path)
    assert run.events.empty or "nonfinite" not in set(run.events["kind"])


def test_a_traceback_that_says_nan_in_words_no_event_line_knows_is_still_the_runs_end(tmp_path):
    """An error line that says NaN was left to the non-finite rule, which reads only the lines it
    knows: a script's own 'ValueError: the loss is nan at this point' ended the run unreported."""
    path = tmp_path / "train.log"
    path.write_text("\n".join(_steps() + ["Traceback (most recent call last):", '  File "train.py", line 9, in <module>',
                                          "ValueError: the loss is nan at this point"]) + "\n", encoding="utf-8")
    (run,) = discover_runs(path)
    assert run.meta["crash"]["error"] == "ValueError: the loss is nan at this point"
    # where a known line said it, the non-finite rule tells it, not a crash as well
    path.write_text("\n".join(_steps() + ["Traceback (most recent call last):", "RuntimeError: Training loss became "
                                          "NaN. This may be due to invalid parameters."]) + "\n", encoding="utf-8")
    (run,) = discover_runs(path)
    assert "crash" not in run.meta and run.events["kind"].tolist() == ["nonfinite"]


def test_a_log_of_returns_and_no_loss_says_what_its_lines_log(tmp_path):
    """CleanRL prints 'global_step=N, episodic_return=[R]' and 'SPS: N': 'not a log format sentinel
    reads' made the format look wrong, where the lines simply hold no loss."""
    path = tmp_path / "ppo.log"
    path.write_text("".join(f"global_step={58 * i}, episodic_return=[{10 + i / 10}]\nSPS: {900 + i}\n"
                            for i in range(1, 40)))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1
    assert result.output == (f"Error: '{path}': its lines log SPS, episodic_return, global_step but no loss (an "
                             "environment's returns, an evaluation's metrics: a rise of these is progress, not "
                             "divergence): sentinel judges a training loss; print or log the loss beside them\n")


@pytest.mark.parametrize("name, text, said", [
    # DeepCTR's regression example: each batch's loss and metrics, no names
    ("deepctr.log",
     "".join(f"batch: {b} {'nan' if b >= 387 else 0.62} 0.6595617 0.72703314\n" for b in range(380, 395)),
     "its lines log batch and no key named loss; 8 of its lines print a non-finite value (the first, line 8: "
     "'batch: 387 nan 0.6595617 0.72703314')"),
    # UPIT's trainer: the value glued to its timing, "train = nan(1581.14s/2500)"
    ("upit.log", "2020-02-15 00:00:31,026 [dataset.py:303 - INFO ] Processed 5000 utterances in total\n"
     "2020-02-15 00:00:31,027 [trainer.py:150 - INFO ] Loss(time/mini-batch) - Epoch  1: train = nan(1581.14s/2500) "
     "| dev = nan(152.82s/625)\n", "1 of its lines print a non-finite value (the first, line 2: "),
    # ESPnet2's skipped updates alone, a sentence's period after the value
    ("espnet.log", "".join(f"[node7:0/6] 2023-03-27 16:10:{k:02d},131 (trainer:663) WARNING: The grad norm is nan. "
                           "Skipping updating the model.\n" for k in range(10)),
     "10 of its lines print a non-finite value"),
])
def test_a_refusal_tells_values_printed_nan_that_no_name_says_what_they_are(tmp_path, name, text, said):
    path = tmp_path / name
    path.write_text(text)
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and said in result.output, result.output


def test_xlearns_table_under_its_progress_prefix_is_read_with_its_nan(tmp_path):
    """xLearn's FM table, its columns named over several words, each line under its progress ('[   10%      ]'):
    "not a log format" (the NaN unsaid, later counted in the refusal); read as a table under a prefix now."""
    path = tmp_path / "xlearn.log"
    path.write_text("[------------] Epoch      Train log_loss       Test log_loss            Test AUC\n" + "".join(
        f"[   {10 * e}%      ]     {e}                 nan                 nan            0.500000\n"
        for e in range(1, 8)))
    (run,) = discover_runs(path)
    assert run.source == "space_table" and run.steps.index.tolist() == list(range(1, 8))
    assert [(i.kind, i.step, i.end_step) for i in analyze_run(run).incidents] == [("nonfinite", 1, 7)]


def test_a_running_average_printed_non_finite_beside_finite_values_is_told_once(tmp_path):
    """DINOv2's MetricLogger prints each loss's window median, then its average since the start: "total_loss:
    6.7223 (inf)  ...  koleo_loss: 0.0315 (inf)" on every line from one step on: a step's loss went infinite
    before the lines pasted, and the run was "healthy". Told once, at the first such line's own step."""
    lines = []
    for k, step in enumerate(range(1200, 1300, 10)):
        avg = "inf" if step >= 1250 else "6.8000"
        lines.append(f"I20250104 12:12:42 90 dinov2 helpers.py:102] Training  [{step:>7d}/2500000]  eta: 40 days, "
                     f"13:22:08  lr: 0.0006 (0.0003)  total_loss: {6.73 - k / 1000:.4f} ({avg})  koleo_loss: 0.0315 "
                     f"({avg})  ibot_loss: 1.0857 (1.1301)  time: 1.2 (1.3)  data: 0.01 (0.01)  max mem: 30000")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    (run,) = discover_runs(path)
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.step, incident.severity) == ("nonfinite", 1250, "critical")
    assert "running average" in incident.message and incident.details["resolved"]
    # the ImageNet example's ProgressMeter: "Loss 3.2168 (nan)"
    lines = [f"Epoch: [11][{i:>2d}/48]\tTime 0.470 (1.206)\tData 0.076 (0.004)\tLoss {3 - i / 100:.4f} "
             f"({'nan' if i >= 30 else '3.5000'})" for i in range(1, 48)]
    path = tmp_path / "imagenet.log"
    path.write_text("\n".join(lines) + "\n")
    (run,) = discover_runs(path)
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", run.steps.index[29])]


def test_one_step_line_of_losses_each_printed_nan_with_a_period_says_so(tmp_path):
    """ParallelWaveGAN's trainer logs "(Steps: 1000) train/generator_loss = nan." a line a loss: the refusal of one
    step named its losses but not that every one was NaN (the period after each value hid it)."""
    path = tmp_path / "train.log"
    path.write_text("".join(f"2022-05-12 14:56:20,955 (train:487) INFO: (Steps: 1000) train/{key} = nan.\n"
                            for key in ("embed_loss", "spectral_convergence_loss", "generator_loss")))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and "train/generator_loss is nan" in result.output, result.output


def test_a_time_named_cost_is_not_offered_as_the_loss(tmp_path):
    """MXNet's Module.fit logs "Epoch[0] Time cost=177.4" (seconds) beside an accuracy-only metric: the refusal
    said "pass --loss-col cost", which judged epoch times as losses."""
    lines = []
    for epoch in range(5):
        lines += [f"INFO:root:Epoch[{epoch}] Batch [{b}]\tSpeed: 43383.55 samples/sec\taccuracy=0.9{b // 100}"
                  for b in range(100, 600, 100)]
        lines += [f"INFO:root:Epoch[{epoch}] Train-accuracy=0.95", f"INFO:root:Epoch[{epoch}] Time cost=17{epoch}.4",
                  f"INFO:root:Epoch[{epoch}] Validation-accuracy=0.96"]
    path = tmp_path / "mlp.log"
    path.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and "--loss-col cost" not in result.output and "but no loss" in result.output


def test_stylegans_progress_ticks_say_where_its_losses_are(tmp_path):
    """StyleGAN2-ADA prints "tick 0  kimg 0.0  time 1m 02s  sec/tick 7.5 ..." and no loss: "not a log format"
    sent the user to --step-col/--loss-col; its losses are in the run folder's stats.jsonl."""
    path = tmp_path / "log.txt"
    path.write_text("".join(f"tick {t:<5d} kimg {t * 4.0:<8.1f} time {t}m 02s       sec/tick 7.5     sec/kimg 3749.52 "
                            f"maintenance 54.4   cpumem 3.80   gpumem 10.22  augment 0.000\n" for t in range(8)))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and "StyleGAN's progress ticks" in result.output and "stats.jsonl" in result.output
