"""A small GPT-style decoder shared by the benchmarks (torch only, no Lightning).

Pre-norm blocks, causal attention through ``F.scaled_dot_product_attention`` (so sentinel's
attention probe intercepts it), GELU MLP, learned positions, head tied to the token
embedding as in GPT-2. The default :class:`GPTConfig` is the benchmark workload: 4 layers,
d_model 256, 4 heads, seq 128, vocab 4096 (4.2M parameters, 50 parameter tensors).

Example:
    >>> cfg = GPTConfig(layers=2)
    >>> model = GPT.from_config(cfg)
    >>> tokens = random_tokens(cfg, batch=2, count=1)[0]
    >>> float(lm_loss(model, tokens).detach()) > 0
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True, kw_only=True, slots=True)
class GPTConfig:
    """Shape of the benchmark GPT.

    Attributes:
        vocab: vocabulary size (4096: a real softmax cost without dominating the step).
        seq: tokens per sequence (128).
        d: model width (256); must divide by ``heads``.
        layers: transformer blocks (4; 12 gives 148 parameter tensors for the grad-norm bench).
        heads: attention heads (4).
    """

    vocab: int = 4096
    seq: int = 128
    d: int = 256
    layers: int = 4
    heads: int = 4

    def __post_init__(self) -> None:
        for name in ("vocab", "seq", "d", "layers", "heads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"GPTConfig.{name}={value!r} is invalid: pass an integer >= 1")
        if self.d % self.heads:
            raise ValueError(f"GPTConfig d={self.d} does not divide into heads={self.heads}: "
                             "pick d a multiple of heads")


class Block(nn.Module):
    """One pre-norm transformer block: causal self-attention, then an MLP."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Token + position embedding, ``layers`` blocks, final norm, tied LM head."""

    def __init__(self, vocab: int, seq: int, d: int, layers: int, heads: int) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied, as GPT-2

    @classmethod
    def from_config(cls, cfg: GPTConfig) -> "GPT":
        return cls(cfg.vocab, cfg.seq, cfg.d, cfg.layers, cfg.heads)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))  # (B, T, vocab)


def lm_loss(model: nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy of ``tokens`` (``(B, seq + 1)``) under ``model``."""
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def random_tokens(cfg: GPTConfig, batch: int, count: int, seed: int = 0) -> torch.Tensor:
    """``count`` batches of uniform random tokens, ``(count, batch, seq + 1)``, seeded."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, cfg.vocab, (count, batch, cfg.seq + 1), generator=gen)
