"""Loss changes a log announces itself: YOLOX (and MMDetection's YOLOX) print "--->Add additional
L1 loss now!" before their last epochs and add an L1 term to the total loss from there. The loss
steps up to a new level and stays: by its curve alone a divergence, by the log's own word the
objective changing. Such a move is information.

The readers turn the line into a ``new_level`` event with an ``announced`` detail (what changed),
at the step of the record line after it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.detect.divergence import DivergenceConfig

# Incidents of a move to a new level (as the guard's accepted levels settle them).
_MOVES = frozenset({IncidentKind.LOSS_SPIKE, IncidentKind.DIVERGENCE, IncidentKind.GRAD_EXPLOSION,
                    IncidentKind.GRAD_SPIKE})
# Logged values after the announcement within which a move is taken as its result: a divergence
# is found once its smoothed level (a window of values) has stayed up.
_AFTER = 3 * DivergenceConfig().level_window


def announced_changes(events: pd.DataFrame | None) -> list[tuple[int, str]]:
    """``(step, what changed)`` of each change of the loss the log announced.

    Example:
        >>> announced_changes(pd.DataFrame([{"step": 6410, "kind": "new_level", "announced": "an L1 term"}]))
        [(6410, 'an L1 term')]
    """
    if events is None or events.empty or "announced" not in events.columns:
        return []
    rows = events[(events["kind"] == "new_level") & events["announced"].notna()]
    return [(int(r["step"]), str(r["announced"])) for _, r in rows.iterrows()]


def settle_announced(incidents: list[Incident], changes: list[tuple[int, str]], steps: np.ndarray) -> list[Incident]:
    """Incidents of a move of the loss that starts where the log announced a change of it (from
    the announcement to :data:`_AFTER` logged steps after) become information, resolved.

    Example:
        >>> settle_announced([Incident("divergence", 6560, 8000, Severity.CRITICAL, "diverged")],
        ...                  [(6410, "an L1 term added")], np.arange(10, 8010, 10))[0].severity.value
        'info'
    """
    if not changes or not len(steps):
        return incidents
    windows = [(at, int(steps[min(np.searchsorted(steps, at) + _AFTER, len(steps) - 1)]), what) for at, what in changes]
    out = []
    for incident in incidents:
        hit = next(((at, what) for at, end, what in windows if incident.kind in _MOVES and at <= incident.step <= end),
                   None)
        if hit is None:
            out.append(incident)
            continue
        note = f"; the log says the loss itself changed at step {hit[0]} ({hit[1]}): a new level, not damage"
        out.append(replace(incident, severity=Severity.INFO, message=incident.message + note,
                           details={**incident.details, "resolved": True, "announced_change": hit[0]}))
    return out
