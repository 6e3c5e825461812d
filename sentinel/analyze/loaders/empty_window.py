"""The NaN Lightning 1.x's progress bar shows as its loss before a step has run.

Lightning 1.x's bar shows as ``loss`` the mean of the last 20 steps' losses, and ``float("NaN")``
while that window is empty: the bar's first draws read ``loss=nan`` (tqdm's ``0/6 [..., loss=nan,
v_num=0]``, Rich's ``0/6 0:00:00 • -:--:-- 0.00it/s loss: nan``), and a Rich bar drawn before its
metrics refresh shows it at ``1/6`` too. Read as the run's first steps, they were a critical NaN on
runs that trained well. A real NaN in the first step's loss keeps the mean NaN for the window's 20
steps: a finite loss sooner says the NaNs before it were the empty window's; at step 0 no batch has run.

Example:
    >>> from types import SimpleNamespace
    >>> steps = pd.DataFrame({"loss": [float("nan"), float("nan"), 1.63, 1.2]}, index=[0, 1, 6, 12])
    >>> found = SimpleNamespace(steps=steps, events=None, meta={})
    >>> without_empty_window(found, "Epoch 0    ━━━━ 0/6 0:00:00 • -:--:-- 0.00it/s loss: nan\\n")[:40]
    "the bar's loss read NaN at its first 2 d"
    >>> found.steps.index.tolist()
    [6, 12]
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN
from sentinel.analyze.loaders.dialects import reads_bar_running_mean
from sentinel.analyze.loaders.log_lines import Lines

# Lightning 1.x's TensorRunningAccum window for the bar's loss.
_WINDOW = 20
# Lightning's Rich bar: "Epoch 0    ━━━╺━━━━━━ 1/6 0:00:09 • -:--:-- 0.00it/s loss: nan"
_RICH_BAR = re.compile(r"^Epoch \d+[^\S\n]+[━╸╺][━╸╺ ]*[^\S\n]\d+/\d+ [-\d:]+ • [^\n]*?\bloss: ", re.MULTILINE)
_RICH_WORDS = ("━",)


def without_empty_window(found, text: str, lines: Lines | None = None) -> str | None:
    """Drop from ``found`` (a scan's steps, events and meta) its first rows where their loss is NaN and a finite
    loss follows within 20 steps of the first (else those at step 0), where ``text`` is Lightning's bar with its
    running-mean loss (see the module), with their NaN events; return the warning that says so (None where
    nothing was dropped).

    Example:
        >>> from types import SimpleNamespace
        >>> nans = pd.DataFrame({"loss": [float("nan")] * 25 + [2.0]}, index=range(1, 27))  # a NaN at the first step
        >>> found = SimpleNamespace(steps=nans, events=None, meta={})
        >>> without_empty_window(found, "Epoch 0: 0%| | 0/9 [00:00<?, ?it/s, loss=nan, v_num=0]") is None
        True
    """
    loss = found.steps.get(metrics.LOSS)
    if loss is None or not len(loss) or np.isfinite(loss.iloc[0]):
        return None
    finite = np.flatnonzero(np.isfinite(loss.to_numpy(dtype=float)))
    if not len(finite):
        return None
    # within the window, every NaN before the first finite loss; else the draws at step 0 (no batch run yet)
    within = loss.index[finite[0]] - loss.index[0] < _WINDOW
    first = int(finite[0]) if within else int((loss.index[:finite[0]] <= 0).sum())
    held = Lines.of(text, lines)
    if not first or not (reads_bar_running_mean(text, held) or held.holds_any(_RICH_WORDS) and _RICH_BAR.search(text)):
        return None
    start = loss.index[first]
    found.steps = found.steps.iloc[first:]
    events = found.events
    if events is not None and len(events) and "kind" in events.columns:
        found.events = events[~((events["kind"] == "nonfinite") & (events["metric"] == metrics.LOSS)
                                 & (events["step"] < start))].reset_index(drop=True)
    told = (found.meta.get(LOGGED_NAN) or {}).get(metrics.LOSS)
    if told is not None:
        found.meta[LOGGED_NAN] = {**found.meta[LOGGED_NAN], metrics.LOSS: [s for s in told if s >= start]}
    return (f"the bar's loss read NaN at its first {first} draw(s), before step {start}: Lightning 1.x's bar "
            "shows the mean of the last 20 steps' losses, NaN while none has run; not read as the run's")
