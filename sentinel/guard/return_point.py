"""The state a loss rollback left, kept until the rollback proves it cured something.

A rollback for a loss spike or a divergence restores older weights. When the loss stays as high
on them (it moved for a reason rolling back cannot undo: new data, a new loss term, a synced
target), the steps between were no damage, and training goes back to the state the rollback
left instead of losing them. One snapshot, beside the ring and within its memory bound.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from sentinel.guard.snapshot import SnapshotConfig, SnapshotRing, SnapshotUnusable

log = logging.getLogger(__name__)


class ReturnPoint:
    """At most one kept state: :meth:`keep` before a rollback, then :meth:`go_back` or :meth:`drop`.

    Args:
        directory: the rank's snapshot directory (the point goes to its ``return/`` folder),
            or None to keep it in memory.

    Example:
        >>> point = ReturnPoint(None)
        >>> point.keep(120, ring, model=model, optimizers=[opt], schedulers=[], scaler=None)  # doctest: +SKIP
        >>> point.go_back(125, ring, lambda: True, model=model, optimizers=[opt], schedulers=[],
        ...               scaler=None, agree=None)  # doctest: +SKIP
        120
    """

    def __init__(self, directory: str | None) -> None:
        self._directory = directory
        self._ring: SnapshotRing | None = None

    @property
    def kept(self) -> bool:
        """Whether a state is kept."""
        return self._ring is not None and bool(self._ring.snapshots)

    def keep(self, step: int, ring: SnapshotRing, **objects: Any) -> None:
        """Keep the training state as it is now (``objects``: what :meth:`SnapshotRing.take`
        copies). None is kept where one more snapshot would pass ``ring``'s memory bound, or
        when the copy fails: a diagnostic never stops training."""
        newest = ring.snapshots[-1].nbytes if ring.snapshots else 0
        if ring.config.max_bytes is not None and ring.nbytes + newest > ring.config.max_bytes:
            self.drop()  # an older point (and its file) is no state this rollback leaves
            return
        try:
            if self._ring is None:  # its folder cannot be created: a ValueError, caught as a failed copy
                directory = None if self._directory is None else os.path.join(self._directory, "return")
                self._ring = SnapshotRing(SnapshotConfig(every=1, keep=1, directory=directory))
            self._ring.take(step, **objects)
        except (OSError, ValueError, TypeError) as err:
            log.warning("sentinel: step %d: the state before the rollback could not be kept (%s): a "
                        "rollback that cures nothing will not return to it", step, err)
            self.drop()

    def go_back(self, step: int, ring: SnapshotRing, no_worse: Callable[[], bool | None], **objects: Any) -> int | None:
        """Restore the kept state and return the step it was kept at, where ``no_worse()``
        (called on it) is True; else put back ``ring``'s last restored snapshot and return None.

        A rollback can also have undone real damage that a stretch of hard batches followed:
        then the restored weights stay. The kept state is dropped either way.
        """
        restored = ring.last_restored
        if not self.kept or restored is None:
            self.drop()
            return None
        point = self._ring.snapshots[-1]
        try:
            self._ring.restore(point, **objects)
            if no_worse() is not True:
                ring.restore(restored, **objects)  # damaged (or not known): keep the restored weights
                return None
        except (SnapshotUnusable, ValueError) as err:
            log.warning("sentinel: step %d: the state before the rollback could not be compared or "
                        "restored (%s)", step, err)
            return None
        finally:
            self.drop()
        return point.step

    def drop(self) -> None:
        """Forget the kept state (its folder in the snapshot directory goes with it)."""
        ring, self._ring = self._ring, None
        if ring is not None:
            ring.drop_after(-1)
            if ring.config.directory is not None:
                try:
                    os.rmdir(ring.config.directory)
                except OSError:
                    pass
