"""Training on emu gives the CPU's losses; a program whose backward raised exits cleanly."""

import copy
import subprocess
import sys
import textwrap

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


# The caller's backward raises on the CPU while emu's autograd thread is still in a node: the thread takes the GIL
# again after Python began finalizing, and without torch_emu's exit handler (torch_emu/_exit.py) CPython ends it
# inside torch's noexcept frames: "terminate called without an active exception", exit -6.
RAISE_WHILE_EMU_WORKS = """
    import sys, time
    import torch
    import torch_emu  # noqa: F401

    class SlowOnEmu(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            print("emu node started", flush=True)
            time.sleep(0.5)
            return grad * 2

    class RaiseOnCpu(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def backward(ctx, grad):
            time.sleep(0.1)
            raise RuntimeError("backward failed on purpose")

    failing = RaiseOnCpu.apply(torch.ones(4, requires_grad=True)).sum()  # made first: the CPU thread reaches it last
    loss = failing + SlowOnEmu.apply(torch.ones(4, device="emu", requires_grad=True)).cpu().sum()
    try:
        loss.backward()
    except RuntimeError as error:
        print("raised:", error, flush=True)
"""


def test_a_program_whose_backward_raised_exits_cleanly_while_emu_still_works():
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(RAISE_WHILE_EMU_WORKS)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert "emu node started" in child.stdout, child.stdout + child.stderr
    assert "raised: backward failed on purpose" in child.stdout, child.stdout + child.stderr
    assert child.returncode == 0, f"exit {child.returncode}: {child.stderr[-2000:]}"
