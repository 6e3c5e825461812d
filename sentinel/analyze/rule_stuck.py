"""A loss that stops measuring learning: the same float at many logged steps in a row, or a
fall by orders of magnitude from one logged step to the next.

A training loss is a mean over a fresh batch each step: two steps in a row agree to the last
printed digit only by chance, eight in a row only when nothing moves. Then the weights are not
changing (a frozen model, a learning rate of 0, every update skipped), or what is printed is
not a measurement (a placeholder such as ``-1`` on a rank that does not compute the loss, a
loss of exactly ``0`` because every label is masked).

A slowly moving running mean printed with few digits can repeat too (a progress bar's epoch
mean late in an epoch: ``loss: 0.0123``), so a stretch counts only where the value is exactly
``0``, below 0, or printed with at least :data:`MIN_DIGITS` significant digits, and not where the
rows around it are one unit of its last digit from it (a smooth curve's rounding: 2.0035, then
2.0034 for nine steps, then 2.0033). A loss of 0 counts
where it starts the log or is reached in one jump (from above :data:`ZERO_JUMP_FROM`): a model
that fits its data exactly (a toy regression) comes down to 0 through ever smaller values. In a
reinforcement-learning run (one that logs a reward or a KL term: GRPO, PPO) a loss of 0 is what
the objective gives while the policy is still the reference, so there it never counts.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.loaders.keys import DISCRIMINATOR_KEYS, GENERATOR_KEYS, LETTER_PAIR, bare_key
from sentinel.analyze.rule_chance import chance_level
from sentinel.analyze.noise import printed_unit

# Consecutive logged values, all the same float, that make a stretch.
MIN_ROWS = 8
# ... where the float is exactly 0, or a negative one: no mean over a batch lands there by chance (a
# LoRA whose sd-scripts bar shows avr_loss=0 at each of six epochs learned nothing; torchtitan's
# pipeline stages that do not compute the loss print -1.0 at every step).
MIN_ZERO_ROWS = 4
# ... where each row is an epoch's mean over its batches (RecBole's "train loss: 1.3043" at each of
# five epochs: a model that learned nothing), repeated to all its printed digits.
MIN_EPOCH_ROWS = 4
# Significant digits of the repeated value for a positive one to count.
MIN_DIGITS = 5
# A stretch of zeros counts when the value before it was above this (a jump, not a convergence).
ZERO_JUMP_FROM = 1e-3
# ... and of exactly 1 (a Dice or IoU loss where prediction and target never overlap: PaddleOCR's DB
# detector at "loss: 1.000000, loss_shrink_maps: 0.000000" on every line) where it starts the log or
# the value before lies outside this range (a loss near 1 printed with one decimal repeats "1.0").
ONE_NEAR = (0.5, 2.0)


# A stretch of zeros that opens a log whose first step lies this many logging intervals in (a paste of
# a long run's late part: DocRED's "train loss 0.000" from step 15,050, printed with three decimals)
# shows no jump: a converged loss printed with few digits reads 0 too. Information, not a warning.
LATE_START_INTERVALS = 20

# Relative difference within which two logged losses are the same value (float32's epsilon).
SAME_RTOL = 1.2e-7

def is_reinforcement_learning(columns) -> bool:
    """A run that logs a reward or a KL term (TRL's GRPO/PPO tables, ``rewards/...``, ``kl``).

    Example:
        >>> is_reinforcement_learning(["loss", "reward", "kl"]), is_reinforcement_learning(["loss", "lr"])
        (True, False)
    """
    return any(str(c).startswith(("reward", "objective/", "kl")) for c in columns)


# Episode returns from an environment: Stable-Baselines3's rollout/ep_rew_mean (and
# ep_len_mean), CleanRL's charts/episodic_return, RLlib's episode_reward_mean, rlkit's (SAC, CQL, AWAC)
# exploration/Returns Mean and evaluation/Average Returns.
RETURN_KEYS = ("ep_rew_mean", "episodic_return", "episode_reward_mean", "episode_return", "returns mean",
               "average returns")  # (the tables' column names lower-cased as read)
_EPISODE_KEYS = (*RETURN_KEYS, "ep_len_mean")
# ... and OpenAI baselines' DDPG rollout returns (a "return" alone may be anything's).
_EPISODE_COLUMNS = ("rollout/return", "rollout/return_history")


# An RL algorithm's update statistics, logged where the returns may not be (Stable-Baselines3 logs
# rollout/ep_rew_mean only where the environment is wrapped in a Monitor): PPO's and A2C's
# train/approx_kl, clip_fraction, policy_gradient_loss, value_loss, entropy_loss, explained_variance;
# SAC's and TD3's actor_loss, critic_loss, ent_coef. Two of them make a run an agent's.
_UPDATE_STATS = frozenset({"approx_kl", "clip_fraction", "policy_gradient_loss", "value_loss", "entropy_loss",
                           "explained_variance", "actor_loss", "critic_loss", "ent_coef", "ent_coef_loss"})


def is_environment_rl(columns) -> bool:
    """A run that logs episode returns from an environment, or an RL algorithm's update statistics
    (:func:`logs_agent_updates`): its losses are surrogates whose scale follows the returns (a
    value loss grows as the agent earns more), so their rises, spikes and plateaus are not the
    run's health.

    Example:
        >>> is_environment_rl(["rollout/ep_rew_mean", "train/loss"]), is_environment_rl(["loss", "reward"])
        (True, False)
        >>> is_environment_rl(["loss", "train/approx_kl", "train/clip_fraction", "train/value_loss"])
        True
    """
    return logs_episode_returns(columns) or logs_agent_updates(columns)


def logs_episode_returns(columns) -> bool:
    """An environment's episode returns among ``columns`` (``rollout/ep_rew_mean``, ...).

    Example:
        >>> logs_episode_returns(["charts/episodic_return"]), logs_episode_returns(["return"])
        (True, False)
    """
    return any(str(c).rsplit("/", 1)[-1] in _EPISODE_KEYS or str(c) in _EPISODE_COLUMNS for c in columns)


def logs_agent_updates(columns) -> bool:
    """Two or more of an RL algorithm's update statistics among ``columns`` (``train/approx_kl``,
    ``train/value_loss``, ``train/critic_loss`` ...).

    Example:
        >>> logs_agent_updates(["loss", "train/value_loss", "train/entropy_loss"]), logs_agent_updates(["value_loss"])
        (True, False)
    """
    return sum(str(c).rsplit("/", 1)[-1] in _UPDATE_STATS for c in columns) >= 2


# Words of a loss's name that say it is a policy gradient's surrogate objective (PPO's and GRPO's
# actor: verl's actor/pg_loss, Stable-Baselines3's policy_gradient_loss, an actor-critic's actor_loss,
# DeepSpeed-Chat's and OpenRLHF's act_loss).
_POLICY_WORDS = frozenset({"pg", "policy", "actor", "act"})


def is_policy_gradient_loss(name: str) -> bool:
    """A loss named as a policy gradient's surrogate objective: its value follows each batch's
    advantages, near 0 on either side, and says nothing of the run's progress (the reward does).

    Example:
        >>> [is_policy_gradient_loss(n) for n in ("actor/pg_loss", "policy_gradient_loss", "act_loss")]
        [True, True, True]
        >>> is_policy_gradient_loss("loss"), is_policy_gradient_loss("train/loss")
        (False, False)
    """
    return not _POLICY_WORDS.isdisjoint(re.split(r"[^a-z0-9]+", name.lower()))


def is_adversarial(columns, loss_name: str = "") -> bool:
    """A GAN's run: a discriminator's loss (``loss_d``) beside the generator's, or a loss read
    from a generator's key (``loss_G``, which a script's lines print beside ``loss_D``). The two
    play against each other: the generator's loss rising while the discriminator improves is the
    game, not a divergence.

    Example:
        >>> is_adversarial(["loss", "loss_d"]), is_adversarial(["loss"]), is_adversarial(["loss"], "g_loss")
        (True, False, True)
        >>> is_adversarial(["loss"], "G"), is_adversarial(["loss", "d"])
        (True, False)
    """
    generator = bare_key(loss_name)
    return any(bare_key(str(c)) in DISCRIMINATOR_KEYS for c in columns) or generator in GENERATOR_KEYS \
        or generator == LETTER_PAIR[0]  # read from a pair's letters (loss_key), or named so


def stuck_loss_incidents(loss: pd.Series, min_rows: int = MIN_ROWS, zero_counts: bool = True,
                         beside: pd.DataFrame | None = None) -> list[Incident]:
    """One warning for the longest stretch of ``min_rows`` or more logged losses in a row that
    are the same float (:data:`MIN_ZERO_ROWS` where it is 0, 1 or negative; see the module docstring
    for which values count).

    Args:
        loss: the finite loss values, indexed by step.
        min_rows: the shortest stretch reported.
        zero_counts: False where a loss of 0 is normal (:func:`is_reinforcement_learning`).
        beside: the run's logged values by step (its steps frame): a stretch of zeros that opens a
            paste of a run's later part is a warning where another of them than the loss, the
            learning rate, the loss scale and the epoch stands still with it (a dead GAN's
            discriminator loss at 7.971192 beside its generator's 0.000000).

    Example:
        >>> s = pd.Series([3.1, 2.9] + [10.825932] * 10, index=range(0, 120, 10))
        >>> stuck_loss_incidents(s)[0].message.split(":")[0]
        'loss exactly 10.825932 at 10 logged steps in a row (20-110)'
    """
    values = loss.to_numpy(dtype="float64")
    zero_rows = min(min_rows, MIN_ZERO_ROWS)
    if len(values) < zero_rows:
        return []
    # Row i+1 repeats row i, to float32's precision: a mean over an epoch of the same float32
    # loss can differ in its 8th digit (11.090352058 then 11.090352177).
    same = np.abs(values[1:] - values[:-1]) <= SAME_RTOL * np.abs(values[:-1])
    if not same.any():
        return []
    bounds = np.flatnonzero(np.diff(np.concatenate(([0], same.view(np.int8), [0]))))
    starts, ends = bounds[::2], bounds[1::2]  # rows starts[k]..ends[k] hold one value
    length = ends - starts + 1
    degenerate = (values[starts] <= 0) | (values[starts] == 1.0)
    counted = [k for k in np.flatnonzero(length >= np.where(degenerate, zero_rows, min_rows))
               if _counts(float(values[starts[k]]), float(values[starts[k] - 1]) if starts[k] else None, zero_counts)
               and not _rounding_plateau(values, int(starts[k]), int(ends[k]))]
    if not counted:
        return []
    k = max(counted, key=lambda j: length[j])
    first, last = int(starts[k]), int(ends[k])
    steps = loss.index.to_numpy()
    value = float(values[first])
    resolved = last < len(values) - 1
    if value == 0:
        why = ("nothing is learned from a loss of 0 (every label masked or ignored, an empty batch, "
               "or a loss that underflowed)")
    elif value < 0:
        why = ("a loss that stays at one negative value measures nothing: a placeholder (a rank that did not compute "
               "it), or a loss given targets outside its range (binary cross-entropy fed labels other than 0 and 1)")
    elif value == 1.0:
        why = ("a loss of exactly 1 is what a Dice or IoU loss gives where prediction and target never overlap "
               "(empty or misaligned masks, labels the loader does not read), or a placeholder")
    else:
        why = ("the weights are not changing (a frozen model, a learning rate of 0, every update "
               "skipped) or the value printed is a placeholder")
    severity = Severity.WARNING
    if value == 0 and first == 0 and _starts_late(steps) and not _still_beside(beside, steps[first:last + 1]):
        severity = Severity.INFO
        why = ("no value before it shows whether it jumped there (nothing learned from a loss of 0: every label "
               "masked, an empty batch) or came down to it (a loss printed with few decimals reads 0 once below "
               "their last digit: a run that fits its training data)")
    chance = chance_level(value)
    if chance is not None:
        why = f"{value:.10g} is ln({chance}), a uniform guess over {chance:,} classes or tokens: {why}"
    after = f"; it changes at step {int(steps[last + 1])}" if resolved else "; it never changes again"
    # (rows that differ in their last printed digit, OpenKE's 69.314722, 69.314723, 69.314720: not "exactly")
    exactly = "exactly " if bool((values[first:last + 1] == value).all()) else ""
    within = "" if exactly else " (to float32's precision)"
    if severity is Severity.INFO:
        exactly = within = ""  # perhaps a printed 0.000
    message = (f"loss {exactly}{value:.10g}{within} at {last - first + 1} logged steps in a row "
               f"({int(steps[first])}-{int(steps[last])}): {why}{after}")
    return [Incident(IncidentKind.LOSS_STUCK, int(steps[first]), int(steps[last]), severity, message,
                     {"value": value, "rows": last - first + 1, "stretches": len(counted), "resolved": resolved})]


def _still_beside(beside: pd.DataFrame | None, steps: np.ndarray) -> bool:
    """Whether a column of ``beside`` (not one that stands still in a healthy run) holds one finite
    value other than 0 at every one of ``steps``."""
    if beside is None:
        return False
    rows = beside.drop(columns=[metrics.LOSS, metrics.LR, metrics.LOSS_SCALE, "epoch"], errors="ignore").reindex(steps)
    return any(column.notna().all() and column.nunique() == 1 and column.iloc[0] != 0 for _, column in rows.items())


def _starts_late(steps: np.ndarray) -> bool:
    """Whether the first logged step lies :data:`LATE_START_INTERVALS` logging intervals (the median
    gap between rows) or more past step 0: a paste of a run's later part.

    Example:
        >>> _starts_late(np.arange(15050, 15450, 50)), _starts_late(np.arange(1, 9))
        (True, False)
    """
    gaps = np.diff(steps.astype("float64"))
    gaps = gaps[gaps > 0]
    return bool(len(gaps)) and float(steps[0]) >= LATE_START_INTERVALS * float(np.median(gaps))


def _rounding_plateau(values: np.ndarray, first: int, last: int) -> bool:
    """Rows ``first..last`` hold one value that the rows around it differ from by one unit of its
    last printed digit at most: a slowly moving loss (a running mean, a smooth curve late in
    training) printed with four decimals shows 2.0035, then 2.0034 for nine steps, then 2.0033.
    Nothing stuck there; a placeholder is jumped into and out of.

    Example:
        >>> _rounding_plateau(np.array([2.0035] + [2.0034] * 9 + [2.0033]), 1, 9)
        True
        >>> _rounding_plateau(np.array([2.31] + [10.825932] * 9 + [2.30]), 1, 9)
        False
        >>> zeros, ones = np.array([0.9882] + [0.0] * 9), np.array([1.0001] + [1.0] * 9)
        >>> _rounding_plateau(zeros, 1, 9), _rounding_plateau(ones, 1, 9)
        (False, True)
    """
    value = float(values[first])
    neighbours = [float(values[i]) for i in (first - 1, last + 1) if 0 <= i < len(values)]
    if not neighbours:
        return False
    # The last printed digit: the finest of the three values (1.0 printed as 1.0000 beside 1.0001).
    unit = printed_unit((value, *neighbours))
    return all(abs(n - value) <= 1.5 * unit for n in neighbours)


# A loss whose level (the median of the last COLLAPSE_LEVEL_ROWS logged values, so a spike's
# return to the trend is no fall) is at least COLLAPSE_FROM and that falls below COLLAPSE_RATIO of
# it at the next logged step: no optimizer step learns that much; the model sees its targets (a
# label leak, a mask that hides every token, targets not shifted against the inputs).
COLLAPSE_FROM = 1.0
COLLAPSE_RATIO = 1e-3
COLLAPSE_LEVEL_ROWS = 21
# With fewer rows than this before it, the level is no level: a fall by the ratio may be an
# outlier's return (GFPGAN's paste opens at a batch of 2535, then 1.7 as before it), told only
# where the loss fell to near 0 (a leak's 1.79e-06 after 12.18 at a log's first row).
COLLAPSE_LEVEL_LEAST = 3
COLLAPSE_NEAR_ZERO = 1e-2
# A fall the loss climbs back from is a batch's, no collapse: the median of the next COLLAPSE_AFTER_ROWS
# logged values back above COLLAPSE_BACK of the level (a CRF tagger's summed batch loss, 2304 then 0.0011,
# then back in the tens and thousands: one easy batch).
COLLAPSE_AFTER_ROWS = 5
COLLAPSE_BACK = 0.1
# Passes over the data between two logged rows from which a fall is learnt, not leaked: a ChatGLM
# LoRA on a few examples, its Trainer dicts numbered in order (they carry no step), 1.141 at epoch 50,
# then 0.0003 at epoch 100.
COLLAPSE_PASSES = 2.0
# Optimizer steps between two logged rows from which a fall is learnt, not leaked: a physics-informed
# network's loss, summed over its residuals, falls from 59 to 0.003 in its first 1,000 steps (DeepXDE
# prints a row every 1,000).
COLLAPSE_STEPS = 100
# A fall to a level the loss had already reached before it rose (within this factor of its lowest
# value before the fall) is a blow-up's end, no collapse: an L-BFGS step to 2e5, then 3.42, then back
# at 5.9e-4 where Adam had left it; a hand-written loop back at 316 after 8e5, where it ran before.
COLLAPSE_SEEN = 0.5


def collapse_incidents(loss: pd.Series, epochs: pd.Series | None = None) -> list[Incident]:
    """One warning for the first fall of the loss from a level of at least :data:`COLLAPSE_FROM`
    to below :data:`COLLAPSE_RATIO` of it at the next logged step, one logging interval later
    (the median gap between logged steps) and no more than :data:`COLLAPSE_STEPS` steps, where
    ``epochs`` (the run's epoch count, by step) does not show :data:`COLLAPSE_PASSES` epochs or
    more between the two; nor a fall back to a level the loss had reached before
    (:data:`COLLAPSE_SEEN`).

    Example:
        >>> s = pd.Series([12.18, 1.79e-06, 0.0], index=[1, 2, 3])
        >>> collapse_incidents(s)[0].message.split(":")[0]
        'loss collapsed from 12.18 at step 1 to 1.79e-06 at step 2'
        >>> collapse_incidents(pd.Series([2535.0, 1.70, 1.28, 1.31], index=[1, 2, 3, 4]))
        []
        >>> collapse_incidents(pd.Series([30.0, 20.0, 25.0, 0.001, 18.0, 22.0, 19.0], index=range(7)))  # one easy batch
        []
        >>> collapse_incidents(pd.Series([1.141, 0.0003, 0.0001]), epochs=pd.Series([50.0, 100.0, 150.0]))
        []
        >>> collapse_incidents(pd.Series([6.3e-4, 2.0e5, 3.42, 5.9e-4, 5.0e-4]))  # back where it was
        []
    """
    values = loss.to_numpy(dtype="float64")
    if len(values) < 2:
        return []
    before, after = values[:-1], values[1:]
    # Candidates: a fall by the ratio from the previous row (one compare over the run), then
    # judged against the level before them.
    candidates = np.flatnonzero((before >= COLLAPSE_FROM) & (after >= 0) & (after < COLLAPSE_RATIO * before))
    steps = loss.index.to_numpy()
    if len(candidates):
        # Only rows one logging interval apart: an excerpt that jumps from step 5 to step 300 may
        # have learnt that much in between.
        gaps = np.diff(steps)
        candidates = candidates[(gaps[candidates] <= np.median(gaps)) & (gaps[candidates] <= COLLAPSE_STEPS)]
    if len(candidates) and epochs is not None:
        counted = epochs.reindex(loss.index).to_numpy(dtype="float64")
        passes = counted[candidates + 1] - counted[candidates]
        candidates = candidates[~(passes >= COLLAPSE_PASSES)]  # (NaN: not known, kept)
    fell = []
    for i in candidates.tolist():
        level = float(np.median(values[max(0, i + 1 - COLLAPSE_LEVEL_ROWS):i + 1]))
        later = values[i + 2:i + 2 + COLLAPSE_AFTER_ROWS]
        seen = float(values[:i].min()) if i else np.inf  # (the loss is finite: its lowest before the fall)
        if level >= COLLAPSE_FROM and after[i] < COLLAPSE_RATIO * level \
                and (i + 1 >= COLLAPSE_LEVEL_LEAST or after[i] < COLLAPSE_NEAR_ZERO) \
                and not (len(later) and float(np.median(later)) >= COLLAPSE_BACK * level) \
                and not after[i] >= COLLAPSE_SEEN * seen:
            fell.append(i)
    if not fell:
        return []
    at = fell[0]
    start, end = int(steps[at]), int(steps[at + 1])
    message = (f"loss collapsed from {values[at]:.4g} at step {start} to {values[at + 1]:.4g} at step {end}: "
               "no optimizer step learns that much; the model sees its targets (a label leak, a mask that "
               "hides every token, targets not shifted against the inputs)")
    return [Incident(IncidentKind.LOSS_COLLAPSE, start, end, Severity.WARNING, message,
                     {"from": float(values[at]), "to": float(values[at + 1]), "falls": int(len(fell)),
                      "resolved": False})]


def _counts(value: float, before: float | None, zero_counts: bool) -> bool:
    if value == 0:
        return zero_counts and (before is None or abs(before) > ZERO_JUMP_FROM)
    if value == 1.0:  # from the start, or jumped into: not a loss near 1 printed with few digits
        return before is None or not ONE_NEAR[0] < before < ONE_NEAR[1]
    return value < 0 or _significant_digits(value) >= MIN_DIGITS


def _significant_digits(value: float) -> int:
    """Digits of the shortest repr that round-trips: 10.8259 -> 6, 0.0123 -> 3, 2.5 -> 2.

    Example:
        >>> _significant_digits(10.8259), _significant_digits(0.0123), _significant_digits(1e-05)
        (6, 3, 1)
    """
    mantissa = repr(abs(value)).split("e")[0].replace(".", "")
    return len(mantissa.strip("0")) or 1
