"""Loader for DeepSpeed's CSV monitor: a job's folder of one CSV per metric, read as one run.

With ``"csv_monitor": {"enabled": true, "output_path": "logs/", "job_name": "run1"}`` DeepSpeed
appends each event ``(name, value, step)`` to ``logs/run1/<name>.csv``, the name's ``/`` and spaces
written as ``_``, the file starting with the header ``step,<the name's last part>``: the engine's
own ``Train/Samples/train_loss`` goes to ``Train_Samples_train_loss.csv`` (``step,train_loss``),
beside ``Train_Samples_lr.csv`` and, in fp16, ``Train_Samples_loss_scale.csv``. Their step is the
engine's count of samples seen (``global_samples``), not of optimizer steps. A process started
again with the same job name appends to the same files, each with its header again.

The run is the folder; it is claimed through its first metric file (in walk order) so that it is
read once, and its other metric files are the same run (:func:`part_of_run`).
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path

import pandas as pd

from sentinel.analyze.loaders import LOGGED_NAN, LoadOptions, RunData
from sentinel.analyze.loaders.keys import loss_column
from sentinel.analyze.loaders.numeric_table import metric_series_frame, step_values
from sentinel.analyze.loaders.samples_steps import as_optimizer_steps
from sentinel.analyze.loaders.textlog import text_encoding

NAME = "deepspeed_csv"
DESCRIPTION = "DeepSpeed's CSV monitor (a job's folder of <Train_Samples_train_loss>.csv: step, value per metric)"

# The engine's own events: their step is the number of samples seen.
_SAMPLES_PREFIX = "Train_Samples_"


def sniff(path: str | Path) -> bool:
    """True for a metric file of a DeepSpeed CSV-monitor folder: named on its own it stands for
    its run; a directory walk offers only the first (:func:`part_of_run`).

    Example:
        >>> sniff("/nonexistent/run1/Train_Samples_train_loss.csv")
        False
    """
    path = Path(path)
    return metric_name(path) is not None and is_run_dir(path.parent)


def part_of_run(path: str | Path) -> bool:
    """A metric file of a DeepSpeed CSV-monitor folder other than its first: its first reads it.

    Example:
        >>> part_of_run("/nonexistent/run1/Train_Samples_lr.csv")
        False
    """
    path = Path(path)
    if metric_name(path) is None or not is_run_dir(path.parent):
        return False
    return _metric_files(path.parent)[:1] != [path]


def is_run_dir(folder: Path) -> bool:
    """Whether ``folder`` holds a DeepSpeed CSV monitor's files: two or more metric files named
    after an event with a group (``<group>_<name>.csv`` starting ``step,<name>``), so that a
    user's own ``loss.csv`` and ``lr.csv`` stay tables of their own."""
    grouped = [f for f in _metric_files(folder) if f.stem != metric_name(f)]
    return len(grouped) >= 2


def metric_name(path: Path) -> str | None:
    """The metric a file holds, from its header ``step,<name>``, where the file is named after
    it (``<name>.csv`` or ``<group>_<name>.csv``); else None."""
    if path.suffix != ".csv" or not path.is_file():
        return None
    try:
        with path.open("r", encoding=text_encoding(path), errors="replace", newline="") as f:
            header = next(csv.reader([f.readline(4096)]), [])
    except OSError:
        return None
    if len(header) != 2 or header[0] != "step" or not header[1]:
        return None
    name = header[1]
    written = name.replace("/", "_").replace(" ", "_")
    return name if path.stem == written or path.stem.endswith("_" + written) else None


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read every metric file of the DeepSpeed CSV-monitor folder that ``path`` is in (or is).

    Args:
        path: a metric file of the folder, or the folder.
        options: ``loss_col`` names the loss metric (its header name, ``train_loss``, or its
            file's name without ``.csv``) when it is not recognised.

    Returns:
        One :class:`RunData` named after the folder (the job's name); where the loss is the
        engine's ``Train/Samples/train_loss``, its steps are the samples seen divided by the
        samples per step (:func:`~sentinel.analyze.loaders.samples_steps.as_optimizer_steps`).

    Raises:
        ValueError: not such a folder, or no loss metric.

    Example:
        >>> run = load("logs/run1")[0]  # doctest: +SKIP
        >>> run.steps.columns.tolist()  # doctest: +SKIP
        ['loss', 'loss_scale', 'lr']
    """
    options = options or LoadOptions()
    folder = Path(path) if Path(path).is_dir() else Path(path).parent
    if not is_run_dir(folder):
        raise ValueError(f"{path}: not a DeepSpeed CSV-monitor folder (<job_name>/<group>_<name>.csv files "
                         "starting with step,<name>)")
    series: dict[str, pd.Series] = {}
    stems: dict[str, str] = {}  # key -> its file's stem, for --loss-col by file name
    warnings: list[str] = []
    for file in _metric_files(folder):
        name = metric_name(file).rsplit("/", 1)[-1]  # a header of the whole event name: its last part too
        key = name if name not in series else file.stem  # two groups' "lr": the second by its file
        if options.loss_col is not None and options.loss_col == file.stem:
            key = file.stem
        table = pd.read_csv(file, dtype=str, encoding=text_encoding(file), encoding_errors="replace",
                            on_bad_lines="skip", keep_default_na=False)
        table = table[table["step"] != "step"]  # a header again: the job was started again
        step, keep = step_values(table["step"], "step", file.name, warnings)
        values = pd.to_numeric(table[table.columns[1]], errors="coerce").to_numpy(dtype="float64")[keep]
        # a step logged again (a restart from a checkpoint): its last value
        series[key] = pd.Series(values, index=step).groupby(level=0).last()
        stems[key] = file.stem
    loss_key, _ = loss_column(list(series), options.loss_col)
    logged_nan: dict[str, list[int]] = {}
    steps = metric_series_frame(series, options.loss_col, folder, warnings, what="metric", logged_nan=logged_nan)
    run = RunData(name=folder.resolve().name, path=str(folder), source=NAME, steps=steps,
                  meta={"format": NAME, "metrics": {k: stems[k] for k in series}, LOGGED_NAN: logged_nan},
                  warnings=warnings)
    if loss_key is not None and stems[loss_key].startswith(_SAMPLES_PREFIX):
        run = as_optimizer_steps(run)  # the engine's events are at the samples seen
    return [run]


def _metric_files(folder: Path) -> list[Path]:
    """The folder's metric files, sorted by name (the order a directory walk offers them)."""
    try:
        stamp = folder.stat().st_mtime_ns
    except OSError:
        return []
    return list(_metric_files_at(str(folder), stamp))


@functools.lru_cache(maxsize=64)
def _metric_files_at(folder: str, stamp: int) -> tuple[Path, ...]:
    # Each file of a folder is sniffed in a walk: the folder's headers are read once (until it changes).
    try:
        files = sorted(f for f in Path(folder).iterdir() if f.suffix == ".csv")
    except OSError:
        return ()
    return tuple(f for f in files if metric_name(f) is not None)
