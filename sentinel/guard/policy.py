"""The guard's decision for one step, cheapest answer first. A pure function.

Tiers (DESIGN.md, "guard tiers"):

1. **skip the update** of an outlier step: its loss or grad norm is over the spike rule, or its
   loss/grads are non-finite (loss outliers that have begun more than 20 times in 1,000 steps are a
   recurring part of the data, not rare bad batches: applied, unless ``spike_patience`` in a row). Nothing changed, nothing to restore. A single bad batch is the
   common case (healthy large runs have one-batch loss blips all the time), and this is its
   whole answer. Grad-norm outliers with a normal loss (when they do not count toward a
   rollback, the default) are withheld at most ``spike_patience - 1`` steps in a row: different
   batches giving outlier gradients on the same, unchanged weights are not bad batches but a new
   level of the gradient (it often climbs after warm-up), which withholding cannot change, so the
   next such step is applied. Damage it does shows in the loss, which the rule still judges.
2. **roll back** when skipping did not cure it: the loss is still an outlier on
   ``spike_patience`` consecutive steps although none of their updates was applied, or the
   step is non-finite twice in a row, and a re-run of the last applied batch does not clear the
   weights (when the engine can re-run one: if that batch still gives a normal loss, the data is
   bad, not the weights, and skipping goes on), the loss diverges, the AMP scaler overflows ``overflow_patience`` times in a
   row, or its scale collapses. When a rollback comes while the cool-down of the previous one is
   still running (the bad step came back), the new rollback also lowers the learning rate,
   by ``lr_factor`` to the power of the number of such returns.
3. **give up** after ``max_rollbacks`` rollbacks.

The engine keeps a :class:`GuardState`, passes it in with what the detectors said, and carries
out the :class:`Decision` it gets back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from sentinel.config import GuardConfig


class Action(str, enum.Enum):
    APPLY = "apply"
    SKIP_UPDATE = "skip_update"
    ROLLBACK = "rollback"
    GIVE_UP = "gave_up"


class Reason(str, enum.Enum):
    """Why a step is bad, in order of precedence."""

    NONFINITE = "nonfinite"
    LOSS_SCALE_COLLAPSE = "loss_scale_collapse"
    OVERFLOW_STREAK = "overflow_streak"
    DIVERGENCE = "divergence"
    LOSS_SPIKE = "loss_spike"
    GRAD_NORM_SPIKE = "grad_norm_spike"


@dataclass(frozen=True, slots=True)
class StepSignals:
    """What the probes and detectors said about one optimizer step (identical on every rank).

    ``nonfinite`` means a NaN/Inf loss or gradient that the AMP scaler is not handling; an overflow
    the scaler handles shows up only as ``overflow_streak``. ``weights_ok`` is the answer of a
    re-run of the last applied batch (:mod:`sentinel.probes.reference_loss`) when the engine asked
    for one: True when that batch still gives a normal loss on the current weights (the streak is
    bad data, not damage), None when not asked or not possible. ``outliers_frequent``: loss
    outliers have begun so often lately that they are part of the data (a recurring harder
    domain), not rare bad batches (:data:`sentinel.guard.judge.FREQUENT_EPISODES`).
    """

    nonfinite: bool = False
    loss_spike: bool = False
    grad_norm_spike: bool = False
    divergence: bool = False
    overflow_streak: int = 0
    loss_scale: float | None = None
    weights_ok: bool | None = None
    outliers_frequent: bool = False


@dataclass(frozen=True, slots=True)
class GuardState:
    """What the decision remembers between steps (saved with snapshots and checkpoints).

    Attributes:
        outlier_streak: consecutive outlier steps whose updates were skipped (loss spikes, and
            grad-norm spikes when ``on_grad_norm_spike``; non-finite steps count too).
        nonfinite_streak: consecutive non-finite steps.
        rollbacks: rollbacks done so far.
        returns: consecutive rollbacks that each came inside the previous one's cool-down.
        grad_streak: consecutive grad-norm outliers with a normal loss that do not count toward
            ``spike_patience`` (``on_grad_norm_spike=False``).
    """

    outlier_streak: int = 0
    nonfinite_streak: int = 0
    rollbacks: int = 0
    returns: int = 0
    grad_streak: int = 0


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a step, why, and the guard's state after it.

    Attributes:
        action: apply the update, skip it, roll back, or give up.
        reason: the most serious thing wrong with the step (None when healthy).
        state: the next :class:`GuardState`.
        lr_scale: for a rollback, the factor on the learning rate during its cool-down.
        streak: outlier steps this decision answers (1 for a first outlier).
    """

    action: Action
    reason: Reason | None
    state: GuardState
    lr_scale: float = 1.0
    streak: int = 0

    @property
    def applies_update(self) -> bool:
        return self.action is Action.APPLY


def bad_step_reason(signals: StepSignals, config: GuardConfig) -> Reason | None:
    """The most serious thing wrong with a step, or None when it is healthy.

    Example:
        >>> bad_step_reason(StepSignals(loss_spike=True), GuardConfig())
        <Reason.LOSS_SPIKE: 'loss_spike'>
    """
    if signals.nonfinite:
        return Reason.NONFINITE
    if signals.loss_scale is not None and signals.loss_scale < config.loss_scale_floor:
        return Reason.LOSS_SCALE_COLLAPSE
    if signals.overflow_streak >= config.overflow_patience:
        return Reason.OVERFLOW_STREAK
    if signals.divergence:
        return Reason.DIVERGENCE
    if signals.loss_spike:
        return Reason.LOSS_SPIKE
    if signals.grad_norm_spike:
        return Reason.GRAD_NORM_SPIKE
    return None


# Reasons that say the state is already bad: no single update is to blame, skipping cures nothing.
_PERSISTENT = frozenset({Reason.LOSS_SCALE_COLLAPSE, Reason.OVERFLOW_STREAK, Reason.DIVERGENCE})


def decide(signals: StepSignals, state: GuardState, config: GuardConfig,
           cooling_down: bool = False) -> Decision:
    """The guard's answer to one step: apply, skip the update, roll back or give up.

    Args:
        signals: what the detectors said about this step.
        state: the guard's state before this step.
        config: the guard's settings (``rollback=False`` always applies: recording only).
        cooling_down: the cool-down of the previous rollback is still running.

    Returns:
        A :class:`Decision`.

    Example:
        >>> d = decide(StepSignals(loss_spike=True), GuardState(), GuardConfig())
        >>> d.action, d.state.outlier_streak
        (<Action.SKIP_UPDATE: 'skip_update'>, 1)
        >>> decide(StepSignals(loss_spike=True), d.state, GuardConfig(spike_patience=2)).action
        <Action.ROLLBACK: 'rollback'>
        >>> g = decide(StepSignals(grad_norm_spike=True), GuardState(grad_streak=2), GuardConfig())
        >>> g.action, g.reason  # the third grad-norm outlier in a row, loss normal: applied
        (<Action.APPLY: 'apply'>, <Reason.GRAD_NORM_SPIKE: 'grad_norm_spike'>)
    """
    reason = bad_step_reason(signals, config)
    if reason is None and not (state.outlier_streak or state.nonfinite_streak or state.grad_streak):
        return Decision(Action.APPLY, None, state)  # the healthy step: nothing to count, no copy
    nonfinite_streak = state.nonfinite_streak + 1 if reason is Reason.NONFINITE else 0
    grad_only = reason is Reason.GRAD_NORM_SPIKE and not config.on_grad_norm_spike
    counts = reason in (Reason.NONFINITE, Reason.LOSS_SPIKE) or \
        (reason is Reason.GRAD_NORM_SPIKE and config.on_grad_norm_spike)
    outlier_streak = state.outlier_streak + 1 if counts else 0
    grad_streak = state.grad_streak + 1 if grad_only else 0
    nxt = replace(state, outlier_streak=outlier_streak, nonfinite_streak=nonfinite_streak, grad_streak=grad_streak)
    if reason is None or not config.rollback:
        return Decision(Action.APPLY, reason, nxt)
    if grad_only and grad_streak >= config.spike_patience:  # a level of the gradient, not a batch
        return Decision(Action.APPLY, reason, nxt, streak=grad_streak)
    if reason is Reason.LOSS_SPIKE and signals.outliers_frequent and outlier_streak < config.spike_patience:
        # Outliers this frequent are a part of the data that withholding would never let the
        # model learn: applied. A streak of them is still judged (the weights check, a rollback).
        return Decision(Action.APPLY, reason, nxt, streak=outlier_streak)
    persistent = reason in _PERSISTENT or nonfinite_streak >= 2 or outlier_streak >= config.spike_patience
    if reason is Reason.DIVERGENCE and signals.weights_ok:
        # A batch from before the stretch still scores the old level on these weights: the data
        # got harder (a new stage of the data mix), not the model worse. The level is the new best.
        return Decision(Action.APPLY, reason, nxt)
    if persistent and reason not in _PERSISTENT and signals.weights_ok:
        persistent = False  # a known-good batch is still fine on these weights: the data is bad
    if not persistent:
        return Decision(Action.SKIP_UPDATE, reason, nxt, streak=max(outlier_streak, grad_streak, 1))
    streak = max(outlier_streak, 1)
    if state.rollbacks >= config.max_rollbacks:
        return Decision(Action.GIVE_UP, reason, nxt, streak=streak)
    returns = state.returns + 1 if cooling_down else 0
    after = GuardState(rollbacks=state.rollbacks + 1, returns=returns)
    return Decision(Action.ROLLBACK, reason, after, lr_scale=config.lr_factor ** returns, streak=streak)
