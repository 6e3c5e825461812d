"""The loss of a known-good batch on the current weights: tells damaged weights from bad data.

When the loss stays an outlier on several batches in a row although none of their updates was
applied, either the weights were already damaged or the data is bad for a stretch. Re-running
the last batch whose update was applied answers which (the idea of Megatron-LM's rerun state
machine, on the cheap: one forward pass, only when the guard is about to roll back): a known
good batch that is now an outlier too means the weights are to blame.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from sentinel.probes.nonfinite import as_loss, SavedModelState
from sentinel.rng import capture_rng, restore_rng


def reference_loss(model: nn.Module, run_forward: Callable[[], Any]) -> torch.Tensor:
    """Run ``run_forward`` without autograd and leave the model exactly as it was.

    Buffers (BatchNorm statistics), train/eval modes, gradients and every RNG state are
    restored afterwards, so training continues as if nothing had run.

    Args:
        model: the module whose state must not change.
        run_forward: computes the loss (a tensor, or a dict with ``"loss"``) of one batch.

    Returns:
        The loss, a detached float tensor (mean of its elements if it is not a scalar).

    Example:
        >>> model = nn.Linear(2, 1)
        >>> float(reference_loss(model, lambda: model(torch.ones(1, 2)).sum() * 0))
        0.0
    """
    saved = SavedModelState.capture(model)
    rng = capture_rng()
    try:
        with torch.no_grad():
            return as_loss(run_forward()).detach().float().mean()
    finally:
        saved.restore()
        restore_rng(rng)
