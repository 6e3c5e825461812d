"""A log's words for epoch, step and loss in other languages, written in English for the readers.

The readers know a line's step and loss by their English names (and a few Chinese ones): a
tutorial's "====> エポック 1/10, 平均損失: 3.25", a Russian script's "Эпоха [1/5], Train Loss: 3.21",
a Korean SSD trainer's "반복 10 || 손실: 16.58", a German LSTM's "Epoche 3/100 - Verlust: 0.52"
were all refused, and --step-col could not name the step ("keys found: loss"). The words below
are written as the English ones before the readers look, where the text's distinct lines hold one.

Example:
    >>> in_english("====> エポック 1/10, 平均損失: 3.25\\n")[0]
    '====> Epoch 1/10, avg loss: 3.25\\n'
"""

from __future__ import annotations

import re

from sentinel.analyze.loaders.log_lines import Lines

# Written without spaces around them (Japanese, Korean): replaced wherever they stand ("平均損失": "avg loss").
_JOINED = {"エポック": "Epoch ", "에폭": "Epoch ", "에포크": "Epoch ", "損失": "loss", "손실": "loss",
           "ステップ": "step ", "스텝": "step ", "반복": "iter ", "訓練": "train ", "平均": "avg ", "평균": "avg "}
# Words of their own (Cyrillic and Latin scripts): only as whole words ("Verlustfunktion" is none).
_WORDS = {"Эпоха": "Epoch", "эпоха": "epoch", "Епоха": "Epoch", "епоха": "epoch", "Époque": "Epoch",
          "époque": "epoch", "Época": "Epoch", "época": "epoch", "Epoche": "Epoch", "Epoca": "Epoch", "Epoka": "Epoch",
          "Потери": "Loss", "потери": "loss", "Потеря": "Loss", "потеря": "loss", "Втрати": "Loss", "втрати": "loss",
          "Verlust": "Loss", "Perte": "Loss", "perte": "loss", "Pérdida": "Loss", "pérdida": "loss", "Perda": "Loss",
          "perda": "loss", "Perdita": "Loss", "Шаг": "Step", "шаг": "step", "Итерация": "Iteration",
          "итерация": "iteration", "Schritt": "Step", "Iteración": "Iteration", "Iteração": "Iteration"}
_ENGLISH = {**_JOINED, **_WORDS}
_FOREIGN = re.compile("|".join(map(re.escape, _JOINED)) + r"|(?<!\w)(?:" + "|".join(map(re.escape, _WORDS))
                      + r")(?!\w)")
# Lines as distinct as this, at most, are asked for the words that are ASCII ("Verlust", "Epoche"): a log of
# lines that never repeat is not searched whole for them.
_DISTINCT_MOST = 1 << 16
_ASCII_WORDS = tuple(word for word in _WORDS if word.isascii())


def in_english(text: str, lines: Lines | None = None) -> tuple[str, Lines]:
    """``text`` with the words of :data:`_ENGLISH` written in English, and its :class:`Lines`
    (``lines``, where nothing changed).

    Example:
        >>> in_english("Epoche 3/100 - Verlust: 0.52\\n")[0], in_english("Verlustfunktion: MSE\\n")[0]
        ('Epoch 3/100 - Loss: 0.52\\n', 'Verlustfunktion: MSE\\n')
    """
    held = Lines.of(text, lines)
    distinct = held.distinct_text()
    ascii_words = len(distinct) <= _DISTINCT_MOST and any(word in distinct for word in _ASCII_WORDS)
    if not ascii_words and (text.isascii() or _FOREIGN.search(distinct) is None):
        return text, held
    english = _FOREIGN.sub(lambda m: _english(m, text), text)
    return (text, held) if english == text else (english, Lines(english))


def _english(match: re.Match, text: str) -> str:
    word = _ENGLISH[match.group(0)]  # (a space after a joined word, unless one follows it already)
    return word.rstrip() if word.endswith(" ") and text[match.end():match.end() + 1].isspace() else word
