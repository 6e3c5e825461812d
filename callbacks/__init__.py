"""Lightning adapter: ``from sentinel.callbacks import SentinelCallback``."""

from sentinel.callbacks.sentinel_callback import SentinelCallback

__all__ = ["SentinelCallback"]
