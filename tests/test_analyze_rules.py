"""Rules of the analyzer: each on a series with a known fault, checked against exact numbers or
against the guard's detector run independently; one end-to-end run of a real tiny model."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sentinel.analyze.analyzer import AnalyzeError, analyze, analyze_run
from sentinel.analyze.discover import discover_runs
from sentinel.analyze.config import AnalyzeConfig
from sentinel.analyze.loaders import LOSS_SUMS_GROWING_BATCHES, RunData
from sentinel.analyze.rule_nonfinite import nonfinite_mask
from sentinel.detect import DivergenceConfig, SpikeConfig, detect_divergence, detect_spikes
from sentinel.events import make_event
from sentinel.store import RunWriter


def curve(n: int = 400, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    steps = np.arange(n)
    return 3.0 * np.exp(-steps / 150) + 1.0 + 0.02 * rng.standard_normal(n)


def run_of(columns: dict, events: list[dict] | None = None, index=None) -> RunData:
    steps = pd.DataFrame(columns, index=pd.Index(index if index is not None else
                                                 range(len(next(iter(columns.values())))), name="step"))
    ev = pd.DataFrame.from_records(events) if events else pd.DataFrame(columns=["step", "kind"])
    return RunData("r", "r", "test", steps.astype("float64"), ev)


def by_kind(report, kind):
    return [i for i in report.incidents if i.kind == kind]


def test_healthy_run_is_healthy():
    report = analyze_run(run_of({"loss": curve(), "grad_norm/total": 1 + 0.01 * curve()}))
    assert report.verdict.value == "healthy"
    assert [i.kind for i in report.incidents if i.severity.value != "info"] == []
    assert report.final_loss == curve()[-1] and report.best_loss == curve().min()
    assert (report.steps, report.first_step, report.last_step) == (400, 0, 399)


def test_loss_spike_uses_the_guard_detector_and_measures_recovery():
    loss = curve()
    loss[200:203] *= [5.0, 4.0, 3.0]
    report = analyze_run(run_of({"loss": loss}))
    (spike,) = by_kind(report, "loss_spike")
    flagged = detect_spikes(pd.Series(loss), SpikeConfig())
    expected = list(flagged.index[flagged["is_spike"]])
    assert (spike.step, spike.end_step) == (expected[0], expected[-1]) == (200, 202)
    assert spike.details["peak"] == loss[200] and spike.details["peak_step"] == 200
    assert spike.details["baseline"] == flagged.loc[200, "baseline"]
    assert spike.details["score"] == flagged.loc[200:202, "score"].max()
    assert spike.details["recovered"] and spike.details["steps_to_recover"] == 3  # step 203
    assert spike.severity.value == "warning" and report.verdict.value == "recovered"
    assert "loss spike to" in spike.message and "recovered in 3 steps (step 203)" in spike.message


def test_unrecovered_spike_is_critical_and_thresholds_reach_the_detector():
    loss = curve()
    loss[390:] = 9.0
    report = analyze_run(run_of({"loss": loss}))
    (spike,) = by_kind(report, "loss_spike")
    assert spike.severity.value == "critical" and not spike.details["recovered"]
    assert "not recovered by the last logged step 399" in spike.message
    assert report.verdict.value == "unhealthy"
    # An absurd threshold silences the outlier test: no spike, through the detector's config.
    quiet = analyze_run(run_of({"loss": curve()}), AnalyzeConfig(threshold=1e9, warmup=2))
    assert by_kind(quiet, "loss_spike") == []


def test_grad_norm_explosion_lead_time():
    loss, grad = curve(), 1.0 + 0.01 * curve(seed=1)
    grad[250] = 40.0
    loss[253:256] *= 5  # a spike, not one outlier batch
    report = analyze_run(run_of({"loss": loss, "grad_norm/total": grad}))
    (gx,) = by_kind(report, "grad_norm_explosion")
    assert (gx.step, gx.details["lead_steps"], gx.details["loss_spike_step"]) == (250, 3, 253)
    assert "preceded the loss spike at step 253 by 3 steps" in gx.message
    lone = analyze_run(run_of({"loss": curve(), "grad_norm/total": grad}))
    # Back down and no loss spike: a grad-norm spike (information), not an explosion.
    assert by_kind(lone, "grad_norm_explosion") == []
    (blip,) = by_kind(lone, "grad_norm_spike")
    assert blip.details["lead_steps"] is None and blip.severity.value == "info"


def test_a_grad_norm_still_rising_when_the_loss_spikes_preceded_it():
    # The grad norm grows tenfold every 20 steps from step 200; the loss goes at step 260, 60
    # steps later and past grad_lead_max, while the norm is still up: it followed the norm.
    loss, grad = curve(), 1.0 + 0.01 * curve(seed=1)
    grad[200:300] = 10 ** (np.arange(1, 101) / 20)
    loss[260:275] *= 4
    report = analyze_run(run_of({"loss": loss, "grad_norm/total": grad}))
    (gx,) = by_kind(report, "grad_norm_explosion")
    assert (gx.details["loss_spike_step"], gx.details["lead_steps"]) == (260, gx.details["loss_spike_step"] - gx.step)
    assert gx.step < 260 and f"preceded the loss spike at step 260 by {260 - gx.step} steps" in gx.message


def test_divergence_from_the_detector():
    loss = curve(600)
    loss[300:] = loss[300:] * np.linspace(1.0, 3.0, 300)
    report = analyze_run(run_of({"loss": loss}))
    (div,) = by_kind(report, "divergence")
    assert div.severity.value == "critical" and not div.resolved and div.end_step == 599
    assert report.verdict.value == "unhealthy"


def test_nonfinite_steps_name_the_recorded_source():
    loss = curve()
    loss[120:123] = [np.nan, np.inf, np.nan]
    events = [make_event("nonfinite", 120, module="blocks.1.mlp", phase="forward", rank=0)]
    report = analyze_run(run_of({"loss": loss}, events))
    (nf,) = by_kind(report, "nonfinite")
    assert (nf.step, nf.end_step, nf.details["count"]) == (120, 122, 3)
    assert nf.message == "loss non-finite (+inf/nan) at steps 120-122 (3 steps); source: blocks.1.mlp (forward)"
    assert nf.resolved and report.verdict.value == "recovered"


def test_a_non_finite_grad_norm_with_a_finite_loss_after_it_is_a_skipped_update_not_damage():
    # Hugging Face's Trainer under fp16 logs the grad norm of an overflow step as inf (or nan):
    # the scaler skipped that update. Many at its start-up, then one now and then.
    loss, grad = curve(), 1 + 0.01 * curve()
    grad[[0, 1, 2, 150, 300]] = [np.inf, np.inf, np.nan, np.inf, np.nan]
    report = analyze_run(run_of({"loss": loss, "grad_norm/total": grad}))
    assert report.verdict.value == "healthy"
    found = by_kind(report, "nonfinite")
    assert [(i.step, i.end_step, i.severity.value) for i in found] == [(0, 2, "info"), (150, 150, "info"),
                                                                        (300, 300, "info")]
    assert all(i.details["update_skipped"] for i in found)
    assert "fp16 loss scaler skips an overflow at its start-up" in found[0].message
    # Again and again past the start-up: a warning (the scale overflows, or batches give inf gradients).
    grad = 1 + 0.01 * curve()
    grad[100:400:25] = np.inf
    report = analyze_run(run_of({"loss": loss, "grad_norm/total": grad}))
    assert {i.severity.value for i in by_kind(report, "nonfinite")} == {"warning"}
    assert report.verdict.value == "recovered" and "it keeps happening (12 of 400" in by_kind(report, "nonfinite")[0].message
    # An update that did reach the weights: the loss is non-finite after it. Critical, as before.
    grad, bad_loss = 1 + 0.01 * curve(), curve()
    grad[200] = np.inf
    bad_loss[201:205] = np.nan
    report = analyze_run(run_of({"loss": bad_loss, "grad_norm/total": grad}))
    assert {(i.step, i.severity.value) for i in by_kind(report, "nonfinite")} == {(200, "critical"), (201, "critical")}
    # The last step: nothing after it says the weights were sound.
    grad = 1 + 0.01 * curve()
    grad[399] = np.inf
    report = analyze_run(run_of({"loss": curve(), "grad_norm/total": grad}))
    assert [i.severity.value for i in by_kind(report, "nonfinite")] == ["critical"]
    # Never finite in the log (VG-LLM's 7B fine-tune: grad_norm nan at every logged step): no start-up
    # the log sees end, so no update in it reached the weights: a warning, not "the scaler's start-up".
    for rows in (2, 40):
        report = analyze_run(run_of({"loss": curve()[:rows], "grad_norm/total": np.full(rows, np.nan)}))
        (incident,) = by_kind(report, "nonfinite")
        assert incident.severity.value == "warning" and incident.details["update_skipped"]
        assert "no update in the log reached the weights" in incident.message


@pytest.mark.parametrize("falls", [True, False])
def test_a_grad_norm_never_finite_in_mmcvs_window_means_says_each_window_skipped_a_step(tmp_path, falls):
    """mmcv's text log: each value a mean over the 50 iterations since the last line, 'grad_norm: nan' where one of
    them overflowed under fp16. 'No update in the log reached the weights', with the loss falling from 4.35."""
    lines = [f"2022-12-05 16:28:38,593 - mmdet - INFO - Epoch [12][{50 * k}/3953]\tlr: 3.604e-06, eta: 3:08:55, "
             f"time: 3.157, data_time: 0.852, memory: 19582, loss_cls: 0.2271, "
             f"loss: {4.35 - (0.1 * k if falls else 0.01 * (k % 2)):.4f}, grad_norm: nan" for k in range(1, 13)]
    path = tmp_path / "20221205_162838.log"
    path.write_text("\n".join(lines) + "\n")
    (incident,) = by_kind(analyze_run(discover_runs(path)[0]), "nonfinite")
    assert "a mean over each logging window, is never finite in the log: every window held a step" in incident.message
    assert incident.severity.value == ("info" if falls else "warning")
    assert ("the other updates reached the weights" in incident.message) == falls


def test_an_evaluation_a_progress_bar_repeats_on_every_draw_counts_once():
    # Lightning's bar shows the last val_loss on each draw until the next evaluation (every 50
    # steps here); the evaluation at step 150 gave nan. One of 8 evaluations, not 50 of 400 rows.
    val = np.repeat([2.1, 1.9, 1.8, np.nan, 1.7, 1.65, 1.6, 1.58], 50)
    report = analyze_run(run_of({"loss": curve(), "val_loss": val, "val_acc": np.full(400, 0.5)}))
    (incident,) = by_kind(report, "nonfinite")
    assert incident.severity.value == "warning" and incident.details["evaluations"] == 8
    assert incident.message.startswith("val_loss non-finite (nan) at 1 of 8 evaluations (step 150)")
    # A value per evaluation (every 50th row, each one different): counted as they are.
    val = np.full(400, np.nan)
    val[49::50] = [2.1, 1.9, np.nan, np.nan, 1.7, 1.65, 1.6, 1.58]
    frame = {"loss": curve(), "val_loss": val, "val_acc": np.where(np.isnan(val) & (np.arange(400) % 50 != 49),
                                                                    np.nan, 0.5)}
    (incident,) = by_kind(analyze_run(run_of(frame)), "nonfinite")
    assert incident.message.startswith("val_loss non-finite (nan) at 2 of 8 evaluations (steps 149, 199)")


def test_a_loss_logged_once_an_epoch_recovers_and_plateaus_on_its_own_points():
    # Keras prints one loss per epoch; the step is the epoch's end (1875 batches an epoch).
    steps = [1875 * e for e in range(1, 11)]
    loss = [1.5 * math.exp(-e / 3) + 0.2 for e in range(1, 11)]
    loss[5] *= 3  # epoch 6; epoch 7 is back on the curve
    report = analyze_run(run_of({"loss": loss}, index=steps))
    (spike,) = by_kind(report, "loss_spike")
    assert spike.severity.value == "warning" and spike.message.endswith("recovered in 1875 steps (step 13125)")
    assert by_kind(report, "plateau") == []  # two epochs a little apart are no plateau
    assert report.verdict.value == "recovered"
    # Stalled for six epochs: a plateau, judged over four logged points (7500 steps), as it says.
    loss = [1.5 * math.exp(-e / 3) + 0.2 for e in range(1, 7)] + [0.41] * 14
    (plateau,) = by_kind(analyze_run(run_of({"loss": loss}, index=[1875 * e for e in range(1, 21)])), "plateau")
    assert plateau.message.endswith("less than 1% better per 7500 steps")


def test_run_ending_in_nan_is_unhealthy():
    loss = curve()
    loss[380:] = np.nan
    report = analyze_run(run_of({"loss": loss}))
    (nf,) = by_kind(report, "nonfinite")
    assert "never finite again" in nf.message and math.isnan(report.final_loss)
    assert report.verdict.value == "unhealthy"


def test_nonfinite_mask_tells_absent_from_logged_nan():
    # Loss logged every 10 steps; validation rows in between are absent, not NaN losses.
    s = pd.Series([1.0, np.nan, 0.9, np.nan, np.nan, 0.8], index=[0, 5, 10, 15, 20, 30])
    assert nonfinite_mask(s).tolist() == [False, False, False, False, True, False]


def test_loss_scale_collapse_and_overflow_rate():
    scale = np.full(100, 65536.0)
    scale[60:] = 2.0 ** -np.arange(1, 41)
    overflow = np.zeros(100)
    overflow[60:70] = 1
    report = analyze_run(run_of({"loss": curve(100), "loss_scale": scale, "amp/overflow": overflow}))
    (collapse,) = by_kind(report, "loss_scale_collapse")
    assert collapse.step == 60 and collapse.details["min"] == 2.0 ** -40
    assert collapse.details["orders"] == pytest.approx(math.log10(65536 * 2 ** 40))
    (rate,) = by_kind(report, "overflow_rate")
    assert rate.details == {"overflow_steps": 10, "logged_steps": 100, "rate": 0.1, "resolved": True}
    # Still overflowing at the end (a scaler searching down until the run died): not got past.
    overflow[95:] = 1
    report = analyze_run(run_of({"loss": curve(100), "amp/overflow": overflow}))
    (rate,) = by_kind(report, "overflow_rate")
    assert rate.details["resolved"] is False and "still overflowing at the last 5 logged steps" in rate.message
    assert report.verdict.value == "unhealthy"


def test_attention_entropy_collapse_per_module():
    idx = list(range(0, 500, 10))
    ent = np.linspace(2.0, 1.9, 50)
    ent[30:] = 0.05
    cols = {"loss": np.linspace(3, 1, 50), "attn_entropy/blocks.0.attn": np.full(50, 2.0),
            "attn_entropy/blocks.1.attn": ent, "attn_logit_max/blocks.1.attn": np.r_[np.full(30, 5.0), np.full(20, 80.0)]}
    report = analyze_run(run_of(cols, index=idx))
    (col,) = by_kind(report, "entropy_collapse")
    assert col.details["module"] == "blocks.1.attn" and col.step == 300
    assert col.details["logit_growth"] == 16.0 and col.details["final_entropy"] == 0.05


def test_plateau_is_info():
    loss = np.r_[np.linspace(3, 1, 200), np.full(1500, 1.0)]
    report = analyze_run(run_of({"loss": loss}))
    (plateau,) = by_kind(report, "plateau")
    # From step 198 (loss 1.0101) on, the best improves by less than 1% per 1000 steps.
    assert plateau.severity.value == "info" and (plateau.step, plateau.end_step) == (198, 1699)
    assert report.verdict.value == "healthy" and "rose" not in plateau.message


def test_a_plateau_whose_level_rose_says_so():
    """SphereFace under Caffe, pasted in two pieces: 9.48 at 2100-2300, then 11.42, 11.90, 11.52 at 15900-16100:
    "loss plateaued for 13800 steps (2300-16100): best 9.478", as if it had stayed flat."""
    loss = [9.47989, 9.47797, 9.48282, 11.4196, 11.9011, 11.5191]
    (plateau,) = by_kind(analyze_run(run_of({"loss": loss}, index=[2100, 2200, 2300, 15900, 16000, 16100])), "plateau")
    assert plateau.message.endswith("; its level rose x1.21 over it (9.483 to 11.52)")


@pytest.mark.parametrize("bump", [1.27, 1.12])
def test_a_plateau_the_loss_rose_within_and_came_back_says_so(bump):
    """Marian's cost 5.20, then 6.60, 6.30, 5.85, 5.25 over 8,000 updates: "plateaued ... best 5.202" alone, the rise its
    author filed as a bug unsaid. A noisy loss's bump of x1.1-x1.15 is its spread: not told."""
    loss = [5.20, 5.20 * bump, 5.20 * (bump - 0.05), 5.85 if bump > 1.2 else 5.4, 5.25, 5.22, 5.21]
    (plateau,) = by_kind(analyze_run(run_of({"loss": loss}, index=range(14000, 28000, 2000))), "plateau")
    assert ("; it rose to 6.604 at step 16000 (x1.27) and came back" in plateau.message) == (bump > 1.2)

def rollback_events(spike_step: int, restored: int, again: int | None = None) -> list[dict]:
    events = [make_event("spike", spike_step, metric="loss", value=9.0, baseline=1.1, score=30.0),
              make_event("rollback", spike_step + 1, spike_step=spike_step, restored_step=restored,
                         reason="loss_spike", skipped=[{"step": s} for s in range(restored + 1, spike_step + 1)])]
    events += [make_event("skip", s, batch_idx=s) for s in range(restored + 1, spike_step + 1)]
    if again is not None:
        events += rollback_events(again, again - 5)
    return events


def test_rollback_that_helped():
    report = analyze_run(run_of({"loss": curve()}, rollback_events(200, 190)))
    (rb,) = by_kind(report, "rollback")
    assert rb.details["helped"] and rb.details["restored_step"] == 190 and rb.details["skipped_batches"] == 10
    assert "helped: loss back under the pre-spike level" in rb.message
    (online,) = by_kind(report, "loss_spike")  # the rerun overwrote the spike: only the event saw it
    assert online.details["online"] and online.step == 200
    (skip,) = by_kind(report, "skip")
    assert (skip.step, skip.end_step, skip.details["batches"]) == (191, 200, 10)
    assert report.verdict.value == "recovered"


def test_rollback_that_did_not_help_says_so():
    loss = curve()
    loss[200:232] += 4.0  # the spike, and still high after the rollback until the next one at 230
    report = analyze_run(run_of({"loss": loss}, rollback_events(200, 190, again=230)))
    first, second = by_kind(report, "rollback")
    assert not first.details["helped"] and first.severity.value == "critical"
    assert "another rollback was needed at step 230" in first.message
    assert "skipping batches alone does not always cure a divergence" in first.message
    assert report.verdict.value == "unhealthy"


def test_a_later_rollback_after_recovery_answers_a_new_incident():
    report = analyze_run(run_of({"loss": curve()}, rollback_events(200, 190, again=300)))
    first, second = by_kind(report, "rollback")
    assert first.details["helped"] and second.details["helped"]
    assert report.verdict.value == "recovered"


def test_gave_up_is_critical():
    events = [make_event("gave_up", 300, reason="loss_spike", rollbacks=3, message="sentinel gave up at step 300")]
    report = analyze_run(run_of({"loss": curve()}, events))
    (g,) = by_kind(report, "gave_up")
    assert g.message == "sentinel gave up at step 300" and report.verdict.value == "unhealthy"


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 600), window=st.sampled_from([4, 9, 64]),
       rtol=st.sampled_from([0.0, 0.25, 1.0]), short_rtol=st.sampled_from([0.0, 0.5]),
       scale=st.sampled_from([1e-5, 1.0, 300.0]))
def test_sparse_spike_mode_agrees_with_the_full_one(seed, n, window, rtol, short_rtol, scale):
    """The analyzer judges only the values that can be spikes: every flagged row is among them,
    with the same numbers as the full mode, and so is every row a span of flags holds."""
    rng = np.random.default_rng(seed)
    values = scale * np.exp(rng.normal(0.0, rng.choice([0.01, 0.1, 0.6]), n))
    jumps = rng.integers(0, n, rng.integers(0, 8))
    values[jumps] *= rng.uniform(1.05, 30.0, len(jumps))
    values[rng.random(n) < 0.03] = np.nan
    values[rng.random(n) < 0.01] = np.inf
    values[rng.random(n) < 0.02] = 0.0
    series = pd.Series(values, index=np.arange(n) * 10)
    config = SpikeConfig(window=window, warmup=min(4, window), rtol=rtol, short_rtol=short_rtol)
    full, sparse = detect_spikes(series, config), detect_spikes(series, config, sparse=True)
    assert sparse.index.is_monotonic_increasing and sparse.index.isin(series.index[np.isfinite(values)]).all()
    pd.testing.assert_frame_equal(sparse, full.loc[sparse.index], check_exact=True)
    assert full.index[full["is_spike"]].tolist() == sparse.index[sparse["is_spike"]].tolist()
    finite_rows = series.index[np.isfinite(values)]
    flagged = np.flatnonzero(finite_rows.isin(full.index[full["is_spike"]]))
    inside = np.unique(np.concatenate([flagged, flagged + 1, flagged + 2]))
    assert finite_rows[inside[inside < len(finite_rows)]].isin(sparse.index).all()


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 400), level_window=st.sampled_from([1, 3, 16]),
       patience=st.sampled_from([0, 5, 40]), skip_nan=st.booleans())
def test_sparse_divergence_mode_agrees_with_the_full_one(seed, n, level_window, patience, skip_nan):
    """The analyzer keeps only the elevated and non-finite rows and the last one: the same
    numbers there as the full mode, and nothing elevated or diverged anywhere else."""
    rng = np.random.default_rng(seed)
    values = rng.choice([0.5, 3.0]) + 0.05 * rng.standard_normal(n)
    for _ in range(rng.integers(0, 4)):
        at = int(rng.integers(0, max(n, 1)))
        values[at:at + int(rng.integers(1, 80))] *= rng.uniform(1.0, 3.0)
    values[rng.random(n) < 0.05] = np.nan
    values[rng.random(n) < 0.02] = np.inf
    series = pd.Series(values, index=np.arange(n) * 10 + 3)
    config = DivergenceConfig(patience=patience, level_window=level_window, skip_nan=skip_nan)
    full, sparse = detect_divergence(series, config), detect_divergence(series, config, sparse=True)
    kept = full.loc[sparse.index]
    for column in full.columns:
        assert np.array_equal(kept[column].to_numpy(), sparse[column].to_numpy(),
                              equal_nan=column in ("onset", "level", "best")), column
    needed = full["elevated"].to_numpy() | full["diverged"].to_numpy() | ~np.isfinite(values)
    assert full.index[needed].isin(sparse.index).all()
    assert n == 0 or sparse.index[-1] == series.index[-1]
    rest = full.drop(index=sparse.index)
    assert not rest["elevated"].any() and not rest["diverged"].any() and rest["onset"].isna().all()

def test_short_run_says_too_little_history():
    loss = [2.0, 1.9, np.nan, 1.8, 1.7]
    report = analyze_run(run_of({"loss": loss}))
    assert any("within the spike detector's warm-up of 20" in w for w in report.warnings)
    assert [i.kind for i in report.incidents] == ["nonfinite"] and report.final_loss == 1.7


def test_bad_thresholds_are_one_line_errors(tmp_path):
    with pytest.raises(AnalyzeError, match="unknown threshold.*bogus: use one of"):
        analyze(tmp_path, bogus=1)
    with pytest.raises(AnalyzeError, match="warmup=100 is invalid: pass an integer from 2 to the window, 64 by default"):
        analyze(tmp_path, warmup=100)


def test_end_to_end_real_model_with_a_poisoned_batch(tmp_path):
    """A real tiny regression model trained 300 steps; one batch scaled by 30 at step 150."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w_true = torch.randn(8, 1)
    with RunWriter(tmp_path / "run", {"model": "linear"}, tensorboard=False) as writer:
        for step in range(300):
            x = torch.randn(16, 8)
            y = x @ w_true
            if step == 150:
                x = x * 30
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            grad = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
            opt.step() if step != 150 else None  # a guard would not apply this update
            writer.write_step({"step": step, "loss": loss.item(), "grad_norm/total": grad.item()})
    report = analyze(tmp_path / "run")
    (run,) = report.runs
    # One poisoned batch whose update was withheld: an outlier batch, and the run is healthy.
    assert not by_kind(run, "loss_spike")
    (outlier,) = by_kind(run, "outlier_batch")
    assert outlier.step == 150 and outlier.severity.value == "info"
    (gx,) = by_kind(run, "grad_norm_spike")
    assert gx.step == 150 and gx.severity.value == "info" and not by_kind(run, "grad_norm_explosion")
    assert run.verdict.value == "healthy" and run.source == "sentinel"


def test_sentinel_analyze_is_callable_from_the_top_package(tmp_path):
    import sentinel
    import sentinel.analyze.report  # rebinds sentinel.analyze to the package: still callable

    with RunWriter(tmp_path / "run", tensorboard=False) as writer:
        for step in range(30):
            writer.write_step({"step": step, "loss": 2.0 - step / 100})
    report = sentinel.analyze(tmp_path / "run")
    assert isinstance(report, sentinel.analyze.report.Report) and report.runs[0].verdict.value == "healthy"


def test_slow_sharpening_of_attention_is_not_a_collapse_but_a_fast_fall_is():
    index = list(range(0, 1000, 50))
    slow = np.linspace(3.2, 1.2, len(index))  # learning: entropy falls by 60% over the run
    fast = slow.copy()
    fast[12:] = 0.3  # halves between two samples, at step 600
    steps = {"attn_entropy/blocks.0.attn": slow, "attn_entropy/blocks.1.attn": fast,
             "loss": np.linspace(3, 1, len(index))}
    report = analyze_run(run_of(steps, index=index))
    (collapse,) = by_kind(report, "entropy_collapse")
    assert collapse.details["module"] == "blocks.1.attn" and collapse.step == 600


def test_a_spike_followed_by_nan_for_good_is_not_recovered():
    loss = curve()
    loss[200:203] = 50.0
    loss[203] = 1.0  # one finite value back down, then NaN to the end
    loss[204:] = np.nan
    report = analyze_run(run_of({"loss": loss}))
    (spike,) = by_kind(report, "loss_spike")
    assert spike.severity.value == "critical" and not spike.details["recovered"]
    assert "then non-finite after step 203" in spike.message


def test_a_flat_noisy_loss_is_not_a_rise_at_its_end_but_a_real_one_still_is():
    """A flat loss with 10-30% batch noise, 50 steps: runs of high rows at its end were a critical
    'loss rose ... still elevated' against a best level that was one of its lowest medians (a
    quarter to two thirds of such logs, by noise); a real rise, at the end or from the first rows
    on, is still reported."""
    flagged = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        for cv in (0.1, 0.3):
            report = analyze_run(run_of({"loss": 10 * np.exp(rng.normal(0, cv, 50))}))
            flagged += report.verdict.value == "unhealthy"
    assert flagged <= 2
    rng = np.random.default_rng(0)
    quiet = 2 * np.exp(rng.normal(0, 0.02, 48))
    quiet[40:] *= 1.5  # the last 8 rows: a real rise
    (rise,) = by_kind(analyze_run(run_of({"loss": quiet})), "loss_spike")
    assert rise.step == 40 and rise.severity.value == "critical"
    climb = 2 * np.exp(rng.normal(0, 0.005, 48))
    climb[43:] *= [1.04, 1.1, 1.2, 1.35, 1.5]  # a climb each row under the spike rule's jump
    (rise,) = by_kind(analyze_run(run_of({"loss": climb})), "loss_spike")
    assert rise.severity.value == "critical" and rise.details.get("unfinished") in (True, None)
    early = 4 * np.exp(rng.normal(0, 0.02, 48))
    early[:2] = [2.0, 2.05]  # up from the second row on, and staying there
    assert analyze_run(run_of({"loss": early})).verdict.value == "unhealthy"


def _climb(jump: float = 0.0) -> RunData:
    """A loss logged every 10 steps that climbs 0.5 a row from step 700 to the end of the log;
    ``jump``: added at once at step 700 as well (a spike that opens the climb)."""
    rng = np.random.default_rng(0)
    steps = np.arange(0, 1000, 10)
    loss = 3 * np.exp(-steps / 300) + 2 + rng.normal(0, 0.02, len(steps))
    loss += np.where(steps >= 700, (steps - 690) / 20 + jump, 0.0)
    return run_of({"loss": loss}, index=steps)


def test_a_slow_climb_to_the_end_is_one_divergence_and_a_jump_that_opens_it_a_spike_as_well():
    kinds = [(i.kind, i.step) for i in analyze_run(_climb()).incidents if i.kind in ("divergence", "loss_spike")]
    assert kinds == [("divergence", 710)]
    kinds = {i.kind for i in analyze_run(_climb(jump=8.0)).incidents if i.severity.value == "critical"}
    assert kinds == {"divergence", "loss_spike"}


def _noisy_sparse(seed: int, rise_rows: slice | None = None, factor: float = 1.0) -> RunData:
    """A healthy run's single-batch loss (12% noise) printed every 200 steps, 400 times, falling
    from 2.3 to 0.08; ``rise_rows``: those rows x``factor``."""
    rng = np.random.default_rng(seed)
    t = np.arange(400)
    loss = (0.08 + 2.22 * np.exp(-t / 80)) * (1 + 0.12 * rng.standard_normal(400))
    if rise_rows is not None:
        loss[rise_rows] *= factor
    return run_of({"loss": loss}, index=200 * t)


@pytest.mark.parametrize("seed", [2, 9, 16, 28, 35])
def test_a_noisy_loss_logged_every_200_steps_does_not_diverge_at_its_head(seed):
    """Seeds 2 and 9: a 10% rise over two rows met the 200 steps of patience (five logged values
    now); 16, 28 and 35: a rise of 11-22% above a lucky first value, within the 25% the run's
    noise gives once measured."""
    assert analyze_run(_noisy_sparse(seed)).verdict.value == "healthy"


@pytest.mark.parametrize("rows, factor", [(slice(20, 40), 1.8), (slice(150, 190), 3.0)])
def test_a_real_rise_in_a_noisy_sparse_log_still_diverges(rows, factor):
    (div,) = [i for i in analyze_run(_noisy_sparse(2, rows, factor)).incidents if i.kind == "divergence"]
    assert div.severity.value == "critical" and 200 * rows.start <= div.step <= 200 * (rows.start + 3)


def _fine_tune(n: int = 46, later_rise: bool = False) -> dict[str, np.ndarray]:
    """An MMDetection-style fine-tune logged every 50 iterations: the LR warms up linearly from a
    thousandth of 0.02 over 500 iterations; the loss climbs from 0.9 to ~1.4 while it does, then
    comes down below where it started. ``later_rise``: the loss rises again from iteration 1500."""
    it = 50 * np.arange(1, n + 1)
    lr = 0.02 * np.minimum(1.0, 0.001 + 0.999 * it / 500)
    loss = 0.9 + 0.6 * np.exp(-(((it - 350) / 150) ** 2)) - 0.25 * (1 - np.exp(-it / 800)) \
        + 0.03 * ((np.arange(1, n + 1) * 7) % 5) / 5
    if later_rise:
        loss = loss + np.where(it >= 1500, 0.6, 0.0)
    return {"loss": loss, "lr": lr, "_steps": it}


def _report(columns: dict):
    steps = columns.pop("_steps")
    return analyze_run(run_of(columns, index=steps))


def test_a_rise_during_the_lr_warm_up_that_comes_back_is_info():
    report = _report(_fine_tune())
    assert report.verdict.value == "healthy"
    (rise,) = [i for i in report.incidents if i.kind in ("divergence", "loss_spike")]
    assert rise.severity.value == "info" and rise.step < 500
    assert rise.details["during_warmup"] == {"end": 500, "first": pytest.approx(0.02 * (0.001 + 0.999 / 10)), "peak": 0.02}
    assert "during the learning-rate warm-up (lr 0.00202 rising to 0.02 by step 500)" in rise.message


def test_the_same_rise_without_a_warm_up_or_with_a_later_one_stays_critical():
    no_lr = _fine_tune()
    del no_lr["lr"]
    flat = {**_fine_tune(), "lr": np.full(46, 0.02)}
    for columns in (no_lr, flat, _fine_tune(later_rise=True)):
        report = _report(columns)
        assert report.verdict.value == "unhealthy"
        early = [i for i in report.incidents if i.kind == "divergence" and i.step < 500]
        assert early and all(i.severity.value == "critical" for i in early)


def _low_start(n: int = 200, fall_to: float = 0.3) -> dict[str, np.ndarray]:
    """RTMDet's loss logged every iteration over 4,000: 0.07 at first (its matcher assigns few targets), up
    to ~1.5 while the LR warms up linearly over 1,000 iterations, then down to ``fall_to`` by the end."""
    it = 20 * np.arange(1, n + 1)
    lr = 4e-3 * np.minimum(1.0, 1e-5 + it / 1000)
    rise = 0.07 + 1.45 * np.clip((it - 40) / 300, 0, 1)
    loss = np.where(it <= 340, rise, fall_to + (1.52 - fall_to) * np.exp(-(it - 340) / 800))
    loss = loss + 0.01 * ((np.arange(n) * 7) % 5) / 5
    return {"loss": loss, "lr": lr, "_steps": it}


def test_a_loss_that_rose_in_the_warm_up_from_near_0_and_fell_for_long_after_is_info():
    """RTMDet fine-tuned on 21 images: its loss from 0.07 to 1.54 in the warm-up, then down to 0.31 over 4,000
    iterations while its mAP rose from 0.08 to 0.81: 'diverged ... 15.7x best', critical."""
    report = _report(_low_start())
    assert report.verdict.value == "healthy", [i.message for i in report.incidents]
    rises = [i for i in report.incidents if i.kind in ("divergence", "loss_spike")]
    assert rises and all(i.severity.value == "info" and "has fallen since" in i.message for i in rises)


def test_a_warm_up_rise_the_loss_came_down_from_only_in_part_stays_critical():
    report = _report(_low_start(fall_to=1.0))
    assert report.verdict.value == "unhealthy"
    assert any(i.kind == "divergence" and i.severity.value == "critical" for i in report.incidents)


def test_a_rise_just_after_the_warm_up_reached_its_peak_is_the_peak_lrs_not_a_restarts():
    """RTMPose: a linear warm-up from 4e-08 to 4e-03 over 20 iterations, the loss x1.39 six iterations after its end,
    back 46 iterations later: 'just after the learning rate jumped from 4e-08 to 0.000211 at step 2 (a warm
    restart)', the warm-up's own first step taken for a restart."""
    it = np.arange(1, 301)
    lr = 4e-3 * np.minimum(1.0, np.where(it == 1, 1e-5, it / 20))
    loss = 0.36 * np.exp(-it / 400) + 0.002 * ((it * 7) % 5)
    loss[25:32] *= 1.4
    report = analyze_run(run_of({"loss": loss, "lr": lr}, index=it))
    (rise,) = [i for i in report.incidents if i.kind in ("loss_spike", "divergence")]
    assert rise.severity.value == "info" and "just after the learning-rate warm-up reached its peak" in rise.message
    assert "restart" not in rise.message


def _from_scratch(spike_rows: int = 0, height: float = 3.5) -> dict[str, np.ndarray]:
    """A run from scratch logged every 100 steps, its LR warming up linearly over 25,000 steps
    (WeNet's default), the loss falling from ~60; ``spike_rows``: the loss x``height`` for that many
    logged steps from step 16,000, back at once."""
    rng = np.random.default_rng(0)
    it = 100 * np.arange(1, 401)
    loss = 2 + 60 * np.exp(-it / 3000) + 5 * np.exp(-it / 20000) + rng.normal(0, 0.05, len(it))
    at = np.searchsorted(it, 16000)
    loss[at:at + spike_rows] *= height
    return {"loss": loss, "lr": 1e-3 * np.minimum(1.0, it / 25000), "_steps": it}


def test_a_sharp_spike_inside_a_long_warm_up_is_no_warm_ups_doing():
    assert _report(_from_scratch()).verdict.value == "healthy"
    for height in (2.2, 3.5):
        report = _report(_from_scratch(spike_rows=2, height=height))
        (spike,) = [i for i in report.incidents if i.kind == "loss_spike"]
        assert spike.step == 16000 and spike.severity.value == "warning" and "during_warmup" not in spike.details
        assert report.verdict.value == "recovered"


def _warm_restarts(cycle: int = 500, n: int = 2000, every: int = 5, extra_spike_at: int | None = None):
    """SGDR: a cosine LR from 0.1 restarted every ``cycle`` steps; the loss bumps up at each restart
    and comes back. ``extra_spike_at``: a three-row spike mid-cycle that the LR does not explain."""
    steps = np.arange(0, n, every)
    phase = steps % cycle
    lr = 0.1 * 0.5 * (1 + np.cos(np.pi * phase / cycle)) + 1e-4
    loss = 3.0 * np.exp(-steps / 800) + 1.0 + np.where(steps >= cycle, 0.5 * np.exp(-phase / 40.0), 0.0) \
        + 0.02 * ((steps * 7) % 5) / 5
    if extra_spike_at is not None:
        loss[(steps >= extra_spike_at) & (steps < extra_spike_at + 3 * every)] *= 3.0
    return {"loss": loss, "lr": lr, "_steps": steps}


def test_rises_at_warm_restarts_of_the_lr_are_info():
    report = _report(_warm_restarts())
    rises = [i for i in report.incidents if i.kind in ("divergence", "loss_spike")]
    assert rises and all(i.severity.value == "info" for i in rises) and report.verdict.value == "healthy"
    assert {i.details["after_lr_jump"]["step"] for i in rises} <= {1000, 1500}
    assert all("(a warm restart): a rise that came back" in i.message for i in rises)
    # A spike the LR does not explain: the restarts' rises are told as they were, warnings.
    report = _report(_warm_restarts(extra_spike_at=1250))
    assert report.verdict.value != "healthy"
    assert all(i.severity.value != "info" for i in report.incidents if i.kind == "loss_spike")


def _cosine_warm_restarts(stays_up: bool = False, seed: int = 3) -> dict:
    """torch's CosineAnnealingWarmRestarts (T_0=1000), logged every step; the loss carries a share
    of the LR, so after each restart it stays up for a while, falling with the LR. ``stays_up``:
    after the second restart the loss never gets back to its level before it."""
    import torch

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)
    schedule = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=1000)
    lr = []
    for _ in range(3000):
        lr.append(opt.param_groups[0]["lr"])
        opt.step()
        schedule.step()
    lr, steps = np.array(lr), np.arange(1, 3001)
    rng = np.random.default_rng(seed)
    loss = 2.0 * np.exp(-steps / 1500) + 0.5 + 0.3 * lr / 1e-3 + rng.normal(0, 0.02, len(steps))
    if stays_up:
        loss[2000:] += 0.5
    return {"loss": loss, "lr": lr, "_steps": steps}


def test_a_restarts_rise_that_outlasts_the_spike_window_but_not_its_cycle_is_info():
    """The loss after a warm restart stays up while the LR is high (hundreds of steps logged every
    step): it got past the restart when it is back at its level before it within the cycle."""
    report = _report(_cosine_warm_restarts())
    rises = [i for i in report.incidents if i.kind in ("divergence", "loss_spike")]
    assert rises and all(i.severity.value == "info" for i in rises) and report.verdict.value == "healthy"
    assert any("back at its level before the restart within the cycle" in i.message for i in rises)
    report = _report(_cosine_warm_restarts(stays_up=True))
    assert report.verdict.value != "healthy"
    late = [i for i in report.incidents if i.kind == "loss_spike" and i.step > 2000]
    assert late and all(i.severity.value != "info" for i in late)


def _sawtooth(extra_spike_at: int | None = None) -> dict:
    """An unshuffled epoch of 200 steps ending on its hardest 20, logged every 2 steps: the loss
    bumps up 0.6 at the end of every epoch and comes back when the next one starts."""
    steps = np.arange(0, 3000, 2)
    loss = 3.0 * np.exp(-steps / 1000) + 1.0 + np.where(steps % 200 >= 180, 0.6, 0.0) + 0.02 * ((steps * 7) % 5) / 5
    if extra_spike_at is not None:
        loss[(steps >= extra_spike_at) & (steps < extra_spike_at + 10)] *= 3.0
    return {"loss": loss, "_steps": steps}


def test_spikes_that_recur_at_a_fixed_period_are_info():
    report = _report(_sawtooth())
    spikes = by_kind(report, "loss_spike")
    assert len(spikes) >= 4 and all(i.severity.value == "info" for i in spikes)
    assert report.verdict.value == "healthy"  # the last bump, cut off by the log's end, is one of them
    assert spikes[0].details["recurring"] == {"period": 200.0, "count": len(spikes)}
    assert "every 200 steps" in spikes[0].message
    # One spike out of step: they are all told as before, and the run is not healthy.
    report = _report(_sawtooth(extra_spike_at=2090))
    assert report.verdict.value == "unhealthy"
    assert all(i.severity.value != "info" for i in by_kind(report, "loss_spike"))


def _hard_epoch_ends(epochs: int = 6, first_rise_early: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """A noisy per-batch loss over epochs of 1,000 steps whose data come in the same order each epoch:
    its level x2.5 over each epoch's last quarter, back 50 steps into the next (logged every 10)."""
    steps = np.arange(0, 1000 * epochs, 10)
    position = steps % 1000
    level = np.where((position >= 750) | (position < 50), 2.5, 1.0)
    if first_rise_early:
        level[(steps >= 1650) & (steps < 1750)] = 2.5  # the rise begins 100 steps early once; its return does not
    level[steps < 1000] = np.maximum(level[steps < 1000], 3 - steps[steps < 1000] / 500)
    return steps, level * np.exp(np.random.default_rng(0).normal(0, 0.1, len(steps)))


@pytest.mark.parametrize("first_rise_early", [False, True])
def test_divergences_that_came_back_at_a_fixed_period_are_info(first_rise_early):
    """NeMo's fine-tune of a speech model, its utterances in the same order each 5,000-step epoch: the
    per-batch loss's smoothed level x2.5 over each epoch's end, back 700 steps into the next, made five
    critical divergences on a run whose validation WER fell at every evaluation. Divergences that came
    back, four or more, starting or ending one period apart, are the data's pattern; the last, cut off
    by the log's end, with them."""
    steps, loss = _hard_epoch_ends(first_rise_early=first_rise_early)
    divergences = by_kind(analyze_run(run_of({"loss": loss}, index=steps)), "divergence")
    assert len(divergences) == 5 and all(i.severity.value == "info" for i in divergences)
    assert divergences[0].details["recurring"]["period"] == 1000.0
    # Three that came back are no pattern yet.
    steps, loss = _hard_epoch_ends(epochs=4)
    divergences = by_kind(analyze_run(run_of({"loss": loss}, index=steps)), "divergence")
    assert divergences and all(i.severity.value == "critical" for i in divergences)


def _with_evals(train: np.ndarray, evals: dict[int, float], name: str = "eval_loss") -> RunData:
    column = np.full(len(train), np.nan)
    for step, value in evals.items():
        column[step] = value
    return run_of({"loss": train, name: column})


def test_an_evaluation_loss_rising_while_the_training_loss_falls_is_overfitting():
    evals = {s: v for s, v in zip(range(49, 400, 50), [1.6, 1.3, 1.25, 1.3, 1.4, 1.5, 1.6, 1.7])}
    report = analyze_run(_with_evals(curve(), evals, "val/loss"))
    (over,) = by_kind(report, "overfitting")
    assert (over.step, over.end_step, over.severity.value) == (149, 399, "info")
    assert over.message.startswith("val/loss rose from 1.25 at step 149 to 1.7 at step 399 (+36%) while the "
                                   "training loss fell from")
    assert report.verdict.value == "healthy"  # stable training: information


def test_an_evaluation_loss_up_by_orders_of_magnitude_blew_up():
    """A RealNVP's test bits/dim from 1e4 to 1.27e7 while its training loss fell, a validation loss to 8.3e27:
    information, "overfitting (+17692375%)", the run healthy. An evaluation x100 its best is a warning."""
    evals = {s: v for s, v in zip(range(49, 400, 50), [1.6, 1.3, 1.25, 13.0, 140.0, 1.5e3, 2e4, 3e5])}
    report = analyze_run(_with_evals(curve(), evals))
    (over,) = by_kind(report, "overfitting")
    assert over.severity.value == "warning" and over.details["blown_up"] and not over.resolved
    assert "(x2.4e+05)" in over.message and "blew up by orders of magnitude" in over.message
    assert report.verdict.value != "healthy"


def test_the_best_evaluation_is_the_last_of_equal_ones():
    """A loss printed with few decimals ties: the rise starts after the last best, not the first."""
    evals = {s: v for s, v in zip(range(49, 400, 50), [1.25, 1.25, 1.25, 1.25, 1.4, 1.5, 1.6, 1.7])}
    (over,) = by_kind(analyze_run(_with_evals(curve(), evals)), "overfitting")
    assert over.step == 199 and "a checkpoint from near step 199 has the lowest" in over.message


@pytest.mark.parametrize("evals, why", [
    ([1.6, 1.3, 1.25, 1.3, 1.2, 1.6, 1.22, 1.2], "one bad evaluation, then back"),
    ([1.6, 1.3, 1.25, 1.26, 1.28, 1.3, 1.31, 1.32], "up by less than a tenth"),
    ([1.6, 1.3, 1.25, 1.4, 1.5], "fewer evaluations than the rule needs after the best: 2"),
])
def test_no_overfitting(evals, why):
    report = analyze_run(_with_evals(curve(), dict(zip(range(49, 400, 50), evals))))
    assert by_kind(report, "overfitting") == [], why


def test_a_flat_noisy_evaluation_loss_over_many_epochs_is_no_overfitting():
    """skorch's table over 100 epochs, valid_loss flat and 5% noisy: its lowest value against the
    last ones was 'overfitting ... +17%' in 95 of 200 seeds. The levels are compared: the
    evaluations around the best against the last tenth."""
    n = 100
    base = 0.4 + 0.6 * np.exp(-np.arange(n) / 15)
    flagged = {"flat": 0, "rising": 0}
    for seed in range(50):
        rng = np.random.default_rng(seed)
        train = 0.3 + np.exp(-np.arange(n) / 20) + rng.normal(0, 0.005, n)
        noise = rng.normal(0, 0.02, n)
        for name, val in (("flat", base + noise), ("rising", base + noise + np.clip(np.arange(n) - 60, 0, None) * 0.004)):
            flagged[name] += len(by_kind(analyze_run(run_of({"loss": train, "val_loss": val})), "overfitting"))
    assert flagged == {"flat": 0, "rising": 50}


def test_a_training_loss_rising_with_the_evaluation_loss_is_not_overfitting():
    train = curve()
    train[200:] += np.linspace(0, 2, 200)  # the training loss climbs too: divergence, judged elsewhere
    evals = {s: v for s, v in zip(range(49, 400, 50), [1.6, 1.3, 1.25, 1.5, 2.0, 2.5, 3.0, 3.5])}
    assert by_kind(analyze_run(_with_evals(train, evals)), "overfitting") == []


@pytest.mark.parametrize("kwargs", [{"overfit_rise": 0}, {"overfit_evals": 0}, {"overfit_evals": 1.5}])
def test_overfitting_thresholds_are_checked(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        AnalyzeConfig(**kwargs)


def _sparse_log(jump_at: int | None, every: int = 100, n: int = 32, noisy: bool = False) -> RunData:
    """A loss logged every ``every`` steps: its first 20 values span 2,000 steps of the run."""
    rng = np.random.default_rng(3)
    steps = np.arange(n) * every
    loss = 0.3 + np.exp(-steps / 500) + 0.005 * rng.standard_normal(n)
    if noisy:  # an RL loss: episodes differ by x4 from the start (a real log's first five)
        loss = np.concatenate([[0.4963, 1.0023, 0.4596, 0.3725, 1.8748], rng.uniform(0.3, 1.9, n - 5)])
    if jump_at is not None:
        loss[jump_at:jump_at + 2] = 9.0
    return run_of({"loss": loss}, index=steps)


@pytest.mark.parametrize("at", [5, 12, 19])
def test_a_big_jump_among_a_whole_runs_first_values_is_reported(at):
    report = analyze_run(_sparse_log(at))
    (spike,) = by_kind(report, "loss_spike")
    assert spike.step == at * 100 and spike.details["peak"] == 9.0 and report.verdict.value == "recovered"


def test_a_start_that_jumps_but_never_past_twice_its_highest_value_is_not():
    for quiet in (_sparse_log(None, noisy=True), _sparse_log(None)):
        assert [i for i in analyze_run(quiet).incidents if i.kind in ("loss_spike", "outlier_batch")] == []
    # nor a healthy log's first values at any cadence: x1.27 at most over the real logs' first 20
    for every in (1, 10, 100):
        assert by_kind(analyze_run(_sparse_log(None, every=every, n=400)), "loss_spike") == []


def test_no_plateau_is_carried_into_a_divergence():
    """A loss that jumps x2.5 at step 1200 and stays there: its best-so-far stops improving, which
    read as a plateau 988-2000; the divergence says what happened. A plateau before it stays."""
    rng = np.random.default_rng(1)
    steps = np.arange(1, 2001)
    base = 2 + np.exp(-steps / 300) + 0.01 * rng.random(2000)
    report = analyze_run(run_of({"loss": base * np.where(steps >= 1200, 2.5, 1.0)}, index=steps))
    (div,) = by_kind(report, "divergence")
    assert div.step == 1200 and by_kind(report, "plateau") == []
    flat = np.concatenate([base[:300], np.full(1700, base[299])]) + 0.001 * rng.random(2000)
    report = analyze_run(run_of({"loss": flat * np.where(steps >= 1800, 2.5, 1.0)}, index=steps))
    (plateau,) = by_kind(report, "plateau")
    (div,) = by_kind(report, "divergence")
    assert plateau.end_step < div.step == 1800 and plateau.step < 400
    report = analyze_run(run_of({"loss": flat}, index=steps))
    assert by_kind(report, "divergence") == [] and by_kind(report, "plateau")[0].end_step == 2000


def _yolov5_results(path, spike_at: int | None) -> None:
    """A YOLOv5 results.csv as it writes it: a '%20s' header, '%20.5g' rows; its three training
    losses (box, obj, cls) near 0.05-0.1 a epoch, their sum the loss."""
    rng = np.random.default_rng(0)
    keys = ["epoch", "train/box_loss", "train/obj_loss", "train/cls_loss", "metrics/precision", "val/box_loss", "x/lr0"]
    rows = [",".join(f"{k:>20s}" for k in keys)]
    for epoch in range(100):
        box = (0.05 + 0.05 * np.exp(-epoch / 20)) * (1 + 0.01 * rng.standard_normal())
        if epoch == spike_at:
            box *= 3
        rows.append(",".join(f"{v:20.5g}" for v in (epoch, box, box / 2, box / 3, 0.5, box, 0.01)))
    path.write_text("\n".join(rows) + "\n")


def test_a_spike_of_a_loss_far_below_one_nat_is_reported(tmp_path):
    """The detector's absolute part (0.2) is nats of a language model's loss: a detection loss
    at 0.09 that jumped x3 to 0.28 in epoch 60 never cleared it ('healthy, no incidents'). It is
    a tenth of the loss's starting level there."""
    from sentinel.analyze.discover import discover_runs

    _yolov5_results(tmp_path / "results.csv", spike_at=60)
    (run,) = discover_runs(tmp_path / "results.csv")
    report = analyze_run(run)
    (spike,) = by_kind(report, "loss_spike")
    assert spike.step == 60 and spike.details["ratio"] == pytest.approx(3, rel=0.05) and report.verdict.value == "recovered"
    _yolov5_results(tmp_path / "results.csv", spike_at=None)
    (run,) = discover_runs(tmp_path / "results.csv")
    assert [i.kind for i in analyze_run(run).incidents] in ([], ["plateau"])  # its last epochs gain <1% per 10


@pytest.mark.parametrize("seed", range(5))
def test_a_healthy_loss_far_below_one_nat_has_no_spike(seed):
    """A regression's MSE from 0.05 to 0.004 with 5% batch noise and +10% blips: the absolute
    part a tenth of its start (0.005) leaves the relative and outlier parts to judge: no spike;
    and with blips of +40%, the same judgment at 20 times the scale (a start at 1.0), as the
    relative and outlier parts are in log space and the absolute part scales with the start."""
    rng = np.random.default_rng(seed)
    steps = np.arange(3000)
    loss = (0.004 + 0.046 * np.exp(-steps / 600)) * np.exp(0.05 * rng.standard_normal(len(steps)))
    blips = rng.choice(np.arange(100, 3000), 30, replace=False)

    def spikes(values):
        return [(i.kind, i.step) for i in analyze_run(run_of({"loss": values})).incidents
                if i.kind in ("loss_spike", "outlier_batch")]

    quiet = loss.copy()
    quiet[blips] *= 1.1
    assert spikes(quiet) == []
    loud = loss.copy()
    loud[blips] *= 1.4
    assert spikes(loud) == spikes(loud * 20)


def test_a_jump_of_an_epoch_mean_logged_at_steps_is_a_spike_not_an_outlier_batch(tmp_path):
    """Lightning's train_loss_epoch is the mean of an epoch's batches, logged at the epoch's last
    step (99, 199, ...): a x2.7 jump is a whole epoch gone wrong. It was 'outlier batch, info',
    the run healthy. Read from a table and from TensorBoard."""
    from torch.utils.tensorboard import SummaryWriter

    from sentinel.analyze.discover import discover_runs

    means = [(0.5 + 2 * math.exp(-e / 8)) * (2.7 if e == 25 else 1) for e in range(40)]
    rows = ["epoch,step,train_loss_epoch"] + [f"{e},{(e + 1) * 100 - 1},{m:.5f}" for e, m in enumerate(means)]
    (tmp_path / "table.csv").write_text("\n".join(rows) + "\n")
    writer = SummaryWriter(str(tmp_path / "tb"))
    for e, m in enumerate(means):
        writer.add_scalar("train_loss_epoch", m, (e + 1) * 100 - 1)
    writer.close()
    for path in (tmp_path / "table.csv", tmp_path / "tb"):
        (run,) = discover_runs(path)
        report = analyze_run(run)
        (spike,) = [i for i in report.incidents if i.kind in ("loss_spike", "outlier_batch")]
        assert (spike.kind, spike.step, spike.severity.value) == ("loss_spike", 2599, "warning")
        assert report.verdict.value == "recovered"


def test_a_spike_among_a_short_runs_epochs_is_reported():
    """SpeechBrain's train_log.txt of 30 epochs, a x2.7 epoch at 20: the guard's warm-up (20
    values) was two thirds of the run, and only a jump past twice the first epoch's loss counted
    there ('healthy, no incidents'). Epoch means are judged from their fifth value on."""
    from sentinel.analyze.discover import discover_runs
    import tempfile
    from pathlib import Path

    losses = [2 + 2 * math.exp(-e / 8) + (4 if e == 20 else 0) for e in range(1, 31)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train_log.txt"
        path.write_text("".join(f"epoch: {e}, lr: 1.00e+00 - train loss: {v:.3g} - valid loss: {v + 0.1:.3g}, "
                                f"valid CER: 12.50\n" for e, v in enumerate(losses, start=1)))
        (run,) = discover_runs(path)
    report = analyze_run(run)
    (spike,) = by_kind(report, "loss_spike")
    assert (spike.step, spike.severity.value, report.verdict.value) == (20, "warning", "recovered")


@pytest.mark.parametrize("seed", range(8))
def test_noisy_healthy_epochs_have_no_spike(seed):
    """Epoch means of a small dataset, 6% apart from epoch to epoch around a falling curve: no
    spike from the fifth epoch on."""
    rng = np.random.default_rng(seed)
    epochs = np.arange(40)
    loss = (0.4 + 2 * np.exp(-epochs / 6)) * np.exp(0.06 * rng.standard_normal(len(epochs)))
    run = run_of({"loss": loss}, index=epochs)
    run.meta["step_unit"] = "epoch"
    report = analyze_run(run)
    assert by_kind(report, "loss_spike") == by_kind(report, "outlier_batch") == by_kind(report, "divergence") == []


def test_a_training_loss_that_climbs_over_epochs_diverged():
    """PyG's example lines, the loss climbing 0.25 an epoch from epoch 15 of 30 (x2.7 in all):
    the divergence detector's patience was 200 steps (200 epochs here), so it read as a spike
    'not recovered'. Epoch means are judged over five epochs."""
    losses = [2 + 2 * math.exp(-e / 5) if e < 15 else 2.15 + 0.25 * (e - 15) for e in range(1, 31)]
    run = run_of({"loss": losses}, index=range(1, 31))
    run.meta["step_unit"] = "epoch"
    (diverged,) = by_kind(analyze_run(run), "divergence")
    assert 15 <= diverged.step <= 19 and diverged.end_step == 30 and "still diverged" in diverged.message


def test_a_short_whole_run_is_judged_past_a_fifth_of_its_values():
    """A loss printed every 10 steps over 300 (30 values) jumped x2.7 at its 17th: inside the
    guard's warm-up of 20 values, where only a jump past x3 and twice every value before counts,
    it read 'healthy, no incidents'. A whole run of 21-99 values is judged from a fifth of them on
    (5 at least); a log no longer than the warm-up, and an excerpt from mid-run, as before."""
    steps = np.arange(10, 310, 10)
    loss = 0.9 + 2.3 * np.exp(-steps / 80)
    loss[16] = 4.257
    (blip,) = [i for i in analyze_run(run_of({"loss": loss}, index=steps)).incidents
               if i.kind in ("loss_spike", "outlier_batch")]
    assert blip.step == 170
    # the same values from step 30,010 on (an excerpt): judged on big jumps, this one among them
    excerpt = analyze_run(run_of({"loss": loss}, index=steps + 30_000)).incidents
    assert [(i.kind, i.step) for i in excerpt] == [("outlier_batch", 30_170)]


def test_a_short_paste_of_a_noisy_loss_is_judged_against_its_own_spread():
    """A latent-diffusion loss logged every 50 steps (a random timestep per batch) goes 0.06-0.25 from
    row to row: thirteen rows of it, pasted to ask about training time, were "unhealthy" with spikes of
    x1.6-x1.8 over their median. With four values of history or more, a jump under x2 must stand three
    robust sigmas above where the history's steps lead; a steady curve's x3 epoch and a x2.5 jump of a
    noisy loss still count."""
    noisy = [0.25, 0.096, 0.101, 0.079, 0.092, 0.17, 0.078, 0.072, 0.095, 0.061, 0.112, 0.12, 0.087]
    steps = list(range(49, 50 * len(noisy), 50))
    assert by_kind(analyze_run(run_of({"loss": noisy}, index=steps)), "loss_spike") == []
    jumped = noisy[:9] + [0.24] + noisy[10:]  # x2.5 its median
    (spike,) = by_kind(analyze_run(run_of({"loss": jumped}, index=steps)), "loss_spike")
    assert spike.step == 499
    falling = [1.5 * math.exp(-e / 3) + 0.2 for e in range(1, 11)]
    falling[5] *= 3  # x3 of its curve, x1.6 over the median of the five before (their steps alike)
    (spike,) = by_kind(analyze_run(run_of({"loss": falling})), "loss_spike")
    assert spike.step == 5


def test_two_overflows_in_a_short_paste_are_no_rate():
    """A paste of four steps, the scaler backing off at the last two (an fp16 run's search for its
    scale): no rate of 50% is taken of them; ten steps or more are, or three overflows."""
    assert by_kind(analyze_run(run_of({"loss": curve(4), "amp/overflow": [0, 0, 1, 1]})), "overflow_rate") == []
    (rate,) = by_kind(analyze_run(run_of({"loss": curve(10), "amp/overflow": [0] * 8 + [1, 1]})), "overflow_rate")
    assert rate.details["rate"] == 0.2
    assert by_kind(analyze_run(run_of({"loss": curve(5), "amp/overflow": [0, 0, 1, 1, 1]})), "overflow_rate")


def test_a_short_paste_whose_jump_is_no_higher_than_it_has_been():
    """StableSR's metrics.csv (StableSR#161), a latent-diffusion loss at random timesteps: 0.144 at
    step 499 after a 0.170 at step 299 was a critical "1.57x baseline" that never recovered. With
    four values of history or more, a jump under x2 no higher than the history has been (its first
    value and its spikes aside) is within its spread; a jump above all of it still counts."""
    loss = [0.2514, 0.0960, 0.1009, 0.0793, 0.0920, 0.1697, 0.0776, 0.0716, 0.0635, 0.1440, 0.1121, 0.1202, 0.1471]
    steps = list(range(49, 650, 50))
    assert by_kind(analyze_run(run_of({"loss": loss}, index=steps)), "loss_spike") == []
    loss[9] = 0.41  # x2.4 the highest before it (its first value aside)
    assert [s.step for s in by_kind(analyze_run(run_of({"loss": loss}, index=steps)), "loss_spike")] == [499]

def test_nonfinite_mask_on_the_grid_most_rows_are_on():
    """DeePMD's lcurve.out logs step 1, then 100, 200, ...: its NaNs from step 7,000 on were off a
    grid counted from step 1, read as absent, and the run "healthy"."""
    steps = [1] + list(range(100, 10001, 100))
    s = pd.Series([2.0] * 70 + [np.nan] * 31, index=steps)
    mask = nonfinite_mask(s)
    assert mask.sum() == 31 and mask.loc[7000] and not mask.loc[6900]


def test_a_spike_on_an_excerpts_last_row_is_a_warning_unless_the_grad_norm_led_to_it():
    """Nothing after an excerpt's last row tells whether a jump there recovered: a noisy loss's last
    batch (TransUNet's x1.7, ZipVoice's x2.1 pasted into their issues) was a critical "not
    recovered". A warning now, critical where the grad norm exploded before it (BigScience tr8's
    11446-11448) or the jump is an order of magnitude."""
    loss = [2.0, 2.1, 1.9, 2.05, 1.95, 2.0, 5.0]
    (spike,) = by_kind(analyze_run(run_of({"loss": loss})), "loss_spike")
    assert spike.severity.value == "warning" and "whether it recovers is not known" in spike.message
    grad = [1.0, 1.1, 0.9, 1.0, 1.05, 9.0, 12.0]
    (spike,) = by_kind(analyze_run(run_of({"loss": loss, "grad_norm/total": grad})), "loss_spike")
    assert spike.severity.value == "critical" and "the grad norm exploded before it" in spike.message
    (spike,) = by_kind(analyze_run(run_of({"loss": loss[:-1] + [25.0]})), "loss_spike")
    assert spike.severity.value == "critical"


def test_a_longer_logs_last_row_an_order_of_magnitude_up_is_no_outlier_batch():
    """A log longer than an excerpt took its last row for an outlier batch, however high: a TF run's 0.39, then
    3417.76 at its last logged step, was "outlier batch ... the last logged step" (info) and the run "recovered", its
    final loss 3418. From an order of magnitude on it is judged as an excerpt's last row is; below it, still an
    outlier batch (nothing after it says more)."""
    rng = np.random.default_rng(0)
    loss = list(0.4 + 0.02 * rng.standard_normal(40))
    report = analyze_run(run_of({"loss": loss + [3417.76]}))
    (spike,) = by_kind(report, "loss_spike")
    assert spike.severity.value == "critical" and report.verdict.value == "unhealthy"
    report = analyze_run(run_of({"loss": loss + [1.2]}))
    assert [i.kind for i in report.incidents] == ["outlier_batch"] and report.verdict.value == "healthy"


@pytest.mark.parametrize("score_rises", [True, False])
def test_a_divergence_while_the_runs_score_rises_is_information(score_rises):
    """spaCy's table sums each row's loss over a batch that grows (LOSS TAGGER 18,969 -> 28,440) while TAG_ACC goes 34 ->
    89 and SCORE 0.34 -> 0.89: a critical divergence on the docs' own example. A measure of quality that rose at every
    row of the stretch says the model learnt and the loss's scale changed; one that fell leaves the divergence as it was."""
    steps = list(range(200, 2600, 200))
    loss = [18968.78, 22539.06, 22794.91, 21541.39, 25461.82, 23708.82, 24994.79, 22268.02, 28413.77, 28736.36,
            28237.53, 28439.95]
    score = np.linspace(0.34, 0.89, len(steps)) if score_rises else np.linspace(0.89, 0.34, len(steps))
    (divergence,) = by_kind(analyze_run(run_of({"loss": loss, "score": score}, index=steps)), "divergence")
    assert divergence.severity.value == ("info" if score_rises else "critical")
    assert ("score rose from" in divergence.message) == score_rises


@pytest.mark.parametrize("score_rises, summed", [(True, True), (False, True), (True, False)])
def test_a_spike_of_a_summed_loss_at_which_the_runs_score_stood_at_its_best_is_information(score_rises, summed):
    """spaCy's NER table (LOSS NER summed over batches that grow) ended at 8976, x1.7 its rows before, while ENTS_F rose
    to its best, 69.77: a warning spike made the run its author called "smooth as butter" unhealthy. Where the measure
    fell at the spike, or the loss is no such sum (an epoch's mean tripled), the spike stands."""
    steps = list(range(200, 1400, 200))
    loss = [5192.01, 4601.48, 5215.84, 6169.24, 7031.01, 8976.15]
    ents_f = [56.22, 59.48, 64.26, 65.38, 68.23, 69.77 if score_rises else 41.2]
    run = run_of({"loss": loss, "ents_f": ents_f}, index=steps)
    if summed:
        run.meta[LOSS_SUMS_GROWING_BATCHES] = True
    (spike,) = by_kind(analyze_run(run), "loss_spike")
    assert spike.severity.value == ("info" if score_rises and summed else "warning")
    assert ("ents_f rose from 68.23 to 69.77 over it" in spike.message) == (score_rises and summed)

def test_a_spike_after_a_level_step_recovers_to_that_level():
    """AlphaPose's epoch means step up x1.17 at epoch 141 (its schedule changed), then one epoch bumps x1.13 at 153 and
    is back at the new level two epochs later: "1.3x baseline 0.000304; not recovered", critical, against the level of
    before the step. Where the rows just before a spike stand flat above its baseline (under x1.5), it is back where it
    came from there; a level far above the baseline is the spike before it still going on."""
    loss = [0.000299] * 140 + [0.000349] * 12 + [0.000395, 0.000357, 0.000351] + [0.00034 - i * 1e-6 for i in range(45)]
    (spike,) = by_kind(analyze_run(run_of({"loss": loss})), "loss_spike")
    assert spike.step == 152 and spike.severity.value == "warning" and "recovered in 2 steps" in spike.message



def test_a_loss_that_lives_below_zero_has_no_spike_from_a_baseline_at_or_below_it():
    """WaveGlow's negative log-likelihood: -6398 then 6809 was "a spike against a baseline at or below 0: no ratio,
    score 3.65e+10", the run "recovered"; a signed loss's rise from below 0 has no ratio to judge."""
    noise = np.random.default_rng(0).normal(0, 150, 40)
    values = -9000.0 - 20 * np.arange(40) + noise
    values[20] = 6809.0
    report = analyze_run(run_of({"loss": values}))
    assert not by_kind(report, "loss_spike") and not by_kind(report, "outlier_batch")
