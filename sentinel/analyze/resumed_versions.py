"""A Lightning fit, a W&B run or a Hugging Face Trainer resumed from a checkpoint is one run.

``Trainer.fit(model, ckpt_path=...)`` with a new Trainer logs into the next ``version_N`` folder of
its logger (``lightning_logs/version_1``), from the checkpoint's step on; ``wandb.init(id=...,
resume=...)`` writes a new ``run-<time>-<id>`` folder for the same run; the Hugging Face Trainer's
TensorBoard writes each launch into ``runs/<Dec05_12-30-00>_<host>``,
``train(resume_from_checkpoint=...)`` too (without the ``trainer_state.json`` of its checkpoints
beside them, only the steps tell). Read apart, the first launch was "unhealthy" (the blow-up that
made its author resume) and the second a run of its own. A version whose first logged step lies
after the previous version's first and at most two logging intervals after its last, and which
shows it did not start afresh (its first epoch is 1 or more; without an epoch, its first loss is
nearer the previous version's loss at that step than to that version's first loss), is joined to
it: the previous version's rows from the resumed step on are the stretch the resume replaced
(:class:`~sentinel.analyze.loaders.AbandonedHistory`), judged as such, and a warning names both
folders. (A W&B run resumed with the same id is its author's own word that it is one run; its steps
must still go on from the earlier launch's: an offline resume that counts from 0 again is left
apart.)

Example:
    >>> import pandas as pd
    >>> from sentinel.analyze.loaders import RunData
    >>> first = pd.DataFrame({"loss": [3.0, 2.5, 2.2, 9.0], "epoch": [0, 0, 1, 1]}, index=[0, 10, 20, 30])
    >>> later = pd.DataFrame({"loss": [2.2, 2.1], "epoch": [1, 1]}, index=[20, 30])
    >>> runs = join_resumed_versions([RunData("version_0", "logs/version_0", "tensorboard", first),
    ...                               RunData("version_1", "logs/version_1", "tensorboard", later)])
    >>> [r.name for r in runs], runs[0].steps["loss"].tolist(), runs[0].abandoned[0].first
    (['version_0'], [3.0, 2.5, 2.2, 2.1], 20)
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN, AbandonedHistory, RunData
from sentinel.analyze.loaders.went_back import CONTEXT, logged_nan_within
from sentinel.analyze.spans import cadence

_VERSION = re.compile(r"version_(\d+)")
# A W&B run's folder: "run-<date>_<time>-<id>" ("offline-run-..." offline), the same id again with
# "-1", "-2" where a run was resumed (wandb.init(id=..., resume=...)) in the same second.
_WANDB_RUN = re.compile(r"(?:offline-)?run-(\d{8}_\d{6})-([A-Za-z0-9]+?)(?:-(\d+))?")
# The Hugging Face Trainer's TensorBoard folder: "runs/<%b%d_%H-%M-%S>_<host>" (its logging_dir),
# a new one for each launch, a resumed one too (on whichever host the job landed).
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_HF_RUN = re.compile(rf"({'|'.join(_MONTHS)})(\d{{2}})_(\d{{2}})-(\d{{2}})-(\d{{2}})_.+")


def join_resumed_versions(runs: list[RunData]) -> list[RunData]:
    """``runs`` with each ``version_N`` run that resumed the version before it (see the module)
    joined to it; the order is kept.

    Example:
        >>> join_resumed_versions([])
        []
    """
    versions: dict[tuple, list[tuple[tuple, int]]] = {}  # (folder, source) -> (order, run)
    for k, run in enumerate(runs):
        found = _version(run)
        if found is not None:
            versions.setdefault((found[0], run.source), []).append((found[1], k))
    dropped: set[int] = set()
    for members in versions.values():
        members.sort()
        into = None  # the run the versions so far were joined into
        for _, k in members:
            if into is not None and _resumes(runs[into], runs[k]):
                runs[into] = _joined(runs[into], runs[k])
                dropped.add(k)
            else:
                into = k
    return [run for k, run in enumerate(runs) if k not in dropped]


def _version(run: RunData) -> tuple[tuple, tuple] | None:
    """What the run's launches share (the folder that holds its ``version_N`` folder; for a W&B
    run, that folder and the run's id) and the launch's place among them (N; the W&B folder's
    start time and number); None for a run of no such folder. A CSVLogger's run is its
    ``metrics.csv``, a TensorBoard run its folder, a W&B run a file of its folder."""
    path = Path(run.path)
    for folder in (path, path.parent, path.parent.parent):
        found = _VERSION.fullmatch(folder.name)
        if found is not None:
            return (str(folder.parent),), (int(found.group(1)),)
        found = _WANDB_RUN.fullmatch(folder.name)
        if found is not None:
            return (str(folder.parent), found.group(2)), (found.group(1), int(found.group(3) or 0))
        found = _HF_RUN.fullmatch(folder.name)
        if found is not None and folder.parent.name == "runs":
            month, *rest = found.groups()
            return (str(folder.parent),), (_MONTHS.index(month), *map(int, rest))
    return None


def _resumes(before: RunData, after: RunData) -> bool:
    """Whether ``after`` is ``before`` resumed from a checkpoint (see the module)."""
    first, later = _loss(before), _loss(after)
    if len(first) < 2 or not len(later):
        return False
    start = int(later.index[0])
    if not int(first.index[0]) < start <= int(first.index[-1]) + 2 * cadence(first.index):
        return False
    epoch = after.steps.get("epoch")
    if epoch is not None and epoch.notna().any():
        return bool(epoch.dropna().iloc[0] >= 1)  # a fit that starts afresh starts at epoch 0
    at = first[first.index <= start].iloc[-1]
    values = np.array([later.iloc[0], at, first.iloc[0]])
    if not (values > 0).all():
        return False
    here, there, origin = np.log(values)
    return abs(here - there) < abs(here - origin)


def _loss(run: RunData) -> pd.Series:
    if metrics.LOSS not in run.steps.columns:
        return pd.Series(dtype="float64")
    return run.steps[metrics.LOSS].dropna()


def _joined(before: RunData, after: RunData) -> RunData:
    """``before`` with ``after`` written after it: its rows from ``after``'s first step on are the
    stretch ``after`` replaced."""
    start = int(_loss(after).index[0])
    kept, replaced = before.steps[before.steps.index < start], before.steps[before.steps.index >= start]
    steps = pd.concat([kept, after.steps]) if len(kept) else after.steps.copy()
    abandoned = list(before.abandoned)
    note = (f"{after.path} is this training resumed from a checkpoint at step {start} (its first logged step): "
            f"read as one run with {before.path}")
    if len(replaced):
        last = int(replaced.index[-1])
        context = before.steps.iloc[max(0, len(kept) - CONTEXT):]
        abandoned.append(AbandonedHistory(start, int(replaced.index[0]), last, context,
                                          logged_nan_within(before.meta.get(LOGGED_NAN), int(context.index[0]), last)))
        note += f"; its steps {int(replaced.index[0])}-{last} here are the stretch the resume replaced, judged as such"
    abandoned += after.abandoned
    meta = dict(before.meta)
    if LOGGED_NAN in before.meta or LOGGED_NAN in after.meta:
        merged: dict[str, list[int]] = {}
        for source, keep in ((before.meta.get(LOGGED_NAN) or {}, lambda s: s < start),
                             (after.meta.get(LOGGED_NAN) or {}, lambda s: True)):
            for key, at in source.items():
                merged.setdefault(key, []).extend(int(s) for s in at if keep(s))
        meta[LOGGED_NAN] = merged
    earlier = before.events[before.events["step"] < start] if "step" in before.events else before.events
    parts = [events for events in (earlier, after.events) if len(events)]
    events = pd.concat(parts, ignore_index=True) if len(parts) > 1 else (parts[0] if parts else before.events)
    return RunData(name=before.name, path=before.path, source=before.source, steps=steps, events=events,
                   meta=meta, warnings=[*before.warnings, *after.warnings, note], abandoned=abandoned)
