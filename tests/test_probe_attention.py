"""Attention probe: exact entropy values, mask handling, MHA recomputation, hook hygiene."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.overrides import _get_current_function_mode_stack

from sentinel.metrics import ATTN_ENTROPY, ATTN_ENTROPY_MIN_HEAD, ATTN_LOGIT_MAX, metric_key
from sentinel.probes import attention as attention_mod
from sentinel.probes.attention import (
    METRIC_FAMILIES,
    AttentionProbe,
    _mha_logits,
    attention_stats,
    record_attention,
)

@pytest.fixture(autouse=True)
def _never_left_armed():
    yield
    leaked = attention_mod._ARMED
    if leaked is not None:
        leaked.stop()
        pytest.fail("a test left an AttentionProbe armed")


# ----------------------------------------------------------------------------- tiny models


class SDPAAttention(nn.Module):
    """Causal self-attention calling F.scaled_dot_product_attention, nanoGPT-style."""

    def __init__(self, dim: int = 8, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def qk(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        shape = (b, t, self.heads, c // self.heads)
        return tuple(z.view(shape).transpose(1, 2) for z in (q, k, v))  # (B, nh, T, hs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qk(x)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.attn = SDPAAttention(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln(x))
        return x + self.mlp(x)


class TinySDPATransformer(nn.Module):
    def __init__(self, dim: int = 8, layers: int = 2) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class TinyMHA(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, 2, batch_first=True)
        self.head = nn.Linear(dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.attn(x, x, x, need_weights=False)
        return self.head(y)


class CallsSDPA(nn.Module):
    """Calls SDPA with given q, k (stored) once per entry of `calls`."""

    def __init__(self, calls: list[dict]) -> None:
        super().__init__()
        self.calls = calls

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x.sum()
        for c in self.calls:
            y = F.scaled_dot_product_attention(c["q"], c["k"], c["k"], **c.get("kw", {}))
            out = out + y.sum()
        return out


class Wrapper(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


def probe_once(
    model: nn.Module, x: torch.Tensor, **kw
) -> tuple[dict, torch.Tensor, AttentionProbe]:
    probe = AttentionProbe(model, every=1, **kw)
    assert probe.start(0)
    out = model(x)
    return probe.stop(), out, probe


def sdpa_metrics(*calls: dict) -> dict[str, torch.Tensor]:
    """Metrics of one armed forward of a module `inner` making the given SDPA calls."""
    return probe_once(Wrapper(CallsSDPA(list(calls))), torch.zeros(1))[0]


def floats(metrics: dict) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items()}


def np_entropy(logits: np.ndarray) -> np.ndarray:
    """Row entropies of softmax(logits) in float64, -inf entries excluded (independent path)."""
    m = logits.max(-1, keepdims=True)
    e = np.exp(logits - m)
    p = e / e.sum(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log(p), 0.0)
    return -plogp.sum(-1)


# ----------------------------------------------------------------------------- pure statistics


def test_uniform_attention_entropy_is_log_len() -> None:
    torch.manual_seed(0)
    q = torch.zeros(2, 3, 5, 4)
    k = torch.randn(2, 3, 7, 4)
    ent, ent_min, lmax = attention_stats(logits=q @ k.transpose(-2, -1))
    assert abs(float(ent) - math.log(7)) < 1e-5
    assert abs(float(ent_min) - math.log(7)) < 1e-5
    assert float(lmax) == 0.0
    # Same through the probe intercepting SDPA.
    metrics = sdpa_metrics({"q": q, "k": k})
    assert abs(float(metrics["attn_entropy/inner"]) - math.log(7)) < 1e-5
    assert abs(float(metrics["attn_entropy_min/inner"]) - math.log(7)) < 1e-5


def test_one_hot_attention_entropy_is_zero() -> None:
    logits = torch.zeros(2, 2, 4, 6)
    logits[..., 3] = 1e4  # every row puts all its mass on key 3
    ent, ent_min, lmax = attention_stats(logits=logits)
    assert float(ent) == 0.0 and float(ent_min) == 0.0
    assert float(lmax) == 1e4
    probs = torch.softmax(logits, -1)
    ent_p, _, lmax_p = attention_stats(probs=probs)
    assert float(ent_p) == 0.0 and math.isnan(float(lmax_p))


def test_causal_mask_gives_mean_log_row_length() -> None:
    L = 6
    expected = sum(math.log(i + 1) for i in range(L)) / L
    q = torch.zeros(2, 2, L, 4)
    k = torch.randn(2, 2, L, 4, generator=torch.Generator().manual_seed(1))
    metrics = sdpa_metrics({"q": q, "k": k, "kw": {"is_causal": True}})
    assert abs(float(metrics["attn_entropy/inner"]) - expected) < 1e-5
    assert abs(float(metrics["attn_entropy_min/inner"]) - expected) < 1e-5
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    assert abs(float(attention_stats(logits=q @ k.mT, mask=causal)[0]) - expected) < 1e-5


def test_explicit_masks_bool_and_additive_are_respected() -> None:
    g = torch.Generator().manual_seed(2)
    B, H, L, S, E = 2, 2, 4, 5, 3
    q, k = torch.randn(B, H, L, E, generator=g), torch.randn(B, H, S, E, generator=g)
    allowed = torch.rand(B, 1, L, S, generator=g) > 0.4
    allowed[..., 0] = True  # every row keeps at least one key
    allowed[..., -1] = False  # the last key is masked everywhere
    additive = torch.zeros(B, 1, L, S).masked_fill(~allowed, float("-inf"))
    # A huge score on a masked key must neither count in the max nor in the entropy.
    k_big = k.clone()
    k_big[:, :, -1] = 100.0
    for kk in (k, k_big):
        logits = (q @ kk.mT) / math.sqrt(E)
        ref_logits = logits.double().numpy().copy()
        ref_logits[~np.broadcast_to(allowed.numpy(), ref_logits.shape)] = -np.inf
        ref_rows = np_entropy(ref_logits)  # (B, H, L)
        for mask in (allowed, additive):
            m = sdpa_metrics({"q": q, "k": kk, "kw": {"attn_mask": mask}})
            head_min = ref_rows.mean((0, 2)).min()
            assert float(m["attn_entropy/inner"]) == pytest.approx(ref_rows.mean(), abs=1e-5)
            assert float(m["attn_entropy_min/inner"]) == pytest.approx(head_min, abs=1e-5)
            assert float(m["attn_logit_max/inner"]) == pytest.approx(ref_logits.max(), abs=1e-5)
        assert float(m["attn_logit_max/inner"]) < 50.0
    # A finite additive bias (ALiBi-like) is part of the score softmax sees.
    bias = torch.randn(1, H, L, S, generator=g)
    logits = (q @ k.mT) / math.sqrt(E) + bias
    ent, _, lmax = attention_stats(logits=(q @ k.mT) / math.sqrt(E), mask=bias)
    assert float(ent) == pytest.approx(np_entropy(logits.double().numpy()).mean(), abs=1e-5)
    assert float(lmax) == pytest.approx(float(logits.max()), abs=1e-6)


def test_fully_masked_rows_are_left_out() -> None:
    logits = torch.zeros(1, 1, 3, 4)
    mask = torch.ones(1, 1, 3, 4, dtype=torch.bool)
    mask[0, 0, 2] = False  # row 2 sees nothing
    ent, ent_min, lmax = attention_stats(logits=logits, mask=mask)
    assert abs(float(ent) - math.log(4)) < 1e-6 and abs(float(ent_min) - math.log(4)) < 1e-6
    assert float(lmax) == 0.0


def test_attention_stats_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="neither probs nor logits"):
        attention_stats()
    with pytest.raises(ValueError, match="mask without logits"):
        attention_stats(probs=torch.ones(1, 1, 2, 2) / 2, mask=torch.ones(2, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        attention_stats(logits=torch.zeros(3))


def test_gqa_repeats_key_heads() -> None:
    g = torch.Generator().manual_seed(3)
    q, k = torch.randn(1, 4, 3, 2, generator=g), torch.randn(1, 2, 3, 2, generator=g)
    m = sdpa_metrics({"q": q, "k": k, "kw": {"enable_gqa": True}})
    ref = attention_stats(logits=q @ k.repeat_interleave(2, dim=1).mT / math.sqrt(2))
    assert float(m["attn_entropy/inner"]) == pytest.approx(float(ref[0]), abs=1e-6)
    assert float(m["attn_logit_max/inner"]) == pytest.approx(float(ref[2]), abs=1e-6)


def test_several_calls_in_one_module_aggregate() -> None:
    g = torch.Generator().manual_seed(4)
    q1, k1 = torch.zeros(1, 2, 3, 2), torch.randn(1, 2, 4, 2, generator=g)  # uniform: log 4
    q2, k2 = torch.randn(1, 2, 3, 2, generator=g) * 3, torch.randn(1, 2, 4, 2, generator=g) * 3
    m = sdpa_metrics({"q": q1, "k": k1}, {"q": q2, "k": k2})
    s1 = [float(v) for v in attention_stats(logits=q1 @ k1.mT / math.sqrt(2))]
    s2 = [float(v) for v in attention_stats(logits=q2 @ k2.mT / math.sqrt(2))]
    assert float(m["attn_entropy/inner"]) == pytest.approx((s1[0] + s2[0]) / 2, abs=1e-6)
    assert float(m["attn_entropy_min/inner"]) == pytest.approx(min(s1[1], s2[1]), abs=1e-6)
    assert float(m["attn_logit_max/inner"]) == pytest.approx(max(s1[2], s2[2]), abs=1e-6)


# ----------------------------------------------------------------------------- MultiheadAttention


MHA_CASES = {
    "packed": dict(),
    "seq_first": dict(batch_first=False),
    "kdim_vdim": dict(kdim=5, vdim=3),
    "bias_kv_zero_attn": dict(add_bias_kv=True, add_zero_attn=True),
    "no_bias": dict(bias=False),
}


MASK_CASES = ["none", "kpm_bool", "attn_bool", "attn_float_3d", "both", "causal"]


@pytest.mark.parametrize("case", list(MHA_CASES))
@pytest.mark.parametrize("masks", MASK_CASES)
def test_mha_recomputation_equals_mha_weights(case: str, masks: str) -> None:
    torch.manual_seed(5)
    kw = {"batch_first": True} | MHA_CASES[case]
    mha = nn.MultiheadAttention(8, 2, **kw).eval()
    if mha.bias_k is not None:
        nn.init.normal_(mha.bias_k)
    B, L, S = 3, 4, 5
    kdim = kw.get("kdim", 8)
    q_in, k_in = torch.randn(B, L, 8), torch.randn(B, S, kdim)
    v_in = torch.randn(B, S, kw.get("vdim", 8))
    if not mha.batch_first:
        q_in, k_in, v_in = (t.transpose(0, 1) for t in (q_in, k_in, v_in))
    kpm = attn = None
    is_causal = False
    if masks in ("kpm_bool", "both"):
        kpm = torch.zeros(B, S, dtype=torch.bool)
        kpm[0, -2:] = True
        kpm[2, 1] = True
    if masks in ("attn_bool", "both"):
        attn = torch.zeros(L, S, dtype=torch.bool)
        attn[1, 2:] = True
    if masks == "attn_float_3d":
        attn = torch.randn(B * 2, L, S)
    if masks == "causal":  # MHA takes is_causal only as a hint next to an explicit mask
        attn, is_causal = torch.ones(L, S, dtype=torch.bool).triu(1), True
    with torch.no_grad():
        _, weights = mha(
            q_in, k_in, v_in, key_padding_mask=kpm, attn_mask=attn,
            need_weights=True, average_attn_weights=False, is_causal=is_causal,
        )
        logits = _mha_logits(mha, q_in, k_in, kpm, attn, is_causal, max_batch=2)
    torch.testing.assert_close(torch.softmax(logits, -1), weights[:2])


def test_mha_recomputation_unbatched() -> None:
    torch.manual_seed(6)
    mha = nn.MultiheadAttention(8, 2).eval()
    x = torch.randn(4, 8)
    attn = torch.randn(2, 4, 4)
    with torch.no_grad():
        _, weights = mha(x, x, x, attn_mask=attn, need_weights=True, average_attn_weights=False)
        logits = _mha_logits(mha, x, x, None, attn, False, max_batch=4)
    torch.testing.assert_close(torch.softmax(logits, -1)[0], weights)


# ----------------------------------------------------------------------------- tiny transformers


def test_sdpa_transformer_keys_identical_outputs_and_independent_values() -> None:
    torch.manual_seed(7)
    model = TinySDPATransformer()
    x = torch.randn(6, 5, 8)
    ref = model(x)
    metrics, out, probe = probe_once(model, x, max_batch=3)
    assert torch.equal(out, ref)
    names = ["blocks.0.attn", "blocks.1.attn"]
    assert probe.modules == names and probe.found_any
    assert set(metrics) == {metric_key(f, n) for f in METRIC_FAMILIES for n in names}
    assert all(v.dim() == 0 for v in metrics.values())
    # Independent: explicit causal softmax on block 0 over the first 3 sequences.
    with torch.no_grad():
        attn = model.blocks[0].attn
        q, k, _ = attn.qk(model.blocks[0].ln(x[:3]))
        scores = (q @ k.mT / math.sqrt(q.size(-1))).double().numpy()
        scores[..., ~np.tril(np.ones((5, 5), dtype=bool))] = -np.inf
    rows = np_entropy(scores)
    assert float(metrics["attn_entropy/blocks.0.attn"]) == pytest.approx(rows.mean(), abs=1e-5)
    head_min = rows.mean((0, 2)).min()
    assert float(metrics["attn_entropy_min/blocks.0.attn"]) == pytest.approx(head_min, abs=1e-5)
    assert float(metrics["attn_logit_max/blocks.0.attn"]) == pytest.approx(scores.max(), abs=1e-5)


def test_values_same_with_math_and_fused_sdpa_backends(device) -> None:
    torch.manual_seed(8)
    model = TinySDPATransformer().to(device)
    x = torch.randn(2, 5, 8, device=device)
    # CUDA's flash kernel takes half precision only; its memory-efficient one is fused in float32.
    fused = SDPBackend.FLASH_ATTENTION if device.type == "cpu" else SDPBackend.EFFICIENT_ATTENTION
    results = {}
    for backend in (SDPBackend.MATH, fused):
        with sdpa_kernel(backend):
            results[backend] = floats(probe_once(model, x)[0])
    math_m, fused_m = results[SDPBackend.MATH], results[fused]
    assert set(math_m) == set(fused_m)
    for key in math_m:
        if "blocks.0." in key:  # same q, k in: the recomputation is identical
            assert math_m[key] == fused_m[key], key
        else:  # block 1's input differs by the backends' rounding of block 0's output
            assert math_m[key] == pytest.approx(fused_m[key], abs=1e-5), key


def test_mha_model_keys_outputs_and_values() -> None:
    torch.manual_seed(9)
    model = TinyMHA().train()
    x = torch.randn(3, 4, 8)
    ref = model(x)
    metrics, out, probe = probe_once(model, x)
    assert torch.equal(out, ref)
    assert probe.modules == ["attn"]
    assert set(metrics) == {metric_key(f, "attn") for f in METRIC_FAMILIES}
    with torch.no_grad():
        _, w = model.attn(x, x, x, need_weights=True, average_attn_weights=False)
    rows = -(w * w.log()).sum(-1)
    assert float(metrics["attn_entropy/attn"]) == pytest.approx(float(rows.mean()), abs=1e-5)
    head_min = float(rows.mean((0, 2)).min())
    assert float(metrics["attn_entropy_min/attn"]) == pytest.approx(head_min, abs=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_layer(norm_first: bool) -> None:
    torch.manual_seed(10)
    layer = nn.TransformerEncoderLayer(
        8, 2, dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    model = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).train()
    x = torch.randn(3, 5, 8)
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    ref = model(x, mask=mask, is_causal=True)
    probe = AttentionProbe(model, every=1)
    assert probe.start(0)
    out = model(x, mask=mask, is_causal=True)
    metrics = probe.stop()
    assert torch.equal(out, ref)
    assert probe.modules == ["layers.0.self_attn", "layers.1.self_attn"]
    assert set(metrics) == {metric_key(f, n) for f in METRIC_FAMILIES for n in probe.modules}
    first = model.layers[0]
    with torch.no_grad():
        inp = first.norm1(x) if norm_first else x
        _, w = first.self_attn(
            inp, inp, inp, attn_mask=mask, need_weights=True, average_attn_weights=False
        )
    rows = -torch.where(w > 0, w * w.log(), 0.0).sum(-1)
    got = float(metrics["attn_entropy/layers.0.self_attn"])
    assert got == pytest.approx(float(rows.mean()), abs=1e-5)


# ----------------------------------------------------------------------------- hooks and arming


def all_hooks(model: nn.Module) -> int:
    return sum(
        len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._forward_hooks_with_kwargs)
        for m in model.modules()
    )


def test_unsampled_steps_register_nothing() -> None:
    model = TinySDPATransformer()
    probe = AttentionProbe(model, every=3)
    assert [s for s in range(10) if probe.should_sample(s)] == [0, 3, 6, 9]
    assert probe.start(1) is False
    assert all_hooks(model) == 0
    assert _get_current_function_mode_stack() == []
    assert attention_mod._ARMED is None
    model(torch.randn(1, 3, 8))
    assert probe.stop() == {}


class FailsAfterAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = TinyMHA()
        self.fail = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.inner(x)
        if self.fail:
            raise ValueError("injected failure")
        return y


def test_hooks_gone_after_stop_even_after_an_exception() -> None:
    model = FailsAfterAttention()
    probe = AttentionProbe(model, every=1)
    assert probe.start(0)
    assert all_hooks(model) > 0 and len(_get_current_function_mode_stack()) == 1
    with pytest.raises(ValueError, match="injected"):
        model(torch.randn(2, 3, 8))
    probe.stop()
    assert all_hooks(model) == 0
    assert _get_current_function_mode_stack() == []
    assert attention_mod._ARMED is None
    # The next sampled step works normally.
    model.fail = False
    assert probe.start(1)
    model(torch.randn(2, 3, 8))
    assert set(probe.stop()) == {metric_key(f, "inner.attn") for f in METRIC_FAMILIES}
    assert all_hooks(model) == 0


def test_model_without_attention() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    metrics, _, probe = probe_once(model, torch.randn(2, 4))
    assert metrics == {} and probe.found_any is False and probe.modules == []
    assert all_hooks(model) == 0


def test_stop_keeps_a_mode_entered_after_start() -> None:
    from torch.overrides import BaseTorchFunctionMode

    model = TinySDPATransformer()
    probe = AttentionProbe(model, every=1)
    probe.start(0)
    other = BaseTorchFunctionMode()
    other.__enter__()
    model(torch.randn(1, 3, 8))
    assert set(probe.stop())  # metrics still produced
    assert _get_current_function_mode_stack() == [other]
    other.__exit__(None, None, None)


def test_only_one_probe_armed_at_a_time_and_one_left_armed_is_disarmed(caplog) -> None:
    # A probe left armed (an exception in a sampled forward, a run never closed) must not stop the
    # next run in the same process (a notebook's cell run again).
    model = TinyMHA()
    a, b = AttentionProbe(model, every=1), AttentionProbe(model, every=1)
    a.start(0)
    assert b.start(0) and not a.armed
    assert any("another AttentionProbe was still armed" in r.getMessage() for r in caplog.records)
    model(torch.randn(2, 3, 8))
    assert set(b.stop()) and a.stop() == {}
    assert all_hooks(model) == 0 and _get_current_function_mode_stack() == []


@pytest.mark.parametrize("kw", [{"every": 0}, {"every": -5}, {"max_batch": 0}, {"every": 2.5}])
def test_config_validation_names_the_value(kw: dict) -> None:
    with pytest.raises(ValueError, match=repr(next(iter(kw.values())))):
        AttentionProbe(nn.Linear(2, 2), **kw)


# ----------------------------------------------------------------------------- record_attention


class HandRolled(nn.Module):
    def __init__(self, use_name: bool = False) -> None:
        super().__init__()
        self.qk = nn.Linear(4, 8)
        self.use_name = use_name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k = self.qk(x).view(b, t, 2, 4).transpose(1, 2).chunk(2, dim=-1)  # (B, nh, T, 2)
        logits = q @ k.mT / math.sqrt(2)
        probs = logits.softmax(-1)
        record_attention("custom.attn" if self.use_name else self, probs=probs, logits=logits)
        return probs.sum()


def test_record_attention_by_module_and_name() -> None:
    torch.manual_seed(11)
    x = torch.randn(2, 3, 4)
    model = Wrapper(HandRolled())
    model(x)  # not armed: a no-op
    metrics, _, probe = probe_once(model, x)
    assert probe.modules == ["inner"]
    with torch.no_grad():
        q, k = model.inner.qk(x).view(2, 3, 2, 4).transpose(1, 2).chunk(2, dim=-1)
    ref = attention_stats(logits=q @ k.mT / math.sqrt(2))
    assert float(metrics["attn_entropy/inner"]) == pytest.approx(float(ref[0]), abs=1e-6)
    assert float(metrics["attn_logit_max/inner"]) == pytest.approx(float(ref[2]), abs=1e-6)
    named, _, _ = probe_once(Wrapper(HandRolled(use_name=True)), x)
    assert set(named) == {metric_key(f, "custom.attn") for f in METRIC_FAMILIES}


def test_docstring_table_matches_emitted_families() -> None:
    for family in (ATTN_ENTROPY, ATTN_ENTROPY_MIN_HEAD, ATTN_LOGIT_MAX):
        assert f"``{family}/<module>``" in AttentionProbe.__doc__
        assert f"``{family}/<module>``" in attention_mod.__doc__
    assert set(METRIC_FAMILIES) == {ATTN_ENTROPY, ATTN_ENTROPY_MIN_HEAD, ATTN_LOGIT_MAX}


def test_autocast_bf16_outputs_identical_and_stats_in_float32(device) -> None:
    # On CUDA, bf16 SDPA runs the flash kernel: the probe's recomputation must not change it.
    torch.manual_seed(12)
    model = TinySDPATransformer().to(device)
    x = torch.randn(2, 5, 8, device=device)
    with torch.autocast(device.type, dtype=torch.bfloat16):
        ref = model(x)
        metrics, out, _ = probe_once(model, x)
    assert torch.equal(out, ref)
    assert metrics and all(v.dtype == torch.float32 for v in metrics.values())
    assert all(math.isfinite(float(v)) for v in metrics.values())


def test_a_compiled_model_is_not_hooked_and_does_not_recompile(tmp_path):
    """Hooks put on a torch.compile'd model for each sampled step made it recompile every time,
    until torch hit its recompile limit and ran the model uncompiled for the rest of the run."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    from sentinel import Sentinel
    from sentinel.probes.attention import COMPILED_REASON

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb, self.qkv, self.out = torch.nn.Embedding(50, 16), torch.nn.Linear(16, 48), torch.nn.Linear(16, 50)

        def forward(self, t):
            h = self.emb(t)
            B, T, C = h.shape
            q, k, v = self.qkv(h).view(B, T, 3, 2, 8).permute(2, 0, 3, 1, 4)
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.out(h + o.transpose(1, 2).reshape(B, T, C))

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = Tiny()
    compiled = torch.compile(model, backend="eager")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def loss_fn(m, t):
        return torch.nn.functional.cross_entropy(m(t).reshape(-1, 50), t.reshape(-1))

    sen = Sentinel(compiled, opt, log_dir=str(tmp_path / "run"), loss_fn=loss_fn, attention_every=5, tensorboard=False)
    for batch in sen.batches([torch.randint(0, 50, (4, 6)) for _ in range(40)]):
        opt.zero_grad()
        loss = loss_fn(compiled, batch)
        loss.backward()
        if sen.check(loss):
            opt.step()
        sen.end_step()
    sen.close()
    assert counters["stats"]["unique_graphs"] == 1  # compiled once, never again
    assert json.loads((tmp_path / "run" / "meta.json").read_text())["attention"] == COMPILED_REASON
    torch._dynamo.reset()


class HandAttention(nn.Module):
    """Attention written out by hand: q @ k.T, softmax, @ v (read through the product and softmax)."""

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return (q @ k.transpose(-2, -1) / 8 ** 0.5).softmax(dim=-1) @ v


@pytest.mark.parametrize("where, model", [
    ("_sdpa_logits", TinySDPATransformer()),          # the recomputation of an SDPA call
    ("_mha_logits", TinyMHA()),                       # the MultiheadAttention forward hook
    ("_is_activation_product", HandAttention()),      # the interceptor's own bookkeeping
])
def test_a_fault_in_the_probe_is_a_warning_and_training_goes_on(tmp_path, monkeypatch, caplog, where, model):
    """Any exception inside the probe (here a TypeError and an AttributeError, which the
    recomputation's guard did not catch before) is warned about once; the user's forward, the
    step and the run go on, and the outputs are those of an unprobed run."""
    from sentinel import Sentinel

    def broken(*args, **kwargs):
        raise TypeError("injected fault") if where != "_mha_logits" else AttributeError("injected fault")

    monkeypatch.setattr(attention_mod, where, broken)
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(2, 5, 8)
    expected = model(x).detach()
    sen = Sentinel(model, opt, log_dir=str(tmp_path / "run"), attention_every=1, rollback=False)
    with caplog.at_level("WARNING"):
        for batch in sen.batches([x] * 3):
            opt.zero_grad()
            out = model(batch)
            if len(sen.last_record) == 0:
                assert torch.equal(out.detach(), expected)  # the probe changed nothing in the forward
            loss = out.square().mean()
            loss.backward()
            if sen.check(loss):
                opt.step()
            sen.end_step()
    sen.close()
    assert sen.step == 3
    faults = [r.getMessage() for r in caplog.records if "injected fault" in r.getMessage()]
    # Once per module (the transformer has two), not once per step.
    assert 1 <= len(faults) <= 2 and len(set(faults)) == len(faults)
    assert all("training goes on" in f or "recomputation failed" in f for f in faults)
