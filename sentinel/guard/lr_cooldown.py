"""A lower learning rate for the updates of a cool-down after a rollback.

The factor is applied by optimizer step hooks, exactly around each update: schedulers never see
the lowered value (Lightning steps them before ``on_train_batch_end``), and a step the GradScaler
skips is not touched at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch


class LRCooldown:
    """Scales every parameter group's learning rate by ``factor`` while ``active()`` says so.

    Args:
        optimizers: the optimizers whose updates are lowered.
        factor: in (0, 1]; 1 (the start) installs nothing. Change it with :meth:`set_factor`
            (the guard does at each rollback: the factor escalates when a spike comes back).
        active: called before each update; True during a cool-down.

    Example:
        >>> cooldown = LRCooldown([opt], 1.0, active=lambda: step <= cooldown_until)  # doctest: +SKIP
        >>> cooldown.set_factor(0.1)       # the next cool-down's updates use lr * 0.1  # doctest: +SKIP
        >>> cooldown.used  # learning rates the last update really used, or None   # doctest: +SKIP
    """

    def __init__(self, optimizers: Sequence[torch.optim.Optimizer], factor: float,
                 active: Callable[[], bool]) -> None:
        self.optimizers = list(optimizers)
        self.factor = 1.0
        self.active = active
        self.used: list[float] | None = None
        self._saved: dict[int, list[float]] = {}
        self._handles = []
        self.set_factor(factor)

    def set_factor(self, factor: float) -> None:
        """Use ``factor`` from the next update on; hooks are installed the first time it is < 1."""
        self.factor = float(factor)
        if self.factor < 1.0 and not self._handles:
            for opt in self.optimizers:
                self._handles += [opt.register_step_pre_hook(self._lower),
                                  opt.register_step_post_hook(self._restore)]

    def take_used(self) -> list[float] | None:
        """The learning rates of the last lowered update (then forgotten), or None."""
        used, self.used = self.used, None
        return used

    def remove(self) -> None:
        """Remove the hooks (idempotent)."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _lower(self, optimizer: torch.optim.Optimizer, *args: Any) -> None:
        if self.factor >= 1.0 or not self.active():
            return
        self._saved[id(optimizer)] = [group["lr"] for group in optimizer.param_groups]
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * self.factor
        self.used = [g["lr"] for opt in self.optimizers for g in opt.param_groups]

    def _restore(self, optimizer: torch.optim.Optimizer, *args: Any) -> None:
        saved = self._saved.pop(id(optimizer), None)
        if saved is not None:
            for group, lr in zip(optimizer.param_groups, saved):
                group["lr"] = lr
