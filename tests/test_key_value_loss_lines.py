"""A loss among a line's key=value pairs, after others, on lines that carry no step."""

from __future__ import annotations

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs

_PREFIX = "2019-02-03 08:03:57,397 INFO     "


def _ppo_log(path, losses, crash: str | None = None):
    """dotaservice's PPO optimizer: "iteration N/10000", its epochs, then its metrics line."""
    lines = []
    for it, loss in enumerate(losses, start=1):
        lines.append(f"{_PREFIX}iteration {it}/10000")
        lines += [f"{_PREFIX} epoch {e}/4" for e in range(1, 5)]
        lines.append(f"{_PREFIX}steps_per_s=428.69, avg_weight_age=5.8, reward_per_sec=-0.0031, loss={loss}, "
                     "entropy=7.529, advantage=-0.027")
    if crash:
        lines += ["Traceback (most recent call last):", '  File "optimizer.py", line 646, in train', crash]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_loss_after_other_pairs_is_read_at_the_iteration_above_it(tmp_path):
    """The lines were refused ("not a log format sentinel reads"): only a line that opens with its loss was read."""
    (run,) = discover_runs(_ppo_log(tmp_path / "ppo.log", [f"{0.5 - 0.02 * k:.4f}" for k in range(8)]))
    assert run.steps.index.tolist() == list(range(1, 9)) and run.steps["loss"].iloc[-1] == 0.36
    assert "each is read at the step a line above it names" in " ".join(run.warnings)


def test_the_error_that_ends_it_is_read_after_the_lines_before_it(tmp_path):
    """The optimizer raised "ValueError: loss=nan, policy_loss=nan, ..." (a line that opens with its loss, another
    shape's): numbered before the metrics lines above it, the NaN was at step 1 and the run "recovered"."""
    path = _ppo_log(tmp_path / "ppo.log", ["-0.1758", "-0.1612", "-0.1544"],
                    crash="ValueError: loss=nan, policy_loss=nan, entropy_loss=nan, advantage_loss=nan")
    (run,) = discover_runs(path)
    assert run.steps["loss"].iloc[:3].tolist() == [-0.1758, -0.1612, -0.1544]
    report = analyze_run(run)
    assert report.verdict == "unhealthy" and [i.step for i in report.incidents if i.kind == "nonfinite"] == [4]
