"""`sentinel analyze` on hostile and broken input: never a traceback, never a hang, never a wrong
result accepted silently; directory mode says what it skipped; exit codes are exact."""

from __future__ import annotations

import builtins
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from sentinel.cli.main import main
from sentinel.store import RunWriter

MEGATRON_LINE = (" iteration      {s}/     100 | consumed samples: 1 | learning rate: 1.0E-04 | "
                 "lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: 0.5 | number of skipped iterations:   0 |\n")


def invoke(*args: str):
    result = CliRunner().invoke(main, ["analyze", *args], catch_exceptions=False)
    assert "Traceback" not in result.output
    return result


def write_run(path: Path, n: int = 120) -> Path:
    rng = np.random.default_rng(0)
    with RunWriter(path, {"name": path.name}, tensorboard=False) as writer:
        for step in range(n):
            writer.write_step({"step": step, "loss": float(2.0 + 0.01 * rng.standard_normal()), "lr": 1e-3})
    return path


def write_csv(path: Path, rows: list[tuple], header: str = "step,loss,lr") -> Path:
    path.write_text(header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def healthy_rows(n: int = 60) -> list[tuple]:
    return [(s, 2.0 - s / 1000, 1e-3) for s in range(n)]


# --------------------------------------------------------------------------- directory mode


def test_directory_mode_never_reads_source_or_packaging_and_counts_what_it_skipped(tmp_path):
    log = "".join(MEGATRON_LINE.format(s=s, loss=2.0) for s in range(1, 40))
    (tmp_path / "megatron.py").write_text(f'"""Reads lines like\n{log}"""\n')  # looks like a log
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "notes.txt").write_text("nothing to see\n")
    (tmp_path / "train.sh").write_text("#!/bin/sh\n" + log)
    for folder in ("build", ".git", "pkg.egg-info"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "copy.log").write_text(log)
    write_run(tmp_path / "run1")
    result = invoke(str(tmp_path))
    assert result.exit_code == 0
    assert result.stdout.startswith("run1 (sentinel)") and "megatron" not in result.stdout
    assert result.stderr == ("skipped 4 files and 3 directories: 3 packaging or config, 2 source code, "
                             "1 not a training log, 1 tool directory (use -v to list them)\n")
    verbose = invoke(str(tmp_path), "-v").stderr.splitlines()
    assert f"  {tmp_path / 'megatron.py'}: source code" in verbose
    assert f"  {tmp_path / '.git'}: tool directory" in verbose
    assert f"  {tmp_path / 'notes.txt'}: not a training log" in verbose


def test_the_loaders_own_source_is_not_a_run():
    loaders = Path(__file__).resolve().parents[1] / "sentinel" / "analyze" / "loaders"
    result = invoke(str(loaders))
    assert result.exit_code == 1 and result.output.count("\n") == 1
    assert "no training logs found" in result.output and "source code" in result.output
    assert invoke(str(loaders / "megatron.py")).output == (
        f"Error: '{loaders / 'megatron.py'}' is source code, not a training log: "
        "pass a log file or a directory of runs\n")


def test_one_bad_path_among_several_does_not_stop_the_others(tmp_path):
    run = write_run(tmp_path / "run1")
    (tmp_path / "junk.csv").write_text("hello\n")
    result = invoke(str(tmp_path / "nope"), str(tmp_path / "junk.csv"), str(run))
    assert result.exit_code == 0 and result.stdout.startswith("run1 (sentinel)")
    first, second = result.stderr.splitlines()
    assert first == f"warning: path '{tmp_path / 'nope'}' does not exist: pass a run directory or a log file"
    assert second == (f"warning: '{tmp_path / 'junk.csv'}' is not a log format sentinel reads: pass "
                      "--step-col/--loss-col with the names its lines or columns give the step and the loss, or a "
                      "log of a format `sentinel formats` lists")


def test_a_loader_error_in_one_file_is_a_warning_and_the_walk_goes_on(tmp_path):
    write_csv(tmp_path / "a" / "metrics.csv" if (tmp_path / "a").mkdir() is None else None, healthy_rows())
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "run.jsonl").write_text('{"step": 1, "loss": 2.0}\n' + "[" * 100_000 + "\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "metrics.csv").write_text("step,lr\n1,0.1\n")
    result = invoke(str(tmp_path), "--format", "json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert [r["name"] for r in doc["runs"]] == ["a", "run", "c"]
    assert "1 line(s) that are not JSON objects were skipped" in doc["runs"][1]["warnings"][0]


def _hf_state(entry: str) -> bytes:
    history = ", ".join(f'{{"step": {s}, "loss": {2.0 - s / 100}}}' for s in range(30))
    return f'{{"log_history": [{history}, {entry}]}}'.encode()


# Files with one odd value each: read as far as they are valid, the odd row skipped and counted.
_ODD_VALUES = {
    "step null": ("hf/trainer_state.json", _hf_state('{"step": null, "loss": 0.5}'), 30,
                  "trainer_state.json: 1 log_history entry whose step is not a whole number"),
    "step a list": ("hf/trainer_state.json", _hf_state('{"step": [3], "loss": 0.5}'), 30,
                    "trainer_state.json: 1 log_history entry whose step is not a whole number"),
    "step 1e400": ("hf/trainer_state.json", _hf_state('{"step": 1e400, "loss": 0.5}'), 30,
                   "trainer_state.json: 1 log_history entry whose step is not a whole number"),
    "megatron iteration beyond int64": (
        "mt.log", "".join(MEGATRON_LINE.format(s="9" * 23 if s == 30 else s, loss=2.0 - s / 100)
                          for s in range(1, 61)).encode(), 59,
        "1 iteration line(s) with a step too large for a 64-bit integer (e.g. 1e30) were skipped"),
    "deepspeed overflow line beyond int64": (
        "ds.log", ("".join(f"steps: {s} loss: {2.0 - s / 100:.4f} iter time (s): 0.5 samples/sec: 10\n" for s in range(60))
                   + "Grad overflow on iteration " + "9" * 23 + "\n").encode(), 60,
        "1 deepspeed event line(s) with a step too large for a 64-bit integer (e.g. 1e30) were skipped"),
    "mlflow step 2**70": (
        "mlruns/1/abc/metrics/loss", b"".join(b"%d %f %d\n" % (1700000000000 + s, 2.0 - s / 100, 2 ** 70 if s == 30 else s)
                                              for s in range(60)), 59,
        "loss: 1 row(s) with a 'step' too large for a 64-bit step (e.g. 1e30) were skipped"),
    "csv with a quote mark that never closes": (
        "q.csv", b"step,loss\n" + b"".join((b'"%d,%f\n' if s == 30 else b"%d,%f\n") % (s, 2.0 - s / 100) for s in range(60)),
        59, "q.csv: a quote mark on line 32 opens a cell that never closes: read again with quote marks taken as text"),
    "csv with CR-only line ends": (
        "mac.csv", b"step,loss\r" + b"".join(b"%d,%f\r" % (s, 2.0 - s / 100) for s in range(60)), 60, None),
    "jsonl with CR-only line ends": (
        "mac.jsonl", b"".join(b'{"step": %d, "loss": %f}\r' % (s, 2.0 - s / 100) for s in range(60)), 60, None),
}


@pytest.mark.parametrize("case", list(_ODD_VALUES))
def test_an_odd_value_in_a_file_skips_its_row_and_the_runs_beside_it_are_reported(tmp_path, case):
    name, data, steps, warning = _ODD_VALUES[case]
    write_run(tmp_path / "good")
    target = tmp_path / "odd" / name
    target.parent.mkdir(parents=True)
    target.write_bytes(data)
    if name.startswith("mlruns"):
        (tmp_path / "odd" / "mlruns" / "1" / "abc" / "meta.yaml").write_text("run_id: abc\n")
    result = invoke(str(tmp_path), "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [r["name"] for r in doc["runs"]][0] == "good" and len(doc["runs"]) == 2
    odd = doc["runs"][1]
    assert odd["steps"] == steps and doc["problems"] == []
    assert warning is None or any(w.startswith(warning) for w in odd["warnings"]), odd["warnings"]
    alone = invoke(str(tmp_path / "odd"))
    assert alone.exit_code == 0 and "bug in sentinel" not in alone.output


def test_a_file_a_loader_fails_on_unexpectedly_costs_that_file_only(tmp_path, monkeypatch):
    from sentinel.analyze.loaders import generic_table

    def broken(path, options=None):  # a fault injected into one loader: a bug of sentinel's
        raise TypeError("boom")

    monkeypatch.setattr(generic_table, "load", broken)
    write_run(tmp_path / "good")
    write_csv(tmp_path / "m.csv", healthy_rows())
    result = invoke(str(tmp_path))
    assert result.exit_code == 0 and result.stdout.startswith("good (sentinel)")
    assert result.stderr.startswith(f"warning: skipped cannot read '{tmp_path / 'm.csv'}' (TypeError: boom): "
                                    "this is a bug in sentinel")
    alone = invoke(str(tmp_path / "m.csv"), "--format", "json")
    assert alone.exit_code == 1 and "(TypeError: boom)" in json.loads(alone.stdout)["error"]
    assert "internal error" not in alone.output


def test_a_run_the_rules_fail_on_unexpectedly_costs_that_run_only(tmp_path, monkeypatch):
    import sentinel.analyze.analyzer as analyzer

    real = analyzer.analyze_run

    def broken_on_m(run, config=None):  # a fault injected into the rules for one run
        if run.name == "m":
            raise ValueError("boom")
        return real(run, config)

    monkeypatch.setattr(analyzer, "analyze_run", broken_on_m)
    write_run(tmp_path / "good")
    write_csv(tmp_path / "m.csv", healthy_rows())
    result = invoke(str(tmp_path), "--fail-on", "critical")
    assert result.exit_code == 0 and result.stdout.startswith("good (sentinel)")
    assert result.stderr.startswith(f"warning: {tmp_path / 'm.csv'} could not be analysed (ValueError: boom)")
    alone = invoke(str(tmp_path / "m.csv"))
    assert alone.exit_code == 1 and "could not be analysed (ValueError: boom)" in alone.output


def test_a_run_directory_without_step_records_says_which_file_and_where_else_to_look(tmp_path):
    for name in ("missing", "empty"):
        run = write_run(tmp_path / name)
        (segment,) = run.glob("steps.*.csv")
        segment.unlink() if name == "missing" else segment.write_text("")
    result = invoke(str(tmp_path / "missing"))
    assert result.exit_code == 1
    assert result.output == (f"Error: nothing to analyse: no step records: there is no steps.*.csv in "
                             f"'{tmp_path / 'missing'}' (the run never wrote a step, or its files were moved): "
                             "pass a run directory that recorded steps\n")
    (tmp_path / "empty" / "tb").mkdir()
    (tmp_path / "empty" / "tb" / "events.out.tfevents.1.host").write_bytes(b"")
    result = invoke(str(tmp_path / "empty"))
    assert result.exit_code == 1
    assert result.output == (f"Error: nothing to analyse: no step records: {segment.name} holds no step (a run "
                             "stopped before its first step was written); its TensorBoard copy has the same "
                             f"scalars: sentinel analyze {tmp_path / 'empty' / 'tb'}\n")


def test_a_link_to_nothing_or_a_loop_of_links_is_named_as_such(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    result = invoke(str(tmp_path / "a"))
    assert result.exit_code == 1
    assert result.output == (f"Error: path '{tmp_path / 'a'}' is a loop of symbolic links (each points on to "
                             "the next): point the link at a run directory or a log file\n")
    result = invoke(str(tmp_path / "dangling"))
    assert result.exit_code == 1
    assert result.output == (f"Error: path '{tmp_path / 'dangling'}' is a symbolic link to '{tmp_path / 'gone'}', "
                             "which does not exist: point the link at a run directory or a log file\n")


@pytest.mark.parametrize("name, text", [
    ("ps.log", "".join(f"step {s} loss {2 - s / 100:.4f}\n" for s in range(60))),
    ("ps.csv", "step,loss\r\n" + "".join(f"{s},{2 - s / 100:.4f}\r\n" for s in range(60))),
    ("ps.jsonl", "".join(f'{{"step": {s}, "loss": {2 - s / 100:.4f}}}\n' for s in range(60))),
])
def test_utf16_text_with_a_byte_order_mark_is_read(tmp_path, name, text):
    # What Windows PowerShell's "python train.py > train.log" writes.
    (tmp_path / name).write_bytes(text.encode("utf-16"))
    doc = json.loads(invoke(str(tmp_path / name), "--format", "json").stdout)
    (run,) = doc["runs"]
    assert (run["steps"], run["first_step"], run["last_step"], run["final_loss"]) == (60, 0, 59, 1.41)


# --------------------------------------------------------------------------- exit codes, JSON


def test_exit_codes_and_fail_on_listing(tmp_path):
    rows = healthy_rows(200)
    rows[120] = (120, "nan", 1e-3)
    csv = str(write_csv(tmp_path / "bad.csv", rows))
    assert invoke(csv).exit_code == 0
    result = invoke(csv, "--fail-on", "critical")
    assert result.exit_code == 3
    assert result.stderr.splitlines()[0] == "--fail-on critical met by 1 incident(s):"
    assert result.stderr.splitlines()[1].startswith("  bad step 120 critical nonfinite: ")
    doc = json.loads(invoke(csv, "--fail-on", "critical", "--format", "json").stdout)
    assert doc["fail_on"]["severity"] == "critical" and doc["fail_on"]["met"] is True
    assert [(i["run"], i["kind"], i["step"]) for i in doc["fail_on"]["incidents"]] == [("bad", "nonfinite", 120)]
    assert invoke(str(tmp_path / "nope")).exit_code == 1
    assert invoke(csv, "--format", "yaml").exit_code == 2


def test_a_table_with_no_readable_step_is_nothing_to_analyse_exit_1(tmp_path):
    tsv = tmp_path / "de.tsv"  # a spreadsheet's export with decimal commas
    tsv.write_text("step\tloss\n" + "".join(f"{s}\t{2 - s / 100:.4f}\n".replace(".", ",") for s in range(60)))
    for extra in ((), ("--fail-on", "warning")):
        result = invoke(str(tsv), *extra)
        assert result.exit_code == 1 and result.stdout == ""
        assert result.stderr.startswith(f"Error: nothing to analyse: {tsv}: no steps (de.tsv: 60 row(s) whose "
                                        "'loss' is text, not a number, were skipped (numbers written with a "
                                        "decimal comma, as 2,5: export them with a decimal point))")
    doc = json.loads(invoke(str(tsv), "--format", "json").stdout)
    assert doc["exit_code"] == 1 and doc["error"].startswith(f"nothing to analyse: {tsv}: no steps")
    write_run(tmp_path / "good")  # beside a run that has steps, it is a warning
    result = invoke(str(tmp_path))
    assert result.exit_code == 0 and result.stdout.startswith("good (sentinel)")
    assert f"warning: {tsv}: no steps" in result.stderr


def test_steps_up_to_the_int64_maximum_are_read(tmp_path):
    rows = [(2 ** 63 - 100 + i, 2.0 - i / 1000, 1e-3) for i in range(100)]
    doc = json.loads(invoke(str(write_csv(tmp_path / "big.csv", rows)), "--format", "json").stdout)
    (run,) = doc["runs"]
    assert (run["steps"], run["first_step"], run["last_step"]) == (100, 2 ** 63 - 100, 2 ** 63 - 1)
    assert run["warnings"] == []


def test_json_errors_are_json_on_stdout_only(tmp_path):
    result = invoke(str(tmp_path / "nope"), "--format", "json")
    assert result.exit_code == 1 and result.stderr == ""
    assert json.loads(result.stdout) == {
        "error": f"path '{tmp_path / 'nope'}' does not exist: pass a run directory or a log file", "exit_code": 1}
    result = invoke(str(tmp_path), "--format", "json", "--window", "abc")
    assert result.exit_code == 2 and result.stderr == ""
    assert json.loads(result.stdout)["exit_code"] == 2 and "'abc' is not a valid integer" in result.stdout


# --------------------------------------------------------------------------- plot


@pytest.mark.parametrize("target", ["-", "/dev/stdout"])
def test_plot_to_stdout_is_refused(tmp_path, target):
    csv = str(write_csv(tmp_path / "m.csv", healthy_rows()))
    result = invoke(csv, "--format", "json", "--plot", target)
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {"error": "--plot cannot write to standard output: the report goes "
                                                  "there; pass a file name such as report.png", "exit_code": 2}
    assert invoke(csv, "--plot", target).exit_code == 2


def test_mathtext_in_names_is_plotted_literally(tmp_path):
    rows = "".join(f"{s},{2 - s / 100},{0.5 + s / 1000}\n" for s in range(60))
    path = tmp_path / "$\\frac{a}{.csv"
    path.write_text("step,loss,attn_entropy/$\\frac{a}{\n" + rows)
    result = invoke(str(path), "--plot", str(tmp_path / "r.png"))
    assert result.exit_code == 0 and result.stderr == f"plot written to {tmp_path / 'r.png'}\n"
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


def test_a_plot_name_without_an_extension_is_said_as_the_file_written(tmp_path):
    csv = str(write_csv(tmp_path / "m.csv", healthy_rows()))
    result = invoke(csv, "--plot", str(tmp_path / "myreport"))
    assert result.exit_code == 0 and result.stderr == f"plot written to {tmp_path / 'myreport.png'}\n"
    assert (tmp_path / "myreport.png").read_bytes()[:4] == b"\x89PNG" and not (tmp_path / "myreport").exists()
    doc = json.loads(invoke(csv, "--plot", str(tmp_path / "again"), "--format", "json").stdout)
    assert doc["plot"] == {"path": str(tmp_path / "again.png"), "written": True, "error": None}


def test_plot_failure_after_analysis_is_a_warning(tmp_path, monkeypatch):
    import sentinel.analyze.render.plot as plot

    def broken(report, path):
        raise RuntimeError("renderer gave up")

    monkeypatch.setattr(plot, "render_plot", broken)
    csv = str(write_csv(tmp_path / "m.csv", healthy_rows()))
    result = invoke(csv, "--plot", str(tmp_path / "r.png"))
    assert result.exit_code == 0 and result.stderr == "warning: plot not written: renderer gave up\n"
    doc = json.loads(invoke(csv, "--plot", str(tmp_path / "r.png"), "--format", "json").stdout)
    assert doc["plot"] == {"path": str(tmp_path / "r.png"), "written": False, "error": "renderer gave up"}


# --------------------------------------------------------------------------- no traceback


@pytest.fixture
def deny(monkeypatch):
    """Make opening the given paths raise PermissionError. chmod 000 has no effect for root, so
    as root the error is injected where Python opens files (what a non-root user would see)."""
    denied: set[str] = set()

    def make(real):
        def guarded(file, *args, **kwargs):
            if isinstance(file, (str, os.PathLike)) and os.fspath(file) in denied:
                raise PermissionError(13, "Permission denied", os.fspath(file))
            return real(file, *args, **kwargs)
        return guarded

    monkeypatch.setattr(builtins, "open", make(builtins.open))
    monkeypatch.setattr(io, "open", make(io.open))

    def add(path: Path) -> None:
        if os.geteuid() != 0:
            path.chmod(0)
        denied.add(str(path))
    return add


def test_unreadable_metrics_csv(tmp_path, deny):
    good = write_run(tmp_path / "run1")
    (tmp_path / "v0").mkdir()
    bad = write_csv(tmp_path / "v0" / "metrics.csv", healthy_rows())
    deny(bad)
    result = invoke(str(tmp_path))
    assert result.exit_code == 0 and result.stdout.startswith("run1 (sentinel)")
    assert result.stderr == (f"warning: skipped cannot read '{bad}' (Permission denied): "
                             "fix its permissions or leave it out\n")
    result = invoke(str(bad))
    assert result.exit_code == 1
    assert result.output == f"Error: cannot read '{bad}' (Permission denied): fix its permissions or leave it out\n"
    assert good.exists()


@pytest.mark.parametrize("name", ["meta.json", "steps.00000.csv", "events.jsonl"])
def test_unreadable_file_in_a_run_dir(tmp_path, deny, name):
    run = write_run(tmp_path / "run1")
    with RunWriter(run, tensorboard=False) as writer:  # a second segment, still readable
        writer.write_step({"step": 500, "loss": 1.5, "grad_norm/total": 1.0})
    (run / "events.jsonl").write_text('{"step": 1, "kind": "spike"}\n')
    deny(run / name)
    result = invoke(str(run), "--format", "json")
    assert result.exit_code == 0
    (report,) = json.loads(result.stdout)["runs"]
    assert any(w.startswith(name) and "Permission denied" in w for w in report["warnings"]), report["warnings"]
    assert report["steps"] == (1 if name.startswith("steps") else 121)


def test_non_utf8_segment_skips_that_segment_only(tmp_path):
    run = write_run(tmp_path / "run1")
    (run / "steps.00007.csv").write_bytes(b"step,\xff\xfeloss\n999,1.0\n")
    result = invoke(str(run))
    assert result.exit_code == 0
    assert "warning: steps.00007.csv: header is not UTF-8 text; segment skipped" in result.stdout
    assert "steps 120 (0..119)" in result.stdout


def test_dev_null_and_fifo_as_paths(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in ("/dev/null", str(fifo)):
        result = invoke(path)
        assert result.exit_code == 1
        assert result.output == (f"Error: '{path}' is not a regular file or a directory (a device, FIFO or "
                                 "socket): pass a log file or a directory of runs\n")


def test_fifos_inside_directories_are_never_opened(tmp_path):
    run = write_run(tmp_path / "run1")
    (run / "skiplist.json").mkdir()  # IsADirectoryError when opened as a file
    os.mkfifo(tmp_path / "metrics.csv")
    os.mkfifo(tmp_path / "events.out.tfevents.1")
    (run / "events.jsonl").unlink()
    os.mkfifo(run / "events.jsonl")
    result = invoke(str(tmp_path), "-v")
    assert result.exit_code == 0
    assert "warning: skiplist.json ignored: it is not a regular file" in result.stdout
    assert "warning: events.jsonl ignored: it is not a regular file" in result.stdout
    assert f"  {tmp_path / 'metrics.csv'}: not a regular file" in result.stderr


@pytest.fixture
def deep_tree(tmp_path):
    """1,500 nested directories, removed bottom-up afterwards (pytest's own clean-up recurses)."""
    chain = [tmp_path / "d"]
    for _ in range(1499):
        chain.append(chain[-1] / "d")
    for folder in chain:
        folder.mkdir()
    yield chain[-1]
    for folder in reversed(chain):
        for file in folder.iterdir():
            if not file.is_dir():
                file.unlink()
        folder.rmdir()


def test_deeply_nested_directories_and_json(tmp_path, deep_tree):
    deep = deep_tree
    write_csv(deep / "metrics.csv", healthy_rows())
    run = write_run(tmp_path / "run1")
    nested = "[" * 100_000 + "]" * 100_000
    (run / "meta.json").write_text(nested)
    (run / "events.jsonl").write_text('{"step": 1, "kind": "spike", "x": ' + nested + "}\n")
    (tmp_path / "t.jsonl").write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": ' + nested + "}\n")
    result = invoke(str(tmp_path), "--format", "json")
    assert result.exit_code == 0
    runs = {r["name"]: r for r in json.loads(result.stdout)["runs"]}
    assert set(runs) == {"d", "run1", "t"}
    assert "meta.json ignored: its JSON is nested too deeply to read; meta is empty" in runs["run1"]["warnings"]
    assert any(w.startswith("events.jsonl: skipped line 1: its JSON is nested too deeply to read")
               for w in runs["run1"]["warnings"])


@pytest.fixture
def beyond_path_max(tmp_path):
    """A chain of directories whose deepest paths are longer than PATH_MAX (4096), made and
    removed through directory descriptors (no path that long is ever passed to the system)."""
    top = tmp_path / "deep"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(4200 // 3):
            os.mkdir("dd", dir_fd=fd)
            inner = os.open("dd", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    yield top
    while (top / "dd" / "dd").is_dir():  # bottom-up would need the long paths: lift each level instead
        os.rename(top / "dd" / "dd", top / "next")
        os.rmdir(top / "dd")
        os.rename(top / "next", top / "dd")
    (top / "dd").rmdir()


def test_a_branch_deeper_than_path_max_is_one_warning_and_the_rest_is_analysed(tmp_path, beyond_path_max):
    write_run(tmp_path / "run1")
    result = invoke(str(tmp_path))
    assert result.exit_code == 0 and result.stdout.startswith("run1 (sentinel)")
    (warning,) = result.stderr.splitlines()
    assert warning.startswith(f"warning: skipped cannot read '{beyond_path_max}/dd/dd/")
    assert warning.endswith("paths there are longer than the system allows, so nothing below it was analysed: "
                            "move it to a shorter path")
    assert len(warning) < 400


def test_skiplist_that_is_a_directory(tmp_path):
    run = write_run(tmp_path / "run1")
    (run / "skiplist.json").mkdir()
    result = invoke(str(run))
    assert result.exit_code == 0 and "warning: skiplist.json ignored: it is not a regular file" in result.output


# --------------------------------------------------------------------------- no effective hang


def test_a_row_with_very_many_keys_is_bounded(tmp_path):
    row = {"step": 0, "loss": 2.0, **{f"k{i}": float(i) for i in range(200_000)}}
    text = json.dumps(row) + "\n" + "".join(json.dumps({"step": s, "loss": 2.0 - s / 100}) + "\n" for s in range(1, 60))
    (tmp_path / "wide.jsonl").write_text(text)
    wide = ",".join(f"c{i}" for i in range(5000))
    (tmp_path / "wide.csv").write_text(f"step,loss,{wide}\n" + "".join(
        f"{s},{2 - s / 100}," + ",".join(["1"] * 5000) + "\n" for s in range(30)))
    doc = json.loads(invoke(str(tmp_path), "--format", "json").stdout)
    by_name = {r["name"]: r for r in doc["runs"]}
    assert "wide.jsonl: 199002 key(s) dropped: at most 1000 keys are read" in by_name["wide"]["warnings"]
    csv_run = next(r for r in doc["runs"] if r["path"].endswith("wide.csv"))
    assert "wide.csv: 4002 of 5002 columns dropped: at most 1000 columns are read" in csv_run["warnings"]


@pytest.mark.parametrize("unit", ["step 1 loss 2.0 ", "abc def 12 ghi, x=3; ", "step 1 total_loss = 2.0 ",
                                  "Epoch 1 val_loss: 2.0 ", "loss 2.0 xstep 1 ",
                                  "\b" * 40 + " 12/1875 [=====>....] - ETA: 1:23 - loss: 2.3026 - 2ms/step"])
def test_a_megabyte_on_one_line_is_read_in_linear_time(tmp_path, unit):
    # Each record pattern's scan between two fields is bounded: on one long line, every "step N"
    # that no "loss = " follows used to read on to the line's end (hours for 1 MB). A hang guard,
    # not a timing: the whole command takes about a second.
    log = tmp_path / "one_line.log"
    log.write_text(unit * ((1 << 20) // len(unit) + 1) + "\n")
    script = Path(sys.executable).with_name("sentinel")
    done = subprocess.run([str(script), "analyze", str(log)], capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr


def test_tiny_text_files_are_sniffed_without_a_pyarrow_filter_each(tmp_path, monkeypatch):
    # A folder of 10,000 tiny .txt files beside the logs took a minute: each file compiled a
    # pyarrow regex filter per dialect pattern (~3 ms a file). A short text goes to re directly.
    from sentinel.analyze.loaders import log_lines

    compiled = []
    real = log_lines.pc.match_substring_regex
    monkeypatch.setattr(log_lines.pc, "match_substring_regex",
                        lambda *a, **k: compiled.append(a[1]) or real(*a, **k))
    for i in range(50):
        (tmp_path / "data").mkdir(exist_ok=True)
        (tmp_path / "data" / f"s{i}.txt").write_text("the quick brown fox 12\n")
    write_run(tmp_path / "run1")
    result = invoke(str(tmp_path))
    assert result.exit_code == 0 and result.stdout.startswith("run1 (sentinel)")
    assert result.stderr == "skipped 50 files: 50 not a training log (use -v to list them)\n"
    assert compiled == []


# --------------------------------------------------------------------------- hostile strings


HOSTILE = "\x1b[2J\x1b]0;owned\x07<script>alert(1)</script><img src=x onerror=alert(1)>[x](http://e)`b|"


def test_hostile_names_are_inert_in_every_format(tmp_path):
    path = tmp_path / f"{HOSTILE.replace('/', '_')}.csv"
    rows = [(s, "nan" if s == 70 else 2.0 - s / 1000, 1e-3) for s in range(100)]
    write_csv(path, rows, header=f"step,loss,attn_entropy/{HOSTILE.replace(',', ';')}")
    table = invoke(str(path)).stdout
    assert "\x1b" not in table and "\x07" not in table
    markdown = invoke(str(path), "--format", "markdown").stdout
    assert "<script>" not in markdown and "<img" not in markdown and "](http" not in markdown
    assert "&lt;script&gt;" in markdown and "\\[x\\]\\(http:" in markdown and "\\`b\\|" in markdown
    doc = json.loads(invoke(str(path), "--format", "json").stdout)
    assert doc["runs"][0]["name"] == path.stem


# --------------------------------------------------------------------------- wrong results


def test_tensorboard_record_with_a_bad_crc_is_dropped_and_counted(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "tb"))
    for step in range(60):
        writer.add_scalar("train/loss", 2.0 - step / 100, step)
    writer.close()
    (file,) = (tmp_path / "tb").iterdir()
    data = bytearray(file.read_bytes())
    at = data.rfind(np.float32(2.0 - 30 / 100).tobytes())  # the value of step 30
    data[at + 3] ^= 0x7F  # exponent bits: a plausible-looking 1e38
    file.write_bytes(bytes(data))
    doc = json.loads(invoke(str(tmp_path / "tb"), "--format", "json").stdout)
    (run,) = doc["runs"]
    assert any("dropped 1 record(s) whose checksum does not match" in w for w in run["warnings"])
    assert run["steps"] == 59 and run["incidents"] == []


def test_a_tensorboard_record_dropped_for_its_crc_is_absent_not_a_nan_loss(tmp_path):
    # Beside another tag the dropped loss leaves its step a row with no loss; a NaN logged into
    # TensorBoard is a stored value and stays the critical incident it is.
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "tb"))
    for step in range(60):
        writer.add_scalar("loss", float("nan") if step == 45 else 2.0 - step / 100, step)
        writer.add_scalar("lr", 1e-3, step)
    writer.close()
    (file,) = (tmp_path / "tb").iterdir()
    data = bytearray(file.read_bytes())
    at = data.rfind(np.float32(2.0 - 30 / 100).tobytes())  # the loss of step 30
    data[at + 3] ^= 0x7F
    file.write_bytes(bytes(data))
    doc = json.loads(invoke(str(tmp_path / "tb"), "--format", "json").stdout)
    (run,) = doc["runs"]
    assert any("dropped 1 record(s) whose checksum does not match" in w for w in run["warnings"])
    assert run["steps"] == 59  # step 30's loss is unread, not a step of the run; step 45's NaN was logged
    assert [(i["kind"], i["step"], i["severity"]) for i in run["incidents"]] == [("nonfinite", 45, "critical")]


def test_steps_that_do_not_fit_int64_are_dropped(tmp_path):
    rows = healthy_rows(60) + [(1e30, 1.0, 1e-3), (61.5, 1.0, 1e-3)]
    doc = json.loads(invoke(str(write_csv(tmp_path / "m.csv", rows)), "--format", "json").stdout)
    (run,) = doc["runs"]
    assert (run["first_step"], run["last_step"], run["steps"]) == (0, 59, 60)
    assert "m.csv: 1 row(s) with a 'step' too large for a 64-bit step (e.g. 1e30) were skipped" in run["warnings"]
    assert "m.csv: 1 row(s) with a non-integer 'step' were skipped" in run["warnings"]


@pytest.mark.parametrize("name", ["metrics.csv", "run.csv"])
def test_text_in_the_loss_column_is_not_a_nonfinite_step(tmp_path, name):
    rows = [(s, "oops" if s == 30 else ("inf" if s == 40 else 2.0 - s / 1000), 1e-3) for s in range(60)]
    doc = json.loads(invoke(str(write_csv(tmp_path / name, rows)), "--format", "json").stdout)
    (run,) = doc["runs"]
    assert [(i["kind"], i["step"]) for i in run["incidents"]] == [("nonfinite", 40)]
    assert any("1 row(s) whose 'loss' is text, not a number" in w for w in run["warnings"])


# --------------------------------------------------------------------------- the real entry point


def test_installed_entry_point_never_prints_a_traceback(tmp_path):
    script = Path(sys.executable).with_name("sentinel")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    run = write_run(tmp_path / "run1")
    (run / "meta.json").write_text("{" * 50_000)
    (run / "skiplist.json").mkdir()
    for args, code in (([str(fifo)], 1), (["/dev/null", "--format", "json"], 1), ([str(run)], 0),
                       ([str(run), "--plot", "-"], 2)):
        done = subprocess.run([str(script), "analyze", *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == code, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stdout + done.stderr


def test_evaluation_rows_are_neither_steps_nor_a_nan_loss(tmp_path):
    # A Lightning CSV: validation rows at steps of their own, before and after the training rows,
    # each with the epoch every row has. The four after the last training row were read as a loss
    # that went NaN and never came back (critical), and every row counted as a step.
    rows = ["epoch,step,train_loss,val_loss"]
    rows += [f"0,{s},,{3.0 - s / 1000}" for s in (0,)]
    for s in range(1, 201):
        rows.append(f"0,{s},{3.0 - s / 1000},")
        if s % 50 == 0:
            rows.append(f"0,{s + 1000},,{3.0 - s / 1000}")
    (tmp_path / "metrics.csv").write_text("\n".join(rows) + "\n")
    doc = json.loads(invoke(str(tmp_path / "metrics.csv"), "--format", "json").stdout)
    (run,) = doc["runs"]
    assert (run["steps"], run["first_step"], run["last_step"]) == (200, 1, 200)
    assert run["verdict"] == "healthy" and run["incidents"] == []


@pytest.mark.parametrize("content", [
    os.urandom(1 << 16),  # a checkpoint or an archive saved under a log's name
    b"PK\x03\x04" + bytes(range(256)) * 64,
])
def test_binary_data_under_a_logs_name_is_said_to_be_binary(tmp_path, content):
    """It was told to 'pass --step-col/--loss-col for a table', which no column can fix."""
    (tmp_path / "train.log").write_bytes(content)
    result = invoke(str(tmp_path / "train.log"))
    assert result.exit_code == 1
    assert result.output == (f"Error: '{tmp_path / 'train.log'}' holds binary data, not text (a checkpoint or an archive "
                             "under a log's name?): pass a training log, its table or its TensorBoard event files "
                             "(`sentinel formats` lists what is read)\n")


def test_a_utf16_text_that_is_no_log_is_not_called_binary(tmp_path):
    (tmp_path / "notes.txt").write_text("just some words\nand more words\n" * 50, encoding="utf-16")
    result = invoke(str(tmp_path / "notes.txt"))
    assert result.exit_code == 1 and "binary" not in result.output and "is not a log format" in result.output


@pytest.mark.parametrize("name, kind", [("history.pkl", "a pickle (not loaded: unpickling runs code from the file)"),
                                        ("history.feather", "an Arrow (Feather) table"),
                                        ("history.xlsx", "a spreadsheet")])
def test_a_history_saved_in_a_binary_table_format_is_told_what_to_save_instead(tmp_path, name, kind):
    """Named on its own it was 'binary data, not a training log' (a feather file: 'a checkpoint or
    an archive under a log's name?'); a pickle is never loaded, as loading one runs its code."""
    import pickle

    (tmp_path / name).write_bytes(pickle.dumps({"loss": [2.0, 1.9, 1.8]}))
    result = invoke(str(tmp_path / name))
    assert result.exit_code == 1 and result.output == (
        f"Error: '{tmp_path / name}' is {kind}, not read: save the history as CSV or Parquet "
        "(df.to_csv('history.csv'), df.to_parquet('history.parquet')) and pass that\n")


_LFS_POINTER = ("version https://git-lfs.github.com/spec/v1\n"
                "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n")


def test_git_lfs_pointers_are_named_as_such(tmp_path):
    """A repository cloned without `git lfs pull` holds ~130-byte pointers in place of its event files and logs: they
    were 'truncated or damaged record at byte 0 ... its event files hold no scalars' or 'not a log format'. Each
    case names the pointer and the fix; a run directory with some real event files is read, with a warning."""
    from torch.utils.tensorboard import SummaryWriter

    runs = tmp_path / "runs" / "Dec15_07-29-26_host"
    runs.mkdir(parents=True)
    (runs / "events.out.tfevents.1671085786.host.1.0").write_text(_LFS_POINTER)
    (tmp_path / "metrics.csv").write_text(_LFS_POINTER)
    for target in (tmp_path, tmp_path / "metrics.csv", runs / "events.out.tfevents.1671085786.host.1.0"):
        result = CliRunner().invoke(main, ["analyze", str(target)])
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert "Git LFS pointer" in result.output and "git lfs pull" in result.output, result.output
    with SummaryWriter(str(runs)) as writer:
        for step in range(30):
            writer.add_scalar("train/loss", 2.0 - step / 30, step)
    result = CliRunner().invoke(main, ["analyze", str(runs), "--format", "json"])
    (run,) = json.loads(result.output)["runs"]
    assert run["steps"] == 30 and any("Git LFS pointers" in w for w in run["warnings"])
