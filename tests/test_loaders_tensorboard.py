"""The bulk TensorBoard reader against a record-by-record protobuf reader, on event files with
every shape a writer produces (scalars in events of one to hundreds of values, step 0 without a
step field, negative steps, NaN/Inf, TF2 tensor scalars, tags of equal length) and with damage
(payloads and lengths that fail their checksum, a payload that does not parse)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs
from sentinel.analyze.loaders import tensorboard
from sentinel.analyze.loaders.tfrecord import read_scalars
from sentinel.tfrecord_crc import masked_crc32c as masked_crc


def record(event: event_pb2.Event) -> bytes:
    payload = event.SerializeToString()
    header = struct.pack("<Q", len(payload))
    return header + struct.pack("<I", masked_crc(header)) + payload + struct.pack("<I", masked_crc(payload))


def scalars(step: int, values: dict[str, float]) -> bytes:
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=k, simple_value=v) for k, v in values.items()])
    return record(event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary))


def tensor_scalar(step: int, tag: str, value: float, double: bool) -> bytes:
    shape = tensor_shape_pb2.TensorShapeProto()
    tensor = (tensor_pb2.TensorProto(dtype=2, tensor_shape=shape, tensor_content=np.float64(value).tobytes())
              if double else tensor_pb2.TensorProto(dtype=1, tensor_shape=shape, float_val=[value]))
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, tensor=tensor)])
    return record(event_pb2.Event(wall_time=1.0, step=step, summary=summary))


def mixed_file() -> bytes:
    """Periodic stretches (the bulk path) broken by everything else (the protobuf path)."""
    rng = np.random.default_rng(0)
    out = [record(event_pb2.Event(wall_time=1.0, file_version="brain.Event:2"))]
    for step in range(-3, 3000):
        values = {"loss": float(rng.random() * 3), "lr": 3e-4}
        if step == 700:
            values["loss"] = float("nan")
        if step == 800:
            values["loss"] = float("inf")
        if step % 50 == 0:
            values.update({f"grad_norm/blocks.{i}": float(rng.random()) for i in range(300)})
        out.append(scalars(step, values))
        if step % 7 == 0:  # the same length, other tags: a second layout of that length
            out.append(scalars(step, {"aaaa": float(step), "bbbb": 1.0} if step % 2 else {"cccc": 2.0, "dddd": 0.5}))
        if step % 97 == 0:
            out.append(tensor_scalar(step, "epoch_loss", 1.5 + step, double=step % 2 == 0))
    return b"".join(out)


def periodic_file() -> bytes:
    """What sentinel's mirror and SummaryWriter loops write: the same events step after step
    (lengths repeat with a period of 50 records), read by predicting the next records in bulk."""
    out = [record(event_pb2.Event(wall_time=1.0, file_version="brain.Event:2"))]
    for step in range(6000):
        values = {"loss": 2.0 + 1.0 / (step + 1), "lr": 3e-4, "grad_norm/total": 1.0}
        if step % 50 == 0:
            values.update({f"attn_entropy/blocks.{i}.attn": 2.0 - 0.01 * i for i in range(12)})
        out.append(scalars(step, values))
    return b"".join(out)


FILES = {"mixed": mixed_file, "periodic": periodic_file}


def reference(path: Path) -> tuple[dict[str, tuple[list[int], list[float]]], list[str]]:
    """Record by record with the protobuf, as TensorBoard's own reader does, and the warnings
    the loader gives for what it met."""
    from google.protobuf.message import DecodeError

    data, name = path.read_bytes(), path.name
    out: dict[str, tuple[list[int], list[float]]] = {}
    warnings, pos, records, bad = [], 0, 0, []
    while pos < len(data):
        if pos + 12 > len(data):
            warnings.append(f"{name}: truncated record at byte {pos} of {len(data)}; read {records} records before it")
            break
        length, length_crc = struct.unpack_from("<QI", data, pos)
        end = pos + 16 + length
        if end > len(data) or masked_crc(data[pos:pos + 8]) != length_crc:
            warnings.append(f"{name}: truncated or damaged record at byte {pos} of {len(data)}; "
                            f"read {records} records before it")
            break
        payload = data[pos + 12:end - 4]
        if masked_crc(payload) != struct.unpack_from("<I", data, end - 4)[0]:
            bad.append(pos)
            pos = end
            continue
        try:
            event = event_pb2.Event.FromString(payload)
        except DecodeError:
            warnings.append(f"{name}: damaged record at byte {pos} of {len(data)}; read {records} records before it")
            break
        pos, records = end, records + 1
        for value in event.summary.value:
            if value.WhichOneof("value") == "simple_value":
                number = value.simple_value
            elif value.tensor.float_val:
                number = value.tensor.float_val[0]
            else:
                number = float(np.frombuffer(value.tensor.tensor_content, dtype=np.float64)[0])
            steps, values = out.setdefault(value.tag, ([], []))
            steps.append(event.step)
            values.append(number)
    if bad:
        warnings.append(f"{name}: dropped {len(bad)} record(s) whose checksum does not match "
                        f"(damaged on disk; first at byte {bad[0]})")
    return out, warnings


def assert_same(path: Path, data: bytes) -> list[str]:
    path.write_bytes(data)
    warnings: list[str] = []
    got = read_scalars(path, warnings)
    expected, expected_warnings = reference(path)
    assert sorted(got) == sorted(expected)
    for tag, (steps, values) in expected.items():
        np.testing.assert_array_equal(got[tag][0], np.asarray(steps, dtype=np.int64), err_msg=tag)
        np.testing.assert_array_equal(got[tag][1], np.asarray(values, dtype=np.float64), err_msg=tag)
    assert warnings == expected_warnings
    return warnings


def starts(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(data):
        out.append(pos)
        pos += 16 + struct.unpack_from("<Q", data, pos)[0]
    return out


@pytest.mark.parametrize("kind", FILES)
def test_bulk_reader_equals_the_protobuf_one(tmp_path, kind):
    assert assert_same(tmp_path / "events.out.tfevents.1", FILES[kind]()) == []


@pytest.mark.parametrize("chunk", [64, 1000, 7 << 10])
@pytest.mark.parametrize("kind", FILES)
def test_records_read_in_many_chunks_are_the_records(tmp_path, kind, chunk, monkeypatch):
    """Rows gathered a few at a time into buffers reused from chunk to chunk (a file of 1M
    events is ~10 chunks): whole files, records of other layouts and damaged ones inside the
    chunks, and a last record too close to the end of the file for a whole row."""
    from sentinel.analyze.loaders import tfrecord

    monkeypatch.setattr(tfrecord, "_CHUNK_BYTES", chunk)
    data = FILES[kind]()
    assert assert_same(tmp_path / "whole.tfevents", data) == []
    damaged = bytearray(data)
    for pos in starts(data)[50:400:7]:
        damaged[pos + 12 + 20] ^= 0x04
    (warning,) = assert_same(tmp_path / "damaged.tfevents", bytes(damaged))
    assert "dropped 50 record(s)" in warning
    for short in range(1, 9):  # the last payload's length modulo 8: whether its row fits
        last = scalars(10_000 + short, {"loss": 2.0, "x" * short: 1.0})
        assert assert_same(tmp_path / f"last{short}.tfevents", data + last * 20) == []


@pytest.mark.parametrize("segment", [100, 4 << 10, 64 << 10])
@pytest.mark.parametrize("kind", FILES)
def test_a_file_read_a_segment_at_a_time_is_read_whole(tmp_path, kind, segment, monkeypatch):
    """The file read into a buffer a segment at a time (a large file is read in bounded memory):
    records cut by a segment's end, records longer than the segment (the 300-scalar events of
    the mixed file are ~6 KB), layouts met in one segment and used in the next, and damage of
    every kind anywhere, with the offsets the warnings give counted from the file's start."""
    from sentinel.analyze.loaders import tfrecord

    monkeypatch.setattr(tfrecord, "_SEGMENT_BYTES", segment)
    buffers = []
    fill = tfrecord._fill
    monkeypatch.setattr(tfrecord, "_fill", lambda f, buffer, filled: (buffers.append(len(buffer)), fill(f, buffer, filled))[1])
    data = FILES[kind]()
    at = starts(data)
    longest = max(b - a for a, b in zip(at, [*at[1:], len(data)]))
    assert assert_same(tmp_path / "whole.tfevents", data) == []
    flipped = bytearray(data)
    for pos in at[50:400:7]:
        flipped[pos + 12 + 20] ^= 0x04
    (warning,) = assert_same(tmp_path / "flipped.tfevents", bytes(flipped))
    assert f"dropped 50 record(s) whose checksum does not match (damaged on disk; first at byte {at[50]})" in warning
    for where in (5, 1500, -1200, -3):
        length_off = bytearray(data)
        length_off[at[where] + 1] ^= 0x01
        (warning,) = assert_same(tmp_path / "length.tfevents", bytes(length_off))
        assert f"truncated or damaged record at byte {at[where]} of {len(data)}" in warning
    huge = bytearray(data)  # a length beyond any record, past the segment's end
    huge[at[1000]:at[1000] + 8] = struct.pack("<Q", 1 << 40)
    (warning,) = assert_same(tmp_path / "huge.tfevents", bytes(huge))
    assert f"truncated or damaged record at byte {at[1000]} of {len(data)}" in warning
    for cut in (1, 11, 30):
        (warning,) = assert_same(tmp_path / "cut.tfevents", data[:-cut])
        assert f"record at byte {at[-1]} of {len(data) - cut}" in warning
    # Damage is not read past: the buffer grew only for records that are longer than a segment.
    assert max(buffers) < max(2 * longest, segment) + 16


@pytest.mark.parametrize("kind", FILES)
def test_the_same_flip_in_many_records_drops_each_of_them(tmp_path, kind):
    data = bytearray(FILES[kind]())
    at = starts(bytes(data))
    damaged = [p for p in at[100:200:10]]  # ten records, the same byte and bit of each payload
    for pos in damaged:
        data[pos + 12 + 20] ^= 0x04
    (warning,) = assert_same(tmp_path / "events.out.tfevents.1", bytes(data))
    assert f"dropped {len(damaged)} record(s) whose checksum does not match" in warning
    assert f"first at byte {damaged[0]}" in warning


@pytest.mark.parametrize("kind", FILES)
@pytest.mark.parametrize("where", [5, 1500, -1200, -3])
@pytest.mark.parametrize("byte", [1, 9])
def test_a_damaged_length_stops_reading_there(tmp_path, kind, where, byte):
    data = bytearray(FILES[kind]())
    pos = starts(bytes(data))[where]
    data[pos + byte] ^= 0x01  # the length is 256 off, or its checksum is: the checksum fails
    (warning,) = assert_same(tmp_path / "events.out.tfevents.1", bytes(data))
    assert f"truncated or damaged record at byte {pos} of {len(data)}" in warning


@pytest.mark.parametrize("kind", FILES)
def test_a_payload_that_does_not_parse_stops_reading_there(tmp_path, kind):
    data = FILES[kind]()
    pos = starts(data)[2000]
    junk = b"\xff" * 7
    header = struct.pack("<Q", len(junk))
    bad = header + struct.pack("<I", masked_crc(header)) + junk + struct.pack("<I", masked_crc(junk))
    (warning,) = assert_same(tmp_path / "events.out.tfevents.1", data[:pos] + bad + data[pos:])
    assert f"damaged record at byte {pos} of" in warning


@pytest.mark.parametrize("kind", FILES)
@pytest.mark.parametrize("cut", [1, 11, 30])
def test_a_cut_file_keeps_every_whole_record(tmp_path, kind, cut):
    (warning,) = assert_same(tmp_path / "events.out.tfevents.1", FILES[kind]()[:-cut])
    assert "record at byte" in warning


def test_a_restarted_run_keeps_the_last_value_of_a_step(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "events.out.tfevents.1.a").write_bytes(b"".join(scalars(s, {"loss": 3.0}) for s in range(200)))
    (run / "events.out.tfevents.2.a").write_bytes(b"".join(scalars(s, {"loss": 2.0}) for s in range(100, 300)))
    (loaded,) = tensorboard.load(run)
    loss = loaded.steps["loss"]
    assert loss.index.tolist() == list(range(300))
    assert (loss.loc[:99] == 3.0).all() and (loss.loc[100:] == 2.0).all()


def test_a_file_of_scalars_is_read_without_the_protobuf(tmp_path):
    """Its header and its rare layouts included: the protobuf's import alone costs ~0.2 s."""
    path = tmp_path / "events.out.tfevents.1"
    path.write_bytes(periodic_file() + scalars(9999, {"rare": 1.0}) + scalars(-5, {"loss": 3.0}))
    code = ("import sys; from pathlib import Path; from sentinel.analyze.loaders.tfrecord import read_scalars; "
            "found = read_scalars(Path(sys.argv[1]), []); "
            "print(sorted(found)[:2], found['rare'][0].tolist(), found['loss'][0][-1], "
            "any(m.endswith('event_pb2') for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["['attn_entropy/blocks.0.attn',", "'attn_entropy/blocks.1.attn']", "[9999]",
                                   "-5", "False"]


@pytest.mark.parametrize("kind", FILES)
@pytest.mark.parametrize("where", ["wall_time", "step", "value", "stored_crc", "first_of_group"])
def test_a_flip_in_a_number_or_a_checksum_drops_the_record(tmp_path, kind, where):
    """Records of a layout have their checksums computed from the layout's (by the bytes that
    differ from it): a flip in any of those bytes, in the stored checksum, or in the record the
    layout is taken from must still drop exactly the damaged records."""
    data = bytearray(FILES[kind]())
    at = starts(bytes(data))
    damaged = at[101:1900:97] if where != "first_of_group" else at[1:2]
    for n, pos in enumerate(damaged):
        length = struct.unpack_from("<Q", data, pos)[0]
        offset = {"wall_time": 12 + 1 + n % 8, "step": 12 + 10, "value": 12 + length - 1 - n % 3,
                  "stored_crc": 12 + length + n % 4, "first_of_group": 12 + 3}[where]
        data[pos + offset] ^= 1 << (n % 8)
    (warning,) = assert_same(tmp_path / "events.out.tfevents.1", bytes(data))
    assert f"dropped {len(damaged)} record(s) whose checksum does not match" in warning


def test_one_pass_over_many_payloads_finds_any_damaged_one():
    """The payload checksums of a layout's records are checked in one CRC32C pass over rows of
    pad bytes, payload and tail: it holds for intact payloads, and fails for any damaged one
    (a bit of a payload, of a stored checksum, or the same flip in two records)."""
    import google_crc32c

    from sentinel.analyze.loaders.tfrecord import _checksums_hold

    rng = np.random.default_rng(1)
    for length in (1, 4, 9, 60, 301):
        width = -(-(length + 4) // 8) * 8
        pad = width - length - 4
        payloads = rng.integers(0, 256, (50, length), dtype=np.uint8)
        stored = np.array([google_crc32c.value(p.tobytes()) for p in payloads], dtype=np.uint32)
        tails = stored ^ np.uint32(google_crc32c.value(bytes(length)))

        def rows(payloads=payloads):
            out = rng.integers(0, 256, (50, width), dtype=np.uint8)  # pad and tail: anything
            out[:, pad:pad + length] = payloads
            return out

        assert _checksums_hold(rows(), pad, tails)
        for record, byte, bit in [(0, 0, 0), (49, length - 1, 7), (25, length // 2, 3)]:
            damaged = payloads.copy()
            damaged[record, byte] ^= 1 << bit
            assert not _checksums_hold(rows(damaged), pad, tails)
            wrong_tail = tails.copy()
            wrong_tail[record] ^= 1 << (byte % 32)
            assert not _checksums_hold(rows(), pad, wrong_tail)
        twice = payloads.copy()
        twice[[3, 40], length // 3] ^= 0x10  # the same flip in two records
        assert not _checksums_hold(rows(twice), pad, tails)


def test_tags_twice_in_an_event_and_tags_of_several_layouts_keep_file_order(tmp_path):
    """Tags of one layout share their order; a tag twice in one event (in a layout, and in a
    record read on its own), and tags spread over several layouts and lengths, must not."""
    out = [record(event_pb2.Event(wall_time=1.0, file_version="brain.Event:2"))]
    for step in range(2000):
        values = [("loss", 1.0 + step), ("lr", 0.5), ("loss", -1.0 - step)] if step % 3 else [("lr", 0.25), ("loss", 2.0)]
        if step % 11 == 0:
            values.append(("extra", float(step)))
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=k, simple_value=v) for k, v in values])
        out.append(record(event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary)))
        if step in (5, 900):  # one record of its own layout: read one by one
            summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=k, simple_value=v)
                                                 for k, v in (("lr", 7.0), ("lr", 8.0), ("loss", 9.0))])
            out.append(record(event_pb2.Event(wall_time=2.0, step=step, summary=summary)))
    assert assert_same(tmp_path / "events.out.tfevents.1", b"".join(out)) == []


@pytest.mark.parametrize("kind", [*FILES, "disjoint"])
def test_the_steps_frame_holds_every_step_of_every_tag(tmp_path, kind):
    """Tags sharing their steps (one layout), tags on a subset of them and tags on steps no other
    tag has: the frame is the outer join of the tags, NaN where a tag has no value."""
    run = tmp_path / "run"
    run.mkdir()
    if kind == "disjoint":
        data = b"".join(scalars(s, {"loss": 1.0 + s, "lr": 0.1}) for s in range(0, 300, 3))
        data += b"".join(scalars(s, {"val_loss": 2.0 + s}) for s in range(1, 300, 5))
    else:
        data = FILES[kind]()
    (run / "events.out.tfevents.1.a").write_bytes(data)
    (loaded,) = tensorboard.load(run)
    expected, _ = reference(run / "events.out.tfevents.1.a")
    keys = loaded.meta["tags"]
    for tag, (steps, values) in expected.items():
        last = dict(zip(steps, values))  # a step written twice keeps its last value
        column = loaded.steps[keys[tag]]
        got = column.dropna()
        assert got.index.tolist() == sorted(k for k, v in last.items() if not np.isnan(v)), tag
        np.testing.assert_array_equal(got.to_numpy(), [last[k] for k in got.index], err_msg=tag)
    every = sorted({s for steps, _ in expected.values() for s in steps})
    assert loaded.steps.index.tolist() == every


def _keras_run(run_dir: Path, nan_epoch: int | None = None, validation: bool = True) -> None:
    """What Keras' TensorBoard callback writes (update_freq='epoch'): <run>/train with
    epoch_loss and epoch_accuracy per epoch, <run>/validation with the same tags."""
    from torch.utils.tensorboard import SummaryWriter

    train = SummaryWriter(str(run_dir / "train"))
    val = SummaryWriter(str(run_dir / "validation")) if validation else None
    for epoch in range(30):
        loss = float("nan") if epoch == nan_epoch else 2.0 * 0.95**epoch + 0.5
        train.add_scalar("epoch_loss", loss, epoch)
        train.add_scalar("epoch_accuracy", 0.5 + epoch / 100, epoch)
        if val is not None:
            val.add_scalar("epoch_loss", loss + 0.3, epoch)
    train.close()
    if val is not None:
        val.close()


def test_a_keras_run_directory_is_one_run_with_its_validation_apart(tmp_path):
    # Before, train/ and validation/ were two runs, the validation loss judged as a training loss.
    from sentinel.analyze.analyzer import analyze_run
    from sentinel.analyze.discover import discover_runs

    _keras_run(tmp_path / "logs" / "fit" / "20240101-000000", nan_epoch=20)
    _keras_run(tmp_path / "logs" / "fit" / "20240102-000000", validation=False)
    for where in (tmp_path / "logs", tmp_path / "logs" / "fit"):
        runs = discover_runs(where)
        assert [r.name for r in runs] == ["20240101-000000", "20240102-000000"]
    first = runs[0]
    assert first.path == str(tmp_path / "logs" / "fit" / "20240101-000000")
    assert first.steps.index.tolist() == list(range(30))
    assert first.steps["validation/epoch_loss"].iloc[0] == pytest.approx(2.8)
    assert np.isnan(first.steps["loss"].loc[20])
    # The training loss's NaN, and the validation's at the same epoch (event files tell a logged NaN
    # from a value not logged), said as such.
    training, validation = sorted((i for i in analyze_run(first).incidents if i.kind == "nonfinite"),
                                  key=lambda i: i.severity.rank, reverse=True)
    assert (training.step, training.severity.value) == (20, "critical")
    assert (validation.step, validation.severity.value) == (20, "warning")
    assert "the training loss was non-finite then too" in validation.message
    # The run directory named on its own, and through the loader directly.
    (alone,) = discover_runs(tmp_path / "logs" / "fit" / "20240101-000000")
    assert alone.name == "20240101-000000" and "validation/epoch_loss" in alone.steps.columns
    assert [r.name for r in tensorboard.load(tmp_path / "logs" / "fit")] == ["20240101-000000", "20240102-000000"]


def _fairseq_run(tb: Path, spike_at: int = 3000) -> None:
    """What fairseq's --tensorboard-logdir writes: train_inner/ (each logged update), train/ (each
    epoch's means at its last update) and valid/ (each validation), tags by their own names."""
    from torch.utils.tensorboard import SummaryWriter

    inner, epoch, valid = (SummaryWriter(str(tb / name)) for name in ("train_inner", "train", "valid"))
    update = 0
    for _ in range(5):
        for _ in range(10):
            update += 100
            loss = 12.0 if update == spike_at else 2 + 8 * np.exp(-update / 1500)
            for tag, value in (("loss", loss), ("nll_loss", 0.9 * loss), ("lr", 5e-4), ("gnorm", 1.1),
                               ("loss_scale", 128.0)):
                inner.add_scalar(tag, value, update)
        epoch.add_scalar("loss", loss, update)
        valid.add_scalar("loss", loss + 0.2, update)
        valid.add_scalar("ppl", 2 ** (loss + 0.2), update)
    for writer in (inner, epoch, valid):
        writer.close()


def test_a_fairseq_tensorboard_directory_is_one_run_read_by_update(tmp_path):
    """Before, train/, train_inner/ and valid/ were three runs: the validation loss judged as a
    training loss (a 'spike'), the per-update series a run of its own."""
    from sentinel.analyze.analyzer import analyze_run
    from sentinel.analyze.discover import discover_runs

    _fairseq_run(tmp_path / "checkpoints" / "tb")
    for where in (tmp_path, tmp_path / "checkpoints" / "tb"):
        (run,) = discover_runs(where)
        assert run.name == "tb" and run.path == str(tmp_path / "checkpoints" / "tb")
        assert run.steps.index.tolist() == list(range(100, 5100, 100))
        assert {"loss", "lr", "grad_norm/total", "loss_scale", "valid/loss", "train_epoch/loss"} <= set(run.steps.columns)
        assert run.steps["valid/loss"].notna().sum() == 5 and run.steps.loc[3000, "loss"] == 12.0
    (blip,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert blip.step == 3000


def test_deepspeeds_own_events_are_read_in_optimizer_steps(tmp_path):
    """DeepSpeed's tensorboard monitor writes Train/Samples/train_loss at the samples seen (512 a
    step here), a resume from step 400 among them: steps, replaced stretch and logged NaN are read
    divided by 512, and a spike over 6 steps recovered (it was 'not recovered within 1024 steps')."""
    from torch.utils.tensorboard import SummaryWriter

    def loss(i):
        return 2 + 2 * np.exp(-i / 200) + 0.02 * np.sin(i) + (4.0 * (1 - (i - 600) / 6) if 600 <= i < 606 else 0.0)

    run_dir = tmp_path / "ds_tb"
    for steps, nan_at in ((range(1, 451), 430), (range(401, 1001), None)):  # resumed from step 400
        writer = SummaryWriter(str(run_dir))
        for i in steps:
            writer.add_scalar("Train/Samples/train_loss", float("nan") if i == nan_at else loss(i), 512 * i)
            writer.add_scalar("Train/Samples/lr", 3e-4, 512 * i)
        writer.close()
    (run,) = tensorboard.load(run_dir)
    assert run.steps.index.tolist() == list(range(1, 1001))
    assert any("divided by 512, the samples per step" in w for w in run.warnings)
    (stretch,) = run.abandoned
    assert (stretch.resumed_at, stretch.first, stretch.last) == (401, 401, 450)
    assert stretch.steps.index[-1] == 450 and stretch.logged_nan == {"loss": [430]}
    from sentinel.analyze.analyzer import analyze_run

    report = analyze_run(run)
    (spike,) = [i for i in report.incidents if i.kind == "loss_spike"]
    assert (spike.step, spike.end_step, spike.severity.value) == (600, 605, "warning")
    assert report.verdict.value == "recovered"


def test_opennmt_py_tags_read_their_cross_entropy_as_the_loss(tmp_path):
    """OpenNMT-py's TensorBoard: progress/xent (its training loss), progress/lr, valid/xent. With no
    tag named loss it was 'nothing to analyse: no loss tag among ...'."""
    from torch.utils.tensorboard import SummaryWriter

    from sentinel.analyze.analyzer import analyze_run

    writer = SummaryWriter(str(tmp_path / "onmt"))
    for step in range(50, 5001, 50):
        xent = 9.0 if step == 3000 else 2 + 3 * np.exp(-step / 1000)
        for tag, value in (("progress/xent", xent), ("progress/ppl", float(np.exp(xent))), ("progress/acc", 40.0),
                           ("progress/lr", 2e-4)):
            writer.add_scalar(tag, value, step)
        if step % 1000 == 0:
            writer.add_scalar("valid/xent", xent + 0.1, step)
    writer.close()
    (run,) = tensorboard.load(tmp_path / "onmt")
    assert run.steps["loss"].count() == 100 and np.allclose(run.steps["lr"], 2e-4)
    assert "loss read from 'progress/xent' (no tag is named loss; --loss-col picks another)" in run.warnings
    assert run.steps["valid/xent"].count() == 5
    (blip,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert blip.step == 3000


def test_records_written_without_a_global_step_are_numbered_in_write_order(tmp_path):
    """writer.add_scalar('loss', loss) without a global_step writes every record at step 0: one
    value was read of 300, 'healthy'. They are numbered 1..300 in write order, with a warning."""
    from torch.utils.tensorboard import SummaryWriter

    from sentinel.analyze.analyzer import analyze_run

    writer = SummaryWriter(str(tmp_path / "run"))
    for i in range(1, 301):
        writer.add_scalar("loss", 9.0 if i in (200, 201) else 2 + 2 * np.exp(-i / 60))
        writer.add_scalar("lr", 1e-3)
    writer.close()
    (run,) = tensorboard.load(tmp_path / "run")
    assert run.steps.index.tolist() == list(range(1, 301)) and run.steps["lr"].notna().all()
    assert "loss (300 records at 1 step(s))" in run.warnings[-1] and "numbered 1, 2, 3" in run.warnings[-1]
    (spike,) = [i for i in analyze_run(run).incidents if i.kind == "loss_spike"]
    assert (spike.step, spike.end_step) == (200, 201)


def test_batch_losses_logged_at_their_epoch_are_numbered_and_the_epochs_values_follow(tmp_path):
    """A batch's loss logged at its epoch (50 records a step) and the validation loss once an
    epoch: the batches numbered in write order, the validation loss at its epoch's last batch."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run"))
    for epoch in range(6):
        for batch in range(50):
            writer.add_scalar("train/loss", 2 + 1 / (1 + epoch * 50 + batch), epoch)
        writer.add_scalar("val/loss", 2.5 - epoch / 10, epoch)
    writer.close()
    (run,) = tensorboard.load(tmp_path / "run")
    assert run.steps.index.tolist() == list(range(1, 301))
    assert run.steps["val/loss"].dropna().to_dict() == pytest.approx({50 * (e + 1): 2.5 - e / 10 for e in range(6)})


@pytest.mark.parametrize("per_step", [lambda step: 2 if step % 25 == 0 else 1, lambda step: 4])
def test_a_step_written_twice_and_micro_batches_keep_their_steps(tmp_path, per_step):
    """A step written twice here and there, or four micro-batches a step logged at the optimizer
    step: the steps are kept (the last record of each)."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run"))
    for step in range(1, 101):
        for k in range(per_step(step)):
            writer.add_scalar("loss", 2 + 1 / step + k / 100, step)
    writer.close()
    (run,) = tensorboard.load(tmp_path / "run")
    assert run.steps.index.tolist() == list(range(1, 101)) and not any("numbered" in w for w in run.warnings)


def test_a_batch_index_written_as_the_global_step_is_read_across_epochs(tmp_path):
    """writer.add_scalar('Loss/train', loss, i) with i the batch inside the epoch: each epoch fell
    onto the one before (100 losses of 500 read, the spike at the 301st gone: 'healthy'). One
    file whose steps fall back to their first again and again is read across its epochs."""
    from torch.utils.tensorboard import SummaryWriter

    from sentinel.analyze.analyzer import analyze_run

    writer, n = SummaryWriter(str(tmp_path / "run")), 0
    for epoch in range(5):
        for i in range(100):
            n += 1
            writer.add_scalar("Loss/train", 9.0 if n == 301 else 2 + 2 * np.exp(-n / 100), i)
    writer.close()
    (run,) = tensorboard.load(tmp_path / "run")
    assert run.steps.index.tolist() == list(range(500)) and run.steps["loss"].iloc[300] == 9.0
    assert "Loss/train (100 an epoch): read across epochs" in run.warnings[-1]
    (blip,) = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert blip.step == 300


def test_ultralytics_tensorboard_is_read_in_epochs(tmp_path):
    """YOLOv8's TensorBoard writes each epoch's mean losses at the epoch's number beside its
    metrics/mAP50(B): a x3 epoch read as an 'outlier batch' at 'step 60'. It is an epoch, a spike."""
    from torch.utils.tensorboard import SummaryWriter

    from sentinel.analyze.analyzer import analyze_run

    writer = SummaryWriter(str(tmp_path / "train"))
    for epoch in range(100):
        box = (0.05 + 0.05 * np.exp(-epoch / 20)) * (3 if epoch == 60 else 1)
        for tag, value in (("train/box_loss", box), ("train/cls_loss", box / 2), ("train/dfl_loss", box / 3),
                           ("metrics/mAP50(B)", 0.5), ("metrics/mAP50-95(B)", 0.3), ("lr/pg0", 0.01)):
            writer.add_scalar(tag, value, epoch)
    writer.close()
    (run,) = tensorboard.load(tmp_path / "train")
    assert run.meta["step_unit"] == "epoch"
    report = analyze_run(run)
    (spike,) = [i for i in report.incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert (spike.kind, spike.step, report.step_unit) == ("loss_spike", 60, "epoch")


def test_an_aggregated_total_beside_its_terms_is_the_loss_not_one_more_term(tmp_path):
    """Modulus writes each PDE residual's loss and their weighted sum, "Train/loss_aggregated": no tag said total,
    so the terms were summed with it, every loss twice its value. A training section's "total" where no tag says
    loss (an interatomic potential's "train/energy", "train/force", "train/total") is the loss: "no loss" hid
    its divergence."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "modulus"))
    for k in range(50):
        terms = {"Train/loss_u": 0.3 / (1 + k), "Train/loss_v": 0.2 / (1 + k), "Train/loss_continuity": 0.1 / (1 + k)}
        for tag, value in (*terms.items(), ("Train/loss_aggregated", sum(terms.values()))):
            writer.add_scalar(tag, value, 1000 * k)
    writer.close()
    (run,) = tensorboard.load(tmp_path / "modulus")
    assert run.steps["loss"].iloc[-1] == pytest.approx(0.6 / 50, rel=1e-6)
    assert not any("loss is the sum of" in warning for warning in run.warnings)
    writer = SummaryWriter(str(tmp_path / "mlff"))
    for k in range(50):
        energy, force = 1 / (1 + k), 2 / (1 + k)
        for tag, value in (("train/energy", energy), ("train/force", force), ("train/total", energy + force),
                           ("train/lr", 1e-3), ("val/total", 1.1 * (energy + force))):
            writer.add_scalar(tag, value, 10 * k)
    writer.close()
    (run,) = tensorboard.load(tmp_path / "mlff")
    assert run.steps["loss"].iloc[-1] == pytest.approx(3 / 50, rel=1e-6)
    assert "loss read from 'train/total'" in " ".join(run.warnings)


def test_an_event_file_under_a_name_of_its_own_is_read(tmp_path):
    """An SB3 PPO run's event file saved as "sb3_ppo_tfevents.log" was refused as "binary data, not text": an event
    file is known by its first record too, whatever its name."""
    import shutil

    from torch.utils.tensorboard import SummaryWriter

    from sentinel.analyze.discover import discover_runs

    writer = SummaryWriter(str(tmp_path / "PPO_1"))
    for k in range(1, 60):
        writer.add_scalar("train/loss", 1.0 / k, 2048 * k)
    writer.close()
    (event_file,) = (tmp_path / "PPO_1").iterdir()
    named = tmp_path / "pasted" / "sb3_ppo_tfevents.log"
    named.parent.mkdir()
    shutil.copy(event_file, named)
    (run,) = discover_runs(named)
    assert (run.name, run.source, len(run.steps)) == ("sb3_ppo_tfevents", "tensorboard", 59)


def test_stable_baselines3_ppo_without_episode_returns_is_an_agents_run(tmp_path):
    """Stable-Baselines3 logs rollout/ep_rew_mean only where the environment is wrapped in a Monitor: four PPO runs
    without it were 'unhealthy', one with 66 incidents (7 critical divergences) on a surrogate loss that crosses zero
    by design. Its update statistics (train/approx_kl, train/value_loss, ...) make it an agent's run all the same."""
    from torch.utils.tensorboard import SummaryWriter

    rng = np.random.default_rng(3)
    writer = SummaryWriter(str(tmp_path / "ppo_tensorboard" / "PPO_1"))
    for k in range(1, 300):
        step = 2048 * k
        value_loss = 200 * np.exp(-k / 30) + abs(rng.normal(0, 5 if k % 37 else 80))
        writer.add_scalar("train/value_loss", value_loss, step)
        writer.add_scalar("train/policy_gradient_loss", rng.normal(-0.01, 0.01), step)
        writer.add_scalar("train/entropy_loss", -1.0 + k / 600, step)
        writer.add_scalar("train/approx_kl", abs(rng.normal(0.01, 0.005)), step)
        writer.add_scalar("train/clip_fraction", 0.1, step)
        writer.add_scalar("train/loss", 0.5 * value_loss / 10 + rng.normal(0, 2), step)
        writer.add_scalar("time/fps", 900, step)
    writer.close()
    (run,) = discover_runs(tmp_path / "ppo_tensorboard")
    report = analyze_run(run)
    assert [i for i in report.incidents if i.severity != "info"] == [] and report.verdict == "healthy"
    assert any("update statistics" in w for w in report.warnings)


@pytest.mark.parametrize("folder", ["eval", "eval_validation"])
def test_an_estimators_eval_folder_is_the_runs_evaluation(tmp_path, folder):
    """TensorFlow's Estimator writes the training's events into model_dir and each evaluation's into model_dir/eval
    (eval_<name> for evaluate(name=...)), under the same tag 'loss': the eval folder was a run of its own, its rising
    loss (an overfitting) a critical 'loss spike'. It is the run's eval/loss."""
    from torch.utils.tensorboard import SummaryWriter

    train = SummaryWriter(str(tmp_path / "model_dir"))
    evaluation = SummaryWriter(str(tmp_path / "model_dir" / folder))
    for step in range(1, 5000, 100):
        train.add_scalar("loss", 1.2 * np.exp(-step / 800) + 0.01, step)
        if step % 1000 == 1:
            evaluation.add_scalar("loss", 12.0 + step / 400, step)
    train.close()
    evaluation.close()
    for where in (tmp_path, tmp_path / "model_dir"):
        (run,) = discover_runs(where)
        assert run.name == "model_dir" and run.steps["loss"].max() < 1.3
        assert run.steps[f"{folder}/loss"].count() == 5
        assert all(i.severity == "info" for i in analyze_run(run).incidents)


def _launch_into(logdir: Path, losses: dict[int, float]) -> None:
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(logdir)) as writer:  # a new event file in the same folder, as each launch writes
        for step, loss in losses.items():
            writer.add_scalar("total_loss", loss, step)
            writer.add_scalar("lr", 1e-4, step)


def test_launches_into_one_folder_from_the_first_step_are_trainings_of_their_own(tmp_path):
    """detectron2 writes a new event file into its output folder at each launch, each from iteration 19: read as one
    history by step, the last launch overwrote the others, and a whole first training of 2,000 iterations was gone
    without a word. Each launch from the first step is a run of its own; one that goes on from a later step (a
    resume) is the same training."""
    first = {s: 80 * np.exp(-s / 700) + 19 for s in range(19, 2000, 20)}
    aborted = {s: 80 * np.exp(-s / 700) + 25 for s in range(19, 493, 20)}
    third = {s: 70 * np.exp(-s / 900) + 10 for s in range(19, 4000, 20)}
    for losses in (first, aborted, third):
        _launch_into(tmp_path / "output", losses)
    runs = discover_runs(tmp_path)
    assert [r.name for r in runs] == ["output#1", "output#2", "output#3"]
    for run, losses in zip(runs, (first, aborted, third)):
        assert run.steps["loss"].dropna().to_dict() == pytest.approx(losses)
        assert "output holds 3 trainings that each start from the first step" in run.warnings[0]
    assert [r.name for r in discover_runs(tmp_path / "output")] == ["output#1", "output#2", "output#3"]
    # A resume: the second file goes on from a checkpoint at 1,000: one training.
    _launch_into(tmp_path / "resumed", {s: v for s, v in first.items() if s < 1200})
    _launch_into(tmp_path / "resumed", {s: v for s, v in first.items() if s >= 1000})
    (run,) = discover_runs(tmp_path / "resumed")
    assert run.name == "resumed" and run.steps["loss"].dropna().to_dict() == pytest.approx(first)


def test_launches_from_an_early_step_after_a_long_training_are_trainings_too(tmp_path):
    """chemprop wrote 167 trainings' event files into one folder, the first from step 250, the others from 500:
    read as 45 histories glued from resumes. A file that starts within the first tenth of the steps the training
    before it reached is a training of its own (a resume from so early a checkpoint throws nine tenths away)."""
    first = {s: 1.0 / (1 + s / 1000) for s in range(250, 24001, 250)}
    later = [{s: 1.2 / (1 + s / 900) + k / 100 for s in range(500, 24001, 250)} for k in range(3)]
    for losses in (first, *later):
        _launch_into(tmp_path / "fold", losses)
    runs = discover_runs(tmp_path / "fold")
    assert [len(r.steps) for r in runs] == [len(first), *(len(losses) for losses in later)]


@pytest.mark.parametrize("zeros, verdict", [(150, "unhealthy"), (3, "healthy")])
def test_an_agents_loss_exactly_zero_update_after_update_is_told(tmp_path, zeros, verdict):
    """A Stable-Baselines3 PPO agent whose train/loss is exactly 0.0 for 1,902 updates in a row, its return pinned at
    the illegal-move penalty: 'healthy' (an RL run's loss is judged on non-finite values only). Its updates carry no
    gradient: a warning. A few zero updates are no collapse."""
    from torch.utils.tensorboard import SummaryWriter

    rng = np.random.default_rng(5)
    writer = SummaryWriter(str(tmp_path / "PPO_5"))
    for k in range(1, 200):
        step = 50 * k
        collapsed = k > 200 - zeros
        writer.add_scalar("train/loss", 0.0 if collapsed else abs(rng.normal(3, 1)), step)
        writer.add_scalar("train/entropy_loss", -0.03 if collapsed else -7.0, step)
        writer.add_scalar("rollout/ep_rew_mean", -100.0 if collapsed else -100 + k / 4, step)
    writer.close()
    (run,) = discover_runs(tmp_path / "PPO_5")
    report = analyze_run(run)
    assert report.verdict == verdict
    if zeros > 100:
        (stuck,) = report.incidents
        assert stuck.kind == "loss_stuck" and "updates carry no gradient" in stuck.message
        assert "episode return went from -100 to -100" in stuck.message


def test_a_test_phases_event_file_is_no_training_of_its_own(tmp_path):
    """Lightning's trainer.test() after fit() writes its test metrics into a new event file of the version folder, from
    step 0: it was 'version_0#2', a second training with no loss. A file with no training loss starts none."""
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(tmp_path / "version_0")) as writer:
        for step in range(0, 200, 10):
            writer.add_scalar("train_loss", 2.0 - step / 200, step)
    with SummaryWriter(str(tmp_path / "version_0")) as writer:
        writer.add_scalar("test_loss", 1.1, 0)
        writer.add_scalar("test_acc", 0.8, 0)
    (run,) = discover_runs(tmp_path)
    assert run.name == "version_0" and run.steps["loss"].count() == 20


def test_the_report_names_the_tag_read_as_the_loss(tmp_path):
    """Neither the JSON nor the table said which tag or column was read as the loss (a run logging Loss/train beside
    Loss/val, a Lightning run's train_loss_step beside train_loss_epoch): the JSON's loss_name says it."""
    from click.testing import CliRunner
    from torch.utils.tensorboard import SummaryWriter

    from sentinel.cli.main import main

    with SummaryWriter(str(tmp_path / "run")) as writer:
        for step in range(40):
            writer.add_scalar("Loss/train", 2.0 - step / 40, step)
            writer.add_scalar("Loss/val", 2.1 - step / 50, step)
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "run"), "--format", "json"])
    (run,) = json.loads(result.output)["runs"]
    assert run["loss_name"] == "Loss/train"
