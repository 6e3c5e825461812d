"""A W&B history of the Hugging Face Trainer, read at the Trainer's own step.

The Trainer's W&B callback logs ``train/global_step`` in every row and makes it the charts' step
(``wandb.define_metric("*", step_metric="train/global_step")``); W&B's ``_step`` only counts the
``wandb.log`` calls. Read by ``_step``, a run logged every 500 steps was "steps 0..6", and a
notebook that trained five models into one W&B run (no ``wandb.finish()`` between) was one curve
whose second model's first loss was a critical spike. Here the rows are read at their global
step; where it goes back to the first one logged, a new training began (a run of its own); where
it goes back to a later one, the training was resumed from a checkpoint into the same W&B run (the
later rows win, as TensorBoard's do: :func:`~sentinel.analyze.loaders.went_back.survivors`).

Example:
    >>> frame = pd.DataFrame({"loss": [0.9, 0.5, 0.8, 0.4], GLOBAL_STEP: [500.0, 1000.0, 500.0, 1000.0]})
    >>> [part.index.tolist() for part, _ in trainings(frame)]
    [[500, 1000], [500, 1000]]
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN, RunData
from sentinel.analyze.loaders.textlog import trainings_note
from sentinel.analyze.loaders.went_back import fall_backs, survivors

GLOBAL_STEP = "train/global_step"


def at_trainer_steps(run: RunData) -> list[RunData]:
    """``run`` read at the Trainer's global step, one run per training (``<name>#k``, with a
    warning, where there are several); ``[run]`` as it is where it logs no global step.

    Example:
        >>> at_trainer_steps(RunData("r", "r", "wandb", pd.DataFrame({"loss": [1.0]})))[0].name
        'r'
    """
    parts = trainings(run.steps, run.meta.get(LOGGED_NAN))
    if parts is None:
        return [run]
    if len(parts) == 1:
        (steps, nan), = parts
        return [replace(run, steps=steps, meta={**run.meta, LOGGED_NAN: nan})]
    note = trainings_note(run.path, len(parts), "whose global step starts again from its first value (trainings "
                          "logged into one W&B run)", run.name)
    return [replace(run, name=f"{run.name}#{k}", steps=steps, meta={**run.meta, LOGGED_NAN: nan},
                    warnings=[note, *run.warnings]) for k, (steps, nan) in enumerate(parts, 1)]


def trainings(frame: pd.DataFrame, logged_nan: dict[str, list[int]] | None = None
              ) -> list[tuple[pd.DataFrame, dict[str, list[int]]]] | None:
    """``frame`` (rows in ``_step`` order) as one steps frame per training, each indexed by the
    Trainer's global step, its rows at one step merged (the last value of each column), with the
    global steps each key was logged as NaN at (from ``logged_nan``, by ``frame``'s index); None
    where ``frame`` has no whole-number global step column.

    Example:
        >>> trainings(pd.DataFrame({"loss": [1.0]})) is None
        True
    """
    if GLOBAL_STEP not in frame.columns:
        return None
    steps = frame[GLOBAL_STEP].to_numpy(dtype="float64")
    known = np.isfinite(steps)
    if not known.any() or not np.array_equal(steps[known], np.round(steps[known])):
        return None
    rows = frame[known].drop(columns=GLOBAL_STEP)
    steps = steps[known].astype("int64")
    # A new training: the step back at the first one logged, after it had gone past it.
    went_past = np.maximum.accumulate(steps)[:-1] > steps[0]
    cuts = (np.flatnonzero((steps[1:] <= steps[0]) & went_past & (steps[1:] < steps[:-1])) + 1).tolist()
    parts = []
    for lo, hi in zip([0, *cuts], [*cuts, len(steps)]):
        part = rows.iloc[lo:hi].copy()
        at = dict(zip(part.index.tolist(), steps[lo:hi].tolist()))  # each row's _step: its global step
        part.index = pd.Index(steps[lo:hi], name=metrics.STEP)
        nan = {key: sorted({at[s] for s in logged if s in at}) for key, logged in (logged_nan or {}).items()}
        parts.append((_later_wins(part), {key: found for key, found in nan.items() if found}))
    return parts


def _later_wins(part: pd.DataFrame) -> pd.DataFrame:
    """``part`` with one row per step, in step order: where a resume wrote a step again, its later
    rows replace the earlier; rows at one step (a training row and an evaluation row) merge."""
    steps = part.index.to_numpy()
    kept = part[survivors(steps, fall_backs(steps))]
    return kept.groupby(level=0, sort=True).last() if not kept.index.is_unique else kept.sort_index(kind="stable")
