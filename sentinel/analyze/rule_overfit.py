"""Overfitting: an evaluation loss that rose after its best while the training loss went on
falling (information: the training is stable, the model is learning its training data)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.config import AnalyzeConfig
from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.loaders.keys import looks_like_eval_loss


def overfitting_incidents(steps: pd.DataFrame, loss: pd.Series, config: AnalyzeConfig,
                          best_checkpoint: str | None = None, epoch_means: bool = False) -> list[Incident]:
    """One info incident per evaluation loss that rose by more than ``overfit_rise`` of its best
    and stayed up over the last ``overfit_evals`` evaluations, while the training loss (``loss``,
    finite, by step) ended lower than it was at that best. A term of an evaluation loss logged beside
    it (``val_loss_1`` beside ``val_loss``) is not judged: its total is. ``best_checkpoint``: the
    one the trainer itself recorded as its best (the Hugging Face Trainer's, by its own metric, a
    WER perhaps), named beside the evaluation loss's best. ``epoch_means``: each training value is
    an epoch's mean already, quoted at the steps named, not as the median of the rows before them.

    Example:
        >>> loss = pd.Series(np.linspace(2, 0.2, 100), index=range(0, 1000, 10))  # every 10 steps
        >>> val = pd.Series([1.0, 0.9, 1.0, 1.1, 1.2, 1.3], index=range(400, 1000, 100))
        >>> frame = pd.DataFrame({"loss": loss, "val_loss": val})
        >>> overfitting_incidents(frame, loss, AnalyzeConfig())[0].message.split(":")[0]
        'val_loss rose from 0.9 at step 500 to 1.3 at step 900 (+44%) while the training loss fell from 1.127 to 0.4'
    """
    incidents = []
    if len(loss) < 2:
        return incidents
    evaluated = [str(c) for c in steps.columns if looks_like_eval_loss(str(c))]
    for column in evaluated:
        if any(column != total and column.startswith(total + "_") for total in evaluated):
            continue  # a term of an evaluation loss beside it (fairseq's valid_loss_1, wav2vec 2.0's penalty)
        values = steps[column].to_numpy(dtype="float64")
        finite = np.isfinite(values)
        if finite.sum() < config.overfit_evals + 1:
            continue
        evals = pd.Series(values[finite], index=steps.index[finite])
        # The last of equal bests (a loss printed with four decimals ties): the rise starts after it.
        best_at = len(evals) - 1 - int(np.argmin(evals.to_numpy()[::-1]))
        best, best_step = float(evals.iloc[best_at]), int(evals.index[best_at])
        after = evals.iloc[best_at + 1:]
        if len(after) < config.overfit_evals or not best > 0:
            continue
        tail = after.iloc[-config.overfit_evals:]
        last, last_step = float(after.iloc[-1]), int(after.index[-1])
        # Up and staying up: every evaluation of the tail above the best by half the rise, the
        # last by all of it (one bad evaluation is noise, not a trend).
        if not (last >= best * (1 + config.overfit_rise) and (tail > best * (1 + config.overfit_rise / 2)).all()):
            continue
        # ... and the levels rose, not two draws of the noise: the evaluations around the best
        # against the last ones, a tenth of them each where there are many (a flat curve 8% noisy
        # over 100 epochs has its lowest value 15% under the last ones).
        if not _levels_rose(evals.to_numpy(), best_at, max(config.overfit_evals, len(evals) // 10), config.overfit_rise):
            continue
        trained, trained_name = _training_side(steps, column, loss)
        rows = 1 if epoch_means else _LEVEL_ROWS
        train_then, train_end = _level_at(trained, best_step, rows), _level_at(trained, last_step, rows)
        if not train_end < train_then:  # the training loss rose too: not overfitting (other rules judge it)
            continue
        if last >= _BLOWN_UP * best:  # by orders of magnitude: no model's fit to its training data does that
            incidents.append(_blown_up(column, best, best_step, last, last_step, trained_name, train_then, train_end))
            continue
        message = (f"{column} rose from {best:.4g} at step {best_step} to {last:.4g} at step {last_step} "
                   f"(+{last / best - 1:.0%}) while {trained_name} fell from {train_then:.4g} to "
                   f"{train_end:.4g}: overfitting (stable training; a checkpoint from near step {best_step} "
                   f"has the lowest {column}" + (f"; the trainer recorded {best_checkpoint} as its best model, by "
                                                 "its own metric" if best_checkpoint else "") + ")")
        incidents.append(Incident(IncidentKind.OVERFITTING, best_step, last_step, Severity.INFO, message,
                                  {"metric": str(column), "best": best, "best_step": best_step, "last": last,
                                   "train_loss_at_best": train_then, "train_loss_at_last": train_end,
                                   "resolved": True}))
    return incidents


# An evaluation loss this many times its best, the training loss falling, blew up: no overfitting.
_BLOWN_UP = 100.0


def _blown_up(column: str, best: float, best_step: int, last: float, last_step: int, trained_name: str,
              train_then: float, train_end: float) -> Incident:
    """A warning for an evaluation loss that rose by orders of magnitude while the training loss fell (a
    normalizing flow's test bits/dim at 62,053 beside 3.9 in training; a validation loss at 8.3e27): the
    evaluation diverged on inputs the training never met, or overflowed in its own pass.

    Example:
        >>> _blown_up("val_loss", 2.1, 100, 8.3e27, 1000, "the training loss", 2.5, 1.9).message[:58]
        'val_loss rose from 2.1 at step 100 to 8.3e+27 at step 1000'
    """
    message = (f"{column} rose from {best:.4g} at step {best_step} to {last:.4g} at step {last_step} "
               f"(x{last / best:.3g}) while {trained_name} fell from {train_then:.4g} to {train_end:.4g}: the "
               "evaluation blew up by orders of magnitude, far beyond overfitting: it diverges on inputs the training "
               "never meets (a flow's or a likelihood model's density off its data), or overflows in its own pass (a "
               f"log of 0, an inverse); a checkpoint from near step {best_step} has the lowest {column}")
    return Incident(IncidentKind.OVERFITTING, best_step, last_step, Severity.WARNING, message,
                    {"metric": column, "best": best, "best_step": best_step, "last": last,
                     "train_loss_at_best": train_then, "train_loss_at_last": train_end, "blown_up": True,
                     "resolved": False})


# An evaluation loss's name before the loss it evaluates, and where the training side of that loss goes.
_EVAL_PREFIXES = ("val_", "eval_", "valid_", "validation_", "test_", "val/", "eval/", "valid/", "validation/", "test/")
_TRAIN_PREFIXES = ("train_", "train/", "training_", "")


def _training_side(steps: pd.DataFrame, column: str, loss: pd.Series) -> tuple[pd.Series, str]:
    """The training series an evaluation loss ``column`` is held to, and its name in a message: the
    same term on the training side where the log has it (guided-diffusion's ``val_entropy_loss``
    beside ``train_entropy_loss``: a term both sides raise is no overfitting), else the loss.

    Example:
        >>> t = pd.DataFrame({"loss": [2.0, 1.0], "train_entropy_loss": [0.01, 0.05], "val_entropy_loss": [0.02, 0.06]})
        >>> _training_side(t, "val_entropy_loss", t["loss"])[1], _training_side(t, "val_loss", t["loss"])[1]
        ('train_entropy_loss', 'the training loss')
    """
    for prefix in _EVAL_PREFIXES:
        if column.startswith(prefix):
            base = column[len(prefix):]
            for name in (f"{train}{base}" for train in _TRAIN_PREFIXES):
                if name != metrics.LOSS and name in steps.columns:
                    values = steps[name].to_numpy(dtype="float64")
                    finite = np.isfinite(values)
                    if finite.sum() >= 2:
                        return pd.Series(values[finite], index=steps.index[finite]), name
            break
    return loss, "the training loss"


def _levels_rose(values: np.ndarray, best_at: int, width: int, rise: float) -> bool:
    """Whether the median of the last ``width`` values after the best is ``rise`` above the median
    of the ``width`` values around it.

    Example:
        >>> _levels_rose(np.array([1.6, 1.3, 1.25, 1.3, 1.4, 1.5, 1.6, 1.7]), 2, 3, 0.1)
        True
        >>> _levels_rose(np.array([0.31, 0.33, 0.29, 0.26, 0.30, 0.32, 0.31, 0.33, 0.30]), 3, 3, 0.1)
        False
    """
    around = values[max(best_at - width // 2, 0):best_at + width // 2 + 1]
    last = values[best_at + 1:][-width:]
    return bool(np.median(last) >= np.median(around) * (1 + rise))


# Rows of a per-step training loss whose median is its level at a step (one batch's loss is noisy).
_LEVEL_ROWS = 5


def _level_at(loss: pd.Series, step: int, rows: int = _LEVEL_ROWS) -> float:
    """The training loss around ``step``: the median of the ``rows`` logged at or before it (one
    batch's loss is noisy), the lower middle one of an even count (a value the log shows, not the
    mean of two: a Keras paste's epochs 1-2, 0.9452 and 0.7707, were 'the training loss ... 0.8579'),
    else the first logged after it."""
    at = int(loss.index.searchsorted(step, side="right"))
    window = loss.iloc[max(at - rows, 0):at] if at else loss.iloc[:1]
    values = np.sort(window.to_numpy(dtype="float64"))
    return float(values[(len(values) - 1) // 2])
