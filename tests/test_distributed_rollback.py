"""Rollbacks under DDP and FSDP2 with 2 real gloo processes: every rank restores the same step.

Each rank keeps its own snapshots (its own directory under ``snapshot_dir``). When a file is
damaged on one rank only, that rank would fall back to an older snapshot than the others: the
ranks agree on the newest step every one of them can restore, or all give up together.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.distributed
SCRIPT = Path(__file__).parent / "scripts" / "dist_rollback.py"
FAULT = 30  # the script's damage step; the rollback asks for the snapshot at FAULT - 5


def _run(tmp_path: Path, mode: str, damage: str) -> tuple[list[dict], list[dict[str, torch.Tensor]], list[dict]]:
    port = 30641 + (os.getpid() * 7 + ["ddp", "fsdp"].index(mode) * 3 + len(damage)) % 2000
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1", "SENTINEL_TEST_PORT": str(port)}
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), mode, damage], env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    weights = [torch.load(tmp_path / f"weights_rank{r}.pt") for r in range(2)]
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    return ranks, weights, events


def _identical(weights: list[dict[str, torch.Tensor]]) -> None:
    for key in weights[0]:
        assert torch.equal(weights[0][key], weights[1][key]), key
        assert torch.isfinite(weights[0][key]).all(), key


@pytest.mark.parametrize("mode, damage, restored", [
    ("fsdp", "none", FAULT - 5),    # persistent damage under FSDP: a real rollback of every shard
    ("ddp", "newest", FAULT - 10),  # rank 1's file of step 25 is damaged: every rank restores 20
    ("fsdp", "newest", FAULT - 10),  # the same with shards: no model stitched from two steps
])
def test_every_rank_restores_the_same_step(tmp_path, mode, damage, restored):
    ranks, weights, events = _run(tmp_path, mode, damage)
    for rank in ranks:
        assert rank["gave_up"] is None
        # Right after the rollback each rank holds exactly the whole model recorded after that
        # many steps: its own shard, or its replica, of the same step as the other rank.
        assert [(r["restored"], r["equal"]) for r in rank["rollbacks"]] == [(restored, True)], rank
    (rollback,) = [e for e in events if e["kind"] == "rollback"]
    assert rollback["restored_step"] == restored and rollback["spike_step"] == FAULT
    assert rollback["weights_check"]["weights_ok"] is False  # the re-run saw damaged weights
    _identical(weights)


def test_no_step_every_rank_can_restore_gives_up_on_every_rank(tmp_path):
    # Every snapshot file of rank 1 is damaged: no common step, so no rank restores anything.
    ranks, weights, events = _run(tmp_path, "ddp", "all")
    assert all(r["gave_up"] and "no snapshot could be restored" in r["gave_up"] for r in ranks), ranks
    assert "another rank has none left" in ranks[0]["gave_up"]  # rank 0's own files were fine
    assert not ranks[0]["rollbacks"] and not ranks[1]["rollbacks"]
    (gave_up,) = [e for e in events if e["kind"] == "gave_up"]
    assert gave_up["restored_step"] is None and not [e for e in events if e["kind"] == "rollback"]
    _identical(weights)  # left as they were, the same on both ranks
