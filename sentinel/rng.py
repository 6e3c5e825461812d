"""Capture and restore every random-number generator a training step draws from.

A faithful replay of a step (to localise a NaN) and a faithful rollback both need the
RNG streams back where they were: torch CPU, every CUDA device present, numpy and Python.
"""

from __future__ import annotations

import _random
import ctypes
import random
import struct
import sys
from collections.abc import Callable
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


class _CachedState:
    """An RNG's state, read in full only when its raw bytes have changed since the last read.

    The full readers copy 624 Mersenne Twister words one Python object at a time (numpy's
    ``get_state()`` ~33 us, ``random.getstate()`` ~8 us: most of a step's RNG capture). The
    raw state (2.5 KB) is compared instead (~0.5 us), and the last full state is reused while
    it is unchanged. The raw view is checked once against a full read; where it does not match
    (another numpy, another Python), the state is read in full every time.

    Args:
        raw: the raw state bytes, or None where no raw view exists.
        full: the public reader (``np.random.get_state`` / ``random.getstate``).
        same: ``same(raw, full_state)``: the raw bytes are those of that state (the check).
        reusable: ``reusable(full_state)``: nothing outside the raw bytes may have changed
            since it was read (a cached Gaussian lives outside the Mersenne Twister state).
    """

    def __init__(self, raw: Callable[[], bytes | None], full: Callable[[], Any],
                 same: Callable[[bytes, Any], bool], reusable: Callable[[Any], bool]) -> None:
        self._read_raw, self._read_full, self._same, self._reusable = raw, full, same, reusable
        self._raw: bytes | None = None
        self._state: Any = None
        self._fast: bool | None = None  # None until checked against a full read

    def get(self) -> Any:
        if self._fast is False:
            return self._read_full()
        raw = self._read_raw()
        if raw is None:
            self._fast = False
            return self._read_full()
        if raw == self._raw and self._reusable(self._state):
            return self._state
        state = self._read_full()
        if self._fast is None:
            self._fast = self._same(raw, state)
        self._raw, self._state = (raw, state) if self._fast else (None, None)
        return state


_MT_WORDS = 624
_MT_BYTES = 4 * _MT_WORDS + 4  # the words and the position


def _numpy_raw() -> bytes | None:
    # The legacy global MT19937's state struct, at its public ctypes address: uint32 key[624]; int pos.
    try:
        address = np.random.mtrand._rand._bit_generator.ctypes.state_address
    except AttributeError:  # not the legacy MT19937 global state
        return None
    return ctypes.string_at(address, _MT_BYTES)


def _numpy_same(raw: bytes, state: Any) -> bool:
    return bool(np.array_equal(np.frombuffer(raw[:-4], dtype=np.uint32), state[1])
                and int.from_bytes(raw[-4:], sys.byteorder, signed=True) == state[2])


# CPython's random.Random object: PyObject_HEAD, then int index; uint32_t state[624]. Read only
# where that layout holds (the object is large enough for it; checked against getstate() once).
_PY_HEAD = 2 * ctypes.sizeof(ctypes.c_void_p)
_PY_RAW_OK = sys.implementation.name == "cpython" and \
    _random.Random.__basicsize__ >= _PY_HEAD + 4 + 4 * _MT_WORDS


def _python_raw() -> bytes | None:
    inst = random._inst
    if not _PY_RAW_OK or not isinstance(inst, _random.Random):
        return None
    return ctypes.string_at(id(inst) + _PY_HEAD, _MT_BYTES)  # int index, then the words


def _python_same(raw: bytes, state: Any) -> bool:
    words = state[1]  # 624 words, then the index
    return len(words) == _MT_WORDS + 1 and \
        raw == struct.pack(f"i{_MT_WORDS}I", words[-1], *words[:-1])


_numpy_state = _CachedState(_numpy_raw, np.random.get_state, _numpy_same,
                            reusable=lambda state: not state[3])  # no cached Gaussian (legacy has_gauss)
_python_state = _CachedState(_python_raw, random.getstate, _python_same,
                             reusable=lambda state: random._inst.gauss_next == state[2])


def capture_rng(*, cuda: bool | None = None) -> RngState:
    """Copy the current RNG states.

    Cheap enough for every step (~5 us on CPU): numpy's and Python's states are read in full
    only when they changed (:class:`_CachedState`).

    Args:
        cuda: whether to copy the CUDA devices' states; None asks ``torch.cuda.is_available()``
            (a caller that captures every step asks once and passes the answer).

    Example:
        >>> state = capture_rng(); a = torch.rand(1); restore_rng(state)
        >>> bool(torch.equal(a, torch.rand(1)))
        True
    """
    if cuda is None:
        cuda = torch.cuda.is_available()
    return RngState(torch.get_rng_state(), tuple(torch.cuda.get_rng_state_all()) if cuda else (),
                    _numpy_state.get(), _python_state.get())


def restore_rng(state: RngState) -> None:
    """Put every RNG back to ``state`` (CUDA states only where the devices exist)."""
    torch.set_rng_state(state.torch_cpu)
    if state.torch_cuda and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(list(state.torch_cuda))
    np.random.set_state(state.numpy)
    random.setstate(state.python)
