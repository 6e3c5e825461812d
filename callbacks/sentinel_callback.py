"""``SentinelCallback``: sentinel for a Lightning ``Trainer`` in one line.

A thin adapter: every measurement and decision is made by :class:`sentinel.engine.Sentinel`;
this class only calls it from the right hooks.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback

from sentinel.config import SentinelConfig
from sentinel.engine import Sentinel
from sentinel.store import ensure_run_dir
from sentinel.training_objects import checked_rollback_with

log = logging.getLogger(__name__)
STATE_KEY = "SentinelCallback"


class SentinelCallback(Callback):
    """Record gradient norms, AMP loss scale, NaN/Inf sources, attention entropy; detect loss
    spikes; withhold the update of an outlier step; roll back to a good snapshot and skip the
    bad batches when that does not cure it.

    An update is withheld in ``on_before_optimizer_step`` by setting the gradients to None, the
    same way on every rank (the decision is made on the all-reduced loss and the global grad
    norm): the optimizer then leaves parameters and state untouched, the LR scheduler still
    steps, and under fp16 AMP the GradScaler counts a clean step. Lightning cannot drop a batch
    from its loop, so a batch the guard skips (the skip list, or the batches after a rollback) is
    computed and its update withheld the same way.

    Args:
        log_dir: the run directory (``meta.json``, ``steps.*``, ``events.jsonl``, ``tb/``).
            Must be writable: checked here, before training starts.
        config: a :class:`sentinel.config.SentinelConfig`, or pass its fields as keyword
            options (``rollback=False``, ``snapshot_every=10``, ``attention_every=25``, ...).
            An unknown option raises ``TypeError`` naming it.
        rollback_with: other state a rollback puts back with the weights (see
            :class:`sentinel.Sentinel`). The averaged model of Lightning's ``WeightAveraging``
            callbacks (``EMAWeightAveraging``) is added by itself: left out, the average keeps the
            updates a rollback discarded, and it becomes the model at the end of training.

    Metrics go to the run directory and to the Trainer's own loggers under the same keys:

    ==========================  =====================================================
    key                         meaning
    ==========================  =====================================================
    ``loss``                    training loss of the optimizer step (mean over micro-batches)
    ``lr``                      learning rate of the first parameter group
    ``lr/pg<i>``                learning rate of the i-th parameter group (i >= 1)
    ``grad_norm/total``         L2 norm of all gradients (after AMP unscale, before clipping)
    ``grad_norm/<module>``      the same per module (every ``module_every`` steps)
    ``loss_scale``              AMP GradScaler scale (fp16 only)
    ``amp/overflow``            1 when the scaler found inf/nan and skipped the step
    ``amp/skipped_steps``       optimizer steps skipped by the scaler so far
    ``attn_entropy/<module>``   attention entropy in nats, mean over heads (sampled)
    ``attn_entropy_min/<module>`` the lowest head's entropy (sampled)
    ``attn_logit_max/<module>`` largest pre-softmax attention logit (sampled)
    ``samples_per_sec``         throughput since the previous step
    ==========================  =====================================================

    Example:
        >>> trainer = L.Trainer(callbacks=[SentinelCallback(log_dir="logs/run1")])  # doctest: +SKIP
    """

    def __init__(self, log_dir: str = "logs/sentinel", *, config: SentinelConfig | None = None,
                 rollback_with: Sequence[Any] = (), **options: Any) -> None:
        self.config = SentinelConfig.resolve(config, options)
        self.rollback_with = checked_rollback_with(rollback_with)  # a mistake fails here, not at fit()
        self.log_dir = str(log_dir)
        ensure_run_dir(self.log_dir)  # fails here, before training, not at on_train_start
        self.sentinel: Sentinel | None = None
        self._pending_state: dict[str, Any] | None = None
        self._measured = False
        self._step_open = False
        self._micro_batches = 0  # backward calls in the optimizer step being accumulated
        self._module: pl.LightningModule | None = None  # the module of the last fit

    @property
    def state_key(self) -> str:
        # One key whatever log_dir is called: a run resumed with the directory spelled
        # differently (relative, symlinked, or a new one) must still find its rollback count and
        # skip list. Lightning itself refuses two callbacks with one key in a Trainer.
        return STATE_KEY

    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        # Checkpoints written before the key was fixed store the state under a key that embeds
        # the log_dir of that run ("SentinelCallback{'log_dir': ...}"): adopt it.
        states = checkpoint.get("callbacks") or {}
        if STATE_KEY not in states:
            legacy = [k for k in states if isinstance(k, str) and k.startswith(STATE_KEY + "{")]
            if len(legacy) == 1:
                states[STATE_KEY] = states.pop(legacy[0])

    # ------------------------------------------------------------------ lifecycle
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.sentinel is not None and self._pending_state is None and self._module is pl_module:
            # fit() again on the same module (more epochs): the guard goes on where it was (its
            # rollback count, cool-down, skip list and detector history), as after a checkpoint
            self._pending_state = self.sentinel.state_dict()
        self._module = pl_module
        scaler = getattr(trainer.precision_plugin, "scaler", None)
        schedulers = [cfg.scheduler for cfg in trainer.lr_scheduler_configs]
        self.sentinel = Sentinel(
            pl_module, list(trainer.optimizers), schedulers, scaler, self.log_dir,
            config=self.config, rank=trainer.global_rank, _keep_batches=True,
            rollback_with=[*self.rollback_with, *_averaged_models(trainer)],
            meta={"trainer": {"precision": str(trainer.precision), "world_size": trainer.world_size,
                              "strategy": type(trainer.strategy).__name__,
                              "accumulate_grad_batches": trainer.accumulate_grad_batches,
                              "gradient_clip_val": trainer.gradient_clip_val,
                              "automatic_optimization": pl_module.automatic_optimization},
                  "lightning_version": pl.__version__},
        )
        # training_step can be replayed only under automatic optimization (see _replay).
        self.sentinel.replay_available = pl_module.automatic_optimization
        if pl_module.automatic_optimization:  # re-runs a batch to tell damaged weights from bad data
            self.sentinel.replay_batch = lambda batch, batch_idx: self._replay(trainer, pl_module, batch, batch_idx)
        if self._pending_state is not None:
            self.sentinel.load_state_dict(self._pending_state)
            self._pending_state = None
            if trainer.is_global_zero:
                log.warning(self.sentinel.describe_resume())

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._close()

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self._close()

    # ------------------------------------------------------------------ per batch
    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        sen = self._engine()
        if not self._step_open:  # first micro-batch of an optimizer step
            sen.step = trainer.global_step
            self._step_open = True
            self._micro_batches = 0
        sen.begin_batch(batch, batch_idx, epoch=trainer.current_epoch)

    def on_before_backward(self, trainer: pl.Trainer, pl_module: pl.LightningModule, loss: torch.Tensor) -> None:
        # Lightning hands over the loss already divided by accumulate_grad_batches: the sum over
        # micro-batches is the mean loss of the optimizer step (see on_before_optimizer_step for
        # an epoch's last, shorter window).
        self._engine().add_loss(loss)
        self._micro_batches += 1

    def on_before_optimizer_step(self, trainer: pl.Trainer, pl_module: pl.LightningModule,
                                 optimizer: torch.optim.Optimizer) -> None:
        sen = self._engine()
        if self._measured:  # several optimizers: the first one's view of the step is recorded
            if sen.update_suppressed:
                sen.suppress_update(optimizer)
            return
        if pl_module.automatic_optimization and not sen.has_loss:
            # training_step returned None (Lightning's way to skip a batch): no backward ran,
            # nothing was trained; a step with no loss and no gradients is not recorded.
            sen.discard_step()
            self._step_open = False
            return
        self._measured = True
        window = trainer.accumulate_grad_batches
        if pl_module.automatic_optimization and 0 < self._micro_batches < window:
            # An epoch's last window is shorter, each loss still divided by the full window: the
            # step's mean loss is their sum times window / micro-batches (the update is Lightning's).
            sen.rescale_loss(window / self._micro_batches)
        replay = self._replay(trainer, pl_module, sen.batch, sen.batch_idx) \
            if pl_module.automatic_optimization else None
        sen.measure(replay=replay, optimizer=optimizer)  # withholds the update when it must

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any,
                           batch: Any, batch_idx: int) -> None:
        if not self._measured:  # accumulating: no optimizer step in this batch
            return
        sen = self._engine()
        sen.finish_step(step=trainer.global_step)
        self._measured = False
        self._step_open = False
        if sen.last_record and trainer.is_global_zero and trainer.loggers \
                and (sen.last_record["step"] % max(trainer.log_every_n_steps, 1) == 0):
            values = sen.last_metrics
            for logger in trainer.loggers:
                logger.log_metrics(values, step=sen.last_record["step"])

    # ------------------------------------------------------------------ checkpoint state
    def state_dict(self) -> dict[str, Any]:
        if self.sentinel is None:
            return dict(self._pending_state or {})
        return self.sentinel.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if self.sentinel is None:
            self._pending_state = dict(state_dict)
        else:
            self.sentinel.load_state_dict(state_dict)

    # ------------------------------------------------------------------ internals
    def _engine(self) -> Sentinel:
        if self.sentinel is None:
            raise RuntimeError("SentinelCallback is used outside Trainer.fit: attach it to a Trainer "
                               "and call fit(); it records training only")
        return self.sentinel

    @staticmethod
    def _replay(trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int):
        """Recompute the loss of this batch on the same weights (to localise a NaN/Inf)."""

        def run_forward() -> torch.Tensor:
            context = trainer.precision_plugin.train_step_context() \
                if hasattr(trainer.precision_plugin, "train_step_context") else nullcontext()
            # The replay must not log a second value for this step.
            pl_module.log, pl_module.log_dict = _no_log, _no_log
            try:
                with context:  # training_step(self, batch) is allowed too: Lightning passes what it takes
                    out = pl_module.training_step(batch, batch_idx) if _takes_batch_idx(pl_module.training_step) \
                        else pl_module.training_step(batch)
            finally:
                del pl_module.log, pl_module.log_dict
            return out["loss"] if isinstance(out, dict) else out

        return run_forward

    def _close(self) -> None:
        if self.sentinel is not None:
            self.sentinel.close()


def _no_log(*args: Any, **kwargs: Any) -> None:
    return None


def _takes_batch_idx(step: Callable[..., Any]) -> bool:
    """Whether a ``training_step`` takes ``batch_idx`` after the batch (a second positional
    parameter, or ``*args``), as Lightning decides what to pass it."""
    try:
        params = list(inspect.signature(step).parameters.values())
    except (TypeError, ValueError):  # no signature to read: pass what Lightning's default takes
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params)


def _averaged_models(trainer: pl.Trainer) -> list[torch.nn.Module]:
    """The averaged models of the Trainer's weight-averaging callbacks, to roll back with the
    weights. Lightning's ``WeightAveraging`` (EMA, SWA; Lightning 2.5+) keeps one
    ``AveragedModel``, its update count a buffer of it. ``StochasticWeightAveraging`` keeps its
    count outside its model, so it cannot be put back from the model alone: said once."""
    from lightning.pytorch.callbacks import StochasticWeightAveraging

    try:
        from lightning.pytorch.callbacks import WeightAveraging
    except ImportError:  # Lightning before 2.5
        WeightAveraging = ()  # noqa: N806
    models = []
    for callback in trainer.callbacks:
        average = getattr(callback, "_average_model", None)
        if isinstance(callback, WeightAveraging) and isinstance(average, torch.nn.Module):
            models.append(average)
        elif isinstance(callback, StochasticWeightAveraging) and trainer.is_global_zero:
            log.warning("sentinel: StochasticWeightAveraging's average is not rolled back with the weights: "
                        "after a rollback it keeps the discarded updates it averaged. Lightning's "
                        "WeightAveraging callback (SWA or EMA) is rolled back with them")
    return models
