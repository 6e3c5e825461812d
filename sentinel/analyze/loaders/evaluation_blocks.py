"""Evaluation passes told only by a line before them: ``Start Validation`` ... ``Start training``.

Some training scripts print the validation pass's lines in the very shape of the training lines
(Conv-TasNet's and Dual-Path-RNN's trainers: ``<epoch:3, iter:200, lr:1.000e-03, loss:-10.49>``
under ``Start Validation from epoch: 3, iter: 0``), so no word on a line tells them apart; read as
training, each pass looks like the run going back to an earlier step, and its values replace the
training's. What tells them apart is the line that opens each pass and the one that opens the
training again. Kept apart from the line-by-line evaluation split in textscan, which it feeds.

Example:
    >>> text = ("Start training\\nstep 1 loss 3\\nStart Validation\\nstep 1 loss 9\\n"
    ...         "Start training\\nstep 2 loss 2\\nStart Validation\\nstep 1 loss 8\\n")
    >>> spans, opening = evaluation_block_spans(text)
    >>> [text[a:b] for a, b in spans], opening
    (['step 1 loss 9', 'step 1 loss 8'], 'Start Validation')
"""

from __future__ import annotations

import re

from sentinel.analyze.loaders.log_lines import Lines

# A line that opens an evaluation pass ("Start Validation from epoch: 3, iter: 0", "Running
# evaluation", "Validation model ......", "Validating on dev_clean"): a verb of starting before the set's name, or
# the name
# alone after a logger's prefix. Not a line with a loss on it (a result, not an opening).
EVALUATION_OPENS = re.compile(
    r"(?im)^(?![^\n]*\bloss)[^\n]*?(?:"
    r"\b(?:start(?:s|ed|ing)?|begin(?:s|ning)?|run(?:ning)?)[^\S\n]+(?:the[^\S\n]+)?"
    r"(?:validation|validating|evaluation|evaluating|eval|valid|val|test|testing)\b"
    r"|(?:^|[]>|:-][^\S\n])[^\S\n]*(?:validation|validating|evaluation|evaluating|testing)"
    r"(?:[^\S\n]+(?:model|phase|stage|loop))?(?:[^\S\n]+on[^\S\n]+\S[^\n]*?)?[^\S\n]*(?:\.{2,}|:)?[^\S\n]*$)[^\n]*")
# A line that opens the training again ("Start training from epoch: 4, iter: 0", "Training model
# ......", "Training on ['train_clean_100']").
TRAINING_OPENS = re.compile(
    r"(?im)^(?![^\n]*\bloss)[^\n]*?(?:"
    r"\b(?:start(?:s|ed|ing)?|begin(?:s|ning)?|run(?:ning)?|resum(?:e|es|ed|ing))[^\S\n]+(?:the[^\S\n]+)?"
    r"train(?:ing)?\b"
    r"|(?:^|[]>|:-][^\S\n])[^\S\n]*training(?:[^\S\n]+(?:model|phase|stage|loop))?(?:[^\S\n]+on[^\S\n]+\S[^\n]*?)?"
    r"[^\S\n]*(?:\.{2,}|:)?[^\S\n]*$)"
    r"[^\n]*")
_LINE = re.compile(r"[^\n]+")
# Where an opening's own words start, after a logger's prefix (``[trainer.py:113 - INFO ] Start Validation``).
_FIRST_WORD = re.compile(r"(?i)\b(?:start|begin|run|validation|validating|evaluation|evaluating|testing)")


def evaluation_block_spans(text: str, lines: Lines | None = None) -> tuple[list[tuple[int, int]], str]:
    """Where each non-empty line of the evaluation passes starts and ends (its line end left out),
    in text order: the lines after each line that opens an evaluation up to the next line that
    opens the training. Only where the two alternate (an evaluation opened again before the
    training was: the openings are not read as such, and nothing is given) and one pass at least
    was closed by the training's opening; a last pass left open runs to the end of the text.
    ``lines``: ``Lines(text)`` where made already. Also the first line that opens a pass (stripped),
    to name them by.

    Example:
        >>> evaluation_block_spans("Start Validation\\nloss 1\\n")  # never closed: nothing told
        ([], '')
    """
    lines = Lines.of(text, lines)
    distinct = lines.distinct_text()
    if distinct is not lines.text and not (EVALUATION_OPENS.search(distinct) and TRAINING_OPENS.search(distinct)):
        return [], ""  # most logs: asked of their distinct lines (Python's re over a whole text: ~50 ms a megabyte)
    evaluations = _whole_lines(text, lines, EVALUATION_OPENS)
    if not evaluations:
        return [], ""
    openings = sorted([(start, end, True) for start, end in evaluations]
                      + [(start, end, False) for start, end in _whole_lines(text, lines, TRAINING_OPENS)])
    blocks: list[tuple[int, int]] = []
    opened = None  # where the open pass's lines start
    first = ""
    for start, end, evaluates in openings:
        if evaluates:
            if opened is not None:
                return [], ""
            opened = end
            first = first or _named(text[start:end])
        elif opened is not None:
            blocks.append((opened, start))
            opened = None
    if not blocks:
        return [], ""
    if opened is not None:
        blocks.append((opened, len(text)))
    return [m.span() for start, end in blocks for m in _LINE.finditer(text, start, end)], first


def _whole_lines(text: str, lines: Lines, pattern: re.Pattern) -> list[tuple[int, int]]:
    """Where each line ``pattern`` matches starts and ends in ``text``: the lines are found in the
    few that :meth:`Lines.matching` hands it (a search of the whole text with a pattern tried at
    each line's every position took ~50 ms a megabyte), then each in the text, in order."""
    spans, pos = [], 0
    for match in pattern.finditer(lines.matching(pattern)):
        line = match.group()
        at = text.find(line, pos)
        while at >= 0 and not ((at == 0 or text[at - 1] == "\n")
                               and (at + len(line) == len(text) or text[at + len(line)] == "\n")):
            at = text.find(line, at + 1)
        if at < 0:
            break
        spans.append((at, at + len(line)))
        pos = at + len(line)
    return spans


def _named(line: str) -> str:
    """An opening line from its own words on (a logger's prefix left out)."""
    found = _FIRST_WORD.search(line)
    return line[found.start() if found else 0:].strip()


# A record line's epoch and count: "Epoch: [0][ 99/5005]" (the ImageNet example's ProgressMeter, and the
# scripts copied from it), its prefix before the epoch kept to tell its own lines from another's.
_EPOCH_COUNT = re.compile(r"(?m)^([^\n\[]*)\[[^\S\n]*(\d+)[^\S\n]*\]"
                          r"\[[^\S\n]*\d+[^\S\n]*/[^\S\n]*(\d+)[^\S\n]*\][^\n]*")


def shorter_pass_spans(text: str, lines: Lines | None = None) -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """Where each line of the evaluation passes told by their count starts and ends (its line end
    left out), in text order, and ``(the training's length, the passes')``: the ImageNet example's
    ProgressMeter prints the validation's batches as "Epoch: [0][ 99/782]" after the epoch's training
    ones, "Epoch: [0][4999/5005]", in the very same shape. Lines of one prefix and epoch that count to
    a shorter total after the epoch's first lines, in every epoch that has them; ``([], (0, 0))`` where
    there are none.

    Example:
        >>> text = ("Epoch: [0][1/9] Loss 3\\nEpoch: [0][9/9] Loss 2\\nEpoch: [0][1/4] Loss 9\\n"
        ...         "Epoch: [1][1/9] Loss 1\\n")
        >>> spans, lengths = shorter_pass_spans(text)
        >>> [text[a:b] for a, b in spans], lengths
        (['Epoch: [0][1/4] Loss 9'], (9, 4))
    """
    distinct = lines.distinct_text() if lines is not None else text
    found = [(m.group(1), int(m.group(2)), int(m.group(3)), m.span()) for m in _EPOCH_COUNT.finditer(text)] \
        if "][" in distinct else []
    if not found:  # (bars holding a loss in their description, looked for among the distinct lines first)
        return _shorter_bars(text) if "%|" in distinct and _LOSS_BAR.search(distinct) else ([], (0, 0))
    spans: list[tuple[int, int]] = []
    lengths: set[tuple[int, int]] = set()
    group: list = []
    for record in [*found, None]:
        if record is not None and group and record[:2] == group[0][:2]:
            group.append(record)
            continue
        if group:
            length = group[0][2]
            later = [r for r in group if r[2] != length]
            if later and all(r[2] < length for r in later) and group.index(later[0]) + len(later) == len(group):
                spans += [r[3] for r in later]
                lengths |= {(length, r[2]) for r in later}
        group = [record] if record is not None else []
    if len(lengths) != 1:
        return [], (0, 0)  # (one training length, one pass length: anything else is some other count)
    return spans, lengths.pop()


# A tqdm bar whose description holds a loss ("loss 0.043, accuracy 0.987: 100%|#| 313/313 [00:01<00:00"): its count and
# total.
_LOSS_BAR = re.compile(r"(?im)^[^\n]*?\bloss\b[^\n]*?\d+%\|[^|\n]*\|[^\S\n]*(\d+)/(\d+)[^\S\n]*\[[^\n]*")


def _shorter_bars(text: str) -> tuple[list[tuple[int, int]], tuple[int, int]]:
    """:func:`shorter_pass_spans` for tqdm bars whose description holds the loss: an evaluation's bar, of a
    shorter total, drawn right after each finished training bar (an LSTM stemmer's "313/313" after each epoch's
    "91780/91780"); ``([], (0, 0))`` where the bars do not alternate so.

    Example:
        >>> bar = "loss {}: 100%|#| {}/{} [00:01<00:00, 47.7it/s]"
        >>> text = "\\n".join([bar.format(0.1, 90, 90), bar.format(0.5, 3, 3)] * 2)
        >>> spans, lengths = _shorter_bars(text)
        >>> [text[a:b][:8] for a, b in spans], lengths
        (['loss 0.5', 'loss 0.5'], (90, 3))
    """
    bars = [(int(m.group(1)), int(m.group(2)), m.span()) for m in _LOSS_BAR.finditer(text)]
    if len({total for _, total, _ in bars}) != 2:
        return [], (0, 0)
    longest = max(total for _, total, _ in bars)
    spans, shorter, passes = [], 0, 0
    for k, (done, total, span) in enumerate(bars):
        if total == longest:
            continue
        before = bars[k - 1] if k else None
        if before is None or not (before[1] == longest and before[0] == longest or before[1] == total):
            return [], (0, 0)  # (a shorter bar not after a finished training bar: no evaluation's)
        passes += before[1] == longest
        spans.append(span)
        shorter = total
    # (two passes at least, each between training bars: one stretch of shorter bars to the end is a batch size
    # that changed, ResNet-50's 10010 bars an epoch, then 5005)
    return (spans, (longest, shorter)) if passes >= 2 else ([], (0, 0))
