"""`sentinel analyze` starts fast: reading a run dir never imports torch or lightning."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np

from sentinel.events import EventKind, make_event
from sentinel.metrics import GRAD_NORM_TOTAL, LOSS, LOSS_SCALE, LR
from sentinel.store import RunWriter


def test_analyze_of_a_run_dir_imports_neither_torch_nor_lightning(tmp_path):
    run = tmp_path / "run1"
    rng = np.random.default_rng(0)
    with RunWriter(run, {"config": {"lr": 1e-3}}, tensorboard=False) as writer:
        for step in range(300):
            loss = 2.0 * np.exp(-step / 100) + 0.5 + 0.01 * rng.standard_normal()
            writer.write_step({"step": step, "epoch": 0, "batch_idx": step, LOSS: 40.0 if 150 <= step < 153 else loss,
                               LR: 1e-3, GRAD_NORM_TOTAL: 1.0, LOSS_SCALE: 65536.0})
        writer.write_event(make_event(EventKind.SPIKE, 150, metric=LOSS, value=40.0))
    # The console script's own path: click's entry point, the analyzer, the store's reader.
    code = textwrap.dedent(f"""
        import json, sys
        from click.testing import CliRunner
        from sentinel.cli.main import main
        result = CliRunner().invoke(main, ["analyze", {str(run)!r}, "--format", "json"])
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "lightning", "pytorch_lightning"))
        print(json.dumps({{"exit": result.exit_code, "heavy": heavy, "output": result.output}}))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["exit"] == 0, result["output"]
    assert result["heavy"] == []
    report = json.loads(result["output"])
    kinds = [i["kind"] for r in report["runs"] for i in r["incidents"]]
    assert "loss_spike" in kinds


def test_only_the_console_script_keeps_freed_memory(tmp_path, monkeypatch):
    """``sentinel analyze`` as its own process tells glibc to keep freed memory for reuse; run
    inside a caller's process (CliRunner, as ``sentinel.analyze`` would be) it leaves the
    allocator alone."""
    import platform

    from click.testing import CliRunner

    import sentinel.cli.analyze as analyze_command
    from sentinel.cli.main import main

    run = tmp_path / "run1"
    with RunWriter(run, {}, tensorboard=False) as writer:
        for step in range(50):
            writer.write_step({"step": step, LOSS: 2.0 - step / 100})
    mark = tmp_path / "kept"
    code = textwrap.dedent(f"""
        import sys
        import sentinel.cli.analyze as analyze_command
        real = analyze_command.keep_freed_memory
        def spy():
            kept = real()
            open({str(mark)!r}, "w").write(str(kept))
            return kept
        analyze_command.keep_freed_memory = spy
        from sentinel.cli.main import main
        sys.argv = ["sentinel", "analyze", {str(run)!r}, "--format", "json"]
        main()
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runs"][0]["steps"] == 50
    assert mark.read_text() == str(platform.libc_ver()[0] == "glibc")

    calls = []
    monkeypatch.setattr(analyze_command, "keep_freed_memory", lambda: calls.append(1))
    result = CliRunner().invoke(main, ["analyze", str(run), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert calls == []
