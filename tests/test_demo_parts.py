"""The demo's parts: GPT, data with bad batches, the LightningModule and its LR schedule."""

from __future__ import annotations

import itertools
import math

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import Callback

from sentinel.cli.demo.data import (
    CORRUPTION_MODES,
    BadBatches,
    CharTokenizer,
    DemoData,
    SeededSampler,
    WindowDataset,
    generate_corpus,
    make_loader,
)
from sentinel.cli.demo.model import GPT, GPTConfig, build_model
from sentinel.cli.demo.module import DemoLM, LRSurge, ScheduleConfig, lr_multiplier
from sentinel.cli.demo.scenario import DemoScenario

TINY = GPTConfig(vocab_size=11, block_size=16, n_layer=2, n_head=2, n_embd=16)


# ---------------------------------------------------------------------------------------- model
def test_forward_shape_and_module_paths():
    model = build_model(TINY, seed=0)
    logits = model(torch.randint(11, (3, 16), generator=torch.Generator().manual_seed(0)))
    assert logits.shape == (3, 16, 11)
    names = {name for name, _ in model.named_modules()}
    for i in range(TINY.n_layer):
        assert {f"blocks.{i}.attn", f"blocks.{i}.mlp"} <= names


def test_same_seed_same_model_and_output_other_seed_differs():
    idx = torch.randint(11, (2, 16), generator=torch.Generator().manual_seed(1))
    a, b, c = build_model(TINY, seed=3), build_model(TINY, seed=3), build_model(TINY, seed=4)
    for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(pa, pb), name
    assert torch.equal(a(idx), b(idx))
    assert not torch.equal(a.tok_emb.weight, c.tok_emb.weight)


def test_build_model_leaves_the_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_model(TINY, seed=9)
    assert torch.equal(torch.rand(3), expected)


def test_attention_logits_reproduce_the_sdpa_forward():
    torch.manual_seed(0)
    attn = build_model(TINY, seed=0).blocks[0].attn
    x = torch.randn(2, 7, TINY.n_embd)
    probs = attn.attention_logits(x).softmax(-1)  # (B, nh, T, T)
    _, _, v = attn.qkv(x).split(TINY.n_embd, dim=2)
    v = v.view(2, 7, TINY.n_head, -1).transpose(1, 2)  # (B, nh, T, hs)
    by_hand = attn.proj((probs @ v).transpose(1, 2).reshape(2, 7, TINY.n_embd))
    torch.testing.assert_close(attn(x), by_hand, rtol=1e-5, atol=1e-6)
    assert torch.all(probs.triu(diagonal=1) == 0)  # causal


def test_tied_head_shares_the_embedding():
    model = build_model(TINY)
    assert model.head.weight is model.tok_emb.weight
    assert build_model(GPTConfig(vocab_size=11, block_size=16, n_embd=16, n_head=2,
                                 tie_weights=False)).head.weight is not None


@pytest.mark.parametrize("kwargs, match", [
    ({"vocab_size": 0}, "vocab_size"),
    ({"vocab_size": 8, "n_embd": 30, "n_head": 4}, "divisible"),
    ({"vocab_size": 8, "block_size": 2.5}, "block_size"),
])
def test_gpt_config_rejects_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GPTConfig(**kwargs)


def test_too_long_input_is_refused():
    with pytest.raises(ValueError, match="block_size=16"):
        GPT(TINY)(torch.zeros(1, 17, dtype=torch.long))


# ----------------------------------------------------------------------------------------- data
def test_corpus_is_deterministic_and_tokenizer_round_trips():
    text = generate_corpus(5_000, seed=2)
    assert text == generate_corpus(5_000, seed=2) and text != generate_corpus(5_000, seed=3)
    assert len(text) >= 5_000 and "." in text and "\n" in text
    tok = CharTokenizer(text)
    assert tok.decode(tok.encode(text[:500])) == text[:500]
    assert tok.vocab_size == len(set(text))
    with pytest.raises(ValueError, match="not in the tokenizer"):
        tok.encode("#")


def test_windows_carry_their_index_and_shifted_targets():
    tokens = torch.arange(50) % 7
    ds = WindowDataset(tokens, block_size=8)
    assert len(ds) == 42
    item = ds[13]
    assert item["index"] == 13
    assert torch.equal(item["x"], tokens[13:21]) and torch.equal(item["y"], tokens[14:22])


def test_loader_batches_are_dicts_whose_index_names_the_windows():
    data = DemoData.build(block_size=16, num_chars=3_000)
    loader = data.loader(batch_size=8, seed=5)
    for batch in list(loader)[:5]:
        assert batch["x"].shape == (8, 16) and batch["index"].dtype == torch.long
        for row, i in enumerate(batch["index"].tolist()):
            assert torch.equal(batch["x"][row], data.dataset[i]["x"])
            assert torch.equal(batch["y"][row], data.dataset[i]["y"])


def test_sampler_order_is_seeded_and_changes_with_the_epoch():
    s = SeededSampler(100, seed=7)
    assert list(s) == list(SeededSampler(100, seed=7)) == list(s)
    assert sorted(s) == list(range(100))
    assert list(s) != list(SeededSampler(100, seed=8))
    first = list(s)
    s.set_epoch(1)
    assert list(s) != first and list(s) == s.order(1)


@pytest.mark.parametrize("mode", CORRUPTION_MODES)
def test_corrupted_batches_appear_exactly_at_their_positions(mode):
    data = DemoData.build(block_size=16, num_chars=3_000)
    bad = BadBatches(positions=(3, 4, 17), mode=mode)
    clean_order = [b["index"] for b in data.loader(batch_size=8, seed=1)]
    corrupted_at = []
    for pos, batch in enumerate(data.loader(batch_size=8, seed=1, bad=bad)):
        assert torch.equal(batch["index"], clean_order[pos])  # corruption never moves samples
        rows = [not (torch.equal(batch["x"][r], data.dataset[i]["x"]) and
                     torch.equal(batch["y"][r], data.dataset[i]["y"]))
                for r, i in enumerate(batch["index"].tolist())]
        if any(rows):
            corrupted_at.append(pos)
            assert all(rows), f"batch {pos} is only partly corrupted"
    assert corrupted_at == [3, 4, 17]
    assert len(clean_order) > 17


def test_corruption_is_the_same_every_time_it_is_read():
    data = DemoData.build(block_size=16, num_chars=3_000)
    bad = BadBatches.stretch(start=2, length=1)
    first = list(data.loader(8, seed=1, bad=bad))[2]
    second = list(data.loader(8, seed=1, bad=bad))[2]
    assert torch.equal(first["x"], second["x"]) and torch.equal(first["y"], second["y"])


@pytest.mark.parametrize("kwargs, match", [
    ({"positions": [1, 2]}, "tuple"),
    ({"positions": (1, -1)}, "non-negative"),
    ({"positions": (2, 2)}, "duplicates"),
    ({"positions": (1,), "mode": "zeros"}, "unknown"),
])
def test_bad_batches_rejects_bad_specs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BadBatches(**kwargs)


def test_bad_position_past_the_epoch_is_refused():
    ds = WindowDataset(torch.arange(40) % 5, block_size=4)
    with pytest.raises(ValueError, match="past the 9 batches"):
        make_loader(ds, 4, bad=BadBatches(positions=(9,)), vocab_size=5)


# ------------------------------------------------------------------------------- LR schedule
def test_lr_multiplier_warmup_cosine_and_surge_exactly():
    s = ScheduleConfig(lr=1e-3, warmup=10, total_steps=110, min_lr_ratio=0.1,
                       surge=LRSurge(start=60, end=70, factor=20.0))
    assert lr_multiplier(0, s) == pytest.approx(0.1)
    assert lr_multiplier(4, s) == pytest.approx(0.5)
    assert lr_multiplier(10, s) == pytest.approx(1.0)
    assert lr_multiplier(59, s) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.49)))
    for step in range(60, 70):
        no_surge = lr_multiplier(step, ScheduleConfig(lr=1e-3, warmup=10, total_steps=110, min_lr_ratio=0.1))
        assert lr_multiplier(step, s) == pytest.approx(20.0 * no_surge)
    assert lr_multiplier(70, s) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.6)))
    assert lr_multiplier(110, s) == pytest.approx(0.1) == lr_multiplier(500, s)


def test_scheduler_applies_the_surge_and_round_trips_its_state():
    schedule = ScheduleConfig(lr=2e-3, warmup=3, total_steps=20, surge=LRSurge(start=8, end=11, factor=10.0))
    lm = DemoLM(TINY, schedule)
    conf = lm.configure_optimizers()
    opt, sched = conf["optimizer"], conf["lr_scheduler"]["scheduler"]
    assert conf["lr_scheduler"]["interval"] == "step"
    seen = []
    for step in range(20):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
        if step == 6:
            saved = sched.state_dict()
    assert seen == pytest.approx([2e-3 * lr_multiplier(i, schedule) for i in range(20)])
    assert seen[8] == pytest.approx(10 * 2e-3 * lr_multiplier(8, ScheduleConfig(lr=2e-3, warmup=3, total_steps=20)))
    sched.load_state_dict(saved)  # a rollback restores the schedule: the surge comes again
    assert sched.get_last_lr()[0] == pytest.approx(seen[7])


def test_weight_decay_only_on_matrices():
    opt = DemoLM(TINY).configure_optimizers()["optimizer"]
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] > 0 and all(p.dim() >= 2 for p in decay["params"])
    assert no_decay["weight_decay"] == 0 and all(p.dim() < 2 for p in no_decay["params"])


@pytest.mark.parametrize("kwargs, match", [
    ({"lr": 0.0}, "lr"), ({"warmup": 50, "total_steps": 50}, "warmup"), ({"betas": (0.9, 1.0)}, "betas"),
])
def test_schedule_config_rejects_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ScheduleConfig(**kwargs)


def test_surge_rejects_an_empty_stretch():
    with pytest.raises(ValueError, match="start < end"):
        LRSurge(start=5, end=5, factor=2.0)


# ------------------------------------------------------------------------------ LightningModule
def test_module_paths_are_the_gpts_own():
    lm = DemoLM(TINY)
    names = {name for name, _ in lm.named_modules()}
    assert {"blocks.0.attn", "blocks.1.mlp"} <= names and not any(n.startswith("model.") for n in names)
    assert lm.model.blocks[0] is lm.blocks[0]
    assert {id(p) for p in lm.parameters()} == {id(p) for p in lm.model.parameters()}


class _Losses(Callback):
    def __init__(self) -> None:
        self.values: list[torch.Tensor] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.values.append(outputs["loss"].detach())


def test_a_few_lightning_steps_reduce_the_loss():
    data = DemoData.build(block_size=16, num_chars=4_000)
    config = GPTConfig(vocab_size=data.tokenizer.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=32)
    lm = DemoLM(config, ScheduleConfig(lr=1e-2, warmup=5, total_steps=40))
    losses = _Losses()
    trainer = L.Trainer(max_steps=40, callbacks=[losses], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                        devices=1)
    trainer.fit(lm, data.loader(batch_size=16, seed=0))
    values = torch.stack(losses.values)
    assert len(values) == 40
    assert values[0].item() == pytest.approx(math.log(data.tokenizer.vocab_size), abs=0.1)  # uniform at init
    assert values[-5:].mean() < values[:5].mean() - 0.5


# -------------------------------------------------------------------------------------- scenario
def test_scenario_runs_share_data_and_weights_and_differ_only_by_the_faults():
    scenario = DemoScenario(num_chars=20_000, steps=100, bad=BadBatches.stretch(start=10, length=2),
                            surge=LRSurge(start=50, end=60, factor=20.0))
    data = scenario.data()
    clean_lm, clean_loader = scenario.build(faults=False, data=data)
    bad_lm, bad_loader = scenario.build(faults=True, data=data)
    assert torch.equal(clean_lm.tok_emb.weight, bad_lm.tok_emb.weight)
    assert clean_lm.schedule.surge is None and bad_lm.schedule.surge == scenario.surge
    pairs = itertools.islice(zip(clean_loader, bad_loader), 20)
    differ = [pos for pos, (a, b) in enumerate(pairs) if not torch.equal(a["x"], b["x"])]
    assert differ == [10, 11]
    assert scenario.guard_options()["skip_after"] == 2


def test_scenario_refuses_faults_after_the_last_step():
    with pytest.raises(ValueError, match="after the last step"):
        DemoScenario(steps=200)


def test_a_second_demo_into_the_same_out_replaces_the_first_runs_only(tmp_path):
    from sentinel.cli.demo.run import GUARDED, UNGUARDED, prepare_out
    from sentinel.store import RunWriter

    for name in (UNGUARDED, GUARDED):
        RunWriter(tmp_path / name, tensorboard=False).close()  # what an earlier demo left
    (tmp_path / "notes.txt").write_text("mine")
    prepare_out(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    (tmp_path / UNGUARDED).mkdir()
    (tmp_path / UNGUARDED / "data.csv").write_text("not a run")
    with pytest.raises(ValueError, match="not a run a demo wrote"):
        prepare_out(tmp_path)
    assert (tmp_path / UNGUARDED / "data.csv").read_text() == "not a run"
