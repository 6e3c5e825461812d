"""What a user hands :class:`~sentinel.engine.Sentinel`: optimizers, schedulers, a grad scaler,
``rollback_with``; checked by the methods sentinel uses (so wrappers that behave like them pass),
each mistake one ``TypeError`` that names the argument and the fix."""

from __future__ import annotations

from typing import Any

import torch

_USAGE = "Sentinel(model, optimizer, scheduler=None, scaler=None, log_dir=...)"


def as_list(obj: Any) -> list[Any]:
    """None, one object, or a list or tuple of them, as a list.

    Example:
        >>> as_list(None), as_list("opt"), as_list(("a", "b"))
        ([], ['opt'], ['a', 'b'])
    """
    if obj is None:
        return []
    if isinstance(obj, (list, tuple)):
        return list(obj)
    return [obj]


def checked_rollback_with(objects: Any) -> list[Any]:
    """``rollback_with`` as a list, each entry with ``state_dict`` and ``load_state_dict``; else a
    ``TypeError`` that names the entry.

    Example:
        >>> checked_rollback_with(None), len(checked_rollback_with(torch.nn.Linear(1, 1)))
        ([], 1)
    """
    objects = [objects] if hasattr(objects, "state_dict") else as_list(objects)  # an nn.Sequential is one
    for obj in objects:
        if not (callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None))):
            raise TypeError(f"sentinel: rollback_with holds <{type(obj).__module__}.{type(obj).__qualname__}>, "
                            "which has no state_dict / load_state_dict: pass the EMA or averaged model itself "
                            "(an nn.Module, or an object that saves and loads its state)")
    return objects


def check_model(model: Any) -> None:
    """Refuse a model that is not a ``torch.nn.Module`` (the arguments in the wrong order, a
    Lightning module's ``.model`` forgotten), naming it.

    Example:
        >>> try:
        ...     check_model("gpt2")
        ... except TypeError as err:
        ...     print(str(err)[:62])
        sentinel: model='gpt2' is a str, not a torch.nn.Module: pass t
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"sentinel: model={_name(model)} is {_kind(model)}, not a torch.nn.Module: pass the "
                        f"model first, {_USAGE}")


def check_training_objects(optimizers: list[Any], schedulers: list[Any], scaler: Any) -> None:
    """Refuse what is not an optimizer / LR scheduler / grad scaler, naming the argument.

    Example:
        >>> try:
        ...     check_training_objects([0.1], [], None)
        ... except TypeError as err:
        ...     print(str(err)[:60])
        sentinel: optimizer=0.1 is a float, not an optimizer: pass t
    """
    for obj in optimizers:
        if _kind(obj) != "an optimizer":
            raise TypeError(f"sentinel: optimizer={_name(obj)} is {_kind(obj)}, not an optimizer: pass the "
                            f"torch.optim optimizer(s) second, {_USAGE}")
    for obj in schedulers:
        if _kind(obj) in ("an optimizer", "a grad scaler") or not hasattr(obj, "state_dict") \
                or not hasattr(obj, "load_state_dict"):
            raise TypeError(f"sentinel: scheduler={_name(obj)} is {_kind(obj)}, not an LR scheduler: pass the "
                            f"scheduler third (or scheduler=...), {_USAGE}")
    if scaler is not None and _kind(scaler) != "a grad scaler":
        raise TypeError(f"sentinel: scaler={_name(scaler)} is {_kind(scaler)}, not a torch.amp.GradScaler: pass "
                        f"scaler=GradScaler(...) or leave it out, {_USAGE}")


def _name(obj: Any) -> str:  # an optimizer's repr runs over many lines
    if isinstance(obj, (str, int, float)):
        return repr(obj)[:80]
    return f"<{type(obj).__module__}.{type(obj).__qualname__}>"


def _kind(obj: Any) -> str:
    if hasattr(obj, "param_groups") and hasattr(obj, "step"):
        return "an optimizer"
    if hasattr(obj, "get_last_lr") or hasattr(obj, "last_epoch"):
        return "an LR scheduler"
    if hasattr(obj, "get_scale") and hasattr(obj, "unscale_"):
        return "a grad scaler"
    return f"a {type(obj).__name__}"
