"""Renderers: the JSON schema exactly, the table and markdown content, and a PNG plot."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.loaders import RunData
from sentinel.analyze.render.json_report import render_json
from sentinel.analyze.render.markdown import render_markdown
from sentinel.analyze.render.plot import render_plot
from sentinel.analyze.render.table import render_table
from sentinel.analyze.report import Report
from sentinel.events import make_event

RUN_KEYS = ["path", "name", "source", "steps", "first_step", "last_step", "final_loss", "best_loss",
            "verdict", "incidents", "warnings", "step_unit", "loss_name"]
INCIDENT_KEYS = ["kind", "step", "end_step", "severity", "message", "details"]


def faulty_run(name: str = "r1", seed: int = 0) -> RunData:
    rng = np.random.default_rng(seed)
    n = 300
    loss = 3.0 * np.exp(-np.arange(n) / 100) + 1.0 + 0.02 * rng.standard_normal(n)
    loss[150:153] *= 6  # a spike of three steps, not one outlier batch
    loss[220] = np.nan
    frame = pd.DataFrame({"loss": loss, "grad_norm/total": 1 + 0.05 * rng.random(n),
                          "loss_scale": np.full(n, 65536.0)}, index=pd.Index(range(n), name="step"))
    frame["attn_entropy/blocks.0.attn"] = np.where(np.arange(n) % 10 == 0, 2.0 - np.arange(n) / 200, np.nan)
    events = pd.DataFrame.from_records([
        make_event("spike", 100, metric="loss", value=8.0),
        make_event("rollback", 101, spike_step=100, restored_step=90, skipped=[{"step": s} for s in range(91, 101)]),
        *[make_event("skip", s, batch_idx=s) for s in range(91, 101)]])
    return RunData(name, f"/logs/{name}", "test", frame, events, warnings=["steps: skipped 1 row"])


def report_of(*runs: RunData) -> Report:
    return Report([analyze_run(r) for r in runs])


def test_json_schema_is_exact_and_strict_json():
    doc = json.loads(render_json(report_of(faulty_run())))
    assert list(doc) == ["runs"]
    (run,) = doc["runs"]
    assert list(run) == RUN_KEYS
    assert run["name"] == "r1" and run["source"] == "test" and run["steps"] == 300
    assert run["verdict"] in ("healthy", "recovered", "unhealthy")
    assert run["warnings"] == ["steps: skipped 1 row"]
    kinds = [i["kind"] for i in run["incidents"]]
    assert {"loss_spike", "nonfinite", "rollback", "skip"} <= set(kinds)
    assert [i["step"] for i in run["incidents"]] == sorted(i["step"] for i in run["incidents"])
    for incident in run["incidents"]:
        assert list(incident) == INCIDENT_KEYS
        assert incident["severity"] in ("info", "warning", "critical")


def test_json_writes_nonfinite_numbers_as_null():
    frame = pd.DataFrame({"loss": [2.0, 1.0, np.nan]}, index=pd.Index([0, 1, 2], name="step"))
    text = render_json(report_of(RunData("n", "n", "test", frame)))
    assert "NaN" not in text and json.loads(text)["runs"][0]["final_loss"] is None


def test_table_lists_runs_and_incidents_in_step_order():
    report = report_of(faulty_run("r1"), faulty_run("r2", seed=1))
    text = render_table(report)
    assert text.index("r1 (test) /logs/r1") < text.index("r2 (test) /logs/r2")
    assert "warning: steps: skipped 1 row" in text
    block = text.split("\n\n")[0]
    positions = [block.index(f"\n  {i.step}") for i in report.runs[0].incidents]
    assert positions == sorted(positions)


def test_markdown_has_summary_and_incident_tables():
    text = render_markdown(report_of(faulty_run()))
    assert text.startswith("# sentinel analyze\n")
    assert "| r1 | test | 300 |" in text and "## r1" in text
    assert "| 150-152 | warning | loss_spike |" in text


def test_plot_writes_a_png_with_one_panel_per_metric(tmp_path):
    import matplotlib.image

    out = render_plot(report_of(faulty_run("r1"), faulty_run("r2", seed=1)), tmp_path / "report.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width = matplotlib.image.imread(out).shape[:2]
    assert width > 1000 and height > 1000  # four panels: loss, grad norm, loss scale, entropy


def test_table_folds_many_info_incidents_of_one_kind():
    from sentinel.analyze.incident import Incident, IncidentKind, Severity
    from sentinel.analyze.render.table import render_table
    from sentinel.analyze.report import Report, RunReport, Verdict

    blips = [Incident(IncidentKind.GRAD_SPIKE, 10 * k, 10 * k, Severity.INFO, f"blip {k}")
             for k in range(8)]
    spike = Incident(IncidentKind.LOSS_SPIKE, 95, 96, Severity.WARNING, "the spike")
    run = RunReport(name="r", path="r", source="test", steps=100, first_step=0, last_step=99,
                    final_loss=1.0, best_loss=1.0, verdict=Verdict.HEALTHY,
                    incidents=sorted(blips + [spike], key=lambda i: i.step), warnings=[], data=None)
    text = render_table(Report([run]))
    assert "blip 4" in text and "blip 5" not in text and "the spike" in text
    assert "3 more like these" in text
