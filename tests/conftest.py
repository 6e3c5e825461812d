"""Shared fixtures: a tiny deterministic regression task whose data can be poisoned by index."""

from __future__ import annotations

import torch
import pytest
from torch import nn


class PoisonableData(torch.utils.data.Dataset):
    """y = x @ w + noise; samples whose index is in ``poison`` have x scaled by ``scale``.

    Items are dicts ``{"x", "y", "index"}`` so the guard records skipped batches by index.
    """

    def __init__(self, n: int = 2048, dim: int = 8, poison: set[int] = frozenset(), scale: float = 1e3,
                 nan: set[int] = frozenset(), seed: int = 0, device: str | torch.device = "cpu") -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, dim, generator=g)
        w = torch.randn(dim, 1, generator=g)
        self.y = self.x @ w / dim**0.5 + 0.05 * torch.randn(n, 1, generator=g)
        # On a GPU the items (and so the loader's batches) live there, as after a pinned
        # loader's .to(device): the loss function and sentinel's replays see device tensors.
        self.x, self.y = self.x.to(device), self.y.to(device)
        self.poison, self.scale, self.nan = set(poison), scale, set(nan)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        x = self.x[i]
        if i in self.poison:
            x = x * self.scale
        if i in self.nan:
            x = x.clone()
            x[0] = float("nan")
        return {"x": x, "y": self.y[i], "index": torch.tensor(i)}


class TinyNet(nn.Module):
    """Two named blocks and a head, so per-module grad norms have something to group."""

    def __init__(self, dim: int = 8, hidden: int = 32) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(dim, hidden), nn.ReLU()),
                                     nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU())])
        self.head = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def mse(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return nn.functional.mse_loss(model(batch["x"]), batch["y"])


def batches_at(positions, batch_size: int) -> set[int]:
    """Dataset indices of the batches at these positions of an unshuffled loader."""
    return {i for p in positions for i in range(p * batch_size, (p + 1) * batch_size)}


# Tests that take the ``device`` fixture run on the CPU everywhere and on CUDA where a GPU is
# present (skipped with this reason otherwise).
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=needs_cuda)])
def device(request) -> torch.device:
    return torch.device(request.param)


@pytest.fixture
def cuda_device() -> torch.device:
    """For tests of what only CUDA has (its synchronisation, pinned memory): skipped elsewhere."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    return torch.device("cuda")


@pytest.fixture
def tiny_task():
    return PoisonableData, TinyNet, mse, batches_at


@pytest.fixture
def linear_fit():
    """A tiny Lightning regression to log from: ``fit(trainer, on_loss, lr, noise=0.0)`` trains a
    ``Linear(8, 1)`` on 640 seeded points (20 batches of 32 an epoch) with SGD; ``on_loss(module,
    loss)`` logs what a test needs and returns the loss to train on."""
    import lightning as L
    from torch.utils.data import DataLoader, TensorDataset

    def fit(trainer, on_loss, lr: float = 0.05, noise: float = 0.0, ckpt_path: str | None = None) -> None:
        torch.manual_seed(0)
        x = torch.randn(640, 8)
        y = x @ torch.randn(8, 1)
        if noise:
            y = y + noise * torch.randn(640, 1)

        class Model(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(8, 1)

            def training_step(self, batch, _):
                return on_loss(self, nn.functional.mse_loss(self.net(batch[0]), batch[1]))

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=lr)

        trainer.fit(Model(), DataLoader(TensorDataset(x, y), batch_size=32), ckpt_path=ckpt_path)

    return fit


# One intra-op thread: tiny models gain nothing from more, and on a loaded 2-core machine
# two threads per process make each op wait for a core (measured ~100x slower under load).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """``sentinel demo`` at its default 400 steps, run once per session in a process of its own
    (about 70 s on two idle cores; float64): ``(out_dir, output)``, the output as a terminal shows it,
    sentinel's log lines on stderr interleaved with stdout. The demo test and the README's demo
    blocks both read it."""
    import os
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("demo") / "demo"
    result = subprocess.run([sys.executable, "-c", "from sentinel.cli.main import main; main()", "demo",
                             "--out", str(out), "--no-progress"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert result.returncode == 0, result.stdout
    return out, result.stdout
