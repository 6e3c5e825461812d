"""The detectors' defaults against real public training logs (see reallogs/INDEX.md)."""

from __future__ import annotations

import json
import pathlib

import pandas as pd
import pytest

from sentinel.detect import DivergenceConfig, detect_divergence, detect_spikes

ROOT = pathlib.Path("/work/shared/reallogs")
pytestmark = pytest.mark.skipif(not ROOT.is_dir(), reason="real logs not present on this machine")

# NaN in these tables means "no train loss at this step" (validation-only rows).
TABLE_DIVERGENCE = DivergenceConfig(skip_nan=True)


def _cs336(lr: str) -> pd.Series:
    rows = [json.loads(line) for line in (ROOT / f"cs336_tinystories_lr_sweep/lr_sweep_{lr}/metrics.jsonl").open()]
    rows = [r for r in rows if "train_loss" in r]
    return pd.Series([r["train_loss"] for r in rows], index=[r["step"] for r in rows])


def _bigscience(rel: str) -> pd.Series:
    return pd.read_csv(ROOT / rel).set_index("iteration")["lm_loss"]


def _flagged(series: pd.Series) -> list[int]:
    out = detect_spikes(series)
    return [int(s) for s in out.index[out["is_spike"]]]


@pytest.mark.parametrize(
    "path",
    ["llmc_gpt2_124m_stable/main.csv", "modded_nanogpt_adamw_124m_stable/train.csv"],
)
def test_stable_speedrun_logs_have_no_spike_and_no_divergence(path):
    loss = pd.read_csv(ROOT / path).set_index("step")["train_loss"]
    assert _flagged(loss) == []
    assert not detect_divergence(loss, TABLE_DIVERGENCE)["diverged"].any()


@pytest.mark.parametrize("lr", ["1e-4", "3e-4", "1e-3", "3e-3", "1e-2", "3e-2"])
def test_cs336_stable_learning_rates_are_quiet(lr):
    loss = _cs336(lr)
    assert _flagged(loss) == []
    assert not detect_divergence(loss)["diverged"].any()


@pytest.mark.parametrize("lr", ["1e-1", "3e-1", "1"])
def test_cs336_unstable_learning_rates_show_spikes_or_divergence(lr):
    loss = _cs336(lr)
    assert _flagged(loss) or detect_divergence(loss)["diverged"].any()


@pytest.mark.parametrize(
    "rel, expected",
    [
        ("bloom176b_tr11_spike31216/tr11_31214_31251.csv", [31219]),
        ("bigscience_tr8b104b_spike17062/tr8b_17060_17068.csv", [17062, 17063]),
        ("bigscience_tr1_13b_spike29050/tr1_29020_29090.csv", [29050, 29060, 29070]),
        ("bigscience_tr8_104b_glitches/exp11_11446_11448.csv", [11448]),
        ("bigscience_tr8_104b_glitches/exp12_8738_9027.csv", [8741, 8743, 9026]),
        ("bigscience_tr8_104b_glitches/exp1_7000_7220.csv", [7010]),
        # 6.37 -> 6.60 -> 7.31 -> 9.12: never x1.5 of the few rows before it (short_rtol).
        ("bigscience_tr8_104b_glitches/exp2_6900_6940.csv", []),
    ],
)
def test_bigscience_excerpts_with_short_history(rel, expected):
    assert _flagged(_bigscience(rel)) == expected


def test_bigscience_exp12_diverges_from_its_spike():
    out = detect_divergence(_bigscience("bigscience_tr8_104b_glitches/exp12_8738_9027.csv"))
    assert out["reason"].loc[9027] == "nonfinite"  # the row the authors call diverged has no loss
    assert out["onset"].loc[9027] == 8740
    assert out["reason"].loc[9026] == "sustained"
