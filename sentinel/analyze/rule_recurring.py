"""Loss spikes that come round at a fixed period are the data's pattern, not an instability.

An epoch whose data is not shuffled ends on its hardest batches every time, and a data source that
comes round every N steps does the same: the loss bumps up at the same point of each period and
comes back down. Its author reads that as the data's shape. Where every loss spike of a run
(warning or worse) starts one period after the one before (within 5% of the period, or two logged
steps), there are at least :data:`MIN_REPEATS` of them and each is shorter than half the period,
they are told as info, the period named; the last one, cut off by the end of the log, is one of
them too. One spike out of step leaves them all as they were.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from sentinel.analyze.incident import Incident, IncidentKind, Severity

MIN_REPEATS = 4
# How far a spike may start from one period after the one before: this share of the period...
TOLERANCE = 0.05
# ... or this many logged steps, whichever is more.
TOLERANCE_ROWS = 2


def settle_recurring(incidents: list[Incident], steps: np.ndarray) -> list[Incident]:
    """``incidents`` with the loss spikes told as info where they recur at a fixed period.

    Args:
        incidents: the run's incidents.
        steps: the run's logged steps (for the tolerance in logged steps and the log's end).

    Example:
        >>> settle_recurring(incidents, run.steps.index.to_numpy())  # doctest: +SKIP
    """
    spikes = sorted((i for i in incidents if i.kind == IncidentKind.LOSS_SPIKE.value
                     and i.severity.rank >= Severity.WARNING.rank), key=lambda i: i.step)
    if len(spikes) < MIN_REPEATS or len(steps) < 2:
        return incidents
    starts = np.array([i.step for i in spikes], dtype=np.float64)
    gaps = np.diff(starts)
    period = float(np.median(gaps))
    row = float(np.median(np.diff(steps)))
    if period <= 0 or np.abs(gaps - period).max() > max(TOLERANCE * period, TOLERANCE_ROWS * row):
        return incidents
    if any(i.end_step - i.step >= period / 2 for i in spikes):
        return incidents
    last = int(steps[-1])
    note = (f"one of {len(spikes)} alike, every {period:g} steps from step {spikes[0].step}: a pattern that "
            "comes round (an unshuffled epoch's hardest batches, a data source that recurs), not an instability")
    ids = {id(i) for i in spikes}
    settled = []
    for incident in incidents:
        if id(incident) in ids:
            cut = incident.end_step >= last  # the log ended inside it: it goes as the others did
            if incident.resolved or cut:
                incident = dataclasses.replace(
                    incident, severity=Severity.INFO, message=f"{incident.message}; {note}",
                    details={**incident.details, "resolved": True, "recurring": {"period": period, "count": len(spikes)}})
        settled.append(incident)
    return settled
