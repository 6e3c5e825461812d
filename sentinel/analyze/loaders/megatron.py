"""Loader for Megatron-LM / Megatron-DeepSpeed / NeMo / GPT-NeoX / nanotron stdout logs.

The lines are read by the text engine (:mod:`~sentinel.analyze.loaders.textscan`) with the
:data:`~sentinel.analyze.loaders.dialects.MEGATRON` dialect (what is read is described there):
a row per logged iteration (``loss``, ``lr``, ``grad_norm/total``, ``loss_scale``,
``amp/skipped_steps``, ``nan_iterations``, ``iter_time_ms``, ``val_loss``, ...), ``overflow``
events (DeepSpeed's overflow lines, given the step of the next iteration line; Megatron's skipped
iterations) and ``nonfinite`` events (nan iterations, a logged NaN/Inf loss or grad norm). This
module keeps the loader's own place in the discovery order (before the other text logs) and its
``--loss-col`` rule: a field as printed (``"grad norm"``) or its key; the step is always the
iteration.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN, LoadOptions, RunData
from sentinel.analyze.loaders.dialects import MEGATRON
from sentinel.analyze.loaders.record_fields import metric_key
from sentinel.analyze.loaders.textlog import read_head, read_text, run_name
from sentinel.analyze.loaders.textscan import scan

NAME = MEGATRON.name
DESCRIPTION = MEGATRON.description


def sniff(path: str | Path) -> bool:
    """True when the file holds Megatron-style iteration lines.

    Example:
        >>> sniff("/nonexistent.log")
        False
    """
    head = read_head(path)
    # A substring search first: the pattern's scan of a megabyte without it took ~25 ms.
    return head is not None and "iteration" in head and MEGATRON.sniff.search(head) is not None


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read one Megatron / Megatron-DeepSpeed / NeMo stdout log.

    Args:
        path: the log file.
        options: ``loss_col`` names another field of the iteration lines as the loss
            (as printed, e.g. ``"mtp loss"``); the step is always the iteration.

    Returns:
        One :class:`RunData`: a row per logged iteration and ``overflow`` / ``nonfinite`` events.

    Raises:
        ValueError: the file has no iteration line, or ``loss_col`` names no field of it.

    Example:
        >>> runs = load("logs/train.out")  # doctest: +SKIP
        >>> runs[0].steps[["loss", "loss_scale"]].tail()  # doctest: +SKIP
    """
    from sentinel.analyze.loaders.textlogs import note_crash  # the text reader's engine: lazily

    text = read_text(path)
    found = scan(text, MEGATRON)
    if not len(found.steps.index):
        raise ValueError(f"{path}: no Megatron iteration lines found; is this a Megatron/NeMo stdout log?")
    # A traceback after the last iteration line: where the run ended (looked for after it: "iteration"
    # is found near the end at once, a traceback absent from most logs would be looked for in all of it)
    note_crash(text, found, MEGATRON, after=text.rfind("iteration"))
    steps = found.steps
    if options is not None and options.loss_col:
        steps = _use_as_loss(steps, options.loss_col, path)
        for stretch in found.abandoned:  # the named field is the loss of the replaced stretches too
            stretch.steps = _use_as_loss(stretch.steps, options.loss_col, path)
    steps = _skipped_interval_zeros(steps, found.warnings)
    for stretch in found.abandoned:
        stretch.steps = _skipped_interval_zeros(stretch.steps, [])
    meta = found.meta
    if not (options is not None and options.loss_col):
        steps = _unprinted_nan_losses(steps, meta, found.warnings)
    if len(steps.index) > 1:
        meta["log_interval"] = int(steps.index.to_series().diff().median())
    if metrics.LOSS not in steps.columns:
        found.warnings.append("no loss printed yet (lm loss): Megatron prints it from the first iteration it does not "
                              "skip (fp16 warm-up skips iterations until the loss scale fits); the loss "
                              "scale and the skipped iterations are judged")
    return [RunData(name=run_name(path), path=str(path), source=NAME, steps=steps, events=found.events,
                    meta=meta, warnings=found.warnings, abandoned=found.abandoned)]


def _unprinted_nan_losses(steps: pd.DataFrame, meta: dict, warnings: list[str]) -> pd.DataFrame:
    """``steps`` with the loss NaN, as logged, at iteration lines that print none though some of
    their interval's iterations were taken: Megatron prints a loss only where its average over
    the interval is above 0 (``if avg > 0.0``), and the average of the iterations it took is in
    its sums from the first one on, so a loss left out there was NaN (Megatron-DeepSpeed's
    ``grad norm: nan`` lines with no ``lm loss``). An interval it skipped whole prints none
    either (fp16 warm-up): not NaN.

    Example:
        >>> s = pd.DataFrame({"amp/skipped_steps": [0.0, 0.0, 1.0]}, index=[10, 11, 12])
        >>> meta = {}
        >>> bool(_unprinted_nan_losses(s, meta, [])["loss"].isna().all()), meta
        (True, {'logged_nan': {'loss': [10, 11]}})
    """
    if metrics.AMP_SKIPPED_STEPS not in steps.columns or len(steps.index) < 2:
        return steps
    iterations = steps.index.to_numpy()
    interval = pd.Series(iterations).diff().bfill().to_numpy()  # iterations each line covers
    skipped = steps[metrics.AMP_SKIPPED_STEPS].to_numpy()
    loss = steps[metrics.LOSS].to_numpy() if metrics.LOSS in steps.columns else None
    unprinted = (pd.isna(loss) if loss is not None else True) & (skipped < interval)
    others = [c for c in steps.columns if "loss" in c and c not in (metrics.LOSS, metrics.LOSS_SCALE)]
    if others:  # a loss under a name of its own printed there: not the loss left out
        unprinted &= ~steps[others].notna().any(axis=1).to_numpy()
    if not unprinted.any():
        return steps
    steps = steps.copy()
    if metrics.LOSS not in steps.columns:
        steps[metrics.LOSS] = float("nan")
    at = iterations[unprinted].tolist()
    logged = meta.setdefault(LOGGED_NAN, {})
    logged[metrics.LOSS] = sorted(set(logged.get(metrics.LOSS, [])) | set(at))
    warnings.append(f"{len(at)} iteration line(s) print no loss though their iterations were taken (first at "
                    f"{at[0]}): Megatron leaves out a loss whose average is not above 0, so it was NaN there")
    return steps


def _skipped_interval_zeros(steps: pd.DataFrame, warnings: list[str]) -> pd.DataFrame:
    """``steps`` without the loss GPT-NeoX prints for an interval it skipped whole: it divides the
    losses of the iterations it took (none) by at least one, and prints ``lm_loss: 0.000000E+00``
    beside ``number of skipped iterations: 10`` (Megatron-LM leaves the field out). Read as a loss,
    an fp16 run that went NaN was a loss collapsed to 0, stuck there."""
    if metrics.LOSS not in steps.columns or metrics.AMP_SKIPPED_STEPS not in steps.columns:
        return steps
    placeholder = (steps[metrics.LOSS] == 0.0) & (steps[metrics.AMP_SKIPPED_STEPS] > 0)
    if not placeholder.any():
        return steps
    steps = steps.copy()
    steps.loc[placeholder, metrics.LOSS] = float("nan")
    warnings.append(f"{int(placeholder.sum())} iteration line(s) print a loss of 0 for an interval whose iterations "
                    "were all skipped (GPT-NeoX's placeholder): read as no loss logged there")
    return steps


def _use_as_loss(steps: pd.DataFrame, field: str, path: str | Path) -> pd.DataFrame:
    """The column of the field the user named (``--loss-col``) becomes ``loss``."""
    key = field if field in steps.columns else metric_key(MEGATRON, field)
    if key == metrics.LOSS:
        return steps
    if key not in steps.columns:
        raise ValueError(f"{path}: no field {field!r} on the iteration lines; --loss-col takes a field as "
                         "printed (e.g. 'lm loss') or one of: "
                         + ", ".join(c for c in steps.columns))
    return steps.drop(columns=[metrics.LOSS], errors="ignore").rename(columns={key: metrics.LOSS})
