"""The part of damaged JSON that can still be read: the items that come whole before the damage (a
history dumped with ``json.dump`` and killed mid-write, a disk that filled up, a paste of some of
an array's objects)."""

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


def objects_in_sequence(text: str) -> tuple[list, int | None]:
    """The JSON values of ``text`` one after another, separated by white space or commas (a paste of
    some of a pretty-printed array's objects: ``trainer_state.json``'s ``log_history`` without its
    ``[``), and where the first that is not whole starts (None: every one was; closing ``]`` or
    ``}`` after the last are the array's end, the paste's start cut off before its opening).

    Example:
        >>> objects_in_sequence('  {"loss": 2.5},\\n  {"loss": 2.4}\\n]\\n')
        ([{'loss': 2.5}, {'loss': 2.4}], None)
        >>> objects_in_sequence('{"loss": 2.5},\\n{"lo')
        ([{'loss': 2.5}], 15)
    """
    decoder = json.JSONDecoder()
    items: list = []
    at = _after_space(text, 0)
    while at < len(text):
        try:
            item, at = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            return items, (None if text[at:].strip(" \t\r\n]},") == "" else at)
        items.append(item)
        at = _after_space(text, at)
        if text.startswith(",", at):
            at = _after_space(text, at + 1)
    return items, None


def _after_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at
