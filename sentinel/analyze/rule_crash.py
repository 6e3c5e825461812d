"""A training process that stopped in an error: a text log that ends in a Python traceback."""

from __future__ import annotations

from sentinel.analyze.incident import Incident, IncidentKind, Severity


def crash_incidents(crash: dict | None) -> list[Incident]:
    """One incident where the log ends in a traceback after its last step line (a loader's
    ``meta["crash"]``: ``error``, ``after_step``, ``line``): a warning, since the run did not
    finish; information where it was stopped by hand (``KeyboardInterrupt``).

    Example:
        >>> [i.message for i in crash_incidents({"error": "KeyError: 'x'", "after_step": 90, "line": 12})]
        ["the training stopped after step 90 with KeyError: 'x' (the log ends in its traceback, line 12): it did not finish"]
    """
    if not crash:
        return []
    error, after, line = crash["error"], int(crash["after_step"]), crash.get("line")
    where = f", line {line}" if line else ""
    details = {"error": error, "line": line}
    if error.split(":")[0].endswith("KeyboardInterrupt"):
        return [Incident(IncidentKind.CRASH, after, after, Severity.INFO,
                         f"the training was stopped by hand (KeyboardInterrupt) after step {after}",
                         {**details, "resolved": True})]
    return [Incident(IncidentKind.CRASH, after, after, Severity.WARNING,
                     f"the training stopped after step {after} with {error} (the log ends in its traceback{where}): "
                     "it did not finish", {**details, "resolved": False})]
