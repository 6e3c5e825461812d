"""The demo's calibrated scenario: model size, data, steps, where the two faults strike.

Two pathologies, both real training dynamics on a tiny GPT (only their trigger is placed):

1. **Bad data** (``bad``): batches 160-164 carry random tokens with random targets. The loss on
   them jumps from ~1.1 to ~7.9 nats at once, and the updates they cause damage the model: the
   clean-data loss is still ~1.4 forty steps later (clean run: ~0.85). Skipping them removes
   the damage.
2. **LR surge** (``surge``): the learning rate is 20x too high for steps 240-259. Within a step
   or two the loss goes from ~0.95 to ~3-4.7 nats, attention logits grow (max 8 -> ~90) and the
   attention entropy of both blocks falls (block 0 collapses: ~2.0 -> ~0.6 nats; block 1 more
   slowly: ~2.5 -> ~0.9 by step 350), and the run never comes back (~2.5 nats at step 400). Rolling back and lowering the
   learning rate for a while (the guard's ``lr_factor`` / ``cooldown``) gets past it.

Example:
    >>> scenario = DemoScenario()
    >>> lm, loader = scenario.build(faults=True)  # doctest: +SKIP
    >>> L.Trainer(max_steps=scenario.steps).fit(lm, loader)  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch.utils.data import DataLoader

from sentinel.cli.demo.data import BadBatches, DemoData
from sentinel.cli.demo.model import GPTConfig
from sentinel.cli.demo.module import DemoLM, LRSurge, ScheduleConfig


@dataclass(frozen=True, kw_only=True, slots=True)
class DemoScenario:
    """Settings of one demo run; the defaults are the calibrated ones.

    Attributes:
        steps: optimizer steps (``Trainer(max_steps=...)``); also the schedule's length.
        batch_size: windows per batch.
        block_size: tokens per window.
        n_layer / n_head / n_embd: the GPT's shape (see :class:`GPTConfig`).
        lr: peak learning rate (see :class:`ScheduleConfig`).
        bad: the corrupted batches (pathology 1).
        surge: the learning-rate surge (pathology 2).
        num_chars: length of the generated corpus; 300k characters give ~300k windows, so a
            400-step run stays inside one epoch and each bad sample is seen once.
        data_seed: seeds the corpus and the sample order.
        model_seed: seeds the initial weights.
        precision: the Trainer's ``precision``. Float64, so that the demo prints the same on
            every CPU: in float32 the AVX2 and AVX-512 kernels round differently, and a run
            through a 20x learning-rate surge grows that into other values, a grad-norm outlier
            more or less, another collapse line (measured: 0.956 against 0.977 nats, one more
            incident with AVX2). It trains ~2.3x slower (~60 s for both runs).
    """

    steps: int = 400
    batch_size: int = 32
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    lr: float = 6e-3
    bad: BadBatches = field(default_factory=lambda: BadBatches.stretch(start=160, length=5, mode="random"))
    surge: LRSurge = field(default_factory=lambda: LRSurge(start=240, end=260, factor=20.0))
    num_chars: int = 300_000
    data_seed: int = 0
    model_seed: int = 0
    precision: str = "64-true"

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError(f"DemoScenario needs steps >= 1 and batch_size >= 1, got steps={self.steps!r}, "
                             f"batch_size={self.batch_size!r}")
        if self.surge.end > self.steps or any(p >= self.steps for p in self.bad.positions):
            raise ValueError(f"DemoScenario faults fall after the last step {self.steps}: move the bad "
                             "batches and the surge earlier or raise steps")

    def schedule(self, faults: bool = True) -> ScheduleConfig:
        """The schedule, with the surge when ``faults``."""
        return ScheduleConfig(lr=self.lr, total_steps=self.steps, surge=self.surge if faults else None)

    def data(self) -> DemoData:
        """Corpus, tokenizer and windows (build once, share between runs)."""
        return DemoData.build(block_size=self.block_size, num_chars=self.num_chars, seed=self.data_seed)

    def build(self, faults: bool = True, data: DemoData | None = None) -> tuple[DemoLM, DataLoader]:
        """A fresh module and loader; both runs of the demo start from identical weights and data.

        Args:
            faults: corrupt the ``bad`` batches and surge the learning rate.
            data: a :class:`DemoData` from :meth:`data`, to avoid regenerating the corpus.
        """
        data = data if data is not None else self.data()
        config = GPTConfig(vocab_size=data.tokenizer.vocab_size, block_size=self.block_size,
                           n_layer=self.n_layer, n_head=self.n_head, n_embd=self.n_embd)
        lm = DemoLM(config, self.schedule(faults), seed=self.model_seed)
        loader = data.loader(self.batch_size, seed=self.data_seed, bad=self.bad if faults else None)
        return lm, loader

    def guard_options(self) -> dict[str, Any]:
        """Sentinel options that recover this scenario (measured; see the module docstring).

        ``lr_factor=0.1`` for ``cooldown=50`` steps after a rollback takes the surge at ~2x the
        normal peak instead of 20x; the cool-down must outlast the distance from the restored
        step to the end of the surge. ``skip_after=5`` covers the 5 bad batches in one rollback.
        """
        return {"lr_factor": 0.1, "cooldown": 50, "skip_after": len(self.bad.positions)}
