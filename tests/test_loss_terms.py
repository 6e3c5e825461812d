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
from pathlib import Path

from sentinel.analyze import analyze
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


@pytest.mark.parametrize(("last", "rise"), [(-27.506, False), (6.0, False), (-12.0, True)])
def test_a_loss_below_zero_that_rises(tmp_path, last, rise):
    """A PSNR loss (l_pix about -30: EFNet's paste) going -30.7, -28.1, -30.2, then -27.5 and the
    log's inf and NaN: x1.5 of -30.7 is -46, under every value, so each was a "large rise" (a false
    critical before the NaN). One row up before the NaN (+6.0) is the NaN's, told by it; rows that stay
    up, half the level's size above it (a short excerpt's x1.5, for a loss below 0), are a rise."""
    values = (-30.743, -28.084, -30.197, last, math.inf, math.nan) if not rise else \
        (-30.743, -28.084, -30.197, -30.5, -29.9, -30.3, last, last - 0.2, last + 0.1, last, last + 0.3, last - 0.1)
    lines = [_basicsr_line(0, it, (2e-4, 2e-5), {"l_pix": value}) for it, value in zip(range(151, 170), values)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    report = analyze_run(run)
    assert [i.kind for i in report.incidents] == (["loss_spike"] if rise else ["nonfinite"])


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


def _vits_log(steps: int, nan_from: int | None = None, terms: int = 6, console: bool = False) -> list[str]:
    """VITS' train.py: logger.info('Train Epoch: {} [{:.0f}%]') then logger.info([x.item() for x in
    losses] + [global_step, lr]), under utils.get_logger's "%(asctime)s\\t%(name)s\\t%(levelname)s\\t"
    (the console's "INFO:name:" with ``console``)."""
    rng = np.random.default_rng(0)
    prefix = "INFO:ljs_base:" if console else "2021-06-10 12:00:05,000\tljs_base\tINFO\t"
    lines = [f"{prefix}{{'train': {{'log_interval': 200, 'epochs': 20000}}}}"]
    for step in range(0, steps + 1, 200):
        epoch = step // 400 + 1
        mel = 20 + 40 / (1 + step / 2000) + float(rng.normal(0, 0.5))
        losses = [2.5, 2.3, 5.1, mel, 1.8, 1.5] if terms == 6 else [2.5, 2.3, 5.1, mel, 1.5]  # no loss_dur
        if nan_from is not None and step >= nan_from:
            losses = [math.nan] * terms
        lines.append(f"{prefix}Train Epoch: {epoch} [{100 * (step % 400) / 400:.0f}%]")
        lines.append(f"{prefix}{[float(x) for x in losses] + [step, 2e-4 * 0.999875 ** epoch]}")
        if step % 400 == 200:
            lines.append(f"{prefix}====> Epoch: {epoch}")
    return lines


def test_vits_lists_are_the_generators_sum_and_the_discriminators_loss(tmp_path):
    """VITS' loss_gen_all (every term but the first, loss_disc) is the loss; its NaN from step
    12,000 is told there (a GAN's run: judged on non-finite values)."""
    path = _write(tmp_path / "train.log", _vits_log(15_000, nan_from=12_000))
    assert "\tINFO\t[2.5, 2.3, 5.1, 60.0" in path.read_text()
    (run,) = discover_runs(path)
    assert run.source == "vits" and run.steps.index.tolist() == list(range(0, 15_001, 200))
    first = run.steps.iloc[0]
    assert first["loss"] == pytest.approx(2.3 + 5.1 + first["mel"] + 1.8 + 1.5) and first["loss_d"] == 2.5
    assert first["lr"] == pytest.approx(2e-4 * 0.999875)
    (incident,) = analyze_run(run).incidents
    assert (incident.kind, incident.severity, incident.step) == ("nonfinite", "critical", 12_000)


def test_a_vits_console_paste_without_durations(tmp_path):
    """so-vits-svc's first versions log five losses (no loss_dur); a console paste's "INFO:name:"."""
    (run,) = discover_runs(_write(tmp_path / "paste.txt", _vits_log(1000, terms=5, console=True)))
    assert run.source == "vits" and len(run.steps) == 6
    assert {"gen", "fm", "mel", "kl"} <= set(run.steps.columns) and "dur" not in run.steps.columns
    assert run.steps["loss"].iloc[-1] == pytest.approx(2.3 + 5.1 + run.steps["mel"].iloc[-1] + 1.5)


def test_rvc_loss_lines_under_their_step_and_lr(tmp_path):
    """RVC's train.py: logger.info([global_step, lr]) then its five losses as "loss_disc=X, ...":
    the generator's four summed as the loss, loss_disc as loss_d; two records under one "Train
    Epoch" line (a paste) are read, named on their own."""
    lines = []
    for step, (disc, gen, fm, mel, kl) in zip((3000, 3200), ((3.107, 4.287, 13.863, 26.175, 1.997),
                                                         (3.519, 3.646, 11.745, 26.872, 1.892))):
        lines += [f"INFO:feier:[{step}, 9.977523890319963e-05]",
                  f"INFO:feier:loss_disc={disc:.3f}, loss_gen={gen:.3f}, loss_fm={fm:.3f},loss_mel={mel:.3f}, "
                  f"loss_kl={kl:.3f}"]
        if step == 3000:
            lines += ["INFO:feier:====> Epoch: 19 [2024-02-29 14:55:36] | (0:00:51.579960)",
                      "INFO:feier:Train Epoch: 20 [39%]"]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "paste.txt", lines)), "--format", "json"])
    (run,) = json.loads(result.output)["runs"]
    assert (run["source"], run["steps"], run["verdict"]) == ("vits", 2, "healthy")
    assert run["final_loss"] == pytest.approx(3.646 + 11.745 + 26.872 + 1.892)


def test_an_rvc_log_longer_than_a_few_kilobytes_is_read(tmp_path):
    """RVC's train.log: its config dict, then per record "Train Epoch: E [50%]", "[step, lr]" and the losses'
    line. Past 4 KB (18 records) it was "no vits step lines found": a text that long is cut to the lines a
    record's pattern can match on, one line at a time, and RVC's record is two lines. A NaN's lines that no
    reader takes are said in the refusal."""
    lines = ["INFO:mi-test:{'train': {'log_interval': 200, 'seed': 1234, 'epochs': 20000}, 'data': {}}"]
    for k in range(1, 41):
        loss = "nan" if k > 30 else f"{3.0 + k / 100:.3f}"
        lines += [f"INFO:mi-test:Train Epoch: {k} [50%]", f"INFO:mi-test:[{200 * k}, 9.99875e-05]",
                  f"INFO:mi-test:loss_disc={loss}, loss_gen={loss}, loss_fm=9.140,loss_mel=21.200, loss_kl=1.602",
                  f"INFO:mi-test:====> Epoch: {k} [2023-06-11 10:01:02] | (0:01:32.852602)"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "vits" and run.steps.index.tolist() == list(range(200, 8001, 200))
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("nonfinite", 6200)]
    losses = [line for line in lines if "loss_disc=" in line]
    with pytest.raises(ValueError, match="its lines print a NaN loss .'loss_disc=nan'."):
        discover_runs(_write(tmp_path / "paste.log", losses[-3:]))


def test_so_vits_svc_4_loss_lines(tmp_path):
    """so-vits-svc 4.x logs f"Losses: {[loss_disc, loss_gen, loss_fm, loss_mel, loss_kl]}, step: {step}, lr: {lr},
    reference_loss: {sum}" under each "Train Epoch" line: "no vits step lines found" (its 3.0 list read alone).
    Read as that list: the generator's four terms the loss, loss_disc the discriminator's."""
    lines = []
    for k in range(1, 21):
        gen = "nan" if k > 15 else "2.8"
        lines += [f"2023-04-18 09:01:11,453\t44k\tINFO\tTrain Epoch: {k} [50%]",
                  f"2023-04-18 09:01:11,453\t44k\tINFO\tLosses: [2.25, {gen}, 9.5, {24.2 - k / 10:.2f}, 1.5], step: "
                  f"{200 * k}, lr: 9.99875e-05, reference_loss: 40.29806726407615",
                  f"2023-04-18 09:01:12,646\t44k\tINFO\t====> Epoch: {k}, cost 7.01 s"]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.source == "vits" and run.steps.index.tolist() == list(range(200, 4001, 200))
    assert run.steps["loss"].iloc[0] == pytest.approx(2.8 + 9.5 + 24.1 + 1.5)
    assert [i.kind for i in analyze_run(run).incidents if i.severity == "critical"] == ["nonfinite"]


def _edsr_log(epochs: int, terms: tuple[str, ...], explode_at: int | None = None) -> list[str]:
    """EDSR-PyTorch's trainer: "[Epoch E]\\tLearning rate: {:.2e}", then every print_every batches
    "[{samples}/{dataset}]\\t{display_loss}\\t{model:.1f}+{data:.1f}s", display_loss one "[{type}:
    {:.4f}]" per term and "[Total: ...]" after several."""
    rng = np.random.default_rng(0)
    lines, step = [], 0
    for epoch in range(1, epochs + 1):
        lines.append(f"[Epoch {epoch}]\tLearning rate: {1e-4:.2e}")
        for samples in range(1600, 16_001, 1600):
            step += 1
            values = {t: 6.0 * float(np.exp(rng.normal(0, 0.01))) * (500 if explode_at and step >= explode_at else 1)
                      for t in terms}
            shown = "".join(f"[{t}: {v:.4f}]" for t, v in values.items())
            if len(terms) > 1:
                shown += f"[Total: {sum(v for t, v in values.items() if t != 'DIS'):.4f}]"
            lines.append(f"[{samples}/16000]\t{shown}\t65.8+0.4s")
    return lines


def test_edsr_l1_loss_that_explodes_mid_epoch(tmp_path):
    """EDSR-PyTorch#214: L1 6.06 then 2948 at 11200/16000 and never back: its lines were "log L1,
    rate but no loss". The one term is the loss; the count goes on across epochs (in samples)."""
    (run,) = discover_runs(_write(tmp_path / "log.txt", _edsr_log(3, ("L1",), explode_at=27)))
    assert run.source == "edsr" and run.steps.index.tolist() == list(range(1600, 48_001, 1600))
    (incident,) = [i for i in analyze_run(run).incidents if i.severity == "critical"]
    assert (incident.kind, incident.step) == ("loss_spike", 27 * 1600)


def test_edsr_lines_with_a_space_before_the_tab(tmp_path):
    """EDSR-PyTorch#21's paste, "[1200/10500]\t[L1: nan] \t21.0+60.3s" (a space before the tab after the display):
    "no edsr step lines found", its 16 NaN lines unsaid."""
    lines = [line.replace("]\t65.8", "] \t65.8") for line in _edsr_log(2, ("L1",))]
    (run,) = discover_runs(_write(tmp_path / "log.txt", lines))
    assert run.source == "edsr" and len(run.steps) == 20


def test_edsr_terms_and_their_total(tmp_path):
    (run,) = discover_runs(_write(tmp_path / "log.txt", _edsr_log(2, ("VGG54", "GAN", "DIS"))))
    first = run.steps.iloc[0]
    assert first["loss"] == pytest.approx(first["vgg54"] + first["gan"], abs=2e-4) and "dis" in run.steps.columns


def test_bicyclegans_d_alone_is_the_discriminators(tmp_path):
    """BicycleGAN (pytorch-CycleGAN-and-pix2pix's trainer) prints its discriminator's loss as "D", its forks
    "disc": 'nothing to analyse: no loss logged by cyclegan' with no word of the fix. A quality measure among
    the terms (a fork's psnr_img_g) is no term: that log is left to --loss-col, and the message says so."""
    lines = [f"(epoch: {1 + it // 1000}, iters: {it % 1000 + 100}, time: 0.053, data: 0.003) G_GAN: {2.9 + it / 1e4:.3f} "
             f"D: 2.930 G_L1: {7.2 - it / 1e3:.3f} z_L1: 0.371 kl: 0.001 " for it in range(0, 3000, 100)]
    (run,) = discover_runs(_write(tmp_path / "loss_log.txt", lines))
    assert run.steps["loss"].iloc[0] == pytest.approx(2.9 + 7.2 + 0.371 + 0.001)
    assert run.steps["loss_d"].iloc[0] == pytest.approx(2.93)
    lines = [f"(epoch: 1, iters: {it}, time: 0.053, data: 0.003) gan_g: 0.7 l1_g: 0.1 dis_img: 0.6 psnr_img_g: 21.3 "
             for it in range(100, 1100, 100)]
    result = CliRunner().invoke(main, ["analyze", str(_write(tmp_path / "fork_loss_log.txt", lines))])
    assert result.exit_code == 1 and "--loss-col NAME" in result.output and "Traceback" not in result.output
    # ComboGAN's lists, a value a domain ("D: 0.111, 0.105 | G: ..."): the later values are no terms
    lines = [f"(epoch: 1, iters: {it}, time: 0.291) D: 0.111, 0.105 | G: {0.146 + it / 1e5:.3f}, 0.150 | Cyc: 0.092, 0.037 | "
             for it in range(100, 1100, 100)]
    (run,) = discover_runs(_write(tmp_path / "combogan_loss_log.txt", lines))
    assert run.steps["loss"].iloc[0] == pytest.approx(0.147 + 0.092) and run.steps["loss_d"].iloc[0] == pytest.approx(0.111)
    # a log whose lines hold nothing that could be a loss is told so, with no --loss-col to try
    lines = [f"[2023-05-01 10:00:0{i}] [INFO] [stage_1_and_2.py:1785:step] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
             f"Attempted loss scale: {2 ** (16 - i)}, reducing to {2 ** (15 - i)}" for i in range(6)]
    (run,) = discover_runs(_write(tmp_path / "ds.log", lines))
    assert any(w.startswith("no loss logged by deepspeed") and "--loss-col" not in w for w in run.warnings)


def _gluoncv_ssd(tmp_path, smooth_l1) -> Path:
    # gluoncv's scripts/detection/ssd/train_ssd.py: logger.info('[Epoch {}][Batch {}], Speed: {:.3f} samples/sec,
    # {}={:.3f}, {}={:.3f}'.format(epoch, i, speed, name1, loss1, name2, loss2)), its metrics CrossEntropy, SmoothL1
    lines = ["INFO:root:Start training from [Epoch 0]"]
    for k in range(30):
        lines.append(f"INFO:root:[Epoch {k // 10}][Batch {k % 10 * 20}], Speed: 24.210 samples/sec, "
                     f"CrossEntropy={5 * math.exp(-k / 10) + 1:.3f}, SmoothL1={smooth_l1(k)}")
    path = tmp_path / "train_ssd.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_detectors_box_term_gone_nan_is_told_and_a_healthy_one_reads_its_classification_loss_gluoncv(tmp_path):
    (run,) = analyze(_gluoncv_ssd(tmp_path, lambda k: "nan" if k >= 12 else f"{2 * math.exp(-k / 12) + 0.5:.3f}")).runs
    (incident,) = [i for i in run.incidents if i.kind == "nonfinite"]
    assert run.verdict == "unhealthy" and incident.severity == "critical"
    assert "SmoothL1 is read, the first of them that goes non-finite" in run.warnings[0]
    (run,) = analyze(_gluoncv_ssd(tmp_path, lambda k: f"{2 * math.exp(-k / 12) + 0.5:.3f}")).runs
    assert run.verdict == "healthy" and run.final_loss == pytest.approx(5 * math.exp(-2.9) + 1, abs=1e-3)
    assert "CrossEntropy is read, the one of them that is no box regression's smooth L1 term" in run.warnings[0]


@pytest.mark.parametrize("line, first_step", [
    # martinarjovsky/WassersteinGAN main.py: the generator's iteration the step
    (lambda k: f"[167/1000][{5 * k}/782][{24987 + k}] Loss_D: -0.{772816 + k} Loss_G: {'nan' if k > 20 else 0.5} "
               f"Loss_D_real: -0.193230 Loss_D_fake 0.579586", 24987),
    # soumith/dcgan.torch: epoch from 1, the batch from 0, 13 an epoch
    (lambda k: f"Epoch: [{95 + k // 13}][{k % 13:8d} / {13:8d}]\t Time: 0.266  DataTime: 0.000    "
               f"Err_G: {'nan' if k > 20 else 0.6444}  Err_D: 1.4740\t", 94 * 13),
])
def test_gan_prints_of_the_wgan_reference_and_dcgan_torch(tmp_path, line, first_step):
    """Both were refused: "not a log format" (WassersteinGAN's third bracket), and "no loss (an environment's
    returns ...)" for dcgan.torch's Err_G and Err_D. The generator's loss is read, its NaN told."""
    path = tmp_path / "train.log"
    path.write_text("".join(line(k) + "\n" for k in range(30)))
    (run,) = discover_runs(path)
    assert run.source == "gan" and run.steps.index[0] == first_step and "loss_d" in run.steps.columns
    assert [i.kind for i in analyze_run(run).incidents] == ["nonfinite"]



def test_rlkits_progress_csv_is_an_agents_run(tmp_path):
    """rlkit's CQL progress.csv: trainer/QF1 Loss, QF2 Loss, Policy Loss (about -Q, falling to -250 as Q grows) and
    Alpha Loss, summed as the loss, signed: 19 critical divergences on a healthy reference run, and pandas'
    PerformanceWarning printed. Its exploration/Returns Mean makes it an agent's run: the sum's rises not judged."""
    header = ["Epoch", "trainer/QF1 Loss", "trainer/QF2 Loss", "trainer/Policy Loss", "trainer/Alpha Loss",
              "exploration/Returns Mean", *(f"trainer/stat{k}" for k in range(120))]
    rows = [[e, 65 - e / 10 + 9 * (e % 3), 65 - e / 10, -2 - 4 * e + 30 * (e % 5), 0.01 * (-1) ** e, 100 + 20 * e,
             *([0.5] * 120)] for e in range(60)]
    path = tmp_path / "progress.csv"
    path.write_text(",".join(header) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 0 and "PerformanceWarning" not in result.output, result.output
    assert "-- healthy" in result.output and "reinforcement-learning run" in result.output
