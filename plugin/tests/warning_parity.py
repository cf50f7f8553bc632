"""Warning parity of emu against CPU over PyTorch's op_db, forward and backward (run as a script).

`python warning_parity.py OUT.json [--samples N]` runs each op's float32 samples on emu and on the CPU with every
warning recorded, and writes, per pass, the ops compared, each op where emu warned something the CPU did not
(the warning's category and first line), and each op left out with why (its samples hold a feature this release
lacks). A project that runs its tests with warnings as errors fails on emu for each of those. Warnings are compared
with device names taken out ("emu:0" and "cpu" read alike); a warning the CPU gives too is parity, whatever emu adds
around it. Samples are made and compared as opinfo_conformance.py does.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import torch
from packaging.version import Version
from torch.utils._pytree import tree_flatten

import torch_emu  # noqa: F401  # registers emu before torch.testing._internal is imported

sys.path.insert(0, str(Path(__file__).resolve().parent))
from opinfo_conformance import INCOMPARABLE, gradients, run, to_cpu

PASSES = (("forward", False), ("backward", True))
DEVICE = re.compile(r"\b(emu|cpu)(:\d+)?\b")
SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)
# Sparse emu tensors exist from torch 2.5 (plugin/csrc/aten/SparseSupport.h, turned off by the pre-2.5 series).
# Before, op_db still builds one from emu members (torch.sparse_csr_tensor is composite), but it has no emu kernel
# for its accessors, so it can be neither copied to the CPU nor computed on (torch 2.4: "col_indices expected sparse
# row compressed tensor layout but got SparseCsr"). Such samples are not compared, and their ops are listed.
NO_SPARSE_EMU = (
    "sparse emu tensors need torch >= 2.5" if Version(torch.__version__.split("+")[0]) < Version("2.5") else None
)


def holds_sparse_emu(sample: Any) -> bool:
    flat, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    return any(isinstance(t, torch.Tensor) and t.device.type == "emu" and t.layout in SPARSE_LAYOUTS for t in flat)


def warned(action: Any) -> set[str]:
    """The warnings an action gives (category and first line, device names taken out); raising gives none."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            action()
            if torch.emu.is_available():
                torch.emu.synchronize()
        except Exception:
            return set()
    return {f"{w.category.__name__}: {DEVICE.sub('<device>', str(w.message).splitlines()[0])}" for w in caught}


def parity_pass(samples_per_op: int, backward: bool) -> dict[str, Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    dtype = torch.float32
    compared, extra, not_compared = 0, {}, {}
    for op in op_db:
        full_name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        if op.name in INCOMPARABLE or full_name in INCOMPARABLE or not op.supports_dtype(dtype, "cpu"):
            continue
        if backward and not (op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")):
            continue
        print(f"{'backward' if backward else 'forward'}: {full_name}", file=sys.stderr, flush=True)
        torch.manual_seed(0)
        try:
            batch = [s for _, s in zip(range(samples_per_op), op.sample_inputs("emu", dtype, requires_grad=backward))]
        except Exception:
            continue
        if NO_SPARSE_EMU is not None and any(holds_sparse_emu(s) for s in batch):
            not_compared[full_name] = NO_SPARSE_EMU
            batch = [s for s in batch if not holds_sparse_emu(s)]
            if not batch:
                continue
        compared += 1
        for sample in batch:
            cpu_sample = type(sample)(to_cpu(sample.input), args=to_cpu(sample.args), kwargs=to_cpu(sample.kwargs))
            step = gradients if backward else run
            on_cpu = warned(lambda: step(op, cpu_sample))  # noqa: B023
            on_emu = warned(lambda: step(op, sample))  # noqa: B023
            only_emu = sorted(on_emu - on_cpu)
            if only_emu:
                extra[full_name] = only_emu[0][:300]
                break
    return {"compared": compared, "emu_only_warnings": extra, "not_compared": not_compared}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out")
    parser.add_argument("--samples", type=int, default=1, help="samples per op (bounded for CI)")
    options = parser.parse_args()
    report = {
        "torch": torch.__version__,
        "samples_per_op": options.samples,
        "passes": {name: parity_pass(options.samples, backward) for name, backward in PASSES},
    }
    with Path(options.out).open("w") as handle:
        json.dump(report, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
