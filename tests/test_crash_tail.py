"""A text log that ends in a Python traceback: the run stopped there, and the report says so."""

from __future__ import annotations

import traceback

import numpy as np

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs


def _steps(n: int = 200) -> list[str]:
    return [f"step {s} | loss {2.5 * np.exp(-s / 100) + 0.8:.4f}" for s in range(1, n + 1)]


def _traceback_of(error: BaseException) -> str:
    try:
        raise error
    except BaseException:  # noqa: BLE001 - the point is its printed traceback
        return traceback.format_exc()


def test_a_log_that_ends_in_an_error_did_not_finish(tmp_path):
    path = tmp_path / "train.log"
    oom = RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB")
    path.write_text("\n".join(_steps()) + "\n" + _traceback_of(oom), encoding="utf-8")
    (run,) = discover_runs(path)
    report = analyze_run(run)
    (crash,) = report.incidents
    assert (crash.kind, crash.step, crash.severity.value) == ("crash", 200, "warning")
    assert "stopped after step 200 with RuntimeError: CUDA out of memory" in crash.message
    assert report.verdict.value == "unhealthy"


def test_stopped_by_hand_is_information(tmp_path):
    path = tmp_path / "train.log"
    path.write_text("\n".join(_steps()) + "\n^C" + _traceback_of(KeyboardInterrupt()), encoding="utf-8")
    (run,) = discover_runs(path)
    report = analyze_run(run)
    (crash,) = report.incidents
    assert crash.severity.value == "info" and "stopped by hand" in crash.message
    assert report.verdict.value == "healthy"


def test_a_traceback_the_run_went_on_from_and_a_nonfinite_error_are_no_crash(tmp_path):
    lines = _steps()
    lines[100:100] = _traceback_of(ValueError("a bad sample, skipped")).splitlines()
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (run,) = discover_runs(path)
    assert analyze_run(run).incidents == []
    nan = RuntimeError("Function 'SqrtBackward0' returned nan values in its 0th output.")
    path.write_text("\n".join(_steps()) + "\n" + _traceback_of(nan), encoding="utf-8")
    (run,) = discover_runs(path)
    assert [i.kind for i in analyze_run(run).incidents] == ["nonfinite"]
    detectron2 = FloatingPointError("Loss became infinite or NaN at iteration=201!")
    path.write_text("\n".join(_steps()) + "\n" + _traceback_of(detectron2), encoding="utf-8")
    (run,) = discover_runs(path)
    assert "crash" not in run.meta


def test_a_megatron_log_ending_in_a_ranks_traceback(tmp_path):
    """nanotron's pipeline-parallel run crashed in its logging after iteration 1, every line of
    its traceback tagged "[rank0]: " by torchrun: "healthy", the Megatron-style reader never looked
    for a traceback, and the tagged error line was no error line."""
    lines = [f"07/03 07:57:21 [INFO|PP=1]: iteration: {i} / 2000 | consumed_tokens: 65.5K | grad_norm: 6.4 | "
             f"lm_loss: {12.1 - i / 10:.3g} | lr: 0.00015 |" for i in range(1, 6)]
    error = AttributeError("'NoneType' object has no attribute 'item'")
    lines += ["[rank0]: " + line for line in _traceback_of(error).splitlines()]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (run,) = discover_runs(path)
    assert run.source == "megatron"
    (crash,) = analyze_run(run).incidents
    assert (crash.kind, crash.step) == ("crash", 5)
    assert "AttributeError: 'NoneType' object has no attribute 'item'" in crash.message
