"""An earlier git revision of sentinel, beside the working tree, for before/after benchmarks.

``export(rev, into)`` writes the revision's ``sentinel`` (with ``cli/`` and ``callbacks/``
linked where the package expects them) under ``into`` and returns the directory to put first
on ``PYTHONPATH`` of a child process; ``import_as(rev, into, name)`` makes the revision's
package importable in this process under another name (``sentinel_ref``), its own imports
rewritten, so both copies can be timed in one loop.

Example:
    >>> env = {"PYTHONPATH": str(export("HEAD~5", Path(tmp)))}  # doctest: +SKIP
    >>> textscan = import_as("HEAD~5", Path(tmp), "sentinel_ref").analyze.loaders.textscan  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def _extract(rev: str, into: Path, *paths: str) -> None:
    blob = subprocess.run(["git", "-C", str(REPO), "archive", rev, *paths], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")


def export(rev: str, into: Path) -> Path:
    """The tree of ``rev`` under ``into/tree``, importable as ``sentinel`` with PYTHONPATH=<returned>."""
    tree = into / "tree"
    tree.mkdir(parents=True, exist_ok=True)
    _extract(rev, tree, "sentinel", "cli", "callbacks")
    for part in ("cli", "callbacks"):  # pyproject maps them into the package
        link = tree / "sentinel" / part
        if not link.exists():
            link.symlink_to(tree / part, target_is_directory=True)
    return tree


def import_as(rev: str, into: Path, name: str = "sentinel_ref") -> ModuleType:
    """The ``sentinel`` package of ``rev``, imported in this process as ``name``."""
    staging = into / "staging"
    staging.mkdir(parents=True, exist_ok=True)
    _extract(rev, staging, "sentinel")
    root = into / name
    (staging / "sentinel").rename(root)
    bare = re.compile(r"^(\s*)import sentinel$", re.M)  # keeps the name `sentinel` in that module
    pattern = re.compile(r"((?:from|import) )sentinel(?=[. \n])|([\"'])sentinel(?=\.)")
    for path in root.rglob("*.py"):
        text = bare.sub(rf"\1import {name} as sentinel", path.read_text())
        path.write_text(pattern.sub(lambda m: (m.group(1) or m.group(2)) + name, text))
    sys.path.insert(0, str(into))
    return importlib.import_module(name)
