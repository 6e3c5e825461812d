"""What a text-log dialect is made of: record shapes, event lines, record events, the dialect.

These are plain data, read by every part of the text engine (:mod:`~sentinel.analyze.loaders.textscan`
and the modules it is split into) and written by :mod:`~sentinel.analyze.loaders.dialects`; they
live apart so that each part imports them without importing the engine.

Example:
    >>> import re
    >>> Shape(re.compile(r"^step (\\d+[^\\n]*)", re.M)).head
    ('step',)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sentinel import metrics
from sentinel.events import EventKind


@dataclass(frozen=True)
class RecordEvent:
    """An event raised by one field of a record line.

    Attributes:
        key: the metric key of the field (after naming).
        kind: the event kind.
        when: ``"positive"`` (the value is above zero: the detail ``detail`` = the value as an
            int) or ``"nonfinite"`` (the value is NaN or infinite: detail ``metric`` = the key
            and ``value`` = the value as text).
        source: the ``source`` detail (none when empty).
        detail: the detail field's name for ``"positive"``.
    """

    key: str
    kind: EventKind
    when: str = "positive"
    source: str = ""
    detail: str = ""


@dataclass(frozen=True)
class Shape:
    """One kind of record line.

    Attributes:
        pattern: a regex (``re.MULTILINE``) whose first group is the record body: the ``head``
            fields, then ``key value`` pairs once ``separators`` are spaces.
        head: names of the leading fields of the body: ``step``, ``total`` (steps in the run, or
            in an epoch with ``iter``), ``epoch`` (counted from 1, or from 0 where an epoch 0 is
            logged), ``epoch0`` (counted from 0), ``iter`` (iteration inside the epoch, or a
            global step when it never falls back where the epoch changes), ``_`` (ignored).
            ``iter`` and ``total`` without an epoch: a count that starts again when an epoch
            ends (a progress bar's ``N/TOTAL``) goes on from the previous epoch's total; ``iter``
            and ``epoch`` without ``total``: the epoch's length is the largest count seen.
        separators: strings turned into spaces before splitting (``":"``, ``"="``, ``","``, ``"|"``).
        keys: the tool's key (lower case) -> sentinel's metric key; others go through
            :func:`~sentinel.analyze.loaders.keys.canonical_key` (never to ``loss``: a loss-like
            key the dialect does not name is another loss, e.g. ``nll_loss``).
        prefix: put before every key of this shape (``val_`` for validation lines).
        require: a key a record must have to count (HF ``loss``); records without it are dropped.
        fills: True for summary lines (fairseq's end of epoch): they only fill values missing
            at their step, never replace a per-step value.
        units: value suffix -> (key suffix, factor), e.g. ``{"ms": ("_ms", 1.0)}``.
        strict: every key must look like an identifier and have a number, else the line is noise.
        scrub: ``(pattern, replacement)`` applied to the bodies first (values that hold a
            separator, e.g. mmengine's ``eta: 1 day, 2:03:04``).
        scrub_needs: strings of which the bodies must hold one for ``scrub`` to match, looked
            for first (a pattern with no literal start is tried at every position of the text).
        fields: a field list: the body's last group is ``name: value`` fields each ended by this
            string (Megatron's ``| lm loss: 2.7 |``). A name is a phrase (words, brackets) and
            the value one token (``name=value`` too; a thousands separator in a value is read,
            ``53,695``); a field that is not ``name: number`` is skipped, and text after
            the last separator is a field cut off (the line was cut while written): skipped, and
            counted in a warning. A name the shape's ``keys`` do not list goes through
            ``canonical_key`` when that knows it (never to the loss), else becomes a slug (each
            run of characters other than ``a-z0-9`` an ``_``); with a ``prefix``, always the slug.
            Lines of any length are read (no :data:`~sentinel.analyze.loaders.record_fields.MAX_FIELDS` limit).
        rescale: for a field list: a field name (lower case) -> (the name it is read as, factor),
            for a value printed in another unit by some versions (seconds where others print ms).
        record_events: events raised by the value of a field on a record line (a skip count
            above zero, a logged NaN), each with its line number and the line's time.
        beside: the pattern of another shape of the dialect whose lines this shape reads a
            value from (the lr beside the loss), its own pattern only matching such lines: its
            records make no step of their own. With a step of their own (a ``step`` head, not
            numbered in order) they are kept at the steps other records have; otherwise they must
            be as many as that shape's records (one on each of its lines, the same order) and take
            their steps, else they are dropped.
        shown_until_changed: a ``beside`` value that the line shows again at every redraw until
            it changes (a progress bar's validation loss, from one validation to the next): kept
            where it first shows, at the record before (the last one before that validation).
    """

    pattern: re.Pattern
    head: tuple[str, ...] = (metrics.STEP,)
    separators: tuple[str, ...] = (":",)
    keys: Mapping[str, str] = field(default_factory=dict)
    prefix: str = ""
    require: str | None = None
    fills: bool = False
    units: Mapping[str, tuple[str, float]] = field(default_factory=dict)
    strict: bool = False
    scrub: tuple[re.Pattern, str | Callable[[re.Match], str]] | None = None
    scrub_needs: tuple[str, ...] = ()
    fields: str | None = None
    rescale: Mapping[str, tuple[str, float]] = field(default_factory=dict)
    record_events: tuple[RecordEvent, ...] = ()
    beside: re.Pattern | None = None
    shown_until_changed: bool = False


HEAD_ROLES = frozenset({metrics.STEP, "total", "epoch", "epoch0", "iter"})


@dataclass(frozen=True)
class EventLine:
    """A line that reports an event rather than a step (an fp16 overflow, a loss-scale change).

    Attributes:
        pattern: regex with optional named groups ``step`` (else the event belongs to the next
            record line), ``attempted`` / ``new`` (loss scales) and ``rank``.
        kind: the event kind.
        source: the tool that printed it (``deepspeed``, ``fairseq``).
        detail: fixed detail fields added to the event.
        keep_rank: the ``rank`` group is also a detail field of the event.
        running: the match is a running value printed on a record line (an average since the
            start, non-finite from one step on for good): its first match alone counts, at the
            step of the record line that holds it.
    """

    pattern: re.Pattern
    kind: EventKind = EventKind.OVERFLOW
    source: str = ""
    detail: Mapping[str, object] = field(default_factory=dict)
    keep_rank: bool = False
    running: bool = False


@dataclass(frozen=True)
class LossTerms:
    """How a log that prints a loss's terms and no total names them (:attr:`Dialect.loss_terms`).

    Attributes:
        term: the prefix of a term's key (lower case; "" for every key), BasicSR's ``l_``.
        critic: the prefix of a discriminator's term: those are summed apart, as ``loss_d``.
        alone: where no key is a discriminator's, the terms' sum is the loss (a super-resolution
            model's ``l_pix`` + ``l_percep``); else no loss is read (CycleGAN prints both players').
    """

    term: str = ""
    critic: str = "d_"
    alone: bool = False


@dataclass(frozen=True)
class Dialect:
    """How one tool's text log is read: its record shapes, event lines and step rule.

    Attributes:
        name: short name, also ``RunData.source``.
        description: for error messages and the README table.
        shapes: record shapes, the first one is the main training line.
        events: event lines.
        step_key: a field that is the step when present (``num_updates``, ``global_step``).
        step_from_order: records carry no step: number them 1, 2, 3 (HF Trainer dicts), unless
            every step's record holds ``step_key``; the other records join the step before them.
        joins: continuation lines: what this matches (a line end and the next line's indent) is
            replaced by ``join_with`` (a space) before reading, so a record printed over several lines (Composer's
            ``[batch=16/625]:`` then one ``\t Train key: value`` line per metric) is one line.
        drop_words: a line holding one of these words (whole, any case) before any ``loss`` is
            read as empty (the generic reader's evaluation lines: their loss is not a step's
            training loss; "train loss: 0.5 - validation loss: 0.6" is a training line).
        epoch_evaluation: the shape (head: the epoch, then the value) of such an evaluation line
            that names its epoch and no step (``Epoch [3/10], Validation Loss: 2.1``): its value
            is the ``val_`` value of that epoch's last training step, where the training lines
            name their epoch.
        evaluation_keys: shapes of lines that are not evaluation lines by their words but name
            their value as an evaluation's, read over the training lines: with an epoch (``epoch 3
            val_loss 2.1``, ``epoch=3 eval_loss=2.1``: as ``epoch_evaluation``) or a step
            (``step 500 | val_loss 2.1``: that step's ``val_loss``).
        unstepped_evaluation: the pattern (one group: the value) of an evaluation line that names
            neither its step nor its epoch (the PyTorch MNIST example's ``Test set: Average loss:
            0.0335, Accuracy: ...`` after each epoch): where two or more such lines follow training
            records and no evaluation line names its step, each is the ``val_loss`` of the last
            training record before it.
        join_with: what a continuation line's start is replaced by (a field separator where the
            shape reads a field list: OLMo's ``    train/CrossEntropyLoss=2.31`` lines).
        rewrite: a function of the whole text, applied after ``joins``: what the tool prints that
            would be read as something it is not (Lightning 1.x's bar shows a running mean as
            ``loss=`` before the step's own ``train_loss=``).
        rewrite_needs: strings (or line-local patterns) of which the text must hold (match) one
            for ``rewrite`` to change it, asked of the text's distinct lines first: a search over
            the whole text is skipped.
        min_records: record lines the sniffer must see before it claims a file.
        drop_cut_line: the last line without a line end is not trusted (``3.2`` of ``3.2217``).
        warn_bad_values: say how many values were not numbers.
        sniff: what the sniffer counts instead of the record shapes (e.g. lines with a loss).
        clean: clean the text first (:func:`~sentinel.analyze.loaders.textscan.clean_text`); False
            reads the lines as printed (only ``\n`` ends a line, line numbers are the file's).
        timestamp: the pattern of the log's own time on a line (groups: date and time, then an
            optional fraction of a second), instead of a bare ``YYYY-MM-DD HH:MM:SS``.
        restarts: a step whose main record (the first shape's) comes again (a resumed run) keeps
            only its last main record, whole (a field the later one lacks is not taken from the
            earlier), with a warning; records of the other shapes at that step stay.
        event_rows: event lines may add steps (a step with an event and no record; the loss scale
            an overflow set); False: they are counted only at steps that have a record.
        step_wraps: a step key whose count starts again from its first logging interval after its
            last one counts inside an epoch (a generic script's ``iter: 300``, then ``iter: 0``):
            it goes on from the previous epoch's length.
        epoch_trainings: a log whose records' epochs (the first shape's first group; or, where a
            pattern, its matches' first group: lines that name the epoch above records that carry
            none) start again from the first is trainings appended one after another, each a run
            of its own (:func:`~sentinel.analyze.loaders.textlogs.epoch_restarts`).
        amp_lines: besides its own event lines, read the mixed-precision overflow lines any
            script's log may hold (:mod:`~sentinel.analyze.loaders.amp_lines`: apex prints them
            between a script's own lines). Off for the tools that print their own (a search of
            the whole text is not free).
        total_meta: ``(meta key, "max" | "first")``: where the ``total`` head field goes (the
            largest one, or the first record's).
        record_word: what a record is called in warnings (``step``, ``iteration``).
        event_word: what an event line is called in warnings (default ``<name> event``).
        step_unit: what the step counts where not optimizer steps (``"epoch"``: a line per epoch,
            its values the epoch's means; the report then speaks of epochs).
        loss_scale_min: the tool's own floor for its dynamic loss scale, where it lies below the
            analysis's (fairseq's ``--min-loss-scale``, 1e-4: a scale of 0.5 is its normal range).
        loss_terms: the loss is no printed key but the sum of the printed terms (CycleGAN's ``D_A``,
            ``G_A``, ``cycle_A``, ...), named as :class:`LossTerms` says: the printed NaNs of every
            term are kept (``LOGGED_NAN``), so a sum that lacks a term (a line cut in a paste) is
            told from one of a printed NaN.
        note: what a run's warnings say of how the dialect read its lines, a function of the text
            (None: nothing to say): the loss a sum of printed terms, the steps worked back.
    """

    name: str
    description: str
    shapes: tuple[Shape, ...]
    events: tuple[EventLine, ...] = ()
    step_key: str | None = None
    step_from_order: bool = False
    joins: re.Pattern | None = None
    join_with: str = " "
    rewrite: Callable[[str], str] | None = None
    rewrite_needs: tuple[str | re.Pattern, ...] = ()
    drop_words: tuple[str, ...] = ()
    epoch_evaluation: Shape | None = None
    evaluation_keys: tuple[Shape, ...] = ()
    unstepped_evaluation: re.Pattern | None = None
    min_records: int = 3
    drop_cut_line: bool = True
    warn_bad_values: bool = False
    sniff: re.Pattern | None = None
    clean: bool = True
    timestamp: re.Pattern | None = None
    restarts: bool = False
    event_rows: bool = True
    step_wraps: bool = False
    epoch_trainings: bool | re.Pattern = False
    amp_lines: bool = False
    total_meta: tuple[str, str] = ("train_steps", "max")
    record_word: str = "step"
    event_word: str | None = None
    step_unit: str | None = None
    loss_scale_min: float | None = None
    loss_terms: LossTerms | None = None
    note: Callable[[str], str | None] | None = None
