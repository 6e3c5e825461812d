"""``DemoLM``: the demo GPT as a LightningModule, with AdamW and a schedule that can surge.

The schedule is linear warm-up then cosine decay, with an optional *surge*: the learning rate
multiplied by ``factor`` between two steps. The surge is the demo's second pathology, an
optimisation instability that comes from the dynamics, not the data: with no qk-LayerNorm a
too-high learning rate lets attention logits grow until the softmax saturates (attention
entropy collapse), and the loss jumps and does not come back (Wortsman et al. 2023, "Small-scale
proxies for large-scale Transformer training instabilities"; Zhai et al. 2023, "Stabilizing
Transformer training by preventing attention entropy collapse").

The schedule is a ``LambdaLR`` stepped every optimizer step, so a rollback that restores the
scheduler replays the surge from the restored step; the guard's ``lr_factor`` / ``cooldown``
(lower the LR for a while after a rollback) is what gets the run past it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor

from sentinel.cli.demo.model import GPT, GPTConfig, build_model


@dataclass(frozen=True, kw_only=True, slots=True)
class LRSurge:
    """Multiply the learning rate by ``factor`` for optimizer steps ``start <= step < end``.

    Example:
        >>> LRSurge(start=200, end=230, factor=20.0).covers(215)
        True
    """

    start: int
    end: int
    factor: float

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.end:
            raise ValueError(f"LRSurge needs 0 <= start < end, got start={self.start!r}, end={self.end!r}")
        if not self.factor > 0:
            raise ValueError(f"LRSurge.factor must be positive, got {self.factor!r}")

    def covers(self, step: int) -> bool:
        return self.start <= step < self.end


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleConfig:
    """Optimizer and learning-rate schedule of the demo.

    Attributes:
        lr: peak learning rate. 6e-3 takes the 2-layer, 64-wide character model (batch 32) to
            its plateau (~0.7 nats) within 250-300 steps without a spike; 3e-3 is still
            descending steeply at 400 steps.
        warmup: linear warm-up steps from ``lr / warmup`` to ``lr``.
        total_steps: the cosine decays from ``lr`` to ``lr * min_lr_ratio`` at this step and
            stays there after.
        min_lr_ratio: floor of the cosine as a fraction of ``lr`` (0.1, as Chinchilla).
        weight_decay: AdamW decoupled weight decay on matrices (not on biases, norms).
        betas: AdamW betas; beta2=0.95 as GPT-3 / nanoGPT.
        surge: an optional :class:`LRSurge`.

    Example:
        >>> ScheduleConfig(total_steps=400, surge=LRSurge(start=240, end=260, factor=20.0)).warmup
        20
    """

    lr: float = 6e-3
    warmup: int = 20
    total_steps: int = 400
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.95)
    surge: LRSurge | None = None

    def __post_init__(self) -> None:
        if not self.lr > 0:
            raise ValueError(f"ScheduleConfig.lr must be positive, got {self.lr!r}")
        if not 0 <= self.warmup < self.total_steps:
            raise ValueError(f"ScheduleConfig needs 0 <= warmup < total_steps, got warmup={self.warmup!r}, "
                             f"total_steps={self.total_steps!r}")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"ScheduleConfig.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio!r}")
        if self.weight_decay < 0:
            raise ValueError(f"ScheduleConfig.weight_decay must be >= 0, got {self.weight_decay!r}")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"ScheduleConfig.betas must be two values in [0, 1), got {self.betas!r}")


def lr_multiplier(step: int, schedule: ScheduleConfig) -> float:
    """Factor applied to ``schedule.lr`` at optimizer step ``step`` (0-based).

    Example:
        >>> s = ScheduleConfig(warmup=10, total_steps=100, surge=LRSurge(start=50, end=60, factor=8.0))
        >>> lr_multiplier(0, s), lr_multiplier(10, s), lr_multiplier(100, s)
        (0.1, 1.0, 0.1)
    """
    if step < schedule.warmup:
        base = (step + 1) / schedule.warmup
    else:
        progress = min(1.0, (step - schedule.warmup) / (schedule.total_steps - schedule.warmup))
        cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
        base = schedule.min_lr_ratio + (1.0 - schedule.min_lr_ratio) * cosine
    if schedule.surge is not None and schedule.surge.covers(step):
        base *= schedule.surge.factor
    return base


class DemoLM(pl.LightningModule):
    """The demo GPT trained with AdamW and the schedule of ``schedule``; logs ``loss``.

    Batches are the demo loader's dicts ``{"x", "y", "index"}`` (see ``sentinel.cli.demo.data``).
    The GPT's parts are direct children (``tok_emb``, ``blocks.{i}.attn``, ``blocks.{i}.mlp``,
    ...); the GPT itself is ``lm.model``.

    Args:
        model_config: the GPT's shape.
        schedule: optimizer and learning-rate schedule (default :class:`ScheduleConfig`).
        seed: seeds the initial weights only (the data order has its own seed).

    Example:
        >>> lm = DemoLM(GPTConfig(vocab_size=33), ScheduleConfig(total_steps=400))
        >>> trainer = L.Trainer(max_steps=400)  # doctest: +SKIP
        >>> trainer.fit(lm, data.loader(batch_size=32))  # doctest: +SKIP
    """

    def __init__(self, model_config: GPTConfig, schedule: ScheduleConfig | None = None, seed: int = 0) -> None:
        super().__init__()
        self.model_config = model_config
        self.schedule = schedule if schedule is not None else ScheduleConfig()
        model = build_model(model_config, seed)
        # Register the GPT's parts on this module itself so that module paths, and so sentinel's
        # metric keys, read ``blocks.0.attn`` rather than ``model.blocks.0.attn``. The GPT object
        # shares those parts; it is kept outside ``_modules`` so nothing is registered twice.
        for name, child in model.named_children():
            self.add_module(name, child)
        self.__dict__["model"] = model

    model: GPT

    def forward(self, idx: Tensor) -> Tensor:
        return self.model(idx)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        loss = self.model.loss(batch["x"], batch["y"])
        self.log("loss", loss, on_step=True, on_epoch=False)
        return loss

    def configure_optimizers(self) -> dict[str, Any]:
        s = self.schedule
        # Decay matrices and embeddings only: decaying LayerNorm gains and biases only hurts.
        decay = [p for p in self.model.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.model.parameters() if p.dim() < 2]
        optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": s.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=s.lr, betas=s.betas,
        )
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _Multiplier(s))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


@dataclass(frozen=True)
class _Multiplier:
    # A picklable callable (a lambda would not survive a checkpoint or a deepcopy of the scheduler).
    schedule: ScheduleConfig = field()

    def __call__(self, step: int) -> float:
        return lr_multiplier(step, self.schedule)
