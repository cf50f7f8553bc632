"""Loads libtorch_emu.so, the compiled part, into torch's op registry (imported once the import guard has passed).

The library uses libtorch and the driver only, no CPython API: its static initialisers register the emu device's
guard, hooks, allocator, generator and kernels, and its Python-facing entry points are operators of the `torch_emu`
namespace, reached as torch.ops.torch_emu.<name>. One library serves every CPython 3, free-threaded builds included.
"""

from pathlib import Path

import torch

LIBRARY = Path(__file__).resolve().parent / "libtorch_emu.so"

torch.ops.load_library(str(LIBRARY))
ops = torch.ops.torch_emu
