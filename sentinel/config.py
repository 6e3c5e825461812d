"""What sentinel records, how it judges and how it recovers: one frozen configuration.

Every default says why it is what it is. Validated once, at construction.
"""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the detector package imports pandas: only for annotations here
    from sentinel.detect import DivergenceConfig, SpikeConfig


def _positive(name: str, value: float, allow_zero: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}={value!r} is a {type(value).__name__}: pass a number")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {value!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordConfig:
    """What is measured and how often.

    Attributes:
        grad_norm_depth: per-module grad norms group parameters by module path at this depth
            (1 = each direct child of the model, ``blocks``; 2 = ``blocks.0``; 0 = total only).
            None (default) = one group per part of each layer (``blocks.3.attn``,
            ``blocks.3.mlp``, ``embed``, ``head``), whatever wraps the model.
        module_every: compute and write per-module grad norms every N steps (and on every
            flagged step); the total is written every step. 10 keeps the steps file narrow and
            the other steps cheap (1,000 modules: one norm instead of 1,000) while a spike still
            gets its per-module picture on the very step it happens.
        attention_every: sample attention entropy / max logit every N steps. 50, as the cost of
            recomputing probabilities on a sample is a few forward passes of attention.
        tensorboard: also write TensorBoard scalars under ``<log_dir>/tb`` (off the training thread).
        localize_nonfinite: replay a non-finite step with hooks to name the source module.
    """

    grad_norm_depth: int | None = None
    module_every: int = 10
    attention_every: int = 50
    tensorboard: bool = True
    localize_nonfinite: bool = True

    def __post_init__(self) -> None:
        if self.grad_norm_depth is not None:
            _positive("grad_norm_depth", self.grad_norm_depth, allow_zero=True)
        _positive("module_every", self.module_every)
        _positive("attention_every", self.attention_every)


@dataclass(frozen=True, kw_only=True, slots=True)
class GuardConfig:
    """How the guard answers a bad step: skip its update, roll back, or give up.

    Attributes:
        rollback: let the guard act (skip outlier updates, roll back, give up). False = only
            record and report (detection still runs, every update is applied).
        spike_patience: consecutive outlier steps (loss over the spike rule, or non-finite) whose
            updates were skipped before the guard rolls back. 3: in 78 healthy modded-nanogpt
            record runs, llm.c GPT-2 and the stable CS336 sweep (about 338,000 steps), all the
            loss outliers are single steps, while the labelled BigScience spikes and the
            unstable CS336 rates stay over the rule for 2-11 logged points in a row
            (``benchmarks/guard_replay.py``). Two would still keep every healthy run alive, but
            two independent blips in a row happen about once per 80,000 steps at the 1.5B runs'
            blip rate; three, about once per 25 million.
        on_grad_norm_spike: grad-norm outliers count toward ``spike_patience`` too. Off by
            default: their updates are skipped, but healthy runs have grad-norm outliers up to 3
            steps in a row (llm.c GPT-2 124M), so a streak of them is not damage; from the
            ``spike_patience``-th in a row (the loss normal) they are applied (a new level of
            the gradient, which withholding cannot change).
        snapshot_every: take a snapshot every K healthy optimizer steps (and one before the
            first step). 25: a host copy of model and AdamW state costs ~4% of a step of the
            benchmark GPT on CPU, 0.2% amortised at 25 (benchmarks/RESULTS.md).
        snapshot_keep: snapshots held. 4 x 25 reaches back 75-100 steps, as PaLM restarted ~100
            steps before a spike. While the loss level stays raised (an open divergence
            stretch), the last snapshot from before it is kept among them.
        snapshot_max_bytes: memory bound for the ring. None (default) = a quarter of this
            machine's physical memory, shared by the processes on it (``LOCAL_WORLD_SIZE``): a
            model too large for that gets a clear error at the first snapshot, before training,
            instead of running the host out of memory; the oldest snapshots go first.
        snapshot_dir: keep snapshots on disk there instead of host memory.
        min_rollback_distance: restore a snapshot at least this many steps before the first
            outlier step, because the weights that produce a spike are often already damaged a
            few steps earlier (grad norm rises first).
        skip_after: batches after a rollback that are also dropped (PaLM skipped 200-500 on much
            larger batches; with small batches a handful covers the bad stretch).
        max_rollbacks: give up (``gave_up`` event and an error, last good weights restored) past
            this many rollbacks: a permanent fault would otherwise loop forever.
        cooldown: steps after a rollback during which a new rollback counts as the bad step
            coming back (at least twice the distance rolled back, so a replayed schedule is covered).
        lr_factor: a rollback that comes back inside the previous one's cool-down lowers the
            learning rate by ``lr_factor ** k`` for its cool-down (k = how many times in a row it
            came back): restoring the scheduler with the weights replays an LR surge exactly, so
            skipping data alone cannot cure it. 0.1: lowering the LR by an order of magnitude is
            the usual manual remedy; 1.0 turns it off.
        overflow_patience: consecutive AMP overflow steps tolerated before the guard rolls back
            (one overflow is the GradScaler doing its job).
        loss_scale_floor: an AMP loss scale below this counts as a collapse (rollback).
        skip_share_warning: warn once when the skip list holds more than this share of an
            epoch's batches. 0.05: dropping one batch in twenty is no longer "a few bad batches";
            the data or the learning rate needs a look.
    """

    rollback: bool = True
    spike_patience: int = 3
    on_grad_norm_spike: bool = False
    snapshot_every: int = 25
    snapshot_keep: int = 4
    snapshot_max_bytes: int | None = None
    snapshot_dir: str | None = None
    min_rollback_distance: int = 5
    skip_after: int = 5
    max_rollbacks: int = 5
    cooldown: int = 50
    lr_factor: float = 0.1
    overflow_patience: int = 5
    loss_scale_floor: float = 1.0
    skip_share_warning: float = 0.05

    def __post_init__(self) -> None:
        # Types first, for every numeric option (by its annotation), so "4" is named, not compared.
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", "int | None") and not (value is None and f.type == "int | None"):
                if isinstance(value, bool) or not isinstance(value, int):
                    expected = "an int" if f.type == "int" else "an int or None"
                    raise TypeError(f"{f.name}={value!r} is a {type(value).__name__}: pass {expected}")
            elif f.type == "float" and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise TypeError(f"{f.name}={value!r} is a {type(value).__name__}: pass a number (float)")
        if self.snapshot_max_bytes is not None:
            _positive("snapshot_max_bytes", self.snapshot_max_bytes)
        _positive("loss_scale_floor", self.loss_scale_floor, allow_zero=True)
        _positive("snapshot_every", self.snapshot_every)
        _positive("snapshot_keep", self.snapshot_keep)
        _positive("min_rollback_distance", self.min_rollback_distance, allow_zero=True)
        _positive("skip_after", self.skip_after, allow_zero=True)
        _positive("max_rollbacks", self.max_rollbacks, allow_zero=True)
        _positive("cooldown", self.cooldown, allow_zero=True)
        _positive("overflow_patience", self.overflow_patience)
        _positive("spike_patience", self.spike_patience)
        if not 0 < self.skip_share_warning <= 1:
            raise ValueError(f"skip_share_warning must be in (0, 1], got {self.skip_share_warning!r}")
        if not 0 < self.lr_factor <= 1:
            raise ValueError(f"lr_factor must be in (0, 1], got {self.lr_factor!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class SentinelConfig:
    """Everything sentinel can be told, grouped by part.

    Flat keyword options map onto the parts (see :meth:`from_options`): record and guard fields
    by name (``attention_every=10``, ``rollback=False``), detector fields with a prefix
    (``spike_threshold=...`` for the loss, ``grad_spike_threshold=...`` for the grad norm,
    ``divergence_patience=...``).
    """

    record: RecordConfig = field(default_factory=RecordConfig)
    guard: GuardConfig = field(default_factory=GuardConfig)
    loss_spike: "SpikeConfig" = field(default_factory=lambda: _guard_spike())
    # Grad norms are not in nats: no absolute floor, the relative and sigma tests decide.
    grad_spike: "SpikeConfig" = field(default_factory=lambda: _guard_spike(atol=0.0))
    # Non-finite losses are the guard's own case (reported and rolled back as ``nonfinite``).
    divergence: "DivergenceConfig" = field(default_factory=lambda: _detect().DivergenceConfig(skip_nan=True))

    @classmethod
    def from_options(cls, **options) -> "SentinelConfig":
        """Build a configuration from flat keyword options; unknown names raise ``TypeError``.

        Example:
            >>> SentinelConfig.from_options(rollback=False, attention_every=10).guard.rollback
            False
        """
        detect = _detect()
        parts = {"record": (RecordConfig, ""), "guard": (GuardConfig, ""),
                 "loss_spike": (detect.SpikeConfig, "spike_"),
                 "grad_spike": (detect.SpikeConfig, "grad_spike_"),
                 "divergence": (detect.DivergenceConfig, "divergence_")}
        names = {part: {f.name for f in fields(klass)} for part, (klass, _) in parts.items()}
        routed: dict[str, dict] = {part: {} for part in parts}
        for key, value in options.items():
            # Longest prefix first: "grad_spike_window" is not "spike_" + "window" of the loss.
            for part, (_, prefix) in sorted(parts.items(), key=lambda kv: -len(kv[1][1])):
                if key.startswith(prefix) and key[len(prefix):] in names[part]:
                    routed[part][key[len(prefix):]] = value
                    break
            else:
                known = sorted(prefix + n for part, (_, prefix) in parts.items() for n in names[part])
                close = difflib.get_close_matches(key, known, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise TypeError(f"unknown sentinel option {key!r}; {hint}known options: {', '.join(known)}")
        for part in ("loss_spike", "grad_spike"):  # a new warm-up moves the guard's first judgement
            if "warmup" in routed[part]:
                routed[part].setdefault("min_history", routed[part]["warmup"])
        default = cls()
        return cls(**{part: replace(getattr(default, part), **routed[part]) for part in parts})

    @classmethod
    def resolve(cls, config: "SentinelConfig | None", options: dict) -> "SentinelConfig":
        """The configuration of a ``Sentinel`` or an adapter: ``config=`` or flat keyword options.

        Raises:
            TypeError: both were given, ``config`` is not a ``SentinelConfig``, or an option is
                unknown.

        Example:
            >>> SentinelConfig.resolve(None, {"rollback": False}).guard.rollback
            False
        """
        if config is None:
            return cls.from_options(**options)
        if options:
            raise TypeError("pass either config= or keyword options, not both")
        if not isinstance(config, cls):
            raise TypeError(f"config= takes a SentinelConfig, got {type(config).__name__}: pass "
                            "SentinelConfig.from_options(...), or the options as keyword arguments")
        return config

    def make_loss_detector(self):
        return _detect().SpikeDetector(self.loss_spike)

    def make_grad_detector(self):
        return _detect().SpikeDetector(self.grad_spike)

    def make_divergence_detector(self):
        return _detect().DivergenceDetector(self.divergence)

    def to_dict(self) -> dict:
        return {f.name: asdict(getattr(self, f.name)) for f in fields(self)}


def _guard_spike(**overrides):
    # During training the whole history is there: judge nothing before ``warmup`` values (the
    # analyzer judges short log excerpts on big jumps; the guard must not act on 3 points).
    config = _detect().SpikeConfig(**overrides)
    return replace(config, min_history=config.warmup)


def _detect():
    # The detector package imports pandas; load it when a full configuration is built.
    import sentinel.detect as detect

    return detect
