"""Find the runs under a path: each run is recognised by its files and loaded by its loader."""

from __future__ import annotations

import contextlib
import errno
import importlib
import logging
import os
import re
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType

from sentinel import metrics
from sentinel.analyze.compressed import archive_command, decompressed, is_compressed
from sentinel.analyze.loaders import ADD_SCALARS_DIRS, LOADER_MODULES, LOGGED_NAN, PARQUET_SUFFIXES, LoadOptions, RunData
from sentinel.analyze.loaders.keys import (inferred_loss_note, inferred_training_loss, is_regulariser, is_smooth_l1,
                                           is_value_loss)
from sentinel.analyze.loaders.lfs_pointer import LFS_FIX, is_lfs_pointer
from sentinel.analyze.resumed_versions import join_resumed_versions
from sentinel.analyze.same_training import one_per_training

log = logging.getLogger(__name__)

# Why a path was not analysed. Files are matched by extension (cheap, and a source file can
# look like a log: a loader's own docstring quotes the log lines it reads), then by content.
SOURCE_CODE = "source code"
PACKAGING = "packaging or config"
DOCUMENTATION = "documentation"
BINARY = "binary data"
TOOL_DIRECTORY = "tool directory"
NOT_REGULAR = "not a regular file"
NOT_A_LOG = "not a training log"
UNREADABLE = "unreadable"
TRACKER_CONSOLE = "copy of a tracked run (the run's metric history beside it is read instead)"
RUN_PART = "read with its run's first metric file"
OTHER_RANK = "another rank's log of a training (the lowest rank's is read)"
PARQUET_DATA = "a .parquet file with no step and loss columns (data, not a run)"
ARCHIVE = "an archive of several files"
EARLIER_CHECKPOINT = "an earlier checkpoint of a run read once"
_SQLITE_SUFFIXES = (".db", ".sqlite")  # binary, but an MLflow store among them is read
_NUMPY_SUFFIXES = (".npy", ".npz")

_EXTENSIONS = {
    **dict.fromkeys((".py", ".pyc", ".pyo", ".pyd", ".pyi", ".pyx", ".pxd", ".so", ".dylib", ".dll",
                     ".o", ".a", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".cu", ".cuh", ".js", ".mjs",
                     ".cjs", ".ts", ".tsx", ".jsx", ".java", ".go", ".rs", ".rb", ".sh", ".bash", ".zsh",
                     ".ps1", ".bat", ".jl", ".scala", ".kt", ".swift", ".ipynb", ".cmake", ".mk"), SOURCE_CODE),
    **dict.fromkeys((".toml", ".cfg", ".ini", ".lock", ".whl", ".egg", ".yaml", ".yml", ".spec",
                     ".pth", ".typed"), PACKAGING),
    **dict.fromkeys((".md", ".rst", ".html", ".htm", ".tex", ".pdf", ".css"), DOCUMENTATION),
    **dict.fromkeys((".png", ".jpg", ".jpeg", ".gif", ".svg", ".ico", ".zip", ".gz", ".tgz", ".bz2",
                     ".xz", ".zst", ".tar", ".pt", ".ckpt", ".safetensors", ".bin", ".npy", ".npz",
                     ".pkl", ".pickle", ".h5", ".onnx", ".arrow", ".feather", ".xlsx", ".xls", ".db", ".sqlite"),
                    BINARY),
}
# A history saved in a binary table format, named on its own: what to save it as instead.
_SAVED_TABLES = {
    **dict.fromkeys((".pkl", ".pickle"), "a pickle (not loaded: unpickling runs code from the file)"),
    **dict.fromkeys((".feather", ".arrow"), "an Arrow (Feather) table"),
    **dict.fromkeys((".xlsx", ".xls"), "a spreadsheet"),
    ".h5": "an HDF5 file",
}
_NAMES = {"Makefile": SOURCE_CODE, "Dockerfile": SOURCE_CODE, "CMakeLists.txt": SOURCE_CODE,
          "LICENSE": DOCUMENTATION, "MANIFEST.in": PACKAGING, "PKG-INFO": PACKAGING, "RECORD": PACKAGING,
          "WHEEL": PACKAGING, "METADATA": PACKAGING, "requirements.txt": PACKAGING}
# Directories that never hold a run of their own (a sentinel run's tb/ mirror is pruned with
# its run, not here).
_TOOL_DIRS = frozenset({".git", ".hg", ".svn", ".venv", "venv", "__pycache__", ".ipynb_checkpoints",
                        "node_modules", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache",
                        ".idea", ".vscode", ".eggs"})
_PACKAGING_DIRS = frozenset({"build", "dist", "site-packages", "dist-packages"})
_PACKAGING_SUFFIXES = (".egg-info", ".dist-info")


class NoRunsError(ValueError):
    """Nothing under the path could be read as a run; the message says what was tried."""


@dataclass(frozen=True)
class Skipped:
    """A path that was not analysed, and why.

    Attributes:
        path: the file or directory.
        reason: one of the reasons above (``"source code"``, ``"not a training log"``, ...).
        detail: for an unreadable path, the error, as one line; for an earlier checkpoint, the file
            that holds its history.
        directory: a directory that was not entered (``.git``, ``build/``).
    """

    path: str
    reason: str
    detail: str = ""
    directory: bool = False

    @property
    def problem(self) -> bool:
        """True for a path that looked like a log but could not be read (worth a warning line)."""
        return self.reason == UNREADABLE


@dataclass
class Discovery:
    """What :func:`discover` found under one path: the runs, and every path it did not analyse."""

    runs: list[RunData] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def skip_summary(skipped: list[Skipped]) -> str:
    """One line counting the skipped paths by reason, e.g.
    ``skipped 12 files: 9 source code, 3 not a training log``.

    Example:
        >>> skip_summary([Skipped("a.py", SOURCE_CODE), Skipped("b.py", SOURCE_CODE), Skipped("n.txt", NOT_A_LOG)])
        'skipped 3 files: 2 source code, 1 not a training log'
    """
    counts = Counter(s.reason for s in skipped)
    dirs = sum(s.directory for s in skipped)
    files = len(skipped) - dirs
    what = " and ".join(f"{n} {noun if n == 1 else plural}"
                        for n, noun, plural in ((files, "file", "files"), (dirs, "directory", "directories")) if n)
    return f"skipped {what}: " + ", ".join(f"{n} {reason}" for reason, n in counts.most_common())


def loaders() -> list[ModuleType]:
    """The loader modules that are installed, in :data:`LOADER_MODULES` order."""
    return list(_Loaders())


def _import_loader(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(f"sentinel.analyze.loaders.{name}")
    except ModuleNotFoundError as err:
        if err.name != f"sentinel.analyze.loaders.{name}":
            raise  # the loader exists but one of its own imports is missing
        log.debug("loader %s is not installed", name)
        return None


class _Loaders:
    """The loader modules in :data:`LOADER_MODULES` order, each imported when it is first asked
    (a sentinel run directory is claimed before the text dialects are ever compiled)."""

    def __init__(self) -> None:
        self._imported: dict[str, ModuleType | None] = {}  # None: not installed

    def __iter__(self):
        for name in LOADER_MODULES:
            if name not in self._imported:
                self._imported[name] = _import_loader(name)
            if self._imported[name] is not None:
                yield self._imported[name]


def discover_runs(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Load every run found at ``path``; :func:`discover` without the list of skipped paths.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        NoRunsError: the path is empty or holds nothing a loader recognises.

    Example:
        >>> runs = discover_runs("logs/")  # doctest: +SKIP
        >>> [(r.name, r.source) for r in runs]  # doctest: +SKIP
        [('run1', 'sentinel'), ('version_0', 'tensorboard')]
    """
    return discover(path, options).runs


def discover(path: str | Path, options: LoadOptions | None = None) -> Discovery:
    """Load every run found at ``path`` (a file, a run directory, or a directory of runs).

    Directories are walked top-down without recursion (any depth), symlinked directories not
    followed. A directory a loader claims as a whole (a sentinel run, a directory of
    TensorBoard event files) is one run; a sentinel run's subdirectories (its ``tb/`` mirror)
    are not walked. Tool directories (``.git``, ``.venv``, ``__pycache__``, ...) and packaging
    output (``build/``, ``dist/``, ``site-packages``, ``*.egg-info``) are not entered. Other
    files are judged by name first (source code, packaging, documentation and binary files are
    never read as logs), then offered to the loaders one by one, in :data:`LOADER_MODULES`
    order; the first that recognises a file loads it. A file that cannot be read (permissions,
    damage) is skipped and recorded; it never stops the walk.

    Args:
        path: where to look.
        options: column choices passed to every loader.

    Returns:
        The runs, in path order, and every path not analysed with its reason.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        NoRunsError: ``path`` is not a regular file or directory, is empty, or holds nothing a
            loader recognises (the message counts what was skipped and why).
        ValueError, OSError: ``path`` is a single file that a loader recognised but could not
            read (the message names the problem).

    Example:
        >>> found = discover("logs/")  # doctest: +SKIP
        >>> [(r.name, r.source) for r in found.runs], skip_summary(found.skipped)  # doctest: +SKIP
    """
    options = options or LoadOptions()
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(_why_missing(path))
    modules = _Loaders()
    if not path.is_dir():
        if not path.is_file():
            raise NoRunsError(f"'{path}' is not a regular file or a directory (a device, FIFO or socket): "
                              "pass a log file or a directory of runs")
        if is_lfs_pointer(path):
            raise NoRunsError(f"'{path}' is a Git LFS pointer, not the file it names: {LFS_FIX}")
        if path.suffix.lower() in _NUMPY_SUFFIXES:  # np.save's losses: binary, but read named on its own
            return Discovery(_with_loss(_numpy_saved(path, options), options))
        if path.suffix.lower() == ".ipynb":  # a notebook named on its own: what its cells printed
            return Discovery(_notebook_runs(path, options))
        reason = _reason_by_name(path)
        if reason == ARCHIVE:
            raise NoRunsError(f"'{path}' is {reason}: unpack it ({archive_command(path)}) and pass the folder")
        if reason == DOCUMENTATION and path.suffix.lower() in (".md", ".rst"):
            runs = _claimed_document(path, modules, options)  # a log pasted into notes.md
            if runs:
                return Discovery(_with_loss(runs, options))
        if reason is not None:
            saved = _SAVED_TABLES.get(path.suffix.lower())
            if saved is not None:  # a history a script saved: the formats that are read
                raise NoRunsError(f"'{path}' is {saved}, not read: save the history as CSV or Parquet "
                                  "(df.to_csv('history.csv'), df.to_parquet('history.parquet')) and pass that")
            raise NoRunsError(f"'{path}' is {reason}, not a training log: pass a log file or a directory of runs")
        from sentinel.analyze.loaders.textlog import heads_shared

        with heads_shared():  # every sniff and fallback below reads the file's head once
            runs = _read_named_file(path, modules, options)
            if runs is None:
                runs = _one_of_several_losses(path, modules, options)
            if runs is None:
                # Binary data first: its bytes, decoded, may look like a header or "key=3" pairs by chance.
                binary = _bare_numbers_problem(path) or _binary_problem(path)
                raise NoRunsError(binary or _with_crash(_table_problem(path) or _text_problem(path, options)
                                                        or _unread(path), path))
        return Discovery(_with_loss(runs, options))
    from sentinel.analyze.loaders.textlog import heads_shared

    found = Discovery()
    try:
        if not any(path.iterdir()):
            raise NoRunsError(f"directory '{path}' is empty: pass a directory that holds training logs")
    except OSError as err:
        raise NoRunsError(f"cannot read directory '{path}' ({err.strerror or err}): "
                          "fix its permissions or pass another directory") from err
    stack = [path]
    while stack:
        here = stack.pop()
        try:
            entries = sorted(here.iterdir())
        except OSError as err:
            found.skipped.append(Skipped(str(here), UNREADABLE, describe_error(here, err), directory=True))
            continue
        try:
            claimed = _claim_directory(here, modules, found.skipped)
        except OSError as err:  # the names inside it do not fit in a path: the branch ends here
            found.skipped.append(Skipped(str(here), UNREADABLE, describe_error(here, err), directory=True))
            continue
        folded: set[Path] = set()
        hollow: list = []  # a claimed folder's runs of no series, told only where its files hold none
        if claimed is not None:
            runs = _guarded(here, lambda: claimed.load(here, options), found.skipped)
            if claimed.NAME == "sentinel":
                found.runs.extend(runs or [])
                continue  # its tb/ holds the same scalars: not a second run
            # add_scalars' per-key subdirectories: series the run has taken in, not runs
            folded = {here / name for run in runs or [] for name in run.meta.get(ADD_SCALARS_DIRS, ())}
            files = []
            if runs and all(not len(run.steps.columns) for run in runs):
                # Event files of a header alone beside the run's table (detectron2's output/ with its
                # metrics.json): the folder's other files are read.
                from sentinel.analyze.loaders.tensorboard import is_event_file  # the loaders' own imports: lazily

                hollow = runs
                files = [e for e in entries if _is_dir(e, found.skipped) is False and not is_event_file(e)]
            else:
                found.runs.extend(runs or [])
        else:
            files = [e for e in entries if _is_dir(e, found.skipped) is False]
        read_before = len(found.runs)
        other_ranks = _other_ranks(files)
        for file in files:
            reason = OTHER_RANK if file in other_ranks else _reason_by_name(file) if file.is_file() else NOT_REGULAR
            if reason is None:  # named on its own, it is read
                reason = _read_through_its_run(file)
            if reason is None and file.suffix.lower() in PARQUET_SUFFIXES:
                reason = _parquet_data(file, options)
            if reason is not None:
                found.skipped.append(Skipped(str(file), reason))
                continue
            with heads_shared():  # the file's head, read once for both
                runs = _guarded(file, lambda: _load_file(file, modules, options), found.skipped)
                if runs is None and not (found.skipped and found.skipped[-1].path == str(file)):
                    runs = _guarded(file, lambda: _one_of_several_losses(file, modules, options, walk=True),
                                    found.skipped)
            if runs is None and not (found.skipped and found.skipped[-1].path == str(file)):
                pointer = is_lfs_pointer(file)
                found.skipped.append(Skipped(str(file), UNREADABLE if pointer else NOT_A_LOG, f"{file}: a Git LFS "
                                             f"pointer, not the file it names: {LFS_FIX}" if pointer else ""))
            found.runs.extend(runs or [])
        if hollow and len(found.runs) == read_before:
            found.runs.extend(hollow)
        elif hollow:
            for run in found.runs[read_before:]:
                run.warnings.append("the event files beside it hold no scalars (a header, histograms, images or "
                                    "text only): this file's series are read")
        subdirs = []
        for entry in (e for e in entries if _is_dir(e) and e not in folded):
            reason = _directory_reason(entry.name)
            if reason is not None:
                found.skipped.append(Skipped(str(entry), reason, directory=True))
            else:
                subdirs.append(entry)
        superseded = _superseded_checkpoints(here, subdirs)
        for entry, holder in superseded.items():
            found.skipped.append(Skipped(str(entry), EARLIER_CHECKPOINT, f"{entry}: {EARLIER_CHECKPOINT} ({holder} "
                                         "holds its log history)", directory=True))
        subdirs = [entry for entry in subdirs if entry not in superseded]
        stack.extend(reversed(subdirs))  # popped in name order: runs come out sorted
    if not found.runs:
        found.runs = _pastes_alone(path, found.skipped, options)
    if not found.runs:
        problems = [s for s in found.skipped if s.problem]
        if len(problems) == 1:
            raise NoRunsError(problems[0].detail)
        summary = f" ({skip_summary(found.skipped)})" if found.skipped else ""
        # Several that could not be read: the first one's problem (Git LFS pointers, most often all alike).
        hint = f"the first that could not be read: {problems[0].detail}" if problems else \
            _a_table_to_name(found.skipped)
        raise NoRunsError(f"no training logs found in '{path}'{summary}" + (
            f"; {hint}" if hint is not None else
            ": pass a directory written by sentinel, TensorBoard or a Lightning logger, or logs of a format "
            "`sentinel formats` lists"))
    found.runs = join_resumed_versions(one_per_training(_with_loss(found.runs, options)))
    return found


# A walk that finds no run reads this many of the files it took for no log, at most, as pastes.
_PASTES_ALONE = 3
# Why a few record lines were read (a walk reads so few only where it finds no other log).
_NAMED_ALONE = "read because the file was named on its own (a directory's walk reads so few only where it finds no other log)"


def _pastes_alone(path: Path, skipped: list[Skipped], options: LoadOptions) -> list[RunData]:
    """Where a walk found no run, the few files it took for no log (:data:`_PASTES_ALONE` at most)
    that read as a short paste (:func:`_short_paste`: three step lines of a run that went NaN, a
    directory of one such file), each with a warning; their skip notes dropped. Empty otherwise."""
    files = [s for s in skipped if s.reason == NOT_A_LOG and not s.directory]
    if not files or len(files) > _PASTES_ALONE:
        return []
    runs = []
    for note in files:
        read = _guarded(Path(note.path), lambda: _short_paste(Path(note.path), options), [])
        for run in read or []:
            run.warnings = [w.replace(_NAMED_ALONE, f"read because no other log was found in '{path}'")
                            for w in run.warnings]
            runs.append(run)
        if read:
            skipped.remove(note)
    return runs


def _read_named_file(path: Path, modules, options: LoadOptions) -> list[RunData] | None:
    """The runs of a file named on its own: as a table under a few lines, a format a loader claims,
    a short paste, bare numbers or rows in order; None where none reads it."""
    for read in (_table_under_lines, _few_blocks, lambda p, o: _load_file(p, modules, o), _short_paste,
                 _bare_numbers, _rows_in_order):
        runs = read(path, options)
        if runs is not None:
            if _events_alone(runs) and read is not _short_paste:
                # a few records a walk would not read beside a tool's event lines (four bar lines,
                # each with DeepSpeed's overflow line after it): the records with the events
                paste = _short_paste(path, options)
                if paste and not _events_alone(paste):
                    return paste
            return runs
    return None


def _events_alone(runs: list[RunData]) -> bool:
    """Whether runs hold no loss, only what event lines made (overflows, loss scales)."""
    return all(metrics.LOSS not in run.steps.columns for run in runs)


def _one_of_several_losses(path: Path, modules, options: LoadOptions, walk: bool = False) -> list[RunData] | None:
    """A text log whose lines name several losses and none is the total (the text reader's
    ``why_not``), read with the first of them that goes non-finite as its loss, with a warning;
    where none does but the grad norm read with one does (verl's GRPO: ``actor/grad_norm:nan``
    beside a finite ``actor/pg_loss`` and ``actor/kl_loss``), with the first that is no
    regulariser's term (:func:`~sentinel.analyze.loaders.keys.is_regulariser`); where nothing goes
    non-finite, with the one that is no regulariser's term where the others all are and it is a
    policy gradient's (verl's GRPO console: ``actor/pg_loss`` beside ``actor/kl_loss`` and
    ``actor/entropy_loss``; such a run is judged on its non-finite values, whichever is read); else
    None (the message then asks which to read: a VAE's ``recon_loss`` and ``kl_loss``, a
    distillation's ``loss_ce`` and ``loss_kl``, whose KL term is its objective's). A NaN is told,
    whichever loss printed it: DeepSpeed-Chat's ``act_loss: inf|cri_loss: inf``, a bar whose every
    loss is NaN.
    ``walk``: a file a directory walk met, read from as many lines as any log there (a paste's
    few lines are read only from a file named on its own)."""
    from sentinel.analyze.loaders import textlogs

    if options.loss_col is not None or is_compressed(path):
        return None
    keys = textlogs.several_losses(path, least=None if walk else FEWEST_PASTE_RECORDS)
    read: dict[str, list[RunData]] = {}
    for key in keys:
        named = replace(options, loss_col=key)
        try:
            runs = _load_file(path, modules, named) if walk else _read_named_file(path, modules, named)
        except ValueError:
            continue
        if runs and any(_went_nonfinite(run, metrics.LOSS) for run in runs):
            return _told_which(runs, keys, key, "the first of them that goes non-finite")
        if runs:
            read[key] = runs
    for key in sorted(read, key=is_regulariser):  # stable: the first that is no KL or entropy term
        if any(_went_nonfinite(run, metrics.GRAD_NORM_TOTAL) for run in read[key]):
            return _told_which(read[key], keys, key, "the first of them that is no KL, entropy or auxiliary term: "
                                                     "none goes non-finite, its grad norm does")
    from sentinel.analyze.rule_stuck import is_policy_gradient_loss  # (the rules' imports: lazily)

    main = [key for key in read if not is_regulariser(key)]
    if len(main) == 1 and is_policy_gradient_loss(main[0]):  # judged on its non-finite values alone, as any would be
        return _told_which(read[main[0]], keys, main[0], "the one of them that is no KL, entropy or auxiliary term")
    policy = [key for key in main if not is_value_loss(key)]
    if len(policy) == 1 and len(main) > 1 and is_policy_gradient_loss(policy[0]):  # PPO's actor beside its critic
        return _told_which(read[policy[0]], keys, policy[0], "the actor's policy loss: the others are a critic's "
                                                            "value loss or a KL, entropy or auxiliary term")
    classified = [key for key in read if not is_smooth_l1(key)]
    if len(classified) == 1 and len(read) > 1:  # a detector's classification loss beside its box regression's
        return _told_which(read[classified[0]], keys, classified[0], "the one of them that is no box regression's "
                                                                     "smooth L1 term; none goes non-finite")
    return None


def _told_which(runs: list[RunData], keys: list[str], key: str, why: str) -> list[RunData]:
    for run in runs:
        run.warnings.insert(0, f"its lines name {len(keys)} losses ({', '.join(keys)}) and none is the total: "
                               f"{key} is read, {why} (pass --loss-col to read another, or log their sum as loss)")
    return runs


def _went_nonfinite(run: RunData, key: str) -> bool:
    """Whether a run's ``key`` printed a NaN or an infinity (not a value it did not print)."""
    from sentinel.analyze.rule_nonfinite import logged_nan_steps

    values = run.steps.get(key)
    if values is None:
        return False
    told = logged_nan_steps(run, key)
    return bool(values.isin([float("inf"), float("-inf")]).any()) or (told is not None and len(told) > 0)


def _with_loss(runs: list[RunData], options: LoadOptions) -> list[RunData]:
    """Runs whose loader found no key named loss get the one their keys' words name (a tracker's
    ``train/CrossEntropyLoss``), with a note; the formats that know their loss names are untouched."""
    if options.loss_col is None:
        for run in runs:
            if metrics.LOSS not in run.steps.columns and len(run.steps.columns):
                chosen = inferred_training_loss(list(run.steps.columns))
                if chosen is not None:
                    run.steps = run.steps.rename(columns={chosen: metrics.LOSS})
                    told = run.meta.get(LOGGED_NAN) if run.meta else None
                    if told is not None and chosen in told:
                        told[metrics.LOSS] = told.pop(chosen)
                    run.warnings.append(inferred_loss_note(chosen, "key"))
    return runs


def _unread(path: Path) -> str:
    """The message for a file no reader takes and no problem names: with the lines that print a value
    non-finite, where it has any (the news is told, whatever the format)."""
    from sentinel.analyze.loaders.textlog import read_head
    from sentinel.analyze.loaders.textlogs import unnamed_nonfinite_note

    head = read_head(path)
    unnamed = unnamed_nonfinite_note(head) if head else None
    return (f"'{path}' is not a log format sentinel reads" + (f"; {unnamed}" if unnamed else "") +
            ": pass --step-col/--loss-col with the names its lines or columns give the step and the loss, or a log of "
            "a format `sentinel formats` lists")


# The end of a refused file looked at for the traceback it ends in, and the lines that may follow its error.
_CRASH_TAIL_BYTES = 256 * 1024
_LINES_AFTER_CRASH = 5


def _with_crash(message: str, path: Path) -> str:
    """A refusal's ``message``, with the crash the file ends in where it ends in a Python traceback: a
    run that stopped before any step sentinel reads (KAIR's ``NameError`` after its network's printout)
    is the news its log tells.

    Example:
        >>> _with_crash("'x.log' is not a log format sentinel reads", Path("/nonexistent"))
        "'x.log' is not a log format sentinel reads"
    """
    from sentinel.analyze.loaders.crash_tail import TRACEBACK, final_error
    from sentinel.analyze.loaders.textlog import decode

    if "the run stopped" in message or "crash" in message:
        return message  # (the one-step refusal names the error it stopped at)
    try:
        with open(path, "rb") as f:
            start = max(0, f.seek(0, os.SEEK_END) - _CRASH_TAIL_BYTES)
            f.seek(start)
            tail = decode(f.read())
    except OSError:
        return message
    at = tail.rfind(TRACEBACK)
    error = final_error(tail, at, defer_nonfinite=False) if at >= 0 else None
    if error is None:
        return message
    after = tail[tail.find(error[:40], at) + len(error[:40]):]
    if sum(1 for line in after.split("\n")[1:] if line.strip()) > _LINES_AFTER_CRASH:
        return message  # a traceback printed and gone on from
    line = tail.count("\n", 0, at) + 1
    where = f"line {line}" if start == 0 else "near its end"
    return f"{message}. It ends in a crash ({where}): {error}"


def _why_missing(path: Path) -> str:
    """Why ``path`` cannot be found, as one line: no such path, a link to nothing, a link loop.

    Example:
        >>> _why_missing(Path("/nonexistent"))
        "path '/nonexistent' does not exist: pass a run directory or a log file"
    """
    try:
        os.stat(path)
    except OSError as err:
        if err.errno == errno.ELOOP:
            return (f"path '{path}' is a loop of symbolic links (each points on to the next): "
                    "point the link at a run directory or a log file")
        if path.is_symlink():
            with contextlib.suppress(OSError):
                return (f"path '{path}' is a symbolic link to '{os.readlink(path)}', which does not exist: "
                        "point the link at a run directory or a log file")
    return f"path '{path}' does not exist: pass a run directory or a log file"


def _is_dir(entry: Path, skipped: list[Skipped] | None = None) -> bool | None:
    """Whether ``entry`` is a directory to walk (not a symlink); None, and ``entry`` recorded in
    ``skipped``, when it cannot be looked at (a path longer than the system allows)."""
    try:
        return entry.is_dir() and not entry.is_symlink()
    except OSError as err:
        if skipped is not None:
            skipped.append(Skipped(str(entry), UNREADABLE, describe_error(entry, err)))
        return None


def _reason_by_name(file: Path) -> str | None:
    """Why ``file`` is not a log, judged by its name or its first bytes; None when it may be one."""
    if file.name in _NAMES:
        return _NAMES[file.name]
    if archive_command(file) is not None:
        return ARCHIVE
    if is_compressed(file):  # train.log.gz: read as the file it holds
        return None
    reason = _EXTENSIONS.get(file.suffix.lower())
    if reason == BINARY and file.suffix.lower() in _SQLITE_SUFFIXES:
        from sentinel.analyze.loaders import mlflow_sqlite  # the loaders' own imports: lazily

        return None if mlflow_sqlite.sniff(file) else reason  # MLflow's store, its default since 3.7
    if reason is not None or file.suffix:
        return reason
    try:  # an extension-less script: its first line says so
        with open(file, "rb") as f:
            return SOURCE_CODE if f.read(2) == b"#!" else None
    except OSError:
        return None  # reported when a loader tries to read it


# A rank number in a log's name: Swin's log_rank1.txt, a script's train_rank_3.log; detectron2's
# log.txt.rank1 beside rank 0's log.txt.
_RANK_IN_NAME = re.compile(r"(?i)(?<![a-z])(rank[_-]?)(\d+)(?!\d)")
_RANK_SUFFIX = re.compile(r"\.rank(\d+)$")


def _other_ranks(files: list[Path]) -> set[Path]:
    """The files of one folder that are another rank's log of a training whose lowest rank's log is
    there too: names alike but for the rank number (each process of a distributed run writes its own,
    the same steps with its own batches; read, every training was counted once per rank).

    Example:
        >>> sorted(p.name for p in _other_ranks([Path("log_rank0.txt"), Path("log_rank1.txt"), Path("config.json")]))
        ['log_rank1.txt']
        >>> sorted(p.name for p in _other_ranks([Path("log.txt"), Path("log.txt.rank1"), Path("log.txt.rank2")]))
        ['log.txt.rank1', 'log.txt.rank2']
    """
    groups: dict[str, list[tuple[int, Path]]] = {}
    for file in files:
        suffix = _RANK_SUFFIX.search(file.name)
        if suffix:
            key, rank = file.name[:suffix.start()], int(suffix.group(1))
        else:
            found = list(_RANK_IN_NAME.finditer(file.name))
            if len(found) != 1:
                key, rank = file.name, 0
            else:
                key, rank = _RANK_IN_NAME.sub(r"\1#", file.name), int(found[0].group(2))
        groups.setdefault(key, []).append((rank, file))
    return {file for members in groups.values() if len(members) > 1 for rank, file in sorted(members)[1:]}


def _read_through_its_run(file: Path) -> str | None:
    """Why a file a tracker keeps beside a run is not a run of its own, or None. A copy of the
    run (:data:`TRACKER_CONSOLE`): a W&B run's ``files/output.log`` (history: ``run-<id>.wandb`` or
    ``files/wandb-history.jsonl``), a Sacred run's ``cout.txt`` (history: ``metrics.json``), a Ray
    trial's ``progress.csv`` (history: ``result.json``, beside its ``params.json``). A part of the
    run (:data:`RUN_PART`), read with its first metric file: a DVCLive run's other metric files and
    its ``metrics.json``, a DeepSpeed CSV monitor's other metric files. A W&B run's
    ``files/wandb-summary.json`` (each key's last value, a one-step run) is a copy too. Read too,
    it would be the same run a second time."""
    if file.name == "cout.txt":
        from sentinel.analyze.loaders import sacred_metrics  # its pandas import only where needed

        return TRACKER_CONSOLE if sacred_metrics.is_run_dir(file.parent) else None
    if file.suffix == ".tsv" or file.name == "metrics.json":  # a DVCLive run's, read through its first metric
        from sentinel.analyze.loaders import dvclive

        if dvclive.part_of_run(file):
            return RUN_PART
    if file.suffix == ".csv":  # a DeepSpeed CSV monitor's metric files after its first
        from sentinel.analyze.loaders import deepspeed_csv

        if deepspeed_csv.part_of_run(file):
            return RUN_PART
    if file.name == "progress.csv":  # a Ray Tune / Ray Train trial: result.json holds every key
        ray = (file.parent / "result.json").is_file() and (file.parent / "params.json").is_file()
        return TRACKER_CONSOLE if ray else None
    # A W&B run's files/: its console's copy, and its summary (each key's last value: one step).
    if file.name not in ("output.log", "wandb-summary.json") or file.parent.name != "files":
        return None
    run_dir = file.parent.parent
    wandb = (file.parent / "wandb-history.jsonl").is_file() or any(run_dir.glob("run-*.wandb"))
    return TRACKER_CONSOLE if wandb else None


def _parquet_data(file: Path, options: LoadOptions) -> str | None:
    """A Parquet file in a walk that is data, not a run (a dataset's shards): its footer names no
    step and loss; told as such, and the text readers never open it."""
    from sentinel.analyze.loaders import parquet_table

    return None if parquet_table.sniff(file, options) else PARQUET_DATA


def _superseded_checkpoints(folder: Path, subfolders: list[Path]) -> dict[Path, str]:
    """A Trainer's ``checkpoint-N`` folders whose log history a later file holds (see
    :func:`~sentinel.analyze.loaders.hf_trainer_state.superseded_checkpoints`)."""
    if not any(sub.name.startswith("checkpoint-") for sub in subfolders):
        return {}
    from sentinel.analyze.loaders import hf_trainer_state  # the loaders' own imports: lazily

    return hf_trainer_state.superseded_checkpoints(folder, subfolders)


def _directory_reason(name: str) -> str | None:
    if name in _TOOL_DIRS:
        return TOOL_DIRECTORY
    if name in _PACKAGING_DIRS or name.endswith(_PACKAGING_SUFFIXES):
        return PACKAGING
    return None


# What a damaged or hostile file raises while being read: an OS error (permissions, a file
# that vanished), a ValueError (not UTF-8, a parser's complaint, a missing named column), a
# RecursionError (JSON nested thousands deep), a MemoryError.
READ_ERRORS = (OSError, ValueError, RecursionError, MemoryError)


def _guarded(path: Path, read, skipped: list[Skipped], too_long_raises: bool = False):
    """``read()``, or None with ``path`` recorded as unreadable (one line naming the error).

    Any error is the file's own problem, not the walk's: a loader that fails on a file it did not
    expect (a bug of sentinel's) costs that file, and the runs beside it are still read. With
    ``too_long_raises``, a path too long for the system (ENAMETOOLONG) is raised to the caller.
    """
    try:
        return read()
    except Exception as err:  # noqa: BLE001 - recorded with its message, never silent
        if too_long_raises and isinstance(err, OSError) and err.errno == errno.ENAMETOOLONG:
            raise
        if not isinstance(err, READ_ERRORS) and debugging():
            raise
        skipped.append(Skipped(str(path), UNREADABLE, describe_error(path, err)))
        log.debug("%s not read", path, exc_info=True)
        return None


def debugging() -> bool:
    """Whether ``SENTINEL_DEBUG`` is set: an unexpected error then propagates with its traceback
    instead of becoming one line about the path it happened on."""
    return bool(os.environ.get("SENTINEL_DEBUG"))


def describe_error(path: Path, err: BaseException) -> str:
    """One line naming the path, the problem and the fix.

    Example:
        >>> describe_error(Path("m.csv"), PermissionError(13, "Permission denied"))
        "cannot read 'm.csv' (Permission denied): fix its permissions or leave it out"
    """
    if isinstance(err, OSError) and err.errno == errno.ENAMETOOLONG:
        return (f"cannot read '{_shortened(path)}' ({len(str(path))} characters): paths there are longer than "
                "the system allows, so nothing below it was analysed: move it to a shorter path")
    if isinstance(err, OSError):
        return f"cannot read '{_shortened(path)}' ({err.strerror or err}): fix its permissions or leave it out"
    if isinstance(err, RecursionError):
        return f"'{path}' nests data too deeply to read: leave it out"
    if isinstance(err, MemoryError):
        return f"'{path}' is too large to read in memory: leave it out"
    if isinstance(err, UnicodeDecodeError):
        return f"'{path}' is not UTF-8 text ({err.reason} at byte {err.start}): leave it out"
    message = " ".join(str(err).split())
    if not isinstance(err, READ_ERRORS):  # not a problem of the file's that a loader foresaw
        return (f"cannot read '{path}' ({type(err).__name__}: {message[:300]}): this is a bug in sentinel, "
                "please report it with the file (SENTINEL_DEBUG=1 shows the traceback); leave it out meanwhile")
    return message if str(path) in message else f"{path}: {message}"


def _shortened(path: Path, limit: int = 200) -> str:
    """``path`` as text, its middle elided beyond ``limit`` characters (a path thousands of
    characters long is one line of a warning, not a screenful).

    Example:
        >>> _shortened(Path("a/" * 150 + "run"), 20)
        'a/a/a/a/a/.../a/a/a/run'
    """
    text = str(path)
    if len(text) <= limit:
        return text
    return text[: limit // 2] + "..." + text[-(limit // 2):]


def _claim_directory(directory: Path, modules: Iterable[ModuleType], skipped: list[Skipped]) -> ModuleType | None:
    """The loader that reads ``directory`` as one run, or None.

    Raises:
        OSError: the names inside ``directory`` do not fit in a path (ENAMETOOLONG): the walk
            ends there, with one warning for the branch.
    """
    for module in modules:
        if module.NAME in ("sentinel", "tensorboard") and _guarded(directory, lambda: module.sniff(directory),
                                                                    skipped, too_long_raises=True):
            return module
    return None


def _binary_problem(path: Path) -> str | None:
    """Said of a file no loader read whose start is binary data (a NUL byte, or a third of its
    bytes control characters, in its first 8 KB; a UTF-16 or UTF-32 text starts with its mark):
    a checkpoint or an archive under a log's name was told to name a table's columns."""
    if is_compressed(path) or path.suffix.lower() in PARQUET_SUFFIXES:
        return None  # binary by design: its reader tells its problem
    try:
        with open(path, "rb") as f:
            head = f.read(8192)
    except OSError:
        return None
    if not head or head.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")):
        return None
    controls = sum(head.count(bytes([c])) for c in range(32) if c not in (9, 10, 12, 13, 27))
    if b"\x00" not in head and controls * 3 < len(head):
        return None
    return (f"'{path}' holds binary data, not text (a checkpoint or an archive under a log's name?): pass a training "
            "log, its table or its TensorBoard event files (`sentinel formats` lists what is read)")


def _text_problem(path: Path, options: LoadOptions) -> str | None:
    """What keeps a text log that no dialect took from being read, where its lines say so."""
    from sentinel.analyze.loaders import pipe_table, textlogs

    if is_compressed(path):
        return None
    return pipe_table.why_not(path, options) or textlogs.why_not(path, options, least=SHORT_PASTE_RECORDS)


# Tables among the files a walk passed over whose problem is looked for (each reads a header).
_TABLES_ASKED = 20
_TABLE_SUFFIXES = (".csv", ".tsv")


def _a_table_to_name(skipped: list[Skipped]) -> str | None:
    """What an option would fix in the first table a walk passed over as no log (a tracker's
    export named after its metric, with columns the walk cannot tell: ``--loss-col value``), as
    the file named on its own says it; None where no such table is among them."""
    tables = [Path(s.path) for s in skipped if s.reason == NOT_A_LOG and Path(s.path).suffix.lower() in _TABLE_SUFFIXES]
    for table in tables[:_TABLES_ASKED]:
        problem = _table_problem(table)
        if problem is not None and "--" in problem:
            return problem
    return None


def _table_problem(path: Path) -> str | None:
    """What keeps a table that no loader took from being read (a compressed one's, of its text)."""
    from sentinel.analyze.loaders.generic_table import why_not

    if path.suffix.lower() in PARQUET_SUFFIXES:
        from sentinel.analyze.loaders import parquet_table

        return parquet_table.why_not(path)
    if not is_compressed(path):
        return why_not(path)
    with decompressed(path) as (plain, _):
        problem = why_not(plain)
    return None if problem is None else problem.replace(str(plain), str(path))


def _load_file(file: Path, modules: Iterable[ModuleType], options: LoadOptions) -> list[RunData] | None:
    from sentinel.analyze.loaders.textlog import heads_shared  # the loaders' own imports: lazily

    with heads_shared():  # the loaders' sniffs read the file's head once
        return _claim_and_load(file, modules, options)


def _claim_and_load(file: Path, modules: Iterable[ModuleType], options: LoadOptions) -> list[RunData] | None:
    if is_compressed(file):
        from sentinel.analyze.loaders.textlog import SNIFF_BYTES  # the loaders' own imports: lazily

        # Sniffed on the start of what it holds: a folder of compressed data (a corpus's shards,
        # MNIST's idx files) is not decompressed whole to learn that it holds no log.
        with decompressed(file, first=SNIFF_BYTES) as (head, note):
            module = _claimant(head, modules, options)
        if module is None:
            if note is not None:  # what the cut-off data held is not a log (yet)
                raise ValueError(f"{file}: {note}; that much is not a log sentinel reads")
            return None
        with decompressed(file) as (plain, note):
            try:
                runs = module.load(plain, options)
            except ValueError as err:  # named as the file the user gave, not the temporary copy
                raise ValueError(str(err).replace(str(plain), str(file))) from None
        for run in runs:
            run.path = str(file)
            run.warnings = [w.replace(str(plain), str(file)) for w in run.warnings]
            if note is not None:
                run.warnings.append(f"{file.name}: {note}")
        return runs
    module = _claimant(file, modules, options)
    return None if module is None else module.load(file, options)


# A text file named on its own is read from this many record lines (a directory walk needs each
# dialect's own count, five for a generic one, so a stray file with a few numbers is no run; two
# rows under a header are a quote).
SHORT_PASTE_RECORDS = 3
# ... or two: the line before a NaN and the NaN ("ep=22 ... loss=0.671", "ep=23 ... loss=nan"), a
# bar at 7,000 steps and at 30,000 asking why the loss did not go down: what a user pastes (read
# with a warning that two values judge little); or one or none, where a library's line says the
# loss went non-finite (TensorFlow's "global step 1: loss = 12.6" and its "LossTensor is inf or
# nan" error). One line that prints a NaN is not enough: a sentence, a report's line.
FEWEST_PASTE_RECORDS = 2
SAID_NONFINITE_RECORDS = 1


def _short_paste(file: Path, options: LoadOptions) -> list[RunData] | None:
    """A text file named on its own with a few record lines only (a paste from an issue: four
    lines, the last one NaN; two; one or none, where a library's line says the loss went NaN), read
    with a warning; None when it has fewer."""
    from sentinel.analyze.loaders import textlogs  # the loaders' own imports: lazily

    if is_compressed(file):
        return None
    events_alone = None  # a reading of event lines alone: a smaller one may find the records beside them
    for least, enough in ((SHORT_PASTE_RECORDS, None), (FEWEST_PASTE_RECORDS, None),
                          (SAID_NONFINITE_RECORDS, _says_nonfinite)):
        try:
            runs = textlogs.load(file, options, least=least) if textlogs.sniff(file, options, least=least) else []
        except ValueError:
            runs = []
        if runs and (enough is None or any(enough(run) for run in runs)):
            if not _events_alone(runs):
                break
            events_alone = events_alone or runs
    else:
        if events_alone is None:
            return None
        runs = events_alone
    for run in runs:
        count = len(run.steps)
        run.warnings.append(f"only {count} step line{'s' if count != 1 else ''}: {_NAMED_ALONE}")
    return runs


def _few_blocks(file: Path, options: LoadOptions) -> list[RunData] | None:
    """A text file named on its own that holds fewer logger blocks than a walk reads (one block
    of guided-diffusion's ``| loss | nan |`` pasted with the lines after it), read with a warning;
    None otherwise. A block is no sentence: one is read."""
    from sentinel.analyze.loaders import sb3_console  # the loaders' own imports: lazily

    if is_compressed(file):
        return None
    blocks = sb3_console.head_blocks(file)
    if not blocks or sb3_console.claims(blocks) or not sb3_console.claims(blocks, least=1):
        return None
    runs = sb3_console.load(file, options)
    for run in runs:
        run.warnings.append(f"only {run.meta['blocks']} logger block(s): read because the file was named "
                            "on its own (in a directory it would be no run)")
    return runs


def _says_nonfinite(run: RunData) -> bool:
    """Whether a line of a text log (a library's, not a record's value) says something went
    non-finite: its event names the line."""
    events = run.events
    if "kind" not in events.columns or "line" not in events.columns:
        return False
    return bool(events["line"][events["kind"] == "nonfinite"].notna().any())


def _table_under_lines(file: Path, options: LoadOptions) -> list[RunData] | None:
    """A file named on its own that holds a delimited table under a few lines that are no table
    (a notebook's paste: the Hugging Face Trainer's progress line above its ``Step  Training Loss
    Validation Loss`` table), read as that table with a warning; None otherwise. Read whole
    otherwise, its rows with a validation loss printed three numbers to a line and were lost."""
    from sentinel.analyze.loaders import generic_table
    from sentinel.analyze.loaders.textlog import read_text, run_name

    if is_compressed(file) or file.stat().st_size > _TABLE_UNDER_LINES_BYTES:
        return None
    named = options.loss_col is not None or options.step_col is not None
    line = generic_table.header_below(file, options)
    if line is None and named:
        line = generic_table.header_below(file)  # the table, where a named column is not in it: said below
    if line is None:
        return None
    lines = read_text(file).splitlines(keepends=True)
    with tempfile.TemporaryDirectory(prefix="sentinel-") as tmp:
        table = Path(tmp) / file.name
        table.write_text("".join(lines[line:]), encoding="utf-8")
        os.utime(table, (file.stat().st_atime, file.stat().st_mtime))  # settled as the file is
        try:
            runs = generic_table.load(table, options)
        except ValueError as err:
            if named:  # a column the table lacks: its columns said
                message = str(err).replace(str(table), str(file))
                raise NoRunsError(message if str(file) in message else f"{file}: {message}") from None
            return None
    for run in _named_after(runs, file, table):
        run.warnings.insert(0, f"{file.name}: read as the table whose header is line {line + 1} (the "
                               f"{'line' if line == 1 else f'{line} lines'} above it not read)")
    return runs


# A table under a few lines is copied to be read: at most this much (a paste, not a run's log).
_TABLE_UNDER_LINES_BYTES = 64 << 20


def _bare_numbers(file: Path, options: LoadOptions) -> list[RunData] | None:
    """A file named on its own that holds one or two numbers per line and no header (the loss, or a
    step and the loss: ``np.savetxt``'s output), read as such with a warning; None otherwise. Never
    in a directory walk, where a file of numbers is data."""
    from sentinel.analyze.loaders import bare_numbers  # the loaders' own imports: lazily

    if is_compressed(file):
        return None
    width, numeric = bare_numbers.layout(file) or (None, ())
    if bare_numbers.numbered_columns(options, width, numeric) is not None:  # --step-col 1 --loss-col 3
        return bare_numbers.load(file, options)
    if options.step_col is not None or options.loss_col is not None:
        return None
    if width in (1, 2) and len(numeric) == width or bare_numbers.mlflow_metric_file(file):
        return bare_numbers.load(file, options)
    if bare_numbers.printed_list(file) is not None:  # print(losses), repr(np.array(losses))
        return bare_numbers.load_printed_list(file)
    return None


def _numpy_saved(file: Path, options: LoadOptions) -> list[RunData]:
    """A loss history saved with NumPy (:mod:`~sentinel.analyze.loaders.numpy_saved`), named on its
    own; in a directory walk such a file is data."""
    from sentinel.analyze.loaders import numpy_saved

    try:
        return numpy_saved.load(file, options)
    except ValueError as err:
        raise NoRunsError(str(err)) from None


def _rows_in_order(file: Path, options: LoadOptions) -> list[RunData] | None:
    """A table named on its own with a loss and no step column, its rows numbered in order
    (:func:`~sentinel.analyze.loaders.generic_table.load_rows_in_order`); None otherwise."""
    from sentinel.analyze.loaders import generic_table

    return None if is_compressed(file) else generic_table.load_rows_in_order(file, options)


def _bare_numbers_problem(file: Path) -> str | None:
    from sentinel.analyze.loaders import bare_numbers

    return None if is_compressed(file) else bare_numbers.problem(file)


def _notebook_runs(path: Path, options: LoadOptions) -> list[RunData]:
    """The runs of a Jupyter notebook named on its own: the text its cells printed
    (:mod:`~sentinel.analyze.loaders.notebook_outputs`), read as a pasted log is, under the
    notebook's name (in a directory walk a notebook is source code).

    Raises:
        NoRunsError: the notebook holds no output, or none that reads as a training log.
    """
    from sentinel.analyze.loaders import notebook_outputs
    from sentinel.analyze.loaders.textlog import run_name

    try:
        text = notebook_outputs.output_text(path)
    except ValueError as e:
        raise NoRunsError(f"'{path}' is no Jupyter notebook ({e}): pass a notebook saved by Jupyter, or a log "
                          "file") from None
    if text is None:
        raise NoRunsError(f"'{path}' is a notebook that holds no output (not run, or saved without its outputs): "
                          "run it and save it with its outputs, or pass the logs its training wrote")
    with tempfile.TemporaryDirectory(prefix="sentinel-notebook-") as folder:
        copy = Path(folder) / f"{path.stem}.log"
        copy.write_text(text, encoding="utf-8", errors="replace")  # (JSON may hold a lone surrogate: "\\ud800")
        try:
            runs = discover(copy, options).runs
        except (NoRunsError, ValueError) as e:  # its words name the notebook, not the copy
            raise type(e)(str(e).replace(str(copy), str(path)).replace(copy.name, path.name)) from None
    for run in _named_after(runs, path, copy):
        run.warnings = [w.replace(str(copy), str(path)).replace(copy.name, path.name)
                        .replace(f"{run_name(copy)}#", f"{run_name(path)}#") for w in run.warnings]
    return runs


def _named_after(runs: list[RunData], file: Path, copy: Path) -> list[RunData]:
    """``runs`` read from ``copy`` (a temporary copy of ``file``'s text), named and placed as
    ``file``'s, each training's ``#k`` kept."""
    from sentinel.analyze.loaders.textlog import run_name

    copied = run_name(copy)
    for run in runs:
        run.path, run.name = str(file), run_name(file) + run.name.removeprefix(copied)
    return runs


def _claimed_document(file: Path, modules: Iterable[ModuleType], options: LoadOptions) -> list[RunData] | None:
    """A Markdown / reStructuredText file named on its own, read where a text loader claims it: a
    log kept in notes or pasted from an issue (in a directory walk the same name is a README)."""
    for module in modules:
        if getattr(module, "READS_DOCUMENTS", False) and module.sniff(file, documents=True):
            try:
                return module.load(file, options)
            except ValueError:  # a few log-like lines in prose: it is the document it is named as
                return None
    return None


def _claimant(file: Path, modules: Iterable[ModuleType], options: LoadOptions) -> ModuleType | None:
    """The first loader whose sniffer claims ``file`` (a sentinel run directory is claimed as a
    directory, never here)."""
    for module in modules:
        if module.NAME == "sentinel":
            continue
        if module.sniff(file, options) if getattr(module, "SNIFF_TAKES_OPTIONS", False) else module.sniff(file):
            return module
    return None
