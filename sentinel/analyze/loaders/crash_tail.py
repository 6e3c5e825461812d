"""A text log that ends in a Python traceback: the training process stopped there.

A pasted log that ends in ``Traceback (most recent call last):`` and an exception line
(``torch.OutOfMemoryError: CUDA out of memory. ...``, ``RuntimeError: NCCL error ...``) after its
last step line tells that the run did not finish; the analyzer reports it beside what the steps
show. Only a traceback after the last step line counts (one in the middle is a warning the run
printed and went on from), and errors that say the loss went non-finite are the non-finite
lines' (:mod:`~sentinel.analyze.loaders.nonfinite_lines`).

Example:
    >>> log = "step 9 loss 2.1\\nTraceback (most recent call last):\\n  File \\"t.py\\", line 3\\nKeyError: 'x'\\n"
    >>> final_error(log, log.index("Traceback"))
    "KeyError: 'x'"
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sentinel.analyze.loaders.nonfinite_lines import WORDS as NONFINITE_WORDS

if TYPE_CHECKING:
    from sentinel.analyze.loaders.log_lines import Lines

# (without its colon: IPython, a notebook's cell, writes "KeyboardInterrupt   Traceback (most recent call last)"
# over frames of its own form)
TRACEBACK = "Traceback (most recent call last)"
# The exception line that ends a traceback: a qualified name, then its message (or none); a bare
# ``Exception`` too (DeepSpeed raises one at its minimum loss scale).
# (after torchrun's "[rank0]: " or "[default0]:", mpirun's "[1,0]<stderr>:" (twice where a rank's
# stderr was tagged again) or Ray's "(RayTrainWorker pid=N) ", where a launcher tags each line with its process)
_LAUNCHER_TAG = (r"(?:\[(?:rank|default)\d+\]:[^\S\n]?|\[(?:\d+,)?\d+\]<std(?:out|err)>:"
                 r"|\((?:[\w.]+ )?pid=\d+(?:, ip=[\d.]+)?\)[^\S\n]?)")
_ERROR_LINE = re.compile(rf"^{_LAUNCHER_TAG}{{0,2}}"
                         r"((?:[A-Za-z_][\w.]*)?(?:Error|Exception|Interrupt|Exit|Warning|Fault))(?::[^\S\n]*(.*))?$",
                         re.MULTILINE)
MAX_MESSAGE = 200
_SAYS_NONFINITE = re.compile(r"(?i)\b(?:nan|inf|infinite|non-?finite)\b")


# The words that chain one traceback to the next: the same error's handling, not another's.
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")


def cut_off(text: str, at: int) -> bool:
    """Whether the traceback at offset ``at`` runs to the text's end with no exception line after
    it: a paste cut inside it (the window it was copied from, a rich or loguru traceback's frames
    too long for the thread), a process killed while it printed.

    Example:
        >>> log = "step 9 loss 2.1\\nTraceback (most recent call last):\\n  File \\"t.py\\", line 3, in <module>\\n"
        >>> cut_off(log, log.index("Traceback")), cut_off(log + "KeyError: 'x'\\n", log.index("Traceback"))
        (True, False)
    """
    return _ERROR_LINE.search(text, at) is None


def final_error(text: str, after: int, defer_nonfinite: bool = True) -> str | None:
    """The exception line that ends the first traceback at or after offset ``after`` in ``text``
    (``Name: message``, the message cut to :data:`MAX_MESSAGE` characters), through the tracebacks
    chained to it ("During handling of the above exception ..."), or None where there is none or
    (``defer_nonfinite``) it says the loss went non-finite: the non-finite rule's, where a line of it
    was read as an event. A later traceback of its own is another's: a notebook's later cell (its
    kernel ran on after the training's cell stopped), a launcher's summary after a rank's error."""
    start = text.find(TRACEBACK, after)
    if start < 0:
        return None
    end = text.find(TRACEBACK, start + 1)
    while end >= 0 and any(words in text[start:end] for words in _CHAINED):
        start, end = end, text.find(TRACEBACK, end + 1)
    errors = list(_ERROR_LINE.finditer(text, start, end if end >= 0 else len(text)))
    if not errors:
        return None
    name, message = errors[-1].group(1), (errors[-1].group(2) or "").strip()
    line = f"{name}: {message}" if message else name
    if defer_nonfinite and (NONFINITE_WORDS[0].search(line) or _SAYS_NONFINITE.search(line)):
        return None  # the non-finite rule's (detectron2's "Loss became infinite or NaN at iteration=N!")
    return line if len(line) <= MAX_MESSAGE else line[:MAX_MESSAGE - 3] + "..."


# What a shell prints where the process it ran died of a signal: bash's "Killed" (SIGKILL: the kernel's
# out-of-memory killer, most often), "Segmentation fault (core dumped)", "Bus error", "Aborted",
# "Terminated"; alone on its line, or in a script's job line ("./train.sh: line 3: 12345 Killed
# python train.py").
# (macOS's bash adds the signal's number, "Killed: 9", "Segmentation fault: 11", "Abort trap: 6"; zsh names it
# in lower case before the command: "zsh: killed     python train.py")
_SIGNALS = r"(Killed|Segmentation fault|Bus error|Aborted|Abort trap|Terminated)(?: \(core dumped\)|: \d+)?"
_JOB_LINE = rf"[^\n]*?: line \d+: +\d+ +{_SIGNALS}(?:[^\S\n]+[^\n]*)?"  # a script's job line (its first group)
_SIGNAL_DEATH = re.compile(rf"{_SIGNALS}[^\S\n]*|{_JOB_LINE}"
                           r"|zsh: (killed|segmentation fault|bus error|abort)[^\S\n]+[^\n]*")


def _signal_said(word: str, line: str) -> str:
    """The signal's ``word``, with " (core dumped)" where its ``line`` says so."""
    return word + (" (core dumped)" if "(core dumped)" in line else "")


def signal_death(text: str, after: int = 0) -> tuple[str, int] | None:
    """The shell's word for the signal its process died of (``Killed``, ``Segmentation fault (core
    dumped)``), where the text's last line after offset ``after`` says it, and that line's offset;
    else None.

    Example:
        >>> signal_death("step 9 loss 2.1\\nKilled\\n")
        ('Killed', 16)
        >>> signal_death("run.sh: line 3: 4242 Segmentation fault (core dumped) python t.py\\n")[0]
        'Segmentation fault (core dumped)'
        >>> signal_death("step 9 loss 2.1\\nTraining killed by the user\\n") is None
        True
        >>> signal_death("Epoch 89 loss 2.1\\nKilled: 9\\n")[0], signal_death("zsh: killed     python train.py\\n")[0]
        ('Killed', 'Killed')
    """
    end = len(text)
    while end and text[end - 1].isspace():  # (the trailing blanks alone: no copy of a long text)
        end -= 1
    start = max(text.rfind("\n", 0, end) + 1, after)
    found = _SIGNAL_DEATH.fullmatch(text, start, end)
    if found is None:
        return None
    return _signal_said(found.group(1) or found.group(2) or found.group(3).capitalize(), found.group(0)), start


# A stop said on a line of its own that need not end the log: a script's job line, the shell's word for the signal its
# command died of ("scripts/run_pos.sh: line 37:  7221 Killed   python -m stanza.models.tagger ...": the script went
# on to its next command), and Slurm's cancellation of the job ("slurmstepd: error: *** JOB 6033515 ON g3040
# CANCELLED AT 2022-08-31T16:21:22 DUE TO TIME LIMIT ***", printed where a bar stood drawn, on its line).
_JOB_LINE_DEATH = re.compile(rf"^{_JOB_LINE}$", re.MULTILINE)
_SLURM_CANCELLED = re.compile(r"slurmstepd(?:-[\w.-]+)?: error: \*\*\* (?:JOB|STEP) [\d.]+ ON \S+ CANCELLED AT \S+"
                              r"(?: DUE TO ([A-Z][A-Z ]*[A-Z]))? \*\*\*")
STOP_WORDS = (": line ", "CANCELLED AT")  # one is on every such line (asked of a text's distinct lines first)


def stop_line(text: str, after: int = 0) -> tuple[str, int] | None:
    """The last line after offset ``after`` that says the training's process was stopped (a script's job line with
    the signal its command died of; Slurm's cancellation of the job), wherever it stands: what it says and where
    its line starts; else None.

    Example:
        >>> stop_line("step 9 loss 2.1\\nrun.sh: line 3:  7221 Killed   python t.py\\nRunning predict\\n")
        ('Killed', 16)
        >>> stop_line("step 9\\nslurmstepd: error: *** JOB 60 ON g3 CANCELLED AT 2022-08-31 DUE TO TIME LIMIT ***")
        ('Slurm cancelled the job (DUE TO TIME LIMIT)', 7)
    """
    if not any(text.find(word, after) >= 0 for word in STOP_WORDS):
        return None
    found = [(m.start(), _signal_said(m.group(1), m.group(0))) for m in _JOB_LINE_DEATH.finditer(text, after)]
    found += [(m.start(), "Slurm cancelled the job" + (f" (DUE TO {m.group(1)})" if m.group(1) else ""))
              for m in _SLURM_CANCELLED.finditer(text, after)]
    if not found:
        return None
    at, said = max(found)
    return said, text.rfind("\n", 0, at) + 1


# PyTorch's NCCL watchdog, where a collective (an all-reduce every rank must join) timed out: it takes the
# process down ("To avoid data inconsistency, we are taking the entire process down"); a rank that hung or
# died, a data loader stuck on one rank, a step one rank skipped.
_WATCHDOG_WORDS = ("NCCL", "entire process down")  # one of them is on every such line
_WATCHDOG_TAIL = 1 << 18  # looked for among a log's last bytes: it ends the log (its frames, other ranks' lines)
_WATCHDOG = re.compile(r"Watchdog caught collective operation timeout[^\n]*|we are taking the entire process down"
                       r"|Some NCCL operations have failed or timed out")


def watchdog_at(text: str, after: int = 0, lines: Lines | None = None) -> int:
    """Where the first line of NCCL's watchdog taking the process down starts in ``text`` after
    offset ``after``, among its last :data:`_WATCHDOG_TAIL` bytes; -1 where none. ``lines``:
    ``Lines(text)``, where the caller has them (their distinct lines are asked first: two searches of
    a long text cost ~2 ms).

    Example:
        >>> watchdog_at("step 9 loss 2\\n[Rank 5] Watchdog caught collective operation timeout: WorkNCCL(...)\\n")
        14
    """
    after = max(after, len(text) - _WATCHDOG_TAIL)
    if not (lines.holds_any(_WATCHDOG_WORDS) if lines is not None else
            any(text.find(w, after) >= 0 for w in _WATCHDOG_WORDS)):
        return -1
    found = list(_WATCHDOG.finditer(text, after))
    return text.rfind("\n", 0, found[0].start()) + 1 if found else -1


def crash_after(text: str, at: int, last_step: int, nonfinite_read: bool, watchdog: int = -1,
                stop: tuple[str, int] | None = None) -> dict | None:
    """``meta["crash"]`` for a log whose last step line is ``last_step``'s: the traceback at offset
    ``at`` (the first after that line; -1: none there) with its error line, None for its error where
    the paste cut it off (unless the non-finite lines told the end: ``nonfinite_read``); else the
    shell's line that says the process died of a signal, at the log's end (``"signal": True``); else
    NCCL's watchdog taking the process down at offset ``watchdog`` (``"watchdog": True``); else ``stop``
    (:func:`stop_line`'s, where no step line follows it: ``"signal": True, "ends": False``).

    Example:
        >>> crash_after("step 9 loss 2.1\\nKilled\\n", -1, 9, False)
        {'error': 'Killed', 'after_step': 9, 'line': 2, 'signal': True}
    """
    if at < 0:
        death = signal_death(text)
        if death is not None:
            return {"error": death[0], "after_step": last_step, "line": text.count("\n", 0, death[1]) + 1,
                    "signal": True}
        if watchdog < 0 and stop is not None:
            return {"error": stop[0], "after_step": last_step, "line": text.count("\n", 0, stop[1]) + 1,
                    "signal": True, "ends": False}
        if watchdog < 0:
            return None
        said = _WATCHDOG.search(text, watchdog).group(0).strip()
        return {"error": said if len(said) <= MAX_MESSAGE else said[:MAX_MESSAGE - 3] + "...",
                "after_step": last_step, "line": text.count("\n", 0, watchdog) + 1, "watchdog": True}
    error = final_error(text, at)
    if error is None and not nonfinite_read:  # a NaN message no event line knows: still the end
        error = final_error(text, at, defer_nonfinite=False)
    # (cut off: which error, the text does not say; after a NaN the lines told, the NaN's, as a NaN's error is)
    if error is not None or (cut_off(text, at) and not nonfinite_read):
        return {"error": error, "after_step": last_step, "line": text.count("\n", 0, at) + 1}
    return None
