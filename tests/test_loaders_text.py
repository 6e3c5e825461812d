"""Text-log loaders on small hand-written snippets: Megatron, llm.c / modded-nanogpt, tables."""

from __future__ import annotations

import json
import math
import os
import time

import numpy as np
import pytest

from sentinel import metrics
from sentinel.analyze.loaders import LoadOptions, generic_table, llmc, megatron, textlogs
from sentinel.analyze.loaders.textlog import SETTLED_SECONDS
from sentinel.events import EventKind

MINE = (megatron, llmc, generic_table)


def _iter_line(it: int, loss: str, scale: float = 4096.0, gn: str = "0.329", skipped: int = 0, nan: int = 0) -> str:
    return (
        f" iteration {it:>8d}/  159576 | consumed samples: {it * 96:>12d} | elapsed time per iteration (ms): 9.5 |"
        f" learning rate: 5.998E-05 | global batch size:    96 | lm loss: {loss} | loss scale: {scale} |"
        f" grad norm: {gn} | num zeros: 0.0 | number of skipped iterations: {skipped:>3d} |"
        f" number of nan iterations: {nan:>3d} |"
    )


def _overflow(attempted: float, reduced: float, rank: int = 0) -> str:
    return (
        "[2022-01-19 13:09:13,305] [INFO] [stage_1_and_2.py:1644:step] [deepscale] OVERFLOW! "
        f"Rank {rank} Skipping step. Attempted loss scale: {attempted}, reducing to {reduced}"
    )


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _claimed_by(path) -> list[str]:
    return [m.NAME for m in MINE if m.sniff(path)]


# --------------------------------------------------------------------------- megatron


def test_megatron_lines_among_noise(tmp_path):
    text = "\n".join([
        "using world size: 8, data-parallel size: 1",
        "> building GPT model ...",
        "time (ms) | forward-compute: 123.4 | backward-compute: 456.7",
        _iter_line(7000, "2.733351E+00"),
        "------------------------------------------------------------",
        " validation loss at iteration 7000 | lm loss value: 2.800000E+00 | lm loss PPL: 1.644465E+01 |",
        "------------------------------------------------------------",
        _overflow(4096.0, 2048.0),
        _overflow(4096.0, 2048.0, rank=1),  # the same overflow seen by another rank: counted once
        _iter_line(7001, "2.750000E+00", scale=2048.0, gn="0.5"),
        _iter_line(7002, "nan", scale=2048.0, gn="inf", skipped=1, nan=1),
        "",
    ])
    path = _write(tmp_path, "train.out", text)
    assert _claimed_by(path) == ["megatron"]
    (run,) = megatron.load(path, LoadOptions())
    steps = run.steps
    assert steps.index.tolist() == [7000, 7001, 7002]
    assert steps.loc[7000, metrics.LOSS] == 2.733351
    assert steps.loc[7001, metrics.LOSS] == 2.75
    assert math.isnan(steps.loc[7002, metrics.LOSS])
    assert steps[metrics.LR].tolist() == [5.998e-05] * 3
    assert steps[metrics.LOSS_SCALE].tolist() == [4096.0, 2048.0, 2048.0]
    assert steps.loc[7001, metrics.GRAD_NORM_TOTAL] == 0.5
    assert steps[metrics.AMP_SKIPPED_STEPS].tolist() == [0.0, 0.0, 1.0]
    assert steps[metrics.AMP_OVERFLOW].tolist() == [0.0, 1.0, 0.0]
    assert steps.loc[7000, "val_loss"] == 2.8
    assert steps.loc[7000, "iter_time_ms"] == 9.5

    events = run.events
    overflow = events[events["kind"] == EventKind.OVERFLOW.value]
    # The DeepSpeed line precedes the 7001 line (it is printed inside 7001's optimizer step);
    # Megatron's own skipped-iteration count at 7002 is a second overflow.
    assert overflow["step"].tolist() == [7001, 7002]
    first = overflow.iloc[0]
    assert (first["attempted_scale"], first["new_scale"], first["source"]) == (4096.0, 2048.0, "deepspeed")
    assert not math.isnan(first["time"])  # the log's own timestamp
    nonfinite = events[events["kind"] == EventKind.NONFINITE.value]
    assert nonfinite["step"].tolist() == [7002, 7002, 7002]
    assert set(nonfinite["metric"].dropna()) == {metrics.LOSS, metrics.GRAD_NORM_TOTAL}
    assert run.warnings == []


def test_megatron_bf16_line_without_loss_scale_and_missing_loss(tmp_path):
    # BLOOM-style prefix, times in seconds, no loss scale; a diverged step without lm loss.
    line = (
        "[default7]: iteration    31214/  115311 | consumed samples:     47768496 | elapsed time per iteration (s): 106.46 |"
        " learning rate: 5.279E-05 | global batch size:  2048 | lm loss: 2.198845E+00 | grad norm: 0.242 |"
        " num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 19.238 |"
    )
    no_loss = line.replace("31214/", "31215/").replace("lm loss: 2.198845E+00 | ", "")
    path = _write(tmp_path, "bloom.txt", line + "\n" + no_loss + "\n")
    (run,) = megatron.load(path, LoadOptions())
    assert metrics.LOSS_SCALE not in run.steps.columns
    assert run.steps.loc[31214, "iter_time_ms"] == pytest.approx(106460.0)
    assert run.steps.loc[31214, metrics.SAMPLES_PER_SEC] == 19.238
    assert math.isnan(run.steps.loc[31215, metrics.LOSS])
    assert run.steps.loc[31215, metrics.GRAD_NORM_TOTAL] == 0.242
    assert run.events.empty


def test_megatron_cut_line_keeps_complete_fields(tmp_path):
    full = _iter_line(10, "3.0E+00")
    cut = _iter_line(11, "2.9E+00")
    cut = cut[: cut.index("grad norm") + len("grad norm: 0.3")]  # killed mid-write
    path = _write(tmp_path, "cut.log", full + "\n" + cut)
    (run,) = megatron.load(path, LoadOptions())
    assert run.steps.loc[11, metrics.LOSS] == 2.9
    assert math.isnan(run.steps.loc[11, metrics.GRAD_NORM_TOTAL])  # "0.3" of "0.329" is not trusted
    assert run.steps.loc[10, metrics.GRAD_NORM_TOTAL] == 0.329
    assert any("cut off" in w for w in run.warnings)


def test_megatron_restart_keeps_last_occurrence_and_trailing_overflow(tmp_path):
    text = "\n".join([
        _iter_line(1, "5.0E+00"),
        _iter_line(2, "9.0E+00"),
        "resuming from checkpoint at iteration 1",
        _iter_line(2, "4.0E+00"),
        _overflow(2048.0, 1024.0),
    ]) + "\n"
    path = _write(tmp_path, "restart.log", text)
    (run,) = megatron.load(path, LoadOptions())
    assert run.steps[metrics.LOSS].tolist() == [5.0, 4.0]
    assert run.events["step"].tolist() == [3]  # after the last iteration line: the next one
    assert bool(run.events["step_estimated"].iloc[0])
    assert len(run.warnings) == 2


def test_nemo2_progress_line_uses_global_step(tmp_path):
    line = (
        "[NeMo I 2025-01-01 10:00:00 nemo_logging:393] Training epoch 0, iteration 9/99 | lr: 1.499e-05 |"
        " global_batch_size: 32 | global_step: 9 | reduced_train_loss: 10.37 | train_step_timing in s: 0.9 |"
    )
    path = _write(tmp_path, "nemo.log", "noise\n" + line + "\n")
    assert _claimed_by(path) == ["megatron"]
    (run,) = megatron.load(path, LoadOptions())
    assert run.steps.index.tolist() == [9]
    assert run.steps.loc[9, metrics.LOSS] == 10.37
    assert run.steps.loc[9, metrics.LR] == 1.499e-05
    assert "global_step" not in run.steps.columns


def _nanotron_line(step: int, loss: str, grad_norm: str, tokens: str = "32.8K") -> str:
    # LoggerWriter.add_scalars_from_list: "iteration: N / M" then " | tag: human_format(value)".
    return (f"12/05/2023 15:20:14 [INFO|DP=0|PP=0|TP=0|ip-26-0-160-225]: iteration: {step} / 200 | "
            f"consumed_tokens: {tokens} | elapsed_time_per_iteration_ms: 5.76K | tokens_per_sec: 5.69K | "
            f"global_batch_size: 128 | lm_loss: {loss} | lr: 1e-05 | model_tflops_per_gpu: 0.41 | "
            f"grad_norm: {grad_norm} | cuda_memory_allocated: 1.13G")


def test_nanotron_iteration_lines_with_human_format_numbers(tmp_path):
    lines = ["[INFO|DP=0|PP=0|TP=0]: Config: ...", _nanotron_line(1, "10.8", "0.0967", "16.4K"),
             _nanotron_line(2, "10.7", "1.02"), _nanotron_line(3, "nan", "infE"),
             _nanotron_line(4, "10.5", "0.88", "1.2M")]
    path = _write(tmp_path, "nanotron.log", "\n".join(lines) + "\n")
    assert _claimed_by(path) == ["megatron"]
    (run,) = megatron.load(path, LoadOptions())
    steps = run.steps
    assert steps.index.tolist() == [1, 2, 3, 4]
    assert steps.loc[1, metrics.LOSS] == 10.8 and math.isnan(steps.loc[3, metrics.LOSS])
    assert steps[metrics.GRAD_NORM_TOTAL].tolist()[:2] == [0.0967, 1.02]
    assert steps.loc[3, metrics.GRAD_NORM_TOTAL] == math.inf  # human_format(inf) is "infE"
    assert steps["consumed_tokens"].tolist() == [16400.0, 32800.0, 32800.0, 1.2e6]
    assert steps.loc[1, "cuda_memory_allocated"] == 1.13e9
    assert steps.loc[1, metrics.LR] == 1e-05
    assert run.events["kind"].tolist() == ["nonfinite", "nonfinite"]  # the loss and the grad norm
    assert run.events["step"].tolist() == [3, 3]


# --------------------------------------------------------------------------- llm.c / modded-nanogpt


def test_llmc_log_with_val_points_and_noise(tmp_path):
    text = "\n".join([
        "s:0 tel:11.0092",
        "s:0 trl:11.0091 lr:0.000001 norm:15.37",
        "some warning printed by a library",
        "",
        "s:1 trl:10.9598 lr:0.000002 norm:15.24",
        "s:2 trl:nan lr:0.000003 norm:inf",
        "s:3 tel:9.5",
        "",
    ])
    path = _write(tmp_path, "main.log", text)
    assert _claimed_by(path) == ["llmc"]
    (run,) = llmc.load(path, LoadOptions())
    steps = run.steps
    assert steps.index.tolist() == [0, 1, 2, 3]
    assert steps.loc[0, metrics.LOSS] == 11.0091
    assert steps.loc[0, "val_loss"] == 11.0092
    assert steps.loc[1, metrics.LR] == 0.000002
    assert steps.loc[1, metrics.GRAD_NORM_TOTAL] == 15.24
    assert math.isnan(steps.loc[3, metrics.LOSS]) and steps.loc[3, "val_loss"] == 9.5
    assert run.events["kind"].tolist() == [EventKind.NONFINITE.value] * 2
    assert run.events["step"].tolist() == [2, 2]
    assert run.name == tmp_path.name  # "main" says nothing; the directory names the run


def test_modded_nanogpt_lines_after_printed_source(tmp_path):
    source = "\n".join(f"    x = {i}  # training script printed at the top of the log" for i in range(400))
    text = "\n".join([
        source,
        'print0(f"step:{step}/{train_steps} val_loss:{val_loss:.4f}")',
        "=" * 80,
        "step:0/3000 val_loss:10.8258 train_time:0ms step_avg:nanms",
        "step:1/3000 train_loss:10.8258 train_time:29103ms step_avg:nanms",
        "step:2/3000 train_loss:10.1 train_time:29.5s step_avg:nanms",
        "",
    ])
    path = _write(tmp_path, "0b2c.txt", text)
    assert _claimed_by(path) == ["llmc"]
    (run,) = llmc.load(path, LoadOptions())
    assert run.steps.index.tolist() == [0, 1, 2]
    assert run.steps[metrics.LOSS].tolist()[1:] == [10.8258, 10.1]
    assert run.steps.loc[0, "val_loss"] == 10.8258
    assert run.steps.loc[1, "train_time_ms"] == 29103.0
    assert run.steps.loc[2, "train_time_ms"] == 29500.0
    assert run.meta["train_steps"] == 3000


def test_llmc_truncated_last_line_is_dropped(tmp_path):
    path = _write(tmp_path, "run.log", "s:0 trl:3.2559 lr:0.0006 norm:0.24\ns:1 trl:3.2")
    (run,) = llmc.load(path, LoadOptions())
    assert run.steps.index.tolist() == [0]
    assert any("no line end" in w for w in run.warnings)


def test_llmc_only_val_lines_judge_the_validation_loss_with_warning(tmp_path):
    path = _write(tmp_path, "val.log", "step:0/10 val_loss:4.0\nstep:10/10 val_loss:3.0\n")
    (run,) = llmc.load(path, LoadOptions())
    assert run.steps[metrics.LOSS].tolist() == [4.0, 3.0] and "val_loss" not in run.steps.columns
    assert run.warnings == ["no training-loss lines: the validation loss is judged instead"]


# --------------------------------------------------------------------------- tables


def test_csv_aliases_and_other_numeric_columns(tmp_path):
    text = "Iteration,lm loss,Learning Rate,grad norm,note,tokens\n10,3.5,1e-3,0.9,ok,100\n20,3.25,1e-3,1.1,ok,200\n"
    path = _write(tmp_path, "run.csv", text)
    assert _claimed_by(path) == ["generic_table"]
    (run,) = generic_table.load(path, LoadOptions())
    steps = run.steps
    assert steps.index.tolist() == [10, 20]
    assert steps.columns.tolist() == [metrics.LOSS, metrics.LR, metrics.GRAD_NORM_TOTAL, "tokens"]
    np.testing.assert_array_equal(steps[metrics.LOSS].to_numpy(), [3.5, 3.25])
    assert steps.loc[20, metrics.GRAD_NORM_TOTAL] == 1.1



def test_a_repeated_column_name_is_numbered_not_a_crash(tmp_path):
    path = _write(tmp_path, "run.csv", "step,loss,loss,lr\n0,2.5,9.0,1e-3\n1,2.25,8.0,1e-3\n")
    (run,) = generic_table.load(path, LoadOptions())
    assert run.steps.columns.tolist() == [metrics.LOSS, metrics.LR, "loss.1"]
    assert run.steps[metrics.LOSS].tolist() == [2.5, 2.25] and run.steps["loss.1"].tolist() == [9.0, 8.0]

def test_tsv_with_explicit_columns(tmp_path):
    text = "t\tnll\tval_nll\n0\t5.0\t\n1\t4.0\t4.5\n"
    path = _write(tmp_path, "run.tsv", text)
    assert _claimed_by(path) == []  # nothing recognisable: discovery must not claim it
    (run,) = generic_table.load(path, LoadOptions(step_col="t", loss_col="NLL"))
    assert run.steps.index.tolist() == [0, 1]
    assert run.steps[metrics.LOSS].tolist() == [5.0, 4.0]
    assert run.steps.loc[1, "val_nll"] == 4.5


def test_missing_loss_column_names_columns_and_fix(tmp_path):
    path = _write(tmp_path, "run.csv", "step,score,acc\n0,5.0,0.1\n")  # (an "nll" column is a loss: read)
    with pytest.raises(ValueError, match=r"no loss column among: step, score, acc; name it with --loss-col"):
        generic_table.load(path, LoadOptions())
    with pytest.raises(ValueError, match=r"column 'perplexity' not found; available: step, score, acc"):
        generic_table.load(path, LoadOptions(loss_col="perplexity"))


def test_jsonl_train_and_val_rows_merge_by_step(tmp_path):
    rows = [
        {"step": 10, "wallclock": 3.6, "train_loss": 13.9, "lr": 0.04, "tag": "train"},
        {"step": 20, "train_loss": 13.2, "lr": 0.08, "opt": {"grad_norm": 2.0}},
        {"step": 20, "val_loss": 9.3},
        {"epoch": 1, "val_loss": 1.0},  # no step: skipped
        {"step": 30, "train_loss": 6.3, "lr": 0.12, "flag": True},
    ]
    text = "\n".join(json.dumps(r) for r in rows) + "\nnot json\n" + '{"step": 40, "train_lo'
    path = _write(tmp_path, "metrics.jsonl", text)
    assert _claimed_by(path) == ["generic_table"]
    (run,) = generic_table.load(path, LoadOptions())
    steps = run.steps
    assert steps.index.tolist() == [10, 20, 30]
    assert steps[metrics.LOSS].tolist() == [13.9, 13.2, 6.3]
    assert steps.loc[20, "val_loss"] == 9.3
    assert steps.loc[20, "opt/grad_norm"] == 2.0
    assert "flag" not in steps.columns and "tag" not in steps.columns
    assert any("2 line(s) that are not JSON" in w for w in run.warnings)
    assert any("without a numeric 'step'" in w for w in run.warnings)


def test_unicode_bom_crlf_and_blank_lines(tmp_path):
    text = "\ufeffstep,loss,größe\r\n\r\n0,2.5,1\r\n1,2.25,2\r\n\r\n"
    path = _write(tmp_path, "ünïcode run.csv", text)
    assert _claimed_by(path) == ["generic_table"]
    (run,) = generic_table.load(path, LoadOptions())
    assert run.steps[metrics.LOSS].tolist() == [2.5, 2.25]
    assert run.steps["größe"].tolist() == [1.0, 2.0]
    assert run.name == "ünïcode run"
    log = _write(tmp_path, "x.log", "s:0 trl:2.5 lr:0.1 norm:1.0 ✓ \u2028 note\ns:1 trl:2.4 lr:0.1 norm:1.0\n")
    (run,) = llmc.load(log, LoadOptions())
    assert run.steps[metrics.LOSS].tolist() == [2.4]  # the decorated line is noise, not a record


def test_csv_truncated_last_line_is_dropped(tmp_path):
    path = _write(tmp_path, "run.csv", "step,loss,lr\n1,2.0,0.1\n2,1.9,0.1\n3,1.8")
    (run,) = generic_table.load(path, LoadOptions())
    assert run.steps.index.tolist() == [1, 2]
    assert any("no line end" in w for w in run.warnings)


@pytest.mark.parametrize(
    "content",
    [
        "# Notes\n\nThe loss went up at step 100.\n",
        '{\n  "lr": 1.0,\n  "max_iters": 5000\n}',
        "folder,file,label,onset_step\na,b,stable,\n",
        "",
        "\x00\x01binary" * 10,
        "iteration 5 of the plan | nothing: here\n",
    ],
)
def test_foreign_files_are_not_claimed(tmp_path, content):
    path = _write(tmp_path, "thing.txt", content)
    assert _claimed_by(path) == []
    assert _claimed_by(tmp_path) == []  # a directory is never a text log


def test_gpt_neox_prints_a_loss_of_zero_for_an_interval_it_skipped_whole(tmp_path):
    """GPT-NeoX divides the losses of the iterations it took by max(1, interval - skipped): an fp16
    run whose every iteration overflowed prints 'lm_loss: 0.000000E+00' beside 'number of skipped
    iterations: 10'. Read as a loss: a collapse to 0 'the model sees its targets', a loss stuck
    at 0 and a critical incident per logged step; it is no loss, the iterations went NaN."""
    from sentinel.analyze.analyzer import analyze_run

    lines = []
    for it in range(10, 3010, 10):
        broken = it >= 2000
        loss = "0.000000E+00" if broken else f"{3 + 5 * math.exp(-it / 400) + 0.03 * math.sin(it):.6E}"
        lines.append(f" samples/sec: 290.1 | iteration {it:8d}/  320000 | elapsed time per iteration (ms): 1739.1 |"
                     f" learning rate: 7.867E-05 | approx flops per GPU: 142.9TFLOPS | lm_loss: {loss} |"
                     f" loss scale: {1.0 if broken else 65536.0} | number of skipped iterations: {10 if broken else 0:3d} |"
                     f" number of nan iterations: {10 if broken else 0:3d} |")
    (run,) = megatron.load(_write(tmp_path, "neox.log", "\n".join(lines) + "\n"))
    assert run.steps[metrics.LOSS].notna().sum() == 199 and run.steps[metrics.LOSS].last_valid_index() == 1990
    assert "101 iteration line(s) print a loss of 0" in " ".join(run.warnings)
    incidents = analyze_run(run).incidents
    assert not [i for i in incidents if i.kind in ("loss_collapse", "loss_stuck")]
    (nonfinite,) = [i for i in incidents if i.kind == "nonfinite"]
    assert (nonfinite.step, nonfinite.end_step) == (2000, 3000)
    # a loss of 0 where no iteration was skipped is the loss printed
    lines = [line.replace("number of skipped iterations:  10", "number of skipped iterations:   0") for line in lines]
    (run,) = megatron.load(_write(tmp_path, "zero.log", "\n".join(lines) + "\n"))
    assert run.steps[metrics.LOSS].loc[2000:].eq(0.0).all()


def test_megatron_leaves_out_a_nan_loss_it_took(tmp_path):
    """Megatron prints a loss only where its interval's average is above 0: a NaN average is left
    out, the line keeping its ``grad norm: nan`` and ``number of skipped iterations: 0``
    (Megatron-DeepSpeed). Those iterations were taken, so the loss was NaN there: a critical
    non-finite loss, not "no loss printed yet (fp16 warm-up)". An interval skipped whole (the
    warm-up's) prints none either, and is no NaN."""
    from sentinel.analyze.analyzer import analyze_run

    lines = [_iter_line(it, "", scale=2.0 ** 32 / 2 ** (it // 10), skipped=10).replace(" lm loss:  |", "")
             for it in (10, 20)]
    lines += [_iter_line(it, f"{3 + math.exp(-it / 300):.6E}") for it in range(30, 1010, 10)]
    lines += [_iter_line(it, "", gn="nan").replace(" lm loss:  |", "") for it in range(1010, 1060, 10)]
    (run,) = megatron.load(_write(tmp_path, "train.log", "\n".join(lines) + "\n"))
    assert run.steps[metrics.LOSS].loc[:20].isna().all() and run.steps[metrics.LOSS].loc[1010:].isna().all()
    assert run.meta["logged_nan"]["loss"] == list(range(1010, 1060, 10))
    assert any("5 iteration line(s) print no loss though their iterations were taken (first at 1010)" in w
               for w in run.warnings)
    (nonfinite,) = [i for i in analyze_run(run).incidents if i.kind == "nonfinite" and i.severity == "critical"]
    assert (nonfinite.step, nonfinite.end_step) == (1010, 1050) and "loss non-finite" in nonfinite.message


def test_nan_iterations_at_neighbouring_lines_are_one_incident(tmp_path):
    """'number of nan iterations: 2' on eleven interval lines in a row, the loss printed finite
    (the other iterations'): one critical incident over the stretch, not one per line."""
    from sentinel.analyze.analyzer import analyze_run

    lines = [_iter_line(it, f"{3 + math.exp(-it / 300):.6E}", nan=2 if 500 <= it <= 600 or it == 800 else 0)
             for it in range(10, 1010, 10)]
    (run,) = megatron.load(_write(tmp_path, "nan.log", "\n".join(lines) + "\n"))
    found = [i for i in analyze_run(run).incidents if i.kind == "nonfinite"]
    assert [(i.step, i.end_step, i.details["count"]) for i in found] == [(500, 600, 11), (800, 800, 1)]
    assert found[0].message.startswith("non-finite values recorded at steps 500-600 (11 logged steps)")


def test_megatron_loss_col_picks_another_field_as_printed_or_by_key(tmp_path):
    path = _write(tmp_path, "train.out", "\n".join(_iter_line(i, "2.5", gn=str(0.1 * i)) for i in (1, 2, 3)) + "\n")
    for name in ("grad norm", metrics.GRAD_NORM_TOTAL):
        (run,) = megatron.load(path, LoadOptions(loss_col=name))
        assert run.steps[metrics.LOSS].tolist() == pytest.approx([0.1, 0.2, 0.3])
    (run,) = megatron.load(path, LoadOptions(loss_col="lm loss"))
    assert run.steps[metrics.LOSS].tolist() == [2.5, 2.5, 2.5]
    with pytest.raises(ValueError, match="no field 'mtp loss' on the iteration lines; --loss-col takes"):
        megatron.load(path, LoadOptions(loss_col="mtp loss"))


@pytest.mark.parametrize("name,content,loader", [
    ("paste.txt", "".join(f"step {s} loss {3 - s / 10}\n" for s in range(1, 6)) + "step 6 loss nan", "text"),
    ("run.csv", "step,lr,loss\n1,0.1,2.0\n2,0.1,1.9\n3,0.1,nan", "table"),
])
def test_a_settled_file_without_a_final_line_end_keeps_its_last_line(tmp_path, name, content, loader):
    # A log pasted into a file rarely ends with a line end, and its last line is often the NaN.
    path = _write(tmp_path, name, content)
    old = time.time() - 2 * SETTLED_SECONDS
    os.utime(path, (old, old))
    (run,) = (textlogs if loader == "text" else generic_table).load(path, LoadOptions())
    assert np.isnan(run.steps[metrics.LOSS].iloc[-1]) and len(run.steps) == content.count("\n") + (loader == "text")
    assert not any("no line end" in w for w in run.warnings)
    # Written just now: a last line that ends in "nan" is whole all the same (a paste saved a
    # moment ago was called healthy), one that ends in a digit may be half written.
    os.utime(path)
    (run,) = (textlogs if loader == "text" else generic_table).load(path, LoadOptions())
    assert np.isnan(run.steps[metrics.LOSS].iloc[-1]) and not any("no line end" in w for w in run.warnings)
    cut = _write(tmp_path, "cut_" + name, content.replace("nan", "1.7"))
    (run,) = (textlogs if loader == "text" else generic_table).load(cut, LoadOptions())
    assert len(run.steps) == content.count("\n") - (loader == "table")
    assert any("no line end" in w and "read once the file has not changed" in w for w in run.warnings)


@pytest.mark.parametrize("name,content,steps", [
    # A CR-only file (classic Mac line ends) being written: each "\r" ends a line.
    ("mac.log", "".join(f"step {s} | loss {3 - s / 100:.4f}\r" for s in range(1, 61)), 60),
    # A progress bar captured live: redraws end in "\r", the draw being written is cut.
    ("bar.log", "".join(f"Epoch 0: {s * 5 // 3:3d}%|##    | {s}/60 [00:0{s % 10}<00:10, 10.0it/s, loss={3 - s / 100:.3f}]\r"
                        for s in range(1, 60)) + "Epoch 0: 100%|######| 60/60 [00:06<00:00, 10.0it/s, loss=2.", 59),
])
def test_a_bare_carriage_return_ends_a_line_of_a_file_being_written(tmp_path, name, content, steps):
    # Before, only "\n" ended a line here: the whole file (or the epoch's whole bar) was one
    # unfinished last line and was skipped.
    path = _write(tmp_path, name, content)
    (run,) = textlogs.load(path, LoadOptions())
    assert len(run.steps) == steps and run.steps.index[-1] == steps
    assert any("no line end" in w for w in run.warnings) == (name == "bar.log")


@pytest.mark.parametrize("order", ["in order", "out of order"])
def test_a_step_printed_twice_ends_with_what_it_printed_last_a_nan_included(order):
    from sentinel.analyze.loaders.dialects import LLMC
    from sentinel.analyze.loaders.textscan import scan

    # A step printed again: finite, then nan (loss at step 5); nan, then finite (step 6).
    lines = ["s:4 trl:2.5", "s:5 trl:2.4", "s:5 trl:nan", "s:6 trl:nan", "s:6 trl:2.2", "s:7 trl:2.1"]
    if order == "out of order":  # the other merge path: records not in step order
        lines = lines[-1:] + lines[:-1]
    found = scan("\n".join(lines) + "\n", LLMC)
    loss = found.steps[metrics.LOSS]
    assert math.isnan(loss.loc[5]) and loss.loc[6] == 2.2 and loss.loc[4] == 2.5
    assert list(found.meta["logged_nan"][metrics.LOSS]) == [5]  # the mark goes with the value it came with


def test_a_last_line_of_terminal_codes_alone_is_no_cut_record(tmp_path):
    from sentinel.analyze.loaders.dialects import GENERIC
    from sentinel.analyze.loaders.textscan import scan

    text = "".join(f"step {i} loss {3 - i / 10}\n" for i in range(8))
    assert scan(text + "\x1b[?25h", GENERIC).warnings == []  # rich shows the cursor again at the end
    assert "has no line end" in scan(text + "step 8 loss 2.", GENERIC).warnings[0]


def test_a_log_with_a_crash_s_zero_padding_or_stray_bytes_is_still_read(tmp_path):
    # A machine that crashed while the log grew leaves a block of NUL bytes where the last writes
    # were lost; the resumed process appends after it (often with no line end before).
    before = "".join(f"step {s} loss {3 - s / 1000:.4f}\n" for s in range(0, 500, 10))
    after = "".join(f"step {s} loss {2.5 - s / 10000:.4f}\n" for s in range(500, 1000, 10))
    path = tmp_path / "train.log"
    path.write_bytes(before.encode()[:-7] + b"\x00" * 4096 + after.encode() + bytes(range(1, 256)) + b"\n")
    os.utime(path, (1e9, 1e9))
    (run,) = textlogs.load(path, LoadOptions())
    steps = run.steps[metrics.LOSS].dropna().index.tolist()
    assert steps == list(range(0, 490, 10)) + list(range(500, 1000, 10))  # 490's line was cut by the crash
    assert textlogs.sniff(path)
    # A NUL among the first bytes is a binary file's (a record length, a magic number): not text.
    path.write_bytes(b"\x18\x00\x00\x00\x00\x00\x00\x00" + before.encode())
    assert not textlogs.sniff(path)
    # A log that starts with a hole of NULs: truncated while its writer kept its offset
    # (logrotate's copytruncate). It was "not a log format".
    path.write_bytes(b"\x00" * 11363 + after.encode())
    (run,) = textlogs.load(path, LoadOptions())
    assert run.steps[metrics.LOSS].index.tolist() == list(range(500, 1000, 10))
    # Zeros, then more binary: still not text.
    path.write_bytes(b"\x00" * 64 + bytes(range(0, 256)) * 4)
    assert not textlogs.sniff(path)


@pytest.mark.parametrize("prefix", ["[default{r}]:", "[rank{r}]:", "[rank{r}]:[titan] 2025-01-01 10:00:00,000 - root - INFO - "])
def test_ranks_interleaved_by_a_launcher_are_read_as_one_rank(tmp_path, prefix):
    # torchrun --tee (or torchtitan's logger on every rank) interleaves the ranks' lines, each
    # rank printing the loss of its own shard: read together they alternate, a spike every step.
    lines = []
    for s in range(1, 301):
        pair = [prefix.format(r=r) + f"step: {s}  loss: {(3 - s / 200) * (1.5 if r else 1.0):.4f}" for r in (0, 1, 2)]
        lines += pair if s % 2 else pair[::-1]
    lines.insert(0, "W1203 10:00:00.000 torch/distributed/run.py:793] Setting OMP_NUM_THREADS")
    path = _write(tmp_path, "train.log", "\n".join(lines) + "\n")
    (run,) = textlogs.load(path, LoadOptions())
    assert run.steps[metrics.LOSS].tolist() == [round(3 - s / 200, 4) for s in range(1, 301)]
    assert any(w.startswith("3 ranks' output interleaved (0, 1, 2): rank 0's lines are read") for w in run.warnings)
    # One rank's lines alone (the usual log): read as they are, nothing said.
    path = _write(tmp_path, "rank0.log", "\n".join(l for l in lines if "0]:" in l) + "\n")
    (run,) = textlogs.load(path, LoadOptions())
    assert len(run.steps) == 300 and not any("ranks" in w for w in run.warnings)
    # Every rank prints its start-up lines, one rank (not the lowest) the records: that rank's are read.
    start = [prefix.format(r=r) + "> initializing torch distributed ..." for r in (0, 1, 2)]
    path = _write(tmp_path, "rank2.log", "\n".join(start + [l for l in lines if "2]:" in l]) + "\n")
    (run,) = textlogs.load(path, LoadOptions())
    assert run.steps[metrics.LOSS].tolist() == [round((3 - s / 200) * 1.5, 4) for s in range(1, 301)]
    assert not any("ranks" in w for w in run.warnings)
    # Ranks 1 and 2 print records, rank 0 only its start-up: rank 1's are read.
    path = _write(tmp_path, "ranks12.log", "\n".join(start + [l for l in lines if "0]:" not in l]) + "\n")
    (run,) = textlogs.load(path, LoadOptions())
    assert run.steps[metrics.LOSS].tolist() == [round((3 - s / 200) * 1.5, 4) for s in range(1, 301)]
    assert any(w.startswith("2 ranks' output interleaved (1, 2): rank 1's lines are read") for w in run.warnings)


def _quickstart_lines(scale: float = 1.0) -> list[str]:
    """The PyTorch quickstart's train loop output: each line starts with its record."""
    lines = []
    for epoch in range(1, 4):
        lines += [f"Epoch {epoch}", "-------------------------------"]
        lines += [f"loss: {scale * (2.3 - 0.1 * epoch - b / 64000):>7f}  [{b:>5d}/60000]"
                  for b in range(0, 60000, 6400)]
        lines += ["Test Error: ", f" Accuracy: {60 + epoch}.0%, Avg loss: {2.2 - 0.1 * epoch:>8f} ", ""]
    return lines


@pytest.mark.parametrize("prefix", ["[rank{r}]:", "[default{r}]:", "[1,{r}]<stdout>:",
                                    "(RayTrainWorker pid={pid}, ip=10.0.0.1) ", "\x1b[36m(train_fn pid={pid})\x1b[0m "])
def test_a_launchers_prefix_is_taken_off_lines_that_start_with_their_record(tmp_path, prefix):
    # torchrun's "[rank0]:", mpirun's tag, Ray's worker prefix before the quickstart's
    # "loss: 2.30  [    0/60000]": "not a log format sentinel reads" before.
    plain = textlogs.load(_write(tmp_path, "plain.log", "\n".join(_quickstart_lines()) + "\n"))[0]
    one = "\n".join(prefix.format(r=0, pid=3047) + line for line in _quickstart_lines()) + "\n"
    path = _write(tmp_path, "one.log", "2024-06-01 10:00:00 INFO worker_group.py:1 -- Started\n" + one)
    assert textlogs.sniff(path)
    (run,) = textlogs.load(path)
    assert run.steps[metrics.LOSS].to_dict() == plain.steps[metrics.LOSS].to_dict() and len(run.steps) == 30
    assert not any("interleaved" in w for w in run.warnings)
    # Two ranks (or workers, the later-numbered first) print their own shard's loss: the first read, said.
    pairs = [[prefix.format(r=0, pid=3047) + a, prefix.format(r=1, pid=1002) + b]
             for a, b in zip(_quickstart_lines(), _quickstart_lines(scale=1.5))]
    (run,) = textlogs.load(_write(tmp_path, "two.log", "\n".join(sum(pairs, [])) + "\n"))
    assert run.steps[metrics.LOSS].to_dict() == plain.steps[metrics.LOSS].to_dict()
    assert any(("ranks' output interleaved (0, 1): rank 0's" if "pid" not in prefix else
                "processes' output interleaved (pid 3047, 1002): pid 3047's") in w for w in run.warnings)
    # A paste cut in the middle: rank 0 prints four loss lines, fewer than a reader needs alone, rank
    # 1 five. Rank 0 still prints records: its lines are read, said (Ray: the first to print, 1002).
    records = [line for line in sum(pairs, []) if "loss:" in line][1:10]
    path = _write(tmp_path, "cut.log", "\n".join(records) + "\n")
    assert textlogs.sniff(path, least=3) and textlogs.sniff(path) == ("pid" in prefix)  # (five of 1002)
    (run,) = textlogs.load(path, least=3)
    first = plain.steps[metrics.LOSS].tolist()[1:5] if "pid" not in prefix else \
        textlogs.load(_write(tmp_path, "scaled.log", "\n".join(_quickstart_lines(scale=1.5)) + "\n"))[0].steps[
            metrics.LOSS].tolist()[:5]
    assert run.steps[metrics.LOSS].tolist() == first and any("interleaved" in w for w in run.warnings)


def test_rays_note_on_a_line_printed_alike_by_several_workers_is_no_field(tmp_path):
    lines = _quickstart_lines()
    lines[3] += " [repeated 3x across cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable)"
    lines[5] += " [repeated 3x across cluster]"
    path = _write(tmp_path, "ray.log", "".join(f"(RayTrainWorker pid=3047, ip=10.0.0.1) {line}\n" for line in lines))
    (run,) = textlogs.load(path)
    assert len(run.steps) == 30 and run.steps[metrics.LOSS].iloc[1] == pytest.approx(2.2 - 6400 / 64000, abs=1e-6)


@pytest.mark.parametrize("prefix", ["[1,{r}]<stdout>:", "[{r}]<stdout>:", "{r}: ", " {r}: ",
                                    "[2024-01-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank {r}] ",
                                    "2023-08-25 19:14:58,332 INFO [train.py:878] ({r}/4) "])
def test_ranks_marked_by_other_launchers_are_read_as_one_rank(tmp_path, prefix):
    # mpirun --tag-output, Horovod, srun --label (right-aligned past nine tasks), DeepSpeed's
    # log_dist on every rank, icefall's "(rank/world)" after its logger's place: each rank's loss
    # its own shard's (icefall's was "print their loss 2 times ...", the last rank's of each read).
    lines = ["srun: job 1234 queued and waiting for resources"]
    for s in range(1, 201):
        pair = [prefix.format(r=r) + f"step {s} | loss {(3 - s / 200) * (1.5 if r else 1.0):.4f}" for r in (0, 1)]
        lines += pair if s % 3 else pair[::-1]
    path = _write(tmp_path, "train.log", "\n".join(lines) + "\n")
    (run,) = textlogs.load(path, LoadOptions())
    assert run.steps[metrics.LOSS].tolist() == [round(3 - s / 200, 4) for s in range(1, 201)]
    assert any(w.startswith("2 ranks' output interleaved (0, 1): rank 0's lines are read") for w in run.warnings)
    assert not any("print their loss 2 times" in w for w in run.warnings)


def test_a_step_before_each_line_is_no_rank(tmp_path):
    # "N: " numbering the lines once each is no srun label: nothing is blanked.
    path = _write(tmp_path, "train.log", "".join(f"{s}: step {s} | loss {3 - s / 200:.4f}\n" for s in range(0, 200)))
    (run,) = textlogs.load(path, LoadOptions())
    assert len(run.steps) == 200 and not any("ranks" in w for w in run.warnings)


def test_megatron_under_torchrun_tee_reads_the_rank_that_prints_the_iterations(tmp_path):
    # torchrun --tee 3: every rank prints its start-up, the last pipeline stage the iteration lines.
    lines = [f"[default{r}]:> initializing torch distributed ..." for r in range(4)]
    lines += [f"[default3]: iteration {i * 10:8d}/    1000 | consumed samples: {i * 80:10d} | elapsed time per "
              f"iteration (ms): 512.3 | learning rate: "
              f"1.000E-04 | global batch size:     8 | lm loss: {5 - i / 100:.6E} | loss scale: 65536.0 | "
              f"grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |"
              for i in range(1, 61)]
    path = _write(tmp_path, "megatron.log", "\n".join(lines) + "\n")
    assert megatron.sniff(path)
    (run,) = megatron.load(path, LoadOptions())
    assert run.source == "megatron" and run.steps.index.tolist() == list(range(10, 610, 10))
    assert not any("ranks" in w for w in run.warnings)


def test_a_log_pasted_on_one_line_is_sniffed_on_its_start(tmp_path, monkeypatch):
    """A log whose line ends were lost is one line of hundreds of kilobytes: each dialect's
    patterns, tried at every position of it, took 3 s a sniff on 600 KB (twice for a file named
    on its own). Its start tells which dialect it is as well as the whole."""
    counted = []

    def count_records(lines, dialect):
        counted.append(len(lines.text))
        return real(lines, dialect)

    real = textlogs.count_records
    monkeypatch.setattr(textlogs, "count_records", count_records)
    record = "| epoch   1 |   {i:4d}/ 9000 batches | lr 0.01 | ms/batch 12.3 | loss  3.28 | ppl    26.70 "
    path = _write(tmp_path, "joined.log", "".join(record.format(i=i) for i in range(7000)))
    assert not textlogs.sniff(path)
    assert counted and max(counted) <= textlogs._ONE_LINE_SNIFF
    # Read all the same where its start is a log: nanoGPT's lines joined by spaces.
    path = _write(tmp_path, "nano.log", " ".join(f"iter {i}: loss {3 - i / 5000:.4f}, time 95.2ms, mfu 30.1%"
                                                  for i in range(5000)))
    (run,) = textlogs.load(path, LoadOptions())
    assert run.source == "nanogpt" and len(run.steps) == 5000
