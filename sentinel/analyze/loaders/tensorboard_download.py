"""Loader for one scalar downloaded from TensorBoard's web page (its CSV or JSON link).

The download holds one tag's points, ``Wall time,Step,Value`` rows (CSV) or ``[[wall_time,
step, value], ...]`` (JSON); the tag is only in the file name TensorBoard gives it,
``run-<run>-tag-<tag>.csv`` (a ``/`` in the tag becomes ``_``). The value is read as the
loss (whoever downloaded it chose the series to look at), said in a warning where the name does
not call it one; a download of the learning rate, the grad norm or the loss scale alone is
refused (nothing to judge without the loss).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LoadOptions, RunData
from sentinel.analyze.loaders.keys import canonical_key, looks_like_eval_loss, looks_like_loss
from sentinel.analyze.loaders.numeric_table import merge_steps, step_values, table_trainings
from sentinel.analyze.loaders.textlog import read_head, read_text, trainings_note

NAME = "tensorboard_download"
DESCRIPTION = "a scalar downloaded from TensorBoard's page (Wall time,Step,Value CSV or [[t, step, v], ...] JSON)"

_HEADER = re.compile(r"^\ufeff?Wall time,Step,Value\s*$")
_JSON_START = re.compile(r"^\s*\[\s*\[\s*[-\d.eE+]+\s*,\s*\d+\s*,")
_NAME = re.compile(r"^run[-_](?P<run>.*?)[-_]tag[-_](?P<tag>.+)$")
_HEAD_BYTES = 64 * 1024
# The largest JSON download read (TensorBoard's page offers a few thousand points: kilobytes).
MAX_JSON_BYTES = 256 << 20


def sniff(path: str | Path) -> bool:
    """True for a TensorBoard scalar download (by its header or JSON shape).

    Example:
        >>> sniff("/nonexistent.csv")
        False
    """
    p = Path(path)
    head = read_head(p, limit=_HEAD_BYTES)  # (the size the table sniffs read: one read of the file's head)
    if not head:
        return False
    first = head.split("\n", 1)[0].rstrip("\r")
    # (by its content, whatever its name: a download saved or pasted as a .txt or a .log)
    return bool(_HEADER.match(first)) or bool(_JSON_START.match(head))


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read one downloaded scalar.

    Returns:
        One :class:`RunData` named after the download's run, its one series under the tag's key.

    Raises:
        ValueError: no point in the file, or a JSON file that is not a list of points.

    Example:
        >>> run = load("run-version_0-tag-train_loss.csv")[0]  # doctest: +SKIP
        >>> run.name, list(run.steps.columns)  # doctest: +SKIP
        ('version_0', ['loss'])
    """
    del options  # one series: nothing to choose
    p = Path(path)
    warnings: list[str] = []
    step, value = _read_json(p) if _JSON_START.match(read_head(p, limit=_HEAD_BYTES) or "") else _read_csv(p, warnings)
    if not len(step):
        raise ValueError(f"{path}: a TensorBoard download with no points")
    named = _NAME.match(p.stem)
    tag = named.group("tag") if named else None
    key = _key(tag)
    if key != metrics.LOSS:
        raise ValueError(f"{path}: TensorBoard's download of the tag {tag!r} ({key}) alone: nothing to judge "
                         "without the loss; download the loss tag too, or analyze the run's event files")
    if tag is None:
        warnings.append(f"{p.name}: read as the loss (a TensorBoard download names its tag only in its file "
                        "name, run-<run>-tag-<tag>.csv, and this one's name does not)")
    elif key == metrics.LOSS and canonical_key(tag) != metrics.LOSS:
        what = "an evaluation's loss" if looks_like_eval_loss(tag) else \
            "a loss" if looks_like_loss(tag) else "not named as a loss"
        warnings.append(f"{p.name}: tag {tag!r} ({what}) read as the loss")
    run = named.group("run").strip("._-") if named else ""  # "run-.-tag-loss.csv": the logdir itself
    name = run or p.stem
    # Points in the order written: a step counter that starts again is another session's (a training
    # launched again into the logdir); sorted together by step, their points interleaved.
    parts = table_trainings(pd.DataFrame({metrics.STEP: step, key: value}), metrics.STEP, key) \
        if key == metrics.LOSS else None
    if parts is None:
        steps = merge_steps(pd.DataFrame({key: value}, index=pd.Index(step, name=metrics.STEP)))
        return [RunData(name=name, path=str(path), source=NAME, steps=steps,
                        meta={"format": NAME, "tag": tag}, warnings=warnings)]
    note = trainings_note(path, len(parts), "that each start from their first step (sessions written to one "
                          "logdir)", name)
    return [RunData(name=f"{name}#{k}", path=str(path), source=NAME,
                    steps=merge_steps(pd.DataFrame({key: value[rows]}, index=pd.Index(step[rows], name=metrics.STEP))),
                    meta={"format": NAME, "tag": tag}, warnings=[note, *warnings]) for k, rows in enumerate(parts, 1)]


def _key(tag: str | None) -> str:
    """Where the series goes: the loss, unless the tag is another metric sentinel reads."""
    key = canonical_key(tag) if tag is not None else metrics.LOSS
    return key if key in (metrics.LR, metrics.GRAD_NORM_TOTAL, metrics.LOSS_SCALE) else metrics.LOSS


def _read_csv(path: Path, warnings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    table = pd.read_csv(path, usecols=["Step", "Value"], dtype=str, keep_default_na=False)
    step, keep = step_values(table["Step"], "Step", path, warnings)  # non-integral or huge: skipped, said
    value = pd.to_numeric(table["Value"], errors="coerce").to_numpy(dtype="float64")
    text = np.isnan(value) & ~table["Value"].str.strip().str.lower().isin(("nan", "-nan")).to_numpy()
    if (text & keep).any():
        warnings.append(f"{path.name}: {int((text & keep).sum())} row(s) whose Value is not a number were skipped")
    return step[~text[keep]], value[keep & ~text]


def _read_json(path: Path) -> tuple[np.ndarray, np.ndarray]:
    if path.stat().st_size > MAX_JSON_BYTES:
        raise ValueError(f"{path}: over {MAX_JSON_BYTES >> 20} MB, too large for a TensorBoard download")
    try:
        points = json.loads(read_text(path))
        rows = [(int(p[1]), float(p[2])) for p in points if isinstance(p, list) and len(p) == 3]
    except (ValueError, TypeError, OverflowError, RecursionError) as err:
        raise ValueError(f"{path}: not a TensorBoard download ([[wall_time, step, value], ...]): {err}") from None
    if not rows:
        return np.array([], dtype="int64"), np.array([])
    step, value = zip(*rows)
    return np.array(step, dtype="int64"), np.array(value, dtype="float64")
