"""Withhold an update on the device, so the host can judge a step while the next one runs.

The guard judges a step from its loss and grad norm, and a blip's update must not be applied.
Read back before ``optimizer.step()``, those two values make the host wait for the backward every
step, and on a GPU the device then idles while the host judges, records and launches the update
and the next forward (1.1-1.3x a plain step on a GPT, benchmarks/RESULTS.md). A fused ``Adam`` /
``AdamW`` takes a ``found_inf`` tensor (what a ``GradScaler`` hands it) and leaves parameters and
state untouched where it is 1. So the host computes, before the step, the thresholds above which
the guard would withhold the update (the spike detectors'
:meth:`~sentinel.detect.spike.SpikeDetector.limit`, where the guard's policy withholds an outlier
now); the device compares the step's values with them and the optimizer reads the verdict; the
engine reads the values back a step later (``async_verdict``) and judges the step as before.

Where the device's comparison and the host's judgment differ (a value within rounding of a
threshold, a rule the threshold does not hold), the engine says so: an update withheld that the
guard would have applied is one lost update; one applied that it would have withheld is answered
as any applied outlier is, by a rollback if the damage persists.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from sentinel.config import GuardConfig
from sentinel.guard.judge import StepJudge
from sentinel.guard.policy import Action, GuardState, StepSignals, decide

# float32's largest finite value: a limit of +inf would let a +inf value through (inf <= inf).
_FINITE_MAX = float(torch.finfo(torch.float32).max)


def gate_unsupported(optimizers: Sequence[Any], scaler: Any, world_size: int, rollback: bool) -> str | None:
    """Why updates cannot be withheld on the device for this setup, or None when they can.

    Example:
        >>> p = torch.nn.Parameter(torch.ones(2))
        >>> gate_unsupported([torch.optim.AdamW([p], fused=True)], None, 1, True) is None
        True
        >>> gate_unsupported([torch.optim.AdamW([p])], None, 1, True)
        'the optimizer AdamW is not fused: pass fused=True to it'
    """
    if not rollback:
        return "the guard is off (rollback=False): no update is withheld"
    if scaler is not None:
        return "a GradScaler hands the optimizer its own found_inf"
    if world_size > 1:
        return "under data parallelism every rank must withhold the same updates, which needs the host"
    if not optimizers:
        return "no optimizer was given"
    for opt in optimizers:
        # Adam and AdamW only: fused SGD leaves a new momentum buffer uninitialised when its first
        # update is withheld.
        if not isinstance(opt, (torch.optim.Adam, torch.optim.AdamW)):
            return f"the optimizer {type(opt).__name__} takes no found_inf: use torch.optim.AdamW(..., fused=True)"
        if not (opt.defaults.get("fused") and getattr(opt, "_step_supports_amp_scaling", False)):
            return f"the optimizer {type(opt).__name__} is not fused: pass fused=True to it"
    return None


class DeviceGate:
    """The device-side verdict of one step: withhold its update or not.

    Args:
        config: the guard's settings (the policy says which outliers are withheld).

    Example:
        >>> from sentinel.config import SentinelConfig
        >>> cfg = SentinelConfig()
        >>> gate = DeviceGate(cfg.guard)
        >>> judge = StepJudge(cfg)
        >>> flag = gate.compute(torch.tensor(float("nan")), torch.tensor(1.0), judge, GuardState(), False)
        >>> float(flag)
        1.0
    """

    def __init__(self, config: GuardConfig) -> None:
        self.config = config
        # (guard state, outliers frequent, cooling down) -> (withhold a loss outlier, a grad-norm outlier)
        self._policy: dict[tuple[GuardState, bool, bool], tuple[bool, bool]] = {}

    def limits(self, judge: StepJudge, state: GuardState, cooling_down: bool) -> tuple[float, float]:
        """The loss and the grad norm above which this step's update is withheld (inf: never).

        Example:
            >>> from sentinel.config import SentinelConfig
            >>> cfg = SentinelConfig()
            >>> DeviceGate(cfg.guard).limits(StepJudge(cfg), GuardState(), False)
            (inf, inf)
        """
        key = (state, judge.outliers_frequent, cooling_down)
        policy = self._policy.get(key)
        if policy is None:
            loss = decide(StepSignals(loss_spike=True, outliers_frequent=key[1]), state, self.config, cooling_down)
            grad = decide(StepSignals(grad_norm_spike=True), state, self.config, cooling_down)
            policy = self._policy[key] = (loss.action is not Action.APPLY, grad.action is not Action.APPLY)
        withhold_loss, withhold_grad = policy
        loss_limit = judge.loss.limit() if withhold_loss and judge.negative_loss_step is None else math.inf
        grad_limit = judge.grad.limit() if withhold_grad else math.inf
        return loss_limit, grad_limit

    def compute(self, loss: torch.Tensor | None, grad_norm: torch.Tensor, judge: StepJudge,
                state: GuardState, cooling_down: bool) -> torch.Tensor:
        """1.0 (a 0-d float32 tensor on ``grad_norm``'s device) where the update is to be withheld:
        a non-finite value, or one above its limit. Queued on the device; nothing is read back."""
        loss_limit, grad_limit = self.limits(judge, state, cooling_down)
        device = grad_norm.device
        values = grad_norm.float().reshape(1) if loss is None else \
            torch.stack([loss.float().reshape(()).to(device), grad_norm.float().reshape(())])
        limits = [min(grad_limit, _FINITE_MAX)] if loss is None else \
            [min(loss_limit, _FINITE_MAX), min(grad_limit, _FINITE_MAX)]
        # From pinned memory on CUDA: queued, no wait (the host allocator keeps the buffer until
        # the copy has run).
        bound = torch.tensor(limits, dtype=torch.float32, pin_memory=device.type == "cuda") \
            .to(device, non_blocking=True)
        # NaN fails both comparisons, +inf the first, -inf the second.
        ok = torch.logical_and(values <= bound, values >= -_FINITE_MAX)
        return torch.logical_not(ok.all()).float()


def arm(optimizers: Sequence[torch.optim.Optimizer], flag: torch.Tensor) -> None:
    """Hand ``flag`` to the optimizers' next ``step()`` (as a GradScaler hands its ``found_inf``)."""
    for opt in optimizers:
        opt.found_inf = flag  # type: ignore[attr-defined]


def disarm(optimizers: Sequence[torch.optim.Optimizer]) -> None:
    """Take the flag back, so a later ``step()`` without a verdict is not gated by a stale one."""
    for opt in optimizers:
        if "found_inf" in opt.__dict__:
            del opt.found_inf  # type: ignore[attr-defined]
