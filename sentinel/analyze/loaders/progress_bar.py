"""Steps from the tqdm progress bar printed beside records that carry no step of their own.

The Hugging Face Trainer prints each log dict through its training bar (``tqdm.write``): the
bar is cleared, the dict printed, and the bar drawn again at the count the dict was logged at.
A pasted log shows each dict before that draw (the draw before it may still show the step
before: tqdm draws at most every 0.1 s)::

     2%|▏         | 1/60 [00:00<00:03, 15.19it/s]
    {'loss': '3.877', 'grad_norm': '1.25', 'learning_rate': '0.003', 'epoch': '0.03333'}
     3%|▎         | 2/60 [00:00<00:02, 27.20it/s]

The first draw after the dict has its optimizer step. The evaluation bar (its own total, counting from
0 again at every evaluation) is told apart from the training bar by its total.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np


def _bar_pattern(total: str = r"\d+") -> re.Pattern:
    """A draw of a tqdm bar (its default format, "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/
    {total_fmt} [{elapsed}<..."): groups count and total."""
    return re.compile(rf"\d{{1,3}}%\|[^|\n]*\|\s*(\d+)/({total})\s*\[")


_BAR = _bar_pattern()


# Records one draw may follow: a step's dict, the same step printed twice (LLaMA-Factory), and
# an evaluation's dict.
_PER_DRAW = 3


def bar_steps(text: str, record: re.Pattern, key: str = "step", own: tuple[str, ...] = ()) -> str | None:
    """``text`` with ``'<key>': N`` added to every record, N the training bar's count beside it;
    None when the text has no training bar or fewer than two records, more than three records
    share a draw (a copied terminal screen: the dicts stacked above the bar), or
    the counts fall (two runs in one paste): the records are then numbered in order.

    A record takes the first draw of the training bar after it: the redraw that follows
    ``tqdm.write``, at the count the dict was logged at (records printed together share it, as
    one step printed twice does). Records after the last draw (a paste cut after a dict) take
    the step one logging interval later. Records that already hold ``key``, or one of ``own`` (a
    step of their own under another name), are left alone.

    Args:
        text: the cleaned log text (``\\r`` redraws already split into lines).
        record: matches one record, ending at its closing ``}``.
        key: the name of the step field added.

    Example:
        >>> log = "{'loss': 1.2}\\n 4%|4  | 10/250 [00:30<12:00]\\n{'loss': 1.1}\\n 8%|8  | 20/250 [01:00<11:30]\\n"
        >>> bar_steps(log, re.compile(r"\\{'loss': [^{}\\n]*\\}")).splitlines()[2]
        "{'loss': 1.1, 'step': 20}"
    """
    if "%|" not in text:
        return None
    records = list(record.finditer(text))
    held = [words for words in (f"'{key}':", *own) if words in text]
    if held:
        records = [m for m in records if not any(words in m.group(0) for words in held)]
    if len(records) < 2:
        return None
    draws = [_BAR.search(text, m.end()) for m in records]  # the first draw after each record
    totals = Counter(d.group(2) for d in draws if d is not None)
    if not totals:
        return None
    # The training bar: the total most draws after a record have. Where another bar comes first
    # (an evaluation's, its redraw lost), the training bar's next draw.
    total = totals.most_common(1)[0][0]
    training = _bar_pattern(total)
    draws = [d if d is None or d.group(2) == total else training.search(text, d.end()) for d in draws]
    drawn = [d for d in draws if d is not None]
    # A terminal's screen copied: every dict stacked above the one draw left at the bottom. The
    # records after the last draw (a paste cut after a dict) share one step, as if drawn.
    shared = Counter(d.start() for d in drawn)
    if len(drawn) < len(draws):
        shared[-1] = len(draws) - len(drawn)
    if max(shared.values()) > _PER_DRAW or len(shared) < 2:
        return None
    steps = [int(d.group(1)) for d in drawn]
    glued = _glued_steps(text, records, draws, training)
    if glued is not None:
        steps, drawn = glued, draws
    if any(b < a for a, b in zip(steps, steps[1:])):  # two runs in one paste
        return None
    if len(drawn) < len(draws):  # the step one logging interval after the last drawn one
        gap = _interval(steps)
        if gap is None:  # one drawn step: the draw just before the cut record (a slow step's bar is drawn at each)
            before = [int(d.group(1)) for d in training.finditer(text, 0, records[len(drawn)].start())]
            gap = before[-1] - steps[-1] if before and before[-1] > steps[-1] else 1
        steps += [steps[-1] + gap] * (len(draws) - len(drawn))
    steps = _before_the_first_draw(text, records, steps, training)
    out, last = [], 0
    for m, step in zip(records, steps):
        close = m.end() - 1  # the record's closing brace
        out.append(text[last:close])
        out.append(f", '{key}': {step}")
        last = close
    out.append(text[last:])
    return "".join(out)


def _glued_steps(text: str, records: list[re.Match], draws: list[re.Match | None],
                 training: re.Pattern) -> list[int] | None:
    """The counts of the draws each record is printed right after, on its line, where the paste
    kept no redraw between records: the first draw after each is the one the next record is
    glued to (a terminal's copy, each line the last draw before a ``tqdm.write``: LLaMA-Factory's
    PPO loop, ``  1%|...| 9/860 [...]{'loss': nan, ...}``). The first draw after a record is then
    the next logging interval's, not its own; else None.

    Example:
        >>> bar = " {}%|#  | {}/860 [00:43<1:05:18,  4.60s/it]"
        >>> log = bar.format(1, 9) + "{'loss': 0.5}\\n" + bar.format(2, 19) + "{'loss': 0.4}\\n" + bar.format(3, 27)
        >>> re.findall(r"'step': (\\d+)", bar_steps(log, re.compile(r"\\{'loss': [^{}\\n]*\\}")))
        ['9', '19']
    """
    glued_to = re.compile(training.pattern + r"[^\]\n]*\][^\S\n]*$")
    glued = []
    for m in records:
        line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        found = glued_to.search(line) if "|" in line else None
        if found is None:
            return None
        glued.append((m.start() - len(line) + found.start(), int(found.group(1))))
    lost = all(d is not None and d.start() == start for d, (start, _) in zip(draws, glued[1:]))
    return [count for _, count in glued] if lost else None


def _interval(steps: list[int]) -> int | None:
    """The logging interval of the records' steps (the median gap of the distinct ones); None
    where they hold one step."""
    distinct = sorted(set(steps))
    return int(np.median(np.diff(distinct))) if len(distinct) > 1 else None


_LOSS = re.compile(r"'loss': '?([^,'}\s]+)")


def _before_the_first_draw(text: str, records: list[re.Match], steps: list[int], training: re.Pattern) -> list[int]:
    """``steps`` with the records a paste opens with, before any draw of the training bar, that
    share its first draw and print different losses (the Trainer's dicts of steps 50 and 60 above
    the bar at 60: a paste started mid-run) stepped back by the logging interval from that draw;
    records of one step printed twice (LLaMA-Factory's line and the Trainer's dict) keep it."""
    first = training.search(text)
    if first is None:
        return steps
    lead = sum(m.end() <= first.start() for m in records)  # records are in text order: the first ``lead``
    if lead < 2:
        return steps
    losses = [_LOSS.search(m.group(0)) for m in records[:lead]]
    try:
        distinct = len({float(m.group(1)) for m in losses if m is not None}) == lead
    except ValueError:
        return steps
    gap = _interval(steps[lead - 1:])
    if not distinct or gap is None:
        return steps
    return [steps[lead - 1] - gap * (lead - 1 - i) for i in range(lead)] + steps[lead:]
