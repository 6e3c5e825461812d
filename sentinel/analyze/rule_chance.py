"""A loss at chance level: the cross-entropy of predicting every class alike, ``ln K``.

A classifier or language model whose outputs carry no information about the input scores exactly
``ln K`` on ``K`` classes: 2.3026 on the ten classes of MNIST or CIFAR-10, 0.6931 on a binary
task, 10.8259 on GPT-2's padded vocabulary of 50,304 tokens. A log whose last rows sit there is a
model that is not learning (it never left chance) or that collapsed to one distribution for
every input; a plateau or a healthy verdict would hide it. The class count is not in the log, so
only counts common enough to be recognised are tried: 2, 10, 100 and 1,000 classes; 3, 4, 5 and
the batch sizes an in-batch contrastive loss divides among (8 to 16,384) where the log also starts
there; and the vocabulary sizes of common tokenizers.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.noise import step_noise

# Class counts: common label sets (2, 10, 100, 1,000); and counts a log must start at as well as end
# at (3 for NLI, 4, 5, and the powers of two a batch has, whose ln an in-batch contrastive loss,
# SimCSE's, CLIP's, a retriever's, starts at and stays at when nothing is learnt: 64, 4.1589). Those
# lie densely, one ln of them within 1% of where many healthy curves come to rest (a loss falling
# from 3.0 to 2.09, ln 8 = 2.079): only a log that never left one is at chance there.
CLASS_COUNTS = (2, 10, 100, 1000)
# (6 and 7: CiteSeer's and Cora's classes, the node classification benchmarks every GNN starts on)
START_COUNTS = (3, 4, 5, 6, 7, *(2 ** k for k in range(3, 15)))
# How near ln K a log of START_COUNTS must start.
START_TOLERANCE = 0.05
# BERT, Llama 1/2, Mistral, GPT-2 (and nanoGPT's padding), OLMo/GPT-NeoX, Llama 3, Qwen 2, Gemma;
# StarCoder / SmolLM, 2**16 (DINO's default output head, some tokenizers), cl100k.
VOCAB_SIZES = (30522, 32000, 32768, 50257, 50304, 50280, 128256, 151936, 152064, 256000, 49152, 65536, 100277)
# A self-supervised head's prototypes, matched as tightly: SwAV's default 3,000 (and DeepCluster-v2's),
# DINO's 65,536 (also a vocabulary's size: named as both). (A loss printed as 8.0 is not ln 3000, 8.0064.)
PROTOTYPE_COUNTS = (3000, 65536)
# Relative distance to ln K within which a value counts as at chance: a batch mean of a model at
# chance wanders ~0.5% around ln 10 (2.297-2.309); a vocabulary's ln is matched more tightly, as
# neighbouring sizes are 0.2% apart.
CLASS_TOLERANCE = 0.01
VOCAB_TOLERANCE = 0.001
PROTOTYPE_TOLERANCE = 0.0004
# ... and for a log that had been clearly better and came back up to ln K: a collapse to one answer
# for every input (DNABERT's classifier at 0.6931-0.6938, within 0.1% of ln 2).
COLLAPSE_TOLERANCE = 0.0025
# ln 4 is also two binary cross-entropies summed at chance, ln 2 each: a link predictor's loss over its positive and
# its negative pairs (a GNN's `pos_loss + neg_loss`), a contrastive pair's.
_OR_PAIRS = " (or of two binary guesses summed, ln 2 each: a link predictor's positive and negative pairs)"
# Logged rows at chance, ending the log, that make a finding.
MIN_ROWS = 5
# Rows of the running median a row is judged by (a QA model at ln 4 whose first batch of each epoch reads 1.41).
SMOOTH_ROWS = 5


def chance_level(value: float, tokens: bool = False) -> int | None:
    """The class count or vocabulary size whose ``ln`` the loss ``value`` is, or None. ``tokens``: the
    loss is a cross-entropy over tokens (read from a perplexity): a vocabulary's size only.

    Example:
        >>> chance_level(2.3027), chance_level(10.8259), chance_level(2.5)
        (10, 50304, None)
    """
    if not (value > 0 and math.isfinite(value)):
        return None
    for k in () if tokens else (*CLASS_COUNTS, *START_COUNTS):
        if abs(value - math.log(k)) <= CLASS_TOLERANCE * math.log(k):
            return k
    near = min((*VOCAB_SIZES, *PROTOTYPE_COUNTS), key=lambda v: abs(value - math.log(v)))
    return near if abs(value - math.log(near)) <= _tolerance(near) * math.log(near) else None


def _tolerance(k: int) -> float:
    """The relative tolerance of a vocabulary's or a head's size (a size that is both, DINO's 2**16, a vocabulary's)."""
    return PROTOTYPE_TOLERANCE if k in PROTOTYPE_COUNTS and k not in VOCAB_SIZES else VOCAB_TOLERANCE


def _passing_by(stretch: np.ndarray, tolerance: float) -> bool:
    """Whether a loss is on its way through ln K (a curve falling from 2.0 through ln 7 = 1.946),
    not at chance, which wanders around it: the stretch's halves lie apart by more than a quarter of
    the tolerance and three standard errors of their medians (from its row-to-row noise).

    Example:
        >>> _passing_by(2.0 - np.arange(35, 60) / 1000, 0.0195), _passing_by(np.array([1.9460, 1.9459, 1.9462] * 4), 0.0195)
        (True, False)
    """
    half = len(stretch) // 2
    apart = abs(float(np.median(stretch[:half])) - float(np.median(stretch[len(stretch) - half:])))
    return apart > max(tolerance / 4, 3 * 1.2533 * step_noise(stretch) * np.sqrt(2 / half))


def chance_incidents(loss: pd.Series, lr: pd.Series | None = None, tokens: bool = False) -> list[Incident]:
    """One warning when the log's last :data:`MIN_ROWS` or more losses sit at ``ln K`` (see the
    module docstring). For a class count the log must start at most 1.5 ``ln K`` (where a model
    starts) and never be clearly below ``ln K``. Information where ``lr`` (the learning rate, by
    step) still rose over those steps: a warm-up from 0 has not let the model learn yet. ``tokens``:
    the loss is the log of a perplexity, over a vocabulary (OpenNMT's perplexity of 5.9 is no guess
    among 6 classes).

    Example:
        >>> s = pd.Series([2.3086, 2.2973, 2.3083, 2.3027, 2.3045, 2.3057], index=range(6))
        >>> chance_incidents(s)[0].message.split(":")[0]
        'loss at chance level for 6 logged steps (0-5), to the end of the log'
    """
    values = loss.to_numpy(dtype="float64")
    if len(values) < MIN_ROWS:
        return []
    k = chance_level(float(np.median(values[-MIN_ROWS:])), tokens)
    if k is None:
        return []
    target = math.log(k)
    vocab = k not in CLASS_COUNTS and k not in START_COUNTS
    if k in START_COUNTS and abs(values[0] - target) > START_TOLERANCE * target:
        return []  # came to rest near it, from elsewhere
    tolerance = (_tolerance(k) if vocab else CLASS_TOLERANCE) * target
    # (by a running median: a row above it at each epoch's start, its first batches after a shuffle, is no way out;
    # over a short log only at a common label set's: a few rows falling through ln 512 are no guess among 512)
    smooth = pd.Series(values).rolling(SMOOTH_ROWS, center=True, min_periods=1).median().to_numpy() \
        if k in CLASS_COUNTS or len(values) >= 3 * SMOOTH_ROWS else values
    at_chance = np.abs(smooth - target) <= tolerance
    rows = len(values) if at_chance.all() else int(np.argmin(at_chance[::-1]))
    # A class count also needs a log that started near chance and never left it for better: a
    # language model that came down from 10.8 to end at 2.30 learnt; it is not at chance on ten.
    # Or one that was clearly better and came back up to sit there for twice as long: a collapse
    # (DNABERT's classifier at 0.38, then 0.6931-0.6938 for 16 rows after a gap).
    if rows < MIN_ROWS:
        return []
    if _passing_by(values[-rows:], tolerance):
        return []
    before = values[:-rows]
    # (a model that gives every input the same answer scores ln K to the batch: its rows sit far
    # closer to it than chance's wandering, a loss that merely passes by)
    came_back = (not vocab and rows >= 2 * MIN_ROWS and len(before) and before.min() < target - 3 * tolerance
                 and bool((np.abs(values[-rows:] - target) <= COLLAPSE_TOLERANCE * target).all()))
    if not vocab and not came_back and (values.min() < target - 3 * tolerance or values[0] > 1.5 * target):
        return []
    steps = loss.index.to_numpy()
    first, last = int(steps[-rows]), int(steps[-1])
    level = float(np.median(values[-rows:]))
    over = (f"{k:,} outputs (a vocabulary of {k:,} tokens, or DINO's head of {k:,} prototypes)" if k in VOCAB_SIZES
            and k in PROTOTYPE_COUNTS else f"{k:,} prototypes (a self-supervised head: SwAV's default)"
            if k in PROTOTYPE_COUNTS else f"a vocabulary of {k:,} tokens")
    what = (f"a uniform guess over {over}: the model gives every input the same "
            "distribution (a collapse after a spike or a divergence, or weights that are not trained)"
            if vocab else
            f"a uniform guess over {k} classes{_OR_PAIRS if k == 4 else ''}: the model is not learning (a learning "
            "rate of 0 or far too high, a softmax before a loss that applies its own, labels that do not match the "
            "inputs, parameters the optimizer does not hold)" if not came_back else
            f"a uniform guess over {k} classes, after the loss had been down to {before.min():.4g}: the model "
            "collapsed to one answer for every input (a divergence or a spike it never recovered from)")
    message = (f"loss at chance level for {rows} logged steps ({first}-{last}), to the end of the log: "
               f"{level:.4g} ~ ln({k}) = {target:.4f}, the cross-entropy of {what}")
    warming = None if came_back else _warming_up(lr, int(steps[0]), last)
    if warming is not None:
        message += (f"; but the learning rate was still warming up, from {warming[0]:.3g} to {warming[1]:.3g} by the "
                    "last step: too early to tell")
    return [Incident(IncidentKind.LOSS_STUCK, first, last, Severity.INFO if warming else Severity.WARNING, message,
                     {"chance": k, "value": level, "rows": rows, "resolved": warming is not None})]


# A learning rate that rose this much over a log, at least, was warming up in it.
_WARM_UP_RISE = 1.5


def _warming_up(lr: pd.Series | None, first: int, last: int) -> tuple[float, float] | None:
    """The learning rate at the log's first and last steps where it rose over the log, to its last
    value there (a warm-up still going: Swin's 20 epochs from 0, stopped in its first); else None.

    Example:
        >>> _warming_up(pd.Series([0.0, 1e-6, 2e-6, 3e-6], index=[0, 10, 20, 30]), 0, 30)
        (0.0, 3e-06)
        >>> _warming_up(pd.Series([3e-4, 3e-4, 2.9e-4], index=[0, 10, 20]), 0, 20) is None
        True
    """
    if lr is None:
        return None
    values = lr[(lr.index >= first) & (lr.index <= last)].dropna().to_numpy(dtype="float64")
    if len(values) < 2 or not np.isfinite(values).all():
        return None
    start, end = float(values[0]), float(values[-1])
    rising = end > 0 and end >= _WARM_UP_RISE * start and end >= float(values.max()) * (1 - 1e-9)
    return (start, end) if rising else None
