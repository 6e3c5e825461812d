"""A file's head is read once while it is claimed and read: twenty loaders' sniffs asked it for
its first megabyte or 64 KB, each reading, decoding and splitting it again."""

from __future__ import annotations

import threading

from sentinel.analyze import discover
from sentinel.analyze.loaders import textlog
from sentinel.analyze.loaders.textlog import heads_shared, read_head, read_head_lines


def _counting(monkeypatch) -> list:
    reads = []
    real = textlog._read_head

    def counted(path, limit):
        reads.append((str(path), limit))
        return real(path, limit)

    monkeypatch.setattr(textlog, "_read_head", counted)
    return reads


def test_a_log_named_on_its_own_is_read_from_disk_once_per_head_size(tmp_path, monkeypatch):
    log = tmp_path / "train.log"
    log.write_text("".join(f"step {i} | loss {3 - i / 100:.3f} | lr 1e-4\n" for i in range(1, 200)))
    reads = _counting(monkeypatch)
    (run,) = discover.discover_runs(log)
    assert len(run.steps) == 199
    assert reads and len(reads) == len(set(reads))  # each size read once, by whichever sniff asked first
    assert len(reads) <= 4


def test_a_file_that_no_loader_reads_gets_its_message_and_is_read_once_per_size(tmp_path, monkeypatch):
    notes = tmp_path / "notes.txt"
    notes.write_text("nothing to see here\n" * 50)
    reads = _counting(monkeypatch)
    try:
        discover.discover_runs(notes)
    except discover.NoRunsError as err:
        assert "not a log format sentinel reads" in str(err)
    else:
        raise AssertionError("a file of prose is no run")
    assert reads and len(reads) == len(set(reads))


def test_heads_are_kept_only_inside_and_each_caller_gets_its_own_lines(tmp_path):
    path = tmp_path / "a.log"
    path.write_text("one\ntwo\n")
    with heads_shared():
        lines = read_head_lines(path)
        lines.append("changed by a caller")
        path.write_text("three\n")
        assert read_head_lines(path) == ["one", "two"] and read_head(path) == "one\ntwo\n"
        with heads_shared():  # nested: the outer one's heads
            assert read_head(path) == "one\ntwo\n"
    assert read_head(path) == "three\n" and read_head_lines(path) == ["three"]


def test_another_thread_reads_its_own_heads(tmp_path):
    path = tmp_path / "a.log"
    path.write_text("one\n")
    seen = []
    with heads_shared():
        assert read_head(path) == "one\n"
        path.write_text("two\n")
        thread = threading.Thread(target=lambda: seen.append(read_head(path)))
        thread.start()
        thread.join()
    assert seen == ["two\n"]
