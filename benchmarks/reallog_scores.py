"""Score ``sentinel analyze`` on the real public training logs against their authors' labels.

For each log in ``shared/reallogs`` (see its INDEX.md), prints what the authors say happened
(from ``labels.csv``) next to what the analyzer found: its verdict and every incident at
warning or above with its steps (informational findings are counted). The BigScience excerpts
are read from their verbatim Megatron-DeepSpeed text, the others from their original logs.
Then every modded-nanogpt record run (healthy by their authors' account): the verdict counts,
and each run not judged healthy with what was found.

Usage:
    python benchmarks/reallog_scores.py                 # shared/reallogs beside the repository
    python benchmarks/reallog_scores.py --reallogs DIR
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

from sentinel.analyze.analyzer import analyze

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "reallogs"
RECORDS = "modded_nanogpt_records"

# (folder, file analysed, the labels.csv file its labels are listed under)
LOGS = [
    ("llmc_gpt2_124m_stable", "main.log", "main.csv"),
    ("modded_nanogpt_adamw_124m_stable", "f66d43d7-e449-4029-8adf-e8537bab49ea.log", "train.csv"),
    *[("cs336_tinystories_lr_sweep", f"lr_sweep_{lr}/metrics.jsonl", f"lr_sweep_{lr}/metrics.jsonl")
      for lr in ("1e-4", "3e-4", "1e-3", "3e-3", "1e-2", "3e-2", "1e-1", "3e-1", "1")],
    ("bloom176b_tr11_spike31216", "tr11_31214_31251.verbatim.txt", "tr11_31214_31251.csv"),
    ("bigscience_tr8b104b_spike17062", "tr8b_17060_17068.verbatim.txt", "tr8b_17060_17068.csv"),
    ("bigscience_tr1_13b_spike29050", "tr1_29020_29090.verbatim.txt", "tr1_29020_29090.csv"),
    *[("bigscience_tr8_104b_glitches", f"{stem}.verbatim.txt", f"{stem}.csv")
      for stem in ("exp1_7000_7220", "exp2_6900_6940", "exp11_11446_11448", "exp12_8738_9027")],
]


def expected(labels: dict, folder: str, file: str) -> str:
    """The authors' labels of one log, e.g. ``loss_spike_recovered onset 31216 peak 31219``."""
    parts = []
    for row in labels.get((folder, file), []):
        steps = [f"{name} {row[key]}" for name, key in
                 (("onset", "onset_step"), ("peak", "peak_step"), ("recovered", "recovered_step")) if row[key]]
        parts.append(" ".join([row["label"], *steps]))
    return "; ".join(parts) or "?"


def found(path: Path) -> tuple[str, list[str], int]:
    """``(verdict, ["kind step-end severity", ...] at warning or above, number of info findings)``."""
    (run,) = analyze(path).runs
    shown = [f"{i.kind} {i.step}" + (f"-{i.end_step}" if i.end_step != i.step else "") + f" ({i.severity.value})"
             for i in run.incidents if i.severity.value != "info"]
    return run.verdict.value, shown, sum(i.severity.value == "info" for i in run.incidents)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reallogs", type=Path, default=DEFAULT, help="the reallogs directory")
    args = parser.parse_args(argv)
    if not (args.reallogs / "labels.csv").is_file():
        parser.error(f"no labels.csv in '{args.reallogs}': pass --reallogs DIR (shared/reallogs)")
    labels: dict = defaultdict(list)
    with open(args.reallogs / "labels.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            labels[(row["folder"], row["file"])].append(row)

    lines = ["| log | expected (authors' label) | verdict | found (warning and above) | info |",
             "|---|---|---|---|---|"]
    for folder, file, label_file in LOGS:
        verdict, shown, info = found(args.reallogs / folder / file)
        name = f"{folder}/{file}".replace("cs336_tinystories_lr_sweep/", "cs336/")
        lines.append(f"| {name} | {expected(labels, folder, label_file)} | {verdict} | "
                     f"{'<br>'.join(shown) or '-'} | {info} |")
    lines += ["", *records(args.reallogs / RECORDS)]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def records(folder: Path) -> list[str]:
    """Verdicts over the record runs: ``["78 runs, 78 healthy", "| run | verdict | found |", ...]``."""
    files = sorted(p for p in folder.glob("*.txt"))
    verdicts: dict[str, int] = defaultdict(int)
    rows, info = [], 0
    for path in files:
        (run,) = analyze(path).runs
        verdicts[run.verdict.value] += 1
        info += sum(i.severity.value == "info" for i in run.incidents)
        if run.verdict.value != "healthy":
            shown = [f"{i.kind} {i.step} ({i.severity.value})" for i in run.incidents if i.severity.value != "info"]
            rows.append(f"| {path.name} | {run.verdict.value} | {'<br>'.join(shown)} |")
    summary = ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items()))
    out = [f"modded-nanogpt record runs: {len(files)} runs: {summary}; {info} informational findings "
           "(outlier batches)"]
    if rows:
        out += ["", "| run | verdict | found (warning and above) |", "|---|---|---|", *rows]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
