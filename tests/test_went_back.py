"""Logs whose steps go back: a run resumed from an earlier checkpoint into the same log (OPT's and
PaLM's restarts after a spike, a preempted job). The history written after replaces the earlier one
from its first step, the restart is an incident, and what the replaced stretch went through (usually
why the run was taken back) is reported as got past. Each log is written here in its tool's own
format; the TensorBoard runs by a real ``SummaryWriter``."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs
from sentinel.analyze.loaders.went_back import fall_backs, replaced_stretches, survivors


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _loss(step: int, rng: np.random.Generator) -> float:
    return 2.0 + 3.0 / math.sqrt(step) + float(rng.normal(0, 0.01))


def _judged_as_replaced(run, stretch: tuple[int, int, int], incident: tuple[str, int]):
    """The run's one replaced stretch is ``stretch`` (resumed at, first and last step replaced),
    ``incident`` (kind, step) is reported as replaced, and the run is recovered; its report."""
    (found,) = run.abandoned
    assert (found.resumed_at, found.first, found.last) == stretch
    report = analyze_run(run)
    assert incident in [(i.kind, i.step) for i in report.incidents if i.details.get("replaced")]
    assert report.verdict.value == "recovered"
    return report


# ----------------------------------------------------------------------------- the fall-backs


@pytest.mark.parametrize("steps, expected", [
    ([10, 20, 30, 40, 50, 30, 40, 50, 60], [5]),  # resumed from 20: logs 30 again
    ([10, 20, 30, 40, 20, 30, 50, 60, 50, 60, 70], [4, 8]),  # two resumes
    ([1, 2, 3, 1, 2, 3], []),  # back to the first step: started over, or a count inside the epoch
    (list(range(1, 30)) + [300_000] + list(range(31, 60)), []),  # one step printed wrong, too large
    (list(range(1, 30)) + [3] + list(range(31, 60)), []),  # ... and too small
    ([10, 20, 30, 40, 30], []),  # the history after has a single record: no telling
    ([10, 20, np.nan, 30, 40, 25, 30, 40], [5]),  # a record without a step is passed over
    ([10, 20, 30, 1, 40, 50, 60, 45, 50, 60], [7]),  # one step printed wrong does not hide a resume
])
def test_fall_backs_are_resumes_only(steps, expected):
    assert fall_backs(np.array(steps, dtype="float64")).tolist() == expected


def test_ranks_printing_out_of_step_are_no_resumes():
    # Two ranks' lines interleaved, one lagging: it falls back every other line.
    steps = np.array([s + lag for s in range(2, 200) for lag in (0, -1)], dtype="float64")
    assert (np.diff(steps) < 0).sum() > 100
    assert fall_backs(steps).tolist() == []


def test_survivors_and_the_stretches_replaced():
    steps = np.array([10, 20, 30, 40, 20, 30, 50, 60, 50, 60, 70], dtype="float64")
    starts = fall_backs(steps)
    assert steps[survivors(steps, starts)].tolist() == [10, 20, 30, 50, 60, 70]
    first, second = replaced_stretches(steps, starts)
    assert (first.resumed_at, first.first, first.last, first.rows.tolist()) == (20, 20, 40, [0, 1, 2, 3])
    # The history as it stood before the second fall-back: 10, then the resumed 20, 30, 50, 60.
    assert (second.resumed_at, second.first, second.last) == (50, 50, 60)
    assert steps[second.rows].tolist() == [10, 20, 30, 50, 60]


def test_more_resumes_than_are_judged_each_keep_their_own_stretch(tmp_path):
    """Past the 20 stretches judged a log (those that replaced the most), each kept stretch is
    still the one its own fall-back replaced: its history ends at the step it went back from."""
    steps, start = [], 10
    for k in range(25):
        steps += list(range(start, start + 30 + (k % 3) * 10))
        start = steps[-1] + 1 - (5 + k % 7)
    rng = np.random.default_rng(17)
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps({"step": s, "loss": round(_loss(s, rng), 4)}) + "\n" for s in steps),
                    encoding="utf-8")
    (run,) = discover_runs(path)
    assert len(run.abandoned) == 20
    assert all(stretch.steps.index.max() == stretch.last for stretch in run.abandoned)
    assert run.steps.index.is_monotonic_increasing and run.steps.index.is_unique


# ----------------------------------------------------------------------------- text logs


def test_a_text_log_resumed_after_a_spike_reports_the_spike_as_got_past(tmp_path):
    """The run blew up at step 700 and was taken back to its checkpoint at 600; the resumed process
    logged at other steps (every 7th) than the first (every step). Read as one series by step, the
    blow-up sat between the resumed run's values at 602-799 and the report said "healthy"."""
    rng = np.random.default_rng(0)
    lines = [f"step {s} | loss {_loss(s, rng) + (2 + (s - 700) / 20 if s >= 700 else 0):.4f} | lr 3e-4"
             for s in range(1, 800)]
    lines.append("Resuming from checkpoint ckpt_600.pt")
    lines += [f"step {s} | loss {_loss(s, rng):.4f} | lr 3e-4" for s in range(601, 1500, 7)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    index = run.steps.index
    assert index[index < 601].tolist() == list(range(1, 601))
    assert index[index >= 601].tolist() == list(range(601, 1500, 7))  # none of the first process's
    assert run.steps["loss"].loc[601:].max() < 2.2
    (stretch,) = run.abandoned
    assert (stretch.resumed_at, stretch.first, stretch.last) == (601, 601, 799)
    assert stretch.steps["loss"].idxmax() >= 780
    report = analyze_run(run)
    assert report.verdict.value == "recovered"
    restart = [i for i in report.incidents if i.kind == "restart"]
    assert [(i.step, i.end_step, i.severity.value) for i in restart] == [(601, 799, "info")]
    assert "goes back from step 799 to step 601" in restart[0].message
    replaced = [i for i in report.incidents if i.details.get("replaced")]
    assert replaced and all(i.resolved and 700 <= i.step <= 799 for i in replaced)
    assert {i.kind for i in replaced} <= {"loss_spike", "divergence"}
    assert "the run then went back to step 601" in replaced[0].message


def test_a_preempted_run_resumed_is_healthy_with_the_restart_said(tmp_path):
    rng = np.random.default_rng(1)
    lines = [f"step {s} | loss {_loss(s, rng):.4f}" for s in range(10, 1010, 10)]
    lines += [f"step {s} | loss {_loss(s, rng):.4f}" for s in range(810, 2010, 10)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == list(range(10, 2010, 10))
    report = analyze_run(run)
    assert report.verdict.value == "healthy"
    assert [(i.kind, i.step) for i in report.incidents if i.severity.rank > 0 or i.kind == "restart"] == \
        [("restart", 810)]


def test_opt_style_fairseq_json_lines_resumed_after_a_nan(tmp_path):
    """metaseq / fairseq ``--log-format json``: ``train_inner | {...}`` with ``num_updates``; OPT's
    logbook is full of such restarts. The first process's loss went NaN before it was taken back."""
    rng = np.random.default_rng(2)

    def line(u, loss):
        record = {"epoch": 1, "loss": loss, "ppl": "8.1", "wps": "192651", "ups": "0.2", "num_updates": str(u),
                  "lr": "6e-05", "gnorm": "0.557", "loss_scale": "4", "train_wall": "507", "wall": "534"}
        return "2022-01-05 19:05:47 | INFO | train_inner | " + json.dumps(record)

    lines = [line(u, "nan" if u >= 1400 else f"{_loss(u, rng):.3f}") for u in range(100, 1500, 100)]
    lines.append("2022-01-06 02:11:00 | INFO | metaseq.checkpoint_utils | Loaded checkpoint "
                 "/checkpoints/checkpoint_12_1200.pt (epoch 12 @ 1200 updates)")
    lines += [line(u, f"{_loss(u, rng):.3f}") for u in range(1300, 3000, 100)]
    (run,) = discover_runs(_write(tmp_path / "opt.log", lines))
    assert run.source == "fairseq" and run.steps["loss"].notna().all()
    report = analyze_run(run)
    assert report.verdict.value == "recovered"
    (nan,) = [i for i in report.incidents if i.kind == "nonfinite"]
    assert (nan.step, nan.resolved, nan.details["went_back_to"]) == (1400, True, 1300)


def test_a_megatron_log_resumed_from_a_checkpoint(tmp_path):
    rng = np.random.default_rng(3)

    def line(it, loss):
        return (f" iteration {it:>8d}/  159576 | consumed samples: {it * 96:>12d} | elapsed time per iteration (ms): "
                f"9.5 | learning rate: 5.998E-05 | global batch size:    96 | lm loss: {loss:.6E} | loss scale: "
                f"4096.0 | grad norm: 0.329 | num zeros: 0.0 | number of skipped iterations:   0 | number of nan "
                f"iterations:   0 |")

    lines = [line(it, _loss(it, rng) + (3.0 if it >= 650 else 0.0)) for it in range(1, 701)]
    lines.append("loading checkpoint from /ckpt at iteration 600")
    lines += [line(it, _loss(it, rng)) for it in range(601, 1001)]
    (run,) = discover_runs(_write(tmp_path / "train.out", lines))
    assert run.source == "megatron" and run.steps.index.tolist() == list(range(1, 1001))
    assert run.steps["loss"].max() < 5.1
    assert not any("more than once" in w for w in run.warnings)  # the restart is an incident now
    report = analyze_run(run)
    kinds = [(i.kind, i.step) for i in report.incidents]
    assert ("restart", 601) in kinds and ("loss_spike", 650) in kinds and report.verdict.value == "recovered"


@pytest.mark.parametrize("again, reported", [(7.5, 1), (6.0, 2)])
def test_a_spike_the_resumed_run_logged_again(tmp_path, again, reported):
    """Resumed from step 300, the run logs its steps again. With the same values (a deterministic
    replay) the spike at 400-420 is one incident, not two; one that came back with another height is
    reported in the history replaced and in the one kept (a spike that recurs on replayed data)."""
    rng = np.random.default_rng(14)
    base = {s: _loss(s, rng) for s in range(10, 1010, 10)}
    first = [f"step {s} | loss {(7.5 if 400 <= s <= 420 else base[s]):.4f}" for s in range(10, 510, 10)]
    second = [f"step {s} | loss {(again if 400 <= s <= 420 else base[s]):.4f}" for s in range(310, 1010, 10)]
    (run,) = discover_runs(_write(tmp_path / "train.log", first + second))
    spikes = [i for i in analyze_run(run).incidents if i.kind in ("loss_spike", "outlier_batch")]
    assert [i.step for i in spikes] == [400] * reported


def test_validation_lines_go_with_the_history_they_were_printed_in(tmp_path):
    """The loss went back from 600 to 510 (a resume that logs no validation after it). The
    validation at 600, printed before the resume, went with the history replaced; one whose step
    was printed wrong (3 for 300) is no resume of the validation series: the others stay."""
    rng = np.random.default_rng(15)
    lines = []
    for s in range(10, 610, 10):
        lines.append(f"step {s} | loss {_loss(s, rng):.4f}")
        if s % 100 == 0:
            lines.append(f"step {3 if s == 300 else s} | val_loss {_loss(s, rng) + 0.1:.4f}")
    lines += [f"step {s} | loss {_loss(s, rng):.4f}" for s in range(510, 1010, 10)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.abandoned and run.steps["val_loss"].dropna().index.tolist() == [3, 100, 200, 400, 500]


def test_one_step_printed_wrong_is_no_resume(tmp_path):
    rng = np.random.default_rng(4)
    lines = [f"step {s if s != 300 else 30} | loss {_loss(s, rng):.4f}" for s in range(10, 1010, 10)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.abandoned == []
    assert not any(i.kind == "restart" for i in analyze_run(run).incidents)


@pytest.mark.parametrize("quoted", [True, False])
def test_a_trainers_stdout_appended_across_a_resume(tmp_path, quoted):
    """The Trainer's dicts carry no step, only the epoch (transformers 5 quotes each value); a
    resumed launch appended to the same file prints the dicts after its checkpoint again, from an
    earlier epoch. Read in order, the first launch's blow-up sat among the second's values."""
    rng = np.random.default_rng(9)

    def line(step, loss):
        values = {"loss": f"{loss:.4g}", "grad_norm": "1.0", "learning_rate": "5e-05", "epoch": f"{step / 32:.4g}"}
        return "{" + ", ".join(f"'{k}': " + (f"'{v}'" if quoted else v) for k, v in values.items()) + "}"

    lines = [line(step, _loss(step, rng) + (30.0 if step > 40 else 0.0)) for step in range(5, 51, 5)]
    lines += ["[transformers] There were missing keys in the checkpoint model loaded: ['lm_head.weight']."]
    lines += [line(step, _loss(step, rng)) for step in range(45, 121, 5)]
    (run,) = discover_runs(_write(tmp_path / "nohup.out", lines))
    assert run.steps["loss"].index.tolist() == list(range(1, 25)) and run.steps["loss"].max() < 5
    _judged_as_replaced(run, (9, 9, 10), ("loss_spike", 9))


def test_a_global_step_beside_its_epoch_resumed_into_an_earlier_epoch(tmp_path):
    """``epoch E | step N | loss X`` with a step that goes on across epochs: the resume takes both
    back. An epoch that went back was read as proof that the step counts inside the epoch, and
    every step became epoch x length + step (30,000 steps read as 1..930,000)."""
    rng = np.random.default_rng(13)
    lines = [f"epoch {s // 100} | step {s} | loss: {_loss(s, rng) + (4.0 if s > 450 else 0.0):.4f}"
             for s in range(1, 481)]
    lines += [f"epoch {s // 100} | step {s} | loss: {_loss(s, rng):.4f}" for s in range(301, 1001)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == list(range(1, 1001))
    _judged_as_replaced(run, (301, 301, 480), ("loss_spike", 451))


def test_a_keras_fit_resumed_from_an_earlier_epoch(tmp_path):
    """``model.fit(..., initial_epoch=5)`` after a run that blew up in its 7th epoch and died in
    its 8th: the second fit prints "Epoch 6/12" again. Counted by the bars' wraps, its epochs were
    numbered on from the first fit's (6 read as 8): every later step moved, the blow-up unreported."""
    rng = np.random.default_rng(12)

    def epoch(k, bad=False, last=20):
        out = [f"Epoch {k}/12"]
        for i in range(1, last + 1):
            loss = 9.5 if bad else _loss((k - 1) * 20 + i, rng)
            out.append(f"{i}/20 [==============================] - ETA: 0s - loss: {loss:.4f}")
        return out

    lines = [line for k in range(1, 7) for line in epoch(k)] + epoch(7, bad=True) + epoch(8, bad=True, last=9)
    lines += ["Resuming from checkpoint epoch_5.keras"] + [line for k in range(6, 13) for line in epoch(k)]
    (run,) = discover_runs(_write(tmp_path / "fit.log", lines))
    assert run.steps.index.tolist() == list(range(1, 241))
    assert run.steps["loss"].max() < 5.1
    _judged_as_replaced(run, (101, 101, 149), ("loss_spike", 121))


def test_a_trainers_log_with_its_banner_resumed_numbers_the_stretch_as_its_steps(tmp_path):
    """With the Trainer's banner (its epochs and optimization steps), the dicts' order becomes
    steps (every 10th here); the replaced stretch is numbered alike."""
    rng = np.random.default_rng(16)

    def banner(resumed):
        lines = ["***** Running training *****", "  Num examples = 960", "  Num Epochs = 4",
                 "  Total optimization steps = 480"]
        return lines + (["  Continuing training from checkpoint, will skip to saved global_step"] if resumed else [])

    def line(step, bad=False):
        loss = _loss(step, rng) + (5.0 if bad else 0.0)
        return f"{{'loss': {loss:.4f}, 'grad_norm': 1.0, 'learning_rate': 5e-05, 'epoch': {step / 120:.2f}}}"

    lines = banner(False) + [line(s, bad=s > 240) for s in range(10, 290, 10)]
    lines += banner(True) + [line(s) for s in range(210, 490, 10)]
    (run,) = discover_runs(_write(tmp_path / "train.log", lines))
    assert run.steps.index.tolist() == list(range(10, 490, 10))
    _judged_as_replaced(run, (210, 210, 280), ("loss_spike", 250))


# ----------------------------------------------------------------------------- tables


@pytest.mark.parametrize("name", ["metrics.jsonl", "metrics.csv", "log.csv"])
def test_a_table_a_resumed_run_appended_to(tmp_path, name):
    """A script's own logger (json.dumps per line, csv.DictWriter) appending after a resume from
    step 800: read by step, the first run's blow-up at 900-1000 sat between the resumed run's
    values (logged at 805, 815, ...) and the spike read as 'recovered in 45 steps'. A
    ``metrics.csv`` is read as Lightning's CSVLogger writes it, the others as tables."""
    import csv

    rng = np.random.default_rng(10)
    rows = [{"step": s, "loss": round(_loss(s, rng) + (4.0 if s >= 900 else 0.0), 4), "lr": 3e-4}
            for s in range(10, 1010, 10)]
    rows += [{"step": s, "loss": round(_loss(s, rng), 4), "lr": 3e-4} for s in range(805, 2005, 10)]
    path = tmp_path / name
    with path.open("w", newline="", encoding="utf-8") as f:
        if name.endswith(".jsonl"):
            f.writelines(json.dumps(row) + "\n" for row in rows)
        else:
            writer = csv.DictWriter(f, fieldnames=["step", "loss", "lr"])
            writer.writeheader()
            writer.writerows(rows)
    (run,) = discover_runs(path)
    assert run.steps.index.tolist() == list(range(10, 801, 10)) + list(range(805, 2005, 10))
    assert run.steps["loss"].loc[805:].max() < 2.2 and run.steps["lr"].notna().all()
    report = _judged_as_replaced(run, (805, 810, 1000), ("loss_spike", 900))
    assert [i.kind for i in report.incidents if i.details.get("replaced")] == ["loss_spike"]


def test_a_lightning_csv_with_validation_rows_is_no_resume(tmp_path):
    """Lightning's CSVLogger: a validation row at the epoch's last step after its training rows,
    the loss empty there. Its steps never go back among the rows with a loss."""
    rng = np.random.default_rng(11)
    lines = ["epoch,step,train_loss,val_loss"]
    for epoch in range(5):
        lines += [f"{epoch},{s},{_loss(s + 1, rng):.4f}," for s in range(epoch * 100 + 9, epoch * 100 + 100, 10)]
        lines.append(f"{epoch},{epoch * 100 + 49},,{_loss(epoch * 100 + 50, rng):.4f}")  # an evaluation mid-epoch
    path = tmp_path / "metrics.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (run,) = discover_runs(path)
    assert run.abandoned == [] and run.steps["val_loss"].notna().sum() == 5


# ----------------------------------------------------------------------------- TensorBoard


def test_a_tensorboard_directory_written_again_by_a_resumed_run(tmp_path):
    """Megatron and DeepSpeed write a resumed run's events into the same directory: a second event
    file whose steps start before the first file's last. TensorBoard purges the orphaned steps;
    read by step, the first file's blow-up at 700-799 sat between the resumed values."""
    from torch.utils.tensorboard import SummaryWriter

    rng = np.random.default_rng(5)
    logdir = tmp_path / "tb"
    logdir.mkdir()
    with SummaryWriter(str(tmp_path / "first")) as writer:
        for s in range(1, 800):
            writer.add_scalar("train/loss", _loss(s, rng) + (4.0 if s >= 700 else 0.0), s)
            writer.add_scalar("train/lr", 3e-4, s)
    with SummaryWriter(str(tmp_path / "second")) as writer:
        for s in range(601, 1500, 7):
            writer.add_scalar("train/loss", _loss(s, rng), s)
            writer.add_scalar("train/lr", 3e-4, s)
    # Named as two launches name them: the later one's start time is later (the writers' own names
    # in one process differ by a counter, which sorts 10 before 9).
    for launch, (folder, started) in enumerate([("first", 1700000000), ("second", 1700003600)], start=1):
        (written,) = (tmp_path / folder).iterdir()
        written.rename(logdir / f"events.out.tfevents.{started}.node{launch}.{4000 + launch}.0")
    files = sorted(p.name for p in logdir.iterdir())
    assert len(files) == 2 and ".node1." in files[0]  # the first launch's file reads first
    (run,) = discover_runs(logdir)
    assert run.steps.index[run.steps.index >= 601].tolist() == list(range(601, 1500, 7))
    assert run.steps["loss"].loc[601:].max() < 2.2 and run.steps["lr"].notna().all()
    report = _judged_as_replaced(run, (601, 601, 799), ("loss_spike", 700))
    assert [i.kind for i in report.incidents if i.details.get("replaced")] == ["loss_spike"]


def _trainer_state(path, losses: dict[int, float]) -> None:
    """A checkpoint's trainer_state.json as the Hugging Face Trainer writes it (keys sorted)."""
    history = [{"epoch": step / 32, "grad_norm": 1.0, "learning_rate": 5e-05, "loss": loss, "step": step}
               for step, loss in losses.items()]
    last = max(losses)
    state = {"best_global_step": None, "best_metric": None, "best_model_checkpoint": None, "epoch": last / 32,
             "eval_steps": 500, "global_step": last, "is_hyper_param_search": False, "is_local_process_zero": True,
             "is_world_process_zero": True, "log_history": history, "logging_steps": 5, "max_steps": last,
             "num_input_tokens_seen": 0, "num_train_epochs": 3, "save_steps": 20, "total_flos": 1.0,
             "train_batch_size": 8, "trial_name": None, "trial_params": None}
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(state, indent=2, sort_keys=True), encoding="utf-8")


def _launch(logdir, losses: dict[int, float]) -> None:
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(logdir)) as writer:
        for step, loss in losses.items():
            writer.add_scalar("train/loss", loss, step)


def test_a_trainer_output_folder_of_a_resumed_training_is_one_run(tmp_path):
    """The last trainer_state.json holds the whole history; each launch wrote its events to a
    runs/ folder of its own. Launch 1 blew up at 45-50 and was killed; launch 2 resumed from
    checkpoint-40. Three runs before (the state, and each launch apart); now one, with launch 1's
    spike reported as the stretch launch 2 replaced."""
    rng = np.random.default_rng(7)
    good = {step: round(_loss(step, rng), 4) for step in range(5, 121, 5)}
    _trainer_state(tmp_path / "out" / "checkpoint-120" / "trainer_state.json", good)
    _launch(tmp_path / "out" / "runs" / "Dec05_10-00-00_host",
            {step: (good[step] if step <= 40 else 30.0 + step) for step in range(5, 51, 5)})
    _launch(tmp_path / "out" / "runs" / "Dec05_10-05-00_host", {step: good[step] for step in range(45, 121, 5)})
    (run,) = discover_runs(tmp_path / "out")
    assert run.source == "hf_trainer_state" and run.steps["loss"].to_dict() == pytest.approx(good)
    assert sum("one launch of this training" in w for w in run.warnings) == 2
    report = _judged_as_replaced(run, (45, 45, 50), ("loss_spike", 45))
    assert [i.kind for i in report.incidents if i.details.get("replaced")] == ["loss_spike"]


def test_pieces_of_one_format_or_of_another_training_stay_runs_of_their_own(tmp_path):
    rng = np.random.default_rng(8)
    good = {step: round(_loss(step, rng), 4) for step in range(5, 121, 5)}
    # Two launches' event folders alone: each a run (no whole history to fold them into).
    _launch(tmp_path / "a" / "runs" / "one", {step: good[step] for step in range(5, 51, 5)})
    _launch(tmp_path / "a" / "runs" / "two", {step: good[step] for step in range(45, 121, 5)})
    assert len(discover_runs(tmp_path / "a")) == 2
    # Events whose first values are not the state's: another training.
    _trainer_state(tmp_path / "b" / "checkpoint-120" / "trainer_state.json", good)
    _launch(tmp_path / "b" / "runs" / "other", {step: good[step] + 0.5 for step in range(5, 51, 5)})
    assert len(discover_runs(tmp_path / "b")) == 2
    # The first steps of the state's history and no launch after them: a log cut short, or another
    # training that shares them (a sweep whose runs differ from a later step on), not a launch.
    for name, tail in (("c", 0.0), ("d", 0.3)):
        _trainer_state(tmp_path / name / "checkpoint-120" / "trainer_state.json", good)
        _launch(tmp_path / name / "runs" / "first", {step: good[step] + (tail if step > 40 else 0.0)
                                                     for step in range(5, 51, 5)})
        assert len(discover_runs(tmp_path / name)) == 2


# ----------------------------------------------------------------------------- the plot


def test_the_plot_draws_the_replaced_stretch_dotted(tmp_path):
    from sentinel.analyze import analyze
    from sentinel.analyze.render.plot import plot_figure

    rng = np.random.default_rng(6)
    lines = [f"step {s} | loss {_loss(s, rng) + (3.0 if s >= 90 else 0.0):.4f}" for s in range(1, 100)]
    lines += [f"step {s} | loss {_loss(s, rng):.4f}" for s in range(81, 200)]
    report = analyze(_write(tmp_path / "train.log", lines))
    fig = plot_figure(report)
    dotted = [line for line in fig.axes[0].get_lines() if line.get_linestyle() == ":"]
    assert len(dotted) == 1
    x, y = dotted[0].get_data()
    assert x[0] == 80 and x[-1] == 99 and max(y) > 5.0  # from the step before the stretch to its end
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("history the run went back on" in t for t in labels)
    assert any("the run goes back to here" in t for t in labels)


def test_overfitting_names_the_trainers_own_best_checkpoint(tmp_path):
    """A Whisper fine-tune whose eval_loss is lowest at step 1000 while its WER improves to step 3000, the Trainer's
    best_model_checkpoint (metric_for_best_model='wer'): 'a checkpoint from near step 1000 evaluates best' contradicted
    the file. The advice says what it measures, and names the Trainer's own pick."""
    rng = np.random.default_rng(3)
    history = [{"step": s, "loss": 1.5 * math.exp(-s / 600) + 0.05 + rng.normal(0, 0.005), "learning_rate": 1e-5,
                "epoch": s / 1000} for s in range(25, 4001, 25)]
    evals = ((0.30, 48.0), (0.28, 45.2), (0.29, 41.0), (0.31, 38.3), (0.33, 36.1), (0.35, 33.0), (0.37, 33.9),
             (0.39, 34.5))
    for step, (loss, wer) in zip(range(500, 4001, 500), evals):
        history.append({"step": step, "eval_loss": loss, "eval_wer": wer, "epoch": step / 1000})
    history.sort(key=lambda row: row["step"])
    path = tmp_path / "whisper-small" / "checkpoint-4000" / "trainer_state.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"best_metric": 33.0, "best_model_checkpoint": "./whisper-small/checkpoint-3000",
                                "global_step": 4000, "log_history": history, "logging_steps": 25}))
    (run,) = discover_runs(path)
    (over,) = [i for i in analyze_run(run).incidents if i.kind == "overfitting"]
    assert "has the lowest eval_loss" in over.message and "recorded checkpoint-3000 as its best model" in over.message
