"""A loss logged as exactly 0 to the end of a Hugging Face Trainer run: its NaN filter's mark.

The Trainer (``logging_nan_inf_filter``, on by default) leaves a step whose loss is NaN or Inf out
of its logging window's sum, adding the window's mean so far in its place. A window whose every
step went non-finite sums to nothing: the Trainer logs ``'loss': 0.0``, and goes on logging 0.0 for
as long as the loss stays non-finite, beside a ``'grad_norm': nan`` and NaN evaluation losses. Read
as written, that run was "a collapse to 0: the model sees its targets" and "a loss stuck at 0".
Where the loss drops to exactly 0 and stays there to the last logged step, and the run is the
Trainer's (its printed dicts, its ``trainer_state.json``, its notebook table: Unsloth's and every
notebook's ``Step  Training Loss``) or its grad norm or an evaluation loss is
non-finite in that stretch, it is the run's non-finite loss. A stretch of zeros with finite
losses after it, each beside a non-finite grad norm, is a window the filter hid and the run came
out of (an fp16 scaler skipped those steps): it is read as the NaN it was (:func:`filtered_windows`).
The filter's sum starts from +0.0: a ``-0.0`` among the zeros is a loss computed and rounded (GRPO's
loss is ~0 while the policy is the reference), and no zero of that stretch is the filter's.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.loaders import LOGGED_NAN, RunData
from sentinel.analyze.rule_nonfinite import TRAINING_FINITE_THEN, TRAINING_NONFINITE_THEN
from sentinel.analyze.spans import group_runs

# Sources that are the Trainer's own logs.
TRAINER_SOURCES = frozenset({"hf_trainer", "hf_trainer_state"})
# The column its notebook table (NotebookProgressCallback: "Step  Training Loss  Validation Loss")
# names the loss, as a table reader keeps it in the run's meta.
TRAINER_TABLE_LOSS = "Training Loss"
# Logged zeros, at least, at the tail.
MIN_ZEROS = 2


def filtered_windows(run: RunData) -> tuple[RunData, str | None]:
    """``run`` with its loss NaN (a logged NaN) where the Trainer logged 0.0 for a window of
    non-finite losses that a finite loss above 0 follows, and the warning that says so; ``run`` and
    None where there is none.

    A window whose every step's loss was NaN or Inf is logged as ``'loss': 0.0`` beside
    ``'grad_norm': nan``: read as written, a collapse to 0 and back, a "spike" out of a baseline of
    0 and a grad norm "non-finite while the loss stayed finite". Zeros at the end are
    :func:`nan_filtered_zeros`'s.

    Example:
        >>> steps = pd.DataFrame({"loss": [2.0, 0.0, 1.9], "grad_norm/total": [0.9, np.nan, 0.8]}, index=[1, 2, 3])
        >>> filtered_windows(RunData("r", "r", "hf_trainer", steps))[0].steps["loss"].tolist()
        [2.0, nan, 1.9]
    """
    steps, meta = run.steps, run.meta or {}
    if not _trainers(run.source, meta) or not {metrics.LOSS, metrics.GRAD_NORM_TOTAL} <= set(steps.columns):
        return run, None
    logged = steps[metrics.LOSS].notna().to_numpy()
    loss = steps[metrics.LOSS].to_numpy(dtype="float64")[logged]
    grad = steps[metrics.GRAD_NORM_TOTAL].to_numpy(dtype="float64")[logged]
    hidden = (loss == 0.0) & ~np.signbit(loss) & ~np.isfinite(grad)
    if not hidden.any():
        return run, None
    # Each stretch of hidden windows, kept where a finite loss above 0 comes after it.
    logged_steps = steps.index.to_numpy()[logged]
    positive = logged_steps[np.isfinite(loss) & (loss > 0)]
    kept = [(first, last) for first, last in group_runs(hidden, logged_steps) if positive.size and positive[-1] > last]
    if not kept:
        return run, None
    at = pd.Index(logged_steps[np.any([(logged_steps >= a) & (logged_steps <= b) for a, b in kept], axis=0)])
    steps = steps.copy()
    steps.loc[at, metrics.LOSS] = np.nan
    if meta.get(LOGGED_NAN) is not None:  # a source that tells a logged NaN: these are logged ones
        told = dict(meta[LOGGED_NAN])
        told[metrics.LOSS] = np.union1d(np.asarray(told.get(metrics.LOSS, ()), dtype="int64"), at.to_numpy())
        meta = {**meta, LOGGED_NAN: told}
    where = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in kept)
    return dataclasses.replace(run, steps=steps, meta=meta), (
        f"loss logged as exactly 0 beside a non-finite grad norm at step(s) {where}: the Hugging Face "
        "Trainer logs 0.0 for a logging window whose every step's loss was NaN or Inf "
        "(logging_nan_inf_filter, on by default): read as non-finite there")


def nan_filtered_zeros(loss: pd.Series, incidents: list[Incident], source: str, meta: dict | None = None
                       ) -> Incident | None:
    """The critical ``nonfinite`` incident of a loss logged as exactly 0 from some step to the
    last (:data:`MIN_ZEROS` rows or more, after a loss above 0) where the Trainer's NaN filter
    explains it: the run is the Trainer's, or ``incidents`` hold a non-finite grad norm or
    evaluation from that step on; from the first logged step on, where both hold. Else None. ``loss``: the finite loss, by step; ``meta``: the
    run's, whose table columns tell the Trainer's notebook table.

    Example:
        >>> loss = pd.Series([2.1, 1.9, 1.8, 0.0, 0.0, 0.0], index=[10, 20, 30, 40, 50, 60])
        >>> nan_filtered_zeros(loss, [], "hf_trainer").step
        40
    """
    values = loss.to_numpy(dtype="float64")
    zeros = int(np.argmin(values[::-1] == 0.0)) if not (values == 0.0).all() else len(values)
    from_the_start = zeros == len(values)
    if zeros < MIN_ZEROS or (not from_the_start and values[-zeros - 1] <= 0):
        return None
    if np.signbit(values[len(values) - zeros:]).any():
        return None  # "-0.0": a loss computed and rounded to 4 decimals (GRPO's), never the filter's 0.0
    first, last = int(loss.index[-zeros]), int(loss.index[-1])
    beside = any(i.kind == IncidentKind.NONFINITE.value and i.end_step >= first
                 and i.details.get("metric") != metrics.LOSS for i in incidents)
    trainers = _trainers(source, meta)
    # From the first logged step on, a 0 is also a loss over no labelled token: the Trainer's
    # zeros are told there by a non-finite grad norm or evaluation loss beside them (MedicalGPT's
    # SFT: 'loss': 0.0 at every step, 'eval_loss': nan at each evaluation).
    if not (trainers and beside) if from_the_start else not (trainers or beside):
        return None
    since = (f"at every logged step ({first}-{last}, {zeros} logged steps), beside non-finite values logged then"
             if from_the_start else
             f"from step {first} to the last logged step {last} ({zeros} logged steps) after {values[-zeros - 1]:.4g}")
    message = (f"loss logged as exactly 0 {since}: the Hugging Face Trainer logs 0.0 for a logging window whose "
               "every step's loss was NaN or Inf (logging_nan_inf_filter, on by default): the loss went "
               f"non-finite {'from the start' if from_the_start else 'by then'} and stayed so")
    return Incident(IncidentKind.NONFINITE, first, last, Severity.CRITICAL, message,
                    {"metric": metrics.LOSS, "nan_filter": True, "resolved": False})


def _trainers(source: str, meta: dict | None) -> bool:
    """Whether the run is the Trainer's: its source, or its notebook table's columns."""
    columns = (meta or {}).get("columns", ())
    return source in TRAINER_SOURCES or (isinstance(columns, (list, tuple)) and TRAINER_TABLE_LOSS in columns)


def told_as_nan_filtered(incidents: list[Incident], found: Incident) -> list[Incident]:
    """``incidents`` with ``found`` in place of the collapse to 0 and the loss stuck at 0 it
    explains, a spike that "recovered" onto its zeros not recovered (it went non-finite), and the
    evaluations' non-finite incidents in its stretch saying the training loss was non-finite then
    too.

    Example:
        >>> told_as_nan_filtered([], found)  # doctest: +SKIP
    """
    kept = [found]
    for incident in incidents:
        if incident.kind in (IncidentKind.LOSS_COLLAPSE.value, IncidentKind.LOSS_STUCK.value) \
                and incident.end_step >= found.step:
            continue
        recovered = incident.details.get("recovered_step") if incident.kind == IncidentKind.LOSS_SPIKE.value else None
        if recovered is not None and recovered >= found.step:  # "back down" onto the filter's zeros
            message = incident.message.split("; recovered in ")[0] + f"; then non-finite from step {found.step}"
            incident = dataclasses.replace(incident, severity=Severity.CRITICAL, message=message, details={
                **incident.details, "recovered_step": None, "recovered": False, "steps_to_recover": None,
                "resolved": False})
        if incident.kind == IncidentKind.NONFINITE.value and incident.message.endswith(TRAINING_FINITE_THEN) \
                and incident.step >= found.step:
            message = incident.message[: -len(TRAINING_FINITE_THEN)] + TRAINING_NONFINITE_THEN
            incident = dataclasses.replace(incident, message=message)
        kept.append(incident)
    return kept
