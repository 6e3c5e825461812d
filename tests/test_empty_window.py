"""Lightning 1.x's progress bar shows its loss as NaN before a step has run: no NaN of the run's."""

from __future__ import annotations

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs


def _tqdm_log(path, losses: dict[int, str], batches: int = 50, epochs: int = 3):
    """A Lightning 1.x tqdm bar redrawn every 5 batches, its loss ``losses[step]`` where given."""
    draws = []
    for epoch in range(epochs):
        for count in range(0, batches + 1, 5):
            step = epoch * batches + count
            loss = losses.get(step, f"{2.3 - 0.01 * step:.3f}")
            draws.append(f"Epoch {epoch}:  {count * 2}%|##   | {count}/{batches} [00:01<00:10, 5.00it/s, "
                         f"loss={loss}, v_num=0]")
    path.write_text("\r".join(draws) + "\n")
    return path


def test_the_bars_nan_before_the_first_step_is_no_nan_of_the_run(tmp_path):
    """`0/50 [..., loss=nan, v_num=0]`: the mean of an empty window (Lightning's float("NaN")), then finite from
    the next draw. It was a critical NaN at step 0 and the run "recovered"."""
    (run,) = discover_runs(_tqdm_log(tmp_path / "bar.log", {0: "nan"}))
    report = analyze_run(run)
    assert report.verdict == "healthy" and run.steps.index[0] == 5
    assert any("NaN while none has run" in warning for warning in run.warnings)


def test_a_first_step_nan_that_lasts_past_the_window_is_the_runs(tmp_path):
    """A NaN in the first step's loss keeps the mean NaN for the window's 20 steps and more: the run's own."""
    nans = {step: "nan" for step in range(0, 40, 5)}
    (run,) = discover_runs(_tqdm_log(tmp_path / "bar.log", nans))
    assert [i.kind for i in analyze_run(run).incidents if i.severity.name == "CRITICAL"] == ["nonfinite"]
    assert run.steps.index[0] == 5  # (the draw at step 0, before any batch, still is none)
    # a script's own tqdm bar (no v_num: no running mean of Lightning's) keeps its first NaN
    path = tmp_path / "own.log"
    path.write_text(_tqdm_log(tmp_path / "x.log", {0: "nan"}).read_text().replace(", v_num=0", ""))
    (run,) = discover_runs(path)
    assert run.steps.index[0] == 0


def test_the_rich_bars_nan_before_its_metrics_refresh(tmp_path):
    """lightning-hydra-template's Rich bar: `0/6 ... loss: nan` and `1/6 ... loss: nan` (drawn before the
    metrics refreshed), then `6/6 ... loss: 1.63`: a healthy run called recovered from a NaN at steps 0-1."""
    lines = []
    for epoch in range(4):
        for count, loss in ((0, "nan" if epoch == 0 else "1.6"), (1, "nan" if epoch == 0 else "1.5"), (6, "1.63")):
            lines.append(f"Epoch {epoch}    ━━━━━━━━━━━━━━━━━━ {count}/6 0:00:00 • -:--:-- 0.00it/s loss: "
                         f"{loss if epoch == 0 else f'{float(loss) - 0.1 * epoch:.2f}'} val/loss: 2.342")
    path = tmp_path / "rich.log"
    path.write_text("\n".join(lines) + "\n")
    (run,) = discover_runs(path)
    assert analyze_run(run).verdict == "healthy"
    assert run.steps["loss"].notna().all()
