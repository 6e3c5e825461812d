"""Attention entropy collapse: a layer's entropy falling towards 0, or its largest logit growing."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.config import AnalyzeConfig
from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.detect.entropy import EntropyConfig, collapsed, logit_blown_up


def attention_incidents(steps: pd.DataFrame, config: AnalyzeConfig) -> list[Incident]:
    """One warning per attention module whose entropy collapsed or whose largest logit blew up.

    Attention entropy falls slowly and healthily as a model learns (uniform attention at
    initialisation sharpens); a collapse is a fast fall. So each sample is compared with the
    median of the ``early_samples`` samples just before it (a trailing reference): the entropy
    has collapsed when it falls below ``entropy_ratio`` of that reference; the largest logit has
    blown up when it exceeds ``logit_growth`` times its own trailing reference.

    Example:
        >>> [i.details["module"] for i in attention_incidents(run.steps, AnalyzeConfig())]  # doctest: +SKIP
        ['blocks.0.attn']
    """
    incidents = []
    prefix = metrics.ATTN_ENTROPY + "/"
    k = config.early_samples
    # The recorder's rule (it writes entropy_collapse events online), with the analyzer's settings.
    rule = EntropyConfig(ratio=config.entropy_ratio, logit_growth=config.logit_growth, previous=k)
    for column in sorted(c for c in steps.columns if c.startswith(prefix)):
        module = column[len(prefix):]
        series = _finite(steps[column])
        if len(series) <= k:
            continue
        low = _collapsed(series, rule)
        logit_key = metrics.metric_key(metrics.ATTN_LOGIT_MAX, module)
        logits = _finite(steps[logit_key]) if logit_key in steps.columns else pd.Series(dtype=float)
        blown = logit_blown_up(logits, rule) if len(logits) else pd.Series(dtype=bool)
        if not low.any() and not blown.any():
            continue
        reference = series.rolling(k).median().shift(1)  # the k samples before each one
        logit_ref = logits.rolling(k).median().shift(1)
        early = float(series.iloc[:k].median())
        parts = []
        if low.any():
            start = int(low.idxmax())
            value, ref = float(series.loc[start]), float(reference.loc[start])
            parts.append(f"attention entropy of {module} fell to {value:.3g} at step {start} "
                         f"({value / ref:.0%} of {ref:.3g} just before); final {float(series.iloc[-1]):.3g}")
        if blown.any():
            at = int(blown.idxmax())
            growth = float(logits.loc[at] / logit_ref.loc[at])
            parts.append(f"max attention logit of {module} grew {growth:.3g}x to {float(logits.loc[at]):.3g} "
                         f"at step {at}")
            start = at if not low.any() else min(start, at)
        final = float(series.iloc[-1])
        incidents.append(Incident(
            IncidentKind.ENTROPY_COLLAPSE, start, int(series.index[-1]), Severity.WARNING, "; ".join(parts),
            {"module": module, "early_entropy": early, "min_entropy": float(series.min()),
             "final_entropy": final,
             "logit_growth": float((logits / logit_ref).max()) if len(logits) > k else None,
             "resolved": bool(final >= config.entropy_ratio * float(reference.loc[start]))
             if np.isfinite(reference.get(start, np.nan)) else False}))
    return incidents


def _finite(series: pd.Series) -> pd.Series:
    """The finite samples of a column (a sampled metric is NaN on most rows of a long run)."""
    values = series.to_numpy(dtype="float64")
    keep = np.flatnonzero(np.isfinite(values))
    return pd.Series(values[keep], index=series.index[keep], name=series.name)


def _collapsed(series: pd.Series, rule: EntropyConfig) -> pd.Series:
    """:func:`collapsed` on a series of finite samples, with numpy for an odd ``previous``:
    there the rolling median is the middle element of each window (pandas selects it too, no
    mean of two), so the reference and the comparison are the same floats."""
    k = rule.previous
    if k % 2 == 0 or len(series) <= k:
        return collapsed(series, rule)
    values = series.to_numpy(dtype="float64")
    windows = np.lib.stride_tricks.sliding_window_view(values[:-1], k)  # the k samples before each
    reference = np.partition(windows, k // 2, axis=1)[:, k // 2]
    low = np.zeros(len(values), dtype=bool)
    low[k:] = values[k:] < rule.ratio * reference
    return pd.Series(low, index=series.index)
