"""Logs kept compressed: read as the file they hold, with the same result as the plain file."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import tarfile
import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from sentinel import metrics
from sentinel.analyze.compressed import decompressed
from sentinel.analyze.discover import discover_runs
from sentinel.analyze.loaders import LoadOptions
from sentinel.cli.main import main

LOGS = Path(__file__).parent / "fixtures" / "logs"
COMPRESS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}


@pytest.fixture(autouse=True)
def _own_tempdir(tmp_path, monkeypatch):
    # Every decompressed copy goes here, so a test can see that none is left behind.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    yield
    assert list(scratch.iterdir()) == []


def _old(path: Path) -> Path:
    past = time.time() - 3600  # a log that stopped being written an hour ago
    os.utime(path, (past, past))
    return path


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_a_compressed_text_log_reads_as_the_plain_one(tmp_path, suffix):
    plain = LOGS / "torchtitan.log"
    packed = tmp_path / ("torchtitan.log" + suffix)
    packed.write_bytes(COMPRESS[suffix](plain.read_bytes()))
    _old(packed)
    (want,) = discover_runs(plain, LoadOptions())
    (got,) = discover_runs(packed, LoadOptions())
    assert (got.name, got.source, got.path) == (want.name, want.source, str(packed))
    assert got.steps.equals(want.steps) and got.warnings == want.warnings


def test_a_compressed_table_in_a_run_folder_takes_the_folder_name(tmp_path):
    rows = "step,loss\n" + "".join(f"{s},{3 - s / 1000}\n" for s in range(0, 500, 10))
    folder = tmp_path / "run7"
    folder.mkdir()
    (folder / "metrics.csv.gz").write_bytes(gzip.compress(rows.encode()))
    _old(folder / "metrics.csv.gz")
    (run,) = discover_runs(tmp_path, LoadOptions())
    assert (run.name, run.source, run.path) == ("run7", "lightning_csv", str(folder / "metrics.csv.gz"))
    assert len(run.steps) == 50


def test_concatenated_streams_are_read_one_after_the_other(tmp_path):
    first = "".join(f"step {s} loss {3 - s / 100}\n" for s in range(0, 50))
    second = "".join(f"step {s} loss {2.5 - s / 1000}\n" for s in range(50, 100))
    path = tmp_path / "train.log.gz"
    path.write_bytes(gzip.compress(first.encode()) + gzip.compress(second.encode()))  # cat a.gz b.gz
    (run,) = discover_runs(_old(path), LoadOptions())
    assert run.steps.index.tolist() == list(range(100)) and run.warnings == []
    path.write_bytes(gzip.compress(first.encode()) + b"\0" * 512)  # padding after the stream (a tape block)
    (run,) = discover_runs(_old(path), LoadOptions())
    assert run.steps.index.tolist() == list(range(50))
    assert run.warnings == ["train.log.gz: 512+ bytes after the compressed data are not compressed data: ignored"]


def test_a_log_still_being_written_through_gzip_is_read_up_to_where_its_data_ends(tmp_path):
    text = "".join(f"step {s} loss {3 - s / 1000:.4f}\n" for s in range(2000)).encode()
    packed = gzip.compress(text)
    path = tmp_path / "live.log.gz"
    path.write_bytes(packed[: len(packed) * 3 // 4])  # `python train.py | gzip > live.log.gz`, still running
    (run,) = discover_runs(path, LoadOptions())
    assert 1000 < len(run.steps) < 2000 and run.steps[metrics.LOSS].notna().all()
    assert any("the compressed data ends early (still being written?)" in w for w in run.warnings)
    # its last line may be cut in the middle of a number: left out while the file is fresh
    assert any("has no line end" in w for w in run.warnings)


def test_damaged_data_and_archives_get_one_clear_message(tmp_path):
    good = gzip.compress(b"".join(b"step %d loss 2.0\n" for s in range(100)))
    damaged = tmp_path / "damaged.log.gz"
    damaged.write_bytes(good[:2] + b"\x07" + good[3:])  # no such compression method
    result = CliRunner().invoke(main, ["analyze", str(damaged)])
    assert result.exit_code == 1 and "damaged compressed data" in result.output
    assert "Traceback" not in result.output
    cut = tmp_path / "cut.log.bz2"
    cut.write_bytes(bz2.compress(b"step 1 loss 2.0\n" * 100)[:-30])  # one block, nothing decodable yet
    result = CliRunner().invoke(main, ["analyze", str(cut)])
    assert result.exit_code == 1 and "ends early" in result.output and "not a log sentinel reads" in result.output
    archive = tmp_path / "logs.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(LOGS / "torchtitan.log", arcname="torchtitan.log")
    result = CliRunner().invoke(main, ["analyze", str(archive)])
    assert result.exit_code == 1
    assert result.output == (f"Error: '{archive}' is an archive of several files: unpack it (tar xzf logs.tar.gz) "
                             "and pass the folder\n")


def test_a_directory_walk_reads_compressed_logs_and_names_archives(tmp_path):
    (tmp_path / "a.log.xz").write_bytes(lzma.compress((LOGS / "litgpt.log").read_bytes()))
    _old(tmp_path / "a.log.xz")
    (tmp_path / "b.zip").write_bytes(b"PK\x03\x04" + b"\0" * 30)
    result = CliRunner().invoke(main, ["analyze", str(tmp_path), "--format", "json"])
    report = json.loads(result.stdout)
    assert [(r["name"], r["source"]) for r in report["runs"]] == [("a", "litgpt")]
    assert [(Path(s["path"]).name, s["reason"]) for s in report["skipped"]] == \
        [("b.zip", "an archive of several files")]


def test_a_decompression_bomb_stops_at_the_bound(tmp_path):
    path = tmp_path / "bomb.log.gz"
    path.write_bytes(gzip.compress(b"0" * (8 << 20)))  # 8 MiB of zeros in ~8 KB
    with pytest.raises(ValueError, match="expands past"):
        with decompressed(path, limit=1 << 20):
            pass


def test_a_compressed_table_without_a_loss_says_so_as_the_plain_one_does(tmp_path):
    path = tmp_path / "noloss.csv.gz"
    path.write_bytes(gzip.compress(b"step,acc\n1,0.5\n2,0.6\n3,0.7\n"))
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1
    assert result.output == (f"Error: {path}: a table with a step column, 'step', but no single loss "
                             "column among: acc; name it with --loss-col <column>\n")


def test_compressed_data_that_is_no_log_is_not_decompressed_whole(tmp_path, monkeypatch):
    # A folder of a corpus's compressed shards: the start of each is enough to tell it holds no log.
    from sentinel.analyze import discover

    calls = []
    real = discover.decompressed
    monkeypatch.setattr(discover, "decompressed", lambda path, **kw: calls.append(kw) or real(path, **kw))
    line = b'{"text": "' + b"lorem ipsum " * 50 + b'"}\n'
    (tmp_path / "shard-00000.json.gz").write_bytes(gzip.compress(line * 20000))  # 12 MB of text
    (tmp_path / "train.log.gz").write_bytes(gzip.compress((LOGS / "torchtitan.log").read_bytes()))
    _old(tmp_path / "train.log.gz")
    runs = discover_runs(tmp_path, LoadOptions())
    assert [r.source for r in runs] == ["torchtitan"]
    assert sorted(kw.get("first") is None for kw in calls) == [False, False, True]  # two heads, one log whole


def test_a_compressed_database_names_itself_not_its_temporary_copy(tmp_path):
    packed = tmp_path / "mlflow.db.gz"
    packed.write_bytes((LOGS / "mlflow_sqlite" / "mlflow.db.gz").read_bytes())
    runs = discover_runs(_old(packed), LoadOptions())
    said = [w for run in runs for w in run.warnings]
    assert any(w.startswith(f"{packed} run tiny-gpt/eval-only: no loss metric") for w in said), said
    assert not any("sentinel-" in w for w in said), said
