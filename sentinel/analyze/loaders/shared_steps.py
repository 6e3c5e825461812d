"""Records that share their steps, numbered in the order they were written.

A tracker told no step writes every record at one: ``SummaryWriter.add_scalar(tag, value)`` at step
0, ``mlflow.log_metric(key, value)`` at step 0 too. A loop that logs each batch's loss at its epoch
writes many records a step. Read one value a step, 300 losses were one ("healthy"). Here a key's
records, in write order, are numbered 1, 2, 3, ... where they all share one step, or hold ten or
more a step on average in order; a few a step are micro-batches of one optimizer step (the last is
read, the steps kept), and steps that go back are a resume (see
:mod:`~sentinel.analyze.loaders.went_back`).
"""

from __future__ import annotations

import numpy as np

# Records of a key, at least, for shared steps to be numbered (a key written twice is no series),
# and records a step on average.
_SHARED_STEPS_RECORDS = 5
_SHARED_STEP_RECORDS = 10


def number_shared_steps(written: dict[str, tuple[np.ndarray, np.ndarray]], loss_key: str | None,
                        warnings: list[str], names: dict[str, str] | None = None) -> None:
    """Number in write order (1, 2, 3, ...) the records of each key of ``written`` (key ->
    ``(steps, values)``, in write order; replaced in place) that share their steps, with a warning
    naming each (by ``names``, where given). Where ``loss_key`` is numbered, a key logged once a
    step (a validation loss at each epoch the batches were logged at) goes to the loss's last
    record of that step.

    Example:
        >>> written = {"loss": (np.zeros(5, dtype=np.int64), np.array([3.0, 2.0, 9.0, 1.5, 1.4]))}
        >>> number_shared_steps(written, "loss", w := []); written["loss"][0].tolist()
        [1, 2, 3, 4, 5]
    """
    numbered, shared = [], {}
    distinct: dict[int, int | None] = {}  # by the steps array's id: keys of one file share it
    for key, (steps, values) in written.items():
        if len(steps) < _SHARED_STEPS_RECORDS:
            continue
        if id(steps) not in distinct:
            rises = steps[1:] > steps[:-1]
            in_order = not rises.all() and bool((steps[1:] >= steps[:-1]).all())  # not a step each, nor going back
            distinct[id(steps)] = int(rises.sum()) + 1 if in_order else None
        count = distinct[id(steps)]
        if count is None or (count > 1 and count * _SHARED_STEP_RECORDS > len(steps)):
            continue  # a step each, steps that go back, a step written twice, a few micro-batches a step
        shared[key] = steps
        written[key] = np.arange(1, len(steps) + 1, dtype=np.int64), values
        numbered.append(f"{(names or {}).get(key, key)} ({len(steps)} records at {count} step(s))")
    if not numbered:
        return
    warnings.append(f"records that share their steps (written without a step, or several a step): "
                    f"{', '.join(numbered)}: numbered 1, 2, 3, ... in write order")
    if loss_key not in shared:
        return
    original = shared[loss_key]
    last = np.flatnonzero(np.r_[original[1:] != original[:-1], True])  # each step's last record
    for key, (steps, values) in written.items():
        if key in shared or not len(steps):
            continue
        at = np.searchsorted(original[last], steps)
        if bool((at < len(last)).all()) and bool((original[last][np.minimum(at, len(last) - 1)] == steps).all()):
            written[key] = last[at] + 1, values
