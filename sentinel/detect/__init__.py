"""Spike and divergence detectors: one definition each, an online and an offline mode.

Example:
    >>> import pandas as pd
    >>> from sentinel.detect import detect_spikes, detect_divergence
    >>> loss = pd.Series([2.0, 2.1, 2.0, 2.05, 9.0], index=[10, 20, 30, 40, 50])
    >>> detect_spikes(loss)["is_spike"].tolist()
    [False, False, False, False, True]
"""

from sentinel.detect.divergence import (
    DivergenceConfig,
    DivergenceDetector,
    DivergenceReason,
    DivergenceVerdict,
    detect_divergence,
)
from sentinel.detect.spike import SpikeConfig, SpikeDetector, SpikeVerdict, above_baseline, detect_spikes

__all__ = [
    "DivergenceConfig",
    "DivergenceDetector",
    "DivergenceReason",
    "DivergenceVerdict",
    "SpikeConfig",
    "SpikeDetector",
    "SpikeVerdict",
    "above_baseline",
    "detect_divergence",
    "detect_spikes",
]
