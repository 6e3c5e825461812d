"""The part of a damaged JSON array that can still be read: the items that come whole before the
damage (a history dumped with ``json.dump`` and killed mid-write, a disk that filled up)."""

from __future__ import annotations

import json


def items_before_damage(text: str, start: int = 0) -> tuple[list, bool]:
    """The items of a damaged JSON array that come whole before the damage (a file cut off while
    written), and whether the array was closed (the damage is text after it: a second array
    appended); no items where none comes whole. ``start``: where the array starts in ``text``.

    Example:
        >>> items_before_damage('[{"loss": 2.5}, {"loss": 2.4}, {"lo')
        ([{'loss': 2.5}, {'loss': 2.4}], False)
    """
    decoder = json.JSONDecoder()
    at = _after_space(text, start)
    if not text.startswith("[", at):
        return [], False
    items: list = []
    at += 1
    while True:
        at = _after_space(text, at)
        try:
            item, at = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            return items, False
        items.append(item)
        at = _after_space(text, at)
        if not text.startswith(",", at):
            return items, text.startswith("]", at)
        at += 1


def _after_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at
