"""Attention entropy collapse: one rule, an online mode (the recorder) and an offline mode
(the analyzer).

Attention entropy falls slowly and healthily while a model learns (uniform attention at
initialisation sharpens). A collapse (Zhai et al. 2023) is a fast fall: a sample below ``ratio``
of the median of the ``previous`` samples just before it. The same goes, upwards, for the largest
attention logit (Wortsman et al. 2023 see it grow by an order of magnitude before a divergence):
a sample above ``logit_growth`` times the median of the samples before it.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass
from typing import Any

import pandas as pd


@dataclass(frozen=True, kw_only=True, slots=True)
class EntropyConfig:
    """Attributes:
        ratio: collapse when a sample falls below this fraction of the trailing median (0.5:
            learning sharpens attention by a few percent per sample, a collapse halves it).
        logit_growth: blow-up when the max logit exceeds this multiple of its trailing median.
        previous: samples in the trailing reference (3: with the default sampling every 50
            steps, the 150 steps before).
    """

    ratio: float = 0.5
    logit_growth: float = 10.0
    previous: int = 3

    def __post_init__(self) -> None:
        if not 0 < self.ratio < 1:
            raise ValueError(f"EntropyConfig.ratio={self.ratio!r} must be in (0, 1)")
        if not self.logit_growth > 1:
            raise ValueError(f"EntropyConfig.logit_growth={self.logit_growth!r} must be > 1")
        if not isinstance(self.previous, int) or self.previous < 1:
            raise ValueError(f"EntropyConfig.previous={self.previous!r} must be an int >= 1")


def collapsed(entropy: pd.Series, config: EntropyConfig = EntropyConfig()) -> pd.Series:
    """Offline: for each sample of one module's entropy, whether it collapsed.

    Example:
        >>> collapsed(pd.Series([3.0, 2.9, 2.8, 2.7, 1.0])).tolist()
        [False, False, False, False, True]
    """
    reference = entropy.rolling(config.previous).median().shift(1)
    return entropy < config.ratio * reference


def logit_blown_up(logit_max: pd.Series, config: EntropyConfig = EntropyConfig()) -> pd.Series:
    """Offline: for each sample of one module's max attention logit, whether it blew up.

    Example:
        >>> logit_blown_up(pd.Series([5.0, 6.0, 5.5, 80.0])).tolist()
        [False, False, False, True]
    """
    reference = logit_max.rolling(config.previous).median().shift(1)
    return (logit_max > config.logit_growth * reference) & (reference > 0)


class EntropyWatch:
    """Online: feed each module's sampled entropy; says when it has just collapsed.

    Example:
        >>> watch = EntropyWatch()
        >>> [watch.update("blocks.0.attn", v) for v in (3.0, 2.9, 2.8, 1.0)]
        [False, False, False, True]
    """

    def __init__(self, config: EntropyConfig = EntropyConfig()) -> None:
        self.config = config
        self._history: dict[str, deque[float]] = {}

    def update(self, module: str, entropy: float) -> bool:
        history = self._history.setdefault(module, deque(maxlen=self.config.previous))
        full = len(history) == self.config.previous
        hit = full and entropy < self.config.ratio * statistics.median(history)
        history.append(entropy)
        return bool(hit)

    def state_dict(self) -> dict[str, Any]:
        return {"history": {k: list(v) for k, v in self._history.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._history = {k: deque(v, maxlen=self.config.previous)
                         for k, v in state.get("history", {}).items()}
