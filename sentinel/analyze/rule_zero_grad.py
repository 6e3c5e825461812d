"""A run whose gradient is exactly zero: nothing reaches the weights.

A total grad norm of exactly ``0.0`` at many logged steps in a row, while the loss does not come
down, is a run that is not training: a loss detached from the model (``loss.item()`` wrapped back
into a tensor, a ``torch.no_grad()`` forward), parameters frozen or never given to the optimizer,
or gradients zeroed before they are measured and applied. A norm logged as ``0`` while the loss
falls is a logging placeholder (some trainers log 0 where they did not compute it): not reported.

A warning where the stretch starts by step :data:`START_STEPS` and the loss never came down over
it: a run that never trained. Elsewhere the same
stretch is info: late in a run a flat loss is normal, and a norm printed as ``0.000`` throughout
may be one the trainer does not compute (Megatron-DeepSpeed where DeepSpeed clips).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sentinel.analyze.incident import Incident, IncidentKind
from sentinel.analyze.noise import end_levels
from sentinel.analyze.zero_stretches import zero_stretches

# Logged grad norms of exactly 0 in a row that make a stretch.
MIN_ROWS = 5
# The loss across the stretch must not fall by more than this share for it to count.
MAX_LOSS_FALL = 0.05
# ... nor rise so far: the median of its second half at this many times its first half's. A loss the
# weights do not move wanders about its level; one that climbs off it (GaLore under the Trainer, its
# grad_norm 0.0 a placeholder, the loss 1.27 -> 1053) is moved by updates the norm does not show.
PLACEHOLDER_RISE = 2.0
# A loss below this share of the first logged one is a fit, whose gradient is 0 by right.
CONVERGED = 1e-3
# A stretch that starts at or before this step is from the run's start.
START_STEPS = 1000


def flat_rewards(steps: pd.DataFrame) -> pd.Series | None:
    """The steps at which a GRPO run's completions all scored alike (its ``reward_std`` logged as 0,
    or its share of groups without spread, TRL's ``frac_reward_zero_std``, as 1): no advantage, no
    gradient, by design. None where the run logs neither.

    Example:
        >>> flat_rewards(pd.DataFrame({"reward_std": [0.3, 0.0]}, index=[1, 2])).tolist()
        [False, True]
    """
    found = None
    for col in steps.columns:
        name = str(col).lower()
        if name.endswith("reward_std"):
            flat = steps[col] == 0
        elif name.endswith(("frac_reward_zero_std", "zero_std_ratio")):
            flat = steps[col] == 1
        else:
            continue
        flat = flat.where(steps[col].notna())  # a step that logged no reward says nothing
        found = flat if found is None else found.fillna(flat)
    return None if found is None else found.dropna().astype(bool)


def zero_grad_incidents(grad: pd.Series, loss: pd.Series, min_rows: int = MIN_ROWS,
                        flat: pd.Series | None = None) -> list[Incident]:
    """One warning for the longest stretch of ``min_rows`` or more logged grad norms in a row that
    are exactly 0, where the loss over it fell by less than :data:`MAX_LOSS_FALL`.

    Args:
        grad: the finite total grad norms, indexed by step.
        loss: the finite losses, indexed by step (empty: the stretch counts on the norms alone).
        min_rows: the shortest stretch reported.
        flat: :func:`flat_rewards`, where the run logs them: a stretch in which every reward logged
            had no spread (a GRPO group that all scored 0) has no gradient by design.

    Example:
        >>> grad = pd.Series([0.0] * 11, index=range(10, 120, 10))
        >>> loss = pd.Series([10.40 - 0.01 * i for i in range(11)], index=range(10, 120, 10))
        >>> zero_grad_incidents(grad, loss)[0].message.split(";")[0]
        'grad norm exactly 0 at 11 logged steps in a row (10-110), to the end of the log'
    """
    for stretch in zero_stretches(grad, loss, min_rows):
        fall, during = stretch.fall, stretch.during
        if flat is not None:
            said = flat[(flat.index >= stretch.first_step) & (flat.index <= stretch.last_step)]
            if len(said) and bool(said.all()):
                continue  # every completion scored alike: no advantage to follow
        if fall is not None and fall > MAX_LOSS_FALL or _climbed(during):
            continue  # the loss came down, or climbed: the weights did change, the 0 is a placeholder
        if len(during) and len(loss) and loss.iloc[0] > 0 and np.abs(during).max() <= CONVERGED * loss.iloc[0]:
            continue  # a model that fits its data exactly: no loss left, no gradient
        from_start = stretch.first_step <= START_STEPS
        moved = "" if fall is None else f"; the loss moved {-fall:+.1%} over it"
        cause = ("no gradient reaches the weights (a loss detached from the model, parameters frozen or not "
                 "given to the optimizer, gradients zeroed before the update)" if from_start else
                 "no gradient reached the weights, or the trainer prints a norm it does not compute "
                 "(Megatron-DeepSpeed when DeepSpeed clips)")
        return [stretch.incident(IncidentKind.ZERO_GRAD, from_start,
                                 f"grad norm exactly 0 {stretch.where}{moved}: {cause}")]
    return []


def _climbed(during: np.ndarray) -> bool:
    """Whether a loss climbed off its level over a stretch (:data:`PLACEHOLDER_RISE`): the median of
    its second half against its first half's, four values at least.

    Example:
        >>> _climbed(np.array([1.27, 7.79, 14.97, 22.42, 60.93, 1053.0])), _climbed(np.array([2.3, 2.1, 2.4, 2.2]))
        (True, False)
    """
    if len(during) < 4:
        return False
    first, second = end_levels(during, 2)
    return first > 0 and second >= PLACEHOLDER_RISE * first
