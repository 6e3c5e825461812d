"""Map the metric names other trainers write to sentinel's keys (``sentinel.metrics``)."""

from __future__ import annotations

import re

import numpy as np

from sentinel import metrics

# Stable-Baselines3's step: the environment steps, in its console blocks and its progress.csv.
SB3_STEP = "time/total_timesteps"
STEP_ALIASES = ("step", "global_step", "iteration", "iter", "it", "trainer/global_step",
                "train/global_step",  # the Hugging Face Trainer's key in W&B and other trackers
                "steps", "s",
                "current_steps",  # LLaMA-Factory's trainer_log.jsonl
                "global_step/max_steps",  # ms-swift's logging.jsonl: "12/2353"
                "training_iteration",  # Ray Tune / Ray Train: progress.csv, result.json
                "num_updates",  # fairseq's metric names, as a tracker's table keeps them
                "#",  # spaCy's training table: E (the epoch), # (the step)
                "_step",  # W&B's own count of log calls: a run's history exported as CSV
                SB3_STEP,  # Stable-Baselines3's progress.csv
                "total/steps",  # OpenAI baselines' logger (DDPG's progress.csv), the same
                "progress/tick")  # StyleGAN2-ADA's and StyleGAN3's stats.jsonl: a tick every few kimg
# An epoch count's column (a table of one row per epoch: Keras' CSVLogger, Ultralytics' results.csv,
# pointMLP's "Epoch-Num").
EPOCH_ALIASES = ("epoch", "epochs", "epoch-num", "epoch_num", "epoch num", "epoch_idx", "num_epoch")
# A column or key that names the split a row belongs to, and the words for its training rows.
SPLIT_COLUMNS = ("split", "type", "phase", "stage", "mode", "subset", "partition")
TRAIN_WORDS = frozenset({"train", "training", "fit"})
LOSS_ALIASES = (
    "loss", "train_loss", "train/loss", "training_loss", "train_loss_step", "loss_step",
    "lm loss", "lm_loss", "train/lm_loss", "trl", "train/loss_step", "losses/train",
    "reduced_train_loss",  # NeMo
)
_EXACT = {
    **{name: metrics.LOSS for name in LOSS_ALIASES},
    "lr": metrics.LR, "learning_rate": metrics.LR, "learning rate": metrics.LR,
    "train/lr": metrics.LR, "train/learning_rate": metrics.LR,
    "progress/lr": metrics.LR,  # OpenNMT-py's TensorBoard (beside progress/xent, its loss)
    "grad_norm": metrics.GRAD_NORM_TOTAL, "grad norm": metrics.GRAD_NORM_TOTAL,
    "gradient_norm": metrics.GRAD_NORM_TOTAL, "train/grad_norm": metrics.GRAD_NORM_TOTAL,
    "norm": metrics.GRAD_NORM_TOTAL, "grad_norm/total": metrics.GRAD_NORM_TOTAL,
    "gnorm": metrics.GRAD_NORM_TOTAL,  # fairseq's
    # OLMo's optim/total_grad_norm; trackers' global and total norms
    **dict.fromkeys(("total_grad_norm", "optim/total_grad_norm", "optim/grad_norm", "global_grad_norm",
                     "train/global_grad_norm", "grad_norm_total", "train/gradient_norm"), metrics.GRAD_NORM_TOTAL),
    "loss scale": metrics.LOSS_SCALE, "loss_scale": metrics.LOSS_SCALE,
    "train/loss_scale": metrics.LOSS_SCALE,
}
# A total grad norm's name as a log's lines print it (a regular expression): "grad_norm", "grad norm",
# "Grad-Norm", "gradient_norm", "total_grad_norm", "global_grad_norm", fairseq's "gnorm".
GRAD_NORM_NAME = r"(?:(?:total_|global_)?grad(?:ient)?[_ -]norm|gnorm)"
# The loss scale's base-2 logarithm, as OpenAI's diffusion trainers log it (guided-diffusion's
# lg_loss_scale: 20 at the start, a scale of 2**20): read as the scale.
LOG2_LOSS_SCALE_KEYS = frozenset({"lg_loss_scale"})
LOG2_SMALLEST = -1074.0  # the base-2 logarithm of the smallest float64 (a subnormal)


def scales_of_log2(values):
    """The loss scales whose base-2 logarithms are ``values``: the smallest float below it (a scale
    that fell to 2**-16199 is still a scale, not 0), inf above the largest; a NaN stays NaN.

    Example:
        >>> scales_of_log2(np.array([20.0, -16199.354, np.nan])).tolist()
        [1048576.0, 5e-324, nan]
    """
    with np.errstate(over="ignore"):
        return np.exp2(np.maximum(values, LOG2_SMALLEST))


def below_smallest_note(log2_values, what: str) -> str | None:
    """What a log holding a loss scale under the smallest float is told (:func:`scales_of_log2`);
    None where none is under it.

    Example:
        >>> below_smallest_note(np.array([20.0, -16203.354]), "'lg_loss_scale'")
        "'lg_loss_scale' fell to -16203.4: a loss scale of 2**-16203.4, below the smallest float, is read as 4.94e-324"
    """
    values = np.asarray(log2_values, dtype="float64")
    lowest = np.nanmin(values) if values.size and not np.isnan(values).all() else np.nan
    if not lowest < LOG2_SMALLEST:
        return None
    return (f"{what} fell to {lowest:.6g}: a loss scale of 2**{lowest:.6g}, below the smallest float, is read as "
            f"{2.0 ** LOG2_SMALLEST:.3g}")
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


def step_column(columns, explicit: str | None = None) -> str | None:
    """The step column: the one the user named, else a step alias, else ``epoch`` (a table of
    one row per epoch: Keras' CSVLogger, Ultralytics' results.csv).

    Raises:
        ValueError: ``explicit`` is not among the columns.

    A first column with no name (``""``, or ``Unnamed: 0`` once pandas has read it) is the
    index ``DataFrame.to_csv`` writes: the rows' numbers, where nothing else names the step.

    Example:
        >>> step_column(["epoch", "loss", "val_loss"]), step_column(["epoch", "step", "loss"])
        ('epoch', 'step')
        >>> step_column(["", "loss", "lr"])
        ''
    """
    found = find_column(columns, STEP_ALIASES, explicit) or find_column(columns, EPOCH_ALIASES)
    if found is None and len(columns) and str(columns[0]).strip().lower() in ("", "unnamed: 0"):
        return columns[0]
    return found


def step_columns(columns) -> list:
    """Every column named like a step (:data:`STEP_ALIASES`), in their order of preference.

    Example:
        >>> step_columns(["loss", "global_step/max_steps", "global_step"])
        ['global_step', 'global_step/max_steps']
    """
    by_lower = {str(c).strip().lower(): c for c in columns}
    return [by_lower[alias] for alias in STEP_ALIASES if alias in by_lower]


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


# Words in a metric name that make it something other than the training loss of each step:
# an evaluation (validation, test), or a statistic of the loss (W&B's chart export adds __MIN and
# __MAX columns beside each series).
_EVAL_WORDS = frozenset({"val", "valid", "validation", "eval", "evaluation", "test", "testing", "dev",
                         "holdout", "heldout"})
# (a count: Tinker's "num_loss_tokens", the tokens a loss was taken over, is no loss)
_STAT_WORDS = frozenset({"min", "max", "best", "std", "stddev", "var", "variance", "count", "num"})
# A setting of the loss, not its value: loss_scale (AMP), loss_weight, loss_coef.
_SETTING_WORDS = frozenset({"scale", "scaler", "scaling", "weight", "weights", "coef", "coeff",
                            "factor", "multiplier"})
# A name ending in one of these is where or when something happened to the loss (a step, a time),
# not its value: loss_jump_iteration, loss_time_ms.
_POSITION_WORDS = frozenset({"iteration", "iterations", "iter", "iters", "idx", "index", "num", "count",
                             "time", "timestamp", "ms", "sec", "secs", "seconds"})
# A loss aggregated over an epoch or smoothed: the loss, but a step-level one is better.
# "avr": kohya's sd-scripts ("avr_loss", its loss averaged over recent steps).
_AGGREGATE_WORDS = frozenset({"epoch", "avg", "avr", "average", "mean", "ema", "smooth", "smoothed", "running"})
# A loss summed over a batch's tokens, beside its mean (PaddlePaddle's Transformer: "sum loss:
# 43280.62, avg loss: 10.858"): its size follows the batch's; the mean is the loss.
_SUM_WORDS = frozenset({"sum", "summed"})
# Words that name the sum of a loss's terms ("joint_avg_loss" beside "rec_avg_loss" and "icl_avg_loss"; SAM 2's
# trainer: "Losses/train_all_loss" beside "Losses/train_default_loss"; a VAE's negative ELBO, "train_elbo_loss",
# beside its "train_recon_loss" and KL terms; Modulus' "Train/loss_aggregated" beside "Train/loss_u" and the PDE's
# other residuals).
_TOTAL_WORDS = frozenset({"total", "tot", "joint", "overall", "combined", "all", "elbo", "nelbo", "aggregated"})
# Words of a term that regularises another loss (a KL penalty, an entropy bonus, a mixture of experts'
# load balancing, PaLM's z-loss): not the objective a run trains for.
_REGULARISER_WORDS = frozenset({"kl", "entropy", "aux", "z", "balance", "reg", "penalty", "unsuper", "ptx"})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD_SPLIT = re.compile(r"[^a-z0-9]+")


_CROSS_ENTROPY = re.compile(r"cross[^a-z0-9]*entropy")
# A smooth L1 (Huber) loss by its name alone: GluonCV's SSD prints "CrossEntropy=19.147, SmoothL1=3.899", its
# two losses.
_SMOOTH_L1 = re.compile(r"smooth[^a-z0-9]*l1(?![a-z0-9])")
# A density model's negative log-likelihood in bits per dimension ("Bits/dim", "bits_per_dim", "bpd"): its loss.
_BITS_PER_DIM = re.compile(r"\bbits?[^a-z0-9]*(?:per[^a-z0-9]*)?dims?\b")


# A word glued to "loss" in one lower-case word ("Totalloss" beside "CTCloss", "trainloss", "avgloss"): two words.
_GLUED_LOSS = re.compile(r"\b(total|tot|joint|overall|combined|train|training|val|valid|test|eval|avg|avr|mean|"
                         r"epoch|running|sum)(?=loss(?:es)?\b)")


def _words(name: str) -> list[str]:
    # "cross entropy" is one word, a loss's name (MXNet's "Train-CrossEntropy", "cross_entropy_loss"):
    # "entropy" alone is a regulariser's term
    spaced = _BITS_PER_DIM.sub("bpd", _CROSS_ENTROPY.sub("crossentropy", _CAMEL.sub(" ", str(name)).lower()))
    if "smooth" in spaced:
        spaced = _SMOOTH_L1.sub("smoothl1", spaced)
    if "loss" in spaced:
        spaced = _GLUED_LOSS.sub(r"\1 ", spaced)
    return [w for w in _WORD_SPLIT.split(spaced) if w]


def is_regulariser(name: str) -> bool:
    """Whether a loss's name names a regulariser's term (:data:`_REGULARISER_WORDS`).

    Example:
        >>> is_regulariser("actor/kl_loss"), is_regulariser("actor/entropy_loss"), is_regulariser("actor/pg_loss")
        (True, True, False)
    """
    return not _REGULARISER_WORDS.isdisjoint(_words(name))


# A critic's value-function loss beside an actor's policy loss (verl's critic/vf_loss, DeepSpeed-Chat's cri_loss,
# Stable-Baselines3's value_loss): another model's regression, not the policy's objective.
_VALUE_WORDS = frozenset({"vf", "value", "critic", "cri"})


def is_value_loss(name: str) -> bool:
    """Whether a loss's name names a critic's value-function loss (:data:`_VALUE_WORDS`).

    Example:
        >>> is_value_loss("critic/vf_loss"), is_value_loss("cri_loss"), is_value_loss("actor/pg_loss")
        (True, True, False)
    """
    return not _VALUE_WORDS.isdisjoint(_words(name))


def is_smooth_l1(name: str) -> bool:
    """Whether a loss's name is a smooth L1's, a detector's box-regression term beside its classification loss
    (GluonCV's SSD: ``CrossEntropy=19.147, SmoothL1=3.899``).

    Example:
        >>> is_smooth_l1("SmoothL1"), is_smooth_l1("smooth_l1_loss"), is_smooth_l1("CrossEntropy")
        (True, True, False)
    """
    return "smoothl1" in _words(name)


def _is_loss_word(word: str) -> bool:
    # xent: cross-entropy, as OpenNMT-py's TensorBoard names its loss (progress/xent, valid/xent); nll: a
    # negative log-likelihood (Tinker's "train_mean_nll" beside "test/nll"); a loss numbered, perhaps with a
    # letter after ("loss1", "loss2u": SK-VM++'s two heads' losses)
    return word == "losses" or word.endswith("loss") or word in ("xent", "crossentropy", "nll", "bpd", "smoothl1") \
        or _NUMBERED_LOSS.fullmatch(word) is not None


_NUMBERED_LOSS = re.compile(r"[a-z]*loss\d{1,2}[a-z]?")


def _loss_value_words(name: str) -> list[str]:
    """The words of a name that holds a loss's value: one word is a loss, none a statistic or a
    setting (``loss_scale``), and the last not a position or a time (``loss_jump_iteration``);
    empty for any other name."""
    words = _words(name)
    # (a setting's word before the loss names a loss of it: GluonCV's YOLOv3 "BoxScaleLoss", the box scale's)
    if not words or words[-1] in _POSITION_WORDS or not any(_is_loss_word(w) for w in words) \
            or any(w in _STAT_WORDS for w in words) \
            or (any(w in _SETTING_WORDS for w in words) and not _is_loss_word(words[-1])):
        return []
    return words


def looks_like_loss(name: str) -> bool:
    """True for a name that could be a run's training loss: a word of it is a loss (``loss``,
    ``losses``, ``nll_loss``, ``trainLoss``), and none marks an evaluation, a statistic or a
    setting (``loss_scale``), and its last word is not a position or a time
    (``loss_jump_iteration``).

    Example:
        >>> looks_like_loss("Loss/train"), looks_like_loss("val_loss"), looks_like_loss("loss__MAX")
        (True, False, False)
    """
    words = _loss_value_words(name)
    return bool(words) and not any(w in _EVAL_WORDS or w.startswith(("val", "eval", "test")) for w in words)


def is_aggregate(name: str) -> bool:
    """True for a name that says its value is aggregated or smoothed (``avg_loss``,
    ``running_loss``, ``train_loss_epoch``): a one-step spike shows smaller there.

    Example:
        >>> is_aggregate("running_loss"), is_aggregate("batch_loss")
        (True, False)
    """
    return any(w in _AGGREGATE_WORDS for w in _words(name))


def is_epoch_mean(name: str) -> bool:
    """True for a loss named as an epoch's mean (Lightning's ``train_loss_epoch``, ``epoch_loss``):
    logged at steps, each value still stands for a whole epoch's batches.

    Example:
        >>> is_epoch_mean("train_loss_epoch"), is_epoch_mean("train/loss_step"), is_epoch_mean("epoch")
        (True, False, False)
    """
    words = _words(name)
    return "epoch" in words and any(_is_loss_word(w) for w in words)


def looks_like_eval_loss(name: str) -> bool:
    """True for an evaluation's loss (``eval_loss``, ``val/loss``, ``validation_loss``,
    ``valLoss``): a loss word and an evaluation word, no statistic or setting.

    Example:
        >>> looks_like_eval_loss("eval_loss"), looks_like_eval_loss("value_loss"), looks_like_eval_loss("loss")
        (True, False, False)
    """
    return any(w in _EVAL_WORDS or (_is_loss_word(w) and w.startswith(("val", "eval", "test")))
               for w in _loss_value_words(name))


def infer_loss_column(columns) -> str | None:
    """The training loss among names that are not one of ``LOSS_ALIASES``, or None.

    Candidates are the names :func:`looks_like_loss` accepts. The best is the one that says it
    is a per-step training loss: not a sum over the batch, not an epoch or smoothed aggregate, then one that says
    ``train``, then a ``total`` (``tot``, ``joint``, ``overall``) over its components, then the shortest. Two equally good
    candidates (``loss_ce`` and ``loss_kl``) are a choice for the user: None.

    Example:
        >>> infer_loss_column(["Loss/train", "Loss/test"])
        'Loss/train'
        >>> infer_loss_column(["train/loss_step", "train/loss_epoch", "val_loss"])
        'train/loss_step'
        >>> infer_loss_column(["loss_cls", "loss_bbox"]) is None
        True
        >>> infer_loss_column(["sum loss", "avg loss"])
        'avg loss'
    """
    names = {str(c) for c in columns}

    def rank(name: str) -> tuple[int, int, int, int, int, int]:
        words = _words(name)
        return (int(_running_total(name, names)),
                int(any(w in _SUM_WORDS for w in words)),
                int(any(w in _AGGREGATE_WORDS for w in words)),
                int(not any(w in ("train", "training") for w in words)),
                int(_TOTAL_WORDS.isdisjoint(words)),
                len(words))

    ranked = sorted((rank(c), str(c)) for c in columns if looks_like_loss(str(c)))
    if not ranked or (len(ranked) > 1 and ranked[0][0] == ranked[1][0]):
        return None
    return next(c for c in columns if str(c) == ranked[0][1])


# icefall's MetricsTracker: "train/tot_loss" is its running total over recent batches, beside
# "train/current_loss", the batch's own ("tot" there no total over the loss's terms).
_TOT = re.compile(r"(^|[/_])tot_")


def _running_total(name: str, names: set[str]) -> bool:
    """Whether ``name`` is a ``tot_<metric>`` beside a ``current_<metric>`` among ``names``.

    Example:
        >>> _running_total("train/tot_loss", {"train/tot_loss", "train/current_loss"})
        True
        >>> _running_total("tot_loss", {"tot_loss"})
        False
    """
    return _TOT.search(name) is not None and _TOT.sub(r"\1current_", name, count=1) in names


def loss_components(columns) -> list[str]:
    """The training-loss columns whose sum is the loss, where no column is the loss itself: two
    or more under one prefix ending in ``/`` and none a total (Ultralytics' ``results.csv``:
    ``train/box_loss``, ``train/cls_loss``, ``train/dfl_loss``, each already weighted, summed into
    the loss it optimises). Empty otherwise (``loss_ce`` beside ``loss_kl`` is the user's choice).

    Example:
        >>> loss_components(["epoch", "train/box_loss", "train/cls_loss", "val/box_loss"])
        ['train/box_loss', 'train/cls_loss']
        >>> loss_components(["loss_ce", "loss_kl"])
        []
    """
    found = [str(c) for c in columns if looks_like_loss(str(c))]
    if len(found) < 2 or any("/" not in c or not _TOTAL_WORDS.isdisjoint(_words(c)) for c in found):
        return []
    return found if len({c.rsplit("/", 1)[0] for c in found}) == 1 else []


# A GAN's two players' losses as scripts name them (lower case): the generator's read as the loss,
# a discriminator's beside it makes a GAN's run (rule_stuck.is_adversarial).
# (taming-transformers' VQGAN and the latent-diffusion autoencoders after it: the autoencoder's
# "aeloss" against the discriminator's "discloss")
# (StudioGAN's "Gen_loss: X Dis_loss: Y")
GENERATOR_KEYS = ("loss_g", "g_loss", "lossg", "loss_gen", "gen_loss", "generator_loss", "g_total", "aeloss")
DISCRIMINATOR_KEYS = ("loss_d", "d_loss", "lossd", "loss_disc", "disc_loss", "discriminator_loss", "d_total",
                      "discloss", "dis_loss", "loss_dis")
# The two players by their letters alone, a pair only where both are logged (lucidrains'
# stylegan2-pytorch and GigaGAN: "G: 1.51 | D: 0.21 | GP: 0.00 | PL: 0.03"): a "d" alone is no
# discriminator.
LETTER_PAIR = ("g", "d")


def bare_key(key: str) -> str:
    """A key without a logger's section and Lightning's step suffix, lower-cased: the name
    :data:`GENERATOR_KEYS` and :data:`DISCRIMINATOR_KEYS` are matched by.

    A player's loss under its letter (StyleGAN2-ADA's ``Loss/G/loss``, ``Loss/D/loss``) is that
    letter's: ``g_loss``, ``d_loss``.

    A training set's prefix is left out too (ParallelWaveGAN's ``train_gen_loss``, ``train_dis_loss``).

    Example:
        >>> bare_key("train/aeloss_step"), bare_key("loss_G"), bare_key("Loss/D/loss"), bare_key("Loss/G/reg")
        ('aeloss', 'loss_g', 'd_loss', 'reg')
        >>> bare_key("train_gen_loss")
        'gen_loss'
    """
    parts = key.lower().split("/")
    if len(parts) > 2 and parts[-1] == "loss" and parts[-2] in LETTER_PAIR:
        return f"{parts[-2]}_loss"
    return parts[-1].removesuffix("_step").removeprefix("train_")


def generator_loss_key(keys: list[str]) -> str | None:
    """The generator's loss key among a GAN's keys (``loss_G`` beside ``loss_D``, its terms
    ``loss_G_GAN``, ``loss_G_cycle`` around them: :data:`GENERATOR_KEYS`, a discriminator's
    beside it), or None where the keys are no such pair. The generator's is read as the loss, as
    the GAN dialect does; the analysis then judges it as a GAN's.

    Example:
        >>> generator_loss_key(["loss_D", "loss_G", "loss_G_GAN", "loss_G_cycle"]), generator_loss_key(["loss_G"])
        ('loss_G', None)
        >>> generator_loss_key(["G", "D", "GP", "PL"]), generator_loss_key(["d", "lr"])
        ('G', None)
    """
    lower = {bare_key(str(key)): key for key in keys}  # "train/aeloss_step" is taming's "aeloss"
    generator = [lower[k] for k in GENERATOR_KEYS if k in lower]
    has_discriminator = any(k in lower for k in DISCRIMINATOR_KEYS)
    if not generator and all(k in lower for k in LETTER_PAIR):
        return lower[LETTER_PAIR[0]]
    return generator[0] if len(generator) == 1 and has_discriminator else None


def suggested_loss(keys: list[str]) -> str:
    """The loss key a message offers first among several: a GAN's generator's (:func:`generator_loss_key`),
    else the first that is no regulariser's term (:func:`is_regulariser`).

    Example:
        >>> suggested_loss(["train_adversarial_loss", "train_dis_loss", "train_gen_loss"])
        'train_gen_loss'
        >>> suggested_loss(["kl_loss", "recon_loss"])
        'recon_loss'
    """
    return generator_loss_key(keys) or sorted(keys, key=is_regulariser)[0]


def inferred_training_loss(columns) -> str | None:
    """:func:`infer_loss_column`, else a GAN's generator's key (:func:`generator_loss_key`).

    Example:
        >>> inferred_training_loss(["train/aeloss_step", "train/discloss_step"])
        'train/aeloss_step'
        >>> inferred_training_loss(["train/energy", "train/force", "train/total", "val/total"])
        'train/total'
    """
    inferred = infer_loss_column(columns) or generator_loss_key([str(c) for c in columns])
    if inferred is None and not any(looks_like_loss(str(c)) for c in columns):
        totals = [c for c in columns if _TRAINING_TOTAL.match(str(c))]
        inferred = totals[0] if len(totals) == 1 else None
    return inferred


# A training section's "total" where no name says loss: a trainer that logs its loss's terms and their weighted
# sum by what they fit ("train/energy", "train/force", "train/total": an interatomic potential's distillation).
_TRAINING_TOTAL = re.compile(r"(?i:train(?:ing)?)[/_.]total$")


def loss_column(columns, explicit: str | None = None) -> tuple[str | None, bool]:
    """The loss column: the one the user named, else a recognised alias, else
    :func:`infer_loss_column`. Returns ``(column, inferred)``: ``inferred`` is True when the
    name was judged by its words (the loader says so, naming the option to choose another).

    Raises:
        ValueError: ``explicit`` is not among the columns.

    Example:
        >>> loss_column(["step", "Loss/train", "Loss/test"])
        ('Loss/train', True)
    """
    found = find_column(columns, LOSS_ALIASES, explicit)
    if found is not None or explicit is not None:
        return found, False
    total = _yolov5_total(columns) or _deepmd_total(columns)
    if total is not None:
        return total, True
    inferred = inferred_training_loss(columns)
    return inferred, inferred is not None


def _yolov5_total(columns) -> str | None:
    """YOLOv5's and YOLOv7's console table (``Epoch gpu_mem box obj cls total labels img_size``):
    ``box``, ``obj`` and ``cls`` are the loss's terms and ``total`` their sum, the loss; None
    where the columns are not that table's.

    Example:
        >>> _yolov5_total(["Epoch", "gpu_mem", "box", "obj", "cls", "total", "labels", "img_size"])
        'total'
    """
    names = {str(c).strip().lower(): c for c in columns}
    return names["total"] if {"box", "obj", "cls", "total"} <= names.keys() else None


def yolov5_terms(columns) -> list[str]:
    """YOLOv5's console table from its 6.0 release on (``Epoch gpu_mem box obj cls labels img_size``):
    no total, its three loss terms, whose sum the loss is; empty where the columns are not that
    table's (its earlier ``total`` column is the loss: :func:`_yolov5_total`).

    Example:
        >>> yolov5_terms(["Epoch", "gpu_mem", "box", "obj", "cls", "labels", "img_size"])
        ['box', 'obj', 'cls']
        >>> yolov5_terms(["Epoch", "gpu_mem", "box", "obj", "cls", "theta", "labels", "img_size"])  # yolov5_obb
        ['box', 'obj', 'cls', 'theta']
    """
    names = {str(c).strip().lower(): str(c) for c in columns}
    if not {"gpu_mem", "box", "obj", "cls"} <= names.keys() or "total" in names:
        return []
    # (yolov5_obb's oriented boxes add the angle's term, "theta", to the three)
    return [names[term] for term in ("box", "obj", "cls", "theta") if term in names]


def _deepmd_total(columns) -> str | None:
    """DeePMD-kit's ``lcurve.out`` (``# step rmse_val rmse_trn rmse_e_val rmse_e_trn ... lr``; its
    first versions ``# batch l2_tst l2_trn ...``): ``rmse_trn`` is the training loss's, the energy
    and force columns its terms (a model of one property prints its term alone:
    ``rmse_global_polar_trn``); None where the columns are not that file's.

    Example:
        >>> _deepmd_total(["step", "rmse_val", "rmse_trn", "rmse_e_val", "rmse_e_trn", "lr"])
        'rmse_trn'
        >>> _deepmd_total(["step", "rmse_global_polar_val", "rmse_global_polar_trn", "lr"])
        'rmse_global_polar_trn'
    """
    names = {str(c).strip().lower(): c for c in columns}
    for kind in ("rmse", "l2"):  # the total's column, and a term's beside it ("rmse_e_trn", "rmse_lc_trn")
        total = f"{kind}_trn"
        terms = [n for n in names if n.startswith(f"{kind}_") and n.endswith("_trn") and n != total]
        if total in names and terms:
            return names[total]
        if total not in names and len(terms) == 1 and f"{terms[0][:-len('_trn')]}_val" in names:
            return names[terms[0]]  # a model of one property: its term is the loss ("rmse_global_polar_trn")
    return None


def inferred_loss_note(column: str, what: str = "column") -> str:
    """What a loader tells the user when it chose the loss by its name's words (``what``: how
    the log calls its series, a column or a tag).

    Example:
        >>> inferred_loss_note("Loss/train", "tag")
        "loss read from 'Loss/train' (no tag is named loss; --loss-col picks another)"
    """
    return f"loss read from {column!r} (no {what} is named loss; --loss-col picks another)"


def sniff_columns(columns, step_col: str | None = None, loss_col: str | None = None
                  ) -> tuple[str | None, tuple[str | None, bool]]:
    """The step and loss columns a sniffer sees: a column the user named (``--step-col``,
    ``--loss-col``) where the header has it, else the recognised one (:func:`step_column`,
    :func:`loss_column`). Never raises: a name the header lacks is the loader's to report.

    Example:
        >>> sniff_columns(["it", "nll", "acc"], loss_col="nll"), sniff_columns(["it", "acc"], loss_col="x")
        (('it', ('nll', False)), ('it', (None, False)))
    """
    columns = list(columns)
    step = step_col if step_col in columns else step_column(columns)
    return step, ((loss_col, False) if loss_col in columns else loss_column(columns))


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


def whole_step(value: object) -> int | None:
    """A step read from a JSON value: an integer, or a float that is a whole number, that fits
    int64; None for anything else (null, text, a list, a bool, ``1.5``, ``1e400``, ``2**70``).

    Example:
        >>> whole_step(500), whole_step(500.0), whole_step(None), whole_step(float("inf")), whole_step(2 ** 70)
        (500, 500, None, None, None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not value.is_integer():  # NaN and Inf are not whole numbers either
            return None
        value = int(value)
    if not isinstance(value, int):
        return None
    return value if abs(value) < STEP_LIMIT else None


def rises_by_whole_numbers(values: np.ndarray) -> bool:
    """Whether ``values`` are whole numbers, each above the one before, that fit a 64-bit step:
    a column or list that can be the steps.

    Example:
        >>> rises_by_whole_numbers(np.array([10.0, 20.0, 30.0])), rises_by_whole_numbers(np.array([1.0, 1.0, 2.0]))
        (True, False)
    """
    values = np.asarray(values, dtype="float64")
    return bool(np.isfinite(values).all() and (values == np.round(values)).all() and (np.diff(values) > 0).all()
                and np.abs(values).max(initial=0) < STEP_LIMIT)
