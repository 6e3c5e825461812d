"""Text-log dialects and tracker stores on fixtures built from each tool's own format string.

Every fixture logs the same twelve losses with a spike (7.5) at the eighth logged point: the
reader must find the steps, the losses and the spike's step.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest

from sentinel import metrics
from sentinel.analyze.discover import discover_runs
from sentinel.analyze.loaders import LoadOptions, textlogs
from sentinel.analyze.loaders.dialects import DEEPSPEED, LLMC
from sentinel.analyze.loaders.textlogs import pick_dialect
from sentinel.analyze.loaders.textscan import scan
from sentinel.events import EventKind

LOGS = Path(__file__).parent / "fixtures" / "logs"
LOSSES = [4.0, 3.6, 3.3, 3.1, 2.95, 2.85, 2.8, 7.5, 3.2, 2.9, 2.8, 2.75]


def _one(path):
    (run,) = discover_runs(path, LoadOptions())
    return run


@pytest.mark.parametrize(
    ("name", "source", "steps"),
    [
        ("hf_trainer.log", "hf_trainer", range(10, 121, 10)),  # from the progress bar beside each dict
        ("hf_run", "hf_trainer_state", range(10, 121, 10)),
        ("nanogpt.log", "nanogpt", range(0, 111, 10)),
        ("litgpt.log", "litgpt", range(1, 13)),
        ("torchtitan.log", "torchtitan", range(1, 13)),
        ("mmdet.log", "mmengine", range(50, 601, 50)),  # (epoch - 1) * 300 + iter
        ("fairseq.log", "fairseq", range(100, 1201, 100)),
        ("gpt_neox.log", "megatron", range(10, 121, 10)),
        ("tf_estimator.log", "tf", range(0, 1101, 100)),
        ("issue_paste.txt", "text", range(50, 601, 50)),
        ("nemo.log", "nemo", range(100, 112)),  # global_step, not the bar's count inside the epoch
        ("detectron2.log", "text", range(19, 240, 20)),  # total_loss, not a component
        ("timm.log", "timm", range(0, 551, 50)),  # epoch * 300 + update index, epochs from 0
        ("composer.log", "composer", range(10, 121, 10)),  # time/batch; the bracket restarts each epoch
        ("keras.log", "text", range(1, 13)),  # the bar's N/6 goes on across epochs
        ("mlruns", "mlflow", range(0, 111, 10)),
        ("wandb/offline-run-20240101_000000-abc123", "wandb", range(0, 56, 5)),
        ("wandb_chart_export.csv", "wandb_export", range(0, 111, 10)),  # a chart's Export > CSV
    ],
)
def test_fixture_steps_losses_and_spike(name, source, steps):
    run = _one(LOGS / name)
    assert run.source == source
    loss = run.steps[metrics.LOSS].dropna()
    assert loss.index.tolist() == list(steps)
    assert loss.tolist() == LOSSES
    assert int(loss.idxmax()) == list(steps)[7]


def test_a_chart_export_row_with_a_stray_field_is_skipped_and_said(tmp_path):
    """A row of more fields than the header (a stray comma) is one skipped row, said on every
    run of the chart; before, pandas' tokenizer error was the whole read's message."""
    lines = (LOGS / "wandb_chart_export.csv").read_text().splitlines()
    lines[3] += ",9"
    (tmp_path / "chart.csv").write_text("\n".join(lines) + "\n")
    runs = discover_runs(tmp_path / "chart.csv")
    assert runs and all("chart.csv: 1 row(s) with more fields than the header were skipped" in run.warnings
                        for run in runs)
    assert 20 not in runs[0].steps.index and 30 in runs[0].steps.index
    # A quote mark that never closes: the file is read again with quotes as text, its row dropped.
    lines = (LOGS / "wandb_chart_export.csv").read_text().splitlines()
    lines[5] = '"' + lines[5]
    (tmp_path / "chart.csv").write_text("\n".join(lines) + "\n")
    runs = discover_runs(tmp_path / "chart.csv")
    assert runs[0].source == "wandb_export" and 40 not in runs[0].steps.index and 30 in runs[0].steps.index
    assert ("chart.csv: a quote mark on line 6 opens a cell that never closes: read again with quote marks taken "
            "as text") in runs[0].warnings


def test_hf_dicts_keep_eval_apart_and_read_grad_norm_and_lr():
    run = _one(LOGS / "hf_trainer.log")
    steps = run.steps
    assert steps.loc[60, "eval_loss"] == 3.05  # the bar after the eval dict is at step 60
    assert steps["eval_loss"].count() == 1
    assert steps.loc[80, metrics.GRAD_NORM_TOTAL] == 12.0
    assert steps.loc[10, metrics.LR] == pytest.approx(5e-05 * (1 - 10 / 120))
    assert run.meta["logging_steps"] == 10 and run.warnings == []


def test_hf_dicts_without_a_bar_take_the_logging_interval_from_the_banner(tmp_path):
    text = (LOGS / "hf_trainer.log").read_bytes().decode()
    path = tmp_path / "no_bar.log"
    path.write_text(re.sub(r"\r *\d+%\|[^|\n\r]*\|[^\n\r]*", "", text), encoding="utf-8")
    (run,) = textlogs.load(path, LoadOptions())
    assert "%|" not in path.read_text()
    assert run.steps[metrics.LOSS].dropna().index.tolist() == list(range(10, 121, 10))
    assert run.steps.loc[60, "eval_loss"] == 3.05  # the eval dict joins the step before it
    assert run.meta["step_source"] == "order" and run.meta["logging_steps"] == 10 and run.warnings == []


def test_hf_dicts_without_banner_are_numbered_in_order(tmp_path):
    # As a terminal shows them at the end: the dicts stacked above the one bar left.
    text = "".join(f"\r{{'loss': {v}, 'learning_rate': 1e-05, 'epoch': {i / 9:.2f}}}\n"
                   for i, v in enumerate([2.0, 1.5, 1.25], 1))
    text += "{'loss': np.float64(1.1), 'grad_norm': tensor(0.5, device='cuda:0'), 'epoch': 0.44}\n"
    text += "\r 44%|####  | 4/9 [00:01<00:01]"
    path = tmp_path / "sft.log"
    path.write_text(text, encoding="utf-8")
    (run,) = textlogs.load(path, LoadOptions())
    assert run.steps[metrics.LOSS].tolist() == [2.0, 1.5, 1.25, 1.1]
    assert run.steps.index.tolist() == [1, 2, 3, 4]
    assert run.steps.loc[4, metrics.GRAD_NORM_TOTAL] == 0.5
    assert run.meta["step_source"] == "order" and run.meta["logging_steps"] is None
    assert any("numbered 1, 2, 3" in w for w in run.warnings)


def test_fairseq_overflows_and_loss_scale():
    run = _one(LOGS / "fairseq.log")
    steps, events = run.steps, run.events
    assert steps.loc[800, metrics.LOSS_SCALE] == 64.0 and steps.loc[900, metrics.LOSS_SCALE] == 32.0
    overflow = events[events["kind"] == EventKind.OVERFLOW.value]
    # An overflow line belongs to the next interval line; the one after the last line to the next step.
    assert overflow["step"].tolist() == [800, 900, 1201]
    assert overflow["new_scale"].tolist() == [64.0, 32.0, 16.0]
    assert steps[metrics.AMP_OVERFLOW].sum() == 3
    assert steps.loc[1200, "val_loss"] == 3.1
    assert steps.loc[1200, metrics.LOSS] == 2.75  # the epoch average (3.5) does not replace the step's loss
    assert any("given step 1201" in w for w in run.warnings)


def test_fairseq_minimum_loss_scale(tmp_path):
    path = tmp_path / "fs.log"
    path.write_text((LOGS / "fairseq.log").read_text() + "FloatingPointError: Minimum loss scale reached (0.0001). "
                    "Your loss is probably exploding.\n", encoding="utf-8")
    (run,) = textlogs.load(path, LoadOptions())
    last = run.events.iloc[-1]
    assert bool(last["min_scale_reached"]) and last["new_scale"] == 0.0001


def test_deepspeed_alone_gives_loss_scale_and_overflows_without_loss():
    run = _one(LOGS / "deepspeed.log")
    assert run.source == "deepspeed"
    assert metrics.LOSS not in run.steps.columns
    overflow = run.events[run.events["kind"] == EventKind.OVERFLOW.value]
    assert overflow["step"].tolist() == [1, 2, 3, 20, 21, 22, 23, 24, 25]  # each counted once
    assert overflow["attempted_scale"].tolist()[:2] == [65536.0, 32768.0]
    assert run.steps.loc[25, metrics.LOSS_SCALE] == 65536.0 / 2**9
    assert run.steps.loc[10, metrics.LR] == 0.0001
    assert not math.isnan(overflow["time"].iloc[0])
    assert any("no loss logged" in w for w in run.warnings)


def test_deepspeed_overflow_lines_alone_are_numbered_in_order():
    text = "".join(f"[deepspeed] OVERFLOW! Rank {r} Skipping step. Attempted loss scale: {s}, reducing to {s / 2}\n"
                   for s in (1024.0, 512.0) for r in (0, 1))
    found = scan(text, DEEPSPEED)
    assert found.steps.index.tolist() == [1, 2]
    assert found.steps[metrics.LOSS_SCALE].tolist() == [512.0, 256.0]
    assert any("numbered 1, 2, 3" in w for w in found.warnings)


def test_log4j_infinity_and_nan_are_nonfinite_events():
    run = _one(LOGS / "bigdl_log4j.log")
    assert run.steps.loc[13, metrics.LOSS] == math.inf and math.isnan(run.steps.loc[14, metrics.LOSS])
    assert run.events[run.events["kind"] == EventKind.NONFINITE.value]["step"].tolist() == [13, 14]
    assert int(run.steps[metrics.LOSS].iloc[:12].idxmax()) == 8


def test_torchtitan_colours_and_mmengine_components():
    titan = _one(LOGS / "torchtitan.log")
    assert titan.steps.loc[8, metrics.GRAD_NORM_TOTAL] == 12.0
    assert titan.steps.loc[1, "mfu"] == 39.57
    mm = _one(LOGS / "mmdet.log")
    assert mm.steps.loc[400, "loss_cls"] == pytest.approx(2.5)  # a component, not the loss
    assert mm.steps.loc[50, metrics.GRAD_NORM_TOTAL] == 1.5
    assert mm.meta["iters_per_epoch"] == 300


def test_loss_col_and_step_col_select_keys_in_text_logs(tmp_path):
    run = discover_runs(LOGS / "fairseq.log", LoadOptions(loss_col="nll_loss"))[0]
    assert run.steps[metrics.LOSS].dropna().tolist()[:2] == [3.8, 3.4]
    assert run.steps["logged_loss"].iloc[0] == 4.0
    path = tmp_path / "x.log"
    path.write_text("s:0 trl:2.5 tok:100\ns:1 trl:2.4 tok:200\n", encoding="utf-8")
    found = scan(path.read_text(), LLMC, LoadOptions(step_col="tok"))
    assert found.steps.index.tolist() == [100, 200]
    with pytest.raises(ValueError, match=r"key 'perplexity' not found in the llmc log lines; keys found: tok, trl"):
        scan(path.read_text(), LLMC, LoadOptions(loss_col="perplexity"))


@pytest.mark.parametrize("path", sorted((Path(__file__).parents[1] / "sentinel").rglob("*.py")), ids=lambda p: p.name)
def test_source_code_is_never_a_run(path):
    assert not textlogs.sniff(path)
    assert textlogs.pick_dialect(path.read_text(encoding="utf-8")) is None or path.suffix == ".py"


def test_generic_reader_needs_a_real_series(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("".join(f"step {i}: loss = TODO\n" for i in range(10)) + "step 1 loss 2.0\n", encoding="utf-8")
    assert not textlogs.sniff(path)
    path.write_text("".join(f"step {i}: loss 0.0\n" for i in range(10)), encoding="utf-8")
    assert textlogs.sniff(path)  # a loss stuck at 0 is a run to report, not a non-log

    # Its start holds no series (a long config dump, one step printed again and again): the whole
    # head is read before the log is turned down.
    dump = "".join(f"config.layer_{i}.dropout = 0.1\n" for i in range(6000)) + "step 0: loss 9.0\n" * 500
    path.write_text(dump + "".join(f"step {i}: loss {2 - i / 100}\n" for i in range(1, 50)), encoding="utf-8")
    assert len(dump) > 2 * textlogs._SERIES_PREFIX and textlogs.sniff(path)
    assert _one(path).steps.index.tolist() == list(range(50))


def test_deepspeed_only_run_is_analysed_not_rejected():
    import sentinel

    report = sentinel.analyze(LOGS / "deepspeed.log")
    (run,) = report.runs
    assert run.source == "deepspeed" and run.final_loss is None
    assert "overflow_rate" in [i.kind for i in run.incidents]


def test_a_progress_count_that_falls_back_mid_epoch_is_a_restart_not_a_new_epoch(tmp_path):
    # 1..10 of 10 then 1..4 is a new epoch; 5..7 after 4 is not (a resumed run printing again).
    counts = list(range(1, 11)) + [1, 2, 3, 4] + [2, 3, 4]
    text = "".join(f" {n}/10 [==>...] - loss: {2.0 - 0.01 * i:.4f}\n" for i, n in enumerate(counts))
    path = tmp_path / "fit.log"
    path.write_text(text, encoding="utf-8")
    run = _one(path)
    assert run.steps.index.tolist() == list(range(1, 15))
    assert run.meta["epochs_from_counter"] == 2 and run.meta["iters_per_epoch"] == 10
    assert run.steps.loc[12, metrics.LOSS] == pytest.approx(2.0 - 0.01 * 14)  # the restart's value, last per step


def test_composer_and_timm_learning_rates():
    composer = _one(LOGS / "composer.log")
    assert composer.steps[metrics.LR].tolist() == [0.0006] * 12  # "lr-DecoupledAdamW/group0"
    assert "time/batch" not in composer.steps.columns  # it is the step
    timm = _one(LOGS / "timm.log")
    assert timm.steps[metrics.LR].tolist() == [1e-3] * 12
    assert timm.meta["iters_per_epoch"] == 300


def test_composers_console_lines_indented_with_spaces_as_a_web_page_shows_them(tmp_path):
    """llm-foundry's README prints Composer's console log, its tab shown as spaces: 'reads no step line of it'."""
    text = (LOGS / "composer.log").read_text(encoding="utf-8")
    path = tmp_path / "spaces.log"
    path.write_text(text.replace("\n\t ", "\n         "), encoding="utf-8")
    pd.testing.assert_frame_equal(_one(path).steps, _one(LOGS / "composer.log").steps)


def test_composers_file_logger_lines(tmp_path):
    """Composer's FileLogger writes a line per metric, f"[metric][batch={step}]: {name}: {value} ": 'not a log
    format sentinel reads' (LLM-Shearing's NaN cross-entropy)."""
    lines = ["[hyperparameter]: lr: 0.0006 "]
    for batch in range(1, 121):
        loss = "nan" if batch == 90 else f"{3 * math.exp(-batch / 50) + 2:.4f}"
        lines += [f"[metric][batch={batch}]: time/batch: {batch} ", f"[metric][batch={batch}]: loss/train/total: {loss} ",
                  f"[metric][batch={batch}]: metrics/train/LanguageCrossEntropy: {loss} ",
                  f"[metric][batch={batch}]: lr-DecoupledAdamW/group0: 0.0006 "]
    path = tmp_path / "composer.txt"
    path.write_text("\n".join(lines) + "\n")
    run = _one(path)
    assert run.source == "composer" and run.steps.index.tolist() == list(range(1, 121))
    assert run.steps[metrics.LOSS].iloc[0] == pytest.approx(3 * math.exp(-1 / 50) + 2, abs=1e-4)
    assert math.isnan(run.steps.at[90, metrics.LOSS]) and run.steps[metrics.LR].iloc[0] == 0.0006
    assert "time/batch" not in run.steps.columns


@pytest.mark.parametrize("version", ["first", "wd_and_loss_scale", "tabs_as_spaces"])
def test_swin_transformer_lines(tmp_path, version):
    """Swin Transformer's main.py (SimMIM's, VMamba's): "Train: [E/EPOCHS][I/N]\teta ... lr L\t...
    loss X (avg)\tgrad_norm G (avg)\t...": "not a log format" (Swin-Transformer#183, #50). Epochs
    and the index count from 0; the running averages in parentheses are not the step's values."""
    lines = []
    for epoch in range(2):
        for idx in range(0, 1251, 50):
            step = epoch * 1251 + idx
            loss = "nan" if step >= 1251 + 800 else f"{6.9 - step / 1000:.4f}"
            fields = [f"Train: [{epoch}/300][{idx}/1251]", f"eta 0:07:57 lr {1e-6 * (1 + step / 100):.6f}"]
            if version == "wd_and_loss_scale":
                fields.append(" wd 0.0500")
            fields += ["time 0.6409 (0.6447)", f"loss {loss} (6.2849)", f"grad_norm {2 + idx % 100 / 1000:.4f} (inf)"]
            if version == "wd_and_loss_scale":
                fields.append("loss_scale 65536.0000 (65536.0000)")
            fields.append("mem 14764MB")
            line = "\t".join(fields) if version != "tabs_as_spaces" else "  ".join(fields)
            lines.append(f"[2022-03-14 09:08:02 swin_tiny_patch4_window7_224] (main.py 226): INFO {line}")
        lines.append(f"[2022-03-14 09:20:00 swin_tiny_patch4_window7_224] (main.py 233): INFO EPOCH {epoch} training takes 0:13:03")
        lines.append(f"[2022-03-14 09:20:01 swin_tiny_patch4_window7_224] (main.py 272): INFO Test: [0/98]\tTime 3.1 (3.1)\t"
                     f"Loss 9.9999 (9.9999)\tAcc@1 1.562 (1.562)\tAcc@5 6.250 (6.250)\tMem 14764MB")
    path = tmp_path / "log_rank0.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = _one(path)
    assert run.source == "swin"
    steps = [e * 1251 + i for e in range(2) for i in range(0, 1251, 50)]
    assert run.steps.index.tolist() == steps
    assert run.steps.loc[1251 + 750, metrics.LOSS] == pytest.approx(6.9 - 2.001)
    assert run.steps.loc[100, metrics.LR] == pytest.approx(2e-6) and run.steps.loc[50, metrics.GRAD_NORM_TOTAL] == 2.05
    assert run.steps.get(metrics.LOSS_SCALE, pd.Series(dtype=float)).eq(65536).any() == (version == "wd_and_loss_scale")
    from sentinel.analyze.analyzer import analyze_run
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 1251 + 800)]


@pytest.mark.parametrize("version", ["bar_from_0", "bar_of_epochs", "epoch_lines", "both"])
def test_gluonts_bars_and_epoch_lines(tmp_path, version):
    """GluonTS's MXNet Trainer and PyTorchTS draw a bar over each epoch's batches, its postfix the
    epoch's running mean loss: "99it [00:22, 4.39it/s, avg_epoch_loss=0.945, epoch=0]" (PyTorchTS,
    older GluonTS; pytorch-ts#39: "not a log format", its NaN from epoch 5 unseen), "50/50 [...,
    epoch=1/100, avg_epoch_loss=0.348]"; each epoch then logs "Epoch[0] Evaluation metric
    'epoch_loss'=0.347671" (gluonts#833: with its bars, "not a log format")."""
    losses = [0.945, 0.495, 0.466, 0.455, 0.431, math.nan, math.nan, math.nan]
    lines = []
    for epoch, loss in enumerate(losses):
        if version == "bar_from_0":
            lines.append(f"> 99it [00:22,  4.39it/s, avg_epoch_loss={loss:.3f}, epoch={epoch}]")
        else:
            if version in ("bar_of_epochs", "both"):
                lines.append(f"100%|██████████| 50/50 [00:05<00:00,  9.6it/s, epoch={epoch + 1}/100, avg_epoch_loss={loss:.3f}]")
            if version == "bar_of_epochs":
                continue
            lines += [f"2020-05-19 18:29:27,221 : INFO : Epoch[{epoch}] Elapsed time 1353.823 seconds",
                      f"2020-05-19 18:29:27,223 : INFO : Epoch[{epoch}] Evaluation metric 'epoch_loss'={loss:.6f}",
                      f"2020-05-19 18:29:27,245 : INFO : Epoch[{epoch + 1}] Learning rate is 0.001"]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = _one(path)
    assert run.source == "gluonts"
    # with both, the epoch lines: each epoch's mean as its trainer evaluated it
    length = {"bar_from_0": 99, "bar_of_epochs": 50, "epoch_lines": None, "both": None}[version]
    steps = list(range(8)) if length is None else [length * (e + 1) for e in range(8)]
    assert run.steps.index.tolist()[:8] == steps
    assert run.steps[metrics.LOSS].iloc[:5].tolist() == pytest.approx(losses[:5])
    from sentinel.analyze.analyzer import analyze_run
    (nan,) = [i for i in analyze_run(run).incidents if i.kind == "nonfinite"]
    assert nan.step == steps[5]


def test_tianshou_bars(tmp_path):
    """Tianshou's PPO bar: "Epoch #3: 50001it [00:40, 1248.02it/s, env_step=150000, len=200, loss=0.001,
    loss/clip=0.001, loss/ent=0.290, loss/vf=0.001, n/ep=7, n/st=2000, rew=200.00]" was read as a
    generic bar: its loss going -0.562 -> 0.001 -> -0.010 (a surrogate near 0 on either side) was a
    critical "rose, still elevated" on a run at its best reward (tianshou#449). The step is env_step,
    the run an environment's, its NaN still told."""
    draws = []
    for epoch in range(1, 6):
        for n in range(2000, 50001, 2000):
            env_step = (epoch - 1) * 50000 + n
            level = -0.562 if epoch == 1 else 0.001 * (-1) ** epoch
            loss = "nan" if epoch == 5 and n > 40000 else f"{level + (n % 7000) / 1e5:.4f}"
            draws.append(f"Epoch #{epoch}: {n + 1}it [00:40, 1248.02it/s, env_step={env_step}, len=200, loss={loss}, "
                         f"loss/clip={loss}, loss/ent=0.290, loss/vf=0.001, n/ep=7, n/st=2000, rew=200.00]")
        draws.append(f"Epoch #{epoch}: test_reward: 200.000000 ± 0.000000, best_reward: 200.000000 ± 0.000000 in #1")
    path = tmp_path / "ppo.log"
    path.write_text("\r".join(draws) + "\n", encoding="utf-8")
    run = _one(path)
    assert run.source == "tianshou" and run.steps.index[0] == 2000 and run.steps.index[-1] == 250000
    from sentinel.analyze.analyzer import analyze_run
    report = analyze_run(run)
    (said,) = [w for w in report.warnings if "a reinforcement-learning run" in w]
    assert said.endswith("non-finite values are reported")  # a whole sentence
    assert [(i.kind, i.step) for i in report.incidents] == [("nonfinite", 242000)]


@pytest.mark.parametrize("version", ["first", "now"])
def test_fuxictr_lines(tmp_path, version):
    """FuxiCTR logs "Train loss: X" once an evaluation, then "Evaluation @epoch E - batch B:" (its
    first versions: "--- B/N batches finished ---" before it and the epoch's end after it), with
    "[Metrics] ... logloss: L" of the validation between: two loss keys and no step, "not a log
    format" (AFN-AAAI-20#11, BARS#7)."""
    t = "2022-01-24 13:22:26,561 P834 INFO "
    lines = [t + "Start training: 8058 batches/epoch", t + "************ Epoch=1 start ************"]
    for epoch in range(1, 9):
        loss = "nan" if epoch >= 7 else f"{0.4616 - epoch / 50:.6f}"
        if version == "now":
            lines += [t + f"Train loss: {loss}", t + f"Evaluation @epoch {epoch} - batch 8058: ",
                      t + "[Metrics] AUC: 0.804410 - logloss: 0.447085", t + "Save best model: monitor(max): 0.804410"]
        else:
            lines += [t + "[Metrics] AUC: 0.804410 - logloss: 0.447085", t + "Save best model: monitor(max): 0.804410",
                      t + "--- 8058/8058 batches finished ---", t + f"Train loss: {loss}"]
        lines.append(t + f"************ Epoch={epoch} end ************")
    path = tmp_path / "AFN_criteo.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = _one(path)
    assert run.source == "fuxictr" and run.steps.index.tolist() == [8058 * e for e in range(1, 9)]
    assert run.steps[metrics.LOSS].iloc[0] == pytest.approx(0.4416)
    from sentinel.analyze.analyzer import analyze_run
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 8058 * 7)]


@pytest.mark.parametrize("line_ends", [True, False])
def test_efficientdet_bar_descriptions(tmp_path, line_ends):
    """Yet-Another-EfficientDet-Pytorch's bar: "Step: 37526. Epoch: 1072/2000. Iteration: 7/35. Cls loss:
    0.04101. Reg loss: 0.00000. Total loss: 0.04101:  17%|...| 6/35 [...]": the bar's count was read as
    the step and the class loss as the loss (EfficientDet#723); pasted without its line ends, the
    records glued ("Total loss: 0.0218Step: 16252. ..."), a loss of 0 was invented (EfficientDet#416)."""
    draws = []
    for step in range(16251, 16291):
        i = step - 16251 + 137
        total = "nan" if step >= 16285 else f"{0.02 - (step - 16251) / 4000:.4f}"
        description = (f"Step: {step}. Epoch: 55/100. Iteration: {i}/293. Cls loss: 0.01924. Reg loss: 0.00260. "
                       f"Total loss: {total}")
        draws += [f"{description}:  47%|████▋     | {i - 1}/293 [00:48<01:56,  4.01s/it]", f"{description}"]
    path = tmp_path / "train.log"
    path.write_text(("\n" if line_ends else "").join(draws), encoding="utf-8")
    run = _one(path)
    assert run.source == "efficientdet" and run.steps.index.tolist() == list(range(16251, 16291))
    assert run.steps[metrics.LOSS].iloc[0] == 0.02
    from sentinel.analyze.analyzer import analyze_run
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 16285)]


def _epochs_of(per_epoch: int, fmt) -> str:
    """LOSSES printed by a loop of two epochs of ``per_epoch`` logged lines: ``fmt(epoch, k, loss)``
    with k counting the line inside its epoch from 0."""
    return "".join(fmt(*divmod(n, per_epoch), loss) for n, loss in enumerate(LOSSES))


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        # PyTorch tutorials: 'Epoch [{}/{}], Step [{}/{}], Loss: {:.4f}', 600 steps an epoch, every 100
        (_epochs_of(6, lambda e, k, x: f"Epoch [{e + 1}/2], Step [{100 * (k + 1)}/600], Loss: {x:.4f}\n"),
         range(100, 1201, 100)),
        # a hand-written print without the epoch's length: it is the largest count seen
        (_epochs_of(6, lambda e, k, x: f"Epoch: {e + 1}, Batch: {100 * (k + 1)}, Loss: {x:.4f}\n"),
         range(100, 1201, 100)),
        # the CIFAR-10 tutorial: f'[{epoch + 1}, {i + 1:5d}] loss: {running_loss / 2000:.3f}'
        (_epochs_of(6, lambda e, k, x: f"[{e + 1}, {2000 * (k + 1):5d}] loss: {x:.3f}\n"), range(2000, 24001, 2000)),
        # ... printed through Python logging's default format (npuichigo/waveglow: "INFO:pytorch:[1,   1] loss: X")
        (_epochs_of(6, lambda e, k, x: f"INFO:pytorch:[{e + 1}, {2000 * (k + 1):5d}] loss: {x:.3f}\n"),
         range(2000, 24001, 2000)),
        # the MNIST example: 'Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}' (samples, from 0)
        (_epochs_of(6, lambda e, k, x: f"Train Epoch: {e + 1} [{640 * k}/3840 ({100 * k / 6:.0f}%)]\tLoss: {x:.6f}\n"),
         range(0, 7041, 640)),
        # "ep" as the epoch's key, the count inside the epoch from 0
        (_epochs_of(6, lambda e, k, x: f"ep: {e}, batch: {20 * k}, lr: 0.001000, loss: {x:.4f}\n"),
         range(0, 221, 20)),
        # epochs from 0, a global step beside them: the step as it is
        (_epochs_of(6, lambda e, k, x: f"epoch {e} | step {10 * (6 * e + k)} | loss {x:.2f}\n"), range(0, 111, 10)),
    ],
)
def test_hand_written_epoch_loops(tmp_path, text, steps):
    path = tmp_path / "train.log"
    path.write_text("Starting training\n" + text, encoding="utf-8")
    run = _one(path)
    assert run.source == "text"
    assert run.steps.index.tolist() == list(steps)
    assert run.steps[metrics.LOSS].tolist() == LOSSES


def test_lightning_rich_progress_bar_as_a_terminal_draws_it():
    # A real Trainer.fit with RichProgressBar on a terminal (tests/scripts/lightning_rich_bar.py):
    # colour codes, "\r" redraws, "Epoch e/E ━━━╸━━ n/N 0:00:01 • 0:00:02 29.8it/s train_loss: x
    # val_loss: y"; the loss NaN from global step 70 (the bar's count 71) on.
    run = _one(LOGS / "lightning_rich.txt")
    steps = run.steps
    assert run.source == "text" and run.warnings == []
    assert steps.index.tolist() == list(range(91))  # epoch * 30 + the count inside the epoch
    assert steps.loc[1, metrics.LOSS] == 1.46 and steps.loc[70, metrics.LOSS] == 0.317
    assert steps[metrics.LOSS].loc[71:].isna().all() and steps[metrics.LOSS].loc[1:70].notna().all()
    assert list(run.meta["logged_nan"][metrics.LOSS]) == list(range(71, 91))
    assert steps.loc[30, "val_loss"] == 1.035 and steps.loc[60, "val_loss"] == 0.944
    # The last draws show val_loss 0.944, then nan: the step ends with the nan it printed last.
    assert math.isnan(steps.loc[90, "val_loss"]) and list(run.meta["logged_nan"]["val_loss"]) == [90]
    # Every draw repeats the last evaluation's result: the sanity check's and three epochs' (4), not 62 draws.
    from sentinel.analyze.analyzer import analyze_run

    (val,) = [i for i in analyze_run(run).incidents if i.details.get("metric") == "val_loss"]
    assert val.details["evaluations"] == 4 and "at 1 of 4 evaluations (step 90)" in val.message


@pytest.mark.parametrize("first", [1, 10])
def test_a_resumed_keras_fit_numbers_its_steps_from_its_first_epoch(tmp_path, first):
    # fit(initial_epoch=9) prints "Epoch 10/50" first: its steps go on from 9 epochs of 6 batches,
    # not from 1 (they were numbered as if the run had started there).
    text = (LOGS / "keras.log").read_text(encoding="utf-8")
    text = text.replace("Epoch 1/2", f"Epoch {first}/50").replace("Epoch 2/2", f"Epoch {first + 1}/50")
    run = _one(_write_text(tmp_path / "keras_resumed.log", text))
    assert run.steps[metrics.LOSS].dropna().index.tolist() == list(range(6 * (first - 1) + 1, 6 * (first - 1) + 13))
    assert run.meta.get("first_epoch") == (first if first > 1 else None)
    # One epoch of a resumed fit alone too.
    single = _one(_write_text(tmp_path / "one_epoch.log", text.split(f"Epoch {first + 1}/50")[0]))
    assert single.steps.index[0] == 6 * (first - 1) + 1


def _write_text(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def test_the_last_pick_is_reused_only_for_the_same_head_and_need():
    """A file's sniff and its load pick for the same head: the second asks the first's answer;
    another head, or another number of lines needed (a short paste), is picked afresh."""
    two = "iter 1: loss 2.5, time 9.1ms\niter 2: loss 2.4, time 9.0ms\n"
    assert pick_dialect(two) is None  # two lines: under nanoGPT's own minimum
    assert pick_dialect(two, least=2).name == "nanogpt"  # a paste named on its own needs two
    assert pick_dialect(two) is None
    assert pick_dialect(two + "iter 3: loss 2.3, time 9.0ms\n").name == "nanogpt"


def test_the_series_check_read_by_record_shapes_agrees_with_the_whole_dialect(tmp_path):
    """_is_series reads a head's start with the fallback's record shapes alone (none of the values
    beside them, no evaluation lines) before the whole head with the whole dialect: on every
    fixture text and on seeded samples of eleven formats, the answer is the whole dialect's."""
    import sys

    from sentinel import metrics
    from sentinel.analyze.loaders.dialects import FALLBACKS
    from sentinel.analyze.loaders.textlog import read_text
    from sentinel.analyze.loaders.textscan import scan

    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from text_log_samples import write_all

    texts = [read_text(p) for p in [*sorted(LOGS.glob("*.log")), *sorted(LOGS.glob("*.txt")),
                                    *write_all(tmp_path, steps=300)]]
    texts.append("".join(f"step {i} | loss {2 + i / 1000:.3f}\n" for i in range(3)) +
                 "".join(f"step {i} | val_loss 2.1\n" for i in range(3, 9)))  # few records, more evaluations
    for text in texts:
        for dialect in FALLBACKS:
            steps = scan(text, dialect).steps
            whole = len(steps.index) >= dialect.min_records and metrics.LOSS in steps.columns
            assert textlogs._is_series(text, dialect) == whole
    assert len(textlogs._records_only(FALLBACKS[0]).shapes) < len(FALLBACKS[0].shapes)
