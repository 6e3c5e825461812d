"""What the detectors say about one optimizer step, as the guard's :class:`StepSignals`.

One place turns a step's loss and grad norm into signals, so the engine and the replay of the
guard over real logs (``benchmarks/guard_replay.py``) judge a step with the same code.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from sentinel.config import SentinelConfig
from sentinel.guard.policy import StepSignals

_HEALTHY = StepSignals()

# Loss outliers that start this often are part of the data, not rare bad batches: more than
# FREQUENT_EPISODES separate ones within FREQUENT_WINDOW steps (2%). The healthy runs measured (78
# modded-nanogpt records, up to 1.5B parameters, llm.c GPT-2) start at most 6 in any 500 steps; a
# recurring harder part of the data (every 10th batch from a harder task or domain, a rare hard
# group of samples) starts 20-50, and withholding each of them means it is never learned. A
# dozen corrupted batches in a stretch are still withheld, each.
FREQUENT_WINDOW = 1000
FREQUENT_EPISODES = 20


class StepJudge:
    """The loss and grad-norm spike detectors and the divergence detector of one run.

    Args:
        config: the run's configuration (the detectors' settings).

    Attributes:
        verdicts: ``(loss, grad_norm, divergence)`` verdicts of the last step judged (None where
            the value was not given).
        loss_baseline: the loss baseline of the last step that had one (nan before the first):
            a non-finite step has no verdict baseline, and a re-run judged then needs one.

    Example:
        >>> judge = StepJudge(SentinelConfig())
        >>> judge.judge(0, loss=2.3, grad_norm=1.1).loss_spike
        False
    """

    def __init__(self, config: SentinelConfig) -> None:
        self.loss = config.make_loss_detector()
        self.grad = config.make_grad_detector()
        self.divergence = config.make_divergence_detector()
        self.verdicts: tuple[Any, Any, Any] = (None, None, None)
        self.loss_baseline = math.nan
        self._diverged = False  # a divergence signal on entering it, not on every step after
        self._outlier_starts: deque[int] = deque()  # steps where a run of loss outliers began
        self._last_outlier = False
        self._frequent = False  # loss outliers have been frequent lately (see FREQUENT_EPISODES)
        # The first step whose loss was below zero: from there the loss rules (relative, in log
        # space) cannot judge it, and their findings are recorded but not acted on.
        self.negative_loss_step: int | None = None

    def judge(self, step: int, loss: float | None, grad_norm: float | None, *, nonfinite: bool = False,
              overflow_streak: int = 0, loss_scale: float | None = None) -> StepSignals:
        """Feed one step's values to the detectors (their history grows) and say what they found."""
        loss_v = self.loss.update(loss) if loss is not None else None
        grad_v = self.grad.update(grad_norm) if grad_norm is not None else None
        div_v = self.divergence.update(loss, step=step) if loss is not None else None
        newly_diverged = bool(div_v is not None and div_v.diverged and not self._diverged)
        if div_v is not None:
            self._diverged = bool(div_v.diverged)
        self.verdicts = (loss_v, grad_v, div_v)
        if loss_v is not None and math.isfinite(loss_v.baseline):
            self.loss_baseline = loss_v.baseline
        if self.negative_loss_step is None and loss is not None and loss < 0:
            self.negative_loss_step = step
        loss_judged = self.negative_loss_step is None
        loss_spike = bool(loss_v is not None and loss_v.is_spike) and loss_judged
        newly_diverged = newly_diverged and loss_judged
        grad_norm_spike = bool(grad_v is not None and grad_v.is_spike)
        frequent = False
        if loss_v is not None:
            starts = self._outlier_starts
            if loss_spike and not self._last_outlier:
                starts.append(step)
            while starts and starts[0] <= step - FREQUENT_WINDOW:
                starts.popleft()
            self._last_outlier = loss_spike
            # Once frequent, until half as many: as the model learns the harder part, fewer of its
            # batches stand out, and withholding the hardest of them again would stall it there.
            if len(starts) > FREQUENT_EPISODES:
                self._frequent = True
            elif len(starts) < FREQUENT_EPISODES // 2:
                self._frequent = False
            frequent = loss_spike and self._frequent
        if not (nonfinite or loss_spike or grad_norm_spike or newly_diverged or overflow_streak) \
                and loss_scale is None:
            return _HEALTHY  # the usual step: one shared (frozen) instance, nothing to build
        return StepSignals(nonfinite=nonfinite, loss_spike=loss_spike, grad_norm_spike=grad_norm_spike,
                           divergence=newly_diverged, overflow_streak=overflow_streak, loss_scale=loss_scale,
                           outliers_frequent=frequent)

    def state_dict(self) -> dict[str, Any]:
        """The detectors' histories (for snapshots and checkpoints)."""
        return {"loss": self.loss.state_dict(), "grad": self.grad.state_dict(),
                "divergence": self.divergence.state_dict(),
                "outlier_starts": list(self._outlier_starts), "last_outlier": self._last_outlier,
                "frequent": self._frequent,
                "negative_loss_step": self.negative_loss_step}

    def load_state_dict(self, states: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; keys that are missing (older checkpoints) are left alone."""
        for key, detector in (("loss", self.loss), ("grad", self.grad), ("divergence", self.divergence)):
            if key in states:
                detector.load_state_dict(states[key])
        if "outlier_starts" in states:
            self._outlier_starts = deque(int(s) for s in states["outlier_starts"])
            self._last_outlier = bool(states.get("last_outlier", False))
            self._frequent = bool(states.get("frequent", False))
        if states.get("negative_loss_step") is not None:  # once negative, a rollback does not undo that
            self.negative_loss_step = int(states["negative_loss_step"])
