"""Peak memory and time of `sentinel analyze` on a large CSV (1M and 10M rows).

Each measurement runs the CLI in a fresh subprocess and reads its peak RSS with
``resource.getrusage(RUSAGE_CHILDREN)``; the baseline is the same process analysing a 1,000-row
CSV (interpreter + pandas + the analyzer's fixed cost), so the ratio shows what the rows cost.
The CSVs (step, loss, lr, grad_norm, tokens) are generated here, not in the tests: 10M rows is
~500 MB and takes a while to write.

    .venv/bin/python benchmarks/analyze_memory.py [--rows 1000000 10000000] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

_SCRIPT = Path(sys.executable).with_name("sentinel")


def write_csv(path: Path, rows: int, chunk: int = 1_000_000) -> None:
    rng = np.random.default_rng(0)
    with open(path, "w") as f:
        f.write("step,loss,lr,grad_norm,tokens\n")
        for start in range(0, rows, chunk):
            step = np.arange(start, min(start + chunk, rows))
            loss = 2.0 + 3.0 * np.exp(-step / max(rows / 10, 1)) + 0.02 * rng.standard_normal(len(step))
            block = np.column_stack([step, loss, np.full(len(step), 3e-4), 1.0 + 0.1 * rng.random(len(step)),
                                     step * 4096])
            np.savetxt(f, block, fmt=["%d", "%.6f", "%.1e", "%.4f", "%d"], delimiter=",")


def measure(path: Path) -> tuple[float, float]:
    """(peak RSS in MiB, wall seconds) of one `sentinel analyze PATH --format json` in a child."""
    code = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
            "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True); "
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.perf_counter() - t)")
    done = subprocess.run([sys.executable, "-c", code, str(_SCRIPT), "analyze", str(path), "--format", "json"],
                          capture_output=True, text=True, check=True)
    rss_kib, seconds = done.stdout.split()
    return int(rss_kib) / 1024, float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp) / "base.csv"
        write_csv(base, 1000)
        base_rss, base_s = measure(base)
        print(f"{'rows':>11}  {'file MB':>8}  {'peak RSS MiB':>12}  {'vs 1k rows':>10}  {'seconds':>8}")
        print(f"{1000:>11,}  {base.stat().st_size / 1e6:>8.1f}  {base_rss:>12.0f}  {1.0:>9.2f}x  {base_s:>8.2f}")
        for rows in args.rows:
            path = Path(tmp) / f"rows{rows}.csv"
            write_csv(path, rows)
            rss, seconds = measure(path)
            print(f"{rows:>11,}  {path.stat().st_size / 1e6:>8.1f}  {rss:>12.0f}  {rss / base_rss:>9.2f}x  "
                  f"{seconds:>8.2f}", flush=True)
            os.unlink(path)


if __name__ == "__main__":
    main()
