"""A small GPT for the demo: token + position embeddings, pre-LayerNorm blocks, causal attention.

Module paths are part of the contract with the recorder, which keys metrics by them:
``blocks.{i}.attn`` (attention, calls ``torch.nn.functional.scaled_dot_product_attention``) and
``blocks.{i}.mlp``. The attention has no qk-LayerNorm on purpose: without it, a learning rate
that is too high lets the attention logits grow until the softmax saturates (attention entropy
collapse, Zhai et al. 2023; Wortsman et al. 2023), which is one of the pathologies the demo shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass(frozen=True, kw_only=True, slots=True)
class GPTConfig:
    """Shape of the demo model.

    Attributes:
        vocab_size: number of token ids (the character tokenizer's size).
        block_size: longest sequence the position embedding covers.
        n_layer: transformer blocks. 2 is enough for a character model to learn the demo grammar
            and keeps a CPU step short.
        n_head: attention heads per block; must divide ``n_embd``.
        n_embd: width of the residual stream. 64: a step of batch 32 x 64 tokens takes tens of
            milliseconds on a laptop CPU.
        tie_weights: share the token embedding with the output head (as GPT-2 / nanoGPT).

    Example:
        >>> GPTConfig(vocab_size=40, block_size=64).n_embd
        64
    """

    vocab_size: int
    block_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    tie_weights: bool = True

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"GPTConfig.{name} must be a positive integer, got {value!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"GPTConfig.n_embd={self.n_embd} is not divisible by n_head={self.n_head}: "
                             "choose n_head among the divisors of n_embd")


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention through ``F.scaled_dot_product_attention``."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.proj = nn.Linear(config.n_embd, config.n_embd)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))

    def attention_logits(self, x: Tensor) -> Tensor:
        """Pre-softmax scores the forward would use, causal positions masked with ``-inf``.

        For diagnostics on a sample (the forward itself never materialises them).

        Example:
            >>> attn = CausalSelfAttention(GPTConfig(vocab_size=8))
            >>> attn.attention_logits(torch.zeros(1, 5, 64)).shape
            torch.Size([1, 4, 5, 5])
        """
        B, T, C = x.shape
        q, k, _ = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        scores = q @ k.transpose(-2, -1) / math.sqrt(C // self.n_head)  # (B, nh, T, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        return scores.masked_fill(~causal, float("-inf"))


class MLP(nn.Module):
    """Position-wise feed-forward: 4x expansion, GELU."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.proj = nn.Linear(4 * config.n_embd, config.n_embd)

    def forward(self, x: Tensor) -> Tensor:
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = MLP(config)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """A small GPT language model; ``forward(idx)`` returns logits ``(B, T, vocab_size)``.

    Example:
        >>> torch.manual_seed(0)  # doctest: +ELLIPSIS
        <torch._C.Generator object at ...>
        >>> model = GPT(GPTConfig(vocab_size=40, block_size=16))
        >>> model(torch.zeros(2, 16, dtype=torch.long)).shape
        torch.Size([2, 16, 40])
    """

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd)
        self.pos_emb = nn.Embedding(config.block_size, config.n_embd)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_weights:
            self.head.weight = self.tok_emb.weight
        self.apply(_init_weights)
        # GPT-2: scale the residual projections by depth so the stream does not grow with n_layer.
        for name, param in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def forward(self, idx: Tensor) -> Tensor:
        B, T = idx.shape
        if T > self.config.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size={self.config.block_size}: "
                             "crop the input or build the model with a larger block_size")
        pos = torch.arange(T, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)  # (B, T, C)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))  # (B, T, vocab)

    def loss(self, idx: Tensor, targets: Tensor) -> Tensor:
        """Mean next-token cross-entropy in nats (a 0-d tensor, no host sync).

        Example:
            >>> model = GPT(GPTConfig(vocab_size=8, block_size=4))
            >>> model.loss(torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 4, dtype=torch.long)).dim()
            0
        """
        logits = self(idx)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def build_model(config: GPTConfig, seed: int = 0) -> GPT:
    """Build a :class:`GPT` whose initial weights depend only on ``seed`` (not the global RNG).

    Example:
        >>> a, b = build_model(GPTConfig(vocab_size=8), 1), build_model(GPTConfig(vocab_size=8), 1)
        >>> torch.equal(a.tok_emb.weight, b.tok_emb.weight)
        True
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return GPT(config)


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
