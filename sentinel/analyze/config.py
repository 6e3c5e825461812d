"""Thresholds of the analyzer's rules (``sentinel.analyze(path, **thresholds)``)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any


# The longest spike-detector window taken: longer than any run's history (a window beyond int64
# would overflow the detector's arrays).
MAX_WINDOW = 1_000_000_000


class InvalidThreshold(ValueError):
    """A threshold the rules cannot take; ``name`` is the setting (``--<name>`` on the command line).

    Example:
        >>> InvalidThreshold("window", "window=0 is invalid").name
        'window'
    """

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class AnalyzeConfig:
    """Thresholds for the rules. ``None`` for ``window``/``threshold``/``warmup`` means the
    detector's own default (the guard's definition of a spike).

    Attributes:
        window: trailing window of the spike detector (``--window``).
        threshold: spike score threshold of the detector (``--threshold``).
        warmup: steps the detector ignores at the start (``--warmup``).
        recover_steps: a spike, or a rollback, counts as recovered when the loss is back under
            its pre-spike level within this many steps. 200: PaLM restarted ~100 steps before
            a spike and skipped 200-500 batches, so recovery is judged on that scale.
        recover_frac: "back under the pre-spike level" allows this fraction of the spike's
            height above the baseline (0.1: 90% of the excess gone), so noise does not hide
            a recovery.
        grad_lead_max: a grad-norm explosion "preceded" a loss spike when the spike began
            within this many steps after it (10: the loss reacts within a few updates), or
            while the grad norm was still up.
        loss_scale_floor: a dynamic loss scale below this has collapsed (1.0: fp16 then
            underflows most gradients).
        loss_scale_drop_orders: ... or fell by this many orders of magnitude from its peak.
        loss_scale_fall_orders: a warning when the loss scale fell by this many orders of
            magnitude within ``loss_scale_fall_window`` steps (1.0: x10, at least 4 halvings).
        loss_scale_fall_window: ... steps (100). A healthy dynamic scaler halves about once per
            growth interval (torch's GradScaler 2000 steps, Megatron/DeepSpeed's
            ``loss_scale_window`` 1000) and then grows back, so four halvings in 100 steps take
            a streak of overflows: BigScience tr8b-104B went 1048576 -> 32768 in 6 iterations
            with an OVERFLOW message before 6 of 9, at its spike.
        overflow_rate: warn when more than this fraction of steps overflowed (0.05: a healthy
            GradScaler overflows about once per growth interval, 1/2000).
        entropy_ratio: attention entropy has collapsed when a sample falls below this fraction
            of the median of the samples just before it (0.5: learning sharpens attention
            slowly, a collapse (Zhai et al. 2023) halves it between two samples).
        logit_growth: ... or when the largest attention logit jumps by this factor over the
            same trailing reference (10x: Wortsman et al. 2023 see logits grow by an order of
            magnitude before the loss diverges).
        early_samples: how many preceding samples form that trailing reference (3).
        plateau_window: no improvement of the best loss over this many steps is a plateau.
        plateau_rtol: improvement smaller than this fraction of the best loss does not count.
        overfit_rise: an evaluation loss this fraction above its best, while the training loss
            fell, is overfitting (0.1) ...
        overfit_evals: ... when the last this many evaluations after the best all stay above it
            by half that (3: one bad evaluation is noise).

    Example:
        >>> AnalyzeConfig(recover_steps=100).recover_steps
        100
    """

    window: int | None = None
    threshold: float | None = None
    warmup: int | None = None
    recover_steps: int = 200
    recover_frac: float = 0.1
    grad_lead_max: int = 10
    loss_scale_floor: float = 1.0
    loss_scale_drop_orders: float = 3.0
    loss_scale_fall_orders: float = 1.0
    loss_scale_fall_window: int = 100
    overflow_rate: float = 0.05
    entropy_ratio: float = 0.5
    logit_growth: float = 10.0
    early_samples: int = 3
    plateau_window: int = 1000
    plateau_rtol: float = 0.01
    overfit_rise: float = 0.1
    overfit_evals: int = 3

    def __post_init__(self) -> None:
        # The spike detector's own limits (sentinel.detect.SpikeConfig), said in the user's terms.
        if self.window is not None and not (_is_int(self.window) and 4 <= self.window <= MAX_WINDOW):
            raise InvalidThreshold("window", f"window={self.window!r} is invalid: pass an integer from 4 to "
                                             f"{MAX_WINDOW} (values of history), or leave it out for the default")
        if self.warmup is not None and not (_is_int(self.warmup) and 2 <= self.warmup <= (self.window or MAX_WINDOW)):
            most = f"the window, {self.window}" if self.window is not None else "the window"
            raise InvalidThreshold("warmup", f"warmup={self.warmup!r} is invalid: pass an integer from 2 to {most} "
                                             "(values of history), or leave it out for the default")
        if self.threshold is not None and not (self.threshold > 0 and math.isfinite(self.threshold)):
            raise InvalidThreshold("threshold", f"threshold={self.threshold!r} is invalid: pass a positive finite "
                                                "number (robust sigmas), or leave it out for the default")
        for name in ("recover_steps", "grad_lead_max", "early_samples", "plateau_window",
                     "loss_scale_fall_window", "overfit_evals"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} is invalid: pass an integer >= 1")
        for name in ("recover_frac", "overflow_rate", "entropy_ratio", "plateau_rtol"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise ValueError(f"{name}={value!r} is invalid: pass a fraction between 0 and 1")
        for name in ("loss_scale_floor", "loss_scale_drop_orders", "loss_scale_fall_orders", "logit_growth",
                     "overfit_rise"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)!r} is invalid: pass a positive number")

    @classmethod
    def from_kwargs(cls, **thresholds: Any) -> "AnalyzeConfig":
        """Build from keyword thresholds, naming the valid ones when a key is unknown.

        Example:
            >>> AnalyzeConfig.from_kwargs(window=20).window
            20
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(thresholds) - names)
        if unknown:
            raise ValueError(f"unknown threshold(s) {', '.join(unknown)}: "
                             f"use one of {', '.join(sorted(names))}")
        return cls(**thresholds)
