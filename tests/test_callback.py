"""SentinelCallback in real Lightning Trainer runs (CPU, tiny model, faults at known steps)."""

from __future__ import annotations

import json
import math
import warnings

import lightning as L
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger

from sentinel import SentinelConfig, TrainingGaveUp, load_run
from sentinel.callbacks import SentinelCallback
from sentinel.store import read_skiplist

BATCH = 16


class LitTiny(L.LightningModule):
    """``corrupt_steps``: after these global steps the head's weights are scaled by 30 behind the
    guard's back (module hooks run after the callbacks'): damage that skipping cannot undo."""

    def __init__(self, net, mse, lr: float = 0.01, manual: bool = False, corrupt_steps=()) -> None:
        super().__init__()
        self.net, self.mse, self.lr = net, mse, lr
        self.automatic_optimization = not manual
        self.corrupt_steps = set(corrupt_steps)

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if self.global_step in self.corrupt_steps:
            self.corrupt_steps.discard(self.global_step)
            with torch.no_grad():
                self.net.head.weight.mul_(30.0)

    def training_step(self, batch, batch_idx):
        if self.automatic_optimization:
            loss = self.mse(self.net, batch)
            self.log("train_loss", loss)
            return loss
        opt_body, opt_head = self.optimizers()
        loss = self.mse(self.net, batch)
        opt_body.zero_grad(); opt_head.zero_grad()
        self.manual_backward(loss)
        opt_body.step(); opt_head.step()
        return loss

    def configure_optimizers(self):
        if self.automatic_optimization:
            opt = torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))
            return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
        return (torch.optim.SGD(self.net.blocks.parameters(), lr=self.lr),
                torch.optim.SGD(self.net.head.parameters(), lr=self.lr))


def _fit(tmp_path, tiny_task, *, steps=120, poison_steps=(), nan_steps=(), epochs=1, callback=True,
         ckpt_path=None, trainer_kwargs=None, manual=False, extra_callbacks=(), corrupt_steps=(),
         device=torch.device("cpu"), **options):
    Data, Net, mse, batches_at = tiny_task
    L.seed_everything(0, verbose=False)
    nan = {min(batches_at(nan_steps, BATCH))} if nan_steps else set()
    data = Data(n=BATCH * steps, poison=batches_at(poison_steps, BATCH), nan=nan)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=False)
    module = LitTiny(Net(), mse, manual=manual, corrupt_steps=corrupt_steps)
    cb = SentinelCallback(log_dir=str(tmp_path / "run"), tensorboard=False, **options) if callback else None
    kwargs = dict(accelerator="gpu" if device.type == "cuda" else "cpu", devices=1, max_epochs=epochs,
                  logger=False, enable_checkpointing=False, enable_progress_bar=False,
                  enable_model_summary=False, log_every_n_steps=1)
    kwargs.update({k: v for k, v in (trainer_kwargs or {}).items() if k != "callbacks"})
    trainer = L.Trainer(callbacks=([cb] if cb else []) + list(extra_callbacks), **kwargs)
    trainer.fit(module, loader, ckpt_path=ckpt_path)
    clean = Data(n=BATCH * steps, device=next(module.parameters()).device)  # the same task, without faults
    with torch.no_grad():
        final = float(mse(module.net, {"x": clean.x[-512:], "y": clean.y[-512:]}))
    return final, trainer, cb


def _events(tmp_path, kind=None):
    lines = (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if kind is None or e["kind"] == kind]


def test_poisoned_batches_are_skipped_updates_and_the_run_ends_near_the_clean_run(tmp_path, tiny_task, device):
    clean, _, _ = _fit(tmp_path / "clean", tiny_task, callback=False, device=device)
    unguarded, _, _ = _fit(tmp_path / "bad", tiny_task, poison_steps=(60, 61, 62), rollback=False, device=device)
    final, _, cb = _fit(tmp_path / "ok", tiny_task, poison_steps=(60, 61, 62), device=device)
    assert not math.isfinite(unguarded) or unguarded > 10 * clean
    assert math.isfinite(final) and final <= clean * 1.05 + 1e-3, (final, clean)
    assert [e["step"] for e in _events(tmp_path / "ok", "skip_step")] == [60, 61, 62]
    assert not _events(tmp_path / "ok", "rollback")  # a re-run of step 59's batch cleared the weights
    skipped = {i for e in read_skiplist(tmp_path / "ok" / "run") for i in e["indices"]}
    assert skipped == tiny_task[3]((60, 61, 62), BATCH)


def test_damaged_weights_roll_back_and_the_run_ends_near_the_clean_run(tmp_path, tiny_task, device):
    clean, _, _ = _fit(tmp_path / "clean", tiny_task, callback=False, device=device)
    final, _, cb = _fit(tmp_path / "ok", tiny_task, corrupt_steps={60}, device=device)
    assert math.isfinite(final) and final <= clean * 1.25, (final, clean)
    (rollback,) = _events(tmp_path / "ok", "rollback")
    assert rollback["restored_step"] < 60 <= rollback["spike_step"]
    assert rollback["weights_check"]["weights_ok"] is False


def test_nan_batch_is_named_and_its_update_withheld(tmp_path, tiny_task, device):
    final, _, _ = _fit(tmp_path, tiny_task, nan_steps=(70,), device=device)
    assert math.isfinite(final)
    nonfinite = _events(tmp_path, "nonfinite")
    assert nonfinite[0]["module"] == "<input>" and nonfinite[0]["rank"] == 0
    assert [e["step"] for e in _events(tmp_path, "skip_step")] == [70]
    assert not _events(tmp_path, "rollback")


def test_damage_that_keeps_coming_gives_up_with_good_weights(tmp_path, tiny_task):
    Data, Net, mse, _ = tiny_task
    with pytest.raises(TrainingGaveUp, match="gave up"):
        _fit(tmp_path, tiny_task, corrupt_steps=set(range(60, 120)), max_rollbacks=2)
    (gave_up,) = _events(tmp_path, "gave_up")
    assert len(_events(tmp_path, "rollback")) == 2 and gave_up["restored_step"] is not None


def test_resumed_run_skips_the_recorded_batches_again(tmp_path, tiny_task):
    # Epoch 0 meets the poison and withholds its updates; its checkpoint is resumed for epoch 1,
    # where the same (unshuffled) poison batches come again and are skipped without being judged.
    _, trainer, _ = _fit(tmp_path, tiny_task, steps=100, poison_steps=(60, 61))
    assert len(_events(tmp_path, "skip_step")) == 2
    ckpt = tmp_path / "after_skips.ckpt"
    trainer.save_checkpoint(ckpt)
    n_events = len(_events(tmp_path))
    final, _, cb = _fit(tmp_path, tiny_task, steps=100, poison_steps=(60, 61), epochs=2, ckpt_path=str(ckpt))
    new = _events(tmp_path)[n_events:]
    assert not [e for e in new if e["kind"] in ("rollback", "spike", "nonfinite", "skip_step")], new
    skipped_again = [e for e in new if e["kind"] == "skip" and e.get("reason") == "skiplist"]
    poison = tiny_task[3]((60, 61), BATCH)
    assert poison == {i for e in skipped_again for i in e["indices"]}
    assert math.isfinite(final) and final < 0.05


@pytest.mark.parametrize("trainer_kwargs", [
    {"accumulate_grad_batches": 2, "gradient_clip_val": 0.5},
    {"precision": "bf16-mixed"},
], ids=["accumulate+clip", "bf16-mixed"])
def test_records_under_trainer_options(tmp_path, tiny_task, trainer_kwargs, device):
    _fit(tmp_path, tiny_task, steps=60, trainer_kwargs=trainer_kwargs, device=device)
    run = load_run(tmp_path / "run")
    acc = trainer_kwargs.get("accumulate_grad_batches", 1)
    assert len(run.steps) == 60 // acc
    assert run.steps["grad_norm/total"].notna().all() and run.steps["loss"].notna().all()
    if "gradient_clip_val" in trainer_kwargs:  # measured before clipping
        assert (run.steps["grad_norm/total"] > trainer_kwargs["gradient_clip_val"]).any()


def test_fp16_amp_on_cpu_records_loss_scale(tmp_path, tiny_task):
    from lightning.pytorch.plugins.precision import MixedPrecision

    plugin = MixedPrecision("16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu", init_scale=2.0**16))
    _fit(tmp_path, tiny_task, steps=40, trainer_kwargs={"plugins": [plugin]})
    run = load_run(tmp_path / "run")
    assert run.steps["loss_scale"].notna().all()
    assert "amp/overflow" in run.steps.columns


def test_manual_optimization_with_two_optimizers(tmp_path, tiny_task):
    final, _, _ = _fit(tmp_path, tiny_task, steps=60, manual=True, rollback=True)
    run = load_run(tmp_path / "run")
    assert len(run.steps) > 0 and run.steps["grad_norm/total"].notna().all()


def test_metrics_reach_the_users_own_logger(tmp_path, tiny_task):
    logger = CSVLogger(str(tmp_path / "csv"), name="", version="")
    _fit(tmp_path, tiny_task, steps=30, trainer_kwargs={"logger": logger})
    header = (tmp_path / "csv" / "metrics.csv").read_text().splitlines()[0].split(",")
    assert "grad_norm/total" in header and "grad_norm/net.blocks.1.0" in header and "train_loss" in header


def test_state_round_trips_through_a_checkpoint(tmp_path, tiny_task):
    _, trainer, cb = _fit(tmp_path, tiny_task, steps=100, corrupt_steps={60})
    state = cb.state_dict()
    assert state["rollbacks"] == 1 and state["skiplist"] and state["guard"]["rollbacks"] == 1
    fresh = SentinelCallback(log_dir=str(tmp_path / "other"), tensorboard=False)
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state


@pytest.mark.parametrize("spelling", ["relative", "new_dir", "legacy_key"])
def test_resume_restores_state_whatever_the_log_dir_is_called(tmp_path, tiny_task, monkeypatch, caplog, spelling):
    _, trainer, cb = _fit(tmp_path, tiny_task, steps=100, corrupt_steps={60})
    assert cb.state_dict()["rollbacks"] == 1
    ckpt = tmp_path / "after_rollback.ckpt"
    trainer.save_checkpoint(ckpt)
    if spelling == "legacy_key":  # written when the key embedded the log_dir
        saved = torch.load(ckpt, weights_only=False)
        saved["callbacks"] = {f"SentinelCallback{{'log_dir': '{tmp_path / 'run'}'}}": v
                              for v in saved["callbacks"].values()}
        torch.save(saved, ckpt)
    monkeypatch.chdir(tmp_path)
    log_dir = {"relative": "./run/../run", "new_dir": "resumed", "legacy_key": "run"}[spelling]
    Data, Net, mse, _ = tiny_task
    loader = torch.utils.data.DataLoader(Data(n=BATCH * 100), batch_size=BATCH, shuffle=False)
    resumed = SentinelCallback(log_dir=log_dir, tensorboard=False)
    trainer = L.Trainer(accelerator="cpu", max_epochs=2, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[resumed])
    with caplog.at_level("WARNING"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(LitTiny(Net(), mse), loader, ckpt_path=str(ckpt))
    state = resumed.state_dict()
    assert state["rollbacks"] == 1 and state["skiplist"] == cb.state_dict()["skiplist"]
    (line,) = [r.getMessage() for r in caplog.records if "resumed at step" in r.getMessage()]
    assert "1 rollback so far" in line
    mismatch = [w for w in caught if "callbacks used to create the checkpoint" in str(w.message)]
    assert bool(mismatch) == (spelling == "legacy_key")  # only an old checkpoint's key differs


def test_two_sentinel_callbacks_in_one_trainer_are_refused(tmp_path, tiny_task):
    # Both would judge and roll back the same model; Lightning refuses them by their shared key.
    with pytest.raises(RuntimeError, match="more than one stateful callback of type `SentinelCallback`"):
        _fit(tmp_path, tiny_task, steps=5,
             extra_callbacks=[SentinelCallback(log_dir=str(tmp_path / "b"), tensorboard=False)])


def test_bad_arguments_fail_at_construction(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="pass a directory you can write to"):
        SentinelCallback(log_dir=str(blocker / "run"))
    with pytest.raises(TypeError, match="unknown sentinel option 'snapshot_evry'"):
        SentinelCallback(log_dir=str(tmp_path / "ok"), snapshot_evry=3)
    with pytest.raises(TypeError, match="config= takes a SentinelConfig, got dict"):
        SentinelCallback(log_dir=str(tmp_path / "ok"), config={"rollback": False})
    with pytest.raises(TypeError, match="not both"):
        SentinelCallback(log_dir=str(tmp_path / "ok"), config=SentinelConfig(), rollback=False)
    with pytest.raises(TypeError, match="rollback_with holds <builtins.int>, which has no state_dict"):
        SentinelCallback(log_dir=str(tmp_path / "ok"), rollback_with=3)


def test_model_without_attention_is_noted_in_meta(tmp_path, tiny_task):
    _fit(tmp_path, tiny_task, steps=60, attention_every=10)
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert "no attention" in meta["attention"]


class _NaNAt(torch.nn.Module):
    """Identity, except that it turns its output to NaN while ``armed``."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False

    def forward(self, x):
        return x * float("nan") if self.armed else x


class LitNaNModule(L.LightningModule):
    def __init__(self, net, mse, at_batch: int) -> None:
        super().__init__()
        self.net, self.mse, self.at_batch = net, mse, at_batch
        self.net.blocks[1].append(_NaNAt())  # blocks.1.2

    def training_step(self, batch, batch_idx):
        self.net.blocks[1][2].armed = batch_idx == self.at_batch and self.current_epoch == 0
        return self.mse(self.net, batch)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)


def test_nan_from_a_module_is_traced_to_that_module(tmp_path, tiny_task):
    Data, Net, mse, _ = tiny_task
    L.seed_everything(0, verbose=False)
    loader = torch.utils.data.DataLoader(Data(n=BATCH * 60), batch_size=BATCH)
    module = LitNaNModule(Net(), mse, at_batch=45)
    trainer = L.Trainer(accelerator="cpu", max_epochs=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[SentinelCallback(log_dir=str(tmp_path / "run"), tensorboard=False)])
    trainer.fit(module, loader)
    (event,) = _events(tmp_path, "nonfinite")
    assert (event["step"], event["module"], event["phase"]) == (45, "net.blocks.1.2", "forward")
    assert event["nan_count"] > 0
    assert [e["step"] for e in _events(tmp_path, "skip_step")] == [45]  # the update is withheld
    assert all(torch.isfinite(p).all() for p in module.parameters())


class LitNaNNoBatchIdx(LitNaNModule):
    """``training_step(self, batch)``: Lightning allows leaving out batch_idx."""

    def training_step(self, batch):
        self.net.blocks[1][2].armed = self.trainer.fit_loop.epoch_loop.batch_idx == self.at_batch
        return self.mse(self.net, batch)


def test_a_training_step_without_batch_idx_is_replayed_as_lightning_calls_it(tmp_path, tiny_task):
    """The replay called training_step(batch, batch_idx) and failed with a TypeError: the NaN's
    source was not named, and the weights check before a rollback could not run."""
    Data, Net, mse, _ = tiny_task
    L.seed_everything(0, verbose=False)
    loader = torch.utils.data.DataLoader(Data(n=BATCH * 60), batch_size=BATCH)
    trainer = L.Trainer(accelerator="cpu", max_epochs=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[SentinelCallback(log_dir=str(tmp_path / "run"), tensorboard=False)])
    trainer.fit(LitNaNNoBatchIdx(Net(), mse, at_batch=45), loader)
    (event,) = _events(tmp_path, "nonfinite")
    assert (event["step"], event["module"], event["phase"]) == (45, "net.blocks.1.2", "forward")


class LitRecordsLosses(LitTiny):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.losses: list[float] = []

    def training_step(self, batch, batch_idx):
        loss = self.mse(self.net, batch)
        self.losses.append(float(loss))
        return loss


def test_an_epochs_shorter_last_accumulation_window_records_its_mean_loss(tmp_path, tiny_task):
    """accumulate_grad_batches=4 over 10 batches: the last step has 2 micro-batches, each loss
    divided by 4 by Lightning; their sum, half the step's mean loss, was recorded."""
    Data, Net, mse, _ = tiny_task
    L.seed_everything(0, verbose=False)
    loader = torch.utils.data.DataLoader(Data(n=BATCH * 10), batch_size=BATCH)
    module = LitRecordsLosses(Net(), mse)
    trainer = L.Trainer(accelerator="cpu", max_epochs=2, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accumulate_grad_batches=4,
                        callbacks=[SentinelCallback(log_dir=str(tmp_path / "run"), tensorboard=False)])
    trainer.fit(module, loader)
    windows = [module.losses[e * 10 + i:e * 10 + min(i + 4, 10)] for e in range(2) for i in (0, 4, 8)]
    recorded = load_run(tmp_path / "run").steps["loss"].tolist()
    assert recorded == pytest.approx([sum(w) / len(w) for w in windows], rel=1e-5)


def test_fit_again_on_the_same_module_keeps_the_guard_where_it_was(tmp_path, tiny_task):
    """A second trainer.fit() (more epochs) made a new engine: the rollback count, cool-down, skip
    list and detector history were lost, and max_rollbacks counted from zero again."""
    final, trainer, cb = _fit(tmp_path, tiny_task, steps=120, corrupt_steps=(60,))
    assert cb.sentinel.rollbacks == 1
    entries = len(cb.sentinel.skiplist.entries)
    trainer.fit_loop.max_epochs = 2
    trainer.fit(trainer.lightning_module, trainer.fit_loop._data_source.instance)
    assert cb.sentinel.rollbacks == 1 and len(cb.sentinel.skiplist.entries) >= entries
    assert cb.sentinel.step == 240


class CausalSelfAttention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)

    def forward(self, h):
        q, k, v = self.qkv(h).view(h.shape[0], h.shape[1], 3, 2, 16).permute(2, 0, 3, 1, 4)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return h + out.transpose(1, 2).reshape(h.shape)


class LitAttention(L.LightningModule):
    """A two-layer causal self-attention model calling scaled_dot_product_attention."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(16, 32)
        self.blocks = torch.nn.ModuleList([CausalSelfAttention() for _ in range(2)])
        self.head = torch.nn.Linear(32, 16)

    def training_step(self, batch, batch_idx):
        (tokens,) = batch
        h = self.embed(tokens[:, :-1])
        for block in self.blocks:
            h = block(h)
        return torch.nn.functional.cross_entropy(self.head(h).flatten(0, 1), tokens[:, 1:].flatten())

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def test_attention_entropy_is_recorded_on_sampled_steps(tmp_path):
    L.seed_everything(0, verbose=False)
    tokens = torch.randint(0, 16, (8 * 30, 12))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(tokens), batch_size=8)
    trainer = L.Trainer(accelerator="cpu", max_epochs=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[SentinelCallback(log_dir=str(tmp_path / "run"), tensorboard=False,
                                                    attention_every=10)])
    trainer.fit(LitAttention(), loader)
    steps = load_run(tmp_path / "run").steps
    for key in ("attn_entropy/blocks.0", "attn_entropy_min/blocks.1", "attn_logit_max/blocks.1"):
        assert list(steps[key].dropna().index) == [0, 10, 20], key
    # Causal attention over 11 positions: entropy is between 0 and the uniform value's mean.
    uniform = float(torch.log(torch.arange(1, 12, dtype=torch.float64)).mean())
    assert 0 < steps["attn_entropy/blocks.0"].dropna().max() <= uniform + 1e-6
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert "attention" not in meta  # it has attention: nothing to note


class LitAttentionTwoGroups(LitAttention):
    def configure_optimizers(self):
        return torch.optim.AdamW([{"params": self.embed.parameters(), "lr": 1e-4},
                                  {"params": list(self.blocks.parameters()) + list(self.head.parameters())}], lr=1e-3)


def _documented_keys() -> set[str]:
    import re

    table = "".join(SentinelCallback.__doc__.split("=====")[2:])
    return set(re.findall(r"^\s*``([a-z_/<>.]+)``", table, re.M))  # the key column only


def test_the_documented_metric_table_is_what_gets_logged(tmp_path):
    from lightning.pytorch.plugins.precision import MixedPrecision

    L.seed_everything(0, verbose=False)
    tokens = torch.randint(0, 16, (8 * 12, 12))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(tokens), batch_size=8)
    plugin = MixedPrecision("16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu", init_scale=2.0**8))
    trainer = L.Trainer(accelerator="cpu", max_epochs=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, plugins=[plugin],
                        callbacks=[SentinelCallback(log_dir=str(tmp_path / "run"), tensorboard=False,
                                                    attention_every=5)])
    trainer.fit(LitAttentionTwoGroups(), loader)
    logged = set()
    for column in load_run(tmp_path / "run").steps.columns:
        family, _, rest = column.partition("/")
        if column in ("epoch", "batch_idx"):
            continue
        logged.add(column if not rest or family in ("amp",) or column == "grad_norm/total"
                   else f"{family}/<module>" if family != "lr" else "lr/pg<i>")
    documented = {k for k in _documented_keys()}
    assert logged == documented, (logged ^ documented)


def test_damage_that_comes_back_lowers_the_lr_of_the_cooldown_not_the_schedule(tmp_path, tiny_task):
    _, trainer, _ = _fit(tmp_path, tiny_task, corrupt_steps={60, 70}, lr_factor=0.5, cooldown=10)
    first, second = _events(tmp_path, "rollback")[:2]
    assert first["lr_scale"] == 1.0 and second["lr_scale"] == 0.5
    at = second["step"]
    lr = load_run(tmp_path / "run").steps["lr"]
    assert list(lr.loc[at + 1: at + 10]) == pytest.approx([0.005] * 10)  # what the updates used
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.01)  # the schedule's own




class LitSkipsSome(LitTiny):
    """Returns None from training_step for every 10th batch: Lightning's documented way to skip
    one (no backward; the optimizer step still runs, with no gradients)."""

    def training_step(self, batch, batch_idx):
        return None if batch_idx % 10 == 5 else super().training_step(batch, batch_idx)


def test_a_batch_the_training_step_skips_is_not_recorded_as_a_nan_step(tmp_path, tiny_task):
    from sentinel.analyze.analyzer import analyze_run
    from sentinel.analyze.discover import discover_runs

    Data, Net, mse, _ = tiny_task
    L.seed_everything(0, verbose=False)
    loader = torch.utils.data.DataLoader(Data(n=BATCH * 60), batch_size=BATCH, shuffle=False)
    trainer = L.Trainer(callbacks=[SentinelCallback(log_dir=str(tmp_path / "run"), tensorboard=False)],
                        accelerator="cpu", max_epochs=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(LitSkipsSome(Net(), mse), loader)
    (run,) = discover_runs(tmp_path / "run")
    assert len(run.steps) == 54 and not set(run.steps.index) & {5, 15, 25, 35, 45, 55}
    assert run.steps["loss"].notna().all()
    report = analyze_run(run)
    assert not [i for i in report.incidents if i.kind == "nonfinite"] and report.verdict == "healthy"


def test_lightnings_weight_averaging_is_rolled_back_with_the_weights(tmp_path, tiny_task):
    # EMAWeightAveraging updates its AveragedModel after every step and swaps it into the module
    # at the end: not rolled back, it kept the 13 discarded updates (the damaged head among them)
    # and counted them (n_averaged 120 of 120 steps).
    from lightning.pytorch.callbacks import EMAWeightAveraging

    ema = EMAWeightAveraging(decay=0.95)
    final, trainer, _ = _fit(tmp_path, tiny_task, corrupt_steps={60}, extra_callbacks=[ema])
    (rollback,) = _events(tmp_path, "rollback")
    discarded = rollback["step"] + 1 - rollback["restored_step"]
    assert discarded > 1 and int(ema._average_model.n_averaged) == trainer.global_step - discarded
    assert math.isfinite(final)
