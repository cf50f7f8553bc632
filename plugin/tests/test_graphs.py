"""Graph capture and replay on emu: torch.emu.EmuGraph / torch.emu.graph(...), private memory pools, a synchronising
call refused during capture, and torch.accelerator.Graph where torch has the device-generic interface (2.13)."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap

import pytest
import torch
from packaging.specifiers import SpecifierSet
from smoke_gates import TORCH, requires_captured_backward, requires_graphs, requires_torch

pytestmark = [pytest.mark.feature("graphs"), requires_graphs()]


def test_replay_gives_eager_results() -> None:
    """The quick check every cell runs: captured work is not run at capture, and each replay computes what eager
    computes on the inputs copied into the captured tensors."""
    static_x = torch.zeros(4, 3, device="emu")
    weight = torch.arange(12.0, device="emu").reshape(3, 4) / 10
    g = torch.emu.EmuGraph()
    with torch.emu.graph(g):
        assert torch.emu.is_current_stream_capturing()
        static_y = (static_x @ weight + 1).relu().sum(dim=0)
    assert not torch.emu.is_current_stream_capturing()
    for seed in range(3):
        x = torch.randn(4, 3, generator=torch.Generator().manual_seed(seed))
        static_x.copy_(x)
        g.replay()
        expected = (x @ weight.cpu() + 1).relu().sum(dim=0)
        torch.testing.assert_close(static_y.cpu(), expected)


def test_graph_takes_torch_cuda_graphs_later_keywords() -> None:
    """torch 2.14's make_graphed_callables passes enable_annotations to the graph context (torch.cuda.graph, which
    transfer_to_emu maps to torch.emu.graph): their defaults are accepted, and what needs CUPTI says so."""
    x = torch.ones(4, device="emu")
    g = torch.emu.EmuGraph()
    with torch.emu.graph(g, enable_annotations=False, annotation_config=None, check_input_liveness=False):
        y = x * 2
    g.replay()
    torch.testing.assert_close(y.cpu(), torch.full((4,), 2.0))
    with pytest.raises(NotImplementedError, match="CUPTI"):
        torch.emu.graph(torch.emu.EmuGraph(), enable_annotations=True)


KEPT_TO_THE_END = """
    import builtins

    import torch
    import torch_emu

    x = torch.ones(4, device="emu")
    g = torch.emu.EmuGraph()
    with torch.emu.graph(g):
        y = x * 2
    builtins.emu_graph_kept_to_the_end = g  # builtins are cleared after torch's modules at exit
    print("captured")
"""


def test_a_graph_collected_at_exit_is_destroyed_quietly() -> None:
    """A graph that lives until interpreter exit (torch 2.1 on Python 3.9 printed "Exception ignored in
    EmuGraph.__del__": torch.ops' lookup fails once torch._ops' globals are cleared)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KEPT_TO_THE_END)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.split() == ["captured"], done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr


@pytest.mark.deep
@requires_captured_backward()
def test_captured_training_step_replays_with_eager_results() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to("emu")
    twin = copy.deepcopy(model)
    batches = [(torch.randn(32, 16), torch.randn(32, 1)) for _ in range(6)]

    def step(net: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        # Not mse_loss or pow: they run through the CPU fallback on emu, whose host copies cannot be captured.
        error = net(x) - t
        loss = (error * error).mean()
        loss.backward()
        opt.step()
        return loss

    # torch 2.1 and 2.2 have _foreach_add_ kernels for CPU and CUDA only: on emu it runs through the CPU fallback,
    # whose host copies cannot be captured; torch 2.4 has a CompositeExplicitAutograd kernel for any device.
    foreach = None if TORCH in SpecifierSet(">=2.4") else False
    opt = torch.optim.SGD(model.parameters(), lr=0.05, foreach=foreach)
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.05, foreach=foreach)
    static_x, static_t = batches[0][0].to("emu"), batches[0][1].to("emu")
    # Warm up on a side stream, as torch.cuda's recipe does (lazy state is made before the capture).
    side = torch.emu.Stream()
    side.wait_stream(torch.emu.current_stream())
    with torch.emu.stream(side):
        step(model, opt, static_x, static_t)
    torch.emu.current_stream().wait_stream(side)
    step(twin, twin_opt, static_x, static_t)

    g = torch.emu.EmuGraph()
    with torch.emu.graph(g):
        static_loss = step(model, opt, static_x, static_t)
    # The capture ran nothing: the model is still equal to its twin.
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach().cpu())
    for x, t in batches[1:]:
        static_x.copy_(x)
        static_t.copy_(t)
        g.replay()
        eager_loss = step(twin, twin_opt, x.to("emu"), t.to("emu"))
        torch.testing.assert_close(static_loss.cpu(), eager_loss.cpu())
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach().cpu())


@pytest.mark.deep
def test_a_synchronising_call_raises_at_the_call_and_the_stream_stays_usable() -> None:
    x = torch.ones(8, device="emu")
    g = torch.emu.EmuGraph()
    with pytest.raises(RuntimeError, match="captur"), torch.emu.graph(g):
        y = x * 2
        y.sum().item()  # waits for the device: not allowed while capturing
    assert not torch.emu.is_current_stream_capturing()
    assert (x * 3).sum().item() == 24
    # The same graph captures again once reset by the failed block.
    with torch.emu.graph(g):
        y = x * 4
    g.replay()
    assert y.sum().item() == 32


@pytest.mark.deep
def test_graphs_share_a_pool_that_lives_as_long_as_they_do() -> None:
    reserved = torch.ops.torch_emu.graph_pool_reserved_bytes
    pool = torch.emu.graph_pool_handle()
    x = torch.ones(1024, device="emu")
    first, second = torch.emu.EmuGraph(), torch.emu.EmuGraph()
    with torch.emu.graph(first, pool=pool):
        a = x + 1
    with torch.emu.graph(second, pool=first.pool()):
        b = a * 2
    assert first.pool() == second.pool() == pool
    assert reserved(0, *pool) >= 2 * 4096  # both captures' outputs came from the shared pool
    first.replay()
    second.replay()
    assert b.sum().item() == 4 * 1024
    own = torch.emu.EmuGraph()
    with torch.emu.graph(own):
        c = x - 1
    assert own.pool() != pool and reserved(0, *own.pool()) > 0
    first.reset()
    assert reserved(0, *pool) > 0  # the second graph still holds the pool
    second.reset()
    assert reserved(0, *pool) == 0
    own.reset()
    del c
    assert reserved(0, *own.pool()) == 0


@pytest.mark.deep
@requires_torch(">=2.13", "torch.accelerator.Graph (at::GraphImplInterface)")
def test_accelerator_graph_replays_on_emu() -> None:
    static_x = torch.zeros(5, device="emu")
    stream = torch.Stream(device="emu")
    graph = torch.accelerator.Graph(keep_graph=True)
    with stream, graph:
        static_y = static_x * 3 + 1
    static_x.copy_(torch.arange(5.0))
    graph.replay()
    torch.testing.assert_close(static_y.cpu(), torch.arange(5.0) * 3 + 1)
    assert graph.pool() != (0, 0)
    graph.reset()


@pytest.mark.deep
def test_random_ops_replay_fresh_numbers_that_follow_manual_seed() -> None:
    def draws() -> list[tuple[torch.Tensor, torch.Tensor]]:
        torch.emu.manual_seed(5)
        g = torch.emu.EmuGraph()
        with torch.emu.graph(g):
            a = torch.rand(64, device="emu")
            b = torch.randn(64, device="emu")
        out = []
        for _ in range(3):
            g.replay()
            out.append((a.cpu(), b.cpu()))
        return out

    first, again = draws(), draws()
    for (a1, b1), (a2, b2) in zip(first, again):  # the same seed, the same numbers
        assert torch.equal(a1, a2) and torch.equal(b1, b2)
    assert not torch.equal(first[0][0], first[1][0])  # each replay samples afresh
    assert not torch.equal(first[0][1], first[1][1])
    assert ((first[0][0] >= 0) & (first[0][0] < 1)).all()


@pytest.mark.deep
@pytest.mark.skipif(TORCH in SpecifierSet(">=2.3"), reason="torch >= 2.3 captures emu's backward: the test above runs")
def test_make_graphed_callables_refuses_a_backward_it_cannot_capture() -> None:
    """Before torch 2.3, emu's backward runs outside the capture: graphing a module whose parameters or inputs need
    grad raises, rather than giving zero gradients, and leaves no capture behind."""
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU()).to("emu")
    with pytest.raises(RuntimeError, match=r"cannot capture a backward on torch .*before torch 2\.3"):
        torch.emu.make_graphed_callables(model, (torch.randn(4, 16, device="emu"),))
    model.requires_grad_(False)
    with pytest.raises(RuntimeError, match="cannot capture a backward"):
        torch.emu.make_graphed_callables(model, (torch.randn(4, 16, device="emu", requires_grad=True),))
    assert not torch.emu.is_current_stream_capturing()
    x = torch.randn(4, 16, device="emu")
    torch.testing.assert_close(model(x).cpu(), model.cpu()(x.cpu()))


@pytest.mark.deep
@requires_captured_backward()
def test_make_graphed_callables_gives_eager_outputs_and_gradients() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to("emu")
    twin = copy.deepcopy(model)
    graphed = torch.emu.make_graphed_callables(model, (torch.randn(32, 16, device="emu"),))
    for _ in range(3):
        model.zero_grad(set_to_none=True)
        twin.zero_grad(set_to_none=True)
        x = torch.randn(32, 16, device="emu")
        out, ref = graphed(x), twin(x)
        torch.testing.assert_close(out.cpu(), ref.cpu())
        out.sum().backward()
        ref.sum().backward()
        for p, q in zip(model.parameters(), twin.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad.cpu())
