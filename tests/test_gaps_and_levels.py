"""Pasted excerpts that skip a stretch ("..." between their parts) and losses that jump to a new
level and stay there: what the rules say across the gap, and that a level is one spike."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs
from sentinel.analyze.rule_divergence import divergence_incidents
from sentinel.analyze.spans import gap_rows


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _incidents(path):
    (run,) = discover_runs(path)
    return analyze_run(run).incidents


def test_a_jump_between_two_logged_steps_is_a_gap_a_change_of_cadence_is_not():
    assert gap_rows(np.array([1, 100, 200, 300, 26300, 26400, 26500])).tolist() == [3]
    # every step for 100 steps, then every 100: the intervals after the change are as long as it
    assert gap_rows(np.concatenate([np.arange(100), np.arange(100, 20000, 100)])).tolist() == []
    assert gap_rows(np.array([0, 10, 20])).tolist() == [] and gap_rows(np.arange(0, 100, 10)).tolist() == []
    # a last interval 11x the cadence, with nothing after it, is a gap too (a resumed tail)
    assert gap_rows(np.array([0, 10, 20, 30, 140])).tolist() == [3]


def _progress_meter(steps_and_losses):
    """PyTorch's ImageNet-example ProgressMeter, as CHGNet's trainer prints it."""
    return [f"Epoch: [0][{step}/44451] | Time (0.623)(0.335) | Loss {v:.4f}({v:.4f}) | MAE e 0.412(0.477)"
            for step, v in steps_and_losses]


def test_an_excerpt_pasted_with_dots_between_its_parts(tmp_path):
    """CHGNet's issue: three noisy batches, "...", 26,000 steps later three more, the last one
    x390. The stretch the paste skips is no divergence ("diverged from step 300 until 26500": the
    loss is back at its best at 26,400), and the head's noise is not one span with the spike at
    its end."""
    lines = _progress_meter([(1, 0.3169), (100, 0.5776), (200, 0.4351), (300, 0.9594)])
    lines += ["..."] + _progress_meter([(26300, 1.3189), (26400, 0.3473), (26500, 124.5792)])
    found = _incidents(_write(tmp_path / "train.log", lines))
    kinds = [(i.kind, i.step, i.end_step, i.severity) for i in found]
    assert ("loss_spike", 26300, 26500, "critical") in kinds
    assert not any(i.kind == "divergence" for i in found), kinds
    head = [i for i in found if i.kind == "loss_spike" and i.end_step == 300]
    # the rows after the gap are back down at 26,400: when is not known, but it came back
    assert [i.severity for i in head] in ([], ["warning"])
    for i in head:
        assert "back down by step 26400, after the log skips from step 300 to 26300" in i.message


def test_a_spike_still_up_after_the_gap_is_not_back_down(tmp_path):
    """BigScience tr8 exp1: 6.44 at 7,000, 11.42 at 7,010, ``[...]``, 7.16 at 7,220 (its authors:
    it "went down to ~7 and stayed there", then NaN). Nothing was logged within 200 steps of the
    peak: the finding is that the row after the gap is still up, not "not recovered within 200"."""
    lines = [f" iteration {it:8d}/  159576 | consumed samples: {it * 37:10d} | learning rate: 6.000E-05 | "
             f"global batch size:    96 | lm loss: {loss:.6E} | loss scale: 2048.0 | grad norm: 98258.265 |"
             for it, loss in [(6980, 6.461), (6990, 6.450), (7000, 6.444662), (7010, 11.42026)]]
    lines += [" [...]", f" iteration     7220/  159576 | consumed samples: {7220 * 37:10d} | learning rate: "
              "6.000E-05 | global batch size:    96 | lm loss: 7.155109E+00 | loss scale: 2048.0 | grad norm: 16921.991 |"]
    (spike,) = [i for i in _incidents(_write(tmp_path / "train.log", lines)) if i.kind == "loss_spike"]
    assert (spike.step, spike.severity) == (7010, "critical")
    assert spike.message.endswith("not back down by step 7220, after the log skips from step 7010 to 7220")


def test_a_divergence_across_gaps_starts_after_the_loss_was_last_back(tmp_path):
    """PixelLink's paste: a spike at 6,450 back by 6,510, "...", the loss at 1e4-1e5 from 10,830,
    "...", still there at 11,480-11,500. The detector's stretch ran from the first spike across
    both gaps (its smoothed level never came back under the margin); the loss was back at its
    best at 6,510, so it diverged from 10,830, and nothing said so where the stretch was dropped."""
    rows = [(6420, 5.42), (6430, 5.36), (6440, 9.05), (6450, 6377.5), (6460, 5869.9), (6470, 1870.6), (6480, 711.1),
            (6490, 13.24), (6500, 8.34), (6510, 5.85), (10830, 146732.0), (10840, 104813.2), (10850, 47788.4),
            (10860, 40910.6), (10870, 19970.1), (10880, 41234.4), (11480, 3617.9), (11490, 13358.7), (11500, 22579.4)]
    lines = []
    for step, loss in rows:
        lines += (["..."] if step in (10830, 11480) else []) + [f"Step {step}: loss = {loss:.4f} lr = 0.0001"]
    found = _incidents(_write(tmp_path / "train.log", lines))
    (div,) = [i for i in found if i.kind == "divergence"]
    assert (div.step, div.end_step, div.severity) == (10830, 11500, "critical")
    assert div.message.startswith("loss diverged from step 10830: smoothed loss ")
    assert any(i.kind == "loss_spike" and i.step == 6440 and i.severity == "warning" for i in found)


def test_a_level_the_loss_jumped_to_and_kept_is_one_spike_across_a_gap(tmp_path):
    """DNABERT's fine-tune: 0.38-0.54 up to step 8,100, then (the paste skipping to 41,200) flat at
    ln 2 with a spread of 4e-4. The detector flags that level again and again against the
    pre-gap baseline: one spike from 41,200 (and the divergence and the chance level), not a
    fresh "spike to 0.6936 at 41,700, score 32" inside the flat band."""
    rng = np.random.default_rng(0)
    rows = [{"learning_rate": 2e-4, "loss": float(0.46 + 0.04 * rng.standard_normal()), "step": s}
            for s in range(6600, 8101, 100)]
    rows += [{"learning_rate": 1e-5, "loss": float(0.6933 + 0.0002 * rng.standard_normal()), "step": s}
             for s in range(41200, 42701, 100)]
    found = _incidents(_write(tmp_path / "log.jsonl", [json.dumps(r) for r in rows]))
    spikes = [(i.step, i.end_step) for i in found if i.kind == "loss_spike"]
    assert spikes == [(41200, 42700)], [(i.kind, i.step, i.message) for i in found]
    assert any(i.kind == "divergence" and i.step == 41200 for i in found)


@pytest.mark.parametrize("seed", [7, 12, 19, 45])
def test_a_loss_that_jumped_to_a_new_level_is_not_spiking_again_inside_it(tmp_path, seed):
    """An HF reranker: 0.0003-0.06 for 37 logged steps, 0.67 then 2.07-2.13 to the end (64). Rows
    at that level were "a loss spike to 2.106 at step 60, 59x baseline 0.036" after the first
    one: a rise that stands no higher than where the loss already was is the first spike going
    on, told as one span to the end."""
    rng = np.random.default_rng(seed)
    losses = [float(10 ** rng.uniform(-3.5, -1.2)) for _ in range(37)] + [0.6684]
    losses += [2.09 + 0.02 * rng.standard_normal() for _ in range(26)]
    lines = [f"{{'loss': {v:.4f}, 'grad_norm': 2.0, 'learning_rate': 1e-05, 'epoch': {k / 21.8:.2f}}}"
             for k, v in enumerate(losses)]
    spikes = [i for i in _incidents(_write(tmp_path / "train.log", lines)) if i.kind == "loss_spike"]
    assert [(i.step, i.end_step, i.severity) for i in spikes] == [(38, 64, "critical")], \
        [(i.step, i.message) for i in spikes]


def test_a_fresh_jump_above_the_level_is_its_own_spike(tmp_path):
    """The same loss at 2.09, and a jump to x2 of that level near the end: not the first spike
    going on (it rose above where the loss was), so its own incident."""
    rng = np.random.default_rng(7)
    losses = [float(10 ** rng.uniform(-3.5, -1.2)) for _ in range(37)] + [0.6684]
    losses += [2.09 + 0.02 * rng.standard_normal() for _ in range(26)]
    losses[58] = 4.3
    lines = [f"{{'loss': {v:.4f}, 'grad_norm': 2.0, 'learning_rate': 1e-05, 'epoch': {k / 21.8:.2f}}}"
             for k, v in enumerate(losses)]
    spikes = [i for i in _incidents(_write(tmp_path / "train.log", lines)) if i.kind in ("loss_spike", "outlier_batch")]
    assert [i.step for i in spikes][0] == 38 and any(i.details["peak_step"] == 59 for i in spikes[1:]), \
        [(i.step, i.message) for i in spikes]


def test_a_huge_spike_is_not_recovered_at_a_tenth_of_its_peak(tmp_path):
    """A TensorFlow text CNN ("{time}: step {step}, loss {loss:g}, acc {acc:g}"): 0.23-0.48, then
    3.6, 8.5, 322, 4977 and 155.7 at the last line. "Back under a tenth of the spike's height" put
    155.7 (570x the baseline) under 498: "recovered in 7 steps". Back down means back under what
    the spike rule itself would call a jump (x1.5); a moderate spike keeps its tenth-of-height rule."""
    losses = [0.43315, 0.479325, 0.256937, 0.273636, 0.232426, 3.60959, 8.54077, 5.25972, 322.297, 21.8541,
              131.247, 4977.22, 155.665]
    lines = [f"2018-03-21T13:56:22.703288: step {3866 + k}, loss {v:g}, acc 0.5" for k, v in enumerate(losses)]
    (spike,) = [i for i in _incidents(_write(tmp_path / "train.log", lines)) if i.kind == "loss_spike"]
    assert spike.severity == "critical" and spike.message.endswith("not recovered by the last logged step 3878")
    losses[-1] = 0.31  # back near its baseline: recovered
    (spike,) = [i for i in _incidents(_write(tmp_path / "train.log", [
        f"2018-03-21T13:56:22.703288: step {3866 + k}, loss {v:g}, acc 0.5" for k, v in enumerate(losses)]))
        if i.kind == "loss_spike"]
    assert spike.severity == "warning" and spike.message.endswith("recovered in 7 steps (step 3878)")


def test_a_divergence_cut_after_the_gap_that_lasts_is_kept():
    """A loss up before a gap, back at its best on the gap's first row after it, then up at every row
    for 2,000 logged steps: the detector's stretch, cut after that row, no longer crosses the gap,
    and it was dropped with the cut ones too short to have diverged: no divergence at all."""
    rng = np.random.default_rng(0)
    steps = list(range(0, 2000, 10)) + [50000] + list(range(50010, 52000, 10))
    values = list(1.0 + 0.01 * rng.standard_normal(150)) + [2.0] * 50 + [1.0] + [2.2] * 199
    (div,) = divergence_incidents(pd.Series(values, index=steps))
    assert (div.step, div.end_step) == (50010, 51990) and div.message.startswith("loss diverged from step 50010:")


def test_a_level_reached_across_the_rows_a_paste_left_out_is_no_sure_spike(tmp_path):
    """MACE's paste: its epochs 172-182 at 0.206-0.212, "......", epochs 798 and 800 at 0.294: a critical
    "spike ... not recovered" for a rise over 616 epochs left out (its asker: the validation loss crept up
    slowly). Where the loss stands up from the first row after a gap on, whether it jumped or rose is not
    known: a warning that says so. A spike after the gap that the rows show coming and going is judged as
    any (CHGNet's, above)."""
    rows = [(172, 0.2121), (174, 0.2073), (176, 0.2055), (178, 0.2055), (180, 0.2064), (182, 0.2080)]
    lines = [f"2022-09-20 10:29:03.008 INFO: Epoch {e}: loss={v:.4f}, RMSE_E_per_atom=86.6 meV, RMSE_F=144.2 meV / A"
             for e, v in rows]
    lines += ["......"] + [f"2022-09-20 12:44:32.619 INFO: Epoch {e}: loss={v:.4f}, RMSE_E_per_atom=79.2 meV, "
                           "RMSE_F=172.0 meV / A" for e, v in [(798, 0.2939), (800, 0.2940)]]
    (spike,) = [i for i in _incidents(_write(tmp_path / "mace.log", lines)) if i.kind == "loss_spike"]
    assert (spike.step, spike.severity) == (798, "warning")
    assert "the log skips from epoch 182 to 798 before it: whether the loss jumped or rose" in spike.message
    # the same rows with no gap between them: a spike the log shows, not back down
    lines = [line for line in lines if line != "......"]
    lines = [line.replace("Epoch 798", "Epoch 184").replace("Epoch 800", "Epoch 186") for line in lines]
    (spike,) = [i for i in _incidents(_write(tmp_path / "mace.log", lines)) if i.kind == "loss_spike"]
    assert spike.severity == "critical" and "skips" not in spike.message
