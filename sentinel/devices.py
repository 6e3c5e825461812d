"""Host-to-device copies that do not make the host wait for the device."""

from __future__ import annotations

import torch


def to_device(host: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``host`` copied to ``device``. To a GPU the copy goes from pinned memory and is queued
    without waiting: a plain copy from pageable memory is a synchronisation, which the step
    path must not add (torch's pinned allocator keeps the source alive until the copy lands).

    Example:
        >>> to_device(torch.arange(3), torch.device("cpu"))
        tensor([0, 1, 2])
    """
    if device.type != "cuda":
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)
