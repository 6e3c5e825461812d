"""Gradient-norm probe: total L2 norm and per-module L2 norms, fused, without a host sync.

Read the gradients after backward and after AMP unscaling, before clipping and before the
optimizer step (Lightning: ``on_before_optimizer_step``). The result is a dict of 0-d tensors
keyed ``grad_norm/total`` and ``grad_norm/<group>`` (:meth:`GradNormProbe.compute`), or, on the
step path, one ``(P,)`` tensor of per-parameter norms (:meth:`GradNormProbe.tensor_norms`)
from which the total is taken every step and the per-group norms only on the steps that record
them (:meth:`GradNormProbe.norms`); the caller moves all of a step's metrics to the host in one
transfer.

Parameter groups follow module paths. With ``depth=1`` a transformer
``embed / blocks / head`` gives the groups ``embed``, ``blocks`` and ``head``; with
``depth=2`` it gives ``embed``, ``blocks.0``, ``blocks.1``, ..., ``head``. Parameters that sit
directly on the root module (a bare ``nn.Parameter`` such as a positional embedding) form the
group ``root``. ``depth=0`` gives the total only.

Example:
    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 1))
    >>> model(torch.ones(2, 3)).sum().backward()
    >>> probe = GradNormProbe(model)
    >>> probe.group_names
    ['0', '1']
    >>> sorted(probe.compute())
    ['grad_norm/0', 'grad_norm/1', 'grad_norm/total']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import torch

from sentinel.devices import to_device
from sentinel.metrics import GRAD_NORM, GRAD_NORM_TOTAL, metric_key

ROOT_GROUP = "root"
OTHER_GROUP = "other"
# Many small CPU tensors are normed per shape (see GradNormProbe.__init__).
_STACK_MIN_TENSORS = 16
_STACK_MEAN_NUMEL = 4096


def grad_norms(
    grads: Sequence[torch.Tensor | None],
    group_index: torch.Tensor | Sequence[int],
    num_groups: int,
    *,
    squared: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """L2 norm of all gradients and of each group of gradients, with no host sync.

    Gradients are normed with one ``torch._foreach_norm`` per (device, dtype), in float32
    (float64 if any gradient is float64), the per-tensor norms stacked once and their
    squares summed per group with ``index_add_``. ``None`` entries contribute 0. Sparse
    gradients are coalesced and their values normed, which equals the norm of the dense
    gradient (on CUDA, coalescing costs a sync; dense gradients never do). As in
    ``torch.nn.utils.get_total_norm``, float32 norms above ~1.8e19 read as ``inf``.

    Args:
        grads: one gradient (or ``None``) per parameter.
        group_index: for each entry of ``grads``, the group it belongs to, in
            ``[0, num_groups)``. Pass a ``torch.long`` tensor on the gradients' device to
            avoid a host-to-device copy per call; a sequence of ints is copied each call.
        num_groups: number of groups; 0 computes the total only.
        squared: return squared norms (sums of squares), e.g. to ``all_reduce`` across ranks
            before the square root when parameters are sharded.

    Returns:
        ``(total, per_group)``: a 0-d tensor and a ``(num_groups,)`` tensor of float32
        norms, or of sums of squares when ``squared`` (float64 if any gradient is float64).

    Example:
        >>> g = [torch.tensor([3.0]), torch.tensor([4.0]), None]
        >>> total, per_group = grad_norms(g, [0, 1, 1], 2)
        >>> float(total), per_group.tolist()
        (5.0, [3.0, 4.0])
    """
    if num_groups < 0:
        raise ValueError(f"num_groups={num_groups} is negative: pass 0 or more")
    if len(group_index) != len(grads):
        raise ValueError(
            f"group_index has {len(group_index)} entries but there are {len(grads)} grads: "
            "pass one group index per gradient"
        )
    if not isinstance(group_index, torch.Tensor):
        bad = [i for i in group_index if not 0 <= i < num_groups]
        if bad and num_groups > 0:
            raise ValueError(
                f"group_index holds {bad[0]!r}, outside [0, {num_groups}): "
                "every index must name one of the num_groups groups"
            )

    if isinstance(group_index, torch.Tensor):
        out_device = group_index.device
    else:
        out_device = next((g.device for g in grads if g is not None), torch.device("cpu"))
    sq = _per_tensor_norms(grads, out_device).square()  # (P,)

    total_sq = sq.sum()
    per_group_sq = torch.zeros(num_groups, dtype=sq.dtype, device=out_device)
    if num_groups > 0 and len(grads) > 0:
        if not isinstance(group_index, torch.Tensor):
            group_index = torch.as_tensor(list(group_index), dtype=torch.long, device=out_device)
        per_group_sq.index_add_(0, group_index, sq)
    if squared:
        return total_sq, per_group_sq
    return total_sq.sqrt().float(), per_group_sq.sqrt().float()


def _per_tensor_norms(grads: Sequence[torch.Tensor | None], out_device: torch.device) -> torch.Tensor:
    """``(P,)`` L2 norm of each gradient (0 for ``None``) on ``out_device``, in float32 (float64
    if any gradient is float64): one ``torch._foreach_norm`` per (device, dtype)."""
    # Bucket by (device, dtype): _foreach_norm needs one of each per call.
    buckets: dict[tuple[torch.device, torch.dtype], tuple[list[torch.Tensor], list[int]]] = {}
    for pos, g in enumerate(grads):
        if g is None:
            continue
        if g.is_sparse:
            g = g.coalesce().values()
        if g.is_complex():  # |z|^2 = re^2 + im^2: the same norm, in a real dtype
            g = torch.view_as_real(g)
        if _is_dtensor(g):  # a sharded gradient (FSDP2): this rank's shard; reduce the squares
            g = g.to_local()
        tensors, positions = buckets.setdefault((g.device, g.dtype), ([], []))
        tensors.append(g)
        positions.append(pos)
    norm_dtype = torch.float64 if any(dt == torch.float64 for _, dt in buckets) else torch.float32

    # One 0-d norm per gradient, in parameter order, so a group index applies unpermuted.
    norms: list[torch.Tensor | None] = [None] * len(grads)
    for (device, _), (tensors, positions) in buckets.items():
        per_tensor = torch._foreach_norm(tensors, 2, dtype=norm_dtype)
        if device != out_device:
            per_tensor = [n.to(out_device, non_blocking=True) for n in per_tensor]
        for pos, n in zip(positions, per_tensor):
            norms[pos] = n
    zero = torch.zeros((), dtype=norm_dtype, device=out_device)
    return torch.stack([zero if n is None else n for n in norms]) if norms else zero.reshape(0)


def _is_dtensor(t: torch.Tensor) -> bool:
    return type(t).__name__ == "DTensor" and hasattr(t, "to_local")


def _module_path(param_name: str) -> str:
    return param_name.rpartition(".")[0]


def _layer_group(module_path: str) -> str:
    """``blocks.3.attn.c_attn`` -> ``blocks.3.attn``: a repeated layer and its direct part.

    The first numeric component marks a stack of layers (``ModuleList``/``Sequential``); one
    component after it names the part of the layer (attention, MLP, norm), where instabilities
    are told apart. Paths without a layer index keep their whole module path (``embed``, ``head``).
    """
    parts = module_path.split(".")
    for i, part in enumerate(parts):
        if part.isdigit():
            return ".".join(parts[: i + 2])
    return module_path or ROOT_GROUP


class GradNormProbe:
    """Total and per-module gradient L2 norms of a model, as 0-d tensors.

    Grouping is fixed at construction (parameters and module structure are static); the
    gradients are re-read on every call. Build the probe after anything that replaces the
    model's parameter objects (e.g. FSDP wrapping). Moving the model with ``.to()`` is
    fine: the group index follows the parameters' device. Tied (shared) parameters are
    counted once, under their first name, like ``model.parameters()``.

    Metric keys:

    =========================  ===================================================
    ``grad_norm/total``        L2 norm of all gradients (pre-clip, after unscale)
    ``grad_norm/<group>``      L2 norm of the gradients of one group (lower case)
    =========================  ===================================================

    Groups: with ``include=None``, module paths cut to ``depth`` components (parameters
    directly on the root module go to ``root``). With ``include``, one group per listed
    module (its parameters and those of its submodules), in the listed order, then ``other``
    for parameters under none of them, if there are any. The groups partition the
    parameters, so ``sqrt(sum(group**2)) == total``.

    Args:
        model: the module whose parameters' gradients are measured.
        depth: how many module-path components name a group; 0 for the total only; None for
            one group per layer part (``blocks.3.attn``, ``blocks.3.mlp``, ``embed``, ``head``).
        include: explicit module names to group by; they must exist and must not contain
            one another. Overrides ``depth``.
        params: the parameters to measure, where not all of the model's (those the optimizers
            update: a parameter no optimizer steps keeps its gradients, which add up step after
            step where nothing zeroes them). None: every parameter.

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 1))
        >>> model(torch.ones(2, 3)).sum().backward()
        >>> probe = GradNormProbe(model, include=["1"])
        >>> probe.group_names
        ['1', 'other']
        >>> norms = probe.compute()  # 0-d tensors; read them with one batched .tolist()
    """

    def __init__(
        self, model: torch.nn.Module, depth: int | None = 1, include: Sequence[str] | None = None,
        params: Iterable[torch.Tensor] | None = None,
    ) -> None:
        if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
            raise ValueError(
                f"depth={depth!r} is invalid: pass an int >= 0 (1 = direct children) or None (per layer)"
            )
        named = list(model.named_parameters())
        if not named:
            raise ValueError(f"model {type(model).__name__} has no parameters: nothing to measure")
        if params is not None:  # the ones an optimizer updates (others' gradients may pile up)
            wanted = {id(p) for p in params}
            named = [(n, p) for n, p in named if id(p) in wanted] or named  # none of the model's: all

        if include is not None:
            group_of = self._groups_from_include(model, [n for n, _ in named], include)
        elif depth == 0:
            group_of = [None] * len(named)
        elif depth is None:
            group_of = [_layer_group(_module_path(n)) for n, _ in named]
        else:
            group_of = [
                ".".join(_module_path(n).split(".")[:depth]) or ROOT_GROUP for n, _ in named
            ]

        names: list[str] = [] if include is None else list(include)
        for g in group_of:
            if g is not None and g not in names:
                names.append(g)
        self.group_names: list[str] = names
        self._params: list[torch.nn.Parameter] = [p for _, p in named]
        index = {name: i for i, name in enumerate(names)}
        self._group_index: list[int] = [0 if g is None else index[g] for g in group_of]
        self._index_on: dict[torch.device, torch.Tensor] = {}
        # Whether parameters are sharded across ranks (FSDP2 DTensors): norms need a reduction.
        # Parameters are fixed at construction (build the probe after wrapping), so decide once.
        self.sharded = any(_is_dtensor(p) for p in self._params)
        # The common case, decided once: every parameter dense, of one dtype and on one device.
        # Then a step's norms are one _foreach_norm over the grads as they are, with no
        # per-parameter Python work beyond reading .grad.
        sparse = any(getattr(m, "sparse", False) for m in model.modules()
                     if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)))
        complex_ = any(p.is_complex() for p in self._params)  # normed as pairs of reals, below
        self._uniform = (not sparse and not self.sharded and not complex_
                         and len({(p.device, p.dtype) for p in self._params}) == 1)
        # On CPU _foreach_norm is one kernel call per tensor (~2.5 us each), and stacking the
        # 0-d norms it returns one more small op each. Many small tensors of a few shapes are
        # normed faster per shape: stack the gradients of one shape, one norm over all but the
        # first dimension (the same kernel, the same floats). 2,000 Linear(16, 16) tensors:
        # 0.9 ms instead of 4.0 ms; it loses from ~16,000 elements per tensor (the copy), so only
        # below _STACK_MEAN_NUMEL on average, from _STACK_MIN_TENSORS tensors, and when the
        # shapes repeat (at most a quarter as many shapes as tensors). Never on CUDA, where
        # _foreach_norm is a few fused kernels.
        self._by_shape: list[tuple[list[int], tuple[int, ...]]] | None = None
        self._by_shape_order: torch.Tensor | None = None
        first = self._params[0]
        if self._uniform and first.device.type == "cpu" and len(self._params) >= _STACK_MIN_TENSORS \
                and sum(p.numel() for p in self._params) <= _STACK_MEAN_NUMEL * len(self._params):
            shapes: dict[tuple[int, ...], list[int]] = {}
            for i, p in enumerate(self._params):
                shapes.setdefault(tuple(p.shape), []).append(i)
            if 4 * len(shapes) <= len(self._params):
                self._by_shape = [(idx, tuple(range(1, len(shape) + 1))) for shape, idx in shapes.items()]
                stacked = torch.tensor([i for idx, _ in self._by_shape for i in idx])
                self._by_shape_order = torch.empty_like(stacked)  # parameter order from stacked order
                self._by_shape_order[stacked] = torch.arange(len(stacked))

        self._keys = [metric_key(GRAD_NORM, g) for g in names]
        clashes = {k for k in self._keys if self._keys.count(k) > 1 or k == GRAD_NORM_TOTAL}
        if clashes:
            raise ValueError(
                f"group names {sorted(clashes)} collide as metric keys (keys are lower case and "
                f"'{GRAD_NORM_TOTAL}' is reserved): pass include= with distinct module names"
            )
        # What keys() hands out every step, built once.
        self._all_keys = (GRAD_NORM_TOTAL, *self._keys)
        self._total_key = (GRAD_NORM_TOTAL,)

    @staticmethod
    def _groups_from_include(
        model: torch.nn.Module, param_names: list[str], include: Sequence[str]
    ) -> list[str]:
        if isinstance(include, str):
            raise ValueError(
                f"include={include!r} is a string: pass a list of module names, e.g. [{include!r}]"
            )
        include = list(include)
        if not include:
            raise ValueError("include=[] names no module: pass module names or include=None")
        modules = {name for name, _ in model.named_modules() if name}
        for name in include:
            if name not in modules:
                known = ", ".join(sorted(modules)[:8])
                raise ValueError(
                    f"include names {name!r}, which is not a submodule of "
                    f"{type(model).__name__}: pass names from model.named_modules() ({known}, ...)"
                )
        for a in include:
            for b in include:
                if a != b and b.startswith(a + "."):
                    raise ValueError(
                        f"include names {a!r} and {b!r}, and one contains the other: "
                        "list modules that do not overlap"
                    )
        if len(set(include)) != len(include):
            raise ValueError(f"include={include!r} repeats a name: list each module once")

        groups = []
        for n in param_names:
            path = _module_path(n)
            owner = next((m for m in include if path == m or path.startswith(m + ".")), OTHER_GROUP)
            groups.append(owner)
        return groups

    def _index(self, device: torch.device) -> torch.Tensor:
        # One host-to-device copy per device for the life of the probe, queued without a sync.
        idx = self._index_on.get(device)
        if idx is None:
            idx = to_device(torch.tensor(self._group_index, dtype=torch.long), device)
            self._index_on[device] = idx
        return idx

    def tensor_norms(self, reduce_squares: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
        """L2 norm of each parameter's gradient: one fused norm, no host sync.

        The step path takes the total from these every step and the per-group norms
        (:meth:`norms`) only on the steps that record them, from the same tensor.

        Args:
            reduce_squares: sums a 1-D tensor across ranks (e.g. an ``all_reduce``); needed
                when gradients are sharded: the squares are summed, so each norm is that of
                the whole gradient.

        Returns:
            A ``(P,)`` tensor, one entry per parameter in ``model.named_parameters()`` order
            (float32; float64 for a float64 model); 0 where ``.grad`` is None.

        Example:
            >>> per_tensor = probe.tensor_norms()  # doctest: +SKIP
            >>> probe.norms(per_tensor, per_module=False)  # doctest: +SKIP
            tensor([1.2345])
        """
        grads = [p.grad for p in self._params]
        if self._uniform and all(g is not None for g in grads):  # `in` would call Tensor.__eq__
            dtype = torch.float64 if grads[0].dtype == torch.float64 else torch.float32
            if self._by_shape is not None:  # many small CPU tensors: one norm per shape
                per_shape = [torch.linalg.vector_norm(torch.stack([grads[i] for i in idx]), dim=dims, dtype=dtype)
                             for idx, dims in self._by_shape]
                per_tensor = torch.cat(per_shape)[self._by_shape_order]  # (P,)
            else:
                per_tensor = torch.stack(torch._foreach_norm(grads, 2, dtype=dtype))  # (P,)
        else:
            per_tensor = _per_tensor_norms(grads, self._params[0].device)
        return per_tensor if reduce_squares is None else reduce_squares(per_tensor.square()).sqrt()

    def keys(self, per_module: bool = True) -> tuple[str, ...]:
        """Metric keys of :meth:`norms`, in its order: the total, then one per group.

        Example:
            >>> probe.keys()  # doctest: +SKIP
            ('grad_norm/total', 'grad_norm/0', 'grad_norm/1')
        """
        return self._all_keys if per_module else self._total_key

    def norms(self, per_tensor: torch.Tensor, per_module: bool = True) -> torch.Tensor:
        """Total and per-group norms from :meth:`tensor_norms`, as one 1-D float32 tensor.

        Args:
            per_tensor: what :meth:`tensor_norms` returned.
            per_module: also the per-group norms; ``False`` gives the total alone (one op).

        Returns:
            ``[total, group_0, group_1, ...]`` (keys: :meth:`keys`), on the gradients' device:
            read it to the host with the step's other metrics, in one transfer.

        Example:
            >>> vec = probe.norms(probe.tensor_norms())  # doctest: +SKIP
            >>> dict(zip(probe.keys(), vec.tolist()))  # doctest: +SKIP
        """
        total = torch.linalg.vector_norm(per_tensor, keepdim=True)  # (1,)
        if per_module and self.group_names:
            total = torch.cat([total, self._group_squares(per_tensor).sqrt()])
        return total.float()

    def total(self, per_tensor: torch.Tensor) -> torch.Tensor:
        """The total norm alone from :meth:`tensor_norms`, as a 0-d float32 tensor (the first
        entry of :meth:`norms`, the same float; one op on the step path).

        Example:
            >>> probe.total(probe.tensor_norms())  # doctest: +SKIP
            tensor(1.2345)
        """
        total = torch.linalg.vector_norm(per_tensor)
        return total if total.dtype is torch.float32 else total.float()

    def _group_squares(self, per_tensor: torch.Tensor) -> torch.Tensor:
        per_group = torch.zeros(len(self.group_names), dtype=per_tensor.dtype, device=per_tensor.device)
        if self.group_names:
            per_group.index_add_(0, self._index(per_tensor.device), per_tensor.square())
        return per_group

    def squared(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Sum of squared gradient entries, total and per group, for reduction across ranks.

        Returns:
            ``(total_sq, per_group_sq)``: a 0-d tensor and a ``(len(group_names),)`` tensor
            (float32; float64 for a float64 model). Parameters whose ``.grad`` is ``None``
            add 0.

        Example:
            >>> total_sq, per_group_sq = probe.squared()  # doctest: +SKIP
            >>> torch.distributed.all_reduce(total_sq)  # doctest: +SKIP
        """
        per_tensor = self.tensor_norms()
        return per_tensor.square().sum(), self._group_squares(per_tensor)

    def compute(self, per_module: bool = True,
                reduce_squares: Callable[[torch.Tensor], torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
        """Gradient norms as 0-d float32 tensors, with no host sync.

        Args:
            per_module: also return one norm per group; ``False`` returns the total only.
            reduce_squares: sums a 1-D tensor of squared norms across ranks (e.g. an
                ``all_reduce``); needed when gradients are sharded, so norms are global.

        Returns:
            ``{"grad_norm/total": t, "grad_norm/<group>": t, ...}``.

        Example:
            >>> norms = probe.compute()  # doctest: +SKIP
            >>> values = torch.stack(list(norms.values())).tolist()  # doctest: +SKIP
        """
        vec = self.norms(self.tensor_norms(reduce_squares), per_module=per_module)
        return dict(zip(self.keys(per_module), vec.unbind(0)))
