"""Trainer adapters: ``from sentinel.callbacks import SentinelCallback`` (Lightning) and
``from sentinel.callbacks import SentinelTrainerCallback`` (Hugging Face ``transformers``).

The ``transformers`` adapter is imported on first use, so this package imports without
``transformers`` installed.
"""

from typing import Any

from sentinel.callbacks.sentinel_callback import SentinelCallback

__all__ = ["SentinelCallback", "SentinelTrainerCallback"]


def __getattr__(name: str) -> Any:
    if name == "SentinelTrainerCallback":
        from sentinel.callbacks.hf_trainer import SentinelTrainerCallback

        return SentinelTrainerCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
