"""Capture and restore every random-number generator a training step draws from.

A faithful replay of a step (to localise a NaN) and a faithful rollback both need the
RNG streams back where they were: torch CPU, every CUDA device present, numpy and Python.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class RngState:
    """A copy of all RNG states at one moment (CPU tensors and plain Python objects)."""

    torch_cpu: torch.Tensor
    torch_cuda: tuple[torch.Tensor, ...]
    numpy: Any
    python: Any

    def state_dict(self) -> dict[str, Any]:
        return {"torch_cpu": self.torch_cpu, "torch_cuda": list(self.torch_cuda),
                "numpy": self.numpy, "python": self.python}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> "RngState":
        return cls(state["torch_cpu"], tuple(state.get("torch_cuda", ())), state["numpy"], state["python"])


def capture_rng() -> RngState:
    """Copy the current RNG states.

    Example:
        >>> state = capture_rng(); a = torch.rand(1); restore_rng(state)
        >>> bool(torch.equal(a, torch.rand(1)))
        True
    """
    cuda = tuple(torch.cuda.get_rng_state_all()) if torch.cuda.is_available() else ()
    return RngState(torch.get_rng_state(), cuda, np.random.get_state(), random.getstate())


def restore_rng(state: RngState) -> None:
    """Put every RNG back to ``state`` (CUDA states only where the devices exist)."""
    torch.set_rng_state(state.torch_cpu)
    if state.torch_cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(list(state.torch_cuda))
    np.random.set_state(state.numpy)
    random.setstate(state.python)
