"""A loss that rises while the run's own measure of quality improves is no divergence, nor a spike.

spaCy's training table sums each row's loss over the updates since the evaluation before, under a
batch that grows from 100 to 1,000 words: its ``LOSS TAGGER`` climbs x1.3 while ``TAG_ACC`` goes
from 34 to 89 and ``SCORE`` from 0.34 to 0.89. A diverged model's accuracy falls with it; one whose
accuracy, or score, rose at every logged row of the stretch is learning, and the loss's scale is
what changed (a sum over more, a term's weight). Such a divergence is told as information, the
measure and its rise named; so is a spike at whose rows the measure stood above all it had been.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pandas as pd

from sentinel.analyze.incident import Incident, IncidentKind, Severity

# A column that measures quality, higher better: spaCy's SCORE, TAG_ACC, ENTS_F; accuracy, f1; a ranking's
# mean reciprocal rank (kbc's "Valid(MRR)"), a detector's mAP, an AUC, BLEU, a segmentation's IoU or Dice.
_QUALITY = re.compile(r"^(?:[\w/ .()-]*[_/ .(-])?(?:score|acc|accuracy|f1|f|f_score|top1|top_1|mrr|map|auc|bleu|"
                      r"iou|miou|dice)\)?$", re.IGNORECASE)
# How much the measure must have risen over the stretch (relative), at least.
MIN_RISE = 0.1


def quality_columns(columns) -> list[str]:
    """The columns that measure quality, higher better.

    Example:
        >>> quality_columns(["loss", "TAG_ACC", "SCORE", "ents_f", "val_loss", "lr", "loss_f", "valid(mrr)", "map"])
        ['TAG_ACC', 'SCORE', 'ents_f', 'valid(mrr)', 'map']
    """
    return [str(c) for c in columns if _QUALITY.match(str(c)) is not None and "loss" not in str(c).lower()]


def settle_by_progress(incidents: list[Incident], steps: pd.DataFrame) -> list[Incident]:
    """``incidents`` with each divergence told as information where a quality column (see
    :func:`quality_columns`) rose by :data:`MIN_RISE` or more over its stretch and never fell below
    where it stood at its start.

    Example:
        >>> steps = pd.DataFrame({"loss": [1.0, 1.2, 1.3, 1.35], "SCORE": [0.3, 0.5, 0.7, 0.8]}, index=[1, 2, 3, 4])
        >>> found = Incident(IncidentKind.DIVERGENCE, 2, 4, Severity.CRITICAL, "loss diverged", {"came_back": False})
        >>> settle_by_progress([found], steps)[0].severity.value
        'info'
    """
    measures = quality_columns(steps.columns)
    if not measures:
        return incidents
    out = []
    for incident in incidents:
        if incident.severity.rank <= Severity.INFO.rank:
            out.append(incident)
            continue
        rose = None
        if incident.kind == IncidentKind.DIVERGENCE.value:
            rose = _rose(steps, measures, incident.step, incident.end_step)
        elif incident.kind == IncidentKind.LOSS_SPIKE.value:  # (a spike's rows: the measure's best through them)
            rose = _at_its_best(steps, measures, incident.step, incident.end_step)
        if rose is not None:
            name, start, end = rose
            incident = dataclasses.replace(
                incident, severity=Severity.INFO,
                message=f"{incident.message}; but {name} rose from {start:.4g} to {end:.4g} over it: the model "
                        "improved, and the loss's scale changed (a sum over more, a term's weight), not the run",
                details={**incident.details, "resolved": True, "progress": {"column": name, "from": start,
                                                                             "to": end}})
        out.append(incident)
    return out


def _at_its_best(steps: pd.DataFrame, measures: list[str], first: int, last: int) -> tuple[str, float, float] | None:
    """The first measure logged at a spike's rows (``first``..``last``) that stood there above every value
    it had before them and rose at them (spaCy's SCORE 0.68 then 0.70 at its summed loss's x1.7), from its
    last value before; else None."""
    for name in measures:
        series = pd.to_numeric(steps[name], errors="coerce").dropna()
        before = series[series.index < first].to_numpy(dtype="float64")
        during = series[(series.index >= first) & (series.index <= last)].to_numpy(dtype="float64")
        if len(before) < 2 or not len(during) or not np.isfinite(during).all():
            continue
        if bool((during > before.max()).all()) and during[-1] > before[-1]:
            return name, float(before[-1]), float(during[-1])
    return None


def _rose(steps: pd.DataFrame, measures: list[str], first: int, last: int) -> tuple[str, float, float] | None:
    """The first measure that rose over ``first``..``last`` (its value at or before ``first`` to its
    last there), by :data:`MIN_RISE` at least, never below where it started; else None."""
    for name in measures:
        series = pd.to_numeric(steps[name], errors="coerce").dropna()
        before = series[series.index <= first]
        during = series[(series.index > first) & (series.index <= last)].to_numpy(dtype="float64")
        if before.empty or len(during) < 2:
            continue
        start = float(before.iloc[-1])
        if start > 0 and during[-1] >= (1 + MIN_RISE) * start and bool((during >= start).all()) \
                and bool(np.isfinite(during).all()):
            return name, start, float(during[-1])
    return None
