"""Steps printed rounded to thousands, millions, ... (``step:20K``), worked back to the steps they
were: LeRobot prints its step through ``format_big_number`` (no decimals), so from step 1,000 on
every line of a thousand steps shows the same ``1K``, ``2K``, ...

The lines are a training's logging interval apart: the interval is read from the steps printed
whole (below 1,000), else from how many lines share a rounded value, and the first step is the one
that puts every line's step inside the range its printed value rounds from.

Example:
    >>> unrounded(["600", "800", "1K", "1K", "1K", "2K", "2K"])
    [600, 800, 1000, 1200, 1400, 1600, 1800]
"""

from __future__ import annotations

import math
import statistics

_SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12, "Q": 10**15}
# Logging intervals people pick (10, 20, 25, 50, 100, 200, 250, 500, ...): tried first, nearest the
# interval the lines suggest.
_NICE = sorted({m * 10**k for k in range(7) for m in (1, 2, 2.5, 5) if m * 10**k == int(m * 10**k)})


def unrounded(printed: list[str]) -> list[int] | None:
    """The steps the ``printed`` values (``"800"``, ``"1K"``, ``"2M"``; in the order logged) were,
    or None where no one logging interval fits them (a restart, lines lost, too few lines to tell).

    Example:
        >>> unrounded(["1K"] * 5 + ["2K"] * 5 + ["3K"] * 5 + ["4K"] * 3)[:3], unrounded(["5K", "1K"])
        ([600, 800, 1000], None)
    """
    parsed = [_parsed(p) for p in printed]
    if len(parsed) < 2 or any(p is None for p in parsed):
        return None
    values = [p[0] for p in parsed]  # type: ignore[index]
    units = [p[1] for p in parsed]  # type: ignore[index]
    for interval in _intervals(values, units):
        first = _first(values, units, interval)
        if first is not None:
            return [int(first + i * interval) for i in range(len(values))]
    return None


def _parsed(text: str) -> tuple[float, int] | None:
    """``"20K"`` -> (20000.0, 1000): the value and the unit it was rounded to."""
    text = text.strip()
    suffix = text[-1:].upper() if text[-1:].isalpha() else ""
    unit = _SUFFIXES.get(suffix)
    try:
        return (float(text[:-1] if suffix else text) * unit, unit) if unit is not None else None
    except ValueError:
        return None


def _intervals(values: list[float], units: list[int]) -> list[int]:
    """The logging intervals to try: the one the steps printed whole give; else those near what the
    rounded values suggest (a value's lines: a unit over the interval; the first and last values,
    which a paste may cut, left out), the usual ones first."""
    whole = [v for v, u in zip(values, units) if u == 1]
    if len(whole) >= 2:
        gap = statistics.median(b - a for a, b in zip(whole, whole[1:]))
        return [int(gap)] if gap > 0 and gap == int(gap) else []
    runs: list[list] = []  # [value, unit, lines]
    for v, u in zip(values, units):
        if runs and runs[-1][0] == v:
            runs[-1][2] += 1
        else:
            runs.append([v, u, 1])
    inner = [r for r in runs[1:-1] if r[1] > 1]
    if not inner:
        return []
    guess = statistics.mean(r[1] / r[2] for r in inner)
    near = [d for d in _NICE if guess / 1.5 <= d <= guess * 1.5]
    return sorted({*near, max(1, round(guess))}, key=lambda d: (d not in near, abs(d - guess)))


def _first(values: list[float], units: list[int], interval: int) -> int | None:
    """The first step that, ``interval`` apart, puts every line's step in the range its printed
    value rounds from (half a unit either side; a whole number exactly), or None."""
    low = max(v - u / 2 - i * interval for i, (v, u) in enumerate(zip(values, units)))
    high = min(v + u / 2 - i * interval for i, (v, u) in enumerate(zip(values, units)))
    if low > high:
        return None
    first = math.ceil(low / interval) * interval  # steps that are multiples of their interval, mostly
    if first > high:
        first = math.ceil(low)
    return first if first <= high else None


def spread_rounded(printed: list[str]) -> list[int]:
    """Steps for ``printed`` values no one interval fits: each run of lines that print one value
    spread evenly over the range it rounds from, in order (a value it cannot read: the step before
    it, plus one). Approximate; what :func:`unrounded` cannot do.

    Example:
        >>> spread_rounded(["1K", "1K", "2K", "3K"])
        [750, 1250, 2000, 3000]
    """
    steps: list[int] = []
    at = 0
    while at < len(printed):
        end = at
        while end + 1 < len(printed) and printed[end + 1] == printed[at]:
            end += 1
        parsed = _parsed(printed[at])
        count = end - at + 1
        for j in range(count):
            if parsed is None:
                steps.append(steps[-1] + 1 if steps else 1)
            else:
                value, unit = parsed
                steps.append(int(value) if count == 1 else int(value - unit / 2 + (j + 0.5) * unit / count))
        at = end + 1
    return steps
