"""OpInfo conformance of emu against CPU: runs PyTorch's op_db samples on both and compares (run as a script).

`python opinfo_conformance.py OUT.json [--samples N]` writes, per pass (forward float32, backward float32,
forward complex64), the ops compared, the ops that matched, and each mismatch with its first error line (apart: the
mismatches of KNOWN_GAPS). Samples are made on emu and copied to the CPU, as PyTorch's own test_compare_cpu does.
It runs in its own process so that an op that crashes the interpreter fails the smoke test that started it
(with the op named on stderr) instead of ending the whole smoke session.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path
from typing import Any

import torch
from packaging.version import Version
from torch.utils._pytree import tree_flatten, tree_map

import torch_emu  # registers emu before torch.testing._internal is imported

# Ops excluded from every pass, each because its result cannot be compared on ANY device, CPU against CPU included.
# Nothing here is excluded for failing on emu: a mismatch on emu is a defect, and from torch 2.13 fails the test.
INCOMPARABLE = {
    # Uninitialised memory: the values are whatever the allocator hands out.
    "empty": "uninitialised values",
    "empty_like": "uninitialised values",
    "empty_strided": "uninitialised values",
    "empty_permuted": "uninitialised values",
    "new_empty": "uninitialised values",
    "new_empty_strided": "uninitialised values",
    "nn.functional.empty_like": "uninitialised values",
    # Random draws: each device has its own generator, so two devices draw different numbers by design.
    "bernoulli": "random",
    "cauchy": "random",
    "exponential": "random",
    "geometric": "random",
    "log_normal": "random",
    "multinomial": "random",
    "normal": "random",
    "normal.number_mean": "random",
    "normal.in_place": "random",
    "uniform": "random",
    "rand_like": "random",
    "randn_like": "random",
    "randint": "random",
    "randint_like": "random",
    "randn": "random",
    "rand": "random",
    "nn.functional.dropout": "random",
    "nn.functional.dropout2d": "random",
    "nn.functional.dropout3d": "random",
    "nn.functional.alpha_dropout": "random",
    "nn.functional.feature_alpha_dropout": "random",
    "nn.functional.rrelu": "random",
    "nn.functional.fractional_max_pool2d": "random",
    "nn.functional.fractional_max_pool3d": "random",
    "nn.functional.multi_head_attention_forward": "random (dropout inside)",
    "nn.functional.scaled_dot_product_attention": "random (dropout_p samples)",
    "svd_lowrank": "random (randomised algorithm)",
    "pca_lowrank": "random (randomised algorithm)",
    # Reads storage outside the input view: a copy of the view to another device does not carry those bytes.
    "as_strided.partial_views": "result depends on storage outside the view",
}

# Ops that need a feature this cell lacks, each with why: they are compared and counted like every op, but a
# mismatch here does not fail the smoke test (the feature itself is reported "not available" by its own test).
# Only features a release or driver cannot have belong here; a gap of emu is a defect, not an entry.
KNOWN_GAPS: dict[str, str] = {}
# to(..., pin_memory=True / non_blocking) needs pinned host memory: the isPinnedPtr hook (torch 2.5) and the driver's
# host allocation (API 2.2).
if Version(torch.__version__.split("+")[0]) < Version("2.5") or not torch_emu.features()["pinned_memory"]:
    KNOWN_GAPS["to"] = "pinned host memory (to(..., non_blocking/pin_memory)): needs torch >= 2.5 and driver API 2.2"

PASSES = {
    "forward float32": (torch.float32, False),
    "backward float32": (torch.float32, True),
    "forward complex64": (torch.complex64, False),
}


def to_cpu(value: Any) -> Any:
    """The same values on the CPU: emu tensors copied over, leaves keeping requires_grad; CPU tensors as they are
    (a sample keeps some arguments on the CPU on purpose, e.g. tensor_split's indices)."""

    def move(t: Any) -> Any:
        if not isinstance(t, torch.Tensor) or t.device.type != "emu":
            return t
        moved = t.detach().cpu()
        return moved.requires_grad_(t.requires_grad) if t.is_leaf else moved

    return tree_map(move, value)


def run(op: Any, sample: Any) -> Any:
    return op(sample.input, *sample.args, **sample.kwargs)


def leaves(sample: Any) -> list[torch.Tensor]:
    flat, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    return [t for t in flat if isinstance(t, torch.Tensor) and t.requires_grad]


def gradients(op: Any, sample: Any) -> list[Any]:
    """Gradients of the sum of every differentiable output with respect to every input that requires grad."""
    outputs, _ = tree_flatten(run(op, sample))
    differentiable = [o for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]
    inputs = leaves(sample)
    if not differentiable or not inputs:
        return []
    total = sum(o.real.sum() if o.is_complex() else o.sum() for o in differentiable)
    return list(torch.autograd.grad(total, inputs, allow_unused=True))


def compare(op: Any, sample: Any, backward: bool) -> None:
    """Raises AssertionError if emu and CPU disagree on this sample (both raising counts as agreeing)."""
    cpu_sample = type(sample)(to_cpu(sample.input), args=to_cpu(sample.args), kwargs=to_cpu(sample.kwargs))
    try:
        expected = gradients(op, cpu_sample) if backward else run(op, cpu_sample)
    except Exception:
        try:
            gradients(op, sample) if backward else run(op, sample)
        except Exception:
            return
        raise AssertionError("CPU raised, emu did not") from None
    actual = gradients(op, sample) if backward else run(op, sample)
    torch.emu.synchronize()
    # emu runs the same CPU kernels, on other buffers: vectorised and scalar paths may round differently (layer_norm
    # of one element is 0 on one and 1.4e-5 on the other), so float32 results agree to 1e-4, not bit for bit.
    torch.testing.assert_close(to_cpu(actual), expected, equal_nan=True, check_device=False, rtol=1e-4, atol=1e-4)


def conformance(samples_per_op: int) -> dict[str, Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    report: dict[str, Any] = {"torch": torch.__version__, "samples_per_op": samples_per_op, "passes": {}}
    for name, (dtype, backward) in PASSES.items():
        compared, passed, mismatches = 0, 0, {}
        for op in op_db:
            full_name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
            if op.name in INCOMPARABLE or full_name in INCOMPARABLE or not op.supports_dtype(dtype, "cpu"):
                continue
            if backward and not (op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")):
                continue
            print(f"{name}: {full_name}", file=sys.stderr, flush=True)  # names the op if the process dies
            torch.manual_seed(0)
            try:
                batch = [
                    s for _, s in zip(range(samples_per_op), op.sample_inputs("emu", dtype, requires_grad=backward))
                ]
            except Exception:
                continue  # the sample generator itself does not run on this torch: nothing to compare
            compared += 1
            try:
                for sample in batch:
                    compare(op, sample, backward)
                passed += 1
            except Exception as exc:
                lines = traceback.format_exception_only(type(exc), exc)
                mismatches[full_name] = "".join(lines).strip().splitlines()[0][:300]
        gaps = {op: why for op, why in mismatches.items() if op in KNOWN_GAPS}
        mismatches = {op: why for op, why in mismatches.items() if op not in KNOWN_GAPS}
        report["passes"][name] = {"compared": compared, "passed": passed, "mismatches": mismatches, "known_gaps": gaps}
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out")
    parser.add_argument("--samples", type=int, default=1, help="samples compared per op (bounded for CI)")
    options = parser.parse_args()
    report = conformance(options.samples)
    with Path(options.out).open("w") as handle:
        json.dump(report, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
