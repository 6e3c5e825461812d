"""Attention entropy collapse: a layer's entropy falling towards 0, or its largest logit growing."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.config import AnalyzeConfig
from sentinel.analyze.incident import Incident, IncidentKind, Severity


def attention_incidents(steps: pd.DataFrame, config: AnalyzeConfig) -> list[Incident]:
    """One warning per attention module whose entropy fell below ``entropy_ratio`` of its early
    value (median of its first ``early_samples`` samples), or whose largest logit grew by
    ``logit_growth``.

    Example:
        >>> [i.details["module"] for i in attention_incidents(run.steps, AnalyzeConfig())]  # doctest: +SKIP
        ['blocks.0.attn']
    """
    incidents = []
    prefix = metrics.ATTN_ENTROPY + "/"
    for column in sorted(c for c in steps.columns if c.startswith(prefix)):
        module = column[len(prefix):]
        series = _finite(steps[column])
        if len(series) <= config.early_samples:
            continue
        early = float(series.iloc[:config.early_samples].median())
        after = series.iloc[config.early_samples:]
        low = after < config.entropy_ratio * early
        logits = _finite(steps.get(metrics.metric_key(metrics.ATTN_LOGIT_MAX, module), pd.Series(dtype=float)))
        growth = None
        if len(logits) > config.early_samples:
            early_logit = float(logits.iloc[:config.early_samples].median())
            if early_logit > 0:
                growth = logits / early_logit
        grew = growth is not None and bool((growth.iloc[config.early_samples:] >= config.logit_growth).any())
        if not low.any() and not grew:
            continue
        if low.any():
            start = int(low.idxmax())
            value = float(series.loc[start])
            message = (f"attention entropy of {module} fell to {value:.3g} at step {start} "
                       f"({value / early:.1%} of its early {early:.3g}); final {float(series.iloc[-1]):.3g}")
        else:
            start = int(growth.iloc[config.early_samples:].ge(config.logit_growth).idxmax())
            message = f"attention entropy of {module} held (early {early:.3g}), but"
        if growth is not None:
            message += f"; max logit grew {float(growth.max()):.3g}x"
        incidents.append(Incident(
            IncidentKind.ENTROPY_COLLAPSE, start, int(series.index[-1]), Severity.WARNING, message,
            {"module": module, "early_entropy": early, "min_entropy": float(series.min()),
             "final_entropy": float(series.iloc[-1]),
             "logit_growth": None if growth is None else float(growth.max()),
             "resolved": bool(series.iloc[-1] >= config.entropy_ratio * early)}))
    return incidents


def _finite(series: pd.Series) -> pd.Series:
    return series[np.isfinite(series.to_numpy(dtype="float64"))]
