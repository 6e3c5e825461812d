"""Find the runs under a path: each run is recognised by its files and loaded by its loader."""

from __future__ import annotations

import importlib
import logging
import os
from pathlib import Path
from types import ModuleType

from sentinel.analyze.loaders import LOADER_MODULES, LoadOptions, RunData

log = logging.getLogger(__name__)

# Directories that never hold a run of their own (a sentinel run's tb/ mirror is pruned with
# its run, not here).
_SKIP_DIRS = frozenset({".git", ".venv", "__pycache__", ".ipynb_checkpoints", "node_modules"})


class NoRunsError(ValueError):
    """Nothing under the path could be read as a run; the message says what was tried."""


def loaders() -> list[ModuleType]:
    """The loader modules that are installed, in :data:`LOADER_MODULES` order."""
    found = []
    for name in LOADER_MODULES:
        try:
            found.append(importlib.import_module(f"sentinel.analyze.loaders.{name}"))
        except ModuleNotFoundError as err:
            if err.name != f"sentinel.analyze.loaders.{name}":
                raise  # the loader exists but one of its own imports is missing
            log.debug("loader %s is not installed", name)
    return found


def describe_formats() -> str:
    """The formats the loaders recognise, for error messages."""
    return "; ".join(getattr(m, "DESCRIPTION", m.NAME) for m in loaders())


def discover_runs(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Load every run found at ``path`` (a file, a run directory, or a directory of runs).

    Directories are walked top-down. A directory a loader claims as a whole (a sentinel run,
    a directory of TensorBoard event files) is one run; a sentinel run's subdirectories (its
    ``tb/`` mirror) are not walked. Other files are offered to the loaders one by one, in
    :data:`LOADER_MODULES` order; the first that recognises a file loads it.

    Args:
        path: where to look.
        options: column choices passed to every loader.

    Returns:
        The runs, in path order.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        NoRunsError: the path is empty or holds nothing a loader recognises.

    Example:
        >>> runs = discover_runs("logs/")  # doctest: +SKIP
        >>> [(r.name, r.source) for r in runs]  # doctest: +SKIP
        [('run1', 'sentinel'), ('version_0', 'tensorboard')]
    """
    options = options or LoadOptions()
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"path '{path}' does not exist: pass a run directory or a log file")
    modules = loaders()
    if path.is_file():
        runs = _load_file(path, modules, options)
        if runs is None:
            raise NoRunsError(f"'{path}' is not a log format sentinel reads (tried: {describe_formats()}): "
                              "pass --step-col/--loss-col for a table, or a directory of runs")
        return runs
    if not any(path.iterdir()):
        raise NoRunsError(f"directory '{path}' is empty: pass a directory that holds training logs")
    runs: list[RunData] = []
    for directory, subdirs, files in os.walk(path):
        subdirs[:] = sorted(d for d in subdirs if d not in _SKIP_DIRS)
        here = Path(directory)
        claimed = _claim_directory(here, modules)
        if claimed is not None:
            runs.extend(claimed.load(here, options))
            if claimed.NAME == "sentinel":
                subdirs[:] = []  # its tb/ holds the same scalars: not a second run
            continue
        for name in sorted(files):
            found = _load_file(here / name, modules, options)
            if found:
                runs.extend(found)
    if not runs:
        raise NoRunsError(f"no training logs found in '{path}' (tried: {describe_formats()}): "
                          "pass a directory written by sentinel, TensorBoard or a Lightning logger")
    return runs


def _claim_directory(directory: Path, modules: list[ModuleType]) -> ModuleType | None:
    for module in modules:
        if module.NAME in ("sentinel", "tensorboard") and module.sniff(directory):
            return module
    return None


def _load_file(file: Path, modules: list[ModuleType], options: LoadOptions) -> list[RunData] | None:
    for module in modules:
        if module.NAME == "sentinel":
            continue
        if module.sniff(file):
            return module.load(file, options)
    return None
