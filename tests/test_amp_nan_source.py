"""fp16 AMP with a real GradScaler: a real NaN source is told apart from fp16 overflow, on the CPU
and, where a GPU is present, on CUDA.

A GradScaler takes every NaN/Inf gradient for an overflow. When overflows persist, sentinel
replays the step at the current scale, names the first non-finite module and calls it again in
float32: non-finite there too is a real NaN source (answered as a non-finite step: withheld,
then rolled back with the weights check), finite there is the float16 range (an overflow streak,
as before). Both the raw loop and Lightning's 16-mixed precision are run.
"""

from __future__ import annotations

import json
import logging
import math

import lightning as L
import pytest
import torch
from lightning.pytorch.plugins.precision import MixedPrecision
from torch import nn

from sentinel import Sentinel
from sentinel.analyze import analyze
from sentinel.callbacks import SentinelCallback
from sentinel.probes.nonfinite import locate_overflow

BATCH = 16
STEPS = 90
FAULT = 40  # the first step that sees the fault


class BNNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 32)
        self.bn = nn.BatchNorm1d(32)
        self.head = nn.Linear(32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.bn(self.fc1(x))))


def amp_mse(model: nn.Module, batch) -> torch.Tensor:
    with torch.autocast(batch["x"].device.type, dtype=torch.float16):
        return nn.functional.mse_loss(model(batch["x"]), batch["y"])


def _events(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def _train_raw(tmp_path, tiny_task, fault: str, device: torch.device,
               model_out: list | None = None) -> tuple[float, list[dict]]:
    """``nan_weight``: one BatchNorm weight turns NaN before step FAULT (behind the guard's
    back). ``fp16_range``: the inputs of steps FAULT..FAULT+9 are 1e5 times larger, finite in
    float32 but past float16's 65504 once autocast casts them for fc1; ``fp16_once``: only
    step FAULT's. ``model_out`` receives the trained model."""
    Data, _, _, batches_at = tiny_task
    torch.manual_seed(0)
    poisoned = {"fp16_range": range(FAULT, FAULT + 10), "fp16_once": [FAULT]}.get(fault, [])
    poison = batches_at(poisoned, BATCH) if poisoned else set()
    data = Data(n=BATCH * STEPS, poison=poison, scale=1e5, device=device)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=False)
    model = BNNet().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler(device.type, init_scale=2.0**10)
    with Sentinel(model, opt, scaler=scaler, log_dir=str(tmp_path / "run"), loss_fn=amp_mse,
                  tensorboard=False, snapshot_every=10) as sen:
        for batch in sen.batches(loader):
            if sen.step == FAULT and fault == "nan_weight":
                with torch.no_grad():
                    model.bn.weight[3] = float("nan")
            opt.zero_grad()
            loss = amp_mse(model, batch)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            if sen.check(loss):
                scaler.step(opt)
            scaler.update()
            sen.end_step()
    clean = Data(n=BATCH * STEPS, device=device)
    with torch.no_grad():
        final = float(nn.functional.mse_loss(model(clean.x[-256:]), clean.y[-256:]))
    if model_out is not None:
        model_out.append(model)
    return final, _events(tmp_path / "run")


def test_a_nan_weight_under_a_grad_scaler_is_named_as_a_real_nan_source(tmp_path, tiny_task, caplog, device):
    with caplog.at_level(logging.WARNING, logger="sentinel"):
        final, events = _train_raw(tmp_path, tiny_task, "nan_weight", device)
    overflows = [e["step"] for e in events if e["kind"] == "overflow"]
    assert overflows[:2] == [FAULT, FAULT + 1]  # the scaler took it for overflows
    source, still = [e for e in events if e["kind"] == "nonfinite"]  # reported once, then noted
    assert source["step"] == FAULT + 1 and source["overflow_streak"] == 2
    assert (still["step"], still["streak"]) == (FAULT + 2, 2)
    assert (source["module"], source["phase"], source["tensor_role"], source["cause"]) == \
        ("bn", "forward", "weight:bn.weight", "nan_source")
    assert "a real NaN source" in caplog.text
    # Answered as a non-finite step, not as an overflow streak: withheld, then rolled back once
    # the re-run of the last applied batch shows the weights are bad.
    (rollback,) = [e for e in events if e["kind"] == "rollback"]
    assert rollback["reason"] == "nonfinite" and rollback["step"] == FAULT + 2
    assert rollback["weights_check"]["weights_ok"] is False and rollback["restored_step"] <= FAULT
    assert [e["reason"] for e in events if e["kind"] == "skip_step"] == ["nonfinite"]
    assert math.isfinite(final) and final < 0.1
    # The report says it too.
    (run,) = analyze(tmp_path / "run").runs
    messages = [i.message for i in run.incidents if i.kind == "nonfinite"]
    assert any("bn (forward), a real NaN source" in m for m in messages), messages


def test_values_past_the_fp16_range_stay_an_overflow_streak(tmp_path, tiny_task, device):
    final, events = _train_raw(tmp_path, tiny_task, "fp16_range", device)
    (source,) = [e for e in events if e["kind"] == "nonfinite"]
    assert (source["step"], source["module"], source["phase"], source["cause"]) == \
        (FAULT + 1, "fc1", "forward", "fp16_range")
    assert source["fp32_max_abs"] > 65504  # what the float32 call made: finite, too large for fp16
    (rollback,) = [e for e in events if e["kind"] == "rollback"]
    assert rollback["reason"] == "overflow_streak" and rollback["spike_step"] == FAULT + 4
    assert not [e for e in events if e["kind"] == "skip_step"]
    assert math.isfinite(final) and final < 0.1


def test_one_overflowed_forward_leaves_the_norm_layers_statistics_finite(tmp_path, tiny_task, device):
    """One batch past float16's range: the scaler skips its update and halves the scale, and
    nothing else is wrong. Its forward had already folded inf into BatchNorm's running mean (and
    NaN into its variance) before the loss came out NaN: every eval-mode output after it was NaN,
    though training went on. The statistics are now put back as for a withheld step."""
    models: list = []
    final, events = _train_raw(tmp_path, tiny_task, "fp16_once", device, model_out=models)
    (model,) = models
    assert [e["step"] for e in events if e["kind"] == "overflow"] == [FAULT]
    assert not [e for e in events if e["kind"] == "rollback"]
    assert torch.isfinite(model.bn.running_mean).all() and torch.isfinite(model.bn.running_var).all()
    model.eval()
    Data, _, _, _ = tiny_task
    clean = Data(n=BATCH * STEPS, device=device)
    with torch.no_grad():
        assert math.isfinite(float(nn.functional.mse_loss(model(clean.x[-256:]), clean.y[-256:])))
    assert math.isfinite(final)


def test_locate_overflow_tells_the_two_apart_in_backward_too(device):
    torch.manual_seed(0)
    model = BNNet().to(device)
    x, y = torch.randn(16, 8, device=device), torch.randn(16, 1, device=device)
    run = lambda: amp_mse(model, {"x": x, "y": y})  # noqa: E731
    assert locate_overflow(model, run, 2.0**10) is None  # a clean step replays clean
    # A scale that pushes the gradients past float16: finite without it, so the fp16 range.
    src = locate_overflow(model, run, 2.0**40)
    assert (src.phase, src.cause) == ("backward", "fp16_range")
    with torch.no_grad():
        model.fc1.bias[0] = float("inf")
    src = locate_overflow(model, run, 2.0**10)
    assert (src.module, src.tensor_role, src.cause) == ("fc1", "weight:fc1.bias", "nan_source")


class LitBN(L.LightningModule):
    def __init__(self, mse) -> None:
        super().__init__()
        self.net, self.mse = BNNet(), mse

    def training_step(self, batch, batch_idx):
        if self.global_step == FAULT and batch_idx == FAULT:
            with torch.no_grad():
                self.net.bn.weight[3] = float("nan")
        return self.mse(self.net, batch)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)


def test_lightning_16_mixed_names_the_real_nan_source(tmp_path, tiny_task, device):
    Data, _, mse, _ = tiny_task
    L.seed_everything(0, verbose=False)
    loader = torch.utils.data.DataLoader(Data(n=BATCH * STEPS), batch_size=BATCH, shuffle=False)
    plugin = MixedPrecision("16-mixed", device.type, scaler=torch.amp.GradScaler(device.type, init_scale=2.0**10))
    trainer = L.Trainer(accelerator="gpu" if device.type == "cuda" else "cpu", devices=1, max_epochs=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, plugins=[plugin],
                        callbacks=[SentinelCallback(log_dir=str(tmp_path / "run"), tensorboard=False,
                                                    snapshot_every=10)])
    module = LitBN(mse)
    trainer.fit(module, loader)
    events = _events(tmp_path / "run")
    (source,) = [e for e in events if e["kind"] == "nonfinite" and "streak" not in e]
    assert (source["module"], source["tensor_role"], source["cause"]) == \
        ("net.bn", "weight:net.bn.weight", "nan_source")
    (rollback,) = [e for e in events if e["kind"] == "rollback"]
    assert rollback["reason"] == "nonfinite" and rollback["restored_step"] <= FAULT
    assert all(torch.isfinite(p).all() for p in module.parameters())


class LitPlainBN(LitBN):
    def training_step(self, batch, batch_idx):
        return self.mse(self.net, batch)


def test_lightning_16_mixed_one_overflowed_forward_leaves_the_statistics_finite(tmp_path, tiny_task, device):
    Data, _, mse, batches_at = tiny_task
    L.seed_everything(0, verbose=False)
    data = Data(n=BATCH * STEPS, poison=batches_at([FAULT], BATCH), scale=1e5)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=False)
    plugin = MixedPrecision("16-mixed", device.type, scaler=torch.amp.GradScaler(device.type, init_scale=2.0**10))
    trainer = L.Trainer(accelerator="gpu" if device.type == "cuda" else "cpu", devices=1, max_epochs=1,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, plugins=[plugin],
                        callbacks=[SentinelCallback(log_dir=str(tmp_path / "run"), tensorboard=False,
                                                    snapshot_every=10)])
    module = LitPlainBN(mse)
    trainer.fit(module, loader)
    events = _events(tmp_path / "run")
    assert [e["step"] for e in events if e["kind"] == "overflow"] == [FAULT]
    bn = module.net.bn
    assert torch.isfinite(bn.running_mean).all() and torch.isfinite(bn.running_var).all()


def test_an_overflow_streak_that_replays_finite_adds_no_nonfinite_event(tmp_path, tiny_task, device):
    # Inf written into a gradient by hand: the replay of the step at the current scale is finite.
    Data, Net, mse, _ = tiny_task
    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(Data(n=BATCH * 40, device=device), batch_size=BATCH)
    model = Net().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler(device.type, init_scale=2.0**10)
    with Sentinel(model, opt, scaler=scaler, log_dir=str(tmp_path / "run"), loss_fn=mse,
                  tensorboard=False) as sen:
        for batch in sen.batches(loader):
            opt.zero_grad()
            loss = mse(model, batch)
            scaler.scale(loss).backward()
            if sen.step in (30, 31, 32):
                model.head.weight.grad[0, 0] = float("inf")
            scaler.unscale_(opt)
            if sen.check(loss):
                scaler.step(opt)
            scaler.update()
            sen.end_step()
    kinds = [e["kind"] for e in _events(tmp_path / "run")]
    assert kinds.count("overflow") == 3 and "nonfinite" not in kinds and "rollback" not in kinds
