"""W&B's binary run file (``run-<id>.wandb``) read without wandb: a real offline run written by
wandb 0.31 (loss spike at step 120, NaN loss at step 170; see the fixture's PROVENANCE.md), the
same file cut off or damaged, and hand-framed records for the cases wandb does not write today.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import struct
import zlib
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import sentinel
from sentinel import metrics
from sentinel.analyze.discover import NoRunsError, discover, discover_runs
from sentinel.analyze.loaders import LoadOptions, wandb_binary, wandb_records
from sentinel.analyze.loaders.wandb_records import BLOCK, FIRST, FULL, LAST, MIDDLE, Tally, records
from sentinel.cli.main import main

FIXTURE = Path(__file__).parent / "fixtures" / "logs" / "wandb_offline_binary"
RUN_DIR = FIXTURE / "offline-run-20261203_013826-nlamigzq"
RUN_FILE = RUN_DIR / "run-nlamigzq.wandb"
SPIKE, NAN_STEP = 120, 170


def _copy(tmp_path: Path, data: bytes | None = None) -> Path:
    run_dir = tmp_path / "wandb" / RUN_DIR.name
    run_dir.mkdir(parents=True)
    path = run_dir / RUN_FILE.name
    if data is None:
        shutil.copyfile(RUN_FILE, path)
    else:
        path.write_bytes(data)
    return path


def _invoke(*args: str):
    result = CliRunner().invoke(main, ["analyze", *args], catch_exceptions=False)
    assert "Traceback" not in result.output
    return result


# --------------------------------------------------------------------------- hand framing


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _item(path: str | tuple[str, ...], value_json: str) -> bytes:
    """A HistoryItem: a str path goes to ``key`` (older wandb), a tuple to ``nested_key``."""
    keys = _field(1, path.encode()) if isinstance(path, str) else b"".join(_field(2, k.encode()) for k in path)
    return keys + _field(16, value_json.encode())


def _history(items: list[bytes], step: int | None = None) -> bytes:
    """A Record holding a HistoryRecord (num = 1 as wandb writes it, then history = 2)."""
    body = b"".join(_field(1, i) for i in items)
    if step is not None:
        body += _field(2, (_varint(1 << 3) + _varint(step)) if step else b"")  # protobuf omits a zero
    return _varint(1 << 3) + _varint(7) + _field(2, body)


def _frame(payloads: list[bytes]) -> bytes:
    """A transaction log of these records, framed as the LevelDB log format says."""
    out = bytearray(b":W&B" + struct.pack("<HB", 0xBEE1, 0))
    for rest in payloads:
        first = True
        while True:
            left = BLOCK - len(out) % BLOCK
            if left < 7:
                out += b"\x00" * left
                continue
            piece, rest = rest[:left - 7], rest[left - 7:]
            kind = (FULL if not rest else FIRST) if first else (LAST if not rest else MIDDLE)
            out += struct.pack("<IHB", zlib.crc32(bytes([kind]) + piece), len(piece), kind) + piece
            first = False
            if not rest:
                break
    return bytes(out)


def _load(tmp_path: Path, payloads: list[bytes]):
    (run,) = wandb_binary.load(_copy(tmp_path, _frame(payloads)), LoadOptions())
    return run


# --------------------------------------------------------------------------- the real run


def test_hand_framing_rebuilds_the_real_file_byte_for_byte():
    payloads = list(records(RUN_FILE, tally := Tally()))
    assert tally == Tally(records=611)
    assert _frame(payloads) == RUN_FILE.read_bytes()  # the reader and the test's writer agree with wandb


def test_offline_run_through_the_api():
    report = sentinel.analyze(FIXTURE)
    (run,) = report.runs
    assert (run.name, run.source, run.steps, run.first_step, run.last_step) == (RUN_DIR.name, "wandb", 200, 0, 199)
    assert run.warnings == [] and report.problems == []
    steps = run.data.steps
    assert steps.index.tolist() == list(range(200))
    assert steps.loc[SPIKE, metrics.LOSS] == 9.5 and steps.loc[SPIKE, metrics.GRAD_NORM_TOTAL] == 40.0
    assert int(steps[metrics.LOSS].idxmax()) == SPIKE
    assert steps.loc[0, metrics.LOSS] == 4.0
    assert steps.loc[1, metrics.LOSS] == pytest.approx(1.0 + 3.0 * math.exp(-1 / 60) + 0.02 * math.sin(1))
    assert steps.loc[19, metrics.LR] == pytest.approx(3e-4) and steps.loc[0, metrics.LR] == pytest.approx(1.5e-5)
    assert math.isnan(steps.loc[NAN_STEP, metrics.LOSS])
    assert steps.loc[SPIKE, "grad/blocks.0"] == 20.0  # a nested key, joined with "/"
    assert steps["eval/loss"].dropna().index.tolist() == [49, 99, 149, 199]
    assert run.data.meta["run_id"] == "nlamigzq" and run.data.meta["display_name"] == "spike-at-120"
    assert run.data.meta["non_numeric_keys"] == ["note"]
    by_step = {(i.step, i.kind) for i in run.incidents}
    assert {k for s, k in by_step if s == SPIKE} >= {"outlier_batch", "grad_norm_spike"}
    assert (NAN_STEP, "nonfinite") in by_step


def test_offline_run_through_the_cli():
    result = _invoke(str(FIXTURE), "--format", "json")
    assert result.exit_code == 0
    (run,) = json.loads(result.output)["runs"]
    assert run["source"] == "wandb" and run["steps"] == 200
    assert {(i["step"], i["kind"]) for i in run["incidents"]} >= {(SPIKE, "outlier_batch"), (NAN_STEP, "nonfinite")}
    table = _invoke(str(RUN_DIR)).output
    assert table.startswith(f"{RUN_DIR.name} (wandb) {RUN_FILE}")
    assert "loss 9.5" in table and "non-finite (nan) at step 170" in table


@pytest.mark.parametrize("path", [RUN_FILE, RUN_DIR, FIXTURE], ids=["file", "run_dir", "parent"])
def test_a_direct_path_and_a_directory_find_the_same_run(path):
    (run,) = discover_runs(path, LoadOptions())
    assert run.path == str(RUN_FILE) and len(run.steps) == 200


def test_loss_col_names_the_loss():
    (run,) = wandb_binary.load(RUN_FILE, LoadOptions(loss_col="eval/loss"))
    assert run.steps[metrics.LOSS].dropna().index.tolist() == [49, 99, 149, 199]
    assert run.steps.loc[SPIKE, "logged_loss"] == 9.5
    with pytest.raises(ValueError, match=r"key 'perplexity' not found in the W&B history; keys found: eval/loss"):
        wandb_binary.load(RUN_FILE, LoadOptions(loss_col="perplexity"))


# --------------------------------------------------------------------------- cut off and damaged


def test_truncated_copy_reads_the_valid_part_with_a_warning(tmp_path):
    data = RUN_FILE.read_bytes()
    path = _copy(tmp_path, data[:50_000])  # inside a record in the second block: a run killed mid-write
    (run,) = discover_runs(path.parent, LoadOptions())
    steps = run.steps.index.tolist()
    assert steps == list(range(len(steps))) and 80 < len(steps) < 200
    assert run.steps.loc[SPIKE if SPIKE in steps else steps[-1], metrics.LOSS] > 0
    (warning,) = run.warnings
    assert "ends inside a record" in warning and "byte(s) were not read" in warning
    result = _invoke(str(path.parent))
    assert result.exit_code == 0 and "ends inside a record" in result.output


def test_every_cut_reads_a_prefix_without_a_traceback(tmp_path):
    data = RUN_FILE.read_bytes()
    whole = wandb_binary.load(RUN_FILE)[0].steps
    first_history = data.index(b"_step")
    path = _copy(tmp_path)
    warned = 0
    for cut in [*range(8, len(data), 1009), 32_583 + 100, 32_768 + 3, 65_536 - 2, len(data) - 1]:
        path.write_bytes(data[:cut])
        if cut <= first_history:
            with pytest.raises(ValueError, match="no history records"):
                wandb_binary.load(path)
            continue
        (run,) = wandb_binary.load(path)
        n = len(run.steps)
        assert run.steps.index.tolist() == list(range(n)), cut
        pd.testing.assert_frame_equal(run.steps, whole.loc[run.steps.index, run.steps.columns])
        assert run.warnings == [] or "ends inside a record" in run.warnings[0]
        warned += bool(run.warnings)
    assert warned > 80


def test_a_bad_checksum_drops_that_record_only(tmp_path):
    data = bytearray(RUN_FILE.read_bytes())
    value = b"\x82\x01\x039.5"  # value_json "9.5": the spike's loss, in its history and summary records
    found = [i for i in range(len(data)) if data.startswith(value, i)]
    for at in found:
        data[at + 3] = ord("8")
    (run,) = wandb_binary.load(_copy(tmp_path, bytes(data)))
    assert run.steps.index.tolist() == [s for s in range(200) if s != SPIKE]
    assert run.warnings == [f"run-nlamigzq.wandb: {len(found)} damaged chunk(s) (bad checksum or header) dropped "
                            f"with {len(found)} record(s); the rest was read"]


def test_damaged_bytes_skip_to_the_next_block(tmp_path):
    data = bytearray(RUN_FILE.read_bytes())
    data[40_000:40_200] = b"\xa5" * 200
    (run,) = wandb_binary.load(_copy(tmp_path, bytes(data)))
    steps = run.steps.index.tolist()
    assert steps[:60] == list(range(60)) and steps[-1] == 199 and 100 < len(steps) < 200
    (warning,) = run.warnings
    assert "damaged chunk(s)" in warning and "byte(s) skipped" in warning


def test_noise_after_a_valid_header_is_one_clear_error(tmp_path):
    rnd = random.Random(0)
    path = _copy(tmp_path, b":W&B" + struct.pack("<HB", 0xBEE1, 0) + rnd.randbytes(100_000))
    with pytest.raises(ValueError, match=r"a W&B run file with no history records \(.*damaged chunk"):
        wandb_binary.load(path)
    with pytest.raises(NoRunsError, match="no history records"):
        discover(path.parents[1])
    result = _invoke(str(path.parents[1]))
    assert result.exit_code == 1 and "no history records" in result.output


def test_a_wrong_header_is_named(tmp_path):
    path = _copy(tmp_path, b":W&B\x00\x01\x00binary")
    with pytest.raises(ValueError, match=r"W&B header with magic 0x0100 version 0, expected 0xbee1"):
        discover_runs(path, LoadOptions())
    empty = _copy(tmp_path / "b", b":W&B" + struct.pack("<HB", 0xBEE1, 0))
    with pytest.raises(ValueError, match="no history records: pass a run that logged"):
        wandb_binary.load(empty)
    assert not wandb_binary.sniff(_copy(tmp_path / "c", b":W&"))


# --------------------------------------------------------------------------- hand-framed records


def test_older_items_steps_and_values(tmp_path):
    rows = [
        _history([_item("loss", "2.5"), _item("_step", "0"), _item("lr", "0.001")], step=0),
        _history([_item("train/loss", "2.25"), _item("grad_norm", '{"blocks.0": 1.5, "total": 3}')], step=1),
        _history([_item(("loss",), "Infinity"), _item(("acc",), "true"), _item(("img",), '{"_type": "image-file"}'),
                  _item(("hist",), "[1, 2]"), _item(("big",), "1" + "0" * 400), _item(("bad",), "{oops")], step=2),
        _history([_item(("loss",), "2.0")]),  # no step at all: counted, skipped
        _history([_item(("loss",), "1.9"), _item(("_step",), "5")]),  # _step without a step field
        _history([_item(("lr",), "0.5"), _item(("_step",), "0")], step=0),  # step 0 again: merged, later wins
    ]
    run = _load(tmp_path, rows)
    assert run.steps.index.tolist() == [0, 1, 2, 5]
    assert run.steps[metrics.LOSS].tolist() == [2.5, 2.25, math.inf, 1.9]
    assert run.steps.loc[1, "grad_norm/blocks.0"] == 1.5 and run.steps.loc[1, "grad_norm/total"] == 3.0
    assert run.steps.loc[2, "big"] == math.inf
    assert run.steps.loc[0, metrics.LR] == 0.5 and run.steps.loc[0, metrics.LOSS] == 2.5
    assert run.meta["non_numeric_keys"] == ["acc", "bad", "hist", "img"]
    assert run.warnings == ["run-nlamigzq.wandb: 1 history row(s) without a _step were skipped"]


def test_a_record_over_four_blocks_is_read_whole(tmp_path):
    long = '"' + "x" * (3 * BLOCK) + '"'
    rows = [_history([_item(("loss",), "3.0"), _item(("_step",), "0")], step=0),
            _history([_item(("note",), long), _item(("loss",), "2.0"), _item(("_step",), "1")], step=1),
            _history([_item(("loss",), "1.0"), _item(("_step",), "2")], step=2)]
    data = _frame(rows)
    kinds = []
    pos = 7
    while pos + 7 <= len(data):
        if BLOCK - pos % BLOCK < 7:
            pos += BLOCK - pos % BLOCK
            continue
        _, n, kind = struct.unpack_from("<IHB", data, pos)
        kinds.append(kind)
        pos += 7 + n
    assert kinds == [FULL, FIRST, MIDDLE, MIDDLE, LAST, FULL]
    run = _load(tmp_path, rows)
    assert run.steps[metrics.LOSS].tolist() == [3.0, 2.0, 1.0] and run.warnings == []


def test_broken_chains_bad_protobuf_and_oversized_records(tmp_path, monkeypatch):
    good = [_history([_item(("loss",), str(4.0 - s)), _item(("_step",), str(s))], step=s) for s in range(4)]
    data = bytearray(_frame(good[:1]))
    orphan = b"stray"  # a LAST chunk whose FIRST was never written
    data += struct.pack("<IHB", zlib.crc32(bytes([LAST]) + orphan), len(orphan), LAST) + orphan
    data += _frame([b"\x0a\xff\xff"])[7:]  # a record that is not protobuf (length past its end)
    data += _frame(good[1:])[7:]
    run = wandb_binary.load(_copy(tmp_path, bytes(data)))[0]
    assert run.steps.index.tolist() == [0, 1, 2, 3]
    assert sorted(run.warnings) == ["run-nlamigzq.wandb: 1 record(s) that are not valid protobuf were skipped",
                                    "run-nlamigzq.wandb: 1 record(s) with missing chunks were dropped"]
    monkeypatch.setattr(wandb_records, "MAX_RECORD_BYTES", 200)
    rows = [*good[:2], _history([_item(("note",), '"' + "y" * 300 + '"'), _item(("_step",), "9")], step=9)]
    run = _load(tmp_path / "o", rows)
    assert run.steps.index.tolist() == [0, 1]
    (warning,) = run.warnings
    assert warning.startswith("run-nlamigzq.wandb: 1 record(s) over")


def test_history_jsonl_beside_the_binary_is_read_once(tmp_path):
    path = _copy(tmp_path)
    (path.parent / "files").mkdir()
    (path.parent / "files" / "wandb-history.jsonl").write_text(
        "".join(json.dumps({"_step": s, "loss": 3.0 - s / 10}) + "\n" for s in range(5)), encoding="utf-8")
    assert not wandb_binary.sniff(path)
    (run,) = discover_runs(path.parent, LoadOptions())
    assert run.path.endswith("wandb-history.jsonl") and len(run.steps) == 5


@pytest.mark.parametrize("history", ["binary", "jsonl"])
def test_the_runs_console_copy_is_not_a_second_run(tmp_path, history):
    path = _copy(tmp_path)
    files = path.parent / "files"
    files.mkdir()
    # What the script printed: a training log of its own, the same run's metrics.
    (files / "output.log").write_text("".join(f"step {s} | loss {3.0 - s / 100:.3f}\n" for s in range(200)),
                                      encoding="utf-8")
    if history == "jsonl":
        (files / "wandb-history.jsonl").write_text(
            "".join(json.dumps({"_step": s, "loss": 3.0 - s / 100}) + "\n" for s in range(200)), encoding="utf-8")
    found = discover(path.parent, LoadOptions())
    (run,) = found.runs
    assert run.path.endswith("wandb-history.jsonl" if history == "jsonl" else ".wandb")
    assert [s.reason for s in found.skipped if s.path.endswith("output.log")] == \
        ["copy of a tracked run (the run's metric history beside it is read instead)"]
    (alone,) = discover_runs(files / "output.log", LoadOptions())  # named directly, it is read
    assert len(alone.steps) == 200


def test_a_row_without_the_loss_is_no_nan_loss(tmp_path):
    """The Hugging Face Trainer's W&B callback logs the training's summary (train_runtime, train/epoch ...) in a row of
    its own after the last logged step: its loss cell, never logged, was 'loss non-finite (nan)', critical. A NaN the
    run logged is one."""
    rows = [_history([_item("train/loss", repr(2.0 + 1.0 / (s + 1))), _item("train/learning_rate", "5e-05")], s)
            for s in range(40)]
    rows.append(_history([_item("train/train_runtime", "1694.1"), _item("train/epoch", "3.0")], 40))
    rows.append(_history([_item("train/loss", "NaN")], 41))
    run = _load(tmp_path, rows)
    assert run.meta["logged_nan"] == {metrics.LOSS: [41]}
    report = sentinel.analyze(tmp_path)
    assert [(i.kind, i.step) for i in report.runs[0].incidents if i.kind == "nonfinite"] == [("nonfinite", 41)]


def test_a_history_jsonl_row_without_the_loss_is_no_nan_loss(tmp_path):
    """The same in an older wandb's files/wandb-history.jsonl, a NaN written as JSON's NaN."""
    files = tmp_path / "wandb" / "run-20220101_000000-abc" / "files"
    files.mkdir(parents=True)
    rows = [{"_step": s, "train/loss": 2.0 + 1.0 / (s + 1)} for s in range(40)]
    rows += [{"_step": 40, "train/train_runtime": 1694.1}, {"_step": 41, "train/loss": math.nan}]
    (files / "wandb-history.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    report = sentinel.analyze(tmp_path)
    assert [(i.kind, i.step) for i in report.runs[0].incidents if i.kind == "nonfinite"] == [("nonfinite", 41)]


def _trainer_rows(losses: dict[int, float]) -> list[dict]:
    """The Hugging Face Trainer's W&B rows: each logging step's loss at its global step (W&B's _step counts calls)."""
    return [{"train/loss": loss, "train/learning_rate": 5e-5, "train/global_step": step} for step, loss in losses.items()]


@pytest.mark.parametrize("form", ["binary", "jsonl"])
def test_a_trainer_run_is_read_at_its_global_step_one_run_per_training(tmp_path, form):
    """The Trainer's W&B callback makes train/global_step the charts' step; W&B's _step counts the log calls: a run
    logged every 500 steps was 'steps 0..6', and a notebook's five trainings logged into one W&B run (no
    wandb.finish() between) were one curve whose second model's first loss was a critical spike. Each training is a
    run at its global steps; a resume from a checkpoint into the same W&B run is the same training, later rows
    winning."""
    first = {s: 0.4 * math.exp(-s / 2000) + 0.2 for s in range(500, 4000, 500)}
    second = {s: 0.6 * math.exp(-s / 2000) + 0.3 for s in range(500, 3000, 500)}
    resumed = {s: v + (5.0 if s > 1500 else 0.0) for s, v in second.items()}  # blew up, resumed from 1500
    rows = _trainer_rows(first) + _trainer_rows(resumed) + [{"train/train_runtime": 99.0, "train/global_step": 2500}]
    rows += _trainer_rows({s: v for s, v in second.items() if s > 1500})
    if form == "binary":
        payloads = [_history([_item(key, repr(value)) for key, value in row.items()], k) for k, row in enumerate(rows)]
        path = _copy(tmp_path, _frame(payloads))
    else:
        path = tmp_path / "wandb" / "run-20220101_000000-abc" / "files" / "wandb-history.jsonl"
        path.parent.mkdir(parents=True)
        path.write_text("".join(json.dumps({"_step": k, **row}) + "\n" for k, row in enumerate(rows)))
    report = sentinel.analyze(path)
    assert [r.steps for r in report.runs] == [7, 5]
    for run, losses in zip(report.runs, (first, second)):
        assert run.data.steps["loss"].to_dict() == pytest.approx(losses)
        assert run.verdict == "healthy" and "holds 2 trainings whose global step starts again" in run.warnings[0]


def test_a_runs_summary_file_is_part_of_the_run(tmp_path):
    """W&B keeps files/wandb-summary.json (each key's last value) beside the run's history: read as a one-step run of
    its own, each W&B run was listed twice."""
    rows = [_history([_item("loss", repr(2.0 - s / 100)), _item("acc", repr(s / 100))], s) for s in range(40)]
    path = _copy(tmp_path, _frame(rows))
    (path.parent / "files").mkdir()
    (path.parent / "files" / "wandb-summary.json").write_text(json.dumps({"loss": 1.61, "acc": 0.39, "_step": 39}))
    found = discover(tmp_path)
    assert [r.source for r in found.runs] == ["wandb"]
    assert any(s.path.endswith("wandb-summary.json") and s.reason.startswith("copy of a tracked run")
               for s in found.skipped)
