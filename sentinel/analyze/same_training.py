"""One training read twice in one walk is one run.

A Hugging Face Trainer's output folder holds its ``trainer_state.json`` and its TensorBoard
events; a Lightning run may log to TensorBoard and to CSV; a log may sit beside a table made from
it. Read apart, each gave a run of its own: the same curve, the same incidents, reported twice.
Runs read from two formats whose loss is the same at every step are one training read twice; the
one read with the most series is kept, and a warning names the other. So are two files of one format
in one folder (MMEngine's ``vis_data/<time>.json`` and ``vis_data/scalars.json``); two runs of one
format in two folders with the same loss are two runs (a seeded run repeated, a test's runs).

A training resumed from a checkpoint is read in pieces the same way: the Trainer's last
``trainer_state.json`` holds the whole history, and each launch wrote its TensorBoard events to a
folder of its own. A run of another format whose loss is the longer run's from its first step
(at least :data:`MIN_SHARED` values and half of its own) is one launch of it where a launch after
it shows the training was resumed; where its last values differ, those are the stretch the next
launch replaced (from a checkpoint before them), judged as such
(:class:`~sentinel.analyze.loaders.AbandonedHistory`).

Example:
    >>> import pandas as pd
    >>> from sentinel.analyze.loaders import RunData
    >>> steps = pd.DataFrame({"loss": [3.0, 2.9, 2.7, 2.6, 2.5]}, index=range(10, 60, 10))
    >>> runs = [RunData("out", "out/trainer_state.json", "hf_trainer_state", steps),
    ...         RunData("Dec05", "out/runs/Dec05", "tensorboard", steps.assign(lr=1e-4))]
    >>> [run.source for run in one_per_training(runs)]
    ['tensorboard']
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN, AbandonedHistory, RunData
from sentinel.analyze.loaders.went_back import CONTEXT, logged_nan_within
from sentinel.analyze.noise import printed_unit

# Loss values two runs must share, at least, to be taken for one training: a few equal values
# may be chance (a loss stuck at ln(vocab) at the same first steps).
MIN_SHARED = 5
# float32 (TensorBoard) against float64 (JSON), four significant digits where a logger rounds.
_RTOL = 1e-4


def one_per_training(runs: list[RunData]) -> list[RunData]:
    """``runs`` with each training once: of runs of different formats whose loss is the same at
    every step (one training read twice: two loggers, or a log and a table made from it), the one
    with the most series, its warnings naming the others. The order is kept.

    Example:
        >>> one_per_training([])
        []
    """
    groups: dict[tuple, list[int]] = {}
    for k, run in enumerate(runs):
        key = _signature(run)
        if key is not None:
            groups.setdefault(key, []).append(k)
    dropped: set[int] = set()
    for members in groups.values():
        while len(members) > 1:
            first = members[0]
            same = [k for k in members if k == first or (_may_be_copies(runs[first], runs[k])
                                                         and _same_loss(runs[first], runs[k]))]
            members = [k for k in members if k not in same]
            if len(same) < 2:
                continue
            kept = max(same, key=lambda k: (runs[k].steps.notna().any().sum(), -k))
            for k in same:
                if k != kept:
                    dropped.add(k)
                    runs[kept].warnings.append(
                        f"also logged as {runs[k].path} ({runs[k].source}): the same loss at every step, "
                        "one training read twice (two loggers, two files of one logger, or a log and a table made "
                        "from it), reported once")
    _same_losses_other_steps(runs, dropped)
    _fold_launches(runs, dropped)
    return [run for k, run in enumerate(runs) if k not in dropped]


def _same_losses_other_steps(runs: list[RunData], dropped: set[int]) -> None:
    """Drop (adding to ``dropped``) a run of one folder whose losses are another format's there, value
    for value in order, at other steps: one training read twice, its epoch length known to one reader
    only. MMDetection 2.x writes each run's ``<time>.log`` (``Epoch [1][50/791]``) and ``<time>.log.json``
    (``"epoch": 1, "iter": 50``, no length): the table's steps, counted by the last iteration logged
    (750), fell short of the log's. A length taken from the last iteration logged is at most the true
    one: the reading whose steps go further is kept, its warnings naming the other."""
    if len(runs) - len(dropped) < 2:
        return
    groups: dict[tuple, list[int]] = {}
    for k, run in enumerate(runs):
        loss = _loss(run)
        if k not in dropped and loss is not None and len(loss) >= MIN_SHARED:
            groups.setdefault((_folder(run.path), len(loss), int(loss.index[0])), []).append(k)
    for members in groups.values():
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                if a in dropped or b in dropped or runs[a].source == runs[b].source:
                    continue
                first, second = _loss(runs[a]), _loss(runs[b])
                x, y = first.to_numpy(dtype="float64"), second.to_numpy(dtype="float64")
                # (the log prints 4 decimals, its JSON 5: each within half the coarser one's last digit)
                if int(first.index[-1]) == int(second.index[-1]) or not np.allclose(
                        x, y, rtol=_RTOL, atol=0.5 * max(printed_unit(x), printed_unit(y)) * (1 + 1e-9)):
                    continue
                kept, other = (a, b) if first.index[-1] > second.index[-1] else (b, a)
                dropped.add(other)
                runs[kept].warnings.append(
                    f"also logged as {runs[other].path} ({runs[other].source}): the same losses in the same order "
                    f"at other steps (its last {int(_loss(runs[other]).index[-1])}), one training read twice: this "
                    "reading's steps go further (an epoch length counted from the last iteration logged falls "
                    "short), reported once")


def _fold_launches(runs: list[RunData], dropped: set[int]) -> None:
    """Fold the runs that are launches of a longer run of another format into it (adding their
    indices to ``dropped``): see the module's docstring. A launch is told by the one after it: a
    piece that agrees with the whole from a later first step (it resumed from a checkpoint) is
    one; a piece from the whole's first step, or one whose last values differ, is one only where
    such a later piece of its format starts after it (and, for the values that differ, at or
    before the first of them). A log cut short beside its events is no launch."""
    losses = {k: _loss(run) for k, run in enumerate(runs) if k not in dropped}
    losses = {k: loss for k, loss in losses.items() if loss is not None and len(loss) >= MIN_SHARED}
    pieces: dict[int, list[tuple[int, int]]] = {}  # each whole's pieces: (run, values that agree)
    for k, piece in sorted(losses.items(), key=lambda item: (int(item[1].index[0]), len(item[1]))):
        for j, whole in losses.items():
            if j == k or runs[j].source == runs[k].source or len(whole) <= len(piece) \
                    or not whole.index[0] <= piece.index[0] <= whole.index[-1]:
                continue
            first = whole.get(piece.index[0])  # a look-up first: a walk may hold hundreds of runs
            if first is None or not np.isclose(first, piece.iloc[0], rtol=_RTOL, atol=0.0, equal_nan=True):
                continue
            at = whole.reindex(piece.index).to_numpy()
            same = np.isclose(piece.to_numpy(), at, rtol=_RTOL, atol=0.0, equal_nan=True)
            agree = len(same) if same.all() else int(np.argmin(same))
            if agree >= MIN_SHARED and 2 * agree >= len(piece):
                pieces.setdefault(j, []).append((k, agree))
                break
    for j, found in pieces.items():
        later = [k for k, agree in found if agree == len(losses[k]) and losses[k].index[0] > losses[j].index[0]]
        for k, agree in found:
            piece = losses[k]
            after = [int(losses[m].index[0]) for m in later if runs[m].source == runs[k].source
                     and losses[m].index[0] > piece.index[0]]
            if k in later or (after and (agree == len(piece) or min(after) <= piece.index[agree])):
                dropped.add(k)
                _fold(runs[j], runs[k], piece, agree)


def _fold(whole: RunData, launch: RunData, loss: pd.Series, agree: int) -> None:
    """Note in ``whole`` that ``launch`` is one launch of it; its values past the first ``agree``
    (which differ) become a stretch of ``whole``'s history that the next launch replaced."""
    steps = f"{int(loss.index[0])}-{int(loss.index[-1])}"
    note = (f"also logged as {launch.path} ({launch.source}): its steps {steps} are one launch of this training "
            "(resumed from a checkpoint), reported once")
    if agree < len(loss):
        resumed_at, last = int(loss.index[agree]), int(loss.index[-1])
        frame = launch.steps.loc[:last]
        context = frame.index.searchsorted(resumed_at)
        frame = frame.iloc[max(0, context - CONTEXT):]
        logged_nan = logged_nan_within(launch.meta.get(LOGGED_NAN), int(frame.index[0]), last)
        whole.abandoned.append(AbandonedHistory(resumed_at, resumed_at, last, frame, logged_nan))
        note += (f"; its steps {resumed_at}-{last} differ from this run's: the stretch the next launch replaced, "
                 "judged as such")
    whole.warnings.append(note)


def _loss(run: RunData) -> pd.Series | None:
    """The run's logged loss values, by step (None without a loss)."""
    if metrics.LOSS not in run.steps.columns:
        return None
    return run.steps[metrics.LOSS].dropna()


def _signature(run: RunData) -> tuple | None:
    """What two runs of one training share: the steps of the loss, its count."""
    loss = _loss(run)
    if loss is None or len(loss) < MIN_SHARED:
        return None
    return len(loss), int(loss.index[0]), int(loss.index[-1])


def _may_be_copies(a: RunData, b: RunData) -> bool:
    """Whether the same loss in ``a`` and ``b`` makes them one training read twice: they are of two
    formats, or two files of one folder (MMEngine writes each launch's scalars to ``vis_data/<time>.json``
    and again to ``vis_data/scalars.json``). Two runs of one format in two folders with the same loss are
    two runs (a seeded run repeated).

    Example:
        >>> steps = pd.DataFrame({"loss": [1.0]})
        >>> _may_be_copies(RunData("a", "v/a.json", "t", steps), RunData("b", "v/b.json", "t", steps))
        True
    """
    if a.source != b.source:
        return True
    return str(a.path) != str(b.path) and _folder(a.path) == _folder(b.path)


def _folder(path) -> Path:
    """The folder a run's files are in: its path where that is a folder (a TensorBoard run's)."""
    path = Path(path)
    return path if path.is_dir() else path.parent


def _same_loss(a: RunData, b: RunData) -> bool:
    first, second = _loss(a), _loss(b)
    return bool((first.index == second.index).all()) and bool(
        np.allclose(first.to_numpy(), second.to_numpy(), rtol=_RTOL, atol=0.0))
