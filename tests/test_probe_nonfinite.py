"""NaN/Inf source locator: replay a step with hooks and name the module that made the value."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch
from torch import nn

from sentinel.probes.nonfinite import (
    NonFiniteSource,
    find_nonfinite_input,
    locate_nonfinite,
    tensor_stats,
)
from sentinel.rng import capture_rng

D, T, B = 8, 4, 3


@pytest.fixture(autouse=True)
def _one_thread():
    # Tiny ops on a shared 2-core machine: intra-op threads only contend (100x slower under load).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class _NaNGrad(torch.autograd.Function):
    """Identity forward, NaN backward: a broken custom kernel."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")


def _fault(x: torch.Tensor, mode: str | None) -> torch.Tensor:
    if mode == "nan":
        return x * float("nan")
    if mode == "overflow":
        return x * 1e20 * 1e20  # a real float32 overflow: every product is finite until 1e40
    if mode == "sqrt_backward":
        # sqrt of an exact 0: forward is finite (0), its gradient is inf, times the 0 -> nan
        return x + torch.sqrt(x.pow(2).mean(-1, keepdim=True) * 0.0)
    if mode == "fn_backward":
        return _NaNGrad.apply(x)
    return x


class Attn(nn.Module):
    def __init__(self, p_drop: float) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(D, 2, dropout=p_drop, batch_first=True)
        self.fault: str | None = None

    def forward(self, x):
        out, _ = self.mha(x, x, x, need_weights=False)  # (B, T, D)
        return _fault(out, self.fault)


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(D, 2 * D), nn.Linear(2 * D, D)
        self.act = nn.ReLU(inplace=True)  # in place on fc1's output, which is a view
        self.fault: str | None = None
        self.fired = False

    def forward(self, x):
        h = self.act(self.fc1(x))
        if self.fault in ("sqrt_backward", "fn_backward"):
            h = _fault(h, self.fault)  # between fc1 and fc2: fc1 gets the NaN grad, fc2 does not
            return self.fc2(h)
        out = _fault(self.fc2(h), self.fault)
        if self.fault == "random":  # a fault that depends on the RNG, like a dropout mask
            self.fired = bool(torch.rand(()) < 0.5)
            out = out * float("nan") if self.fired else out
        return out


class Block(nn.Module):
    def __init__(self, p_drop: float) -> None:
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(D), Attn(p_drop)
        self.ln2, self.mlp = nn.LayerNorm(D), Mlp()

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Net(nn.Module):
    def __init__(self, p_drop: float = 0.0) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(p_drop) for _ in range(4))
        self.head = nn.Sequential(nn.BatchNorm1d(D), nn.Linear(D, 1))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x.mean(1)).squeeze(-1)  # (B,)


def _setup(p_drop: float = 0.0, seed: int = 0):
    torch.manual_seed(seed)
    model = Net(p_drop)
    batch = {"x": torch.randn(B, T, D), "y": torch.randn(B)}

    def run_forward():
        return nn.functional.mse_loss(model(batch["x"]), batch["y"])

    return model, batch, run_forward


def _hook_count(model: nn.Module) -> int:
    count = 0
    for m in model.modules():
        for attr in ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs",
                     "_forward_pre_hooks_with_kwargs", "_backward_hooks", "_backward_pre_hooks"):
            count += len(getattr(m, attr))
    for p in model.parameters():
        count += len(p._backward_hooks or {})
        count += len(getattr(p, "_post_accumulate_grad_hooks", None) or {})
    return count


# ---- helpers ----------------------------------------------------------------------------------

def test_tensor_stats_matches_an_independent_count():
    t = torch.tensor([[1.5, float("nan"), -7.25], [float("inf"), float("-inf"), 0.0]])
    assert tensor_stats(t) == (1, 2, 6, 7.25)
    assert tensor_stats(torch.full((3,), float("nan")))[:3] == (3, 0, 3)
    assert math.isnan(tensor_stats(torch.full((3,), float("nan")))[3])
    assert tensor_stats(torch.tensor([3, -9])) == (0, 0, 2, 9.0)
    assert tensor_stats(torch.tensor([1.0, -65504.0], dtype=torch.float16)) == (0, 0, 2, 65504.0)
    r = torch.randn(50, generator=torch.Generator().manual_seed(1))
    assert tensor_stats(r) == (0, 0, 50, float(r.abs().max()))


def test_find_nonfinite_input_walks_nested_batches():
    ok = torch.ones(2)
    bad = torch.tensor([0.0, float("inf")])
    nested = {"x": ok, "y": [ok, (torch.arange(3), bad)]}
    assert find_nonfinite_input(nested)[0] == "batch['y'][1][1]"
    assert find_nonfinite_input([ok, bad])[0] == "batch[1]"
    assert find_nonfinite_input(bad)[0] == "batch"
    assert find_nonfinite_input({"x": ok, "ids": torch.arange(4)}) is None


def test_source_to_dict_is_strict_json_and_phase_is_validated():
    src = NonFiniteSource("<input>", "input", "batch['x']", 0, 3, 3, float("nan"))
    assert json.loads(json.dumps(src.to_dict(), allow_nan=False))["max_abs"] is None
    with pytest.raises(ValueError, match="'sideways'"):
        NonFiniteSource("fc", "sideways", "output", 1, 0, 1, 0.0)


# ---- forward ----------------------------------------------------------------------------------

def test_forward_nan_is_named_at_the_innermost_module_that_made_it():
    model, batch, run_forward = _setup()
    model.blocks[2].mlp.fault = "nan"
    src = locate_nonfinite(model, run_forward, batch)
    assert (src.module, src.phase, src.tensor_role) == ("blocks.2.mlp", "forward", "output")
    # x * nan: every entry of the (B, T, D) output is nan, none finite
    assert (src.nan_count, src.inf_count, src.numel) == (B * T * D, 0, B * T * D)
    assert math.isnan(src.max_abs)


def test_forward_overflow_is_reported_as_inf_not_nan():
    model, batch, run_forward = _setup()
    model.blocks[1].mlp.fault = "overflow"
    # independent computation of what blocks.1.mlp outputs on this batch
    with torch.no_grad():
        h = batch["x"]
        h = model.blocks[0](h)
        h = h + model.blocks[1].attn(model.blocks[1].ln1(h))
        mlp = model.blocks[1].mlp
        expected = tensor_stats(mlp.fc2(mlp.act(mlp.fc1(model.blocks[1].ln2(h)))) * 1e20 * 1e20)
    src = locate_nonfinite(model, run_forward, batch)
    assert (src.module, src.phase, src.tensor_role) == ("blocks.1.mlp", "forward", "output")
    assert src.inf_count > 0 and src.nan_count == 0
    assert (src.nan_count, src.inf_count, src.numel, src.max_abs) == expected


def test_a_nan_weight_is_named_with_its_parameter():
    model, batch, run_forward = _setup()
    with torch.no_grad():
        model.blocks[3].mlp.fc2.weight[0, 0] = float("nan")
    src = locate_nonfinite(model, run_forward, batch)
    assert (src.module, src.phase) == ("blocks.3.mlp.fc2", "forward")
    assert src.tensor_role == "weight:blocks.3.mlp.fc2.weight"
    assert (src.nan_count, src.numel) == (1, D * 2 * D)


def test_nonfinite_batch_is_the_input():
    model, batch, run_forward = _setup()
    batch["x"][1, 2, 3] = float("inf")
    src = locate_nonfinite(model, run_forward, batch)
    assert (src.module, src.phase, src.tensor_role) == ("<input>", "input", "batch['x']")
    assert (src.nan_count, src.inf_count, src.numel) == (0, 1, B * T * D)
    assert src.max_abs == float(batch["x"][torch.isfinite(batch["x"])].abs().max())
    # without the batch, the input is still recognised at the model's call
    src = locate_nonfinite(model, run_forward)
    assert (src.module, src.phase, src.tensor_role) == ("<input>", "input", "input[0]")


def test_nonfinite_loss_from_finite_outputs_is_the_loss():
    model, batch, _ = _setup()
    src = locate_nonfinite(model, lambda: {"loss": torch.log(-model(batch["x"]).pow(2).mean())})
    assert (src.module, src.phase, src.tensor_role, src.nan_count, src.numel) == (
        "<loss>", "loss", "loss", 1, 1)


# ---- backward ---------------------------------------------------------------------------------

@pytest.mark.parametrize("where, fault", [
    ("blocks.2.mlp", "sqrt_backward"),
    ("blocks.1.mlp", "fn_backward"),
    ("blocks.1.attn", "fn_backward"),
])
def test_backward_nan_is_named_at_the_module_whose_backward_made_it(where, fault):
    model, batch, run_forward = _setup()
    model.get_submodule(where).fault = fault
    assert torch.isfinite(run_forward())  # forward is clean: only backward shows it
    src = locate_nonfinite(model, run_forward, batch)
    assert (src.module, src.phase, src.tensor_role) == (where, "backward", "grad_input[0]")
    assert src.nan_count > 0 and src.numel == B * T * D


def test_loss_backward_that_makes_the_nan_is_the_loss():
    model, batch, _ = _setup()

    def run_forward():
        out = model(batch["x"])
        return torch.sqrt((out - out.detach()).pow(2).mean())  # sqrt(0): inf gradient

    src = locate_nonfinite(model, run_forward, batch)
    assert (src.module, src.phase, src.tensor_role) == ("<loss>", "backward", "grad_output")


def test_finite_replay_is_none():
    model, batch, run_forward = _setup()
    assert locate_nonfinite(model, run_forward, batch) is None


# ---- faithfulness and leaving the model as it was ---------------------------------------------

def test_dropout_replay_is_faithful_with_the_captured_rng():
    model, batch, run_forward = _setup(p_drop=0.5, seed=3)
    state = capture_rng()
    original = run_forward()
    losses = []
    assert locate_nonfinite(model, lambda: losses.append(run_forward()) or losses[-1],
                            rng_state=state) is None
    assert torch.equal(losses[0], original)  # same masks, same bits (hooks change no numerics)
    assert not torch.equal(run_forward(), original)  # and dropout does draw from the RNG

    for mlp in (b.mlp for b in model.blocks):
        mlp.fault = "random"
    state = capture_rng()
    run_forward()
    fired = [f"blocks.{i}.mlp" for i, b in enumerate(model.blocks) if b.mlp.fired]
    assert fired, "seed must make the random fault fire in the original step"
    torch.rand(7)  # the RNG moves on before the replay
    src = locate_nonfinite(model, run_forward, rng_state=state)
    assert src.module == fired[0]
    # without the captured state the replay draws other numbers and tells another story
    other = locate_nonfinite(model, run_forward)
    assert other is None or other.module != fired[0]


def test_grads_weights_buffers_modes_rng_and_hooks_are_as_before():
    model, batch, run_forward = _setup(p_drop=0.1)
    nn.functional.mse_loss(model(batch["x"] * 2), batch["y"]).backward()  # grads of another step
    model.blocks[1].eval()
    model.head[1].bias.grad = None  # a parameter without a grad stays without one
    model.blocks[2].mlp.fault = "sqrt_backward"  # backward runs and writes NaN grads

    grads = {n: (p.grad, None if p.grad is None else p.grad.clone())
             for n, p in model.named_parameters()}
    state = {k: v.clone() for k, v in model.state_dict().items()}
    modes = {n: m.training for n, m in model.named_modules()}
    rng = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    hooks = _hook_count(model)

    def flipping_forward():
        model.eval()  # user code that changes the mode is undone too
        return run_forward()

    src = locate_nonfinite(model, flipping_forward, rng_state=capture_rng())
    assert src is not None and src.phase == "backward"

    for n, p in model.named_parameters():
        before, values = grads[n]
        assert p.grad is before, n  # the very tensor, and
        assert values is None or torch.equal(p.grad, values), n  # the same values
    for k, v in model.state_dict().items():  # weights and BatchNorm running stats
        assert torch.equal(v, state[k]), k
    assert {n: m.training for n, m in model.named_modules()} == modes
    assert torch.equal(torch.get_rng_state(), rng[0])
    assert np.array_equal(np.random.get_state()[1], rng[1]) and random.getstate() == rng[2]
    assert _hook_count(model) == hooks == 0


def test_hooks_removed_and_state_restored_when_run_forward_raises():
    model, batch, _ = _setup()
    grads_before = [p.grad for p in model.parameters()]
    rng_before = torch.get_rng_state()
    torch.manual_seed(123)
    other_rng = capture_rng()
    torch.set_rng_state(rng_before)

    def broken_forward():
        model.blocks[0](batch["x"])  # some hooks fire first
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        locate_nonfinite(model, broken_forward, batch, rng_state=other_rng)
    assert _hook_count(model) == 0
    assert [p.grad for p in model.parameters()] == grads_before
    assert torch.equal(torch.get_rng_state(), rng_before)


def test_run_forward_must_return_a_loss():
    model, batch, _ = _setup()
    with pytest.raises(TypeError, match="return the loss tensor"):
        locate_nonfinite(model, lambda: {"logits": 1.0})
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        locate_nonfinite(model, lambda: model(batch["x"]))
    assert _hook_count(model) == 0
