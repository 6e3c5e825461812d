"""Number formatting shared by the text renderers (table, markdown)."""

from __future__ import annotations

import math
import re

# Terminal escape sequences: CSI (colours, clear screen, cursor moves), OSC (window title,
# hyperlinks), DCS/SOS/PM/APC strings, and two-character escapes.
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]?|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[PX^_][^\x1b]*(?:\x1b\\)?|[ -~]?)"
                     r"|\x9b[0-?]*[ -/]*[@-~]?|\x9d[^\x07\x1b\x9c]*[\x07\x9c]?")
# C0 and C1 control characters, DEL, and the bidirectional overrides that reorder what is shown.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def clean_text(text: object) -> str:
    r"""``text`` safe to print on a terminal: escape sequences removed, every other control
    character (newlines and tabs included) shown as a space.

    Log contents (run names, module names, messages) reach the report: a crafted log must not
    clear the screen or retitle the window.

    Example:
        >>> clean_text("blocks.0\x1b[2J\x1b]0;pwned\x07.attn\nnext")
        'blocks.0.attn next'
    """
    return _CONTROL.sub(" ", _ESCAPE.sub("", str(text)))


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
