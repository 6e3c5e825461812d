"""The guard's own actions from ``events.jsonl``: rollbacks (and whether they helped), skipped
batches, giving up, and spikes the guard saw online that the final record no longer shows."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from sentinel.analyze.config import AnalyzeConfig
from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.spans import first_step_at_or_below
from sentinel.detect.divergence import DivergenceConfig


def guard_incidents(events: pd.DataFrame, loss: pd.Series, config: AnalyzeConfig) -> list[Incident]:
    """Incidents for ``rollback``, ``skip`` and ``gave_up`` events.

    A rollback helped when the loss came back under its pre-spike level (median of the 20
    finite values before the spike, plus ``recover_frac`` of the spike's height) within
    ``recover_steps`` steps of the spike, with no further rollback before it did.
    Skipping alone does not always cure a divergence (BigScience, PaLM), and the message says
    so when it did not.

    Example:
        >>> [i.kind for i in guard_incidents(run.events, run.steps["loss"], AnalyzeConfig())]  # doctest: +SKIP
        ['rollback', 'skip']
    """
    if events is None or events.empty or "kind" not in events.columns:
        return []
    incidents: list[Incident] = []
    rollbacks = events[events["kind"] == "rollback"].sort_values("step", kind="stable")
    spike_values = _spike_values(events)
    starts = [int(_get(r, "spike_step", r["step"])) for _, r in rollbacks.iterrows()]
    for i, (_, event) in enumerate(rollbacks.iterrows()):
        incidents.append(_rollback(event, starts[i], starts[i + 1:], spike_values, loss, config))
    incidents.extend(_skips(events[events["kind"] == "skip"]))
    for _, event in events[events["kind"] == "skip_step"].iterrows():
        step = int(event["step"])
        loss_v, base = _get(event, "loss"), _get(event, "loss_baseline")
        numbers = f": loss {loss_v:.4g} against {base:.4g}" if isinstance(loss_v, float) and \
            isinstance(base, float) and np.isfinite(base) and base > 1e-9 else ""  # 1e-12: no baseline
        incidents.append(Incident(IncidentKind.SKIPPED_UPDATE, step, step, Severity.INFO,
                                  f"update of step {step} withheld ({_get(event, 'reason')}{numbers})",
                                  {"reason": _get(event, "reason"), "loss": loss_v,
                                   "streak": _get(event, "streak"), "resolved": True}))
    for _, event in events[events["kind"] == "gave_up"].iterrows():
        step = int(event["step"])
        text = _get(event, "message") or f"the guard gave up at step {step}"
        incidents.append(Incident(IncidentKind.GAVE_UP, step, step, Severity.CRITICAL, str(text),
                                  {"reason": _get(event, "reason"), "rollbacks": _get(event, "rollbacks"),
                                   "resolved": False}))
    return incidents


def online_spike_incidents(events: pd.DataFrame, covered: list[tuple[int, int]]) -> list[Incident]:
    """Loss spikes the guard recorded online at steps no offline spike covers (the rerun after a
    rollback overwrote them in the step record)."""
    if events is None or events.empty or "kind" not in events.columns:
        return []
    spikes = events[(events["kind"] == "spike") & (events.get("metric", pd.Series(index=events.index)) == "loss")]
    incidents = []
    for _, event in spikes.iterrows():
        step = int(event["step"])
        if any(a <= step <= b for a, b in covered):
            continue
        value, baseline, score = (_get(event, k) for k in ("value", "baseline", "score"))
        numbers = ", ".join(f"{k} {v:.4g}" for k, v in (("baseline", baseline), ("score", score))
                            if isinstance(v, (int, float)))
        message = (f"loss spike to {value:.4g} at step {step} detected online by the guard"
                   if isinstance(value, (int, float)) else f"loss spike at step {step} detected online by the guard")
        message += f" ({numbers})" if numbers else ""
        incidents.append(Incident(IncidentKind.LOSS_SPIKE, step, step, Severity.WARNING, message,
                                  {"peak": value, "baseline": baseline, "score": score, "online": True,
                                   "resolved": True}))
    return incidents


def accepted_levels(events: pd.DataFrame) -> list[tuple[int, int]]:
    """``(onset, step)`` of each loss level the guard accepted as no damage: a divergence whose
    re-run of a batch from before found the weights sound (harder data), and a ``new_level`` (the
    loss as high on restored weights: the data or the loss itself changed).

    Example:
        >>> accepted_levels(pd.DataFrame([{"step": 405, "kind": "new_level", "onset": 400}]))
        [(400, 405)]
    """
    if events is None or events.empty or "kind" not in events.columns:
        return []
    accepted = events["accepted"].fillna(False).astype(bool) if "accepted" in events.columns else False
    guards = events["announced"].isna() if "announced" in events.columns else True  # not a log's own word (rule_announced)
    rows = events[((events["kind"] == "new_level") & guards) | ((events["kind"] == "divergence") & accepted)]
    return [(int(_get(r, "onset", r["step"])), int(r["step"])) for _, r in rows.iterrows()]


def settle_accepted(incidents: list[Incident], levels: list[tuple[int, int]]) -> list[Incident]:
    """Incidents of the loss's move to a level the guard accepted (starting between its onset, less
    one level window, and the acceptance) are information, resolved: the guard checked that the weights were not
    damaged, which the loss curve alone cannot tell.

    Example:
        >>> settle_accepted([Incident("divergence", 400, 794, Severity.CRITICAL, "diverged")],
        ...                 [(400, 405)])[0].severity.value
        'info'
    """
    if not levels:
        return incidents
    # A divergence's onset is found inside the level's window: the move's first outliers (the
    # spike rule is quicker) may come up to one window before it.
    lead = DivergenceConfig().level_window
    out = []
    for incident in incidents:
        hit = next(((o, a) for o, a in levels if incident.kind in _SETTLED_KINDS and o - lead <= incident.step <= a),
                   None)
        if hit is None:
            out.append(incident)
            continue
        note = (f"; the guard found this a new level of the loss, not damage, and accepted it at step {hit[1]} "
                "(a new stage of the data, or the loss itself changed)")
        out.append(replace(incident, severity=Severity.INFO, message=incident.message + note,
                           details={**incident.details, "resolved": True, "accepted_level": hit[1]}))
    return out


_SETTLED_KINDS = frozenset({IncidentKind.LOSS_SPIKE, IncidentKind.DIVERGENCE, IncidentKind.ROLLBACK,
                            IncidentKind.GRAD_EXPLOSION, IncidentKind.GRAD_SPIKE})


def restart_incidents(restarts: list[int] | None) -> list[Incident]:
    """One info incident per step where a resumed process took over the run directory.

    Example:
        >>> [i.message for i in restart_incidents([0, 40])][1]
        'the run was resumed at step 40 (a new process, or fit() again): its history replaces the earlier one from there'
    """
    return [Incident(IncidentKind.RESTART, int(s), int(s), Severity.INFO,
                     (f"the run was resumed at step {int(s)} (a new process, or fit() again)" if s else
                      "another process started this run over in the same directory")
                     + ": its history replaces the earlier one from there", {"resolved": True})
            for s in sorted(set(restarts or []))]


def _rollback(event, spike_step: int, later: list[int], spike_values: dict[int, float],
              loss: pd.Series, config: AnalyzeConfig) -> Incident:
    step = int(event["step"])
    restored = _get(event, "restored_step")
    restored = int(restored) if isinstance(restored, float) and restored.is_integer() else restored
    reason = _get(event, "reason")
    what = f"the {str(reason).replace('_', ' ')} at step {spike_step}" if reason else f"the spike at step {spike_step}"
    skipped = _get(event, "skipped")
    n_skipped = len(skipped) if isinstance(skipped, (list, tuple)) else 0
    before = loss.loc[:spike_step - 1].tail(20)
    pre = float(before.median()) if len(before) else float("nan")
    peak = spike_values.get(spike_step, float("nan"))
    level = pre + config.recover_frac * (peak - pre) if np.isfinite(peak) and peak > pre else pre
    back = first_step_at_or_below(loss, spike_step - 1, level, config.recover_steps) if np.isfinite(pre) else None
    # Another rollback before the loss came back means this one did not cure it; one after the
    # recovery answers a new incident.
    until = back if back is not None else spike_step + config.recover_steps
    again = [s for s in later if s <= until]
    helped = back is not None and not again
    head = (f"rollback for {what}: restored step {restored}, skipped {n_skipped} batches"
            if restored is not None else f"rollback for {what}: no snapshot, nothing restored")
    if helped and float(loss.loc[back]) > pre:  # back near the level: say how near
        tail = (f"; helped: loss back to {float(loss.loc[back]):.4g} at step {back}, under {level:.4g} (the "
                f"pre-spike level {pre:.4g} plus {config.recover_frac:.0%} of the spike's height)")
    elif helped:
        tail = f"; helped: loss back under the pre-spike level {pre:.4g} at step {back}"
    elif again:
        tail = (f"; did not help: another rollback was needed at step {again[0]} "
                f"(skipping batches alone does not always cure a divergence, as BigScience and PaLM found: "
                "lower the learning rate or restart from further back)")
    else:
        tail = (f"; did not help: loss not back under the pre-spike level {pre:.4g} within "
                f"{config.recover_steps} steps (skipping batches alone does not always cure a divergence, "
                "as BigScience and PaLM found)")
    return Incident(IncidentKind.ROLLBACK, min(step, spike_step), max(step, spike_step),
                    Severity.WARNING if helped else Severity.CRITICAL, head + tail,
                    {"spike_step": spike_step, "restored_step": restored, "skipped_batches": n_skipped,
                     "reason": reason, "pre_spike_loss": pre if np.isfinite(pre) else None, "back_at_step": back,
                     "helped": helped, "resolved": helped})


def _skips(skips: pd.DataFrame) -> list[Incident]:
    """One info incident per stretch of consecutive skipped steps (one per rollback, usually)."""
    if skips.empty:
        return []
    counts = skips["step"].astype("int64").value_counts().sort_index()
    incidents = []
    group: list[int] = []
    for step in list(counts.index) + [None]:
        if group and (step is None or step - group[-1] > 1):
            n = int(counts.loc[group].sum())
            message = (f"{n} batches skipped at steps {group[0]}-{group[-1]}" if len(group) > 1
                       else f"{n} batches skipped at step {group[0]}")
            incidents.append(Incident(IncidentKind.SKIP, int(group[0]), int(group[-1]), Severity.INFO,
                                      message, {"batches": n, "resolved": True}))
            group = []
        if step is not None:
            group.append(int(step))
    return incidents


def _spike_values(events: pd.DataFrame) -> dict[int, float]:
    if "value" not in events.columns:
        return {}
    spikes = events[events["kind"] == "spike"]
    out = {}
    for _, event in spikes.iterrows():
        value = _get(event, "value")
        if isinstance(value, (int, float)) and _get(event, "metric") in (None, "loss"):
            out[int(event["step"])] = float(value)
    return out


def _get(row, key, default=None):
    value = row.get(key, default) if hasattr(row, "get") else default
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return default
    return value.item() if isinstance(value, np.generic) else value
