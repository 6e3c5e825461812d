"""Peak memory and time of `sentinel analyze` on a large CSV (1M and 10M rows), beside pandas'
own read of the same file.

Each measurement is one fresh subprocess (peak RSS from ``resource.getrusage(RUSAGE_CHILDREN)``):
``sentinel analyze FILE --format json``, and ``pd.read_csv(FILE)`` as the speed reference; the
baseline row is the same process analysing a 1,000-row CSV (interpreter + pandas + the
analyzer's fixed cost), so the ratio shows what the rows cost. ``--ref REV`` also runs the
analyzer of git revision ``REV`` (exported beside the working tree) on each file, right after
the current one. The CSVs (step, loss, lr, grad_norm, tokens) are generated here, not in the
tests: 10M rows is ~440 MB and takes a while to write.

    .venv/bin/python benchmarks/analyze_memory.py [--rows 1000000 10000000] [--dir /tmp] [--ref REV]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

# `sentinel analyze FILE --format json`, as the console script runs it, for any tree on PYTHONPATH.
_CLI = ("import sys; from sentinel.cli.main import main; "
        "sys.argv = ['sentinel', 'analyze', sys.argv[1], '--format', 'json']; sys.exit(main())")
_PANDAS = "import sys, pandas as pd; pd.read_csv(sys.argv[1])"


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


def measure(code: str, path: Path, env: dict | None = None) -> tuple[float, float]:
    """(peak RSS in MiB, wall seconds) of ``python -c code path`` in a child."""
    wrapper = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
               "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.perf_counter() - t)")
    done = subprocess.run([sys.executable, "-c", wrapper, sys.executable, "-c", code, str(path)],
                          capture_output=True, text=True, check=True, env=env, cwd=tempfile.gettempdir())
    rss_kib, seconds = done.stdout.split()
    return int(rss_kib) / 1024, float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--ref", default=None, help="also run the analyzer of this git revision")
    args = parser.parse_args()
    readers = {"sentinel analyze": (_CLI, None)}
    if args.ref:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from revision import export

        tree = export(args.ref, Path(tempfile.mkdtemp(prefix="sentinel-ref-")))
        readers[f"sentinel analyze at {args.ref}"] = (_CLI, dict(os.environ, PYTHONPATH=str(tree)))
    readers["pd.read_csv (reference)"] = (_PANDAS, None)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp) / "base.csv"
        write_csv(base, 1000)
        base_rss = {name: measure(code, base, env)[0] for name, (code, env) in readers.items()}
        print(f"{'rows':>11}  {'file MB':>8}  {'reader':<32}  {'peak RSS MiB':>12}  {'vs 1k rows':>10}  {'seconds':>8}")
        for rows in [1000, *args.rows]:
            path = base if rows == 1000 else Path(tmp) / f"rows{rows}.csv"
            if rows != 1000:
                write_csv(path, rows)
            for name, (code, env) in readers.items():
                rss, seconds = measure(code, path, env)
                print(f"{rows:>11,}  {path.stat().st_size / 1e6:>8.1f}  {name:<32}  {rss:>12.0f}  "
                      f"{rss / base_rss[name]:>9.2f}x  {seconds:>8.2f}", flush=True)
            if rows != 1000:
                os.unlink(path)


if __name__ == "__main__":
    main()
