"""Loss-scale probe: AMP loss scale, overflow steps and the optimizer steps the scaler skipped.

Read the scaler between ``scaler.unscale_(optimizer)`` and ``scaler.step(optimizer)``; in
Lightning that is ``on_before_optimizer_step`` (``MixedPrecision.optimizer_step`` unscales
just before that hook). At that point ``GradScaler`` holds, per optimizer, the found-inf
flags its unscale wrote (``_per_optimizer_states[id(optimizer)]["found_inf_per_device"]``),
and ``scaler.step`` will skip ``optimizer.step`` when any of them is non-zero. The probe
reads those tensors and ``scaler._scale`` directly: ``get_scale()`` would sync the host.

Example:
    >>> probe = LossScaleProbe()
    >>> probe.read(None, torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.1))
    {}
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from sentinel.metrics import AMP_OVERFLOW, LOSS_SCALE

log = logging.getLogger(__name__)


class LossScaleProbe:
    """Reads a ``torch.amp.GradScaler`` each step and counts skipped optimizer steps.

    Metric keys (0-d float32 tensors, no host sync):

    ================  ==============================================================
    ``loss_scale``    the scale this step's loss was multiplied by (before update())
    ``amp/overflow``  1.0 if this step's gradients held inf/nan, so the scaler skips
                      the optimizer step and halves the scale in ``update()``; else 0.0
    ================  ==============================================================

    ``skipped_steps`` counts the overflow steps reported through :meth:`update` and is
    saved by :meth:`state_dict`, so a resumed run keeps counting.

    Example:
        >>> probe = LossScaleProbe()
        >>> probe.update(True)
        >>> probe.skipped_steps
        1
    """

    def __init__(self) -> None:
        self.skipped_steps: int = 0
        self._warned_not_unscaled = False

    def read(
        self, scaler: torch.amp.GradScaler | None, optimizer: torch.optim.Optimizer
    ) -> dict[str, torch.Tensor]:
        """Loss scale and overflow flag of the step about to be taken, with no host sync.

        Call after ``scaler.unscale_(optimizer)`` and before ``scaler.step(optimizer)``.
        The returned tensors are copies: ``scaler.update()`` may change the scaler's own.

        Args:
            scaler: the run's grad scaler, or ``None`` (no AMP, or bf16).
            optimizer: the optimizer the scaler is about to step.

        Returns:
            ``{"loss_scale": t, "amp/overflow": t}``; ``{}`` when ``scaler`` is ``None``, is
            disabled, or has not scaled a loss yet. Only ``loss_scale`` when the optimizer
            was not unscaled (an optimizer that unscales inside its own ``step``, such as a
            fused Adam): the overflow is then unknown until the step.

        Example:
            >>> metrics = probe.read(scaler, optimizer)  # doctest: +SKIP
            >>> scaler.step(optimizer); scaler.update()  # doctest: +SKIP
        """
        if scaler is None or not scaler.is_enabled():
            return {}
        scale = scaler._scale  # get_scale() would call .item(): a host sync
        if scale is None:
            return {}
        out = {LOSS_SCALE: scale.detach().clone().float()}  # update() changes _scale in place

        found = list(scaler._per_optimizer_states[id(optimizer)]["found_inf_per_device"].values())
        if not found:
            if not self._warned_not_unscaled:
                log.warning(
                    "GradScaler has not unscaled this optimizer before its step, so the "
                    "overflow flag is unknown: call scaler.unscale_(optimizer) before reading "
                    "(optimizers that unscale inside step(), e.g. fused ones, are not supported)"
                )
                self._warned_not_unscaled = True
            return out
        # Sum into a new tensor: update() adds the per-device flags into the first one in place.
        flags = torch.stack([f.to(scale.device, non_blocking=True) for f in found])
        out[AMP_OVERFLOW] = (flags.sum() > 0).float()
        return out

    def update(self, overflow: bool) -> None:
        """Count one optimizer step; ``overflow=True`` means the scaler skipped it.

        Args:
            overflow: host value of this step's ``amp/overflow`` (after the caller's one
                batched device-to-host transfer).
        """
        if overflow:
            self.skipped_steps += 1

    def state_dict(self) -> dict[str, Any]:
        """Counters to checkpoint: ``{"skipped_steps": int}``."""
        return {"skipped_steps": self.skipped_steps}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore counters saved by :meth:`state_dict`; missing keys read as 0."""
        self.skipped_steps = int(state_dict.get("skipped_steps", 0))
