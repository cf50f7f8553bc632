"""torch.emu's graph capture and replay, shaped like torch.cuda's: EmuGraph, graph(...), graph_pool_handle().

Work queued on a stream while it captures is recorded, not run; replay() queues it again on the current stream with
the same tensors (same device addresses), so inputs are fed by copying into the tensors the capture used. Capture
needs driver API 2.3; on older drivers every entry point raises, saying so. A synchronising call during a capture
(`.item()`, `torch.emu.synchronize()`, a copy to or from host memory) raises at the call and spoils the capture;
the stream is usable again once the capture has ended. Ops that run through the CPU fallback (those
torch_emu.fallback_ops() counts: pow, mse_loss, tanh's backward, ...) copy through the host, so they raise the same
way. Random ops sampled on emu (rand, randn, normal_, bernoulli_, ...) draw fresh numbers at every replay, from a
base the device's generator gives each replay, so they follow manual_seed as on CUDA.
"""

from __future__ import annotations

import gc
import types
from types import TracebackType
from typing import Any

import torch

from torch_emu._library import ops as _ops
from torch_emu._torch_release import torch_at_least
from torch_emu.streams import Stream, StreamContext, current_stream

__all__ = ["EmuGraph", "graph", "graph_pool_handle", "is_current_stream_capturing", "make_graphed_callables"]


def _require_graphs() -> None:
    built = _ops.build_features()
    if not built.get("graphs", 0):
        major, minor = built["driver_api_major"], built["driver_api_minor"]
        raise RuntimeError(
            f"emu graph capture is not available: this torch_emu was built against driver API {major}.{minor}, "
            "and stream capture came with driver API 2.3"
        )


def graph_pool_handle() -> tuple[int, int]:
    """A memory pool id that several graphs can share (pass it as `pool=` to each capture), as torch.cuda's."""
    _require_graphs()
    first, second = _ops.graph_pool_handle()
    return int(first), int(second)


def is_current_stream_capturing() -> bool:
    """Whether the current emu stream is capturing (False where the driver has no capture)."""
    if not _ops.build_features().get("graphs", 0):
        return False
    s = current_stream()
    return bool(_ops.stream_is_capturing(s.stream_id, s.device_index))


class EmuGraph:
    """A captured graph, as torch.cuda.CUDAGraph: capture_begin/capture_end around the work, then replay().

    keep_graph=True keeps the captured graph after capture_end (instantiated by instantiate() or the first replay).
    """

    def __init__(self, keep_graph: bool = False) -> None:
        _require_graphs()
        # Resolved now, not in __del__: a graph collected at interpreter exit (kept by a module that outlives
        # torch's) would look the op up through torch._ops after its globals were cleared, and raise there.
        self._destroy = _ops.graph_destroy
        self._handle: int | None = int(_ops.graph_create(bool(keep_graph)))

    def _h(self) -> int:
        if self._handle is None:
            raise RuntimeError("emu graph: used after it was destroyed")
        return self._handle

    def capture_begin(self, pool: tuple[int, int] | None = None, capture_error_mode: str = "global") -> None:
        """Begins capturing the current stream (not the default stream). pool: share another graph's memory pool.
        capture_error_mode is accepted for torch.cuda parity: emu refuses unsafe calls in every mode."""
        del capture_error_mode
        first, second = pool if pool is not None else (0, 0)
        _ops.graph_capture_begin(self._h(), int(first), int(second))

    def capture_end(self) -> None:
        _ops.graph_capture_end(self._h())

    def instantiate(self) -> None:
        _ops.graph_instantiate(self._h())

    def replay(self) -> None:
        """Queues the captured work on the current stream."""
        _ops.graph_replay(self._h())

    def reset(self) -> None:
        """Drops the captured work and gives the graph's memory pool back (when no other graph shares it)."""
        _ops.graph_reset(self._h())

    def pool(self) -> tuple[int, int]:
        """The id of the memory pool the capture allocated from, to share with a later capture."""
        first, second = _ops.graph_pool(self._h())
        return int(first), int(second)

    def node_count(self) -> int:
        """How many pieces of work the kept graph replays (keep_graph=True only)."""
        return int(_ops.graph_node_count(self._h()))

    def __del__(self) -> None:
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None:
            self._destroy(handle)


class graph:  # lowercase, as torch.cuda.graph
    """`with torch.emu.graph(g):` captures the block into g on a side stream, as torch.cuda.graph does: it waits for
    the device and collects garbage first, so earlier work neither runs in the capture nor frees memory during it.
    """

    _default_capture_stream: Stream | None = None

    def __init__(
        self,
        emu_graph: EmuGraph,
        pool: tuple[int, int] | None = None,
        stream: Stream | None = None,
        capture_error_mode: str = "global",
        *,
        enable_annotations: bool = False,
        annotation_config: dict[str, object] | None = None,
        check_input_liveness: bool = False,
    ) -> None:
        # torch.cuda.graph's later keywords (torch 2.14 passes enable_annotations from make_graphed_callables): their
        # defaults change nothing, so they are accepted; what they turn on needs CUDA's CUPTI, which emu has not.
        if enable_annotations or annotation_config:
            raise NotImplementedError("graph annotations (enable_annotations, annotation_config) need CUDA's CUPTI")
        if check_input_liveness:
            raise NotImplementedError("check_input_liveness is not implemented for emu graphs")
        if stream is None:
            if graph._default_capture_stream is None:
                graph._default_capture_stream = Stream()
            stream = graph._default_capture_stream
        self.emu_graph = emu_graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode
        self._stream_context = StreamContext(stream)

    def __enter__(self) -> None:
        torch.emu.synchronize()  # type: ignore[attr-defined]
        gc.collect()
        self._stream_context.__enter__()
        try:
            self.emu_graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self._stream_context.__exit__(None, None, None)
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        try:
            if exc_type is None:
                self.emu_graph.capture_end()
            else:
                # The block failed (perhaps a synchronising call spoilt the capture): end the capture without a
                # graph so the stream is usable, and let the block's own error propagate.
                self.emu_graph.reset()
        finally:
            self._stream_context.__exit__(exc_type, exc, traceback)


class _EmuAsCuda(types.ModuleType):
    """The `torch.cuda` that torch's make_graphed_callables sees when re-homed on emu: its graph and stream names are
    torch.emu's; every other name is torch.cuda's."""

    def __init__(self) -> None:
        super().__init__("torch.cuda")
        self.CUDAGraph = EmuGraph
        self.graph = graph
        self.graph_pool_handle = graph_pool_handle
        self.is_current_stream_capturing = is_current_stream_capturing
        self.Stream = Stream
        self.stream = StreamContext
        self.synchronize = torch.emu.synchronize  # type: ignore[attr-defined]
        self.current_stream = current_stream

    def __getattr__(self, name: str) -> object:
        return getattr(torch.cuda, name)


class _TorchWithEmuCuda(types.ModuleType):
    """`torch` with `torch.cuda` as _EmuAsCuda: the globals of the re-homed function."""

    def __init__(self) -> None:
        super().__init__("torch")
        self.cuda = _EmuAsCuda()

    def __getattr__(self, name: str) -> object:
        return getattr(torch, name)


def _require_captured_backward(callables: Any, sample_args: Any) -> None:
    """Before torch 2.3 the autograd engine puts a node on its forward's stream only for CUDA, so emu's backward runs
    on the autograd thread's default stream, outside the capture: the graphed backward would replay nothing and give
    zero gradients. Raise instead, as torch.cuda's function would capture a backward (any grad required)."""
    if torch_at_least(2, 3):
        return
    one = not isinstance(callables, tuple)
    modules = (callables,) if one else callables
    args = (sample_args,) if one else sample_args
    wants_grad = any(
        isinstance(t, torch.Tensor) and t.requires_grad
        for group in args
        for t in torch.utils._pytree.tree_flatten(group)[0]
    ) or any(p.requires_grad for m in modules if isinstance(m, torch.nn.Module) for p in m.parameters())
    if wants_grad:
        raise RuntimeError(
            "torch.emu.make_graphed_callables cannot capture a backward on torch "
            f"{torch.__version__}: before torch 2.3 autograd runs emu's backward outside the capture, so the graphed "
            "gradients would be zero. Use torch >= 2.3, or graph a callable whose parameters and inputs need no grad."
        )


def make_graphed_callables(callables: Any, sample_args: Any, **kwargs: Any) -> Any:
    """torch.cuda.make_graphed_callables on emu: torch's own function, run with the CUDA graph and stream names it
    looks up (torch.cuda.CUDAGraph, graph, graph_pool_handle, Stream, stream, synchronize) pointing at torch.emu's.
    Its rules hold: sample_args are tensors; grads returned by the graphed backward are views of static buffers, so
    zero them (set_to_none) between iterations. Before torch 2.3 it raises when a backward would be captured (a
    callable's parameters or its sample_args require grad): see _require_captured_backward."""
    _require_graphs()
    _require_captured_backward(callables, sample_args)
    original = torch.cuda.graphs.make_graphed_callables
    emu_globals = dict(original.__globals__)
    emu_globals["torch"] = _TorchWithEmuCuda()
    emu_globals["graph_pool_handle"] = graph_pool_handle
    emu_globals["CUDAGraph"] = EmuGraph
    emu_globals["graph"] = graph
    rehomed = types.FunctionType(
        original.__code__, emu_globals, original.__name__, original.__defaults__, original.__closure__
    )
    rehomed.__kwdefaults__ = original.__kwdefaults__
    return rehomed(callables, sample_args, **kwargs)
