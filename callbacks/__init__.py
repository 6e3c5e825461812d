"""Lightning adapter: ``from sentinel.callbacks import SentinelCallback``."""
