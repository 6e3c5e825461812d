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

import math
import re
from dataclasses import dataclass

from sentinel.analyze.loaders.keys import (
    GRAD_NORM_NAME,
    inferred_training_loss,
    is_aggregate,
    is_smooth_l1,
    looks_like_loss,
)
from sentinel.analyze.loaders.log_lines import Lines

# A key then its number: "key: 2.3", "key=2.3", "'key': 2.3", "key 2.3".
# Only keys that name a loss (a loss word is in "loss", "Loss", "LOSS"); the key taken whole.
# (not a record of the best so far: Kaggle notebooks' "Epoch 1 - Save Best Loss: 2.2828 Model")
_PAIR = re.compile(r"(?<![\w/.-])(?<![Bb]est )(?<!BEST )(?<![Ll]owest )"
                   r"(?=[\w/.-]*(?:oss|OSS|/dim|_dim|bpd|BPD|(?i:smooth_?l1)))"
                   r"([A-Za-z][\w/.-]*)['\"]?[^\S\n]*"
                   r"(?:[:=][^\S\n]*|[^\S\n])"
                   r"['\"]?[-+]?(?:\d|\.\d|nan\b|inf\b)")


def inferred_loss_key(text: str) -> str | None:
    """The key of ``text``'s ``key: number`` pairs that is its training loss, or None where no
    key, or more than one equally, can be (``loss_ce`` beside ``loss_kl``: the user's choice). A
    key printed a tenth as often as another, or once, is a summary's (the Trainer's final
    ``train_loss`` under SetFit's ``embedding_loss`` at every logged step), not the series'.

    Example:
        >>> inferred_loss_key("{'embedding_loss': 0.3}\\n" * 20 + "{'train_runtime': 9.1, 'train_loss': 0.2}\\n")
        'embedding_loss'
        >>> inferred_loss_key("G: 1.51 | D: 0.21 | GP: 0.00 | PL: 0.00\\n")
        'G'
    """
    keys = loss_keys(text)
    if not keys:
        return _letter_pair(text)
    if len(keys) > 1:
        counts = {key: text.count(key) for key in keys}
        most = max(counts.values())
        keys = [key for key in keys if counts[key] > 1 and counts[key] * 10 >= most] or keys
    found = inferred_training_loss(keys)
    return found if found is not None or len(keys) < 3 else _sum_of_the_others(text, keys)


# Lines that must print every key, each total the others' sum, for a key to be read as their total.
_SUMMED_LINES = 3
# ... within this many units of the last digit printed (each term rounded, the total from the unrounded)
_SUM_UNITS = 2
# Lines that print them all checked at most, among the text's first lines searched.
_SUM_CHECKED_ROWS = 200
_SUM_SEARCHED_LINES = 20_000


def _sum_of_the_others(text: str, keys: list[str]) -> str | None:
    """The key whose value is the sum of the other keys' on every line that prints them all (at
    least :data:`_SUMMED_LINES`; to the digits printed), where no name says which is the total
    (a DANN script's "T_Loss:2.7179, R_loss:2.016,D_loss:0.702"); else None.

    Example:
        >>> _sum_of_the_others("T_Loss:2.7179, R_loss:2.016,D_loss:0.702\\n" * 3, ["D_loss", "R_loss", "T_Loss"])
        'T_Loss'
    """
    pairs = {key: re.compile(rf"(?<![\w/.-]){re.escape(key)}['\"]?[^\S\n]*[:=]?[^\S\n]*['\"]?"
                             r"([-+]?(?:\d+\.?(\d*)|\.(\d+))(?:[eE][-+]?\d+)?)(?![\d.])") for key in keys}
    rows = []
    for line in text.split("\n", _SUM_SEARCHED_LINES)[:_SUM_SEARCHED_LINES]:  # (a refusal's path: bounded)
        found = {key: pattern.search(line) for key, pattern in pairs.items()}
        if all(found.values()):
            rows.append(found)
        if len(rows) >= _SUM_CHECKED_ROWS:
            break
    if len(rows) < _SUMMED_LINES:
        return None
    for total in keys:
        if all(_sums(row, total) for row in rows):
            return total
    return None


def _sums(row: dict[str, re.Match], total: str) -> bool:
    """Whether ``row[total]`` is the sum of the row's other values, to the digits printed."""
    values = {key: float(m.group(1)) for key, m in row.items()}
    decimals = min(len(m.group(2) or m.group(3) or "") for m in row.values())
    if "e" in "".join(m.group(1).lower() for m in row.values()):
        decimals = 6  # (an exponent: held to a relative tolerance below)
    tolerance = max(_SUM_UNITS * 10.0 ** -decimals, 1e-6 * abs(values[total]))
    return abs(values[total] - sum(v for key, v in values.items() if key != total)) <= tolerance


# A GAN's players by their letters alone, on one line: "G: 1.51 | D: 0.21 | GP: 0.00" (lucidrains'
# stylegan2-pytorch and GigaGAN; keys.LETTER_PAIR).
_LETTER_PAIR_LINE = re.compile(r"(?<![\w/.-])(G)[^\S\n]*[:=][^\S\n]*[-+]?(?:\d|\.\d|nan\b|inf\b)[^\n]{0,64}?"
                               r"(?<![\w/.-])D[^\S\n]*[:=][^\S\n]*[-+]?(?:\d|\.\d|nan\b|inf\b)")


def _letter_pair(text: str) -> str | None:
    """``G`` where the text's lines print a GAN's two losses by their letters, ``G: x ... D: y``."""
    found = _LETTER_PAIR_LINE.search(Lines.shared(text).distinct_text())
    return None if found is None else found.group(1)


_NAMES_OF_A_LOSS = ("oss", "OSS", "/dim", "_dim", "bpd", "BPD", "moothL1", "mooth_l1", "moothl1")


def loss_keys(text: str) -> list[str]:
    """The keys of ``text``'s ``key: number`` pairs that could each be its training loss, sorted.
    Asked of the text's distinct lines (:meth:`Lines.distinct_text`); a key with a digit is none
    (its skeleton differs from line to line).

    Example:
        >>> loss_keys("Epoch 1, recon_loss: 301.2, kl_loss: 5.1, val_loss: 290.0\\n")
        ['kl_loss', 'recon_loss']
    """
    distinct = Lines.shared(text).distinct_text()
    # Only lines that name a loss ("loss", "Loss", "LOSS", a density model's "Bits/dim", "bpd"): prose
    # holds few, and the pairs' search over a megabyte of it took 75 ms.
    named = "\n".join(line for line in distinct.split("\n") if any(word in line for word in _NAMES_OF_A_LOSS))
    keys = {m.group(1) for m in _PAIR.finditer(named)}
    # (a smooth L1's digit is its name's: GluonCV's "SmoothL1")
    found = {k for k in keys if (not any(c.isdigit() for c in k) or is_smooth_l1(k)) and looks_like_loss(k)}
    for skeleton in keys - found:
        numbered = _NUMBERED_SKELETON.fullmatch(skeleton)
        if numbered is not None:  # "loss0u" on the skeletons: the text's own "loss1u", "loss2u"
            key = re.compile(rf"(?<![\w/.-])({re.escape(numbered.group(1))}\d{{1,2}}{re.escape(numbered.group(2))})"
                             r"['\"]?[^\S\n]*[:=]")
            found.update(k for k in dict.fromkeys(m.group(1) for m in key.finditer(text, 0, 1 << 20))
                         if looks_like_loss(k))
    return sorted(found)


# A loss key numbered ("loss0u" on the skeletons, for "loss1u", "loss2u"): its letters before
# and after the number.
_NUMBERED_SKELETON = re.compile(r"([A-Za-z_]*(?:loss|Loss|LOSS))\d{1,2}([a-zA-Z]?)")


def named_key(text: str, name: str) -> str | None:
    """The key of ``text``'s ``key: number`` pairs that ``name`` names (``--loss-col``; in any
    case), as the text writes it; None where no pair has it.

    Example:
        >>> named_key("Epoch 1, Recon: 301.2, KL: 5.1\\n", "recon")
        'Recon'
        >>> named_key("step 3, total loss is 4.7", "total loss")
        'total loss'
    """
    pair = re.compile(rf"(?<![\w/.-])({re.escape(name)})['\"]?[^\S\n]*(?:[:=][^\S\n]*|(?:is[^\S\n]+)?)['\"]?"
                      r"[-+]?(?:\d|\.\d|nan\b|inf\b)", re.IGNORECASE)  # "key: 2", "key=2", "key 2", "key is 2"
    found = pair.search(Lines.shared(text).distinct_text())
    return None if found is None else found.group(1)


# A perplexity key ("ppl", "perplexity", "train_ppl"; not an evaluation's): exp of the loss.
_PERPLEXITY = re.compile(r"^(?:train(?:ing)?[_ /]?)?(?:ppl|perplexity)$", re.IGNORECASE)
_PERPLEXITY_PAIR = re.compile(r"(?<![\w/.-])([A-Za-z][\w/.-]*)(['\"]?[^\S\n]*(?:[:=][^\S\n]*|[^\S\n])['\"]?)"
                              r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan\b|inf\b))")


@dataclass(frozen=True)
class LossKey:
    """How a log's loss is read where no key of it is named loss: the key, and whether it is a
    perplexity (the loss its logarithm)."""

    key: str
    perplexity: bool = False
    named: bool = False  # the user named it (--loss-col)

    def rewrite(self, text: str) -> str:
        """``text`` with the key written as ``loss`` (a perplexity's value as its logarithm), and
        the grad norm of the key's section as the total's (:func:`section_grad_norm_as_total`)."""
        if not self.perplexity:
            text = loss_key_as_loss(text, self.key)
        else:
            text = _PERPLEXITY_PAIR.sub(lambda m: "loss" + m.group(2) + _log_text(m.group(3)) if m.group(1) == self.key
                                        else m.group(0), text)
        return section_step_as_step(section_grad_norm_as_total(text, self.key), self.key)

    def note(self) -> str | None:
        """What the run's warnings say of it (nothing for a key the user named)."""
        if self.named:
            return None
        if self.perplexity:
            return (f"loss read as the logarithm of {self.key!r} (no key of the lines is named loss; a perplexity "
                    "is exp(loss))")
        return loss_key_note(self.key)


def find_loss_key(text: str, named: str | None = None) -> LossKey | None:
    """The key ``text``'s loss goes by: the one the user ``named`` (``--loss-col``), else the one
    inferred (:func:`inferred_loss_key`), else its one perplexity key; None where none is found.

    Example:
        >>> find_loss_key("step 1 | ppl 20.1\\nstep 2 | ppl 19.8\\n")
        LossKey(key='ppl', perplexity=True, named=False)
    """
    if named is not None:
        key = named_key(text, named)
        return None if key is None else LossKey(key, named=True)
    key = inferred_loss_key(text)
    if key is not None:
        return LossKey(key)
    distinct = Lines.shared(text).distinct_text()
    if "ppl" not in distinct.lower() and "perplexity" not in distinct.lower():
        return None
    keys = {m.group(1) for m in _PERPLEXITY_PAIR.finditer(distinct) if _PERPLEXITY.match(m.group(1))}
    if len(keys) > 1:  # a summary's beside the series' (OpenNMT-py's "Train perplexity: 14.9" after its "ppl: 11.85")
        (most, key), (then, _) = sorted(((text.count(k), k) for k in keys), reverse=True)[:2]
        keys = {key} if most >= _SERIES_OVER_SUMMARY * then else keys
    return LossKey(keys.pop(), perplexity=True) if len(keys) == 1 else None


# A perplexity key printed this many times as often as another is the series', the other a summary's.
_SERIES_OVER_SUMMARY = 2


def _log_text(value: str) -> str:
    """The natural logarithm of a printed perplexity, as text (NaN for one that has none)."""
    number = float(value)
    return repr(math.log(number)) if number > 0 else "nan"


def loss_key_as_loss(text: str, key: str) -> str:
    """``text`` with ``key`` written as ``loss`` wherever it stands as a key of its own."""
    return re.sub(rf"(?<![\w/.-]){re.escape(key)}(?![\w/.-])", "loss", text)


def only_key_as_loss(text: str, key: str) -> str:
    """``text`` with ``key`` written as ``loss`` and every other ``loss`` in it spelt ``lss``: the key
    the user named (``--loss-col``) is the one loss a reader finds where the lines name another that
    the reader takes first (fast-reid's ``total_loss: 68.4  loss_cls: 50.7``; cryoDRGN's ``Average
    gen loss = 0.547, KLD = 11.5, total loss = 0.547``).

    Example:
        >>> only_key_as_loss("iter: 9  total_loss: 68.4  loss_cls: 50.7  Loss: 2", "loss_cls")
        'iter: 9  total_lss: 68.4  loss: 50.7  Lss: 2'
    """
    own_or_other = re.compile(rf"(?<![\w/.-]){re.escape(key)}(?![\w/.-])|(?i:l(o)ss)")
    return own_or_other.sub(lambda m: "loss" if m.group(1) is None else m.group(0)[0] + m.group(0)[2:], text)


def section_grad_norm_as_total(text: str, key: str) -> str:
    """``text`` with the grad norm of the section ``key`` is under written as the total's name,
    where the lines print no grad norm outside a section: the grad norm of the model whose loss is
    read (verl's PPO prints ``critic/vf_loss`` and ``critic/grad_norm`` beside the actor's).

    Example:
        >>> section_grad_norm_as_total("step:1 - actor/grad_norm:nan - critic/grad_norm:0.5", "actor/pg_loss")
        'step:1 - grad_norm:nan - critic/grad_norm:0.5'
    """
    section, slash, _ = key.rpartition("/")
    if not slash:
        return text
    own = re.compile(rf"(?<![\w/.-]){re.escape(section)}/({GRAD_NORM_NAME})(?![\w/.-])", re.IGNORECASE)
    if own.search(text) is None or re.search(rf"(?<![\w/.-]){GRAD_NORM_NAME}(?![\w/.-])", text, re.IGNORECASE):
        return text
    return own.sub(r"\1", text)


# A step key standing as one ("'step': 3", "step=3"; not a line's "step 28: {...}").
_OWN_STEP_KEY = re.compile(r"(?<![\w/.-])['\"]?step['\"]?[^\S\n]*[:=]")


def section_step_as_step(text: str, key: str) -> str:
    """``text`` with the step of the section ``key`` is under (``train/step``, ``train/global_step``)
    written as ``step``, where the lines have no step key of their own: a dict printed as it is
    logged to a tracker (slime's ``step 28: {'train/loss': 0.14, ..., 'train/step': 28}``).

    Example:
        >>> section_step_as_step("step 28: {'train/loss': 0.14, 'train/step': 28}", "train/loss")
        "step 28: {'train/loss': 0.14, 'step': 28}"
    """
    section, slash, _ = key.rpartition("/")
    if not slash or f"{section}/" not in text or _OWN_STEP_KEY.search(text):
        return text
    return re.sub(rf"(?<![\w/.-]){re.escape(section)}/(?:global_)?step(?![\w/.-])", "step", text)


def loss_key_note(key: str) -> str:
    """What the run's warnings say of the key read as the loss.

    Example:
        >>> loss_key_note("batch_loss")
        "loss read from 'batch_loss' (no key of the lines is named loss)"
    """
    note = f"loss read from {key!r} (no key of the lines is named loss)"
    if is_aggregate(key):
        # ("avg", "mean": over steps, or over one step's batches, as TRL's PPO 'loss/policy_avg' is)
        over = "over steps" if _SMOOTHED.search(key) else "perhaps over steps"
        note += f": an average {over}, in which a one-step spike shows smaller"
    return note


# Names of a loss smoothed over steps: a running mean (kohya's "avr_loss"), an EMA, an epoch's mean.
_SMOOTHED = re.compile(r"(?i)avr|running|(?<![a-z])ema(?![a-z])|smooth|epoch")
