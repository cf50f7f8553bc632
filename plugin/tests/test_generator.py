"""Random numbers on emu: reproducible with manual_seed, with explicit generators and rng state."""

import pytest
import torch

pytestmark = pytest.mark.feature("generator")


def draw():
    return torch.cat(
        [
            torch.randn(100, device="emu"),
            torch.rand(50, device="emu"),
            torch.randint(0, 10, (20,), device="emu").float(),
            torch.empty(30, device="emu").bernoulli_(0.3),
        ]
    ).cpu()


def test_manual_seed_reproduces():
    torch.emu.manual_seed(1234)
    a = draw()
    torch.emu.manual_seed(1234)
    b = draw()
    torch.emu.manual_seed(4321)
    c = draw()
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.emu.initial_seed() == 4321


def test_rng_state_round_trip_and_generators():
    torch.emu.manual_seed(7)
    state = torch.emu.get_rng_state()
    a = torch.randn(10, device="emu").cpu()
    torch.emu.set_rng_state(state)
    assert torch.equal(torch.randn(10, device="emu").cpu(), a)
    g = torch.Generator(device="emu")
    g.manual_seed(99)
    x = torch.randn(10, device="emu", generator=g).cpu()
    g.manual_seed(99)
    assert torch.equal(torch.randn(10, device="emu", generator=g).cpu(), x)


def test_statistics_are_sane():
    torch.emu.manual_seed(0)
    x = torch.randn(100_000, device="emu")
    assert abs(x.mean().item()) < 0.02 and abs(x.cpu().std().item() - 1) < 0.02
    u = torch.empty(100_000, device="emu").uniform_(2, 3).cpu()
    assert u.min().item() >= 2 and u.max().item() < 3
