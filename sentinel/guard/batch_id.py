"""Name a batch so that a skipped batch can be recognised again after a resume.

Sample indices when the batch carries them (a dataset that returns its index under one of
``INDEX_KEYS``), else a content fingerprint of every tensor in the batch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import torch

INDEX_KEYS = ("index", "indices", "idx", "sample_idx", "sample_index")


def sample_indices(batch: Any) -> list[int] | None:
    """Return the dataset indices a batch carries, or None.

    Example:
        >>> sample_indices({"x": torch.zeros(2, 3), "index": torch.tensor([7, 3])})
        [7, 3]
    """
    if isinstance(batch, Mapping):
        for key in INDEX_KEYS:
            value = batch.get(key)
            if isinstance(value, torch.Tensor) and value.dim() == 1 and not value.is_floating_point():
                return [int(i) for i in value.tolist()]  # once per skipped/checked batch, not per step
    return None


def fingerprint(batch: Any) -> str:
    """A short hash of the batch content (tensor bytes in traversal order, other leaves by repr).

    Note: copies device tensors to the host; only used on batches being skipped or while a
    resumed run still has fingerprints to look for.

    Example:
        >>> fingerprint(torch.arange(4)) == fingerprint(torch.arange(4))
        True
    """
    digest = hashlib.blake2b(digest_size=12)
    for leaf in _leaves(batch):
        if isinstance(leaf, torch.Tensor):
            data = leaf.detach().to("cpu").contiguous()
            digest.update(str((tuple(data.shape), data.dtype)).encode())
            digest.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
        else:
            digest.update(repr(leaf).encode())
    return digest.hexdigest()


def batch_identity(batch: Any) -> dict[str, Any]:
    """``{"indices": [...]}`` when the batch carries sample indices, else ``{"fingerprint": hex}``.

    Example:
        >>> batch_identity({"x": torch.zeros(1), "idx": torch.tensor([5])})
        {'indices': [5]}
    """
    indices = sample_indices(batch)
    if indices is not None:
        return {"indices": indices}
    return {"fingerprint": fingerprint(batch)}


def _leaves(obj: Any):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, Mapping):
        for key in sorted(obj, key=str):
            yield from _leaves(obj[key])
    elif isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)):
        for item in obj:
            yield from _leaves(item)
    else:
        yield obj
