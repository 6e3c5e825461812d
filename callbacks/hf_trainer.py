"""``SentinelTrainerCallback``: sentinel for a Hugging Face ``transformers`` ``Trainer`` in one line.

A thin adapter, like the Lightning one: every measurement and decision is made by
:class:`sentinel.engine.Sentinel`; this class only calls it from the right places.

The Trainer hands its callbacks neither the loss nor the gradients before clipping, so on
``on_train_begin`` the callback finds the running ``Trainer`` and listens at three points of its
step, all removed again at ``on_train_end``:

- a forward pre-hook on the model: a micro-batch starts (its inputs name the batch);
- ``trainer.accelerator.backward``: the loss the Trainer backpropagates, already divided for
  gradient accumulation, as Lightning's ``on_before_backward`` gives it;
- ``trainer.accelerator.unscale_gradients``, which the Trainer's clipping calls first: the
  gradients are complete (all-reduced under DDP) and unscaled, and not clipped yet. The
  Trainer's own ``on_pre_optimizer_step`` comes after clipping; it is the fallback when nothing
  clips.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from sentinel.config import SentinelConfig
from sentinel.engine import Sentinel, TrainingGaveUp
from sentinel.store import ensure_run_dir
from sentinel.store.atomic_json import read_json, write_json_atomic

try:
    import transformers
    from transformers import Trainer, TrainerCallback
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
except ImportError as err:  # pragma: no cover - exercised without transformers installed
    raise ImportError('SentinelTrainerCallback needs the transformers package: pip install '
                      '"sentinel-train[transformers]" (or pip install transformers accelerate)') from err

log = logging.getLogger(__name__)

MIN_TRANSFORMERS = (4, 45)  # TrainerCallback.on_pre_optimizer_step
STATE_FILE = "sentinel_state.json"  # written into each Trainer checkpoint folder
_MISSING = object()


class SentinelTrainerCallback(TrainerCallback):
    """Record gradient norms, AMP loss scale, NaN/Inf sources, attention entropy; detect loss
    spikes; withhold the update of an outlier step; roll back the Trainer's own model, optimizer
    and LR scheduler to a good snapshot and skip the bad batches when that does not cure it; stop
    the run cleanly when nothing helps.

    Everything the Lightning :class:`~sentinel.callbacks.SentinelCallback` does, from a
    ``transformers.Trainer`` (4.45 or newer) without changing the training code:

    - the loss of each optimizer step is the one the Trainer backpropagates (summed over
      gradient-accumulation micro-batches, averaged over ranks);
    - gradient norms are read after AMP unscale and before the Trainer clips them;
    - an update is withheld by setting the gradients to None before the optimizer step, the same
      way on every rank; the Trainer's dataloader cannot drop a batch, so a batch the guard skips
      is computed and its update withheld the same way;
    - a rollback restores ``trainer.model``, ``trainer.optimizer`` and ``trainer.lr_scheduler``
      in place; giving up restores the last good weights, logs one error line and sets
      ``control.should_training_stop`` (the message stays in :attr:`gave_up`);
    - the callback's state is written into every Trainer checkpoint folder (``sentinel_state.json``)
      and read back by ``trainer.train(resume_from_checkpoint=...)``;
    - the metrics of the latest step are added to the Trainer's logs under sentinel's keys, so
      every ``report_to`` backend gets them (keys the Trainer logs itself, ``loss``, keep its
      values).

    Args:
        log_dir: the run directory (``meta.json``, ``steps.*``, ``events.jsonl``, ``tb/``).
            Must be writable: checked here, before training starts.
        config: a :class:`sentinel.config.SentinelConfig`, or pass its fields as keyword
            options (``rollback=False``, ``snapshot_every=10``, ``attention_every=25``, ...).
            An unknown option raises ``TypeError`` naming it.

    Metric keys are those of the Lightning callback (``loss``, ``lr``, ``grad_norm/total``,
    ``grad_norm/<module>``, ``loss_scale``, ``amp/overflow``, ``amp/skipped_steps``,
    ``attn_entropy/<module>``, ``attn_entropy_min/<module>``, ``attn_logit_max/<module>``,
    ``samples_per_sec``).

    Example:
        >>> trainer = Trainer(model=model, args=args, train_dataset=data,   # doctest: +SKIP
        ...                   callbacks=[SentinelTrainerCallback(log_dir="logs/run1")])
        >>> trainer.train()                                                   # doctest: +SKIP
    """

    def __init__(self, log_dir: str = "logs/sentinel", *, config: SentinelConfig | None = None,
                 **options: Any) -> None:
        _check_version()
        self.config = SentinelConfig.resolve(config, options)
        self.log_dir = str(log_dir)
        ensure_run_dir(self.log_dir)  # fails here, before training, not at on_train_begin
        self.sentinel: Sentinel | None = None
        self.gave_up: str | None = None  # the give-up message when the guard stopped the run
        self._trainer: Any = None
        self._patches: list[tuple[Any, str, Any]] = []
        self._hook: Any = None
        self._steps_in_epoch: int | None = None
        self._epoch = 0
        self._batch_idx = 0
        self._step_open = False  # between on_step_begin and on_step_end
        self._in_batch = False  # a micro-batch's forward ran, its backward not yet
        self._measured = False
        self._replaying = False
        self._inputs: Any = None  # the micro-batch compute_loss was given (its replay recomputes that loss)

    # ------------------------------------------------------------------ lifecycle
    def on_train_begin(self, args: Any, state: Any, control: Any, train_dataloader: Any = None,
                       **kwargs: Any) -> None:
        self._uninstall()  # a previous train() that raised left its hooks in place
        trainer, resume_from = _running_trainer()
        accelerator = trainer.accelerator
        if str(accelerator.distributed_type).endswith("DEEPSPEED"):
            raise ValueError("SentinelTrainerCallback does not support DeepSpeed (it owns the gradients and "
                             "the optimizer step): train with DDP or FSDP, or remove the callback")
        self._trainer = trainer
        scaler = getattr(accelerator, "scaler", None)
        self.sentinel = Sentinel(
            trainer.model, _unwrap(trainer.optimizer, "optimizer"), _unwrap(trainer.lr_scheduler, "scheduler"),
            scaler, self.log_dir,
            config=self.config, rank=args.process_index, _keep_batches=True,
            meta={"trainer": {"class": type(trainer).__name__,
                              "precision": "bf16" if args.bf16 else "fp16" if args.fp16 else "32",
                              "world_size": args.world_size,
                              "distributed_type": str(accelerator.distributed_type),
                              "gradient_accumulation_steps": args.gradient_accumulation_steps,
                              "max_grad_norm": args.max_grad_norm},
                  "transformers_version": transformers.__version__},
        )
        self.sentinel.replay_available = True  # re-runs a batch to tell damaged weights from bad data
        self.sentinel.replay_batch = lambda batch, batch_idx: self._replay(batch)
        if state.global_step > 0:
            self._resume(args, state, resume_from)
        self._steps_in_epoch = _length(train_dataloader)
        self._install(trainer)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._close()

    # ------------------------------------------------------------------ per step
    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # A resumed run starts inside an epoch: the Trainer's fractional epoch says where.
        position = float(state.epoch or 0.0)
        self._epoch = int(position)
        self._batch_idx = round((position - self._epoch) * self._steps_in_epoch) if self._steps_in_epoch else 0

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.sentinel is None or self.gave_up is not None:
            return
        self.sentinel.step = state.global_step
        self._step_open, self._measured, self._in_batch = True, False, False

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        # Reached unmeasured only when nothing clipped (so nothing unscaled either).
        if not self._step_open or self._measured:
            return
        if self.sentinel.scaler is not None:
            self._trainer.accelerator.unscale_gradients()  # measured right after, see _install
        if not self._measured:
            self._measure()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self._step_open:
            return
        self._step_open = False
        try:
            self.sentinel.finish_step(step=state.global_step)
        except TrainingGaveUp as err:  # last good weights are in place: stop, do not crash
            self.gave_up = str(err)
            control.should_training_stop = True
            self._uninstall()
            if args.process_index == 0:
                log.error("%s", err)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        # Only the Trainer's training logs (they carry its "loss"), not evaluation or summaries.
        if self.sentinel is None or logs is None or "loss" not in logs or not self.sentinel.last_record:
            return
        values = self.sentinel.last_metrics
        for key, value in values.items():
            logs.setdefault(key, value)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            for key, value in values.items():
                state.log_history[-1].setdefault(key, value)

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.sentinel is None or not args.should_save:
            return
        folder = os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        if not os.path.isdir(folder):
            log.warning("sentinel: no checkpoint folder %s to save sentinel's state into: a run resumed "
                        "from this checkpoint starts sentinel afresh", folder)
            return
        write_json_atomic(Path(folder) / STATE_FILE, self.sentinel.state_dict())

    # ------------------------------------------------------------------ the Trainer's step
    def _on_forward(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        if not self._step_open or self._in_batch or self._replaying or not module.training:
            return  # evaluation, a replay, or a second forward of the same micro-batch
        self._in_batch = True
        if self._inputs is not None:  # the Trainer's own micro-batch: replayed through its compute_loss
            batch = self._inputs
        else:
            batch = dict(kwargs) if not args else (tuple(args), dict(kwargs))
        self.sentinel.begin_batch(batch, self._batch_idx, epoch=self._epoch)
        self._batch_idx += 1

    def _on_backward(self, loss: torch.Tensor) -> None:
        if self._in_batch:
            self._in_batch = False
            self.sentinel.add_loss(loss)

    def _on_unscaled(self) -> None:
        if self._step_open and not self._measured and self._trainer.accelerator.sync_gradients:
            self._measure()

    def _measure(self) -> None:
        self._measured = True
        sen = self.sentinel
        replay = self._replay(sen.batch) if sen.batch is not None else None
        sen.measure(replay=replay)  # withholds the update when it must

    def _replay(self, batch: Any) -> Callable[[], torch.Tensor]:
        """Recompute the loss of ``batch`` on the current weights (NaN source, weights check)."""
        trainer = self._trainer
        if isinstance(batch, _TrainerInputs):  # the loss as the Trainer computes it (a subclass's own,
            inputs = batch  # label smoothing): the recorded loss's own function, so the two compare

            def compute() -> Any:  # a copy: compute_loss may pop the labels
                return trainer.compute_loss(trainer.model, _TrainerInputs(inputs))
        else:
            args, kwargs = batch if isinstance(batch, tuple) else ((), batch)
            # The micro-batch's own mean loss, comparable to the step's: without the token count of
            # the whole accumulated step the model divides by this batch's own.
            kwargs = {k: v for k, v in kwargs.items() if k != "num_items_in_batch"}

            def compute() -> Any:
                return trainer.model(*args, **kwargs)

        def run_forward() -> torch.Tensor:
            self._replaying = True
            try:
                with trainer.compute_loss_context_manager():
                    out = compute()
            finally:
                self._replaying = False
            return _loss_of(out)

        return run_forward

    def _install(self, trainer: Any) -> None:
        accelerator = trainer.accelerator
        backward, unscale = accelerator.backward, accelerator.unscale_gradients

        def sentinel_backward(loss: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            self._on_backward(loss)
            return backward(loss, *args, **kwargs)

        def sentinel_unscale_gradients(*args: Any, **kwargs: Any) -> Any:
            result = unscale(*args, **kwargs)
            self._on_unscaled()
            return result

        compute_loss = trainer.compute_loss

        def sentinel_compute_loss(model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            if self._replaying or not isinstance(inputs, Mapping):
                return compute_loss(model, inputs, *args, **kwargs)
            self._inputs = _TrainerInputs(inputs)  # a copy: with label smoothing it pops the labels
            try:
                return compute_loss(model, inputs, *args, **kwargs)
            finally:
                self._inputs = None

        self._patch(trainer, "compute_loss", sentinel_compute_loss)
        self._patch(accelerator, "backward", sentinel_backward)
        self._patch(accelerator, "unscale_gradients", sentinel_unscale_gradients)
        self._hook = trainer.model.register_forward_pre_hook(self._on_forward, with_kwargs=True)
        # First in line, so the report_to callbacks' on_log already sees sentinel's metrics.
        callbacks = trainer.callback_handler.callbacks
        if self in callbacks:
            callbacks.remove(self)
            callbacks.insert(0, self)

    def _patch(self, obj: Any, name: str, replacement: Any) -> None:
        self._patches.append((obj, name, obj.__dict__.get(name, _MISSING)))
        setattr(obj, name, replacement)

    def _uninstall(self) -> None:
        while self._patches:
            obj, name, before = self._patches.pop()
            if before is _MISSING:
                obj.__dict__.pop(name, None)
            else:
                setattr(obj, name, before)
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        self._step_open = self._in_batch = False

    def _resume(self, args: Any, state: Any, resume_from: Any) -> None:
        folder = resume_from if isinstance(resume_from, str) else \
            os.path.join(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        path = os.path.join(folder, STATE_FILE)
        if not os.path.isfile(path):
            if args.process_index == 0:
                log.warning("sentinel: resumed at step %d from %s, which holds no %s: the guard starts "
                            "afresh (no skip list or rollback count taken over)", state.global_step, folder,
                            STATE_FILE)
            return
        try:
            self.sentinel.load_state_dict(read_json(Path(path)))
        except ValueError as err:
            raise ValueError(f"{path}: {err}; delete that file to resume without sentinel's history") from None
        if args.process_index == 0:
            log.warning(self.sentinel.describe_resume())

    def _close(self) -> None:
        self._uninstall()
        if self.sentinel is not None:
            self.sentinel.close()


def _running_trainer() -> tuple[Any, Any]:
    """The ``Trainer`` whose training loop called this hook, and the checkpoint it resumed from.

    Callbacks are not given the Trainer; its training loop is a few frames up the stack.
    """
    frame = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, Trainer):
            return owner, frame.f_locals.get("resume_from_checkpoint")
        frame = frame.f_back
    raise RuntimeError("SentinelTrainerCallback is used outside Trainer.train(): pass it to "
                       "transformers.Trainer(callbacks=[...]) and call train()")


def _unwrap(obj: Any, attribute: str) -> Any:
    """The torch optimizer / scheduler inside accelerate's wrapper (snapshots restore that one, and
    the LR cool-down hooks it). accelerate's ``AcceleratedOptimizer`` is itself an ``Optimizer``
    subclass that never ran ``Optimizer.__init__`` (no hook registries): it is unwrapped too."""
    kinds = (torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler)
    while obj is not None and hasattr(obj, attribute):
        inner = getattr(obj, attribute)
        if inner is None or inner is obj or (isinstance(obj, kinds) and not isinstance(inner, kinds)):
            break
        obj = inner
    return obj


class _TrainerInputs(dict):
    """A micro-batch as the Trainer handed it to ``compute_loss`` (what a replay gives it again)."""


def _loss_of(out: Any) -> torch.Tensor:
    loss = out.get("loss") if isinstance(out, Mapping) else out[0] if isinstance(out, (tuple, list)) else out
    if not isinstance(loss, torch.Tensor):
        raise ValueError("the model returned no loss for the replayed batch (the loss is computed outside "
                         "the model): the NaN/Inf source is not localised")
    return loss


def _length(loader: Any) -> int | None:
    try:
        return len(loader) if loader is not None else None
    except TypeError:  # an iterable dataset has no length
        return None


def _check_version() -> None:
    version = tuple(int(p) for p in transformers.__version__.split(".")[:2] if p.isdigit())
    if version < MIN_TRANSFORMERS:
        raise ImportError(f"SentinelTrainerCallback needs transformers >= {'.'.join(map(str, MIN_TRANSFORMERS))} "
                          f"(TrainerCallback.on_pre_optimizer_step), found {transformers.__version__}: "
                          'pip install -U "sentinel-train[transformers]"')
