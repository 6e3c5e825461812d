"""A loss that rises because the learning rate rose, and comes back, is the schedule's doing.

Two schedules raise the LR on purpose. A warm-up: fine-tuning a pretrained model with one
(MMDetection's default: the LR from a thousandth of its value to all of it over 500 iterations)
often shows the loss climbing while the LR grows, then falling once it has. Warm restarts
(SGDR, cosine with restarts): the LR jumps back to its peak at each cycle's start and the loss
bumps up with it. Their authors call such runs healthy. A spike or a divergence that starts while
the logged LR warms up towards its peak, or within a few logged steps of a jump of the LR to at
least twice its value, and that the run got past, is told as info with the LR's numbers, where
every rise in the run is one of these. A warm-up's rise is slow: the loss climbs with the LR over
many logged steps. A spike to twice its baseline or more within a few logged steps is no warm-up's
doing (a run from scratch with a warm-up of 25,000 steps spikes in it as any run may). A run with a
rise the LR does not explain is unstable,
and its rises with the LR are signs of it too: the CS336 sweep's runs at a learning rate of 0.3
and 1 diverge in their warm-up and again later, and stay critical.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from sentinel.analyze.incident import Incident, IncidentKind, Severity

# The LR's first logged value at most this share of its peak: a warm-up, not a flat schedule.
START_SHARE = 0.5
# The warm-up ends at the first step whose LR reaches this share of the peak.
PEAK_SHARE = 0.95
# Logged LR values the rise needs, its end included.
MIN_POINTS = 3
# A step down smaller than this share of the LR is rounding in a printed LR, not a decay.
JITTER = 1e-3
# An LR at least this many times its previous logged value is a jump (a warm restart).
JUMP = 2.0
# A rise starting within this many logged LR values after a jump is the jump's, or within this
# share of the jump's cycle (the steps to the next jump; for the last, the cycle before it): an
# LR logged every step puts a restart's bump many rows after it.
NEAR_ROWS = 5
NEAR_CYCLE_SHARE = 0.1
# Logged losses whose median is the level before a jump, and the window of the running median
# that must come back to it before the next jump (or the run's end) for the run to have got past it.
LEVEL_ROWS = 5
# A loss spike during the warm-up is sharp, no warm-up's rise, where it reaches this many times its
# baseline within SHARP_ROWS logged losses of its start (its start and peak included): the
# fine-tunes whose warm-up raises the loss climb to ~1.5x over a dozen logged steps.
SHARP_RATIO = 2.0
SHARP_ROWS = 3
# A rise within this share of the warm-up's length after its end is the peak LR's (RTMPose's loss x1.39 six
# iterations after a warm-up of 20 reached its peak): the LR's jumps inside the warm-up are no warm restarts.
AFTER_WARMUP = 0.5
# A rise in the warm-up that never came back to the loss's first values is got past where, over this
# many logged losses after the warm-up at least, the running median fell to this share of its peak or
# below and ends at its lowest.
FALL_ROWS = 4 * LEVEL_ROWS
FALL_SHARE = 0.5


@dataclasses.dataclass(frozen=True)
class Warmup:
    """The LR's warm-up: it rose from ``first`` (at the first logged step) to ``peak`` by ``end``."""

    end: int
    first: float
    peak: float


def lr_warmup(lr: pd.Series) -> Warmup | None:
    """The warm-up at the start of ``lr`` (indexed by step), or None where the LR does not start
    well below its peak and rise to it.

    Example:
        >>> lr_warmup(pd.Series([1e-5, 5e-3, 1e-2, 1e-2, 5e-3], index=[0, 50, 100, 150, 200]))
        Warmup(end=100, first=1e-05, peak=0.01)
        >>> lr_warmup(pd.Series([1e-2, 9e-3, 8e-3], index=[0, 50, 100])) is None
        True
    """
    return _warmup(*_positive(lr))


def _warmup(values: np.ndarray, steps: np.ndarray) -> Warmup | None:
    if len(values) < MIN_POINTS:
        return None
    peak = float(values.max())
    if values[0] > START_SHARE * peak:
        return None
    end = int(np.argmax(values >= PEAK_SHARE * peak))
    rise = values[: end + 1]
    if end + 1 < MIN_POINTS or (np.diff(rise) < -JITTER * rise[1:]).any():
        return None
    return Warmup(int(steps[end]), float(values[0]), peak)


def lr_jumps(lr: pd.Series) -> list[tuple[int, float, float]]:
    """``(step, lr before, lr after)`` where the logged LR jumps to at least :data:`JUMP` times its
    previous logged value (a warm restart).

    Example:
        >>> lr_jumps(pd.Series([0.1, 0.01, 0.001, 0.1, 0.01], index=[0, 10, 20, 30, 40]))
        [(30, 0.001, 0.1)]
    """
    return _jumps(*_positive(lr))


def _jumps(values: np.ndarray, steps: np.ndarray) -> list[tuple[int, float, float]]:
    at = np.flatnonzero(values[1:] >= JUMP * values[:-1]) + 1
    return [(int(steps[i]), float(values[i - 1]), float(values[i])) for i in at]


def settle_lr_rises(incidents: list[Incident], lr: pd.Series | None, loss: pd.Series | None = None) -> list[Incident]:
    """``incidents`` with every loss spike or divergence that the LR explains (it began during the
    LR's warm-up, or just after a jump of the LR) and that the run got past (a divergence that came
    back; after a jump, also a loss whose running median came back to its level before the jump
    by the next jump or the run's end) told as info; unchanged where any rise, warning or worse,
    is not explained by the LR.

    Example:
        >>> settle_lr_rises(incidents, run.steps["lr"], run.steps["loss"])  # doctest: +SKIP
    """
    if lr is None or not any(_rise(i) for i in incidents):
        return incidents
    values, rows = _positive(lr)  # rows: the logged LR values a jump's nearness counts
    warmup, jumps = _warmup(values, rows), _jumps(values, rows)
    if warmup is not None:
        jumps = [jump for jump in jumps if jump[0] > warmup.end]

    def cause(incident: Incident) -> tuple[str, dict] | None:
        step = incident.step
        if warmup is not None and step < warmup.end:
            if _sharp(incident, loss):
                return None
            return (f"during the learning-rate warm-up (lr {warmup.first:.3g} rising to {warmup.peak:.3g} by "
                    f"step {warmup.end}): a rise that came back, as a warm-up often shows when fine-tuning",
                    {"during_warmup": dataclasses.asdict(warmup)})
        if warmup is not None and step <= (1 + AFTER_WARMUP) * warmup.end:  # (its jumps from ~0: no restarts)
            if _sharp(incident, loss):
                return None
            return (f"just after the learning-rate warm-up reached its peak (lr {warmup.first:.3g} rising to "
                    f"{warmup.peak:.3g} by step {warmup.end}): a rise that came back, as the peak LR often brings",
                    {"after_warmup": dataclasses.asdict(warmup)})
        row = int(np.searchsorted(rows, step, side="right")) - 1
        for k, (at, before, after) in enumerate(jumps):
            cycle = _cycle(jumps, k, int(rows[-1]))
            if at <= step and (row - int(np.searchsorted(rows, at)) <= NEAR_ROWS or step - at <= NEAR_CYCLE_SHARE * cycle):
                return (f"just after the learning rate jumped from {before:.3g} to {after:.3g} at step {at} "
                        "(a warm restart): a rise that came back, as a restart brings",
                        {"after_lr_jump": {"step": at, "from": before, "to": after}})
        return None

    causes = {id(i): cause(i) for i in incidents if _rise(i)}
    if any(c is None for c in causes.values()):
        return incidents
    settled = []
    for incident in incidents:
        got_past = incident.details.get("came_back") if incident.kind == IncidentKind.DIVERGENCE.value \
            else incident.resolved
        by_level = False
        fell = None
        if id(incident) in causes and not got_past and "after_lr_jump" in causes[id(incident)][1]:
            got_past = by_level = _back_by_next_jump(loss, causes[id(incident)][1]["after_lr_jump"]["step"],
                                                     incident.end_step, [at for at, _, _ in jumps])
        elif id(incident) in causes and not got_past and warmup is not None:
            fell = _fell_since_warmup(loss, warmup.end)
            got_past = fell is not None
        if id(incident) in causes and got_past:
            text, details = causes[id(incident)]
            if by_level:  # slower than the spike's own window, but within the restart's cycle
                text = text.replace("a rise that came back, as a restart brings",
                                    "the loss was back at its level before the restart within the cycle, "
                                    "as a restart brings")
            if fell is not None:
                text = text.replace("a rise that came back, as a warm-up often shows when fine-tuning",
                                    f"the loss rose with the LR and has fallen since, from {fell[0]:.4g} to "
                                    f"{fell[1]:.4g} at the end, its lowest since: a loss whose first values lie below "
                                    "a learning model's (a matcher that assigns few targets at first, a term that "
                                    "starts near 0), not a divergence")
            incident = dataclasses.replace(incident, severity=Severity.INFO, message=f"{incident.message}; {text}",
                                           details={**incident.details, **details})
        settled.append(incident)
    return settled


def _fell_since_warmup(loss: pd.Series | None, end: int) -> tuple[float, float] | None:
    """``(peak, last)`` of the loss's running median where, after the warm-up that ended at ``end``,
    it fell to at most :data:`FALL_SHARE` of its peak around the warm-up's end and ends at its lowest
    since (a run that learns on: RTMDet's loss from 0.07 to 1.54 in its warm-up, then down to 0.31
    over 4,000 iterations as its mAP rose from 0.08 to 0.81); else None."""
    if loss is None:
        return None
    loss = loss[np.isfinite(loss.to_numpy(dtype="float64"))]
    running = loss.rolling(LEVEL_ROWS).median().dropna()
    after = running[running.index > end]
    if len(after) < FALL_ROWS:
        return None
    peak, last = float(running[running.index <= after.index[0]].max()), float(after.iloc[-1])
    return (peak, last) if last <= FALL_SHARE * peak and last <= float(after.min()) * (1 + JITTER) else None


def _cycle(jumps: list[tuple[int, float, float]], k: int, last_step: int) -> int:
    """The steps of jump ``k``'s cycle: to the next jump; for the last, the cycle before it (or
    to the last logged LR)."""
    if k + 1 < len(jumps):
        return jumps[k + 1][0] - jumps[k][0]
    return jumps[k][0] - jumps[k - 1][0] if k else last_step - jumps[k][0]


def _back_by_next_jump(loss: pd.Series | None, jump: int, end: int, jump_steps: list[int]) -> bool:
    """Whether the loss's running median came back to its level before ``jump`` after ``end``
    (the rise's last step) and before the next jump (or the run's end)."""
    if loss is None:
        return False
    loss = loss[np.isfinite(loss.to_numpy(dtype="float64"))]
    before = loss[loss.index < jump].tail(LEVEL_ROWS)
    later = [at for at in jump_steps if at > jump]
    after = loss[(loss.index > end) & (loss.index < (later[0] if later else np.inf))]
    if len(before) < LEVEL_ROWS or len(after) < LEVEL_ROWS:
        return False
    running = after.rolling(LEVEL_ROWS).median().dropna()
    return bool(len(running)) and float(running.min()) <= float(before.median())


def _sharp(incident: Incident, loss: pd.Series | None) -> bool:
    """Whether ``incident`` is a loss spike to :data:`SHARP_RATIO` times its baseline or more that
    peaked within :data:`SHARP_ROWS` logged losses of its start."""
    details = incident.details
    if incident.kind != IncidentKind.LOSS_SPIKE.value or details.get("ratio", 0) < SHARP_RATIO:
        return False
    if loss is None or "peak_step" not in details:
        return True
    steps = loss.index.to_numpy()
    rows = np.searchsorted(steps, details["peak_step"], side="right") - np.searchsorted(steps, incident.step)
    return int(rows) <= SHARP_ROWS


def _positive(lr: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """The logged LR values that are finite and above 0, and their steps."""
    values = lr.to_numpy(dtype="float64")
    keep = np.isfinite(values) & (values > 0)
    return values[keep], lr.index.to_numpy()[keep]


def _rise(incident: Incident) -> bool:
    return incident.kind in (IncidentKind.LOSS_SPIKE.value, IncidentKind.DIVERGENCE.value) \
        and incident.severity.rank >= Severity.WARNING.rank
