"""The TensorBoard record reader on a thread beside Python that holds the GIL, as ``sentinel
analyze`` runs it beside ``import pandas``.

Each numpy call of the reader lets go of the GIL; getting it back from a thread that runs Python
waits up to the interpreter's switch interval (5 ms by default). This measures the reader's time on
the event files of ``benchmarks/analyze.py`` (generate them first: ``benchmarks/analyze.py
--no-baseline`` caches them under the temp dir) alone, and on a thread while the main thread
spins in Python, at the default switch interval and at the 0.2 ms the read-ahead sets. With
``--ref REV`` the reader of that revision is timed in the same loop.

Usage:
    .venv/bin/python benchmarks/read_beside_import.py --ref 0f68ae9
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from revision import import_as  # benchmarks/revision.py

from sentinel.analyze.loaders import tfrecord


def timed_read(read, file: Path, beside_python: bool) -> float:
    """Seconds ``read(file)`` took, alone or on a thread while this thread runs Python."""
    took = {}

    def work() -> None:
        start = time.perf_counter()
        read(file, [])
        took["s"] = time.perf_counter() - start

    thread = threading.Thread(target=work)
    thread.start()
    while beside_python and thread.is_alive():
        pass  # Python bytecode without a pause, as an import's module bodies run
    thread.join()
    return took["s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--ref", help="also time the reader of this git revision")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    directory = Path(tempfile.gettempdir()) / f"sentinel-bench-analyze-{args.steps}" / "tb"
    files = sorted(directory.glob("events.out.tfevents.*"))
    if not files:
        raise SystemExit(f"no event files in {directory}: run benchmarks/analyze.py --steps {args.steps} first")
    readers = {"current": tfrecord._read_scalars}
    if args.ref:
        import_as(args.ref, Path(tempfile.mkdtemp()), "sentinel_ref")
        readers[args.ref] = importlib.import_module("sentinel_ref.analyze.loaders.tfrecord")._read_scalars
    default = sys.getswitchinterval()
    cases = [("alone", False, default), ("beside Python, 5 ms", True, default),
             ("beside Python, 0.2 ms", True, 2e-4)]
    for name, read in readers.items():
        read(files[0], [])  # warm: the page cache, the numpy code paths
    print(f"{files[0].name}: {files[0].stat().st_size / 1e6:.0f} MB; seconds, median of {args.repeat}")
    for case, beside, interval in cases:
        sys.setswitchinterval(interval)
        times = {name: [] for name in readers}
        for _ in range(args.repeat):
            for name, read in readers.items():
                times[name].append(timed_read(read, files[0], beside))
        sys.setswitchinterval(default)
        print(f"{case:24s}" + "".join(f"  {name} {statistics.median(t):6.2f}" for name, t in times.items()))


if __name__ == "__main__":
    main()
