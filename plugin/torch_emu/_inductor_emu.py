"""Inductor code generation for emu: Inductor's C++ kernels, run as driver kernels on the current emu stream.

Emu memory is not host-addressable, so a generated kernel cannot be called on tensor pointers as the CPU wrapper
does. The wrapper here defines each kernel through host_kernel(): the C++ source gains a shim with one fixed
signature, `emu_entry(const uint64_t*)`, and calling the kernel queues torch.ops.torch_emu.launch_host_kernel,
which translates every tensor argument inside the driver kernel and calls the shim. Imported only when Inductor
compiles a graph with emu tensors.
"""

from __future__ import annotations

import ctypes
import re
import struct
import sys
import warnings
from typing import Any

import torch
from torch._inductor.codecache import CppCodeCache
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.codegen.wrapper import PythonWrapperCodegen
from torch._inductor.scheduler import BaseSchedulerNode
from torch._inductor.virtualized import V

_INTEGERS = {"int64_t", "long", "int", "int32_t", "bool", "uint64_t"}
_FLOATS = {"double", "float"}
_PYBINDING = "async_compile.cpp_pybinding("


def _parameter_type(declared: str) -> str:
    """'const float*' -> 'const float*', 'const int64_t' -> 'int64_t': the type a shim slot is cast to."""
    declared = declared.strip()
    if declared.endswith("*"):
        return declared
    return re.sub(r"^const\s+", "", declared)


def entry_shim(argtypes: list[str]) -> str:
    """C++ for `emu_entry`, which unpacks one uint64 slot per parameter and calls the generated `kernel`."""
    casts = []
    for slot, declared in enumerate(argtypes):
        kind = _parameter_type(declared)
        if kind.endswith("*"):
            casts.append(f"reinterpret_cast<{kind}>(a[{slot}])")
        elif kind in _INTEGERS:
            casts.append(f"static_cast<{kind}>(static_cast<int64_t>(a[{slot}]))")
        elif kind in _FLOATS:
            casts.append(f"static_cast<{kind}>(emu_bits_to_double(a[{slot}]))")
        else:
            raise NotImplementedError(f"emu cannot pass a kernel parameter of type {declared!r}")
    return (
        "\n#include <cstring>\n"
        "static inline double emu_bits_to_double(uint64_t bits) { double d; std::memcpy(&d, &bits, sizeof d); return d; }\n"
        'extern "C" __attribute__((visibility("default"))) void emu_entry(const uint64_t* a) {\n'
        f"  kernel({', '.join(casts)});\n"
        "}\n"
    )


class HostKernel:
    """A compiled Inductor C++ kernel that runs on emu memory: calling it queues it on the current emu stream."""

    def __init__(self, argtypes: list[str], source: str) -> None:
        self.argtypes = list(argtypes)
        self._library = CppCodeCache.load(source + entry_shim(self.argtypes))  # kept: unloading would free the code
        self.entry = ctypes.cast(self._library.emu_entry, ctypes.c_void_p).value

    def __call__(self, *args: Any) -> None:
        if len(args) != len(self.argtypes):
            raise TypeError(f"this emu kernel takes {len(self.argtypes)} arguments, got {len(args)}")
        tensors: list[torch.Tensor] = []
        kinds: list[int] = []
        values: list[int] = []
        for value in args:
            if isinstance(value, torch.Tensor):
                kinds.append(0)
                values.append(len(tensors))
                tensors.append(value)
            elif isinstance(value, float):
                kinds.append(1)
                values.append(struct.unpack("<q", struct.pack("<d", value))[0])
            else:
                kinds.append(1)
                values.append(int(value))
        torch.ops.torch_emu.launch_host_kernel(self.entry, tensors, kinds, values)


def host_kernel(argtypes: list[str], source: str) -> HostKernel:
    """What the generated wrapper calls where the CPU wrapper calls async_compile.cpp_pybinding."""
    return HostKernel(argtypes, source)


def _warn_if_reduce_overhead() -> None:
    """mode="reduce-overhead" asks Inductor for its cudagraph trees, which skip every device but CUDA: say so, and
    name emu's backend that does replay graphs (Python's default filter shows it once per process)."""
    from torch._inductor import config

    if getattr(config.triton, "cudagraphs", False):
        from torch_emu._graphs_backend import BACKEND, EmuGraphsWarning

        warnings.warn(
            "torch.compile(mode='reduce-overhead') replays no graphs on emu: Inductor's graph trees are CUDA-only; "
            f"torch.compile(backend='{BACKEND}') captures and replays emu graphs",
            EmuGraphsWarning,
            stacklevel=2,
        )


class EmuWrapperCodegen(PythonWrapperCodegen):
    """Python wrapper for emu graphs: the CPU wrapper's code, with kernels defined through host_kernel()."""

    # Inductor's FX graph cache keys on torch, not on torch_emu: code cached by another torch_emu could be reused.
    supports_caching = False

    @staticmethod
    def create(is_subgraph: bool, subgraph_name: Any, parent_wrapper: Any, *args: Any, **kwargs: Any) -> Any:
        if is_subgraph:
            return PythonWrapperCodegen.create(is_subgraph, subgraph_name, parent_wrapper, *args, **kwargs)
        _warn_if_reduce_overhead()
        return EmuWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline("from torch_emu._inductor_emu import host_kernel as emu_host_kernel")

    def define_kernel(self, kernel_name: str, kernel_body: str, *args: Any, **kwargs: Any) -> None:
        if kernel_body.lstrip().startswith(_PYBINDING):
            kernel_body = kernel_body.replace(_PYBINDING, "emu_host_kernel(", 1)
        super().define_kernel(kernel_name, kernel_body, *args, **kwargs)

    def make_allocation(self, name: str, device: torch.device, *args: Any, **kwargs: Any) -> str:
        line = super().make_allocation(name, device, *args, **kwargs)
        # Other devices allocate on device.type, which is the current device: emu:1's buffers belong on emu:1.
        return line.replace(f"device='{device.type}'", f"device='{device}'", 1)

    def _generate_kernel_call_helper(self, kernel_name: str, call_args: Any, *args: Any, **kwargs: Any) -> None:
        device = kwargs.get("device") or V.graph.get_current_device_or_throw()
        if not kwargs.get("triton", True) and device.type == "emu":
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))  # a HostKernel: called like a CPU kernel
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, *args, **kwargs)


def _emu_nodes_are_cpp_nodes() -> None:
    """The scheduler asks is_cpu() where it means "C++ kernels" (fusion shapes, loop reordering): emu's are too."""
    if getattr(BaseSchedulerNode.is_cpu, "_emu", False):
        return

    def is_cpu(self: BaseSchedulerNode) -> bool:
        device = self.get_device()
        return device is not None and device.type in ("cpu", "emu")

    is_cpu._emu = True  # type: ignore[attr-defined]
    BaseSchedulerNode.is_cpu = is_cpu  # type: ignore[method-assign]


def _emu_kernels_are_cpp_kernels() -> None:
    """Inductor's kernel code asks get_current_backend() which code generator the current device uses: "cpp" for
    the CPU, Triton for every device it does not know. Emu's kernels are the CPU's C++ kernels, and the C++ code
    generator relies on the answer: only for "cpp" does the common kernel proxy fill in the dtype of a C++ value an
    op left untyped, so a vectorised index_expr (position ids from arange) failed `assert index.dtype is not None`.
    Every Inductor module that imported the function gets the answer for emu too."""
    import torch._inductor.utils as inductor_utils

    original = getattr(inductor_utils, "get_current_backend", None)
    if original is None or getattr(original, "_emu", False):
        return

    def get_current_backend(device_type: str | None = None) -> str:
        if device_type is None:
            device_type = V.graph.get_current_device_or_throw().type
        return "cpp" if device_type == "emu" else str(original(device_type))

    get_current_backend._emu = True  # type: ignore[attr-defined]
    for name, module in list(sys.modules.items()):
        if name.startswith("torch._inductor") and getattr(module, "get_current_backend", None) is original:
            module.get_current_backend = get_current_backend  # type: ignore[attr-defined]


_emu_nodes_are_cpp_nodes()
_emu_kernels_are_cpp_kernels()


class EmuScheduling(CppScheduling):
    """Inductor's C++ kernel generator, for graphs on emu."""
