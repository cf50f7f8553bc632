"""torch.compile(backend="emugraphs"): AOTAutograd's graphs, each captured once and replayed (as torch_npu's npugraphs).

Inductor's own graph replay (mode="reduce-overhead", its cudagraph trees) accepts only CUDA; this backend replays
emu graphs instead. Each forward and backward graph AOTAutograd makes runs eagerly on its first call (a warm-up on a
side stream), is captured into a torch.emu.EmuGraph with static copies of its inputs, and from then on copies new
inputs into those and replays. As with torch.cuda's graphs, a call's outputs are the graph's static tensors: the next
call overwrites them, so clone what must outlive it. A graph that cannot be captured (an op that runs through the
CPU fallback copies through the host) warns once, naming the reason, and keeps running eagerly.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

BACKEND = "emugraphs"


class EmuGraphsWarning(UserWarning):
    """Graphs are not replayed where one might expect: a graph given to backend 'emugraphs' could not be captured
    and runs eagerly, or mode="reduce-overhead" was asked of Inductor on emu."""


def _static_input(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.device.type == "emu":
        return torch.empty_strided(value.size(), value.stride(), dtype=value.dtype, device=value.device).copy_(value)
    return value


class _Replayed:
    """One AOTAutograd graph: eager on the first call, then replayed from a capture."""

    def __init__(self, graph_module: Callable[..., Any]) -> None:
        self.graph_module = graph_module
        self.graph: Any = None
        self.static_inputs: list[Any] = []
        self.static_outputs: Any = None
        self.eager = False

    def __call__(self, args: list[Any]) -> Any:
        if self.eager:
            return self.graph_module(*args)
        if self.graph is None:
            outputs = self._warm_up(args)
            self._capture(args)
            return outputs
        for static, value in zip(self.static_inputs, args):
            if isinstance(static, torch.Tensor) and static.device.type == "emu" and static is not value:
                static.copy_(value)
        self.graph.replay()
        return self.static_outputs

    def _warm_up(self, args: Sequence[Any]) -> Any:
        side = torch.emu.Stream()  # type: ignore[attr-defined]
        side.wait_stream(torch.emu.current_stream())  # type: ignore[attr-defined]
        with torch.emu.stream(side):  # type: ignore[attr-defined]
            outputs = self.graph_module(*args)
        torch.emu.current_stream().wait_stream(side)  # type: ignore[attr-defined]
        return outputs

    def _capture(self, args: Sequence[Any]) -> None:
        self.static_inputs = [_static_input(a) for a in args]
        graph = torch.emu.EmuGraph()  # type: ignore[attr-defined]
        try:
            with torch.emu.graph(graph):  # type: ignore[attr-defined]
                self.static_outputs = self.graph_module(*self.static_inputs)
        except RuntimeError as exc:
            warnings.warn(
                f"backend '{BACKEND}' could not capture a graph and runs it eagerly: {str(exc).splitlines()[0]}",
                EmuGraphsWarning,
                stacklevel=3,
            )
            self.eager, self.static_inputs, self.static_outputs = True, [], None
            return
        self.graph = graph


def _replay_compiler(graph_module: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    del example_inputs
    replayed = _Replayed(graph_module)
    replayed._boxed_call = True  # type: ignore[attr-defined]  # AOTAutograd passes the arguments as one list
    return replayed


def compile_with_graphs(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    """torch.compile(backend="emugraphs"), found through the package's `torch_dynamo_backends` entry point."""
    from torch._dynamo.backends.common import aot_autograd

    if not torch_emu_graphs_available():
        raise RuntimeError(
            f"backend '{BACKEND}' needs emu graph capture, which this build lacks (driver API 2.3 brought it)"
        )
    return aot_autograd(fw_compiler=_replay_compiler, bw_compiler=_replay_compiler)(gm, example_inputs)


def torch_emu_graphs_available() -> bool:
    from torch_emu._library import ops

    return bool(ops.build_features().get("graphs", 0))
