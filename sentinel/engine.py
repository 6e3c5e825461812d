"""``Sentinel``: records a training run, detects spikes, rolls back and skips bad batches.

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
        sen.end_step()                   # record, detect, roll back or snapshot
    sen.close()
"""

from __future__ import annotations

import collections
import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from sentinel import distributed, metrics
from sentinel.config import SentinelConfig
from sentinel.detect.entropy import EntropyWatch
from sentinel.events import EventKind, describe, make_event
from sentinel.guard.batch_id import BatchIdentity
from sentinel.guard.lr_cooldown import LRCooldown
from sentinel.guard.policy import Action, Reason, StepSignals, bad_step_reason, decide
from sentinel.guard.skiplist import SkipList
from sentinel.guard.snapshot import SnapshotConfig, SnapshotRing, SnapshotTooLarge
from sentinel.probes.attention import AttentionProbe
from sentinel.probes.grad_norm import GradNormProbe
from sentinel.probes.loss_scale import LossScaleProbe
from sentinel.probes.nonfinite import find_nonfinite_input, locate_nonfinite
from sentinel.rng import RngState, capture_rng
from sentinel.store import RunWriter, read_skiplist

log = logging.getLogger(__name__)

# Keys of the snapshot "extra" dict (restored with the weights).
_DETECTORS = "detectors"
_OVERFLOW_STREAK = "overflow_streak"
_SCALER_SETTLED = "scaler_settled"


class TrainingGaveUp(RuntimeError):
    """Raised when the guard has rolled back ``max_rollbacks`` times and the run is still bad."""


@dataclass
class _BatchSeen:
    """A batch the guard may have to skip: where it came in and what names it (not the batch)."""

    step: int
    epoch: int
    batch_idx: int
    identity: BatchIdentity = field(repr=False)

    def entry(self, rollback: int, rank: int) -> dict[str, Any]:
        return {"step": self.step, "epoch": self.epoch, "batch_idx": self.batch_idx,
                "rollback": rollback, "rank": rank, **self.identity.to_dict()}


@dataclass
class _Window:
    """Batches whose effect is being discarded; the restore happens when it closes."""

    target_step: int  # step of the snapshot restored when the window closes
    spike_step: int
    reason: Reason | None  # None: a batch of the skip list came up again (not a rollback)
    remaining: int  # batches still to consume (and discard) before restoring
    snapshot: Any = None  # a one-off snapshot (resume skips), else the ring's

    @property
    def rollback(self) -> bool:
        return self.reason is not None


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

    Example:
        >>> sen = Sentinel(model, opt, log_dir="logs/run1")   # doctest: +SKIP
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
        _deferred_restore: bool = False,
        **options: Any,
    ) -> None:
        if config is not None and options:
            raise TypeError("pass either config= or keyword options, not both")
        self.config = config if config is not None else SentinelConfig.from_options(**options)
        self.model = model
        self.optimizers = _as_list(optimizer)
        self.schedulers = _as_list(scheduler)
        self.scaler = scaler
        self.loss_fn = loss_fn
        # Whether a non-finite step can be replayed to localise it (an adapter with its own
        # replay, such as the Lightning callback, sets this).
        self.replay_available = loss_fn is not None
        self.log_dir = str(log_dir)
        self.rank = distributed.rank() if rank is None else rank
        self.world_size = distributed.world_size()
        # Lightning cannot drop a batch from its loop: the window's batches are trained on and
        # their effect discarded by restoring when the window closes. A raw loop restores at once.
        self._deferred = _deferred_restore
        if self.config.guard.rollback and not self.optimizers:
            raise ValueError("rollback needs the optimizer: pass optimizer=..., or rollback=False")

        rec = self.config.record
        self.grad_norms = GradNormProbe(model, depth=rec.grad_norm_depth)
        self.loss_scale = LossScaleProbe()
        self.attention = AttentionProbe(model, every=rec.attention_every)
        self.loss_detector = self.config.make_loss_detector()
        self.grad_detector = self.config.make_grad_detector()
        self.divergence_detector = self.config.make_divergence_detector()
        self.entropy_watch = EntropyWatch()
        g = self.config.guard
        self.ring = SnapshotRing(SnapshotConfig(every=g.snapshot_every, keep=g.snapshot_keep,
                                                max_bytes=_snapshot_budget(g.snapshot_max_bytes, g.snapshot_dir),
                                                directory=g.snapshot_dir))
        # Only rank 0 writes; an unwritable log_dir fails here, before training starts.
        self.writer = RunWriter(self.log_dir, meta=self._meta(meta), tensorboard=rec.tensorboard) \
            if self.rank == 0 else None
        self.skiplist = SkipList(read_skiplist(self.log_dir))

        # Progress (saved by state_dict).
        self.step = 0
        self.rollbacks = 0
        self.cooldown_until = -1
        self.overflow_streak = 0
        self.last_restored_step: int | None = None
        # Per-step scratch.
        # Batches since the oldest snapshot held: what a rollback discards. Pruned at each snapshot.
        self._seen: collections.deque[_BatchSeen] = collections.deque()
        self._batch: Any = None
        self._batch_idx = 0
        self._epoch = 0
        self._rng: RngState | None = None
        self._values: dict[str, float] = {}
        self._losses: list[torch.Tensor] = []
        self._window: _Window | None = None
        self.lr_cooldown = LRCooldown(self.optimizers, g.lr_factor, active=self._cooling_down)
        self._t_last = time.perf_counter()
        self._samples = 0
        self._reported_no_attention = False
        self._nonfinite = False
        self._diverged = False
        self._scaler_settled = False  # the AMP scaler has had one step without overflow
        self._nonfinite_streak = 0  # consecutive non-finite steps
        self._verdicts: tuple[Any, Any, Any] = (None, None, None)
        self.last_record: dict[str, Any] = {}  # what the last step wrote (adapters forward it)
        self._skip_next = 0  # raw loop: batches still to drop after a rollback
        self._attn_sampled = False  # has any step been sampled for attention yet
        self._attn_values: dict[str, torch.Tensor] = {}

    # ------------------------------------------------------------------ raw-loop API
    def batches(self, loader: Iterable[Any]) -> Iterator[Any]:
        """Yield the loader's batches, dropping skipped ones, and arm the probes for each.

        Example:
            >>> for batch in sen.batches(loader): ...   # doctest: +SKIP
        """
        for batch_idx, batch in enumerate(loader):
            if self._skip_next > 0:  # dropped after a rollback, as PaLM skipped data
                self._skip_next -= 1
                entry = _BatchSeen(self.step, self._epoch, batch_idx,
                                   BatchIdentity.of(batch)).entry(self.rollbacks, self.rank)
                self.skiplist.add(entry)
                self._event(EventKind.SKIP, reason="rollback", **entry)
                if self.writer is not None:
                    self.writer.write_skiplist(self.skiplist.entries)
                continue
            if not self.begin_batch(batch, batch_idx):
                continue
            yield batch
        self._epoch += 1

    def check(self, loss: torch.Tensor | None = None) -> bool:
        """Measure the step after backward (and ``scaler.unscale_``), before ``optimizer.step``.

        Args:
            loss: the loss this step backpropagated. With gradient accumulation, pass each
                micro-batch's (already divided) loss to :meth:`add_loss` after its backward
                instead, and call ``check()`` without one before the update.

        Returns:
            False when the update must not be applied (non-finite or a rollback is coming).
        """
        if loss is not None:
            self.add_loss(loss)
        bad = self.measure(replay=self._replay_fn())
        return not bad

    def end_step(self) -> None:
        """After ``optimizer.step()``: record, detect, roll back or take a snapshot."""
        self.finish_step()

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
    def pending_restore(self) -> int | None:
        """The snapshot step a deferred rollback will restore, while its batches are discarded."""
        return None if self._window is None else self._window.target_step

    def begin_batch(self, batch: Any, batch_idx: int, epoch: int | None = None) -> bool:
        """A batch is about to be trained on. Returns False if it must be skipped.

        In a raw loop a skipped batch is simply not trained on; under Lightning (deferred mode)
        it is trained on and its effect discarded (see ``_Window``).
        """
        if epoch is not None:
            self._epoch = epoch
        rollback = self.config.guard.rollback
        if rollback and self.skiplist and distributed.any_rank(self.skiplist.matches(batch)):
            self._skip_listed(_BatchSeen(self.step, self._epoch, batch_idx, BatchIdentity.of(batch)))
            if not self._deferred:
                return False
        if rollback:  # only a rollback ever needs to name these batches
            self._seen.append(_BatchSeen(self.step, self._epoch, batch_idx, BatchIdentity.of(batch)))
        self._batch, self._batch_idx = batch, batch_idx
        if self._window is not None and self._window.remaining > 0:
            self._window.remaining -= 1
        if not self._losses:  # first micro-batch of this optimizer step
            if len(self.ring) == 0 and rollback:
                self._take_snapshot(self.step)  # something to return to from the very start
            # RNG states only matter to a replay; copying them is the dearest part of this hook.
            self._rng = capture_rng() if self.replay_available and self.config.record.localize_nonfinite \
                else None
            self._attn_sampled = self.attention.start(self.step) or self._attn_sampled
        self._samples += _batch_size(batch)
        return True

    def add_loss(self, loss: torch.Tensor) -> None:
        """Accumulate the (detached) loss of a micro-batch of the current optimizer step."""
        self._losses.append(loss.detach())
        if self.attention.armed:  # the forward is over: disarm before backward runs
            self._attn_values = self.attention.stop()

    def measure(self, replay: Callable[[], torch.Tensor] | None = None,
                optimizer: torch.optim.Optimizer | None = None) -> bool:
        """Read gradients, AMP state and attention in one host transfer; localise a NaN/Inf.

        Called once per optimizer step, after unscale and before the update.

        Returns:
            True when this step is non-finite (its update should not be applied).
        """
        rec = self.config.record
        tensors: dict[str, torch.Tensor] = {}
        if self._losses:
            tensors[metrics.LOSS] = torch.stack([l.float().sum() for l in self._losses]).sum()
        per_module = rec.grad_norm_depth != 0
        sharded = self.world_size > 1 and self.grad_norms.sharded
        tensors.update(self.grad_norms.compute(per_module=per_module,
                                               reduce_squares=distributed.all_reduce_sum if sharded else None))
        opt = optimizer or (self.optimizers[0] if self.optimizers else None)
        if self.scaler is not None and opt is not None:
            tensors.update(self.loss_scale.read(self.scaler, opt))
        if self.attention.armed:
            self._attn_values = self.attention.stop()
        tensors.update(self._attn_values)
        self._attn_values = {}
        values = _to_host(tensors)  # note: the one CPU-GPU sync point of the step
        local_loss = values.get(metrics.LOSS, math.nan)
        overflow = values.get(metrics.AMP_OVERFLOW, 0.0) > 0
        grad_total = values.get(metrics.GRAD_NORM_TOTAL, 0.0)
        loss_ok = not self._losses or math.isfinite(local_loss)  # no loss given: judge the grads
        nonfinite = not (loss_ok and math.isfinite(grad_total)) and not overflow
        if self.world_size > 1:  # one collective: the mean loss and whether any rank went bad
            loss_mean, nonfinite = distributed.mean_loss_and_any_bad(local_loss, nonfinite)
            if metrics.LOSS in values:
                values[metrics.LOSS] = loss_mean
        if self.scaler is not None:
            self.loss_scale.update(overflow)
            values[metrics.AMP_SKIPPED_STEPS] = float(self.loss_scale.skipped_steps)
        # Until its first clean step a GradScaler is still searching down from its initial scale
        # (2**16 by default): those overflows are its start-up, not a streak.
        self._scaler_settled = self._scaler_settled or not overflow
        self.overflow_streak = self.overflow_streak + 1 if overflow and self._scaler_settled else 0
        self._values = values
        self._nonfinite = nonfinite
        self._nonfinite_streak = self._nonfinite_streak + 1 if nonfinite else 0
        if nonfinite and self._window is None:
            if self._nonfinite_streak == 1:
                self._report_nonfinite(replay, local_loss)
            else:  # weights already non-finite (nothing rolled back): a replay would say nothing new
                self._event(EventKind.NONFINITE, loss=local_loss, streak=self._nonfinite_streak,
                            note="still non-finite since the first reported step")
        return nonfinite or (self._window is not None)

    def finish_step(self, step: int | None = None) -> None:
        """The optimizer step is done: detect, record, then roll back or snapshot."""
        if not self._values:  # measure() was not called (e.g. no backward this batch)
            self.measure()
        values = self._values
        signals = self._detect(values)
        self._record(values, signals)
        if self._window is None:
            self._guard(signals)
            if self._window is None:
                self._maybe_snapshot()
        if self._window is not None and self._window.remaining <= 0:
            self._close_window()
        self._losses, self._values = [], {}
        self.step = self.step + 1 if step is None else step

    def close(self) -> None:
        """Remove the optimizer hooks, flush and close the run directory (idempotent)."""
        self.lr_cooldown.remove()
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
            "step": self.step, "rollbacks": self.rollbacks, "cooldown_until": self.cooldown_until,
            "overflow_streak": self.overflow_streak, "last_restored_step": self.last_restored_step,
            "detectors": self._detector_states(), "loss_scale": self.loss_scale.state_dict(),
            "skiplist": list(self.skiplist.entries), "epoch": self._epoch,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.step = int(state.get("step", 0))
        self.rollbacks = int(state.get("rollbacks", 0))
        self.cooldown_until = int(state.get("cooldown_until", -1))
        self.overflow_streak = int(state.get("overflow_streak", 0))
        self.last_restored_step = state.get("last_restored_step")
        self._epoch = int(state.get("epoch", 0))
        if "detectors" in state:
            self._load_detector_states(state["detectors"])
        if "loss_scale" in state:
            self.loss_scale.load_state_dict(state["loss_scale"])
        known = {repr(sorted(e.items())) for e in self.skiplist.entries}
        for entry in state.get("skiplist", []):
            if repr(sorted(entry.items())) not in known:
                self.skiplist.add(entry)

    # ------------------------------------------------------------------ internals
    def _detect(self, values: dict[str, float]) -> StepSignals:
        loss = values.get(metrics.LOSS)
        grad = values.get(metrics.GRAD_NORM_TOTAL)
        in_window = self._window is not None
        loss_v = self.loss_detector.update(loss) if loss is not None and not in_window else None
        grad_v = self.grad_detector.update(grad) if grad is not None and not in_window else None
        div_v = self.divergence_detector.update(loss, step=self.step) \
            if loss is not None and not in_window else None
        newly_diverged = bool(div_v is not None and div_v.diverged and not self._diverged)
        if div_v is not None:
            self._diverged = bool(div_v.diverged)  # an event on entering divergence, not every step
        self._verdicts = (loss_v, grad_v, div_v)
        return StepSignals(
            nonfinite=self._nonfinite and not in_window,
            loss_spike=bool(loss_v is not None and loss_v.is_spike),
            grad_norm_spike=bool(grad_v is not None and grad_v.is_spike),
            divergence=newly_diverged,
            overflow_streak=self.overflow_streak,
            loss_scale=values.get(metrics.LOSS_SCALE),
        )

    def _record(self, values: dict[str, float], signals: StepSignals) -> None:
        now = time.perf_counter()
        record: dict[str, Any] = {metrics.STEP: self.step, metrics.EPOCH: self._epoch,
                                  metrics.BATCH_IDX: self._batch_idx}
        flagged = signals.loss_spike or signals.grad_norm_spike or signals.nonfinite
        keep_modules = flagged or self.step % self.config.record.module_every == 0
        for key, value in values.items():
            if key.startswith(metrics.GRAD_NORM + "/") and key != metrics.GRAD_NORM_TOTAL \
                    and not keep_modules:
                continue
            record[key] = value
        lrs = self.lr_cooldown.take_used() or [float(g["lr"]) for g in self._param_groups()]
        for i, lr in enumerate(lrs):
            record[metrics.LR if i == 0 else f"{metrics.LR}/pg{i}"] = lr
        if now > self._t_last:
            record[metrics.SAMPLES_PER_SEC] = self._samples / (now - self._t_last)
        self._t_last, self._samples = now, 0
        self.last_record = record
        if self.writer is None:
            return
        self.writer.write_step(record)
        loss_v, grad_v, div_v = self._verdicts
        if signals.loss_spike:
            self._event(EventKind.SPIKE, metric=metrics.LOSS, value=values.get(metrics.LOSS),
                        baseline=loss_v.baseline, score=loss_v.score)
        if signals.grad_norm_spike:
            self._event(EventKind.SPIKE, metric=metrics.GRAD_NORM_TOTAL,
                        value=values.get(metrics.GRAD_NORM_TOTAL),
                        baseline=grad_v.baseline, score=grad_v.score)
        if signals.divergence:
            self._event(EventKind.DIVERGENCE, metric=metrics.LOSS, value=values.get(metrics.LOSS),
                        onset=div_v.onset, level=div_v.level, best=div_v.best)
        self._watch_entropy(values)
        if values.get(metrics.AMP_OVERFLOW, 0.0) > 0:
            self._event(EventKind.OVERFLOW, loss_scale=values.get(metrics.LOSS_SCALE),
                        streak=self.overflow_streak)
        if not self._reported_no_attention and self._attn_sampled and not self.attention.found_any:
            self._reported_no_attention = True
            self.writer.update_meta(attention="no attention modules found: attention not recorded")

    def _watch_entropy(self, values: dict[str, float]) -> None:
        prefix = metrics.ATTN_ENTROPY + "/"
        for key, value in values.items():
            if key.startswith(prefix) and math.isfinite(value) and \
                    self.entropy_watch.update(key[len(prefix):], value):
                self._event(EventKind.ENTROPY_COLLAPSE, module=key[len(prefix):], entropy=value,
                            logit_max=values.get(metrics.metric_key(metrics.ATTN_LOGIT_MAX, key[len(prefix):])))

    def _report_nonfinite(self, replay: Callable[[], torch.Tensor] | None, local_loss: float) -> None:
        """Name where the NaN/Inf came from: the input batch, else a replay with hooks armed.

        Under DDP every rank replays its own batch on its own (unsynchronised) module, and only
        ranks that found something report; rank 0 writes them all, each with its rank.
        """
        detail: dict[str, Any] = {"loss": local_loss,
                                  "grad_norm": self._values.get(metrics.GRAD_NORM_TOTAL)}
        source = None
        if replay is not None and self.config.record.localize_nonfinite:
            source = locate_nonfinite(self.model, replay, batch=self._batch, rng_state=self._rng)
        elif self._batch is not None:
            found = find_nonfinite_input(self._batch)
            if found is not None:
                detail.update(module="<input>", phase="input", tensor_role=found[0])
        if source is not None:
            detail.update(source.to_dict())
        elif "module" not in detail:
            if self.world_size > 1 and math.isfinite(local_loss):
                detail = None  # another rank's fault, reached us through the gradient all-reduce
            else:
                detail.update(module=None, phase=None,
                              note="source not localised (transient, or no replay: pass loss_fn=)")
        if detail is not None:
            detail["rank"] = self.rank
        sources = [d for d in distributed.gather(detail) if d is not None]
        if not sources:
            sources = [{"module": None, "phase": None, "rank": None,
                        "note": "source not localised: every rank replayed its batch finite"}]
        for d in sources:
            self._event(EventKind.NONFINITE, **d)

    def _guard(self, signals: StepSignals) -> None:
        reason = bad_step_reason(signals, self.config.guard)
        action = decide(reason, self.rollbacks, self.config.guard)
        if action is Action.CONTINUE:
            if reason is not None:
                self.ring.mark_bad_after(self.step)
            return
        if action is Action.GIVE_UP:
            msg = (f"sentinel gave up at step {self.step} after {self.rollbacks} rollbacks: "
                   f"the run is still bad ({reason.value}); lower the learning rate, inspect the "
                   f"batches in {self.log_dir}/skiplist.json, or raise max_rollbacks")
            self._event(EventKind.GAVE_UP, reason=reason.value, rollbacks=self.rollbacks, message=msg)
            self.close()
            raise TrainingGaveUp(msg)
        self._start_rollback(reason)

    def _start_rollback(self, reason: Reason) -> None:
        g = self.config.guard
        # Snapshot k holds the state after k steps. The update of this step is bad, and the few
        # before it may already carry the damage: trust only states from before ``limit``.
        limit = self.step - g.min_rollback_distance + 1
        self.ring.mark_bad_after(limit)
        snapshot = self.ring.newest_good_before(limit)
        if snapshot is None:
            log.warning("step %d: %s but no snapshot to roll back to yet; going on", self.step,
                        reason.value)
            self._event(EventKind.ROLLBACK, spike_step=self.step, reason=reason.value,
                        restored_step=None, skipped=[], note="no snapshot yet: nothing restored")
            return
        self.rollbacks += 1
        self._window = _Window(target_step=snapshot.step, spike_step=self.step, reason=reason,
                               remaining=g.skip_after if self._deferred else 0, snapshot=snapshot)
        if not self._deferred:
            self._skip_next = g.skip_after

    def _close_window(self) -> None:
        window, self._window = self._window, None
        self._nonfinite_streak = 0  # the next non-finite step is a new incident: replay it
        g = self.config.guard
        live_scaler = self.scaler.state_dict() if self.scaler is not None else None
        extra = self.ring.restore(window.snapshot, model=self.model, optimizers=self.optimizers,
                                  schedulers=self.schedulers, scaler=self.scaler) \
            if window.rollback else self._restore_one_off(window.snapshot)
        if window.rollback:
            self.ring.drop_after(window.target_step)
            self._load_detector_states(extra.get(_DETECTORS, {}))
            self.overflow_streak = int(extra.get(_OVERFLOW_STREAK, 0))
            if live_scaler is not None and not extra.get(_SCALER_SETTLED, True):
                # A snapshot from before the scaler found its range would send it back to its
                # initial scale and through the same overflows: keep the scale it has found.
                self.scaler.load_state_dict(live_scaler)
            self.last_restored_step = window.target_step
            self.cooldown_until = self.step + g.cooldown
        skipped = [b for b in self._seen if b.step >= window.target_step]
        reason = "rollback" if window.rollback else "skiplist"
        entries = _concat(distributed.gather([b.entry(self.rollbacks if window.rollback else 0, self.rank)
                                              for b in skipped]))
        if window.rollback:
            for entry in entries:
                self.skiplist.add(entry)
            self._event(EventKind.ROLLBACK, spike_step=window.spike_step, reason=window.reason.value,
                        restored_step=window.target_step, rollback=self.rollbacks,
                        skipped=[{k: e[k] for k in ("step", "epoch", "batch_idx", "rank")} for e in entries])
            if self.writer is not None:
                self.writer.write_skiplist(self.skiplist.entries)
        for entry in entries:
            self._event(EventKind.SKIP, reason=reason, **entry)
        self._seen.clear()

    def _skip_listed(self, seen: _BatchSeen) -> None:
        """A batch the skip list names came up again (a resumed run)."""
        if not self._deferred:
            self._event(EventKind.SKIP, reason="skiplist", **seen.entry(0, self.rank))
            return
        if self._window is None:  # discard this batch by restoring the state from before it
            self._window = _Window(target_step=self.step, spike_step=self.step, reason=None,
                                   remaining=1, snapshot=self._one_off_snapshot())

    def _maybe_snapshot(self) -> None:
        done = self.step + 1  # optimizer steps completed, the ring's step convention
        if not self.config.guard.rollback:
            return  # recording only: nothing would ever be restored
        if self._nonfinite or not self.ring.due(done):
            return
        self._take_snapshot(done)

    def _take_snapshot(self, done: int) -> None:
        try:
            self.ring.take(done, model=self.model, optimizers=self.optimizers,
                           schedulers=self.schedulers, scaler=self.scaler,
                           extra={_DETECTORS: self._detector_states(),
                                  _OVERFLOW_STREAK: self.overflow_streak,
                                  _SCALER_SETTLED: self._scaler_settled})
        except SnapshotTooLarge as err:
            raise ValueError(
                f"sentinel: one snapshot of the training state (model, optimizer, scheduler, scaler) "
                f"needs {err.nbytes / 2**20:.1f} MiB, more than snapshot_max_bytes={err.max_bytes} "
                f"({err.max_bytes / 2**20:.1f} MiB): pass snapshot_dir=... to keep snapshots on disk, "
                "a larger snapshot_max_bytes, or rollback=False") from None
        oldest = self.ring.snapshots[0].step
        while self._seen and self._seen[0].step < oldest:
            self._seen.popleft()

    def _one_off_snapshot(self) -> Any:
        ring = SnapshotRing(SnapshotConfig(every=1, keep=1))
        snapshot = ring.take(self.step, model=self.model, optimizers=self.optimizers,
                             schedulers=self.schedulers, scaler=self.scaler, extra={})
        return (ring, snapshot)

    def _restore_one_off(self, pair: Any) -> dict[str, Any]:
        ring, snapshot = pair
        return ring.restore(snapshot, model=self.model, optimizers=self.optimizers,
                            schedulers=self.schedulers, scaler=self.scaler)

    def _cooling_down(self) -> bool:
        return self.last_restored_step is not None and self.step <= self.cooldown_until

    def _replay_fn(self) -> Callable[[], torch.Tensor] | None:
        if self.loss_fn is None or self._batch is None:
            return None
        model, batch, loss_fn = self.model, self._batch, self.loss_fn
        return lambda: loss_fn(model, batch)

    def _event(self, kind: EventKind, **detail: Any) -> None:
        step = detail.pop("step", self.step)
        if self.writer is not None:
            self.writer.write_event(make_event(kind, step, **detail))
        message = describe(kind, detail, self.config.guard.max_rollbacks)
        if message is not None and self.rank == 0:
            log.warning("sentinel: step %d: %s", step, message)

    def _param_groups(self) -> list[dict[str, Any]]:
        return [g for opt in self.optimizers for g in opt.param_groups]

    def _detector_states(self) -> dict[str, Any]:
        return {"loss": self.loss_detector.state_dict(), "grad": self.grad_detector.state_dict(),
                "divergence": self.divergence_detector.state_dict(),
                "entropy": self.entropy_watch.state_dict()}

    def _load_detector_states(self, states: dict[str, Any]) -> None:
        if "loss" in states:
            self.loss_detector.load_state_dict(states["loss"])
        if "grad" in states:
            self.grad_detector.load_state_dict(states["grad"])
        if "divergence" in states:
            self.divergence_detector.load_state_dict(states["divergence"])
        if "entropy" in states:
            self.entropy_watch.load_state_dict(states["entropy"])

    def _meta(self, extra: dict[str, Any] | None) -> dict[str, Any]:
        n_params = sum(p.numel() for p in self.model.parameters())
        meta = {"config": self.config.to_dict(), "world_size": self.world_size,
                "model": {"class": type(self.model).__name__, "parameters": n_params,
                          "grad_norm_groups": list(self.grad_norms.group_names)}}
        meta.update(extra or {})
        return meta


def _snapshot_budget(max_bytes: int | None, directory: str | None) -> int | None:
    """Bytes the snapshot ring may hold: as configured, else a quarter of physical memory split
    between the processes on this machine (snapshots on disk are not bounded by memory)."""
    if max_bytes is not None or directory is not None:
        return max_bytes
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # a platform without sysconf: no bound
        return None
    local_processes = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    return physical // 4 // local_processes


def _as_list(obj: Any) -> list[Any]:
    if obj is None:
        return []
    if isinstance(obj, (list, tuple)):
        return list(obj)
    return [obj]


def _to_host(tensors: dict[str, torch.Tensor]) -> dict[str, float]:
    """All of a step's 0-d metrics to Python floats in one device-to-host transfer."""
    if not tensors:
        return {}
    keys = list(tensors)
    device = tensors[keys[0]].device
    parts = [t.detach().reshape(1) if t.device == device else t.detach().reshape(1).to(device)
             for t in tensors.values()]
    return dict(zip(keys, torch.cat(parts).double().cpu().tolist()))  # cat promotes dtypes


def _batch_size(batch: Any) -> int:
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if isinstance(batch, dict):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)) and batch:
        return _batch_size(batch[0])
    return 0


def _concat(parts: list[list[Any]]) -> list[Any]:
    return [item for part in parts for item in part]
