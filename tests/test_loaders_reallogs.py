"""The text loaders on real public training logs (``shared/reallogs`` beside the repository).

Each folder holds a log as its authors wrote it and, for the Megatron excerpts and the llm.c
logs, a CSV transcription made independently of this code: the loaders must agree with it.
"""

from __future__ import annotations

import csv
import importlib
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sentinel import metrics
from sentinel.analyze.loaders import LOADER_MODULES, LoadOptions
from sentinel.events import EventKind

REALLOGS = Path(__file__).resolve().parents[2] / "shared" / "reallogs"
pytestmark = pytest.mark.skipif(
    not (REALLOGS / "INDEX.md").is_file(),
    reason=f"real logs not found at {REALLOGS} (a 'shared/reallogs' directory beside the repository)",
)

# Files that are provenance, not logs: no loader may claim them.
_NOT_LOGS = {"SOURCE.md", "labels.json", "config.json", "INDEX.md", "labels.csv"}


def _folders() -> list[str]:
    if not REALLOGS.is_dir():
        return []
    return sorted(p.name for p in REALLOGS.iterdir() if p.is_dir())


def _files() -> list[Path]:
    if not REALLOGS.is_dir():
        return []
    return sorted(p for p in REALLOGS.rglob("*") if p.is_file())


def _expected_loader(path: Path) -> str | None:
    if path.name in _NOT_LOGS:
        return None
    if path.name.endswith(".verbatim.txt"):
        return "megatron"
    if path.suffix in (".log", ".txt"):
        return "llmc"
    if path.suffix in (".csv", ".jsonl"):
        return "generic_table"
    raise AssertionError(f"unexpected file in reallogs: {path}")


def _lookup(path: Path):
    """The first loader, in LOADER_MODULES order, whose sniff claims the file (as discovery does)."""
    for name in LOADER_MODULES:
        try:
            module = importlib.import_module(f"sentinel.analyze.loaders.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"sentinel.analyze.loaders.{name}":
                raise
            continue  # not written yet
        if module.sniff(path):
            return module
    return None


def _load(path: Path):
    module = _lookup(path)
    assert module is not None, f"no loader claims {path}"
    (run,) = module.load(path, LoadOptions())
    return run


def test_index_lists_every_folder():
    index = (REALLOGS / "INDEX.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| ([a-z0-9_]+) \|", index, flags=re.MULTILINE)) - {"folder"}
    assert listed == set(_folders())
    for folder in _folders():
        assert (REALLOGS / folder / "SOURCE.md").is_file()
        json.loads((REALLOGS / folder / "labels.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(REALLOGS)))
def test_every_file_goes_to_the_right_loader(path):
    module = _lookup(path)
    expected = _expected_loader(path)
    assert (module.NAME if module else None) == expected
    if module is None:
        return
    (run,) = module.load(path, LoadOptions())
    assert run.source == expected
    assert run.steps.index.is_monotonic_increasing and run.steps.index.is_unique
    assert run.steps[metrics.LOSS].notna().sum() > 0
    # exp12's last iteration line prints no lm loss, its iterations taken: the authors' "diverged".
    said = ["1 iteration line(s) print no loss though their iterations were taken (first at 9027): Megatron "
            "leaves out a loss whose average is not above 0, so it was NaN there"] if path.name == "exp12_8738_9027.verbatim.txt" else []
    assert run.warnings == said


def _megatron_pairs() -> list[Path]:
    return sorted(REALLOGS.glob("*/*.verbatim.txt")) if REALLOGS.is_dir() else []


@pytest.mark.parametrize("verbatim", _megatron_pairs(), ids=lambda p: p.name)
def test_megatron_text_matches_authors_transcription(verbatim):
    run = _load(verbatim)
    assert run.source == "megatron"
    table = pd.read_csv(verbatim.with_name(verbatim.name.replace(".verbatim.txt", ".csv"))).set_index("iteration")
    steps = run.steps
    assert steps.index.tolist() == table.index.tolist()
    pairs = {
        metrics.LOSS: "lm_loss",
        metrics.GRAD_NORM_TOTAL: "grad_norm",
        metrics.LR: "lr",
        metrics.LOSS_SCALE: "loss_scale",
        metrics.AMP_SKIPPED_STEPS: "skipped_iters",
        "nan_iterations": "nan_iters",
        "global_batch_size": "global_batch_size",
        "consumed_samples": "consumed_samples",
    }
    for key, column in pairs.items():
        expected = table[column].to_numpy(dtype=float)
        got = steps[key].to_numpy() if key in steps.columns else np.full(len(steps), np.nan)
        np.testing.assert_allclose(got, expected, rtol=1e-12, equal_nan=True, err_msg=f"{verbatim.name}: {key}")
    overflow = steps[metrics.AMP_OVERFLOW] if metrics.AMP_OVERFLOW in steps.columns else pd.Series(0.0, steps.index)
    np.testing.assert_array_equal(overflow.to_numpy(), table["overflow_msg_before"].to_numpy(dtype=float))
    assert run.meta["train_iters"] == int(table["total_iters"].iloc[0])


def test_tr8b_overflow_lines_become_events_at_their_iterations():
    verbatim = REALLOGS / "bigscience_tr8b104b_spike17062" / "tr8b_17060_17068.verbatim.txt"
    table = pd.read_csv(verbatim.with_name("tr8b_17060_17068.csv")).set_index("iteration")
    run = _load(verbatim)
    overflow = run.events[run.events["kind"] == EventKind.OVERFLOW.value]
    expected_steps = table.index[table["overflow_msg_before"] == 1].tolist()
    assert expected_steps == [17062, 17063, 17064, 17065, 17067, 17068]
    assert overflow["step"].tolist() == expected_steps
    # The scale DeepSpeed reduced to is the scale Megatron logs on that iteration's line.
    np.testing.assert_array_equal(overflow["new_scale"].to_numpy(), table.loc[expected_steps, "loss_scale"].to_numpy())
    assert overflow["attempted_scale"].iloc[0] == 1048576.0
    assert set(run.events["kind"]) == {EventKind.OVERFLOW.value}


def test_labelled_peaks_are_the_loss_maxima_of_the_excerpts():
    with open(REALLOGS / "labels.csv", encoding="utf-8") as f:
        labels = [row for row in csv.DictReader(f) if row["peak_step"]]
    assert labels
    for row in labels:
        verbatim = REALLOGS / row["folder"] / row["file"].replace(".csv", ".verbatim.txt")
        run = _load(verbatim)
        assert int(run.steps[metrics.LOSS].idxmax()) == int(row["peak_step"]), row


@pytest.mark.parametrize(
    ("log", "transcription", "train_steps"),
    [
        ("llmc_gpt2_124m_stable/main.log", "llmc_gpt2_124m_stable/main.csv", 19_560),
        (
            "modded_nanogpt_adamw_124m_stable/f66d43d7-e449-4029-8adf-e8537bab49ea.log",
            "modded_nanogpt_adamw_124m_stable/train.csv",
            9_536,
        ),
    ],
)
def test_llmc_logs_match_their_transcription(log, transcription, train_steps):
    run = _load(REALLOGS / log)
    assert run.source == "llmc"
    table = pd.read_csv(REALLOGS / transcription).set_index("step")
    steps = run.steps
    assert steps[metrics.LOSS].notna().sum() == train_steps
    assert steps.index.tolist() == table.index.tolist()
    pairs = {metrics.LOSS: "train_loss", "val_loss": "val_loss", metrics.LR: "lr", metrics.GRAD_NORM_TOTAL: "grad_norm"}
    for key, column in pairs.items():
        if column not in table.columns:
            assert key not in steps.columns
            continue
        np.testing.assert_array_equal(steps[key].to_numpy(), table[column].to_numpy(dtype=float), err_msg=key)


def _cs336_runs() -> list[Path]:
    return sorted(REALLOGS.glob("cs336_tinystories_lr_sweep/*/metrics.jsonl")) if REALLOGS.is_dir() else []


@pytest.mark.parametrize("path", _cs336_runs(), ids=lambda p: p.parent.name)
def test_cs336_jsonl_runs_load_with_loss_and_lr(path):
    run = _load(path)
    assert run.source == "generic_table"
    assert run.name == path.parent.name
    train, val = {}, {}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if "train_loss" in row:
            train[row["step"]] = (row["train_loss"], row["lr"])
        if "val_loss" in row:
            val[row["step"]] = row["val_loss"]
    assert len(train) == 500
    steps = run.steps
    loss = steps[metrics.LOSS].dropna()
    assert loss.index.tolist() == sorted(train)
    assert loss.tolist() == [train[s][0] for s in sorted(train)]
    assert steps.loc[sorted(train), metrics.LR].tolist() == [train[s][1] for s in sorted(train)]
    assert steps["val_loss"].dropna().to_dict() == val
    config = json.loads((path.parent / "config.json").read_text(encoding="utf-8"))
    assert steps[metrics.LR].max() == pytest.approx(config["lr"])  # the warmup reaches the peak lr
