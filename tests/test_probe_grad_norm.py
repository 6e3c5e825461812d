"""GradNormProbe and grad_norms against independent norms on a small transformer."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from sentinel.metrics import GRAD_NORM_TOTAL
from sentinel.probes.grad_norm import GradNormProbe, grad_norms

D, VOCAB, T = 16, 11, 5


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, num_heads=2, batch_first=True)
        self.ln2 = nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, n_blocks: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.randn(T, D) * 0.02)  # directly on the root: group "root"
        self.blocks = nn.ModuleList(Block() for _ in range(n_blocks))
        self.head = nn.Linear(D, VOCAB)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx) + self.pos  # (B, T, D)
        for block in self.blocks:
            x = block(x)
        return self.head(x)  # (B, T, VOCAB)


def _backward(model: nn.Module, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, VOCAB, (4, T), generator=g).to(model.head.weight.device)
    logits = model(idx)
    loss = nn.functional.cross_entropy(logits.float().reshape(-1, VOCAB), idx.reshape(-1))
    loss.backward()


@pytest.fixture
def model(device) -> TinyLM:
    torch.manual_seed(0)
    m = TinyLM().to(device)
    _backward(m)
    return m


def _independent(model: nn.Module, prefix_of) -> dict[str, float]:
    """Per-group norms computed parameter by parameter in float64, no probe code."""
    sums: dict[str, float] = {}
    for name, p in model.named_parameters():
        if p.grad is None:
            continue
        group = prefix_of(name)
        sums[group] = sums.get(group, 0.0) + float(p.grad.double().pow(2).sum())
    return {k: math.sqrt(v) for k, v in sums.items()}


def _values(norms: dict[str, torch.Tensor]) -> dict[str, float]:
    keys = list(norms)
    return dict(zip(keys, torch.stack([norms[k] for k in keys]).tolist()))


def test_model_is_big_enough(model: TinyLM) -> None:
    assert len(list(model.parameters())) > 20


def test_total_matches_torch_get_total_norm(model: TinyLM) -> None:
    expected = torch.nn.utils.get_total_norm([p.grad for p in model.parameters()])
    norms = GradNormProbe(model).compute()
    total = norms[GRAD_NORM_TOTAL]
    assert total.dim() == 0 and total.dtype == torch.float32
    assert total.item() == pytest.approx(expected.item(), rel=1e-6)


def test_depth1_groups_match_independent_norms_and_combine_to_total(model: TinyLM) -> None:
    probe = GradNormProbe(model, depth=1)
    assert probe.group_names == ["root", "embed", "blocks", "head"]
    got = _values(probe.compute())
    want = _independent(model, lambda n: n.split(".")[0] if "." in n else "root")
    for group, value in want.items():
        assert got[f"grad_norm/{group}"] == pytest.approx(value, rel=1e-6)
    assert set(got) == {GRAD_NORM_TOTAL} | {f"grad_norm/{g}" for g in want}
    combined = math.sqrt(sum(v**2 for k, v in got.items() if k != GRAD_NORM_TOTAL))
    assert combined == pytest.approx(got[GRAD_NORM_TOTAL], rel=1e-6)


def test_depth2_splits_blocks(model: TinyLM) -> None:
    probe = GradNormProbe(model, depth=2)
    assert probe.group_names == ["root", "embed", "blocks.0", "blocks.1", "blocks.2", "head"]
    got = _values(probe.compute())
    want = _independent(model, lambda n: ".".join(n.split(".")[:-1][:2]) or "root")
    assert {k.removeprefix("grad_norm/"): v for k, v in got.items() if k != GRAD_NORM_TOTAL} == (
        pytest.approx(want, rel=1e-6)
    )


def test_depth0_gives_total_only(model: TinyLM) -> None:
    probe = GradNormProbe(model, depth=0)
    assert probe.group_names == []
    norms = probe.compute()
    assert list(norms) == [GRAD_NORM_TOTAL]
    total_sq, per_group_sq = probe.squared()
    assert per_group_sq.shape == (0,)
    assert norms[GRAD_NORM_TOTAL].item() == pytest.approx(math.sqrt(total_sq.item()), rel=1e-7)


def test_include_groups_and_other(model: TinyLM) -> None:
    probe = GradNormProbe(model, include=["blocks.1.attn", "head"])
    assert probe.group_names == ["blocks.1.attn", "head", "other"]

    def prefix_of(name: str) -> str:
        for m in ("blocks.1.attn", "head"):
            if name.startswith(m + "."):
                return m
        return "other"

    got = _values(probe.compute())
    want = _independent(model, prefix_of)
    for group, value in want.items():
        assert got[f"grad_norm/{group}"] == pytest.approx(value, rel=1e-6)
    assert got[GRAD_NORM_TOTAL] == pytest.approx(
        math.sqrt(sum(v**2 for v in want.values())), rel=1e-6
    )


def test_include_covering_everything_has_no_other_group(model: TinyLM) -> None:
    probe = GradNormProbe(model.blocks[0], include=["ln1", "attn", "ln2", "mlp"])
    assert probe.group_names == ["ln1", "attn", "ln2", "mlp"]


def test_squared_is_the_square_of_compute(model: TinyLM) -> None:
    probe = GradNormProbe(model, depth=2)
    total_sq, per_group_sq = probe.squared()
    norms = probe.compute()
    assert total_sq.sqrt().float().item() == norms[GRAD_NORM_TOTAL].item()
    assert per_group_sq.shape == (len(probe.group_names),)
    assert per_group_sq.sum().item() == pytest.approx(total_sq.item(), rel=1e-6)


def test_params_without_grad_contribute_zero() -> None:
    torch.manual_seed(0)
    model = TinyLM()
    for p in model.blocks[1].parameters():
        p.requires_grad_(False)
    _backward(model)
    assert model.blocks[1].mlp[0].weight.grad is None
    probe = GradNormProbe(model, depth=2)
    got = _values(probe.compute())
    assert got["grad_norm/blocks.1"] == 0.0
    expected = torch.nn.utils.get_total_norm(
        [p.grad for p in model.parameters() if p.grad is not None]
    )
    assert got[GRAD_NORM_TOTAL] == pytest.approx(expected.item(), rel=1e-6)


def test_no_grads_at_all_is_zero() -> None:
    model = TinyLM()
    assert _values(GradNormProbe(model).compute()) == {
        GRAD_NORM_TOTAL: 0.0,
        "grad_norm/embed": 0.0,
        "grad_norm/root": 0.0,
        "grad_norm/blocks": 0.0,
        "grad_norm/head": 0.0,
    }


def test_grads_are_reread_each_call(model: TinyLM) -> None:
    probe = GradNormProbe(model)
    first = probe.compute()[GRAD_NORM_TOTAL].item()
    for p in model.parameters():
        p.grad.mul_(2.0)
    assert probe.compute()[GRAD_NORM_TOTAL].item() == pytest.approx(2 * first, rel=1e-6)


def test_bf16_params_are_normed_in_float32(device) -> None:
    torch.manual_seed(0)
    model = TinyLM().to(device, torch.bfloat16)
    _backward(model)
    assert model.head.weight.grad.dtype == torch.bfloat16
    probe = GradNormProbe(model, depth=2)
    got = _values(probe.compute())
    # Independent: each bf16 gradient upcast exactly, summed in float64.
    want = _independent(model, lambda n: ".".join(n.split(".")[:-1][:2]) or "root")
    for group, value in want.items():
        assert got[f"grad_norm/{group}"] == pytest.approx(value, rel=1e-6)
    total = math.sqrt(sum(v**2 for v in want.values()))
    assert got[GRAD_NORM_TOTAL] == pytest.approx(total, rel=1e-6)


def test_mixed_dtypes_in_one_model(device) -> None:
    torch.manual_seed(0)
    model = TinyLM().to(device)
    model.head.to(torch.bfloat16)
    model.blocks[2].to(torch.float64)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    got = _values(GradNormProbe(model).compute())
    want = _independent(model, lambda n: n.split(".")[0] if "." in n else "root")
    for group, value in want.items():
        assert got[f"grad_norm/{group}"] == pytest.approx(value, rel=1e-6)


def test_a_model_split_over_cpu_and_cuda(cuda_device) -> None:
    # One norm per device, then the total on the first one's device: one transfer each, no sync.
    torch.manual_seed(0)
    model = TinyLM().to(cuda_device)
    model.blocks[1].cpu()
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    got = _values(GradNormProbe(model, depth=2).compute())
    want = _independent(model, lambda n: ".".join(n.split(".")[:-1][:2]) or "root")
    for group, value in want.items():
        assert got[f"grad_norm/{group}"] == pytest.approx(value, rel=1e-6)
    assert got[GRAD_NORM_TOTAL] == pytest.approx(math.sqrt(sum(v**2 for v in want.values())), rel=1e-6)


def test_sparse_grad_equals_dense_norm() -> None:
    torch.manual_seed(0)
    model = nn.ModuleDict({"emb": nn.Embedding(VOCAB, D, sparse=True), "out": nn.Linear(D, 1)})
    idx = torch.tensor([1, 1, 3, 7])  # repeated index: the sparse grad is uncoalesced
    model["out"](model["emb"](idx)).sum().backward()
    grad = model["emb"].weight.grad
    assert grad.is_sparse
    got = _values(GradNormProbe(model).compute())
    assert got["grad_norm/emb"] == pytest.approx(grad.to_dense().norm().item(), rel=1e-6)


@pytest.mark.parametrize("all_complex", [True, False])
def test_complex_parameters_are_normed_by_their_modulus(all_complex: bool) -> None:
    """State-space layers (S4, S5) keep complex parameters: |z|^2 = re^2 + im^2 (the norm raised
    'dtype should be complex' at the first step)."""
    torch.manual_seed(0)
    model = nn.ModuleDict({"ssm": nn.Linear(4, 4, dtype=torch.complex64)})
    if not all_complex:
        model["out"] = nn.Linear(4, 1)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    got = _values(GradNormProbe(model).compute())
    want = math.sqrt(sum(float(p.grad.abs().pow(2).sum()) for p in model.parameters()))
    assert got[GRAD_NORM_TOTAL] == pytest.approx(want, rel=1e-6)
    assert got["grad_norm/ssm"] == pytest.approx(
        math.sqrt(sum(float(p.grad.abs().pow(2).sum()) for p in model["ssm"].parameters())), rel=1e-6)


def test_nonfinite_grad_shows_in_its_group_and_total() -> None:
    grads = [torch.tensor([1.0, float("inf")]), torch.tensor([3.0]), None]
    total, per_group = grad_norms(grads, [0, 1, 1], 2)
    assert math.isinf(total.item())
    assert math.isinf(per_group[0].item()) and per_group[1].item() == 3.0


def test_grad_norms_pure_function_exact() -> None:
    grads = [torch.tensor([3.0, 4.0]), None, torch.tensor([12.0]), torch.tensor([0.0, 5.0])]
    total, per_group = grad_norms(grads, torch.tensor([0, 2, 1, 0]), 3)
    # 9 + 16 + 144 + 25 = 194
    assert total.item() == pytest.approx(math.sqrt(194.0), rel=1e-7)
    assert per_group.tolist() == pytest.approx([math.sqrt(50.0), 12.0, 0.0], rel=1e-7)
    total_sq, per_group_sq = grad_norms(grads, [0, 2, 1, 0], 3, squared=True)
    assert total_sq.item() == 194.0 and per_group_sq.tolist() == [50.0, 144.0, 0.0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"depth": -1}, r"depth=-1 is invalid"),
        ({"depth": 1.5}, r"depth=1.5 is invalid"),
        ({"include": ["blocks.9"]}, r"include names 'blocks.9', which is not a submodule"),
        ({"include": "head"}, r"include='head' is a string"),
        ({"include": []}, r"include=\[\] names no module"),
        ({"include": ["blocks", "blocks.0"]}, r"'blocks' and 'blocks.0'.*overlap"),
        ({"include": ["head", "head"]}, r"repeats a name"),
    ],
)
def test_bad_arguments_raise_with_the_bad_value(model: TinyLM, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GradNormProbe(model, **kwargs)


def test_model_without_parameters_raises() -> None:
    with pytest.raises(ValueError, match="has no parameters"):
        GradNormProbe(nn.ReLU())


def test_group_named_total_is_rejected() -> None:
    with pytest.raises(ValueError, match="collide"):
        GradNormProbe(nn.ModuleDict({"total": nn.Linear(2, 2)}))


def test_grad_norms_bad_index_raises() -> None:
    with pytest.raises(ValueError, match="group_index holds 5"):
        grad_norms([torch.ones(1)], [5], 2)
    with pytest.raises(ValueError, match="group_index has 2 entries but there are 1 grads"):
        grad_norms([torch.ones(1)], [0, 1], 2)



def test_compute_never_reads_a_value_back_to_the_host() -> None:
    # On the meta device every host read (.item(), .tolist(), float(t), bool(t), nonzero)
    # raises, so finishing here proves compute() never stalls a GPU on a device->host copy.
    model = TinyLM().to("meta")
    for p in model.parameters():
        p.grad = torch.empty_like(p)
    probe = GradNormProbe(model, depth=2)
    norms = probe.compute()
    total_sq, per_group_sq = probe.squared()
    assert all(t.device.type == "meta" and t.dim() == 0 for t in norms.values())
    assert len(norms) == 1 + len(probe.group_names)
    assert per_group_sq.shape == (len(probe.group_names),)


def test_default_groups_are_layer_parts_whatever_wraps_the_model():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = torch.nn.Linear(4, 4)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 4))

    class Wrapper(torch.nn.Module):  # e.g. a LightningModule holding the network as .model
        def __init__(self):
            super().__init__()
            self.model = torch.nn.Module()
            self.model.embed = torch.nn.Embedding(10, 4)
            self.model.blocks = torch.nn.ModuleList([Block(), Block()])
            self.model.head = torch.nn.Linear(4, 10)

    net = Wrapper()
    net.model.head(net.model.blocks[1].mlp(net.model.blocks[0].attn(net.model.embed(torch.tensor([1, 2]))))).sum().backward()
    probe = GradNormProbe(net, depth=None)
    assert probe.group_names == ["model.embed", "model.blocks.0.attn", "model.blocks.0.mlp",
                                 "model.blocks.1.attn", "model.blocks.1.mlp", "model.head"]
    norms = probe.compute()
    expected = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in net.model.blocks[1].mlp.parameters()]))
    assert torch.allclose(norms["grad_norm/model.blocks.1.mlp"], expected, rtol=1e-6)
    assert float(norms["grad_norm/model.blocks.1.attn"]) == 0.0  # its grad is None
