"""DeePMD-kit's lcurve.out: a commented header ("#  step  rmse_trn ..."), rows of numbers under it, the header
written again at each restart, the restart's rows from its checkpoint's step. It was refused ("no header")."""

from __future__ import annotations

from sentinel.analyze import analyze
from sentinel.analyze.discover import discover_runs

_HEADER = "#  step      rmse_trn    rmse_e_trn    rmse_f_trn         lr"


def _rows(first: int, last: int) -> list[str]:
    return [f"{s:7d}      {3 / (1 + s / 1000):.2e}      4.04e-01      9.25e-01    1.0e-03" for s in range(first, last, 1000)]


def test_an_lcurve_written_again_from_a_restart_is_one_run(tmp_path):
    path = tmp_path / "lcurve.out"
    path.write_text("\n".join([_HEADER, *_rows(0, 30000), _HEADER, *_rows(25000, 50000)]) + "\n")
    (run,) = discover_runs(path)
    assert run.source == "space_table" and run.steps.index.tolist() == list(range(0, 50000, 1000))
    assert analyze(path).runs[0].verdict == "healthy"
