"""Loader for a Parquet table of per-step metrics: a history DataFrame saved with ``to_parquet``.

W&B's ``run.history()`` (``_step``, ``train/loss``, ...), a Polars frame, a trainer's metrics
written as Parquet: a step column and a loss column, recognised by name or named with
``--step-col`` / ``--loss-col``, as for a CSV. The sniff reads the file's schema only (its footer),
so a folder of data shards is passed over without reading them.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sentinel.analyze.loaders import PARQUET_SUFFIXES, LoadOptions, RunData
from sentinel.analyze.loaders.generic_table import pick_columns
from sentinel.analyze.loaders.keys import MAX_COLUMNS, canonical_key, is_analysis_key, loss_components, sniff_columns
from sentinel.analyze.loaders.numeric_table import step_unit, sum_loss_components, table_steps
from sentinel.analyze.loaders.textlog import run_name

NAME = "parquet_table"
DESCRIPTION = "Parquet tables with a step and a loss column (a history DataFrame's to_parquet)"
SNIFF_TAKES_OPTIONS = True  # --step-col / --loss-col name columns a sniff counts


def sniff(path: str | Path, options: LoadOptions | None = None) -> bool:
    """True for a Parquet file whose columns include a step and a loss.

    Example:
        >>> sniff("/nonexistent.parquet")
        False
    """
    names = columns_of(path)
    if names is None:
        return False
    options = options or LoadOptions()
    step, (loss, _) = sniff_columns(names, options.step_col, options.loss_col)
    return step is not None and loss is not None


def why_not(path: str | Path) -> str | None:
    """For a Parquet file without a step or a loss column it knows: one line listing its columns and
    naming the options; for a file that is not Parquet, that; None for anything else.

    Example:
        >>> why_not("/nonexistent.parquet") is None
        True
    """
    path = Path(path)
    if path.suffix.lower() not in PARQUET_SUFFIXES or not path.is_file():
        return None
    names = columns_of(path)
    if names is None:
        return f"{path}: named .parquet but not a Parquet file (no Parquet footer could be read)"
    shown = ", ".join(names[:30]) + (f", ... ({len(names)} in all)" if len(names) > 30 else "")
    return f"{path}: a Parquet table with no step and loss columns it knows among: {shown}; name them with " \
           "--step-col and --loss-col"


def columns_of(path: str | Path) -> list[str] | None:
    """The column names of a Parquet file (from its footer), or None where it is not one."""
    path = Path(path)
    if path.suffix.lower() not in PARQUET_SUFFIXES or not path.is_file():
        return None
    import pyarrow.parquet as pq

    try:
        return [str(name) for name in pq.read_schema(path).names]
    except Exception:  # noqa: BLE001 - not Parquet, or damaged: not this loader's file
        return None


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read a Parquet table's step, loss and numeric columns (at most
    :data:`~sentinel.analyze.loaders.keys.MAX_COLUMNS`, the analysis' own first).

    Raises:
        ValueError: not a Parquet file, no step or loss column (the message lists the columns).

    Example:
        >>> run = load("history.parquet")[0]  # doctest: +SKIP
        >>> run.steps["loss"].idxmin()  # doctest: +SKIP
    """
    options = options or LoadOptions()
    names = columns_of(path)
    if names is None:
        raise ValueError(f"{path}: not a Parquet file")
    warnings: list[str] = []
    step_col, loss_col = pick_columns(names, options, path, warnings)
    wanted = [step_col, loss_col] + [c for c in names if c not in (step_col, loss_col)]
    if len(wanted) > MAX_COLUMNS:  # the analysis' own keys first, then the others, up to the cap
        rest = sorted(wanted[2:], key=lambda c: not is_analysis_key(canonical_key(c)))
        warnings.append(f"{Path(path).name}: {len(wanted) - MAX_COLUMNS} column(s) dropped: at most "
                        f"{MAX_COLUMNS} are read")
        wanted = wanted[:2] + rest[:MAX_COLUMNS - 2]
    try:
        table = pd.read_parquet(path, columns=[c for c in dict.fromkeys(wanted) if c in names])
    except OSError as error:
        if error.errno is not None:  # the file system's (permissions, a vanished file): said as such
            raise
        # pyarrow's own, for damaged pages (no errno): not a permissions problem
        raise ValueError(f"{path}: a damaged Parquet file: its footer reads, its data does not "
                         f"({' '.join(str(error).split())}); "
                         "write or copy it again") from None
    if loss_col not in table.columns:  # the sum of the loss's components (see pick_columns)
        sum_loss_components(table, loss_components(table.columns), path, warnings)
    steps = table_steps(table, step_col, loss_col, path, warnings, keep_nan_eval=True)
    steps, unit = step_unit(step_col, steps, path, warnings)
    return [RunData(name=run_name(path), path=str(path), source=NAME, steps=steps,
                    meta={"format": NAME, "columns": names, **unit}, warnings=warnings)]
