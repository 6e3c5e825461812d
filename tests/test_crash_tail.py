"""A text log that ends in a Python traceback: the run stopped there, and the report says so."""

from __future__ import annotations

import traceback

import numpy as np
import pytest

from sentinel.analyze.analyzer import analyze_run
from sentinel.analyze.discover import discover_runs


def _steps(n: int = 200) -> list[str]:
    return [f"step {s} | loss {2.5 * np.exp(-s / 100) + 0.8:.4f}" for s in range(1, n + 1)]


def _traceback_of(error: BaseException) -> str:
    try:
        raise error
    except BaseException:  # noqa: BLE001 - the point is its printed traceback
        return traceback.format_exc()


def test_a_log_that_ends_in_an_error_did_not_finish(tmp_path):
    path = tmp_path / "train.log"
    oom = RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB")
    path.write_text("\n".join(_steps()) + "\n" + _traceback_of(oom), encoding="utf-8")
    (run,) = discover_runs(path)
    report = analyze_run(run)
    (crash,) = report.incidents
    assert (crash.kind, crash.step, crash.severity.value) == ("crash", 200, "warning")
    assert "stopped after step 200 with RuntimeError: CUDA out of memory" in crash.message
    assert report.verdict.value == "unhealthy"


def test_stopped_by_hand_is_information(tmp_path):
    path = tmp_path / "train.log"
    path.write_text("\n".join(_steps()) + "\n^C" + _traceback_of(KeyboardInterrupt()), encoding="utf-8")
    (run,) = discover_runs(path)
    report = analyze_run(run)
    (crash,) = report.incidents
    assert crash.severity.value == "info" and "stopped by hand" in crash.message
    assert report.verdict.value == "healthy"


def test_a_traceback_the_run_went_on_from_and_a_nonfinite_error_are_no_crash(tmp_path):
    lines = _steps()
    lines[100:100] = _traceback_of(ValueError("a bad sample, skipped")).splitlines()
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (run,) = discover_runs(path)
    assert analyze_run(run).incidents == []
    nan = RuntimeError("Function 'SqrtBackward0' returned nan values in its 0th output.")
    path.write_text("\n".join(_steps()) + "\n" + _traceback_of(nan), encoding="utf-8")
    (run,) = discover_runs(path)
    assert [i.kind for i in analyze_run(run).incidents] == ["nonfinite"]
    detectron2 = FloatingPointError("Loss became infinite or NaN at iteration=201!")
    path.write_text("\n".join(_steps()) + "\n" + _traceback_of(detectron2), encoding="utf-8")
    (run,) = discover_runs(path)
    assert "crash" not in run.meta


def test_a_megatron_log_ending_in_a_ranks_traceback(tmp_path):
    """nanotron's pipeline-parallel run crashed in its logging after iteration 1, every line of
    its traceback tagged "[rank0]: " by torchrun: "healthy", the Megatron-style reader never looked
    for a traceback, and the tagged error line was no error line."""
    lines = [f"07/03 07:57:21 [INFO|PP=1]: iteration: {i} / 2000 | consumed_tokens: 65.5K | grad_norm: 6.4 | "
             f"lm_loss: {12.1 - i / 10:.3g} | lr: 0.00015 |" for i in range(1, 6)]
    error = AttributeError("'NoneType' object has no attribute 'item'")
    lines += ["[rank0]: " + line for line in _traceback_of(error).splitlines()]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (run,) = discover_runs(path)
    assert run.source == "megatron"
    (crash,) = analyze_run(run).incidents
    assert (crash.kind, crash.step) == ("crash", 5)
    assert "AttributeError: 'NoneType' object has no attribute 'item'" in crash.message


def _chained_traceback() -> str:
    try:
        try:
            raise KeyError("batch")
        except KeyError as first:
            raise RuntimeError("NCCL error: unhandled system error") from first
    except RuntimeError:
        return traceback.format_exc()


def test_the_first_traceback_after_the_last_step_and_its_chain_is_the_stop(tmp_path):
    """A rank's error, then torchrun's own summary raising ChildFailedError; an error chained to another ("The above
    exception was the direct cause ..."): the stop is the first traceback's chain, its last error."""
    path = tmp_path / "train.log"
    summary = _traceback_of(RuntimeError("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: train.py FAILED"))
    path.write_text("\n".join(_steps()) + "\n" + _chained_traceback() + summary, encoding="utf-8")
    (crash,) = analyze_run(discover_runs(path)[0]).incidents
    assert "with RuntimeError: NCCL error: unhandled system error" in crash.message


def test_a_notebooks_interrupted_cell_is_the_stop_not_a_later_cells_error(tmp_path):
    """A notebook's fit stopped by hand (IPython's 'KeyboardInterrupt   Traceback (most recent call last)' over frames of
    its own form), then a later cell's AttributeError: the stop was the interrupt, information; the kernel ran on."""
    import nbformat

    fit = "".join(f"Epoch {e}/10\n100/100 [==============================] - 2s - loss: {1 / e:.4f}\n" for e in range(1, 5))
    interrupt = nbformat.v4.new_output("error", ename="KeyboardInterrupt", evalue="", traceback=[
        "\x1b[0;31m-----------------------------------------------------------------------\x1b[0m",
        "\x1b[0;31mKeyboardInterrupt\x1b[0m                         Traceback (most recent call last)",
        "\x1b[0;32m<ipython-input-36-1db15b41f35c>\x1b[0m in \x1b[0;36m<module>\x1b[0;34m\x1b[0m",
        "\x1b[0;31mKeyboardInterrupt\x1b[0m: "])
    later = nbformat.v4.new_output("error", ename="AttributeError", evalue="'Node' object has no attribute 'x'", traceback=[
        "\x1b[0;31mAttributeError\x1b[0m                            Traceback (most recent call last)",
        "\x1b[0;31mAttributeError\x1b[0m: 'Node' object has no attribute 'x'"])
    cells = [nbformat.v4.new_code_cell("model.fit(...)", outputs=[nbformat.v4.new_output("stream", text=fit), interrupt]),
             nbformat.v4.new_code_cell("plot(model)", outputs=[later])]
    path = tmp_path / "train.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    report = analyze_run(discover_runs(path)[0])
    (crash,) = [i for i in report.incidents if i.kind == "crash"]
    assert crash.severity.value == "info" and "stopped by hand (KeyboardInterrupt)" in crash.message
    # A fit that finished, then a cell that printed nothing but its error (a helper not defined): no stop of the fit.
    done = [nbformat.v4.new_code_cell("model.fit(...)", outputs=[nbformat.v4.new_output("stream", text=fit)]),
            nbformat.v4.new_code_cell("plot_training_history(h)", outputs=[nbformat.v4.new_output(
                "error", ename="NameError", evalue="name 'plot_training_history' is not defined", traceback=[
                    "\x1b[0;31mNameError\x1b[0m                                 Traceback (most recent call last)",
                    "\x1b[0;31mNameError\x1b[0m: name 'plot_training_history' is not defined"])])]
    nbformat.write(nbformat.v4.new_notebook(cells=done), path)
    assert not [i for i in analyze_run(discover_runs(path)[0]).incidents if i.kind == "crash"]


@pytest.mark.parametrize("tag", ["[1,0]<stderr>:", "[0]<stderr>:", "(RayTrainWorker pid=3047, ip=10.0.0.1) "])
def test_a_traceback_tagged_by_mpirun_or_ray_ends_the_run(tmp_path, tag):
    """Horovod's PyTorch MNIST under mpirun: its DataLoader died of a bus error after epoch 1's last line, the
    traceback's lines tagged "[1,0]<stderr>:" (horovod#2255); a Ray Train worker's, "(RayTrainWorker pid=N) ".
    The tagged error line was no error line: 'healthy'."""
    lines = [f"{tag}Train Epoch: 1 [{b}/60000 ({b // 600}%)]\tLoss: {2.3 - b / 30000:.6f}"
             for b in range(0, 60000, 640)]
    error = RuntimeError("DataLoader worker (pid 1234) is killed by signal: Bus error.")
    lines += [tag + line for line in _traceback_of(error).splitlines()]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (run,) = discover_runs(path)
    (crash,) = [i for i in analyze_run(run).incidents if i.kind == "crash"]
    assert "RuntimeError: DataLoader worker (pid 1234) is killed by signal: Bus error." in crash.message


@pytest.mark.parametrize("frames", ["plain", "rich", "loguru"])
def test_a_traceback_cut_off_before_its_error_line_is_the_stop(tmp_path, frames):
    """A paste's window cuts a traceback before its exception line (the frames of a rich or loguru traceback are many
    lines each): a run that died of an OOM after its last step line was 'healthy', the traceback unsaid. It stopped in
    an exception; which one, the text does not say."""
    oom = _traceback_of(RuntimeError("CUDA out of memory.")).splitlines()[:-1]  # its last line cut
    if frames == "rich":
        oom = ["╭────────── Traceback (most recent call last) ──────────╮",
               "│ /work/train.py:261 in <module>                         │", "│                      │"]
    elif frames == "loguru":
        oom = oom + ["    launch(", "    └ <function launch at 0x000001FE9ADB3940>"]
    path = tmp_path / "train.log"
    path.write_text("\n".join(_steps() + oom) + "\n", encoding="utf-8")
    (run,) = discover_runs(path)
    report = analyze_run(run)
    (crash,) = report.incidents
    assert (crash.kind, crash.step, crash.severity.value) == ("crash", 200, "warning")
    assert "stopped after step 200 in an exception" in crash.message
    assert "cut off before its error line" in crash.message
    assert report.verdict.value == "unhealthy"


@pytest.mark.parametrize("last, word", [
    ("Killed", "Killed"),
    ("./train.sh: line 7: 48213 Killed                  python train.py --bs 64", "Killed"),
    ("Segmentation fault (core dumped)", "Segmentation fault (core dumped)"),
    ("run.sh: line 3: 911 Bus error (core dumped) python main.py", "Bus error (core dumped)"),
    ("Killed: 9", "Killed"),  # macOS's bash (ptens on Amazon: 'healthy' otherwise, no word of its end)
    ("Segmentation fault: 11", "Segmentation fault"),
    ("zsh: killed     python train.py --epochs 200", "Killed"),
])
def test_a_log_that_ends_in_the_shells_signal_line_did_not_finish(tmp_path, last, word):
    path = tmp_path / "train.log"
    path.write_text("\n".join(_steps()) + f"\n{last}\n\n", encoding="utf-8")
    (run,) = discover_runs(path)
    report = analyze_run(run)
    (crash,) = report.incidents
    assert (crash.kind, crash.step, crash.severity.value) == ("crash", 200, "warning")
    assert crash.message.startswith(f"the training process died after step 200: the log ends in '{word}' (line 201")
    assert report.verdict.value == "unhealthy"


@pytest.mark.parametrize("lines", [["Killed"], ["Training killed by the user"], ["Killed", "step 201 | loss 0.9"]])
def test_a_signal_word_that_is_not_the_last_line_or_not_alone_is_no_crash(tmp_path, lines):
    path = tmp_path / "train.log"
    path.write_text("\n".join(_steps()[:100] + lines[:-1] + _steps()[100:] + lines[-1:]) + "\n", encoding="utf-8")
    incidents = analyze_run(discover_runs(path)[0]).incidents
    assert [i.kind for i in incidents] == (["crash"] if lines == ["Killed"] else [])


@pytest.mark.parametrize("stop, said", [
    ("scripts/run_pos.sh: line 37:  7221 Killed                  python -m stanza.models.tagger --mode train",
     "its script printed 'Killed' (line 201"),
    ("Validating:  93%|#########3| 13/14 [00:17<00:01,  1.31s/it]slurmstepd: error: *** JOB 6033515 ON g3040 "
     "CANCELLED AT 2022-08-31T16:21:22 ***", "Slurm cancelled the job (line 201"),
    ("slurmstepd: error: *** STEP 123.0 ON n7 CANCELLED AT 2024-01-01T00:00:00 DUE TO TIME LIMIT ***",
     "Slurm cancelled the job (DUE TO TIME LIMIT) (line 201"),
])
def test_a_stop_line_its_script_went_on_after_is_the_stop(tmp_path, stop, said):
    """Stanza's run_pos.sh went on to its predict mode after its tagger was killed at step 60 of 2000 ("healthy, no
    incidents"); Slurm cancelled a Lightning run inside its epoch, its line printed where the bar stood."""
    path = tmp_path / "train.log"
    path.write_text("\n".join([*_steps(), stop, "Running tagger in predict mode", "Cannot load model"]) + "\n")
    (crash,) = analyze_run(discover_runs(path)[0]).incidents
    assert (crash.kind, crash.step, crash.severity.value) == ("crash", 200, "warning") and said in crash.message
    # a launch killed, then one that trained on: no stop of the run's
    path.write_text("\n".join([*_steps()[:100], stop, *_steps()[100:]]) + "\n")
    assert [i.kind for i in analyze_run(discover_runs(path)[0]).incidents] == []


def _sb3_block(step: int, loss: float) -> str:
    rows = [("rollout/", ""), ("ep_rew_mean", f"{step / 1000:.3g}"), ("time/", ""),
            ("total_timesteps", str(step)), ("train/", ""), ("loss", f"{loss:.3g}"), ("n_updates", str(step // 4))]
    return "\n".join(["-" * 34] + [f"| {k:<20} | {v:<8} |" for k, v in rows] + ["-" * 34])


@pytest.mark.parametrize("end", ["Killed", _traceback_of(MemoryError())])
def test_a_stable_baselines_console_that_ends_in_a_kill_or_a_traceback(tmp_path, end):
    path = tmp_path / "dqn.log"
    blocks = [_sb3_block(step, 0.5 / (1 + step / 4000)) for step in range(1000, 21000, 1000)]
    path.write_text("\n".join(blocks) + "\n" + end, encoding="utf-8")
    (run,) = discover_runs(path)
    assert run.source == "sb3_console"
    (crash,) = analyze_run(run).incidents
    assert crash.kind == "crash" and crash.step == 20000
    assert ("'Killed'" if end == "Killed" else "MemoryError") in crash.message


_WATCHDOG_LINES = [
    "[rank5]:[E602 11:17:52.185053341 ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=1516, OpType=ALLREDUCE, NumelIn=25427968, NumelOut=25427968, Timeout(ms)=600000) ran "
    "for 600017 milliseconds before timing out.",
    "[rank5]:[E602 11:18:52.531176265 ProcessGroupNCCL.cpp:684] [Rank 5] Some NCCL operations have failed or timed "
    "out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete "
    "data.",
    "[rank5]:[E602 11:18:52.531247012 ProcessGroupNCCL.cpp:698] [Rank 5] To avoid data inconsistency, we are taking "
    "the entire process down.",
]


def test_a_log_that_ends_in_the_nccl_watchdog_did_not_finish(tmp_path):
    path = tmp_path / "train.log"
    path.write_text("\n".join(_steps() + _WATCHDOG_LINES) + "\n", encoding="utf-8")
    report = analyze_run(discover_runs(path)[0])
    (crash,) = report.incidents
    assert (crash.kind, crash.step, crash.severity.value) == ("crash", 200, "warning")
    assert "NCCL's watchdog took the process down (line 201: Watchdog caught collective operation timeout" \
        in crash.message
    # the same lines with the training going on after them: a rank's warning, not the end
    path.write_text("\n".join(_steps()[:100] + _WATCHDOG_LINES + _steps()[100:]) + "\n", encoding="utf-8")
    assert analyze_run(discover_runs(path)[0]).incidents == []


def test_a_one_line_paste_before_the_watchdog_says_the_run_stopped(tmp_path):
    from click.testing import CliRunner

    from sentinel.cli.main import main

    path = tmp_path / "train.log"
    path.write_text("{'loss': 1.2317, 'grad_norm': 0.49, 'learning_rate': 1e-05, 'epoch': 0.21}\n"
                    + "\n".join(_WATCHDOG_LINES) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["analyze", str(path)])
    assert result.exit_code == 1
    assert "after which the run stopped ('Watchdog caught collective operation" in result.output
