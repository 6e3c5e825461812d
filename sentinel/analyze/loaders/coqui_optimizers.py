"""The generator's total loss of a Coqui TTS model trained with two optimizers (VITS, the GAN vocoders).

Coqui's Trainer prints each optimizer's loss as ``loss_0`` and ``loss_1`` (and its grad norm as
``grad_norm_0``, ``grad_norm_1``) beside the terms: no key is ``loss``. Which number is the generator's
changed between releases (coqui-0.2's VITS: ``loss_0`` the generator's total, 20.48, ``loss_1`` the
discriminator's; later: ``loss_0`` the discriminator's, ``loss_1`` the generator's); the discriminator's is
the one whose values are ``loss_disc``'s, printed beside it. Read by key words alone, the loss was
``loss_gen``, the generator's adversarial term only (2.44 of a total of 20.48).

Example:
    >>> steps = pd.DataFrame({"loss_0": [20.5, 20.1], "loss_1": [3.2, 3.1], "loss_disc": [3.2, 3.1]})
    >>> warnings = []
    >>> list(generator_total(steps, {}, warnings).columns), warnings[0][:34]
    (['loss', 'loss_1', 'loss_disc'], "loss read from 'loss_0', the gener")
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN

_NUMBERED = ("loss_0", "loss_1")
_DISCRIMINATOR = "loss_disc"


def generator_total(steps: pd.DataFrame, meta: dict, warnings: list[str]) -> pd.DataFrame:
    """``steps`` with the generator's numbered total as the loss (and its grad norm as the total's), where
    no column is the loss and one of ``loss_0`` / ``loss_1`` prints ``loss_disc``'s values; a warning says
    which was read. ``meta``'s printed-NaN marks follow the renamed columns."""
    if metrics.LOSS in steps.columns or not all(c in steps.columns for c in (*_NUMBERED, _DISCRIMINATOR)):
        return steps
    disc = steps[_DISCRIMINATOR].to_numpy(dtype="float64")
    same = [k for k, name in enumerate(_NUMBERED)
            if np.allclose(steps[name].to_numpy(dtype="float64"), disc, rtol=1e-6, atol=0.0, equal_nan=True)]
    if len(same) != 1:
        return steps
    generator = 1 - same[0]
    names = {_NUMBERED[generator]: metrics.LOSS}
    if metrics.GRAD_NORM_TOTAL not in steps.columns and f"grad_norm_{generator}" in steps.columns:
        names[f"grad_norm_{generator}"] = metrics.GRAD_NORM_TOTAL
    told = meta.get(LOGGED_NAN)
    if told:
        meta[LOGGED_NAN] = {names.get(key, key): at for key, at in told.items()}
    warnings.append(f"loss read from '{_NUMBERED[generator]}', the generator's total ({_NUMBERED[same[0]]} is the "
                    f"discriminator's: its values are {_DISCRIMINATOR}'s)")
    return steps.rename(columns=names)
