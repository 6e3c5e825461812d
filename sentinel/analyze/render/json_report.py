"""JSON rendering with a stable schema.

Schema (version 1)::

    {"runs": [{"path": str, "name": str, "source": str, "steps": int,
               "first_step": int|null, "last_step": int|null,
               "final_loss": float|null, "best_loss": float|null,
               "verdict": "healthy"|"recovered"|"unhealthy"|"no loss",
               "incidents": [{"kind": str, "step": int, "end_step": int,
                              "severity": "info"|"warning"|"critical", "message": str,
                              "details": {...}}],
               "warnings": [str],
               "step_unit": "step"|"epoch",   # "epoch": each step is an epoch
               "loss_name": str|null}],   # the source's name for the loss read, where its reader records it
     "problems": [str], "skipped": [{"path", "reason", "detail"?}],   # when analysed by the CLI
     "plot": {...}, "fail_on": {"severity", "met", "incidents": [...]}}  # when asked for

Non-finite numbers (a run that ends in NaN) are written as ``null``: JSON has no NaN.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from sentinel.analyze.report import Report


def report_dict(report: Report) -> dict[str, Any]:
    """The report as plain, JSON-safe Python data (non-finite floats become None).

    Example:
        >>> report_dict(sentinel.analyze("logs/run1"))["runs"][0]["verdict"]  # doctest: +SKIP
        'healthy'
    """
    return _clean(report.to_dict())


def render_json(report: Report, indent: int | None = 2, extra: dict[str, Any] | None = None) -> str:
    """The report as a JSON document (see the module docstring for the schema).

    Args:
        report: what :func:`sentinel.analyze` returned.
        indent: JSON indentation (None for one line).
        extra: top-level keys added after ``runs`` (what was skipped, ``--fail-on``).

    Example:
        >>> json.loads(render_json(sentinel.analyze("logs/run1")))["runs"][0]["name"]  # doctest: +SKIP
        'run1'
    """
    doc = report_dict(report)
    if extra:
        doc.update(_clean(extra))
    return json.dumps(doc, indent=indent, allow_nan=False) + "\n"


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
