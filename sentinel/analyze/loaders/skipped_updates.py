"""DeepSpeed's count of the optimizer steps it skipped, read from its progress line in any text log.

DeepSpeed's engine prints ``[Rank 0] step=2000, skipped=1999, lr=[0.0], mom=[...]`` every
``steps_per_print`` steps, whatever else the script prints (a Hugging Face Trainer's dicts, a
Megatron line): ``skipped`` counts the steps whose gradients overflowed (fp16) and were not applied,
from the training's first step. A run that skips most of its steps does not train, though its loss
lines go on: the analyzer judges the count (:func:`~sentinel.analyze.rule_amp.skipped_update_incidents`).

Example:
    >>> skipped_counts("[Rank 0] step=10, skipped=4, lr=[1e-05]\\n[Rank 0] step=20, skipped=9, lr=[1e-05]\\n")
    {'first': [10, 4], 'before_last': [10, 4], 'last': [20, 9]}
"""

from __future__ import annotations

import re

WORD = "skipped="  # in every such line: a log without it is not searched
_PROGRESS = re.compile(r"\bstep=(\d+), skipped=(\d+), lr=")


def skipped_counts(text: str) -> dict | None:
    """The first, the one before the last and the last ``[step, skipped]`` of ``text``'s DeepSpeed
    progress lines (the line before the last tells whether the run still skipped at its end), or
    None where it has none, or where the count went back (launches appended to one file: each
    counts from its own start).

    Example:
        >>> skipped_counts("step 3 loss 2.0\\n") is None
        True
    """
    found = [(int(m.group(1)), int(m.group(2))) for m in _PROGRESS.finditer(text)]
    if not found or any(b[0] < a[0] or b[1] < a[1] for a, b in zip(found, found[1:])):
        return None
    return {"first": list(found[0]), "before_last": list(found[max(len(found) - 2, 0)]), "last": list(found[-1])}
