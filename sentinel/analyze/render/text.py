"""Number formatting shared by the text renderers (table, markdown)."""

from __future__ import annotations

import math


def fmt(value) -> str:
    """A number for a report cell: 4 significant digits, ``-`` when absent.

    Example:
        >>> fmt(0.123456), fmt(None), fmt(float("nan"))
        ('0.1235', '-', 'nan')
    """
    if value is None:
        return "-"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)
