"""A loss history saved with NumPy, named on its own: ``np.save("losses.npy", losses)`` or
``np.savez("history.npz", loss=..., val_loss=...)``.

Read with ``allow_pickle=False``: an array of Python objects (which only unpickling, running code
from the file, could load) is refused. Each array's header (its shape and type) is read before
its data, so a file that is no loss history is never loaded whole. Not a loader of the directory
walk: a folder's ``.npy`` files are data (a dataset, embeddings), not runs.

A ``.npy`` of one row of numbers is the loss, numbered 1, 2, 3, ...; of two columns, a step that
rises and the loss. In a ``.npz`` the loss is the array whose name says so (``loss``,
``train_loss``, ``losses``, ``--loss-col``), the steps an array of rising whole numbers named as
steps (``step``, ``steps``, ``iteration``), else 1, 2, 3, ...; the other arrays as long as the loss
are read beside it, and a warning names those left out (another length: per epoch, not per step).
"""

from __future__ import annotations

import warnings
import zipfile
from pathlib import Path
from tokenize import TokenError

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LoadOptions, RunData
from sentinel.analyze.loaders.keys import canonical_key, loss_column, rises_by_whole_numbers, step_column
from sentinel.analyze.loaders.textlog import run_name

NAME = "numpy_saved"
SUFFIXES = (".npy", ".npz")
# More numbers than this in a file is data, not a loss history (and would be read whole: 80 MB).
MAX_VALUES = 10_000_000
MIN_VALUES = 3


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read a loss history saved with ``np.save`` / ``np.savez``.

    Raises:
        ValueError: the file holds no loss history (the message says what it holds instead).

    Example:
        >>> load("/nonexistent.npy")
        Traceback (most recent call last):
        ...
        ValueError: /nonexistent.npy: not readable as a NumPy file ([Errno 2] No such file or directory: '/nonexistent.npy')
    """
    options = options or LoadOptions()
    path = Path(path)
    try:
        with warnings.catch_warnings():  # a header Python 2 wrote: NumPy warns that it parsed it slowly
            warnings.simplefilter("ignore", UserWarning)
            if path.suffix.lower() == ".npz":
                return [_load_npz(path, options)]
            return [_load_npy(path)]
    except (OSError, EOFError, zipfile.BadZipFile) as err:
        raise ValueError(f"{path}: not readable as a NumPy file ({err})") from None


def _load_npy(path: Path) -> RunData:
    with open(path, "rb") as f:
        shape, _ = _header(f, str(path))
        if not (len(shape) == 1 or (len(shape) == 2 and shape[1] in (1, 2))):
            raise ValueError(f"{path}: an array of shape {shape}: not a loss history (one row of losses, or a "
                             "column of steps beside a column of losses)")
        f.seek(0)
        values = _read(f, str(path))
    if values.ndim == 2 and values.shape[1] == 2:
        step = values[:, 0]
        if not rises_by_whole_numbers(step):
            raise ValueError(f"{path}: two columns, the first not a step (whole numbers that rise row by row)")
        steps = pd.DataFrame({metrics.LOSS: values[:, 1]}, index=pd.Index(step.astype("int64"), name=metrics.STEP))
        note = f"{path.name}: an array of two columns: read as the step and the loss"
    else:
        values = values.reshape(-1)
        steps = pd.DataFrame({metrics.LOSS: values}, index=pd.RangeIndex(1, len(values) + 1, name=metrics.STEP))
        note = (f"{path.name}: one array of {len(values)} numbers: read as the loss, numbered 1, 2, 3, ... in order "
                "(np.save keeps no steps; an array taken every N steps is N steps apart)")
    return RunData(name=run_name(path), path=str(path), source=NAME, steps=steps,
                   meta={"format": NAME}, warnings=[note])


def _load_npz(path: Path, options: LoadOptions) -> RunData:
    arrays: dict[str, np.ndarray] = {}
    other: list[str] = []
    read = 0  # numbers read so far: the file's arrays together stay under MAX_VALUES
    with zipfile.ZipFile(path) as archive:
        for member in archive.namelist():
            name = member[:-4] if member.endswith(".npy") else member
            with archive.open(member) as f:
                try:
                    shape, _ = _header(f, f"{path.name}:{name}")
                except ValueError:
                    other.append(f"{name} (not one row of numbers)")
                    continue
                if len(shape) != 1:
                    other.append(f"{name} (not one row of numbers)")
                    continue
                if read + shape[0] > MAX_VALUES:
                    other.append(f"{name} (past {MAX_VALUES:,} numbers in all)")
                    continue
                read += shape[0]
                f.seek(0)
                arrays[name] = _read(f, f"{path}:{name}")
    names = list(arrays)
    try:  # an option naming no array: said with the file's name
        loss_name, inferred = loss_column(names, options.loss_col)
        step_name = step_column([n for n in names if n != loss_name and len(arrays[n]) == len(arrays[loss_name])]
                                if loss_name is not None else names, options.step_col)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    if loss_name is None:
        raise ValueError(f"{path}: no array named as the loss among: {', '.join(names) or 'none'}"
                         f"{' (left out: ' + ', '.join(other) + ')' if other else ''}; name it with --loss-col")
    loss = arrays[loss_name]
    warnings = []
    if step_name is not None and rises_by_whole_numbers(arrays[step_name]):
        index = pd.Index(arrays[step_name].astype("int64"), name=metrics.STEP)
    else:
        step_name = None
        index = pd.RangeIndex(1, len(loss) + 1, name=metrics.STEP)
        warnings.append(f"{path.name}: no array of steps: the loss read in order, numbered 1, 2, 3, ...")
    columns = {metrics.LOSS: loss}
    left = []
    for name, values in arrays.items():
        if name in (loss_name, step_name):
            continue
        if len(values) == len(loss):
            key = canonical_key(name)
            columns[key if key != metrics.LOSS else name.lower()] = values  # a loss --loss-col passed over
        else:
            left.append(f"{name} ({len(values)} numbers, not {len(loss)})")
    if inferred or loss_name != metrics.LOSS:
        warnings.append(f"{path.name}: loss read from the array {loss_name!r}")
    if left or other:
        warnings.append(f"{path.name}: arrays left out: {', '.join(left + other)}")
    return RunData(name=run_name(path), path=str(path), source=NAME,
                   steps=pd.DataFrame(columns, index=index), meta={"format": NAME}, warnings=warnings)


def _read(f, what: str) -> np.ndarray:
    try:
        return np.lib.format.read_array(f, allow_pickle=False).astype("float64")
    except ValueError as err:  # its data cut short
        raise ValueError(f"{what}: {err}") from None


def _header(f, what: str) -> tuple[tuple[int, ...], np.dtype]:
    """An array's shape and type, read from its header; refused where it is not numbers, or too
    many of them."""
    try:
        version = np.lib.format.read_magic(f)
        shape, _, dtype = (np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                           else np.lib.format.read_array_header_2_0(f))
    except (ValueError, SyntaxError, TokenError) as err:  # a damaged header (NumPy reads old ones with tokenize)
        raise ValueError(f"{what}: not a NumPy array ({err})") from None
    if dtype.kind not in "fiu":
        raise ValueError(f"{what}: an array of {dtype} (not numbers; objects are never unpickled)")
    size = int(np.prod(shape))
    if not MIN_VALUES <= size <= MAX_VALUES:
        raise ValueError(f"{what}: an array of {size} numbers: not a loss history")
    return shape, dtype
