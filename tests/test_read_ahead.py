"""Reading ahead (`sentinel analyze` parses a run's files on a thread while it imports pandas)
gives what reading afterwards gives: for sentinel run directories and TensorBoard event files,
whole, damaged, changed between the read ahead and the read, or never asked for."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sentinel.analyze.loaders import tfrecord
from sentinel.analyze.read_ahead import reading_ahead
from sentinel.parse_ahead import ParseAhead
from sentinel.store import RunWriter, steps_csv
from sentinel.tfrecord_crc import masked_crc32c

REPO = Path(__file__).resolve().parents[1]


def write_run(run: Path, steps: int = 300) -> None:
    rng = np.random.default_rng(0)
    with RunWriter(run, {"config": {}}, tensorboard=False) as writer:
        for step in range(steps):
            record = {"step": step, "loss": float(2.0 + rng.random()), "lr": 1e-3}
            if step % 50 == 0 and step:
                record["grad_norm/blocks.0"] = float(rng.random())  # a new key at 50: a new segment
            if step >= 150:
                record["loss_scale"] = 65536.0  # and at 150
            writer.write_step(record)


def read_fresh(run: Path) -> tuple[pd.DataFrame, list[str]]:
    assert not steps_csv._AHEAD._pending
    return steps_csv.read_steps(run)


def read_after_ahead(run: Path, change=None) -> tuple[pd.DataFrame, list[str]]:
    segments = steps_csv.read_ahead(run)
    assert segments
    for segment in segments:  # wait for the parse, so that a change comes after it
        steps_csv._AHEAD._pending[segment.resolve()].thread.join()
    if change is not None:
        change()
    try:
        return steps_csv.read_steps(run)
    finally:
        steps_csv.cancel_read_ahead(segments)


def assert_same_read(run: Path, change=None) -> list[str]:
    ahead, ahead_warnings = read_after_ahead(run, change)
    fresh, fresh_warnings = read_fresh(run)
    pd.testing.assert_frame_equal(ahead, fresh)
    assert ahead.attrs == fresh.attrs
    assert ahead_warnings == fresh_warnings
    return fresh_warnings


def test_a_run_read_ahead_is_the_run(tmp_path):
    write_run(tmp_path / "run")
    assert len(steps_csv.read_ahead(tmp_path / "run")) > 1  # several segments
    steps_csv.cancel_read_ahead([p for _, p in steps_csv.list_segments(tmp_path / "run")])
    assert assert_same_read(tmp_path / "run") == []


def test_a_segment_written_to_after_the_read_ahead_is_read_again(tmp_path):
    run = tmp_path / "run"
    write_run(run)
    last = sorted(run.glob("steps.*.csv"))[-1]

    def append() -> None:
        with open(last, "ab") as f:
            f.write(b"300,2.5,0.001,,65536.0\n")

    assert_same_read(run, append)
    assert read_fresh(run)[0].index[-1] == 300


def test_a_segment_replaced_or_removed_after_the_read_ahead_is_not_taken(tmp_path):
    run = tmp_path / "run"
    write_run(run)
    first, last = sorted(run.glob("steps.*.csv"))[0], sorted(run.glob("steps.*.csv"))[-1]

    def replace() -> None:  # same size, new file
        data = first.read_bytes().replace(b"0.001", b"0.002")
        tmp = run / "tmp"
        tmp.write_bytes(data)
        os.replace(tmp, first)
        last.unlink()

    assert_same_read(run, replace)


def test_damaged_segments_read_ahead_say_what_a_read_says(tmp_path):
    run = tmp_path / "run"
    write_run(run)
    segments = sorted(run.glob("steps.*.csv"))
    with open(segments[-1], "ab") as f:
        f.write(b"301,2.")  # a torn last line
    segments[1].write_bytes(b"\xff\xfe,loss\n1,2\n")  # a header that is not UTF-8
    with open(segments[0], "ab") as f:
        f.write(b"7,not a number,1\n")  # a malformed row
    warnings = assert_same_read(run)
    assert len(warnings) == 3


def test_what_is_not_taken_is_not_kept(tmp_path):
    run = tmp_path / "run"
    write_run(run)
    with reading_ahead([str(run), str(tmp_path / "missing"), 3]):
        assert steps_csv._AHEAD._pending
    assert not steps_csv._AHEAD._pending
    with reading_ahead([run]):
        steps_csv.read_steps(run)
        assert not steps_csv._AHEAD._pending  # taken once


def test_the_switch_interval_is_short_while_a_run_is_read_ahead_and_given_back_after(tmp_path, monkeypatch):
    """Threads reading beside an import get the GIL back within 0.2 ms, not 5; the process's own
    setting returns when the block ends, whether it ended by an error or not."""
    from sentinel.analyze import read_ahead

    run = tmp_path / "run"
    write_run(run)
    monkeypatch.setattr(read_ahead, "_cores", lambda: 2)
    before = sys.getswitchinterval()
    with pytest.raises(KeyError):
        with reading_ahead([run]):
            assert sys.getswitchinterval() == pytest.approx(min(before, 2e-4))
            raise KeyError
    assert sys.getswitchinterval() == before
    with reading_ahead([tmp_path / "missing"]):  # nothing to read: nothing changed
        assert sys.getswitchinterval() == before


def test_nothing_is_read_ahead_on_one_cpu(tmp_path, monkeypatch):
    from sentinel.analyze import read_ahead

    write_run(tmp_path / "run")
    monkeypatch.setattr(read_ahead, "_cores", lambda: 1)
    with reading_ahead([tmp_path / "run"]):
        assert not steps_csv._AHEAD._pending


def test_a_parse_that_fails_on_the_thread_is_done_again_by_the_reader(tmp_path):
    calls = []

    def parse(path: Path) -> str:
        calls.append(path)
        if len(calls) == 1:
            raise MemoryError
        return path.read_text()

    ahead = ParseAhead(parse)
    (tmp_path / "a").write_text("x")
    ahead.start([tmp_path / "a"])
    assert ahead.take(tmp_path / "a") is None
    assert ahead.take(tmp_path / "a") is None  # once


def event(step: int, values: dict[str, float]) -> bytes:
    """A scalar event as TensorBoard writes it, framed."""
    from tensorboard.compat.proto import event_pb2, summary_pb2

    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=k, simple_value=v) for k, v in values.items()])
    payload = event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary).SerializeToString()
    header = struct.pack("<Q", len(payload))
    return header + struct.pack("<I", masked_crc32c(header)) + payload + struct.pack("<I", masked_crc32c(payload))


def test_event_files_read_ahead_are_the_files(tmp_path):
    tb = tmp_path / "tb"
    tb.mkdir()
    file = tb / "events.out.tfevents.1.host"
    file.write_bytes(b"".join(event(s, {"loss": 1.0 / (s + 1), "lr": 0.1}) for s in range(500)))
    fresh_warnings: list[str] = []
    fresh = tfrecord.read_scalars(file, fresh_warnings)
    for change in (None, "append"):
        with reading_ahead([tb]):
            tfrecord._AHEAD._pending[file.resolve()].thread.join()
            if change:
                with open(file, "ab") as f:
                    f.write(event(500, {"loss": 9.0}))
                fresh = tfrecord._read_scalars(file, fresh_warnings)
            warnings: list[str] = []
            got = tfrecord.read_scalars(file, warnings)
        assert not tfrecord._AHEAD._pending
        assert sorted(got) == sorted(fresh) and warnings == fresh_warnings == []
        for tag in fresh:
            np.testing.assert_array_equal(got[tag][0], fresh[tag][0])
            np.testing.assert_array_equal(got[tag][1], fresh[tag][1])
    assert fresh["loss"][0][-1] == 500


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The console script's way in: the group called without arguments, on sys.argv."""
    code = "import sys; from sentinel.cli.main import main; sys.argv = ['sentinel', *sys.argv[1:]]; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("fmt", ["json", "table"])
def test_the_console_script_writes_its_whole_report_and_exit_code(tmp_path, fmt):
    """It ends without the interpreter's teardown once the report is written: the report, the
    notes on stderr and the exit code must all be there."""
    run = tmp_path / "run"
    write_run(run, steps=3000)
    with RunWriter(run, tensorboard=False) as writer:
        for step in range(3000, 3010):
            writer.write_step({"step": step, "loss": float("nan")})
    (tmp_path / "notes.txt").write_text("not a log")
    done = cli("analyze", str(run), str(tmp_path / "notes.txt"), "--format", fmt, "--fail-on", "critical",
               cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    from click.testing import CliRunner

    from sentinel.cli.main import main

    expected = CliRunner().invoke(main, ["analyze", str(run), str(tmp_path / "notes.txt"), "--format", fmt,
                                         "--fail-on", "critical"])
    assert expected.exit_code == 3
    assert done.stdout == expected.stdout
    if fmt == "json":
        report = json.loads(done.stdout)
        assert report["fail_on"]["met"] and report["problems"]
    else:
        assert "--fail-on critical met by" in done.stderr and "warning:" in done.stderr
        assert done.stderr == expected.stderr
    ok = cli("analyze", str(run), "--format", "json", cwd=tmp_path)
    assert ok.returncode == 0 and json.loads(ok.stdout)["runs"][0]["steps"] == 3010
    usage = cli("analyze", cwd=tmp_path)
    assert usage.returncode == 2 and "Missing argument" in usage.stderr


def test_the_console_script_reads_ahead_without_changing_the_report(tmp_path):
    run = tmp_path / "run"
    write_run(run, steps=2000)
    code = textwrap.dedent(f"""
        import json, sys
        import sentinel.store.steps_csv as steps_csv
        from sentinel.analyze.render.json_report import render_json
        import sentinel
        ahead = render_json(sentinel.analyze({str(run)!r}))
        steps_csv.read_ahead = lambda run_dir: []  # no read ahead
        plain = render_json(sentinel.analyze({str(run)!r}))
        print(json.dumps({{"same": ahead == plain}}))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"same": True}
