"""``sentinel analyze``: load runs, run the detectors and rules, return a :class:`Report`.

Rendering (table, JSON, markdown, plot) lives in :mod:`sentinel.analyze.render`; its entry points
are exported here: :func:`render_table` (what ``sentinel analyze`` prints), :func:`render_markdown`,
:func:`render_json`, :func:`render_plot` (a PNG) and :func:`plot_figure` (the same plot as a
matplotlib ``Figure``).

The package itself is callable, so ``sentinel.analyze(path)`` works whether ``sentinel.analyze``
names the function exported by :mod:`sentinel` or this package (importing a submodule
rebinds the parent's attribute to the package).

Example:
    >>> import sentinel
    >>> report = sentinel.analyze("logs/")  # doctest: +SKIP
    >>> [(r.name, r.verdict.value) for r in report.runs]  # doctest: +SKIP
    [('run1', 'recovered')]
    >>> from sentinel.analyze import render_plot, render_table
    >>> print(render_table(report))  # doctest: +SKIP
    >>> render_plot(report, "report.png")  # doctest: +SKIP
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
    "RunData": "sentinel.analyze.loaders",
    "render_table": "sentinel.analyze.render.table",
    "render_markdown": "sentinel.analyze.render.markdown",
    "render_json": "sentinel.analyze.render.json_report",
    "render_plot": "sentinel.analyze.render.plot",
    "plot_figure": "sentinel.analyze.render.plot",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sentinel.analyze' has no attribute {name!r}")


class _CallablePackage(types.ModuleType):
    def __call__(self, *paths: Any, **options: Any):
        from sentinel.analyze.read_ahead import analyze_reading_ahead

        return analyze_reading_ahead(*paths, **options)


sys.modules[__name__].__class__ = _CallablePackage
