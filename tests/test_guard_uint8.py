"""A hand-written loop over uint8 images: the guard's replays use the batch as the loop gave it.

The loop converts its uint8 images to float itself. Both replays the guard makes (the weights
check before a rollback, and the NaN/Inf localisation) call ``loss_fn`` on the batch exactly as
``sen.batches`` yielded it. A ``loss_fn`` written for the batch as the loop gives it works on
uint8 images; one written for the converted images fails on them, and then the diagnostic is
reported as not done while training goes on under the guard's decision.
"""

from __future__ import annotations

import json
import logging
import math

import pytest
import torch
from torch import nn

from sentinel import Sentinel

BATCH = 16
STEPS = 200
FAULT_STEP = 100


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.head = nn.Linear(4 * 8 * 8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, 1, 8, 8) float
        return self.head(torch.relu(self.conv(x)).flatten(1))


def images(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random 8x8 uint8 images; the label says whether the top half is the brighter one."""
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (n, 1, 8, 8), dtype=torch.uint8, generator=g)
    y = (x[:, 0, :4].float().mean((1, 2)) > x[:, 0, 4:].float().mean((1, 2))).long()
    return x, y


def normalise(x: torch.Tensor) -> torch.Tensor:
    return x.float() / 255.0


def loss_on_raw_batch(model: nn.Module, batch) -> torch.Tensor:
    """Written for the batch as the loader gives it: converts the uint8 images itself."""
    x, y = batch
    return nn.functional.cross_entropy(model(normalise(x)), y)


def loss_on_float_batch(model: nn.Module, batch) -> torch.Tensor:
    """Written for images the loop has already converted: fails on the uint8 batch."""
    x, y = batch
    return nn.functional.cross_entropy(model(x), y)


def _train(tmp_path, loss_fn, fault: str | None):
    torch.manual_seed(0)
    x, y = images(BATCH * STEPS)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH)
    model = ConvNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sen = Sentinel(model, opt, log_dir=str(tmp_path / "run"), loss_fn=loss_fn, tensorboard=False,
                   snapshot_every=10)
    for batch in sen.batches(loader):
        images_u8, labels = batch
        assert images_u8.dtype == torch.uint8  # what the guard holds and replays
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(normalise(images_u8)), labels)
        loss.backward()
        if sen.check(loss):
            opt.step()
        sen.end_step()
        if sen.step == FAULT_STEP and fault is not None:  # damage behind the guard's back, once
            with torch.no_grad():
                if fault == "damaged":
                    model.head.weight.normal_(0.0, 1.0)  # logits ~10x too large, at random
                else:
                    model.conv.weight[0, 0, 0, 0] = float("nan")
    sen.close()
    with torch.no_grad():
        final = float(loss_on_raw_batch(model, (x[-256:], y[-256:])))
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    return final, events


@pytest.mark.parametrize("fault", ["damaged", "nan"])
def test_the_weights_check_and_the_nan_replay_run_on_uint8_batches(tmp_path, fault, caplog):
    clean, _ = _train(tmp_path / "clean", loss_on_raw_batch, None)
    with caplog.at_level(logging.WARNING, logger="sentinel"):
        final, events = _train(tmp_path / "guarded", loss_on_raw_batch, fault)
    assert not [r for r in caplog.records if "failed" in r.getMessage()], caplog.text
    (rollback,) = [e for e in events if e["kind"] == "rollback"]
    check = rollback["weights_check"]  # the last applied uint8 batch, re-run on the damaged weights
    assert check["weights_ok"] is False and check["batch_idx"] == FAULT_STEP - 1
    if fault == "damaged":
        assert math.isfinite(check["loss"]) and check["loss"] > 2 * check["baseline"]
    else:
        (source,) = [e for e in events if e["kind"] == "nonfinite" and "streak" not in e]
        assert (source["module"], source["phase"], source["tensor_role"]) == \
            ("conv", "forward", "weight:conv.weight")
    assert rollback["restored_step"] <= FAULT_STEP  # the state from before the damage
    assert math.isfinite(final) and final <= clean * 1.5, (final, clean)


@pytest.mark.parametrize("fault", ["damaged", "nan"])
def test_a_replay_that_fails_on_the_batch_does_not_stop_training(tmp_path, fault, caplog):
    # The loop converts the images before the model; its loss_fn expects converted images.
    clean, _ = _train(tmp_path / "clean", loss_on_raw_batch, None)
    with caplog.at_level(logging.WARNING, logger="sentinel"):
        final, events = _train(tmp_path / "guarded", loss_on_float_batch, fault)
    failures = [r.getMessage() for r in caplog.records if "failed" in r.getMessage()]
    assert failures and all("training goes on" in m or "to check the weights failed" in m for m in failures)
    (rollback,) = [e for e in events if e["kind"] == "rollback"]
    assert "weights_check" not in rollback  # not known: the guard acts on the streak alone
    if fault == "nan":
        (source,) = [e for e in events if e["kind"] == "nonfinite" and "streak" not in e]
        assert source["module"] is None and source["note"].startswith("source not localised: RuntimeError")
    assert math.isfinite(final) and final <= clean * 1.5, (final, clean)
