"""Write text logs in the formats of common trainers, to time the text readers on each.

Usage::

    python benchmarks/text_log_samples.py DIR            # writes DIR/<format>.log
    for f in DIR/*.log; do python benchmarks/textlog_speed.py "$f" --ref REV; done

Each log is what its tool prints for a decaying loss (seeded, so every run writes the same
bytes): 20,000 steps unless a format logs less often. The formats: a script's own
``epoch | step | loss | lr | grad_norm`` lines (30,000), ``step N | loss X | ...`` pipes, ``step N:
train loss X, lr L`` with a validation line every 500 steps, the Hugging Face Trainer's printed
dicts, mmengine, Megatron-LM iteration lines, torchtitan, Lightning's progress bar redrawn with
``\\r``, Keras ``fit`` bars, and fairseq's ``train_inner`` lines.
"""

from __future__ import annotations

import argparse
import math
import random
from pathlib import Path


def _loss(rng: random.Random, i: int) -> float:
    return 2 + math.exp(-i / 3000) + rng.random() * 0.05


def write_all(out: Path, steps: int = 20_000) -> list[Path]:
    """Write every sample log into ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    logs: dict[str, list[str]] = {}
    logs["generic"] = [f"2024-01-01 10:00:00 INFO train.py:88 | epoch {i // 1000} | step {i} | loss: {_loss(rng, i):.4f}"
                       f" | lr: {3e-4 * min(1, i / 1000):.6e} | grad_norm: {rng.random() + 0.5:.4f}"
                       for i in range(1, 3 * steps // 2 + 1)]
    logs["pipe"] = [f"step {i} | loss {_loss(rng, i):.4f} | lr {6e-4:.2e} | grad_norm {0.3 + rng.random():.3f} | "
                    f"tok/s {rng.randint(90000, 110000)}" for i in range(1, steps + 1)]
    logs["eval"] = []
    for i in range(1, steps + 1):
        logs["eval"].append(f"step {i}: train loss {_loss(rng, i):.4f}, lr {6e-4:.2e}")
        if i % 500 == 0:
            logs["eval"].append(f"step {i}: validation loss {2.1:.4f}")
    logs["hf"] = [str({"loss": round(_loss(rng, i), 4), "grad_norm": round(rng.random() + 0.3, 6),
                       "learning_rate": 5e-05 * (1 - i / steps), "epoch": round(i / steps * 3, 2)})
                  for i in range(1, steps + 1)]
    logs["mmengine"] = [f"2024/01/01 10:00:00 - mmengine - INFO - Epoch(train)  [{(i - 1) // 2000 + 1}]"
                        f"[{(i - 1) % 2000 + 1:4d}/2000]  lr: 1.0000e-04  eta: 1:00:00  time: 0.5000  data_time: 0.0100"
                        f"  memory: 12000  loss: {_loss(rng, i):.4f}  loss_cls: 0.5000" for i in range(1, steps + 1)]
    logs["megatron"] = [f" iteration     {i}/  100000 | consumed samples:      {i * 512} | elapsed time per iteration "
                        f"(ms): 1000.0 | learning rate: 3.000E-04 | global batch size:   512 | lm loss: "
                        f"{_loss(rng, i):.6E} | loss scale: 65536.0 | grad norm: 0.800 | number of skipped iterations:"
                        f"   0 | number of nan iterations:   0 |" for i in range(1, steps + 1)]
    logs["torchtitan"] = [f"[rank0]:[titan] 2024-01-01 10:00:00,000 - root - INFO - step: {i:5d}  loss: "
                          f"{_loss(rng, i):7.4f}  memory: 30.00GiB(37.50%)  tps: 5,000  tflops: 100.00  mfu: 30.00%"
                          for i in range(1, steps + 1)]
    epochs = steps // 2000
    logs["lightning_bar"] = ["".join(f"\rEpoch {e}:  {b * 100 // 2000:3d}%|####      | {b + 1}/2000 [00:10<00:20, "
                                     f"50.00it/s, v_num=0, train_loss_step={_loss(rng, e * 2000 + b):.3f}]"
                                     for b in range(2000)) for e in range(epochs)]
    # The same bar as tqdm draws it on a terminal, in unicode blocks: a text that is no ASCII.
    logs["lightning_bar_unicode"] = [line.replace("#", "\u2588") for line in logs["lightning_bar"]]
    logs["keras"] = []
    for e in range(1, 21):
        logs["keras"].append(f"Epoch {e}/20")
        bar = "".join(f"\r{b}/1000 [====>....] - ETA: 1s - loss: {_loss(rng, e * 1000 + b):.4f} - accuracy: 0.5000"
                      for b in range(1, 1001, 10))
        logs["keras"].append(f"{bar}\n1000/1000 [==============================] - 3s 3ms/step - loss: "
                             f"{_loss(rng, e * 1000):.4f} - accuracy: 0.5000")
    logs["fairseq"] = [f"2024-01-01 10:00:00 | INFO | train_inner | epoch 001:    {i} / {steps} loss={_loss(rng, i):.3f}, "
                       f"nll_loss={_loss(rng, i):.3f}, ppl=10.5, wps=12000, ups=1.2, wpb=10000, bsz=64, num_updates={i}, "
                       "lr=0.0005, gnorm=0.8, loss_scale=64, train_wall=50, gb_free=10, wall=1000"
                       for i in range(100, steps + 1, 100)]
    paths = []
    for name, lines in logs.items():
        path = out / f"{name}.log"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    for path in write_all(args.out):
        print(f"{path}  {path.stat().st_size / 1e6:.1f} MB")
