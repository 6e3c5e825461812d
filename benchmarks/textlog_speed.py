"""Text-log parsing speed: the text engine against pandas reading the same numbers from a CSV.

Usage::

    python benchmarks/textlog_speed.py [LOG]

LOG defaults to the 20,344-step modded-nanogpt record log in ``../shared/reallogs``. The
baseline is ``pd.read_csv`` of the steps frame the engine produced (same rows, same columns),
timed in the same process; the figure is the best of several repeats of each.
"""

from __future__ import annotations

import io
import logging
import sys
import time
from pathlib import Path

import pandas as pd

from sentinel.analyze.loaders import LoadOptions, llmc

log = logging.getLogger("textlog_speed")
DEFAULT = (Path(__file__).resolve().parents[2] / "shared" / "reallogs" / "modded_nanogpt_records"
           / "2024-10-20_ScaleUp1B__87bd51fd.txt")


def best_of(fn, repeats: int = 7) -> float:
    """The shortest wall time of ``repeats`` calls, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main(path: Path) -> float:
    """Time both readers on ``path`` and return text time / CSV time."""
    (run,) = llmc.load(path, LoadOptions())
    csv_text = run.steps.to_csv()
    text_s = best_of(lambda: llmc.load(path, LoadOptions()))
    csv_s = best_of(lambda: pd.read_csv(io.StringIO(csv_text), index_col=0))
    ratio = text_s / csv_s
    log.info("%s: %d steps, %d columns, %.1f MB of text", path.name, len(run.steps), run.steps.shape[1],
             path.stat().st_size / 1e6)
    log.info("text parse %.1f ms, pd.read_csv of the same numbers %.1f ms: ratio %.2fx",
             text_s * 1e3, csv_s * 1e3, ratio)
    return ratio


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
