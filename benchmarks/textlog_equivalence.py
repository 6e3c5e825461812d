"""The text engine against an earlier revision of itself: the same result on every file.

Usage::

    python benchmarks/textlog_equivalence.py [--ref REV] [PATH ...]

Every text file under the PATHs (default: ``tests/fixtures`` and ``../shared/reallogs``) is
read with every dialect forced on it, by the working tree's engine and by the engine of
revision ``REV`` (default ``HEAD``, imported beside it as ``sentinel_ref``; both given the
working tree's dialects, so only the engine is compared), with no options and with
``loss_col`` / ``step_col`` set; the steps frames (values, dtypes, column order), events, meta, warnings
and any error must be identical. Exits 1 and lists the differences otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import tempfile
from pathlib import Path

import pandas as pd

from sentinel.analyze.loaders import LoadOptions
from sentinel.analyze.loaders import textscan
from sentinel.analyze.loaders.dialects import DIALECTS, LLMC
from sentinel.analyze.loaders.textlog import read_head, read_text

log = logging.getLogger("textlog_equivalence")
ROOT = Path(__file__).resolve().parents[1]
DEFAULTS = (ROOT / "tests" / "fixtures", ROOT.parent / "shared" / "reallogs")
OPTIONS = (LoadOptions(), LoadOptions(loss_col="lr"), LoadOptions(step_col="epoch"))


def outcome(scan, text: str, dialect, options) -> tuple:
    """What one scan gives: ``("ok", scan)`` or ``("error", type name, message)``."""
    try:
        return ("ok", scan(text, dialect, options))
    except Exception as exc:  # noqa: BLE001 - an error is an outcome to compare
        return ("error", type(exc).__name__, str(exc))


def differences(new: tuple, old: tuple) -> str | None:
    """None when both outcomes are the same, else what differs."""
    if new[0] != old[0] or new[0] == "error":
        return None if new == old else f"{_said(new)} != {_said(old)}"
    a, b = new[1], old[1]
    try:
        pd.testing.assert_frame_equal(a.steps, b.steps, check_exact=True)
        pd.testing.assert_frame_equal(a.events, b.events, check_exact=True)
    except AssertionError as exc:
        return str(exc).splitlines()[0] + " ..."
    if a.meta != b.meta:
        return f"meta {a.meta} != {b.meta}"
    if a.warnings != b.warnings:
        return f"warnings {a.warnings} != {b.warnings}"
    return None


def _said(result: tuple) -> str:
    return "ok" if result[0] == "ok" else f"{result[1]}: {result[2]}"


def files(paths: list[Path]) -> list[Path]:
    found = []
    for path in paths:
        for file in sorted([path] if path.is_file() else path.rglob("*")):
            if file.is_file() and read_head(file) is not None:
                found.append(file)
    return found


def main(paths: list[Path], ref: str = "HEAD") -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from revision import import_as

    package = import_as(ref, Path(tempfile.mkdtemp(prefix="sentinel-ref-")))
    old_scan = importlib.import_module(f"{package.__name__}.analyze.loaders.textscan").scan
    failures = checked = 0
    texts = files(paths)
    for file in texts:
        text = read_text(file)
        for dialect in (LLMC, *DIALECTS):
            for options in OPTIONS:
                diff = differences(outcome(textscan.scan, text, dialect, options),
                                   outcome(old_scan, text, dialect, options))
                checked += 1
                if diff is not None:
                    failures += 1
                    log.error("%s [%s, %s]: %s", file, dialect.name, options, diff)
    log.info("%d files x %d dialects x %d option sets: %d checks, %d differences",
             len(texts), len(DIALECTS) + 1, len(OPTIONS), checked, failures)
    return 1 if failures else 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, default=list(DEFAULTS))
    parser.add_argument("--ref", default="HEAD")
    args = parser.parse_args()
    sys.exit(main(args.paths, args.ref))
