"""RNG capture and restore: every generator comes back, and a cached raw state is never taken
for a changed one."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from sentinel.rng import capture_rng, restore_rng


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
