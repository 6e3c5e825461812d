"""Updates withheld on the device (a fused AdamW's ``found_inf``): the same training, decisions
and weights as when the host reads the step back before the update."""

from __future__ import annotations

import json
import math
import random

import pandas as pd
import pytest
import torch

from sentinel import Sentinel
from sentinel.config import SentinelConfig
from sentinel.detect.spike import SpikeConfig, SpikeDetector
from sentinel.guard.device_gate import DeviceGate, gate_unsupported
from sentinel.guard.judge import StepJudge
from sentinel.guard.policy import GuardState

BATCH = 16


def _train(tmp_path, tiny_task, device, *, gate, poison_steps=(), nan_steps=(), steps=100, name="run",
           corrupt_at=None):
    Data, Net, mse, batches_at = tiny_task
    torch.manual_seed(0)
    nan = {min(batches_at(nan_steps, BATCH))} if nan_steps else set()
    data = Data(n=BATCH * steps, poison=batches_at(poison_steps, BATCH), nan=nan, device=device)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=False)
    model = Net().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
    sen = Sentinel(model, opt, log_dir=str(tmp_path / name), loss_fn=mse, tensorboard=False,
                   async_verdict=gate, snapshot_every=10)
    for batch in sen.batches(loader):
        opt.zero_grad()
        loss = mse(model, batch)
        loss.backward()
        if sen.check(loss):
            opt.step()
        at = sen.step
        sen.end_step()
        if at == corrupt_at:  # damage behind the guard's back: only a rollback cures it
            with torch.no_grad():
                model.head.weight.mul_(30.0)
    sen.close()
    events = [json.loads(line) for line in (tmp_path / name / "events.jsonl").read_text().splitlines()]
    return model, opt, sen, [(e["kind"], e["step"]) for e in events if e["kind"] != "start"], events


def _same_training(a, b):
    (model_a, opt_a, _, kinds_a, _), (model_b, opt_b, _, kinds_b, _) = a, b
    assert kinds_a == kinds_b
    for pa, pb in zip(model_a.parameters(), model_b.parameters()):
        assert torch.equal(pa, pb)
    for sa, sb in zip(opt_a.state.values(), opt_b.state.values()):
        assert all(torch.equal(sa[k], sb[k]) for k in sa)


def test_blips_withheld_on_the_device_as_on_the_host(tmp_path, tiny_task, device):
    # On the GPU the gate is on by itself (None); on the CPU it is asked for.
    gated = _train(tmp_path, tiny_task, device, gate=None if device.type == "cuda" else True,
                   poison_steps=(40, 70), name="gated")
    host = _train(tmp_path, tiny_task, device, gate=False, poison_steps=(40, 70), name="host")
    assert gated[2]._gate is not None and host[2]._gate is None
    assert ("skip_step", 40) in gated[3] and ("skip_step", 70) in gated[3]
    assert gated[2].gate_mismatches == 0
    _same_training(gated, host)
    # The steps file holds the same values (but the throughput).
    steps = [pd.read_csv(tmp_path / name / "steps.00000.csv").drop(columns="samples_per_sec")
             for name in ("gated", "host")]
    pd.testing.assert_frame_equal(*steps)


def test_nan_step_withheld_and_its_source_named(tmp_path, tiny_task):
    gated = _train(tmp_path, tiny_task, "cpu", gate=True, nan_steps=(50,), name="gated")
    host = _train(tmp_path, tiny_task, "cpu", gate=False, nan_steps=(50,), name="host")
    _same_training(gated, host)
    nonfinite = [e for e in gated[4] if e["kind"] == "nonfinite"]
    assert nonfinite and nonfinite[0]["step"] == 50 and nonfinite[0]["module"] == "<input>"
    assert all(torch.isfinite(p).all() for p in gated[0].parameters())


def test_lasting_spike_rolled_back_the_same(tmp_path, tiny_task):
    gated = _train(tmp_path, tiny_task, "cpu", gate=True, corrupt_at=60, name="gated")
    host = _train(tmp_path, tiny_task, "cpu", gate=False, corrupt_at=60, name="host")
    assert gated[2].rollbacks == host[2].rollbacks == 1
    _same_training(gated, host)


def test_gate_refused_where_it_cannot_work(tmp_path):
    model = torch.nn.Linear(2, 1)
    with pytest.raises(ValueError, match="async_verdict=True, but the optimizer SGD takes no found_inf"):
        Sentinel(model, torch.optim.SGD(model.parameters(), lr=0.1), log_dir=str(tmp_path / "a"), async_verdict=True)
    with pytest.raises(ValueError, match="not fused: pass fused=True"):
        Sentinel(model, torch.optim.AdamW(model.parameters()), log_dir=str(tmp_path / "b"), async_verdict=True)
    bn = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    with pytest.raises(ValueError, match="BatchNorm running statistics"):
        Sentinel(bn, torch.optim.AdamW(bn.parameters(), fused=True), log_dir=str(tmp_path / "d"), async_verdict=True)
    scaler = torch.amp.GradScaler("cpu")
    assert "GradScaler" in gate_unsupported([torch.optim.AdamW(model.parameters(), fused=True)], scaler, 1, True)
    # Automatic: off on the CPU, and where the setup does not allow it.
    sen = Sentinel(model, torch.optim.AdamW(model.parameters(), fused=True), log_dir=str(tmp_path / "c"))
    assert sen._gate is None
    with pytest.raises(TypeError, match="async_verdict"):
        SentinelConfig.from_options(async_verdict="yes")


def test_stale_verdict_is_not_left_on_the_optimizer(tmp_path):
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.AdamW(model.parameters(), fused=True)
    sen = Sentinel(model, opt, log_dir=str(tmp_path / "run"), async_verdict=True, tensorboard=False)
    sen.begin_batch(torch.ones(4, 2), 0)
    loss = model(torch.ones(4, 2)).pow(2).mean()
    loss.backward()
    assert sen.check(loss)
    assert "found_inf" in opt.__dict__
    opt.step()
    sen.end_step()
    assert "found_inf" not in opt.__dict__
    sen.begin_batch(torch.ones(4, 2), 1)
    sen.check(model(torch.ones(4, 2)).pow(2).mean())
    sen.close()  # measured, never finished
    assert "found_inf" not in opt.__dict__


def test_a_step_set_aside_is_judged_before_a_checkpoint_and_at_close(tmp_path):
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.AdamW(model.parameters(), fused=True)
    sen = Sentinel(model, opt, log_dir=str(tmp_path / "run"), async_verdict=True, tensorboard=False)
    for i in range(3):
        sen.begin_batch(torch.ones(4, 2), i)
        loss = model(torch.ones(4, 2)).pow(2).mean()
        loss.backward()
        assert sen.check(loss)
        opt.step()
        sen.end_step()
    assert sen.last_record["step"] == 1  # step 2 is judged at the next check
    assert sen.state_dict()["step"] == 3 and sen.last_record["step"] == 2
    sen.begin_batch(torch.ones(4, 2), 3)
    loss = model(torch.ones(4, 2)).pow(2).mean()
    loss.backward()
    sen.check(loss)
    opt.step()
    sen.end_step()
    sen.close()
    steps = pd.read_csv(tmp_path / "run" / "steps.00000.csv")
    assert steps["step"].tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("seed", range(20))
def test_spike_limit_is_where_the_rule_flags(seed):
    rng = random.Random(seed)
    config = SpikeConfig(window=rng.choice([8, 16, 64]), warmup=rng.choice([4, 8]), atol=rng.choice([0.0, 0.2]))
    det = SpikeDetector(config)
    level = rng.uniform(0.01, 10)
    for _ in range(rng.randrange(0, 80)):
        det.update(level * math.exp(rng.gauss(0, rng.choice([0.001, 0.05, 0.3]))))
    limit = det.limit()
    if math.isinf(limit):
        probe = SpikeDetector(config)
        probe.load_state_dict(det.state_dict())
        assert not probe.update(level * 1e6).is_spike
        return
    for factor, expected in ((1 + 1e-6, True), (1 - 1e-6, False)):
        probe = SpikeDetector(config)
        probe.load_state_dict(det.state_dict())
        assert probe.update(limit * factor).is_spike is expected


def test_limits_follow_the_policy():
    cfg = SentinelConfig.from_options(spike_warmup=4, grad_spike_warmup=4)
    judge = StepJudge(cfg)
    for i in range(30):
        judge.judge(i, 2.0 + 0.01 * (i % 3), 1.0 + 0.01 * (i % 2))
    gate = DeviceGate(cfg.guard)
    loss_limit, grad_limit = gate.limits(judge, GuardState(), False)
    assert 2.0 < loss_limit < 3.0 and 1.0 < grad_limit < 2.0
    # rollback=False withholds nothing; the third grad-norm outlier in a row is applied.
    assert DeviceGate(SentinelConfig.from_options(rollback=False).guard).limits(judge, GuardState(), False) == \
        (math.inf, math.inf)
    assert gate.limits(judge, GuardState(grad_streak=2), False)[1] == math.inf
