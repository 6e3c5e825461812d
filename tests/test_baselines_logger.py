"""OpenAI baselines' logger blocks (guided-diffusion, improved-diffusion, Stable-Baselines 2), read
as the tools print them: the keys without sections, values and steps to three significant digits,
the fp16 trainer's ``Found NaN, decreased lg_loss_scale to X`` lines between the blocks. Each log
is written here from the logger's own format string."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs
from sentinel.cli.main import main


def _block(kvs: dict[str, float], ints_as_str: bool = False) -> list[str]:
    """One dump, as guided-diffusion's logger.HumanOutputFormat.writekvs prints it: "%-8.3g" for
    each number, the keys sorted without case, dashes the width of the rows (``ints_as_str``:
    Stable-Baselines 2's, which prints an int whole)."""
    shown = {key: str(value) if ints_as_str and isinstance(value, int) else "%-8.3g" % value
             for key, value in kvs.items()}
    key_width, value_width = max(map(len, shown)), max(map(len, shown.values()))
    dashes = "-" * (key_width + value_width + 7)
    rows = [f"| {key}{' ' * (key_width - len(key))} | {value}{' ' * (value_width - len(value))} |"
            for key, value in sorted(shown.items(), key=lambda kv: kv[0].lower())]
    return [dashes, *rows, dashes]


def _diffusion_log(steps: int, nan_from: int | None = None, overflow_every: int = 1000, interval: int = 10,
                   seed: int = 0) -> list[str]:
    """guided-diffusion's TrainLoop under its fp16 MixedPrecisionTrainer: lg_loss_scale starts at 20
    and grows 0.001 a good step; an overflow lowers it by 1 and logs its line. From ``nan_from``
    the forward gives NaN: every step overflows. The block of step s holds the means since the last."""
    rng = np.random.default_rng(seed)
    lines = ["Logging to /tmp/openai-2026-12-05-10-00-00-000000", "creating model and diffusion...",
             "creating data loader...", "training..."]
    lg, means = 20.0, {}
    for step in range(steps + 1):
        diverged = nan_from is not None and step >= nan_from
        loss = np.nan if diverged else 0.06 * (1 + 2 / (1 + step / 200)) * float(np.exp(rng.normal(0, 0.05)))
        means.setdefault("loss", []).append(loss)
        means.setdefault("mse", []).append(loss * 0.98)
        means.setdefault("vb", []).append(loss * 0.02)
        means.setdefault("lg_loss_scale", []).append(lg)
        if diverged or (step and step % overflow_every == 0):
            lg -= 1
            lines.append(f"Found NaN, decreased lg_loss_scale to {lg}")
        else:
            means.setdefault("grad_norm", []).append(0.3 * float(np.exp(rng.normal(0, 0.1))))
            means.setdefault("param_norm", []).append(300.0 + step / 1000)
            lg += 0.001
        if step % interval == 0:
            kvs = {key: float(np.mean(values)) for key, values in means.items()}
            lines += _block({**kvs, "step": step, "samples": (step + 1) * 64})
            means = {}
    return lines


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _analyze(*args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["analyze", *args, "--format", "json"])
    return result.exit_code, json.loads(result.output)


def test_a_healthy_diffusion_run_is_read_at_its_exact_steps_past_the_rounding(tmp_path):
    """From step 1,000 the logger prints its steps as 1e+03, 1.01e+03; from 10,000 ten steps
    print the same 1e+04. The steps are the exact ones' interval (0, 10, ..., 990)."""
    path = _write(tmp_path / "log.txt", _diffusion_log(12_000))
    (run,) = discover_runs(tmp_path)
    assert run.source == "baselines_logger"
    assert run.steps.index.tolist() == list(range(0, 12_001, 10))
    assert any("read from the interval of the exact ones, 10" in w for w in run.warnings)
    overflows = run.events[run.events["kind"] == "overflow"]
    assert overflows["step"].tolist() == list(range(1000, 12_001, 1000))  # each in the block of its step
    report = analyze_run(run)
    assert report.verdict == "healthy", [i.message for i in report.incidents]
    assert float(run.steps["loss_scale"].iloc[0]) == 2.0 ** 20
    assert path.exists()


def test_a_diffusion_run_gone_nan_in_fp16_is_a_nan_and_a_collapsed_loss_scale(tmp_path):
    path = _write(tmp_path / "log.txt", _diffusion_log(3000, nan_from=2437))
    code, report = _analyze(str(path))
    (run,) = report["runs"]
    found = {i["kind"]: i for i in run["incidents"]}
    assert run["verdict"] == "unhealthy" and code == 0
    # grad_norm is not in the blocks of steps that overflowed: not logged, not a NaN of its own
    assert [i["kind"] for i in run["incidents"]].count("nonfinite") == 1
    assert (found["nonfinite"]["severity"], found["nonfinite"]["step"]) == ("critical", 2440)
    collapse = found["loss_scale_collapse"]
    assert collapse["severity"] == "critical" and 2440 <= collapse["step"] <= 2470
    assert "inf orders" not in collapse["message"] and "orders of magnitude" in collapse["message"]


def test_one_block_pasted_with_the_lines_after_it(tmp_path):
    """guided-diffusion#50: one block at step 1.53e+05 whose losses are NaN and lg_loss_scale
    -1.62e+04, then the trainer's lines. Named on its own the block is read; in a folder the lines."""
    kvs = {"lg_loss_scale": -1.62e4, "loss": np.nan, "mse": np.nan, "samples": 3.92e7, "step": 153_123,
           "vb": np.nan}
    lines = ["....", *_block(kvs)] + [f"Found NaN, decreased lg_loss_scale to {-16199.354 - i}" for i in range(5)]
    path = _write(tmp_path / "paste.txt", lines)
    assert lines[-8] == "| step          | 1.53e+05  |"
    code, report = _analyze(str(path))
    (run,) = report["runs"]
    found = {i["kind"]: i for i in run["incidents"]}
    assert (found["nonfinite"]["severity"], found["nonfinite"]["step"]) == ("critical", 153_000)
    assert found["loss_scale_collapse"]["severity"] == "critical"
    assert "it had collapsed before" in found["loss_scale_collapse"]["message"]
    assert any("printed to 3 significant digits (1.53e+05)" in w for w in run["warnings"])
    assert any("only 1 logger block(s)" in w for w in run["warnings"])
    assert any("2**-16200, below the smallest float" in w for w in run["warnings"])
    (run,) = discover_runs(tmp_path)  # in a folder, the trainer's lines alone: as apex's overflow lines
    assert run.source == "amp_overflow" and len(run.steps) == 5


def test_blocks_that_print_one_rounded_step_are_spread_to_the_next(tmp_path):
    lines = []
    for step in range(153_000, 153_600, 10):  # no exact step: 1.53e+05 x50, then 1.54e+05 ...
        lines += _block({"loss": 0.05, "step": step})
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    steps = run.steps.index.to_numpy()
    assert len(steps) == 60 and bool((np.diff(steps) > 0).all())
    assert steps.tolist() == list(range(153_000, 153_600, 10))
    assert any("spread evenly" in w for w in run.warnings)


def test_stable_baselines_2_blocks_whose_episode_returns_are_nan(tmp_path):
    """stable-baselines#178: ep_rewmean nan at every update (the env had no Monitor): a logging
    gap, not a NaN loss."""
    lines = []
    for update in range(1, 31):
        lines += _block({"approxkl": 6.6e-5, "ep_rewmean": np.nan, "nupdates": update, "policy_loss": 6e-4,
                         "serial_timesteps": 128 * update, "total_timesteps": 128 * update,
                         "value_loss": 63.7 / update}, ints_as_str=True)
    path = _write(tmp_path / "ppo2.txt", lines)
    code, report = _analyze(str(path), "--loss-col", "value_loss")
    (run,) = report["runs"]
    assert run["source"] == "baselines_logger" and run["steps"] == 30 and run["verdict"] == "healthy"
    assert run["first_step"] == 128 and run["last_step"] == 128 * 30


def test_a_progress_csv_with_the_scale_as_its_logarithm(tmp_path):
    """guided-diffusion's progress.csv keeps lg_loss_scale at full precision: read as the scale."""
    rows = ["grad_norm,lg_loss_scale,loss,mse,param_norm,samples,step,vb"]
    for step in range(0, 300, 10):
        lg, loss = (20 + step / 1000, 0.05) if step < 200 else (20 - (step - 190), float("nan"))
        rows.append(f"0.3,{lg},{loss},{loss},300,{step * 64},{step},0.001")
    rows.append("0.3,-16199.354,nan,nan,300,19200,300,nan")
    code, report = _analyze(str(_write(tmp_path / "progress.csv", rows)))
    (run,) = report["runs"]
    collapse = next(i for i in run["incidents"] if i["kind"] == "loss_scale_collapse")
    assert collapse["severity"] == "critical" and "(329.4 orders of magnitude)" in collapse["message"]
    assert any("'lg_loss_scale' fell to -16199.4" in w for w in run["warnings"])


def test_a_block_pasted_without_its_top_rule(tmp_path):
    """SegDiff's issue: one guided-diffusion block whose top dashes the paste cut off, lg_loss_scale
    -0.821 at step 200 (from 20 at the start: the scale collapsed) and a loss of 5.99e+04."""
    kvs = {"grad_norm": 2.34e5, "lg_loss_scale": -0.821, "loss": 5.99e4, "mse": 0.914, "samples": 402, "step": 200}
    path = _write(tmp_path / "paste.txt", ["", *_block(kvs)[1:]])
    (run,) = _analyze(str(path))[1]["runs"]
    (incident,) = run["incidents"]
    assert (incident["kind"], incident["severity"], incident["step"]) == ("loss_scale_collapse", "critical", 200)


def test_a_term_both_sides_raise_is_no_overfitting(tmp_path):
    """guided-diffusion's classifier logs train_entropy_loss and val_entropy_loss (a term it constrains) beside
    train_loss and val_loss: the entropy term rose on both sides, val_loss fell, and the run was told
    'val_entropy_loss rose ...: overfitting (a checkpoint from near step 500 evaluates best)'."""
    lines = ["Logging to /tmp/log/imagenet1000_classifier256x256", "training classifier model..."]
    for k in range(40):
        entropy = 0.02 + 0.001 * k
        lines += _block({"step": 500 * k, "samples": 64 * 500 * k, "train_loss": 6.9 - 0.05 * k,
                         "val_loss": 6.95 - 0.045 * k, "train_entropy_loss": entropy, "val_entropy_loss": 1.1 * entropy,
                         "train_acc@1": 0.005 * k, "grad_norm": 17.9, "lg_loss_scale": 16})
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert "val_entropy_loss" in run.steps.columns and "val_loss" in run.steps.columns
    assert not [i for i in analyze_run(run).incidents if i.kind == "overfitting"]
    # the same term falling in training while its evaluation rises is overfitting, told against it
    lines = ["Logging to /tmp/log/imagenet1000_classifier256x256", "training classifier model..."]
    for k in range(40):
        lines += _block({"step": 500 * k, "samples": 64 * 500 * k, "train_loss": 6.9 - 0.05 * k,
                         "val_loss": 6.95 - 0.045 * k, "train_entropy_loss": 0.06 - 0.001 * k,
                         "val_entropy_loss": 0.02 + 0.001 * k, "grad_norm": 17.9, "lg_loss_scale": 16})
    (run,) = discover_runs(_write(tmp_path / "overfit.txt", lines))
    (incident,) = [i for i in analyze_run(run).incidents if i.kind == "overfitting"]
    assert "val_entropy_loss rose" in incident.message and "while train_entropy_loss fell" in incident.message
