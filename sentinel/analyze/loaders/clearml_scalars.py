"""Loader for ClearML's scalars as its API and web page hand them out.

``Task.get_reported_scalars()`` returns ``{"<title>": {"<series>": {"x": [...], "y": [...]}}}``
(``logger.report_scalar(title, series, value, iteration)``; the iterations in ``x``), which
people save with ``json.dump``; a scalar plot's "Download JSON" on the web page is the plot's
traces, ``[{"name": "<series>", "x": [...], "y": [...], "type": "scatter", ...}]``, the title in
the file's name (``train.json``). Each series is a column ``<title>/<series>`` (``train/loss``);
the machine monitoring ClearML adds (``:monitor:gpu``, ``:monitor:machine``) is left out.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from sentinel.analyze.loaders import LOGGED_NAN, LoadOptions, RunData
from sentinel.analyze.loaders.numeric_table import metric_series_frame
from sentinel.analyze.loaders.sacred_metrics import listed_series
from sentinel.analyze.loaders.textlog import head_matches, read_json, run_name

NAME = "clearml"
DESCRIPTION = ("ClearML scalars (Task.get_reported_scalars(): {'<title>': {'<series>': {'x': [...], 'y': [...]}}}; "
               "a scalar plot's Download JSON)")

# {"title": {"series": {"x": [ ... , or a plot's traces: [{..., "x": [ ... (an "x" list among the
# first trace's keys: a JSON array of rows has none).
_SNIFF = re.compile(r'^\s*(?:\{\s*"(?:[^"\\]|\\.)*"\s*:\s*\{\s*"(?:[^"\\]|\\.)*"\s*:\s*\{\s*"[xy]"\s*:\s*\['
                    r'|\[\s*\{[^{}\[\]]*?"x"\s*:\s*\[)')
MAX_BYTES = 256 << 20
_MONITOR = ":monitor:"


def sniff(path: str | Path) -> bool:
    """True for a JSON file of ClearML's reported scalars, or of a plot's traces.

    Example:
        >>> sniff("/nonexistent/scalars.json")
        False
    """
    return Path(path).suffix.lower() == ".json" and head_matches(path, _SNIFF, 4096, MAX_BYTES)


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read one file of ClearML scalars.

    Returns:
        One :class:`RunData` named after the file's folder, a column per series.

    Raises:
        ValueError: not such a file, or no loss among the series (the message lists them).

    Example:
        >>> run = load("exports/reported_scalars.json")[0]  # doctest: +SKIP
        >>> list(run.steps.columns)  # doctest: +SKIP
        ['loss', 'train/lr', 'validation/loss']
    """
    options = options or LoadOptions()
    path = Path(path)
    found = read_json(path, "a ClearML scalars file")
    warnings: list[str] = []
    series: dict[str, pd.Series] = {}
    if isinstance(found, dict):
        for title, by_series in found.items():
            if str(title).startswith(_MONITOR) or not isinstance(by_series, dict):
                continue
            for name, entry in by_series.items():
                key = str(title) if str(name) == str(title) else f"{title}/{name}"
                got = listed_series(key, entry, path, warnings, ("x", "y"))
                if got is not None:
                    series[key] = got
    elif isinstance(found, list):  # a plot's traces: the title is the file's name
        for trace in found:
            if isinstance(trace, dict):
                key = f"{path.stem}/{trace.get('name', 'value')}"
                got = listed_series(key, trace, path, warnings, ("x", "y"))
                if got is not None:
                    series[key] = got
    if not series:
        raise ValueError(f"{path}: no series with 'x' and 'y' lists of numbers: not a ClearML scalars file")
    logged_nan: dict[str, list[int]] = {}
    steps = metric_series_frame(series, options.loss_col, path, warnings, "series", logged_nan=logged_nan)
    return [RunData(name=run_name(path), path=str(path), source=NAME, steps=steps,
                    meta={"format": NAME, "series": list(series), LOGGED_NAN: logged_nan}, warnings=warnings)]
