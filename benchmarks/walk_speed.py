"""Directory-walk speed: ``discover()`` of a folder of many small text files that are no logs and
one log, the working tree against a git revision in the same process.

Usage::

    python benchmarks/walk_speed.py [--files 3000] [--ref REV] [--repeat 3]

Every file of a walk is offered to every loader's sniff; a folder of notes, configs and small
outputs beside a log is what a user points ``sentinel analyze`` at.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

log = logging.getLogger("walk_speed")


def write_folder(folder: Path, files: int, seed: int = 0) -> None:
    """``files`` notes of 1-30 lines of words and numbers, and one 2,000-step log."""
    rng = random.Random(seed)
    for i in range(files):
        lines = (f"line {j} of some text {rng.random():.3f}" for j in range(rng.randint(1, 30)))
        (folder / f"note_{i:04d}.txt").write_text("\n".join(lines) + "\n")
    (folder / "train.log").write_text("".join(f"step {s} | loss {2 + 1 / s:.4f} | lr 0.001\n" for s in range(1, 2001)))


def main(files: int, ref: str | None, repeat: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="sentinel-walk-"))
    write_folder(folder, files)
    from textlog_speed import forget  # empties the memos of the last file read: a process walking once

    packages = ["sentinel"]
    if ref is not None:
        from revision import import_as

        packages.append(import_as(ref, Path(tempfile.mkdtemp(prefix="sentinel-ref-"))).__name__)
    times: dict[str, list[float]] = {name: [] for name in packages}
    for _ in range(repeat):
        for name in packages:
            discover = importlib.import_module(f"{name}.analyze.discover")
            forget(*(importlib.import_module(f"{name}.analyze.loaders.{memo}") for memo in ("textlogs", "log_lines")))
            start = time.perf_counter()
            found = discover.discover(folder)
            times[name].append(time.perf_counter() - start)
            assert len(found.runs) == 1, f"{name}: {len(found.runs)} runs"
    for name, values in times.items():
        log.info("%-14s best %.2f s, median %.2f s (%d files)", name, min(values), statistics.median(values), files + 1)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--ref", default=None, help="also time the walk of this git revision")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main(args.files, args.ref, args.repeat)
