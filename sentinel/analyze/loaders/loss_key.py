"""A text log whose loss goes by a name no reader knows (``avg_loss``, ``Loss/train``,
``trainLoss``, ``gpt_loss``): where its lines name one key that can be the training loss, and no
other that could as well be, the key is read as the loss (its name judged as a table's column
names are, :func:`~sentinel.analyze.loaders.keys.infer_loss_column`).

Example:
    >>> text = "".join(f"step {s} | avg_loss: 2.{s} | lr 1e-4\\n" for s in range(3))
    >>> key = inferred_loss_key(text); key
    'avg_loss'
    >>> loss_key_as_loss(text, key).splitlines()[0]
    'step 0 | loss: 2.0 | lr 1e-4'
"""

from __future__ import annotations

import re

from sentinel.analyze.loaders.keys import infer_loss_column, is_aggregate, looks_like_loss
from sentinel.analyze.loaders.log_lines import Lines

# A key then its number: "key: 2.3", "key=2.3", "'key': 2.3", "key 2.3".
# Only keys that name a loss (a loss word is in "loss", "Loss", "LOSS"); the key taken whole.
_PAIR = re.compile(r"(?<![\w/.-])(?=[\w/.-]*(?:oss|OSS))([A-Za-z][\w/.-]*)['\"]?[^\S\n]*(?:[:=][^\S\n]*|[^\S\n])"
                   r"['\"]?[-+]?(?:\d|\.\d|nan\b|inf\b)")


def inferred_loss_key(text: str) -> str | None:
    """The key of ``text``'s ``key: number`` pairs that is its training loss, or None where no
    key, or more than one equally, can be (``loss_ce`` beside ``loss_kl``: the user's choice).
    Asked of the text's distinct lines (:meth:`Lines.distinct_text`); a key with a digit is
    none (its skeleton differs from line to line)."""
    distinct = Lines.shared(text).distinct_text()
    # Only lines that name a loss ("loss", "Loss", "LOSS"): prose holds few, and the pairs' search
    # over a megabyte of it took 75 ms.
    named = "\n".join(line for line in distinct.split("\n") if "oss" in line or "OSS" in line)
    keys = {m.group(1) for m in _PAIR.finditer(named)}
    return infer_loss_column(sorted(k for k in keys if not any(c.isdigit() for c in k) and looks_like_loss(k)))


def loss_key_as_loss(text: str, key: str) -> str:
    """``text`` with ``key`` written as ``loss`` wherever it stands as a key of its own."""
    return re.sub(rf"(?<![\w/.-]){re.escape(key)}(?![\w/.-])", "loss", text)


def loss_key_note(key: str) -> str:
    """What the run's warnings say of the key read as the loss.

    Example:
        >>> loss_key_note("batch_loss")
        "loss read from 'batch_loss' (no key of the lines is named loss)"
    """
    note = f"loss read from {key!r} (no key of the lines is named loss)"
    if is_aggregate(key):
        note += ": an average over steps, in which a one-step spike shows smaller"
    return note
