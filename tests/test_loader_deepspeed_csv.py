"""DeepSpeed's CSV monitor: a job's folder of one CSV per metric, read as one run."""

from __future__ import annotations

import csv
import json
import math

from click.testing import CliRunner

from sentinel.analyze.discover import RUN_PART, discover, discover_runs
from sentinel.analyze.loaders import deepspeed_csv
from sentinel.cli.main import main


class CsvMonitor:
    """Writes events as DeepSpeed's csv_monitor does: ``<log_dir>/<name with / and spaces as _>.csv``,
    appended, its header ``step,<the name's last part>`` written by each process the first time it
    writes that file (a process started again writes it again)."""

    def __init__(self, log_dir):
        self.log_dir = log_dir
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.written: set[str] = set()

    def write_events(self, events):
        for name, value, step in events:
            filename = name.replace("/", "_").replace(" ", "_")
            with open(self.log_dir / f"{filename}.csv", "a+", newline="") as f:
                writer = csv.writer(f)
                if filename not in self.written:
                    self.written.add(filename)
                    writer.writerow(["step", name.split("/")[-1]])
                writer.writerow([step, value])


def _loss(i: int) -> float:
    return 3 * math.exp(-i / 100) + 2 + 0.01 * math.sin(i) + (4.0 if i == 200 else 0.0)


def _train(monitor, steps, batch=32, extra=()):
    for i in steps:
        samples = i * batch
        monitor.write_events([("Train/Samples/train_loss", _loss(i), samples), ("Train/Samples/lr", 1e-4, samples),
                              ("Train/Samples/loss_scale", 65536.0, samples), *[(n, v, samples) for n, v in extra]])


def test_a_job_folder_is_one_run_in_optimizer_steps(tmp_path):
    """The engine's events are at the samples seen, 32 a step: read divided by 32."""
    _train(CsvMonitor(tmp_path / "ds_logs" / "gpt_run"), range(1, 301))
    found = discover(tmp_path / "ds_logs")
    (run,) = found.runs
    assert (run.name, run.source) == ("gpt_run", "deepspeed_csv")
    assert sorted(run.steps.columns) == ["loss", "loss_scale", "lr"]
    assert run.steps.index.tolist() == list(range(1, 301))
    assert run.steps["loss"].tolist() == [_loss(i) for i in range(1, 301)]
    assert "steps are optimizer steps: the samples seen (DeepSpeed's Train/Samples events are logged at " \
           "global_samples) divided by 32, the samples per step" in run.warnings
    assert sorted((s.path.rsplit("/", 1)[1], s.reason) for s in found.skipped) == \
        [("Train_Samples_lr.csv", RUN_PART), ("Train_Samples_train_loss.csv", RUN_PART)]
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "ds_logs"), "--format", "json"])
    (report,) = json.loads(result.stdout)["runs"]
    assert [(i["kind"], i["step"]) for i in report["incidents"]] == [("outlier_batch", 200)]


def test_a_job_started_again_appends_its_header_and_steps_again(tmp_path):
    folder = tmp_path / "run1"
    _train(CsvMonitor(folder), range(1, 121))
    _train(CsvMonitor(folder), range(101, 161))  # resumed from step 100: steps 101-120 logged again
    (run,) = discover_runs(folder / "Train_Samples_lr.csv")  # one of its files, named on its own
    assert run.steps.index.tolist() == list(range(1, 161))
    assert not any("without a numeric" in w for w in run.warnings)  # the second header is not a row


def test_events_of_its_own_and_the_loss_named_by_its_file(tmp_path):
    monitor = CsvMonitor(tmp_path / "run1")
    monitor.write_events([("Train/Eigenvalues/ModelBlockParam_0", 0.5, 1), ("Train/Eigenvalues/ModelBlockParam_0", 0.6, 2),
                          ("my group/dev nll", 2.0, 1), ("my group/dev nll", 1.9, 2)])
    assert deepspeed_csv.metric_name(tmp_path / "run1" / "my_group_dev_nll.csv") == "dev nll"
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "run1")])
    assert result.exit_code == 1 and "no loss metric among: ModelBlockParam_0, dev nll" in result.output
    (run,) = discover_runs(tmp_path / "run1", options=_options("my_group_dev_nll"))
    assert run.steps["loss"].tolist() == [2.0, 1.9] and "modelblockparam_0" in run.steps.columns


def test_a_users_own_csv_per_metric_stays_a_table(tmp_path):
    # loss.csv (step,loss) and lr.csv (step,lr): named after their header alone, no event group.
    (tmp_path / "loss.csv").write_text("step,loss\n" + "".join(f"{i},{_loss(i)}\n" for i in range(1, 50)))
    (tmp_path / "lr.csv").write_text("step,lr\n" + "".join(f"{i},0.001\n" for i in range(1, 50)))
    assert not deepspeed_csv.is_run_dir(tmp_path)
    runs = discover_runs(tmp_path)
    assert [r.source for r in runs] == ["generic_table"]  # lr.csv has no loss: not a run
    assert runs[0].name == "loss"


def _options(loss_col):
    from sentinel.analyze.loaders import LoadOptions

    return LoadOptions(loss_col=loss_col)


def test_a_header_of_the_whole_event_name(tmp_path):
    # The header written with the event's whole name ("step,Train/Samples/train_loss"): its last part.
    folder = tmp_path / "job"
    folder.mkdir()
    for name, values in (("train_loss", [_loss(i) for i in range(1, 41)]), ("lr", [1e-3] * 40)):
        (folder / f"Train_Samples_{name}.csv").write_text(
            f"step,Train/Samples/{name}\n" + "".join(f"{32 * i},{v}\n" for i, v in enumerate(values, 1)))
    (run,) = discover_runs(folder)
    assert sorted(run.steps.columns) == ["loss", "lr"] and len(run.steps) == 40


def _spike_of_six_steps(i: int) -> float:
    return 2 + 2 * math.exp(-i / 200) + 0.02 * math.sin(i) + (4.0 * (1 - (i - 600) / 6) if 600 <= i < 606 else 0.0)


def test_a_spike_over_six_steps_recovered_as_it_did(tmp_path):
    """At 512 samples a step, a spike over 6 optimizer steps spanned 3,072 'steps': 'not recovered
    within 1024 steps', critical, and the run unhealthy. Read in steps, it recovered in 6."""
    monitor = CsvMonitor(tmp_path / "run1")
    for i in range(1, 1001):
        monitor.write_events([("Train/Samples/train_loss", _spike_of_six_steps(i), 512 * i), ("Train/Samples/lr", 3e-4, 512 * i)])
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "run1"), "--format", "json"])
    (report,) = json.loads(result.stdout)["runs"]
    assert report["verdict"] == "recovered"
    (spike,) = report["incidents"]
    assert (spike["kind"], spike["severity"], spike["step"], spike["end_step"]) == ("loss_spike", "warning", 600, 605)


def test_samples_per_step_that_vary_stay_samples(tmp_path):
    """A batch-size ramp (Megatron-DeepSpeed's rampup_batch_size): no one batch divides the samples
    seen, which stay the steps, as said."""
    monitor, samples = CsvMonitor(tmp_path / "run1"), 0
    for i in range(1, 301):
        samples += 16 if i <= 100 else 48 if i <= 150 else 64
        monitor.write_events([("Train/Samples/train_loss", _loss(i), samples), ("Train/Samples/lr", 1e-4, samples)])
    (run,) = discover_runs(tmp_path / "run1")
    assert run.source == "deepspeed_csv"
    assert run.steps.index[:2].tolist() == [16, 32] and run.steps.index[-1] == samples
    assert any("not optimizer steps: the samples per step vary" in w for w in run.warnings)
