"""Training on emu gives the CPU's losses."""

import copy

import pytest
import torch

pytestmark = pytest.mark.feature("autograd")


def train(model, data, target, device, steps=8):
    model = model.to(device)
    data, target = data.to(device), target.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(data), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_mlp_losses_match_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)
    )
    data, target = torch.randn(64, 16), torch.randint(0, 4, (64,))
    cpu = train(copy.deepcopy(model), data, target, "cpu")
    emu = train(copy.deepcopy(model), data, target, "emu")
    assert emu[-1] < emu[0]
    assert emu == pytest.approx(cpu, rel=1e-4, abs=1e-5)


def test_gradients_of_native_ops():
    x = torch.randn(4, 5, requires_grad=True)
    xe = x.detach().emu().requires_grad_()
    for t in (x, xe):
        (torch.softmax(t @ t.t(), 1).sum(0) * torch.arange(4.0, device=t.device)).sum().backward()
    torch.testing.assert_close(xe.grad.cpu(), x.grad, atol=1e-5, rtol=1e-5)
