"""``sentinel analyze``: load runs, run the detectors and rules, return a :class:`Report`.

Rendering (table, JSON, markdown, plot) lives in :mod:`sentinel.analyze.render`.

The package itself is callable, so ``sentinel.analyze(path)`` works whether ``sentinel.analyze``
names the function exported by :mod:`sentinel` or this package (importing a submodule
rebinds the parent's attribute to the package).

Example:
    >>> import sentinel
    >>> report = sentinel.analyze("logs/")  # doctest: +SKIP
    >>> [(r.name, r.verdict.value) for r in report.runs]  # doctest: +SKIP
    [('run1', 'recovered')]
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

# Public names, loaded on first use: pandas and the loaders are not needed to import the CLI.
_LAZY = {
    "analyze": "sentinel.analyze.analyzer",
    "analyze_run": "sentinel.analyze.analyzer",
    "AnalyzeError": "sentinel.analyze.analyzer",
    "AnalyzeConfig": "sentinel.analyze.config",
    "Incident": "sentinel.analyze.incident",
    "IncidentKind": "sentinel.analyze.incident",
    "Severity": "sentinel.analyze.incident",
    "Report": "sentinel.analyze.report",
    "RunReport": "sentinel.analyze.report",
    "Verdict": "sentinel.analyze.report",
    "discover_runs": "sentinel.analyze.discover",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sentinel.analyze' has no attribute {name!r}")


class _CallablePackage(types.ModuleType):
    def __call__(self, *paths: Any, **options: Any):
        from sentinel.analyze.analyzer import analyze

        return analyze(*paths, **options)


sys.modules[__name__].__class__ = _CallablePackage
