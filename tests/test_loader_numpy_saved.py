"""A loss history saved with np.save / np.savez, named on its own (in a directory walk: data)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover, discover_runs
from sentinel.cli.main import main


def _losses(n: int = 300) -> np.ndarray:
    values = 2.5 * np.exp(-np.arange(n) / 100) + 0.8
    values[170] = 6.0
    return values


def _header_of(text: bytes) -> bytes:
    """A version 1.0 .npy header holding ``text``."""
    import struct

    text = text.ljust(117) + b"\n"
    return np.lib.format.MAGIC_PREFIX + b"\x01\x00" + struct.pack("<H", len(text)) + text


def test_np_save_of_the_losses(tmp_path):
    np.save(tmp_path / "losses.npy", _losses())
    (run,) = discover_runs(tmp_path / "losses.npy")
    np.testing.assert_array_equal(run.steps["loss"].to_numpy(), _losses())
    assert run.steps.index[0] == 1 and "numbered 1, 2, 3" in run.warnings[0]
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("outlier_batch", 171)]
    np.save(tmp_path / "pairs.npy", np.stack([np.arange(0, 3000, 10), _losses()], axis=1).astype("float32"))
    (run,) = discover_runs(tmp_path / "pairs.npy")
    assert run.steps.index.tolist() == list(range(0, 3000, 10))
    assert [(i.kind, i.step) for i in analyze_run(run).incidents] == [("outlier_batch", 1700)]


def test_a_header_python_2_wrote_is_read_without_numpys_warning(tmp_path):
    """Python 2 wrote the shape's integers as longs ('(300L,)'): NumPy reads such a header the slow
    way and says so with a UserWarning, which the command printed."""
    path = tmp_path / "losses.npy"
    path.write_bytes(_header_of(b"{'descr': '<f8', 'fortran_order': False, 'shape': (300L,), }")
                     + _losses().astype("<f8").tobytes())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (run,) = discover_runs(path)
    np.testing.assert_array_equal(run.steps["loss"].to_numpy(), _losses())


def test_np_savez_of_a_history(tmp_path):
    path = tmp_path / "history.npz"
    np.savez_compressed(path, step=np.arange(0, 3000, 10), train_loss=_losses(), lr=np.full(300, 1e-3),
                        val_loss=np.linspace(3, 2, 10))
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(0, 3000, 10)) and sorted(run.steps.columns) == ["loss", "lr"]
    assert run.warnings == ["history.npz: loss read from the array 'train_loss'",
                            "history.npz: arrays left out: val_loss (10 numbers, not 300)"]
    result = CliRunner().invoke(main, ["analyze", str(path), "--loss-col", "lr"])
    assert result.exit_code == 0 and "final loss 0.001" in result.output
    result = CliRunner().invoke(main, ["analyze", str(path), "--step-col", "iteration"])  # no such array
    assert result.exit_code == 1 and result.output == (f"Error: {path}: column 'iteration' not found; available: "
                                                       "step, lr\n")


@pytest.mark.parametrize("write, message", [
    (lambda p: np.save(p, np.array([{"loss": 1.0}], dtype=object), allow_pickle=True),
     "an array of object (not numbers; objects are never unpickled)"),
    (lambda p: np.save(p, np.zeros((10, 28, 28))), "an array of shape (10, 28, 28): not a loss history"),
    (lambda p: p.write_bytes(np.lib.format.MAGIC_PREFIX + b"\x01\x00garbage"), "not a NumPy array"),
    (lambda p: p.write_bytes(b"\x00" * 64), "not a NumPy array"),
    (lambda p: p.write_bytes(_header_of(b"{'descr': '<f8', 'fortran_order': False, 'shape': (3,") + b"\x00" * 24),
     "not a NumPy array"),  # a bracket never closed: NumPy's tokenize raised its own error
])
def test_what_a_numpy_file_that_is_no_loss_history_says(tmp_path, write, message):
    path = tmp_path / "saved.npy"
    write(path)
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1 and message in result.output and "Traceback" not in result.output, result.output


def test_a_npz_is_read_up_to_a_bound(tmp_path, monkeypatch):
    """A .npz named on its own may hold a dataset: its arrays are read up to MAX_VALUES numbers in
    all, the others named; a 2-D array's data is never read."""
    from sentinel.analyze.loaders import numpy_saved

    monkeypatch.setattr(numpy_saved, "MAX_VALUES", 700)
    path = tmp_path / "mixed.npz"
    np.savez(path, loss=_losses(), lr=np.full(300, 1e-3), big=np.zeros(300), images=np.zeros((5, 4, 4)))
    (run,) = discover_runs(path)
    assert sorted(run.steps.columns) == ["loss", "lr"]
    assert run.warnings[-1] == ("mixed.npz: arrays left out: big (past 700 numbers in all), images (not one row of "
                                "numbers)")


def test_numpy_files_cut_off_or_in_a_folder(tmp_path):
    np.save(tmp_path / "losses.npy", _losses())
    data = (tmp_path / "losses.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[:-100])  # the end of its data missing
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "cut.npy")])
    assert result.exit_code == 1 and "cut.npy" in result.output and "Traceback" not in result.output
    np.savez(tmp_path / "h.npz", loss=_losses())
    (tmp_path / "h_cut.npz").write_bytes((tmp_path / "h.npz").read_bytes()[:500])
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "h_cut.npz")])
    assert result.exit_code == 1 and "not readable as a NumPy file" in result.output
    # In a directory walk a .npy is data, never a run.
    (tmp_path / "train.log").write_text("".join(f"step {s} | loss {v:.4f}\n" for s, v in enumerate(_losses())))
    found = discover(tmp_path)
    assert [run.source for run in found.runs] == ["text"]
    assert {s.reason for s in found.skipped} == {"binary data"}
