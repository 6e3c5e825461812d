"""The snapshot ring: copies of the training state that a rollback can return to.

Every ``every`` optimizer steps the guard copies the model, optimizers (and any tensor
they train that the model does not hold), LR schedulers, grad scaler and RNG states to
host memory (or to disk), keeping the last ``keep`` copies. On a loss spike or a
non-finite step it restores the newest copy taken before the spike began; a snapshot
file that cannot be used is reported and the next older one is restored instead.
Deciding *when* to roll back lives elsewhere; this module only holds and restores state.

Snapshot files are read with ``torch.load(weights_only=True)``: they hold tensors and
plain Python values only, so a file placed in the directory cannot run code.

A snapshot at step ``k`` is the state after ``k`` optimizer steps, taken between steps
(no gradients are held; restoring clears them).

Example:
    >>> ring = SnapshotRing(SnapshotConfig(every=50, keep=4))  # doctest: +SKIP
    >>> if ring.due(step):  # doctest: +SKIP
    ...     ring.take(step, model=model, optimizers=[opt], schedulers=[sched])
    >>> snap = ring.newest_good_before(spike_step)  # doctest: +SKIP
    >>> extra = ring.restore(snap, model=model, optimizers=[opt], schedulers=[sched])  # doctest: +SKIP
    >>> ring.last_restored.step  # the snapshot actually used (an older one if snap was unusable)  # doctest: +SKIP
"""

from __future__ import annotations

import collections
import contextlib
import copy
import gc
import logging
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.optim import Optimizer

from sentinel.rng import RngState, capture_rng, restore_rng

log = logging.getLogger(__name__)

# 2: weights-only payload (numpy RNG state as a tensor, extra as plain values), optimizer params.
_FORMAT_VERSION = 2
_FILE_PREFIX = "snapshot-"
_FILE_SUFFIX = ".pt"
# The ring's own files, and the temporary files of a write cut short (see _write).
_FILE_RE = re.compile(r"snapshot-(\d{9,})\.pt")
_TMP_RE = re.compile(r"\.snapshot-\d{9,}\.pt\.tmp")

# Keys of a snapshot file and of the in-memory state (named once, as torchtitan does).
MODEL = "model"
OPTIMIZERS = "optimizers"
SCHEDULERS = "schedulers"
SCALER = "scaler"
RNG = "rng"
EXTRA = "extra"
OPTIMIZER_PARAMS = "optimizer_params"  # tensors the optimizers train that the model does not hold


class SnapshotTooLarge(ValueError):
    """One snapshot needs more bytes than the ring may hold (``nbytes`` > ``max_bytes``).

    Attributes:
        nbytes: bytes of tensor data one snapshot needs (use :func:`format_size` to show it).
        max_bytes: the ring's bound (``SnapshotConfig.max_bytes``).
        directory: the snapshot directory when snapshots go to disk, else None (host memory).
        step: the step whose snapshot did not fit, or None.
    """

    def __init__(self, nbytes: int, max_bytes: int, message: str, *, directory: str | None = None,
                 step: int | None = None) -> None:
        super().__init__(message)
        self.nbytes, self.max_bytes = nbytes, max_bytes
        self.directory, self.step = directory, step


class SnapshotUnusable(RuntimeError):
    """No snapshot could be restored: every file tried was missing, damaged or refused.

    Raised by :meth:`SnapshotRing.restore` after it has tried the requested snapshot and
    every older one the ring holds. The live objects are left exactly as they were, so the
    caller can give up cleanly.

    Attributes:
        step: the step of the snapshot asked for.
        tried: ``(path, reason)`` for each snapshot tried on this rank, newest first.
        paths: the paths alone.

    With ``agree`` (several ranks), it is raised on every rank together when one rank has no
    usable snapshot left at or before the step the others could restore (``elsewhere=True``
    when this rank still had one).
    """

    def __init__(self, step: int, tried: Sequence[tuple[str, str]], *, elsewhere: bool = False) -> None:
        self.step = step
        self.tried = tuple(tried)
        self.paths = tuple(path for path, _ in self.tried)
        listing = "; ".join(f"{path} ({reason})" for path, reason in self.tried)
        where = "no step held by every rank can be restored (another rank has none left)" if elsewhere \
            else f"no snapshot at or before step {step} can be restored"
        tried_here = f", tried {listing}" if listing else ""
        super().__init__(f"{where}{tried_here}: the training state was left as it is; check the disk "
                         "of the snapshot directory, or restart from a checkpoint")


class _Unusable(Exception):
    """A snapshot's stored state cannot be used (the reason is the message)."""


def format_size(nbytes: int) -> str:
    """A byte count in the largest binary unit that keeps it >= 1, one decimal.

    Example:
        >>> format_size(812), format_size(5136), format_size(5 << 30)
        ('812 bytes', '5.0 KiB', '5.0 GiB')
    """
    if nbytes < 1024:
        return f"{nbytes} bytes"
    value = float(nbytes)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"


@dataclass(frozen=True, kw_only=True, slots=True)
class SnapshotConfig:
    """How often to snapshot, how many to keep and where.

    Attributes:
        every: take a snapshot every ``every`` optimizer steps (at steps divisible by it,
            step 0 included). Default 50: on the benchmark GPT (4 layers, d=256, AdamW,
            CPU) one snapshot costs 4-6% of a training step, 0.1% amortised, well under
            the 1% budget. On an accelerator a step is fast next to a device-to-host copy
            of 3x the weights, so a snapshot may cost up to half a step there: measure
            with ``benchmarks/snapshot_cost.py --device cuda`` and raise ``every`` if the
            amortised figure passes 1%.
        keep: how many snapshots to hold. Default 4: with ``every=50`` the ring reaches
            back 150-200 steps, PaLM's manual procedure restarted ~100 steps before a
            spike, and a spike that builds slowly makes the newest snapshots bad.
        max_bytes: bound on the bytes of tensors held (in host memory, or on disk with
            ``directory``); the oldest snapshots are dropped first. ``None`` bounds by
            ``keep`` only. One snapshot larger than the bound is an error at ``take``.
        directory: when set, snapshots are written there (atomically: a temporary file
            then ``os.replace``) instead of being held in memory, and survive a restart:
            ``SnapshotRing.load_state_dict`` finds them again. Use one directory per rank:
            a new ring removes what an earlier process left there under the ring's own
            names (``snapshot-<step>.pt`` and their temporary files) and nothing else.
        pin_memory: copy CUDA tensors into pinned host memory (asynchronous copies, one
            synchronisation). ``None`` pins when the state is on CUDA.

    Example:
        >>> SnapshotConfig(every=100, keep=3, max_bytes=8 << 30).max_bytes
        8589934592
    """

    every: int = 50
    keep: int = 4
    max_bytes: int | None = None
    directory: str | None = None
    pin_memory: bool | None = None

    def __post_init__(self) -> None:
        for name in ("every", "keep"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"SnapshotConfig.{name}={value!r} is invalid: pass an integer >= 1")
        mb = self.max_bytes
        if mb is not None and (isinstance(mb, bool) or not isinstance(mb, int) or mb < 1):
            raise ValueError(
                f"SnapshotConfig.max_bytes={mb!r} is invalid: pass a positive number of bytes or None")
        if self.directory is not None and (not isinstance(self.directory, (str, os.PathLike))
                                           or not str(self.directory)):
            raise ValueError(
                f"SnapshotConfig.directory={self.directory!r} is invalid: pass a directory path or None")
        if self.pin_memory not in (None, True, False):
            raise ValueError(
                f"SnapshotConfig.pin_memory={self.pin_memory!r} is invalid: pass True, False or None (auto)")


@dataclass(frozen=True, slots=True)
class _State:
    """The tensors and objects of one snapshot, all on the host."""

    model: dict[str, Any]
    optimizers: list[dict[str, Any]]
    schedulers: list[dict[str, Any]]
    scaler: dict[str, Any] | None  # None: no scaler was given to take()
    rng: RngState
    params: list[torch.Tensor] = field(default_factory=list)  # see _outside_params
    # The host tensors it holds, each once (for reuse by a later take), and the CUDA events its
    # asynchronous copies complete at; see wait().
    pool: _BufferPool | None = field(default=None, repr=False)
    pending: list[Any] = field(default_factory=list, repr=False)

    def wait(self) -> None:
        """Block until the asynchronous device-to-host copies of this state have landed, then
        fill in what was read from the device with them (the grad scaler's scale and tracker)."""
        while self.pending:
            self.pending.pop().synchronize()
        if self.scaler is not None:
            for key, value in list(self.scaler.items()):
                if isinstance(value, torch.Tensor):  # see _scaler_state
                    self.scaler[key] = int(value) if key == "_growth_tracker" else float(value)


@dataclass
class Snapshot:
    """One snapshot held by a :class:`SnapshotRing`.

    Attributes:
        step: optimizer steps completed when it was taken.
        nbytes: bytes of tensor data it holds (model, optimizer and scheduler state, RNG).
        good: False once :meth:`SnapshotRing.mark_bad_after` judged it taken during a spike.
        extra: the caller's small state given to ``take`` (a deep copy).
    """

    step: int
    nbytes: int
    good: bool = True
    extra: dict[str, Any] = field(default_factory=dict)
    _state: _State | None = field(default=None, repr=False, compare=False)
    _path: str | None = field(default=None, repr=False, compare=False)

    @property
    def available(self) -> bool:
        """Whether the snapshot still holds its state (False once dropped from the ring)."""
        return self._state is not None or self._path is not None

    @property
    def path(self) -> str | None:
        """The snapshot's file in directory mode (None in memory, or once dropped)."""
        return self._path


class SnapshotRing:
    """A bounded ring of training-state snapshots with restore.

    Args:
        config: cadence, size bounds and storage, see :class:`SnapshotConfig`.

    Attributes:
        last_restored: the snapshot the last successful :meth:`restore` used (older than
            the one asked for when that one was unusable), or None.

    Example:
        >>> ring = SnapshotRing(SnapshotConfig(every=2, keep=2))  # doctest: +SKIP
        >>> snap = ring.take(0, model=model, optimizers=[opt], extra={"epoch": 0})  # doctest: +SKIP
        >>> ring.restore(snap, model=model, optimizers=[opt])  # doctest: +SKIP
        {'epoch': 0}
    """

    def __init__(self, config: SnapshotConfig = SnapshotConfig()) -> None:
        if not isinstance(config, SnapshotConfig):
            raise TypeError(f"config={config!r} is not a SnapshotConfig: pass SnapshotConfig(...)")
        self.config = config
        self.last_restored: Snapshot | None = None
        self._snapshots: list[Snapshot] = []  # oldest first
        self._pool = _BufferPool()  # host buffers of the last snapshot dropped, for the next take
        # Files an earlier process left in the directory, by step: load_state_dict may adopt
        # them; the rest are removed then, or at the first take.
        self._leftovers: dict[int, str] = {}
        if config.directory is not None:
            try:
                os.makedirs(config.directory, exist_ok=True)
            except OSError as exc:
                raise ValueError(f"snapshot directory {str(config.directory)!r} cannot be created ({exc}): "
                                 "pass a directory you can write to") from exc
            self._clean_directory()

    # ----------------------------------------------------------------- queries

    def __len__(self) -> int:
        return len(self._snapshots)

    @property
    def nbytes(self) -> int:
        """Total bytes of tensor data held (in memory, or on disk in directory mode)."""
        return sum(s.nbytes for s in self._snapshots)

    @property
    def snapshots(self) -> tuple[Snapshot, ...]:
        """The snapshots held, oldest first."""
        return tuple(self._snapshots)

    def due(self, step: int) -> bool:
        """Whether a snapshot should be taken after ``step`` optimizer steps.

        Example:
            >>> SnapshotRing(SnapshotConfig(every=50)).due(100)
            True
        """
        return step >= 0 and step % self.config.every == 0

    def newest_good_before(self, step: int) -> Snapshot | None:
        """The newest good snapshot taken strictly before ``step``, or None.

        Example:
            >>> ring.mark_bad_after(140); ring.newest_good_before(150).step  # doctest: +SKIP
            100
        """
        for snap in reversed(self._snapshots):
            if snap.good and snap.step < step:
                return snap
        return None

    # --------------------------------------------------------------- mutation

    def mark_bad_after(self, step: int) -> None:
        """Mark snapshots taken at or after ``step`` as not good (a spike was building).

        Example:
            >>> ring.mark_bad_after(spike_start)  # doctest: +SKIP
        """
        for snap in self._snapshots:
            if snap.step >= step:
                snap.good = False

    def drop_after(self, step: int) -> None:
        """Drop snapshots taken strictly after ``step`` (an abandoned trajectory).

        Example:
            >>> ring.drop_after(restored.step)  # keeps the one restored to  # doctest: +SKIP
        """
        keep = [s for s in self._snapshots if s.step <= step]
        for snap in self._snapshots:
            if snap.step > step:
                self._release(snap)
        self._snapshots = keep

    def take(self, step: int, *, model: nn.Module, optimizers: Sequence[Optimizer] = (),
             schedulers: Sequence[Any] = (), scaler: Any | None = None,
             extra: dict[str, Any] | None = None, hold_before: int | None = None) -> Snapshot:
        """Copy the training state to the host (or disk) and add it to the ring.

        The tensors are copied into the host buffers of the snapshot the ring drops to make
        room, reused when their shapes match (no allocation, no fresh pages to fault in), else
        new ones; host tensors in one batched ``torch._foreach_copy_``. CUDA tensors are copied with
        non-blocking transfers into pinned buffers and ``take`` returns without waiting: the
        copies are ordered before the next update on the device, and a restore (or the write
        of the file, with ``directory``) waits for them. Nothing here reads a device value back
        (the grad scaler's scale is copied like the other tensors, not read with ``.item()``).
        Tensors the optimizers train that are not parameters of ``model`` are copied too.
        The oldest snapshots are dropped first to stay within ``keep`` and ``max_bytes``,
        except the one ``hold_before`` names. A snapshot at a step already held replaces it.

        Args:
            step: optimizer steps completed so far.
            model: the module whose ``state_dict`` is copied.
            optimizers: optimizers whose state is copied.
            schedulers: LR schedulers, and other state put back with the model (anything with
                ``state_dict``/``load_state_dict``; a module, such as an EMA copy of the model,
                is copied like the model).
            scaler: an AMP ``GradScaler`` or None.
            extra: small state to give back on restore (step counters, detector state);
                deep-copied. In directory mode it must be plain values (numbers, strings,
                lists, tuples, dicts, tensors): numpy scalars are stored as Python numbers
                and deques as lists.
            hold_before: keep the newest good snapshot taken before this step even when it is
                the oldest (when ``keep`` leaves room for it and one more): the state before a
                stretch that is still going on (a slow divergence), which a rollback for it
                returns to, outlives the ring's reach. ``max_bytes`` still wins.

        Returns:
            The new :class:`Snapshot`.

        Raises:
            SnapshotTooLarge: the snapshot alone is larger than ``max_bytes``.
            TypeError: in directory mode, the state holds a value a weights-only load refuses.

        Example:
            >>> snap = ring.take(100, model=model, optimizers=[opt], extra={"epoch": 2})  # doctest: +SKIP
        """
        with _gc_paused():
            return self._take(step, model, optimizers, schedulers, scaler, extra, hold_before)

    def _take(self, step: int, model: nn.Module, optimizers: Sequence[Optimizer], schedulers: Sequence[Any],
              scaler: Any | None, extra: dict[str, Any] | None, hold_before: int | None) -> Snapshot:
        model_sd = model.state_dict()
        opt_sds = [opt.state_dict() for opt in optimizers]
        # Scalers and schedulers hold Python scalars; deep copies detach them from the live objects.
        # A module among them (an EMA copy of the model) is copied like the model, its tensors
        # straight into host buffers.
        sched_sds = [s.state_dict() if isinstance(s, nn.Module) else copy.deepcopy(s.state_dict())
                     for s in schedulers]
        params = _outside_params(model, optimizers)
        rng = capture_rng()

        copier = _HostCopier()
        plan = copier.plan((model_sd, opt_sds, sched_sds, params))  # one walk: distinct tensors, tied once
        scaler_plan = None if scaler is None else _scaler_state(scaler, copier)
        nbytes = copier.nbytes + rng.torch_cpu.numel() + sum(t.numel() for t in rng.torch_cuda)
        self._make_room(step, nbytes, hold_before)  # the snapshots it drops leave their buffers to reuse

        pool, self._pool = self._pool, _BufferPool()
        (host_model, host_opts, host_scheds, host_params), scaler_sd = \
            copier.copy((plan, scaler_plan), pool, self._pin(copier.sources))
        state = _State(host_model, host_opts, host_scheds, scaler_sd, rng, host_params,
                       pool=copier.pool, pending=copier.pending)
        snap = Snapshot(step=int(step), nbytes=nbytes, good=True, extra=copy.deepcopy(dict(extra or {})))
        if self.config.directory is None:
            snap._state = state  # CUDA copies still in flight: waited for when the state is read
        else:
            state.wait()
            snap._path = self._write(snap, state)
            self._pool = state.pool  # written: the next take copies into them
        self._snapshots.append(snap)
        return snap

    def restore(self, snapshot: Snapshot, *, model: nn.Module, optimizers: Sequence[Optimizer] = (),
                schedulers: Sequence[Any] = (), scaler: Any | None = None,
                agree: Callable[[int], tuple[int, int]] | None = None) -> dict[str, Any]:
        """Put the live objects back to ``snapshot``, in place, on their own devices.

        Works from fresh copies of the snapshot, so the snapshot stays intact however the
        restored optimizer is stepped afterwards (``Optimizer.load_state_dict`` keeps the
        tensors it is given). Gradients are cleared, as they were at the snapshot, and
        RNG states are restored, so the next step repeats exactly.

        A snapshot file that is missing, damaged, refused by the weights-only loader or
        does not fit the live objects is logged as a warning naming it and why, dropped
        from the ring, and the next older snapshot held is tried. Nothing live changes
        until a snapshot has been read and checked whole. :attr:`last_restored` says which
        snapshot was used.

        Under data parallelism every rank holds its own ring (its own files) and all of them
        must restore the same step, or the ranks train on from different states (under FSDP, a
        model stitched from shards of different steps). ``agree`` gives them one: it is called
        with the step this rank can restore (-1 for none) and returns the lowest and the highest
        over the ranks (one all-reduce, :func:`sentinel.distributed.min_and_max`); while they
        differ, every rank looks for its newest usable snapshot at or before the lowest and
        asks again. The step restored is thus the newest one every rank can restore; when some
        rank has none left, every rank raises :class:`SnapshotUnusable` with nothing changed.
        Every rank calls ``agree`` the same number of times.

        Args:
            snapshot: a snapshot held by this ring.
            model, optimizers, schedulers, scaler: the live objects, the same kinds and
                number as given to :meth:`take`.
            agree: ``agree(step) -> (lowest, highest)`` over the ranks, or None (one process).

        Returns:
            A deep copy of the ``extra`` of the snapshot used.

        Raises:
            ValueError: the snapshot was dropped, or the objects do not match an in-memory snapshot.
            SnapshotUnusable: no snapshot from ``snapshot`` back could be used (live state untouched),
                here or, with ``agree``, on some rank.

        Example:
            >>> extra = ring.restore(snap, model=model, optimizers=[opt], schedulers=[sched])  # doctest: +SKIP
            >>> restored_step = ring.last_restored.step  # doctest: +SKIP
        """
        if not snapshot.available:
            raise ValueError(f"snapshot at step {snapshot.step} was dropped from the ring (keep/max_bytes "
                             "or drop_after): restore one that is held, e.g. ring.newest_good_before(step)")
        objects = (model, list(optimizers), list(schedulers), scaler)
        tried: list[tuple[str, str]] = []
        older = [s for s in reversed(self._snapshots) if s.good and s.step < snapshot.step]
        candidates = [snapshot, *older]
        found = self._newest_usable(candidates, snapshot.step, objects, tried)
        while agree is not None:
            lowest, highest = agree(found[0].step if found is not None else -1)
            if lowest < 0:
                raise SnapshotUnusable(snapshot.step, tried, elsewhere=found is not None)
            if lowest == highest:
                break
            if found[0].step > lowest:  # another rank cannot go that far forward
                found = self._newest_usable(candidates, lowest, objects, tried)
        if found is None:
            raise SnapshotUnusable(snapshot.step, tried)
        candidate, state = found
        _apply(state, *objects)
        if candidate is not snapshot:
            log.warning("restored the snapshot at step %d instead of step %d%s", candidate.step,
                        snapshot.step, "" if tried else " (the newest step every rank can restore)")
        self.last_restored = candidate
        return copy.deepcopy(candidate.extra)

    def _newest_usable(self, candidates: list[Snapshot], limit: int, objects: tuple,
                       tried: list[tuple[str, str]]) -> tuple[Snapshot, _State] | None:
        """The newest of ``candidates`` (newest first) at or before step ``limit`` whose state
        can be read and fits the live objects, with that state; unusable ones are dropped."""
        for candidate in candidates:
            if candidate.step > limit or not candidate.available:
                continue
            if candidate._state is not None:  # in memory: nothing can damage it, a mismatch is the caller's
                candidate._state.wait()
                _check_fits(candidate, candidate._state, *objects)
                return candidate, candidate._state
            path = str(candidate._path)
            try:
                state = self._load_file(path, candidate.step)
                _check_fits(candidate, state, *objects)
            except (_Unusable, ValueError) as exc:
                log.warning("snapshot file %s is unusable (%s): dropped, trying an older snapshot", path, exc)
                tried.append((path, str(exc)))
                self._discard(candidate)
                continue
            return candidate, state
        return None

    # ------------------------------------------------------------ persistence

    def state_dict(self) -> dict[str, Any]:
        """The ring's bookkeeping (steps, sizes, good flags), not the tensors.

        In directory mode the snapshot files stay on disk and are found again by
        :meth:`load_state_dict` after a restart.

        Example:
            >>> ckpt["snapshot_ring"] = ring.state_dict()  # doctest: +SKIP
        """
        return {
            "version": _FORMAT_VERSION,
            "directory": None if self.config.directory is None else str(self.config.directory),
            "snapshots": [{"step": s.step, "nbytes": s.nbytes, "good": s.good,
                           "file": None if s._path is None else os.path.basename(s._path)}
                          for s in self._snapshots],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the bookkeeping saved by :meth:`state_dict`.

        Snapshots this ring still holds get their good flags back. In directory mode,
        snapshots whose files an earlier process left in this ring's directory are loaded
        back (lazily: the tensors are read at restore); a missing or unusable file is
        skipped with a warning. Files left there that the bookkeeping does not name are
        removed. In-memory snapshots do not survive a restart and are not recreated.

        Example:
            >>> ring.load_state_dict(ckpt["snapshot_ring"])  # doctest: +SKIP
        """
        held = {s.step: s for s in self._snapshots}
        loaded: list[Snapshot] = []
        for entry in state.get("snapshots", []):
            step = int(entry["step"])
            snap = held.pop(step, None)
            if snap is None and self.config.directory is not None and entry.get("file"):
                snap = self._reopen(entry)
            if snap is None:
                log.info("snapshot at step %d is not held (in-memory snapshots do not survive a restart)", step)
                continue
            snap.good = bool(entry.get("good", True))
            loaded.append(snap)
        for snap in held.values():  # held now but not in the saved bookkeeping
            self._release(snap)
        self._snapshots = sorted(loaded, key=lambda s: s.step)
        self._drop_leftovers()

    # --------------------------------------------------------------- private

    def _pin(self, sources: list[torch.Tensor]) -> bool:
        if self.config.pin_memory is not None:
            if self.config.pin_memory and not torch.cuda.is_available():
                raise ValueError("SnapshotConfig.pin_memory=True needs CUDA, which is not available: "
                                 "pass pin_memory=None (auto) or False")
            return self.config.pin_memory
        return any(t.is_cuda for t in sources)

    def _make_room(self, step: int, nbytes: int, hold_before: int | None = None) -> None:
        mb = self.config.max_bytes
        if mb is not None and nbytes > mb:
            directory = None if self.config.directory is None else str(self.config.directory)
            raise SnapshotTooLarge(
                nbytes, mb,
                f"one snapshot at step {step} needs {_size(nbytes)} but SnapshotConfig.max_bytes={mb} "
                f"({_size(mb)}): raise max_bytes to at least {nbytes} (times keep={self.config.keep} "
                "for a full ring) or pass max_bytes=None", directory=directory, step=int(step))
        self._drop_leftovers()  # this ring writes from here on: an earlier process's files go
        # Replace a snapshot at the same step; drop before copying so the peak stays at `keep`.
        for snap in [s for s in self._snapshots if s.step == step]:
            self._snapshots.remove(snap)
            self._release(snap)
        held = self.newest_good_before(hold_before) if hold_before is not None and self.config.keep > 1 else None
        while self._snapshots and (len(self._snapshots) >= self.config.keep
                                   or (mb is not None and self.nbytes + nbytes > mb)):
            oldest = next((s for s in self._snapshots if s is not held), held)  # the held one goes last
            self._snapshots.remove(oldest)
            self._release(oldest)

    def _release(self, snap: Snapshot) -> None:
        # Clear the state so memory is freed even if a caller still holds the Snapshot; its
        # buffers wait for the next take (the newest dropped snapshot's only: one snapshot's worth).
        if snap._state is not None and snap._state.pool is not None:
            snap._state.wait()  # long done by now: a dropped snapshot is at least `every` steps old
            self._pool = snap._state.pool
        snap._state = None
        if snap._path is not None:
            try:
                os.remove(snap._path)
            except FileNotFoundError:
                log.warning("snapshot file %s was already gone when dropped", snap._path)
            snap._path = None

    def _discard(self, snap: Snapshot) -> None:
        # An unusable snapshot: out of the ring, and its file (if any is left) off the disk.
        if snap in self._snapshots:
            self._snapshots.remove(snap)
        snap._state = None
        if snap._path is not None:
            _remove_quietly(snap._path)
            snap._path = None

    def _clean_directory(self) -> None:
        """Remove temporary files of interrupted writes, and keep at most ``keep`` snapshot
        files an earlier process left (the newest steps) for :meth:`load_state_dict`."""
        directory = str(self.config.directory)
        found: dict[int, str] = {}
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            if _TMP_RE.fullmatch(name):
                log.info("removing %s, left by an interrupted snapshot write", path)
                _remove_quietly(path)
            elif (match := _FILE_RE.fullmatch(name)) is not None and os.path.isfile(path):
                step = int(match.group(1))
                if self._file(step) == path:  # exactly the name this ring writes for that step
                    found[step] = path
        for step in sorted(found)[: max(0, len(found) - self.config.keep)]:
            log.info("removing %s, a snapshot an earlier process left beyond keep=%d",
                     found[step], self.config.keep)
            _remove_quietly(found.pop(step))
        self._leftovers = found

    def _drop_leftovers(self) -> None:
        for step, path in sorted(self._leftovers.items()):
            log.info("removing %s, a snapshot an earlier process left (step %d)", path, step)
            _remove_quietly(path)
        self._leftovers = {}

    def _file(self, step: int) -> str:
        return os.path.join(str(self.config.directory), f"{_FILE_PREFIX}{step:09d}{_FILE_SUFFIX}")

    def _write(self, snap: Snapshot, state: _State) -> str:
        path = self._file(snap.step)
        tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
        payload = {"version": _FORMAT_VERSION, "step": snap.step, "nbytes": snap.nbytes,
                   EXTRA: _plain(snap.extra), MODEL: state.model, OPTIMIZERS: state.optimizers,
                   SCHEDULERS: state.schedulers, SCALER: state.scaler, RNG: _rng_to_file(state.rng),
                   OPTIMIZER_PARAMS: state.params}
        try:
            with open(tmp, "wb") as fh:
                torch.save(payload, fh)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            _remove_quietly(tmp)  # never leave a partial file behind
            raise OSError(f"cannot write snapshot {path} ({exc}): free disk space or pass another "
                          "SnapshotConfig.directory") from exc
        # Read it back as restore will: a value the weights-only loader refuses fails here, at
        # take, not at the rollback that needs it. mmap: only the pickled structure is read.
        try:
            torch.load(tmp, map_location="cpu", weights_only=True, mmap=True)
        except Exception as exc:  # whatever the loader raises, the file is of no use
            _remove_quietly(tmp)
            raise TypeError(f"snapshot at step {snap.step} holds a value that a weights-only load refuses "
                            f"({_first_line(exc)}): pass extra= (and scheduler state) made of numbers, "
                            "strings, lists, tuples, dicts and tensors") from None
        os.replace(tmp, path)  # atomic: a crash leaves the old file or the new one, never half of one
        _fsync_dir(os.path.dirname(path))
        return path

    def _read(self, path: str, *, mmap: bool) -> dict[str, Any]:
        """A snapshot file's payload; raises :class:`_Unusable` with the reason.

        ``weights_only=True``: the file may have been replaced by anyone who can write to
        the directory, and it must not run code. Any error of the loader makes the file
        unusable (the reason is logged), never a crash of the rollback that needed it.
        """
        try:
            payload = torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
        except FileNotFoundError:
            raise _Unusable("the file is missing") from None
        except Exception as exc:  # torch.load raises many types on a damaged or crafted file
            raise _Unusable(f"cannot be read: {type(exc).__name__}: {_first_line(exc)}") from None
        if not isinstance(payload, dict):
            raise _Unusable(f"holds a {type(payload).__name__}, not a snapshot")
        if payload.get("version") != _FORMAT_VERSION:
            raise _Unusable(f"format version {payload.get('version')!r}, this ring reads {_FORMAT_VERSION}")
        return payload

    def _load_file(self, path: str, step: int) -> _State:
        # The whole file is read now (no mmap): nothing can fail later, half-way through a restore,
        # and the tensors are this restore's own copies.
        payload = self._read(path, mmap=False)
        if payload.get("step") != step:
            raise _Unusable(f"holds step {payload.get('step')!r}, not {step}")
        try:
            model, opts, scheds = payload[MODEL], payload[OPTIMIZERS], payload[SCHEDULERS]
            params, scaler = payload[OPTIMIZER_PARAMS], payload[SCALER]
            rng = _rng_from_file(payload[RNG])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _Unusable(f"incomplete snapshot ({type(exc).__name__}: {exc})") from None
        if not (isinstance(model, dict) and isinstance(opts, list) and isinstance(scheds, list)
                and isinstance(params, list) and (scaler is None or isinstance(scaler, dict))
                and all(isinstance(t, torch.Tensor) for t in params)
                and all(isinstance(sd, dict) for sd in scheds)
                and all(_is_optimizer_state(sd) for sd in opts)):
            raise _Unusable("its parts are not the containers a snapshot holds")
        return _State(model, opts, scheds, scaler, rng, params)

    def _reopen(self, entry: dict[str, Any]) -> Snapshot | None:
        path = os.path.join(str(self.config.directory), os.path.basename(str(entry["file"])))
        step = int(entry["step"])
        try:
            payload = self._read(path, mmap=True)  # mmap: the tensors are not read until a restore
            if payload.get("step") != step:
                raise _Unusable(f"holds step {payload.get('step')!r}")
        except _Unusable as exc:
            log.warning("snapshot file %s is unusable (%s): snapshot at step %s skipped", path, exc, step)
            return None
        self._leftovers.pop(step, None)
        return Snapshot(step=step, nbytes=int(entry.get("nbytes", payload.get("nbytes", 0))),
                        extra=payload.get(EXTRA, {}), _path=path)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a snapshot is built: it allocates a container per
    tensor it holds (state dicts), all of which survive, and each collection they triggered
    on the way found nothing to free (2,000-parameter AdamW model: ~30 collections per take,
    and a full collection of the whole process every few takes)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _is_optimizer_state(sd: Any) -> bool:
    return (isinstance(sd, dict) and isinstance(sd.get("state"), dict)
            and all(isinstance(v, dict) for v in sd["state"].values())
            and isinstance(sd.get("param_groups"), list)
            and all(isinstance(g, dict) and isinstance(g.get("params"), list) for g in sd["param_groups"]))


def _outside_params(model: nn.Module, optimizers: Sequence[Optimizer]) -> list[torch.Tensor]:
    """Tensors the optimizers train that are not parameters of ``model`` (by identity), in
    optimizer and group order, each once: ``model.state_dict()`` does not hold them."""
    seen = {id(p) for p in model.parameters()}
    out: list[torch.Tensor] = []
    for opt in optimizers:
        for group in opt.param_groups:
            for p in group["params"]:
                if id(p) not in seen:
                    seen.add(id(p))
                    out.append(p)
    return out


def _check_fits(snapshot: Snapshot, state: _State, model: nn.Module, optimizers: list[Optimizer],
                schedulers: list[Any], scaler: Any | None) -> None:
    """Raise ValueError unless ``state`` can be loaded into the live objects whole (so a
    restore never stops half-way: ``Module.load_state_dict`` copies what matches before it
    complains about the rest)."""
    where = f"snapshot at step {snapshot.step}"
    if len(optimizers) != len(state.optimizers):
        raise ValueError(f"{where} holds {len(state.optimizers)} optimizer(s) but {len(optimizers)} "
                         "were passed to restore: pass the same optimizers as to take()")
    if len(schedulers) != len(state.schedulers):
        raise ValueError(f"{where} holds {len(state.schedulers)} scheduler(s) but {len(schedulers)} "
                         "were passed to restore: pass the same schedulers as to take()")
    if (scaler is None) != (state.scaler is None):
        held = "holds a grad scaler" if state.scaler is not None else "holds no grad scaler"
        raise ValueError(f"{where} {held} but restore got scaler={scaler!r}: "
                         "pass the same scaler (or none) as to take()")
    live = model.state_dict()
    if live.keys() != state.model.keys():
        missing, unexpected = sorted(live.keys() - state.model.keys()), sorted(state.model.keys() - live.keys())
        raise ValueError(f"{where} does not fit the model (missing {missing[:3]}, unexpected {unexpected[:3]}): "
                         "pass the model given to take()")
    for key, value in live.items():
        saved = state.model[key]
        if not isinstance(saved, torch.Tensor) or saved.shape != value.shape:
            raise ValueError(f"{where} holds {key} of shape {getattr(saved, 'shape', type(saved).__name__)}, "
                             f"the model {tuple(value.shape)}: pass the model given to take()")
    for i, (opt, sd) in enumerate(zip(optimizers, state.optimizers)):
        sizes = [len(g["params"]) for g in opt.param_groups]
        held = [len(g["params"]) for g in sd["param_groups"]]
        # Groups added since (add_param_group: Lightning's BackboneFinetuning unfreezing a
        # backbone) are kept as they are, their parameters' state fresh: see _fresh_optimizer_state.
        if held != sizes[:len(held)]:
            raise ValueError(f"{where}: optimizer {i} holds parameter groups of other sizes {held} than the "
                             f"live one {sizes}: pass the optimizers given to take()")
    outside = _outside_params(model, optimizers)
    if [tuple(p.shape) for p in outside] != [tuple(t.shape) for t in state.params]:
        raise ValueError(f"{where} holds {len(state.params)} optimizer parameter(s) outside the model but "
                         f"the optimizers passed train {len(outside)} (shapes "
                         f"{[tuple(p.shape) for p in outside][:3]}): pass the optimizers given to take()")


def _apply(state: _State, model: nn.Module, optimizers: list[Optimizer], schedulers: list[Any],
           scaler: Any | None) -> None:
    """Copy a checked state into the live objects (never aliasing the snapshot's tensors)."""
    # Module.load_state_dict copies into the live parameters (no aliasing).
    model.load_state_dict(state.model)
    with torch.no_grad():  # the same tensors the optimizers hold, refilled in place
        for live, saved in zip(_outside_params(model, optimizers), state.params):
            live.copy_(saved, non_blocking=_is_pinned(saved))
    for opt, sd in zip(optimizers, state.optimizers):
        opt.load_state_dict(_fresh_optimizer_state(sd, opt))
    for sched, sd in zip(schedulers, state.schedulers):  # a module copies in place, as the model
        sched.load_state_dict(sd if isinstance(sched, nn.Module) else _onto_live_devices(sd, sched.state_dict()))
    if scaler is not None and state.scaler:
        scaler.load_state_dict(copy.deepcopy(state.scaler))
    restore_rng(state.rng)
    # The snapshot was taken between steps: no gradient belongs to it.
    model.zero_grad(set_to_none=True)
    for opt in optimizers:
        opt.zero_grad(set_to_none=True)
    _synchronize_cuda()  # non-blocking host->device copies must land before the host copies are freed


def _plain(obj: Any) -> Any:
    """``extra`` as a weights-only load reads it back: numpy scalars become Python numbers,
    deques lists; anything else the loader refuses is reported by the read-back in _write."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, collections.deque)):
        return [_plain(v) for v in obj]
    if type(obj) is tuple:
        return tuple(_plain(v) for v in obj)
    return obj


def _rng_to_file(rng: RngState) -> dict[str, Any]:
    # numpy's legacy state is ('MT19937', uint32 array, pos, has_gauss, cached_gaussian): the
    # array goes as a tensor, which the weights-only loader reads without allow-listing numpy.
    sd = rng.state_dict()
    name, keys, pos, has_gauss, cached = sd["numpy"]
    sd["numpy"] = [str(name), torch.from_numpy(np.asarray(keys, dtype=np.int64)), int(pos), int(has_gauss),
                   float(cached)]
    return sd


def _rng_from_file(sd: dict[str, Any]) -> RngState:
    name, keys, pos, has_gauss, cached = sd["numpy"]
    numpy_state = (name, keys.numpy().astype(np.uint32), pos, has_gauss, cached)
    python = sd["python"]
    if not (isinstance(sd["torch_cpu"], torch.Tensor) and isinstance(python, tuple)):
        raise ValueError("RNG state of the wrong types")
    return RngState.from_state_dict({**sd, "numpy": numpy_state})


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("cannot remove %s (%s)", path, exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _Leaf:
    """Where a tensor was in the nested state: the index of its distinct source tensor."""

    __slots__ = ("index", "dtensor")

    def __init__(self, index: int, dtensor: Any = None) -> None:
        self.index, self.dtensor = index, dtensor


class _BufferPool:
    """The host tensors of a snapshot, handed out again to the next take that fits them.

    ``keys``: ``(shape, dtype, on CUDA)`` of each buffer, in the order the take listed its
    tensors. A take of the same state asks for the same keys in the same order (one list
    comparison); otherwise each buffer goes to a tensor of its key, and the rest are allocated.
    """

    def __init__(self, keys: Sequence[tuple] = (), buffers: Sequence[torch.Tensor] = (), pin: bool = False) -> None:
        self.keys, self.buffers, self.pin = list(keys), list(buffers), pin

    def take(self, keys: list[tuple], pin: bool) -> list[torch.Tensor]:
        if pin == self.pin and keys == self.keys:
            return list(self.buffers)
        free: dict[tuple, list[torch.Tensor]] = {}
        if pin == self.pin:
            for key, buf in zip(self.keys, self.buffers):
                free.setdefault(key, []).append(buf)
        out = []
        for key in keys:
            held = free.get(key)
            if held:
                out.append(held.pop())
            else:
                shape, dtype, cuda = key
                out.append(torch.empty(shape, dtype=dtype, pin_memory=pin and cuda))
        return out


class _HostCopier:
    """Copies nested containers of tensors to host memory, sharing tied tensors once.

    :meth:`plan` walks the containers once and lists the distinct tensors (a tied weight
    appears under several keys: copied once); :meth:`copy` copies them into host buffers
    (reused from a pool), host tensors with one ``torch._foreach_copy_``, and rebuilds the
    containers around the copies. CUDA copies are non-blocking when the buffers are pinned;
    :attr:`pending` holds one event per device to wait on before reading them.
    """

    def __init__(self) -> None:
        self.sources: list[torch.Tensor] = []
        self.keys: list[tuple] = []  # (shape, dtype, on CUDA) of each source
        self.devices: set[torch.device] = set()
        self.pool = _BufferPool()  # the host copies, once copied
        self.pending: list[Any] = []
        self.nbytes = 0
        self._memo: dict[tuple, int] = {}

    def plan(self, obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            return self._leaf(obj)
        if isinstance(obj, dict):
            return {k: self.plan(v) for k, v in obj.items()}
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
            return type(obj)(*(self.plan(v) for v in obj))
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.plan(v) for v in obj)
        return copy.deepcopy(obj)

    def _leaf(self, t: torch.Tensor) -> _Leaf:
        if t.requires_grad:
            t = t.detach()
        dtensor = None
        if _is_dtensor(t):  # a shard (FSDP2): copy this rank's part, keep its placement
            dtensor, t = t, t.to_local()
        # Tied weights appear under several keys: copy the same view of the same memory once.
        key = (t.data_ptr(), t.device, t.dtype, t.shape, t.stride())
        index = self._memo.get(key)
        if index is None:
            index = self._memo[key] = len(self.sources)
            self.sources.append(t)
            self.keys.append((t.shape, t.dtype, t.is_cuda))
            self.devices.add(t.device)
            self.nbytes += t.numel() * t.element_size()
        return _Leaf(index, dtensor)

    def copy(self, plan: Any, pool: _BufferPool, pin: bool) -> Any:
        buffers = pool.take(self.keys, pin)
        self.pool = _BufferPool(self.keys, buffers, pin)
        if len(self.devices) == 1:
            by_device = {next(iter(self.devices)): (buffers, self.sources)}
        else:
            by_device = {}
            for dst, src in zip(buffers, self.sources):
                dsts, srcs = by_device.setdefault(src.device, ([], []))
                dsts.append(dst)
                srcs.append(src)
        for device, (dsts, srcs) in by_device.items():
            if device.type == "cuda":
                for dst, src in zip(dsts, srcs):  # device to host: one asynchronous copy each
                    dst.copy_(src, non_blocking=pin)
                if pin:  # the step goes on; whoever reads the copies waits for this event
                    event = torch.cuda.Event()
                    event.record(torch.cuda.current_stream(device))
                    self.pending.append(event)
                continue
            torch._foreach_copy_(dsts, srcs)  # CPU and other devices: synchronous
        return self._build(plan)

    def _build(self, plan: Any) -> Any:
        if isinstance(plan, _Leaf):
            out = self.pool.buffers[plan.index]
            if plan.dtensor is not None:
                d = plan.dtensor
                return type(d).from_local(out, d.device_mesh, d.placements, run_check=False,
                                          shape=d.shape, stride=d.stride())
            return out
        if isinstance(plan, dict):
            return {k: self._build(v) for k, v in plan.items()}
        if isinstance(plan, tuple) and hasattr(plan, "_fields"):
            return type(plan)(*(self._build(v) for v in plan))
        if isinstance(plan, (list, tuple)):
            return type(plan)(self._build(v) for v in plan)
        return plan


def _scaler_state(scaler: Any, copier: _HostCopier) -> dict[str, Any]:
    """The plan of ``scaler.state_dict()`` without its two ``.item()`` reads (a host sync each on
    CUDA): a ``torch.amp.GradScaler``'s scale and growth tracker are copied with the other
    tensors and turned into numbers when the state is read (:meth:`_State.wait`). Any other
    scaler: its own ``state_dict()``, deep-copied."""
    scale, tracker = getattr(scaler, "_scale", None), getattr(scaler, "_growth_tracker", None)
    if not isinstance(scaler, torch.amp.GradScaler) or not scaler.is_enabled() \
            or not isinstance(scale, torch.Tensor) or not isinstance(tracker, torch.Tensor):
        return copy.deepcopy(scaler.state_dict())  # note: syncs once
    return {"scale": copier.plan(scale), "growth_factor": scaler._growth_factor,
            "backoff_factor": scaler._backoff_factor, "growth_interval": scaler._growth_interval,
            "_growth_tracker": copier.plan(tracker)}


def _is_dtensor(t: torch.Tensor) -> bool:
    return type(t).__name__ == "DTensor" and hasattr(t, "to_local")


def _fresh_optimizer_state(sd: dict[str, Any], opt: Optimizer) -> dict[str, Any]:
    """A copy of a saved optimizer state with each tensor already on its parameter's device.

    ``Optimizer.load_state_dict`` keeps a tensor it is given when dtype and device match
    (and keeps ``step`` as is), so every tensor handed to it must be new.
    """
    params = [p for group in opt.param_groups for p in group["params"]]
    state: dict[Any, Any] = {}
    for idx, per_param in sd["state"].items():
        device = params[idx].device if isinstance(idx, int) and idx < len(params) else torch.device("cpu")
        state[idx] = {k: _fresh(v, torch.device("cpu") if k == "step" else device)
                      for k, v in per_param.items()}
    groups = copy.deepcopy(sd["param_groups"])
    if len(opt.param_groups) > len(groups):  # groups added since the snapshot: kept, with no state
        live = opt.state_dict()["param_groups"]  # its "params" number on from the snapshot's groups
        groups += copy.deepcopy(live[len(groups):])
    return {"state": state, "param_groups": groups}


def _onto_live_devices(saved: Any, live: Any) -> Any:
    """A fresh copy of ``saved`` with each tensor on the device of the tensor in the same place of
    ``live`` (an object's state now). An object that adopts the tensors it is given (diffusers'
    ``EMAModel`` keeps them as its shadow parameters) would otherwise train on with host copies
    of GPU tensors. Where the structures differ, a tensor keeps its device.

    Example:
        >>> _onto_live_devices({"w": [torch.ones(2)]}, {"w": [torch.zeros(2, device="meta")]})["w"][0].device
        device(type='meta')
    """
    if isinstance(saved, torch.Tensor):
        return _fresh(saved, live.device if isinstance(live, torch.Tensor) else saved.device)
    if isinstance(saved, dict):
        return {k: _onto_live_devices(v, live.get(k) if isinstance(live, dict) else None) for k, v in saved.items()}
    if isinstance(saved, (list, tuple)) and not hasattr(saved, "_fields"):
        same = isinstance(live, (list, tuple)) and len(live) == len(saved)
        return type(saved)(_onto_live_devices(v, live[i] if same else None) for i, v in enumerate(saved))
    return copy.deepcopy(saved)


def _fresh(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        # The load policy moves `step` to the parameter's device itself when fused/capturable.
        return value.to(device=device, copy=True, non_blocking=_is_pinned(value))
    return copy.deepcopy(value)


def _is_pinned(t: torch.Tensor) -> bool:
    """Whether ``t``'s host memory is pinned (a copy from it can be queued without waiting). A
    DTensor (FSDP2's parameters and optimizer state) asks its local shard: torch 2.11's DTensor
    has no sharding rule for ``is_pinned`` and raises."""
    if _is_dtensor(t):
        t = t.to_local()
    try:
        return t.is_pinned()
    except (NotImplementedError, RuntimeError):  # a tensor subclass without it: copy and wait
        return False


def _size(nbytes: int) -> str:
    return f"{nbytes} bytes" if nbytes < 1024 else f"{nbytes} bytes ({format_size(nbytes)})"


def _synchronize_cuda() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _fsync_dir(directory: str) -> None:
    # Make the rename itself durable; directories cannot be opened this way on Windows.
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
