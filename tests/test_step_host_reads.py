"""The step path reads device values back to the host once per step.

Every ``.item()``, ``.tolist()``, ``.numpy()``, ``float(t)``, ``int(t)``, ``bool(t)`` of a tensor
is a device-to-host synchronisation on an accelerator: the host stops until the device has
caught up. sentinel's hot path batches all of a step's metrics into one transfer; these tests
count every such read made inside ``begin_batch`` / ``check`` / ``end_step`` of a raw loop
(``begin_batch`` is what ``sen.batches(loader)`` calls per batch; the loader's own reads are
the loop's, not sentinel's).
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from sentinel import Sentinel, load_run

# Tensor methods that read a value back to the host (a sync on CUDA).
HOST_READS = ("item", "tolist", "numpy", "__float__", "__int__", "__bool__", "__index__")
STEPS = 60
MODULE_EVERY, SNAPSHOT_EVERY, ATTENTION_EVERY = 10, 25, 50  # the defaults


class HostReads:
    """Counts host reads of tensors while :attr:`active`, by patching ``torch.Tensor``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.active = False
        self.calls: list[str] = []
        for name in HOST_READS:
            original = getattr(torch.Tensor, name)

            def counted(tensor, *args, _name=name, _original=original, **kwargs):
                if self.active:
                    self.calls.append(_name)
                return _original(tensor, *args, **kwargs)

            monkeypatch.setattr(torch.Tensor, name, counted)

    def during(self, fn, *args):
        self.active = True
        try:
            return fn(*args)
        finally:
            self.active = False


def _sampled(step: int) -> bool:
    """Steps with periodic work: per-module norms, attention, a snapshot after the update."""
    return step % MODULE_EVERY == 0 or step % ATTENTION_EVERY == 0 or (step + 1) % SNAPSHOT_EVERY == 0


def _run(tmp_path, tiny_task, reads: HostReads, *, optimizer: str = "sgd", scaler: bool = False,
         spike_at: int | None = None, on_grads=None, device: torch.device = torch.device("cpu"),
         named_by_content: bool = False) -> tuple[dict[int, list[str]], Sentinel]:
    """A raw loop at sentinel's defaults; returns the host reads made inside sentinel's calls
    (``begin_batch``, ``check``, ``end_step``), per step. ``spike_at``: that step's loss is scaled by 50 (a loss spike). ``on_grads(step,
    model)`` is called after backward, before ``check``. ``named_by_content``: batches without
    sample indices, so the guard names each by a hash of its tensors."""
    Data, Net, mse, _ = tiny_task
    torch.manual_seed(0)
    collate = (lambda items: {k: torch.stack([it[k] for it in items]) for k in ("x", "y")}) \
        if named_by_content else None
    loader = torch.utils.data.DataLoader(Data(n=16 * STEPS, device=device), batch_size=16, shuffle=False,
                                         collate_fn=collate)
    model = Net().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9) if optimizer == "sgd" else \
        torch.optim.AdamW(model.parameters(), lr=torch.tensor(1e-3, device=device) if optimizer == "adamw_tensor_lr"
                          else 1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))
    grad_scaler = torch.amp.GradScaler(device.type, init_scale=2.0**10) if scaler else None
    sen = Sentinel(model, opt, scheduler=sched, scaler=grad_scaler, log_dir=str(tmp_path / "run"), loss_fn=mse)
    per_step: dict[int, list[str]] = {}
    for step, batch in enumerate(loader):  # what sen.batches(loader) does, minus the loader's own reads
        reads.calls = []
        assert reads.during(sen.begin_batch, batch, step)
        opt.zero_grad()
        loss = mse(model, batch) * (50.0 if step == spike_at else 1.0)
        (grad_scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            grad_scaler.unscale_(opt)
        if on_grads is not None:
            on_grads(step, model)
        inside = list(reads.calls)
        reads.calls = []
        apply = reads.during(sen.check, loss)
        inside += reads.calls
        if scaler:
            grad_scaler.step(opt)  # the user's own calls: not counted
            grad_scaler.update()
        elif apply:
            opt.step()
        sched.step()
        reads.calls = []
        reads.during(sen.end_step)
        per_step[step] = inside + reads.calls
    sen.close()
    return per_step, sen


@pytest.mark.parametrize("optimizer,scaler", [("sgd", False), ("adamw", False), ("adamw", True),
                                              ("adamw_tensor_lr", False)])  # lr a tensor: read with the rest
def test_one_host_read_per_step(tmp_path, tiny_task, monkeypatch, optimizer, scaler, device):
    reads = HostReads(monkeypatch)
    per_step, sen = _run(tmp_path, tiny_task, reads, optimizer=optimizer, scaler=scaler, device=device)
    assert sen.step == STEPS and sen.rollbacks == 0
    plain = {step: calls for step, calls in per_step.items() if not _sampled(step)}
    assert len(plain) > STEPS // 2
    # Exactly one: the step's metrics (loss, grad norms, loss scale) come back in one transfer.
    assert {step: len(calls) for step, calls in plain.items()} == {step: 1 for step in plain}, plain
    # Sampled steps add per-module norms and attention to that same transfer; a snapshot reads nothing.
    assert all(len(calls) == 1 for calls in per_step.values()), per_step


class DeviceSyncs:
    """CUDA's own account: ``torch.cuda.set_sync_debug_mode("warn")`` warns at every operation
    that makes the host wait for the device (a read back, a blocking copy either way, a
    ``nonzero``), whichever Python call it hides behind. Same interface as :class:`HostReads`."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.during(torch.cuda.synchronize)  # the mode's own first use, outside any count
        self.calls = []

    def during(self, fn, *args):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                return fn(*args)
            finally:
                torch.cuda.set_sync_debug_mode("default")
                self.calls += [f"{w.filename}:{w.lineno}" for w in caught
                               if "synchronizing" in str(w.message)]


@pytest.mark.parametrize("optimizer,scaler,named_by_content", [("sgd", False, False), ("adamw", True, True)])
def test_one_device_synchronisation_per_step_on_cuda(tmp_path, tiny_task, optimizer, scaler, named_by_content,
                                                     cuda_device):
    # Every step, the first included (its one-time copies to the device are queued from pinned
    # memory) and the snapshot steps (their copies go to pinned memory without waiting).
    per_step, sen = _run(tmp_path, tiny_task, DeviceSyncs(), optimizer=optimizer, scaler=scaler,
                         device=cuda_device, named_by_content=named_by_content)
    assert sen.step == STEPS and sen.rollbacks == 0
    assert {step: len(calls) for step, calls in per_step.items()} == {step: 1 for step in per_step}, per_step


def test_the_counter_sees_an_extra_read(tmp_path, tiny_task, monkeypatch):
    # The same loop with one more .item() hidden in the step path: the count goes to two.
    from sentinel.guard.judge import StepJudge

    original = StepJudge.judge

    def judge_with_a_read(self, step, loss, grad_norm, **kwargs):
        torch.tensor(1.0).item()
        return original(self, step, loss, grad_norm, **kwargs)

    monkeypatch.setattr(StepJudge, "judge", judge_with_a_read)
    reads = HostReads(monkeypatch)
    per_step, _ = _run(tmp_path, tiny_task, reads)
    assert all(len(calls) == 2 for calls in per_step.values()), per_step


def test_a_spike_between_module_steps_still_records_its_per_module_norms(tmp_path, tiny_task, monkeypatch):
    """Per-module norms are read on every ``module_every``-th step only, and on a flagged step
    (from the per-parameter norms of that step, read then: the one extra read is on it)."""
    spike = 33
    expected: dict[str, float] = {}

    def independent_norms(step, model):
        if step != spike:
            return
        for group in ("blocks.0.0", "blocks.1.0", "head"):
            module = model.get_submodule(group)
            expected[group] = math.sqrt(sum(float(p.grad.double().pow(2).sum()) for p in module.parameters()))

    reads = HostReads(monkeypatch)
    per_step, sen = _run(tmp_path, tiny_task, reads, spike_at=spike, on_grads=independent_norms)
    steps = load_run(str(tmp_path / "run")).steps
    module_rows = steps["grad_norm/head"].dropna().index.tolist()
    assert module_rows == [0, 10, 20, 30, spike, 40, 50]
    for group, value in expected.items():
        assert steps.loc[spike, f"grad_norm/{group}"] == pytest.approx(value, rel=1e-5)
    recorded = [steps.loc[spike, f"grad_norm/{g}"] for g in expected]
    assert steps.loc[spike, "grad_norm/total"] == pytest.approx(math.sqrt(sum(v * v for v in recorded)), rel=1e-5)
    assert len(per_step[spike]) >= 2  # the flagged step pays its second read
