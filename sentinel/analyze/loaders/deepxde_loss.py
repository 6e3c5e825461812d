"""DeepXDE's loss history file: ``loss.dat``, written by ``dde.saveplot`` / ``save_loss_history``.

``np.savetxt`` writes the header ``# step, loss_train, loss_test, metrics_test`` (names apart by
commas) over rows whose numbers are apart by spaces: the step, each loss term's training value,
each term's test value, then each test metric's. The header names groups, not columns, so a
table reader finds no column of it in the rows (it read every loss as missing: a NaN run). The
loss is the sum of the training terms, as DeepXDE's own ``plot_loss_history`` draws it; the test
loss the sum of the test terms (``val_loss``). The file does not say how many metrics follow: as
many as leave the training and test terms equal in number, fewest first (0 or 1: the number
DeepXDE's examples compile), with a warning naming the split.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LoadOptions, RunData
from sentinel.analyze.loaders.textlog import head_matches, run_name

NAME = "deepxde"
DESCRIPTION = "DeepXDE's loss.dat (dde.saveplot): the step, each loss term's training and test value, the test metrics"
_HEADER = re.compile(r"#[^\S\n]*step,[^\S\n]*loss_train,[^\S\n]*loss_test(?:,[^\S\n]*metrics_test)?[^\S\n]*\r?\n")
# A history longer than this is no loss.dat (DeepXDE writes a row per display step: thousands).
_MAX_BYTES = 256 << 20


def sniff(path: str | Path) -> bool:
    """True for a file that starts with the header ``save_loss_history`` writes (and is not larger than
    a loss history is).

    Example:
        >>> sniff("/nonexistent/loss.dat")
        False
    """
    return head_matches(path, _HEADER, 4096, _MAX_BYTES)  # (the head Sacred's sniff reads too)


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read a ``loss.dat``: ``loss`` the sum of the training terms, ``val_loss`` of the test terms,
    ``loss/term<i>`` each training term, ``metric_test<j>`` each test metric.

    Raises:
        ValueError: no row of numbers, or rows of different lengths (not one history).

    Example:
        >>> load("/nonexistent/loss.dat")
        Traceback (most recent call last):
        ...
        ValueError: /nonexistent/loss.dat: not readable ([Errno 2] No such file or directory: '/nonexistent/loss.dat')
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > _MAX_BYTES:
            raise ValueError(f"{path}: {size >> 20} MB is no DeepXDE loss history: pass the log DeepXDE printed")
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        raise ValueError(f"{path}: not readable ({err})") from None
    rows = [line.split() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    widths = sorted({len(row) for row in rows})
    if not rows or len(widths) != 1 or widths[0] < 3:
        found = f"rows of {', '.join(map(str, widths))} numbers" if rows else "no rows"
        raise ValueError(f"{path}: DeepXDE's header over {found}, not rows of one length (the step, the training "
                         "terms, the test terms): save the history again (dde.saveplot), or pass the log DeepXDE "
                         "printed")
    try:
        table = np.array(rows, dtype=np.float64)
    except ValueError:
        raise ValueError(f"{path}: a row under DeepXDE's header holds text, not numbers: not a loss history "
                         "sentinel reads") from None
    if not (np.isfinite(table[:, 0]).all() and (table[:, 0] == np.round(table[:, 0])).all()
            and np.abs(table[:, 0]).max() < 2 ** 62):
        raise ValueError(f"{path}: the first number of a row under DeepXDE's header is no step (a whole number): "
                         "not a loss history sentinel reads")
    width = table.shape[1] - 1
    n_metrics = width % 2  # the fewest that leave as many test terms as training terms
    terms = (width - n_metrics) // 2
    train, test = table[:, 1:1 + terms], table[:, 1 + terms:1 + 2 * terms]
    columns = {metrics.LOSS: train.sum(axis=1), metrics.VAL_LOSS: test.sum(axis=1)}
    if terms > 1:
        columns.update({f"loss/term{i}": train[:, i] for i in range(terms)})
    columns.update({f"metric_test{j}": table[:, 1 + 2 * terms + j] for j in range(n_metrics)})
    steps = pd.DataFrame(columns, index=pd.Index(table[:, 0].astype(np.int64), name="step"))
    steps = steps[~steps.index.duplicated(keep="last")].sort_index()  # a step written twice: its last row
    warnings = [f"{path.name}: {width} numbers after the step read as {terms} loss term(s), training then test"
                f"{f', and {n_metrics} test metric' if n_metrics else ''}; the loss is the training terms' sum"]
    return [RunData(name=run_name(path), path=str(path), source=NAME, steps=steps,
                    meta={"format": NAME, "loss_terms": terms}, warnings=warnings)]
