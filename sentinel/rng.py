"""Capture and restore every random-number generator a training step draws from.

A faithful replay of a step (to localise a NaN) and a faithful rollback both need the
RNG streams back where they were: torch CPU, every CUDA device present, numpy and Python.
"""

from __future__ import annotations

import ctypes
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


class _NumpyState:
    """numpy's global RNG state, read again only when it has changed.

    ``np.random.get_state()`` copies the 624 words of the Mersenne Twister one by one (~33 us,
    most of a step's RNG capture). The raw state (key and position, 2.5 KB) is compared through
    the bit generator's public ctypes address instead (~0.5 us), and the last state read is
    reused while it is unchanged. Only when the cached state has no Gaussian cached: drawing a
    cached Gaussian changes the legacy state without touching the key. Checked once against
    ``get_state()``; a numpy whose layout differs reads the state every time.
    """

    _RAW_BYTES = 624 * 4 + 4  # mt19937_state: uint32 key[624]; int pos

    def __init__(self) -> None:
        self._raw: bytes | None = None
        self._state: Any = None
        self._fast: bool | None = None  # None until checked against get_state()

    def get(self) -> Any:
        if self._fast is False:
            return np.random.get_state()
        try:
            address = np.random.mtrand._rand._bit_generator.ctypes.state_address
        except AttributeError:  # not the legacy MT19937 global state
            self._fast = False
            return np.random.get_state()
        raw = ctypes.string_at(address, self._RAW_BYTES)
        if raw == self._raw and not self._state[3]:  # unchanged, and no cached Gaussian
            return self._state
        state = np.random.get_state()
        if self._fast is None:
            self._fast = bool(np.array_equal(np.frombuffer(raw[:-4], dtype=np.uint32), state[1])
                              and int.from_bytes(raw[-4:], "little", signed=True) == state[2])
        self._raw, self._state = (raw, state) if self._fast else (None, None)
        return state


_numpy_state = _NumpyState()


def capture_rng() -> RngState:
    """Copy the current RNG states.

    Cheap enough for every step (~10 us on CPU): numpy's state is re-read only when it changed.

    Example:
        >>> state = capture_rng(); a = torch.rand(1); restore_rng(state)
        >>> bool(torch.equal(a, torch.rand(1)))
        True
    """
    cuda = tuple(torch.cuda.get_rng_state_all()) if torch.cuda.is_available() else ()
    return RngState(torch.get_rng_state(), cuda, _numpy_state.get(), random.getstate())


def restore_rng(state: RngState) -> None:
    """Put every RNG back to ``state`` (CUDA states only where the devices exist)."""
    torch.set_rng_state(state.torch_cpu)
    if state.torch_cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(list(state.torch_cuda))
    np.random.set_state(state.numpy)
    random.setstate(state.python)
