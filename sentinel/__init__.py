"""sentinel: training-stability toolkit for PyTorch and Lightning.

Record gradient norms, AMP loss scale, NaN/Inf sources and attention entropy; detect loss
spikes and divergence online; roll back to a good snapshot and skip the bad batches; explain
a run afterwards with ``sentinel analyze``.
"""

from typing import Any

__version__ = "0.1.0"

# Heavy parts (torch, pandas) load on first use, so `import sentinel` and the CLI start fast.
_LAZY = {
    "Sentinel": ("sentinel.engine", "Sentinel"),
    "TrainingGaveUp": ("sentinel.engine", "TrainingGaveUp"),
    "SentinelConfig": ("sentinel.config", "SentinelConfig"),
    "load_run": ("sentinel.store", "load_run"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'sentinel' has no attribute {name!r}")


def analyze(*paths: Any, **options: Any):
    """Load the runs under ``paths`` and explain them: see :func:`sentinel.analyze.analyzer.analyze`.

    Example:
        >>> report = analyze("logs/run1", window=64)  # doctest: +SKIP
        >>> report.runs[0].verdict.value  # doctest: +SKIP
        'healthy'
    """
    from sentinel.analyze.read_ahead import analyze_reading_ahead

    return analyze_reading_ahead(*paths, **options)
