"""Trainings appended to one text log whose step key starts again from its first interval, each read
as a run of its own.

FastSpeech2 appends each launch to its ``log.txt``: ``Step 100/600000, Total Loss: 29.7486, ...``
from 100 again each time. The text reader counts such a step on across its restarts, each stretch
``RESTARTED_LENGTH`` steps after the one before (as it does a count inside an epoch), and marks the
run where the count started again from short of its largest value, or every restart's loss went back
to the log's first level (``textscan.restarts_are_trainings``): trainings, not epochs (an expert-iteration
loop's SFT phases, each from "Step 7", too). So are trainings whose printed epoch and iteration
start again (YOLOX appends each launch to its ``train_log.txt``: ``epoch: 1/20, iter: 10/112``,
then ``epoch: 1/20, iter: 10/14``), each counted on from 0 by the longest. Read as one run, each
launch's first loss was "a spike, not recovered", and every step of the last training was off by the
stretches before it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from sentinel.analyze.loaders import (CRASHES_BEFORE_RESTARTS, LOGGED_NAN, RESTARTED_FROM, RESTARTED_LENGTH,
                                      AbandonedHistory, RunData)
from sentinel.analyze.loaders.textlog import run_name, trainings_note


def split_restarted(run: RunData, path: str | Path) -> list[RunData] | None:
    """The trainings of ``run``, each with its own steps (as printed), named ``<log>#1``, ``#2``, ...
    with a warning; None where the reader did not mark its restarts as trainings.

    Example:
        >>> import pandas as pd
        >>> steps = pd.DataFrame({"loss": [29.7, 9.0, 2.7, 12.8, 6.0]}, index=[100, 200, 300, 400, 500])
        >>> runs = split_restarted(RunData("log", "log.txt", "text", steps, meta={RESTARTED_LENGTH: 300}), "log.txt")
        >>> [(r.name, r.steps.index.tolist()) for r in runs]
        [('log#1', [100, 200, 300]), ('log#2', [100, 200])]
    """
    length = run.meta.get(RESTARTED_LENGTH)
    if not length or not len(run.steps.index):
        return None
    steps = run.steps.index.to_numpy()
    first = int(run.meta.get(RESTARTED_FROM, steps.min()))
    trainings = np.unique((steps - first) // length)  # the training of each step, from 0
    if len(trainings) < 2:
        return None
    name = run_name(path)
    note = trainings_note(path, len(trainings), "whose step starts again from its first value (launches appended "
                          "to one file, a loop's phases)")
    runs = []
    crashes = list(run.meta.get(CRASHES_BEFORE_RESTARTS, ()))  # each a training's before the last, in order
    for number, k in enumerate(trainings.tolist(), 1):
        offset = int(k) * length
        lo, hi = first + offset, first + offset + length
        part = run.steps[(steps >= lo) & (steps < hi)].copy()
        part.index = part.index - offset
        meta = {key: value for key, value in run.meta.items()
                if key not in (RESTARTED_LENGTH, RESTARTED_FROM, "crash", LOGGED_NAN, "iters_per_epoch",
                               "epochs_from_counter", CRASHES_BEFORE_RESTARTS)}
        if LOGGED_NAN in run.meta:
            meta[LOGGED_NAN] = {key: [s - offset for s in at if lo <= s < hi] for key, at in run.meta[LOGGED_NAN].items()}
        if "crash" in run.meta and number == len(trainings):
            meta["crash"] = {**run.meta["crash"], "after_step": int(run.meta["crash"]["after_step"]) - offset}
        elif crashes and len(part.index) and crashes[0]["after_step"] == int(part.index[-1]):
            meta["crash"] = crashes.pop(0)  # the traceback after its last step line, before the next launch
        events = run.events
        if len(events.index) and "step" in events.columns:
            events = events[(events["step"] >= lo) & (events["step"] < hi)].copy()
            events["step"] = events["step"] - offset
        abandoned = [_shifted(replaced, lo, hi, offset) for replaced in run.abandoned if lo <= replaced.resumed_at < hi]
        runs.append(replace(run, name=f"{name}#{number}", steps=part, events=events, meta=meta,
                            warnings=[note, *run.warnings], abandoned=abandoned))
    return runs


def _shifted(stretch: AbandonedHistory, lo: int, hi: int, offset: int) -> AbandonedHistory:
    """A replaced stretch of history inside the training of steps ``lo`` to ``hi`` (counted on), at
    its training's own steps."""
    steps = stretch.steps[(stretch.steps.index >= lo) & (stretch.steps.index < hi)].copy()
    steps.index = steps.index - offset
    nan = None if stretch.logged_nan is None else {
        key: [s - offset for s in at if lo <= s < hi] for key, at in stretch.logged_nan.items()}
    return AbandonedHistory(stretch.resumed_at - offset, stretch.first - offset, stretch.last - offset, steps, nan)
