"""How a record's fields become columns: the rules the general and the template reader share.

Both readers (:mod:`~sentinel.analyze.loaders.textscan` and
:mod:`~sentinel.analyze.loaders.template_reader`) must give the same columns for the same
lines; the naming of a field (:func:`metric_name`), the units order, the widest record, the
head checks and the marks of a logged NaN are defined once here so they cannot drift.

Example:
    >>> from sentinel.analyze.loaders.dialects import NANOGPT
    >>> metric_key(NANOGPT, "loss"), units_order({"s": ("_s", 1.0), "ms": ("_ms", 1.0)})
    ('loss', ['ms', 's'])
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

import numpy as np

from sentinel import metrics
from sentinel.analyze.loaders import LoadOptions
from sentinel.analyze.loaders.dialect_types import HEAD_ROLES, Dialect, Shape
from sentinel.analyze.loaders.keys import canonical_key, looks_like_eval_loss


# The most fields one record line may have; longer lines are skipped with a warning.
MAX_FIELDS = 96

KEY = re.compile(r"[A-Za-z_][\w./()%-]*\Z", re.ASCII)
# What counts as a number where a field also holds text ("5,000", "30GiB(37%)"): the general reader
# asks pyarrow's RE2 (ASCII digits), the template reader Python's ``re`` with re.ASCII.
NUMBER_SYNTAX = r"^[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf|infinity))$"
_SLUG = re.compile(r"[^a-z0-9/]+")
_PHRASE_SLUG = re.compile(r"[^a-z0-9]+")
NONFINITE_WATCHED = (metrics.LOSS, metrics.GRAD_NORM_TOTAL)
NAN_PREFIX = "_nan:"
_KNOWN = frozenset({metrics.LOSS, metrics.LR, metrics.GRAD_NORM_TOTAL, metrics.LOSS_SCALE})


@functools.lru_cache(maxsize=1024)
def watches_nonfinite(name: str) -> bool:
    """Whether a NaN printed for this metric is a finding, not an absence: the loss, the grad
    norm, and an evaluation's loss (``'eval_loss': nan``).

    Example:
        >>> watches_nonfinite("eval_loss"), watches_nonfinite("lr")
        (True, False)
    """
    return name in NONFINITE_WATCHED or looks_like_eval_loss(name)


def marks_nan(name: str, dialect) -> bool:
    """Whether a reader marks where ``name`` printed a NaN (:data:`NAN_PREFIX`): a watched metric
    (:func:`watches_nonfinite`), or any term of a loss summed from terms (``Dialect.loss_terms``).

    Example:
        >>> from types import SimpleNamespace
        >>> marks_nan("g_a", SimpleNamespace(loss_terms=None)), marks_nan("g_a", SimpleNamespace(loss_terms=object()))
        (False, True)
    """
    return dialect.loss_terms is not None or watches_nonfinite(name)


def units_order(units: Mapping[str, tuple[str, float]]) -> list[str]:
    """Units longest first, so ``ms`` is tried before ``s``."""
    return sorted(units, key=len, reverse=True)


def unit_suffix(shape: Shape, code: int) -> str:
    return "" if code == 0 else shape.units[units_order(shape.units)[code - 1]][0]


def widest(lengths: np.ndarray, counts: np.ndarray) -> int:
    """Fields in the widest record (at most :data:`MAX_FIELDS`, with room for two more), judged
    on the first and last 64 records and the longest one (``lengths`` in characters)."""
    longest = int(np.argmax(lengths))
    sample = np.concatenate([counts[:64], counts[-64:], counts[longest:longest + 1]])
    return min(MAX_FIELDS, int(sample.max()) + 2)


def check_heads(out: dict[str, np.ndarray], shape: Shape, counts: np.ndarray, width: int,
                ok: np.ndarray) -> set[str]:
    """Clear ``ok`` (in place) for records with no step or iteration, and for a strict shape's
    records with nothing after the head; return the head's metric keys (both readers)."""
    for role in (metrics.STEP, "iter"):
        if "_" + role in out:
            ok &= ~np.isnan(out["_" + role])
    if shape.strict and len(shape.head) < width:
        ok &= counts > len(shape.head)
    return {name for name in shape.head if name not in HEAD_ROLES and name != "_"}


def prefixed(shape: Shape, name: str) -> str:
    """``name`` under the shape's :attr:`~Shape.prefix` (``val_`` for validation lines), once.

    Example:
        >>> from sentinel.analyze.loaders.dialect_types import Shape
        >>> prefixed(Shape(re.compile("x"), prefix="val_"), "loss"), prefixed(Shape(re.compile("x"), prefix="val_"), "val_ppl")
        ('val_loss', 'val_ppl')
    """
    return shape.prefix + name if shape.prefix and not name.startswith(shape.prefix) else name


def metric_name(raw_key: str, unit: str, shape: Shape, dialect: Dialect, options: LoadOptions) -> str:
    """Name one field: the user's choice, the dialect's table, else sentinel's canonical key."""
    if options.step_col is not None and raw_key == options.step_col.lower():
        return "_step_col"
    if options.loss_col is not None:
        if raw_key == options.loss_col.lower():
            return metrics.LOSS
    key = raw_key + unit
    if dialect.step_key is not None and raw_key == dialect.step_key:
        return "_step_key"
    if shape.fields is not None:
        name = _phrase_key(raw_key, shape)
        return "logged_loss" if name == metrics.LOSS and options.loss_col is not None else name
    if raw_key in shape.keys and not unit:
        name = shape.keys[raw_key]
    else:
        name = canonical_key(key)
        if name == metrics.LOSS:
            name = key  # a loss-like key the dialect did not name is another loss
    if name == metrics.LOSS and options.loss_col is not None:
        name = "logged_loss"  # the user chose another key as the loss
    name = _SLUG.sub("_", name.lower()).strip("_") if name not in _KNOWN else name
    return prefixed(shape, name)


def _phrase_key(name: str, shape: Shape) -> str:
    """A field-list name's key (see :attr:`Shape.fields`)."""
    if name in shape.keys:
        return shape.keys[name]
    slug = _PHRASE_SLUG.sub("_", name).strip("_")
    if shape.prefix:
        return shape.prefix + slug
    canonical = canonical_key(name)
    # Other losses on the line (MoE load balancing, MTP) are not the training loss.
    return canonical if canonical != name and canonical != metrics.LOSS else slug


def metric_key(dialect: Dialect, name: str) -> str:
    """The metric key of a field named ``name`` (as printed) on the dialect's main record line.

    Example:
        >>> from sentinel.analyze.loaders.dialects import NANOGPT
        >>> metric_key(NANOGPT, "loss")
        'loss'
    """
    return metric_name(name.strip().lower(), "", dialect.shapes[0], dialect, LoadOptions())
