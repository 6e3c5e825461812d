"""``meta.json``: what the run is (versions, config, model summary), merged and rewritten atomically."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import platform
from typing import Any

import sentinel
from sentinel.store.layout import FORMAT_VERSION


def environment_meta() -> dict[str, Any]:
    """Versions recorded in every ``meta.json``.

    Lightning's version is read from the installed distribution's metadata, so the core
    package still never imports lightning.

    Example:
        >>> environment_meta()["store_format"]
        1
    """
    # Imported here, not at module level: the reader side of the store (``sentinel analyze``)
    # must not pay torch's ~1.6 s import; whoever writes a run has torch loaded already.
    import torch

    meta: dict[str, Any] = {
        "sentinel_version": sentinel.__version__,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "store_format": FORMAT_VERSION,
    }
    try:
        meta["lightning_version"] = importlib.metadata.version("lightning")
    except importlib.metadata.PackageNotFoundError:
        pass  # a raw-PyTorch install without lightning: nothing to record
    return meta


def now_iso() -> str:
    """Current UTC time as ISO 8601 with seconds precision, e.g. ``2025-01-31T12:00:00+00:00``."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def merge_meta(existing: dict[str, Any], user: dict[str, Any] | None) -> dict[str, Any]:
    """Meta for a writer opening a run dir: keep what is there, refresh versions, add ``user``.

    A fresh run gets ``created``; a resumed one keeps its ``created`` and appends the time to
    ``resumed``.

    Example:
        >>> m = merge_meta({}, {"config": {"lr": 1e-3}})
        >>> m["config"], "created" in m
        ({'lr': 0.001}, True)
    """
    merged = {**existing, **environment_meta(), **(user or {})}
    if "created" in existing:
        merged["created"] = existing["created"]
        merged["resumed"] = [*existing.get("resumed", []), now_iso()]
    else:
        merged.setdefault("created", now_iso())
    return merged
