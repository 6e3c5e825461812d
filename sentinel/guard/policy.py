"""The guard's decision for one step: go on, roll back, or give up. A pure function."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sentinel.config import GuardConfig


class Action(str, enum.Enum):
    CONTINUE = "continue"
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
    the scaler handles shows up only as ``overflow_streak``.
    """

    nonfinite: bool = False
    loss_spike: bool = False
    grad_norm_spike: bool = False
    divergence: bool = False
    overflow_streak: int = 0
    loss_scale: float | None = None


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
    if signals.grad_norm_spike and config.on_grad_norm_spike:
        return Reason.GRAD_NORM_SPIKE
    return None


def decide(reason: Reason | None, rollbacks_done: int, config: GuardConfig) -> Action:
    """Turn a bad-step reason into an action, honouring ``rollback`` and ``max_rollbacks``.

    Example:
        >>> decide(Reason.LOSS_SPIKE, rollbacks_done=5, config=GuardConfig(max_rollbacks=5))
        <Action.GIVE_UP: 'gave_up'>
    """
    if reason is None or not config.rollback:
        return Action.CONTINUE
    if rollbacks_done >= config.max_rollbacks:
        return Action.GIVE_UP
    return Action.ROLLBACK
