"""The analyzer's result: a :class:`Report` of :class:`RunReport` s, independent of rendering."""

from __future__ import annotations

import enum
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from sentinel.analyze.incident import Incident, Severity
from sentinel.analyze.loaders import RunData


class Verdict(str, enum.Enum):
    """A run's health: nothing worth a warning, got past every problem, or did not; or, with no
    loss read and nothing found in what was, not judged (never "healthy": nothing said so)."""

    HEALTHY = "healthy"
    RECOVERED = "recovered"
    UNHEALTHY = "unhealthy"
    NO_LOSS = "no loss"


@dataclass
class RunReport:
    """What the analyzer found in one run.

    Attributes:
        name, path, source: where the run came from (see :class:`RunData`).
        steps: number of training steps (those with a loss logged; every row of a run without a
            loss); first_step/last_step: their range (None when empty).
        final_loss / best_loss: last and lowest finite loss (None without a loss series).
        verdict: :class:`Verdict`.
        incidents: in step order.
        warnings: what was skipped while reading, and what could not be judged.
        data: the loaded run (for plots and notebooks; not serialised).
        step_unit: ``"epoch"`` where each step is an epoch (a per-epoch table or history: the
            messages say epochs), else ``"step"``.
        loss_name: the source's own name for the series read as the loss (a table's column, a
            TensorBoard tag, a tracker's key: ``train_loss_step``, ``Loss/train``), where its reader
            records one; None where it does not (most text logs, whose lines say ``loss``).
    """

    name: str
    path: str
    source: str
    steps: int
    first_step: int | None
    last_step: int | None
    final_loss: float | None
    best_loss: float | None
    verdict: Verdict
    incidents: list[Incident] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    data: RunData | None = field(default=None, repr=False, compare=False)
    step_unit: str = "step"
    loss_name: str | None = None

    @property
    def counts(self) -> dict[str, int]:
        """Number of incidents per kind, e.g. ``{"loss_spike": 2, "rollback": 1}``."""
        return dict(Counter(i.kind for i in self.incidents))

    def incident_frame(self) -> pd.DataFrame:
        """The incidents as a DataFrame, one row each in step order, with the columns ``step``,
        ``end_step``, ``severity``, ``kind``, ``resolved`` and ``message`` (the numbers behind
        each are in ``incidents[i].details``).

        Example:
            >>> frame = sentinel.analyze("logs/run1").runs[0].incident_frame()  # doctest: +SKIP
            >>> frame[frame.severity != "info"][["step", "kind"]]  # doctest: +SKIP
        """
        return pd.DataFrame([{"step": i.step, "end_step": i.end_step, "severity": i.severity.value,
                              "kind": i.kind, "resolved": i.resolved, "message": i.message}
                             for i in self.incidents],
                            columns=["step", "end_step", "severity", "kind", "resolved", "message"])

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (see :mod:`sentinel.analyze.render.json_report` for the schema)."""
        return {"path": self.path, "name": self.name, "source": self.source, "steps": self.steps,
                "first_step": self.first_step, "last_step": self.last_step,
                "final_loss": self.final_loss, "best_loss": self.best_loss,
                "verdict": self.verdict.value, "incidents": [i.to_dict() for i in self.incidents],
                "warnings": list(self.warnings), "step_unit": self.step_unit, "loss_name": self.loss_name}


@dataclass
class Report:
    """Every analysed run.

    Example:
        >>> report = sentinel.analyze("logs/")  # doctest: +SKIP
        >>> [(r.name, r.verdict.value) for r in report.runs]  # doctest: +SKIP
        [('run1', 'recovered')]
    """

    runs: list[RunReport]

    def worst(self) -> Severity | None:
        """The highest severity among all incidents (None when there are none)."""
        severities = [i.severity for r in self.runs for i in r.incidents]
        return max(severities, key=lambda s: s.rank) if severities else None

    def has_at_least(self, severity: Severity | str) -> bool:
        """True when some incident is at least as severe as ``severity`` (``--fail-on``)."""
        severity = Severity(severity)
        return any(i.severity.rank >= severity.rank for r in self.runs for i in r.incidents)

    def to_dict(self) -> dict[str, Any]:
        """``{"runs": [...]}``, the JSON form."""
        return {"runs": [r.to_dict() for r in self.runs]}


_STEP_WORD = re.compile(r"\bstep(s?)\b")


def in_epochs(message: str) -> str:
    """A rule's message for a run whose steps are epochs: each "step" an "epoch".

    Example:
        >>> in_epochs("loss spike to 2.2 at step 21; recovered in 1 step (step 22)")
        'loss spike to 2.2 at epoch 21; recovered in 1 epoch (epoch 22)'
    """
    return _STEP_WORD.sub(r"epoch\1", message)


def verdict(incidents: list[Incident], final_loss_finite: bool, has_loss: bool = True) -> Verdict:
    """Unhealthy when a warning or critical incident was not got past or the run ends
    non-finite; recovered when there were such incidents but all were got past; else healthy,
    or "no loss" where no loss series was read (a run of grad norms or loss scales alone).

    Example:
        >>> verdict([], True).value, verdict([], True, has_loss=False).value
        ('healthy', 'no loss')
    """
    if not final_loss_finite or any(i.severity.rank >= Severity.WARNING.rank and not i.resolved for i in incidents):
        return Verdict.UNHEALTHY
    if any(i.severity.rank >= Severity.WARNING.rank for i in incidents):
        return Verdict.RECOVERED
    return Verdict.HEALTHY if has_loss else Verdict.NO_LOSS
