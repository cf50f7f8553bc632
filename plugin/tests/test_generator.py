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


def test_default_generators_are_the_devices_own():
    """torch.emu.default_generators[i] is device i's default generator: seeding it is torch.emu.manual_seed there."""
    g0, g1 = torch.emu.default_generators[0], torch.emu.default_generators[1]
    assert isinstance(g0, torch.Generator) and g0 is torch.emu.default_generators[0]
    assert g0.device == torch.device("emu", 0) and g1.device == torch.device("emu", 1)
    assert len(torch.emu.default_generators) == torch.emu.device_count()
    g1.manual_seed(1234)
    with torch.emu.device(1):
        assert torch.emu.initial_seed() == 1234
    torch.emu.manual_seed(5)
    assert g0.initial_seed() == 5 and g1.initial_seed() == 1234
    a = torch.randn(8, device="emu").cpu()
    g0.manual_seed(5)
    assert torch.equal(torch.randn(8, device="emu", generator=g0).cpu(), a)
    torch.emu.manual_seed_all(2**64 - 1)  # the full unsigned 64-bit range, as torch.cuda takes it
    assert [g.initial_seed() for g in torch.emu.default_generators] == [2**64 - 1] * torch.emu.device_count()


def test_statistics_are_sane():
    torch.emu.manual_seed(0)
    x = torch.randn(100_000, device="emu")
    assert abs(x.mean().item()) < 0.02 and abs(x.cpu().std().item() - 1) < 0.02
    u = torch.empty(100_000, device="emu").uniform_(2, 3).cpu()
    assert u.min().item() >= 2 and u.max().item() < 3


def fallback_draws(generator=None):
    probs = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]], device="emu")
    return [
        torch.randperm(20, device="emu", generator=generator).cpu(),
        torch.multinomial(probs, 3, generator=generator).cpu(),
        torch.multinomial(probs, 8, replacement=True, generator=generator).cpu(),
        torch.empty(10, device="emu").exponential_(generator=generator).cpu(),
    ]


@pytest.mark.feature("generator_fallback_ops")
def test_fallback_random_ops_take_an_emu_generator():
    # These run through the CPU fallback: the emu generator becomes a CPU generator seeded from its state.
    g = torch.Generator(device="emu")
    g.manual_seed(5)
    a = fallback_draws(g)
    g.manual_seed(5)
    b = fallback_draws(g)
    c = fallback_draws(g)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(b, c))
    assert sorted(a[0].tolist()) == list(range(20))
    assert a[1].shape == (2, 3) and len(set(a[1][0].tolist())) == 3


@pytest.mark.feature("generator_fallback_ops")
def test_fallback_random_ops_follow_emu_manual_seed():
    torch.emu.manual_seed(11)
    a = fallback_draws()
    torch.manual_seed(0)  # the CPU generator plays no part
    torch.emu.manual_seed(11)
    b = fallback_draws()
    assert all(torch.equal(x, y) for x, y in zip(a, b))
