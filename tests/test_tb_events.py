"""TensorBoard events encoded by hand are the bytes protobuf gives, and read back as written."""

from __future__ import annotations

import math
import random

import pytest
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary

from sentinel.store.tb_events import EventFile, ScalarEventEncoder

SPECIAL = [0.0, -0.0, math.nan, math.inf, -math.inf, 1e39, -1e39, 1e-46, 3.4028235e38, 3.40282356e38, 7, True, 2**40]
TAGS = ["loss", "lr", "grad_norm/total", "attn_entropy/blocks.0.attn", "é/ü", "x" * 200]


def _reference(wall_time: float, step: int, values: dict) -> bytes:
    summary = Summary(value=[Summary.Value(tag=k, simple_value=float(v)) for k, v in values.items()])
    return Event(wall_time=wall_time, step=step, summary=summary).SerializeToString()


@pytest.mark.parametrize("seed", range(5))
def test_encoded_events_are_the_bytes_protobuf_writes(seed):
    rng = random.Random(seed)
    encoder = ScalarEventEncoder()
    for _ in range(300):
        values = {}
        for _ in range(rng.randint(0, 20)):
            tag = rng.choice(TAGS) if rng.random() < 0.7 else f"grad_norm/blocks.{rng.randint(0, 999)}"
            values[tag] = rng.choice(SPECIAL) if rng.random() < 0.2 else rng.uniform(-1, 1) * 10 ** rng.randint(-40, 40)
        step = rng.choice([0, 1, 127, 128, rng.randint(0, 10**12), -5])
        wall_time = rng.choice([0.0, rng.uniform(0, 2e9)])
        assert encoder.event(wall_time, step, values) == _reference(wall_time, step, values)


def test_event_file_reads_back(tmp_path):
    f = EventFile(tmp_path)
    f.write_scalars(3, {"loss": 2.5, "grad_norm/total": math.inf}, wall_time=10.0)
    f.close()
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    events = list(LegacyEventFileLoader(str(f.path)).Load())  # the raw events
    assert events[0].file_version == "brain.Event:2"
    (event,) = events[1:]
    assert (event.step, event.wall_time) == (3, 10.0)
    assert [(v.tag, v.simple_value) for v in event.summary.value] == [("loss", 2.5), ("grad_norm/total", math.inf)]


def test_a_sink_closed_from_a_sink_thread_does_not_wait(tmp_path, monkeypatch):
    # A writer dropped without close() is finalised by whichever thread the garbage collector
    # runs on, another sink's writer thread included: there a sink never waits for a writer
    # thread (two finalising each other would wait for each other; one for itself raises).
    import threading

    from sentinel.store import tb_sink

    sinks = [tb_sink.TensorBoardSink(tmp_path / name) for name in ("a", "b")]
    joined = []
    for sink in sinks:
        monkeypatch.setattr(sink._thread, "join", lambda *a, _s=sink, **k: joined.append(_s))

    def finalise_both():
        tb_sink._SINK_THREAD.active = True  # as on a sink's own thread
        for sink in sinks:
            sink.close()

    t = threading.Thread(target=finalise_both)
    t.start()
    t.join(timeout=10)
    assert not t.is_alive() and joined == []
    monkeypatch.undo()
    for sink in sinks:  # each stops after its queued records
        sink._thread.join(timeout=10)
        assert not sink._thread.is_alive()


def test_a_sink_closed_on_a_sink_thread_with_a_full_queue_stops_once_drained(tmp_path, monkeypatch):
    # There the stop item cannot wait for room: the writer thread stops when the queue is empty.
    import threading
    import time

    from sentinel.store import tb_events, tb_sink

    gate, writing = threading.Event(), threading.Event()
    write = tb_events.EventFile.write_scalars

    def slow_write(self, step, values):
        writing.set()
        gate.wait(10)
        return write(self, step, values)

    monkeypatch.setattr(tb_events.EventFile, "write_scalars", slow_write)
    sink = tb_sink.TensorBoardSink(tmp_path / "tb", tb_sink.TensorBoardSinkConfig(queue_size=1))
    for step in range(2):  # the first is being written, the second fills the queue
        sink.put({"step": step, "loss": 1.0})
        sink._hand_over(time.monotonic())
        if step == 0:
            assert writing.wait(10)
    assert sink._queue.full()

    closer = threading.Thread(target=lambda: (setattr(tb_sink._SINK_THREAD, "active", True), sink.close()))
    closer.start()
    closer.join(timeout=10)
    assert not closer.is_alive()
    gate.set()
    sink._thread.join(timeout=10)
    assert not sink._thread.is_alive() and sink.dropped == 0
