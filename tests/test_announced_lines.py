"""A loss a tool changes on purpose, and says so in its log: MACE's second stage ("Changing loss based
on SWA") raises the energy's weight, its loss x250 from the next line on. By its curve alone a critical
spike and divergence (each of nine tutorial runs was called unhealthy); by the log's word a new level."""

from __future__ import annotations

import math

import pytest

from sentinel.analyze import analyze


def _mace_log(tmp_path, announce: bool):
    # mace/tools/train.py: logging.info(f"Epoch {epoch}: loss={valid_loss:.4f}, RMSE_E_per_atom={...:.1f} meV, ...")
    lines = []
    for epoch in range(0, 60, 2):
        if epoch == 36 and announce:
            lines.append("2024-07-24 01:52:17.606 INFO: Changing loss based on SWA")
        loss = 8 * math.exp(-epoch / 20) + 2 if epoch < 36 else 1800 * math.exp(-(epoch - 36) / 6) + 40
        lines.append(f"2024-07-24 01:52:{epoch:02d}.004 INFO: Epoch {epoch}: loss={loss:.4f}, "
                     f"RMSE_E_per_atom=3024.6 meV, RMSE_F=397.4 meV / A")
    path = tmp_path / "mace.log"
    path.write_text("\n".join(lines) + "\n")
    return analyze(path).runs[0]


@pytest.mark.parametrize("announce, verdict", [(True, "healthy"), (False, "unhealthy")])
def test_a_loss_the_tool_says_it_changed_is_a_new_level(tmp_path, announce, verdict):
    run = _mace_log(tmp_path, announce)
    assert run.verdict == verdict
    moves = [i for i in run.incidents if i.kind in ("loss_spike", "divergence")]
    assert moves and all((i.severity == "info") == announce for i in moves)
    if announce:
        assert any("MACE's 'Changing loss based on SWA'" in i.message for i in moves)
