"""The plot's structure, read from the matplotlib Figure: one colour per run in every panel,
modules by line style, every marker named in the legend with its run, labelled log ticks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex
from matplotlib.lines import Line2D

from sentinel.analyze import Report, analyze_run
from sentinel.analyze.loaders import RunData
from sentinel.analyze.render.plot import plot_figure, readable_log_ticks, render_plot
from sentinel.events import make_event

MODULES = ("blocks.0.attn", "blocks.1.attn")


def run_data(name: str, guarded: bool, seed: int = 0) -> RunData:
    """300 steps; a five-step bad stretch at 150 (loss x7); attention entropy of two modules.
    The guarded run withholds the five updates and rolls back once at 200 (restored to 185)."""
    rng = np.random.default_rng(seed)
    n = 300
    loss = 3.0 * np.exp(-np.arange(n) / 100) + 0.7 + 0.01 * rng.standard_normal(n)
    loss[150:155] *= 7
    loss[200:203] *= 4
    frame = pd.DataFrame({"loss": loss, "grad_norm/total": 1 + 0.05 * rng.random(n)},
                         index=pd.Index(range(n), name="step"))
    for k, module in enumerate(MODULES):
        frame[f"attn_entropy/{module}"] = np.where(np.arange(n) % 10 == 0, 2.5 - k - np.arange(n) / 300, np.nan)
    events = []
    if guarded:
        events += [make_event("skip_step", s, reason="loss_spike", loss=float(loss[s]), loss_baseline=1.5,
                              streak=s - 149) for s in range(150, 155)]
        events += [make_event("spike", 200, metric="loss", value=float(loss[200])),
                   make_event("rollback", 202, spike_step=200, restored_step=185, reason="loss_spike",
                              skipped=[{"step": s} for s in range(200, 203)]),
                   *[make_event("skip", s, batch_idx=s) for s in range(203, 208)]]
    return RunData(name, f"/logs/{name}", "test", frame, pd.DataFrame.from_records(events))


@pytest.fixture(scope="module")
def figure():
    report = Report([analyze_run(run_data("1-unguarded", False)), analyze_run(run_data("2-guarded", True, 1))])
    return report, plot_figure(report)


def legend_texts(fig) -> list[str]:
    (legend,) = fig.legends
    return [t.get_text().replace("\n", " ") for t in legend.get_texts()]


def test_one_colour_per_run_in_every_panel(figure):
    report, fig = figure
    assert [ax.get_ylabel() for ax in fig.axes] == ["loss", "grad norm (total)", "attention entropy (nats)"]
    run_colours = {}
    for ax in fig.axes:
        curves = [line for line in ax.get_lines() if len(line.get_xdata()) > 2]  # not the axvlines
        assert len(curves) == (2 if ax.get_ylabel() != "attention entropy (nats)" else 4)
        for line in curves:
            run = "1-unguarded" if line.get_linewidth() > 1.5 else "2-guarded"  # earlier runs wider
            run_colours.setdefault(run, set()).add(to_hex(line.get_color()))
    assert all(len(c) == 1 for c in run_colours.values()) and len(set.union(*run_colours.values())) == 2
    # Every marker and line drawn for a finding is in one of the run colours.
    for ax in fig.axes:
        for collection in ax.collections:
            colours = {to_hex(c) for c in np.concatenate([collection.get_facecolor(), collection.get_edgecolor()])
                       if c[3] > 0}
            assert colours - {"#000000"} <= set.union(*run_colours.values())


def test_modules_are_told_apart_by_line_style(figure):
    _, fig = figure
    entropy = fig.axes[-1]
    curves = [line for line in entropy.get_lines() if len(line.get_xdata()) > 2]
    styles = {(to_hex(line.get_color()), line.get_linestyle()) for line in curves}
    assert len(styles) == 4 and {s for _, s in styles} == {"-", "--"}
    texts = legend_texts(fig)
    assert set(MODULES) <= set(texts)


def test_every_marker_is_in_the_legend_and_names_its_run(figure):
    report, fig = figure
    texts = legend_texts(fig)
    assert texts[:2] == [f"{r.name} ({r.verdict.value})" for r in report.runs]
    guarded = {t for t in texts if t.startswith("2-guarded: ")}
    assert any("rollback" in t and "restored" in t for t in guarded)
    assert any("batches skipped" in t for t in guarded)
    assert any("update withheld" in t for t in guarded)
    assert any(t.startswith("1-unguarded: loss spike") for t in texts)
    # Nothing is drawn unlabelled: the legend has one entry per kind of mark drawn for each run.
    kinds = {(r.name, i.kind) for r in report.runs for i in r.incidents
             if i.kind in ("loss_spike", "skipped_update", "rollback", "skip", "grad_norm_explosion",
                           "grad_norm_spike",
                           "entropy_collapse", "outlier_batch", "nonfinite", "divergence")}
    assert len([t for t in texts if ": " in t]) == len(kinds)


def test_withheld_updates_are_ticks_on_the_loss_panel(figure):
    report, fig = figure
    loss_ax = fig.axes[0]
    withheld = [i.step for i in report.runs[1].incidents if i.kind == "skipped_update"]
    assert withheld == [150, 151, 152, 153, 154]
    ticks = [c for c in loss_ax.collections if c.get_paths() and len(c.get_offsets()) == len(withheld)]
    assert ticks and sorted(ticks[0].get_offsets()[:, 0]) == withheld


def test_log_loss_axis_has_labelled_ticks_up_to_the_peak(figure):
    report, fig = figure
    loss_ax = fig.axes[0]
    fig.draw_without_rendering()
    assert loss_ax.get_yscale() == "log"
    labelled = {float(t.get_text()): t for t in loss_ax.get_yticklabels() if t.get_text()}
    low, high = loss_ax.get_ylim()
    shown = [v for v in labelled if low <= v <= high]
    assert len(shown) >= 5
    peak = float(report.runs[0].data.steps["loss"].loc[150:154].max())
    assert any(v >= peak / 2 for v in shown) and any(v <= 1 for v in shown)
    assert f"{peak:.3g}" in [t.get_text() for t in loss_ax.texts]  # written beside its marker
    # Step numbers on every panel, not only the bottom one.
    assert all(any(t.get_text() for t in ax.get_xticklabels()) for ax in fig.axes)


def test_readable_log_ticks():
    assert readable_log_ticks(0.62, 8.9) == [0.8, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0]
    assert readable_log_ticks(0.2, 10.5) == [0.2, 0.5, 1.0, 2.0, 5.0, 10.0]
    assert readable_log_ticks(1.0, 1e6) == [1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0, 1000000.0]
    assert len(readable_log_ticks(1e-5, 1e9)) <= 10
    assert len(readable_log_ticks(100, 120)) >= 3


def test_a_long_run_is_reduced_without_losing_its_extremes(tmp_path):
    n = 20_000
    loss = np.full(n, 3.0)
    loss[12_345], loss[17_106] = 9.0, 0.9
    frame = pd.DataFrame({"loss": loss}, index=pd.Index(range(n), name="step"))
    fig = plot_figure(Report([analyze_run(RunData("long", "long.log", "test", frame))]))
    (line,) = [line for line in fig.axes[0].get_lines() if len(line.get_xdata()) > 2]
    assert len(line.get_xdata()) <= 4000
    assert {12_345, 17_106} <= set(line.get_xdata()) and min(line.get_ydata()) == 0.9
    assert render_plot(Report([analyze_run(RunData("long", "long.log", "test", frame))]),
                       tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


def test_a_stuck_and_a_collapsing_loss_are_drawn_and_named_on_whole_steps():
    stuck = pd.DataFrame({"loss": [3.1, 2.9] + [10.825932] * 10}, index=pd.Index(range(12), name="step"))
    collapse = pd.DataFrame({"loss": [12.18, 1.79e-06, 0.0]}, index=pd.Index([1, 2, 3], name="step"))
    report = Report([analyze_run(RunData("stuck", "a.log", "test", stuck)),
                     analyze_run(RunData("collapse", "b.log", "test", collapse))])
    fig = plot_figure(report)
    texts = [" ".join(t.split()) for t in legend_texts(fig)]  # legend lines wrap
    assert "stuck: loss stuck at one value or at chance level (dotted)" in texts
    assert "collapse: loss collapse (fall by 1000x)" in texts
    fig.canvas.draw()
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()]
    assert len(labels) == len(set(labels))  # no tick between two steps printed as a repeat


def test_an_evaluation_loss_nan_is_marked_at_its_evaluations_not_as_a_training_nan():
    frame = pd.DataFrame({"loss": np.linspace(2.0, 1.0, 40), "eval_loss": np.nan, "eval_runtime": np.nan},
                         index=pd.Index(range(40), name="step"))
    frame.loc[[10, 20, 30], "eval_runtime"] = 1.5
    fig = plot_figure(Report([analyze_run(RunData("run", "a.log", "test", frame))]))
    assert [" ".join(t.split()) for t in legend_texts(fig)][-1] == \
        "evaluation loss NaN/Inf (crosses along the bottom)"
    (marks,) = [c for c in fig.axes[0].collections if len(c.get_offsets()) == 3]
    assert [x for x, _ in marks.get_offsets()] == [10, 20, 30]
    assert not [line for line in fig.axes[0].get_lines() if len(set(line.get_xdata())) == 1]  # no NaN line


def test_an_overfitting_finding_draws_its_evaluation_loss_dashed():
    steps = np.arange(1000)
    train = 2.0 * np.exp(-steps / 300) + 0.2
    evals = np.full(1000, np.nan)
    evals[99::100] = 0.8 + np.arange(10) / 10  # rising from the first evaluation on
    run = RunData("ft", "ft", "test", pd.DataFrame({"loss": train, "eval_loss": evals},
                                                   index=pd.Index(steps, name="step")))
    report = analyze_run(run)
    assert [i.kind for i in report.incidents] == ["overfitting"]
    fig = plot_figure(Report([report]))
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["ft", "evaluation loss (dashed), rising after its\nbest: overfitting"]
    (dashed,) = [line for line in fig.axes[0].get_lines() if line.get_linestyle() == "--"]
    assert dashed.get_xdata().tolist() == list(range(99, 1000, 100))
