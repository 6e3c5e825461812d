"""``sentinel analyze`` on the command line: good and bad input through CliRunner, exit codes,
help on every command, and one real run of the installed console script."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from sentinel.cli.main import main
from sentinel.events import make_event
from sentinel.store import RunWriter


def write_run(path: Path, n: int = 200, spike_at: int | None = None, nan_at: int | None = None) -> Path:
    rng = np.random.default_rng(0)
    with RunWriter(path, {"name": path.name}, tensorboard=False) as writer:
        for step in range(n):
            loss = 3.0 * np.exp(-step / 80) + 1.0 + 0.02 * rng.standard_normal()
            if spike_at is not None and spike_at <= step < spike_at + 3:  # a spike, not one outlier batch
                loss *= 6
            if step == nan_at:
                loss = float("nan")
            writer.write_step({"step": step, "loss": float(loss), "grad_norm/total": 1.0})
        if nan_at is not None:
            writer.write_event(make_event("nonfinite", nan_at, module="blocks.0.attn", phase="forward", rank=0))
    return path


def invoke(*args: str):
    result = CliRunner().invoke(main, ["analyze", *args], catch_exceptions=False)
    assert "Traceback" not in result.output
    return result


def test_every_command_has_help():
    assert CliRunner().invoke(main, ["--help"]).exit_code == 0
    for name, command in main.commands.items():
        result = CliRunner().invoke(main, [name, "--help"])
        assert result.exit_code == 0 and command.help and "Usage:" in result.output, name


def test_healthy_run_table_exit_0(tmp_path):
    result = invoke(str(write_run(tmp_path / "run1")))
    assert result.exit_code == 0
    assert result.output.startswith(f"run1 (sentinel) {tmp_path / 'run1'} -- healthy\n")


def test_several_runs_end_with_a_count_by_verdict_naming_the_runs_not_healthy(tmp_path):
    write_run(tmp_path / "a_ok")
    write_run(tmp_path / "b_spike", spike_at=120)
    write_run(tmp_path / "c_nan", nan_at=199)  # at the last step: never finite again
    write_run(tmp_path / "d_ok")
    result = invoke(str(tmp_path))
    assert result.exit_code == 0
    assert result.stdout.endswith("\n\n4 runs: 1 unhealthy, 1 recovered, 2 healthy\n"
                                  "  unhealthy: c_nan\n  recovered: b_spike\n")
    single = invoke(str(tmp_path / "a_ok")).stdout
    assert "runs:" not in single  # one run: its table says it all


def test_json_and_markdown_formats(tmp_path):
    run = write_run(tmp_path / "run1", spike_at=120)
    doc = json.loads(invoke(str(run), "--format", "json").output)
    assert doc["runs"][0]["verdict"] == "recovered"
    assert [i["kind"] for i in doc["runs"][0]["incidents"]] == ["loss_spike"]
    assert invoke(str(run), "--format", "markdown").output.startswith("# sentinel analyze\n")


def test_fail_on_exit_codes(tmp_path):
    run = str(write_run(tmp_path / "run1", spike_at=120))
    result = invoke(run, "--fail-on", "warning")
    assert result.exit_code == 3
    assert result.stderr.startswith("--fail-on warning met by 1 incident(s):\n  run1 step 120")
    assert invoke(run, "--fail-on", "critical").exit_code == 0
    nan_run = str(write_run(tmp_path / "run2", nan_at=150))
    result = invoke(nan_run, "--fail-on", "critical")
    assert result.exit_code == 3 and "source: blocks.0.attn (forward)" in result.output


def test_thresholds_and_columns_reach_the_analyzer(tmp_path):
    run = str(write_run(tmp_path / "run1", spike_at=120))
    assert "loss_spike" in invoke(run).output
    # With a full warm-up behind step 120, an absurd outlier threshold leaves nothing to flag.
    assert "loss_spike" not in invoke(run, "--threshold", "1e9", "--warmup", "64", "--window", "64").output
    result = invoke(run, "--warmup", "500")
    assert result.exit_code == 2
    assert result.output.endswith("Error: Invalid value for '--warmup': warmup=500 is invalid: pass an integer "
                                  "from 2 to the window, 64 by default (a longer window takes a longer warm-up)\n")


def test_detector_options_the_detector_cannot_take_are_usage_errors_that_say_what_fits(tmp_path):
    run = str(write_run(tmp_path / "run1"))
    refused = {
        ("--window", "99999999999999999999"): "window=99999999999999999999 is invalid: pass an integer from 4 to "
                                              "1000000000 (values of history), or leave it out for the default",
        ("--window", "0"): "window=0 is invalid: pass an integer from 4 to 1000000000",
        ("--window", "10"): "window=10 is invalid: it is shorter than the detector's warm-up, 20 by default: pass a "
                            "window of at least 20, or a warmup from 2 to 10",
        ("--threshold", "inf"): "threshold=inf is invalid: pass a positive finite number (robust sigmas)",
        ("--warmup", "-1"): "warmup=-1 is invalid: pass an integer from 2 to the window (values of history)",
        ("--warmup", "0"): "warmup=0 is invalid: pass an integer from 2 to the window (values of history)",
        ("--warmup", "1"): "warmup=1 is invalid: pass an integer from 2 to the window (values of history)",
    }
    for (option, value), message in refused.items():
        result = invoke(run, option, value)
        assert result.exit_code == 2, (option, value, result.output)
        assert f"Error: Invalid value for '{option}': {message}" in result.output
        doc = json.loads(invoke(run, option, value, "--format", "json").output)
        assert doc["exit_code"] == 2 and message in doc["error"]
    for option, value in (("--warmup", "2"), ("--window", "1000000000"), ("--window", "10"), ("--threshold", "0.5")):
        extra = ("--warmup", "5") if (option, value) == ("--window", "10") else ()
        assert invoke(run, option, value, *extra).exit_code == 0


def test_path_that_does_not_exist(tmp_path):
    result = invoke(str(tmp_path / "nope"))
    assert result.exit_code == 1
    assert result.output == f"Error: path '{tmp_path / 'nope'}' does not exist: pass a run directory or a log file\n"


def test_empty_directory(tmp_path):
    result = invoke(str(tmp_path))
    assert result.exit_code == 1
    assert result.output == f"Error: directory '{tmp_path}' is empty: pass a directory that holds training logs\n"


def test_directory_without_logs_points_to_the_formats_command(tmp_path):
    """One short line naming what was skipped and where the formats are listed (it was every
    format's description in one line of ~1,800 characters)."""
    (tmp_path / "notes.md").write_text("# notes\n")
    result = invoke(str(tmp_path))
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert result.output == (f"Error: no training logs found in '{tmp_path}' (skipped 1 file: 1 documentation): "
                             "pass a directory written by sentinel, TensorBoard or a Lightning logger, or "
                             "logs of a format `sentinel formats` lists\n")


def test_formats_lists_every_reader_and_text_dialect():
    from sentinel.analyze.discover import loaders
    from sentinel.analyze.loaders.dialects import DIALECTS

    result = CliRunner().invoke(main, ["formats"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    listed = [line[2:] for line in lines if line.startswith("- ")]
    assert listed == [m.DESCRIPTION for m in loaders()]
    assert listed[:3] == ["sentinel run directory (meta.json + steps.*)",
                          "TensorBoard event files (events.out.tfevents.*)", "Lightning CSVLogger metrics.csv"]
    dialects = [line[6:] for line in lines if line.startswith("    - ")]
    assert dialects == list(dict.fromkeys(d.description for d in DIALECTS))
    assert any(line.startswith("torchtitan (") for line in dialects)


def test_truncated_last_lines_are_skipped_with_a_warning(tmp_path):
    run = write_run(tmp_path / "run1")
    with open(run / "events.jsonl", "ab") as f:
        f.write(b'{"step": 3, "ki')
    (segment,) = sorted(run.glob("steps.*"))
    with open(segment, "ab") as f:
        f.write(b"200,0.9")
    result = invoke(str(run))
    assert result.exit_code == 0
    assert "warning: events.jsonl: skipped truncated last line" in result.output
    assert "warning: " + segment.name in result.output
    assert "steps 200 (0..199)" in result.output


def test_corrupt_tensorboard_file_reads_the_valid_part(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "tb"))
    for step in range(50):
        writer.add_scalar("train/loss", 2.0 - step / 100, step)
    writer.close()
    (file,) = (tmp_path / "tb").iterdir()
    file.write_bytes(file.read_bytes()[:-20])
    result = invoke(str(tmp_path / "tb"))
    assert result.exit_code == 0
    assert f"warning: {file.name}: truncated or damaged record at byte" in result.output
    assert "steps 49 (0..48)" in result.output


def test_metrics_csv_without_loss_column(tmp_path):
    (tmp_path / "metrics.csv").write_text("epoch,step,val_acc\n0,9,0.5\n1,19,0.6\n")
    result = invoke(str(tmp_path))
    assert result.exit_code == 1
    assert result.output == ("Error: nothing to analyse: metrics.csv: no loss column among epoch, step, "
                             "val_acc: pass --loss-col NAME\n")
    assert invoke(str(tmp_path), "--loss-col", "val_acc").exit_code == 0
    result = invoke(str(tmp_path), "--loss-col", "nope")
    assert result.exit_code == 1
    assert result.output == (f"Error: {tmp_path / 'metrics.csv'}: column 'nope' not found; "
                             "available: epoch, step, val_acc\n")


def test_run_shorter_than_warmup_still_reports(tmp_path):
    run = write_run(tmp_path / "short", n=6, nan_at=3)
    result = invoke(str(run))
    assert result.exit_code == 0
    assert "within the spike detector's warm-up of 20: too little history" in result.output
    assert "loss non-finite (nan) at step 3" in result.output
    assert "final loss " in result.output


def test_nan_values_in_a_table(tmp_path):
    (tmp_path / "metrics.csv").write_text("step,train_loss\n" + "".join(
        f"{s},{'nan' if s in (40, 41) else 2.0 - s / 100}\n" for s in range(60)))
    result = invoke(str(tmp_path), "--format", "json")
    assert result.exit_code == 0
    (incident,) = json.loads(result.output)["runs"][0]["incidents"]
    assert (incident["kind"], incident["step"], incident["end_step"]) == ("nonfinite", 40, 41)


def test_plot_option(tmp_path):
    run = str(write_run(tmp_path / "run1", spike_at=120))
    result = invoke(run, "--plot", str(tmp_path / "r.png"))
    assert result.exit_code == 0 and (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    result = invoke(run, "--plot", str(tmp_path / "missing" / "r.png"))
    assert result.exit_code == 2 and result.output.splitlines()[-1] == (
        f"Error: --plot: directory '{tmp_path / 'missing'}' does not exist: create it or pass another path")


def test_installed_console_script(tmp_path):
    script = Path(sys.executable).with_name("sentinel")
    assert script.exists(), "the sentinel console script is not installed next to the interpreter"
    missing = subprocess.run([str(script), "analyze", str(tmp_path / "nope")], capture_output=True, text=True)
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr == f"Error: path '{tmp_path / 'nope'}' does not exist: pass a run directory or a log file\n"
    run = write_run(tmp_path / "run1", spike_at=120)
    done = subprocess.run([str(script), "analyze", str(run), "--fail-on", "warning"], capture_output=True, text=True)
    assert done.returncode == 3 and "loss_spike" in done.stdout and "Traceback" not in done.stderr


def test_a_progress_bar_log_whose_first_line_is_a_redraw_is_read(tmp_path):
    # "\r" before the first line end: the table sniffer used to stop on it with a csv.Error.
    bar = "".join(f"\rEpoch 0:  {i}%|#  | {i + 1}/50 [00:01<00:01, v_num=0, train_loss={3.0 - 0.01 * i:.3f}]"
                  for i in range(50))
    path = tmp_path / "bar.log"
    path.write_text(bar + "\n", encoding="utf-8")
    result = invoke(str(path))
    assert result.exit_code == 0 and "steps 50 (1..50)" in result.output


def test_an_internal_error_is_one_line_naming_it_not_a_traceback(tmp_path, monkeypatch):
    import sentinel.analyze.analyzer as analyzer

    def broken(*paths, **options):  # a fault injected into the analysis, not into the command
        raise RuntimeError("boom")

    monkeypatch.setattr(analyzer, "analyze", broken)
    run = write_run(tmp_path / "run")
    result = CliRunner().invoke(main, ["analyze", str(run)])
    assert result.exit_code == 1
    assert "internal error while analysing (RuntimeError: boom)" in result.output
    assert "Traceback" not in result.output
    as_json = CliRunner().invoke(main, ["analyze", str(run), "--format", "json"])
    error = json.loads(as_json.stdout)
    assert as_json.exit_code == 1 and error["exit_code"] == 1 and "RuntimeError: boom" in error["error"]


def test_loss_and_step_columns_on_a_run_directory_are_used_or_refused_as_for_tables(tmp_path):
    run = write_run(tmp_path / "run1")
    doc = json.loads(invoke(str(run), "--loss-col", "grad_norm/total", "--format", "json").output)
    assert doc["runs"][0]["final_loss"] == 1.0  # the named column is the loss; the recorded one is not read
    assert invoke(str(run), "--loss-col", "loss", "--step-col", "step").exit_code == 0
    result = invoke(str(run), "--loss-col", "nope")
    assert result.exit_code == 1
    assert result.output == (f"Error: {run}: no column 'nope' in the run's step records; --loss-col takes one "
                             "of: loss, grad_norm/total\n")
    result = invoke(str(run), "--step-col", "nope")
    assert result.exit_code == 1
    assert result.output == (f"Error: {run}: a sentinel run's step is the step it recorded, not a column; "
                             "--step-col 'nope' does not apply to it: leave --step-col out\n")


def _titan_lines(nan_from: int = 10**9) -> bytes:
    # torchtitan's line, a loss going NaN at nan_from, and no line end after the last one (a paste)
    lines = [f"step: {s:2}  loss: {'nan' if s >= nan_from else f'{4 - s / 100:7.4f}'}  grad_norm:  1.0000  "
             f"memory: 30.21GiB(31.80%)  tps: 1,234" for s in range(1, 61)]
    return "\n".join(lines).encode()


def test_a_log_piped_into_standard_input(tmp_path):
    result = CliRunner().invoke(main, ["analyze", "-"], input=_titan_lines(nan_from=60))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("stdin (torchtitan) <stdin> -- unhealthy")
    assert "steps 60 (1..60)" in result.stdout  # the last line, without its line end, is read: the input ended
    assert "reading a log from standard input" not in result.output  # a pipe, not a terminal
    # compressed on the way in, beside a file, as JSON
    plain = tmp_path / "other.log"
    plain.write_bytes(_titan_lines() + b"\n")
    result = CliRunner().invoke(main, ["analyze", "-", str(plain), "--format", "json"],
                                input=gzip.compress(_titan_lines()))
    runs = json.loads(result.stdout)["runs"]
    assert [(r["path"], r["steps"]) for r in runs] == [("<stdin>", 60), (str(plain), 60)]


def test_standard_input_that_is_empty_or_no_log_gets_one_line():
    result = CliRunner().invoke(main, ["analyze", "-"], input=b"")
    assert result.exit_code == 1 and result.output == (
        "Error: standard input is empty: pipe a log into it (cat train.log | sentinel analyze -) or pass a file\n")
    result = CliRunner().invoke(main, ["analyze", "-"], input=b"hello\n")
    assert result.exit_code == 1 and result.output.startswith("Error: '<stdin>' is not a log format sentinel reads")
    assert "sentinel-" not in result.output  # the temporary copy is not named


def test_the_console_script_reads_a_pipe_to_its_end(tmp_path):
    script = Path(sys.executable).with_name("sentinel")
    done = subprocess.run([str(script), "analyze", "-"], input=_titan_lines(nan_from=50), capture_output=True,
                          timeout=120)
    assert done.returncode == 0 and b"steps 60 (1..60)" in done.stdout and done.stderr == b""


def test_standard_input_that_cannot_be_kept_is_one_line_not_a_bug_report(monkeypatch):
    import errno
    import shutil

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copyfileobj", full)
    result = CliRunner().invoke(main, ["analyze", "-"], input=_titan_lines())
    assert result.exit_code == 1 and "No space left on device" in result.output
    assert "set TMPDIR to a folder with room" in result.output and "bug" not in result.output
