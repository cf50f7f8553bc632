"""torch.compile(backend="emugraphs"): AOTAutograd's graphs captured once and replayed on emu, and the warning that
mode="reduce-overhead" replays nothing on emu."""

from __future__ import annotations

import copy
import subprocess
import sys
import warnings

import pytest
import torch
from smoke_gates import dynamo_unavailable, inductor_device_registry_unavailable, requires_graphs

from torch_emu._graphs_backend import EmuGraphsWarning

pytestmark = [pytest.mark.feature("compile_graphs"), pytest.mark.deep, requires_graphs()]


def skip_unless_ready(reason: str | None) -> None:
    if reason is not None:
        pytest.skip(reason)


def test_compiled_training_step_replays_with_eager_results() -> None:
    skip_unless_ready(dynamo_unavailable())
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to("emu")
    twin = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.05)
    compiled = torch.compile(model, backend="emugraphs")
    with warnings.catch_warnings():
        warnings.simplefilter("error", EmuGraphsWarning)  # every graph is captured, none falls back to eager
        for _ in range(4):
            x, t = torch.randn(32, 16, device="emu"), torch.randn(32, 1, device="emu")
            for net, o in ((compiled, opt), (twin, twin_opt)):
                o.zero_grad(set_to_none=True)
                error = net(x) - t
                (error * error).mean().backward()
                o.step()
        # Replayed, the forward writes the graph's static output: two calls give the same tensor's storage.
        first, second = compiled(x), compiled(x)
    assert first.data_ptr() == second.data_ptr()
    torch.testing.assert_close(second.detach().cpu(), twin(x).detach().cpu())
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach().cpu())


def test_a_graph_that_cannot_be_captured_warns_and_runs_eagerly() -> None:
    skip_unless_ready(dynamo_unavailable())
    compiled = torch.compile(lambda x: (x**2).sum(), backend="emugraphs")  # pow runs through the CPU fallback
    x = torch.arange(4.0, device="emu")
    with pytest.warns(EmuGraphsWarning, match="could not capture"):
        assert compiled(x).item() == 14
    assert compiled(x + 1).item() == 30


def test_reduce_overhead_warns_that_inductor_replays_no_graphs_on_emu() -> None:
    skip_unless_ready(inductor_device_registry_unavailable())
    from torch_emu import _inductor_backend

    if not _inductor_backend.route_enabled():  # mode='reduce-overhead' compiles with Inductor, as test_models gates
        pytest.skip(
            f"not available: Inductor generates no code for emu on torch {torch.__version__} "
            f"(verified on {_inductor_backend.verified_releases_text()})"
        )
    code = (
        "import warnings, torch, torch_emu\n"
        "warnings.simplefilter('always')\n"
        "f = torch.compile(lambda x: x * 2 + 1, mode='reduce-overhead')\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    assert f(torch.ones(3, device='emu')).sum().item() == 9\n"
        "print(sum('emugraphs' in str(w.message) for w in seen))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "1", done.stdout + done.stderr
