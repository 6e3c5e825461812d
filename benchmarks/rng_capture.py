"""What the per-step RNG capture (for the NaN replay) costs, part by part, alone and after a step.

On an H200 host ``next()`` of ``sen.batches`` took 0.11-0.25 ms longer with the capture than
without it, where here the whole capture is ~4 us alone and ~15 us inside a training loop. This
times each part of :func:`sentinel.rng.capture_rng` and the CUDA generator's alternatives, each
``--calls`` times: alone (hot caches), and right after a training step of a small model (as in
the loop: the step evicts the caches, and on CUDA the host may wait for the device). Medians in
microseconds.

Run:
    .venv/bin/python benchmarks/rng_capture.py                # CPU (the CUDA parts are left out)
    python benchmarks/rng_capture.py --device cuda            # on a GPU machine
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

from sentinel import rng


def parts(cuda: bool) -> dict[str, Callable[[], object]]:
    """The capture and its parts; on CUDA also the generator-level alternatives."""
    found: dict[str, Callable[[], object]] = {
        "capture_rng (every device)": lambda: rng.capture_rng(cuda=cuda),
        "torch.get_rng_state": torch.get_rng_state,
        "numpy (cached read)": rng._numpy_state.get,
        "python (cached read)": rng._python_state.get,
    }
    if cuda:
        generator = torch.cuda.default_generators[torch.cuda.current_device()]
        used = rng.cuda_devices_of([])  # the current device: what the engine captures for a one-GPU model
        found.update({
            "capture_rng (the model's device)": lambda: rng.capture_rng(cuda=used),
            "torch.cuda.get_rng_state_all": torch.cuda.get_rng_state_all,
            "torch.cuda.get_rng_state()": torch.cuda.get_rng_state,
            "generator.get_state()": generator.get_state,
            "torch.cuda.device_count()": torch.cuda.device_count,
        })
        if hasattr(generator, "clone_state"):
            found["generator.clone_state()"] = generator.clone_state
        if hasattr(generator, "graphsafe_get_state"):
            found["generator.graphsafe_get_state()"] = generator.graphsafe_get_state
    return found


def timed(fn: Callable[[], object], calls: int, before: Callable[[], None] | None = None) -> float:
    """Median microseconds of ``fn()``, with ``before()`` run (untimed) ahead of each call."""
    times = []
    for _ in range(calls):
        if before is not None:
            before()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device here; run it on a GPU machine or leave --device out")
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Dropout(0.1), nn.Linear(1024, 256)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(64, 256, device=device)

    def step() -> None:  # a training step, its loss read back as the guard's one read does
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        loss.item()

    for _ in range(20):
        step()
    print(f"torch {torch.__version__}, device {device}"
          + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else "")
          + f", {args.calls} calls each, median us")
    print(f"{'part':<34} {'alone':>9} {'after a step':>13}")
    for name, fn in parts(args.device == "cuda").items():
        print(f"{name:<34} {timed(fn, args.calls):>9.2f} {timed(fn, max(args.calls // 10, 50), step):>13.2f}")


if __name__ == "__main__":
    main()
