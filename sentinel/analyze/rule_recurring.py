"""Loss spikes, and divergences that came back, that come round at a fixed period are the data's
pattern, not an instability.

An epoch whose data is not shuffled ends on its hardest batches every time, and a data source that
comes round every N steps does the same: the loss bumps up at the same point of each period and
comes back down. Its author reads that as the data's shape. Where every loss spike of a run
(warning or worse) starts one period after the one before (within 5% of the period, or two logged
steps), there are at least :data:`MIN_REPEATS` of them and each is shorter than half the period,
they are told as info, the period named; the last one, cut off by the end of the log, is one of
them too. One spike out of step leaves them all as they were. The same holds for the divergences
that came back, by where they start or where they end (a speech model's per-batch loss, its
smoothed level x2.5 over the last tenth of each 5,000-step epoch of utterances in the same order,
back 700 steps into the next; the rise began 1,000 steps early once, its return never did).
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
    """``incidents`` with the loss spikes, and the divergences that came back, told as info where
    they recur at a fixed period.

    Args:
        incidents: the run's incidents.
        steps: the run's logged steps (for the tolerance in logged steps and the log's end).

    Example:
        >>> settle_recurring(incidents, run.steps.index.to_numpy())  # doctest: +SKIP
    """
    if len(steps) < 2:
        return incidents
    spikes = [i for i in incidents
              if i.kind == IncidentKind.LOSS_SPIKE.value and i.severity.rank >= Severity.WARNING.rank]
    returned = sorted((i for i in incidents if i.kind == IncidentKind.DIVERGENCE.value and i.details.get("came_back")),
                      key=lambda i: i.step)
    settled = {}
    for group, by_end in ((spikes, False), (returned, True)):
        period = _period(sorted(group, key=lambda i: i.step), steps, by_end)
        if period is not None:
            settled.update({id(i): period for i in group})
    if returned and id(returned[-1]) in settled:
        # The last, cut off by the log's end (still up there), where it starts one period after the last
        # that came back.
        period, row = settled[id(returned[-1])], float(np.median(np.diff(steps)))
        settled.update({id(i): period for i in incidents if i.kind == IncidentKind.DIVERGENCE.value
                        and i.end_step >= int(steps[-1]) and not i.details.get("came_back")
                        and abs(i.step - returned[-1].step - period) <= max(TOLERANCE * period, TOLERANCE_ROWS * row)})
    if not settled:
        return incidents
    last = int(steps[-1])
    kinds = {i.kind for i in incidents if id(i) in settled}
    alike = {kind: sum(1 for i in incidents if id(i) in settled and i.kind == kind) for kind in kinds}
    firsts = {kind: min(i.step for i in incidents if id(i) in settled and i.kind == kind) for kind in kinds}
    out = []
    for incident in incidents:
        period = settled.get(id(incident))
        if period is not None:
            count, first = alike[incident.kind], firsts[incident.kind]
            note = (f"one of {count} alike, every {period:g} steps from step {first}: a pattern that comes round (an "
                    "unshuffled epoch's hardest batches, a data source that recurs), not an instability")
            cut = incident.end_step >= last  # the log ended inside it: it goes as the others did
            if incident.resolved or cut or incident.kind == IncidentKind.DIVERGENCE.value:
                incident = dataclasses.replace(
                    incident, severity=Severity.INFO, message=f"{incident.message}; {note}",
                    details={**incident.details, "resolved": True, "recurring": {"period": period, "count": count}})
        out.append(incident)
    return out


def _period(group: list[Incident], steps: np.ndarray, by_end: bool) -> float | None:
    """The period at which the incidents of ``group`` (in step order) start, one after the other
    (within :data:`TOLERANCE`), or end (``by_end``); None where they do not, are fewer than
    :data:`MIN_REPEATS`, or one lasts half the period or longer.

    Example:
        >>> make = lambda a, b: Incident(IncidentKind.LOSS_SPIKE, a, b, Severity.WARNING, "")
        >>> _period([make(s, s + 20) for s in (100, 300, 500, 700)], np.arange(0, 900, 10), False)
        200.0
    """
    if len(group) < MIN_REPEATS:
        return None
    row = float(np.median(np.diff(steps)))
    ends = (False, True) if by_end else (False,)
    for end in ends:
        at = np.array([i.end_step if end else i.step for i in group], dtype=np.float64)
        gaps = np.diff(at)
        period = float(np.median(gaps))
        if period <= 0 or np.abs(gaps - period).max() > max(TOLERANCE * period, TOLERANCE_ROWS * row):
            continue
        if any(i.end_step - i.step >= period / 2 for i in group):
            return None
        return period
    return None
