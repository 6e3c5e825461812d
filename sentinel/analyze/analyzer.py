"""The analyzer: load runs, run the rules over each, and return a :class:`Report`."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.carried_values import carried_note, carried_once
from sentinel.analyze.config import AnalyzeConfig
from sentinel.analyze.detector import loss_warmup, warmup_steps
from sentinel.analyze.discover import READ_ERRORS, NoRunsError, Skipped, debugging, describe_error, discover
from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.loaders import (LOGGED_NAN, LOSS_FROM_PERPLEXITY, LOSS_SCALE_MIN, LOSS_SUMS_GROWING_BATCHES,
                                      OVERFLOW_ROWS_ONLY, SKIPPED_UPDATES, STEP_UNIT, LoadOptions, RunData)
from sentinel.analyze.loaders.keys import is_epoch_mean
from sentinel.analyze.noise import below_printed_digit
from sentinel.analyze.report import Report, RunReport, in_epochs, verdict
from sentinel.analyze.rule_abandoned import replaced_incidents, went_back_incident
from sentinel.analyze.rule_agent_zero import agent_zero_loss_incidents
from sentinel.analyze.rule_amp import loss_scale_incidents, overflow_incidents, skipped_update_incidents
from sentinel.analyze.rule_attention import attention_incidents
from sentinel.analyze.rule_chance import chance_incidents
from sentinel.analyze.rule_repeats import repeated_loss_incidents
from sentinel.analyze.rule_saturated import saturated_incidents
from sentinel.analyze.rule_divergence import (GAN_RUNAWAY_GROWTH, divergence_incidents, runaway_incidents,
                                             size_runaway_incidents)
from sentinel.analyze.rule_crash import crash_incidents
from sentinel.analyze.rule_announced import announced_changes, settle_announced
from sentinel.analyze.rule_guard import (accepted_levels, guard_incidents, online_spike_incidents,
                                         restart_incidents, settle_accepted)
from sentinel.analyze.rule_nonfinite import eval_nonfinite_incidents, finite, logged_nan_steps, nonfinite_incidents
from sentinel.analyze.rule_overfit import overfitting_incidents
from sentinel.analyze.rule_plateau import plateau_before_divergence
from sentinel.analyze.rule_progress import settle_by_progress
from sentinel.analyze.rule_stuck import (
    MIN_EPOCH_ROWS,
    MIN_ROWS,
    collapse_incidents,
    is_adversarial,
    is_environment_rl,
    is_policy_gradient_loss,
    is_reinforcement_learning,
    logs_episode_returns,
    stuck_loss_incidents,
)
from sentinel.analyze.rule_spikes import confirmed_by_grad_norm, grad_explosion_incidents, loss_spike_incidents
from sentinel.analyze.rule_lr_rise import settle_lr_rises
from sentinel.analyze.rule_nan_filtered import filtered_windows, nan_filtered_zeros, told_as_nan_filtered
from sentinel.analyze.rule_recurring import settle_recurring
from sentinel.analyze.rule_zero_grad import flat_rewards, zero_grad_incidents
from sentinel.analyze.rule_zero_lr import zero_lr_incidents

log = logging.getLogger(__name__)


class AnalyzeError(ValueError):
    """Nothing could be analysed; the message is one line naming the problem and the fix."""


@dataclass
class AnalysisReport(Report):
    """A :class:`Report` with what was not analysed: paths given that could not be read
    (``problems``, one line each) and files a directory walk skipped (``skipped``, with reasons).
    """

    problems: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def analyze(*paths: str | Path, step_col: str | None = None, loss_col: str | None = None,
            **thresholds) -> Report:
    """Load every run under ``paths`` and explain it.

    Args:
        *paths: run directories, log files, or directories of runs.
        step_col: the step column of a table, when it is not recognised.
        loss_col: the loss column (or TensorBoard tag), when it is not recognised.
        **thresholds: :class:`AnalyzeConfig` fields (``window``, ``threshold``, ``warmup``,
            ``recover_steps``, ...).

    A path that cannot be analysed (missing, unreadable, not a log) does not stop the others:
    it is named in ``problems``; nothing is raised unless no path gave a run.

    Returns:
        An :class:`AnalysisReport`: one :class:`RunReport` per run found, plus the paths not
        analysed and why.

    Raises:
        AnalyzeError: no path gave a run (the message joins each path's problem), or no run
            has a loss series; a threshold is invalid.

    Example:
        >>> import sentinel
        >>> report = sentinel.analyze("logs/run1", window=50)  # doctest: +SKIP
        >>> report.runs[0].verdict.value  # doctest: +SKIP
        'recovered'
    """
    if not paths:
        raise AnalyzeError("no path given: pass a run directory or a log file")
    try:
        config = AnalyzeConfig.from_kwargs(**thresholds)
        warmup_steps(config)  # the detector validates the overrides before any loading
    except (ValueError, TypeError) as err:
        raise AnalyzeError(str(err)) from err
    options = LoadOptions(step_col=step_col, loss_col=loss_col)
    runs: list[RunData] = []
    problems: list[str] = []
    skipped: list[Skipped] = []
    for path in paths:
        try:
            found = discover(path, options)
        except (FileNotFoundError, NoRunsError) as err:
            problems.append(str(err))
            continue
        except Exception as err:  # noqa: BLE001 - a single file a loader recognised but could not read
            if not isinstance(err, READ_ERRORS) and debugging():
                raise
            problems.append(describe_error(Path(path), err))
            continue
        runs += found.runs
        skipped += found.skipped
    if not runs:
        raise AnalyzeError("; ".join(dict.fromkeys(problems)))
    reports = []
    for run in runs:  # a run the rules fail on is that run's problem; the others are reported
        try:
            reports.append(analyze_run(run, config))
        except Exception as err:  # noqa: BLE001 - named with its run, never silent
            if debugging():
                raise
            log.debug("%s not analysed", run.path, exc_info=True)
            problems.append(f"{run.path} could not be analysed ({type(err).__name__}: "
                            f"{' '.join(str(err).split())[:300]}): this is a bug in sentinel, please report it "
                            "with the log (SENTINEL_DEBUG=1 shows the traceback)")
    if not reports:
        raise AnalyzeError("; ".join(dict.fromkeys(problems)))
    # A training log with no loss yet still has something to judge when it logs the loss scale
    # or the grad norm (Megatron prints no lm loss while fp16 warm-up skips every iteration).
    judged = (metrics.LOSS, metrics.GRAD_NORM_TOTAL, metrics.LOSS_SCALE, metrics.AMP_OVERFLOW)
    if all(r.final_loss is None and not r.incidents for r in reports) and \
            not any(key in r.data.steps.columns for r in reports for key in judged):
        reasons = "; ".join(dict.fromkeys([w for r in reports for w in r.warnings] + problems)) or "no loss values"
        raise AnalyzeError(f"nothing to analyse: {reasons}")
    # A run without a single step (an event file of histograms, a header) has nothing to judge:
    # a problem named with its path, not a run in the report.
    kept = [r for r in reports if r.steps or r.incidents]
    problems += [f"{r.path}: no steps ({'; '.join(r.data.warnings if r.data else r.warnings) or 'nothing logged'})"
                 for r in reports if not (r.steps or r.incidents)]
    if not kept:
        raise AnalyzeError(f"nothing to analyse: {'; '.join(dict.fromkeys(problems))}")
    return AnalysisReport(kept, problems=problems, skipped=skipped)


# The plateau window of a log whose steps are epochs, where none is asked for: no improvement
# over this many epochs (the default's 1,000 steps would be 1,000 epochs, never reached).
EPOCH_PLATEAU_WINDOW = 10


def _plateau_config(config: AnalyzeConfig, per_epoch: bool) -> AnalyzeConfig:
    if per_epoch and config.plateau_window == AnalyzeConfig().plateau_window:
        return replace(config, plateau_window=EPOCH_PLATEAU_WINDOW)
    return config


def analyze_run(run: RunData, config: AnalyzeConfig | None = None) -> RunReport:
    """Run every rule over one loaded run.

    Example:
        >>> from sentinel.analyze.loaders import RunData
        >>> steps = pd.DataFrame({"loss": [2.0, 1.5, 1.2]}, index=pd.Index([0, 1, 2], name="step"))
        >>> analyze_run(RunData("r", "r", "test", steps)).final_loss
        1.2
    """
    config = config or AnalyzeConfig()
    warnings = list(run.warnings)
    few_at: int | None = None  # where the warning of too few finite values is, if said
    run, hidden = filtered_windows(run)
    if hidden is not None:  # the Trainer's 0.0 for windows of NaN: read as the NaN they were
        warnings.append(hidden)
    steps = run.steps
    incidents: list[Incident] = []
    has = steps.columns.__contains__
    per_epoch = bool(run.meta) and run.meta.get(STEP_UNIT) == "epoch"
    loss = finite(steps[metrics.LOSS]) if has(metrics.LOSS) else pd.Series(dtype="float64")
    held = carried_once(loss)
    if held is not None:  # each value written again at the next logging steps: judged once
        warnings.append(carried_note(held, loss))
        loss = held
    filtered = None  # the Trainer's zeros for a non-finite loss (rule_nan_filtered)
    environment_rl = is_environment_rl(steps.columns)
    policy_gradient = is_policy_gradient_loss(_loss_name(run.meta))
    adversarial = is_adversarial(steps.columns, _loss_name(run.meta))
    if has(metrics.LOSS) or has(metrics.GRAD_NORM_TOTAL) or not run.events.empty:
        incidents += nonfinite_incidents(run)
        incidents += eval_nonfinite_incidents(run)
    spans: list[dict] = []
    if not has(metrics.LOSS):
        # Advice to name the loss only where there are series to name it among.
        if len(steps.columns) and not any("no loss" in w for w in warnings):
            warnings.append("no loss series: pass --loss-col NAME")
    elif not len(loss) and len(steps) >= 2 and _loss_never_printed(run):
        # (torchtitan's lines pasted wrapped at 80 columns: "step:  1  loss:" with its value on the next line)
        warnings.append(f"no loss value at any of its {len(steps)} steps: its lines name the loss but no value "
                        "of it was read (a paste whose lines wrapped between a key and its value? paste the "
                        "log as it was written)")
    elif len(loss) < 2:
        warnings.append(f"only {len(loss)} finite loss value(s): too little history to judge spikes "
                        "or divergence; non-finite values and the final loss are still reported")
    elif environment_rl:
        why = "it logs episode returns" if logs_episode_returns(steps.columns) else \
            "it logs an RL algorithm's update statistics"
        warnings.append(f"a reinforcement-learning run ({why}): its loss follows the "
                        "returns, so its rises, spikes and plateaus are not judged; non-finite values are reported")
        incidents += agent_zero_loss_incidents(loss, steps)
    elif policy_gradient:
        warnings.append(f"the loss read ({_loss_name(run.meta)}) is a policy gradient's surrogate objective: it follows "
                        "each batch's advantages, near 0 on either side, so its rises, spikes and plateaus are not "
                        "judged (the reward tells the run's progress); non-finite values are reported")
    elif adversarial:
        warnings.append("a GAN's run (a generator's and a discriminator's loss): the two play against each "
                        "other, so the generator's loss (read as the loss) is not judged for rises, spikes "
                        "or plateaus, only for a runaway by orders of magnitude; non-finite values are reported")
        incidents += runaway_incidents(loss, GAN_RUNAWAY_GROWTH) or size_runaway_incidents(loss)
    else:
        # A loss of epoch means (a row per epoch, Lightning's train_loss_epoch at steps): its
        # rows are few and smooth, and the guard's warm-up of 20 values was most of a 30-epoch run.
        epoch_means = per_epoch or is_epoch_mean(_loss_name(run.meta)) or _once_an_epoch(steps, loss)
        loss_config = loss_warmup(loss, config, epoch_means)
        warmup = warmup_steps(loss_config)
        if len(loss) <= warmup:
            few_at = len(warnings)  # (counted again below where some of the values are the Trainer's NaN zeros)
            warnings.append(_few_values(len(loss), warmup))
        # ... and it jumps as a whole epoch: never an outlier batch.
        found, spans = loss_spike_incidents(loss, loss_config, last_step=int(steps.index[-1]), per_epoch=epoch_means)
        # A change of the loss the log announces starts a new level: each stretch is judged from its own best.
        diverged = [incident for part in _parts_between(loss, [at for at, _ in announced_changes(run.events)])
                    for incident in divergence_incidents(part, spans, config, epochs=epoch_means)]
        # A loss still diverged at the end is one climb: a spike that starts in it, rising to its
        # height over several rows, and never came back is that climb told again (a runaway's few
        # rows, a slow rise the spike detector flags once it is far enough up). One that opens
        # with a jump is told too: BigScience's authors call theirs a spike, then stuck, then NaN.
        ongoing = [i for i in diverged if not i.details.get("came_back")]
        if ongoing:
            found = [i for i in found if i.details.get("recovered") or i.step < ongoing[0].step
                     or (_may_open(i, ongoing[0], loss) and _opens_with_jump(i, loss))]
        # (a spike of a loss summed over growing batches is the sum's where the run's quality measure rose at it)
        summed = bool((run.meta or {}).get(LOSS_SUMS_GROWING_BATCHES))
        incidents += (settle_by_progress(found, steps) if summed else found) + settle_by_progress(diverged, steps)
        printed_below = below_printed_digit(loss)
        if printed_below:  # a plateau "at 0" is the printing's
            warnings.append(in_epochs(printed_below) if per_epoch else printed_below)
        else:
            incidents += plateau_before_divergence(loss, diverged, _plateau_config(config, per_epoch))
        incidents += overfitting_incidents(steps, loss, config, (run.meta or {}).get("best_checkpoint"), epoch_means)
    if len(loss) >= 2:
        rl = is_reinforcement_learning(steps.columns) or environment_rl or policy_gradient
        stuck = stuck_loss_incidents(loss, min_rows=MIN_EPOCH_ROWS if per_epoch else MIN_ROWS, zero_counts=not rl,
                                     beside=steps)
        incidents += stuck
        if not stuck:
            incidents += saturated_incidents(loss)
        game = environment_rl or adversarial or policy_gradient
        if not game and not any(not i.details["resolved"] for i in stuck):  # else the tail is told
            incidents += chance_incidents(loss, steps[metrics.LR] if has(metrics.LR) else None,
                                          tokens=LOSS_FROM_PERPLEXITY in (run.meta or {}))
        if not rl and not game:
            incidents += collapse_incidents(loss, steps["epoch"] if has("epoch") else None)
            if not stuck:
                incidents += repeated_loss_incidents(loss)
        filtered = nan_filtered_zeros(loss, incidents, run.source, run.meta)
        if filtered is not None:
            incidents = told_as_nan_filtered(incidents, filtered)
            if few_at is not None:  # the warm-up's count of finite values, less the Trainer's zeros
                warnings[few_at] = _few_values(int((loss.index < filtered.step).sum()), warmup,
                                               " (the Trainer's 0.0 for its non-finite steps not counted)")
    if has(metrics.GRAD_NORM_TOTAL):
        grad = finite(steps[metrics.GRAD_NORM_TOTAL])
        if len(grad) >= 2:
            incidents = confirmed_by_grad_norm(incidents + grad_explosion_incidents(grad, spans, config, loss))
        incidents += zero_grad_incidents(grad, loss, flat=flat_rewards(steps))
    if has(metrics.LR):
        incidents += zero_lr_incidents(finite(steps[metrics.LR]), loss)
    run_meta = run.meta or {}
    if has(metrics.LOSS_SCALE):
        # A tool whose scaler goes on below the analysis's floor (fairseq's 1e-4) is judged by its own.
        incidents += loss_scale_incidents(steps[metrics.LOSS_SCALE], config,
                                          steps[metrics.AMP_OVERFLOW] if has(metrics.AMP_OVERFLOW) else None,
                                          run_meta.get(LOSS_SCALE_MIN))
    if has(metrics.AMP_OVERFLOW) and not run_meta.get(OVERFLOW_ROWS_ONLY):  # rows of overflow lines alone: no rate
        incidents += overflow_incidents(steps[metrics.AMP_OVERFLOW], config)
    if not any(i.kind is IncidentKind.OVERFLOW_RATE or (i.kind is IncidentKind.LOSS_SCALE_COLLAPSE
                                                        and i.severity is Severity.CRITICAL)
               for i in incidents):  # (judged by its overflow lines)
        incidents += skipped_update_incidents(run_meta.get(SKIPPED_UPDATES), config)
    incidents += attention_incidents(steps, config)
    incidents += guard_incidents(run.events, loss, config)
    incidents += online_spike_incidents(run.events, [(s["start"], s["end"]) for s in spans])
    incidents += restart_incidents(run.meta.get("restarts") if run.meta else None)
    incidents += crash_incidents(run.meta.get("crash") if run.meta else None)
    incidents = settle_accepted(incidents, accepted_levels(run.events))
    incidents = settle_announced(incidents, announced_changes(run.events), steps.index.to_numpy())
    incidents = settle_lr_rises(incidents, steps[metrics.LR] if has(metrics.LR) else None,
                                steps[metrics.LOSS] if has(metrics.LOSS) else None)
    incidents = settle_recurring(incidents, steps.index.to_numpy())
    for stretch in run.abandoned:  # what the history a later one replaced went through
        meta = {} if stretch.logged_nan is None else {LOGGED_NAN: stretch.logged_nan}
        if per_epoch:
            meta[STEP_UNIT] = "epoch"
        before = analyze_run(RunData(run.name, run.path, run.source, stretch.steps, meta=meta), config)
        incidents += [went_back_incident(stretch)] + replaced_incidents(stretch, before.incidents, incidents)
    incidents.sort(key=lambda i: (i.step, i.end_step, i.kind))
    if per_epoch:
        incidents = [replace(i, message=in_epochs(i.message)) for i in incidents]
    logged = _loss_logged(steps[metrics.LOSS], steps, logged_nan_steps(run, metrics.LOSS)) \
        if has(metrics.LOSS) else None
    final_raw = _last_logged(steps[metrics.LOSS], logged) if logged is not None else None
    if filtered is not None:  # its zeros are the NaN the Trainer filtered: no loss of 0 was reached
        loss, final_raw = loss[loss.index < filtered.step], float("nan")
    final_finite = final_raw is None or bool(np.isfinite(final_raw))
    # The training steps: those with a loss logged (not a row of evaluation metrics alone).
    counted = steps.index[logged] if logged is not None and logged.any() else steps.index
    return RunReport(
        name=run.name, path=run.path, source=run.source, steps=int(len(counted)),
        first_step=int(counted[0]) if len(counted) else None,
        last_step=int(counted[-1]) if len(counted) else None,
        final_loss=None if final_raw is None else float(final_raw),
        best_loss=float(loss.min()) if len(loss) else None,
        verdict=verdict(incidents, final_finite, has_loss=final_raw is not None or len(loss) > 0),
        incidents=incidents, warnings=warnings, data=run, step_unit="epoch" if per_epoch else "step",
        loss_name=(_loss_name(run.meta) or None) if has(metrics.LOSS) else None)


def _may_open(spike: Incident, climb: Incident, loss: pd.Series) -> bool:
    """Whether ``spike`` may be the jump that opened ``climb``, a divergence still on at the end: any
    spike in the detector's stretch; in a runaway (a rise at every row), one at its first two rows
    only, and none where the runaway's rows were too few for the detector (however it opened)."""
    if not climb.details.get("runaway"):
        return True
    if not climb.details.get("detected"):
        return False
    at = int(loss.index.searchsorted(climb.step))
    return spike.step <= int(loss.index[min(at + 1, len(loss) - 1)])


def _once_an_epoch(steps: pd.DataFrame, loss: pd.Series) -> bool:
    """The loss was logged once an epoch, at steps more than one apart: each row in the next epoch
    of the ``epoch`` column (Lightning's ``self.log(..., on_step=False, on_epoch=True)``: the
    epoch's mean at its last step, named as the step's loss would be)."""
    if "epoch" not in steps.columns or not _FEWEST_EPOCHS <= len(loss) <= _MOST_EPOCHS:
        return False  # (a million rows are no epochs: not reindexed for nothing)
    if not (np.diff(loss.index.to_numpy()) > 1).all():
        return False
    epochs = steps["epoch"].reindex(loss.index).to_numpy(dtype="float64")
    return bool(np.isfinite(epochs).all() and (np.diff(epochs) == 1).all())


_FEWEST_EPOCHS, _MOST_EPOCHS = 5, 100_000  # rows a loss once an epoch is told by


# A spike whose first row is this many times its baseline, or holds this share of its rise above
# the baseline, opened with a jump.
_JUMP = 2.0
_JUMP_SHARE = 0.5


def _opens_with_jump(spike: Incident, loss: pd.Series) -> bool:
    """Whether the loss at ``spike``'s first step is :data:`_JUMP` times its baseline or holds
    :data:`_JUMP_SHARE` of its rise from the baseline to its peak (BigScience's 6.44 -> 11.42 at
    once); a slow climb's first flagged row is a little above the baseline, a few percent of
    the rise."""
    baseline, peak = spike.details.get("baseline"), spike.details.get("peak")
    if baseline is None or peak is None or spike.step not in loss.index or not peak > baseline > 0:
        return True  # nothing to tell it by: told as found
    first = float(loss.loc[spike.step])
    return first >= _JUMP * baseline or first - baseline >= _JUMP_SHARE * (peak - baseline)


def _parts_between(loss: pd.Series, cuts: list[int]) -> list[pd.Series]:
    """``loss`` cut before each step of ``cuts`` (the parts of two values or more).

    Example:
        >>> [len(p) for p in _parts_between(pd.Series(range(10), index=range(0, 100, 10)), [50])]
        [5, 5]
    """
    if not cuts:
        return [loss]
    steps = loss.index.to_numpy()
    bounds = [0, *np.searchsorted(steps, sorted(cuts)), len(steps)]
    return [loss.iloc[a:b] for a, b in zip(bounds, bounds[1:]) if b - a >= 2]


def _few_values(count: int, warmup: int, uncounted: str = "") -> str:
    """The warning of a loss of ``count`` finite values, within the spike detector's ``warmup``
    (``uncounted``: what was left out of the count, said after it).

    Example:
        >>> _few_values(0, 20, " (x)")
        'no finite loss value (x): the non-finite values are reported'
    """
    if not count:
        return f"no finite loss value{uncounted}: the non-finite values are reported"
    return (f"only {count} finite loss values{uncounted}, within the spike detector's warm-up of {warmup}: too little "
            "history to judge spikes fully (only large jumps are flagged); non-finite values and the final loss are "
            "reported")


def _loss_never_printed(run: RunData) -> bool:
    """Whether ``run``'s loss column holds no value at all, not even a printed NaN: the source tells
    a printed NaN from a value not printed (a text log does) and none was printed."""
    printed_nan = logged_nan_steps(run, metrics.LOSS)
    return printed_nan is not None and not len(printed_nan) and not run.steps[metrics.LOSS].notna().any()


def _loss_name(meta: dict | None) -> str:
    """The name the run's source gave its loss (a table's column, a TensorBoard tag), where its
    loader says; else ``""``."""
    if not meta:
        return ""
    if meta.get("loss_column"):
        return str(meta["loss_column"])
    return next((str(tag) for tag, key in (meta.get("tags") or {}).items() if key == metrics.LOSS), "")


def _loss_logged(loss: pd.Series, steps: pd.DataFrame, logged_nan: np.ndarray | None = None) -> np.ndarray:
    """Where the loss was logged: a value, or a NaN/Inf the run logged (not a row without one,
    such as an evaluation's)."""
    from sentinel.analyze.rule_nonfinite import nonfinite_mask

    present = loss.notna().to_numpy()
    if present.all():
        return present
    return present | nonfinite_mask(loss, steps, logged_nan).to_numpy()


def _last_logged(loss: pd.Series, logged: np.ndarray) -> float | None:
    """The last logged loss value, NaN/Inf included (a run that ends in NaN ends in NaN; one
    that ends with a validation-only row ends with its last training loss); ``logged``: where
    it was logged (:func:`_loss_logged`)."""
    if len(loss) and pd.notna(loss.iloc[-1]):
        return float(loss.iloc[-1])  # the last row holds a value: the last logged one
    if not logged.any():
        return None
    return float(loss.iloc[len(logged) - 1 - int(np.argmax(logged[::-1]))])
