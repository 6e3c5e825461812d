"""A PNG of the runs: loss, grad norm, loss scale and attention entropy against step, with the
incidents marked (spikes, rollbacks as vertical lines, skipped ranges shaded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.render.text import clean_text
from sentinel.analyze.report import Report, RunReport

# More points than this per line are reduced to per-bucket maxima: a spike stays visible.
_MAX_POINTS = 4000
_PANELS = (
    ("loss", "loss"),
    (metrics.GRAD_NORM_TOTAL, "grad norm (total)"),
    (metrics.LOSS_SCALE, "loss scale"),
    (metrics.ATTN_ENTROPY + "/", "attention entropy"),
)


def render_plot(report: Report, path: str | Path, dpi: int = 110) -> Path:
    """Write a PNG with one panel per metric present; several runs share the panels.

    Args:
        report: what :func:`sentinel.analyze` returned (with its loaded data).
        path: the PNG to write (its directory must exist).
        dpi: resolution.

    Returns:
        The path written.

    Raises:
        ValueError: no run has anything to plot, or the directory does not exist.

    Example:
        >>> render_plot(sentinel.analyze("logs/run1"), "report.png")  # doctest: +SKIP
        PosixPath('report.png')
    """
    import matplotlib

    matplotlib.use("Agg")  # no display: always a file
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    path = Path(path)
    if not path.parent.is_dir():
        raise ValueError(f"cannot write plot '{path}': directory '{path.parent}' does not exist")
    runs = [r for r in report.runs if r.data is not None and not r.data.steps.empty]
    panels = [(key, label) for key, label in _PANELS if any(_columns(r, key) for r in runs)]
    if not panels:
        raise ValueError("nothing to plot: no run has loss, grad norm, loss scale or attention entropy")
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 2.6 * len(panels) + 0.8), sharex=True,
                             squeeze=False)
    axes = axes[:, 0]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    positive = {key: True for key, _ in panels}
    labelled: set[str] = set()  # each incident marker named once in the legend, for all runs
    for r_i, run in enumerate(runs):
        color = colors[r_i % len(colors)]
        label = run.name if len(runs) > 1 else None
        for ax, (key, _) in zip(axes, panels):
            for c_i, column in enumerate(_columns(run, key)):
                series = _reduce(run.data.steps[column])
                style = {"color": color} if len(_columns(run, key)) == 1 else {}
                name = column.split("/", 1)[1] if key.endswith("/") else label
                if key.endswith("/") and len(runs) > 1:
                    name = f"{run.name}: {name}"
                name = None if name is None else _literal(name)
                positive[key] &= bool((series > 0).all())
                ax.plot(series.index, series.to_numpy(), lw=0.9, label=name, **style)
        _mark(axes, panels, run, labelled)
    for ax, (key, label) in zip(axes, panels):
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if key in ("loss", metrics.GRAD_NORM_TOTAL, metrics.LOSS_SCALE) and positive[key]:
            ax.set_yscale("log")
            low, high = ax.get_ylim()
            if high / low < 100:  # under two decades: plain numbers read better than 10^x
                ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
                minor = ticker.FuncFormatter(lambda v, _: f"{v:g}") if high / low < 10 else ticker.NullFormatter()
                ax.yaxis.set_minor_formatter(minor)
        handles, labels = ax.get_legend_handles_labels()
        if handles and any(labels):
            ax.legend(fontsize=7, loc="upper right", ncol=min(4, len(handles)))
    axes[-1].set_xlabel("step")
    title = _literal(", ".join(f"{r.name}: {r.verdict.value}" for r in runs))
    fig.suptitle(f"sentinel analyze -- {title}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def _literal(text: str) -> str:
    """Log text shown as written: ``$`` escaped so matplotlib never parses it as mathtext (a
    module named ``$\\frac{a}{`` would fail the whole plot), control characters removed, and
    no leading ``_`` (which would hide a legend entry)."""
    text = clean_text(text).replace("$", r"\$")
    return " " + text if text.startswith("_") else text


def _columns(run: RunReport, key: str) -> list[str]:
    steps = run.data.steps
    if key.endswith("/"):
        return sorted(c for c in steps.columns if c.startswith(key) and steps[c].notna().any())
    return [key] if key in steps.columns and steps[key].notna().any() else []


def _reduce(series: pd.Series) -> pd.Series:
    series = series[np.isfinite(series.to_numpy(dtype="float64"))]
    if len(series) <= _MAX_POINTS:
        return series
    buckets = np.arange(len(series)) * _MAX_POINTS // len(series)
    grouped = pd.Series(series.to_numpy(), index=buckets).groupby(level=0)
    steps = pd.Series(series.index.to_numpy(), index=buckets).groupby(level=0).first()
    return pd.Series(grouped.max().to_numpy(), index=steps.to_numpy())


def _mark(axes, panels, run: RunReport, labelled: set[str]) -> None:
    loss_ax = axes[0] if panels[0][0] == "loss" else None
    loss = run.data.steps[metrics.LOSS] if metrics.LOSS in run.data.steps.columns else None

    def once(name: str) -> str | None:
        if name in labelled:
            return None
        labelled.add(name)
        return name

    for incident in run.incidents:
        if incident.kind == "loss_spike" and loss_ax is not None:
            step = incident.details.get("peak_step", incident.step)
            value = incident.details.get("peak")
            if value is None and loss is not None and step in loss.index:
                value = loss.loc[step]
            if value is not None and np.isfinite(value):
                loss_ax.scatter([step], [value], marker="v", s=40, color="red", zorder=5,
                                label=once("loss spike"))
        elif incident.kind == "rollback":
            restored = incident.details.get("restored_step")
            for ax in axes:
                ax.axvline(incident.details.get("spike_step", incident.step), color="crimson", ls="--",
                           lw=0.9, label=once("rollback") if ax is axes[0] else None)
                if restored is not None:
                    ax.axvline(restored, color="crimson", ls=":", lw=0.8)
        elif incident.kind == "skip":
            for ax in axes:
                ax.axvspan(incident.step - 0.5, incident.end_step + 0.5, color="orange", alpha=0.25,
                           label=once("skipped batches") if ax is axes[0] else None)
        elif incident.kind == "nonfinite":
            for ax in axes:  # a line, not a span: one NaN step would be invisible as a span
                ax.axvline(incident.step, color="red", lw=1.6, alpha=0.6,
                           label=once("non-finite") if ax is axes[0] else None)
                if incident.end_step > incident.step:
                    ax.axvspan(incident.step, incident.end_step, color="red", alpha=0.15)
        elif incident.kind == "divergence":
            for ax in axes:
                ax.axvspan(incident.step, incident.end_step, color="purple", alpha=0.08,
                           label=once("divergence") if ax is axes[0] else None)
        elif incident.kind == "entropy_collapse":
            column = metrics.metric_key(metrics.ATTN_ENTROPY, str(incident.details.get("module")))
            steps = run.data.steps
            for ax, (key, _) in zip(axes, panels):
                if key == metrics.ATTN_ENTROPY + "/" and column in steps.columns \
                        and incident.step in steps.index and np.isfinite(steps.loc[incident.step, column]):
                    ax.scatter([incident.step], [steps.loc[incident.step, column]], marker="v", s=30,
                               color="red", zorder=5, label=once("entropy collapse"))
        elif incident.kind == "grad_norm_explosion":
            for ax, (key, _) in zip(axes, panels):
                if key == metrics.GRAD_NORM_TOTAL:
                    ax.scatter([incident.details.get("peak_step", incident.step)], [incident.details.get("peak")],
                               marker="v", s=30, color="red", zorder=5, label=once("grad norm explosion"))
