"""Name the module where a NaN/Inf first appeared, by replaying one step with hooks armed.

The training loop checks every step cheaply through the loss and the grad norm. Only when one
of them is non-finite does the engine call :func:`locate_nonfinite`, which replays the same
batch on the same weights with per-module hooks and reports the first module (in execution
order) that produced a non-finite value, in forward or in backward. Nothing is registered
while training is healthy, and every hook is removed before the call returns.

Usage in a training loop::

    rng = capture_rng()                          # at the start of every step
    loss = loss_fn(model(batch["x"]), batch["y"])
    ...                                          # loss or grad norm turns out non-finite
    src = locate_nonfinite(model, lambda: loss_fn(model(batch["x"]), batch["y"]), batch, rng)
    if src is not None:
        writer.write_event(make_event(EventKind.NONFINITE, step, **src.to_dict()))
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import logging
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch
from torch import nn

from sentinel.rng import RngState, capture_rng, restore_rng

logger = logging.getLogger(__name__)

INPUT = "<input>"
LOSS = "<loss>"
ROOT = "<model>"  # the model itself: its qualified name is the empty string


class Phase(str, enum.Enum):
    """Where the first non-finite value showed up."""

    FORWARD = "forward"
    BACKWARD = "backward"
    INPUT = "input"
    LOSS = "loss"


@dataclass(frozen=True)
class NonFiniteSource:
    """The first place a NaN/Inf appeared during a replayed step.

    Attributes:
        module: qualified module name (``"blocks.2.mlp"``); ``"<model>"`` for the model's own
            code; ``"<input>"`` for a non-finite batch; ``"<loss>"`` when every module output
            was finite but the loss was not (or, in backward, when the loss's own backward made
            the first non-finite gradient).
        phase: ``"forward"``, ``"backward"``, ``"input"`` or ``"loss"``.
        tensor_role: which tensor: ``"output"``, ``"output[1]"``, ``"grad_input[0]"``,
            ``"grad_weight:fc.weight"``, ``"weight:fc.weight"`` (a parameter that was already
            non-finite), ``"batch['x']"``, ``"loss"``, ``"grad_output"``.
        nan_count: NaN entries in that tensor.
        inf_count: +/-Inf entries in that tensor.
        numel: entries in that tensor.
        max_abs: the largest |x| over its finite entries (nan when there are none).
        cause: set when the replay ran in reduced precision (``check_precision=True``):
            ``"nan_source"`` when the module makes a NaN/Inf in float32 too (a real NaN source:
            a bad weight, a division by zero, a log of a negative value), ``"fp16_range"`` (or
            ``"bf16_range"``) when the same call in float32 is finite: its values only pass the
            range of the reduced precision (float16 ends at 65504). None when not judged.
        fp32_max_abs: for a ``*_range`` cause, the largest |x| of the module's float32 output.
    """

    module: str
    phase: str
    tensor_role: str
    nan_count: int
    inf_count: int
    numel: int
    max_abs: float
    cause: str | None = None
    fp32_max_abs: float | None = None

    def __post_init__(self) -> None:
        allowed = [p.value for p in Phase]
        if self.phase not in allowed:
            raise ValueError(f"phase {self.phase!r} is not one of {allowed}: pass one of those")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-safe fields; ``max_abs`` is None when no entry was finite (JSON has no nan).

        Example:
            >>> NonFiniteSource("fc", "forward", "output", 1, 0, 4, 2.0).to_dict()["module"]
            'fc'
        """
        out = dataclasses.asdict(self)
        if math.isnan(self.max_abs):
            out["max_abs"] = None
        for key in ("cause", "fp32_max_abs"):  # only where a reduced-precision replay judged them
            if out[key] is None:
                del out[key]
        return out


def _checkable(t: torch.Tensor) -> bool:
    """Only dense floating/complex tensors can hold NaN/Inf."""
    return (t.is_floating_point() or t.is_complex()) and t.layout == torch.strided and not t.is_meta


def tensor_stats(t: torch.Tensor) -> tuple[int, int, int, float]:
    """Count NaN and Inf entries and find the largest finite magnitude, in one device read.

    Args:
        t: any tensor (integer and bool tensors are always finite).

    Returns:
        ``(nan_count, inf_count, numel, max_abs)``; ``max_abs`` is over the finite entries and
        is nan when there are none.

    Example:
        >>> tensor_stats(torch.tensor([1.0, float("nan"), -3.0, float("inf")]))
        (1, 1, 4, 3.0)
    """
    t = t.detach()
    numel = t.numel()
    if numel == 0:
        return 0, 0, 0, math.nan
    if not (t.is_floating_point() or t.is_complex()):
        return 0, 0, numel, float(t.to(torch.int64).abs().max())
    finite = torch.isfinite(t)
    magnitude = t.abs().masked_fill(~finite, 0)
    packed = torch.stack([
        torch.isnan(t).sum().double(),
        torch.isinf(t).sum().double(),
        finite.any().double(),
        magnitude.max().double(),
    ])
    nan, inf, any_finite, max_abs = packed.tolist()  # the one device->host read
    return int(nan), int(inf), numel, float(max_abs) if any_finite else math.nan


def _iter_tensors(obj: Any, role: str) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(role, tensor)`` for every tensor in nested dict/list/tuple/dataclass values."""
    if isinstance(obj, torch.Tensor):
        yield role, obj
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            yield from _iter_tensors(value, f"{role}[{key!r}]")
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            yield from _iter_tensors(value, f"{role}[{i}]")
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from _iter_tensors(getattr(obj, f.name), f"{role}.{f.name}")


def _first_nonfinite(tensors: list[tuple[str, torch.Tensor]]) -> tuple[str, torch.Tensor] | None:
    """The first non-finite tensor of ``tensors``, with one device->host read for all of them."""
    tensors = [(role, t) for role, t in tensors if _checkable(t)]
    if not tensors:
        return None
    device = tensors[0][1].device
    flags = torch.stack([torch.isfinite(t).all().to(device) for _, t in tensors]).tolist()
    for (role, t), ok in zip(tensors, flags):
        if not ok:
            return role, t
    return None


def find_nonfinite_input(batch: Any) -> tuple[str, torch.Tensor] | None:
    """Find the first floating tensor with a NaN/Inf in a (nested) batch.

    Args:
        batch: a tensor, or dicts/lists/tuples/dataclasses of them, nested to any depth.

    Returns:
        ``(role, tensor)`` with a role like ``"batch['x']"`` or ``"batch[0]"``, or None when
        every floating tensor is finite.

    Example:
        >>> find_nonfinite_input({"x": torch.tensor([1.0, float("inf")]), "y": torch.ones(2)})[0]
        "batch['x']"
    """
    return _first_nonfinite(list(_iter_tensors(batch, "batch")))


def _source(module: str, phase: Phase, role: str, t: torch.Tensor) -> NonFiniteSource:
    return NonFiniteSource(module, phase.value, role, *tensor_stats(t))


def _base(t: torch.Tensor) -> torch.Tensor:
    """The tensor whose autograd node survives an in-place op on ``t`` or any view of it."""
    return t._base if t._base is not None and t._base.requires_grad else t


def _map_tensors(obj: Any, role: str, fn: Callable[[str, torch.Tensor], torch.Tensor]) -> Any:
    """Rebuild plain dict/list/tuple structures with ``fn(role, tensor)`` applied to each tensor.

    Other containers are passed through untouched (their tensors are simply not watched).
    """
    if isinstance(obj, torch.Tensor):
        return fn(role, obj)
    if type(obj) is dict:
        return {k: _map_tensors(v, f"{role}[{k!r}]", fn) for k, v in obj.items()}
    if type(obj) in (list, tuple):
        return type(obj)(_map_tensors(v, f"{role}[{i}]", fn) for i, v in enumerate(obj))
    return obj


@dataclass
class _Call:
    """One call of one module during the replay (a module called twice has two)."""

    name: str
    inputs_finite: bool = True
    # finiteness of the gradient at each output, seen by the hook on the output itself (False)
    # or, when an in-place op on a view removed that tensor's node, on its base (True)
    grad_outputs: dict[tuple[int, bool], bool] = dataclasses.field(default_factory=dict)
    output_slots: list[int] = dataclasses.field(default_factory=list)
    # inputs given a view: (role, tensor, version before the call); a changed version after the
    # call means the module modified that input in place
    watched: list[tuple[str, torch.Tensor, int]] = dataclasses.field(default_factory=list)
    inplace_roles: set[str] = dataclasses.field(default_factory=set)
    first_bad_grad: tuple[int, NonFiniteSource] | None = None
    # what the module was called with, kept to re-run it in float32 (check_precision only)
    inputs: tuple[tuple, dict] | None = None

    @property
    def grad_output_finite(self) -> bool:
        seen = self.grad_outputs
        return all(seen.get((i, False), seen.get((i, True), True)) for i in self.output_slots)


class _Replay:
    """Hook state of one replay: what forward found, what backward saw, handles to remove."""

    def __init__(self, model: nn.Module, check_precision: bool = False) -> None:
        self.model = model
        self.check_precision = check_precision
        self.rerunning = False  # a float32 re-run of one module: the hooks stand aside
        self.names = {id(m): (n or ROOT) for n, m in model.named_modules()}
        self.handles: list[torch.utils.hooks.RemovableHandle] = []
        self.calls: list[_Call] = []
        self.stack: list[_Call] = []  # calls whose forward is running; hooks nest like calls
        self.forward_done = False
        self.forward_source: NonFiniteSource | None = None
        self.first_bad_input: NonFiniteSource | None = None
        self.seq = 0  # backward event counter: gives backward execution order
        self.param_bad: dict[str, tuple[int, NonFiniteSource]] = {}
        self.first_bad_any: tuple[int, NonFiniteSource] | None = None

    # ---- arming ---------------------------------------------------------------------------
    def arm(self) -> None:
        for module in self.model.modules():
            if isinstance(module, torch.jit.ScriptModule):
                continue  # scripted modules refuse hooks added after scripting
            self.handles.append(module.register_forward_pre_hook(self._pre_hook, with_kwargs=True))
            self.handles.append(module.register_forward_hook(self._post_hook, with_kwargs=True))
        for qualname, param in self.model.named_parameters():
            if param.requires_grad:
                owner = qualname.rpartition(".")[0] or ROOT
                hook = partial(self._on_param_grad, owner, f"grad_weight:{qualname}")
                self.handles.append(param.register_hook(hook))

    def disarm(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()

    # ---- forward --------------------------------------------------------------------------
    def _pre_hook(self, module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        if self.forward_done or self.rerunning:
            return None  # e.g. checkpointed segments recomputed during backward
        call = _Call(self.names.get(id(module), type(module).__name__))
        self.calls.append(call)
        self.stack.append(call)
        if self.forward_source is None:
            # Checked before forward runs: an in-place op inside the module would hide it.
            inputs = list(_iter_tensors(args, "input")) + list(_iter_tensors(kwargs, "input"))
            bad = _first_nonfinite(inputs)
            call.inputs_finite = bad is None
            if bad is not None and self.first_bad_input is None:
                self.first_bad_input = _source(INPUT, Phase.INPUT, *bad)
            if self.check_precision:
                call.inputs = (args, kwargs)
        if self.forward_source is not None or not torch.is_grad_enabled():
            return None  # backward will not be replayed, or there is no graph to watch
        memo: dict[int, torch.Tensor] = {}
        new_args = _map_tensors(args, "grad_input", partial(self._watch_input, call, memo))
        new_kwargs = _map_tensors(kwargs, "grad_input", partial(self._watch_input, call, memo))
        return (new_args, new_kwargs) if memo else None

    def _watch_input(self, call: _Call, memo: dict[int, torch.Tensor], role: str,
                     t: torch.Tensor) -> torch.Tensor:
        """Give the module an identity view of ``t`` whose gradient is this call's alone.

        The hook on the original tensor's base is a fallback for a module that modifies its
        input in place, which drops the view's node from the graph (and the node of every view
        of the same base): registered before the in-place op, a hook on the base still sees the
        gradient of the value the module received, summed over all its consumers.
        """
        if not (t.requires_grad and _checkable(t)):
            return t
        if id(t) in memo:  # keep `query is key` true (MultiheadAttention picks its path by it)
            return memo[id(t)]
        view = t.view_as(t)
        self.handles.append(view.register_hook(partial(self._on_grad_input, call, role, False)))
        self.handles.append(_base(t).register_hook(partial(self._on_grad_input, call, role, True)))
        call.watched.append((role, t, t._version))
        memo[id(t)] = view
        return view

    def _post_hook(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        if self.forward_done or self.rerunning:
            return
        call = self.stack.pop()
        call.inplace_roles = {role for role, t, version in call.watched if t._version != version}
        call.watched.clear()
        outputs = list(_iter_tensors(output, "output"))
        if self.forward_source is None and call.inputs_finite:
            bad = _first_nonfinite(outputs)
            if bad is not None:
                self.forward_source = self._forward_source(module, call.name, bad)
                if self.check_precision and call.inputs is not None and not call.inplace_roles:
                    self.forward_source = self._judge_precision(module, call, bad[1])
        call.inputs = None
        if self.forward_source is None and torch.is_grad_enabled():
            for slot, (_, t) in enumerate(outputs):
                if t.requires_grad:
                    call.output_slots.append(slot)
                    hook = partial(self._on_grad_output, call, slot, False)
                    self.handles.append(t.register_hook(hook))
                    if t._base is not None and t._base.requires_grad:
                        # Linear on 3-D input returns a view: an inplace ReLU after it drops
                        # the view's node, and only a hook on the base still fires.
                        hook = partial(self._on_grad_output, call, slot, True)
                        self.handles.append(t._base.register_hook(hook))

    def _forward_source(self, module: nn.Module, name: str,
                        bad: tuple[str, torch.Tensor]) -> NonFiniteSource:
        """The module made a non-finite output from finite inputs; name a bad weight if any."""
        prefix = "" if name == ROOT else f"{name}."
        own = [(f"weight:{prefix}{n}", p) for n, p in module.named_parameters(recurse=False)]
        bad_param = _first_nonfinite(own)
        return _source(name, Phase.FORWARD, *(bad_param or bad))

    def _judge_precision(self, module: nn.Module, call: _Call, bad: torch.Tensor) -> NonFiniteSource:
        """Call ``module`` again on the same inputs in float32: a real NaN source, or a value
        beyond the reduced precision's range?"""
        source = self.forward_source
        if bad.dtype not in _REDUCED:  # made in float32 (autocast runs some ops there): real
            return dataclasses.replace(source, cause="nan_source")
        args, kwargs = call.inputs
        rng = capture_rng()
        self.rerunning = True
        try:
            outputs = _run_in_float32(module, args, kwargs)
        except Exception as err:  # noqa: BLE001 - a module that refuses float32 inputs: not judged
            logger.warning("float32 re-run of %s failed (%s): fp16 range or NaN source not judged",
                           call.name, f"{type(err).__name__}: {err}".splitlines()[0][:200])
            return source
        finally:
            self.rerunning = False
            restore_rng(rng)
        if _first_nonfinite(outputs) is not None:
            return dataclasses.replace(source, cause="nan_source")
        top = max((tensor_stats(t)[3] for _, t in outputs if _checkable(t) and t.numel()), default=math.nan)
        return dataclasses.replace(source, cause=_REDUCED[bad.dtype] + "_range", fp32_max_abs=top)

    # ---- backward -------------------------------------------------------------------------
    def _next_bad(self, grad: torch.Tensor) -> int | None:
        """Number this backward event; return its number when ``grad`` is non-finite."""
        self.seq += 1
        if not _checkable(grad) or bool(torch.isfinite(grad).all()):  # one read per event
            return None
        return self.seq

    def _note_any(self, seq: int, source: NonFiniteSource) -> None:
        if self.first_bad_any is None:
            self.first_bad_any = (seq, source)

    def _on_grad_output(self, call: _Call, slot: int, via_base: bool, grad: torch.Tensor) -> None:
        seq = self._next_bad(grad)
        key = (slot, via_base)
        call.grad_outputs[key] = call.grad_outputs.get(key, True) and seq is None
        if seq is not None:
            self._note_any(seq, _source(LOSS, Phase.BACKWARD, "grad_output", grad))

    def _on_grad_input(self, call: _Call, role: str, fallback: bool, grad: torch.Tensor) -> None:
        if fallback != (role in call.inplace_roles):
            return  # the view's hook is exact; the fallback only counts after an in-place op
        seq = self._next_bad(grad)
        if seq is not None and call.first_bad_grad is None:
            call.first_bad_grad = (seq, _source(call.name, Phase.BACKWARD, role, grad))

    def _on_param_grad(self, owner: str, role: str, grad: torch.Tensor) -> None:
        seq = self._next_bad(grad)
        if seq is not None and owner not in self.param_bad:
            self.param_bad[owner] = (seq, _source(owner, Phase.BACKWARD, role, grad))

    def backward_source(self) -> NonFiniteSource | None:
        """First (in backward order) module whose grad_output was finite but whose own
        gradients (to its inputs or its parameters) were not."""
        output_ok: dict[str, bool] = {}
        for call in self.calls:
            output_ok[call.name] = output_ok.get(call.name, True) and call.grad_output_finite
        candidates = [c.first_bad_grad for c in self.calls
                      if c.grad_output_finite and c.first_bad_grad is not None]
        for owner, (seq, source) in self.param_bad.items():
            user = _nearest_called(owner, output_ok)  # MHA's out_proj is used, never called
            if output_ok.get(user, True):
                candidates.append((seq, dataclasses.replace(source, module=user)))
        if candidates:
            return min(candidates, key=lambda hit: hit[0])[1]
        if self.first_bad_any is not None:
            return self.first_bad_any[1]  # every module already received a non-finite grad
        return None


_REDUCED = {torch.float16: "fp16", torch.bfloat16: "bf16"}


def _run_in_float32(module: nn.Module, args: tuple, kwargs: dict) -> list[tuple[str, torch.Tensor]]:
    """The outputs of ``module(*args, **kwargs)`` computed in float32, without autocast and
    without autograd. A module whose own weights are in reduced precision runs as a float32 copy."""
    def up(role: str, t: torch.Tensor) -> torch.Tensor:
        return t.detach().float() if t.dtype in _REDUCED else t.detach()

    args32, kwargs32 = _map_tensors(args, "input", up), _map_tensors(kwargs, "input", up)
    tensors = list(module.parameters()) + list(module.buffers())
    target = copy.deepcopy(module).float() if any(t.dtype in _REDUCED for t in tensors) else module
    device = next((t.device.type for _, t in _iter_tensors((args, kwargs), "input")), "cpu")
    with torch.no_grad(), torch.autocast(device_type=device, enabled=False):
        return list(_iter_tensors(target(*args32, **kwargs32), "output"))


def _nearest_called(name: str, called: Mapping[str, Any]) -> str:
    """``name`` or its closest ancestor that ran a forward during the replay."""
    while name not in called and name != ROOT:
        name = name.rpartition(".")[0] or ROOT
    return name


@dataclass
class SavedModelState:
    """What a replay may disturb: parameter grads, buffers (BatchNorm stats), train/eval modes.

    Shared by every replay (:func:`locate_nonfinite`, :func:`sentinel.probes.reference_loss.reference_loss`).

    Example:
        >>> saved = SavedModelState.capture(model)  # doctest: +SKIP
        >>> ...; saved.restore()  # doctest: +SKIP
    """

    grads: list[tuple[nn.Parameter, torch.Tensor | None]]
    buffers: list[tuple[nn.Module, str, torch.Tensor, torch.Tensor]]
    modes: list[tuple[nn.Module, bool]]

    @classmethod
    def capture(cls, model: nn.Module) -> "SavedModelState":
        grads = [(p, p.grad) for p in model.parameters()]
        buffers = [(m, n, b, b.detach().clone()) for m in model.modules()
                   for n, b in m.named_buffers(recurse=False)]
        return cls(grads, buffers, [(m, m.training) for m in model.modules()])

    def restore(self) -> None:
        for param, grad in self.grads:
            param.grad = grad  # the very tensors from before: the replay wrote fresh ones
        with torch.no_grad():
            for module, name, buffer, value in self.buffers:
                setattr(module, name, buffer)
                buffer.copy_(value)
        for module, training in self.modes:
            module.training = training


def as_loss(out: Any) -> torch.Tensor:
    """The loss tensor of what a step function returned (a tensor, or a dict with ``"loss"``).

    Example:
        >>> as_loss({"loss": torch.tensor(2.0)})
        tensor(2.)
    """
    loss = out["loss"] if isinstance(out, Mapping) and "loss" in out else out
    if not isinstance(loss, torch.Tensor):
        raise TypeError(f"run_forward returned {type(out).__name__}: return the loss tensor "
                        "or a dict with a 'loss' tensor")
    return loss


def locate_nonfinite(model: nn.Module, run_forward: Callable[[], Any], batch: Any = None,
                     rng_state: RngState | None = None, *,
                     check_precision: bool = False) -> NonFiniteSource | None:
    """Replay one step with hooks armed and name where its first NaN/Inf came from.

    Order of checks: a non-finite floating tensor in ``batch`` (``"<input>"``); then the first
    module, in forward execution order, whose output is non-finite while its inputs were finite
    (forward hooks fire children before parents, so the innermost module that introduced the
    value wins over its containers; a module that only passes a NaN on is never the source);
    then a non-finite loss from finite module outputs (``"<loss>"``); then, when forward is
    clean, backward: the first module, in backward execution order, whose gradient at its
    output was finite but whose gradient to an input or to one of its own parameters was not.

    The model is left exactly as it was: parameter ``.grad`` (the same tensors), buffers,
    train/eval modes and all RNG states are restored, and every hook is removed, also when
    ``run_forward`` raises (the exception propagates).

    Args:
        model: the module to hook (for a ``torch.compile`` model pass the original module;
            under DDP replay inside ``no_sync()`` so the replay's backward does not all-reduce).
        run_forward: computes and returns the loss (or a dict with ``"loss"``) on the batch,
            without calling backward. Wrap it in your autocast context; return the scaled
            loss to replay AMP loss scaling in backward.
        batch: the step's batch, checked first for non-finite values; optional.
        rng_state: the RNG state captured at the start of the original step
            (:func:`sentinel.rng.capture_rng`), so dropout draws the same masks.
        check_precision: for a replay under fp16/bf16 autocast (or of a half-precision model):
            when a module's reduced-precision output is the forward source, call that module
            again on the same inputs in float32 and set ``cause`` (a real NaN source, or the
            range of the reduced precision). Keeps a reference to each call's inputs until it
            returns.

    Returns:
        The source, or None when the replay is finite: the fault did not reproduce on these
        weights and this batch (a transient fault, e.g. hardware or a race, not the data).

    Example:
        >>> model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 1))
        >>> x = torch.ones(2, 3)
        >>> rng = capture_rng()  # at the start of the step
        >>> _ = model[2].bias.data.fill_(float("inf"))  # an earlier update overflowed
        >>> src = locate_nonfinite(model, lambda: model(x).mean(), {"x": x}, rng)
        >>> src.module, src.phase, src.tensor_role, src.inf_count
        ('2', 'forward', 'weight:2.bias', 1)
    """
    if batch is not None:
        found = find_nonfinite_input(batch)
        if found is not None:
            return _source(INPUT, Phase.INPUT, *found)
    saved = SavedModelState.capture(model)
    rng_before = capture_rng()
    replay = _Replay(model, check_precision=check_precision)
    try:
        if rng_state is not None:
            restore_rng(rng_state)
        for param, _ in saved.grads:
            param.grad = None  # backward then writes fresh tensors, never into the caller's
        replay.arm()
        return _replay(replay, run_forward)
    finally:
        replay.disarm()
        saved.restore()
        restore_rng(rng_before)


def _replay(replay: _Replay, run_forward: Callable[[], Any]) -> NonFiniteSource | None:
    loss = as_loss(run_forward())
    replay.forward_done = True
    if replay.forward_source is not None:
        return replay.forward_source
    if replay.first_bad_input is not None:
        return replay.first_bad_input  # a non-finite tensor reached the model from outside
    nan, inf, numel, max_abs = tensor_stats(loss)
    if nan or inf:
        return NonFiniteSource(LOSS, Phase.LOSS.value, "loss", nan, inf, numel, max_abs)
    if not loss.requires_grad:
        logger.debug("replayed loss is finite and has no graph: nothing left to check")
        return None
    if loss.numel() != 1:
        raise ValueError(f"run_forward returned a loss of shape {tuple(loss.shape)}: "
                         "reduce it to a scalar before returning it")
    # Backward mechanism: tensor hooks, not register_full_backward_hook. Full backward hooks
    # wrap inputs and outputs in a custom Function, so any later in-place op on them (an
    # inplace ReLU, a residual `y += x`) raises (measured on torch 2.13); they also miss
    # parameter gradients. Here a hook on each module output sees its grad_output (registered
    # before any in-place op, it gets the gradient of the value the module returned; on the
    # base when the output is a view), a hook on an identity view of each input sees exactly
    # this call's grad_input, and hooks on parameters see their grads.
    loss.backward()
    source = replay.backward_source()
    if source is None:
        logger.debug("replay finite in forward and backward: the fault did not reproduce")
    return source


def locate_overflow(model: nn.Module, run_forward: Callable[[], Any], scale: float, batch: Any = None,
                    rng_state: RngState | None = None) -> NonFiniteSource | None:
    """Replay a step that a GradScaler found non-finite and say whether the first NaN/Inf is a
    real NaN source or the range of float16.

    A GradScaler takes every NaN/Inf gradient for an overflow: it skips the step and halves the
    scale. A module that makes NaN whatever the precision (a NaN weight, a BatchNorm over a
    degenerate batch) then looks like a run whose activations are too large for float16. The
    replay multiplies the loss by ``scale``, as the scaler did, and names the first non-finite
    module as :func:`locate_nonfinite` does; its ``cause`` then says which it is:

    - a forward source is called again on the same inputs in float32 (``check_precision``):
      ``"nan_source"`` when it is non-finite there too, else ``"fp16_range"``;
    - a backward source is replayed again without the scale: ``"fp16_range"`` when the gradients
      are then finite (the scale pushed them past float16, which the scaler's halving cures),
      else ``"nan_source"`` (no scale can make them finite).

    Args:
        model, batch, rng_state: as for :func:`locate_nonfinite`.
        run_forward: computes the unscaled loss under the step's autocast context.
        scale: the loss scale of the step (``scaler.get_scale()`` before ``scaler.update()``).

    Returns:
        The source with its ``cause``, or None when the replay at this scale is finite.

    Example:
        >>> src = locate_overflow(model, run_forward, scaler.get_scale(), batch, rng)  # doctest: +SKIP
        >>> src.module, src.cause  # doctest: +SKIP
        ('bn', 'nan_source')
    """
    source = locate_nonfinite(model, lambda: as_loss(run_forward()) * scale, batch, rng_state,
                              check_precision=True)
    if source is None or source.phase != Phase.BACKWARD.value:
        return source
    unscaled = locate_nonfinite(model, run_forward, batch, rng_state)
    return dataclasses.replace(source, cause="fp16_range" if unscaled is None else "nan_source")
