"""A W&B run resumed with the same id (wandb.init(id=..., resume=...)) writes a second run folder:
one run, read as one, with the first launch's blow-up as the stretch the resume replaced. A real
pair of offline launches written by wandb 0.31 (see the fixture's PROVENANCE.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs

FIXTURE = Path(__file__).parent / "fixtures" / "logs" / "wandb_resumed"
FIRST = "offline-run-20261205_075141-resum01"


def test_the_two_launches_of_a_resumed_wandb_run_are_one_run():
    (run,) = discover_runs(FIXTURE)
    assert run.name == FIRST and run.steps.index.tolist() == list(range(200))
    assert run.steps["loss"].loc[60:].max() < 3.9  # the resumed history, not the blow-up
    (stretch,) = run.abandoned
    assert (stretch.resumed_at, stretch.first, stretch.last) == (60, 60, 99)
    report = analyze_run(run)
    assert report.verdict.value == "recovered"
    (spike,) = [i for i in report.incidents if i.kind == "loss_spike"]
    assert spike.step == 80 and spike.details.get("replaced")


def test_launches_of_other_ids_or_folders_stay_apart(tmp_path):
    # another run's id in the same folder
    shutil.copytree(FIXTURE / FIRST, tmp_path / "wandb" / FIRST)
    shutil.copytree(FIXTURE / f"{FIRST}-1", tmp_path / "wandb" / "offline-run-20261205_080000-other99")
    (tmp_path / "wandb" / "offline-run-20261205_080000-other99" / "run-resum01.wandb").rename(
        tmp_path / "wandb" / "offline-run-20261205_080000-other99" / "run-other99.wandb")
    assert len(discover_runs(tmp_path / "wandb")) == 2
    # the same id in two projects' folders
    shutil.copytree(FIXTURE / FIRST, tmp_path / "a" / FIRST)
    shutil.copytree(FIXTURE / f"{FIRST}-1", tmp_path / "b" / f"{FIRST}-1")
    assert len(discover_runs(tmp_path)) == 4
