"""DDP with 2 real CPU processes (gloo): every rank acts together, only rank 0 writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sentinel import load_run

pytestmark = pytest.mark.distributed
SCRIPT = Path(__file__).parent / "scripts" / "ddp_run.py"


def _run(tmp_path: Path, fault: str) -> Path:
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), fault], env=env,
                          capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp_path / "run"


def _events(run: Path, kind: str) -> list[dict]:
    return [e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines()) if e["kind"] == kind]


def _same_weights(tmp_path: Path) -> None:
    w0 = torch.load(tmp_path / "weights_rank0.pt")
    w1 = torch.load(tmp_path / "weights_rank1.pt")
    for key in w0:
        assert torch.equal(w0[key], w1[key]), key
        assert torch.isfinite(w0[key]).all(), key


def test_poison_on_one_rank_is_withheld_on_every_rank_together(tmp_path):
    run = _run(tmp_path, "poison")
    _same_weights(tmp_path)
    # Rank 1's poisoned batch: every rank withholds the update together, no rollback needed.
    assert [e["step"] for e in _events(run, "skip_step")] == [40] and not _events(run, "rollback")
    loaded = load_run(run)
    assert loaded.meta["world_size"] == 2
    assert loaded.steps.index.is_unique and len(loaded.steps) == 80  # one record per step, not per rank
    # The poisoned batch of rank 1 is in the skip list, named by its rank.
    skipped = {(e["rank"], i) for e in loaded.skiplist for i in e["indices"]}
    assert (1, 2 * (40 * 8) + 1) in skipped


def test_nan_on_one_rank_is_reported_with_that_rank(tmp_path):
    run = _run(tmp_path, "nan")
    _same_weights(tmp_path)
    sources = _events(run, "nonfinite")
    assert any(e["rank"] == 1 and e["module"] == "<input>" for e in sources), sources
    assert _events(run, "skip_step") and not _events(run, "rollback")


@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_grad_norms_are_global_under_ddp_and_fsdp(tmp_path, mode):
    # Lightning's FSDP strategy needs a GPU; FSDP2 (fully_shard) itself runs on CPU with gloo.
    script = Path(__file__).parent / "scripts" / "sharded_norm.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "SENTINEL_TEST_PORT": str(29541 + (os.getpid() + (mode == "fsdp")) % 2000)}
    proc = subprocess.run([sys.executable, str(script), str(tmp_path), mode], env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    norms = json.loads((tmp_path / "norms.json").read_text())
    assert norms["recorded"] == pytest.approx(norms["reference"], rel=1e-5)


def test_fsdp_shards_withhold_an_update_together(tmp_path):
    script = Path(__file__).parent / "scripts" / "sharded_norm.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "SENTINEL_TEST_PORT": str(31541 + os.getpid() % 2000)}
    proc = subprocess.run([sys.executable, str(script), str(tmp_path), "fsdp_rollback"], env=env,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "rollback.json").read_text())
    # Rank 1's poisoned batch: both ranks withhold the update together (tier 1), no rollback.
    assert result["skipped"] == [25] and "rollback" not in result["kinds"]
    assert result["finite"]
