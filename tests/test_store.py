"""The run directory: round trips, crash safety, resume, TensorBoard, bad input."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sentinel.events import EventKind, make_event
from sentinel.metrics import GRAD_NORM_TOTAL, LOSS, LR, metric_key
from sentinel.store import Run, RunWriter, TensorBoardSinkConfig, load_run, read_skiplist

REPO = Path(__file__).resolve().parents[1]


def train_records(steps: int = 40, nan_at: int = 17, inf_at: int = 23) -> list[dict]:
    """Step records of a tiny seeded regression, with sparse per-module norms every 10 steps
    and a module that appears at step 20; a NaN loss and an Inf grad norm are injected."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 4), torch.randn(64, 1)
    out = []
    for step in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x[step % 8::8]), y[step % 8::8])
        loss.backward()
        norms = torch.stack([torch.linalg.vector_norm(p.grad) for p in model.parameters()])
        total = torch.linalg.vector_norm(norms)
        opt.step()
        values = torch.stack([loss.detach(), total]).tolist()  # one host transfer per step
        rec = {"step": step, "epoch": step // 20, "batch_idx": step % 20, LOSS: values[0],
               LR: 0.05, GRAD_NORM_TOTAL: values[1]}
        if step % 10 == 0:
            rec[metric_key("grad_norm", "0")] = norms[:2].norm().item()
            if step >= 20:
                rec[metric_key("grad_norm", "2")] = norms[2:].norm().item()
        if step == nan_at:
            rec[LOSS] = float("nan")
        if step == inf_at:
            rec[GRAD_NORM_TOTAL] = float("inf")
        out.append(rec)
    return out


def expected_frame(records: list[dict]) -> pd.DataFrame:
    """The frame load_run must return, built independently with pandas (last record wins)."""
    last = {rec["step"]: rec for rec in records}
    frame = pd.DataFrame.from_records([last[s] for s in sorted(last)]).set_index("step")
    return frame.astype("float64")


def assert_steps_equal(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    assert actual.index.name == "step" and actual.index.dtype == np.int64
    assert (actual.dtypes == np.float64).all()
    pd.testing.assert_frame_equal(actual[expected.columns], expected, check_exact=True,
                                  check_names=False)
    assert set(actual.columns) == set(expected.columns)


def test_steps_round_trip_sparse_new_keys_nan_inf(tmp_path: Path) -> None:
    records = train_records()
    with RunWriter(tmp_path / "run", tensorboard=False) as w:
        for rec in records:
            w.write_step(rec)
    run = load_run(tmp_path / "run")
    assert isinstance(run, Run) and run.warnings == []
    assert_steps_equal(run.steps, expected_frame(records))
    assert math.isnan(run.steps.loc[17, LOSS]) and run.steps.loc[23, GRAD_NORM_TOTAL] == math.inf
    assert list(run.steps.columns[:2]) == ["epoch", "batch_idx"]
    # The key set grew twice (step 0's sparse key is there from the start, "2" at step 20).
    assert sorted(p.name for p in (tmp_path / "run").glob("steps.*")) == [
        "steps.00000.csv", "steps.00001.csv"]


finite_or_not = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(finite_or_not, st.one_of(st.none(), finite_or_not)), min_size=1,
                max_size=20))
def test_any_float_round_trips_bit_exactly(tmp_path_factory: pytest.TempPathFactory,
                                           values: list[tuple[float, float | None]]) -> None:
    d = tmp_path_factory.mktemp("floats")
    with RunWriter(d, tensorboard=False) as w:
        for step, (a, b) in enumerate(values):
            w.write_step({"step": step, "a": a, "b": b})
    steps = load_run(d).steps
    for step, (a, b) in enumerate(values):
        got_a, got_b = steps.loc[step, "a"], steps.loc[step, "b"]
        assert (math.isnan(a) and math.isnan(got_a)) or np.float64(a).tobytes() == got_a.tobytes()
        if b is None or math.isnan(b):
            assert math.isnan(got_b)
        else:
            assert np.float64(b).tobytes() == got_b.tobytes()


def test_events_round_trip(tmp_path: Path) -> None:
    with RunWriter(tmp_path, tensorboard=False) as w:
        assert load_run(tmp_path).events.columns.tolist() == ["step", "time", "kind"]
        w.write_event(make_event(EventKind.SPIKE, 12, metric=LOSS, value=float("nan")))
        w.write_event(make_event("rollback", 14, spike_step=12, restored_step=10,
                                 skipped_batches=[11, 12]))
    run = load_run(tmp_path)
    assert run.warnings == []
    events = run.events
    assert events["step"].tolist() == [12, 14] and events["kind"].tolist() == ["spike", "rollback"]
    assert events["step"].dtype == np.int64 and events["time"].notna().all()
    assert math.isnan(events.loc[0, "value"]) and events.loc[1, "skipped_batches"] == [11, 12]
    assert load_run(tmp_path).events.columns[:3].tolist() == ["step", "time", "kind"]



def test_a_too_deeply_nested_event_line_costs_that_line_only(tmp_path: Path) -> None:
    with RunWriter(tmp_path, tensorboard=False) as w:
        w.write_event(make_event(EventKind.SPIKE, 12, metric=LOSS, value=9.5))
    line = '{"step": 13, "kind": "spike", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with open(tmp_path / "events.jsonl", "a") as f:
        f.write(line + "\n")
    with RunWriter(tmp_path, tensorboard=False) as w:
        w.write_event(make_event("rollback", 14, spike_step=12, restored_step=10))
    run = load_run(tmp_path)
    assert run.events["step"].tolist() == [12, 14]
    assert run.events["kind"].tolist() == ["spike", "rollback"]
    assert run.warnings == [f"events.jsonl: skipped line 2: its JSON is nested too deeply to read "
                            f"({len(line)} bytes)"]

def test_skiplist_round_trip(tmp_path: Path) -> None:
    assert read_skiplist(tmp_path) == []
    entries = [{"step": 120, "batch_idx": 120, "sample_indices": [480, 481]},
               {"step": 121, "batch_idx": 121, "fingerprint": "ab12"}]
    with RunWriter(tmp_path, tensorboard=False) as w:
        w.write_skiplist(entries[:1])
        w.write_skiplist(entries)  # replaces, does not append
        with pytest.raises(ValueError, match="list of dicts"):
            w.write_skiplist({"step": 1})  # type: ignore[arg-type]
    assert read_skiplist(tmp_path) == entries
    assert read_skiplist(tmp_path / "skiplist.json") == entries
    assert load_run(tmp_path).skiplist == entries
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_meta_versions_fields_and_update(tmp_path: Path) -> None:
    with RunWriter(tmp_path, meta={"config": {"lr": 0.05}}, tensorboard=False) as w:
        w.update_meta(world_size=2, model_summary={"params": 17})
        w.update_meta(world_size=4)
        with pytest.raises(ValueError, match="JSON serialisable"):
            w.update_meta(bad=object())
        assert w.meta["world_size"] == 4
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["torch_version"] == torch.__version__
    assert meta["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert meta["sentinel_version"] and meta["created"]
    assert meta["config"] == {"lr": 0.05} and meta["world_size"] == 4
    assert meta["model_summary"] == {"params": 17} and "bad" not in meta
    assert load_run(tmp_path).meta == meta


def test_append_to_existing_run_keeps_what_is_there(tmp_path: Path) -> None:
    records = train_records(30)
    with RunWriter(tmp_path, meta={"config": {"lr": 0.05}}, tensorboard=False) as w:
        for rec in records[:15]:
            w.write_step(rec)
        w.write_event(make_event("spike", 3))
    before = {p.name: p.read_bytes() for p in tmp_path.glob("steps.*")}
    created = json.loads((tmp_path / "meta.json").read_text())["created"]
    with RunWriter(tmp_path, meta={"resumed_from": "ckpt-15"}, tensorboard=False) as w:
        for rec in records[15:]:
            w.write_step(rec)
        w.write_event(make_event("skip", 20))
    for name, data in before.items():
        assert (tmp_path / name).read_bytes() == data
    run = load_run(tmp_path)
    assert_steps_equal(run.steps, expected_frame(records))
    assert run.events["kind"].tolist() == ["spike", "skip"]
    assert run.meta["config"] == {"lr": 0.05} and run.meta["resumed_from"] == "ckpt-15"
    assert run.meta["created"] == created and len(run.meta["resumed"]) == 1
    assert run.warnings == []


def test_a_history_that_goes_back_replaces_what_came_after(tmp_path: Path) -> None:
    # Steps only grow within a process; when they go back, a later writer (a resumed run)
    # took over from that step, and what the earlier one wrote from there on is abandoned.
    first, second, third = train_records(20), train_records(18, nan_at=-1), train_records(14)
    for rec in second:
        rec[LOSS] += 100.0  # each timeline differs from the others
    for rec in third:
        rec[LOSS] += 200.0
    with RunWriter(tmp_path, tensorboard=False) as w:
        for rec in first + second[10:18]:  # steps go back to 10 in the same file
            w.write_step(rec)
    with RunWriter(tmp_path, tensorboard=False) as w:
        for rec in third[12:]:  # a new process resumed from a checkpoint at step 12
            w.write_step(rec)
    run = load_run(tmp_path)
    assert_steps_equal(run.steps, expected_frame(first[:10] + second[10:12] + third[12:]))
    assert run.restarts == [10, 12]
    assert run.steps.loc[11, LOSS] == second[11][LOSS]
    assert run.steps.loc[13, LOSS] == third[13][LOSS]
    assert run.steps.index[-1] == 13  # steps 14-19 of the first timeline were abandoned
    assert run.warnings == []


def test_truncated_last_lines_are_reported_not_raised(tmp_path: Path) -> None:
    records = train_records(12)
    with RunWriter(tmp_path, tensorboard=False) as w:
        for rec in records:
            w.write_step(rec)
        for step in (2, 5, 9):
            w.write_event(make_event("overflow", step))
    for name in ("steps.00000.csv", "events.jsonl"):
        path = tmp_path / name
        path.write_bytes(path.read_bytes()[:-7])  # a torn last record
    run = load_run(tmp_path)
    assert_steps_equal(run.steps, expected_frame(records[:-1]))
    assert run.events["step"].tolist() == [2, 5]
    assert len(run.warnings) == 2
    assert any("steps.00000.csv" in w_ and "truncated" in w_ for w_ in run.warnings)
    assert any("events.jsonl" in w_ and "truncated" in w_ for w_ in run.warnings)
    # Appending after the crash starts clean lines: the torn line stays the only loss.
    with RunWriter(tmp_path, tensorboard=False) as w:
        w.write_step({"step": 12, LOSS: 0.5})
        w.write_event(make_event("overflow", 12))
    run = load_run(tmp_path)
    assert run.events["step"].tolist() == [2, 5, 12] and run.steps.loc[12, LOSS] == 0.5
    assert any("events.jsonl: skipped malformed line 3" in w_ for w_ in run.warnings)


def test_damaged_values_skip_their_rows_not_the_segment(tmp_path: Path, recwarn) -> None:
    """A byte flipped in a number (not UTF-8 any more), a digit become a letter, a row with a field
    too many: those rows are skipped and counted, every other record is read (before, one bad
    value made the whole segment unreadable, and a byte that is not UTF-8 printed a traceback
    from pyarrow's row handler)."""
    records = train_records(30)
    with RunWriter(tmp_path, tensorboard=False) as w:
        for rec in records:
            w.write_step(rec)
    path = tmp_path / "steps.00000.csv"
    lines = path.read_bytes().split(b"\n")
    lines[4] = lines[4][:-3] + b"\xea" + lines[4][-2:]  # record 3
    lines[9] = lines[9].replace(b"0.", b"x.", 1)  # record 8
    lines[20] += b",1.0"  # record 19
    path.write_bytes(b"\n".join(lines))
    run = load_run(tmp_path)
    kept = [rec for i, rec in enumerate(records) if i not in (3, 8, 19)]
    assert_steps_equal(run.steps, expected_frame(kept))
    assert run.warnings == ["steps.00000.csv: skipped 3 malformed line(s)"]
    assert not [w for w in recwarn if "nraisable" in type(w.message).__name__]


CHILD = textwrap.dedent("""
    import itertools, sys
    from sentinel.events import make_event
    from sentinel.store import RunWriter
    w = RunWriter(sys.argv[1], meta={"child": True})
    assert "lightning" not in sys.modules and "pytorch_lightning" not in sys.modules
    for step in itertools.count():
        rec = {"step": step, "loss": 1.0 / (step + 1), "lr": 1e-3}
        if step % 50 == 0:
            rec["grad_norm/blocks.%d" % (step // 50 % 3)] = step * 0.5
        w.write_step(rec)
        if step % 25 == 0:
            w.write_event(make_event("overflow", step))
""")


def count_lines(d: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in d.glob("steps.*.csv"))


def test_sigkill_mid_run_loses_no_complete_record(tmp_path: Path) -> None:
    run_dir = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(run_dir)], cwd=REPO)
    try:
        seen = 0
        while seen < 2000:  # poll the file: wait for the child's writes, not for a clock
            try:
                code = proc.wait(timeout=0.05)
                pytest.fail(f"writer process exited early with code {code}")
            except subprocess.TimeoutExpired:
                pass
            seen = count_lines(run_dir) if run_dir.exists() else 0
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    run = load_run(run_dir)
    n = len(run.steps)
    headers = len(list(run_dir.glob("steps.*.csv")))
    assert n >= seen - headers  # every line seen before the kill survives
    assert run.steps.index.tolist() == list(range(n))
    assert run.steps[LOSS].tolist() == [1.0 / (s + 1) for s in range(n)]
    assert (run.steps[LR] == 1e-3).all()
    sparse = run.steps["grad_norm/blocks.1"].dropna()
    assert sparse.index.tolist() == [s for s in range(n) if s % 150 == 50]
    assert sparse.tolist() == [s * 0.5 for s in sparse.index]
    # The event of step s is written before step s + 1, so every step < n - 1 has its event.
    events = run.events["step"].tolist()
    assert events == list(range(0, 25 * len(events), 25))
    assert len(events) >= (n - 2) // 25 + 1
    assert run.meta["child"] is True
    assert all("truncated" in w_ for w_ in run.warnings)  # at most a torn last line


def test_tensorboard_scalars_match_steps(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    records = train_records(30)
    with RunWriter(tmp_path, tb_config=TensorBoardSinkConfig(queue_size=100)) as w:
        for rec in records:
            w.write_step(rec)
        w.flush()
        assert w.tb_dropped == 0
    files = list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert files
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    assert {LOSS, LR, GRAD_NORM_TOTAL, "grad_norm/0", "grad_norm/2", "epoch"} <= set(
        acc.Tags()["scalars"])
    for key in (LOSS, GRAD_NORM_TOTAL, "grad_norm/2"):
        scalars = acc.Scalars(key)
        want = [(r["step"], r[key]) for r in records if key in r]
        assert [s.step for s in scalars] == [s for s, _ in want]
        got = np.array([s.value for s in scalars], dtype=np.float32)
        np.testing.assert_array_equal(got, np.array([v for _, v in want], dtype=np.float32))


def test_unwritable_log_dir_raises_at_construction(tmp_path: Path) -> None:
    regular = tmp_path / "file.txt"
    regular.write_text("x")
    with pytest.raises(ValueError, match=r"log_dir '.*file\.txt/run' cannot be created.*"
                                         r"pass a directory you can write to"):
        RunWriter(regular / "run")
    with pytest.raises(ValueError, match=r"is a file, not a directory"):
        RunWriter(regular)
    with pytest.raises(ValueError, match="meta must be a dict"):
        RunWriter(tmp_path / "ok", meta=["x"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="queue_size=0"):
        TensorBoardSinkConfig(queue_size=0)


def test_bad_step_records_are_refused_clearly(tmp_path: Path) -> None:
    with RunWriter(tmp_path, tensorboard=False) as w:
        with pytest.raises(ValueError, match="integer 'step'"):
            w.write_step({"loss": 1.0})
        with pytest.raises(ValueError, match="must be an integer"):
            w.write_step({"step": 1.5, "loss": 1.0})
        with pytest.raises(ValueError, match="cannot be a column name"):
            w.write_step({"step": 1, "a,b": 1.0})
        with pytest.raises(ValueError, match="'loss' is 'high'"):
            w.write_step({"step": 1, "loss": "high"})
        with pytest.raises(ValueError, match="needs 'step' and 'kind'"):
            w.write_event({"kind": "spike"})
        # numpy scalars, 0-d tensors and numpy steps are numbers too
        w.write_step({"step": np.int64(2), "loss": np.float32(0.25), "lr": torch.tensor(0.5)})
    w.close()  # idempotent
    w.flush()
    with pytest.raises(ValueError, match="closed RunWriter"):
        w.write_step({"step": 3})
    run = load_run(tmp_path)
    assert run.steps.index.tolist() == [2]
    assert run.steps.loc[2, LOSS] == 0.25 and run.steps.loc[2, LR] == 0.5


def test_load_run_refuses_what_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_run(tmp_path / "missing")
    with pytest.raises(ValueError, match="not a sentinel run directory"):
        load_run(tmp_path)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="not a sentinel run directory"):
        load_run(tmp_path / "notes.txt")


def test_damaged_meta_and_skiplist_are_warnings(tmp_path: Path) -> None:
    with RunWriter(tmp_path, tensorboard=False) as w:
        w.write_step({"step": 0, LOSS: 1.0})
    (tmp_path / "meta.json").write_text("{not json")
    (tmp_path / "skiplist.json").write_text('{"a": 1}')
    run = load_run(tmp_path)
    assert run.meta == {} and run.skiplist == [] and run.steps.loc[0, LOSS] == 1.0
    assert len(run.warnings) == 2
    with pytest.raises(ValueError, match="list of objects"):
        read_skiplist(tmp_path)
