"""A PNG of the runs: loss, grad norm, loss scale and attention entropy against step, with what
the analyzer found marked on them.

How it reads:

- **One colour per run**, the same in every panel; where runs coincide (the demo's two runs
  share their first 160 steps) the earlier run is drawn wider underneath, so both stay visible.
- **Modules by line style** in the attention panel (solid, dashed, dotted, dash-dot), in the run's
  colour; with more modules than styles, each run shows the mean over its modules and the lowest.
- **Every marker is in the legend** and has its run's colour; with several runs each legend entry
  names its run. Point findings sit on the curve they are about (a loss spike on the loss, with
  its peak value written beside it); what the guard did spans every panel: a rollback is a dashed
  line at the step it answered with an arrow back to the step it restored, skipped batches a
  shaded window, a withheld update a cross on the loss.
- **Readable ticks on every axis**: a log axis gets labelled ticks at 1-2-5 (or denser) steps of
  each decade, plain numbers, never a lone "1"; step numbers are written in full.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    (metrics.ATTN_ENTROPY + "/", "attention entropy (nats)"),
)
_LOG_PANELS = ("loss", metrics.GRAD_NORM_TOTAL, metrics.LOSS_SCALE)
_MODULE_STYLES = ("-", "--", ":", "-.")
# Loss spikes annotated with their peak value, per run; past this the numbers would pile up.
_MAX_PEAK_LABELS = 12
_LEGEND_WRAP = 44  # characters per legend line


@dataclass(frozen=True)
class _Mark:
    """How one kind of finding is drawn, and its legend text."""

    label: str
    marker: str | None = None  # a point marker, or None for a line / span
    size: float = 36.0
    hollow: bool = False


_MARKS = {
    "loss_spike": _Mark("loss spike (peak value written)", "v", 56),
    "outlier_batch": _Mark("outlier batch (one step, back on trend)", "o", 22, hollow=True),
    "skipped_update": _Mark("update withheld (ticks along the bottom)", "|", 70),
    "grad_norm_explosion": _Mark("grad norm explosion", "D", 26),
    "grad_norm_spike": _Mark("grad norm spike (back down, loss unmoved)", "d", 22, hollow=True),
    "entropy_collapse": _Mark("attention entropy collapse", "s", 30),
    "loss_scale_collapse": _Mark("loss scale collapse", "P", 44),
    "rollback": _Mark("rollback (dashed), arrow to the step restored"),
    "skip": _Mark("batches skipped after a rollback (shaded)"),
    "nonfinite": _Mark("NaN/Inf (line; hatched while it lasts)"),
    "eval_nonfinite": _Mark("evaluation loss NaN/Inf (crosses along the bottom)", "x", 40),
    "divergence": _Mark("divergence (hatched)"),
    "loss_stuck": _Mark("loss stuck at one value or at chance level (dotted)"),
    "loss_collapse": _Mark("loss collapse (fall by 1000x)", "X", 56),
    "zero_grad": _Mark("grad norm exactly 0 (dotted)"),
    "zero_lr": _Mark("learning rate logged as 0 (dotted)"),
    "gave_up": _Mark("guard gave up"),
    "restart": _Mark("restarted by another process (its history from here)"),
    "went_back": _Mark("the run goes back to here (resumed from an earlier checkpoint)"),
    "crash": _Mark("the process stopped in an error (its traceback ends the log)"),
}


def render_plot(report: Report, path: str | Path, dpi: int = 110) -> Path:
    """Write :func:`plot_figure` of ``report`` to a PNG.

    Args:
        report: what :func:`sentinel.analyze` returned (with its loaded data).
        path: the PNG to write (its directory must exist); without an extension, ``.png`` is
            added to it (as matplotlib does).
        dpi: resolution.

    Returns:
        The path written (``report.png`` for ``report``).

    Raises:
        ValueError: no run has anything to plot, or the directory does not exist.

    Example:
        >>> render_plot(sentinel.analyze("logs/run1"), "report.png")  # doctest: +SKIP
        PosixPath('report.png')
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise ValueError(f"cannot write plot '{path}': directory '{path.parent}' does not exist")
    if not path.suffix:  # matplotlib would add it unseen: the path returned is the file written
        path = path.with_name(path.name + ".png")
    fig = plot_figure(report)
    fig.savefig(path, dpi=dpi)
    return path


def plot_figure(report: Report):
    """The report as a matplotlib ``Figure``: one panel per metric present (loss, grad norm,
    loss scale, attention entropy), one colour per run, the findings marked and all in the legend.

    Uses no pyplot state, so it works under any backend (a notebook shows the returned figure).

    Args:
        report: what :func:`sentinel.analyze` returned (with its loaded data).

    Returns:
        A ``matplotlib.figure.Figure``. Its legend (``fig.legends[0]``) lists the runs, the
        module line styles and every marker drawn.

    Raises:
        ValueError: no run has loss, grad norm, loss scale or attention entropy.

    Example:
        >>> fig = plot_figure(sentinel.analyze("logs/demo"))  # doctest: +SKIP
        >>> [t.get_text() for t in fig.legends[0].get_texts()][:2]  # doctest: +SKIP
        ['1-unguarded (unhealthy)', '2-guarded (recovered)']
    """
    from matplotlib.figure import Figure

    runs = [r for r in report.runs if r.data is not None and not r.data.steps.empty]
    panels = [(key, label) for key, label in _PANELS if any(_columns(r, key) for r in runs)]
    if not panels:
        raise ValueError("nothing to plot: no run has loss, grad norm, loss scale or attention entropy")
    # Runs counted in epochs and runs counted in steps share no x axis (30 epochs beside 5,000
    # steps were a sliver at the left): a column of panels for each unit, in the order first met.
    units = list(dict.fromkeys(r.step_unit for r in runs))
    fig = Figure(figsize=(13 if len(units) == 1 else 16, max(4.5, 2.7 * len(panels) + 1.0)), layout="constrained")
    grid = fig.subplots(len(panels), len(units), sharex="col", squeeze=False)
    cycle = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
             "#bcbd22", "#17becf"]
    colors = {run_i: cycle[run_i % len(cycle)] for run_i in range(len(runs))}
    legend: dict[str, Any] = {}  # label -> handle, in the order first drawn
    modules = _module_styles(runs)
    for column, unit in enumerate(units):
        mine = [(run_i, run) for run_i, run in enumerate(runs) if run.step_unit == unit]
        _draw(grid[:, column], panels, mine, len(runs), colors, modules, legend, unit)
    title = "sentinel analyze -- " + ", ".join(f"{r.name}: {r.verdict.value}" for r in runs)
    # Left-aligned and wrapped to the panels' width: it never runs into the legend on the right.
    title = "\n".join(textwrap.wrap(_literal(textwrap.shorten(title, 200, placeholder=" ...")), 100))
    fig.suptitle(title, fontsize=11, x=0.01, ha="left")
    fig.legend(list(legend.values()), list(legend.keys()), loc="outside right upper", fontsize=8,
               frameon=False, handlelength=2.6)
    return fig


def _draw(axes, panels, runs: list[tuple[int, RunReport]], total: int, colors: dict[int, str],
          modules: dict[str, str] | None, legend: dict[str, Any], unit: str) -> None:
    """Draw ``runs`` (each with its index among all ``total`` runs) on one column of panels whose
    x axis counts ``unit`` (step or epoch); add what is drawn to ``legend``."""
    from matplotlib import ticker
    from matplotlib.lines import Line2D

    several = total > 1
    for run_i, run in runs:
        color = colors[run_i]
        # Earlier runs wider underneath: where two runs coincide both stay visible.
        width = 0.9 + (1.6 * (total - 1 - run_i) / (total - 1) if several else 0.0)
        overfit = replaced = False
        for ax, (key, _) in zip(axes, panels):
            if key.endswith("/"):
                _plot_modules(ax, run, key, color, width, modules)
                continue
            for column in _columns(run, key):
                series = _reduce(run.data.steps[column])
                ax.plot(series.index, series.to_numpy(), lw=width, color=color, zorder=2)
                replaced = _plot_replaced(ax, run, column, color) or replaced
            if key == metrics.LOSS:
                overfit = _plot_overfitting(ax, run, color)
        run_label = _literal(f"{run.name} ({run.verdict.value})") if several else _literal(run.name)
        legend[_wrap(run_label)] = Line2D([], [], color=color, lw=2.0)
        if replaced:
            label = _literal((f"{run.name}: " if several else "") + "history the run went back on (dotted: "
                             "replaced by the one written after)")
            legend[_wrap(label)] = Line2D([], [], color=color, lw=1.2, ls=":", alpha=0.7)
        if overfit:
            label = _literal((f"{run.name}: " if several else "") + "evaluation loss (dashed), rising after its "
                             "best: overfitting")
            legend[_wrap(label)] = Line2D([], [], color=color, lw=1.2, ls="--", marker="o", ms=3)
    for name, style in (modules or {}).items():  # after the runs, before the markers (once for all columns)
        legend.setdefault(_wrap(_literal(name)), Line2D([], [], color="0.35", ls=style, lw=1.4))
    # Each run with withheld updates gets its own row of ticks along the bottom of the loss panel.
    guarded = [i for i, r in runs if any(x.kind == "skipped_update" for x in r.incidents)]
    rug_rows = {run_i: row for row, run_i in enumerate(guarded)}
    firsts = [int(r.data.steps.index.min()) for _, r in runs]
    lasts = [int(r.data.steps.index.max()) for _, r in runs]
    notes: dict[int, tuple[Any, list[tuple[float, float, str, str]]]] = {}  # per panel: (step, value, text, colour)
    for run_i, run in runs:
        _mark(axes, panels, run, run_i, several, colors[run_i], legend, rug_rows.get(run_i, 0), notes)
    for ax, (key, label) in zip(axes, panels):
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, which="major")
        if not any(_columns(r, key) for _, r in runs):  # another column's runs logged it, these did not
            ax.text(0.5, 0.5, "not logged by these runs", transform=ax.transAxes, ha="center", va="center",
                    color="0.45")
            ax.set_yticks([])
        if key in _LOG_PANELS and all(_positive(r, key) for _, r in runs if _columns(r, key)):
            top = 0.2 if ax is axes[0] or key == metrics.LOSS else 0.0
            bottom = 0.06 + 0.05 * len(guarded) if key == metrics.LOSS and guarded else 0.0
            _log_axis(ax, top, bottom)
        if ax.get_yscale() == "linear" and max(abs(ax.dataLim.y0), abs(ax.dataLim.y1)) >= 1e4:
            ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: _tick_text(v)))
        _step_axis(ax)
    for ax, written in notes.values():
        _write_peaks(ax, written, x_span=max(max(lasts) - min(firsts), 1))
    axes[-1].set_xlabel(unit)


def _literal(text: str) -> str:
    """Log text shown as written: ``$`` escaped so matplotlib never parses it as mathtext (a
    module named ``$\\frac{a}{`` would fail the whole plot), control characters removed, and
    no leading ``_`` (which would hide a legend entry)."""
    text = clean_text(text).replace("$", r"\$")
    return " " + text if text.startswith("_") else text


def _wrap(label: str) -> str:
    return "\n".join(textwrap.wrap(label, _LEGEND_WRAP, break_on_hyphens=False)) or label


def _columns(run: RunReport, key: str) -> list[str]:
    steps = run.data.steps
    if key.endswith("/"):
        return sorted(c for c in steps.columns if c.startswith(key) and steps[c].notna().any())
    return [key] if key in steps.columns and steps[key].notna().any() else []


def _positive(run: RunReport, key: str) -> bool:
    values = run.data.steps[key].to_numpy(dtype="float64")
    values = values[np.isfinite(values)]
    return bool(len(values)) and bool((values > 0).all())


def _reduce(series: pd.Series) -> pd.Series:
    """At most ``_MAX_POINTS`` finite points: past that, the lowest and the highest point of each
    bucket, in step order, so an upward spike and a downward blip both stay visible."""
    series = series[np.isfinite(series.to_numpy(dtype="float64"))]
    if len(series) <= _MAX_POINTS:
        return series
    buckets = np.arange(len(series)) * (_MAX_POINTS // 2) // len(series)
    grouped = pd.Series(series.to_numpy(dtype="float64")).groupby(buckets)
    keep = np.union1d(grouped.idxmin().to_numpy(), grouped.idxmax().to_numpy())
    return series.iloc[keep]


def _module_styles(runs: list[RunReport]) -> dict[str, str] | None:
    """The line style of each attention module (the same module has the same style in every
    run), or None when there are none. Past four modules: the mean and the lowest per run."""
    names = sorted({c.split("/", 1)[1] for r in runs for c in _columns(r, metrics.ATTN_ENTROPY + "/")})
    if not names:
        return None
    if len(names) > len(_MODULE_STYLES):
        return {f"mean over {len(names)} modules": "-", "lowest module": "--"}
    return dict(zip(names, _MODULE_STYLES))


def _plot_modules(ax, run: RunReport, key: str, color: str, width: float, styles: dict[str, str]) -> None:
    columns = _columns(run, key)
    if not columns:
        return
    frame = run.data.steps[columns]
    if len(styles) == 2 and "lowest module" in styles:
        lines = [(frame.mean(axis=1, skipna=True), "-"), (frame.min(axis=1, skipna=True), "--")]
    else:
        lines = [(frame[c], styles[c.split("/", 1)[1]]) for c in columns]
    for series, style in lines:
        series = _reduce(series.dropna())
        ax.plot(series.index, series.to_numpy(), lw=width, color=color, ls=style, zorder=2)


def _plot_replaced(ax, run: RunReport, column: str, color: str) -> bool:
    """Draw the stretches of ``column`` a later history replaced (the log went back: a run resumed
    from an earlier checkpoint), dotted and joined to the step before each; whether any was drawn."""
    drawn = False
    for stretch in run.data.abandoned:
        if column not in stretch.steps.columns:
            continue
        series = stretch.steps[column]
        series = _reduce(series.iloc[max(int(series.index.searchsorted(stretch.first)) - 1, 0):])  # from the step before
        if len(series):
            ax.plot(series.index, series.to_numpy(), lw=1.2, ls=":", color=color, alpha=0.7, zorder=2)
            drawn = True
    return drawn


def _plot_overfitting(ax, run: RunReport, color: str) -> bool:
    """The evaluation losses an overfitting finding is about, dashed with a dot at each
    evaluation, in the run's colour on the loss panel: the rise is seen beside the training loss.
    Whether any was drawn."""
    columns = [i.details["metric"] for i in run.incidents if i.kind == "overfitting"]
    columns = [c for c in dict.fromkeys(columns) if c in run.data.steps.columns]
    for column in columns:
        series = _reduce(run.data.steps[column].dropna())
        ax.plot(series.index, series.to_numpy(), lw=1.2, color=color, ls="--", marker="o", ms=3, zorder=2)
    return bool(columns)


def _log_axis(ax, top: float, bottom: float) -> None:
    """Log scale with labelled ticks a person can read a value from; ``top`` and ``bottom``
    (shares of the height) are added for the peak labels and rollback arrows above, the
    withheld-update ticks below. A range under a factor of 3 stays linear: a log axis shows
    nothing more there."""
    from matplotlib import ticker

    low, high = ax.dataLim.y0, ax.dataLim.y1
    if not (0 < low < high) or high / low < 3:
        return
    ax.set_yscale("log")
    low, high = ax.get_ylim()
    high, low = high * (high / low) ** top, low / (high / low) ** bottom
    ticks = readable_log_ticks(low, high)
    ax.yaxis.set_major_locator(ticker.FixedLocator(ticks))
    ax.yaxis.set_major_formatter(ticker.FixedFormatter([_tick_text(t) for t in ticks]))
    ax.yaxis.set_minor_locator(ticker.LogLocator(subs="all"))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_ylim(low, high)


def readable_log_ticks(low: float, high: float) -> list[float]:
    """Tick values for a log axis from ``low`` to ``high``: the sparsest of 1, 1-2-5,
    1-2-3-4-5-6-8 (then every integer) per decade that puts at least five ticks in the range (one
    per decade, thinned, when the range spans many decades).

    Example:
        >>> readable_log_ticks(0.62, 8.9)
        [0.8, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0]
        >>> readable_log_ticks(2.6, 25)
        [3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0]
        >>> readable_log_ticks(1.0, 1e6)
        [1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0, 1000000.0]
    """
    if not (0 < low < high) or not math.isfinite(high):
        return []
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    for mantissas in ((1,), (1, 2, 5), (1, 2, 3, 4, 5, 6, 8), (1, 2, 3, 4, 5, 6, 7, 8, 9)):
        ticks = [float(f"{m}e{k}") for k in range(first, last + 1) for m in mantissas]
        ticks = [t for t in ticks if low <= t <= high]
        if len(ticks) >= 5:
            break
    if len(ticks) > 10 and mantissas == (1,):
        ticks = ticks[::math.ceil(len(ticks) / 8)]
    if len(ticks) < 3:  # a narrow range: evenly spaced round numbers
        from matplotlib import ticker

        ticks = [round(float(t), 12) for t in ticker.MaxNLocator(5).tick_values(low, high) if low <= t <= high]
    return ticks


def _tick_text(value: float) -> str:
    """``0.3``, ``8``, ``20k``, ``1M``, ``1e-05``: short and plain."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale * 10 or (abs(value) >= scale and suffix != "k"):
            return f"{value / scale:g}{suffix}"
    return f"{value:g}"


def _write_peaks(ax, notes: list[tuple[float, float, str, str]], x_span: int) -> None:
    """Write each peak value above its marker, in its run's colour. Peaks within 3% of the steps
    and, on a log axis, 0.3 decades of each other form a group whose values are stacked above
    its highest marker, highest value first, so that no two overlap."""
    log = ax.get_yscale() == "log"

    def close(a: tuple, b: tuple) -> bool:
        if abs(a[0] - b[0]) >= 0.03 * x_span:
            return False
        if log and a[1] > 0 and b[1] > 0:
            return abs(math.log10(a[1]) - math.log10(b[1])) < 0.3
        return True

    groups: list[list[tuple[float, float, str, str]]] = []
    for note in sorted(notes):
        group = next((g for g in groups if any(close(note, other) for other in g)), None)
        if group is None:
            groups.append([note])
        else:
            group.append(note)
    for group in groups:
        top = max(y for _, y, _, _ in group)
        for row, (x, _, text, color) in enumerate(sorted(group, key=lambda n: -n[1])):
            # On a white ground: a rollback's dashed line at the same step would cross the digits.
            ax.annotate(text, (x, top), xytext=(0, 6 + 10 * row), textcoords="offset points", ha="center",
                        va="bottom", fontsize=8, color=color, fontweight="bold", zorder=6,
                        bbox={"boxstyle": "square,pad=0.05", "facecolor": "white", "edgecolor": "none",
                              "alpha": 0.85})


def _peak_text(value: float) -> str:
    """A spike's peak beside its marker: ``7.9``, ``4.71``, ``1,993``, ``2.5e+05``."""
    return f"{value:,.0f}" if 1000 <= abs(value) < 1e5 else f"{value:.3g}"


def _step_axis(ax) -> None:
    from matplotlib import ticker

    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))  # steps: no tick between two of them
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.tick_params(axis="x", labelbottom=True)  # every panel keeps its step numbers


def _mark(axes, panels, run: RunReport, run_index: int, several: bool, color: str,
          legend: dict[str, Any], rug_row: int, notes: dict[int, tuple[Any, list[tuple[float, float, str, str]]]]
          ) -> None:
    """Draw ``run``'s incidents in ``color``; add each kind to ``legend`` the first time, and the
    peak values to write to ``notes``."""
    from matplotlib import transforms
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    by_key = {key: ax for ax, (key, _) in zip(axes, panels)}
    steps = run.data.steps
    loss_ax = by_key.get("loss")

    def label(kind: str, handle) -> None:
        text = _wrap(_literal((f"{run.name}: " if several else "") + _MARKS[kind].label))
        legend.setdefault(text, handle)

    def point(kind: str, ax, x: Any, y: Any, note: str | None = None) -> None:
        if ax is None or x is None or not isinstance(y, (int, float)) or not np.isfinite(y):
            return
        mark = _MARKS[kind]
        face = "none" if mark.hollow else color
        edge = color if mark.hollow else "black"
        ax.scatter([x], [y], marker=mark.marker, s=mark.size, facecolors=face, edgecolors=edge,
                   linewidths=1.0, zorder=5)
        if note is not None:  # written once every panel has its scale: see _write_peaks
            notes.setdefault(id(ax), (ax, []))[1].append((float(x), float(y), note, color))
        label(kind, Line2D([], [], ls="none", marker=mark.marker, markersize=math.sqrt(mark.size),
                           markerfacecolor=face, markeredgecolor=edge))

    def rug(kind: str, ax, steps_at: list[int]) -> None:
        """Ticks along the bottom of ``ax``, one per step, a row per run: never hidden under a
        spike marker."""
        if ax is None or not steps_at:
            return
        mark = _MARKS[kind]
        blend = transforms.blended_transform_factory(ax.transData, ax.transAxes)
        ax.scatter(steps_at, [0.04 + 0.05 * rug_row] * len(steps_at), marker=mark.marker, s=mark.size,
                   color=color, linewidths=1.6, transform=blend, zorder=5)
        label(kind, Line2D([], [], ls="none", marker=mark.marker, markersize=math.sqrt(mark.size),
                           color=color, markeredgewidth=1.6))

    def value(column: str, step: Any) -> float | None:
        if column not in steps.columns or step not in steps.index:
            return None
        found = steps.loc[step, column]
        return float(found) if np.isscalar(found) else None

    spikes, rollbacks, withheld = 0, 0, []
    for incident in run.incidents:
        kind, details = incident.kind, incident.details
        peak_step = details.get("peak_step", incident.step)
        if kind == "loss_spike":
            peak = details.get("peak")
            peak = peak if isinstance(peak, (int, float)) else value(metrics.LOSS, peak_step)
            spikes += 1
            note = _peak_text(peak) if spikes <= _MAX_PEAK_LABELS and isinstance(peak, (int, float)) else None
            point(kind, loss_ax, peak_step, peak, note)
        elif kind == "outlier_batch":
            point(kind, loss_ax, peak_step, details.get("peak", value(metrics.LOSS, peak_step)))
        elif kind == "skipped_update":
            withheld.append(incident.step)
        elif kind in ("grad_norm_explosion", "grad_norm_spike"):
            point(kind, by_key.get(metrics.GRAD_NORM_TOTAL), peak_step, details.get("peak"))
        elif kind == "loss_scale_collapse":
            point(kind, by_key.get(metrics.LOSS_SCALE), details.get("min_step"), details.get("min"))
        elif kind == "entropy_collapse":
            column = metrics.metric_key(metrics.ATTN_ENTROPY, str(details.get("module")))
            point(kind, by_key.get(metrics.ATTN_ENTROPY + "/"), incident.step, value(column, incident.step))
        elif kind == "rollback":
            at = details.get("spike_step", incident.step)
            restored = details.get("restored_step")
            for ax in axes:
                ax.axvline(at, color=color, ls="--", lw=1.1, zorder=3)
            if restored is not None:
                top = axes[0]
                blend = transforms.blended_transform_factory(top.transData, top.transAxes)
                height = 0.96 - 0.04 * (rollbacks % 3)  # rollbacks to the same step stay apart
                rollbacks += 1
                top.annotate("", xy=(restored, height), xytext=(at, height), xycoords=blend, textcoords=blend,
                             arrowprops={"arrowstyle": "-|>", "color": color, "lw": 1.3}, zorder=6)
            label(kind, Line2D([], [], color=color, ls="--", lw=1.1, marker="<", markevery=[0]))
        elif kind == "skip":
            for ax in axes:
                ax.axvspan(incident.step - 0.5, incident.end_step + 0.5, color=color, alpha=0.22, lw=0, zorder=1)
            label(kind, Patch(facecolor=color, alpha=0.22))
        elif kind == "nonfinite" and "evaluations" in details:  # an evaluation's loss, not training's
            rug("eval_nonfinite", loss_ax if loss_ax is not None else axes[0],
                details.get("steps") or [incident.step, incident.end_step])
        elif kind == "nonfinite":
            for ax in axes:  # a line: one NaN step would be invisible as a span
                ax.axvline(incident.step, color=color, lw=1.8, alpha=0.8, zorder=3)
                if incident.end_step > incident.step:
                    ax.axvspan(incident.step, incident.end_step, facecolor="none", edgecolor=color, hatch="x",
                               alpha=0.2, lw=0, zorder=1)
            label(kind, (Patch(facecolor="none", edgecolor=color, hatch="x", alpha=0.4, lw=0),
                         Line2D([], [], color=color, lw=1.8, alpha=0.8)))
        elif kind == "divergence":
            for ax in axes:
                ax.axvspan(incident.step, incident.end_step, facecolor="none", edgecolor=color, hatch="//",
                           alpha=0.35, lw=0, zorder=1)
            label(kind, Patch(facecolor="none", edgecolor=color, hatch="//", alpha=0.5))
        elif kind in ("loss_stuck", "zero_grad", "zero_lr"):
            for ax in axes:
                ax.axvspan(incident.step, incident.end_step, facecolor="none", edgecolor=color, hatch="..",
                           alpha=0.35, lw=0, zorder=1)
            label(kind, Patch(facecolor="none", edgecolor=color, hatch="..", alpha=0.5))
        elif kind == "loss_collapse":
            point(kind, loss_ax, incident.end_step, details.get("to"))
        elif kind == "gave_up":
            for ax in axes:
                ax.axvline(incident.step, color=color, lw=2.6, ls=(0, (1, 1)), zorder=3)
            label(kind, Line2D([], [], color=color, lw=2.6, ls=(0, (1, 1))))
        elif kind == "restart":
            for ax in axes:
                ax.axvline(incident.step, color=color, lw=1.0, ls="-.", zorder=3)
            label("went_back" if "went_back_from" in details else kind, Line2D([], [], color=color, lw=1.0, ls="-."))
        elif kind == "crash":
            for ax in axes:
                ax.axvline(incident.step, color=color, lw=2.0, ls=(0, (4, 2)), zorder=3)
            label(kind, Line2D([], [], color=color, lw=2.0, ls=(0, (4, 2))))
    rug("skipped_update", loss_ax if loss_ax is not None else axes[0], withheld)
