"""Non-finite steps: NaN/Inf in the loss (and grad norm) series and recorded ``nonfinite`` events.

In a steps frame NaN means both "not logged at this step" and "logged as NaN". A NaN counts
as a non-finite value when the step lies on the metric's logging cadence, at or after its
first logged value (a metric logged every step makes every NaN row count; a loss logged every
50 steps ignores validation rows in between), and the row is not an evaluation-only row: a row
that holds only validation metrics (llm.c and modded-nanogpt end with ``s:19560 tel:3.27``, a
final evaluation after the last training step) is a row where no training loss was logged,
while a row that holds other training metrics but no loss (Megatron drops the ``lm loss``
field of a diverged iteration) is a non-finite loss.

A source that tells the two apart says so (``RunData.meta[LOGGED_NAN]``: TensorBoard stores a
NaN as a value): its NaNs are read exactly, and a NaN at a step it did not log as NaN is a record
that is not there (one dropped for a bad checksum), not a non-finite value.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.loaders import LOGGED_NAN, LOGGED_NAN_KEYS, RunData, nonfinite_name
from sentinel.analyze.loaders.keys import looks_like_eval_loss
from sentinel.analyze.spans import between, cadence, group_steps

# Columns of an evaluation pass (val_loss, val/ppl, eval/loss, test_acc, validation_loss).
_EVAL_COLUMN = re.compile(r"^(val|valid|validation|eval|evaluation|test)([_/ .-]|$)")
# Bookkeeping a logger writes on every row, an evaluation's too (Lightning's CSVLogger: epoch):
# on a row with no loss they say nothing about whether it is a training row.
_EVERY_ROW = frozenset({"epoch", "epochs", "step", "global_step", "_step", "time", "timestamp", "wall_time",
                        "_timestamp", "_runtime", "created_at"})


def _every_rows(column: str) -> bool:
    """Whether ``column`` is bookkeeping a logger writes on every row: a name of
    :data:`_EVERY_ROW`, also under a section (the Hugging Face Trainer's ``train/epoch`` and
    ``train/global_step``, which W&B logs with each evaluation too), or a table's unnamed index
    (``to_csv``'s first column)."""
    name = column.strip().lower()
    return not name or name.startswith("unnamed:") or name.rsplit("/", 1)[-1] in _EVERY_ROW


def _eval_family(column: str) -> str | None:
    """Which evaluation pass a column is of: "test", "val" (validation, HF's eval), or None."""
    found = _EVAL_COLUMN.match(column.lower())
    if found is None:
        return None
    return "test" if found.group(1) == "test" else "val"


def eval_only_rows(steps: pd.DataFrame, key: str) -> np.ndarray:
    """Boolean array over the rows of ``steps``: True where ``key`` is NaN and every value the
    row does hold is an evaluation metric (a validation-only row, not a missing training loss),
    or bookkeeping every row has (the epoch, a time).

    Example:
        >>> frame = pd.DataFrame({"loss": [2.0, np.nan, np.nan], "lr": [1e-3, np.nan, 1e-3],
        ...                       "val_loss": [np.nan, 2.1, np.nan]})
        >>> eval_only_rows(frame, "loss").tolist()
        [False, True, False]
    """
    others = [c for c in steps.columns if c != key]
    evals = [c for c in others if _EVAL_COLUMN.match(str(c))]
    if not evals:
        return np.zeros(len(steps), dtype=bool)
    trains = [c for c in others if c not in evals and not _every_rows(str(c))]
    has_eval = steps[evals].notna().to_numpy().any(axis=1)
    has_train = steps[trains].notna().to_numpy().any(axis=1) if trains else np.zeros(len(steps), dtype=bool)
    return steps[key].isna().to_numpy() & has_eval & ~has_train


def nonfinite_mask(series: pd.Series, frame: pd.DataFrame | None = None,
                   logged_nan: np.ndarray | None = None) -> pd.Series:
    """Boolean series: True where ``series`` holds a NaN/Inf that was logged, not just absent.

    Args:
        series: one metric, indexed by step.
        frame: the run's whole steps frame (``series`` is its column ``series.name``); with it,
            NaN on evaluation-only rows (see :func:`eval_only_rows`) counts as absent.
        logged_nan: the steps the source logged a NaN at, when it tells them from absent values
            (:func:`logged_nan_steps`); the NaN at any other step is then absent.

    Example:
        >>> s = pd.Series([1.0, np.nan, np.inf, 0.5], index=[0, 1, 2, 3])
        >>> nonfinite_mask(s).tolist(), nonfinite_mask(s, logged_nan=np.array([])).tolist()
        ([False, True, True, False], [False, False, True, False])
    """
    values = series.to_numpy(dtype="float64")
    infinite = np.isinf(values)
    if logged_nan is not None:
        return pd.Series(infinite | np.isin(series.index.to_numpy(), logged_nan), index=series.index)
    missing = np.isnan(values)
    if not missing.any():
        return pd.Series(infinite, index=series.index)  # every row logged: only Inf counts
    present = ~missing
    if not present.any():
        return pd.Series(missing, index=series.index)  # a loss that was NaN throughout
    steps = series.index.to_numpy()
    logged = steps if present.all() else steps[present]
    every = cadence(pd.Index(logged, copy=False))
    nan_logged = missing & (steps >= logged[0])
    if every != 1:
        # On the grid most logged steps are on (a first row off it, DeePMD's step 1 before its
        # 100, 200, ...: the NaNs from step 70,000 on were off a grid counted from 1).
        residues, counts = np.unique(logged % every, return_counts=True)
        nan_logged &= (steps - residues[np.argmax(counts)]) % every == 0
    rows = np.flatnonzero(nan_logged)
    if rows.size and _same_frame(frame, series):
        # Only the NaN rows are looked at: a long run has few of them and many columns.
        nan_rows = frame.iloc[rows]
        nan_logged[rows[eval_only_rows(nan_rows, series.name) | overflow_only_rows(nan_rows)]] = False
    return pd.Series(infinite | nan_logged, index=series.index)


def logged_nan_steps(run: RunData, key: str) -> np.ndarray | None:
    """The steps ``run``'s source logged ``key`` as NaN at, when the source tells a logged NaN from
    an absent value for this key (``RunData.meta[LOGGED_NAN]``, for the keys in
    ``meta[LOGGED_NAN_KEYS]`` where that is given); None when it does not.

    Example:
        >>> logged_nan_steps(RunData("r", "r", "tensorboard", pd.DataFrame(),
        ...                          meta={LOGGED_NAN: {"loss": np.array([7])}}), "loss").tolist()
        [7]
    """
    told = run.meta.get(LOGGED_NAN) if run.meta else None
    if told is None or key not in run.meta.get(LOGGED_NAN_KEYS, (key,)):
        return None
    return np.asarray(told.get(key, ()), dtype="int64")


def overflow_only_rows(steps: pd.DataFrame) -> np.ndarray:
    """Boolean array over the rows of ``steps``: True where the row holds an overflow and nothing
    else but the loss scale it set: a row an overflow line made (fairseq prints them after the
    last step line), where no training metric was logged, not one that logged NaN.

    Example:
        >>> frame = pd.DataFrame({"loss": [2.0, np.nan], "amp/overflow": [0.0, 3.0],
        ...                       "loss_scale": [1.0, 0.125]})
        >>> overflow_only_rows(frame).tolist()
        [False, True]
    """
    if metrics.AMP_OVERFLOW not in steps.columns:
        return np.zeros(len(steps), dtype=bool)
    others = [c for c in steps.columns if c not in (metrics.AMP_OVERFLOW, metrics.LOSS_SCALE)]
    holds_other = steps[others].notna().to_numpy().any(axis=1) if others else np.zeros(len(steps), dtype=bool)
    return (steps[metrics.AMP_OVERFLOW].to_numpy(dtype="float64") > 0) & ~holds_other


def _same_frame(frame: pd.DataFrame | None, series: pd.Series) -> bool:
    """Whether ``frame`` is the steps frame ``series`` was taken from (same column, same rows)."""
    return (frame is not None and series.name in frame.columns and len(frame) == len(series)
            and frame.index.equals(series.index))


def finite(series: pd.Series) -> pd.Series:
    """The finite values of a series (absent and non-finite steps dropped).

    Example:
        >>> finite(pd.Series([1.0, np.nan, np.inf])).tolist()
        [1.0]
    """
    keep = np.isfinite(series.to_numpy(dtype="float64"))
    return series if keep.all() else series[keep]


def last_finite_step(series: pd.Series) -> int | None:
    """The last step at which ``series`` is finite, None when it never is.

    Example:
        >>> last_finite_step(pd.Series([1.0, 2.0, np.nan], index=[0, 10, 20]))
        10
    """
    keep = np.isfinite(series.to_numpy(dtype="float64"))
    if not keep.any():
        return None
    return int(series.index[len(keep) - 1 - int(np.argmax(keep[::-1]))])


def nonfinite_incidents(run: RunData) -> list[Incident]:
    """One critical incident per stretch of non-finite loss or grad-norm steps, and per recorded
    ``nonfinite`` event outside such a stretch, naming the source module where it was found.

    Example:
        >>> [i.message for i in nonfinite_incidents(run)]  # doctest: +SKIP
        ['loss non-finite (nan) at steps 57-59 (3 steps); source: blocks.1.attn (forward)']
    """
    incidents: list[Incident] = []
    events = _nonfinite_events(run.events)
    if len(events) and "metric" in events.columns:  # an evaluation's loss: eval_nonfinite_incidents
        events = events[~events["metric"].map(lambda m: isinstance(m, str) and looks_like_eval_loss(m))]
    covered: list[tuple[int, int]] = []
    loss_bad: pd.Series | None = None
    for key in (metrics.LOSS, metrics.GRAD_NORM_TOTAL):
        if key not in run.steps.columns:
            continue
        series = run.steps[key]
        mask = nonfinite_mask(series, run.steps, logged_nan_steps(run, key))
        if key == metrics.LOSS:
            loss_bad = mask
        last_finite = last_finite_step(series)
        # A row that is no training record (an evaluation's, off the logging grid: no loss logged, not
        # this metric either) does not cut a stretch.
        kept = mask.to_numpy() | series.notna().to_numpy()
        if loss_bad is not None:
            kept |= loss_bad.to_numpy() | run.steps[metrics.LOSS].notna().to_numpy()
        stretches = group_steps(mask[kept], max_gap=1)
        skipped = _skipped_updates(run.steps, loss_bad, series, mask, stretches, run.source in WINDOW_MEANS) \
            if key == metrics.GRAD_NORM_TOTAL else {}
        for start, end in stretches:
            span = between(series, start, end)[between(mask, start, end).to_numpy()]
            kinds = sorted({nonfinite_name(v) for v in span})
            resolved = last_finite is not None and last_finite > end
            sources = events[(events["step"] >= start) & (events["step"] <= end)] if len(events) else events
            where = _describe_sources(sources)
            covered.append((start, end))
            steps_txt = f"step {start}" if start == end else f"steps {start}-{end} ({len(span)} steps)"
            message = f"{key} non-finite ({'/'.join(kinds)}) at {steps_txt}; {where}"
            details = {"metric": key, "values": kinds, "count": int(len(span)),
                       "sources": _source_list(sources), "resolved": resolved}
            # A recorded source module says more (kept below); a text log's event for the NaN it printed does not.
            if (start, end) in skipped and not any(source.get("module") for source in details["sources"]):
                severity, why = skipped[(start, end)]
                message = f"{key} non-finite ({'/'.join(kinds)}) at {steps_txt} while the loss stayed finite: {why}"
                incidents.append(Incident(IncidentKind.NONFINITE, start, end, severity, message,
                                          {**details, "update_skipped": True}))
                continue
            if not resolved:
                message += "; never finite again"
            incidents.append(Incident(IncidentKind.NONFINITE, start, end, Severity.CRITICAL, message, details))
    loss_last = last_finite_step(run.steps[metrics.LOSS]) if metrics.LOSS in run.steps.columns else None
    for start, end, metric in _event_stretches(events, covered, run.steps.index.to_numpy()):
        sources = events[(events["step"] >= start) & (events["step"] <= end)]
        later_ok = loss_last is not None and loss_last > end
        # A text log's event names the metric its line printed as NaN (before the metric's first
        # finite value the series cannot tell a logged NaN from an absent one).
        what = f"{metric} non-finite" if metric else "non-finite values recorded"
        count = int(sources["step"].nunique())
        where = f"step {start}" if start == end else f"steps {start}-{end} ({count} logged steps)"
        message = f"{what} at {where}; {_describe_sources(sources)}"
        if "source" in sources.columns and bool((sources["source"] == "running_average").all()):
            value = _plain(sources.iloc[0].get("value")) if "value" in sources.columns else None
            message = (f"{what} at or before step {start}: the running average printed beside it is "
                       f"{value or 'non-finite'} from there on while the values printed are finite (a window's "
                       "median or the step's own value hides the step that went non-finite)"
                       + ("; the loss printed is finite after it" if later_ok else ""))
        incidents.append(Incident(
            IncidentKind.NONFINITE, start, end, Severity.CRITICAL, message,
            {"metric": metric, "sources": _source_list(sources), "resolved": bool(later_ok), "count": count}))
    return incidents


def _event_stretches(events: pd.DataFrame, covered: list[tuple[int, int]], steps: np.ndarray
                     ) -> list[tuple[int, int, str | None]]:
    """``(first, last, metric)`` of the recorded ``nonfinite`` events outside ``covered`` (or past a
    stretch of it that reaches the last logged step), those at neighbouring logged steps (no logged step between them without one) and of one metric
    together: a Megatron log's 'number of nan iterations' at every interval of a stretch is one
    incident, not one per line."""
    if not len(events):
        return []
    out: list[tuple[int, int, str | None]] = []
    last = int(steps[-1]) if len(steps) else None
    for step, rows in events.groupby("step", sort=True):
        step = int(step)
        # (a line past the last step line, at the step after it, is where the training stopped: a
        # stretch that runs to the last step told it, as big_vision's NaN loss then its error does)
        if any(a <= step <= b or (b == last and step > b) for a, b in covered):
            continue
        metric = _plain(rows.iloc[0].get("metric")) if "metric" in rows.columns else None
        if out and out[-1][2] == metric and _neighbours(steps, out[-1][1], step):
            out[-1] = (out[-1][0], step, metric)
        else:
            out.append((step, step, metric))
    return out


def _neighbours(steps: np.ndarray, a: int, b: int) -> bool:
    """Whether no logged step lies strictly between steps ``a`` and ``b``."""
    return int(np.searchsorted(steps, b)) - int(np.searchsorted(steps, a, side="right")) <= 0


# Non-finite grad norms with a finite loss after them that are more than this share of the logged
# steps (past the loss scaler's start-up) are a warning: the scale overflows again and again.
_FREQUENT_SKIPS = 0.01
# A longer stretch of them past the start-up is a warning too (each one halves an fp16 scale).
_LONG_SKIP_STRETCH = 2
# Readers whose logged values are means over each logging window (mmcv's and mmengine's LogBuffer).
WINDOW_MEANS = ("mmengine",)
# A loss whose last third's median lies this share or more below its first third's fell over the log.
_FELL = 0.1


def _fell(loss: pd.Series) -> tuple[float, float] | None:
    """The medians of the loss's first and last thirds where it fell by :data:`_FELL` or more.

    Example:
        >>> _fell(pd.Series([4.4, 4.3, 4.0, 3.6, 3.5, 3.4])), _fell(pd.Series([4.35, 4.54, 4.33]))
        ((4.35, 3.45), None)
    """
    values = loss.to_numpy(dtype="float64")
    values = values[np.isfinite(values)]
    third = len(values) // 3
    if third < 1:
        return None
    first, last = float(np.median(values[:third])), float(np.median(values[-third:]))
    return (first, last) if last <= (1 - _FELL) * first else None


def _skipped_updates(steps: pd.DataFrame, loss_bad: pd.Series | None, grad: pd.Series, grad_bad: pd.Series,
                     stretches: list[tuple[int, int]], window_means: bool = False
                     ) -> dict[tuple[int, int], tuple[Severity, str]]:
    """The stretches of non-finite grad norms whose updates never reached the weights, with a
    severity and the reason: the loss is finite there and at its next logged step (or, at the
    log's end, at a later step of the stretch), and no 0. An update made
    of non-finite gradients would have made the weights, and so the next loss, non-finite: it was
    skipped, as an fp16 loss scaler skips an overflow (Hugging Face's Trainer logs those steps'
    grad norm as inf or nan). At the scaler's start-up, searching down from its initial scale, and
    now and then after (it raises its scale every so many steps and overflows once), that is how
    fp16 training works: info. Often, or a longer stretch later on, or at every logged step of a log
    whose grad norm is never finite: a warning. ``window_means``: each logged value is a mean over
    the steps since the last (mmcv, mmengine), NaN where one of them overflowed: a grad norm never
    finite there says every window skipped a step, not every step; information where the loss fell
    by :data:`_FELL` over the log (updates reached the weights)."""
    if loss_bad is None or not stretches:
        return {}
    loss = steps[metrics.LOSS].to_numpy(dtype="float64")
    index = steps.index.to_numpy()
    bad = loss_bad.to_numpy()
    logged = ~np.isnan(loss) | bad
    finite_grad = np.isfinite(grad.to_numpy(dtype="float64"))
    first_finite = int(index[np.argmax(finite_grad)]) if finite_grad.any() else None
    found: dict[tuple[int, int], bool] = {}
    for start, end in stretches:
        inside = (index >= start) & (index <= end)
        # A loss of 0 says nothing: the Hugging Face Trainer's NaN filter logs 0.0 for NaN steps.
        after = np.flatnonzero(logged & (index > end) & (loss != 0.0))
        if not len(after):
            # A stretch that reaches the log's end (mmengine's window mean is NaN while any of its
            # steps overflowed): its own rows after its first say it.
            after = np.flatnonzero(logged & inside & (index > start) & (loss != 0.0))
        if bad[inside].any() or not len(after) or bad[after[0]]:
            continue  # the loss went non-finite too, or nothing after says the weights were sound
        found[(start, end)] = first_finite is None or start < first_finite  # the scaler's start-up
    if not found:
        return {}
    non_finite = grad_bad.to_numpy()
    count = {(s, e): int(non_finite[(index >= s) & (index <= e)].sum()) for s, e in found}
    later_steps = sum(count[span] for span, start_up in found.items() if not start_up)
    logged_grad = int((~np.isnan(grad.to_numpy(dtype="float64")) | non_finite).sum())
    frequent = later_steps > max(_LONG_SKIP_STRETCH, _FREQUENT_SKIPS * logged_grad)
    out = {}
    for (start, end), start_up in found.items():
        n = count[(start, end)]
        if start_up and first_finite is None and n >= 2 and window_means:
            fell = _fell(steps[metrics.LOSS])
            out[(start, end)] = (Severity.INFO if fell else Severity.WARNING, "the grad norm, a mean over each logging "
                                 "window, is never finite in the log: every window held a step whose gradients were "
                                 "not finite (an fp16 loss scaler skips it; a scale that overflows that often, or "
                                 "batches whose gradients are not finite)" + (
                                     f"; the loss fell from {fell[0]:.4g} to {fell[1]:.4g}: the other updates "
                                     "reached the weights" if fell else ""))
        elif start_up and first_finite is None and n >= 2:
            # A start-up the log never sees end (VG-LLM's 7B fine-tune: grad_norm nan at every logged step).
            out[(start, end)] = (Severity.WARNING, "no update in the log reached the weights: the grad norm is never "
                                 "finite in it (an fp16 loss scaler's start-up skips its first steps only; a skip at "
                                 "every step is gradients that are not finite, or a scale that never fits)")
        elif start_up:
            out[(start, end)] = (Severity.INFO, "those updates were skipped, as an fp16 loss scaler skips an overflow "
                                 "at its start-up, searching down from its initial scale: not damage")
        elif frequent or n > _LONG_SKIP_STRETCH:
            out[(start, end)] = (Severity.WARNING, f"the update{'s' * (n != 1)} did not reach the weights, but "
                                 f"it keeps happening ({later_steps} of {logged_grad} logged steps past the start): "
                                 "an fp16 loss scale that overflows again and again, or batches whose gradients are "
                                 "not finite")
        else:
            out[(start, end)] = (Severity.INFO, f"the update{'s' * (n != 1)} did not reach the weights (skipped, "
                                 "as an fp16 loss scaler skips an overflow now and then): not damage")
    return out


# Steps of non-finite evaluations kept in an incident's details (the plot marks each).
_MAX_STEPS_LISTED = 1000


def _other_reduction(column: str, other: str) -> bool:
    """Whether ``other`` is Lightning's other reduction of a metric than ``column`` is (``_step``
    beside ``_epoch``): never logged on the same row.

    Example:
        >>> _other_reduction("test_loss_epoch", "test_loss_step"), _other_reduction("test_loss_epoch", "test_acc_epoch")
        (True, False)
    """
    ends = ("_step", "_epoch")
    mine = next((end for end in ends if column.endswith(end)), None)
    return mine is not None and any(other.endswith(end) for end in ends if end != mine)


def eval_nonfinite_incidents(run: RunData) -> list[Incident]:
    """One warning per evaluation loss that was non-finite at some evaluation: a NaN printed for
    it (a text log's event), an Inf, a NaN on a row where the evaluation logged its other metrics
    (``eval_runtime``, ``val_acc``), or, where no other evaluation metric says where it ran, NaN
    at every row (a column or tag exists because it was logged). Losses of one evaluation that
    are non-finite at the same steps (``val/box_loss``, ``val/cls_loss``, ``val/dfl_loss``) are
    one warning. Not critical: training is not affected, but the numbers the run is judged by are.

    Example:
        >>> [i.message for i in eval_nonfinite_incidents(run)]  # doctest: +SKIP
        ['eval_loss non-finite (nan) at 2 of 3 evaluations (steps 200, 400); ...']
    """
    steps = run.steps
    events = _nonfinite_events(run.events)
    # Columns non-finite at the same steps: the mask's bytes -> (the mask, the columns).
    groups: dict[bytes, tuple[np.ndarray, list[str]]] = {}
    for column in [c for c in steps.columns if looks_like_eval_loss(str(c))]:
        values = steps[column].to_numpy(dtype="float64")
        bad = np.isinf(values)
        # Its own pass's other metrics: a test pass (trainer.test(), once at the end) leaves its
        # columns empty on the validation rows, and that is no NaN.
        family = _eval_family(str(column))
        # (nor does Lightning's test_loss_epoch on the rows of its test_loss_step: the epoch's mean
        # and each batch's value are written on rows of their own)
        others = [c for c in steps.columns if c != column and _EVAL_COLUMN.match(str(c))
                  and family in (None, _eval_family(str(c))) and not _other_reduction(str(column), str(c))]
        ran = steps[others].notna().to_numpy().any(axis=1) if others else np.zeros(len(values), dtype=bool)
        told = logged_nan_steps(run, str(column))
        if told is not None:  # the source tells a logged NaN from a value not logged
            bad |= np.isin(steps.index.to_numpy(), told)
        elif ran.any():  # the evaluation ran where it logged something else
            bad |= np.isnan(values) & ran
        elif np.isnan(values).all():  # nothing else tells where it ran: it was logged NaN everywhere
            bad[:] = True
        if len(events) and "metric" in events.columns:
            printed = events.loc[events["metric"] == column, "step"].to_numpy(dtype="int64")
            bad |= np.isin(steps.index.to_numpy(), printed)
        if bad.any():
            groups.setdefault(bad.tobytes(), (bad, []))[1].append(str(column))
    training = _training_nonfinite(run)
    incidents = []
    trained = int(steps[metrics.LOSS].notna().sum()) if metrics.LOSS in steps.columns else 0
    for bad, columns in groups.values():
        values = steps[columns[0]].to_numpy(dtype="float64")
        results = _carried_results(values, ~np.isnan(values) | bad, trained)
        if results is None:  # a value per evaluation
            at = steps.index[bad]
            evaluations = int((~np.isnan(values) | bad).sum())
        else:  # a bar's draws repeat each result: one evaluation per result shown
            at = steps.index[results[bad[results]]]
            evaluations = len(results)
        kinds = sorted({nonfinite_name(v) for c in columns for v in steps[c].to_numpy(dtype="float64")[bad]})
        shown = ", ".join(str(int(s)) for s in at[:5]) + (", ..." if len(at) > 5 else "")
        resolved = bool(np.isfinite(values[np.flatnonzero(bad)[-1] + 1:]).any())
        message = (f"{', '.join(columns)} non-finite ({'/'.join(kinds)}) at {len(at)} of {evaluations} evaluation"
                   f"{'s' * (evaluations != 1)} (step{'s' * (len(at) != 1)} {shown})"
                   + ("" if resolved else "; never finite again")
                   + _training_then(training, bad))
        incidents.append(Incident(IncidentKind.NONFINITE, int(at[0]), int(at[-1]), Severity.WARNING, message,
                                  {"metric": columns[0], "metrics": columns, "values": kinds, "count": int(len(at)),
                                   "steps": [int(s) for s in at[:_MAX_STEPS_LISTED]],
                                   "evaluations": evaluations, "resolved": resolved}))
    return incidents


def _carried_results(values: np.ndarray, logged: np.ndarray, trained: int) -> np.ndarray | None:
    """Where a progress bar shows an evaluation's last result on each of its draws (Lightning's
    bar: ``val_loss=0.944`` on every draw until the next evaluation), the rows where each result
    first shows; None for a column with a value per evaluation. Carried: logged at least on half
    as many rows as the training loss, and a finite value the same as the row before's at three
    rows in four (a NaN printed at every epoch is an evaluation each time, not one carried)."""
    rows = np.flatnonzero(logged)
    if len(rows) < 8 or len(rows) * 2 < trained:
        return None
    v = values[rows]
    finite_pair = np.isfinite(v[1:]) & np.isfinite(v[:-1])
    if finite_pair.sum() < 4 or (v[1:] == v[:-1])[finite_pair].mean() < 0.75:
        return None
    same = (v[1:] == v[:-1]) | (np.isnan(v[1:]) & np.isnan(v[:-1]))
    return rows[np.r_[True, ~same]]


# The ``cause`` a replay under fp16/bf16 AMP gives a source (sentinel.probes.nonfinite.locate_overflow).
_CAUSES = {"nan_source": "a real NaN source (non-finite in float32 too)",
           "fp16_range": "float16 range (finite in float32)",
           "bf16_range": "bfloat16 range (finite in float32)"}


def _training_nonfinite(run: RunData) -> np.ndarray | None:
    """Per row of ``run.steps``: 1.0 where the training loss last logged at or before it was
    non-finite, 0.0 where finite, NaN before its first value; None without a training loss."""
    if metrics.LOSS not in run.steps.columns:
        return None
    series = run.steps[metrics.LOSS]
    bad = nonfinite_mask(series, run.steps, logged_nan_steps(run, metrics.LOSS)).to_numpy()
    state = np.where(bad, 1.0, np.where(np.isfinite(series.to_numpy(dtype="float64")), 0.0, np.nan))
    return pd.Series(state).ffill().to_numpy()


def _training_then(training: np.ndarray | None, bad: np.ndarray) -> str:
    """What the training loss was when the evaluations went non-finite: finite (then the cause
    is the evaluation's), or non-finite too (the evaluation only follows it)."""
    if training is None:
        return ""
    then = training[bad]
    if (then == 1.0).any():
        return TRAINING_NONFINITE_THEN
    if (then == 0.0).any():
        return TRAINING_FINITE_THEN
    return ""


# What an evaluation's non-finite incident says of the training loss then (see _training_then).
TRAINING_NONFINITE_THEN = "; the training loss was non-finite then too (its own incident)"
# (whatever the model: a graph network's empty validation mask, a Keras classifier's, as a language model's)
TRAINING_FINITE_THEN = ("; the training loss is finite: the evaluation's own NaN, a mean over nothing (an empty "
                        "validation split or mask, every label ignored: -100), or an fp16 evaluation that overflows "
                        "(evaluate in bf16 or fp32)")


def _nonfinite_events(events: pd.DataFrame) -> pd.DataFrame:
    if events is None or events.empty or "kind" not in events.columns:
        return pd.DataFrame(columns=["step", "kind"])
    return events[events["kind"] == "nonfinite"]


def _source_list(events: pd.DataFrame) -> list[dict]:
    out = []
    for _, event in events.iterrows():
        out.append({k: _plain(event.get(k)) for k in ("module", "phase", "tensor_role", "rank", "cause")
                    if k in event.index and _plain(event.get(k)) is not None})
    return out


def _describe_sources(events: pd.DataFrame) -> str:
    found = []
    for source in _source_list(events):
        module = source.get("module")
        if module:
            phase = f" ({source['phase']})" if source.get("phase") else ""
            rank = f" rank {source['rank']}" if source.get("rank") not in (None, 0) else ""
            cause = f", {_CAUSES[source['cause']]}" if source.get("cause") in _CAUSES else ""
            found.append(f"{module}{phase}{rank}{cause}")
    if found:
        return "source: " + ", ".join(dict.fromkeys(found))
    return "source module not recorded" if len(events) else "no source recorded (no nonfinite event)"


def _plain(value):
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value
