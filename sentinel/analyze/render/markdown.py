"""Markdown rendering: a summary table of the runs, then each run's incidents."""

from __future__ import annotations

import re

from sentinel.analyze.render.text import clean_text, fmt
from sentinel.analyze.report import Report


def render_markdown(report: Report) -> str:
    """The report as GitHub-flavoured markdown.

    Every string taken from a log (names, paths, messages, warnings) is escaped: HTML
    (``<script>``, ``<img onerror>``) shows as text, markdown syntax (links, emphasis, code
    spans, table pipes) is literal, control characters are removed.

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
        out.append(f"| {_cell(run.name)} | {_cell(run.source)} | {run.steps} | {fmt(run.final_loss)} | "
                   f"{fmt(run.best_loss)} | **{run.verdict.value}** | {counts} |")
    for run in report.runs:
        out += ["", f"## {_cell(run.name)}", "",
                f"{_cell(run.path)}, {run.step_unit}s {fmt(run.first_step)}..{fmt(run.last_step)}", ""]
        for warning in run.warnings:
            out.append(f"> warning: {_cell(warning)}")
        if run.warnings:
            out.append("")
        if not run.incidents:
            out.append("No incidents.")
            continue
        out += [f"| {run.step_unit} | severity | kind | message |", "|---:|---|---|---|"]
        for i in run.incidents:
            span = f"{i.step}" if i.step == i.end_step else f"{i.step}-{i.end_step}"
            out.append(f"| {span} | {i.severity.value} | {i.kind} | {_cell(i.message)} |")
    return "\n".join(out) + "\n"


_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_ACTIVE = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def _cell(text: str) -> str:
    """Log text as inert markdown: one line, HTML entities, markdown syntax backslash-escaped."""
    text = "".join(_HTML.get(c, c) for c in clean_text(text))
    return _ACTIVE.sub(r"\\\1", text)
