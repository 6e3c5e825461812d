"""How much a short stretch of a logged series wanders: the robust spreads the rules hold a jump,
a rise or a repeat to, and the resolution its values were printed with."""

from __future__ import annotations

import numpy as np
import pandas as pd


def printed_unit(values) -> float:
    """One unit of the last decimal the finest of ``values`` was printed with (10 decimals at
    most): 0.001 for a loss printed as 0.011, 0.017, 0.012; 1e-10 for full-precision floats.

    Example:
        >>> printed_unit([0.011, 0.017, 0.01]), printed_unit([2.0035, 2.0034])
        (0.001, 0.0001)
    """
    x = np.asarray(values, dtype="float64")
    x = x[np.isfinite(x)]
    tolerance = 1e-12 * np.maximum(1.0, np.abs(x))
    decimals = 0
    while decimals < 10 and bool((np.abs(np.round(x, decimals) - x) > tolerance).any()):
        decimals += 1  # one value needs more
    return 10.0 ** -decimals


def mad_sigma(values: np.ndarray, center: float) -> float:
    """The median absolute deviation of ``values`` from ``center`` as a normal's sigma (never 0:
    a flat stretch holds a jump to a tiny spread, not to none).

    Example:
        >>> round(mad_sigma(np.array([1.0, 2.0, 3.0, 4.0, 5.0]), 3.0), 3)
        1.483
    """
    return max(float(np.median(np.abs(values - center))) / 0.6745, 1e-6)


def step_noise(values: np.ndarray) -> float:
    """The row-to-row noise of ``values`` as one value's sigma: the robust spread of their
    successive differences about their median (a steady trend moves them all alike), over sqrt 2.

    Example:
        >>> step_noise(np.arange(10.0)), round(step_noise(np.array([1.0, 1.5, 1.2, 1.9, 1.1, 1.6])), 3)
        (0.0, 0.21)
    """
    steps = np.diff(values)
    return float(1.4826 * float(np.median(np.abs(steps - np.median(steps)))) / np.sqrt(2))


# A loss that reads exactly 0 at this many logged steps at least, and at half of them, is printed below its digits
# where its other values are this many units of its last printed digit at most.
_BELOW_DIGIT_ZEROS = 10
_BELOW_DIGIT_UNITS = 10


def below_printed_digit(loss: pd.Series) -> str | None:
    """The warning for a loss printed with too few decimals to show it: after values above 0, most
    of it (half or more, ten values at least) reads exactly 0, the rest a few units of its last printed
    digit (a PaiNN run's "Train Loss: 0.0000" from its second epoch on, 0.0001 now and then):
    its changes there are not in the log. None for any other loss.

    Example:
        >>> below_printed_digit(pd.Series([0.0212] + [0.0, 0.0, 0.0001] * 10))[:45]
        'the loss reads exactly 0 at 20 of 31 logged s'
        >>> below_printed_digit(pd.Series([0.5, 0.2] + [0.0] * 20)) is None  # zeros alone: a loss of exactly 0
        True
    """
    values = loss.to_numpy(dtype="float64")
    zero = values == 0
    zeros = int(zero.sum())
    if zeros < _BELOW_DIGIT_ZEROS or 2 * zeros < len(values) or not values[0] > 0:
        return None
    first = int(np.argmax(zero))
    unit, tail = printed_unit(values), values[first:]
    # (a unit now and then among the zeros shows a value hovering at the digit; zeros alone are the
    # stuck rule's: a loss of exactly 0)
    if unit < 1e-6 or bool(zero[first:].all()) or not bool((np.abs(tail) <= _BELOW_DIGIT_UNITS * unit).all()):
        return None
    decimals = round(-np.log10(unit))
    return (f"the loss reads exactly 0 at {zeros} of {len(values)} logged steps from step {int(loss.index[first])} on, "
            f"the others there at most {float(np.abs(tail).max()):g}: printed with {decimals} decimals, it has fallen "
            "below them and its changes are not in the log (print it with more digits, or as 1.2e-05)")


def end_levels(values: np.ndarray, share: int) -> tuple[float, float]:
    """The median of a stretch's first and of its last ``1/share`` of values (one at least): where
    its level stood at either end, a noisy per-batch loss's noise averaged out.

    Example:
        >>> end_levels(np.array([1.27, 7.79, 14.97, 22.42, 60.93, 1053.0]), 2)
        (7.79, 60.93)
    """
    rows = max(1, len(values) // share)
    return float(np.median(values[:rows])), float(np.median(values[-rows:]))

