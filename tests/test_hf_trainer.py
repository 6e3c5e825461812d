"""SentinelTrainerCallback in real Hugging Face ``Trainer.train()`` runs (CPU, tiny GPT-2 and Llama
built from a config, faults injected at known steps)."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from click.testing import CliRunner  # noqa: E402
from transformers import Trainer, TrainerCallback, TrainingArguments  # noqa: E402

from sentinel import analyze, load_run  # noqa: E402
from sentinel.callbacks import SentinelTrainerCallback  # noqa: E402
from sentinel.cli.main import main as cli  # noqa: E402

VOCAB, SEQ, BATCH = 64, 16, 8
SCRIPT = Path(__file__).parent / "scripts" / "hf_ddp_run.py"


class CountingData(torch.utils.data.Dataset):
    """Sequences that count up modulo the vocabulary (learnable in a few dozen steps). Items in
    ``corrupt`` are random tokens instead; items in ``marked`` start with the token ``VOCAB - 1``
    (the faulty module below turns those into NaN)."""

    def __init__(self, n: int, corrupt=(), marked=(), seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = (torch.randint(0, VOCAB - 1, (n, 1), generator=g) + torch.arange(SEQ)) % (VOCAB - 1)
        for i in corrupt:
            self.x[i] = torch.randint(0, VOCAB - 1, (SEQ,), generator=g)
        for i in marked:
            self.x[i, 0] = VOCAB - 1

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.x[i], "labels": self.x[i]}


class InOrderTrainer(Trainer):
    """Batches in dataset order, so a fault lands at a known step (tests only)."""

    def _get_train_sampler(self, *args, **kwargs):
        return torch.utils.data.SequentialSampler(self.train_dataset)


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=32, n_embd=32, n_layer=2, n_head=2,
                                      bos_token_id=0, eos_token_id=0))


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                                        max_position_embeddings=32, bos_token_id=0, eos_token_id=0,
                                        pad_token_id=0))


def steps_at(steps, accumulation: int = 1) -> set[int]:
    """Dataset indices of the first micro-batch of these optimizer steps (in-order batches)."""
    return {i for s in steps for i in range(s * accumulation * BATCH, (s * accumulation + 1) * BATCH)}


def train(tmp_path: Path, model, *, steps: int = 100, accumulation: int = 1, data=None, callbacks=(),
          resume=None, args=None, **options):
    cb = SentinelTrainerCallback(log_dir=str(tmp_path / "run"), tensorboard=False, **options)
    kwargs = dict(output_dir=str(tmp_path / "out"), use_cpu=True, max_steps=steps, per_device_train_batch_size=BATCH,
                  gradient_accumulation_steps=accumulation, learning_rate=3e-3, lr_scheduler_type="constant",
                  logging_steps=10, report_to=[], save_strategy="no", disable_tqdm=True, seed=0,
                  dataloader_num_workers=0)
    kwargs.update(args or {})
    data = data if data is not None else CountingData(steps * accumulation * BATCH)
    trainer = InOrderTrainer(model=model, args=TrainingArguments(**kwargs), train_dataset=data,
                             callbacks=[*callbacks, cb])
    trainer.train(resume_from_checkpoint=resume)
    return trainer, cb


def events(tmp_path: Path, kind: str | None = None) -> list[dict]:
    lines = (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if kind is None or e["kind"] == kind]


def all_finite(model) -> bool:
    return all(torch.isfinite(p).all() for p in model.parameters())


class LogRecorder(TrainerCallback):
    """Stands for a ``report_to`` backend: keeps every logs dict its on_log receives."""

    def __init__(self) -> None:
        self.logs: list[dict] = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.logs.append(dict(logs or {}))


@pytest.mark.parametrize("precision,accumulation", [("32", 1), ("bf16", 2)])
def test_gpt2_poisoned_batch_is_withheld_and_the_run_goes_on(tmp_path, precision, accumulation):
    data = CountingData(100 * accumulation * BATCH, corrupt=steps_at([60], accumulation))
    recorder = LogRecorder()
    trainer, cb = train(tmp_path, gpt2(), accumulation=accumulation, data=data, callbacks=[recorder],
                        args={"bf16": precision == "bf16", "max_grad_norm": 0.05})
    skipped = events(tmp_path, "skip_step")
    assert [e["step"] for e in skipped] == [60] and skipped[0]["reason"] == "loss_spike"
    assert not events(tmp_path, "rollback") and cb.gave_up is None
    assert trainer.state.global_step == 100 and all_finite(trainer.model)
    run = load_run(tmp_path / "run")
    assert run.meta["trainer"]["precision"] == precision
    assert run.meta["trainer"]["gradient_accumulation_steps"] == accumulation
    assert len(run.steps) == 100 and run.steps["loss"].iloc[-1] < 0.5 * run.steps["loss"].iloc[0]
    # The poisoned batch is in the skip list, named by its content.
    assert [e["batch_idx"] for e in run.skiplist] == [60 * accumulation] and "fingerprint" in run.skiplist[0]
    # Pre-clip: max_grad_norm=0.05 clips every step, and sentinel's norm is the Trainer's own
    # pre-clip norm, not the clipped 0.05.
    logged = [r for r in recorder.logs if "grad_norm/total" in r]
    assert len(logged) == 10
    for record in logged:
        assert float(record["grad_norm/total"]) == pytest.approx(float(record["grad_norm"]), rel=1e-4)
        assert float(record["grad_norm/total"]) > 0.1
    assert {"lr", "samples_per_sec"} <= set(logged[0])
    assert "grad_norm/total" in trainer.state.log_history[0]
    # `sentinel analyze` reads the run directory and explains the step.
    result = CliRunner().invoke(cli, ["analyze", str(tmp_path / "run"), "--format", "json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)["runs"][0]
    assert report["steps"] == 100 and report["verdict"] == "healthy"
    assert ("skipped_update", 60) in [(i["kind"], i["step"]) for i in report["incidents"]]


class WeightedLossTrainer(InOrderTrainer):
    """A subclass whose loss is a share of the model's (one term of a distillation mix)."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs)
        loss = 0.25 * outputs.loss
        return (loss, outputs) if return_outputs else loss


@pytest.mark.parametrize("kind", ["compute_loss", "label_smoothing"])
def test_a_stretch_of_bad_data_under_the_trainers_own_loss_is_not_rolled_back(tmp_path, kind):
    """The weights check re-ran a batch through the model's own loss and compared it with the loss
    the Trainer recorded (a subclass's 0.25 x it, or a label-smoothed one): 'weights damaged', and
    three withheld steps of bad data were rolled back. It replays the Trainer's compute_loss."""
    data = CountingData(60 * BATCH, corrupt=steps_at([30, 31, 32]))
    cb = SentinelTrainerCallback(log_dir=str(tmp_path / "run"), tensorboard=False)
    args = TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, max_steps=60,
                             per_device_train_batch_size=BATCH, learning_rate=3e-3, lr_scheduler_type="constant",
                             report_to=[], save_strategy="no", disable_tqdm=True, seed=0,
                             label_smoothing_factor=0.1 if kind == "label_smoothing" else 0.0)
    cls = WeightedLossTrainer if kind == "compute_loss" else InOrderTrainer
    cls(model=gpt2(), args=args, train_dataset=data, callbacks=[cb]).train()
    assert [e["step"] for e in events(tmp_path, "skip_step")] == [30, 31, 32]
    assert not events(tmp_path, "rollback") and cb.sentinel.rollbacks == 0


def test_llama_nan_in_one_module_is_named_and_its_update_withheld(tmp_path):
    model = llama()
    seen = {}
    model.register_forward_pre_hook(lambda m, a, k: seen.update(ids=k["input_ids"]), with_kwargs=True)

    def faulty_mlp(module, inputs, output):  # a module that breaks on one kind of input
        return output * float("nan") if (seen["ids"][:, 0] == VOCAB - 1).any() else output

    model.model.layers[1].mlp.register_forward_hook(faulty_mlp)
    data = CountingData(60 * BATCH, marked=[40 * BATCH + 3])
    trainer, cb = train(tmp_path, model, steps=60, data=data)
    sources = events(tmp_path, "nonfinite")
    assert [(e["step"], e["module"], e["phase"]) for e in sources] == [(40, "model.layers.1.mlp", "forward")]
    assert [e["step"] for e in events(tmp_path, "skip_step")] == [40]
    assert not events(tmp_path, "rollback") and all_finite(trainer.model)
    assert trainer.state.global_step == 60


class CorruptWeight(TrainerCallback):
    """After step ``at`` an element of one weight becomes inf behind the guard's back: damage
    that withholding updates cannot undo."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step == self.at:
            with torch.no_grad():
                model.transformer.h[1].mlp.c_fc.weight[0, 0] = float("inf")


def test_persistent_fault_is_rolled_back_in_place(tmp_path):
    trainer, cb = train(tmp_path, gpt2(), steps=80, callbacks=[CorruptWeight(at=50)], snapshot_every=10)
    first = events(tmp_path, "nonfinite")[0]
    assert first["step"] == 50 and first["module"] == "transformer.h.1.mlp.c_fc"
    assert first["tensor_role"].startswith("weight")
    rollbacks = events(tmp_path, "rollback")
    assert len(rollbacks) == 1 and rollbacks[0]["restored_step"] == 40 and rollbacks[0]["reason"] == "nonfinite"
    # One update withheld; on the next non-finite step the re-run of the last good batch is
    # non-finite too (damaged weights), so the guard rolls back at once.
    assert [e["step"] for e in events(tmp_path, "skip_step")] == [50] and rollbacks[0]["step"] == 51
    assert rollbacks[0]["weights_check"]["weights_ok"] is False
    # The Trainer's own model, optimizer and scheduler were restored; training went on from there.
    assert all_finite(trainer.model) and cb.gave_up is None and trainer.state.global_step == 80
    run = load_run(tmp_path / "run")
    assert math.isfinite(run.steps["loss"].iloc[-1]) and run.steps["loss"].iloc[-1] < run.steps["loss"].iloc[0]
    incidents = [(i.kind, i.step) for i in analyze(tmp_path / "run").runs[0].incidents]
    assert ("rollback", 50) in incidents and ("nonfinite", 50) in incidents, incidents  # named by the streak start


def test_damage_that_comes_back_in_the_cool_down_lowers_the_lr_under_accelerate(tmp_path):
    """The second rollback, inside the first one's cool-down, lowers the learning rate with hooks
    on the optimizer: on torch's optimizer inside accelerate's AcceleratedOptimizer (a subclass
    of Optimizer without hook registries, where registering them raised AttributeError)."""
    trainer, cb = train(tmp_path, gpt2(), steps=90, callbacks=[CorruptWeight(at=50), CorruptWeight(at=62)],
                        snapshot_every=10)
    rollbacks = events(tmp_path, "rollback")
    assert [r["lr_scale"] for r in rollbacks] == [1.0, 0.1]
    assert cb.gave_up is None and trainer.state.global_step == 90 and all_finite(trainer.model)
    assert cb.sentinel.optimizers[0] is trainer.optimizer.optimizer  # torch's own, unwrapped


def test_a_fault_that_keeps_coming_back_stops_the_run_cleanly(tmp_path, caplog):
    model = gpt2()

    def broken_after_step_30(module, inputs, output):
        return output * float("nan") if broken["on"] else output

    broken = {"on": False}
    model.transformer.h[0].attn.c_proj.register_forward_hook(broken_after_step_30)

    class Break(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            broken["on"] = broken["on"] or state.global_step == 30

    with caplog.at_level(logging.ERROR, logger="sentinel.callbacks.hf_trainer"):
        trainer, cb = train(tmp_path, model, steps=80, callbacks=[Break()], snapshot_every=10, max_rollbacks=1)
    assert cb.gave_up is not None and "gave up" in cb.gave_up
    assert any("sentinel gave up" in r.getMessage() for r in caplog.records)
    assert trainer.state.global_step < 80  # stopped by control.should_training_stop, no exception
    gave_up = events(tmp_path, "gave_up")
    assert len(gave_up) == 1 and gave_up[0]["restored_step"] is not None
    broken["on"] = False
    assert all_finite(trainer.model)  # the last good weights are in place


def test_resume_from_checkpoint_continues_sentinel(tmp_path, caplog):
    data = CountingData(60 * BATCH, corrupt=steps_at([25]))
    save = {"save_strategy": "steps", "save_steps": 10}
    train(tmp_path, gpt2(), steps=30, data=data, args=save)
    saved = json.loads((tmp_path / "out" / "checkpoint-30" / "sentinel_state.json").read_text())
    assert saved["step"] == 30 and [e["step"] for e in saved["skiplist"]] == [25]

    # Resumed from before the bad batch: the skip list withholds its update when it comes again.
    train(tmp_path, gpt2(), steps=30, data=data, resume=str(tmp_path / "out" / "checkpoint-20"), args=save)
    second = events(tmp_path)[[e["kind"] for e in events(tmp_path)].index("start", 1):]
    assert second[0]["step"] == 20 and second[0]["resumed"] is True
    assert [(e["kind"], e["step"], e.get("reason")) for e in second[1:]] == [("skip", 25, "skiplist")]

    # The state comes from the checkpoint, not from the run directory.
    (tmp_path / "run" / "skiplist.json").unlink()
    with caplog.at_level(logging.WARNING, logger="sentinel.callbacks.hf_trainer"):
        trainer, cb = train(tmp_path, gpt2(), steps=40, data=data, resume=str(tmp_path / "out" / "checkpoint-30"),
                            args=save)
    assert any("resumed at step 30" in r.getMessage() and "1 skip-list entry" in r.getMessage()
               for r in caplog.records)
    assert cb.sentinel.state_dict()["step"] == 40 and len(cb.sentinel.skiplist) == 1
    assert [(e["step"], e["resumed"]) for e in events(tmp_path, "start")] == [(0, False), (20, True), (30, True)]
    assert list(load_run(tmp_path / "run").steps.index) == list(range(40))


def test_bad_options_are_refused_at_construction(tmp_path):
    with pytest.raises(TypeError, match="unknown sentinel option 'snapshot_evry'"):
        SentinelTrainerCallback(log_dir=str(tmp_path / "run"), snapshot_evry=10)
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="is a file, not a directory"):
        SentinelTrainerCallback(log_dir=str(tmp_path / "file"))


def test_without_transformers_lightning_users_are_unaffected_and_told_what_to_install():
    code = ("import sys\n"
            "from sentinel.callbacks import SentinelCallback\n"
            "assert 'sentinel.callbacks.hf_trainer' not in sys.modules\n"
            # Lightning's own imports may load transformers; from here on it is not installed.
            "for name in [m for m in sys.modules if m.split('.')[0] == 'transformers']: del sys.modules[name]\n"
            "sys.modules['transformers'] = None\n"
            "try:\n"
            "    from sentinel.callbacks import SentinelTrainerCallback\n"
            "except ImportError as err:\n"
            "    print(err)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert 'pip install "sentinel-train[transformers]"' in out.stdout


@pytest.mark.distributed
def test_torchrun_two_processes_withhold_the_same_update(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    port = str(29700 + os.getpid() % 2000)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                           "--master_port", port, str(SCRIPT), str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    w0, w1 = (torch.load(tmp_path / f"weights_rank{r}.pt") for r in (0, 1))
    for key in w0:
        assert torch.equal(w0[key], w1[key]), key
    run = tmp_path / "run"
    skipped = [e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines())
               if e["kind"] == "skip_step"]
    assert [e["step"] for e in skipped] == [80]  # rank 1's poisoned batch; both ranks withheld it
    loaded = load_run(run)
    assert loaded.meta["world_size"] == 2 and len(loaded.steps) == 100 and loaded.steps.index.is_unique
    # The withheld step's batches of both ranks are named, each with its rank.
    assert sorted((e["step"], e["rank"]) for e in loaded.skiplist) == [(80, 0), (80, 1)]


def test_a_trainers_output_folder_is_one_run(tmp_path):
    """A Trainer's output folder holds a trainer_state.json per checkpoint (each with the history
    from the start) and its TensorBoard events: one training, reported once, not four times."""
    pytest.importorskip("tensorboard")
    args = TrainingArguments(str(tmp_path / "out"), max_steps=60, per_device_train_batch_size=BATCH, logging_steps=5,
                             save_steps=20, report_to=["tensorboard"], use_cpu=True, disable_tqdm=True, seed=0)
    Trainer(model=gpt2(), args=args, train_dataset=CountingData(512)).train()
    from sentinel.analyze import discover

    found = discover.discover(tmp_path / "out")
    (run,) = found.runs
    assert run.steps["loss"].dropna().index.tolist() == list(range(5, 61, 5))
    others = {"tensorboard": "checkpoint-60/trainer_state.json", "hf_trainer_state": "runs"}
    assert any(w.startswith(f"also logged as {tmp_path / 'out'}") and others[run.source] in w for w in run.warnings)
    earlier = sorted(Path(s.path).name for s in found.skipped if s.reason == discover.EARLIER_CHECKPOINT)
    assert earlier == ["checkpoint-20", "checkpoint-40"]


def test_trainings_run_one_after_another_into_one_output_folder_are_each_a_run(tmp_path):
    """A second training into the same output folder (a rerun with other settings) writes its checkpoint-20 and
    checkpoint-40 over the first's, beside the first's checkpoint-60: the earlier checkpoints were skipped as "held by
    checkpoint-60", and the second training was gone. A checkpoint whose losses the later one does not hold is a
    training of its own."""
    from sentinel.analyze import discover

    for max_steps, lr in ((60, 5e-4), (40, 1e-4)):
        args = TrainingArguments(str(tmp_path / "out"), max_steps=max_steps, per_device_train_batch_size=BATCH,
                                 logging_steps=5, save_steps=20, learning_rate=lr, report_to=[], use_cpu=True,
                                 disable_tqdm=True, seed=0)
        Trainer(model=gpt2(), args=args, train_dataset=CountingData(512)).train()
    found = discover.discover(tmp_path / "out")
    assert sorted(run.steps["loss"].dropna().index.max() for run in found.runs) == [40, 60]
    earlier = sorted(Path(s.path).name for s in found.skipped if s.reason == discover.EARLIER_CHECKPOINT)
    assert earlier == ["checkpoint-20"]


class _Killed(Exception):
    """The job killed (tests only)."""


def test_a_resumed_training_is_one_run_and_the_stretch_it_replaced_is_judged(tmp_path):
    """Launch 1's LR is blown up after step 40 (its loss spikes at 45-50) and the job is killed at
    step 52; launch 2 resumes from checkpoint-40. The last trainer_state.json holds launch 2's
    history, and each launch wrote its events to a runs/ folder of its own: one training (three
    runs before), whose replaced stretch, launch 1's spike, is reported as got past."""
    pytest.importorskip("tensorboard")

    class BlowUpThenDie(TrainerCallback):
        def on_step_end(self, args, state, control, optimizer=None, **kwargs):
            if state.global_step == 41:  # after checkpoint-40 was saved
                for group in optimizer.param_groups:
                    group["lr"] = 5.0
            if state.global_step == 52:
                raise _Killed

    printed = io.StringIO()  # both launches' stdout, as `nohup python train.py` appends it

    def launch(callbacks, resume=None):
        args = TrainingArguments(str(tmp_path / "out"), max_steps=80, per_device_train_batch_size=BATCH,
                                 logging_steps=5, save_steps=20, report_to=["tensorboard"], use_cpu=True,
                                 disable_tqdm=True, seed=0)
        with contextlib.redirect_stdout(printed):
            Trainer(model=gpt2(), args=args, train_dataset=CountingData(512), callbacks=callbacks).train(
                resume_from_checkpoint=resume)

    with pytest.raises(_Killed):
        launch([BlowUpThenDie()])
    (first,) = (tmp_path / "out" / "runs").iterdir()
    first.rename(first.with_name("launch-1"))  # the next launch's folder is named by its start second
    launch([], resume=str(tmp_path / "out" / "checkpoint-40"))
    assert len(list((tmp_path / "out" / "runs").iterdir())) == 2
    from sentinel.analyze import analyze as analyze_paths

    (report,) = analyze_paths(tmp_path / "out").runs
    assert report.data.source == "hf_trainer_state" and report.last_step == 80
    assert report.data.steps["loss"].max() < 10  # launch 2's history: no spike in it
    launches = [w for w in report.warnings if "one launch of this training" in w]
    assert len(launches) == 2 and "launch-1 (tensorboard): its steps 5-50" in launches[0]
    assert "its steps 45-50 differ from this run's" in launches[0]
    replaced = [(i.kind, i.step) for i in report.incidents if i.details.get("replaced")]
    assert ("loss_spike", 45) in replaced
    assert ("restart", 45) in [(i.kind, i.step) for i in report.incidents]
    assert report.verdict.value == "recovered"
    # The appended stdout: launch 2 printed the dicts of steps 45 and 50 again. They carry no step
    # (numbered in order: 45 is the 9th); read in order, launch 1's spike sat among launch 2's values.
    (tmp_path / "nohup.out").write_text(printed.getvalue())
    (report,) = analyze_paths(tmp_path / "nohup.out").runs
    assert report.data.steps["loss"].dropna().index.tolist() == list(range(1, 17))
    assert report.data.steps["loss"].max() < 10
    assert ("loss_spike", 9) in [(i.kind, i.step) for i in report.incidents if i.details.get("replaced")]
    assert report.verdict.value == "recovered"


def test_a_trainer_state_cut_off_while_saved_keeps_its_history(tmp_path):
    """A checkpoint written while the disk filled up: its trainer_state.json ends mid-entry. The
    entries before the cut are read, with a warning; a state with none whole is an
    error naming the file (one cut before its first entry ends)."""
    args = TrainingArguments(str(tmp_path / "out"), max_steps=40, per_device_train_batch_size=BATCH, logging_steps=5,
                             save_steps=40, report_to=[], use_cpu=True, disable_tqdm=True, seed=0)
    Trainer(model=gpt2(), args=args, train_dataset=CountingData(512)).train()
    state = tmp_path / "out" / "checkpoint-40" / "trainer_state.json"
    text = state.read_text()
    state.write_text(text[: text.index('"step": 30') + 4])
    from sentinel.analyze.discover import discover_runs

    (run,) = discover_runs(state)
    assert run.steps["loss"].dropna().index.tolist() == [5, 10, 15, 20, 25]
    assert run.warnings[0].startswith("trainer_state.json: damaged at line ") and "entries before it are read" in \
        run.warnings[0]
    assert run.meta["global_step"] == 40
    state.write_text(text[: text.index('"log_history"') + 30])  # before its first entry ends
    result = CliRunner().invoke(cli, ["analyze", str(state)])
    assert result.exit_code == 1 and "not readable as JSON" in result.output and "Traceback" not in result.output


def test_a_trainer_state_saved_under_another_name_is_read(tmp_path):
    """A trainer_state.json copied out of its checkpoint under another name (a model card's
    whisper-ja-trainer_state.json) was "one JSON object, not rows of a history (a run's summary, its
    config)": the Trainer's state was known by its file name alone. Its keys tell it."""
    args = TrainingArguments(str(tmp_path / "out"), max_steps=20, per_device_train_batch_size=BATCH, logging_steps=5,
                             save_steps=20, report_to=[], use_cpu=True, disable_tqdm=True, seed=0)
    Trainer(model=gpt2(), args=args, train_dataset=CountingData(512)).train()
    copy = tmp_path / "whisper-ja-trainer_state.json"
    copy.write_text((tmp_path / "out" / "checkpoint-20" / "trainer_state.json").read_text())
    from sentinel.analyze.discover import discover_runs

    (run,) = discover_runs(copy)
    assert run.source == "hf_trainer_state" and run.steps["loss"].dropna().index.tolist() == [5, 10, 15, 20]
    assert run.name == "whisper-ja-trainer_state"
    # ... and its text pasted into a log file, cut short inside its log_history: the rows before the cut
    text = copy.read_text()
    paste = tmp_path / "issue.log"
    paste.write_text(text[: text.index('"step": 15')])
    (run,) = discover_runs(paste)
    assert (run.source, run.name, run.steps["loss"].dropna().index.tolist()) == ("hf_trainer_state", "issue", [5, 10])


def test_a_trainers_stdout_without_its_bars_gets_its_steps_from_the_summary(tmp_path):
    """`python train.py > log.txt` keeps the dicts (stdout) and loses the bars and the banner
    (stderr): the dicts carry no step. A finished run's summary gives its steps (runtime x steps per
    second), and with the dicts' epoch the logging interval; a run cut before it stays numbered."""
    from sentinel.analyze.discover import discover_runs

    args = TrainingArguments(str(tmp_path / "out"), max_steps=60, per_device_train_batch_size=BATCH, logging_steps=5,
                             eval_strategy="steps", eval_steps=20, report_to=[], save_strategy="no", use_cpu=True,
                             disable_tqdm=True, seed=0)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        Trainer(model=gpt2(), args=args, train_dataset=CountingData(512), eval_dataset=CountingData(64)).train()
    log = tmp_path / "log.txt"
    log.write_text(printed.getvalue())
    (run,) = discover_runs(log)
    assert run.steps["loss"].dropna().index.tolist() == list(range(5, 61, 5))
    assert run.steps["eval_loss"].dropna().index.tolist() == [20, 40, 60]
    assert run.warnings[0].startswith("HF Trainer log dicts carry no step: logged every 5 steps")
    cut = tmp_path / "cut.txt"  # a run that died before its summary
    cut.write_text(printed.getvalue()[: printed.getvalue().index("'train_runtime'")])
    (run,) = discover_runs(cut)
    assert run.steps["loss"].dropna().index.tolist() == list(range(1, 13))
    assert any(w.startswith("HF Trainer log dicts carry no step: numbered 1, 2, 3") for w in run.warnings)
