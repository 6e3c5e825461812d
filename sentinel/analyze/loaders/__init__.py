"""Loaders: each turns one kind of log on disk into :class:`RunData` with sentinel's keys.

A loader is a module in this package exposing ``NAME`` (str), ``sniff(path) -> bool`` (is this
file/directory mine? judged by content where it can be) and ``load(path) -> list[RunData]``. One
that sets ``SNIFF_TAKES_OPTIONS = True`` is sniffed as ``sniff(path, options)``: the columns the
user named count (a table whose loss is called "nll" is a table once ``--loss-col nll`` says so).
Register it in ``LOADERS`` below; :func:`discover_runs` walks a directory and asks each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def _no_events() -> pd.DataFrame:
    import pandas as pd  # here: the TensorBoard record reader (a submodule) runs before pandas loads

    return pd.DataFrame(columns=["step", "kind"])


@dataclass
class RunData:
    """One run, whatever it was read from.

    Attributes:
        name: a short label (directory or file name).
        path: where it was read from.
        source: the loader's ``NAME`` ("sentinel", "tensorboard", "csv", ...).
        steps: one row per step, indexed by integer step, columns are metric keys
            (``loss``, ``lr``, ``grad_norm/total``, ``loss_scale``, ...); missing values are NaN.
        events: recorded events (``step``, ``kind``, ...), empty when the source has none.
        meta: anything the source says about the run.
        warnings: what was skipped while reading (truncated lines, unreadable files).
        abandoned: the stretches of history a later one replaced, where the source's steps went
            back (a run resumed from an earlier checkpoint into the same log); ``steps`` holds
            the history written after.
    """

    name: str
    path: str
    source: str
    steps: pd.DataFrame
    events: pd.DataFrame = field(default_factory=_no_events)
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    abandoned: list[AbandonedHistory] = field(default_factory=list)


@dataclass
class AbandonedHistory:
    """A stretch of a run's history that a later one replaced: its log went back from step
    ``last`` to ``resumed_at`` (:mod:`~sentinel.analyze.loaders.went_back`).

    Attributes:
        resumed_at: the first step of the history written after.
        first: the first step replaced (at or after ``resumed_at``).
        last: the last step written before the log went back.
        steps: the history as it stood then, from the run's first step (a steps frame).
        logged_nan: ``{metric key: steps logged as NaN}`` in ``steps`` (as :data:`LOGGED_NAN`);
            None where the source does not tell a NaN logged from a value not logged.
    """

    resumed_at: int
    first: int
    last: int
    steps: pd.DataFrame
    logged_nan: dict[str, list[int]] | None = field(default_factory=dict)


# A Parquet table's file names (the Parquet reader's; the directory walk tells its data shards by them).
PARQUET_SUFFIXES = (".parquet", ".pq")

# RunData.meta key: subdirectories whose series a run took in (TensorBoard's add_scalars writes
# each key into one) or that record it (add_hparams' folder), so a walk over directories does not
# read them as runs of their own.
ADD_SCALARS_DIRS = "add_scalars_dirs"

# RunData.meta key, from a source that tells a value logged as NaN from one not logged
# (TensorBoard stores a NaN as a float value): ``{metric key: steps logged as NaN}`` (a key
# absent: none). Where it is given, a NaN in the steps frame at any other step is absent (a
# record that was not read, e.g. dropped for a bad checksum), never a non-finite value.
LOGGED_NAN = "logged_nan"
# RunData.meta key: "epoch" where each row of the steps frame is an epoch (the step read is an
# epoch count: Keras' History and CSVLogger, Ultralytics' results.csv, a log line per epoch); absent:
# a row is a step. The report then speaks of epochs, and a one-row jump is no outlier batch.
STEP_UNIT = "step_unit"

# RunData.meta key: True where the steps frame is made of overflow lines alone (a paste of
# DeepSpeed's or apex's "Skipping step" lines, no step line around them): every row overflowed
# by construction, so what share of the training's steps did is unknown.
OVERFLOW_ROWS_ONLY = "overflow_rows_only"
# RunData.meta key: the tool's own floor for its dynamic loss scale, where below the analysis's
# (fairseq stops at 1e-4: a scale of 0.5 is its normal range, no collapse).
LOSS_SCALE_MIN = "loss_scale_min"
# RunData.meta key: DeepSpeed's count of skipped optimizer steps, from its progress lines ("step=2000,
# skipped=1999, lr=[...]") in any text log: ``{"first": [step, skipped], "before_last": [...], "last": [...]}``.
SKIPPED_UPDATES = "skipped_updates"


# RunData.meta key: the length a text log's step key was counted across where it started again from its
# first interval with the loss back at its first level (trainings appended to one file: FastSpeech2's
# "Step 100/600000" after each fresh launch), each training a stretch of that many steps.
RESTARTED_LENGTH = "restarted_length"
# RunData.meta key: the step the stretches of RESTARTED_LENGTH are counted from, where it is not the
# run's first step (a later training may start below the first one's first step).
RESTARTED_FROM = "restarted_from"
# RunData.meta key: where RESTARTED_LENGTH splits a log, the crashes that ended a training before the next
# launch (a traceback between its last record line and the next training's first), each as ``meta["crash"]``
# says one, its ``after_step`` as printed: restarted_steps gives each to its training.
CRASHES_BEFORE_RESTARTS = "crashes_before_restarts"
# RunData.meta key: True where each row's loss is a sum over the updates since the row before, over
# batches that grow (spaCy's training table, its compounding batcher): its rise is the sum's, so a spike
# at whose rows the run's own quality measure was at its best is told as information.
LOSS_SUMS_GROWING_BATCHES = "loss_sums_growing_batches"
# RunData.meta key: the perplexity key a text log's loss was read from as its logarithm (OpenNMT's
# "Perplexity 5.91"): a cross-entropy over tokens, at chance only at a vocabulary's ln.
LOSS_FROM_PERPLEXITY = "loss_from_perplexity"

# A steps frame's attrs key: a table's rows numbered in file order, its epoch column holding several
# rows each (numeric_table.table_steps): its steps are then no epochs.
ROWS_NUMBERED = "rows_numbered"
# ... or its steps counted across epochs from a count inside each (an epoch column beside a batch
# column: wespeaker's "Epoch | Batch | ... | Loss"): no epochs either.
COUNTED_ACROSS_EPOCHS = "counted_across_epochs"


def epoch_unit(step_name: object, steps: pd.DataFrame | None = None) -> dict[str, str]:
    """``{STEP_UNIT: "epoch"}`` where the step column read is named as an epoch count, else ``{}``
    (to merge into a run's meta); ``{}`` too where ``steps`` (the frame read) numbered its rows
    instead (an epoch column of several rows each: :data:`ROWS_NUMBERED`).

    Example:
        >>> epoch_unit("Epoch"), epoch_unit("global_step")
        ({'step_unit': 'epoch'}, {})
    """
    if steps is not None and (steps.attrs.get(ROWS_NUMBERED) or steps.attrs.get(COUNTED_ACROSS_EPOCHS)):
        return {}
    from sentinel.analyze.loaders.keys import EPOCH_ALIASES

    return {STEP_UNIT: "epoch"} if str(step_name).strip().lower() in EPOCH_ALIASES else {}


# RunData.meta key: the metric keys LOGGED_NAN speaks for, where it speaks for some only (Lightning's
# CSVLogger writes a NaN as ``nan`` and leaves a metric it did not log empty, and the loss is the
# column read cell by cell); absent: LOGGED_NAN speaks for every key.
LOGGED_NAN_KEYS = "logged_nan_keys"


@dataclass(frozen=True)
class LoadOptions:
    """What the user told us about columns (``--step-col``, ``--loss-col``); None = recognise."""

    step_col: str | None = None
    loss_col: str | None = None


# Loader modules in the order they are asked: specific formats first, generic tables last.
# Each module exposes NAME, sniff(path) -> bool, load(path, options: LoadOptions) -> list[RunData].
LOADER_MODULES: tuple[str, ...] = (
    "sentinel_run",  # a sentinel run directory (meta.json + steps)
    "tensorboard",  # events.out.tfevents.* of any trainer
    "lightning_csv",  # Lightning CSVLogger metrics.csv
    "megatron",  # Megatron-LM / Megatron-DeepSpeed / NeMo stdout logs
    "llmc",  # llm.c / modded-nanogpt text logs
    "hf_trainer_state",  # Hugging Face trainer_state.json (log_history) in a checkpoint folder
    "wandb_export",  # a W&B chart exported as CSV (Step, "<run> - <key>", __MIN/__MAX)
    "sacred_metrics",  # a Sacred run's metrics.json ({"<metric>": {"steps": [...], "values": [...]}})
    "clearml_scalars",  # ClearML's get_reported_scalars() ({"<title>": {"<series>": {"x": [...], "y": [...]}}})
    "history_dict",  # a dict of per-epoch lists (Keras' History.history, saved or printed)
    "tensorboard_download",  # one scalar downloaded from TensorBoard's page (Wall time,Step,Value)
    "dvclive",  # a DVCLive run's dvclive/plots/metrics/<key>.tsv files, read as one run
    "deepspeed_csv",  # DeepSpeed's CSV monitor: a job's folder of <group>_<name>.csv, read as one run
    "long_table",  # a CSV / TSV in long form: step, metric, value; or step, split, loss
    # Before the generic table, which would take it for a JSONL table keyed by W&B's _step:
    "wandb_offline",  # a W&B run's files/wandb-history.jsonl (older wandb versions)
    "deepxde_loss",  # DeepXDE's loss.dat (a comma header over rows apart by spaces: no table)
    "generic_table",  # any CSV / TSV / JSONL with a step and a loss column
    "parquet_table",  # a Parquet table with a step and a loss column (a history DataFrame's to_parquet)
    "mlflow_store",  # an MLflow file store run (mlruns/<exp>/<run>/metrics/<key>)
    "mlflow_sqlite",  # an MLflow SQLite store (mlflow.db, MLflow 3.7+'s default): every run in it
    "pipe_table",  # a table pasted with '|' between cells (a notebook's Step | Training Loss)
    "sb3_console",  # Stable-Baselines3's console blocks (| train/ |, |    loss | X |)
    "nequip_console",  # NequIP's / Allegro's log ("! Train  N ..." rows under its header; its batch tables no run's)
    "wandb_binary",  # a W&B run's binary run-<id>.wandb (offline or online), read without wandb
    "textlogs",  # HF Trainer dicts, fairseq, DeepSpeed, torchtitan, mmengine, nanoGPT, ... (dialects)
    "space_table",  # a table a loop prints, cells apart by spaces (fastai, Ultralytics' console)
)


def nonfinite_name(value: float) -> str:
    """How a report names a non-finite value, a loader's message and a rule's alike: ``nan``,
    ``+inf`` or ``-inf``.

    Example:
        >>> [nonfinite_name(v) for v in (float("nan"), float("inf"), -float("inf"))]
        ['nan', '+inf', '-inf']
    """
    return "nan" if value != value else ("+inf" if value > 0 else "-inf")


def files_in_walk_order(folder: Path, suffix: str | None = None) -> list[Path]:
    """The files under ``folder`` in the order a top-down sorted walk meets them (each folder's
    files, then its subfolders), as the directory walk of ``sentinel analyze`` offers them: a
    tracker's run claimed through its first file is read once. ``suffix`` keeps only those files.

    Example:
        >>> files_in_walk_order(Path("/nonexistent"))
        []
    """
    found: list[Path] = []

    def walk(here: Path) -> None:
        entries = sorted(here.iterdir())
        found.extend(e for e in entries if e.is_file() and (suffix is None or e.suffix == suffix))
        for entry in entries:
            if entry.is_dir():
                walk(entry)

    if folder.is_dir():
        walk(folder)
    return found
