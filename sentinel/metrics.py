"""Metric keys shared by the recorder, TensorBoard, Lightning loggers and the analyzer.

Keys are lower case; ``/`` separates a family from a module path
(``grad_norm/blocks.3.attn``).
"""

LOSS = "loss"
LR = "lr"
GRAD_NORM_TOTAL = "grad_norm/total"
GRAD_NORM = "grad_norm"
LOSS_SCALE = "loss_scale"
AMP_OVERFLOW = "amp/overflow"
AMP_SKIPPED_STEPS = "amp/skipped_steps"
ATTN_ENTROPY = "attn_entropy"
ATTN_ENTROPY_MIN_HEAD = "attn_entropy_min"
ATTN_LOGIT_MAX = "attn_logit_max"
SAMPLES_PER_SEC = "samples_per_sec"

# Bookkeeping columns of every step record (not metrics).
STEP = "step"
EPOCH = "epoch"
BATCH_IDX = "batch_idx"


def metric_key(family: str, name: str) -> str:
    """Join a metric family and a module path into one key.

    Example:
        >>> metric_key("grad_norm", "blocks.3.attn")
        'grad_norm/blocks.3.attn'
    """
    if not family or "/" in family:
        raise ValueError(f"metric family {family!r} must be non-empty and contain no '/'")
    return f"{family}/{name}".lower()
VAL_LOSS = "val_loss"
NAN_ITERATIONS = "nan_iterations"
