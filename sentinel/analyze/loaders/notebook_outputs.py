"""The training log a Jupyter notebook holds: the text its cells printed, in cell order.

A notebook trained in Colab or Kaggle keeps what the training printed in its cells' outputs:
``stream`` outputs (``print``, Keras' ``fit`` bars, tqdm, the Trainer's logging), an
``execute_result`` or ``display_data`` as its ``text/plain``, and the Hugging Face Trainer's
progress table as HTML only (``<table>`` of Step, Training Loss, Validation Loss): its rows are
written as tab-separated lines, as a table copied out of the browser reads. A cell's ``error``
output keeps its traceback. The text is read as any pasted log is (:mod:`textlogs`); the notebook
is parsed as JSON data, its code never run.

Example:
    >>> import json, tempfile
    >>> cell = {"cell_type": "code", "source": "fit()", "outputs": [
    ...     {"output_type": "stream", "name": "stdout", "text": ["step 1 loss 2.5\\n", "step 2 loss 2.4\\n"]}]}
    >>> with tempfile.NamedTemporaryFile("w", suffix=".ipynb") as f:
    ...     _ = f.write(json.dumps({"nbformat": 4, "cells": [cell]})); f.flush()
    ...     output_text(f.name)
    'step 1 loss 2.5\\nstep 2 loss 2.4\\n'
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

# An HTML table's rows and cells, and any tag inside a cell (the Trainer's "<td>0.6931</td>").
_ROW = re.compile(r"<tr\b[^>]*>(.*?)</tr>", re.IGNORECASE | re.DOTALL)
_CELL = re.compile(r"<t[hd]\b[^>]*>(.*?)</t[hd]>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]+>")
# A terminal's colour codes in a traceback's lines.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def output_text(path: str | Path) -> str | None:
    """The text ``path``'s cells printed, in order (see the module docstring); None where its cells
    printed nothing.

    Raises:
        OSError: the file cannot be read.
        ValueError: the file is no notebook (not JSON data with cells).
    """
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            notebook = json.load(f)
    except (ValueError, RecursionError):
        raise ValueError("not JSON data") from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if cells is None and isinstance(notebook, dict) and isinstance(notebook.get("worksheets"), list):
        cells = [cell for sheet in notebook["worksheets"] if isinstance(sheet, dict)  # nbformat 3
                 for cell in sheet.get("cells") or []]
    if not isinstance(cells, list):
        raise ValueError("JSON data with no cells")
    pieces = [text for cell in cells if isinstance(cell, dict) and isinstance(cell.get("outputs"), list)
              if (text := _cell_text(cell["outputs"]))]
    return "".join(piece for piece in pieces if piece) or None


def _cell_text(outputs: list) -> str:
    """One cell's printed text, less its evaluations' bars (:func:`_without_evaluations`). An error's
    traceback only where the cell printed something else: a cell that printed nothing but its error (a
    plot or a metric after the training, a name not defined) did not stop a training the earlier cells
    printed, though its traceback follows their last step line."""
    pieces = [(output.get("output_type") in ("error", "pyerr"), _ended(piece)) for output in outputs
              if isinstance(output, dict) and (piece := _output_text(output))]
    printed = _without_evaluations("".join(piece for error, piece in pieces if not error))
    if not printed.strip():  # (an evaluate's or predict's bar is no printing of a training)
        return printed
    return _without_evaluations("".join(piece for _, piece in pieces))


def _ended(text: str) -> str:
    return text if text.endswith(("\n", "\r")) else text + "\n"


# A Keras progress bar's line (its count, then the bar: "313/313 [====...] - 1s 2ms/step - loss: 0.35",
# Keras 3's "313/313 ━━━━━━━━ 1s 2ms/step - loss: 0.35"), and the line a fit prints before each epoch.
_COLOUR = r"(?:\x1b\[[0-9;]*m)*"
_KERAS_BAR = re.compile(rf"^[^\S\n]*{_COLOUR}\d+/\d+{_COLOUR}[^\S\n]+(?:\[[=>.]|{_COLOUR}━)", re.MULTILINE)
_KERAS_EPOCH = re.compile(r"^[^\S\n]*Epoch \d+/\d+[^\S\n]*$", re.MULTILINE)


def _without_evaluations(text: str) -> str:
    """One cell's printed text, less the Keras progress bars of a cell that printed no ``Epoch k/K``
    line: ``model.evaluate()``'s and ``predict()``'s bars, whose ``loss:`` is a test set's (another
    model's, often), read as the training's last epoch where they followed a fit.

    Example:
        >>> _without_evaluations("313/313 [==============================] - 1s 2ms/step - loss: 0.35\\n")
        ''
        >>> _without_evaluations("Epoch 1/2\\n10/10 [====] - loss: 0.9\\n")
        'Epoch 1/2\\n10/10 [====] - loss: 0.9\\n'
    """
    if _KERAS_EPOCH.search(text) is not None or _KERAS_BAR.search(text) is None:
        return text
    return "".join(line for line in text.splitlines(keepends=True) if _KERAS_BAR.match(line) is None)


def _output_text(output: dict) -> str:
    """One output's text: a stream's, a result's ``text/plain`` (its HTML table's rows where the
    plain text is only the object's name), an error's traceback."""
    kind = output.get("output_type")
    if kind == "stream":
        return _joined(output.get("text"))
    if kind in ("execute_result", "display_data", "pyout"):
        data = output.get("data") if isinstance(output.get("data"), dict) else output
        shown = _joined(data.get("text/html") or data.get("html"))
        if "<table" in shown.lower():  # the Trainer's progress table ("<IPython.core.display.HTML object>")
            return _table_lines(shown)
        return _joined(data.get("text/plain") or data.get("text"))
    if kind in ("error", "pyerr"):
        lines = output.get("traceback")
        return _ANSI.sub("", "\n".join(str(line) for line in lines)) if isinstance(lines, list) else ""
    return ""


def _joined(text) -> str:
    """An output's text, kept as a string or as a list of lines (nbformat writes either)."""
    if isinstance(text, list):
        return "".join(str(part) for part in text)
    return text if isinstance(text, str) else ""


def _table_lines(shown: str) -> str:
    """An HTML table's rows as tab-separated lines (tags dropped, entities decoded).

    Example:
        >>> _table_lines("<table><tr><th>Step</th><th>Training Loss</th></tr>"
        ...              "<tr><td>500</td><td>0.69</td></tr></table>")
        'Step\\tTraining Loss\\n500\\t0.69\\n'
    """
    lines = []
    for row in _ROW.findall(shown):
        cells = [html.unescape(_TAG.sub("", cell)).strip() for cell in _CELL.findall(row)]
        if cells:
            lines.append("\t".join(cells) + "\n")
    return "".join(lines)
