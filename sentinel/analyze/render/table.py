"""Terminal rendering: one block per run, a summary line and its incidents in step order; for several
runs, a count by verdict at the end."""

from __future__ import annotations

import textwrap

from sentinel.analyze.render.text import clean_text, fmt
from sentinel.analyze.report import Report, RunReport, Verdict

_SEVERITY_MARK = {"info": "info", "warning": "WARN", "critical": "CRIT"}
_INFO_PER_KIND = 5  # informational incidents listed per kind; the rest are counted in one line


def render_table(report: Report, width: int = 100) -> str:
    """The report as plain-text tables, one per run.

    Every string taken from a log (names, paths, messages, warnings) passes through
    :func:`clean_text`: no escape sequence or control character reaches the terminal.

    Args:
        report: what :func:`sentinel.analyze` returned.
        width: messages longer than this many characters are wrapped.

    Example:
        >>> print(render_table(sentinel.analyze("logs/run1")))  # doctest: +SKIP
        run1 (sentinel) logs/run1 -- recovered
        ...
    """
    text = "\n\n".join(_run(run, width) for run in report.runs) + "\n"
    return text if len(report.runs) < 2 else text + "\n" + verdict_summary(report, width) + "\n"


# Runs named in the summary per verdict, at most: a directory of hundreds of runs stays one screen.
_NAMED_PER_VERDICT = 10
_SUMMARY_ORDER = (Verdict.UNHEALTHY, Verdict.RECOVERED, Verdict.NO_LOSS, Verdict.HEALTHY)


def verdict_summary(report: Report, width: int = 100) -> str:
    """One line counting the runs by verdict, then the runs that were not healthy by name: what
    a directory of many runs comes to, after their tables.

    Example:
        >>> from sentinel.analyze.report import Report, RunReport
        >>> runs = [RunReport(name=n, path=n, source="t", steps=1, first_step=0, last_step=0, final_loss=1.0,
        ...                   best_loss=1.0, verdict=Verdict(v), incidents=[], warnings=[], data=None)
        ...         for n, v in [("a", "healthy"), ("b", "unhealthy"), ("c", "healthy")]]
        >>> print(verdict_summary(Report(runs)))
        3 runs: 1 unhealthy, 2 healthy
          unhealthy: b
    """
    by_verdict: dict[Verdict, list[str]] = {}
    for run in report.runs:
        by_verdict.setdefault(run.verdict, []).append(clean_text(run.name))
    counts = ", ".join(f"{len(by_verdict[v])} {v.value}" for v in _SUMMARY_ORDER if v in by_verdict)
    lines = [f"{len(report.runs)} runs: {counts}"]
    for verdict in _SUMMARY_ORDER[:-1]:  # the healthy ones are the rest
        names = by_verdict.get(verdict, [])
        if names:
            more = len(names) - _NAMED_PER_VERDICT
            line = f"{verdict.value}: {', '.join(names[:_NAMED_PER_VERDICT])}"
            line += f" and {more} more" if more > 0 else ""
            lines += textwrap.wrap(line, width, initial_indent="  ", subsequent_indent="    ",
                                   break_long_words=False, break_on_hyphens=False)
    return "\n".join(lines)


def _run(run: RunReport, width: int) -> str:
    lines = [f"{clean_text(run.name)} ({clean_text(run.source)}) {clean_text(run.path)} -- {run.verdict.value}",
             f"  {run.step_unit}s {run.steps} ({fmt(run.first_step)}..{fmt(run.last_step)})  "
             f"final loss {fmt(run.final_loss)}  best loss {fmt(run.best_loss)}"]
    counts = run.counts
    if counts:
        lines.append("  " + ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items())))
    for warning in run.warnings:
        lines.append(f"  warning: {clean_text(warning)}")
    if not run.incidents:
        lines.append("  no incidents")
        return "\n".join(lines)
    rows, folded = [], {}
    for i in run.incidents:
        if i.severity.value == "info":
            shown = sum(1 for r in rows if r[1] == "info" and r[2] == i.kind)
            if shown >= _INFO_PER_KIND:  # a long stable run has many harmless blips
                folded[i.kind] = folded.get(i.kind, 0) + 1
                continue
        rows.append((f"{i.step}" if i.step == i.end_step else f"{i.step}-{i.end_step}",
                     _SEVERITY_MARK[i.severity.value], i.kind, clean_text(i.message)))
    rows += [("...", "info", kind, f"{n} more like these (--format json lists every incident)")
             for kind, n in folded.items()]
    widths = [max(len(r[c]) for r in rows + [(run.step_unit, "sev", "kind", "")]) for c in range(3)]
    header = (run.step_unit.ljust(widths[0]), "sev".ljust(widths[1]), "kind".ljust(widths[2]))
    lines.append("  " + "  ".join(header) + "  message")
    lines.append("  " + "  ".join("-" * w for w in widths) + "  " + "-" * 7)
    indent = 2 + sum(widths) + 6
    for row in rows:
        head = "  " + "  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths)) + "  "
        lines.extend(_wrap(head, row[3], indent, width))
    return "\n".join(lines)


def _wrap(head: str, message: str, indent: int, width: int) -> list[str]:
    room = max(width - indent, 40)
    words, out, line = message.split(" "), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > room:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    out.append(line)
    return [head + out[0]] + [" " * indent + rest for rest in out[1:]]
