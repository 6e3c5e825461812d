"""Non-finite steps: NaN/Inf in the loss (and grad norm) series and recorded ``nonfinite`` events.

In a steps frame NaN means both "not logged at this step" and "logged as NaN". A NaN counts
as a non-finite value when the step lies on the metric's logging cadence, at or after its
first logged value (a metric logged every step makes every NaN row count; a loss logged every
50 steps ignores validation rows in between).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.loaders import RunData
from sentinel.analyze.spans import cadence, group_steps


def nonfinite_mask(series: pd.Series) -> pd.Series:
    """Boolean series: True where ``series`` holds a NaN/Inf that was logged, not just absent.

    Example:
        >>> s = pd.Series([1.0, np.nan, np.inf, 0.5], index=[0, 1, 2, 3])
        >>> nonfinite_mask(s).tolist()
        [False, True, True, False]
    """
    values = series.to_numpy(dtype="float64")
    infinite = np.isinf(values)
    present = ~np.isnan(values)
    if not present.any():
        return pd.Series(np.isnan(values), index=series.index)  # a loss that was NaN throughout
    logged = series.index[present]
    every = cadence(logged)
    steps = series.index.to_numpy()
    on_cadence = ((steps - logged[0]) % every == 0) & (steps >= logged[0])
    return pd.Series(infinite | (np.isnan(values) & on_cadence), index=series.index)


def finite(series: pd.Series) -> pd.Series:
    """The finite values of a series (absent and non-finite steps dropped).

    Example:
        >>> finite(pd.Series([1.0, np.nan, np.inf])).tolist()
        [1.0]
    """
    return series[np.isfinite(series.to_numpy(dtype="float64"))]


def nonfinite_incidents(run: RunData) -> list[Incident]:
    """One critical incident per stretch of non-finite loss or grad-norm steps, and per recorded
    ``nonfinite`` event outside such a stretch, naming the source module where it was found.

    Example:
        >>> [i.message for i in nonfinite_incidents(run)]  # doctest: +SKIP
        ['loss non-finite (nan) at steps 57-59 (3 steps); source: blocks.1.attn (forward)']
    """
    incidents: list[Incident] = []
    events = _nonfinite_events(run.events)
    covered: list[tuple[int, int]] = []
    for key in (metrics.LOSS, metrics.GRAD_NORM_TOTAL):
        if key not in run.steps.columns:
            continue
        series = run.steps[key]
        mask = nonfinite_mask(series)
        finite_steps = finite(series).index
        last_finite = int(finite_steps[-1]) if len(finite_steps) else None
        for start, end in group_steps(mask, max_gap=1):
            span = series.loc[start:end][mask.loc[start:end]]
            kinds = sorted({"nan" if np.isnan(v) else ("+inf" if v > 0 else "-inf") for v in span})
            resolved = last_finite is not None and last_finite > end
            sources = events[(events["step"] >= start) & (events["step"] <= end)] if len(events) else events
            where = _describe_sources(sources)
            covered.append((start, end))
            steps_txt = f"step {start}" if start == end else f"steps {start}-{end} ({len(span)} steps)"
            message = f"{key} non-finite ({'/'.join(kinds)}) at {steps_txt}; {where}"
            if not resolved:
                message += "; never finite again"
            incidents.append(Incident(
                IncidentKind.NONFINITE, start, end, Severity.CRITICAL, message,
                {"metric": key, "values": kinds, "count": int(len(span)),
                 "sources": _source_list(sources), "resolved": resolved}))
    loss = finite(run.steps[metrics.LOSS]) if metrics.LOSS in run.steps.columns else None
    loss_last = int(loss.index[-1]) if loss is not None and len(loss) else None
    for _, event in events.iterrows():
        step = int(event["step"])
        if any(a <= step <= b for a, b in covered):
            continue
        sources = events[events["step"] == step]
        covered.append((step, step))
        later_ok = loss_last is not None and loss_last > step
        incidents.append(Incident(
            IncidentKind.NONFINITE, step, step, Severity.CRITICAL,
            f"non-finite values recorded at step {step}; {_describe_sources(sources)}",
            {"metric": None, "sources": _source_list(sources), "resolved": bool(later_ok)}))
    return incidents


def _nonfinite_events(events: pd.DataFrame) -> pd.DataFrame:
    if events is None or events.empty or "kind" not in events.columns:
        return pd.DataFrame(columns=["step", "kind"])
    return events[events["kind"] == "nonfinite"]


def _source_list(events: pd.DataFrame) -> list[dict]:
    out = []
    for _, event in events.iterrows():
        out.append({k: _plain(event.get(k)) for k in ("module", "phase", "tensor_role", "rank")
                    if k in event.index and _plain(event.get(k)) is not None})
    return out


def _describe_sources(events: pd.DataFrame) -> str:
    found = []
    for source in _source_list(events):
        module = source.get("module")
        if module:
            phase = f" ({source['phase']})" if source.get("phase") else ""
            rank = f" rank {source['rank']}" if source.get("rank") not in (None, 0) else ""
            found.append(f"{module}{phase}{rank}")
    if found:
        return "source: " + ", ".join(dict.fromkeys(found))
    return "source module not recorded" if len(events) else "no source recorded (no nonfinite event)"


def _plain(value):
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value
