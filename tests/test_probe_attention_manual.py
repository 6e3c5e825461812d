"""Attention written by hand: nanoGPT's flash=False path, Hugging Face eager, bmm/einsum forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import _get_current_function_mode_stack

from sentinel.metrics import metric_key
from sentinel.probes import attention as attention_mod
from sentinel.probes.attention import (
    METRIC_FAMILIES,
    NO_ATTENTION_REASON,
    AttentionProbe,
    record_attention,
)


@pytest.fixture(autouse=True)
def _never_left_armed():
    yield
    leaked = attention_mod._ARMED
    if leaked is not None:
        leaked.stop()
        pytest.fail("a test left an AttentionProbe armed")


# ----------------------------------------------------------------------------- references


def entropy_of_probs(probs: torch.Tensor) -> tuple[float, float]:
    """Mean and lowest-head entropy of (B, H, Lq, Lk) probabilities, in float64."""
    p = probs.detach().double().numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        rows = -np.where(p > 0, p * np.log(p), 0.0).sum(-1)  # (B, H, Lq)
    return float(rows.mean()), float(rows.mean(axis=(0, 2)).min())


def max_finite(logits: torch.Tensor) -> float:
    z = logits.detach().double().numpy()
    return float(z[np.isfinite(z)].max())


def softmax64(logits: torch.Tensor) -> torch.Tensor:
    return torch.softmax(logits.detach().double(), dim=-1)


def keys_for(*names: str) -> set[str]:
    return {metric_key(f, n) for f in METRIC_FAMILIES for n in names}


def all_hooks(model: nn.Module) -> int:
    return sum(
        len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._forward_hooks_with_kwargs)
        for m in model.modules()
    )


def assert_matches(metrics: dict, name: str, probs: torch.Tensor, logits: torch.Tensor) -> None:
    ent, ent_min = entropy_of_probs(probs)
    assert float(metrics[metric_key("attn_entropy", name)]) == pytest.approx(ent, abs=1e-5)
    assert float(metrics[metric_key("attn_entropy_min", name)]) == pytest.approx(ent_min, abs=1e-5)
    assert float(metrics[metric_key("attn_logit_max", name)]) == pytest.approx(
        max_finite(logits), abs=1e-5
    )


# ----------------------------------------------------------------------------- nanoGPT, flash=False


class CausalSelfAttention(nn.Module):
    """nanoGPT's CausalSelfAttention on its manual path; `style` varies how scores are made."""

    def __init__(
        self, n_embd: int = 8, n_head: int = 2, block_size: int = 8, dropout: float = 0.0,
        style: str = "matmul",
    ) -> None:
        super().__init__()
        self.n_head, self.n_embd, self.style = n_head, n_embd, style
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.softmax = nn.Softmax(dim=-1)
        causal = torch.tril(torch.ones(block_size, block_size))
        self.register_buffer("bias", causal.view(1, 1, block_size, block_size))

    def qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        shape = (b, t, self.n_head, c // self.n_head)
        return tuple(z.view(shape).transpose(1, 2) for z in (q, k, v))  # (B, nh, T, hs)

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """The masked, scaled scores the forward softmaxes, recomputed as nanoGPT writes them."""
        t = x.size(1)
        q, k, _ = self.qkv(x)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        return att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        q, k, v = self.qkv(x)
        scale = 1.0 / math.sqrt(k.size(-1))
        causal = self.bias[:, :, :t, :t] == 0
        if self.style == "matmul":
            att = (q @ k.transpose(-2, -1)) * scale
            att = att.masked_fill(causal, float("-inf"))
            att = F.softmax(att, dim=-1)
        elif self.style == "einsum":
            att = torch.einsum("bhqd,bhkd->bhqk", q, k) * scale
            att = att.masked_fill(causal, float("-inf"))
            att = att.softmax(dim=3)
        elif self.style == "softmax_module":
            att = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(k.size(-1))
            att = att + torch.zeros_like(att).masked_fill(causal, float("-inf"))
            att = self.softmax(att)
        else:  # "bmm": scores over (B * nh, T, T), viewed back to heads before the softmax
            hs = k.size(-1)
            att = torch.bmm(q.reshape(-1, t, hs), k.reshape(-1, t, hs).transpose(1, 2))
            att = att.view(b, self.n_head, t, t).mul_(scale)
            att.masked_fill_(causal, float("-inf"))
            att = torch.softmax(att, -1)
        att = self.attn_dropout(att)
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, n_embd: int = 8) -> None:
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, **kw) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(8)
        self.attn = CausalSelfAttention(**kw)
        self.ln_2 = nn.LayerNorm(8)
        self.mlp = MLP()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    def __init__(self, layers: int = 2, **kw) -> None:
        super().__init__()
        self.h = nn.ModuleList(Block(**kw) for _ in range(layers))
        self.lm_head = nn.Linear(8, 16, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.h:
            x = block(x)
        # x @ W.T followed by a softmax over the vocabulary is not attention.
        return F.softmax(x @ self.lm_head.weight.T, dim=-1)


def block_inputs(model: TinyGPT, x: torch.Tensor, seed: int = 0) -> list[torch.Tensor]:
    """The input of each block's attention (ln_1 output), from an unprobed forward."""
    torch.manual_seed(seed)  # the same dropout masks as the probed forward
    seen: list[torch.Tensor] = []
    handles = [b.attn.register_forward_pre_hook(lambda m, a: seen.append(a[0])) for b in model.h]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return seen


@pytest.mark.parametrize("style", ["matmul", "einsum", "softmax_module", "bmm"])
def test_nanogpt_manual_attention_equals_its_own_probabilities(style: str) -> None:
    torch.manual_seed(0)
    model = TinyGPT(style=style, dropout=0.1)  # dropout after the softmax: train mode
    x = torch.randn(3, 6, 8) * 3

    probe = AttentionProbe(model, every=1)
    torch.manual_seed(1)
    ref_out = model(x)
    assert probe.start(0)
    torch.manual_seed(1)
    out = model(x)
    metrics = probe.stop()
    assert torch.equal(out, ref_out)  # bitwise: the probe only observes

    assert set(metrics) == keys_for("h.0.attn", "h.1.attn")
    assert probe.modules == ["h.0.attn", "h.1.attn"] and probe.no_attention_reason is None
    for i, inp in enumerate(block_inputs(model, x, seed=1)):
        with torch.no_grad():
            att = model.h[i].attn.scores(inp)  # (B, nh, T, T)
        assert_matches(metrics, f"h.{i}.attn", softmax64(att), att)
    assert all(v.dim() == 0 and v.dtype == torch.float32 for v in metrics.values())
    assert all_hooks(model) == 0 and _get_current_function_mode_stack() == []


def test_manual_attention_measured_on_the_first_max_batch_sequences() -> None:
    torch.manual_seed(2)
    model = TinyGPT(layers=1)
    x = torch.randn(6, 5, 8)
    probe = AttentionProbe(model, every=1, max_batch=2)
    probe.start(0)
    model(x)
    metrics = probe.stop()
    with torch.no_grad():
        att = model.h[0].attn.scores(block_inputs(model, x)[0][:2])
    assert_matches(metrics, "h.0.attn", softmax64(att), att)


def test_manual_attention_under_autocast_is_measured_in_float32() -> None:
    torch.manual_seed(3)
    model = TinyGPT()
    x = torch.randn(2, 5, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = model(x)
        probe = AttentionProbe(model, every=1)
        probe.start(0)
        out = model(x)
        metrics = probe.stop()
    assert torch.equal(out, ref)
    assert set(metrics) == keys_for("h.0.attn", "h.1.attn")
    assert all(v.dtype == torch.float32 and math.isfinite(float(v)) for v in metrics.values())


def test_manual_attention_backward_unchanged() -> None:
    torch.manual_seed(4)
    model = TinyGPT()
    x = torch.randn(2, 5, 8)
    model(x).square().sum().backward()
    ref = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    probe = AttentionProbe(model, every=1)
    probe.start(0)
    loss = model(x).square().sum()
    probe.stop()
    loss.backward()
    assert all(torch.equal(p.grad, r) for p, r in zip(model.parameters(), ref))


# ----------------------------------------------------------------------------- attribution, once


class ScoresThenSoftmax(nn.Module):
    """Not named like attention: the softmax is attributed to it as the innermost own module."""

    def __init__(self) -> None:
        super().__init__()
        self.qk = nn.Linear(4, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k = self.qk(x).view(b, t, 2, 4).transpose(1, 2).chunk(2, dim=-1)  # (B, nh, T, 2)
        return (q @ k.mT).softmax(-1).sum()


class Holder(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def test_unnamed_module_gets_the_attention_of_its_own_forward() -> None:
    model = Holder(ScoresThenSoftmax())
    probe = AttentionProbe(model, every=1)
    probe.start(0)
    model(torch.randn(2, 3, 4))
    assert set(probe.stop()) == keys_for("inner")


class ManualAndReported(nn.Module):
    """Computes attention by hand and also reports it itself, with or without its name."""

    def __init__(self, how: str) -> None:
        super().__init__()
        self.qk = nn.Linear(4, 8)
        self.how = how

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k = self.qk(x).view(b, t, 2, 4).transpose(1, 2).chunk(2, dim=-1)  # (B, nh, T, 2)
        if self.how == "sdpa":
            y = F.scaled_dot_product_attention(q, k, k)
        logits = q @ k.mT / math.sqrt(2)
        probs = logits.softmax(-1)
        if self.how == "record_module":
            record_attention(self, probs=probs, logits=logits)
        elif self.how == "record_name":
            record_attention("custom.attn", probs=probs, logits=logits)
        return probs.sum() if self.how != "sdpa" else y.sum() + probs.sum()


@pytest.mark.parametrize(
    "how, name",
    [("record_module", "attention"), ("record_name", "custom.attn"), ("sdpa", "attention")],
)
def test_module_seen_by_another_path_is_not_counted_twice(how: str, name: str) -> None:
    torch.manual_seed(5)
    model = nn.Sequential()
    model.attention = ManualAndReported(how)
    x = torch.randn(2, 3, 4)
    probe = AttentionProbe(model, every=1)
    probe.start(0)
    model(x)
    metrics = probe.stop()
    assert set(metrics) == keys_for(name)
    with torch.no_grad():
        q, k = model.attention.qk(x).view(2, 3, 2, 4).transpose(1, 2).chunk(2, dim=-1)
        logits = q @ k.mT / math.sqrt(2)
    assert_matches(metrics, name, softmax64(logits), logits)


def test_multihead_attention_is_measured_once() -> None:
    torch.manual_seed(6)
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    model = Holder(mha).eval()
    probe = AttentionProbe(model, every=1)
    probe.start(0)
    x = torch.randn(2, 4, 8)
    _, w = mha(x, x, x, need_weights=True, average_attn_weights=False)
    metrics = probe.stop()
    assert set(metrics) == keys_for("inner")
    ent, _ = entropy_of_probs(w)
    assert float(metrics["attn_entropy/inner"]) == pytest.approx(ent, abs=1e-5)


class NotAttention(nn.Module):
    """Softmaxes that are not attention: over a weight product, and over a non-last dim."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = F.softmax(x @ self.w, dim=-1)  # (B, T, 4) @ (4, 4): a weight, not keys
        s = x @ x.transpose(-2, -1)  # (B, T, T) scores, but softmaxed over the queries
        return a.sum() + F.softmax(s, dim=1).sum()


def test_softmax_that_is_not_attention_records_nothing_and_says_why() -> None:
    model = NotAttention()
    probe = AttentionProbe(model, every=1)
    assert probe.no_attention_reason is None  # nothing sampled yet
    probe.start(0)
    model(torch.randn(2, 3, 4))
    assert probe.stop() == {}
    assert probe.found_any is False
    assert probe.no_attention_reason == NO_ATTENTION_REASON
    assert "sentinel.probes.attention.record_attention(" in NO_ATTENTION_REASON
    assert "\n" not in NO_ATTENTION_REASON
    assert callable(getattr(attention_mod, "record_attention"))


# ----------------------------------------------------------------------------- disarmed: zero cost


class SeesModes(nn.Module):
    """Records how many torch-function modes are active inside its forward."""

    def __init__(self) -> None:
        super().__init__()
        self.attn = CausalSelfAttention()
        self.modes: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.modes.append(len(_get_current_function_mode_stack()))
        return self.attn(x)


def test_disarmed_installs_nothing_and_outputs_are_bitwise_identical() -> None:
    torch.manual_seed(7)
    model = SeesModes()
    x = torch.randn(2, 5, 8)
    probe = AttentionProbe(model, every=2)

    assert probe.start(1) is False  # not a sampled step
    assert all_hooks(model) == 0 and attention_mod._ARMED is None
    disarmed = model(x)
    assert probe.stop() == {}

    assert probe.start(2) is True
    assert all_hooks(model) > 0
    armed = model(x)
    metrics = probe.stop()
    assert all_hooks(model) == 0 and _get_current_function_mode_stack() == []

    assert model.modes == [0, 1]  # the mode is there only while armed
    assert torch.equal(armed, disarmed)
    assert set(metrics) == keys_for("attn")


# ----------------------------------------------------------------------------- Hugging Face eager


@pytest.fixture
def transformers():
    return pytest.importorskip("transformers")


def hf_probe(model: nn.Module, **inputs) -> tuple[dict, object, object]:
    """Metrics of one armed forward, that forward's output and an unprobed one's."""
    with torch.no_grad():
        ref = model(**inputs, output_attentions=True)
        hooks = all_hooks(model)  # transformers registers its own on a first forward
        probe = AttentionProbe(model, every=1)
        probe.start(0)
        out = model(**inputs, output_attentions=True)
        metrics = probe.stop()
    assert torch.equal(out.logits, ref.logits)
    assert all(torch.equal(a, b) for a, b in zip(out.attentions, ref.attentions))
    assert all_hooks(model) == hooks and _get_current_function_mode_stack() == []
    return metrics, out, probe


@pytest.mark.parametrize("reorder_and_upcast", [False, True])
def test_hf_gpt2_eager(transformers, reorder_and_upcast: bool) -> None:
    torch.manual_seed(8)
    config = transformers.GPT2Config(
        vocab_size=32, n_positions=16, n_embd=16, n_layer=2, n_head=4,
        bos_token_id=0, eos_token_id=0,
        reorder_and_upcast_attn=reorder_and_upcast, attn_implementation="eager",
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, 32, (2, 7))

    qk: list[torch.Tensor] = []  # c_attn outputs: q, k, v of each layer
    handles = [
        b.attn.c_attn.register_forward_hook(lambda m, a, o: qk.append(o))
        for b in model.transformer.h
    ]
    metrics, out, _ = hf_probe(model, input_ids=ids)
    for h in handles:
        h.remove()

    names = [f"transformer.h.{i}.attn" for i in range(2)]
    assert set(metrics) == keys_for(*names)
    for i, name in enumerate(names):
        q, k, _ = qk[i].split(16, dim=2)
        q, k = (z.view(2, 7, 4, 4).transpose(1, 2).double() for z in (q, k))
        logits = (q @ k.transpose(-2, -1) / 2.0).masked_fill(
            torch.ones(7, 7, dtype=torch.bool).triu(1), float("-inf")
        )
        probs = out.attentions[i]
        assert torch.allclose(softmax64(logits), probs.double(), atol=1e-6)  # same scores
        assert_matches(metrics, name, probs, logits)


def test_hf_llama_eager_with_gqa_and_padding(transformers, monkeypatch) -> None:
    from transformers.models.llama import modeling_llama

    torch.manual_seed(9)
    config = transformers.LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
        attn_implementation="eager",
    )
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 32, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, -2:] = 0  # right padding in the second sequence

    seen: list[tuple] = []  # the q, k and scale the model's own attention gets
    original = modeling_llama.eager_attention_forward

    def spy(module, query, key, value, attention_mask, scaling, **kw):  # noqa: ANN001
        seen.append((query, modeling_llama.repeat_kv(key, module.num_key_value_groups), scaling))
        return original(module, query, key, value, attention_mask, scaling, **kw)

    monkeypatch.setattr(modeling_llama, "eager_attention_forward", spy)
    metrics, out, _ = hf_probe(model, input_ids=ids, attention_mask=mask)

    names = [f"model.layers.{i}.self_attn" for i in range(2)]
    assert set(metrics) == keys_for(*names)
    causal = torch.ones(6, 6, dtype=torch.bool).triu(1)
    padded = (mask == 0)[:, None, None, :]  # (B, 1, 1, Lk)
    for i, name in enumerate(names):
        q, k, scaling = seen[2 + i]  # the probed forward's calls (the reference ran first)
        logits = (q.double() @ k.double().transpose(-2, -1) * scaling).masked_fill(
            causal | padded, float("-inf")
        )
        probs = out.attentions[i]
        assert torch.allclose(softmax64(logits), probs.double(), atol=1e-6)
        assert_matches(metrics, name, probs, logits)
