"""Map the metric names other trainers write to sentinel's keys (``sentinel.metrics``)."""

from __future__ import annotations

import re

from sentinel import metrics

STEP_ALIASES = ("step", "global_step", "iteration", "iter", "it", "trainer/global_step", "steps", "s")
LOSS_ALIASES = (
    "loss", "train_loss", "train/loss", "training_loss", "train_loss_step", "loss_step",
    "lm loss", "lm_loss", "train/lm_loss", "trl", "train/loss_step", "losses/train",
    "reduced_train_loss",  # NeMo
)
_EXACT = {
    **{name: metrics.LOSS for name in LOSS_ALIASES},
    "lr": metrics.LR, "learning_rate": metrics.LR, "learning rate": metrics.LR,
    "train/lr": metrics.LR, "train/learning_rate": metrics.LR,
    "grad_norm": metrics.GRAD_NORM_TOTAL, "grad norm": metrics.GRAD_NORM_TOTAL,
    "gradient_norm": metrics.GRAD_NORM_TOTAL, "train/grad_norm": metrics.GRAD_NORM_TOTAL,
    "norm": metrics.GRAD_NORM_TOTAL, "grad_norm/total": metrics.GRAD_NORM_TOTAL,
    "loss scale": metrics.LOSS_SCALE, "loss_scale": metrics.LOSS_SCALE,
    "train/loss_scale": metrics.LOSS_SCALE,
}
_LR_MONITOR = re.compile(r"^lr-[\w.-]+$")  # Lightning LearningRateMonitor: lr-AdamW, lr-Adam/pg1


def canonical_key(name: str) -> str:
    """Return sentinel's key for a metric name written by another trainer.

    Names already in sentinel's form and names with no known meaning are returned lower-cased
    and stripped, so nothing is lost.

    Example:
        >>> canonical_key("train/loss"), canonical_key("lr-AdamW"), canonical_key("grad norm")
        ('loss', 'lr', 'grad_norm/total')
    """
    key = name.strip().lower()
    if key in _EXACT:
        return _EXACT[key]
    if _LR_MONITOR.match(key) and "/" not in key:
        return metrics.LR
    return key


def find_column(columns, aliases, explicit: str | None = None) -> str | None:
    """Pick the column that plays a role (step, loss) among ``columns``.

    Args:
        columns: column names as found.
        aliases: recognised names in order of preference (compared case-insensitively).
        explicit: a name the user gave; it must exist.

    Raises:
        ValueError: ``explicit`` is not among the columns (the message lists them).

    Example:
        >>> find_column(["Iteration", "lm loss"], STEP_ALIASES)
        'Iteration'
    """
    by_lower = {str(c).strip().lower(): c for c in columns}
    if explicit is not None:
        if explicit in columns:
            return explicit
        if explicit.lower() in by_lower:
            return by_lower[explicit.lower()]
        raise ValueError(f"column {explicit!r} not found; available: {', '.join(map(str, columns))}")
    for alias in aliases:
        if alias in by_lower:
            return by_lower[alias]
    return None


# A table or JSONL row may hold any number of keys; the analysis reads a handful. Columns past
# this many are dropped with a warning naming the file (a row with 2 million keys once took
# 38 minutes to tabulate; 1,000 float columns of 10,000 steps are 80 MB).
MAX_COLUMNS = 1000

# Families the rules read (sentinel.analyze.rule_*): a large table keeps only these.
_ANALYSIS_PREFIXES = (metrics.GRAD_NORM, "amp/", "attn_")
_ANALYSIS_KEYS = frozenset({metrics.LOSS, metrics.LR, metrics.LOSS_SCALE, metrics.STEP})


def is_analysis_key(key: str) -> bool:
    """True for a canonical key the analysis reads: step, loss, lr, grad_norm*, loss_scale,
    amp/*, attn_*.

    Example:
        >>> is_analysis_key("grad_norm/blocks.0"), is_analysis_key("tokens_per_sec")
        (True, False)
    """
    return key in _ANALYSIS_KEYS or key.startswith(_ANALYSIS_PREFIXES)


# Strings that mean a logged non-finite value (a loss that really was NaN/Inf); any other text
# in a numeric column is damage, not a measurement.
NONFINITE_TEXT = frozenset({"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity",
                            "-infinity"})

# Largest magnitude a step may have: steps are int64 (a float step of 1e30 would wrap around).
STEP_LIMIT = 2.0 ** 63
