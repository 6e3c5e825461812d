"""The line-scanning engine behind every text-log dialect.

A dialect (:mod:`sentinel.analyze.loaders.dialects`) says how a record line is recognised and
how its fields are named; this module turns a whole log into a steps frame and events with no
per-tool code. The work is done over the whole text at once, so a 20,000-step log costs a few
C-level passes, not 20,000 rounds of Python:

1. clean the text: ANSI colour codes, ``\\r`` progress-bar redraws and ``> `` markdown quoting
   (logs pasted into GitHub issues) are removed;
2. the text is split into lines once (pyarrow) and each record pattern, loosened into an RE2
   pattern that matches a superset of its lines (lookarounds dropped), picks the candidate
   lines in one vectorised pass; ``Shape.pattern.findall`` then runs only over those lines
   (a line that no shape can match costs no Python regex work);
3. the bodies are joined, the shape's separator strings become spaces, and pyarrow splits
   them into tokens: the shape's ``head`` fields first, then ``key value`` pairs;
4. every value token is converted to a number in one vectorised pass (pyarrow's parser, with
   a regex check only for a column that holds text), units such as ``41873ms`` / ``1.2s``
   becoming ``<key>_ms``; keys are dictionary-encoded, so a key costs Python work once, not
   once per line;
5. records of the same step merge; events (overflow lines) are found with their own patterns
   and given the step they belong to.

Beyond ``key value`` tokens, a shape may read a field list whose names are phrases (Megatron's
``| lm loss: 2.7 | grad norm: 0.3 |``, :attr:`Shape.fields`) and raise events from a field's
value (:class:`RecordEvent`); a dialect may keep only the last record of a step logged again
after a restart (:attr:`Dialect.restarts`) and read the lines exactly as printed
(:attr:`Dialect.clean`).

Most logs repeat one line template per record kind, with other numbers. For a pattern that
stays inside a line and cannot tell one digit from another
(:func:`~sentinel.analyze.loaders.pattern_locality.line_local`), steps 2-4 take a faster road that
gives the same result (:func:`~sentinel.analyze.loaders.template_reader.read_templates`): the
lines are grouped by skeleton (each digit written as ``0``,
:class:`~sentinel.analyze.loaders.log_lines.Skeletons`), the pattern runs once per skeleton,
and the numbers of all records are cut out of the text at the spans that gives and converted by
one pyarrow cast; a shape whose lines do not allow it (a key with a digit, a value that is not
a number, hardly any repeated skeleton) is read the general way.

A record is one line: a pattern that could match across a line end (``\\s`` before a
newline) only matches within a line.

The engine's parts, each in its own module:

- :mod:`~sentinel.analyze.loaders.dialect_types`: what a dialect is made of (:class:`Dialect`,
  :class:`Shape`, :class:`EventLine`, :class:`RecordEvent`);
- :mod:`~sentinel.analyze.loaders.log_lines`: the text split into lines once (:class:`Lines`);
- :mod:`~sentinel.analyze.loaders.pattern_re2`: a pattern's RE2 superset that picks candidate lines;
- :mod:`~sentinel.analyze.loaders.pattern_locality`: whether a pattern may be run per skeleton;
- :mod:`~sentinel.analyze.loaders.record_fields`: the field rules both record readers share;
- :mod:`~sentinel.analyze.loaders.template_reader`: the fast reader of repeated line templates;
- :mod:`~sentinel.analyze.loaders.text_events`: event lines and the events of record fields;
- this module: :func:`scan`, :func:`count_records`, the general record reader and the merge of
  records into one row per step.

Example:
    >>> from sentinel.analyze.loaders.dialects import NANOGPT
    >>> scan("iter 1: loss 2.5, time 9.1ms, mfu 1.0%\\niter 2: loss 2.4, time 9.0ms, mfu 1.0%\\n",
    ...      NANOGPT).steps["loss"].tolist()
    [2.5, 2.4]
"""

from __future__ import annotations

import collections
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from sentinel import metrics
from sentinel.analyze.loaders import (LOGGED_NAN, LOSS_SCALE_MIN, OVERFLOW_ROWS_ONLY, RESTARTED_FROM, RESTARTED_LENGTH,
                                      STEP_UNIT,
                                      AbandonedHistory, LoadOptions)
from sentinel.analyze.loaders.dialect_types import HEAD_ROLES, Dialect, Shape
from sentinel.analyze.loaders.field_lists import SHOWN, field_bodies
from sentinel.analyze.loaders.keys import STEP_LIMIT
from sentinel.analyze.loaders.launcher_ranks import one_rank
from sentinel.analyze.loaders.evaluation_blocks import evaluation_block_spans, shorter_pass_spans
from sentinel.analyze.loaders.epoch_counts import epoch_length as _epoch_length, length_of_global_prints
from sentinel.analyze.loaders.log_words import in_english
from sentinel.analyze.loaders.log_lines import Lines
from sentinel.analyze.loaders.pattern_prefix import literal_first
from sentinel.analyze.loaders.repeated_steps import several_losses_per_step
from sentinel.analyze.loaders.record_fields import (KEY, NAN_PREFIX, NUMBER_SYNTAX, check_heads, marks_nan, metric_name,
                                                    prefixed, unit_suffix, units_order, watches_nonfinite, widest)
from sentinel.analyze.loaders.template_reader import read_templates
from sentinel.analyze.loaders.text_events import (count_overflows, event_rows, read_events, stamp,
                                                  with_record_events)
from sentinel.analyze.loaders.textlog import _FIRST_COLUMNS, QUOTE_MARKS, as_float64, events_frame, order_columns
from sentinel.analyze.loaders.went_back import fall_backs, replaced_stretches, survivors, survivors_of
from sentinel.events import EventKind, make_event


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# The same colour codes where a paste lost their escape character (an issue form drops it):
# "[[36m05-07 13:05:33[0m][[32mINFO[0m] - [1mTrain Summary | Epoch 26 | grad_norm=NAN ...[0m" (AudioCraft's
# flashy logger), told by a reset code "[0m" in the text's start.
_ANSI_RESIDUE = re.compile(r"\[\d{1,3}(?:;\d{1,3})*m")


class KeyNotFound(ValueError):
    """``--loss-col`` or ``--step-col`` names a key that a dialect's record lines do not have."""


@dataclass
class Scan:
    """What :func:`scan` found: the steps frame, events, meta and warnings, and the stretches of
    history a later one replaced (where the steps went back)."""

    steps: pd.DataFrame
    events: pd.DataFrame
    meta: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    abandoned: list[AbandonedHistory] = field(default_factory=list)


_LINE_END = re.compile(r"\r\n?|\n")
# The end of a tqdm bar's stats ("| 50/3000 [00:17<17:12, 2.86it/s]") with a script's own print
# right after it: a bar redraws without a line end, so "training loss: 3.9" joined its line.
# (One pattern a rate, each starting with its text: a lookbehind tried at every position took 44 ms
# on 2 MB.)
_AFTER_A_BAR = tuple((rate, re.compile(re.escape(rate) + r"(?=[^\s\]|])")) for rate in ("it/s]", "s/it]"))
_BAR_LOOK = 1 << 16
# Markdown's bold marks glued to a value, where a paste outside a code block made a NaN stand out
# ("acc: 92.77**39, loss_bbox: nan, loss: nan**"): the line was not read, the run healthy. A run of
# three or more (a banner's "***** Running training *****") is no mark. The two stars first: a
# pattern that opens with a lookbehind is tried at every position (6 ms on 64 KB, 0.06 ms so).
_MARKDOWN_BOLD = re.compile(r"\*\*(?:(?<=[\w.]\*\*)(?!\*)|(?<![*\w.]\*\*)(?=[\w.]))")
# A line pasted as Markdown's inline code, a backtick at either end (NAFNet's issue: BasicSR's lines
# each in `...`): the value glued to the closing mark was no number ("l_pix: -2.8745e+01`").
_MARKDOWN_CODE_LINE = re.compile(r"^([^\S\n]*)`(?!`)([^`\n]*[^`\s])`[^\S\n]*$", re.MULTILINE)


def clean_text(text: str) -> str:
    """Remove what terminals and issue trackers add: ANSI codes (or what a paste left of them,
    ``[36m...[0m``), ``\\r`` redraws (and Keras' bar redraws pasted on one line), ``> `` quoting,
    Markdown's bold marks (``loss: nan**``) and the backticks around a line pasted as inline code;
    full-width punctuation becomes ASCII (``Loss：0.52``).

    Example:
        >>> clean_text("> \\x1b[31mstep: 1\\x1b[0m loss: 2\\r\\n")
        'step: 1 loss: 2\\n'
    """
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "[0m" in text[:_BAR_LOOK]:
        text = _ANSI_RESIDUE.sub("", text)
    if "\r" in text:
        if _crlf_in(text):
            text = text.replace("\r\n", "\n")
        text = text.replace("\r", "\n")
        # A line printed while a tqdm bar stood drawn. Looked for in the text's start: each bar
        # redraw repeats the pattern, and a search of the whole text took ~1 ms a megabyte, each
        # time a text is cleaned.
        start = text[:_BAR_LOOK]
        for rate, after_a_bar in _AFTER_A_BAR:
            if rate in start and after_a_bar.search(start):
                text = after_a_bar.sub(rate + "\n", text)
    if "\x08" in text:
        text = text.replace("\x08", "")
    if _keras_redraws_glued(text[:_BAR_LOOK]):
        text = _KERAS_REDRAWS.sub("\n", text)
    if ">" in text and QUOTE_MARKS.search(text[: 1 << 16]):
        text = QUOTE_MARKS.sub("", text)
    if "*" in text and _MARKDOWN_BOLD.search(text[:_BAR_LOOK]):
        text = _MARKDOWN_BOLD.sub("", text)
    if "`" in text:
        text = _MARKDOWN_CODE_LINE.sub(r"\1\2", text)
    if not text.isascii() and any(mark in text for mark in _FULL_WIDTH_MARKS):
        text = text.translate(_FULL_WIDTH)
    # A search for one character is a memchr (~0.02 ms on 1.5 MB), for four ~1 ms: most logs
    # have no "x" at all.
    if "x" in text and ("nanx" in text or "infx" in text):
        text = _PADDED_NONFINITE.sub(r"\1", text)
    return text


# Windows' C runtime before 2015 prints a NaN as "1.#QNAN000" ("-1.#IND00", a quiet NaN's; "1.#INF00", an
# infinity): CNTK's "TrainLossPerSample =  1.#QNAN000" was read as 1.
_MSVC_NONFINITE = re.compile(r"(-?)1\.#(QNAN|SNAN|IND|INF)0*")


def _msvc_nonfinite(match: re.Match) -> str:
    return f"{match.group(1)}inf" if match.group(2) == "INF" else "nan"


# Keras' TerminateOnNaN callback prints "Batch 2: Invalid loss, terminating training" right after the bar's
# redraw, on its line: the batch it names was read as the step of that bar's NaN ("2/1500 ... - loss: nan").
_TERMINATE_ON_NAN = re.compile(r"Batch \d+: Invalid loss, terminating training")
_TERMINATE_ON_NAN_WORDS = "Invalid loss, terminating training"


# Keras' bar redraws pasted on one line, a space where the terminal went back ("15/360 [>....] - ETA:
# 1:34 - loss: 28.3271 - ... 16/360 [>....] - ETA: 1:34 - loss: 28.3311 - ..."): each redraw a line.
_KERAS_REDRAWS = re.compile(r"(?<=\S)[ \t]+(?=\d+/\d+ \[[=>.]+\] - )")


def _keras_redraws_glued(start: str) -> bool:
    """Whether a text's start holds Keras bar redraws run into one line: more bars' "] - " than
    lines, told by two counts (a pattern search of 64 KB took ~1.7 ms of every Keras log's
    read, and of every log whose lines a logger's "[...] - " begins), then the pattern.

    Example:
        >>> _keras_redraws_glued("1/9 [>..] - loss: 2.7 2/9 [>..] - loss: 2.6 3/9 [>..] - loss: 2.5")
        True
        >>> _keras_redraws_glued("1/9 [>..] - loss: 2.7\\n2/9 [>..] - loss: 2.6\\n")
        False
    """
    return start.count("] - ") > start.count("\n") + 1 and _KERAS_REDRAWS.search(start) is not None


# Line ends looked at before a text is searched for "\r\n" as such: a search for two characters
# stops at each "\r" of a bar's redraws (~2 ms on 2 MB of them), one for "\n" is a memchr.
_CRLF_LOOKED_AT = 256


def _crlf_in(text: str) -> bool:
    """Whether ``text`` holds ``\\r\\n`` (a Windows line end), asked of its first line ends: a
    progress bar's log of a few ``\\n`` and 20,000 ``\\r`` redraws is told in microseconds.

    Example:
        >>> _crlf_in("a\\rb\\rc\\n"), _crlf_in("a\\r\\nb")
        (False, True)
    """
    at = text.find("\n")
    for _ in range(_CRLF_LOOKED_AT):
        if at < 0:
            return False
        if at and text[at - 1] == "\r":
            return True
        at = text.find("\n", at + 1)
    return "\r\n" in text


# A Keras line glued to a bar's value, the bar drawn without its line end: an "Epoch k/K" at the line's
# end ("loss: 0.2445Epoch 1/1000"), printed by a fit or predict nested in the epoch's, not this fit's
# epoch (its own header stands on a line of its own), is dropped; TerminateOnNaN's "Batch N: Invalid
# loss, terminating training" goes to a line of its own. The value they hid is the bar's. Looked for
# in the distinct lines (a search of the whole text took as long as reading a 3 MB epoch log).
_GLUED_KERAS_LINE = re.compile(r"(\d|nan|inf)(?:Epoch \d+/\d+(?=[ \t]*$)|(Batch \d+: Invalid loss))", re.MULTILINE)


def _unglued(match: re.Match) -> str:
    return match.group(1) + ("\n" + match.group(2) if match.group(2) else "")


# A number printed as the object that holds it (print(f"loss={loss}") of a tensor): PyTorch's
# "tensor(2.3045, device='cuda:0', grad_fn=<NllLossBackward0>)", JAX's "Array(2.3, dtype=float32)",
# NumPy 2's "np.float32(2.3)", TensorFlow's "tf.Tensor(2.3, shape=(), dtype=float32)" and
# "<tf.Tensor: shape=(), dtype=float32, numpy=2.3>". One number only: "tensor([2.5, 3.0])" stays.
_SCALAR = r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf))"
# (a repr too long for its line goes on under it: "tensor(10.4375, device='cuda:0', dtype=torch.bfloat16,\n
# grad_fn=<NllLossBackward0>)", each further argument on a line of its own, indented)
_REPR_ARGS = r"(?:[^()\n]|,\n[^\S\n]+(?=[a-z_]+=))*"
_WRAPPED_NUMBER = re.compile(
    rf"\b(?:tensor|(?:Device)?Array|np\.(?:float|int)\d+|tf\.Tensor)\(\[*[^\S\n]*{_SCALAR}[^\S\n]*\]*"
    rf"(?:,[^\S\n]*(?:device|dtype|grad_fn|requires_grad|shape|weak_type)={_REPR_ARGS}(?:\([^()\n]*\){_REPR_ARGS})*)?\)"
    rf"|<tf\.Tensor: [^<>\n]*?numpy={_SCALAR}>")
# Looked for in the text's distinct lines first (one search of a few hundred bytes).
_WRAPPED_WORDS = (re.compile(r"tensor\(|Array\(|np\.(?:float|int)\d|tf\.Tensor"),)
# A loss printed with thousands separators (f"{loss:,.2f}": "loss: 2,780.10"), read as 2 before.
_GROUPED_LOSS = re.compile(r"((?i:loss)['\"]?[^\S\n]*[:=]?[^\S\n]*['\"]?)([-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?)(?![\d,])")


# A loss printed as a one-element list (PaddlePaddle's fluid scripts print the fetched numpy array:
# "loss: [10.000229]", "loss: [nan]"; TensorFlow 1's tf.Print "Total loss is :[0.14]"), read as its number. Under a loss's key only: "Epoch: [21][
# 35/464]" is the ImageNet ProgressMeter's epoch.
_LISTED_LOSS = re.compile(rf"((?i:loss)(?: is)?['\"]?[^\S\n]*[:=][^\S\n]*)\[[^\S\n]*{_SCALAR}[^\S\n]*\](?!\[)")
_LISTED_LOSS_WORDS = (re.compile(r"(?i:loss)(?: is)?['\"]?[^\S\n]*[:=][^\S\n]*\[[^\S\n]*[-+.\dni]"),)


def wrapped_number(line: str) -> str | None:
    """The number a line holds printed as the object around it, where that is all the line holds
    (a loop's ``print(loss.detach().float())``); else None.

    Example:
        >>> wrapped_number("tensor(nan, device='cuda:0')"), wrapped_number("loss tensor(2.5)")
        ('nan', None)
    """
    found = _WRAPPED_NUMBER.fullmatch(line.strip())
    return None if found is None else found.group(1) or found.group(2)


def plain_numbers(text: str, lines: Lines | None = None) -> tuple[str, Lines]:
    """``text`` with each number printed as the object that holds it (a tensor, a JAX or NumPy
    scalar, a loss's one-element list) written as the number, a loss's thousands separators
    dropped, Windows' old ``1.#QNAN000`` written ``nan``, AllenNLP's `` ||`` after the loss its bar's
    description ends in dropped, Lightning's checkpoint message and Keras' TerminateOnNaN message moved
    off the bar's line they were printed on, and its :class:`Lines`.

    Example:
        >>> plain_numbers("step=3 loss=tensor(2.3045, device='cuda:0', grad_fn=<NllLossBackward0>)\\n")[0]
        'step=3 loss=2.3045\\n'
        >>> plain_numbers("step 3 | loss 2,780.10 | tokens 1,024\\n")[0]
        'step 3 | loss 2780.10 | tokens 1,024\\n'
        >>> plain_numbers("Total iter: 10, epoch: 0, batch: 10, loss: [nan]\\n")[0]
        'Total iter: 10, epoch: 0, batch: 10, loss: nan\\n'
        >>> plain_numbers("epoch: 0, iter: 50, loss: [13.207467]soft_label: [13.207467]\\n")[0]
        'epoch: 0, iter: 50, loss: 13.207467 soft_label: [13.207467]\\n'
        >>> plain_numbers("Step      80 (23.64%): loss = 0000nan EER=0.00000\\n")[0]
        'Step      80 (23.64%): loss = nan EER=0.00000\\n'
        >>> plain_numbers("0 tensor(10.43, device='cuda:0',\\n       grad_fn=<NllLossBackward0>)\\n")[0]
        '0 10.43\\n\\n'
        >>> plain_numbers("TrainLossPerSample =  1.#QNAN000; x\\nacc: 0.17, loss: 3.57 ||: 100%|##| 125/125\\n")[0]
        'TrainLossPerSample =  nan; x\\nacc: 0.17, loss: 3.57: 100%|##| 125/125\\n'
    """
    lines = Lines.of(text, lines)
    # (each fix's words asked of the distinct lines before any is made: a fix of the whole text is rare)
    fixes = [(pattern, fix) for words, pattern, fix in _NUMBER_FIXES if lines.holds_any(words)]
    if not fixes:
        return text, lines
    for pattern, fix in fixes:
        text = pattern.sub(fix, text)
    return text, Lines(text)


# Lightning's ModelCheckpoint message, printed where its bar stood drawn ("... 4.57it/s, loss=2.1, v_num=3hqp]Epoch 2,
# global step 400000: 'val/AP' was not in top 1"): its global step was read as the bar's step, its count lost.
_CHECKPOINT_SAID = re.compile(r"(?<=[^\s\n])Epoch \d+, global step \d+: ")
# AllenNLP's bar: its metrics, then " ||" ending the description ("accuracy: 0.1656, loss: 3.5716 ||: 100%|#####|
# 125/125 [00:37<00:00,  3.32it/s]", the loss the epoch's mean so far): read as a description that ends in its loss.
_ALLENNLP_WORDS = " ||: "
_ALLENNLP_DESCRIPTION_END = re.compile(r" \|\|: (?=[^\S\n]*\d{1,3}%\|)")


# Python's zero padding of a non-finite value ("%07.5f" % nan: "0000nan"; "-0000inf"), a loss format
# meant to align finite ones (a TensorFlow script's "loss = 0000nan" at the step its run went NaN).
_ZERO_PADDED_WORDS = ("0nan", "0inf")
_ZERO_PADDED_NONFINITE = re.compile(r"(?<![\w.])(-?)0+(nan|inf)\b")


def _listed_loss(match: re.Match) -> str:
    """A loss's one-element list as its number, a space after it where it ended against the next key ("loss:
    [13.2]soft_label: [13.2]")."""
    after = match.string[match.end():match.end() + 1]
    return match.group(1) + match.group(2) + (" " if after.isalpha() else "")


# What plain_numbers fixes, in order: the words (one of which a text's distinct lines hold where the fix has work),
# the pattern, and its replacement.
_NUMBER_FIXES = (
    ((_CHECKPOINT_SAID,), _CHECKPOINT_SAID, lambda m: "\n" + m.group(0)),
    ((_TERMINATE_ON_NAN_WORDS,), _TERMINATE_ON_NAN, "\n\\g<0>"),
    (("1.#",), _MSVC_NONFINITE, _msvc_nonfinite),
    ((_ALLENNLP_WORDS,), _ALLENNLP_DESCRIPTION_END, ": "),
    (_ZERO_PADDED_WORDS, _ZERO_PADDED_NONFINITE, r"\1\2"),
    # (the line ends of a repr that went on over lines kept after its number: line numbers hold)
    (_WRAPPED_WORDS, _WRAPPED_NUMBER, lambda m: (m.group(1) or m.group(2)) + "\n" * m.group(0).count("\n")),
    ((_GROUPED_LOSS,), _GROUPED_LOSS, lambda m: m.group(1) + m.group(2).replace(",", "")),
    (_LISTED_LOSS_WORDS, _LISTED_LOSS, _listed_loss),
)

# PaddlePaddle's loggers print each value as f"{v:x<6f}": a float padded to 6 characters with 'x',
# which only a non-finite value is short enough to get ("nanxxx", "infxxx", "-infxx").
_PADDED_NONFINITE = re.compile(r"(?<![A-Za-z])(nan|inf)x+\b")


def has_records(text: str, dialect: Dialect) -> bool:
    """Whether ``text`` holds one record line of ``dialect`` or more (a rank's lines, asked apart).

    Example:
        >>> from sentinel.analyze.loaders.dialects import NANOGPT
        >>> has_records("iter 1: loss 2.5, time 9.1ms\\n", NANOGPT), has_records("loss 2.5\\n", NANOGPT)
        (True, False)
    """
    if dialect.joins is not None:  # a record printed over several lines
        text = dialect.joins.sub(dialect.join_with, text)
    return any(shape.pattern.search(text) for shape in dialect.shapes)


# Full-width punctuation a CJK input method types ("Epoch：1，Loss：0.52"), read as its ASCII form.
_FULL_WIDTH = str.maketrans({"：": ": ", "，": ", ", "＝": "=", "（": "(", "）": ")", "［": "[", "］": "]",
                             "／": "/", "｜": "|"})
# Each looked for alone: a search for one character is a fast scan, a character class's regex search
# of a tqdm log's 2 MB (its bar's blocks make it no ASCII) took 7 ms, at each of its six cleanings.
_FULL_WIDTH_MARKS = tuple("：，＝（）［］／｜")


def _named_loss(steps: pd.DataFrame, logged_nan: dict, options: LoadOptions) -> tuple[pd.DataFrame, dict]:
    """``steps`` with the column ``--loss-col`` names read as the loss, where the naming of the
    fields did not already make it so (an evaluation line's ``val_loss``: its key is ``loss`` on a
    line the dialect reads as an evaluation's); the training loss then goes as ``logged_loss``."""
    wanted = options.loss_col.lower() if options.loss_col is not None else None
    if wanted is None or wanted == metrics.LOSS or wanted not in steps.columns:
        return steps, logged_nan
    names = {metrics.LOSS: "logged_loss", wanted: metrics.LOSS}
    return steps.rename(columns=names), {names.get(k, k): v for k, v in logged_nan.items()}


def count_records(text: str | Lines, dialect: Dialect) -> int:
    """How many record lines of ``dialect`` the text has (for sniffing).

    Args:
        text: the text, or :class:`Lines` of it to share the line split between dialects.
        dialect: the dialect whose record lines (or ``sniff`` lines) are counted.

    Example:
        >>> from sentinel.analyze.loaders.dialects import NANOGPT
        >>> count_records("iter 1: loss 2.5, time 9.1ms\\n", NANOGPT)
        1
    """
    lines = text if isinstance(text, Lines) else Lines(text)
    if dialect.sniff is not None:
        return lines.count(dialect.sniff)
    # A value beside another shape's record (the lr beside the loss) is no record line of its own.
    return sum(lines.count(shape.pattern) for shape in dialect.shapes if shape.beside is None)


def scan(text: str, dialect: Dialect, options: LoadOptions | None = None, lines: Lines | None = None) -> Scan:
    """Read a whole log text with one dialect.

    Args:
        text: the file's text (decoded).
        dialect: how its lines are recognised and named.
        options: ``loss_col`` / ``step_col``: a key of the log to use as the loss / the step.
        lines: ``Lines(text)`` where the caller made it already (shared, not made again).

    Returns:
        A :class:`Scan`; its steps frame is empty when no record line was found.

    Raises:
        KeyNotFound: ``options`` name a key that no record line has (the message lists the keys).

    Example:
        >>> from sentinel.analyze.loaders.dialects import TORCHTITAN
        >>> scan("step:  1  loss:  9.5  grad_norm:  1.2\\n", TORCHTITAN).steps["grad_norm/total"].tolist()
        [1.2]
    """
    options = options or LoadOptions()
    warnings: list[str] = []
    # A bare "\r" ends a line too (a progress bar's redraw, a CR-only file): only what follows
    # the last line end of either kind may be cut.
    if dialect.drop_cut_line and text and not text.endswith(("\n", "\r")):
        cut = max(text.rfind("\n"), text.rfind("\r")) + 1
        if _ANSI.sub("", text[cut:]).strip():  # not only a terminal's codes (rich shows the cursor again)
            number = len(_LINE_END.findall(text, 0, cut)) + 1
            warnings.append(f"last line {number} has no line end (cut off while written?): skipped "
                            "(it is read once the file has not changed for a minute)")
        text = text[:cut]
    if dialect.clean:
        text = clean_text(text)
    lines = Lines.of(text, lines)
    if dialect.clean and lines.holds_any((_GLUED_KERAS_LINE,)):
        text = _GLUED_KERAS_LINE.sub(_unglued, text)
        lines = Lines(text)
    text = one_rank(text, warnings, lambda rank_text: has_records(rank_text, dialect), lines)
    if dialect.joins is not None:
        text = dialect.joins.sub(dialect.join_with, text)
    # The caller's lines serve as long as the text is the same object (most logs: nothing to clean).
    lines = Lines.of(text, lines)
    if dialect.clean:
        text, lines = plain_numbers(text, lines)
        text, lines = in_english(text, lines)
    if dialect.rewrite is not None and (not dialect.rewrite_needs or lines.holds_any(dialect.rewrite_needs)):
        text = dialect.rewrite(text)
        lines = Lines.of(text, lines)
    evaluation = None  # the evaluation lines the training read leaves out, read apart below
    picked, picked_at = [], []  # those lines, and where each was in the text left
    passes, opening = evaluation_block_spans(text, lines) if dialect.drop_words else ([], "")
    shorter, lengths = shorter_pass_spans(text, lines) if dialect.drop_words and not passes else ([], (0, 0))
    if passes or shorter or dialect.drop_words and _may_blank(lines, dialect.drop_words):
        told = sum("loss" in text[a:b].lower() for a, b in passes)  # (a pass of accuracies alone changes nothing)
        text, picked, picked_at = split_evaluation_lines_at(text, dialect.drop_words, lines=lines,
                                                            passes=passes or shorter)
        if told:
            warnings.append(f"{told} line(s) of evaluation passes (each opened by a line such as "
                            f"{opening[-60:]!r}) read as evaluation, not training")
        if shorter:
            warnings.append(f"{len(shorter)} line(s) counting to {lengths[1]} after an epoch's lines counting to "
                            f"{lengths[0]} (an evaluation's batches, printed as the training's) read as evaluation, "
                            "not training")
        kept = [i for i, line in enumerate(picked) if not _A_RECORD_OF.search(line)]
        picked, picked_at = [picked[i] for i in kept], [picked_at[i] for i in kept]
        evaluation = None if dialect.step_from_order else "".join(picked) or None
        lines = Lines(text)
    parts: list[tuple[Shape, dict[str, np.ndarray]]] = []
    seen_keys: set[str] = set()
    bad = 0
    late: list[str] = []  # about record lines that were cut or repeated: said last
    for shape in dialect.shapes:
        table, shape_bad, keys = _read_shape(lines, shape, dialect, options, warnings)
        bad += shape_bad
        seen_keys |= keys
        if table is not None and "_cut" in table:
            cut = np.flatnonzero(table.pop("_cut"))
            if len(cut):
                start = next(m.start() for i, m in enumerate(shape.pattern.finditer(text)) if i == cut[0])
                late.append(f"{len(cut)} {dialect.record_word} line(s) cut off (first at line "
                            f"{text.count(chr(10), 0, start) + 1}): their last field was skipped")
        if table is not None and len(table["_pos"]):
            parts.append((shape, table))
    if evaluation is not None and parts:
        parts += _evaluation_parts(evaluation, dialect, options)
    if dialect.evaluation_keys and parts:  # "epoch 3 val_loss 2.1", "step 500 | val_loss 2.1" among the training lines
        parts += _evaluation_parts(lines, dialect, options, dialect.evaluation_keys)
    for wanted in (options.loss_col, options.step_col):
        if parts and wanted is not None and wanted.lower() not in seen_keys:
            raise KeyNotFound(f"key {wanted!r} not found in the {dialect.name} log lines; keys found: "
                             f"{', '.join(sorted(seen_keys))}")
    meta: dict = {"format": dialect.name}
    record_steps: dict[int, np.ndarray] = {}
    abandoned: list[AbandonedHistory] = []
    parts = _without_lines_read_twice(parts, lines)
    steps, logged_nan = _merge(parts, dialect, meta, late, record_steps, text, lines, abandoned)
    steps, logged_nan = _named_loss(steps, logged_nan, options)
    if picked and dialect.unstepped_evaluation is not None \
            and not any(shape.prefix for shape, _ in parts):  # no evaluation line named its step
        steps = _unstepped_evaluations(steps, picked, picked_at, dialect, parts, record_steps, lines)
    # The step of each training record in text order, by shape (an event line joins the next one).
    train_steps = [(shape, record_steps[i]) for i, (shape, _) in enumerate(parts)
                   if i in record_steps and not shape.fills and not shape.prefix and shape.beside is None]
    if not train_steps:  # summary lines alone (a paste of fairseq's end-of-epoch lines): they place the events
        train_steps = [(shape, record_steps[i]) for i, (shape, _) in enumerate(parts)
                       if i in record_steps and not shape.prefix and shape.beside is None]
    events, at = read_events(text, dialect, steps, meta, warnings, train_steps, lines)
    _zeroed_losses(steps, events, logged_nan)
    by_record = any(shape.record_events for shape in dialect.shapes)
    if not by_record:
        # A text log tells a printed NaN from a value not printed (a row of another shape, an
        # evaluation line): the rules then need not guess from the steps' cadence, which fails
        # where a count inside the epoch restarts at an epoch length that is no multiple of the
        # logging interval (mmengine's [e][i/1583] every 50: each NaN was an incident of its own).
        meta[LOGGED_NAN] = {key: steps.index.to_numpy()[mask].tolist() for key, mask in logged_nan.items()
                            if marks_nan(key, dialect) and key in steps.columns}
    for key in [c for c in steps.columns if watches_nonfinite(c)] if not by_record else ():
        if key in steps.columns:
            flagged = np.isinf(steps[key].to_numpy()) | logged_nan.get(key, np.zeros(len(steps), dtype=bool))
            for step in steps.index[flagged]:
                events.append(stamp(make_event(EventKind.NONFINITE, int(step), metric=key,
                                                value=str(steps.at[step, key])), math.nan))
    if events and len(steps.index):
        steps = count_overflows(steps, events, dialect.event_rows)
    elif events and dialect.event_rows:
        steps = event_rows(events)
        if metrics.AMP_OVERFLOW in steps.columns:
            meta[OVERFLOW_ROWS_ONLY] = True
    if dialect.loss_scale_min is not None and metrics.LOSS_SCALE in steps.columns:
        meta[LOSS_SCALE_MIN] = dialect.loss_scale_min
    if by_record:
        events = with_record_events(text, dialect, parts, record_steps, events, at, lines)
    warnings.extend(late)
    if bad and dialect.warn_bad_values:
        warnings.append(f"{bad} token(s) with a value that is not a number were skipped")
    return Scan(steps=order_columns(steps), events=events_frame(events), meta=meta, warnings=warnings,
                abandoned=abandoned)


# --------------------------------------------------------------------------- records


def _without_lines_read_twice(parts: list[tuple[Shape, dict[str, np.ndarray]]], lines: Lines | None = None
                              ) -> list[tuple[Shape, dict[str, np.ndarray]]]:
    """``parts`` without the records of a shape that read the lines an earlier record shape read: the
    same losses, two or more, as many (Chinese-CLIP's "Global Steps: 29/3200 | Train Epoch: 1 [3712/4096
    (91%)] | Loss: x" read at step 29 and again at 3712; PaddleSpeech's "epoch: 1, step: 5310, batch :
    1559/1876": every point twice, a false "loss repeats" and plateau), and of the shapes beside it that
    read its other values (its head but the last field, as many records), where ``lines`` shows both
    shapes' records on the same lines (MONAI's "Final training 168/4999 loss: x" after each epoch's
    last "Epoch 168/5000 23/24 loss: x" prints the same values on lines of its own). The earlier
    shape's reading is kept: the dialect lists its shapes in the order it trusts them. A shape whose
    records lie on some of another's lines only, the same loss on each, is the other's reading of
    fewer of them, and goes whichever came first (a tqdm bar's "200/1473 [...]" before KoBERT's print
    "epoch 1 batch id 201 loss 0.93" on its line, but on the print's first line, drawn before the bar).

    Example:
        >>> from sentinel.analyze.loaders.dialects import GENERIC
        >>> parts = [(GENERIC.shapes[0], {"_pos": np.arange(2), "loss": np.array([2.0, 1.9])})] * 2
        >>> len(_without_lines_read_twice(parts, Lines("step 1 loss 2.0\\nstep 2 loss 1.9\\n")))
        1
    """
    counts = collections.Counter(len(columns[metrics.LOSS]) for shape, columns in parts
                                 if not shape.prefix and metrics.LOSS in columns and len(columns[metrics.LOSS]) >= 2)
    if sum(counts.values()) < 2 or lines is None:
        return parts  # (most logs: one record shape with a loss; nothing sorted)
    seen: list[tuple[np.ndarray, np.ndarray | None, np.ndarray, int]] = []  # losses sorted, lines, losses, part
    dropped: set[tuple] = set()
    gone: set[int] = set()  # parts read again by a later shape on more of the lines
    for k, (shape, columns) in enumerate(parts):
        loss = columns.get(metrics.LOSS)
        if shape.prefix or loss is None or len(loss) < 2:
            continue
        ordered = np.sort(loss)
        at = _record_lines(lines, shape, len(loss))
        if at is not None and any(len(other) == len(ordered) and np.array_equal(other, ordered, equal_nan=True)
                                  and where is not None and np.array_equal(where, at) for other, where, _, _ in seen):
            dropped.add((shape.head[:-1], len(loss)))
            gone.add(k)
            continue
        for _, where, their_loss, j in seen:
            if j in gone or at is None or where is None or len(where) == len(at):
                continue
            mine, theirs = (at, loss), (where, their_loss)
            fewer, more = (mine, theirs) if len(at) < len(where) else (theirs, mine)
            if _read_on_their_lines(fewer, more):
                loser = k if fewer[0] is at else j
                gone.add(loser)
                dropped.add((parts[loser][0].head[:-1], len(fewer[0])))
                break
        if k not in gone:
            seen.append((ordered, at, loss, k))
    if not dropped:
        return parts
    return [(shape, columns) for k, (shape, columns) in enumerate(parts) if k not in gone and (
        shape.prefix or metrics.LOSS in columns or (shape.head[:-1], len(columns["_pos"])) not in dropped)]


def _read_on_their_lines(fewer: tuple[np.ndarray, np.ndarray], more: tuple[np.ndarray, np.ndarray]) -> bool:
    """Whether records on lines ``fewer[0]`` with losses ``fewer[1]`` all lie on lines of ``more``, one
    record a line, each with the loss ``more`` has on its line."""
    (at, loss), (where, theirs) = fewer, more
    if len(np.unique(at)) != len(at) or len(np.unique(where)) != len(where):
        return False
    found = np.searchsorted(where, at) if bool((np.diff(where) > 0).all()) else None
    if found is None or bool((found >= len(where)).any()) or not bool((where[found] == at).all()):
        return False
    return bool(np.array_equal(theirs[found], loss, equal_nan=True))


def _record_lines(lines: Lines, shape: Shape, n: int) -> np.ndarray | None:
    """The line (from 0) each of a shape's ``n`` records is on, in text order; None where its pattern's
    matches are not its records one for one."""
    at = _text_positions(lines, shape, n)
    if at is None:
        return None
    text = lines.text
    ends = np.flatnonzero(np.frombuffer(text.encode(), dtype=np.uint8) == 10) if text.isascii() else \
        np.array([m.start() for m in re.finditer("\n", text)], dtype=np.int64)
    return np.searchsorted(ends, at)


def _read_shape(lines: Lines, shape: Shape, dialect: Dialect, options: LoadOptions,
                warnings: list[str]) -> tuple[dict[str, np.ndarray] | None, int, set[str]]:
    """One shape's records as columns (``_pos`` = record order, head fields, metric columns),
    the count of values that are not numbers, and the keys seen (lower case)."""
    fast = read_templates(lines, shape, dialect, options)
    if fast is not None:
        if fast is False:
            return None, 0, set()
        out, bad, keys_seen, fast_warnings = fast
        warnings.extend(fast_warnings)
        return out, bad, keys_seen
    bodies = literal_first(shape.pattern).findall(lines.matching(shape.pattern))
    if not bodies:
        return None, 0, set()
    cut = None
    if shape.fields is not None:
        bodies, cut = field_bodies(bodies, shape)
    if isinstance(bodies, pa.LargeListArray):  # field lists read with pyarrow: their tokens already
        flat, offsets = bodies.values, bodies.offsets.to_numpy()
        counts = np.diff(offsets)
        width = int(counts.max()) + 2
    else:
        flat, offsets, counts, width = _tokens(bodies, shape)
    fits = counts <= width
    if not fits.all():
        warnings.append(f"{int((~fits).sum())} {dialect.name} line(s) with more than {width} fields were skipped")
        offsets, counts = offsets[:-1][fits], counts[fits]
    else:
        offsets = offsets[:-1]
    n = len(counts)
    h = len(shape.head)
    ok = np.ones(n, dtype=bool)
    out: dict[str, np.ndarray] = {"_pos": np.arange(n, dtype=np.int64)}
    for i, name in enumerate(shape.head):
        if name == "_":
            continue
        values, parsed = np.full(n, np.nan), np.zeros(n, dtype=bool)
        has = counts > i
        values[has], parsed[has], _ = _numbers(flat.take(offsets[has] + i))
        if name in HEAD_ROLES:
            out["_" + name] = values
            continue
        out[prefixed(shape, name)] = values
        if marks_nan(name, dialect):
            out[NAN_PREFIX + prefixed(shape, name)] = np.where(parsed & np.isnan(values), 1.0, np.nan)
    keys_seen = check_heads(out, shape, counts, width, ok)
    # Pairs: a key at h, h + 2, ... (never in the last field of the width), its value after it.
    per_row = np.maximum(0, (np.minimum(counts - 1, width - 2) - h) // 2 + 1)
    total = int(per_row.sum())
    bad = 0
    required = np.zeros(n, dtype=bool)
    if total:
        row = np.repeat(np.arange(n), per_row)
        position = h + 2 * (np.arange(total) - np.repeat(np.cumsum(per_row) - per_row, per_row))
        key_at = offsets[row] + position
        has_value = position + 1 < counts[row]
        encoded = pc.dictionary_encode(flat.take(key_at))
        codes = encoded.indices.to_numpy()
        raw_keys = encoded.dictionary.to_pylist()
        values, parsed = np.full(total, np.nan), np.zeros(total, dtype=bool)
        suffix = np.zeros(total, dtype=np.int8)
        values[has_value], parsed[has_value], suffix[has_value] = _numbers(flat.take(key_at[has_value] + 1),
                                                                             shape.units)
        bad = int((~parsed).sum())
        lower = [key.lower() for key in raw_keys]
        if shape.fields is not None:
            lower = [key.translate(SHOWN) for key in lower]
        keys_seen.update(lower)
        if shape.strict:
            key_ok = np.array([KEY.match(key) is not None for key in raw_keys], dtype=bool)
            ok[row[~(parsed & key_ok[codes])]] = False
        if shape.require is not None:
            wanted = [code for code, key in enumerate(lower) if key == shape.require]
            required[row[np.isin(codes, wanted)]] = True
        _scatter(out, n, row, codes.astype(np.int64) * 256 + suffix, values, parsed,
                 lambda combo: metric_name(lower[combo // 256], unit_suffix(shape, combo % 256), shape, dialect,
                                           options), dialect)
    if shape.require is not None:
        if dialect.step_from_order:
            out["_counts"] = required  # other records (eval dicts) join the step before them
        else:
            ok &= required
    if cut is not None:
        out["_cut"] = cut
    if not ok.all():
        out = {name: column[ok] for name, column in out.items()}
    return out, bad, keys_seen


def _tokens(bodies: list, shape: Shape) -> tuple[pa.Array, np.ndarray, np.ndarray, int]:
    """The records' tokens, split at whitespace after the shape's scrub and separators: all the
    tokens, each record's first token (and the end), each record's count, and the most fields a
    record may have (:func:`widest`)."""
    joined = "\n".join(map(" ".join, bodies) if isinstance(bodies[0], tuple) else bodies)
    scrub = None if shape.scrub is None else literal_first(shape.scrub[0])
    if scrub is not None and (not shape.scrub_needs or any(word in joined for word in shape.scrub_needs)) \
            and scrub.search(joined):
        joined = scrub.sub(shape.scrub[1], joined)
    for sep in shape.separators if shape.fields is None else ():
        joined = joined.replace(sep, " ")
    # Arrow's split keeps an empty token for whitespace at either end of a record: trim first.
    records = pc.ascii_trim_whitespace(pc.split_pattern(pa.array([joined], pa.large_string()), "\n").flatten())
    tokens = pc.ascii_split_whitespace(records)
    offsets = tokens.offsets.to_numpy()
    counts = np.diff(offsets)
    counts[pc.binary_length(records).to_numpy(zero_copy_only=False) == 0] = 0  # [""] is no token
    if shape.fields is None:
        lengths = pc.binary_length(records) if joined.isascii() else pc.utf8_length(records)
        width = widest(lengths.to_numpy(zero_copy_only=False), counts)
    else:
        width = int(counts.max()) + 2
    return tokens.values, offsets, counts, width


def _scatter(out: dict[str, np.ndarray], n: int, row: np.ndarray, combos: np.ndarray, values: np.ndarray,
             parsed: np.ndarray, name_of, dialect: Dialect) -> None:
    """Write each pair's value into its metric column; in a record, a later pair of the same
    metric replaces an earlier one. A logged NaN is marked where the dialect marks it
    (:func:`~sentinel.analyze.loaders.record_fields.marks_nan`)."""
    names: dict[str, list[int]] = {}
    for combo in np.flatnonzero(np.bincount(combos)).tolist():
        names.setdefault(name_of(combo), []).append(combo)
    for name, group in names.items():
        picked = np.flatnonzero(combos == group[0]) if len(group) == 1 else np.flatnonzero(np.isin(combos, group))
        rows = row[picked]
        last = np.ones(len(rows), dtype=bool)
        last[:-1] = rows[1:] != rows[:-1]  # picked is in record order, pairs left to right
        column = out.setdefault(name, np.full(n, np.nan))
        column[rows[last]] = values[picked[last]]
        if marks_nan(name, dialect):
            logged = picked[parsed[picked] & np.isnan(values[picked])]
            if len(logged):
                out.setdefault(NAN_PREFIX + name, np.full(n, np.nan))[row[logged]] = 1.0


def _zeroed_losses(steps: pd.DataFrame, events: list[dict], logged_nan: dict[str, np.ndarray]) -> None:
    """A loss a script printed as 0 in place of the NaN it said it had (deepspeech.pytorch's
    "received a nan loss, setting loss value to 0", then "Loss 0.0000" on the step's line): NaN,
    printed so (a collapse to 0 read as written). In place."""
    zeroed = [event["step"] for event in events if event.get("zeroed")]
    if not zeroed or metrics.LOSS not in steps.columns:
        return
    rows = np.flatnonzero(np.isin(steps.index.to_numpy(), zeroed) & (steps[metrics.LOSS].to_numpy() == 0.0))
    if len(rows):
        steps.iloc[rows, steps.columns.get_loc(metrics.LOSS)] = np.nan
        logged_nan.setdefault(metrics.LOSS, np.zeros(len(steps.index), dtype=bool))[rows] = True


def _numbers(tokens: pa.Array, units: Mapping[str, tuple[str, float]] | None = None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Numbers of text tokens: ``(values, parsed, unit code)``, vectorised with pyarrow.

    Units are stripped first (the code is 0 for none, ``i + 1`` for the i-th unit of
    :func:`units_order`). pyarrow's parser takes the tokens when they are all numbers; a
    column holding text is checked token by token against the number syntax instead.
    """
    n = len(tokens)
    suffix = np.zeros(n, dtype=np.int8)
    values, parsed = np.full(n, np.nan), np.zeros(n, dtype=bool)
    rest = np.ones(n, dtype=bool)  # tokens without a unit
    for code, unit in enumerate(units_order(units or {}), start=1):
        ends = pc.ends_with(tokens, unit).to_numpy(zero_copy_only=False) & rest
        if ends.any():
            where = np.flatnonzero(ends)
            stripped = pc.utf8_slice_codeunits(tokens.take(where), 0, -len(unit))
            values[where], parsed[where] = _parse_numbers(stripped)
            values[where] *= units[unit][1]  # NaN stays NaN
            suffix[where] = code
            rest &= ~ends
    if rest.all():
        values, parsed = _parse_numbers(tokens)
    elif rest.any():
        where = np.flatnonzero(rest)
        values[where], parsed[where] = _parse_numbers(tokens.take(where))
    return values, parsed, suffix


def _parse_numbers(tokens: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(values, parsed)`` of text tokens: NaN and False where a token is not a number."""
    try:
        return pc.cast(tokens, pa.float64()).to_numpy(zero_copy_only=False), np.ones(len(tokens), dtype=bool)
    except pa.ArrowInvalid:  # some token is text: only the ones that are numbers count
        matches = pc.match_substring_regex(tokens, NUMBER_SYNTAX)
        values = pc.cast(pc.if_else(matches, tokens, pa.scalar(None, tokens.type)), pa.float64())
        return values.to_numpy(zero_copy_only=False), matches.to_numpy(zero_copy_only=False)


# Keras fit prints "Epoch 34/400" on a line of its own before each epoch's bar.
KERAS_EPOCH_HEADER = re.compile(r"^[ \t]*Epoch \d+/\d+[ \t]*$", re.MULTILINE)


def _epoch_ends(records: list[tuple[np.ndarray, np.ndarray]]) -> dict[float, float]:
    """The last step of each epoch (as printed) of training records (``(epoch, step)`` arrays).

    Example:
        >>> _epoch_ends([(np.array([1.0, 1.0, 2.0, np.nan]), np.array([10.0, 20.0, 30.0, 40.0]))])
        {1.0: 20.0, 2.0: 30.0}
    """
    epoch = np.concatenate([e for e, _ in records]) if records else np.zeros(0)
    step = np.concatenate([s for _, s in records]) if records else np.zeros(0)
    known = ~(np.isnan(epoch) | np.isnan(step))
    epochs, which = np.unique(epoch[known], return_inverse=True)
    last = np.full(len(epochs), -math.inf)
    np.maximum.at(last, which, step[known])
    return dict(zip(epochs.tolist(), last.tolist()))


def _at_epoch_ends(epoch: np.ndarray, ends: dict[float, float]) -> np.ndarray:
    """The step of each evaluation record that names its epoch alone: that epoch's last training
    step (NaN where no training record names the epoch: left out).

    Example:
        >>> _at_epoch_ends(np.array([1.0, 2.0, 3.0]), {1.0: 100.0, 2.0: 200.0}).tolist()
        [100.0, 200.0, nan]
    """
    return np.array([ends.get(e, math.nan) for e in epoch.tolist()], dtype="float64")


def _evaluation_parts(text: str | Lines, dialect: Dialect, options: LoadOptions,
                      shapes: tuple[Shape, ...] | None = None) -> list[tuple[Shape, dict[str, np.ndarray]]]:
    """The evaluation lines that :attr:`Dialect.drop_words` keeps from the training read (``text``:
    those lines alone), read by the shapes whose lines name their step (a step field, or a count
    inside an epoch of a length the line gives), every value under a ``val_`` name: ``step 500:
    validation loss 2.1`` is ``val_loss`` 2.1 at step 500; and by :attr:`Dialect.epoch_evaluation`,
    a line that names its epoch alone (its step is worked out in :func:`_merge`). Lines with
    neither are left out (there is no telling which step they evaluated). ``shapes``: other
    shapes to read ``text`` (or its :class:`Lines`) with.

    Example:
        >>> from sentinel.analyze.loaders.dialects import GENERIC
        >>> [(shape.prefix, sorted(t)) for shape, t in _evaluation_parts("step 500: val loss 2.1\\n", GENERIC, LoadOptions())
        ...  if "val_loss" in t]
        [('val_', ['_nan:val_loss', '_pos', '_step', 'val_loss'])]
    """
    lines = Lines(text) if isinstance(text, str) else text
    parts = []
    if shapes is None:
        # A line's own step: a step field, or a count inside the epoch with the epoch's length
        # ("Epoch [6/10], Step [50/100]": not a count whose length only the training lines tell).
        shapes = tuple(shape for shape in dialect.shapes if shape.beside is None and not shape.prefix and (
            shape.head[:1] == (metrics.STEP,) or shape.head[:3] == ("epoch", "iter", "total")))
        shapes += () if dialect.epoch_evaluation is None else (dialect.epoch_evaluation,)
    for shape in shapes:
        evaluation = replace(shape, prefix="val_")
        table, _, _ = _read_shape(lines, evaluation, dialect, options, [])
        if table is None or not len(table["_pos"]):
            continue
        table.pop("_cut", None)  # a field cut off is said of the training lines only
        parts.append((evaluation, table))
    return parts


# "Best val loss: 0.41", "lowest validation loss so far": a record of the evaluations, none itself
# (not "val_loss 0.50 (best 0.41)", nor "2 min | val loss 0.5").
_A_RECORD_OF = re.compile(r"(?i)\b(?:best|lowest|min)[_ ]+(?:(?:val|valid|validation|eval|evaluation|test|dev)[_ ]+)?loss\b")


def _unstepped_evaluations(steps: pd.DataFrame, picked: list[str], picked_at: list[int], dialect: Dialect,
                           parts: list[tuple[Shape, dict[str, np.ndarray]]], record_steps: dict[int, np.ndarray],
                           lines: Lines) -> pd.DataFrame:
    """``steps`` with the ``val_loss`` of the evaluation lines that name no step or epoch
    (:attr:`Dialect.unstepped_evaluation`), each at the step of the last training record before
    it; unchanged where fewer than two such lines follow a training record, or where the records'
    places in the text cannot be told."""
    found = [(at, match.group(1)) for line, at in zip(picked, picked_at)
             if (match := dialect.unstepped_evaluation.search(line)) is not None]
    if len(found) < 2 or not len(steps.index):
        return steps
    placed = _training_records(parts, record_steps, lines)
    if placed is None:
        return steps
    where, step, shapes = placed
    if dialect.step_from_order:  # the records numbered in text order, one step each
        if shapes != 1 or len(where) != len(steps.index):
            return steps
        step = steps.index.to_numpy(dtype="float64")
    order = np.argsort(where, kind="stable")
    where, step = where[order], step[order]
    before = np.searchsorted(where, np.array([at for at, _ in found], dtype=np.int64), side="left") - 1
    value = {}
    for k, (_, text) in zip(before.tolist(), found):
        if k >= 0 and not math.isnan(step[k]):
            value[int(step[k])] = float(text)  # several after one record: the last
    if len(value) < 2:
        return steps
    steps = steps.copy()
    column = steps[metrics.VAL_LOSS].to_numpy(copy=True) if metrics.VAL_LOSS in steps.columns \
        else np.full(len(steps.index), np.nan)
    rows = steps.index.get_indexer(list(value))
    column[rows[rows >= 0]] = np.array(list(value.values()))[rows >= 0]
    steps[metrics.VAL_LOSS] = column
    return steps


def _merge(parts: list[tuple[Shape, dict[str, np.ndarray]]], dialect: Dialect, meta: dict,
           warnings: list[str], record_steps: dict[int, np.ndarray] | None = None, text: str = "",
           lines: Lines | None = None, abandoned: list[AbandonedHistory] | None = None
           ) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """One row per step: steps from the head / step key / order, records of a step merged.

    Returns the frame and, for the loss and the grad norm, where a NaN was logged (not missing);
    ``record_steps`` gets each part's record steps (by its index in ``parts``, in record order);
    ``abandoned`` gets the stretches a later history replaced, where the steps went back.
    """
    tables, table_shapes = [], []
    # Keyed by pattern: the training shapes' (an evaluation read of the same pattern is no record line of theirs).
    records_of = {shape.pattern: len(columns["_pos"]) for shape, columns in parts if not shape.prefix}
    steps_of: dict[re.Pattern, np.ndarray] = {}  # each record's step, by shape (for the values beside them)
    table_of: dict[re.Pattern, dict[str, np.ndarray]] = {}  # each record shape's columns, as merged below
    epoch_records: list[tuple[np.ndarray, np.ndarray]] = []  # training records' (printed epoch, step)
    train_totals: list[np.ndarray] = []  # the lengths the training records print for their epochs
    owners = collections.Counter(name for _, columns in parts for name in columns if not name.startswith("_")
                                 or name.startswith(NAN_PREFIX))
    for part, (shape, columns) in enumerate(parts):
        columns = dict(columns)
        n = len(columns["_pos"])
        if shape.shown_until_changed and not _each_an_epochs_end(columns, n, records_of.get(shape.beside)):
            # on some of the records' lines only (a bar after its first validation)
            spread = _spread_over_records(shape, columns, n, records_of.get(shape.beside), Lines.of(text, lines))
            if spread is not None:
                columns, n = spread, len(spread["_pos"])
            _keep_where_first_shown(columns, n)
        if shape.beside is not None and _fold_beside(shape, columns, n, table_of, owners, dialect):
            continue
        if shape.beside is not None:
            beside_step = _beside_steps(shape, columns, n, records_of, steps_of, dialect)
            if beside_step is None:  # cannot be put one for one beside the records of its lines
                warnings.append(f"{n} {shape.head[-1]} value(s), printed beside the loss on some of its lines "
                                "only, could not be put at their lines' steps: not read")
                continue
            columns["_step"] = beside_step
            columns["_fills"] = np.full(n, shape.fills)
            columns["_beside"] = np.ones(n, dtype=bool)
            tables.append(columns)
            table_shapes.append(shape)
            continue
        step = columns.pop("_step", np.full(n, np.nan))
        iters = columns.pop("_iter", None)
        epoch, total = columns.pop("_epoch", None), columns.pop("_total", None)
        printed_epoch = epoch if epoch is not None else columns.get("_epoch0")
        if shape.prefix and n >= 2 and record_steps and iters is None and epoch is None \
                and _own_count(step, record_steps):
            # An evaluation's own count, from its start again at each pass while the training's goes on (DPR's
            # "Eval step: 99 , ..., loss=0.11" over its batches): no training step. A pass's batches, each its
            # own loss, are no evaluation loss of the run's (one line a pass is placed below, as before).
            placed = _after_records(shape, n, parts[:part], record_steps, Lines.of(text, lines))
            if placed is None or len(np.unique(placed)) < n:
                warnings.append(f"{n} evaluation line(s) count their own batches (the count starts again at each "
                                "evaluation): not read as evaluations at training steps")
                continue
        if total is not None and not shape.prefix:
            train_totals.append(total)
        elif shape.prefix and iters is not None and total is not None and train_totals \
                and not np.isin(total, np.concatenate(train_totals)).all():
            # "[Eval][Epoch 7][Iter: 20/40]": a count of the evaluation's own batches, not of the
            # epoch's training steps: the evaluation of that epoch, at its end (the last line's).
            iters = total = None
        if shape.prefix and iters is None and printed_epoch is not None and np.isnan(step).all():
            step = _at_epoch_ends(printed_epoch, _epoch_ends(epoch_records))  # "Epoch 3, validation loss: x"
            known = ~np.isnan(step)
            if not known.any():
                continue  # no training line names its epoch: no telling where an epoch ends
            columns = {name: column[known] for name, column in columns.items()}
            step, n, epoch = step[known], int(known.sum()), None
            columns.pop("_epoch0", None)
        if "_epoch0" in columns:  # timm counts epochs from 0
            epoch = columns.pop("_epoch0") + 1
        if iters is not None:
            step = iters
            printed = _printed_epochs(text, shape, n, lines) if epoch is None and total is not None else None
            if printed is not None:  # Keras' "Epoch k/K" before each epoch's bars: the epoch as printed
                epoch = printed
                if printed[0] > 1:  # a resumed fit: "Epoch 10/50" first, its steps go on from there
                    meta["first_epoch"] = int(printed[0])
            elif epoch is None and total is not None and (
                    described := _described_epochs(text, shape, iters, total, columns["_pos"], lines)) is not None:
                epoch = described  # a bar's "Epoch 96:  80%|...| 966/1200": the epoch its description names
                if Lines.of(text, lines).holds_any(("v_num=",)):  # Lightning's, from 0 (a paste from epoch 1 too)
                    epoch = epoch + 1
            elif epoch is None and total is not None:
                epoch = _epochs_from_wraps(iters, total, columns["_pos"], meta, columns.get(metrics.LOSS),
                                           _headers_between(text, shape, n, lines))
                first = _first_epoch_header(text, lines)
                if first is not None and _records_before_first_header(text, shape, n, lines):
                    first -= 1  # a paste that opens with the end of the epoch before its first header
                if first is not None and first > 1:  # a resumed fit: "Epoch 10/50" first, its steps go on from there
                    epoch = (np.ones(n) if epoch is None else epoch) + (first - 1)
                    meta["first_epoch"] = first
            if epoch is not None and (total is not None and _past_every_length(epoch, iters, total) or _counts_globally(
                    epoch, iters, columns["_pos"], known_length=total is not None and not np.isnan(total).all())):
                step = _on_across_launches(epoch, iters, columns["_pos"])
                epoch = None  # "epoch 2 step 1200": the step goes on across epochs already
            if epoch is not None:
                if np.nanmin(epoch) == 0:  # epochs counted from 0
                    epoch = epoch + 1
                # (a tool's own reader keeps its steps: FuxiCTR's "--- 8058/8058 batches finished ---")
                bars = dialect.name == "text" and total is not None and _finished_bars_alone(iters, total, epoch)
                if total is None:
                    total = length_of_global_prints(epoch, iters) or _epoch_length(iters)
                else:
                    total = np.where(np.isnan(total), _epoch_length(iters), total)
                # mmengine / MMDetection count iterations inside an epoch: make them global.
                step = (epoch - 1) * total + step
                meta["iters_per_epoch"] = int(np.nanmax(total))
                training = _trainings_started_over(step, columns["_pos"])
                if training is not None and restarts_are_trainings(training, step, columns.get(metrics.LOSS),
                                                                   columns["_pos"]):
                    # Launches appended to one log, each from its first epoch: trainings, each read as a
                    # run (restarted_steps), counted on from 0 by a stretch longer than any of them.
                    length = int(np.nanmax(step)) + 1
                    step = step + (training - 1) * length
                    meta[RESTARTED_LENGTH], meta[RESTARTED_FROM] = length, 0
                if bars:
                    # Keras' fit pasted one finished bar an epoch ("467208/467208 [====] - 192s - loss:
                    # 4.6073 - val_loss: 4.6297"): each row is an epoch's mean, the epoch its step.
                    step = epoch.astype("float64")
                    meta[STEP_UNIT] = "epoch"
        if dialect.step_wraps and iters is None and epoch is None and shape.head[:1] == (metrics.STEP,) \
                and n >= 3 and not np.isnan(step).all():
            # "iter: 300" then "iter: 0": a count inside the epoch, printed as if it were the step.
            wrapped = _epochs_from_wraps(step, np.full(n, np.nanmax(step)), columns["_pos"], meta,
                                         to_start=True)
            if wrapped is not None:
                length = _epoch_length(step)
                headed = _epochs_headed(text, shape, wrapped, lines)
                if headed is not None:  # each count under its epoch's line: epochs, however its loss starts
                    wrapped = headed
                elif restarts_are_trainings(wrapped, step, columns.get(metrics.LOSS), columns["_pos"]):
                    meta[RESTARTED_LENGTH] = int(length)  # trainings, each read as a run (restarted_steps)
                step = (wrapped - 1) * length + step
                meta["iters_per_epoch"] = int(length)
        for name in ("_step_key", "_step_col"):
            if name in columns:
                key = columns.pop(name)
                step = np.where(np.isnan(key), step, key)
        if shape.prefix and n >= 2 and record_steps and bool((step == step[0]).all()):
            # Every evaluation line at one "step" (Time-Series-Library's "Epoch: 3, Steps: 384 |
            # Train Loss: ... Vali Loss: ...": the epoch's length): the step of the training record
            # each was printed after (its own line's).
            placed = _after_records(shape, n, parts[:part], record_steps, Lines.of(text, lines))
            step = step if placed is None else placed
        if total is not None and epoch is None:
            name, rule = dialect.total_meta
            meta.setdefault(name, int(np.nanmax(total) if rule == "max" else total[np.argmin(columns["_pos"])]))
        if record_steps is not None:
            record_steps[part] = step
        if not shape.prefix:
            steps_of[shape.pattern] = step
            if printed_epoch is not None:
                epoch_records.append((printed_epoch, step))
        columns["_step"] = step
        columns["_fills"] = np.full(n, shape.fills)
        columns["_beside"] = np.zeros(n, dtype=bool)
        if not shape.prefix:
            table_of[shape.pattern] = columns
        tables.append(columns)
        table_shapes.append(shape)
    if not tables:
        return pd.DataFrame(index=pd.Index([], dtype="int64", name=metrics.STEP), dtype="float64"), {}
    if text and len(tables) > 1 and not dialect.step_from_order:
        tables, table_shapes = _without_summaries(tables, table_shapes, Lines.of(text, lines))
    went_back = not dialect.step_from_order and _went_back(tables, table_shapes, dialect, abandoned, text, lines)
    if dialect.restarts and not went_back and dialect.shapes[0] in table_shapes:
        main = tables[table_shapes.index(dialect.shapes[0])]
        if len(main["_pos"]) > 1:
            main.update(_last_records(main, dialect, warnings))
    if dialect.step_from_order and text and len(tables) > 1:
        _in_text_order(tables, table_shapes, Lines.of(text, lines))
    table = tables[0] if len(tables) == 1 else _concat(tables)
    beside = table.pop("_beside").astype(bool)
    if dialect.step_from_order:
        order = np.argsort(table["_pos"], kind="stable")
        table = {name: column[order] for name, column in table.items()}
        counts = table.pop("_counts").astype(bool) if "_counts" in table else np.ones(len(order), bool)
        counts &= ~beside[order]  # a value beside a record joins its step (the record before it)
        counts &= ~_printed_twice(table, counts)
        kept = _went_back_in_order(table, counts, dialect, abandoned) if "epoch" in table else None
        if kept is not None:  # a resumed run printed its records again from an earlier epoch
            table = {name: column[kept] for name, column in table.items()}
            counts, beside = counts[kept], beside[order][kept]
        ordinal = np.cumsum(counts)
        carried = table["_step"]  # a step the records hold (the dialect's step_key)
        steps_carried = carried[counts]
        if len(steps_carried) and not np.isnan(steps_carried).any() and bool((np.diff(steps_carried) >= 0).all()):
            # Other records keep a step of their own, or join the step before them.
            table["_step"] = np.where(np.isnan(carried), np.r_[0.0, steps_carried][ordinal], carried)
            meta["step_source"] = "key"
        else:
            table["_step"] = ordinal.astype("float64")
            meta["step_source"] = "order"
            above = _counts_above(text, lines, table_shapes, counts) if text and kept is None else None
            if above is not None:  # each record under a line naming its epoch or step (HLFormer's "Epoch: 14")
                counted, unit = above
                table["_step"] = np.r_[np.nan, counted][ordinal]
                meta["step_source"] = f"{unit}_lines"
                if unit == "epoch":
                    meta[STEP_UNIT] = "epoch"
    return _steps_frame(table, beside, dialect, warnings)


def _counts_above(text: str, lines: Lines | None, shapes: list[Shape], counts: np.ndarray
                  ) -> tuple[np.ndarray, str] | None:
    """For records of one shape that carry no step (``counts``: those that count one, in text
    order), the epoch a line between each and the record before it names (``Epoch: 14`` above
    ``Average Loss: nan``), or else the step a line of its own names there (NeMo 0.x's ``Step:
    2100`` above ``Loss: 100.46``), where every record has one and they rise, with ``"epoch"`` or
    ``"step"``; else None.

    Example:
        >>> from sentinel.analyze.loaders.dialects import LOSS_LINES
        >>> text = "Epoch: 14  A Relative Failure\\nAverage Loss: nan\\nR@1: 0.0\\nEpoch: 15\\nAverage Loss: nan\\n"
        >>> counted, unit = _counts_above(text, None, [LOSS_LINES.shapes[0]], np.ones(2, dtype=bool))
        >>> counted.tolist(), unit
        ([14.0, 15.0], 'epoch')
    """
    if len(shapes) != 1 or counts.sum() < 2:
        return None
    lines = Lines.of(text, lines)
    starts = None
    for pattern, unit in ((_EPOCH_NAMED, "epoch"), (_STEP_NAMED, "step")):
        at = lines.starts(pattern)  # (on the line skeletons: a Trainer log of 20,000 dicts has none)
        if len(at) < counts.sum():
            continue
        starts = _text_positions(lines, shapes[0], len(counts)) if starts is None else starts
        if starts is None:
            return None
        records = np.asarray(starts, dtype=np.int64)[counts]
        # (each record's line after the record before it: one named line each, its count rising)
        counted = _named_before(*_named_lines(lines, pattern, at), records, since=np.r_[-1, records[:-1] + 1])
        if not np.isnan(counted).any() and bool((np.diff(counted) > 0).all()):
            return counted, unit
    return None


# A line of a step alone, under a logger's prefix: NeMo 0.x's "Step: 2100" (not "Step time: 0.52 seconds"),
# dotaservice's "iteration 9/10000" (its total after it).
_STEP_NAMED = re.compile(r"^(?![^\n]*(?i:loss))[^\n]*?\b(?i:step|iter(?:ation)?)\b[^\S\n]*[:=#]?[^\S\n]*(\d+)"
                         r"(?:[^\S\n]*/[^\S\n]*\d+)?[^\S\n]*$", re.MULTILINE)


def _named_lines(lines: Lines, pattern: re.Pattern, at: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Where each line ``pattern`` (a line-local one, its count in its first group) matches starts,
    and the count it names: the lines found on the line skeletons (``at`` where found already), the
    counts read at those lines alone."""
    at = lines.starts(pattern) if at is None else at
    return at, np.array([float(pattern.match(lines.text, int(p)).group(1)) for p in at.tolist()], dtype=np.float64)


def _named_before(at: np.ndarray, named: np.ndarray, starts: np.ndarray, since: np.ndarray) -> np.ndarray:
    """For each of ``starts``, the count ``named`` by the last line (``at``) before it that starts at
    ``since`` or later; NaN where there is none (``at`` holds one line at least).

    Example:
        >>> _named_before(np.array([0, 30]), np.array([8.0, 12.0]), np.array([10, 20, 40]), np.array([0, 10, 20]))
        array([ 8., nan, 12.])
    """
    h = np.searchsorted(at, starts) - 1  # the last such line before each
    return np.where((h >= 0) & (at[np.maximum(h, 0)] >= since), named[np.maximum(h, 0)], np.nan)


def _without_summaries(tables: list[dict[str, np.ndarray]], shapes: list[Shape], lines: Lines
                       ) -> tuple[list[dict[str, np.ndarray]], list[Shape]]:
    """``tables`` without the training records of a shape whose every record (two or more) is
    printed after a record of another shape, at a step before that one's: a count of epochs
    printed as if it were the step, a summary of the epoch the other lines already hold (MONAI's
    UNETR trainer: "Epoch 2/300 800/1000 loss: 0.9412" then "Final training  2/299 loss: 0.9412",
    read as step 2 among steps 2000-2800)."""
    records = [i for i, (shape, table) in enumerate(zip(shapes, tables)) if not (
        shape.prefix or shape.fills or table["_beside"][:1].any()) and metrics.LOSS in table]
    if len(records) < 2:
        return tables, shapes
    placed = {}  # each record shape's records: where each starts in the text, and its step, in text order
    for i in records:
        n = len(tables[i]["_pos"])
        where = _text_positions(lines, shapes[i], n)
        if where is not None:
            placed[i] = (where, tables[i]["_step"][np.argsort(tables[i]["_pos"], kind="stable")])
    drop = set()
    for i, (at, steps) in placed.items():
        if len(at) < 2:
            continue
        for j, (where, other) in placed.items():
            before = np.searchsorted(where, at, side="left") - 1
            if j != i and j not in drop and (before >= 0).all() and bool((steps < other[before]).all()):
                drop.add(i)
                break
    return ([t for i, t in enumerate(tables) if i not in drop], [s for i, s in enumerate(shapes) if i not in drop])


def _training_records(parts: list[tuple[Shape, dict[str, np.ndarray]]], record_steps: dict[int, np.ndarray],
                      lines: Lines) -> tuple[np.ndarray, np.ndarray, int] | None:
    """Where each training record of ``parts`` (stepped in ``record_steps``) starts in the text, its
    step, and how many shapes they are of; None where there are none, or where a shape's matches
    are not its records one for one (some were no records: no telling where each is)."""
    starts, steps = [], []
    for i, (shape, _) in enumerate(parts):
        if i not in record_steps or shape.prefix or shape.beside is not None or shape.fills:
            continue
        where = _text_positions(lines, shape, len(record_steps[i]))
        if where is None:
            return None
        starts.append(where)
        steps.append(record_steps[i])
    if not starts:
        return None
    return np.concatenate(starts), np.concatenate(steps), len(starts)


def _own_count(step: np.ndarray, record_steps: dict[int, np.ndarray]) -> bool:
    """Whether an evaluation's steps start again (fall back) where the training records' never do.

    Example:
        >>> _own_count(np.array([99.0, 199, 99, 199]), {0: np.array([1.0, 101, 201])})
        True
    """
    return bool((np.diff(step) < 0).any()) and all(
        bool((np.diff(s[~np.isnan(s)]) >= 0).all()) for s in record_steps.values())


def _after_records(shape: Shape, n: int, parts: list[tuple[Shape, dict[str, np.ndarray]]],
                   record_steps: dict[int, np.ndarray], lines: Lines) -> np.ndarray | None:
    """For the ``n`` records of ``shape``, the step of the last training record (of ``parts``,
    stepped in ``record_steps``) that starts at or before each in the text; None where the
    records' places cannot be told or one has no training record before it."""
    at = _text_positions(lines, shape, n) if lines.text else None
    placed = None if at is None else _training_records(parts, record_steps, lines)
    if placed is None:
        return None
    where, step, _ = placed
    order = np.argsort(where, kind="stable")
    before = np.searchsorted(where[order], at, side="right") - 1
    return None if (before < 0).any() else step[order][before]


def _steps_frame(table: dict[str, np.ndarray], beside: np.ndarray, dialect: Dialect, warnings: list[str]
                 ) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """The steps frame of merged records (``_step``, ``_fills`` and ``_pos`` among their columns;
    ``beside``: which are values beside another record), and where a NaN was logged."""
    step = table.pop("_step")
    fills = table.pop("_fills").astype(bool)
    del table["_pos"]
    if beside.any() and not dialect.step_from_order:  # a value beside a record: at the steps records have
        keep = ~beside | np.isin(step, step[~beside])
        if not keep.all():
            table = {name: column[keep] for name, column in table.items()}
            step, fills = step[keep], fills[keep]
    with np.errstate(invalid="ignore"):
        known = np.abs(step) < STEP_LIMIT  # False for NaN: a record without a step
    too_large = int((~known & ~np.isnan(step)).sum())
    if too_large:
        warnings.append(f"{too_large} {dialect.record_word} line(s) with a step too large for a 64-bit "
                        "integer (e.g. 1e30) were skipped")
    if not known.all():
        table = {name: column[known] for name, column in table.items()}
        step, fills = step[known], fills[known]
    if not fills.any() and (len(step) < 2 or bool((step[1:] >= step[:-1]).all())):
        # Records in step order: merge runs with numpy, and build the frame in its final
        # column order without the NaN marks (no copy later).
        _say_several_losses(table, step, dialect, warnings)
        index, columns = _last_per_step(table, step)
        logged_nan = {name[len(NAN_PREFIX):]: columns.pop(name) == 1.0
                      for name in [c for c in columns if c.startswith(NAN_PREFIX)]}
        first = [c for c in _FIRST_COLUMNS if c in columns]
        main = pd.DataFrame({name: columns[name] for name in first + sorted(c for c in columns if c not in first)},
                            index=index)
        return as_float64(main), logged_nan
    else:
        # The step lines in step order (stable: a step's records keep their order), merged as
        # above; summary lines only fill what no step line of their step gave.
        order = np.flatnonzero(~fills)[np.argsort(step[~fills], kind="stable")]
        ordered = {name: column[order] for name, column in table.items()}
        _say_several_losses(ordered, step[order], dialect, warnings)
        index, columns = _last_per_step(ordered, step[order])
        main = pd.DataFrame(columns, index=index)
        if fills.any():
            frame = pd.DataFrame({name: column[fills] for name, column in table.items()})
            frame["_step"] = step[fills]
            filled = frame.groupby("_step", sort=True).last()
            filled.index = filled.index.astype("int64")
            main = main.combine_first(filled)
        main.index = main.index.astype("int64")
    main.index.name = metrics.STEP
    logged_nan = {}
    for column in [c for c in main.columns if c.startswith(NAN_PREFIX)]:
        logged_nan[column[len(NAN_PREFIX):]] = (main.pop(column) == 1.0).to_numpy()
    return as_float64(main), logged_nan


def _say_several_losses(table: dict[str, np.ndarray], step: np.ndarray, dialect: Dialect, warnings: list[str]) -> None:
    """:func:`several_losses_per_step`'s warning, where records in step order (``table``'s, at
    ``step``) print their loss more than once a step."""
    if metrics.LOSS in table and len(step) > 1 and bool((step[1:] == step[:-1]).any()):
        said = several_losses_per_step(step, table[metrics.LOSS], dialect.record_word,
                                       table.get(NAN_PREFIX + metrics.LOSS))
        if said is not None:
            warnings.append(said)


def _spread_over_records(shape: Shape, columns: dict[str, np.ndarray], n: int, records: int | None,
                         lines: Lines) -> dict[str, np.ndarray] | None:
    """A beside shape's values, found on some of its records' lines only, spread over all those
    records (NaN on the lines without one): each value goes to the record whose line starts where
    its own does (both patterns match at line starts). None where they cannot be told apart."""
    if records is None or n == records:
        return None
    own, theirs = lines.starts(shape.pattern), lines.starts(shape.beside)
    if len(own) != n or len(theirs) != records or not n:
        return None
    at = np.searchsorted(theirs, own)
    if bool((at >= records).any()) or bool((theirs[np.minimum(at, records - 1)] != own).any()):
        return None
    spread = {}
    for name, column in columns.items():
        full = np.full(records, np.nan) if column.dtype.kind == "f" else np.zeros(records, dtype=column.dtype)
        full[at] = column
        spread[name] = full
    spread["_pos"] = np.arange(records, dtype=np.int64)
    return spread


def _each_an_epochs_end(columns: dict[str, np.ndarray], n: int, records: int | None) -> bool:
    """Whether a shown-until-changed value is on every record's line and each line is its epoch's
    end (its count at its total): one line an epoch, each with its own evaluation (Keras'
    ``fit(verbose=2)``: ``1875/1875 - 3s - ... - loss: 0.3 - val_loss: 0.5``), no bar redrawn.

    Example:
        >>> _each_an_epochs_end({"_iter": np.array([5., 5.]), "_total": np.array([5., 5.])}, 2, 2)
        True
    """
    count, total = columns.get("_iter"), columns.get("_total")
    return n > 0 and n == records and count is not None and total is not None and bool((count == total).all())


def _keep_where_first_shown(columns: dict[str, np.ndarray], n: int) -> None:
    """Each value a line shows again until it changes (a bar's validation loss), kept only at the
    record before the one that first shows it (:attr:`Shape.shown_until_changed`), in place.

    Example:
        >>> c = {"val_loss": np.array([np.nan, np.nan, 0.7, 0.7, 0.7, 0.6, 0.6])}
        >>> _keep_where_first_shown(c, 7); c["val_loss"].tolist()
        [nan, 0.7, nan, nan, 0.6, nan, nan]
    """
    for name in [name for name in columns if not name.startswith("_")]:
        values = columns[name]
        mark = columns.get(NAN_PREFIX + name, np.full(n, np.nan))
        logged_nan = mark == 1.0
        shown = ~np.isnan(values) | logged_nan
        same = np.zeros(n, dtype=bool)  # the record before showed the same
        same[1:] = shown[1:] & shown[:-1] & ((values[1:] == values[:-1]) | (logged_nan[1:] & logged_nan[:-1]))
        first = np.flatnonzero(shown & ~same)
        at = np.maximum(first - 1, 0)
        kept, kept_mark = np.full(n, np.nan), np.full(n, np.nan)
        kept[at], kept_mark[at] = values[first], mark[first]
        columns[name] = kept
        if NAN_PREFIX + name in columns:
            columns[NAN_PREFIX + name] = kept_mark


def _fold_beside(shape: Shape, columns: dict[str, np.ndarray], n: int, table_of: dict, owners: collections.Counter,
                 dialect: Dialect) -> bool:
    """Put a shape's values beside another shape's records (``shape.beside``) into those records'
    own columns, one for one, when that gives what merging them as records of their own at the
    same steps would: as many values as records (the same lines, in order), the same ``fills``,
    and no other shape has a column of theirs (so no step's last value can come from elsewhere).
    Returns whether it did; a log of 30,000 loss lines with the lr and grad norm beside the loss is
    then merged as 30,000 rows, not 90,000 sorted by step."""
    owner = table_of.get(shape.beside)
    if owner is None or dialect.step_from_order or len(owner["_pos"]) != n \
            or bool(owner["_fills"][:1].any()) != shape.fills:
        return False
    values = [name for name in columns if not name.startswith("_") or name.startswith(NAN_PREFIX)]
    if any(owners[name] > 1 or name in owner for name in values):
        return False
    for name in values:
        owner[name] = columns[name]
    return True


def _beside_steps(shape: Shape, columns: dict[str, np.ndarray], n: int, records_of: dict, steps_of: dict,
                  dialect: Dialect) -> np.ndarray | None:
    """The steps of a shape's values beside another shape's records (``shape.beside``): as many
    as those records, theirs one for one (the same lines, in order: their steps were worked out
    from all of them, as this shape's own head alone could not); else, with a step of their own
    and not numbered in order, their own (kept later only at steps the records have); else None.
    The head's fields are taken out of ``columns``."""
    own = columns.pop("_step", None)
    for name in ("_iter", "_epoch", "_total", "_epoch0", "_step_key", "_step_col"):
        columns.pop(name, None)
    if records_of.get(shape.beside) == n and shape.beside in steps_of:
        return steps_of[shape.beside].copy()
    if own is not None and not dialect.step_from_order and shape.head[:1] == (metrics.STEP,):
        return own
    return None


def _printed_twice(table: dict[str, np.ndarray], counts: np.ndarray) -> np.ndarray:
    """Records numbered by order that repeat the record before them at another precision: the
    same step printed twice (LLaMA-Factory's LogCallback prints "{'loss': 0.0000, 'learning_rate':
    4.9999e-02, 'epoch': 0.01}" beside the Trainer's "{'loss': 0.0, 'learning_rate':
    0.04999871292419044, 'epoch': 0.01}"). The same epoch, the same loss to the coarser print's
    digits, and a learning rate that agrees to 5 digits without being the same float (two real
    steps of a constant learning rate print it identically; two prints of one step round it
    differently). A NaN loss printed twice is the same loss.

    Example:
        >>> t = {"epoch": np.array([0.01, 0.01, 0.02]), "loss": np.array([0.0, 0.0, 0.0]),
        ...      "lr": np.array([4.9999e-02, 0.04999871292419044, 0.0499948])}
        >>> _printed_twice(t, np.ones(3, bool)).tolist()
        [False, True, False]
    """
    again = np.zeros(len(counts), dtype=bool)
    epoch, loss, lr = table.get("epoch"), table.get(metrics.LOSS), table.get(metrics.LR)
    if epoch is None or loss is None or lr is None or len(counts) < 2:
        return again
    rows = np.flatnonzero(counts)  # the records that are steps, in order
    if len(rows) < 2:
        return again
    prev, cur = rows[:-1], rows[1:]
    with np.errstate(invalid="ignore"):
        same = (epoch[cur] == epoch[prev]) \
            & ((np.abs(loss[cur] - loss[prev]) <= 5e-5 + 1e-4 * np.abs(loss[prev]))
               | (np.isnan(loss[cur]) & np.isnan(loss[prev]))) \
            & (np.abs(lr[cur] - lr[prev]) <= 2e-5 * np.abs(lr[prev])) & (lr[cur] != lr[prev])
    again[cur[same]] = True
    return again


def _may_blank(lines: Lines, words: tuple[str, ...]) -> bool:
    """Whether :func:`split_evaluation_lines` may change the text: asked of its line skeletons where lines
    repeat (the words are letters, which a skeleton keeps, and a line is emptied or kept for what
    it holds alone), which is one pass over a few hundred bytes instead of one ``find`` per word
    over the whole text.

    Example:
        >>> text = "step 1 loss 2\\n" * 400
        >>> _may_blank(Lines(text), ("valid",)), _may_blank(Lines(text + "valid loss 3\\n"), ("valid",))
        (False, True)
    """
    distinct = lines.distinct_text()
    return distinct is lines.text or bool(split_evaluation_lines(distinct, words)[1])


# Words that make a line a training line where they come before an evaluation word on it: a loss,
# or the training set's value named by the set alone ("train=0.08 valid=0.07").
_TRAINING_FIRST = ("loss", "train=", "train:")


def _trained_before(lower: str, start: int, at: int, firsts: tuple[str, ...]) -> bool:
    """Whether one of ``firsts`` comes between ``start`` and ``at`` in ``lower``, a set's name
    (``train:``) with a number after it: FACIL's "| Train: skip eval | Valid: ... loss=5.74 |" holds
    the validation's loss alone.

    Example:
        >>> first = _TRAINING_FIRST
        >>> _trained_before("train: 0.08 valid: 0.07", 0, 12, first), _trained_before("train: skip val", 0, 12, first)
        (True, False)
    """
    for first in firsts:
        found = lower.find(first, start, at)
        if found >= 0 and (first == "loss" or any(c.isdigit() for c in lower[found:at])):
            return True
    return False


def split_evaluation_lines(text: str, words: tuple[str, ...], unless_after: tuple[str, ...] = _TRAINING_FIRST
                           ) -> tuple[str, str]:
    """``text`` with every line that holds one of ``words`` (a whole word, any case) emptied, its
    line end kept so line numbers hold; and those lines alone, each with a line end. Not where one
    of ``unless_after`` comes first on the line (an evaluation word after a loss: "train loss: 0.5 -
    validation loss: 0.6" is a training line; so is "Epoch 3: train=0.08 valid=0.07"). ``str.find``
    over the lower-cased text (a regular expression with word boundaries took 0.7 s on 14 MB; this
    takes a few milliseconds where the words are rare).

    Example:
        >>> split_evaluation_lines("step 1 loss 2\\nValid loss 3\\nstep 2 loss 1 test loss 0.9\\n", ("valid", "test"))
        ('step 1 loss 2\\n\\nstep 2 loss 1 test loss 0.9\\n', 'Valid loss 3\\n')
        >>> split_evaluation_lines("lokr-test-2: 10%|9 | 299/3000 [10:44, lr: 2e-04 loss: 0.52]\\n", ("test",))[1]
        ''
    """
    rest, picked, _ = split_evaluation_lines_at(text, words, unless_after)
    return rest, "".join(picked)


def without_evaluations(text: str, words: tuple[str, ...]) -> str:
    """``text`` with its evaluation lines emptied: those :func:`split_evaluation_lines` empties for
    ``words`` and the lines of evaluation passes (:func:`evaluation_block_spans`), as :func:`scan`
    leaves them out of the training read.

    Example:
        >>> without_evaluations("Start training\\nstep 1 loss 2\\nStart validation\\nstep 1 loss 3\\n"
        ...                     "Start training\\nValid loss 3\\n", ("valid",))
        'Start training\\nstep 1 loss 2\\nStart validation\\n\\nStart training\\n\\n'
    """
    return split_evaluation_lines_at(text, words, passes=evaluation_block_spans(text)[0])[0]


def split_evaluation_lines_at(text: str, words: tuple[str, ...], unless_after: tuple[str, ...] = _TRAINING_FIRST,
                              lines: Lines | None = None, passes: list[tuple[int, int]] = ()
                              ) -> tuple[str, list[str], list[int]]:
    """:func:`split_evaluation_lines`, the lines apart, and where each was in the text returned (the
    offset of the empty line it left). ``lines``: ``Lines(text)``, whose distinct line skeletons
    say which lines are emptied where the lines repeat (each ``find`` of a word over the text
    stops at every "val" of "interval"). ``passes``: the spans of more lines to split off (the
    lines of evaluation passes, :func:`evaluation_block_spans`).

    Example:
        >>> split_evaluation_lines_at("step 1 loss 2\\nValid loss 3\\nstep 2 loss 1\\n", ("valid",))
        ('step 1 loss 2\\n\\nstep 2 loss 1\\n', ['Valid loss 3\\n'], [14])
    """
    by_line = _emptied_lines(text, words, unless_after, lines) if lines is not None and lines.text is text else None
    if by_line is not None:
        spans = list(zip(*by_line)) + list(passes)
        return _cut_spans(text, spans) if spans else (text, [], [])
    lower = text.lower()
    if len(lower) != len(text):  # a character whose lower case is longer: leave the words alone
        return _cut_spans(text, list(passes)) if passes else (text, [], [])
    spans: list[tuple[int, int]] = []
    for word in sorted(set(words), key=len):
        at = lower.find(word)
        while at >= 0:
            end_word = at + len(word)
            # (a word inside a hyphenated name is the name's: ai-toolkit's bar of its job "lokr-test-2")
            whole = (at == 0 or not _is_word_char(lower[at - 1])) and \
                (end_word == len(lower) or not _is_word_char(lower[end_word])) and \
                not (at >= 2 and lower[at - 1] == "-" and _is_word_char(lower[at - 2]))
            start = lower.rfind("\n", 0, at) + 1
            if whole and not _trained_before(lower, start, at, unless_after):
                end = lower.find("\n", end_word)
                spans.append((start, len(lower) if end < 0 else end))
                at = lower.find(word, spans[-1][1])
            else:
                at = lower.find(word, at + 1)
    spans += passes
    if not spans:
        return text, [], []
    return _cut_spans(text, spans)


def _emptied_lines(text: str, words: tuple[str, ...], unless_after: tuple[str, ...], lines: Lines
                   ) -> tuple[list[int], list[int]] | None:
    """Where each line :func:`split_evaluation_lines` empties starts and ends (its line end left
    out), asked of the distinct line skeletons: a line is emptied for what it holds alone, and a
    skeleton keeps its letters and where its word characters are. None where that does not
    serve: a text that is not ASCII (a skeleton's offsets are bytes) or whose lines do not repeat."""
    skeletons = lines.skeletons() if text.isascii() else None
    if skeletons is None or len(skeletons.uniques) * _REPEATS_TO_ASK_SKELETONS > len(skeletons.codes):
        return None
    emptied = np.array([bool(split_evaluation_lines(line, words, unless_after)[1]) for line in skeletons.texts()])
    which = np.flatnonzero(emptied[skeletons.codes])
    ends = np.append(skeletons.starts[1:] - 1, len(text) - text.endswith("\n"))
    return skeletons.starts[which].tolist(), ends[which].tolist()


# Lines per distinct skeleton, at least, for a text's lines to be asked of its skeletons.
_REPEATS_TO_ASK_SKELETONS = 4


def _cut_spans(text: str, spans: list[tuple[int, int]]) -> tuple[str, list[str], list[int]]:
    """``text`` with each span emptied, the spans' texts (each with a line end), and where each
    was in the text returned."""
    rest, picked, at, pos, removed = [], [], [], 0, 0
    for start, end in sorted(spans):
        if end <= pos:
            continue
        rest.append(text[pos:max(start, pos)])
        picked.append(text[max(start, pos):end] + "\n")
        at.append(max(start, pos) - removed)
        removed += end - max(start, pos)
        pos = end
    rest.append(text[pos:])
    return "".join(rest), picked, at


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _went_back(tables: list[dict[str, np.ndarray]], shapes: list[Shape], dialect: Dialect,
               abandoned: list[AbandonedHistory] | None, text: str = "", lines: Lines | None = None) -> bool:
    """Where the training records' steps go back in text order (a run resumed from an earlier
    checkpoint into the same log: :mod:`~sentinel.analyze.loaders.went_back`), drop from
    ``tables`` (in place) the records the later history replaced, and put each replaced stretch,
    with the history before it, in ``abandoned``. Records of other shapes go with the history
    they were printed in, where ``text`` places them (else where their own steps go back).
    Returns whether the steps went back."""
    main = next((i for i, (shape, table) in enumerate(zip(shapes, tables))
                 if not (shape.prefix or shape.fills or table["_beside"][:1].any())
                 and (metrics.LOSS in table or NAN_PREFIX + metrics.LOSS in table)), None)
    if main is None:
        return False
    table = tables[main]
    order = np.argsort(table["_pos"], kind="stable")
    steps = table["_step"][order]
    with np.errstate(invalid="ignore"):
        steps = np.where(np.abs(steps) < STEP_LIMIT, steps, np.nan)  # too large: skipped later, with a warning
    starts = fall_backs(steps)
    if not len(starts):
        return False
    for stretch in replaced_stretches(steps, starts) if abandoned is not None else ():
        before = {name: column[order[stretch.rows]] for name, column in table.items() if name != "_beside"}
        abandoned.append(_replaced_history(before, stretch.resumed_at, stretch.first, stretch.last, dialect))
    keep = np.empty(len(order), dtype=bool)
    keep[order] = survivors(steps, starts)
    tables[main] = {name: column[keep] for name, column in table.items()}
    lines = Lines.of(text, lines) if text else None  # made only here: most logs never go back
    placed = None if lines is None else _text_positions(lines, shapes[main], len(order))
    restarts_at = None if placed is None else placed[order[starts]]
    for i, (shape, other) in enumerate(zip(shapes, tables)):
        if i == main or other["_beside"][:1].any():
            continue  # a value beside a record is kept only at the steps records have
        other_order = np.argsort(other["_pos"], kind="stable")
        other_steps = other["_step"][other_order]
        at = None if restarts_at is None else _text_positions(lines, shape, len(other_order))
        if at is not None:  # each record in the history it was printed in
            kept = survivors_of(other_steps, np.searchsorted(restarts_at, at, side="right"), steps[starts])
        else:  # where its own steps go back with the loss's
            kept = survivors(other_steps, fall_backs(other_steps))
        if not kept.all():
            keep = np.empty(len(other_order), dtype=bool)
            keep[other_order] = kept
            tables[i] = {name: column[keep] for name, column in other.items()}
    return True


def _replaced_history(records: dict[str, np.ndarray], resumed_at: int, first: int, last: int,
                      dialect: Dialect) -> AbandonedHistory:
    """A replaced stretch from the records of the history as it stood then (their columns, with
    ``_step``, ``_fills`` and ``_pos``), its NaNs logged as the frame's are."""
    frame, logged_nan = _steps_frame(records, np.zeros(len(records["_step"]), dtype=bool), dialect, [])
    return AbandonedHistory(resumed_at, first, last, frame,
                            {key: frame.index[mask].tolist() for key, mask in logged_nan.items() if mask.any()})


def _in_text_order(tables: list[dict[str, np.ndarray]], shapes: list[Shape], lines: Lines) -> None:
    """Number the records of several record shapes (none beside another's records) by where each starts in the
    text, for records numbered in text order: each shape's ``_pos`` counts its own records (a loss line of one
    shape, "loss=-0.17, ...", then one of another, "ValueError: loss=nan, ...", were read in the other order)."""
    if any(shape.beside is not None or table["_beside"].any() for shape, table in zip(shapes, tables)):
        return
    starts = [lines.starts(shape.pattern) for shape in shapes]
    if any(len(table["_pos"]) and table["_pos"].max() >= len(at) for table, at in zip(tables, starts)):
        return
    for table, at in zip(tables, starts):
        table["_pos"] = at[table["_pos"]]


def _text_positions(lines: Lines, shape: Shape, n: int) -> np.ndarray | None:
    """Where each of a shape's ``n`` records starts in the text (in text order), or None where its
    pattern's matches are not its records one for one (some were dropped)."""
    at = lines.starts(shape.pattern)
    return at if len(at) == n else None


def _went_back_in_order(table: dict[str, np.ndarray], counts: np.ndarray, dialect: Dialect,
                        abandoned: list[AbandonedHistory] | None) -> np.ndarray | None:
    """For records numbered in order (``table`` in text order, ``counts``: the records that count
    a step) that carry their epoch (the Hugging Face Trainer's dicts): where the epoch goes back (a
    run resumed from a checkpoint into the same log), which records to keep, and each replaced
    stretch in ``abandoned``, numbered as its history stood then (by the records' own step where
    every one has it); None where the epoch never goes back."""
    rows = np.flatnonzero(counts)
    epoch = table["epoch"][rows]
    starts = fall_backs(epoch)
    if not len(starts):
        return None
    carried = table["_step"][rows]
    for stretch in replaced_stretches(epoch, starts) if abandoned is not None else ():
        start = int(starts[stretch.index])
        before = int(survivors(epoch[:start], starts[:stretch.index]).sum())  # the history's records, up to it
        if np.isnan(carried[stretch.rows]).any():  # numbered in order, as the history stood then
            step = np.arange(before - len(stretch.rows) + 1, before + 1, dtype="float64")
        else:
            step = carried[stretch.rows]
        replaced = int((epoch[stretch.rows] >= epoch[start]).sum())
        before = {name: column[rows[stretch.rows]] for name, column in table.items() if name != "_step"}
        before["_step"], before["_fills"] = step, np.zeros(len(step), dtype=bool)
        first = int(step[len(step) - replaced])
        abandoned.append(_replaced_history(before, first, first, int(step[-1]), dialect))
    # Every record (evaluations too) goes with the history it was printed in.
    return survivors(table["epoch"], rows[starts])


def _last_records(columns: dict[str, np.ndarray], dialect: Dialect, warnings: list[str]) -> dict[str, np.ndarray]:
    """:attr:`Dialect.restarts`: of the records (in text order) of one step, only the last one."""
    step = columns["_step"]
    order = np.argsort(columns["_pos"], kind="stable")
    in_order = step[order]
    _, first = np.unique(in_order, return_index=True)
    again = np.ones(len(in_order), dtype=bool)
    again[first] = False
    if not again.any():
        return columns
    _, last = np.unique(in_order[::-1], return_index=True)
    keep = np.sort(order[len(in_order) - 1 - last])
    warnings.append(f"{int(again.sum())} {dialect.record_word}(s) logged more than once (first: "
                    f"{int(in_order[np.argmax(again)])}), e.g. after a restart: the last occurrence was kept")
    return {name: column[keep] for name, column in columns.items()}


def _first_epoch_header(text: str, lines: Lines | None = None) -> int | None:
    """The epoch of the first Keras ``Epoch k/K`` line, or None (``lines``: ``Lines(text)``,
    asked first whether any distinct line is one: the pattern has no literal start).

    Example:
        >>> _first_epoch_header("Epoch 10/50\\n 50/196 [===] - loss: 2.1\\n")
        10
    """
    if "Epoch " not in text or not Lines.of(text, lines).holds_any((KERAS_EPOCH_HEADER,)):
        return None
    found = KERAS_EPOCH_HEADER.search(text)
    return None if found is None else int(found.group(0).split()[1].split("/")[0])


def _records_before_first_header(text: str, shape: Shape, n: int, lines: Lines | None = None) -> bool:
    """Whether a record of ``shape`` comes before the first Keras ``Epoch k/K`` line (a paste cut
    in the middle of the epoch before it: its finished bar, then ``Epoch 130/200``).

    Example:
        >>> from sentinel.analyze.loaders.dialects import GENERIC
        >>> bar = next(s for s in GENERIC.shapes if s.pattern.search(" 1/2 [====] - loss: 2.1"))
        >>> _records_before_first_header("2/2 [==] - loss: 2.1\\nEpoch 7/9\\n2/2 [==] - loss: 2.0\\n", bar, 2)
        True
    """
    found = _headers_and_records(text, shape, n, lines)
    return found is not None and bool(len(found[1])) and bool(found[1][0] < found[0][0])


def _printed_epochs(text: str, shape: Shape, n: int, lines: Lines | None = None) -> np.ndarray | None:
    """For each record of ``shape`` (in text order), the epoch of the Keras ``Epoch k/K`` line
    before it: a fit resumed from an earlier epoch (``initial_epoch``) prints its first epoch again,
    which counting the bars' wraps cannot tell. None where no such line is printed, a record comes
    before the first, or the records and the matches do not line up.

    Example:
        >>> from sentinel.analyze.loaders.dialects import GENERIC
        >>> bar = next(s for s in GENERIC.shapes if s.pattern.search(" 1/2 [====] - loss: 2.1"))
        >>> log = "Epoch 7/9\\n1/2 [==] - loss: 2.1\\n2/2 [==] - loss: 2.0\\nEpoch 6/9\\n1/2 [==] - loss: 2.2\\n"
        >>> _printed_epochs(log, bar, 3).tolist()
        [7.0, 7.0, 6.0]
    """
    found = _headers_and_records(text, shape, n, lines)
    if found is None or not n:
        return None
    at, starts = found
    epochs = np.array([float(text[start:text.find("/", start)].split()[-1]) for start in at])
    before = np.searchsorted(at, starts, side="right") - 1
    return None if bool((before < 0).any()) else epochs[before]


# A line that names an epoch and no loss: the header of the records after it (UniMatch's "===========> Epoch: 8,
# LR: 0.0005, Previous best: 70.17" above its "Iters: 0, Total loss: 0.045, ..." lines)
_EPOCH_NAMED = re.compile(r"^(?![^\n]*(?i:loss))[^\n]*?\b(?i:epoch)\b[^\S\n]*[:=#]?[^\S\n]*\[?[^\S\n]*(\d+)",
                          re.MULTILINE)


def _epochs_headed(text: str, shape: Shape, wrapped: np.ndarray, lines: Lines | None = None) -> np.ndarray | None:
    """For records whose count started again (``wrapped``: each record's stretch, from 1, in text
    order), the epoch a line above each stretch names, plus 1 (as ``wrapped`` counts), where every
    stretch after the first has one between it and the stretch before and they rise; else None. A
    training launched again prints no epoch line that goes on from the last.

    Example:
        >>> text = "Epoch: 8\\niter 0 loss 2\\niter 9 loss 1\\nEpoch: 12\\niter 0 loss 2\\niter 9 loss 1\\n"
        >>> from sentinel.analyze.loaders.dialects import GENERIC
        >>> _epochs_headed(text, GENERIC.shapes[0], np.array([1., 1., 2., 2.])).tolist()
        [9.0, 9.0, 13.0, 13.0]
    """
    if "poch" not in text:
        return None
    lines = Lines.of(text, lines)
    starts = np.asarray(lines.starts(shape.pattern), dtype=np.int64)
    if len(starts) != len(wrapped):
        return None
    at, named = _named_lines(lines, _EPOCH_NAMED)
    if not len(at):
        return None
    first = starts[np.flatnonzero(np.diff(np.r_[0.0, wrapped]) > 0)]  # where each stretch's first record starts
    epochs = _named_before(at, named, first, since=np.r_[0, first[:-1]])  # (after the stretch before's first record)
    if len(epochs) < 2 or np.isnan(epochs[1:]).any():
        return None
    if np.isnan(epochs[0]):
        epochs[0] = epochs[1] - 1
    if not bool((np.diff(epochs) > 0).all()) or epochs[0] < 0:
        return None
    return epochs[wrapped.astype(np.int64) - 1] + 1


def _headers_between(text: str, shape: Shape, n: int, lines: Lines | None = None) -> np.ndarray | None:
    """For each record of ``shape`` after the first (in text order), whether a Keras ``Epoch k/K``
    line stands between it and the one before; None when there are none (or records and matches
    do not line up)."""
    found = _headers_and_records(text, shape, n, lines)
    if found is None:
        return None
    at = np.searchsorted(found[0], found[1])
    return at[1:] > at[:-1]


def _headers_and_records(text: str, shape: Shape, n: int, lines: Lines | None = None
                         ) -> tuple[np.ndarray, np.ndarray] | None:
    """Where each Keras ``Epoch k/K`` line and each of ``shape``'s ``n`` records start in the text;
    None where no such line is printed or the records and the pattern's matches do not line up."""
    if "Epoch " not in text:
        return None
    lines = Lines.of(text, lines)
    if not lines.holds_any((KERAS_EPOCH_HEADER,)):
        return None
    headers = np.asarray(lines.starts(KERAS_EPOCH_HEADER), dtype=np.int64)  # a line each: "Epoch k/K"
    starts = np.asarray(lines.starts(shape.pattern), dtype=np.int64)
    if not len(headers) or len(starts) != n:
        return None
    return headers, starts


# A tqdm bar's description naming its epoch, then the bar's percentage (Lightning's "Epoch 96:  80%|",
# a notebook's copy without the bar's blocks, "Epoch 96:  80% 966/1200"): the epoch of the count after it.
_BAR_EPOCH = re.compile(r"\bEpoch[^\S\n]+(\d+)(?:/\d+)?:[^\S\n]*\d{1,3}%[^\n\r]*?(?=\d+/\d+)")


def _described_epochs(text: str, shape: Shape, iters: np.ndarray, total: np.ndarray, pos: np.ndarray,
                      lines: Lines | None = None) -> np.ndarray | None:
    """For records of a bar's count (``iters`` of ``total``, in record order), the epoch named by
    each one's bar description, where every record has one and the count does not tell the
    epochs itself: some epoch's count falls below the one before it without starting again (the
    last frame of each epoch pasted, each stopped at another count: "Epoch 96: 80% 966/1200", then
    "Epoch 97: 78% 938/1200" read as steps 966, then 938), or every record is a finished bar, their
    epochs rising (a paste that kept every other epoch's: "Epoch 1:", "Epoch 3:", ... counted 1, 2,
    ...); else None (the wraps tell the epochs).

    Example:
        >>> from sentinel.analyze.loaders.dialects import GENERIC
        >>> text = "Epoch 6:  80% 966/1200 [loss=0.14]\\nEpoch 7:  78% 938/1200 [loss=0.13]\\n"
        >>> bar = next(s for s in GENERIC.shapes if s.pattern.search(text) and s.head[:2] == ("iter", "total"))
        >>> _described_epochs(text, bar, np.array([966., 938.]), np.array([1200., 1200.]), np.arange(2)).tolist()
        [6.0, 7.0]
    """
    order = np.argsort(pos, kind="stable")
    counts = iters[order]
    fell = counts[1:] < counts[:-1]
    # (finished bars alone: the epochs a paste kept, "Epoch 1: 100%| 172/172", then "Epoch 3:", "Epoch 5:", ...)
    finished = len(counts) >= 2 and bool((counts == total[order]).all())
    if not (fell.any() or finished) or "Epoch " not in text:
        return None
    if fell.any() and bool((counts[1:][fell] <= np.nanmin(counts[:-1][fell]) / 2).all()) \
            and not _epochs_skipped(text, int(fell.sum())):
        return None  # each fall a start again: a count the wraps read (several frames an epoch)
    lines = Lines.of(text, lines)
    starts = np.asarray(lines.starts(shape.pattern), dtype=np.int64)
    described = [(m.start(), float(m.group(1))) for m in _BAR_EPOCH.finditer(text)]
    if len(starts) != len(iters) or len(described) != len(iters):
        return None
    begin, epoch = (np.array(column) for column in zip(*described))
    after = np.append(starts[1:], len(text))  # (a record's match starts at its line's start, or at its count)
    if bool((begin[1:] <= starts[:-1]).any()) or bool((begin >= after).any()):
        return None  # not one description to each record's line
    if not fell.any() and not bool((np.diff(epoch) >= 0).all()):
        return None
    out = np.empty(len(iters))
    out[order] = epoch
    return out


def _epochs_skipped(text: str, wraps: int) -> bool:
    """Whether the first and the last bar description of ``text`` (its start, its last 4 KB) name epochs further
    apart than the count's ``wraps`` (a paste that cut epochs 3-11 out: "Epoch 2: 16%| 300/1871", then "Epoch 12:
    64%| 1200/1871", no wrap between).

    Example:
        >>> _epochs_skipped("Epoch 1:  96% 1800/1871\\nEpoch 2:   0% 0/1871\\nEpoch 12:  64% 1200/1871\\n", 1)
        True
    """
    first = _BAR_EPOCH.search(text)
    tail = list(_BAR_EPOCH.finditer(text, max(0, len(text) - 4096)))
    return first is not None and bool(tail) and int(tail[-1].group(1)) - int(first.group(1)) > wraps


def _finished_bars_alone(iters: np.ndarray, total: np.ndarray, epoch: np.ndarray) -> bool:
    """Whether every record is a bar at its last count (one an epoch, perhaps drawn twice), of two
    epochs or more.

    Example:
        >>> _finished_bars_alone(np.array([9., 9.]), np.array([9., 9.]), np.array([1., 2.]))
        True
    """
    return bool((iters == total).all()) and len(np.unique(epoch)) >= 2


def _logging_gap(counts: np.ndarray) -> float:
    """The usual rise of a count from one logged record to the next (the median of its rises; 1
    where it never rises).

    Example:
        >>> _logging_gap(np.array([10., 20., 30., 10., 20.]))
        10.0
    """
    gaps = np.diff(counts)
    return float(np.median(gaps[gaps > 0])) if (gaps > 0).any() else 1.0


def _epochs_from_wraps(iters: np.ndarray, total: np.ndarray, pos: np.ndarray, meta: dict,
                       loss: np.ndarray | None = None, headers_between: np.ndarray | None = None,
                       to_start: bool = False) -> np.ndarray | None:
    """Epochs (from 1) of records that count iterations inside an epoch with no epoch field (a
    progress bar's ``N/TOTAL``), or None when the count never starts again.

    In file order, a count that falls back after reaching its last logging interval of the epoch
    (within two of the usual gaps between logged counts of ``TOTAL``) starts a new epoch; one that
    falls back from the middle of an epoch is a restart (a resumed run) and keeps its epoch, so
    its steps are logged again, as in any other log. A count at ``TOTAL`` printed again with
    another loss is the next epoch's finished bar (Keras ``fit`` pasted one summary line per
    epoch: ``9595/9595 [====] - 1s - loss: 0.62``); with the same finite loss it is the same bar
    redrawn, unless an ``Epoch k/K`` line stands between the two (``headers_between``, by record
    in text order): a loss stuck at ln 10 for epochs prints the same loss in each epoch's bar.
    NaN after NaN is another epoch's only in a paste of finished bars alone with no headers.
    ``to_start``: a step key's count (``total`` its largest value) wraps only where it starts
    again from its first logging interval, after its last one (``iter: 300``, ``iter: 0``).

    Example:
        >>> _epochs_from_wraps(np.array([10., 20., 30., 10., 20.]), np.full(5, 30.), np.arange(5), {}).tolist()
        [1.0, 1.0, 1.0, 2.0, 2.0]
    """
    order = np.argsort(pos, kind="stable")
    i, t = iters[order], total[order]
    ok = ~(np.isnan(i) | np.isnan(t))
    if ok.sum() < 2:
        return None
    prev_i, prev_t, cur_i = i[:-1], t[:-1], i[1:]
    gap = _logging_gap(i[ok])
    if to_start:
        # Only a count that starts again from its first interval (a resumed run does not), wherever
        # it fell from: an expert-iteration loop's SFT phases, each from "Step 7" and each of its
        # own length, were merged step by step where one ended short of the longest. From short of
        # the largest count, the count must go on from there (its next record no higher than where
        # it fell from): a validation printed at "step 3" for 300 between 200 and 400 is no wrap.
        wraps = (cur_i < prev_i) & (cur_i <= np.nanmin(i) + gap) & ok[1:] & ok[:-1]
        early = wraps & (prev_i < prev_t - 2 * gap)
        if early.any():
            after = np.r_[i[2:], np.inf]  # each wrap's next record's count
            wraps &= ~early | ((after > cur_i) & (after <= prev_i))
    else:
        wraps = (cur_i < prev_i) & (prev_i >= prev_t - 2 * gap) & ok[1:] & ok[:-1]
    if loss is not None and not to_start:
        lo = loss[order]
        changed = lo[1:] != lo[:-1]  # NaN after NaN too: a run that went NaN prints NaN each epoch
        # A bar that draws each count twice, then again with the step's new loss (tqdm under
        # Lightning: "2/8 [..., train_loss=0.735]", "2/8 [..., train_loss=0.744]"), does so at its
        # last count too: there a new loss is the same step's, not the next epoch's finished bar.
        redrawn = bool(((cur_i == prev_i) & (prev_i < prev_t) & changed & ok[1:] & ok[:-1]).any())
        # NaN drawn again at the last count is the same bar (its epoch-end draw with the validation
        # values) where the epochs' headers say where an epoch starts, or where the bar was drawn at
        # lower counts too (a new epoch falls back to them); only a paste of finished bars alone,
        # one per epoch with nothing between, tells its epochs by the loss.
        if headers_between is not None or not bool((i[ok] >= t[ok]).all()):
            changed &= ~(np.isnan(lo[1:]) & np.isnan(lo[:-1]))
        if headers_between is not None:
            changed |= headers_between
        if not redrawn:
            wraps |= (cur_i == prev_i) & (prev_i >= prev_t) & changed & ok[1:] & ok[:-1]
    if not wraps.any():
        return None
    epoch_sorted = np.concatenate([[1.0], 1.0 + np.cumsum(wraps)])
    meta["epochs_from_counter"] = int(epoch_sorted[-1])
    epoch = np.empty_like(epoch_sorted)
    epoch[order] = epoch_sorted
    return epoch


def restarts_are_trainings(wrapped: np.ndarray, step: np.ndarray, loss: np.ndarray | None, pos: np.ndarray) -> bool:
    """Whether the places a step key's count started again (``wrapped``: the stretch of each record,
    from 1; ``step``: the counts as printed) hold fresh trainings, not the next epoch: a count inside
    an epoch starts again from its largest value every time; launches appended to one log
    (FastSpeech2's "Step 100/600000" after 3,400, 4,400, 300, 600, ...) start again from wherever each
    was stopped. Where each fell from the largest count, where the loss at each start is nearer (in
    log space) the log's first loss than the loss just before it.

    Example:
        >>> wrapped, pos = np.array([1., 1., 1., 2., 2., 2.]), np.arange(6)
        >>> restarts_are_trainings(wrapped, np.array([100., 200., 300., 100., 200., 300.]), np.array([29.7, 9.0, 2.7, 12.8, 6.0, 3.0]), pos)
        True
        >>> restarts_are_trainings(wrapped, np.array([100., 200., 300., 100., 200., 300.]), np.array([2.0, 1.8, 1.7, 1.7, 1.6, 1.6]), pos)
        False
        >>> restarts_are_trainings(np.array([1., 1., 2., 2., 2., 2.]), np.array([100., 200., 100., 300., 500., 700.]), np.array([2.0, 1.8, 1.7, 1.7, 1.6, 1.6]), pos)
        True
    """
    order = np.argsort(pos, kind="stable")
    stretch, counts = wrapped[order], step[order]
    starts = np.flatnonzero(np.diff(stretch) > 0) + 1
    if not len(starts):
        return False
    gap = _logging_gap(counts[np.isfinite(counts)])
    if bool((counts[starts - 1] < np.nanmax(counts) - 2 * gap).any()):
        return True  # stopped short of the largest count somewhere: no epoch's end
    if loss is None:
        return False
    values = loss[order]
    ok = np.isfinite(values) & (values > 0)
    if not ok.any():
        return False
    logs = np.log(np.where(ok, values, 1.0))
    first = float(logs[np.flatnonzero(ok)[0]])
    for at in starts.tolist():
        before, after = logs[:at][ok[:at]], logs[at:][ok[at:]]
        if not len(before) or not len(after) or not abs(after[0] - first) < abs(after[0] - before[-1]):
            return False
    return True


def _trainings_started_over(step: np.ndarray, pos: np.ndarray) -> np.ndarray | None:
    """The training of each record (from 1), a new one wherever the step, in text order, falls to the
    log's first step or below it; None where it never does (or the steps are not all known, or
    not all at or above 0).

    Example:
        >>> _trainings_started_over(np.array([10., 20., 30., 10., 24.]), np.arange(5)).tolist()
        [1.0, 1.0, 1.0, 2.0, 2.0]
        >>> _trainings_started_over(np.array([10., 20., 30., 20., 30.]), np.arange(5)) is None
        True
    """
    if len(step) < 3 or not bool((np.isfinite(step) & (step >= 0)).all()):
        return None
    order = np.argsort(pos, kind="stable")
    steps = step[order]
    again = np.r_[False, (steps[1:] < steps[:-1]) & (steps[1:] <= steps[0])]
    if not again.any():
        return None
    training = np.empty(len(step))
    training[order] = 1.0 + np.cumsum(again)
    return training


def _counts_globally(epoch: np.ndarray, iters: np.ndarray, pos: np.ndarray, known_length: bool = False) -> bool:
    """Whether a count logged beside an epoch goes on across epochs (a global step) rather than
    starting again in each: where the epoch moves on, the count never falls back. With one epoch
    only there is no telling: the count is taken as the step unless the log gives the epoch's
    length (``known_length``, "[i/N]"). An epoch that goes back (a run resumed from an earlier
    checkpoint) tells nothing: either count goes back with it.

    Example:
        >>> _counts_globally(np.array([1., 1., 2.]), np.array([100., 200., 300.]), np.arange(3))
        True
        >>> _counts_globally(np.array([1., 1., 2.]), np.array([100., 200., 100.]), np.arange(3))
        False
        >>> _counts_globally(np.array([1., 2., 2., 1., 2.]), np.array([90., 100., 180., 95., 105.]), np.arange(5))
        True
        >>> _counts_globally(np.array([2., 2., 5., 5.]), np.array([10., 20., 40., 45.]), np.arange(4), True)
        False
    """
    order = np.argsort(pos, kind="stable")
    e, i = epoch[order], iters[order]
    changes = np.flatnonzero((e[1:] > e[:-1]) & ~np.isnan(e[1:]) & ~np.isnan(e[:-1]))
    fell = i[changes + 1] <= i[changes]
    # A rise tells only at a change to the next epoch: across a paste's gap of epochs a count inside
    # the epoch may rise as well (CenterPoint's "Epoch [2/6][20/50]", then "Epoch [5/6][40/50]").
    on = ~fell & (e[changes + 1] == e[changes] + 1)
    if not fell.any():
        return bool(on.any()) or not known_length  # a global count moves on at every change
    # ... or at most of them, falling back to the log's first count at the others: each a launch
    # that resumed from a checkpoint without the count (PaddleOCR 2.x's "epoch: [62/200], iter: 20").
    # (A count inside the epoch logged at another interval than the epoch's length falls to other
    # values: a NER script's "iteration:3 step:36/82" every 100 steps, then "iteration:6 step:8/82".)
    told = int(on.sum() + fell.sum())
    return told >= _LAUNCH_CHANGES and on.sum() >= _MOSTLY_ON * told and \
        bool((i[changes + 1][fell] == i[~np.isnan(i)][0]).all())


def _past_every_length(epoch: np.ndarray, iters: np.ndarray, total: np.ndarray) -> bool:
    """Whether an epoch's counts all lie beyond the length printed beside them: no count inside the
    epoch (MinkowskiEngine's "Epoch[4](1280/301)", 301 batches an epoch, the count global). One that
    passes its length late in the epoch stays one (open_clip's "[115264/109468 (105%)]": its own
    sum of samples).

    Example:
        >>> _past_every_length(np.array([4., 4.]), np.array([1280., 1320.]), np.array([301., 301.]))
        True
        >>> _past_every_length(np.array([3., 3.]), np.array([102464., 115264.]), np.array([109468.] * 2))
        False
    """
    past = iters > total  # (NaN: not past)
    if not past.any():  # most logs: one compare
        return False
    past &= ~np.isnan(epoch)
    inside = ~past & ~np.isnan(iters) & ~np.isnan(total) & ~np.isnan(epoch)
    return bool(np.setdiff1d(epoch[past], epoch[inside]).size)


# Epoch changes a count must be seen at, and the share of them it must move on at, to be global
# where it falls back to its start at the others (_counts_globally).
_LAUNCH_CHANGES = 4
_MOSTLY_ON = 0.75


def _on_across_launches(epoch: np.ndarray, iters: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """A global count (:func:`_counts_globally`) that each launch started again from the log's first
    count while the epochs went on, continued: the records from such a fall on go on from the last count the
    launches before logged in an earlier epoch than the fall's (the end of the epoch it resumed
    after; the records it logged again then replace the abandoned ones, as a resume's do).

    Example:
        >>> _on_across_launches(np.array([1., 1., 2., 2., 3., 2., 3.]), np.array([10., 20., 30., 40., 50., 10., 20.]),
        ...                     np.arange(7)).tolist()
        [10.0, 20.0, 30.0, 40.0, 50.0, 30.0, 40.0]
    """
    order = np.argsort(pos, kind="stable")
    e, i = epoch[order], iters[order].astype("float64")
    falls = np.flatnonzero((i[1:] < i[:-1]) & (i[1:] == i[~np.isnan(i)][0])) + 1
    if not len(falls):
        return iters
    out = i.copy()
    for at in falls:
        earlier = np.flatnonzero(e[:at] < e[at])
        if len(earlier):
            out[at:] = i[at:] + out[earlier[-1]]
    step = np.empty_like(out)
    step[order] = out
    return step


def _concat(tables: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Columns of several shapes' records one after the other; NaN where a shape lacks a column."""
    names = list(dict.fromkeys(name for table in tables for name in table))
    out = {}
    for name in names:
        pieces = []
        for table in tables:
            n = len(table["_pos"])
            pieces.append(table[name] if name in table else
                          np.full(n, False if name in ("_fills", "_beside") else np.nan))
        out[name] = np.concatenate(pieces)
    return out


def _last_per_step(table: dict[str, np.ndarray], step: np.ndarray) -> tuple[pd.Index, dict[str, np.ndarray]]:
    """``groupby(step).last()`` for records already in step order: the steps, and each column's
    last value that is not NaN among the records of a step. A NaN the log printed (its mark
    column, ``NAN_PREFIX + name``, is 1) is a value: a bar redrawn at one step that shows a
    finite loss and then ``nan`` ends ``nan``, and the mark goes with the value it came with."""
    starts = np.flatnonzero(np.r_[True, step[1:] != step[:-1]]) if len(step) else np.zeros(0, dtype=np.int64)
    index = pd.Index(step[starts].astype("int64"), name=metrics.STEP)
    if len(starts) == len(step):
        return index, table
    # Only steps with several records need a merge; the others keep their one record.
    sizes = np.diff(np.r_[starts, len(step)])
    several = np.flatnonzero(sizes > 1)
    size = sizes[several]
    rows = np.repeat(starts[several] - np.cumsum(size) + size, size) + np.arange(int(size.sum()))
    run_starts = np.cumsum(size) - size
    out = {}
    for name, column in table.items():
        if name.startswith(NAN_PREFIX) and name[len(NAN_PREFIX):] in table:
            continue  # taken with its value's column
        mark = table.get(NAN_PREFIX + name)
        present = ~np.isnan(column[rows])
        if mark is not None:
            present |= mark[rows] == 1.0
        last = np.maximum.reduceat(np.where(present, rows, -1), run_starts)
        chosen = np.maximum(last, 0)
        for key, values in ((name, column),) if mark is None else ((name, column), (NAN_PREFIX + name, mark)):
            merged = values[starts]
            merged[several] = np.where(last >= 0, values[chosen], np.nan)
            out[key] = merged
    return index, out
