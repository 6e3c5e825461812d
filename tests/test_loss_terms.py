"""Logs that print a loss's terms and no total, read as the sum their trainer optimises: BasicSR's
(``l_pix``; a GAN's ``l_g_*`` and ``l_d_*``) and CycleGAN's. Each log is written here from the
tool's own format string."""

from __future__ import annotations

import datetime
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs
from sentinel.analyze.loaders import LoadOptions
from sentinel.cli.main import main


def _basicsr_line(epoch: int, it: int, lrs: tuple[float, ...], losses: dict[str, float], eta: bool = True) -> str:
    """basicsr/utils/logger.py MessageLogger.__call__, under the logger's "%(asctime)s %(levelname)s:"."""
    message = f"[train..][epoch:{epoch:3d}, iter:{it:8,d}, lr:("
    message += "".join(f"{v:.3e}," for v in lrs) + ")] "
    if eta:
        message += f"[eta: {datetime.timedelta(seconds=int(93784 - it))}, time (data): 0.512 (0.004)] "
    message += "".join(f"{k}: {v:.4e} " for k, v in losses.items())
    return f"2022-03-01 10:00:00,000 INFO: {message}"


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_basicsr_pixel_loss_with_thousands_in_its_iterations(tmp_path):
    """A super-resolution model's one term, l_pix, is the loss; iter is the global step, printed
    "{:8,d}" (1,000); the NaN at iteration 12,300 is told there."""
    rng = np.random.default_rng(0)
    lines = ["2022-03-01 10:00:00,000 INFO: Model [SRModel] is created.",
             "2022-03-01 10:00:00,000 INFO: Start training from epoch: 0, iter: 0"]
    for it in range(100, 15_001, 100):
        loss = math.nan if it >= 12_300 else 0.03 * (1 + 3 / (1 + it / 500)) * float(np.exp(rng.normal(0, 0.05)))
        lines.append(_basicsr_line(it // 2000, it, (2e-4,), {"l_pix": loss}))
        if it % 5000 == 0:
            lines += ["2022-03-01 10:00:00,000 INFO: Validation Set5", f"\t # psnr: 30.1234\tBest: 30.1234 @ {it} iter"]
    path = _write(tmp_path / "train_RRDBNet_x4.log", lines)
    assert lines[-30].endswith("iter:  12,300, lr:(2.000e-04,)] [eta: 22:38:04, time (data): 0.512 (0.004)] l_pix: nan ")
    (run,) = discover_runs(path)
    assert run.source == "basicsr" and run.steps.index.tolist() == list(range(100, 15_001, 100))
    assert run.steps["lr"].iloc[0] == 2e-4
    assert "loss read from 'l_pix' (no key is named loss; --loss-col picks another)" in run.warnings
    (incident,) = [i for i in analyze_run(run).incidents if i.severity == "critical"]
    assert (incident.kind, incident.step) == ("nonfinite", 12_300)


def test_basicsr_gan_terms_are_the_generators_and_the_discriminators_losses(tmp_path):
    """ESRGAN's lines (Real-ESRGAN's too): the generator's l_g_* terms summed as the loss, the
    discriminator's l_d_* as loss_d; out_d_* are its outputs, in neither."""
    lines = [_basicsr_line(0, it, (1e-4, 1e-4), {"l_g_pix": 0.01, "l_g_percep": 2.0, "l_g_gan": 0.02,
                                                 "l_d_real": 0.6, "out_d_real": 1.2, "l_d_fake": 0.7,
                                                 "out_d_fake": -1.1}) for it in range(100, 2001, 100)]
    (run,) = discover_runs(_write(tmp_path / "train_RealESRGANx4.log", lines))
    assert run.steps["loss"].iloc[0] == pytest.approx(2.03) and run.steps["loss_d"].iloc[0] == pytest.approx(1.3)
    assert "loss is the generator's" in run.warnings[0] and "out_d" not in run.warnings[0]
    assert analyze_run(run).verdict == "healthy"


@pytest.mark.parametrize("line", [
    "21-03-01 10:00:00.000 - INFO: [epoch:  0, iter:   1,{it:03d}, lr:(1.000e-04,)] l_pix: {loss:.4e} ",  # mmsr, EDVR
    "21-03-01 10:00:00.000 - INFO: <epoch:  0, iter:   1,{it:03d}, lr:1.000e-04> l_pix: {loss:.4e} ",  # ESRGAN's codes
])
def test_the_older_basicsr_lines(tmp_path, line):
    lines = [line.format(it=it, loss=0.05 - it / 1e5) for it in range(0, 1000, 100)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "basicsr" and run.steps.index.tolist() == list(range(1000, 2000, 100))
    assert run.steps["loss"].iloc[-1] == pytest.approx(0.041)


def test_a_term_picked_with_loss_col_is_the_loss(tmp_path):
    """--loss-col G_A on a CycleGAN log: G_A alone, not the sum of the other terms."""
    lines = [f"(epoch: 1, iters: {it}, time: 0.2, data: 0.01) D_A: 0.3 G_A: {0.5 + it / 1e4:.3f} cycle_A: 1.7 "
             "idt_A: 0.5 D_B: 0.3 G_B: 0.4 cycle_B: 1.2 idt_B: 0.6 " for it in range(100, 1001, 100)]
    path = _write(tmp_path / "loss_log.txt", lines)
    (run,) = discover_runs(path, LoadOptions(loss_col="G_A"))
    assert run.steps["loss"].tolist() == pytest.approx([0.5 + it / 1e4 for it in range(100, 1001, 100)])
    result = CliRunner().invoke(main, ["analyze", str(path), "--format", "json"])
    assert json.loads(result.output)["runs"][0]["final_loss"] == pytest.approx(0.6 + 1.7 + 0.5 + 0.4 + 1.2 + 0.6)
