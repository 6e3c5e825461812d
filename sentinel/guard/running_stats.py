"""Normalisation layers' running statistics, kept from before a step so a withheld step leaves none.

A step whose update is withheld has already run its forward: in train mode every BatchNorm (and
InstanceNorm with ``track_running_stats``) folded that batch into its running mean and variance.
A batch with a NaN makes them NaN for good (every eval-mode output after it is NaN), an outlier
batch skews them. So their values are copied before each step's forward and put back when the
update is withheld; the copy is one fused copy per step, and nothing at all for a model without
such layers.
"""

from __future__ import annotations

import torch
from torch.nn.modules.batchnorm import _NormBase


class RunningStats:
    """The running statistics of a model's normalisation layers, saved and put back.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 1))
        >>> stats = RunningStats(model)
        >>> stats.keep(); _ = model(torch.full((4, 3), float("nan"))); stats.put_back()
        >>> bool(torch.isfinite(model[0].running_mean).all())
        True
    """

    def __init__(self, model: torch.nn.Module) -> None:
        self._layers = [m for m in model.modules() if isinstance(m, _NormBase) and m.track_running_stats]
        self._saved: list[torch.Tensor] = []
        self._ids: tuple[int, ...] = ()
        self._kept = False

    def keep(self) -> None:
        """Copy the statistics as they are now (before the step's forward)."""
        if not self._layers:
            return
        live = self._live()
        ids = tuple(map(id, live))
        if ids != self._ids:  # first step, or the model was moved (.to() replaces its buffers)
            self._saved, self._ids = [t.detach().clone() for t in live], ids
        else:
            torch._foreach_copy_(self._saved, live)
        self._kept = True

    def put_back(self) -> None:
        """Restore the statistics kept by the last :meth:`keep` (the step's update is withheld)."""
        if not self._kept:
            return
        live = self._live()
        if tuple(map(id, live)) == self._ids:
            with torch.no_grad():
                torch._foreach_copy_(live, self._saved)

    def _live(self) -> list[torch.Tensor]:
        return [t for m in self._layers for t in (m.running_mean, m.running_var, m.num_batches_tracked)
                if t is not None]
