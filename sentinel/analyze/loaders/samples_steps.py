"""A run logged against the samples seen, read in optimizer steps.

DeepSpeed's engine writes its own ``Train/Samples/train_loss``, ``lr`` and ``loss_scale`` at every
optimizer step, at the count of samples seen (``global_samples``, which grows by the global batch
each step). Read as steps, a spike over 6 optimizer steps of 512 samples spans 3,072 "steps": the
rules, whose windows are in optimizer steps (a spike recovers within 200), called it "not
recovered" and the run unhealthy. Where every step logged is a whole number of one batch size
(the most common step between rows), the steps are read divided by it.

Example:
    >>> import pandas as pd
    >>> run = RunData("r", "r", "deepspeed_csv", pd.DataFrame({"loss": [3.0, 2.5, 2.0]}, index=[512, 1024, 1536]))
    >>> as_optimizer_steps(run).steps.index.tolist(), run.warnings[-1].split(":")[0]
    ([1, 2, 3], 'steps are optimizer steps')
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from sentinel.analyze.loaders import LOGGED_NAN, RunData
from sentinel.analyze.spans import cadence


def samples_per_step(steps: np.ndarray) -> int | None:
    """The batch that every step in ``steps`` is a whole number of, taken as their most common
    difference (:func:`~sentinel.analyze.spans.cadence`); None where it is one sample or does not
    divide them all.

    Example:
        >>> samples_per_step(np.array([512, 1024, 1536, 3072])), samples_per_step(np.array([256, 512, 1280]))
        (512, 256)
        >>> samples_per_step(np.array([300, 512, 1024])) is None
        True
    """
    batch = cadence(pd.Index(np.unique(steps)))
    return batch if batch > 1 and bool((steps % batch == 0).all()) else None


def as_optimizer_steps(run: RunData) -> RunData:
    """``run`` with its steps (samples seen) divided by the samples per step, and a warning that
    says so; unchanged but for a warning where the samples per step vary (a batch-size ramp, a
    resume with another batch): its steps then count samples.
    """
    every = [run.steps.index.to_numpy()] + [a.steps.index.to_numpy() for a in run.abandoned]
    every += [np.asarray(a.resumed_at).reshape(1) for a in run.abandoned]
    batch = samples_per_step(np.concatenate(every).astype("int64")) if len(run.steps.index) else None
    if batch is None:
        run.warnings.append("steps are samples seen (DeepSpeed's Train/Samples events are logged at "
                            "global_samples), not optimizer steps: the samples per step vary")
        return run
    run.steps.index = pd.Index(run.steps.index.to_numpy() // batch, name=run.steps.index.name)
    nan = run.meta.get(LOGGED_NAN)
    if nan:
        run.meta[LOGGED_NAN] = {key: np.asarray(at, dtype="int64") // batch for key, at in nan.items()}
    abandoned = []
    for stretch in run.abandoned:
        frame = stretch.steps.copy()
        frame.index = pd.Index(frame.index.to_numpy() // batch, name=frame.index.name)
        logged = None if stretch.logged_nan is None else {
            key: [int(s) // batch for s in at] for key, at in stretch.logged_nan.items()}
        abandoned.append(replace(stretch, resumed_at=stretch.resumed_at // batch, first=stretch.first // batch,
                                 last=stretch.last // batch, steps=frame, logged_nan=logged))
    run.abandoned = abandoned
    run.warnings.append(f"steps are optimizer steps: the samples seen (DeepSpeed's Train/Samples events are logged "
                        f"at global_samples) divided by {batch}, the samples per step")
    return run
