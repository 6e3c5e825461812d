"""Attention probe: entropy of attention probabilities and the largest attention logit.

Entropy collapse (a module's attention entropy falling towards 0) and attention-logit growth
are early signs of training instability. On sampled steps only, the probe records per
attention module:

==================================  ===================================================
key                                 meaning
==================================  ===================================================
``attn_entropy/<module>``           entropy in nats, mean over batch, query rows, heads
``attn_entropy_min/<module>``       mean entropy of the lowest head
``attn_logit_max/<module>``         largest pre-softmax score (after scaling and any
                                    additive mask; masked positions excluded)
==================================  ===================================================

Coverage:

* any code calling ``torch.nn.functional.scaled_dot_product_attention``: the call is seen by a
  ``TorchFunctionMode`` while armed, runs unchanged, and the probabilities are recomputed from
  q, k and the mask on the first ``max_batch`` sequences;
* ``torch.nn.MultiheadAttention``: a mode does not see the attention inside it in training, so
  a forward hook recomputes q and k from its input projection;
* attention written by hand (nanoGPT's ``flash=False`` path, Hugging Face
  ``attn_implementation="eager"``, most research code): while armed, the same mode follows
  the scores of a product of two batched activations (``@``, ``matmul``, ``bmm``,
  ``baddbmm``, ``einsum``) through scaling, masking and additions, and a softmax over their
  last dimension is measured from its input; it is attributed to the innermost running
  module whose name or class says attention (``attn``, ``attention``, ``mha``);
* :func:`record_attention` for modules that hold their own probabilities or logits.

A module measured by one of the other paths on a step is not counted again from its
hand-written softmax. Nothing here knows about Lightning: the caller arms the probe around
the forward.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import re
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode
from torch.utils.hooks import RemovableHandle

from sentinel.metrics import ATTN_ENTROPY, ATTN_ENTROPY_MIN_HEAD, ATTN_LOGIT_MAX, metric_key

logger = logging.getLogger(__name__)

#: Name used in metric keys for attention computed by the model itself (module path ``""``)
#: or outside any module's forward.
ROOT_NAME = "root"
# The warning key of a fault in the probe's own bookkeeping (warned once per run, not per module).
_PROBE_FAULT = "(attention probe)"

#: Metric families this probe writes, in the order of the table above.
METRIC_FAMILIES = (ATTN_ENTROPY, ATTN_ENTROPY_MIN_HEAD, ATTN_LOGIT_MAX)

# Positional parameter names, to bind the arguments a call or a hook receives.
_SDPA_PARAMS = (
    "query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"
)
_MHA_PARAMS = (
    "query",
    "key",
    "value",
    "key_padding_mask",
    "need_weights",
    "attn_mask",
    "average_attn_weights",
    "is_causal",
)

# Calls whose result may be attention scores: a product of two activations. Compared by id:
# what a mode receives need not be hashable.
_PRODUCTS = frozenset(
    id(f)
    for f in (
        torch.matmul,
        torch.Tensor.matmul,
        torch.Tensor.__matmul__,
        torch.Tensor.__rmatmul__,
        torch.bmm,
        torch.Tensor.bmm,
        torch.baddbmm,
        torch.Tensor.baddbmm,
        torch.einsum,
    )
)
_SOFTMAX = frozenset(id(f) for f in (F.softmax, torch.softmax, torch.Tensor.softmax))

# A module path component or class name that says "attention".
_ATTENTION_NAME = re.compile(r"attn|attention|mha", re.IGNORECASE)

#: Why nothing was recorded, for a model in which no path above saw attention.
COMPILED_REASON = (
    "attention is not sampled: the model is compiled (torch.compile), and the hooks a sampled "
    "step puts on it would make it recompile each time, until torch gives up and runs it "
    "uncompiled; attention entropy is recorded in runs without torch.compile"
)
NO_ATTENTION_REASON = (
    "no attention modules found: the model has no nn.MultiheadAttention, no "
    "scaled_dot_product_attention call and no softmax over a q @ k.T product on a sampled "
    "step; record your own with sentinel.probes.attention.record_attention(module, "
    "probs=..., logits=...)"
)

# The probe currently armed; record_attention checks only this when nothing is armed.
_ARMED: AttentionProbe | None = None


# --------------------------------------------------------------------------- pure statistics


def attention_stats(
    probs: Tensor | None = None,
    logits: Tensor | None = None,
    mask: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Entropy and largest logit of attention, as 0-d float32 tensors (no host sync).

    Tensors are ``(B, H, Lq, Lk)``; ``(H, Lq, Lk)`` is one sequence and ``(Lq, Lk)`` one head;
    more leading dimensions are folded into the batch. Entropy comes from ``probs`` when given,
    else from ``softmax(logits)``. Query rows whose keys are all masked are left out.

    Args:
        probs: attention probabilities (rows sum to 1).
        logits: pre-softmax scores after scaling.
        mask: applies to ``logits``, as in ``scaled_dot_product_attention``: boolean ``True``
            means "may attend", a float mask is added to the scores. Broadcastable to ``logits``.

    Returns:
        ``(mean_entropy, min_head_entropy, max_logit)`` in nats; ``max_logit`` is NaN when no
        logits were given.

    Example:
        >>> ent, ent_min, lmax = attention_stats(logits=torch.zeros(1, 2, 3, 4))
        >>> round(float(ent), 4) == round(math.log(4), 4)
        True
    """
    if probs is None and logits is None:
        raise ValueError("attention_stats got neither probs nor logits: pass at least one of them")
    if mask is not None and logits is None:
        raise ValueError(
            "attention_stats got a mask without logits: the mask applies to logits, so pass "
            "logits=, or pass probs whose masked positions already hold 0"
        )
    device_type = (probs if probs is not None else logits).device.type
    with torch.no_grad(), _autocast_off(device_type):
        masked = None
        if logits is not None:
            masked = _as_heads(_apply_sdpa_mask(logits.float(), mask))
        if probs is None:
            return _stats_from_logits(masked)
        ent, ent_min = _entropy_from_probs(_as_heads(probs.float()))
        if masked is None:
            return ent, ent_min, torch.full((), float("nan"), device=ent.device)
        return ent, ent_min, masked.amax()


def _as_heads(t: Tensor) -> Tensor:
    """View attention scores as ``(B, H, Lq, Lk)``."""
    if t.dim() < 2:
        raise ValueError(
            f"attention tensor of shape {tuple(t.shape)} has fewer than 2 dimensions: pass "
            "(B, H, Lq, Lk) probabilities or logits"
        )
    if t.dim() == 2:
        return t[None, None]
    if t.dim() == 3:
        return t[None]
    return t.flatten(0, t.dim() - 4)


def _apply_sdpa_mask(logits: Tensor, mask: Tensor | None) -> Tensor:
    """Apply a mask in ``scaled_dot_product_attention``'s convention (bool True = attend)."""
    if mask is None:
        return logits
    if mask.dtype == torch.bool:
        return logits.masked_fill(~mask, float("-inf"))
    return logits + mask.float()


def _stats_from_logits(logits: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Mean entropy, min-head entropy and max of masked scores ``(B, H, Lq, Lk)``."""
    logp = torch.log_softmax(logits, dim=-1)
    p = logp.exp()
    # 0 * log 0 is 0, not NaN: masked keys contribute nothing.
    row = -torch.where(p > 0, p * logp, 0.0).sum(-1)  # (B, H, Lq)
    row_max = logits.amax(-1)  # (B, H, Lq)
    # A row with every key masked has no distribution (SDPA returns NaN there): leave it out.
    ent, ent_min = _reduce_rows(row, row_max > float("-inf"))
    return ent, ent_min, row_max.amax()


def _entropy_from_probs(probs: Tensor) -> tuple[Tensor, Tensor]:
    """Mean and min-head entropy of given probabilities ``(B, H, Lq, Lk)``."""
    row = -torch.where(probs > 0, probs * probs.log(), 0.0).sum(-1)  # (B, H, Lq)
    return _reduce_rows(row, torch.ones_like(row, dtype=torch.bool))


def _reduce_rows(row: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
    """Mean over valid (batch, head, row) entries, and the lowest per-head mean."""
    w = valid.to(row.dtype)
    row = torch.where(valid, row, 0.0)
    mean = row.sum() / w.sum()
    head_count = w.sum((0, 2))
    head_mean = row.sum((0, 2)) / head_count
    # A head with no valid row has no entropy; it must not win the minimum.
    head_min = torch.where(head_count > 0, head_mean, float("inf")).amin()
    head_min = torch.where(head_count.sum() > 0, head_min, float("nan"))
    return mean, head_min


@contextlib.contextmanager
def _autocast_off(device_type: str) -> Iterator[None]:
    """Recompute in float32 even inside an autocast region (bf16 scores would blur entropy)."""
    if torch.amp.is_autocast_available(device_type) and torch.is_autocast_enabled(device_type):
        with torch.autocast(device_type=device_type, enabled=False):
            yield
    else:
        yield


# --------------------------------------------------------------------------- recomputation


def _sdpa_logits(
    query: Tensor,
    key: Tensor,
    attn_mask: Tensor | None,
    is_causal: bool,
    scale: float | None,
    enable_gqa: bool,
    max_batch: int,
) -> Tensor:
    """Masked, scaled scores that ``scaled_dot_product_attention`` would softmax.

    Only the first ``max_batch`` sequences are recomputed, in float32.
    """
    lq, lk = query.size(-2), key.size(-2)
    if attn_mask is not None:
        # Expand (a view) so a per-batch mask is sliced with q and k.
        attn_mask = attn_mask.expand(*query.shape[:-1], lk)
    if query.dim() >= 3:
        query, key = query[:max_batch], key[:max_batch]
        attn_mask = attn_mask[:max_batch] if attn_mask is not None else None
    q, k = query.float(), key.float()
    if enable_gqa and q.dim() >= 3 and q.size(-3) != k.size(-3):
        k = k.repeat_interleave(q.size(-3) // k.size(-3), dim=-3)
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    logits = (q @ k.transpose(-2, -1)) * scale  # (B, H, Lq, Lk)
    if is_causal:
        # Top-left aligned, as scaled_dot_product_attention builds it.
        causal = torch.ones(lq, lk, dtype=torch.bool, device=logits.device).tril()
        logits = logits.masked_fill(~causal, float("-inf"))
    return _apply_sdpa_mask(logits, attn_mask)


def _mha_additive(mask: Tensor) -> Tensor:
    """A MultiheadAttention mask (bool True = masked out, or float) as a float additive mask."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, device=mask.device).masked_fill(mask, float("-inf"))
    return mask.float()


def _mha_logits(
    mha: nn.MultiheadAttention,
    query: Tensor,
    key: Tensor,
    key_padding_mask: Tensor | None,
    attn_mask: Tensor | None,
    is_causal: bool,
    max_batch: int,
) -> Tensor:
    """Recompute MultiheadAttention's masked, scaled scores ``(B, H, Lq, Lk)`` in float32.

    Follows ``F.multi_head_attention_forward``: in-projection (packed or separate q/k
    weights), ``bias_k``, ``add_zero_attn``, ``key_padding_mask`` and ``attn_mask`` (2-D or
    ``(B * H, Lq, Lk)``), on the first ``max_batch`` sequences.
    """
    if query.dim() == 3:
        if not mha.batch_first:
            query, key = query.transpose(0, 1), key.transpose(0, 1)
    else:  # unbatched (L, E)
        query, key = query.unsqueeze(0), key.unsqueeze(0)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    n_full = query.size(0)
    query, key = query[:max_batch].float(), key[:max_batch].float()
    b, lq, e = query.shape
    h, hd = mha.num_heads, mha.head_dim

    if mha._qkv_same_embed_dim:
        w_q, w_k = mha.in_proj_weight[:e], mha.in_proj_weight[e : 2 * e]
    else:
        w_q, w_k = mha.q_proj_weight, mha.k_proj_weight
    bias = mha.in_proj_bias
    b_q, b_k = (bias[:e].float(), bias[e : 2 * e].float()) if bias is not None else (None, None)
    q = F.linear(query, w_q.float(), b_q)  # (B, Lq, E)
    k = F.linear(key, w_k.float(), b_k)  # (B, Lk, E)

    extra = 0  # keys MHA appends: bias_k, then a zero key; masks get a zero column for each
    if mha.bias_k is not None:
        k = torch.cat([k, mha.bias_k.float().reshape(1, 1, e).expand(b, 1, e)], dim=1)
        extra += 1
    q = q.view(b, lq, h, hd).transpose(1, 2)  # (B, H, Lq, hd)
    k = k.view(b, k.size(1), h, hd).transpose(1, 2)  # (B, H, Lk, hd)
    if mha.add_zero_attn:
        k = torch.cat([k, k.new_zeros(b, h, 1, hd)], dim=2)
        extra += 1
    # Same order of operations as MHA (scale q, then matmul) so the scores match closely.
    logits = (q * math.sqrt(1.0 / hd)) @ k.transpose(-2, -1)  # (B, H, Lq, Lk)
    lk = logits.size(-1)

    if is_causal and attn_mask is None:
        attn_mask = torch.ones(lq, lk - extra, dtype=torch.bool, device=logits.device).triu(1)
    if attn_mask is not None:
        add = F.pad(_mha_additive(attn_mask), (0, extra))
        if add.dim() == 3:  # (B_full * H, Lq, Lk) or (H, Lq, Lk) when unbatched
            add = add.view(n_full, h, lq, lk)[:max_batch]
        logits = logits + add
    if key_padding_mask is not None:
        kpm = F.pad(_mha_additive(key_padding_mask[:max_batch]), (0, extra))
        logits = logits + kpm.view(b, 1, 1, lk)
    return logits


# --------------------------------------------------------------------------- the probe


@dataclass
class _Accum:
    """Per-module statistics of one sampled step (a module may attend several times)."""

    entropy: list[Tensor] = field(default_factory=list)
    entropy_min: list[Tensor] = field(default_factory=list)
    logit_max: list[Tensor] = field(default_factory=list)


class _AttentionInterceptor(TorchFunctionMode):
    """Sees every torch call while armed; lets it run, then reports attention to the probe.

    Reports ``scaled_dot_product_attention`` calls, and follows hand-written attention: the
    result of a product of two batched activations is marked as scores, the mark passes to
    any result of the same trailing ``(Lq, Lk)`` shape computed from marked scores (scale,
    mask, add, cast), and a softmax over the last dimension of marked scores is reported.
    """

    def __init__(self, probe: AttentionProbe) -> None:
        super().__init__()
        self._probe = probe
        self.quiet = False  # set while the probe computes its own statistics
        self._scores: dict[int, weakref.ref[Tensor]] = {}  # id -> marked scores

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        out = func(*args, **kwargs)  # the real call, unchanged: outputs stay bit-identical
        if self.quiet:
            return out
        try:
            self._observe(func, args, kwargs, out)
        except Exception as err:  # noqa: BLE001 - the probe's own fault never stops the user's forward
            self._probe._warn_once(_PROBE_FAULT, f"attention not read ({type(err).__name__}: {err}); training goes on")
        return out

    def _observe(self, func: Callable, args: tuple, kwargs: dict, out: Any) -> None:
        # The mode is popped while this runs, so the probe's own calls are not intercepted.
        if func is F.scaled_dot_product_attention:
            self._probe._on_sdpa(args, kwargs)
        elif id(func) in _SOFTMAX:
            self._on_softmax(args, kwargs)
        elif id(func) in _PRODUCTS:
            if _is_activation_product(func, args, kwargs, out):
                self._mark(out)
        elif self._scores and isinstance(out, Tensor) and out.dim() >= 2:
            source = self._marked_arg(args, kwargs)
            if source is not None and out.shape[-2:] == source.shape[-2:]:
                self._mark(out)

    def clear(self) -> None:
        self._scores = {}

    def _mark(self, t: Tensor) -> None:
        self._scores[id(t)] = weakref.ref(t)

    def _is_marked(self, t: Any) -> bool:
        if not isinstance(t, Tensor):
            return False
        ref = self._scores.get(id(t))
        return ref is not None and ref() is t

    def _marked_arg(self, args: tuple, kwargs: dict) -> Tensor | None:
        for a in args:
            if self._is_marked(a):
                return a
        for a in kwargs.values():
            if self._is_marked(a):
                return a
        return None

    def _on_softmax(self, args: tuple, kwargs: dict) -> None:
        x = args[0] if args else kwargs.get("input", kwargs.get("self"))
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        if not self._is_marked(x) or not isinstance(dim, int) or x.dim() < 2:
            return
        if dim % x.dim() == x.dim() - 1:
            self._probe._on_manual(x)


def _is_activation_product(func: Callable, args: tuple, kwargs: dict, out: Any) -> bool:
    """Whether a product multiplied two batched (3-D or more) tensors, like q and k.T.

    Requiring both operands batched leaves out products with a weight (``x @ W.T``).
    """
    if not isinstance(out, Tensor) or out.dim() < 3:
        return False
    if func is torch.einsum:
        ops = args[1:]
        if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
            ops = tuple(ops[0])
    elif func is torch.baddbmm or func is torch.Tensor.baddbmm:
        ops = (
            args[1] if len(args) > 1 else kwargs.get("batch1"),
            args[2] if len(args) > 2 else kwargs.get("batch2"),
        )
    else:
        ops = (
            args[0] if args else kwargs.get("input"),
            args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("mat2")),
        )
    return len(ops) == 2 and all(isinstance(t, Tensor) and t.dim() >= 3 for t in ops)


class AttentionProbe:
    """Record attention entropy and the largest attention logit per attention module.

    Arm it around a sampled step's forward: ``start(step)`` before, ``stop()`` after. They may
    be called from different places (Lightning: ``on_train_batch_start`` and
    ``on_before_backward``); ``stop()`` always removes every hook and leaves the mode, even
    after an exception in between. Steps that are not sampled register nothing.

    Keys (``sentinel.metrics``), per module path (``root`` for the model itself):

    ==================================  ==========================================
    ``attn_entropy/<module>``           entropy (nats), mean over batch/rows/heads
    ``attn_entropy_min/<module>``       the lowest head's mean entropy
    ``attn_logit_max/<module>``         largest scaled score, masked excluded
    ==================================  ==========================================

    Hand-written attention (a softmax over the last dimension of ``q @ k.T`` scores, see the
    module docstring) is measured from the softmax input and attributed to the innermost
    running module whose path or class names attention, else the innermost running module
    of the user's own classes. Scores of a ``bmm`` over ``(B * H, Lq, Lk)`` cannot be split
    into heads, so there the lowest "head" is the lowest (sequence, head) pair.

    Args:
        model: the model whose forward is probed.
        every: sample interval in steps (step % every == 0). 50 keeps the recomputation,
            hooks and mode to 2% of steps; entropy collapse unfolds over hundreds of steps.
        max_batch: recompute the probabilities on at most this many sequences of the batch,
            bounding the extra cost at O(max_batch * heads * Lq * Lk) per attention call.

    Attributes:
        modules: attention module paths seen so far (``nn.MultiheadAttention`` found at
            construction; ``scaled_dot_product_attention`` callers, hand-written attention
            and :func:`record_attention` users added on the first sampled forward that runs
            them).
        found_any: after the first sampled step, False means the model has no attention.
        no_attention_reason: after a sampled step that saw no attention, one line saying so
            and what to do; else None.

    Example:
        >>> probe = AttentionProbe(model, every=50)  # doctest: +SKIP
        >>> if probe.start(step):  # doctest: +SKIP
        ...     loss = model(batch).mean()
        ...     metrics = probe.stop()  # {"attn_entropy/blocks.0.attn": tensor(...), ...}
    """

    def __init__(self, model: nn.Module, every: int = 50, max_batch: int = 4) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(
                f"AttentionProbe model is a {type(model).__name__}: pass a torch.nn.Module"
            )
        if isinstance(every, bool) or not isinstance(every, int) or every <= 0:
            raise ValueError(f"AttentionProbe every={every!r} is invalid: pass an integer > 0")
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch <= 0:
            raise ValueError(
                f"AttentionProbe max_batch={max_batch!r} is invalid: pass an integer > 0"
            )
        self.model = model
        self.every = every
        self.max_batch = max_batch
        self.modules: list[str] = [
            _display_name(name)
            for name, mod in model.named_modules()
            if isinstance(mod, nn.MultiheadAttention)
        ]
        self._armed = False
        self._sampled_once = False
        self._compiled = False  # found compiled on a sampled step: no hooks from then on
        self._handles: list[RemovableHandle] = []
        self._mode: _AttentionInterceptor | None = None
        self._stack: list[str] = []  # names of modules inside forward, innermost last
        self._names: dict[nn.Module, str] = {}
        self._mha_names: set[str] = set()
        self._attention_named: set[str] = set()  # paths whose name or class says attention
        self._torch_builtin: set[str] = set()  # paths of torch.nn's own module classes
        self._acc: dict[str, _Accum] = {}
        self._manual: dict[str, _Accum] = {}  # hand-written softmax(q @ k.T), per owner
        self._reported: set[str] = set()  # owners measured by another path this step
        self._warned: set[str] = set()

    @property
    def found_any(self) -> bool:
        """Whether any attention module has been found (at construction or while sampling)."""
        return bool(self.modules)

    @property
    def no_attention_reason(self) -> str | None:
        """One line saying why nothing is recorded, once a sampled step saw no attention.

        None before the first sampled step and whenever attention was found.

        Example:
            >>> probe.no_attention_reason  # doctest: +SKIP
            'no attention modules found: the model has no nn.MultiheadAttention, ...'
        """
        if self._compiled and self._sampled_once:
            return COMPILED_REASON
        if self.found_any or not self._sampled_once:
            return None
        return NO_ATTENTION_REASON

    @property
    def armed(self) -> bool:
        """Whether hooks and the mode are installed for the current step."""
        return self._armed

    def should_sample(self, step: int) -> bool:
        """Whether ``step`` is a sampled step.

        Example:
            >>> AttentionProbe(model, every=50).should_sample(100)  # doctest: +SKIP
            True
        """
        return step % self.every == 0

    def start(self, step: int) -> bool:
        """Arm the probe for this step's forward if the step is sampled.

        Args:
            step: the optimizer step about to run.

        Returns:
            True if armed; ``stop()`` must then be called after the forward.

        Example:
            >>> armed = probe.start(step)  # doctest: +SKIP
        """
        if self._armed:
            logger.warning(
                "AttentionProbe.start(%d) while still armed from an earlier step: that step's "
                "attention metrics are dropped; call stop() after each armed forward",
                step,
            )
            self.stop()
        if not self.should_sample(step):
            return False
        if self._compiled or _is_compiled(self.model):
            self._compiled = self._sampled_once = True
            return False
        global _ARMED
        if _ARMED is not None:  # left armed: an exception in a sampled forward, a run never closed
            logger.warning(
                "another AttentionProbe was still armed (an exception during a sampled step, or a "
                "Sentinel never closed): it is disarmed and its step's attention metrics dropped"
            )
            _ARMED.stop()
        try:
            self._install()
        except BaseException:
            self._disarm()
            raise
        _ARMED = self
        self._armed = True
        return True

    def stop(self) -> dict[str, Tensor]:
        """Disarm (remove every hook, leave the mode) and return this step's metrics.

        Returns:
            ``{key: 0-d tensor}`` on the model's device, no host sync; ``{}`` if not armed or
            if no attention ran.

        Example:
            >>> metrics = probe.stop()  # doctest: +SKIP
        """
        if not self._armed:
            return {}
        try:
            self._disarm()
            metrics = self._collect()
        finally:
            self._acc, self._manual, self._reported = {}, {}, set()
        if not self._sampled_once:
            self._sampled_once = True
            if not self.modules:
                logger.info("AttentionProbe: %s", NO_ATTENTION_REASON)
        return metrics

    # -- arming ---------------------------------------------------------------------------

    def _install(self) -> None:
        # Rescanned per sampled step so modules added after construction are covered.
        self._names = {}
        self._mha_names = set()
        self._attention_named = set()
        self._torch_builtin = set()
        for name, mod in self.model.named_modules():
            name = _display_name(name)
            self._names[mod] = name
            if _ATTENTION_NAME.search(name.rsplit(".", 1)[-1]) or _ATTENTION_NAME.search(
                type(mod).__name__
            ):
                self._attention_named.add(name)
            if type(mod).__module__.startswith("torch.nn."):
                self._torch_builtin.add(name)
            enter = functools.partial(self._enter, name)
            self._handles.append(mod.register_forward_pre_hook(enter))
            self._handles.append(
                mod.register_forward_hook(functools.partial(self._exit, name), always_call=True)
            )
            if isinstance(mod, nn.MultiheadAttention):
                self._mha_names.add(name)
                self._handles.append(
                    mod.register_forward_hook(
                        functools.partial(self._on_mha, name), with_kwargs=True
                    )
                )
        self._mode = _AttentionInterceptor(self)
        self._mode.__enter__()

    def _disarm(self) -> None:
        global _ARMED
        try:
            for handle in self._handles:
                handle.remove()
            self._handles = []
            if self._mode is not None:
                self._mode.clear()
                _leave_mode(self._mode)
        finally:
            self._mode = None
            self._stack = []
            self._armed = False
            if _ARMED is self:
                _ARMED = None

    def _enter(self, name: str, module: nn.Module, args: Any) -> None:
        self._stack.append(name)

    def _exit(self, name: str, module: nn.Module, args: Any, output: Any) -> None:
        if self._stack and self._stack[-1] == name:
            self._stack.pop()
        elif name in self._stack:  # an inner forward raised and skipped its own exit
            del self._stack[len(self._stack) - 1 - self._stack[::-1].index(name) :]

    # -- observations -----------------------------------------------------------------------

    def _owner(self) -> str:
        """The running module hand-written attention belongs to.

        The innermost one whose path or class names attention, else the innermost one that is
        not one of torch.nn's own classes (an ``nn.Softmax`` belongs to its caller), else root.
        """
        for name in reversed(self._stack):
            if name in self._attention_named:
                return name
        for name in reversed(self._stack):
            if name not in self._torch_builtin:
                return name
        return ROOT_NAME

    def _on_sdpa(self, args: tuple, kwargs: dict) -> None:
        name = self._stack[-1] if self._stack else ROOT_NAME
        self._reported.add(self._owner())
        if name in self._mha_names:
            return  # MultiheadAttention is measured by its own hook
        p = dict(zip(_SDPA_PARAMS, args))
        p.update(kwargs)
        q, k = p["query"], p["key"]
        if q.is_nested or k.is_nested:
            self._warn_once(name, "nested-tensor attention is not measured")
            return
        self._measure(
            name,
            q.device.type,
            lambda: _sdpa_logits(
                q,
                k,
                p.get("attn_mask"),
                bool(p.get("is_causal", False)),
                p.get("scale"),
                bool(p.get("enable_gqa", False)),
                self.max_batch,
            ),
        )

    def _on_mha(
        self, name: str, module: nn.Module, args: tuple, kwargs: dict, output: Any
    ) -> None:
        try:
            self._read_mha(name, module, args, kwargs)
        except Exception as err:  # noqa: BLE001 - a forward hook's fault would stop the user's forward
            self._warn_once(name, f"attention not read ({type(err).__name__}: {err}); training goes on")

    def _read_mha(self, name: str, module: nn.Module, args: tuple, kwargs: dict) -> None:
        p = dict(zip(_MHA_PARAMS, args))
        p.update(kwargs)
        q, k = p["query"], p["key"]
        if q.is_nested or k.is_nested:
            self._warn_once(name, "nested-tensor attention (MHA fast path) is not measured")
            return
        self._measure(
            name,
            q.device.type,
            lambda: _mha_logits(
                module,
                q,
                k,
                p.get("key_padding_mask"),
                p.get("attn_mask"),
                bool(p.get("is_causal", False)),
                self.max_batch,
            ),
        )

    def _on_manual(self, scores: Tensor) -> None:
        """A softmax over the last dimension of ``q @ k.T`` scores (the softmax input)."""
        name = self._owner()
        if name in self._mha_names:
            return  # MultiheadAttention is measured by its own hook
        if scores.dim() >= 4:
            scores = scores[: self.max_batch]
        self._measure(name, scores.device.type, lambda: scores, self._manual)

    def _measure(
        self,
        name: str,
        device_type: str,
        logits_fn: Callable[[], Tensor],
        into: dict[str, _Accum] | None = None,
    ) -> None:
        try:
            with self._quiet(), torch.no_grad(), _autocast_off(device_type):
                ent, ent_min, lmax = _stats_from_logits(_as_heads(logits_fn().float()))
                self._add(name, ent, ent_min, lmax, self._acc if into is None else into)
        except Exception as err:  # noqa: BLE001 - a diagnostic must not stop training
            # Say once which module it could not read.
            self._warn_once(name, f"attention recomputation failed: {err}")

    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        """Keep the mode from following the probe's own computations."""
        mode = self._mode
        if mode is None or mode.quiet:
            yield
            return
        mode.quiet = True
        try:
            yield
        finally:
            mode.quiet = False

    def _record_external(
        self, module: nn.Module | str, probs: Tensor | None, logits: Tensor | None
    ) -> None:
        if isinstance(module, str):
            name = module
        else:
            found = self._names.get(module)
            if found is None:
                self._warn_once(
                    type(module).__name__,
                    "record_attention got a module that is not part of the probed model: "
                    "pass the module itself or its name",
                )
                return
            name = found
        self._reported.add(self._owner())
        with self._quiet(), torch.no_grad():
            if probs is not None and probs.dim() >= 4:
                probs = probs[: self.max_batch]
            if logits is not None and logits.dim() >= 4:
                logits = logits[: self.max_batch]
            ent, ent_min, lmax = attention_stats(probs=probs, logits=logits)
        self._add(name, ent, ent_min, lmax if logits is not None else None, self._acc)

    def _add(
        self,
        name: str,
        ent: Tensor,
        ent_min: Tensor,
        lmax: Tensor | None,
        into: dict[str, _Accum],
    ) -> None:
        acc = into.setdefault(name, _Accum())
        acc.entropy.append(ent)
        acc.entropy_min.append(ent_min)
        if lmax is not None:
            acc.logit_max.append(lmax)

    def _collect(self) -> dict[str, Tensor]:
        # Hand-written softmax counts only for modules no other path measured this step.
        for name, acc in self._manual.items():
            if name not in self._acc and name not in self._reported:
                self._acc[name] = acc
        out: dict[str, Tensor] = {}
        for name, acc in self._acc.items():
            if name not in self.modules:
                self.modules.append(name)
            # Several calls in one module: mean entropy, lowest head, largest logit.
            out[metric_key(ATTN_ENTROPY, name)] = torch.stack(acc.entropy).mean()
            out[metric_key(ATTN_ENTROPY_MIN_HEAD, name)] = torch.stack(acc.entropy_min).amin()
            if acc.logit_max:
                out[metric_key(ATTN_LOGIT_MAX, name)] = torch.stack(acc.logit_max).amax()
        return out

    def _warn_once(self, name: str, message: str) -> None:
        if name not in self._warned:
            self._warned.add(name)
            logger.warning("AttentionProbe, module %r: %s", name, message)


def record_attention(
    module: nn.Module | str,
    probs: Tensor | None = None,
    logits: Tensor | None = None,
) -> None:
    """Report attention a module computed itself; a no-op unless a probe is armed.

    Costs one global check when nothing is armed, so it can stay in a model's forward.

    Args:
        module: the calling module (named by its path in the probed model) or a name.
        probs: attention probabilities ``(B, H, Lq, Lk)``.
        logits: scaled pre-softmax scores ``(B, H, Lq, Lk)`` with masked positions at ``-inf``;
            needed for ``attn_logit_max``.

    Example:
        >>> attn = (q @ k.transpose(-2, -1) * scale).masked_fill(~mask, float("-inf"))  # doctest: +SKIP
        >>> record_attention(self, logits=attn)  # doctest: +SKIP
    """
    probe = _ARMED
    if probe is None:
        return
    if probs is None and logits is None:
        raise ValueError("record_attention got neither probs nor logits: pass at least one")
    probe._record_external(module, probs, logits)


def _display_name(name: str) -> str:
    return name or ROOT_NAME


def _leave_mode(mode: TorchFunctionMode) -> None:
    """Pop ``mode`` from the torch-function mode stack even if another mode sits above it."""
    # torch.overrides exposes no public way to inspect the stack; __exit__ pops whatever is on
    # top, which would drop a mode pushed by someone else between start() and stop().
    stack = torch.overrides._get_current_function_mode_stack()
    if not any(m is mode for m in stack):
        return
    above: list[TorchFunctionMode] = []
    while True:
        top = torch.overrides._pop_mode()
        if top is mode:
            break
        above.append(top)
    for other in reversed(above):
        torch.overrides._push_mode(other)
    if above:
        logger.warning(
            "AttentionProbe.stop(): %d torch-function mode(s) entered after start() were still "
            "active; they were kept",
            len(above),
        )


def _is_compiled(model: nn.Module) -> bool:
    """Whether ``model`` or a module in it runs compiled (``torch.compile(m)`` or ``m.compile()``)."""
    return any(hasattr(m, "_orig_mod") or getattr(m, "_compiled_call_impl", None) is not None
               for m in model.modules())
