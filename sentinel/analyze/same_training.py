"""One training read twice in one walk is one run.

A Hugging Face Trainer's output folder holds its ``trainer_state.json`` and its TensorBoard
events; a Lightning run may log to TensorBoard and to CSV; a log may sit beside a table made from
it. Read apart, each gave a run of its own: the same curve, the same incidents, reported twice.
Runs read from two formats whose loss is the same at every step are one training read twice; the
one read with the most series is kept, and a warning names the other. Two runs of one format with
the same loss are two runs (a seeded run repeated, a test's runs).

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

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import RunData

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
            same = [k for k in members if k == first or (runs[k].source != runs[first].source
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
                        "one training read twice (two loggers, or a log and a table made from it), reported once")
    return [run for k, run in enumerate(runs) if k not in dropped]


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


def _same_loss(a: RunData, b: RunData) -> bool:
    first, second = _loss(a), _loss(b)
    return bool((first.index == second.index).all()) and bool(
        np.allclose(first.to_numpy(), second.to_numpy(), rtol=_RTOL, atol=0.0))
