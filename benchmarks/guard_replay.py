"""Replay the guard's decisions over real training logs: skipped updates, rollbacks, give-ups.

For every logged loss (and grad-norm) series in ``shared/reallogs`` this drives the same online
detectors and the same decision function the engine calls (``SentinelConfig().make_*_detector``
and :func:`sentinel.guard.policy.decide`) step by step, and counts what the guard would have
done. A log is a record of a run that was not guarded, so after a decision the replay simply
goes on with the logged values; and no batch can be re-run, so the weights check that clears
bad-data streaks in a live run is unknown here (``weights_ok=None``): the figures are what the
guard does without it, an upper bound on its rollbacks.

The BigScience items are excerpts of 3-11 rows pasted by their authors: a live guard would have
had thousands of steps of history, so they are judged with the analyzer's short-history setting
(``min_history=1``: from the first row, big jumps only) instead of the guard's 20-value warm-up.

Targets: 0 rollbacks and 0 give-ups on every run its authors call healthy; every labelled
BigScience spike answered (a skipped update or a rollback at a labelled step).

Usage:
    python benchmarks/guard_replay.py                 # shared/reallogs beside the repository
    python benchmarks/guard_replay.py --reallogs DIR
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

from sentinel import metrics
from sentinel.analyze.discover import discover_runs
from sentinel.config import SentinelConfig
from sentinel.guard.judge import StepJudge
from sentinel.guard.policy import Action, GuardState, decide

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "reallogs"

HEALTHY = [("llmc_gpt2_124m_stable", "main.log"),
           *[("cs336_tinystories_lr_sweep", f"lr_sweep_{lr}/metrics.jsonl")
             for lr in ("1e-4", "3e-4", "1e-3", "3e-3", "1e-2", "3e-2")]]
UNSTABLE = [("cs336_tinystories_lr_sweep", f"lr_sweep_{lr}/metrics.jsonl") for lr in ("1e-1", "3e-1", "1")]
# (folder, file, labelled steps: an answer at any of them counts)
LABELLED = [
    ("bloom176b_tr11_spike31216", "tr11_31214_31251.verbatim.txt", range(31216, 31220)),
    ("bigscience_tr8b104b_spike17062", "tr8b_17060_17068.verbatim.txt", range(17062, 17063)),
    ("bigscience_tr1_13b_spike29050", "tr1_29020_29090.verbatim.txt", range(29041, 29061)),
    ("bigscience_tr8_104b_glitches", "exp1_7000_7220.verbatim.txt", range(7001, 7011)),
    ("bigscience_tr8_104b_glitches", "exp2_6900_6940.verbatim.txt", range(6910, 6931)),
    ("bigscience_tr8_104b_glitches", "exp11_11446_11448.verbatim.txt", range(11447, 11449)),
    ("bigscience_tr8_104b_glitches", "exp12_8738_9027.verbatim.txt", range(8740, 8744)),
]


def replay(steps, config: SentinelConfig) -> dict:
    """Judge every logged step as the engine does, then ``decide``; what the guard would have done."""
    judge = StepJudge(config)
    state, cooldown_until = GuardState(), -1
    out = {"skips": [], "rollbacks": [], "gave_up": None, "longest_loss_streak": 0}
    loss = steps[metrics.LOSS] if metrics.LOSS in steps else None
    grad = steps[metrics.GRAD_NORM_TOTAL] if metrics.GRAD_NORM_TOTAL in steps else None
    for i, step in enumerate(steps.index):
        x = float(loss.iloc[i]) if loss is not None else math.nan
        g = float(grad.iloc[i]) if grad is not None else math.nan
        if math.isnan(x) and math.isnan(g):
            continue  # nothing logged at this step (a frame cannot tell a logged NaN from none)
        signals = judge.judge(int(step), None if math.isnan(x) else x, None if math.isnan(g) else g,
                              nonfinite=math.isinf(x) or math.isinf(g))
        d = decide(signals, state, config.guard, cooling_down=int(step) <= cooldown_until)
        state = d.state
        out["longest_loss_streak"] = max(out["longest_loss_streak"], state.outlier_streak)
        if d.action is Action.SKIP_UPDATE:
            out["skips"].append(int(step))
        elif d.action is Action.ROLLBACK:
            out["rollbacks"].append((int(step), d.reason.value))
            cooldown_until = int(step) + config.guard.cooldown
        elif d.action is Action.GIVE_UP:
            out["gave_up"] = int(step)
            break
    return out


def _load(path: Path):
    (run,) = discover_runs(path)
    return run.steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reallogs", type=Path, default=DEFAULT, help="the reallogs directory")
    args = parser.parse_args(argv)
    root = args.reallogs
    if not (root / "labels.csv").is_file():
        parser.error(f"no labels.csv in '{root}': pass --reallogs DIR (shared/reallogs)")
    config = SentinelConfig()
    short = replace(config, loss_spike=replace(config.loss_spike, min_history=1),
                    grad_spike=replace(config.grad_spike, min_history=1))
    rows = ["| log | steps | authors | skipped updates | rollbacks | give-ups |", "|---|---|---|---|---|---|"]
    failures = []

    def row(name, steps, label, r):
        rb = ", ".join(f"{s} ({why})" for s, why in r["rollbacks"]) or "0"
        rows.append(f"| {name} | {len(steps)} | {label} | {len(r['skips'])} | {rb} | "
                    f"{r['gave_up'] if r['gave_up'] is not None else 0} |")

    records = sorted((root / "modded_nanogpt_records").glob("*.txt"))
    totals = {"runs": 0, "steps": 0, "skips": 0, "rollbacks": 0, "gave_up": 0, "max_skips": 0}
    longest = {}  # healthy log -> its longest streak of loss outliers (updates withheld in a row)
    for path in records:
        steps = _load(path)
        r = replay(steps, config)
        totals["runs"] += 1
        totals["steps"] += len(steps)
        totals["skips"] += len(r["skips"])
        totals["max_skips"] = max(totals["max_skips"], len(r["skips"]))
        longest[path.name] = r["longest_loss_streak"]
        totals["rollbacks"] += len(r["rollbacks"])
        totals["gave_up"] += r["gave_up"] is not None
        if r["rollbacks"] or r["gave_up"] is not None:
            failures.append(f"healthy {path.name}: {r}")
    rows.append(f"| modded_nanogpt_records ({totals['runs']} runs) | {totals['steps']} | healthy | "
                f"{totals['skips']} (at most {totals['max_skips']} in one run) | {totals['rollbacks']} | "
                f"{totals['gave_up']} |")
    for folder, file in HEALTHY:
        steps = _load(root / folder / file)
        r = replay(steps, config)
        row(f"{folder}/{file}", steps, "healthy", r)
        longest[f"{folder}/{file}"] = r["longest_loss_streak"]
        if r["rollbacks"] or r["gave_up"] is not None:
            failures.append(f"healthy {folder}/{file}: {r}")
    for folder, file in UNSTABLE:
        steps = _load(root / folder / file)
        row(f"{folder}/{file}", steps, "unstable", replay(steps, config))
    for folder, file, labelled in LABELLED:
        steps = _load(root / folder / file)
        r = replay(steps, short)
        answered = set(r["skips"]) | {s for s, _ in r["rollbacks"]}
        ok = bool(answered & set(labelled))
        row(f"{folder}/{file}", steps, f"spike {labelled.start}-{labelled.stop - 1}: "
            f"{'answered' if ok else 'MISSED'}", r)
        if not ok:
            failures.append(f"labelled {folder}/{file}: nothing at {labelled.start}-{labelled.stop - 1}: {r}")
    sys.stdout.write("\n".join(rows) + "\n")
    worst = max(longest.values())
    sys.stdout.write(f"\nhealthy logs ({len(longest)}): the longest streak of loss outliers is {worst} "
                     f"(in {sum(n == worst for n in longest.values())} logs)\n")
    for f in failures:
        sys.stdout.write(f"FAIL {f}\n")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
