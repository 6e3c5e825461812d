"""Stretches of history a run went back on: its log's steps fell back (a run resumed from an earlier
checkpoint, by hand or by a job scheduler) and the history written after replaced them.

That is how large runs are mended today (OPT's logbook, PaLM: back some hundred steps, skip the
data, go on), so the replaced stretch usually holds why: a spike, a divergence, a NaN. Its
incidents are reported as the run's, marked as got past (the history that replaced them is judged
on its own), beside one incident per fall-back saying where the run went back.
"""

from __future__ import annotations

from dataclasses import replace

from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.loaders import AbandonedHistory


def went_back_incident(stretch: AbandonedHistory) -> Incident:
    """One info incident for a fall-back: where the run went back, and what the later history replaced.

    Example:
        >>> import pandas as pd
        >>> went_back_incident(AbandonedHistory(1200, 1210, 1490, pd.DataFrame())).message
        'the run goes back from step 1490 to step 1200 (resumed from an earlier checkpoint): the history written after replaces steps 1210-1490'
    """
    replaced = f"step {stretch.first}" if stretch.first == stretch.last else f"steps {stretch.first}-{stretch.last}"
    return Incident(IncidentKind.RESTART, stretch.resumed_at, max(stretch.last, stretch.resumed_at), Severity.INFO,
                    f"the run goes back from step {stretch.last} to step {stretch.resumed_at} (resumed from an "
                    f"earlier checkpoint): the history written after replaces {replaced}",
                    {"resolved": True, "went_back_from": stretch.last, "replaced_from": stretch.first})


def replaced_incidents(stretch: AbandonedHistory, found: list[Incident], kept: list[Incident]) -> list[Incident]:
    """The warnings and worse ``found`` in the history as it stood before the run went back
    (``stretch.steps``) that fall in the stretch replaced, marked as got past; one that started
    before the stretch is left to the history kept (``kept``: its incidents) where that found it
    too, and so is one the history kept found alike (same kind, steps and peak: the resumed run
    logged the same values again). One that came back otherwise is reported in both.

    Example:
        >>> import pandas as pd
        >>> spike = Incident("loss_spike", 1401, 1491, Severity.WARNING, "loss spike to 7.2 at step 1491")
        >>> (i,) = replaced_incidents(AbandonedHistory(1200, 1210, 1491, pd.DataFrame()), [spike], [])
        >>> i.resolved, i.message
        (True, 'loss spike to 7.2 at step 1491; the run then went back to step 1200: the history written after replaced it')
    """
    out = []
    for incident in found:
        if incident.severity.rank < Severity.WARNING.rank or incident.end_step < stretch.first \
                or incident.kind == IncidentKind.RESTART:
            continue
        if any(k.kind == incident.kind and k.step == incident.step and (
                incident.step < stretch.first or (k.end_step == incident.end_step
                                                  and k.details.get("peak") == incident.details.get("peak")))
               for k in kept):
            continue
        out.append(replace(incident, message=f"{incident.message}; the run then went back to step "
                                             f"{stretch.resumed_at}: the history written after replaced it",
                           details={**incident.details, "resolved": True, "replaced": True,
                                    "went_back_to": stretch.resumed_at}))
    return out
