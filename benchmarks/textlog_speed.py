"""Text-log parsing speed: the text engine against pandas reading the same numbers from a CSV.

Usage::

    python benchmarks/textlog_speed.py [LOG] [--ref REV] [--repeat N]

LOG defaults to the 20,344-step modded-nanogpt record log in ``../shared/reallogs``, read by the
llm.c reader; any other log is read as ``sentinel analyze`` reads a file named on its own
(``discover_runs``: every loader's sniff, then the text reader's pick of a dialect and its read;
each time from the start, the memos of the last file read emptied). The baseline is
``pd.read_csv`` of the steps frame the engine produced (same rows, same columns),
timed in the same process; each reader runs ``--repeat`` times, interleaved, and the best and
the median of each are reported. ``--ref REV`` also times the engine of git revision ``REV``
(imported beside the working tree as ``sentinel_ref``) in the same loop: before and after in
one run.
"""

from __future__ import annotations

import argparse
import importlib
import io
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from sentinel.analyze.loaders import LoadOptions, llmc

log = logging.getLogger("textlog_speed")
DEFAULT = (Path(__file__).resolve().parents[2] / "shared" / "reallogs" / "modded_nanogpt_records"
           / "2024-10-20_ScaleUp1B__87bd51fd.txt")


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def forget(textlogs, log_lines) -> None:
    """Empty the text readers' memos of the last text they read (the pick of a dialect for a
    head, its line split), where the revision has them."""
    if hasattr(textlogs, "_last_pick"):
        textlogs._last_pick = (None, None, None)
    if hasattr(log_lines, "_last_shared"):
        log_lines._last_shared[0] = None


def main(path: Path, ref: str | None = None, repeat: int = 15) -> float:
    """Time the readers on ``path`` and return text time / CSV time (best of each)."""
    module = "analyze.loaders.llmc" if llmc.sniff(path) else "analyze.discover"

    def reader(package: str):
        found = importlib.import_module(f"{package}.{module}")
        if module.endswith("llmc"):
            return lambda: found.load(path, LoadOptions())
        memos = [importlib.import_module(f"{package}.analyze.loaders.{name}") for name in ("textlogs", "log_lines")]

        def read():
            # Each read pays its sniffs, as a process reading one file does: the memos of the
            # last head read (kept for the load that follows a sniff) are emptied first.
            forget(*memos)
            return found.discover_runs(path)
        return read

    (run,) = reader("sentinel")()
    csv_text = run.steps.to_csv()
    readers = {"text engine": reader("sentinel"),
               "pd.read_csv": lambda: pd.read_csv(io.StringIO(csv_text), index_col=0)}
    if ref is not None:
        from revision import import_as

        package = import_as(ref, Path(tempfile.mkdtemp(prefix="sentinel-ref-")))
        (old,) = reader(package.__name__)()
        # the same numbers, before and after (a column read now and not then is said)
        pd.testing.assert_frame_equal(old.steps, run.steps[old.steps.columns])
        added = [c for c in run.steps.columns if c not in old.steps.columns]
        if added:
            log.info("read now and not at %s: %s", ref, ", ".join(added))
        readers[f"text engine at {ref}"] = reader(package.__name__)
    times: dict[str, list[float]] = {name: [] for name in readers}
    for _ in range(repeat):
        for name, fn in readers.items():
            times[name].append(timed(fn))
    log.info("%s (%s): %d steps, %d columns, %.1f MB of text; best / median of %d, interleaved",
             path.name, module.rsplit(".", 1)[1], len(run.steps), run.steps.shape[1], path.stat().st_size / 1e6, repeat)
    for name, values in times.items():
        log.info("  %-28s %7.1f ms / %7.1f ms", name, min(values) * 1e3, statistics.median(values) * 1e3)
    ratio = min(times["text engine"]) / min(times["pd.read_csv"])
    log.info("ratio text engine / pd.read_csv: %.2fx best, %.2fx median", ratio,
             statistics.median(times["text engine"]) / statistics.median(times["pd.read_csv"]))
    if ref is not None:
        key = f"text engine at {ref}"
        log.info("ratio %s / text engine: %.2fx best, %.2fx median", key, min(times[key]) / min(times["text engine"]),
                 statistics.median(times[key]) / statistics.median(times["text engine"]))
    return ratio


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--ref", default=None, help="also time the engine of this git revision")
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main(args.log, args.ref, args.repeat)
