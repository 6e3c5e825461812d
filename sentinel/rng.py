"""Capture and restore every random-number generator a training step draws from.

A faithful replay of a step (to localise a NaN) and a faithful rollback both need the
RNG streams back where they were: torch CPU, the CUDA devices the step uses, numpy and Python.
"""

from __future__ import annotations

import _random
import ctypes
import random
import struct
import sys
from collections.abc import Callable, Iterable, Sequence
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
    cuda_devices: tuple[int, ...] | None = None  # the devices of ``torch_cuda``; None: 0, 1, ... in order

    def cuda_states(self) -> list[tuple[int, torch.Tensor]]:
        """(device index, state) of every CUDA generator held."""
        devices = range(len(self.torch_cuda)) if self.cuda_devices is None else self.cuda_devices
        return list(zip(devices, self.torch_cuda))

    def state_dict(self) -> dict[str, Any]:
        state = {"torch_cpu": self.torch_cpu, "torch_cuda": list(self.torch_cuda),
                 "numpy": self.numpy, "python": self.python}
        if self.cuda_devices is not None:
            state["cuda_devices"] = list(self.cuda_devices)
        return state

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> "RngState":
        devices = state.get("cuda_devices")
        return cls(state["torch_cpu"], tuple(state.get("torch_cuda", ())), state["numpy"], state["python"],
                   None if devices is None else tuple(int(d) for d in devices))


class _CachedState:
    """An RNG's state, read in full only when its raw bytes have changed since the last read.

    The full readers copy 624 Mersenne Twister words one Python object at a time (numpy's
    ``get_state()`` ~33 us, ``random.getstate()`` ~8 us: most of a step's RNG capture). The
    raw state (2.5 KB) is compared instead, through a view of the generator's memory made once
    per generator object (its ``tobytes()`` is one memcpy: ~4 us right after a training step has
    evicted the caches, where a ``ctypes.string_at`` call took ~12 us), and the last full state
    is reused while it is unchanged. The raw view is checked once against a full read; where it
    does not match (another numpy, another Python), the state is read in full every time.

    Args:
        owner: the live object whose memory holds the state (held, so the memory stays valid);
            called every time: a new object (numpy's ``set_bit_generator``) gets a new view.
        address: ``address(owner)``: where the raw state starts, or None where no raw view exists.
        full: the public reader (``np.random.get_state`` / ``random.getstate``).
        same: ``same(raw, full_state)``: the raw bytes are those of that state (the check).
        reusable: ``reusable(full_state)``: nothing outside the raw bytes may have changed
            since it was read (a cached Gaussian lives outside the Mersenne Twister state).
    """

    def __init__(self, owner: Callable[[], Any], address: Callable[[Any], int | None], full: Callable[[], Any],
                 same: Callable[[bytes, Any], bool], reusable: Callable[[Any], bool]) -> None:
        self._owner, self._address, self._read_full = owner, address, full
        self._same, self._reusable = same, reusable
        self._held: Any = None  # the object the view reads
        self._view: memoryview | None = None
        self._raw: bytes | None = None
        self._state: Any = None
        self._fast: bool | None = None  # None until checked against a full read

    def get(self) -> Any:
        if self._fast is False:
            return self._read_full()
        owner = self._owner()
        if owner is not self._held or self._view is None:
            address = self._address(owner)
            if address is None:
                self._fast, self._held, self._view = False, None, None
                return self._read_full()
            self._held, self._raw, self._state, self._fast = owner, None, None, None
            self._view = memoryview((ctypes.c_ubyte * _MT_BYTES).from_address(address))
        raw = self._view.tobytes()
        if raw == self._raw and self._reusable(self._state):
            return self._state
        state = self._read_full()
        if self._fast is None:
            self._fast = self._same(raw, state)
            if not self._fast:
                self._held, self._view = None, None
        self._raw, self._state = (raw, state) if self._fast else (None, None)
        return state


_MT_WORDS = 624
_MT_BYTES = 4 * _MT_WORDS + 4  # the words and the position
_MTRAND = np.random.mtrand  # held: the attribute chain from np costs ~4 us with cold caches


def _numpy_owner() -> Any:
    return _MTRAND._rand._bit_generator


def _numpy_address(bit_generator: Any) -> int | None:
    # An MT19937's state struct, at its public ctypes address: uint32 key[624]; int pos. Another
    # generator's struct is smaller: 2.5 KB read from it would run past its end.
    if not isinstance(bit_generator, np.random.MT19937):
        return None
    try:
        return int(bit_generator.ctypes.state_address)
    except AttributeError:  # a numpy without the ctypes view
        return None


def _numpy_full() -> Any:
    """numpy's global state: the legacy tuple for its MT19937, else the bit generator's dict
    (asking another generator for the legacy form warns, and would at every step)."""
    if isinstance(_numpy_owner(), np.random.MT19937):
        return np.random.get_state()
    return np.random.get_state(legacy=False)


def _numpy_same(raw: bytes, state: Any) -> bool:
    return bool(isinstance(state, tuple) and state[0] == "MT19937"
                and np.array_equal(np.frombuffer(raw[:-4], dtype=np.uint32), state[1])
                and int.from_bytes(raw[-4:], sys.byteorder, signed=True) == state[2])


# CPython's random.Random object: PyObject_HEAD, then int index; uint32_t state[624]. Read only
# where that layout holds (the object is large enough for it; checked against getstate() once).
_PY_HEAD = 2 * ctypes.sizeof(ctypes.c_void_p)
_PY_RAW_OK = sys.implementation.name == "cpython" and \
    _random.Random.__basicsize__ >= _PY_HEAD + 4 + 4 * _MT_WORDS


def _python_owner() -> Any:
    return random._inst


def _python_address(inst: Any) -> int | None:
    if not _PY_RAW_OK or not isinstance(inst, _random.Random):
        return None
    return id(inst) + _PY_HEAD  # int index, then the words


def _python_same(raw: bytes, state: Any) -> bool:
    words = state[1]  # 624 words, then the index
    return len(words) == _MT_WORDS + 1 and \
        raw == struct.pack(f"i{_MT_WORDS}I", words[-1], *words[:-1])


_numpy_state = _CachedState(_numpy_owner, _numpy_address, _numpy_full, _numpy_same,
                            reusable=lambda state: not state[3])  # no cached Gaussian (legacy has_gauss)
_python_state = _CachedState(_python_owner, _python_address, random.getstate, _python_same,
                             reusable=lambda state: random._inst.gauss_next == state[2])


def capture_rng(*, cuda: bool | Sequence[int] | None = None) -> RngState:
    """Copy the current RNG states.

    Cheap enough for every step (~5 us on CPU): numpy's and Python's states are read in full
    only when they changed (:class:`_CachedState`).

    Args:
        cuda: the CUDA generators to copy: True every device's, False none, a sequence of device
            indices those devices' (see :func:`cuda_devices_of`: on an 8-GPU node a process
            usually draws on one); None asks ``torch.cuda.is_available()`` (a caller that
            captures every step asks once and passes the answer).

    Example:
        >>> state = capture_rng(); a = torch.rand(1); restore_rng(state)
        >>> bool(torch.equal(a, torch.rand(1)))
        True
    """
    if cuda is None:
        cuda = torch.cuda.is_available()
    if isinstance(cuda, bool):
        return RngState(torch.get_rng_state(), tuple(torch.cuda.get_rng_state_all()) if cuda else (),
                        _numpy_state.get(), _python_state.get())
    generators = torch.cuda.default_generators  # filled once CUDA is initialised
    states = tuple(generators[i].get_state() if i < len(generators) else torch.cuda.get_rng_state(i)
                   for i in cuda)
    return RngState(torch.get_rng_state(), states, _numpy_state.get(), _python_state.get(), tuple(cuda))


def cuda_devices_of(tensors: Iterable[torch.Tensor]) -> tuple[int, ...]:
    """The CUDA devices whose generators a step on ``tensors`` draws from: theirs, and the current
    device where CUDA is initialised (kernels launched without a tensor to place them run there).

    Example:
        >>> model = torch.nn.Linear(2, 2)  # on the CPU: no CUDA generator, unless CUDA is in use
        >>> state = capture_rng(cuda=cuda_devices_of(model.parameters()))
        >>> len(state.torch_cuda) == int(torch.cuda.is_initialized())
        True
    """
    devices = {t.device.index for t in tensors if t.is_cuda}
    if torch.cuda.is_initialized():
        devices.add(torch.cuda.current_device())
    return tuple(sorted(devices))


def restore_rng(state: RngState) -> None:
    """Put every RNG back to ``state`` (CUDA states only where the devices exist)."""
    torch.set_rng_state(state.torch_cpu)
    if state.torch_cuda and torch.cuda.is_available():
        count = torch.cuda.device_count()
        for device, cuda_state in state.cuda_states():
            if device < count:
                torch.cuda.set_rng_state(cuda_state, device)
    np.random.set_state(state.numpy)
    random.setstate(state.python)
