"""`sentinel demo` end to end at its default 400 steps (the ``demo_run`` fixture, shared with the
README's demo blocks), through the click entry point."""

from __future__ import annotations

import json

import matplotlib.image
from click.testing import CliRunner

from sentinel.cli.main import main


def test_demo_shows_an_unhealthy_run_and_a_recovered_one(demo_run):
    out, output = demo_run
    assert "1-unguarded" in output and "2-guarded" in output
    assert "loss_spike" in output and "rollback" in output
    # Each run is announced, with what to look for, before it trains.
    first, second = output.index("run 1 of 2: without sentinel"), output.index("run 2 of 2: with sentinel")
    assert first < second < output.index("sentinel analyze ")
    assert output.count("look for:") == 2
    report = CliRunner().invoke(main, ["analyze", str(out / "1-unguarded"), str(out / "2-guarded"),
                                       "--format", "json"], catch_exceptions=False)
    runs = {run["name"]: run for run in json.loads(report.output)["runs"]}
    assert runs["1-unguarded"]["verdict"] == "unhealthy"
    assert runs["2-guarded"]["verdict"] in ("healthy", "recovered")
    assert runs["2-guarded"]["final_loss"] < runs["1-unguarded"]["final_loss"]
    kinds = {i["kind"] for i in runs["2-guarded"]["incidents"]}
    assert {"loss_spike", "rollback", "skip"} <= kinds
    # The learning-rate surge collapses attention in the unguarded run; the recorder says so online.
    events = [json.loads(line) for line in (out / "1-unguarded" / "events.jsonl").read_text().splitlines()]
    collapsed = {e["module"] for e in events if e["kind"] == "entropy_collapse"}
    # Block 0 collapses within ten steps of the surge; block 1 falls more slowly (2.5 -> ~0.9 nats
    # by step 350), which the online detector may or may not call a collapse.
    assert "blocks.0.attn" in collapsed and collapsed <= {"blocks.0.attn", "blocks.1.attn"}
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(out / "report.png")
    assert image.shape[0] > 300 and image.shape[1] > 300


def test_demo_refuses_a_step_count_too_short_for_its_faults(tmp_path):
    result = CliRunner().invoke(main, ["demo", "--out", str(tmp_path), "--steps", "50"])
    assert result.exit_code == 2 and "50 is not in the range x>=100" in result.output


def test_demo_into_an_unwritable_directory_says_so_in_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = CliRunner().invoke(main, ["demo", "--out", str(blocker / "demo"), "--no-progress"])
    assert result.exit_code == 1
    assert result.output.count("\n") <= 2 and "pass a directory you can write to" in result.output
    assert "Traceback" not in result.output
