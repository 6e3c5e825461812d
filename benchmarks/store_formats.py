"""Step-record formats for the run directory: write cost per step and load time.

Workload: N steps (default 1,000,000) with loss, lr, grad_norm/total, loss_scale (plus
epoch, batch_idx) every step, and 12 per-module grad norms + 12 attention entropies every
50 steps. Every candidate writes each record with one ``os.write`` (write-through: a record
is in the kernel when the call returns, so SIGKILL loses nothing) and is loaded into the
same frame the analyzer wants (indexed by step, one float64 column per key).

Candidates:
  wide_csv    segmented wide CSV (sentinel.store.steps_csv, the chosen format), pyarrow reader
  long_csv    step,key,value lines, pyarrow reader + pivot
  jsonl       one JSON object per line, json.loads per line + DataFrame
  arrow_ipc   Arrow IPC stream, one record batch per step (fixed schema)
Also the training-thread cost of ``RunWriter.write_step`` with and without TensorBoard, and
TensorBoard's ``add_scalar`` per scalar against one event per step.

Run:
    .venv/bin/python benchmarks/store_formats.py            # 1,000,000 steps, ~2 minutes
    .venv/bin/python benchmarks/store_formats.py --steps 100000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv

from sentinel.store import RunWriter, TensorBoardSinkConfig
from sentinel.store.steps_csv import StepSegmentWriter, read_steps

MODULES = [f"blocks.{i}.attn" for i in range(12)]
SPARSE_EVERY = 50


def records(n: int) -> Iterator[dict[str, Any]]:
    rng = random.Random(0)
    for step in range(n):
        rec: dict[str, Any] = {"step": step, "epoch": step // 10_000, "batch_idx": step % 10_000,
                               "loss": rng.random() * 3, "lr": 3e-4 * rng.random(),
                               "grad_norm/total": rng.random() * 10, "loss_scale": 65536.0}
        if step % SPARSE_EVERY == 0:
            for m in MODULES:
                rec[f"grad_norm/{m}"] = rng.random()
                rec[f"attn_entropy/{m}"] = rng.random() * 4
        yield rec


def chunks(n: int, size: int = 50_000) -> Iterator[list[dict[str, Any]]]:
    """Records pre-built in chunks, so that write timings exclude building them."""
    gen = records(n)
    while chunk := [rec for _, rec in zip(range(size), gen)]:
        yield chunk


def all_keys() -> list[str]:
    keys = ["epoch", "batch_idx", "loss", "lr", "grad_norm/total", "loss_scale"]
    return keys + [f"grad_norm/{m}" for m in MODULES] + [f"attn_entropy/{m}" for m in MODULES]


# --- writers: each returns seconds spent writing -------------------------------------------

def write_wide_csv(d: Path, n: int) -> float:
    w = StepSegmentWriter(d)
    dt = 0.0
    for chunk in chunks(n):
        t = time.perf_counter()
        for rec in chunk:
            w.write(rec)
        dt += time.perf_counter() - t
    w.close()
    return dt


def write_long_csv(d: Path, n: int) -> float:
    fd = os.open(d / "steps.long.csv", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.write(fd, b"step,key,value\n")
    dt = 0.0
    for chunk in chunks(n):
        t = time.perf_counter()
        for rec in chunk:
            step = rec["step"]
            lines = "".join(f"{step},{k},{v!r}\n" for k, v in rec.items() if k != "step")
            os.write(fd, lines.encode())
        dt += time.perf_counter() - t
    os.close(fd)
    return dt


def write_jsonl(d: Path, n: int) -> float:
    fd = os.open(d / "steps.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    dt = 0.0
    for chunk in chunks(n):
        t = time.perf_counter()
        for rec in chunk:
            os.write(fd, (json.dumps(rec) + "\n").encode())
        dt += time.perf_counter() - t
    os.close(fd)
    return dt


def write_arrow_ipc(d: Path, n: int) -> float:
    keys = all_keys()
    schema = pa.schema([("step", pa.int64())] + [(k, pa.float64()) for k in keys])
    sink = pa.OSFile(str(d / "steps.arrows"), "wb")
    writer = pa.ipc.new_stream(sink, schema)
    dt = 0.0
    for chunk in chunks(n):
        t = time.perf_counter()
        for rec in chunk:
            writer.write_batch(pa.record_batch([[rec["step"]]] + [[rec.get(k)] for k in keys],
                                               schema=schema))
        dt += time.perf_counter() - t
    writer.close()
    sink.close()
    return dt


# --- loaders: each returns the analyzer's frame ----------------------------------------------

def load_wide_csv(d: Path) -> pd.DataFrame:
    return read_steps(d)[0]


def load_long_csv(d: Path) -> pd.DataFrame:
    table = pa_csv.read_csv(d / "steps.long.csv", convert_options=pa_csv.ConvertOptions(
        column_types={"step": pa.int64(), "key": pa.string(), "value": pa.float64()}))
    long = table.to_pandas()
    return long.pivot_table(index="step", columns="key", values="value", aggfunc="last")


def load_jsonl(d: Path) -> pd.DataFrame:
    with open(d / "steps.jsonl", "rb") as f:
        rows = [json.loads(line) for line in f]
    return pd.DataFrame.from_records(rows).set_index("step").astype("float64")


def load_arrow_ipc(d: Path) -> pd.DataFrame:
    with pa.OSFile(str(d / "steps.arrows"), "rb") as f:
        return pa.ipc.open_stream(f).read_all().to_pandas().set_index("step")


# name -> (writer, loader, largest step count worth running: one-row Arrow batches cost
# ~390 us each to write and ~110 us each to read back, so Arrow runs on a smaller sample)
CANDIDATES: dict[str, tuple[Callable[[Path, int], float], Callable[[Path], pd.DataFrame], int]] = {
    "jsonl": (write_jsonl, load_jsonl, 10**9),  # baseline
    "wide_csv": (write_wide_csv, load_wide_csv, 10**9),
    "long_csv": (write_long_csv, load_long_csv, 10**9),
    "arrow_ipc": (write_arrow_ipc, load_arrow_ipc, 20_000),
}


def bench_formats(n: int, root: Path) -> dict[str, dict[str, float]]:
    results = {}
    for name, (write, load, limit) in CANDIDATES.items():
        d = root / name
        d.mkdir()
        steps = min(n, limit)
        write_s = write(d, steps)
        size = sum(p.stat().st_size for p in d.iterdir())
        t = time.perf_counter()
        frame = load(d)
        load_s = min(time.perf_counter() - t, _timed(lambda: load(d)))
        assert len(frame) == steps and frame["loss"].notna().all(), name
        results[name] = {"steps": steps, "write_us": write_s / steps * 1e6, "load_s": load_s,
                         "mb": size / 1e6}
    return results


def bench_run_writer(n: int, root: Path) -> dict[str, float]:
    out = {}
    for tb in (False, True):
        recs = list(records(n))
        # A large queue so that the tight loop measures the enqueue, not the drop path.
        w = RunWriter(root / f"rw_tb{int(tb)}", tensorboard=tb,
                      tb_config=TensorBoardSinkConfig(queue_size=n + 1))
        t = time.perf_counter()
        for rec in recs:
            w.write_step(rec)
        out[f"write_step_us_tb{int(tb)}"] = (time.perf_counter() - t) / n * 1e6
        t = time.perf_counter()
        w.close()
        out[f"close_s_tb{int(tb)}"] = time.perf_counter() - t
    return out


def bench_tensorboard(root: Path, steps: int = 2000, scalars: int = 20) -> dict[str, float]:
    from tensorboard.compat.proto.summary_pb2 import Summary
    from torch.utils.tensorboard import SummaryWriter
    from torch.utils.tensorboard.writer import FileWriter

    keys = [f"k{i}" for i in range(scalars)]
    sw = SummaryWriter(str(root / "tb_add_scalar"))
    t = time.perf_counter()
    for s in range(steps):
        for k in keys:
            sw.add_scalar(k, 0.5 + s, s)
    add_scalar = (time.perf_counter() - t) / (steps * scalars) * 1e6
    sw.close()
    fw = FileWriter(str(root / "tb_summary"))
    t = time.perf_counter()
    for s in range(steps):
        fw.add_summary(Summary(value=[Summary.Value(tag=k, simple_value=0.5 + s) for k in keys]), s)
    per_step = (time.perf_counter() - t) / (steps * scalars) * 1e6
    fw.close()
    return {"add_scalar_us_per_scalar": add_scalar, "one_event_per_step_us_per_scalar": per_step}


def _timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        formats = bench_formats(args.steps, root)
        base = formats["jsonl"]
        print(f"steps={args.steps}  (ratios against jsonl)")
        print(f"{'format':<10} {'steps':>9} {'write us/step':>14} {'load s':>8} "
              f"{'load ratio':>11} {'MB':>7}")
        for name, r in formats.items():
            # Load ratio per step, so that a candidate run on fewer steps compares fairly.
            ratio = (r["load_s"] / r["steps"]) / (base["load_s"] / base["steps"])
            print(f"{name:<10} {r['steps']:>9} {r['write_us']:>14.2f} {r['load_s']:>8.3f} "
                  f"{ratio:>11.3f} {r['mb']:>7.1f}")
        rw = bench_run_writer(min(args.steps, 100_000), root)
        print("RunWriter.write_step: "
              f"{rw['write_step_us_tb0']:.2f} us/step without TensorBoard, "
              f"{rw['write_step_us_tb1']:.2f} us/step with (ratio "
              f"{rw['write_step_us_tb1'] / rw['write_step_us_tb0']:.2f}); close drains "
              f"TensorBoard in {rw['close_s_tb1']:.1f} s")
        tb = bench_tensorboard(root)
        print(f"TensorBoard: add_scalar {tb['add_scalar_us_per_scalar']:.1f} us/scalar, one event "
              f"per step {tb['one_event_per_step_us_per_scalar']:.1f} us/scalar (ratio "
              f"{tb['add_scalar_us_per_scalar'] / tb['one_event_per_step_us_per_scalar']:.1f}x)")


if __name__ == "__main__":
    main()
