"""Warning parity of emu against CPU over PyTorch's op_db, forward and backward (run as a script).

`python warning_parity.py OUT.json [--samples N]` runs each op's float32 samples on emu and on the CPU with every
warning recorded, and writes, per pass, the ops compared and each op where emu warned something the CPU did not
(the warning's category and first line). A project that runs its tests with warnings as errors fails on emu for
each of those. Warnings are compared with device names taken out ("emu:0" and "cpu" read alike); a warning the CPU
gives too is parity, whatever emu adds around it. Samples are made and compared as opinfo_conformance.py does.
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

import torch_emu  # noqa: F401  # registers emu before torch.testing._internal is imported

sys.path.insert(0, str(Path(__file__).resolve().parent))
from opinfo_conformance import INCOMPARABLE, gradients, run, to_cpu

PASSES = (("forward", False), ("backward", True))
DEVICE = re.compile(r"\b(emu|cpu)(:\d+)?\b")


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
    compared, extra = 0, {}
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
    return {"compared": compared, "emu_only_warnings": extra}


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
