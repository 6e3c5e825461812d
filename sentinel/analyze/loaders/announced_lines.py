"""Lines in which a training tool says that it changed the loss itself, whatever prints the steps
around them: the loss moves to a new level there by design, not from damage
(:mod:`~sentinel.analyze.rule_announced`). Each is a ``new_level`` event with an ``announced``
detail, at the step of the record line after it.

Example:
    >>> bool(ANNOUNCED_LINES[0].pattern.search("2024-07-24 01:52:17.606 INFO: Changing loss based on SWA"))
    True
"""

from __future__ import annotations

import re

from sentinel.analyze.loaders.dialect_types import EventLine
from sentinel.events import EventKind

ANNOUNCED_LINES: tuple[EventLine, ...] = (
    # MACE's training loop, at its second stage (SWA / "stage two"): logging.info("Changing loss based on SWA")
    # (later releases: "... on Stage Two Weights"); its loss's weights change there (the energy's raised).
    EventLine(re.compile(r"Changing loss based on (?:SWA|Stage Two Weights)\b"), EventKind.NEW_LEVEL, source="mace",
              detail={"announced": "MACE's 'Changing loss based on SWA': its second stage's loss weights"}),
)

# Every line above holds one of these (asked of the text's distinct lines first).
WORDS = ("Changing loss based on",)
