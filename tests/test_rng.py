"""RNG capture and restore: every generator comes back, and a cached raw state is never taken
for a changed one."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from sentinel.rng import capture_rng, cuda_devices_of, restore_rng


def _draws() -> tuple[list[float], list[float], list[float], list[float]]:
    return (torch.rand(3).tolist(), np.random.rand(3).tolist(), [random.random() for _ in range(3)],
            np.random.standard_normal(3).tolist())


@pytest.mark.parametrize("cuda", [None, False])
def test_restore_brings_every_generator_back(cuda):
    torch.manual_seed(0), np.random.seed(0), random.seed(0)
    for _ in range(3):  # the cached raw states are compared, updated and reused on the way
        state = capture_rng(cuda=cuda)
        first = _draws()
        restore_rng(state)
        assert _draws() == first


def test_restore_brings_the_cuda_generators_back(cuda_device):
    torch.manual_seed(0)
    state = capture_rng()  # None: asks CUDA, which is there
    assert len(state.torch_cuda) == torch.cuda.device_count()
    first = torch.rand(5, device=cuda_device), torch.nn.functional.dropout(torch.ones(64, device=cuda_device))
    restore_rng(state)
    second = torch.rand(5, device=cuda_device), torch.nn.functional.dropout(torch.ones(64, device=cuda_device))
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    assert not torch.equal(first[0], torch.rand(5, device=cuda_device))  # the generator moved on


def test_a_full_cycle_of_draws_is_a_new_state():
    # 624 draws bring the Mersenne Twister's position back where it was with new words: the
    # cached state must not be taken for the current one.
    np.random.seed(1), random.seed(1)
    before = capture_rng()
    np.random.randint(0, 2**32, size=624, dtype=np.uint32)
    for _ in range(624):
        random.getrandbits(32)
    after = capture_rng()
    assert not np.array_equal(before.numpy[1], after.numpy[1]) and before.numpy[2] == after.numpy[2]
    assert before.python[1][:-1] != after.python[1][:-1] and before.python[1][-1] == after.python[1][-1]
    assert after.numpy[1].tolist() == np.random.get_state()[1].tolist()
    assert after.python == random.getstate()



@pytest.mark.filterwarnings("error")  # numpy warns when a non-MT19937 state is asked for as legacy
def test_a_new_global_bit_generator_is_read_not_the_old_ones_memory():
    """The raw state is read through a view of the generator object's memory, made once per
    object: numpy's set_bit_generator puts in another object, whose state must be read (and a
    generator without the MT19937 layout is read in full)."""
    original = np.random.get_bit_generator()
    try:
        np.random.seed(3)
        capture_rng()  # the view of the original generator is made and cached
        for bit_generator in (np.random.MT19937(7), np.random.PCG64(7), np.random.MT19937(8)):
            np.random.set_bit_generator(bit_generator)
            state = capture_rng()
            first = np.random.rand(4).tolist()
            restore_rng(state)
            assert np.random.rand(4).tolist() == first
    finally:
        np.random.set_bit_generator(original)


def test_a_state_names_its_cuda_devices_through_a_state_dict():
    state = capture_rng(cuda=False)
    assert state.cuda_devices is None and state.cuda_states() == []
    held = type(state)(state.torch_cpu, (torch.zeros(16, dtype=torch.uint8),) * 2, state.numpy, state.python, (1, 3))
    back = type(state).from_state_dict(held.state_dict())
    assert back.cuda_devices == (1, 3) and [d for d, _ in back.cuda_states()] == [1, 3]
    # A state written before the devices were named holds every device, in order.
    old = held.state_dict()
    del old["cuda_devices"]
    assert [d for d, _ in type(state).from_state_dict(old).cuda_states()] == [0, 1]


def test_a_cpu_model_draws_on_no_cuda_generator():
    if torch.cuda.is_initialized():
        pytest.skip("CUDA is in use in this process: its current device is drawn on")
    state = capture_rng(cuda=cuda_devices_of(torch.nn.Linear(2, 2).parameters()))
    assert state.torch_cuda == () and state.cuda_devices == ()
    first = _draws()
    restore_rng(state)
    assert _draws() == first


def test_only_the_models_cuda_device_is_captured_and_restored(cuda_device):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5)).to(cuda_device)
    devices = cuda_devices_of(model.parameters())
    assert devices == (torch.cuda.current_device(),)
    state = capture_rng(cuda=devices)
    assert state.cuda_devices == devices and len(state.torch_cuda) == 1
    x = torch.ones(4, 8, device=cuda_device)
    first = model(x)
    restore_rng(state)
    assert torch.equal(model(x), first)
    # A state naming a device this machine lacks (written on a larger node) restores the rest.
    absent = torch.cuda.device_count()
    wider = type(state)(state.torch_cpu, state.torch_cuda * 2, state.numpy, state.python, devices + (absent,))
    restore_rng(wider)
    assert torch.equal(model(x), first)


def test_the_engine_captures_the_devices_of_its_model(device, tmp_path):
    from sentinel import Sentinel
    model = torch.nn.Linear(4, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sen = Sentinel(model, opt, loss_fn=lambda m, batch: m(batch).square().mean(), log_dir=str(tmp_path))
    x = torch.ones(2, 4, device=device)
    for _ in sen.batches([x]):
        loss = model(x).square().mean()
        sen.add_loss(loss.detach())
        loss.backward()
        if sen.check():
            opt.step()
        opt.zero_grad()
        sen.end_step()
    assert sen._rng is not None
    # A CPU model draws on no CUDA generator, unless this process has CUDA in use (its current device).
    in_use = device.type == "cuda" or torch.cuda.is_initialized()
    assert sen._rng.cuda_devices == ((torch.cuda.current_device(),) if in_use else ())
