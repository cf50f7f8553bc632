"""torch.compile on emu: Dynamo's device interface, graphs that carry emu devices, and the default backend."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from unittest import mock

import pytest
import torch
from smoke_gates import (
    child_process_deep,
    dynamo_device_registry_unavailable,
    dynamo_unavailable,
    inductor_device_registry_unavailable,
)

import torch_emu.streams


def skip_unless_ready(reason: str | None) -> None:
    if reason is not None:
        pytest.skip(reason)


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """code in a fresh interpreter (Dynamo and Inductor start unloaded there), with env added to this one's."""
    return subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )


def mlp(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w + b).sum(0)


@child_process_deep
@pytest.mark.feature("compile_device_interface")
def test_importing_torch_emu_leaves_dynamo_unloaded_and_registers_once_it_loads():
    skip_unless_ready(dynamo_device_registry_unavailable())
    code = (
        "import sys, torch, torch_emu\n"
        "assert 'torch._dynamo' not in sys.modules, 'import torch_emu loaded Dynamo'\n"
        "from torch._dynamo.device_interface import get_interface_for_device\n"
        "print(get_interface_for_device('emu').__name__, get_interface_for_device('emu:1').__name__)\n"
    )
    done = run_python(code, EMU_DEVICE_COUNT="2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["EmuInterface", "EmuInterface"]
    assert "could not register" not in done.stderr


@pytest.mark.feature("compile_device_interface")
def test_device_interface_drives_emu_devices_and_streams():
    skip_unless_ready(dynamo_device_registry_unavailable())
    from torch._dynamo.device_interface import get_interface_for_device

    emu = get_interface_for_device("emu")
    assert emu is get_interface_for_device(torch.device("emu", 1))
    assert emu.is_available() and emu.device_count() == torch.emu.device_count() >= 2
    assert emu.current_device() == 0
    assert emu.exchange_device(1) == 0 and torch.emu.current_device() == 1
    assert emu.maybe_exchange_device(0) == 1 and emu.current_device() == 0
    with emu.device(1):
        assert torch.emu.current_device() == 1
    major, minor = torch.emu.get_device_capability(1)
    assert emu.get_compute_capability("emu:1") == major * 10 + minor
    assert emu.get_device_properties(1).name == emu.Worker.get_device_properties("emu:1").name

    side = emu.Stream(device="emu:0")
    assert isinstance(side, torch_emu.streams.Stream) and side != emu.current_stream()
    with emu.stream(side):
        assert emu.current_stream() == side
        assert emu.get_raw_stream(0) == side.stream_id
        x = torch.ones(256, 256, device="emu") * 3
        done = emu.Event()
        done.record()
    emu._set_stream_by_id(side.stream_id, side.device_index, side.device_type)
    assert torch.emu.current_stream() == side
    emu.set_stream(torch.emu.default_stream())
    done.synchronize()
    emu.synchronize("emu:0")
    assert done.query() and x.sum().item() == 3 * 256 * 256
    assert emu.memory_allocated(0) == torch.emu.memory_allocated(0) > 0


def graph_devices(gm: torch.fx.GraphModule, key: str) -> set[torch.device]:
    values = (node.meta.get(key) for node in gm.graph.nodes)
    return {v.device for v in values if isinstance(v, torch.Tensor)}


@pytest.mark.deep  # smoke.tiers: compiles (Dynamo, AOTAutograd) depend on the wheel and torch alone: once per build
@pytest.mark.feature("compile")
@pytest.mark.parametrize("index", [0, 1])
def test_captured_graphs_carry_the_emu_device(index: int):
    skip_unless_ready(dynamo_unavailable())
    import torch._dynamo
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    device = torch.device("emu", index)
    dynamo_graphs: list[set[torch.device]] = []
    aot_graphs: list[set[torch.device]] = []

    def dynamo_capture(gm: torch.fx.GraphModule, example_inputs: list) -> torch.fx.GraphModule:
        dynamo_graphs.append(graph_devices(gm, "example_value"))
        return gm

    def aot_capture(gm: torch.fx.GraphModule, example_inputs: list):
        aot_graphs.append(graph_devices(gm, "val"))
        return make_boxed_func(gm)

    x, w, b = (torch.randn(*shape, device=device) for shape in ((4, 8), (8, 8), (8,)))
    w.requires_grad_(True)
    torch._dynamo.reset()
    out = torch.compile(mlp, backend=dynamo_capture)(x, w, b)
    assert dynamo_graphs == [{device}] and out.device == device

    torch._dynamo.reset()
    out = torch.compile(mlp, backend=aot_autograd(fw_compiler=aot_capture, bw_compiler=aot_capture))(x, w, b)
    out.sum().backward()
    assert aot_graphs == [{device}, {device}]  # forward, then backward
    assert w.grad is not None and w.grad.device == device

    torch._dynamo.reset()
    expected = mlp(x, w, b)
    out = torch.compile(mlp, backend="aot_eager")(x, w, b)
    assert out.device == device
    torch.testing.assert_close(out.cpu(), expected.cpu())


def inductor_sources(sources: list[str]):
    """Collects the source of every module Inductor generates while the context is open.

    GraphLowering.save_output_code receives it on torch >= 2.5; 2.1-2.4 have no such hook, so there the module
    GraphLowering.compile_to_module returns is read back from its file.
    """
    from torch._inductor.graph import GraphLowering

    if hasattr(GraphLowering, "save_output_code"):
        return mock.patch.object(GraphLowering, "save_output_code", sources.append)
    compile_to_module = GraphLowering.compile_to_module

    def recording(self: GraphLowering) -> ModuleType:
        module = compile_to_module(self)
        sources.append(Path(module.__file__).read_text())
        return module

    return mock.patch.object(GraphLowering, "compile_to_module", recording)


@pytest.mark.deep
@pytest.mark.feature("compile_backend_name")
def test_backend_named_after_the_device_trains_on_emu(emu_feature_detail):
    skip_unless_ready(dynamo_unavailable())
    import torch._dynamo
    from torch._dynamo.backends.registry import lookup_backend

    from torch_emu import _inductor_backend

    assert lookup_backend("emu") is _inductor_backend.compile_for_emu  # found through the package's entry point
    torch.manual_seed(0)
    x, w, b = (torch.randn(*shape) for shape in ((4, 8), (8, 8), (8,)))
    w.requires_grad_(True)
    w_emu = w.detach().to("emu").requires_grad_(True)
    mlp(x, w, b).sum().backward()
    torch._dynamo.reset()
    sources: list[str] = []
    with inductor_sources(sources):
        out = torch.compile(mlp, backend="emu")(x.to("emu"), w_emu, b.to("emu"))
        out.sum().backward()
    assert out.device.type == "emu"
    torch.testing.assert_close(out.cpu(), mlp(x, w, b).detach())
    torch.testing.assert_close(w_emu.grad.cpu(), w.grad)
    inductor = _inductor_backend.route_enabled()
    assert sum("emu_host_kernel(" in source for source in sources) == (2 if inductor else 0), sources

    torch._dynamo.reset()
    refused = "backend 'emu' compiles graphs of emu and CPU tensors; this graph also has meta"
    with pytest.raises(Exception, match=refused):
        torch.compile(mlp, backend="emu")(*(t.to("meta") for t in (x, w, b)))
    if not inductor:
        torch._dynamo.reset()
        with pytest.raises(Exception, match="takes no options"):
            torch.compile(mlp, backend="emu", options={"max_autotune": True})(x.to("emu"), w_emu, b.to("emu"))
    emu_feature_detail(
        "torch.compile(backend='emu'): "
        + ("Inductor's C++ kernels on emu" if inductor else "AOTAutograd's eager graphs (Inductor's route is off here)")
    )


def default_backend_refuses() -> None:
    """Where emu's Inductor route is off: the default backend fails at once, naming the backends that work."""
    import torch._dynamo
    import torch._inductor.exc as inductor_exc
    from torch._dynamo.exc import BackendCompilerFailed

    # The wrapper differs by release: Dynamo's BackendCompilerFailed, or (torch 2.7) Inductor's own InductorError.
    wrappers: tuple[type[BaseException], ...] = (BackendCompilerFailed,)
    inductor_error = getattr(inductor_exc, "InductorError", None)
    if inductor_error is not None:
        wrappers += (inductor_error,)
    torch._dynamo.reset()
    x, w, b = (torch.randn(*shape, device="emu") for shape in ((4, 8), (8, 8), (8,)))
    with pytest.raises(wrappers) as failed:
        torch.compile(mlp)(x, w, b)
    assert "InductorUnsupportedError" in str(failed.value)
    assert "backend='emu' or 'aot_eager' or 'eager'" in str(failed.value)
    assert "KeyError" not in str(failed.value)


# Before the MLP test: a feature's note comes from its last passing test, and the MLP test sets it.
@child_process_deep
@pytest.mark.feature("compile_default_backend")
def test_default_backend_switched_off_refuses_at_once():
    skip_unless_ready(inductor_device_registry_unavailable())
    code = (
        "import torch, torch_emu\n"
        "def f(x):\n    return torch.relu(x + 1).sum()\n"
        "try:\n    torch.compile(f)(torch.ones(4, device='emu'))\n"
        "except Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    done = run_python(code, TORCH_EMU_INDUCTOR="0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(("BackendCompilerFailed", "InductorError")), done.stdout
    assert "InductorUnsupportedError" in done.stdout and "TORCH_EMU_INDUCTOR=0 turned it off" in done.stdout
    assert "backend='emu' or 'aot_eager' or 'eager'" in done.stdout


@pytest.mark.feature("compile_default_backend")
def test_launch_host_kernel_checks_its_arguments_before_queuing():
    if not hasattr(torch.ops.torch_emu, "launch_host_kernel"):
        pytest.skip("not available: this build has no launch_host_kernel")
    launch = torch.ops.torch_emu.launch_host_kernel
    a, b = torch.ones(4, device="emu:0"), torch.ones(4, device="emu:1")
    with pytest.raises(RuntimeError, match="no kernel entry point"):
        launch(0, [a], [0], [0])
    with pytest.raises(RuntimeError, match="1 kinds for 2 values"):
        launch(1, [a], [0], [0, 1])
    with pytest.raises(RuntimeError, match="two emu devices"):
        launch(1, [a, b], [0, 0], [0, 1])
    with pytest.raises(RuntimeError, match="names tensor 3 of 1"):
        launch(1, [a], [0], [3])
    with pytest.raises(RuntimeError, match="unknown kind 7"):
        launch(1, [a], [7], [0])
    assert a.sum().item() == 4  # nothing was queued


@pytest.mark.deep  # Inductor compiles C++ kernels: the costliest part of the suite, once per build
@pytest.mark.feature("compile_default_backend")
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_default_backend_trains_an_mlp_on_emu(dynamic: bool, emu_feature_detail):
    skip_unless_ready(inductor_device_registry_unavailable())
    import torch._dynamo

    from torch_emu import _inductor_backend

    if not _inductor_backend.route_enabled():
        default_backend_refuses()
        pytest.skip(
            f"not available: Inductor generates no code for emu on torch {torch.__version__}; "
            "torch.compile with the default backend raises at once, naming 'emu', 'aot_eager' and 'eager'"
        )

    torch.manual_seed(0)
    reference = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)
    )
    model = copy.deepcopy(reference).to("emu:1")
    torch._dynamo.reset()
    compiled = torch.compile(model, dynamic=dynamic)
    sources: list[str] = []
    for batch in (8, 5, 3):
        x, target = torch.randn(batch, 16), torch.randn(batch, 4)
        reference.zero_grad()
        model.zero_grad()
        expected = torch.nn.functional.mse_loss(torch.softmax(reference(x), 1), target)
        expected.backward()

        def step(x: torch.Tensor = x, target: torch.Tensor = target) -> torch.Tensor:
            loss = torch.nn.functional.mse_loss(torch.softmax(compiled(x.to("emu:1")), 1), target.to("emu:1"))
            loss.backward()
            return loss

        with inductor_sources(sources):  # the code of each compile
            sources.clear()
            loss = step()
        assert loss.device == torch.device("emu", 1)
        torch.testing.assert_close(loss.cpu(), expected.detach())
        for mine, theirs in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(mine.grad.cpu(), theirs.grad)
        if batch == 8:  # the first call compiles forward and backward; both run Inductor's C++ kernels on emu
            assert sum("emu_host_kernel(" in source for source in sources) >= 2, sources
        elif dynamic:  # one graph with a symbolic batch size serves every batch
            assert sources == [], "a dynamic-shape graph was recompiled for a new batch size"
    emu_feature_detail("Inductor C++ kernels on the emu stream, forward and backward, static and dynamic shapes")
