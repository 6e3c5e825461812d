"""An agent whose loss is exactly zero for many updates in a row: its updates carry no gradient.

A reinforcement-learning run's loss is not judged for rises, spikes or plateaus (it follows the
returns), but a PPO or A2C loss of exactly ``0.0`` at update after update is its policy-gradient,
value and entropy terms all zero at once: the policy collapsed to one action and the value fits a
constant return, so nothing is learnt from there on. A Stable-Baselines3 chess agent logged
``train/loss`` 0.0 for 1,902 of its 2,000 updates, its return pinned at the illegal-move penalty:
"healthy" before.

Example:
    >>> loss = pd.Series([1.2, 0.8] + [0.0] * 30, index=range(0, 3200, 100))
    >>> [i.kind for i in agent_zero_loss_incidents(loss, pd.DataFrame(index=loss.index))]
    ['loss_stuck']
"""

from __future__ import annotations

import pandas as pd

from sentinel.analyze.incident import Incident, IncidentKind, Severity
from sentinel.analyze.rule_stuck import RETURN_KEYS
from sentinel.analyze.zero_stretches import zero_stretches

# Updates in a row at exactly 0, at least: a few zeros are a batch with no advantage (an episode
# that ended at once), not a collapse.
MIN_ZERO_UPDATES = 20


def agent_zero_loss_incidents(loss: pd.Series, steps: pd.DataFrame) -> list[Incident]:
    """A warning for the longest stretch of :data:`MIN_ZERO_UPDATES` or more logged updates in a
    row whose loss is exactly 0, with the episode return over it where ``steps`` logs one."""
    stretch = next(zero_stretches(loss, loss, MIN_ZERO_UPDATES), None)  # the longest
    if stretch is None:
        return []
    returns = next((steps[c] for c in steps.columns if str(c).rsplit("/", 1)[-1] in RETURN_KEYS), None)
    told = ""
    if returns is not None:
        during = returns[(returns.index >= stretch.first_step) & (returns.index <= stretch.last_step)].dropna()
        if len(during) >= 2:
            told = f"; the episode return went from {during.iloc[0]:.4g} to {during.iloc[-1]:.4g} meanwhile"
    message = (f"loss exactly 0 {stretch.where}: the agent's updates carry no gradient (its policy collapsed to one "
               f"action, its value fits a constant return), so it learns nothing there{told}")
    return [Incident(IncidentKind.LOSS_STUCK, stretch.first_step, stretch.last_step, Severity.WARNING, message,
                     {"rows": stretch.rows, "resolved": stretch.resolved})]
