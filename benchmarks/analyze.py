"""Benchmark ``sentinel analyze`` on a long run against reading TensorBoard files of the same
scalars with the tensorboard package.

Writes a sentinel run dir of ``--steps`` steps (loss, lr, grad_norm/total, loss_scale every
step; 12 per-module grad norms and 12 attention entropies every 50 steps) in the store's
on-disk format, plus TensorBoard event files of the same scalars (one event per step holding
that step's values), then measures, each in a fresh process:

* ``sentinel analyze PATH --format json`` end to end (interpreter start-up included) on the run
  dir and on the event files, and in-process: load + analyse, with peak RSS;
* the baseline: the same scalars read with ``EventAccumulator`` (the tensorboard package);
* sentinel's own TensorBoard loader on the same event files;
* with ``--ref REV``, the same measurements for git revision ``REV`` (exported beside the
  working tree), interleaved run by run with the current tree: before and after in one run.

The generated files are cached per ``--steps`` under the temp dir, so a rerun only measures.

Usage:
    python benchmarks/analyze.py                 # 1,000,000 steps (first run ~2 min: event files, baseline)
    python benchmarks/analyze.py --ref d7e162e   # and the analyzer of that revision beside it
    python benchmarks/analyze.py --skip-tb       # sentinel analyze of the run dir only
    python benchmarks/analyze.py --steps 100000  # quicker
    python benchmarks/analyze.py --compiled      # sentinel's bytecode compiled first, as installed
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
MODULES = [f"blocks.{i}" for i in range(12)]
SPARSE_EVERY = 50


def make_columns(steps: int) -> dict[str, np.ndarray]:
    """The scalars of the run: a decaying loss with noise, a few spikes and a NaN."""
    rng = np.random.default_rng(0)
    s = np.arange(steps, dtype=np.float64)
    loss = 2.0 + 8.0 * np.exp(-s / (steps / 20)) + 0.02 * rng.standard_normal(steps)
    for at in (steps // 4, steps // 2):
        loss[at:at + 3] *= 4.0
    loss[int(steps * 0.8)] = np.nan
    cols = {"loss": loss, "lr": np.full(steps, 3e-4), "grad_norm/total": 1.0 + 0.1 * rng.random(steps),
            "loss_scale": np.full(steps, 65536.0)}
    sparse = np.where(s % SPARSE_EVERY == 0, 1.0, np.nan)
    for i, m in enumerate(MODULES):
        cols[f"grad_norm/{m}"] = sparse * (0.1 + 0.01 * i)
        cols[f"attn_entropy/{m}.attn"] = sparse * (2.0 - 0.05 * i)
    return cols


def write_run_dir(run_dir: Path, cols: dict[str, np.ndarray]) -> float:
    """The store's format: meta.json/events.jsonl through RunWriter, the steps segment directly
    (one wide CSV, empty cells where a key is absent, as ``steps_csv`` writes it)."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    from sentinel.store import RunWriter
    from sentinel.store.layout import segment_name

    t0 = time.perf_counter()
    with RunWriter(run_dir, {"benchmark": "analyze"}, tensorboard=False):
        pass
    steps = len(next(iter(cols.values())))
    table = pa.table({"step": np.arange(steps, dtype=np.int64),
                      **{k: pa.array(v, from_pandas=True) for k, v in cols.items()}})
    with open(run_dir / segment_name(0), "wb") as f:
        f.write((",".join(table.column_names) + "\n").encode())
        pa_csv.write_csv(table, f, pa_csv.WriteOptions(include_header=False, quoting_style="none"))
    return time.perf_counter() - t0


def write_event_file(tb_dir: Path, cols: dict[str, np.ndarray]) -> float:
    """TFRecord framing with the masked CRC32C TensorBoard checks on read."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    t0 = time.perf_counter()
    tb_dir.mkdir(parents=True, exist_ok=True)
    keys = list(cols)
    arrays = [cols[k] for k in keys]
    steps = len(arrays[0])
    header_crc: dict[int, int] = {}
    with open(tb_dir / f"events.out.tfevents.{int(time.time())}.bench", "wb") as f:
        def record(payload: bytes) -> None:
            header = struct.pack("<Q", len(payload))
            crc = header_crc.get(len(payload))
            if crc is None:
                crc = header_crc[len(payload)] = masked_crc32c(header)
            f.write(header + struct.pack("<I", crc) + payload + struct.pack("<I", masked_crc32c(payload)))

        record(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2").SerializeToString())
        for step in range(steps):
            values = [summary_pb2.Summary.Value(tag=k, simple_value=float(a[step]))
                      for k, a in zip(keys, arrays) if not math.isnan(a[step]) or k == "loss"]
            event = event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary_pb2.Summary(value=values))
            record(event.SerializeToString())
    return time.perf_counter() - t0


def child(mode: str, path: str) -> None:
    """One measurement in this (fresh) process; prints JSON."""
    import resource

    t0 = time.perf_counter()
    if mode == "analyze":
        import sentinel

        report = sentinel.analyze(path)
        from sentinel.analyze.render.json_report import render_json

        render_json(report)
        n = int(report.runs[0].data.steps.notna().sum().sum())
        extra = {"incidents": [i.kind for i in report.runs[0].incidents],
                 "torch_imported": "torch" in sys.modules}
    elif mode == "load":
        from sentinel.analyze.loaders import sentinel_run

        (run,) = sentinel_run.load(path)
        n, extra = int(run.steps.notna().sum().sum()), {}
    elif mode == "tb_accumulator":
        from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

        acc = EventAccumulator(path, size_guidance={SCALARS: 0})
        acc.Reload()
        n, extra = sum(len(acc.Scalars(t)) for t in acc.Tags()["scalars"]), {}
    elif mode == "tb_ours":
        from sentinel.analyze.loaders import tensorboard

        (run,) = tensorboard.load(path)
        n, extra = int(run.steps.notna().sum().sum()), {}
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"mode": mode, "seconds": wall, "values": n, "peak_rss_mib": rss, **extra}))


def run_child(mode: str, path: Path, env: dict | None = None) -> dict:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(path)], check=True,
                         capture_output=True, text=True, env=env)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["process_seconds"] = time.perf_counter() - t0
    return result


# ``sentinel analyze PATH --format json``, as the console script runs it (works for any tree on
# PYTHONPATH, which the installed script would not).
_CLI = ("import sys; from sentinel.cli.main import main; "
        "sys.argv = ['sentinel', 'analyze', sys.argv[1], '--format', 'json']; sys.exit(main())")


def run_cli(path: Path, env: dict | None = None) -> tuple[float, float, float]:
    """``sentinel analyze PATH --format json`` in a fresh process, as a user runs it.

    Returns:
        ``(wall seconds, CPU seconds (user + system), peak RSS MiB)`` of that one process.
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _CLI, str(path)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env, cwd=tempfile.gettempdir())
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage, not all children's
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if proc.returncode not in (0, 3):  # 3: --fail-on met, still analysed
        raise SystemExit(f"sentinel analyze failed: {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def summary(runs: list[tuple[float, float, float]]) -> str:
    walls = sorted(r[0] for r in runs)
    cpus = sorted(r[1] for r in runs)
    return (f"wall min {walls[0]:.2f} s, median {statistics.median(walls):.2f} s; CPU median "
            f"{statistics.median(cpus):.2f} s; peak RSS {max(r[2] for r in runs):.0f} MiB (of {len(runs)})")


def fixtures(root: Path, steps: int, with_tb: bool) -> tuple[Path, Path]:
    """The run dir and the event files for ``steps``, written once and reused by later runs.

    A marker next to each (``run.done``, ``tb.done``, outside the run dir so it is no file of
    the run) is written last: an interrupted generation is redone, not reused.
    """
    run_dir, tb_dir = root / "run", root / "tb"
    cols = None
    if not (root / "run.done").exists():
        shutil.rmtree(run_dir, ignore_errors=True)
        cols = make_columns(steps)
        seconds = write_run_dir(run_dir, cols)
        size = sum(f.stat().st_size for f in run_dir.iterdir() if f.is_file()) / 2**20
        print(f"write run dir:       {seconds:7.2f} s  ({size:.0f} MiB)")
        (root / "run.done").touch()
    if with_tb and not (root / "tb.done").exists():
        shutil.rmtree(tb_dir, ignore_errors=True)
        cols = cols if cols is not None else make_columns(steps)
        seconds = write_event_file(tb_dir, cols)
        print(f"write event file:    {seconds:7.2f} s  "
              f"({sum(f.stat().st_size for f in tb_dir.iterdir()) / 2**20:.0f} MiB)")
        (root / "tb.done").touch()
    return run_dir, tb_dir


def compile_trees(trees: list[Path]) -> None:
    """Compile sentinel's modules in ``trees`` to bytecode, as a pip install does; the files this
    writes into the working tree are removed when the benchmark ends, so a later run without
    ``--compiled`` does not give the working tree bytecode that the revision beside it lacks."""
    import atexit
    import compileall

    parts = [tree / part for tree in trees for part in ("sentinel", "cli", "callbacks") if (tree / part).is_dir()]
    before = {p for part in parts for p in part.rglob("*.pyc")}
    for part in parts:
        compileall.compile_dir(part, quiet=1)
    written = [p for part in parts for p in part.rglob("*.pyc") if p not in before]

    def remove() -> None:
        for p in written:
            p.unlink(missing_ok=True)
        for folder in {p.parent for p in written}:
            if not any(folder.iterdir()):
                folder.rmdir()

    atexit.register(remove)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=None,
                        help="where the generated files live (default: a cache dir per --steps under "
                             "the temp dir, reused by later runs)")
    parser.add_argument("--fresh", action="store_true", help="regenerate the files even when cached")
    parser.add_argument("--repeat", type=int, default=3, help="console-script runs (min and median reported)")
    parser.add_argument("--skip-tb", action="store_true",
                        help="no TensorBoard files, no TensorBoard reads (no baseline, no ratio)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the (slow) EventAccumulator read")
    parser.add_argument("--ref", default=None, help="also measure the analyzer of this git revision")
    parser.add_argument("--compiled", action="store_true",
                        help="compile sentinel's modules to bytecode first (both trees), as a pip install "
                             "does; without it a run under PYTHONDONTWRITEBYTECODE compiles them every time")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child and args.child[0] == "fixtures":
        fixtures(Path(args.child[1]), args.steps, with_tb=not args.skip_tb)
        return
    if args.child:
        child(*args.child)
        return
    if args.steps < SPARSE_EVERY * 5 or args.repeat < 1:
        raise SystemExit(f"--steps must be >= {SPARSE_EVERY * 5} and --repeat >= 1")
    root = args.out or Path(tempfile.gettempdir()) / f"sentinel-bench-analyze-{args.steps}"
    if args.fresh:
        shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    # Written by a child: a parent that held the arrays would leak its RSS into every later
    # child's ru_maxrss (Linux keeps the high-water mark across fork and exec).
    subprocess.run([sys.executable, __file__, "--child", "fixtures", str(root), "--steps", str(args.steps)]
                   + (["--skip-tb"] if args.skip_tb else []), check=True)
    run_dir, tb_dir = root / "run", root / "tb"
    keys = len(make_columns(SPARSE_EVERY * 5))
    print(f"{args.steps:,} steps ({keys} keys), files in {root}")

    variants = {"current": None}
    if args.ref:
        from revision import export

        tree = export(args.ref, Path(tempfile.mkdtemp(prefix="sentinel-ref-")))
        variants[args.ref] = dict(os.environ, PYTHONPATH=str(tree))
    if args.compiled:
        compile_trees([REPO] + ([Path(variants[args.ref]["PYTHONPATH"])] if args.ref else []))
    paths = {"run dir": run_dir} if args.skip_tb else {"run dir": run_dir, "event files": tb_dir}
    cli: dict[tuple[str, str], list] = {(p, v): [] for p in paths for v in variants}
    runs = [(where, name) for where in paths for name in variants]
    for i in range(args.repeat):  # interleaved: every variant sees the same machine load
        # In reverse order every other round: no variant always runs right after the same one
        # (a run right after the analysis of the event files was ~10% slower).
        for where, name in runs if i % 2 == 0 else reversed(runs):
            cli[where, name].append(run_cli(paths[where], variants[name]))
    for (where, name), runs in cli.items():
        print(f"sentinel analyze {where:11s} ({name}), end to end: {summary(runs)}")
    results = {}
    for name, env in variants.items():
        modes = [("analyze", run_dir), ("load", run_dir)] + ([] if args.skip_tb else [("tb_ours", tb_dir)])
        for mode, path in modes:
            r = results[mode, name] = run_child(mode, path, env)
            print(f"{mode:15s} ({name}) in-process {r['seconds']:7.2f} s, process {r['process_seconds']:7.2f} s, "
                  f"{r['values']:,} values, peak RSS {r['peak_rss_mib']:.0f} MiB"
                  + (f", torch imported: {r['torch_imported']}" if "torch_imported" in r else ""))
    median = {key: statistics.median(r[0] for r in runs) for key, runs in cli.items()}
    if args.ref:
        for where in paths:
            print(f"ratio {args.ref} / current, sentinel analyze {where} (median wall): "
                  f"{median[where, args.ref] / median[where, 'current']:.2f}x")
    if args.skip_tb or args.no_baseline:
        return
    base = run_child("tb_accumulator", tb_dir)
    print(f"{'tb_accumulator':15s} in-process {base['seconds']:7.2f} s, process {base['process_seconds']:7.2f} s, "
          f"{base['values']:,} values, peak RSS {base['peak_rss_mib']:.0f} MiB")
    for name in variants:
        for where in paths:
            print(f"ratio: EventAccumulator read (process) / sentinel analyze {where} ({name}, median) = "
                  f"{base['process_seconds'] / median[where, name]:.1f}x")
        print(f"ratio: EventAccumulator read / sentinel TensorBoard loader ({name}) = "
              f"{base['seconds'] / results['tb_ours', name]['seconds']:.1f}x")


if __name__ == "__main__":
    main()
