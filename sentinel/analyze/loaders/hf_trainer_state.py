"""Loader for Hugging Face ``trainer_state.json`` (every ``checkpoint-N/`` folder has one).

``log_history`` is a list of the dicts the Trainer logged, each with its ``step``: training
rows (``loss``, ``grad_norm``, ``learning_rate``, ``epoch``) and evaluation rows
(``eval_loss``, ...), merged by step. The run's final summary row (``train_runtime``,
``train_loss``) is not a step and is kept in ``meta``.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd

from sentinel import metrics
from sentinel.analyze.loaders import LoadOptions, RunData
from sentinel.analyze.loaders.json_array import items_before_damage
from sentinel.analyze.loaders.keys import canonical_key, whole_step
from sentinel.analyze.loaders.textlog import read_head, rows_to_steps

NAME = "hf_trainer_state"
DESCRIPTION = "Hugging Face trainer_state.json (log_history)"

_CHECKPOINT = re.compile(r"checkpoint-(\d+)")
STATE = "trainer_state.json"
_KEYS = {"loss": metrics.LOSS, "learning_rate": metrics.LR, "grad_norm": metrics.GRAD_NORM_TOTAL}


# A JSON object's start: its brace, then its first key's quote.
_JSON_OBJECT_START = re.compile(r"\ufeff?\s*\{\s*\"")


def sniff(path: str | Path) -> bool:
    """True for a ``trainer_state.json`` with a ``log_history``; under another name (a copy saved
    as ``whisper-ja-trainer_state.json``), for a JSON file whose head holds the Trainer state's
    ``log_history`` and ``global_step`` both; and so for a text file that is one such JSON object
    (its content pasted into ``issue.log``, perhaps cut short).

    Example:
        >>> sniff("/nonexistent/trainer_state.json")
        False
    """
    name = Path(path).name
    suffix = Path(name).suffix.lower()
    if suffix not in (".json", ".log", ".txt", ""):
        return False
    head = read_head(path)
    if head is not None and suffix != ".json" and head.lstrip("\ufeff \t\r\n")[:1] in ('"', "}") \
            and _FRAGMENT_ENTRY.search(head, 0, 4096):
        return True  # a piece of its log_history pasted: its entries' lines, from inside one
    if head is None or (suffix != ".json" and _JSON_OBJECT_START.match(head, 0, 4096) is None):
        return False  # (a text log's first characters, before any search of its head: a printed dict's are "{'")
    return '"log_history"' in head and (name == "trainer_state.json" or '"global_step"' in head)


def load(path: str | Path, options: LoadOptions | None = None) -> list[RunData]:
    """Read the ``log_history`` of one ``trainer_state.json``.

    Args:
        path: the file.
        options: ``loss_col`` picks another logged key as the loss.

    Returns:
        One :class:`RunData`, named after its run folder (the parent of ``checkpoint-N``).

    Raises:
        ValueError: the file is not valid JSON or its ``log_history`` has no step.

    Example:
        >>> run = load("out/checkpoint-500/trainer_state.json")[0]  # doctest: +SKIP
        >>> run.meta["logging_steps"]  # doctest: +SKIP
        10
    """
    options = options or LoadOptions()
    cut: list[str] = []
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
        state = json.loads(text)
    except ValueError as err:
        state = _history_before_damage(text, err, path, cut) if isinstance(err, json.JSONDecodeError) else None
        state = state or _history_piece(text, path, cut)
        if state is None:
            raise ValueError(f"{path}: not readable as JSON ({err}); pass an intact trainer_state.json") from err
    except OSError as err:
        raise ValueError(f"{path}: not readable ({err}); pass an intact trainer_state.json") from err
    rows: dict[int, dict[str, float]] = {}
    summary: dict = {}
    bad_steps = 0
    history = state.get("log_history") if isinstance(state, dict) else None
    for entry in history if isinstance(history, list) else []:
        if not isinstance(entry, dict) or "step" not in entry:
            continue
        if "train_runtime" in entry:
            summary = entry
            continue
        step = whole_step(entry["step"])
        if step is None:
            bad_steps += 1
            continue
        row = rows.setdefault(step, {})
        for key, value in entry.items():
            if key == "step" or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            try:
                number = float(value)
            except OverflowError:  # an integer beyond float range is as infinite as 1e400 parsed
                number = math.copysign(math.inf, value)
            row[_name(key, options)] = number
    warnings = cut + ([f"{Path(path).name}: {bad_steps} log_history entr{'y' if bad_steps == 1 else 'ies'} whose step "
                       "is not a whole number that fits 64 bits (null, text, 1e400) "
                       f"{'was' if bad_steps == 1 else 'were'} skipped"] if bad_steps else [])
    if not rows:
        raise ValueError(f"{path}: log_history has no rows with a step"
                         + (f" ({warnings[0]})" if warnings else "") + "; was the run logged at all?")
    meta = {"format": NAME, "logging_steps": state.get("logging_steps"), "global_step": state.get("global_step")}
    best = state.get("best_model_checkpoint")
    if isinstance(best, str) and best.strip():  # the Trainer's own pick, by its metric_for_best_model
        meta["best_checkpoint"] = Path(best.strip().rstrip("/\\")).name
    if summary:
        meta["summary"] = summary
    folder = Path(path).parent
    name = folder.parent.name if folder.name.startswith("checkpoint-") and folder.parent.name else folder.name
    if Path(path).name != STATE:
        name = Path(path).stem  # a copy under its own name (a paste beside others in one folder)
    steps: pd.DataFrame = rows_to_steps(rows)
    return [RunData(name=name or Path(path).stem, path=str(path), source=NAME, steps=steps, meta=meta,
                    warnings=warnings)]


# A log_history entry's step line, closed by its brace a few lines on ("step": 3720, then "}," after two more keys).
_FRAGMENT_ENTRY = re.compile(r'^[^\S\n]*"step":[^\S\n]*\d+,?[^\S\n]*\n(?:[^\S\n]*"[^"\n]+":[^\n]*\n){0,8}'
                             r'[^\S\n]*\},?[^\S\n]*$', re.MULTILINE)
_ENTRY = re.compile(r"\{?([^{}\[\]]*)\}")


def _history_piece(text: str, path, notes: list[str]) -> dict | None:
    """A piece of a ``log_history`` pasted (pretty-printed entries, the first perhaps begun before the paste):
    each whole entry read on its own, with a note; None where fewer than two have a step.

    Example:
        >>> piece = '  "loss": 5.28,\\n  "step": 3720\\n},\\n{\\n  "loss": 5.22,\\n  "step": 3740\\n}'
        >>> [e["step"] for e in _history_piece(piece, "x.log", [])["log_history"]]
        [3720, 3740]
    """
    entries = []
    for match in _ENTRY.finditer(text):
        body = re.sub(r",\s*$", "", match.group(1).strip())
        try:
            entry = json.loads("{" + body + "}")
        except ValueError:
            continue
        if isinstance(entry, dict) and "step" in entry:
            entries.append(entry)
    if len(entries) < 2:
        return None
    notes.append(f"{Path(path).name}: a piece of a trainer_state.json's log_history: its {len(entries)} whole entries "
                 "are read")
    return {"log_history": entries}


def _history_before_damage(text: str, err: json.JSONDecodeError, path, notes: list[str]) -> dict | None:
    """A damaged state's ``log_history`` as far as its entries come whole (a checkpoint written
    while the disk filled up, a process killed mid-save), with a note; None where none does."""
    key = re.search(r'"log_history"\s*:\s*(?=\[)', text)
    if key is None or key.end() > err.pos:
        return None
    entries, _ = items_before_damage(text, key.end())
    if not entries:
        return None
    # The Trainer sorts the state's keys: global_step comes before the history, logging_steps after.
    global_step = re.search(r'"global_step"\s*:\s*(\d+)', text[: key.start()])
    notes.append(f"{Path(path).name}: damaged at line {err.lineno}, column {err.colno} ({err.msg}; cut off while "
                 f"written?): the {len(entries)} log_history entries before it are read")
    return {"log_history": entries, "global_step": global_step and int(global_step.group(1))}


def _name(key: str, options: LoadOptions) -> str:
    if options.loss_col is not None and key.lower() == options.loss_col.lower():
        return metrics.LOSS
    name = _KEYS.get(key, canonical_key(key))
    if name == metrics.LOSS and (key != "loss" or options.loss_col is not None):
        return key.lower()  # train_loss, another loss, or displaced by --loss-col
    return name


def superseded_checkpoints(folder: Path, subfolders: list[Path]) -> dict[Path, str]:
    """The ``checkpoint-N`` folders of a Trainer's output ``folder`` whose history another file
    holds, each with that file: a checkpoint's ``trainer_state.json`` logs every step from the
    start, so the last checkpoint's holds the earlier ones' (and ``trainer.save_state()``'s, in
    the output folder itself, holds them all). Read once, the run is one run, not one per
    checkpoint. A checkpoint whose losses the later file does not hold is another training's
    (three trainings into one ``results/`` folder: two were dropped as "earlier checkpoints").

    Example:
        >>> superseded_checkpoints(Path("/nonexistent"), [])
        {}
    """
    saved = {}
    for sub in subfolders:
        number = _CHECKPOINT.fullmatch(sub.name)
        if number is not None and (sub / STATE).is_file():
            saved[sub] = int(number.group(1))
    if not saved or (len(saved) < 2 and not (folder / STATE).is_file()):
        return {}
    # Each checkpoint, the latest first, is held by a file already kept whose losses include all of
    # its own; else it is another training's (trainings run one after another into one output
    # folder, an SFT stage before a GRPO stage) and holds those before it in turn.
    holders = [(folder / STATE, _logged_losses(folder / STATE))] if (folder / STATE).is_file() else []
    superseded = {}
    for sub in sorted(saved, key=saved.get, reverse=True):
        losses = _logged_losses(sub / STATE)
        holder = next((path for path, held in holders if losses is None or held is None or losses <= held), None)
        if holder is None:
            holders.append((sub / STATE, losses))
        else:
            superseded[sub] = str(holder)
    return superseded


def _logged_losses(path: Path) -> set[tuple[int, float]] | None:
    """The ``(step, loss)`` pairs of a Trainer state's training rows; None where it cannot be read
    (its loader tells the problem)."""
    try:
        with open(path, encoding="utf-8") as f:
            history = json.load(f).get("log_history")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(history, list):
        return None
    return {(row.get("step"), round(float(row["loss"]), 6)) for row in history
            if isinstance(row, dict) and isinstance(row.get("loss"), (int, float))}
