"""Loader for TensorBoard event files (``events.out.tfevents.*``) of any trainer.

The records are read by :mod:`sentinel.analyze.loaders.tfrecord`: framing, both CRC32C checks
(a flipped bit in a value would otherwise parse as a plausible number, a loss of 3.1e38) and
the scalar events decoded in bulk with numpy, TensorBoard's ``Event`` protobuf only for records
of another shape. A record whose payload CRC fails is dropped and counted in one warning per
file; a length whose CRC fails cannot be trusted to find the next record, so reading stops
there with a warning. Measured on 1,000,000 events of 4-28 scalars (113 MB, 2-core CPU; see
``benchmarks/analyze.py``): this reader 0.20-0.30 s, the record-by-record protobuf reader it replaced
6.6-9.4 s, ``EventAccumulator`` ~40 s.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import ADD_SCALARS_DIRS, LOGGED_NAN, STEP_UNIT, AbandonedHistory, LoadOptions, RunData
from sentinel.analyze.loaders.keys import (LOSS_ALIASES, canonical_key, inferred_loss_note, inferred_training_loss,
                                          looks_like_loss, loss_components)
from sentinel.analyze.loaders.lfs_pointer import LFS_FIX, is_lfs_pointer
from sentinel.analyze.loaders.epoch_counts import count_wraps
from sentinel.analyze.loaders.samples_steps import as_optimizer_steps
from sentinel.analyze.loaders.shared_steps import number_shared_steps
from sentinel.analyze.loaders.textlog import trainings_note
from sentinel.analyze.loaders.tfrecord import read_scalars
from sentinel.analyze.loaders.went_back import fall_backs, replaced_stretches, survivors

log = logging.getLogger(__name__)

NAME = "tensorboard"
DESCRIPTION = "TensorBoard event files (events.out.tfevents.*)"
_PATTERN = "events.out.tfevents"


def is_event_file(path: Path) -> bool:
    """True for a file whose name marks it as a TensorBoard event file."""
    return _PATTERN in path.name and path.is_file()


def sniff(path: str | Path) -> bool:
    """True for an event file, a directory that directly holds one, or a run directory of splits
    (Keras' ``train/`` and ``validation/``, fairseq's ``train_inner/``, ``train/`` and ``valid/``).

    Example:
        >>> sniff("/nonexistent")
        False
    """
    path = Path(path)
    if path.is_dir():
        return any(is_event_file(p) for p in path.iterdir()) or _splits(path) is not None
    return is_event_file(path) or _holds_events(path)


# An event file's first record, whatever its name: its length and checksum (12 bytes), then the Event
# that names the file's version ("brain.Event:2"), a few bytes into it. An event file saved under
# another name (a log's, "ppo_tfevents.log") was refused as binary data.
_FIRST_EVENT = b"brain.Event:"


def _holds_events(path: Path) -> bool:
    """Whether the file at ``path`` starts as an event file does (see :data:`_FIRST_EVENT`)."""
    try:
        with path.open("rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return _FIRST_EVENT in head[12:]


# Trainers that write a run's splits into subdirectories of its directory, each with its own event
# files under the same tags: Keras' TensorBoard callback <run>/train and <run>/validation
# (epoch_loss); fairseq's --tensorboard-logdir <dir>/train_inner (each logged update), <dir>/train
# (each epoch's mean) and one directory per validation subset (valid, test).
_TRAIN_SPLITS = ("train_inner", "train")  # the first found is the run's training series
_EVALUATION_SPLITS = ("validation", "valid", "val", "eval", "test")


def _is_evaluation_split(name: str) -> bool:
    return name in _EVALUATION_SPLITS or name.startswith(("valid_", "valid-", "validation_", "eval_"))


def _evaluations_beside(directory: Path) -> list[tuple[str, Path]] | None:
    """A run directory that holds event files of its own and evaluation splits below it, as
    :func:`_splits` gives them (itself first, prefix ""), or None. TensorFlow's Estimator writes
    its training's events into ``model_dir`` and each evaluation's into ``model_dir/eval`` (or
    ``eval_<name>``): the evaluation's ``loss`` is not a run of its own (judged as a training
    loss, an overfitting's rise was a critical spike), it is the run's ``eval/loss``."""
    evaluations = [(child.name, child) for child, _ in _children_with_events(directory)
                   if _is_evaluation_split(child.name)]
    return [("", directory), *evaluations] if evaluations else None


def _splits(directory: Path) -> list[tuple[str, Path]] | None:
    """A run directory of splits (see above) as ``[(prefix, subdirectory), ...]``, its training
    series first (prefix ""), or None: a directory with no event files of its own and a training
    split that has some. fairseq's ``train`` beside ``train_inner`` holds each epoch's means:
    read as ``train_epoch/<tag>``; an evaluation split's tags as ``<split>/<tag>`` (an
    evaluation's, never the loss)."""
    try:
        if any(is_event_file(p) for p in directory.iterdir()):
            return None
        found = {child.name: child for child in directory.iterdir()
                 if child.is_dir() and not child.is_symlink() and any(is_event_file(p) for p in child.iterdir())}
    except OSError:
        return None
    train = next((name for name in _TRAIN_SPLITS if name in found), None)
    if train is None:
        return None
    splits = [("", found[train])]
    if train == "train_inner" and "train" in found:
        splits.append(("train_epoch", found["train"]))
    splits += [(name, found[name]) for name in sorted(found) if _is_evaluation_split(name)]
    return splits


def _load_splits(name: str, directory: Path, splits: list[tuple[str, Path]], options: LoadOptions) -> RunData:
    """One run of a directory of splits: its training split's scalars as they are, every other
    split's as ``<prefix>/<tag>``."""
    warnings: list[str] = []
    extra: dict[str, list] = {}
    for prefix, split in splits[1:]:
        said: list[str] = []
        for tag, pairs in _scalars_by_tag(_event_files(split), said).items():
            extra[f"{prefix}/{tag}"] = pairs
        warnings += [f"{split.name}: {w}" for w in said]
    run = _load_files(name, splits[0][1], _event_files(splits[0][1]), options, extra=extra)
    run.warnings[:0] = warnings
    run.meta[ADD_SCALARS_DIRS] = [split.name for _, split in splits]
    return dataclasses.replace(run, path=str(directory))


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read TensorBoard scalars; each directory holding event files is one run.

    A directory that holds event files itself is one run; otherwise every directory below it
    that does is a run (TensorBoard's own convention). Tags are mapped with
    :func:`~sentinel.analyze.loaders.keys.canonical_key`. Where the loss's steps go back (a run
    resumed from an earlier checkpoint into the same directory), the history written after
    replaces the earlier one from its first step (the stretch replaced is kept in ``abandoned``).

    Args:
        path: an event file, a run directory, or a directory of runs.
        options: ``loss_col`` names the tag to use as the loss.

    Example:
        >>> runs = load("lightning_logs")  # doctest: +SKIP
        >>> [r.name for r in runs]  # doctest: +SKIP
        ['version_0', 'version_1']
    """
    options = options or LoadOptions()
    path = Path(path)
    if path.is_file():
        name = path.parent.name if is_event_file(path) else path.stem  # (an event file under a name of its own: it)
        return [_load_files(name or path.name, path, [path], options)]
    files = _event_files(path)
    if files:
        beside = _evaluations_beside(path)
        if beside is not None:
            return [_load_splits(path.name, path, beside, options)]
        return _load_launches(path.name, path, files, options)
    splits = _splits(path)
    if splits is not None:
        return [_load_splits(path.name, path, splits, options)]
    runs, folded = [], set()
    for directory in _directories_with_events(path):
        if directory in folded:
            continue
        named = directory.name in _TRAIN_SPLITS or _is_evaluation_split(directory.name)
        top = directory.parent if named else directory
        splits = _splits(top) if named else _evaluations_beside(top)
        if splits is not None:
            run = _load_splits(str(top.relative_to(path)) or path.name, top, splits, options)
            folded.update(split for _, split in splits)
            runs.append(run)
            continue
        for run in _load_launches(str(directory.relative_to(path)), directory, _event_files(directory), options):
            folded.update(directory / name for name in run.meta.get(ADD_SCALARS_DIRS, ()))
            runs.append(run)
    return runs


def _event_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if is_event_file(p))


def _add_scalars_series(directory: Path, warnings: list[str]
                        ) -> dict[str, tuple[str, list[tuple[np.ndarray, np.ndarray]]]]:
    """The series ``SummaryWriter.add_scalars(main_tag, {key: value})`` wrote below
    ``directory``, as ``{"main_tag/key": (subdirectory name, pairs)}``.

    add_scalars writes each key's values into a subdirectory ``<main_tag>_<key>`` (``/`` in the
    tag replaced by ``_``), under the tag ``main_tag``: TensorBoard draws them as one chart, and
    they are one training run's series (``loss`` train and val), not runs of their own. A
    subdirectory is one of these when its event files hold that single tag and its name is
    that tag's prefix and a key; its series then join the run of ``directory``.
    """
    found: dict[str, tuple[str, list[tuple[np.ndarray, np.ndarray]]]] = {}
    with_events = _children_with_events(directory)
    for child, files in with_events:
        notes: list[str] = []
        tags = _scalars_by_tag(files, notes)
        if len(tags) != 1:
            continue
        (main_tag, pairs), = tags.items()
        prefix = main_tag.replace("/", "_") + "_"
        if len(child.name) > len(prefix) and child.name.startswith(prefix):
            found[f"{main_tag}/{child.name[len(prefix):]}"] = (child.name, pairs)
            warnings.extend(f"{child.name}: {note}" for note in notes)
    # tensorboardX's add_scalars writes <main_tag>/<key>/ instead, under the tag main_tag (LIIF's tensorboard/loss/train
    # beside its lr: read as three runs, two of them "no loss"): a child of no event files whose every child is so
    held = {child for child, _ in with_events}
    for child in (c for c in _subdirectories(directory) if c not in held):
        nested = _children_with_events(child)
        series = {}
        for grandchild, files in nested:
            notes = []
            tags = _scalars_by_tag(files, notes)
            if list(tags) != [child.name]:
                break
            series[f"{child.name}/{grandchild.name}"] = (child.name, tags[child.name])
            warnings.extend(f"{child.name}/{grandchild.name}: {note}" for note in notes)
        else:
            found.update(series)
    return found


def _subdirectories(directory: Path) -> list[Path]:
    try:
        return sorted(c for c in directory.iterdir() if c.is_dir() and not c.is_symlink())
    except OSError:
        return []


# SummaryWriter.add_hparams writes a run's hyperparameters and its metric_dict (at step 0) into a
# subdirectory of its own (named time.time() unless given one): a record of this run, not a run.
_HPARAMS_SESSION = b"_hparams_/session_start_info"
_HPARAMS_RECORD_BYTES = 1 << 20


def _hparams_records(directory: Path) -> list[str]:
    """The names of ``directory``'s subdirectories that hold an ``add_hparams`` record: small event
    files with the hparams plugin's session summary."""
    found = []
    for child, files in _children_with_events(directory):
        try:
            if sum(f.stat().st_size for f in files) <= _HPARAMS_RECORD_BYTES and \
                    any(_HPARAMS_SESSION in f.read_bytes() for f in files):
                found.append(child.name)
        except OSError:
            continue
    return found


def _children_with_events(directory: Path) -> list[tuple[Path, list[Path]]]:
    """``directory``'s subdirectories (not symlinks) that hold event files, with those files."""
    found = []
    for child in _subdirectories(directory):
        try:
            files = _event_files(child)
        except OSError:
            continue
        if files:
            found.append((child, files))
    return found


def _directories_with_events(root: Path) -> list[Path]:
    """Directories under ``root`` that directly hold event files, walked without recursion
    (a tree 1,500 directories deep must not exhaust Python's stack); symlinks are not followed."""
    found, stack = [], [root]
    while stack:
        directory = stack.pop()
        try:
            entries = list(directory.iterdir())
        except OSError as err:
            log.warning("%s: not read (%s)", directory, err.strerror or err)
            continue
        if any(is_event_file(p) for p in entries):
            found.append(directory)
        stack.extend(p for p in entries if p.is_dir() and not p.is_symlink())
    return sorted(found)


def _scalars_by_tag(files: list[Path], warnings: list[str]) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """Each tag's ``(steps, values)`` pairs, file by file in the order given (file names sort by
    creation time: a later file's pairs come later and overwrite earlier steps)."""
    return _by_tag(_read_files(files, warnings))


def _read_files(files: list[Path], warnings: list[str]) -> list[tuple[Path, dict[str, tuple[np.ndarray, np.ndarray]]]]:
    """Each file with its scalars by tag, in the order given."""
    return [(file, read_scalars(file, warnings)) for file in files]


def _by_tag(read: list[tuple[Path, dict[str, tuple[np.ndarray, np.ndarray]]]]
            ) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """The files' scalars (:func:`_read_files`) as each tag's ``(steps, values)`` pairs, file by file."""
    by_tag: dict[str, list[tuple[np.ndarray, np.ndarray]]] = defaultdict(list)
    for _, found in read:
        for tag, pair in found.items():
            by_tag[tag].append(pair)
    return by_tag


# A file that starts within this fraction (1 / _EARLY) of the steps the training before it reached starts a training.
_EARLY = 10


def _load_launches(name: str, where: Path, files: list[Path], options: LoadOptions) -> list[RunData]:
    """The runs of one directory's event files: one, or one per training where a later file starts
    again from the first file's first step, or within the first tenth of the steps the training before it
    reached (detectron2 and Keras write a new file into the same
    folder at each launch: read as one history, a later launch overwrote the earlier one's steps
    and the first, a whole training, was gone). A file that goes on from a later step (a resume:
    the Estimator's, SB3's with ``reset_num_timesteps=False``) is the same training."""
    pointers = [file for file in files if is_lfs_pointer(file)]
    if pointers and len(pointers) == len(files):
        raise ValueError(f"{where}: its event files are Git LFS pointers ({len(files)}), not the files: {LFS_FIX}")
    warnings: list[str] = []
    if pointers:
        warnings.append(f"{len(pointers)} of its event files are Git LFS pointers, not the files, left out: {LFS_FIX}")
        files = [file for file in files if file not in pointers]
    read = _read_files(files, warnings)
    spans = [_step_span(found) for _, found in read]
    start = min((span[0] for span in spans if span is not None), default=None)
    groups: list[list[tuple[Path, dict]]] = [[]]
    went_on = False  # the current training has logged past the first step
    reached = 0  # the last step the current training logged
    for (file, found), span in zip(read, spans):
        # (or within the first tenth of the steps the training before reached: a resume from so early a checkpoint
        # would throw nine tenths away; chemprop's folds, 167 trainings from step 500 after a first from 250)
        if span is not None and span[0] <= max(start, reached // _EARLY) and went_on:
            groups.append([])
            went_on, reached = False, 0
        groups[-1].append((file, found))
        went_on = went_on or (span is not None and span[1] > start)
        reached = max(reached, span[1]) if span is not None else reached
    if len(groups) == 1:
        return [_load_files(name, where, files, options, read=read, said=warnings)]
    note = trainings_note(where, len(groups), "that each start from the first step (event files of launches "
                          "written into one folder)", name)
    runs = []
    for k, group in enumerate(groups, 1):
        run = _load_files(f"{name}#{k}", where, [file for file, _ in group], options, read=group,
                          said=warnings if k == 1 else [])
        run.warnings.insert(0, note)
        runs.append(run)
    return runs


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _step_span(found: dict[str, tuple[np.ndarray, np.ndarray]]) -> tuple[int, int] | None:
    """The first and the last step one event file's training losses were written at, or None (none:
    Lightning's ``trainer.test()`` writes its test metrics into a file of their own, from step 0)."""
    spans = [(int(steps.min()), int(steps.max())) for tag, (steps, _) in found.items()
             if len(steps) and looks_like_loss(tag)]
    return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None


def _load_files(name: str, where: Path, files: list[Path], options: LoadOptions,
                extra: dict[str, list[tuple[np.ndarray, np.ndarray]]] | None = None,
                read: list[tuple[Path, dict]] | None = None, said: list[str] | None = None) -> RunData:
    """One run of ``files`` (``read``: their scalars, where read already, with ``said``, the warnings of reading
    them); ``extra``: series of other splits to join, under their own tags."""
    warnings: list[str] = list(said or [])
    by_tag = _by_tag(read if read is not None else _read_files(files, warnings))
    for tag, pairs in (extra or {}).items():
        by_tag[tag].extend(pairs)
    folded = _add_scalars_series(where, warnings) if where.is_dir() else {}
    for tag, (_, pairs) in folded.items():
        by_tag[tag].extend(pairs)
    keys = _keys(list(by_tag), options, warnings) if by_tag else {}
    written = {}  # each key's (steps, values) in write order
    for tag, key in keys.items():
        pairs = by_tag[tag]
        steps = np.concatenate([p[0] for p in pairs]) if len(pairs) > 1 else pairs[0][0]
        values = np.concatenate([p[1] for p in pairs]) if len(pairs) > 1 else pairs[0][1]
        written[key] = steps, values
    tag_of = {key: tag for tag, key in keys.items()}
    number_shared_steps(written, metrics.LOSS, warnings, tag_of)
    _count_across_wraps(written, {key: tag for key, tag in tag_of.items() if len(by_tag[tag]) == 1}, warnings)
    abandoned = _went_back(written)
    columns = {key: _last_per_step(steps, values) for key, (steps, values) in written.items()}
    parts = loss_components(list(by_tag)) if metrics.LOSS not in columns else []
    if parts:  # YOLOv5's train/box_loss, train/obj_loss, train/cls_loss: the loss is their sum
        summed = pd.concat({tag: pd.Series(columns[keys[tag]][1], index=columns[keys[tag]][0]) for tag in parts},
                           axis=1, join="inner")  # the steps every part has a record at
        columns[metrics.LOSS] = (summed.index.to_numpy(dtype="int64"), summed.sum(axis=1, skipna=False).to_numpy())
        warnings.append(f"loss is the sum of {' + '.join(parts)} (no tag is the total; --loss-col picks one)")
    frame = _frame(columns)
    # A NaN in the frame is a value logged as NaN only where the events hold one; elsewhere it
    # is a step the tag has no record of (not logged, or its record dropped for a bad checksum).
    logged_nan = {}
    for key, (steps, values) in columns.items():
        nan = np.isnan(values)
        if nan.any():
            logged_nan[key] = steps[nan]
    if not by_tag and files and all(_size(file) == 0 for file in files):  # (a writer that never flushed)
        warnings.append(f"its event file{'s are' if len(files) > 1 else ' is'} empty (0 bytes): the writer never "
                        "flushed (a run stopped before its first flush, or the file copied while open)")
    elif not by_tag:  # a header only, or histograms, images and text: say so, not "pass --loss-col"
        warnings.append("its event files hold no scalars: a header, histograms, images or text only")
    elif metrics.LOSS not in frame.columns:
        warnings.append(f"no loss tag among {', '.join(sorted(by_tag))}: pass --loss-col TAG")
    records = _hparams_records(where) if where.is_dir() else []
    meta = {"tags": dict(keys), "files": [f.name for f in files],
            ADD_SCALARS_DIRS: sorted({child for child, _ in folded.values()} | set(records)), LOGGED_NAN: logged_nan}
    loss_tag = tag_of.get(metrics.LOSS, "")
    if _per_epoch(loss_tag, keys, columns):
        meta[STEP_UNIT] = "epoch"
    run = RunData(name=name, path=str(where), source=NAME, steps=frame, meta=meta, warnings=warnings,
                  abandoned=abandoned)
    return as_optimizer_steps(run) if loss_tag.startswith(_SAMPLES_PREFIX) else run


# DeepSpeed's engine writes its own events at the samples seen, not the optimizer step.
_SAMPLES_PREFIX = "Train/Samples/"


def _count_across_wraps(written: dict[str, tuple[np.ndarray, np.ndarray]], tags: dict[str, str],
                        warnings: list[str]) -> None:
    """Each key of ``tags`` (those one event file holds: launches written again into one folder are
    a resume's business) whose steps fall back to their first again and again (a batch index
    written as the global_step: each epoch fell onto the one before, 100 losses of 500 read), read
    across its epochs (:func:`~sentinel.analyze.loaders.epoch_counts.count_wraps`), with a warning."""
    counted = []
    found_for: dict[int, tuple[np.ndarray, int] | None] = {}  # by the steps array's id: tags of one file share it
    for key, (steps, values) in written.items():
        if key not in tags:
            continue
        if id(steps) not in found_for:
            found_for[id(steps)] = count_wraps(steps)
        found = found_for[id(steps)]
        if found is not None:
            written[key] = found[0], values
            counted.append(f"{tags[key]} ({found[1]} an epoch)")
    if counted:
        warnings.append(f"steps that start again from the first each epoch (a count inside the epoch written as the "
                        f"step): {', '.join(counted)}: read across epochs")


def _per_epoch(tag: str, keys: dict[str, str], columns: dict[str, tuple[np.ndarray, np.ndarray]]) -> bool:
    """Whether the loss read is an epoch's, logged at the epoch's number (0, 1, 2, ...): Keras'
    ``epoch_loss`` (its TensorBoard callback's mean loss of an epoch), or Ultralytics' training
    losses beside its ``metrics/mAP...`` (YOLOv5 and YOLOv8 write each epoch's means at its
    number). A jump is a whole epoch gone wrong, not one batch. ``tag``: the loss's tag ("" where
    the loss is a sum of components)."""
    ultralytics = any(t.startswith("metrics/mAP") for t in keys) and (not tag or tag.startswith("train/"))
    if metrics.LOSS not in columns or not (ultralytics or tag.rsplit("/", 1)[-1].strip().lower() == "epoch_loss"):
        return False
    steps = columns[metrics.LOSS][0]
    return len(steps) > 0 and int(steps[-1]) - int(steps[0]) == len(steps) - 1


def _went_back(written: dict[str, tuple[np.ndarray, np.ndarray]]) -> list[AbandonedHistory]:
    """Where the loss's steps go back in write order (a run resumed from an earlier checkpoint into
    the same directory: Megatron's and DeepSpeed's writers, a logger given its version): the
    stretches the later history replaced, each with the loss as it stood then; every key's records
    the later history replaced are dropped from ``written`` (in place), as TensorBoard's own
    purge of orphaned data does."""
    if metrics.LOSS not in written:
        return []
    steps, values = written[metrics.LOSS]
    starts = fall_backs(steps)
    if not len(starts):
        return []
    abandoned = []
    for stretch in replaced_stretches(steps, starts):
        at, loss = _last_per_step(steps[stretch.rows], values[stretch.rows])
        frame = pd.DataFrame({metrics.LOSS: loss}, index=pd.Index(at.astype("int64"), name=metrics.STEP))
        abandoned.append(AbandonedHistory(stretch.resumed_at, stretch.first, stretch.last, frame,
                                          {metrics.LOSS: at[np.isnan(loss)].tolist()} if np.isnan(loss).any() else {}))
    for key, (steps, values) in written.items():
        keep = survivors(steps, starts if key == metrics.LOSS else fall_backs(steps))
        if not keep.all():
            written[key] = steps[keep], values[keep]
    return abandoned


def _last_per_step(steps: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One value per step, sorted by step; a step written twice (a restarted run) keeps its last."""
    if len(steps) < 2 or bool((steps[1:] > steps[:-1]).all()):
        return steps, values
    order = np.argsort(steps, kind="stable")  # equal steps stay in file order: the last is last
    steps, values = steps[order], values[order]
    last = np.ones(len(steps), dtype=bool)
    last[:-1] = steps[1:] != steps[:-1]
    return steps[last], values[last]


def _frame(columns: dict[str, tuple[np.ndarray, np.ndarray]]) -> pd.DataFrame:
    """The steps frame: every step any tag has, NaN where a tag has none (steps sorted, unique)."""
    if not columns:
        return pd.DataFrame(index=pd.Index([], dtype="int64", name=metrics.STEP), dtype="float64")
    index = max((steps for steps, _ in columns.values()), key=len)  # usually a tag logged at every step
    # Tags read from the same events share one steps array (the reader returns one object for
    # them): its rows in the index are found once. ``columns`` keeps the arrays alive, so ids hold.
    rows: dict[int, np.ndarray | slice | None] = {}
    for steps, _ in columns.values():
        if id(steps) not in rows:
            rows[id(steps)] = _rows_in(steps, index)
    if any(at is None for at in rows.values()):
        index = np.concatenate([steps for steps, _ in columns.values()])
        index.sort()
        index = index[np.r_[True, index[1:] != index[:-1]]]
        rows = {id(steps): np.searchsorted(index, steps) for steps, _ in columns.values()}
    out = {}
    for key, (steps, values) in columns.items():
        if len(steps) == len(index):
            out[key] = values.astype("float64", copy=False)  # the tag is there at every step
            continue
        # A column of its own (not rows of one block): the memory the reader freed is reused,
        # where one large block would be fresh pages, each a page fault.
        column = np.full(len(index), np.nan)
        column[rows[id(steps)]] = values
        out[key] = column
    return pd.DataFrame(out, index=pd.Index(index, name=metrics.STEP), copy=False)


def _rows_in(steps: np.ndarray, index: np.ndarray) -> np.ndarray | slice | None:
    """Where each step (sorted, unique) is in ``index`` (sorted, unique), or None when one is not
    there."""
    if len(steps) == len(index):
        return slice(None) if np.array_equal(steps, index) else None
    at = np.searchsorted(index, steps)
    if len(at) and (at[-1] >= len(index) or not (index[at] == steps).all()):  # at is sorted
        return None
    return at


def _keys(tags: list[str], options: LoadOptions, notes: list[str]) -> dict[str, str]:
    """Tag -> key; when several tags would become the same key, the first alias wins. A loss
    found by its words (:func:`infer_loss_column`) is said in ``notes``."""
    keys: dict[str, str] = {}
    if options.loss_col is not None:
        if options.loss_col not in tags:
            raise ValueError(f"tag {options.loss_col!r} not found; available: {', '.join(sorted(tags))}")
        keys[options.loss_col] = metrics.LOSS
    order = {alias: i for i, alias in enumerate(LOSS_ALIASES)}
    for tag in sorted(tags, key=lambda t: (order.get(t.strip().lower(), len(order)), t)):
        if tag in keys:
            continue
        key = canonical_key(tag)
        keys[tag] = key if key not in keys.values() else tag.strip().lower()
    if metrics.LOSS not in keys.values():  # no tag is named loss: judge the tags by their words
        inferred = inferred_training_loss(tags)
        if inferred is not None:
            keys[inferred] = metrics.LOSS
            notes.append(inferred_loss_note(inferred, "tag"))
    return keys
