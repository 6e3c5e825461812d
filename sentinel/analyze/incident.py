"""What the analyzer found: an :class:`Incident` is one thing worth telling, with numbers."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Severity(str, enum.Enum):
    """How bad an incident is. Ordered: ``info < warning < critical``."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """0 for info, 1 for warning, 2 for critical (for ``--fail-on`` comparisons)."""
        return _RANK[self]


_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


class IncidentKind(str, enum.Enum):
    """The closed set of incident kinds the rules produce."""

    LOSS_SPIKE = "loss_spike"
    OUTLIER_BATCH = "outlier_batch"
    SKIPPED_UPDATE = "skipped_update"
    DIVERGENCE = "divergence"
    GRAD_EXPLOSION = "grad_norm_explosion"
    GRAD_SPIKE = "grad_norm_spike"
    NONFINITE = "nonfinite"
    LOSS_SCALE_COLLAPSE = "loss_scale_collapse"
    OVERFLOW_RATE = "overflow_rate"
    ENTROPY_COLLAPSE = "entropy_collapse"
    PLATEAU = "plateau"
    OVERFITTING = "overfitting"
    LOSS_STUCK = "loss_stuck"
    LOSS_COLLAPSE = "loss_collapse"
    ZERO_GRAD = "zero_grad"
    ZERO_LR = "zero_lr"
    ROLLBACK = "rollback"
    SKIP = "skip"
    GAVE_UP = "gave_up"
    RESTART = "restart"
    CRASH = "crash"


@dataclass(frozen=True)
class Incident:
    """One finding in one run.

    Attributes:
        kind: an :class:`IncidentKind` value.
        step: the step it started at.
        end_step: the last step it covers (``step`` for a single-step finding).
        severity: :class:`Severity`.
        message: one line with the numbers that justify it.
        details: the numbers, JSON-serialisable; ``resolved`` (bool) says whether the run got
            past it, which decides the run's verdict.

    Example:
        >>> Incident("loss_spike", 120, 124, Severity.WARNING, "loss 9.1 at step 120").kind
        'loss_spike'
    """

    kind: str
    step: int
    end_step: int
    severity: Severity
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", IncidentKind(self.kind).value)
        object.__setattr__(self, "severity", Severity(self.severity))
        if self.end_step < self.step:
            raise ValueError(f"incident end_step {self.end_step} is before step {self.step}: "
                             "pass end_step >= step")

    @property
    def resolved(self) -> bool:
        """Whether the run got past this incident (``details["resolved"]``, default True)."""
        return bool(self.details.get("resolved", True))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``kind, step, end_step, severity, message, details``."""
        return {"kind": self.kind, "step": int(self.step), "end_step": int(self.end_step),
                "severity": self.severity.value, "message": self.message,
                "details": self.details}
