"""``Sentinel``: records a training run, detects spikes, answers bad steps, explains them later.

The same object serves a hand-written loop and the Lightning callback (which calls the
lower-level ``begin_batch`` / ``measure`` / ``finish_step`` methods from its hooks).

A raw loop::

    sen = Sentinel(model, opt, scheduler=sched, log_dir="logs/run1", loss_fn=loss_fn)
    for batch in sen.batches(loader):     # drops skipped batches, arms probes
        opt.zero_grad()
        loss = loss_fn(model, batch)
        loss.backward()
        if sen.check(loss):              # grads measured; False: do not apply this update
            opt.step()
        sched.step()
        sen.end_step()                   # record, then roll back or snapshot
    sen.close()

The step protocol: ``begin_batch`` (is this batch to be dropped?), ``measure`` after backward
(one host transfer; the detectors and the guard's decision, :func:`sentinel.guard.policy.decide`,
run here, before the update), ``finish_step`` after the update (record; carry out a rollback or a
give-up; take a snapshot). A step whose update must not be applied has its gradients set to
None, so an optimizer step that runs anyway changes nothing (SGD, Adam and AdamW skip
parameters without a gradient: no moment, step count or weight-decay change).
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from sentinel import distributed, metrics
from sentinel.config import SentinelConfig
from sentinel.detect.entropy import EntropyWatch
from sentinel.events import EventKind, describe, make_event
from sentinel.guard.batch_id import BatchIdentity, batch_fields
from sentinel.guard.judge import StepJudge
from sentinel.guard.lr_cooldown import LRCooldown
from sentinel.guard.policy import Action, Decision, GuardState, Reason, StepSignals, decide
from sentinel.guard.return_point import ReturnPoint
from sentinel.guard.running_stats import RunningStats
from sentinel.guard.skiplist import SkipList
from sentinel.guard.snapshot import SnapshotConfig, SnapshotRing, SnapshotTooLarge, SnapshotUnusable, format_size
from sentinel.guard.snapshot_home import rank_directory, snapshot_budget
from sentinel.probes.attention import AttentionProbe
from sentinel.probes.grad_norm import GradNormProbe
from sentinel.probes.loss_scale import LossScaleProbe
from sentinel.probes.nonfinite import find_nonfinite_input, locate_nonfinite, locate_overflow
from sentinel.probes.reference_loss import reference_loss
from sentinel.rng import RngState, capture_rng, cuda_devices_of
from sentinel.store import RunWriter, read_skiplist
from sentinel.training_objects import as_list, check_model, check_training_objects, checked_rollback_with

log = logging.getLogger(__name__)

# Keys of the snapshot "extra" dict (restored with the weights).
_DETECTORS = "detectors"
_OVERFLOW_STREAK = "overflow_streak"
_SCALER_SETTLED = "scaler_settled"


class TrainingGaveUp(RuntimeError):
    """Raised when the guard has rolled back ``max_rollbacks`` times and the run is still bad.

    The model, optimizers and schedulers hold the last good snapshot when it is raised, so a
    checkpoint saved after it is usable.
    """


@dataclass
class _BatchSeen:
    """A batch the guard may name in the skip list: where it came in and what names it."""

    step: int
    epoch: int
    batch_idx: int
    identity: BatchIdentity = field(repr=False)

    def entry(self, reason: str, rollback: int, rank: int) -> dict[str, Any]:
        return {"step": self.step, "epoch": self.epoch, "batch_idx": self.batch_idx,
                "reason": reason, "rollback": rollback, "rank": rank, **self.identity.to_dict()}


class Sentinel:
    """Watches one training run: probes, detectors, guard and run directory together.

    Args:
        model: the model being trained (``torch.nn.Module``).
        optimizer: one optimizer or a sequence of them (needed for rollback).
        scheduler: LR scheduler(s) to snapshot with the model, optional.
        scaler: a ``torch.amp.GradScaler`` when training with fp16 AMP, optional.
        log_dir: the run directory (created; must be writable).
        loss_fn: ``loss_fn(model, batch) -> loss``; lets a non-finite step be replayed to name
            the module where the NaN/Inf first appeared. Without it the source is not localised.
        config: a :class:`SentinelConfig`; or pass its fields as keyword options
            (``rollback=False``, ``snapshot_every=10``, ``spike_threshold=...``).
        rank: this process's rank (default: torch.distributed's, else 0). Only rank 0 writes.
        meta: extra fields for ``meta.json``.
        rollback_with: other state a rollback must put back with the weights, each anything
            with ``state_dict`` / ``load_state_dict``: an EMA or SWA copy of the model
            (``torch.optim.swa_utils.AveragedModel``, timm's ``ModelEmaV2``, diffusers'
            ``EMAModel``). Left out, the average keeps the updates a rollback discarded, and so
            do the weights taken from it for evaluation or at the end.

    Example:
        >>> sen = Sentinel(model, opt, log_dir="logs/run1")   # doctest: +SKIP
        >>> sen = Sentinel(model, opt, log_dir="logs/run1", rollback_with=[ema])   # doctest: +SKIP
    """

    def __init__(
        self,
        model: torch.nn.Module,
        optimizer: torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None = None,
        scheduler: Any = None,
        scaler: torch.amp.GradScaler | None = None,
        log_dir: str = "logs/run",
        *,
        loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor] | None = None,
        config: SentinelConfig | None = None,
        rank: int | None = None,
        meta: dict[str, Any] | None = None,
        rollback_with: Sequence[Any] = (),
        _keep_batches: bool = False,
        **options: Any,
    ) -> None:
        self.config = SentinelConfig.resolve(config, options)
        check_model(model)
        self.model = model
        self.optimizers = as_list(optimizer)
        self.schedulers = as_list(scheduler)
        self.scaler = scaler
        check_training_objects(self.optimizers, self.schedulers, scaler)
        self.rollback_with = checked_rollback_with(rollback_with)
        self.loss_fn = loss_fn
        # Whether a non-finite step can be replayed to localise it (an adapter with its own
        # replay, such as the Lightning callback, sets this).
        self.replay_available = loss_fn is not None
        # Builds a loss closure for any batch: re-runs the last applied batch before a rollback
        # to tell damaged weights from bad data (the Lightning callback sets its own).
        self.replay_batch: Callable[[Any, int], Callable[[], torch.Tensor]] | None = \
            (lambda batch, batch_idx: (lambda: loss_fn(model, batch))) if loss_fn is not None else None
        self.log_dir = str(log_dir)
        self.rank = distributed.rank() if rank is None else rank
        self.world_size = distributed.world_size()
        # A raw loop drops a batch the guard skips; Lightning cannot drop one from its loop, so
        # there the batch is trained on and its update suppressed (gradients set to None).
        self._keep_batches = _keep_batches
        if self.config.guard.rollback and not self.optimizers:
            raise ValueError("rollback needs the optimizer: pass optimizer=..., or rollback=False")

        rec = self.config.record
        self._probed_params = -1  # how many parameters the optimizers held when the probe was built
        self._probe_updated_params()
        if self._probed_params and self.rank == 0:
            _warn_not_updated(model, self._updated_params())
        self.loss_scale = LossScaleProbe()
        self._running_stats = RunningStats(model)
        self.attention = AttentionProbe(model, every=rec.attention_every)
        self.judge = StepJudge(self.config)
        self.entropy_watch = EntropyWatch()
        g = self.config.guard
        snapshot_dir = rank_directory(g.snapshot_dir, self.rank, self.world_size)
        self.ring = SnapshotRing(SnapshotConfig(every=g.snapshot_every, keep=g.snapshot_keep,
                                                max_bytes=snapshot_budget(g.snapshot_max_bytes, g.snapshot_dir),
                                                directory=snapshot_dir))
        # The state a loss rollback left: if the loss stays as high on the restored weights (the
        # loss itself moved, see _accept_new_level), training returns to it.
        self._return_point = ReturnPoint(snapshot_dir)
        # Only rank 0 writes; an unwritable log_dir fails here, before training starts.
        self.writer = RunWriter(self.log_dir, meta=self._meta(meta), tensorboard=rec.tensorboard) \
            if self.rank == 0 else None
        # Rank 0 reads, every rank receives: node-local log dirs hold the file on rank 0 only.
        self.skiplist = SkipList(distributed.broadcast_from_zero(
            read_skiplist(self.log_dir) if self.rank == 0 else None))

        # Progress (saved by state_dict).
        self.step = 0
        self.guard_state = GuardState()
        self.cooldown_until = -1
        self.overflow_streak = 0
        self.last_restored_step: int | None = None
        # No update applied since the last rollback: the weights are still the restored snapshot's.
        self._on_restored = False
        self._rolled_back_for = 0  # the first bad step of the last rollback
        # Per-step scratch.
        self._step_batches: list[tuple[int, Any]] = []  # (batch_idx, batch) of this step
        self._streak: list[_BatchSeen] = []  # batches of the current outlier streak
        self._streak_start: int | None = None  # step of its first outlier
        self._reference: tuple[int, Any] | None = None  # last batch whose update was applied
        self._reference_loss = math.nan  # its loss when it was applied (NaN: one of several micro-batches)
        # The last batch applied while the loss was at its level, and its loss then: a batch from
        # before a divergence, to tell damaged weights (it scores higher now) from harder data.
        self._level_reference: tuple[int, Any] | None = None
        self._level_reference_loss = math.nan
        self._weights_check: dict[str, Any] | None = None  # its re-run, when the guard asked
        self._batch: Any = None
        self._batch_idx = 0
        self._epoch = 0
        self._epoch_batches = 0  # batches per epoch, as far as seen
        self._warned_skip_share = False
        self._rng: RngState | None = None
        # The CUDA generators to capture: the model's devices, asked at the first step (after
        # Lightning has moved the model), not every step; not every device of an 8-GPU node.
        self._cuda_rng: tuple[int, ...] | None = None
        self._values: dict[str, float] = {}
        self._losses: list[torch.Tensor] = []
        self._signals: StepSignals | None = None
        self._decision: Decision | None = None
        self._suppressed: str | None = None  # why this step's update is suppressed (kept batch)
        self.lr_cooldown = LRCooldown(self.optimizers, 1.0, active=self._cooling_down)
        self._t_last = time.perf_counter()
        self._samples = 0
        self._reported_no_attention = False
        self._nonfinite = False
        self._real_nan_streak = False  # the AMP overflow streak in progress is a real NaN source
        self._scaler_settled = False  # the AMP scaler has had one step without overflow
        self.last_record: dict[str, Any] = {}  # what the last step wrote (adapters forward it)
        self._skip_next = 0  # batches still to drop after a rollback
        self._new_level = False  # this step's outlier streak came on restored weights: accept it
        self._attn_sampled = False  # has any step been sampled for attention yet
        self._attn_values: dict[str, torch.Tensor] = {}
        self._attn_recorded = False  # this step's values hold attention metrics
        self._grad_per_tensor: torch.Tensor | None = None  # this step's per-parameter norms, groups not read
        self._snapshot_failing = False  # the last snapshot could not be written
        self._started = False  # this process has recorded its first step
        self._resumed = False  # load_state_dict was called before it
        # Raw-loop call order: what happened since the last end_step(), and which calls the loop
        # makes at all (so a repeated end_step() can be told from a loop that never checks).
        self._since_end: set[str] = set()
        self._loop_calls: set[str] = set()
        self._warned_order: set[str] = set()

    @property
    def rollbacks(self) -> int:
        """Rollbacks done so far."""
        return self.guard_state.rollbacks

    @property
    def _restored(self) -> list[Any]:
        """What a snapshot holds besides the model and optimizers: the schedulers and
        ``rollback_with`` (the ring copies them through state_dict / load_state_dict)."""
        return [*self.schedulers, *self.rollback_with]

    # ------------------------------------------------------------------ raw-loop API
    def batches(self, loader: Iterable[Any]) -> Iterator[Any]:
        """Yield the loader's batches, dropping skipped ones, and arm the probes for each.

        Example:
            >>> for batch in sen.batches(loader): ...   # doctest: +SKIP
        """
        for batch_idx, batch in enumerate(loader):
            if self.begin_batch(batch, batch_idx):
                yield batch
        self._epoch += 1

    def check(self, loss: torch.Tensor | None = None) -> bool:
        """Measure the step after backward (and ``scaler.unscale_``), before ``optimizer.step``.

        Args:
            loss: the loss this step backpropagated. With gradient accumulation, pass each
                micro-batch's (already divided) loss to :meth:`add_loss` after its backward
                instead, and call ``check()`` without one before the update.

        Returns:
            False when the update must not be applied: an outlier or non-finite step (its
            gradients are also set to None, so an ``optimizer.step()`` would change nothing),
            or a rollback is coming.

        Example:
            >>> if sen.check(loss):   # doctest: +SKIP
            ...     opt.step()
        """
        if loss is not None:
            self.add_loss(loss)
        self._since_end.add("check")
        return not self.measure(replay=self._replay_fn())

    def end_step(self) -> None:
        """After ``optimizer.step()``: record, then roll back or take a snapshot.

        A second call for the same step is ignored with a warning (it would count a step that
        never happened); a step ended without :meth:`check` is recorded from its gradients only,
        with a warning, since its loss was never seen.

        Example:
            >>> if sen.check(loss):   # doctest: +SKIP
            ...     opt.step()
            >>> sen.end_step()        # doctest: +SKIP
        """
        self._loop_calls |= self._since_end
        if not self._since_end and self._loop_calls:
            self._warn_order("twice", f"sentinel: end_step() called again at step {self.step} with no new "
                             "batch or check() since the previous one: ignored. Call it once per "
                             "optimizer step.")
            return
        if "batch" not in self._since_end and self.config.guard.rollback:
            self._warn_order("no_batches", "sentinel: this loop does not iterate through sen.batches(loader) (or "
                             "call begin_batch): after a rollback no bad batch can be dropped or skip-listed, "
                             "and no batch can be re-run to check the weights or find a NaN's source. "
                             "Iterate with `for batch in sen.batches(loader):`.")
        if "check" not in self._since_end:
            self._warn_order("no_check", f"sentinel: end_step() without check(loss) at step {self.step}: no "
                             "loss is recorded, so a loss spike goes unseen and an update cannot be "
                             "withheld. Call `if sen.check(loss): opt.step()` after backward.")
        self._since_end.clear()
        self.finish_step()

    def _warn_order(self, key: str, message: str) -> None:
        if key not in self._warned_order:  # once per run: the loop repeats the same mistake
            self._warned_order.add(key)
            log.warning(message)

    # ------------------------------------------------------------------ engine API
    @property
    def batch(self) -> Any:
        """The batch of the step in progress (what a replay recomputes)."""
        return self._batch

    @property
    def batch_idx(self) -> int:
        """Its index in the epoch."""
        return self._batch_idx

    @property
    def update_suppressed(self) -> bool:
        """The update of the step in progress must not be applied (known after :meth:`measure`)."""
        return self._suppressed is not None or \
            (self._decision is not None and not self._decision.applies_update)

    def begin_batch(self, batch: Any, batch_idx: int, epoch: int | None = None) -> bool:
        """A batch is about to be trained on. Returns False if it must be dropped.

        A batch is dropped when a rollback just happened (``skip_after``) or the skip list
        names it. In a raw loop it is then not trained on; under Lightning it is trained on and
        its update suppressed.
        """
        if epoch is not None:
            self._epoch = epoch
        self._since_end.add("batch")
        if batch_idx >= self._epoch_batches:
            self._epoch_batches = batch_idx + 1
        rollback = self.config.guard.rollback
        if rollback:
            if self._drop(batch, batch_idx) and not self._keep_batches:
                return False
            self._step_batches.append((batch_idx, batch))
        self._batch, self._batch_idx = batch, batch_idx
        if not self._losses:  # first micro-batch of this optimizer step
            if rollback and len(self.ring) == 0:
                self._take_snapshot(self.step)  # something to return to from the very start
            if rollback:
                self._running_stats.keep()  # put back if the update is withheld
            # RNG states only matter to a replay; copying them is the dearest part of this hook.
            self._rng = self._capture_rng() if self.replay_available and self.config.record.localize_nonfinite \
                else None
            self._attn_sampled = self.attention.start(self.step) or self._attn_sampled
        self._samples += _batch_size(batch)
        return True

    def _capture_rng(self) -> RngState:
        if self._cuda_rng is None:
            self._cuda_rng = cuda_devices_of(itertools.chain(self.model.parameters(), self.model.buffers()))
        return capture_rng(cuda=self._cuda_rng)

    def add_loss(self, loss: torch.Tensor) -> None:
        """Accumulate the (detached) loss of a micro-batch of the current optimizer step.

        Raises:
            TypeError: ``loss`` is not a tensor (e.g. ``loss.item()``).
            ValueError: ``loss`` is not a scalar (e.g. per-sample losses).
        """
        if not isinstance(loss, torch.Tensor):
            raise TypeError(f"sentinel: the loss must be this step's loss tensor, got {type(loss).__name__}: "
                            "pass the tensor you called backward() on, not loss.item()")
        if loss.numel() != 1:
            raise ValueError(f"sentinel: the loss must be a scalar, got shape {tuple(loss.shape)}: pass the "
                             "reduced loss you called backward() on (e.g. losses.mean())")
        self._losses.append(loss.detach())
        if self.attention.armed:  # the forward is over: disarm before backward runs
            self._attn_values = self.attention.stop()

    def rescale_loss(self, factor: float) -> None:
        """Multiply the losses :meth:`add_loss` took for this step by ``factor``: for a framework
        that divides each micro-batch's loss by a window's length the step's window did not have
        (Lightning's last, shorter accumulation window of an epoch)."""
        self._losses = [loss * factor for loss in self._losses]

    def measure(self, replay: Callable[[], torch.Tensor] | None = None,
                optimizer: torch.optim.Optimizer | None = None) -> bool:
        """Read gradients, AMP state and attention in one host transfer; judge the step.

        Called once per optimizer step, after unscale and before the update. The detectors
        and the guard's decision run here, so a bad update can be withheld.

        Returns:
            True when this step's update must not be applied (its gradients are then None).
        """
        rec = self.config.record
        grad_norms = self._probe_updated_params()
        # The step's metrics: keys[i] names tensors[i] (0-d), or one entry each of a 1-D tensor.
        keys: list[str] = []
        tensors: list[torch.Tensor] = []
        losses = self._losses
        if losses:
            keys.append(metrics.LOSS)
            tensors.append(losses[0].float() if len(losses) == 1 else
                           torch.stack([l.float().reshape(()) for l in losses]).sum())
        sharded = self.world_size > 1 and grad_norms.sharded
        per_tensor = grad_norms.tensor_norms(distributed.all_reduce_sum if sharded else None)
        # Per-module norms only on the steps that record them; a flagged step adds them in _record.
        per_module = rec.grad_norm_depth != 0 and self.step % rec.module_every == 0
        self._grad_per_tensor = None if per_module or not grad_norms.group_names else per_tensor
        if per_module:
            keys += grad_norms.keys()
            tensors.append(grad_norms.norms(per_tensor))
        else:  # the usual step: the total alone, 0-d
            keys.append(metrics.GRAD_NORM_TOTAL)
            tensors.append(grad_norms.total(per_tensor))
        if self.scaler is not None:
            opt = optimizer or (self.optimizers[0] if self.optimizers else None)
            if opt is not None:
                for key, t in self.loss_scale.read(self.scaler, opt).items():
                    keys.append(key)
                    tensors.append(t)
        if self.attention.armed:
            self._attn_values = self.attention.stop()
        self._attn_recorded = bool(self._attn_values)
        for key, t in self._attn_values.items():
            keys.append(key)
            tensors.append(t.detach())
        self._attn_values = {}
        i = 0  # an LR kept as a tensor comes back with the rest (no list of groups built per step)
        for opt in self.optimizers:
            for group in opt.param_groups:
                if isinstance(group["lr"], torch.Tensor):
                    keys.append(_lr_key(i))
                    tensors.append(group["lr"].detach().reshape(()))
                i += 1
        values = _to_host(keys, tensors)  # note: the one CPU-GPU sync point of the step
        local_loss = values.get(metrics.LOSS, math.nan)
        overflow = values.get(metrics.AMP_OVERFLOW, 0.0) > 0
        grad_total = values.get(metrics.GRAD_NORM_TOTAL, 0.0)
        loss_ok = not self._losses or math.isfinite(local_loss)  # no loss given: judge the grads
        nonfinite = not (loss_ok and math.isfinite(grad_total)) and not overflow
        # Until its first clean step a GradScaler is still searching down from its initial scale
        # (2**16 by default): those overflows are its start-up, not a streak.
        self._scaler_settled = self._scaler_settled or not overflow
        self.overflow_streak = self.overflow_streak + 1 if overflow and self._scaler_settled else 0
        if overflow and not loss_ok:
            # The scaler skips this update, but its forward had already folded the non-finite
            # values (float16 overflowed before the loss) into the norm layers' running
            # statistics: put them back, as for a withheld step.
            self._running_stats.put_back()
        self._values = values
        overflow_reported = self._judge_overflow_streak(replay, local_loss)
        nonfinite = nonfinite or (overflow and self._real_nan_streak)  # not an overflow: a NaN source
        if self.world_size > 1:  # one collective: the mean loss and whether any rank went bad
            loss_mean, nonfinite = distributed.mean_loss_and_any_bad(local_loss, nonfinite)
            if metrics.LOSS in values:
                values[metrics.LOSS] = loss_mean
        if self.scaler is not None:
            self.loss_scale.update(overflow)
            values[metrics.AMP_SKIPPED_STEPS] = float(self.loss_scale.skipped_steps)
        self._nonfinite = nonfinite
        if self._suppressed is not None:  # a dropped batch: not judged, never applied
            self._withhold()
            return True
        self._signals = self.judge.judge(self.step, values.get(metrics.LOSS), values.get(metrics.GRAD_NORM_TOTAL),
                                         nonfinite=nonfinite, overflow_streak=self.overflow_streak,
                                         loss_scale=values.get(metrics.LOSS_SCALE))
        if self.judge.negative_loss_step == self.step and self.rank == 0:
            log.warning("sentinel: step %d: the loss is below zero (%.4g): the spike and divergence rules "
                        "judge a positive loss (relative changes, in log space) and cannot judge this one; "
                        "from here on its outliers are recorded but no update is withheld and nothing is "
                        "rolled back for them (non-finite steps and grad-norm outliers are still answered)",
                        self.step, values.get(metrics.LOSS, math.nan))
        decision = decide(self._signals, self.guard_state, self.config.guard, self._cooling_down())
        weights_ok = None
        if decision.action in (Action.ROLLBACK, Action.GIVE_UP) and \
                decision.reason in (Reason.LOSS_SPIKE, Reason.GRAD_NORM_SPIKE, Reason.NONFINITE):
            weights_ok = self._check_weights()  # damaged weights, or a stretch of bad data?
        elif decision.action in (Action.ROLLBACK, Action.GIVE_UP) and decision.reason is Reason.DIVERGENCE \
                and self._level_reference is not None and math.isfinite(self._level_reference_loss):
            # Damaged weights, or harder data? A batch from before the stretch against its loss then.
            then = self._level_reference_loss
            weights_ok = self._check_weights(self._level_reference, then,
                                             lambda now: self.judge.divergence.above(now, then))
        if weights_ok is not None:
            self._signals = replace(self._signals, weights_ok=weights_ok)
            decision = decide(self._signals, self.guard_state, self.config.guard, self._cooling_down())
        if self._on_restored and decision.action in (Action.ROLLBACK, Action.GIVE_UP) \
                and decision.reason in (Reason.LOSS_SPIKE, Reason.GRAD_NORM_SPIKE):
            # The streak came on the restored weights, a snapshot's that scored normally when it
            # was taken: the loss moved (a new stage of data, a new loss term, a new target), the
            # weights did not. Another rollback would restore the same weights to the same loss.
            state = replace(self.guard_state, outlier_streak=0, nonfinite_streak=0, grad_streak=0,
                            rollbacks=max(self.guard_state.rollbacks - 1, 0), returns=0)
            decision = Decision(Action.APPLY, decision.reason, state, streak=decision.streak)
            self._new_level = True
        self._decision = decision
        if nonfinite:
            # Counted from the state before this step: a rollback's decision starts a fresh state.
            streak = self.guard_state.nonfinite_streak + 1
            if streak <= 1:
                if not overflow_reported:  # else just reported, with the AMP replay
                    self._report_nonfinite(replay, local_loss)
            else:  # the weights did not change: a second replay would say nothing new
                self._event(EventKind.NONFINITE, loss=local_loss, streak=streak,
                            note="still non-finite since the first reported step")
        if decision.applies_update:
            return False
        self._withhold()
        return True

    def _withhold(self) -> None:
        """The step's update is not applied: no gradients, and the norm layers' running statistics
        as they were before its forward (a NaN batch made them NaN for every later eval)."""
        self._drop_grads()
        self._running_stats.put_back()

    def _judge_overflow_streak(self, replay: Callable[[], torch.Tensor] | None, local_loss: float) -> bool:
        """The second AMP overflow in a row (the halved scale did not end it): replay the step at
        the current scale and name the first non-finite module, a real NaN source or the float16
        range (:func:`locate_overflow`). A real NaN source makes this and the streak's next steps
        non-finite steps, answered as such, not as overflows. True when a source was reported.
        """
        if not self.overflow_streak:
            self._real_nan_streak = False
            return False
        if self.overflow_streak != min(2, self.config.guard.overflow_patience) or replay is None \
                or not self.config.record.localize_nonfinite:
            return False
        sources = self._report_nonfinite(replay, local_loss, scale=float(self.scaler.get_scale()))
        self._real_nan_streak = any(d.get("cause") == "nan_source" for d in sources)  # the same on every rank
        return True

    def _check_weights(self, reference: tuple[int, Any] | None = None, baseline: float | None = None,
                       too_high: Callable[[float], bool] | None = None) -> bool | None:
        """Re-run a batch: is its loss still normal on the current weights?

        By default the last applied batch, judged by the spike rule against its own loss when it
        was applied (a batch of harder data that scored high then is no sign of damage now), or,
        for one micro-batch of several, against the loss baseline. ``reference``, ``baseline``
        and ``too_high`` choose another batch, baseline and judgement.

        None when there is nothing to re-run, no replay, no baseline yet, or the re-run failed
        on some rank (a diagnostic never stops training; every rank still joins the collective).
        """
        self._weights_check = None
        if reference is None:
            reference, baseline = self._reference, self._reference_loss
        if baseline is None or not math.isfinite(baseline):
            baseline = self.judge.loss_baseline  # a non-finite step has none of its own: the last one
        if reference is None or self.replay_batch is None or not math.isfinite(baseline):
            return None
        batch_idx, batch = reference
        failed = False
        try:
            value = float(reference_loss(self.model, self.replay_batch(batch, batch_idx)))  # a host sync
        except Exception as err:  # noqa: BLE001 - the user's step code failed on a re-run
            log.warning("sentinel: step %d: re-running batch %d to check the weights failed (%s)",
                        self.step, batch_idx, f"{type(err).__name__}: {err}".splitlines()[0][:300])
            value, failed = math.nan, True
        if self.world_size > 1:
            value, failed = distributed.mean_loss_and_any_bad(value, failed)
        if failed:
            return None
        ok = not (too_high(value) if too_high is not None else self._loss_too_high(value, baseline))
        self._weights_check = {"batch_idx": batch_idx, "loss": value, "baseline": baseline, "weights_ok": ok}
        return ok

    def _loss_too_high(self, value: float, baseline: float) -> bool:
        """Whether the loss spike rule calls ``value`` too high against ``baseline`` (a non-finite
        value always is)."""
        from sentinel.detect.spike import above_baseline  # pandas-heavy; the detectors have loaded it

        return not math.isfinite(value) or above_baseline(value, baseline, self.config.loss_spike)

    @property
    def has_loss(self) -> bool:
        """Whether a loss was given for the optimizer step in progress (:meth:`add_loss`)."""
        return bool(self._losses)

    def discard_step(self) -> None:
        """Forget the optimizer step in progress: nothing was trained (a Lightning
        ``training_step`` that returned None, which skips backward), so nothing is judged or
        recorded, and the step counter does not move.

        Example:
            >>> if not sen.has_loss:  # doctest: +SKIP
            ...     sen.discard_step()
        """
        if self.attention.armed:
            self.attention.stop()
        self._losses, self._values, self._signals, self._decision = [], {}, None, None
        self._step_batches, self._suppressed, self._attn_values = [], None, {}
        self._since_end.clear()

    def suppress_update(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Withhold this step's update: set the gradients of ``optimizer`` (default: all) to None."""
        self._drop_grads([optimizer] if optimizer is not None else None)

    def finish_step(self, step: int | None = None) -> None:
        """The optimizer step is done: record, then carry out the guard's decision or snapshot."""
        if not self._values:  # measure() was not called (e.g. no backward this batch)
            self.measure()
        self._record(self._values, self._signals)
        decision, self._decision = self._decision, None
        try:
            if decision is not None:
                self._carry_out(decision)
            if decision is not None and decision.applies_update:
                self._maybe_snapshot()
        finally:
            self._losses, self._values, self._signals = [], {}, None
            self._step_batches, self._suppressed = [], None
            self.step = self.step + 1 if step is None else step

    def close(self) -> None:
        """Remove the optimizer and attention hooks, flush and close the run directory (idempotent)."""
        self.lr_cooldown.remove()
        self.attention.stop()  # armed still if a sampled step raised before its backward
        if self.writer is not None:
            self.writer.close()

    def __enter__(self) -> "Sentinel":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Progress to save with a checkpoint so a resumed run continues exactly."""
        return {
            "step": self.step, "rollbacks": self.rollbacks, "guard": asdict(self.guard_state),
            "cooldown_until": self.cooldown_until, "lr_factor": self.lr_cooldown.factor,
            "overflow_streak": self.overflow_streak, "last_restored_step": self.last_restored_step,
            "detectors": self._detector_states(), "loss_scale": self.loss_scale.state_dict(),
            "skiplist": list(self.skiplist.entries), "epoch": self._epoch, "skip_next": self._skip_next,
            "epoch_batches": self._epoch_batches,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (a checkpoint's). A state of the wrong shape is a
        ``ValueError`` naming what is wrong."""
        try:
            self._load_state(state)
        except (TypeError, ValueError, AttributeError, KeyError) as err:
            raise ValueError(f"sentinel: the saved state is malformed ({type(err).__name__}: {err}): pass what "
                             "Sentinel.state_dict() returned") from None

    def _load_state(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict):
            raise TypeError(f"a {type(state).__name__}, not a dict")
        skiplist = state.get("skiplist", [])
        if not isinstance(skiplist, list) or not all(isinstance(e, dict) for e in skiplist):
            raise TypeError("'skiplist' is not a list of entries")
        self._resumed = True
        self.step = int(state.get("step", 0))
        guard = dict(state.get("guard") or {})
        guard["rollbacks"] = int(state.get("rollbacks", guard.get("rollbacks", 0)))
        self.guard_state = GuardState(**{k: int(v) for k, v in guard.items()
                                         if k in GuardState.__dataclass_fields__})
        self.cooldown_until = int(state.get("cooldown_until", -1))
        self.lr_cooldown.set_factor(float(state.get("lr_factor", 1.0)))
        self.overflow_streak = int(state.get("overflow_streak", 0))
        self.last_restored_step = state.get("last_restored_step")
        self._epoch = int(state.get("epoch", 0))
        self._skip_next = int(state.get("skip_next", 0))
        # An epoch's length as the earlier process saw it: a process resumed at an epoch's start
        # knows it only after its own first epoch (the skip list's share of an epoch uses it).
        self._epoch_batches = max(self._epoch_batches, int(state.get("epoch_batches", 0)))
        if self._epoch > 0 and not self._epoch_batches:  # a state from before it was saved
            self._warned_skip_share = True
        if "detectors" in state:
            self._load_detector_states(state["detectors"])
        if "loss_scale" in state:
            self.loss_scale.load_state_dict(state["loss_scale"])
        known = {repr(sorted(e.items())) for e in self.skiplist.entries}
        for entry in skiplist:
            if repr(sorted(entry.items())) not in known:
                self.skiplist.add(entry)

    @property
    def last_metrics(self) -> dict[str, float]:
        """The metrics of the last recorded step, without its position (step, epoch, batch):
        what an adapter forwards to its framework's loggers under sentinel's keys.

        Example:
            >>> sen.last_metrics["grad_norm/total"]  # doctest: +SKIP
            1.83
        """
        return {k: v for k, v in self.last_record.items()
                if k not in (metrics.STEP, metrics.EPOCH, metrics.BATCH_IDX)}

    def describe_resume(self) -> str:
        """One line saying what a resumed run took over from its checkpoint.

        Example:
            >>> sen.load_state_dict(saved)  # doctest: +SKIP
            >>> print(sen.describe_resume())  # doctest: +SKIP
            sentinel: resumed at step 1200 with 1 rollback so far, 3 skip-list entries, LR factor 1
        """
        n_roll, n_skip = self.rollbacks, len(self.skiplist.entries)
        return (f"sentinel: resumed at step {self.step} with {n_roll} rollback{'s' * (n_roll != 1)} "
                f"so far, {n_skip} skip-list entr{'ies' if n_skip != 1 else 'y'}, "
                f"LR factor {self.lr_cooldown.factor:g}")

    # ------------------------------------------------------------------ internals
    def _drop(self, batch: Any, batch_idx: int) -> bool:
        """Whether this batch is dropped (just after a rollback, or named by the skip list)."""
        if self._skip_next > 0:  # dropped after a rollback, as PaLM skipped data
            self._skip_next -= 1
            reason = "after_rollback"
        # listed_at is the same on every rank (so is the list): the collective runs on all or none.
        elif self.skiplist.listed_at(batch_idx) and distributed.any_rank(self.skiplist.matches(batch)):
            reason = "skiplist"
        else:
            return False
        seen = _BatchSeen(self.step, self._epoch, batch_idx, BatchIdentity.of(batch))
        entries = self._gather_entries([seen], reason)
        if reason == "after_rollback":
            self._add_to_skiplist(entries)
        for entry in entries:
            self._event(EventKind.SKIP, **entry)
        if self._keep_batches:  # trained on, but its update withheld
            self._suppressed = reason
        return True

    def _carry_out(self, decision: Decision) -> None:
        """Do what the guard decided (the decision itself is :func:`decide`'s)."""
        if decision.action is Action.APPLY:
            self.guard_state = decision.state
            if decision.reason is Reason.GRAD_NORM_SPIKE and decision.streak == self.config.guard.spike_patience:
                self._accept_grad_level(decision.streak)
            if decision.reason is Reason.DIVERGENCE:  # the weights check found the weights sound
                self._accept_loss_level()
            if self._new_level:
                self._accept_new_level(decision)
            elif self._on_restored:  # the rollback cured it: the state it left is not needed
                self._return_point.drop()
            self._on_restored = False
            self._streak, self._streak_start = [], None
            if self._step_batches and not self._values.get(metrics.AMP_OVERFLOW):  # the scaler skipped it
                self._reference = self._step_batches[-1]
                alone = len(self._step_batches) == 1  # else the step's loss is not this batch's
                self._reference_loss = self._values.get(metrics.LOSS, math.nan) if alone else math.nan
                level = self.judge.verdicts[2]
                if alone and level is not None and not level.elevated:
                    self._level_reference, self._level_reference_loss = self._reference, self._reference_loss
            return
        seen = [_BatchSeen(self.step, self._epoch, idx, BatchIdentity.of(b)) for idx, b in self._step_batches]
        if self._streak_start is None:
            self._streak_start = self.step
        if decision.action is Action.SKIP_UPDATE:
            self.guard_state = decision.state
            self._streak += seen
            entries = self._gather_entries(self._culprit_micro_batches(seen), "outlier")
            if decision.reason is not Reason.GRAD_NORM_SPIKE:
                # A batch whose loss was normal is no bad data to drop again in later epochs (a
                # fixed-order loader's ragged last batch, one sample, has an outlier gradient now
                # and then and was dropped in every epoch after).
                self._add_to_skiplist(entries)
            self._event(EventKind.SKIP_STEP, **self._skip_detail(decision),
                        batches=[_short(e) for e in entries])
            return
        self.guard_state = decision.state
        # The streak's earlier batches are in the skip list already (as outliers); all are named.
        reason = "rollback" if decision.action is Action.ROLLBACK else "gave_up"
        new = self._gather_entries(seen, reason)
        self._add_to_skiplist(new)
        culprits = self._gather_entries(self._streak, reason) + new
        spike_step = self._streak_start
        onset = self.judge.divergence.open_onset
        if decision.reason is Reason.DIVERGENCE and onset is not None:
            spike_step = min(spike_step, onset)  # the state to return to is from before the stretch
        self._streak, self._streak_start = [], None
        if decision.action is Action.GIVE_UP:
            self._give_up(decision, spike_step)
        self._roll_back(decision, spike_step, culprits)

    def _accept_grad_level(self, streak: int) -> None:
        """A grad-norm streak with a normal loss is a new level, not bad batches: its withheld
        batches leave the skip list (a resumed run trains on them)."""
        if self.skiplist.discard_outliers({b.step for b in self._streak}) and self.writer is not None:
            self.writer.write_skiplist(self.skiplist.entries)
        if self.rank == 0:
            log.info("sentinel: step %d: the grad norm has been an outlier %d steps in a row with a normal "
                     "loss: a new level, not bad batches; its updates are applied again", self.step, streak)

    def _accept_loss_level(self) -> None:
        """A divergence whose weights check passed (a batch from before the stretch still scores
        the old level): the data got harder, not the model worse. No rollback: the level is the
        divergence detector's new best (the divergence event says so)."""
        verdict = self.judge.verdicts[2]
        self.judge.divergence.accept_level()
        if self.rank == 0 and verdict is not None:
            log.warning("sentinel: step %d: the loss has stayed above its best level %.4g since step %s "
                        "(now %.4g), but a batch from before still scores the old level on these weights: "
                        "the data got harder, not the model worse; the new level is accepted, no rollback",
                        self.step, verdict.best, verdict.onset, verdict.level)

    def _accept_new_level(self, decision: Decision) -> None:
        """The outlier streak that came on the restored weights is the loss's new level: the
        detectors take it as their baseline, its batches leave the skip list, the rollback's
        learning-rate cool-down ends, the rollback is not counted toward the give-up, and training
        returns to the state the rollback left (the steps in between were no damage)."""
        self._new_level = False
        loss_v = self.judge.verdicts[0]
        self.judge.loss.rebase(decision.streak)
        self.judge.grad.rebase(decision.streak)  # the gradient's scale moves with the loss's
        self.judge.divergence.rebase()
        self.cooldown_until = self.step  # a later rollback is no return of this one
        self.lr_cooldown.set_factor(1.0)
        returned = self._return_to_point()
        if self.skiplist.discard_outliers({b.step for b in self._streak}) and self.writer is not None:
            self.writer.write_skiplist(self.skiplist.entries)
        self._event(EventKind.NEW_LEVEL, reason=decision.reason.value, onset=self._rolled_back_for,
                    restored_step=self.last_restored_step,
                    streak=decision.streak, loss=self._values.get(metrics.LOSS, math.nan),
                    loss_baseline=loss_v.baseline if loss_v is not None else math.nan,
                    rollbacks=self.rollbacks, returned_to=returned, **self._take_weights_check())

    def _training_state(self) -> dict[str, Any]:
        """What a snapshot copies and restores, as :class:`SnapshotRing` takes it."""
        return dict(model=self.model, optimizers=self.optimizers, schedulers=self._restored, scaler=self.scaler)

    def _return_to_point(self) -> int | None:
        """Back to the state the last rollback left (the step it was kept at), or None.

        Only when that state scores this step's batch no worse than the restored weights did
        (:meth:`ReturnPoint.go_back`); without a batch to re-run, the restored weights stay.
        """
        loss_now = self._values.get(metrics.LOSS, math.nan)
        if self.replay_batch is None or len(self._step_batches) != 1 or not math.isfinite(loss_now):
            self._return_point.drop()
            return None
        agree = distributed.min_and_max if self.world_size > 1 else None
        # The same batch on the state before the rollback, against its loss on the restored weights.
        return self._return_point.go_back(self.step, self.ring,
                                          lambda: self._check_weights(self._step_batches[0], loss_now),
                                          **self._training_state(), agree=agree)

    def _culprit_micro_batches(self, seen: list[_BatchSeen]) -> list[_BatchSeen]:
        """Of an outlier step's micro-batches (gradient accumulation), those whose own loss is
        above the spike rule: only they go to the skip list, not the healthy ones beside them.
        All of them when no single one stands out (a grad-norm spike, or a step that is high
        only as a whole)."""
        loss_v = self.judge.verdicts[0]
        if len(seen) < 2 or len(self._losses) != len(seen) or loss_v is None \
                or not math.isfinite(loss_v.baseline):
            return seen
        # Each micro-batch's loss was divided by their number (the step's loss is their sum).
        own = [float(l) * len(seen) for l in self._losses]  # a host read, on outlier steps only
        culprits = [b for b, v in zip(seen, own) if self._loss_too_high(v, loss_v.baseline)]
        return culprits or seen

    def _skip_detail(self, decision: Decision) -> dict[str, Any]:
        loss_v, grad_v, _ = self.judge.verdicts
        return {"reason": decision.reason.value, "streak": decision.streak, **self._take_weights_check(),
                "loss": self._values.get(metrics.LOSS),
                "grad_norm": self._values.get(metrics.GRAD_NORM_TOTAL),
                "loss_score": loss_v.score if loss_v is not None else None,
                "loss_baseline": loss_v.baseline if loss_v is not None else None,
                "grad_norm_score": grad_v.score if grad_v is not None else None}

    def _take_weights_check(self) -> dict[str, Any]:
        """The weights check of this step as event fields (none when it ran no check), consumed."""
        check, self._weights_check = self._weights_check, None
        return {"weights_check": check} if check is not None else {}

    def _roll_back(self, decision: Decision, spike_step: int, culprits: list[dict[str, Any]]) -> None:
        g = self.config.guard
        snapshot = self._good_snapshot(spike_step)
        if snapshot is None:
            log.warning("step %d: %s but no snapshot to roll back to yet; going on", self.step,
                        decision.reason.value)
            self._event(EventKind.ROLLBACK, spike_step=spike_step, reason=decision.reason.value,
                        restored_step=None, skipped=[_short(e) for e in culprits],
                        note="no snapshot yet: nothing restored")
            return
        if decision.reason in (Reason.LOSS_SPIKE, Reason.GRAD_NORM_SPIKE, Reason.DIVERGENCE):
            self._return_point.keep(self.step, self.ring, **self._training_state())
        try:
            restored = self._restore(snapshot)
        except SnapshotUnusable as err:  # every snapshot file from there back is damaged or gone
            self._give_up(decision, spike_step, unusable=err)
        seen = self._batch is not None  # else the loop bypasses begin_batch: nothing can be dropped
        self._skip_next = g.skip_after if seen else 0
        self._on_restored, self._rolled_back_for = True, spike_step
        # Long enough to cover the stretch replayed from the snapshot (a schedule's LR surge
        # comes back at the same distance), and at least ``cooldown``.
        self.cooldown_until = self.step + max(g.cooldown, 2 * (self.step - restored))
        self.lr_cooldown.set_factor(decision.lr_scale)
        check = self._take_weights_check()
        self._reference = None  # its effect was just undone (a batch from before the stretch stays)
        self._event(EventKind.ROLLBACK, spike_step=spike_step, reason=decision.reason.value,
                    restored_step=restored, rollback=self.rollbacks, lr_scale=decision.lr_scale,
                    skip_after=self._skip_next, skipped=[_short(e) for e in culprits], **check,
                    **({} if seen else {"note": "no batch dropped: the loop does not pass its batches "
                                                "through sen.batches()"}))

    def _give_up(self, decision: Decision, spike_step: int, unusable: SnapshotUnusable | None = None) -> None:
        snapshot = None if unusable is not None else self._good_snapshot(spike_step)
        restored = None
        if snapshot is not None:
            try:
                restored = self._restore(snapshot)
            except SnapshotUnusable as err:
                unusable = err
        kept = f"the weights of step {restored} are restored" if restored is not None else \
            f"no snapshot could be restored ({unusable})" if unusable is not None else \
            "no snapshot was left to restore"
        returns, n = self.guard_state.returns, self.rollbacks
        lowered = f", lowered the learning rate to x{self.config.guard.lr_factor ** returns:g}" if returns else ""
        if n:
            tried = (f"after {n} rollback{'s' * (n != 1)}: the run is still bad ({decision.reason.value}) after "
                     f"the guard withheld the outlier updates, rolled back and dropped the culprit batches{lowered}")
        else:
            tried = f"the run needed a rollback ({decision.reason.value}) and none was possible"
        fix = "Check snapshot_dir (its files could not be read) and resume from your last checkpoint" \
            if unusable is not None else \
            f"Lower the learning rate, inspect the batches in {self.log_dir}/skiplist.json, or raise max_rollbacks"
        msg = f"sentinel gave up at step {self.step} {tried}; {kept}. {fix}"
        self._event(EventKind.GAVE_UP, reason=decision.reason.value, rollbacks=self.rollbacks,
                    restored_step=restored, message=msg)
        self.close()
        raise TrainingGaveUp(msg)

    def _good_snapshot(self, first_bad_step: int) -> Any:
        # Snapshot k holds the state after k steps. The first bad step's weights may already carry
        # the damage of a few updates before it: trust only states from before ``limit``.
        limit = first_bad_step - self.config.guard.min_rollback_distance + 1
        self.ring.mark_bad_after(limit)
        return self.ring.newest_good_before(limit)

    def _restore(self, snapshot: Any) -> int:
        """Restore ``snapshot`` (or, when its file is unusable, the newest older one that is) and
        return the step actually restored; raises SnapshotUnusable with nothing changed."""
        live_scaler = self.scaler.state_dict() if self.scaler is not None else None
        # Every rank restores the same step, the newest one every rank's files still hold.
        agree = distributed.min_and_max if self.world_size > 1 else None
        extra = self.ring.restore(snapshot, **self._training_state(), agree=agree)
        snapshot = self.ring.last_restored
        self.ring.drop_after(snapshot.step)
        self._load_detector_states(extra.get(_DETECTORS, {}))
        self.overflow_streak = int(extra.get(_OVERFLOW_STREAK, 0))
        if live_scaler is not None and not extra.get(_SCALER_SETTLED, True):
            # A snapshot from before the scaler found its range would send it back to its
            # initial scale and through the same overflows: keep the scale it has found.
            self.scaler.load_state_dict(live_scaler)
        self.last_restored_step = snapshot.step
        return snapshot.step

    def _gather_entries(self, seen: list[_BatchSeen], reason: str) -> list[dict[str, Any]]:
        rollback = self.rollbacks if reason in ("rollback", "after_rollback", "gave_up") else 0
        local = [b.entry(reason, rollback, self.rank) for b in seen]
        return _concat(distributed.gather(local)) if self.world_size > 1 else local

    def _add_to_skiplist(self, entries: list[dict[str, Any]]) -> None:
        if not entries:
            return
        for entry in entries:
            self.skiplist.add(entry)
        if self.writer is not None:
            self.writer.write_skiplist(self.skiplist.entries)
        share = len(self.skiplist) / max(self._epoch_batches, 1)
        if not self._warned_skip_share and self._epoch > 0 and share > self.config.guard.skip_share_warning:
            self._warned_skip_share = True  # an epoch's length is only known after the first
            if self.rank == 0:
                log.warning("sentinel: the skip list names %d batches, %.0f%% of an epoch of %d: more "
                            "than single bad batches; check the data and the learning rate",
                            len(self.skiplist), 100 * share, self._epoch_batches)

    def _drop_grads(self, optimizers: Sequence[torch.optim.Optimizer] | None = None) -> None:
        for opt in optimizers or self.optimizers:
            for group in opt.param_groups:
                for p in group["params"]:
                    p.grad = None

    def _record(self, values: dict[str, float], signals: StepSignals | None) -> None:
        now = time.perf_counter()
        # per-module grad norms only where measure() read them
        record: dict[str, Any] = {metrics.STEP: self.step, metrics.EPOCH: self._epoch,
                                  metrics.BATCH_IDX: self._batch_idx, **values}
        flagged = signals is not None and (signals.loss_spike or signals.grad_norm_spike or signals.nonfinite)
        if flagged and self._grad_per_tensor is not None:  # a spike gets its per-module picture
            norms = self.grad_norms.norms(self._grad_per_tensor).cpu().tolist()  # a host read, flagged steps only
            record.update(zip(self.grad_norms.keys()[1:], norms[1:]))
        # A tensor LR was read in measure(), with the step's other values (the only LR keys in
        # them): float() of it here would be a second device-to-host read.
        scheduled = [values[key] if (key := _lr_key(i)) in values else float(g["lr"])
                     for i, g in enumerate(self._param_groups())]
        used = self.lr_cooldown.take_used()  # the cool-down's lowered LRs, where it lowered them
        factor = self.lr_cooldown.factor
        lrs = scheduled if used is None else \
            [scheduled[i] * factor if isinstance(lr, torch.Tensor) else lr for i, lr in enumerate(used)]
        for i, lr in enumerate(lrs):
            record[_lr_key(i)] = lr
        if now > self._t_last:
            record[metrics.SAMPLES_PER_SEC] = self._samples / (now - self._t_last)
        self._t_last, self._samples = now, 0
        self.last_record = record
        if self.writer is None:
            return
        self.writer.write_step(record)
        self._mark_start()
        if signals is not None:
            self._detection_events(values, signals)
        if self._attn_recorded:
            self._watch_entropy(values)
        if values.get(metrics.AMP_OVERFLOW, 0.0) > 0:
            self._event(EventKind.OVERFLOW, loss_scale=values.get(metrics.LOSS_SCALE),
                        streak=self.overflow_streak)
        reason = self.attention.no_attention_reason  # None until a sampled step saw no attention
        if reason is not None and not self._reported_no_attention:
            self._reported_no_attention = True
            log.warning("sentinel: %s", reason)
            self.writer.update_meta(attention=reason)

    def _detection_events(self, values: dict[str, float], signals: StepSignals) -> None:
        loss_v, grad_v, div_v = self.judge.verdicts
        if signals.loss_spike:
            self._event(EventKind.SPIKE, metric=metrics.LOSS, value=values.get(metrics.LOSS),
                        baseline=loss_v.baseline, score=loss_v.score)
        if signals.grad_norm_spike:
            self._event(EventKind.SPIKE, metric=metrics.GRAD_NORM_TOTAL,
                        value=values.get(metrics.GRAD_NORM_TOTAL),
                        baseline=grad_v.baseline, score=grad_v.score)
        if signals.divergence:
            decision = self._decision
            accepted = decision is not None and decision.action is Action.APPLY and \
                decision.reason is Reason.DIVERGENCE
            self._event(EventKind.DIVERGENCE, metric=metrics.LOSS, value=values.get(metrics.LOSS),
                        onset=div_v.onset, level=div_v.level, best=div_v.best,
                        **({"accepted": True, **self._take_weights_check()} if accepted else {}))

    def _watch_entropy(self, values: dict[str, float]) -> None:
        prefix = metrics.ATTN_ENTROPY + "/"
        for key, value in values.items():
            if key.startswith(prefix) and math.isfinite(value) and \
                    self.entropy_watch.update(key[len(prefix):], value):
                self._event(EventKind.ENTROPY_COLLAPSE, module=key[len(prefix):], entropy=value,
                            logit_max=values.get(metrics.metric_key(metrics.ATTN_LOGIT_MAX, key[len(prefix):])))

    def _report_nonfinite(self, replay: Callable[[], torch.Tensor] | None, local_loss: float,
                          scale: float | None = None) -> list[dict[str, Any]]:
        """Name where the NaN/Inf came from: the input batch, else a replay with hooks armed.

        With ``scale`` (an AMP overflow streak) the replay runs at that loss scale and the source
        says whether it is a real NaN source or the float16 range. Under DDP every rank replays
        its own batch on its own (unsynchronised) module, and only ranks that found something
        report; rank 0 writes them all, each with its rank. A replay that fails is reported,
        never raised: a diagnostic must not stop training. Returns what every rank reported.
        """
        detail: dict[str, Any] = {"loss": local_loss,
                                  "grad_norm": self._values.get(metrics.GRAD_NORM_TOTAL)}
        if scale is not None:
            detail.update(loss_scale=scale, overflow_streak=self.overflow_streak)
        source, failure = None, None
        if replay is not None and self.config.record.localize_nonfinite:
            try:
                source = locate_nonfinite(self.model, replay, batch=self._batch, rng_state=self._rng) \
                    if scale is None else \
                    locate_overflow(self.model, replay, scale, batch=self._batch, rng_state=self._rng)
            except Exception as err:  # noqa: BLE001 - the user's own step code failed in the replay
                failure = f"{type(err).__name__}: {err}".splitlines()[0][:300]
                log.warning("sentinel: step %d: the NaN/Inf replay failed (%s); source not localised, "
                            "training goes on", self.step, failure)
        if source is None and self._batch is not None:
            found = find_nonfinite_input(self._batch)
            if found is not None:
                detail.update(module="<input>", phase="input", tensor_role=found[0])
        if source is not None:
            detail.update(source.to_dict())
        elif "module" not in detail:
            if failure is not None:
                detail.update(module=None, phase=None, note=f"source not localised: {failure}")
            elif self.world_size > 1 and math.isfinite(local_loss):
                detail = None  # another rank's fault, reached us through the gradient all-reduce
            elif scale is not None:
                detail = None  # finite at this scale: an overflow the scaler's halving handles
            else:
                detail.update(module=None, phase=None,
                              note="source not localised (transient, or no replay: pass loss_fn=)")
        if detail is not None:
            detail["rank"] = self.rank
        sources = [d for d in distributed.gather(detail) if d is not None]
        if not sources and scale is not None:
            return []  # nothing non-finite to name: the overflow events say it all
        if not sources:
            sources = [{"module": None, "phase": None, "rank": None,
                        "note": "source not localised: every rank replayed its batch finite"}]
        for d in sources:
            self._event(EventKind.NONFINITE, **d)
        return sources

    def _maybe_snapshot(self) -> None:
        done = self.step + 1  # optimizer steps completed, the ring's step convention
        if not self.config.guard.rollback or self._nonfinite or not self.ring.due(done):
            return
        self._take_snapshot(done)

    def _take_snapshot(self, done: int) -> None:
        # While the loss level stays raised, the last snapshot from before that began is kept:
        # a divergence is only called ``patience`` steps in, further back than the ring reaches.
        onset = self.judge.divergence.open_onset
        hold = None if onset is None else onset - self.config.guard.min_rollback_distance + 1
        try:
            self.ring.take(done, **self._training_state(),
                           extra={_DETECTORS: self._detector_states(),
                                  _OVERFLOW_STREAK: self.overflow_streak,
                                  _SCALER_SETTLED: self._scaler_settled}, hold_before=hold)
        except SnapshotTooLarge as err:
            if self.config.guard.snapshot_max_bytes is not None:
                bound = f"snapshot_max_bytes={err.max_bytes} ({format_size(err.max_bytes)})"
            else:
                bound = (f"the default bound of {format_size(err.max_bytes)} (a quarter of this machine's "
                         "memory, shared by its processes)")
            if err.directory is None:
                fix = "pass snapshot_dir=... to keep snapshots on disk, a larger snapshot_max_bytes, or rollback=False"
            else:
                fix = (f"snapshots already go to snapshot_dir={err.directory!r}: pass a larger snapshot_max_bytes "
                       "(or None: snapshots on disk are then bounded by snapshot_keep alone), or rollback=False")
            raise ValueError(
                f"sentinel: one snapshot of the training state (model, optimizer, scheduler, scaler) "
                f"needs {format_size(err.nbytes)}, more than {bound}: {fix}") from None
        except OSError as err:  # snapshot_dir refused the file (full disk): keep the older ones
            if not self._snapshot_failing:
                newest = max((snap.step for snap in self.ring.snapshots), default=None)
                log.error("sentinel: step %d: %s; training goes on and a rollback returns to the newest "
                          "snapshot kept (step %s); the next snapshot is tried on schedule",
                          self.step, err, newest)
            self._snapshot_failing = True
            return
        else:
            self._snapshot_failing = False

    def _cooling_down(self) -> bool:
        return self.last_restored_step is not None and self.step <= self.cooldown_until

    def _replay_fn(self) -> Callable[[], torch.Tensor] | None:
        if self.loss_fn is None or self._batch is None:
            return None
        model, batch, loss_fn = self.model, self._batch, self.loss_fn
        return lambda: loss_fn(model, batch)

    def _mark_start(self) -> None:
        """The process's ``start`` event, before anything else it writes: the analyzer tells a resumed
        process's history from the earlier one by it (an event before it at a later step is the
        earlier process's abandoned trajectory)."""
        if not self._started and self.writer is not None:
            self._started = True
            self.writer.write_event(make_event(EventKind.START, self.step, resumed=self._resumed))

    def _event(self, kind: EventKind, **detail: Any) -> None:
        step = detail.pop("step", self.step)
        self._mark_start()
        if self.writer is not None:
            self.writer.write_event(make_event(kind, step, **detail))
        message = describe(kind, detail, self.config.guard.max_rollbacks)
        if message is not None and self.rank == 0:
            log.warning("sentinel: step %d: %s", step, message)

    def _param_groups(self) -> list[dict[str, Any]]:
        return [g for opt in self.optimizers for g in opt.param_groups]

    def _updated_params(self) -> list[torch.Tensor]:
        return [p for group in self._param_groups() for p in group["params"]]

    def _probe_updated_params(self) -> GradNormProbe:
        """The grad-norm probe over the parameters the optimizers update (a parameter no optimizer
        steps keeps gradients that pile up where nothing zeroes them), built again when their
        number changes (``add_param_group``: a backbone unfrozen later). Per step, one count over
        the parameter groups."""
        count = sum(len(group["params"]) for opt in self.optimizers for group in opt.param_groups)
        if count != self._probed_params:
            self.grad_norms = GradNormProbe(self.model, depth=self.config.record.grad_norm_depth,
                                            params=self._updated_params() if count else None)
            self._probed_params = count
        return self.grad_norms

    def _detector_states(self) -> dict[str, Any]:
        return {**self.judge.state_dict(), "entropy": self.entropy_watch.state_dict()}

    def _load_detector_states(self, states: dict[str, Any]) -> None:
        self.judge.load_state_dict(states)
        if "entropy" in states:
            self.entropy_watch.load_state_dict(states["entropy"])

    def _meta(self, extra: dict[str, Any] | None) -> dict[str, Any]:
        n_params = sum(p.numel() for p in self.model.parameters())
        meta = {"config": self.config.to_dict(), "world_size": self.world_size,
                "model": {"class": type(self.model).__name__, "parameters": n_params,
                          "grad_norm_groups": list(self.grad_norms.group_names)}}
        meta.update(extra or {})
        return meta


def _short(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: entry[k] for k in ("step", "epoch", "batch_idx", "rank") if k in entry}


def _warn_not_updated(model: torch.nn.Module, updated: list[torch.Tensor]) -> None:
    """Say once that some of the model's parameters take gradients no optimizer applies: their
    gradients add up step after step where nothing zeroes them (an optimizer built over adapter
    weights alone, the base left trainable), so they are left out of the grad norm."""
    ids = {id(p) for p in updated}
    left = [name for name, p in model.named_parameters() if p.requires_grad and id(p) not in ids]
    if left and len(left) < len(list(model.parameters())):
        log.warning("sentinel: %d parameter tensor(s) of the model take gradients but no optimizer updates them "
                    "(e.g. %r): the grad norm leaves them out (their gradients add up where nothing zeroes "
                    "them); if they are frozen, set requires_grad=False on them (it also saves the memory "
                    "of their gradients)", len(left), left[0])


def _lr_key(group: int) -> str:
    """The metric key of a parameter group's learning rate: ``lr``, then ``lr/pg1``, ..."""
    return metrics.LR if group == 0 else f"{metrics.LR}/pg{group}"


def _to_host(keys: list[str], tensors: list[torch.Tensor]) -> dict[str, float]:
    """A step's metrics to Python floats in one device-to-host transfer.

    ``keys`` name the entries of ``tensors`` in order: one key for a 0-d tensor, one per entry
    of a 1-D tensor. The tensors may be on any devices (gathered onto the first one's).
    """
    if not tensors:
        return {}
    first = tensors[0]
    device = first.device
    if len(tensors) == 1:
        flat = first if first.dim() == 1 else first.reshape(1)
    elif all(t.dim() == 0 and t.device == device for t in tensors):  # the usual step: one stack
        flat = torch.stack(tensors)
    else:
        flat = torch.cat([(t if t.dim() == 1 else t.reshape(1)) if t.device == device else t.reshape(-1).to(device)
                          for t in tensors])
    # stack and cat promote to the widest dtype; tolist() turns float32 into the same Python
    # floats as double()
    return dict(zip(keys, flat.cpu().tolist()))


def _batch_size(batch: Any) -> int:
    """The samples in a batch: its first tensor's first dimension (a tuple's, a dict's, a
    dataclass's), else the length of a list of plain items (a batch of strings)."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if isinstance(batch, dict):
        items = list(batch.values())
    elif isinstance(batch, (list, tuple)):
        items = batch
    else:
        fields = batch_fields(batch)
        if fields is None:
            return 0
        items = list(fields.values())
    for item in items:
        if isinstance(item, torch.Tensor):
            return int(item.shape[0]) if item.dim() else 1
    for item in items:
        if isinstance(item, (dict, list, tuple)) or batch_fields(item) is not None:
            return _batch_size(item)
    return len(items) if isinstance(batch, (list, tuple)) else 0


def _concat(parts: list[list[Any]]) -> list[Any]:
    return [item for part in parts for item in part]
