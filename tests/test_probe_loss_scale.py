"""LossScaleProbe against a real torch.amp.GradScaler on CPU, raw loop and Lightning."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

from sentinel.metrics import AMP_OVERFLOW, LOSS_SCALE
from sentinel.probes.loss_scale import LossScaleProbe

BAD_STEP = 3
INIT_SCALE = 1024.0


def _data(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(8, 4, generator=g), torch.randn(8, 1, generator=g)


def _run_raw_loop(inject: str, steps: int = 6) -> list[dict]:
    """Train a tiny fp32 model with a real GradScaler; poison step BAD_STEP; record each step."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=INIT_SCALE)
    probe = LossScaleProbe()
    x, y = _data()
    rows = []
    for step in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        if step == BAD_STEP and inject == "loss":
            loss = loss * 1e38  # times the scale: overflows float32 in backward
        scaler.scale(loss).backward()
        if step == BAD_STEP and inject == "grad":
            model[0].weight.grad[0, 0] = float("inf")
        scaler.unscale_(opt)
        metrics = probe.read(scaler, opt)
        before = [p.detach().clone() for p in model.parameters()]
        scaler.step(opt)
        scaler.update()
        # The caller's one batched device->host transfer.
        scale, overflow = torch.stack([metrics[LOSS_SCALE], metrics[AMP_OVERFLOW]]).tolist()
        probe.update(bool(overflow))
        rows.append(
            {
                "scale": scale,
                "overflow": overflow,
                "scale_after_update": scaler.get_scale(),
                "unchanged": all(torch.equal(b, p) for b, p in zip(before, model.parameters())),
                "skipped_steps": probe.skipped_steps,
            }
        )
    return rows


@pytest.mark.parametrize("inject", ["loss", "grad"])
def test_overflow_step_is_flagged_skipped_and_halves_the_scale(inject: str) -> None:
    rows = _run_raw_loop(inject)
    assert [r["overflow"] for r in rows] == [1.0 if s == BAD_STEP else 0.0 for s in range(6)]
    # The reported scale is the one this step's loss was scaled by (before update()).
    assert [r["scale"] for r in rows] == [INIT_SCALE] * 4 + [INIT_SCALE / 2] * 2
    assert rows[BAD_STEP]["scale_after_update"] == INIT_SCALE / 2
    # The optimizer step was skipped on the overflow step only; weights compared exactly.
    assert [r["unchanged"] for r in rows] == [s == BAD_STEP for s in range(6)]
    assert [r["skipped_steps"] for r in rows] == [0, 0, 0, 1, 1, 1]


def test_returned_tensors_are_copies_unaffected_by_update() -> None:
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0)
    scaler.scale(model(torch.ones(1, 2)).sum() * float("inf")).backward()
    scaler.unscale_(opt)
    metrics = LossScaleProbe().read(scaler, opt)
    assert metrics[LOSS_SCALE].dim() == 0 and metrics[LOSS_SCALE].dtype == torch.float32
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 4.0
    assert metrics[LOSS_SCALE].item() == 8.0
    assert metrics[AMP_OVERFLOW].item() == 1.0


def test_read_never_reads_a_value_back_to_the_host() -> None:
    # A real GradScaler on the meta device: any host read (.item(), get_scale(), bool(t))
    # raises there, so a complete read() proves the probe adds no device->host sync.
    model = nn.Linear(2, 1, device="meta")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("meta")
    scaler.scale(model(torch.ones(1, 2, device="meta")).sum()).backward()
    scaler.unscale_(opt)
    metrics = LossScaleProbe().read(scaler, opt)
    assert set(metrics) == {LOSS_SCALE, AMP_OVERFLOW}
    assert all(t.device.type == "meta" and t.dim() == 0 for t in metrics.values())


def test_overflow_is_read_per_optimizer() -> None:
    torch.manual_seed(0)
    a, b = nn.Linear(2, 1), nn.Linear(2, 1)
    opt_a = torch.optim.SGD(a.parameters(), lr=0.1)
    opt_b = torch.optim.SGD(b.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    x = torch.ones(3, 2)
    scaler.scale(a(x).sum() + b(x).sum()).backward()
    b.weight.grad[0, 0] = float("nan")
    scaler.unscale_(opt_a)
    scaler.unscale_(opt_b)
    probe = LossScaleProbe()
    assert probe.read(scaler, opt_a)[AMP_OVERFLOW].item() == 0.0
    assert probe.read(scaler, opt_b)[AMP_OVERFLOW].item() == 1.0


def test_no_scaler_or_disabled_scaler_reads_nothing() -> None:
    opt = torch.optim.SGD(nn.Linear(2, 1).parameters(), lr=0.1)
    probe = LossScaleProbe()
    assert probe.read(None, opt) == {}
    assert probe.read(torch.amp.GradScaler("cpu", enabled=False), opt) == {}
    assert probe.read(torch.amp.GradScaler("cpu"), opt) == {}  # no loss scaled yet


def test_not_unscaled_reports_scale_only_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0)
    scaler.scale(model(torch.ones(1, 2)).sum()).backward()
    probe = LossScaleProbe()
    with caplog.at_level(logging.WARNING, logger="sentinel.probes.loss_scale"):
        first = probe.read(scaler, opt)
        second = probe.read(scaler, opt)
    assert list(first) == [LOSS_SCALE] and first[LOSS_SCALE].item() == 2.0
    assert list(second) == [LOSS_SCALE]
    assert len([r for r in caplog.records if "has not unscaled" in r.getMessage()]) == 1


def test_state_dict_round_trip() -> None:
    probe = LossScaleProbe()
    for overflow in (True, False, True, True):
        probe.update(overflow)
    assert probe.skipped_steps == 3
    restored = LossScaleProbe()
    restored.load_state_dict(probe.state_dict())
    assert restored.skipped_steps == 3
    restored.update(True)
    assert restored.skipped_steps == 4
    old = LossScaleProbe()
    old.load_state_dict({})  # a checkpoint from before the key existed
    assert old.skipped_steps == 0


def test_lightning_mixed_precision_fp16_on_cpu() -> None:
    """Lightning's 16-mixed plugin trains on CPU; the probe reads its scaler in the hook."""
    L = pytest.importorskip("lightning.pytorch")
    from lightning.pytorch.plugins.precision import MixedPrecision

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))

        def training_step(self, batch, batch_idx):
            x, y = batch
            out = self.net(x)
            assert out.dtype == torch.float16  # autocast really runs in fp16 on CPU
            loss = nn.functional.mse_loss(out.float(), y)
            return loss * float("inf") if batch_idx == BAD_STEP else loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    class Record(L.Callback):
        def __init__(self) -> None:
            self.probe = LossScaleProbe()
            self.rows: list[dict] = []

        def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
            metrics = self.probe.read(trainer.precision_plugin.scaler, optimizer)
            scale, overflow = torch.stack([metrics[LOSS_SCALE], metrics[AMP_OVERFLOW]]).tolist()
            self.probe.update(bool(overflow))
            before = [p.detach().clone() for p in pl_module.parameters()]
            self.rows.append({"scale": scale, "overflow": overflow, "before": before})

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            row = self.rows[-1]
            row["unchanged"] = all(
                torch.equal(b, p) for b, p in zip(row.pop("before"), pl_module.parameters())
            )

    torch.manual_seed(0)
    x, y = _data()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=1)
    record = Record()
    scaler = torch.amp.GradScaler("cpu", init_scale=INIT_SCALE)
    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=6,
        plugins=[MixedPrecision("16-mixed", "cpu", scaler=scaler)],
        callbacks=[record],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Module(), loader)

    assert [r["overflow"] for r in record.rows] == [1.0 if s == BAD_STEP else 0.0 for s in range(6)]
    assert [r["scale"] for r in record.rows] == [INIT_SCALE] * 4 + [INIT_SCALE / 2] * 2
    assert [r["unchanged"] for r in record.rows] == [s == BAD_STEP for s in range(6)]
    assert record.probe.skipped_steps == 1
    # Lightning still counts the skipped step as an optimizer step.
    assert trainer.global_step == 6
