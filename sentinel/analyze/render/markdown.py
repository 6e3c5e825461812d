"""Markdown rendering: a summary table of the runs, then each run's incidents."""

from __future__ import annotations

from sentinel.analyze.render.text import fmt
from sentinel.analyze.report import Report


def render_markdown(report: Report) -> str:
    """The report as GitHub-flavoured markdown.

    Example:
        >>> print(render_markdown(sentinel.analyze("logs/run1")))  # doctest: +SKIP
        # sentinel analyze
        ...
    """
    out = ["# sentinel analyze", "",
           "| run | source | steps | final loss | best loss | verdict | incidents |",
           "|---|---|---:|---:|---:|---|---|"]
    for run in report.runs:
        counts = ", ".join(f"{k} {n}" for k, n in sorted(run.counts.items())) or "none"
        out.append(f"| {_cell(run.name)} | {run.source} | {run.steps} | {fmt(run.final_loss)} | "
                   f"{fmt(run.best_loss)} | **{run.verdict.value}** | {counts} |")
    for run in report.runs:
        out += ["", f"## {run.name}", "", f"`{run.path}`, steps {fmt(run.first_step)}..{fmt(run.last_step)}", ""]
        for warning in run.warnings:
            out.append(f"> warning: {warning}")
        if run.warnings:
            out.append("")
        if not run.incidents:
            out.append("No incidents.")
            continue
        out += ["| step | severity | kind | message |", "|---:|---|---|---|"]
        for i in run.incidents:
            span = f"{i.step}" if i.step == i.end_step else f"{i.step}-{i.end_step}"
            out.append(f"| {span} | {i.severity.value} | {i.kind} | {_cell(i.message)} |")
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
