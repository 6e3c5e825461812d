"""A training process that stopped in an error: a text log that ends in a Python traceback, or in the shell's
line that says the process died of a signal (``Killed``, ``Segmentation fault``)."""

from __future__ import annotations

import re

from sentinel.analyze.incident import Incident, IncidentKind, Severity


# DeepSpeed's loss scaler (raise_error_at_min_scale) and fairseq's trainer, when the scale can go no lower.
_AT_MINIMUM_SCALE = re.compile(r"loss scale already at minimum|Minimum loss scale reached", re.IGNORECASE)


def crash_incidents(crash: dict | None) -> list[Incident]:
    """One incident where the log ends in a traceback after its last step line, or in the shell's
    line that says the process died of a signal (a loader's ``meta["crash"]``: ``error``,
    ``after_step``, ``line``, ``signal``): a warning, since the run did not finish; information
    where it was stopped by hand (``KeyboardInterrupt``).

    Example:
        >>> [i.message for i in crash_incidents({"error": "KeyError: 'x'", "after_step": 90, "line": 12})]
        ["the training stopped after step 90 with KeyError: 'x' (the log ends in its traceback, line 12): it did not finish"]
    """
    if not crash:
        return []
    error, after, line = crash["error"], int(crash["after_step"]), crash.get("line")
    where = f", line {line}" if line else ""
    # (a training that a later launch appended to the same log followed: its traceback is no end of the log)
    ends = "its traceback before the log's next launch" if crash.get("relaunched") else "the log ends in its traceback"
    details = {"error": error, "line": line}
    if crash.get("signal"):  # the shell's word for the signal the process died of
        why = {"Killed": "; SIGKILL, most often the kernel's out-of-memory killer (dmesg tells) or a scheduler's limit",
               "Terminated": "; SIGTERM, a scheduler's time limit or a kill"}.get(error, "")
        if error.startswith("Slurm"):
            return [Incident(IncidentKind.CRASH, after, after, Severity.WARNING,
                             f"the training was stopped after step {after}: {error} (line {line}; a time limit, a "
                             "preemption or scancel): it did not finish", {**details, "resolved": False})]
        said = "the log ends in" if crash.get("ends", True) else "its script printed"
        return [Incident(IncidentKind.CRASH, after, after, Severity.WARNING,
                         f"the training process died after step {after}: {said} '{error}' (line {line}{why}): "
                         "it did not finish", {**details, "resolved": False})]
    if crash.get("watchdog"):  # NCCL's watchdog took the process down: a collective timed out
        return [Incident(IncidentKind.CRASH, after, after, Severity.WARNING,
                         f"the training stopped after step {after}: a collective operation timed out and NCCL's "
                         f"watchdog took the process down (line {line}: {error}): a rank hung or died (a data loader "
                         "stuck, an out-of-memory on one rank, a step one rank skipped); it did not finish",
                         {**details, "resolved": False})]
    if error is None:  # the traceback cut off before its exception line (a paste's window)
        return [Incident(IncidentKind.CRASH, after, after, Severity.WARNING,
                         f"the training stopped after step {after} in an exception ({ends}"
                         f"{where}, cut off before its error line): it did not finish", {**details, "resolved": False})]
    if error.split(":")[0].endswith("KeyboardInterrupt"):
        return [Incident(IncidentKind.CRASH, after, after, Severity.INFO,
                         f"the training was stopped by hand (KeyboardInterrupt) after step {after}",
                         {**details, "resolved": True})]
    if _AT_MINIMUM_SCALE.search(error):  # the scaler's own give-up: every step overflowed at its floor
        return [Incident(IncidentKind.CRASH, after, after, Severity.CRITICAL,
                         f"the training stopped after step {after}: its fp16 loss scale was at its minimum and the "
                         f"steps still overflowed ({error}, {ends}{where})",
                         {**details, "resolved": False})]
    return [Incident(IncidentKind.CRASH, after, after, Severity.WARNING,
                     f"the training stopped after step {after} with {error} ({ends}{where}): "
                     "it did not finish", {**details, "resolved": False})]
