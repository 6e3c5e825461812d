"""Loader for llm.c and modded-nanogpt text logs (the ``llmc`` dialect of the text engine).

Two line shapes, each ``key:value`` tokens after a step:

- llm.c ``main.log`` (and early modded-nanogpt): ``s:120 trl:5.4321 lr:0.000600 norm:1.23``
  for a training step and ``s:250 tel:4.9876`` for a validation point.
- modded-nanogpt: ``step:120/3000 train_loss:5.4321 train_time:41873ms step_avg:349.0ms`` and
  ``step:125/3000 val_loss:4.9876 train_time:...``.

Keys: ``trl``/``train_loss`` -> ``loss``, ``tel``/``val_loss`` -> ``val_loss``, ``lr`` ->
``lr``, ``norm`` -> ``grad_norm/total``; times with a unit (``41873ms``, ``1.2s``) become
``<name>_ms``; anything else keeps its name through :func:`canonical_key`. Everything else
in the file (a training script printed first, nvidia-smi output) is ignored. A logged
``nan``/``inf`` loss or grad norm makes a ``nonfinite`` event. The dialect itself is
:data:`sentinel.analyze.loaders.dialects.LLMC`.
"""

from __future__ import annotations

from pathlib import Path

from sentinel import metrics
from sentinel.analyze.loaders import LOGGED_NAN, LoadOptions, RunData
from sentinel.analyze.loaders.dialects import LLMC
from sentinel.analyze.loaders.log_lines import Lines
from sentinel.analyze.loaders.textlog import read_head, read_text, run_name
from sentinel.analyze.loaders.textscan import clean_text, count_records, scan

NAME = "llmc"
DESCRIPTION = LLMC.description


def sniff(path: str | Path) -> bool:
    """True when the file has llm.c (``s:N trl:X``) or modded-nanogpt (``step:N/M train_loss:X``) lines.

    Example:
        >>> sniff("/nonexistent.log")
        False
    """
    head = read_head(path)
    # The head's lines cleaned, as the text readers' sniff splits them (shared with it).
    return head is not None and count_records(Lines.shared(head).derived(clean_text), LLMC) >= LLMC.min_records


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read one llm.c / modded-nanogpt log.

    Args:
        path: the log file.
        options: ``loss_col`` / ``step_col`` pick another token as the loss / the step.

    Returns:
        One :class:`RunData` with a row per step (``loss``, ``lr``, ``grad_norm/total``,
        ``val_loss``, ...; a step with both a train and a val line has both).

    Raises:
        ValueError: the file has no step line.

    Example:
        >>> run = load("records/llmc/main.log")[0]  # doctest: +SKIP
        >>> run.steps["loss"].count()  # doctest: +SKIP
        19560
    """
    found = scan(read_text(path), LLMC, options)
    if not len(found.steps.index):
        raise ValueError(f"{path}: no llm.c ('s:N trl:X') or modded-nanogpt ('step:N/M train_loss:X') lines found")
    steps = found.steps
    if metrics.LOSS not in steps.columns:
        if "val_loss" in steps.columns:  # a grep for val_loss, or a log of validation points only
            found.warnings.append("no training-loss lines: the validation loss is judged instead")
            steps = steps.rename(columns={"val_loss": metrics.LOSS})
            printed_nan = found.meta.get(LOGGED_NAN, {})
            if "val_loss" in printed_nan:  # its printed NaNs go with it
                printed_nan[metrics.LOSS] = printed_nan.pop("val_loss")
        else:
            found.warnings.append("no training-loss lines were found")
    return [RunData(name=run_name(path), path=str(path), source=NAME, steps=steps, events=found.events,
                    meta=found.meta, warnings=found.warnings, abandoned=found.abandoned)]
