"""The snapshot ring: copies of the training state that a rollback can return to.

Every ``every`` optimizer steps the guard copies the model, optimizers, LR schedulers,
grad scaler and RNG states to host memory (or to disk), keeping the last ``keep``
copies. On a loss spike or a non-finite step it restores the newest copy taken before
the spike began. Deciding *when* to roll back lives elsewhere; this module only holds
and restores state.

A snapshot at step ``k`` is the state after ``k`` optimizer steps, taken between steps
(no gradients are held; restoring clears them).

Example:
    >>> ring = SnapshotRing(SnapshotConfig(every=50, keep=4))
    >>> if ring.due(step):
    ...     ring.take(step, model=model, optimizers=[opt], schedulers=[sched])
    >>> snap = ring.newest_good_before(spike_step)
    >>> extra = ring.restore(snap, model=model, optimizers=[opt], schedulers=[sched])
"""

from __future__ import annotations

import copy
import logging
import os
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.optim import Optimizer

from sentinel.rng import RngState, capture_rng, restore_rng

log = logging.getLogger(__name__)

_FORMAT_VERSION = 1
_FILE_PREFIX = "snapshot-"
_FILE_SUFFIX = ".pt"

# Keys of a snapshot file and of the in-memory state (named once, as torchtitan does).
MODEL = "model"
OPTIMIZERS = "optimizers"
SCHEDULERS = "schedulers"
SCALER = "scaler"
RNG = "rng"
EXTRA = "extra"


class SnapshotTooLarge(ValueError):
    """One snapshot needs more bytes than the ring may hold (``nbytes`` > ``max_bytes``)."""

    def __init__(self, nbytes: int, max_bytes: int, message: str) -> None:
        super().__init__(message)
        self.nbytes, self.max_bytes = nbytes, max_bytes


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
            ``SnapshotRing.load_state_dict`` finds them again. Use one directory per rank.
        pin_memory: copy CUDA tensors into pinned host memory (asynchronous copies, one
            synchronisation). ``None`` pins when the state is on CUDA.

    Example:
        >>> SnapshotConfig(every=100, keep=3, max_bytes=8 << 30)
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


class SnapshotRing:
    """A bounded ring of training-state snapshots with restore.

    Args:
        config: cadence, size bounds and storage, see :class:`SnapshotConfig`.

    Example:
        >>> ring = SnapshotRing(SnapshotConfig(every=2, keep=2))
        >>> snap = ring.take(0, model=model, optimizers=[opt], extra={"epoch": 0})
        >>> ring.restore(snap, model=model, optimizers=[opt])
        {'epoch': 0}
    """

    def __init__(self, config: SnapshotConfig = SnapshotConfig()) -> None:
        if not isinstance(config, SnapshotConfig):
            raise TypeError(f"config={config!r} is not a SnapshotConfig: pass SnapshotConfig(...)")
        self.config = config
        self._snapshots: list[Snapshot] = []  # oldest first
        if config.directory is not None:
            try:
                os.makedirs(config.directory, exist_ok=True)
            except OSError as exc:
                raise ValueError(f"snapshot directory {str(config.directory)!r} cannot be created ({exc}): "
                                 "pass a directory you can write to") from exc

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
            >>> ring.mark_bad_after(140); ring.newest_good_before(150).step
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
            >>> ring.mark_bad_after(spike_start)
        """
        for snap in self._snapshots:
            if snap.step >= step:
                snap.good = False

    def drop_after(self, step: int) -> None:
        """Drop snapshots taken strictly after ``step`` (an abandoned trajectory).

        Example:
            >>> ring.drop_after(restored.step)  # keeps the one restored to
        """
        keep = [s for s in self._snapshots if s.step <= step]
        for snap in self._snapshots:
            if snap.step > step:
                self._release(snap)
        self._snapshots = keep

    def take(self, step: int, *, model: nn.Module, optimizers: Sequence[Optimizer] = (),
             schedulers: Sequence[Any] = (), scaler: Any | None = None,
             extra: dict[str, Any] | None = None) -> Snapshot:
        """Copy the training state to the host (or disk) and add it to the ring.

        CUDA tensors are copied asynchronously into pinned buffers and synchronised once.
        The oldest snapshots are dropped first to stay within ``keep`` and ``max_bytes``.
        A snapshot at a step already held replaces it.

        Args:
            step: optimizer steps completed so far.
            model: the module whose ``state_dict`` is copied.
            optimizers: optimizers whose state is copied.
            schedulers: LR schedulers (anything with ``state_dict``/``load_state_dict``).
            scaler: an AMP ``GradScaler`` or None.
            extra: small picklable state to give back on restore (step counters,
                detector state); deep-copied.

        Returns:
            The new :class:`Snapshot`.

        Raises:
            ValueError: the snapshot alone is larger than ``max_bytes``.

        Example:
            >>> snap = ring.take(100, model=model, optimizers=[opt], extra={"epoch": 2})
        """
        model_sd = model.state_dict()
        opt_sds = [opt.state_dict() for opt in optimizers]
        # Scalers and schedulers hold Python scalars; deep copies detach them from the live objects.
        sched_sds = [copy.deepcopy(s.state_dict()) for s in schedulers]
        scaler_sd = None if scaler is None else copy.deepcopy(scaler.state_dict())  # note: syncs once
        rng = capture_rng()

        live = (model_sd, opt_sds, sched_sds)
        nbytes = _tensor_bytes(live) + rng.torch_cpu.numel() + sum(t.numel() for t in rng.torch_cuda)
        self._make_room(step, nbytes)

        copier = _HostCopier(self._pin(live))
        host_model, host_opts, host_scheds = copier.copy(live)
        copier.wait()
        state = _State(host_model, host_opts, host_scheds, scaler_sd, rng)
        snap = Snapshot(step=int(step), nbytes=nbytes, good=True, extra=copy.deepcopy(dict(extra or {})))
        if self.config.directory is None:
            snap._state = state
        else:
            snap._path = self._write(snap, state)
        self._snapshots.append(snap)
        return snap

    def restore(self, snapshot: Snapshot, *, model: nn.Module, optimizers: Sequence[Optimizer] = (),
                schedulers: Sequence[Any] = (), scaler: Any | None = None) -> dict[str, Any]:
        """Put the live objects back to ``snapshot``, in place, on their own devices.

        Works from fresh copies of the snapshot, so the snapshot stays intact however the
        restored optimizer is stepped afterwards (``Optimizer.load_state_dict`` keeps the
        tensors it is given). Gradients are cleared, as they were at the snapshot, and
        RNG states are restored, so the next step repeats exactly.

        Args:
            snapshot: a snapshot held by this ring.
            model, optimizers, schedulers, scaler: the live objects, the same kinds and
                number as given to :meth:`take`.

        Returns:
            A deep copy of ``snapshot.extra``.

        Raises:
            ValueError: the snapshot was dropped, or the objects do not match it.

        Example:
            >>> extra = ring.restore(snap, model=model, optimizers=[opt], schedulers=[sched])
        """
        state = self._load(snapshot)
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

        # Module.load_state_dict copies into the live parameters (no aliasing).
        model.load_state_dict(state.model)
        for opt, sd in zip(optimizers, state.optimizers):
            opt.load_state_dict(_fresh_optimizer_state(sd, opt))
        for sched, sd in zip(schedulers, state.schedulers):
            sched.load_state_dict(copy.deepcopy(sd))
        if scaler is not None and state.scaler:
            scaler.load_state_dict(copy.deepcopy(state.scaler))
        restore_rng(state.rng)
        # The snapshot was taken between steps: no gradient belongs to it.
        model.zero_grad(set_to_none=True)
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        _synchronize_cuda()  # non-blocking host->device copies must land before the host copies are freed
        return copy.deepcopy(snapshot.extra)

    # ------------------------------------------------------------ persistence

    def state_dict(self) -> dict[str, Any]:
        """The ring's bookkeeping (steps, sizes, good flags), not the tensors.

        In directory mode the snapshot files stay on disk and are found again by
        :meth:`load_state_dict` after a restart.

        Example:
            >>> ckpt["snapshot_ring"] = ring.state_dict()
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
        snapshots whose files are in this ring's directory are loaded back (lazily: the
        tensors are read at restore); a missing or unreadable file is skipped with a
        warning. In-memory snapshots do not survive a restart and are not recreated.

        Example:
            >>> ring.load_state_dict(ckpt["snapshot_ring"])
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

    # --------------------------------------------------------------- private

    def _pin(self, live: Any) -> bool:
        if self.config.pin_memory is not None:
            if self.config.pin_memory and not torch.cuda.is_available():
                raise ValueError("SnapshotConfig.pin_memory=True needs CUDA, which is not available: "
                                 "pass pin_memory=None (auto) or False")
            return self.config.pin_memory
        return any(t.is_cuda for t in _tensors(live))

    def _make_room(self, step: int, nbytes: int) -> None:
        mb = self.config.max_bytes
        if mb is not None and nbytes > mb:
            raise SnapshotTooLarge(
                nbytes, mb,
                f"one snapshot at step {step} needs {_size(nbytes)} but SnapshotConfig.max_bytes={mb} "
                f"({_size(mb)}): raise max_bytes to at least {nbytes} (times keep={self.config.keep} "
                "for a full ring) or pass max_bytes=None")
        # Replace a snapshot at the same step; drop before copying so the peak stays at `keep`.
        for snap in [s for s in self._snapshots if s.step == step]:
            self._snapshots.remove(snap)
            self._release(snap)
        while self._snapshots and (len(self._snapshots) >= self.config.keep
                                   or (mb is not None and self.nbytes + nbytes > mb)):
            self._release(self._snapshots.pop(0))

    def _release(self, snap: Snapshot) -> None:
        # Clear the state so memory is freed even if a caller still holds the Snapshot.
        snap._state = None
        if snap._path is not None:
            try:
                os.remove(snap._path)
            except FileNotFoundError:
                log.warning("snapshot file %s was already gone when dropped", snap._path)
            snap._path = None

    def _file(self, step: int) -> str:
        return os.path.join(str(self.config.directory), f"{_FILE_PREFIX}{step:09d}{_FILE_SUFFIX}")

    def _write(self, snap: Snapshot, state: _State) -> str:
        path = self._file(snap.step)
        tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
        payload = {"version": _FORMAT_VERSION, "step": snap.step, "nbytes": snap.nbytes,
                   EXTRA: snap.extra, MODEL: state.model, OPTIMIZERS: state.optimizers,
                   SCHEDULERS: state.schedulers, SCALER: state.scaler, RNG: state.rng.state_dict()}
        try:
            with open(tmp, "wb") as fh:
                torch.save(payload, fh)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            if os.path.exists(tmp):
                os.remove(tmp)  # never leave a partial file behind
            raise OSError(f"cannot write snapshot {path} ({exc}): free disk space or pass another "
                          "SnapshotConfig.directory") from exc
        os.replace(tmp, path)  # atomic: a crash leaves the old file or the new one, never half of one
        _fsync_dir(os.path.dirname(path))
        return path

    def _read(self, path: str) -> dict[str, Any]:
        # Our own files: they hold numpy RNG state and the caller's `extra`, which
        # weights_only loading refuses. mmap keeps reopening cheap until tensors are used.
        return torch.load(path, map_location="cpu", weights_only=False, mmap=True)

    def _reopen(self, entry: dict[str, Any]) -> Snapshot | None:
        path = os.path.join(str(self.config.directory), os.path.basename(str(entry["file"])))
        try:
            payload = self._read(path)
        except FileNotFoundError:
            log.warning("snapshot file %s is missing: snapshot at step %s skipped", path, entry["step"])
            return None
        except (RuntimeError, EOFError, OSError, pickle.UnpicklingError) as exc:
            log.warning("snapshot file %s is unreadable (%s): snapshot at step %s skipped",
                        path, exc, entry["step"])
            return None
        return Snapshot(step=int(entry["step"]), nbytes=int(entry.get("nbytes", payload.get("nbytes", 0))),
                        extra=payload.get(EXTRA, {}), _path=path)

    def _load(self, snapshot: Snapshot) -> _State:
        if snapshot._state is not None:
            return snapshot._state
        if snapshot._path is None:
            raise ValueError(f"snapshot at step {snapshot.step} was dropped from the ring (keep/max_bytes "
                             "or drop_after): restore one that is held, e.g. ring.newest_good_before(step)")
        p = self._read(snapshot._path)
        return _State(p[MODEL], p[OPTIMIZERS], p[SCHEDULERS], p[SCALER], RngState.from_state_dict(p[RNG]))


class _HostCopier:
    """Copies nested containers of tensors to host memory, sharing tied tensors once."""

    def __init__(self, pin: bool) -> None:
        self.pin = pin
        self.cuda_devices: set[torch.device] = set()
        self._memo: dict[tuple, torch.Tensor] = {}

    def copy(self, obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            return self._tensor(obj)
        if isinstance(obj, dict):
            return {k: self.copy(v) for k, v in obj.items()}
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
            return type(obj)(*(self.copy(v) for v in obj))
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.copy(v) for v in obj)
        return copy.deepcopy(obj)

    def _tensor(self, t: torch.Tensor) -> torch.Tensor:
        t = t.detach()
        if _is_dtensor(t):  # a shard (FSDP2): copy this rank's part, keep its placement
            local = self._tensor(t.to_local())
            return type(t).from_local(local, t.device_mesh, t.placements, run_check=False,
                                      shape=t.shape, stride=t.stride())
        # Tied weights appear under several keys: copy the storage view once.
        key = _storage_key(t)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        if t.device.type == "cpu":
            out = t.clone()
        elif t.is_cuda:
            out = torch.empty(t.shape, dtype=t.dtype, pin_memory=self.pin)
            out.copy_(t, non_blocking=self.pin)
            self.cuda_devices.add(t.device)
        else:
            out = t.to("cpu", copy=True)
        self._memo[key] = out
        return out

    def wait(self) -> None:
        # One synchronisation per device for all the asynchronous copies.
        for device in self.cuda_devices:
            torch.cuda.synchronize(device)


def _tensors(obj: Any):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v)


def _is_dtensor(t: torch.Tensor) -> bool:
    return type(t).__name__ == "DTensor" and hasattr(t, "to_local")


def _storage_key(t: torch.Tensor) -> tuple:
    return (t.device, t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype)


def _tensor_bytes(obj: Any) -> int:
    seen: set[tuple] = set()
    total = 0
    for t in _tensors(obj):
        if _is_dtensor(t):
            t = t.to_local()
        key = _storage_key(t)
        if key not in seen:
            seen.add(key)
            total += t.numel() * t.element_size()
    return total


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
    return {"state": state, "param_groups": copy.deepcopy(sd["param_groups"])}


def _fresh(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        # The load policy moves `step` to the parameter's device itself when fused/capturable.
        return value.to(device=device, copy=True, non_blocking=value.is_pinned())
    return copy.deepcopy(value)


def _size(nbytes: int) -> str:
    return f"{nbytes} bytes" if nbytes < 2**20 else f"{nbytes} bytes ({nbytes / 2**20:.1f} MiB)"


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
