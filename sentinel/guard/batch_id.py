"""Name a batch so that a skipped batch can be recognised again after a resume.

Sample indices when the batch carries them (a dataset that returns its index under one of
``INDEX_KEYS``), else a content fingerprint of every tensor in the batch. Both are taken on the
batch's device without a host sync, so the guard can name every batch it may later skip without
holding on to the batch itself.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from sentinel.devices import to_device

INDEX_KEYS = ("index", "indices", "idx", "sample_idx", "sample_index")
_INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_SAMPLE = 8192  # elements per tensor that enter the hash
_MIX: dict[tuple[int, torch.device], torch.Tensor] = {}  # fixed pseudo-random multipliers


def index_tensor(batch: Any) -> torch.Tensor | None:
    """The 1-D integer tensor of dataset indices a batch carries, or None.

    Example:
        >>> index_tensor({"x": torch.zeros(2, 3), "index": torch.tensor([7, 3])})
        tensor([7, 3])
    """
    if isinstance(batch, Mapping):
        values = batch
    elif isinstance(batch, (torch.Tensor, Sequence)):
        return None
    else:  # a dataclass or an object of attributes
        values = batch_fields(batch) or {}
    for key in INDEX_KEYS:
        value = values.get(key)
        if isinstance(value, torch.Tensor) and value.dim() == 1 and not value.is_floating_point():
            return value
    return None


def sample_indices(batch: Any) -> list[int] | None:
    """The dataset indices a batch carries as a list (a host sync), or None.

    Example:
        >>> sample_indices({"x": torch.zeros(2, 3), "index": torch.tensor([7, 3])})
        [7, 3]
    """
    indices = index_tensor(batch)
    return None if indices is None else [int(i) for i in indices.tolist()]


def fingerprint_tensor(batch: Any) -> torch.Tensor:
    """A 0-d int64 hash of the batch content, computed on its device with no host sync.

    Every tensor's raw bits are read as integers, multiplied by fixed pseudo-random int64 weights
    and summed (integer sums wrap and are exact, so the hash is deterministic on any device);
    shapes and non-tensor leaves are mixed in on the host. Large tensors are sampled at
    ``_SAMPLE`` evenly spaced elements, so the cost per step is bounded whatever the batch size.

    Example:
        >>> int(fingerprint_tensor(torch.arange(4))) == int(fingerprint_tensor(torch.arange(4)))
        True
    """
    total: torch.Tensor | None = None
    salt = hashlib.blake2b(digest_size=8)  # Python's hash() of str differs between processes
    for position, leaf in enumerate(_leaves(batch)):
        if isinstance(leaf, torch.Tensor):
            part = _tensor_part(leaf)
            salt.update(repr((position, _shape(leaf), str(leaf.dtype), str(leaf.layout))).encode())
            if part is not None:
                total = part if total is None else total * 1_000_003 + part.to(total.device)
        else:
            salt.update(repr((position, _text(leaf))).encode())
    base = torch.tensor(int.from_bytes(salt.digest(), "little") >> 1, dtype=torch.int64)
    return base if total is None else total + base.to(total.device)


def fingerprint(batch: Any) -> str:
    """:func:`fingerprint_tensor` as hex (a host sync).

    Example:
        >>> fingerprint(torch.arange(4)) == fingerprint(torch.arange(4))
        True
    """
    return format(int(fingerprint_tensor(batch)) & 0xFFFFFFFFFFFFFFFF, "016x")


class BatchIdentity:
    """What names one batch, held on its device until it is needed (no host sync per step).

    Example:
        >>> BatchIdentity.of({"x": torch.zeros(1), "idx": torch.tensor([5])}).to_dict()
        {'indices': [5]}
    """

    __slots__ = ("_indices", "_hash")

    def __init__(self, indices: torch.Tensor | None, hash_: torch.Tensor | None) -> None:
        self._indices, self._hash = indices, hash_

    @classmethod
    def of(cls, batch: Any) -> "BatchIdentity":
        indices = index_tensor(batch)
        if indices is not None:
            return cls(indices.detach(), None)
        return cls(None, fingerprint_tensor(batch))

    def to_dict(self) -> dict[str, Any]:
        if self._indices is not None:
            return {"indices": [int(i) for i in self._indices.tolist()]}
        return {"fingerprint": format(int(self._hash) & 0xFFFFFFFFFFFFFFFF, "016x")}


def batch_identity(batch: Any) -> dict[str, Any]:
    """``{"indices": [...]}`` when the batch carries sample indices, else ``{"fingerprint": hex}``.

    Example:
        >>> batch_identity({"x": torch.zeros(1), "idx": torch.tensor([5])})
        {'indices': [5]}
    """
    return BatchIdentity.of(batch).to_dict()


def _mix(n: int, device: torch.device) -> torch.Tensor:
    key = (n, device)
    if key not in _MIX:
        gen = torch.Generator().manual_seed(0x5E17)
        _MIX[key] = to_device(torch.randint(-(2**62), 2**62, (n,), generator=gen, dtype=torch.int64), device)
        if len(_MIX) > 64:  # batches of many shapes: keep the cache bounded
            _MIX.pop(next(iter(_MIX)))
    return _MIX[key]


def _tensor_part(leaf: torch.Tensor) -> torch.Tensor | None:
    """One tensor's share of the hash, or None where its values cannot be read as bits (a layout
    or dtype torch cannot flatten or view): its shape, dtype and layout still name it."""
    try:
        data = _flat_values(leaf.detach())
        if data.numel() > _SAMPLE:
            data = data[:: data.numel() // _SAMPLE][:_SAMPLE]
        data = data.contiguous()
        if data.is_complex():
            data = torch.view_as_real(data).reshape(-1)
        bits = data.view(_INT_VIEW[data.element_size()]) if data.is_floating_point() else data.to(torch.int64)
        return (bits.to(torch.int64) * _mix(bits.numel(), bits.device)).sum()
    except (RuntimeError, TypeError, ValueError, NotImplementedError, KeyError):
        return None


def _flat_values(t: torch.Tensor) -> torch.Tensor:
    if t.is_nested:
        return torch.cat([part.reshape(-1) for part in t.unbind()])
    if t.layout == torch.sparse_coo:
        t = t.coalesce()
        return torch.cat([t.indices().reshape(-1).to(t.values().dtype), t.values().reshape(-1)]) \
            if t.values().is_floating_point() else t.values().reshape(-1)
    if t.layout != torch.strided:  # compressed sparse layouts
        return t.values().reshape(-1)
    return t.reshape(-1)


def _shape(t: torch.Tensor) -> Any:
    try:
        return tuple(t.shape)
    except RuntimeError:  # a nested tensor of ragged parts has no single shape
        return "nested"


def _text(leaf: Any) -> str:
    try:
        return repr(leaf)[:1000]
    except Exception:  # noqa: BLE001 - a user's object whose repr fails still names its type
        return type(leaf).__name__


# Containers nested deeper than this (or holding themselves) are named by type, not walked.
_MAX_DEPTH = 32


def _leaves(obj: Any, depth: int = 0):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth >= _MAX_DEPTH:
        yield f"<{type(obj).__name__} nested deeper than {_MAX_DEPTH}>"
    elif isinstance(obj, Mapping):
        for key in sorted(obj, key=str):
            yield from _leaves(obj[key], depth + 1)
    elif isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)):
        for item in obj:
            yield from _leaves(item, depth + 1)
    else:
        fields = batch_fields(obj)
        if fields is None:
            yield obj
        else:  # a dataclass or an object of attributes: its repr shows only a tensor's corners
            yield type(obj).__qualname__
            for name in sorted(fields):
                yield name
                yield from _leaves(fields[name], depth + 1)


def batch_fields(obj: Any) -> dict[str, Any] | None:
    """The attributes of a batch object that holds tensors (a dataclass, a plain class), or None.

    Example:
        >>> import dataclasses
        >>> @dataclasses.dataclass
        ... class Batch:
        ...     x: torch.Tensor
        >>> list(batch_fields(Batch(torch.zeros(2)))), batch_fields("text")
        (['x'], None)
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name, None) for f in dataclasses.fields(obj)}
    attributes = getattr(obj, "__dict__", None)
    if isinstance(attributes, dict) and any(isinstance(v, (torch.Tensor, Mapping, list, tuple))
                                            for v in attributes.values()):
        return dict(attributes)
    return None
