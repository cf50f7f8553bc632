"""OpInfo conformance of emu against CPU: runs PyTorch's op_db samples on both and compares (run as a script).

`python opinfo_conformance.py OUT.json [--samples N]` writes, per pass (forward float32, backward float32,
forward complex64), the ops compared, the ops that matched, and each mismatch with its first error line (apart: the
mismatches of KNOWN_GAPS). Samples are made on emu and copied to the CPU, as PyTorch's own test_compare_cpu does.

Two more passes (forward and backward "CUDA's dtypes") run every (op, dtype) pair this release's op_db says CUDA
supports and the CPU does not (`dtypesIfCUDA` minus `dtypes`: ComplexHalf, Half, integer histc, ...). Model code
takes CUDA's path on emu, so emu must compute them. Their reference is the CPU result computed in a dtype the CPU
supports (Float for Half and BFloat16, ComplexFloat for ComplexHalf, wider integers), cast back to the dtype CUDA
returns: the meta device's result dtype where the op has a meta kernel (meta follows CUDA's dtype rules), else the
narrow counterpart of the widened one. Emu raising on such a pair is a mismatch (CUDA computes it), and so is a pair
without any CPU reference. Ops with CUDA-specific semantics for such a dtype get their reference in CUDA_REFERENCES.
It runs in its own process so that an op that crashes the interpreter fails the smoke test that started it
(with the op named on stderr) instead of ending the whole smoke session.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from packaging.version import Version
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

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
    "svd_lowrank": "random (randomised algorithm)",
    "pca_lowrank": "random (randomised algorithm)",
    # Reads storage outside the input view: a copy of the view to another device does not carry those bytes.
    "as_strided.partial_views": "result depends on storage outside the view",
}

# Ops that need a feature this cell lacks, each with why: they are compared and counted like every op, but a
# mismatch here does not fail the smoke test (the feature itself is reported "not available" by its own test).
# Only features a release or driver cannot have belong here; a gap of emu is a defect, not an entry.
KNOWN_GAPS: dict[str, str] = {}
# (op, CUDA-only dtype) pairs emu does not compute, each with why (reported apart, never counted as passed).
NOT_CLAIMED = {
    "torch.ops.aten._flash_attention_forward": "CUDA's fused attention kernel: no CPU kernel in any dtype",
    "torch.ops.aten._efficient_attention_forward": "CUDA's fused attention kernel: no CPU kernel in any dtype",
}
# Ops whose samples are random only in part: those samples are left out, the rest compared like every op's.
RANDOM_SAMPLES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    # Dropout draws from each device's own generator; without it, emu's fused kernel (torch >= 2.5) or the math
    # backend must give the CPU's results.
    "nn.functional.scaled_dot_product_attention": (
        "random (dropout_p samples)",
        lambda sample: sample.kwargs.get("dropout_p", 0.0) > 0,
    ),
}


def comparable_samples(op: Any, full_name: str, dtype: torch.dtype, backward: bool, count: int) -> list[Any]:
    """The op's first `count` samples, less those RANDOM_SAMPLES says are random."""
    samples = op.sample_inputs("emu", dtype, requires_grad=backward)
    if full_name in RANDOM_SAMPLES:
        is_random = RANDOM_SAMPLES[full_name][1]
        samples = (sample for sample in samples if not is_random(sample))
    return list(itertools.islice(samples, count))


# (op family, CUDA-only dtype) pairs emu does not compute, each with why: a dtype CUDA gained for an op that emu's
# widening route does not cover. Reported apart like NOT_CLAIMED, and named in the plugin README's list of what is not
# provided; the op's other CUDA dtypes stay claimed and compared.
NOT_CLAIMED_DTYPES: dict[tuple[str, torch.dtype], str] = {
    ("fft.", torch.bfloat16): "torch.fft in BFloat16 (cuFFT's, in CUDA's dtype list from torch 2.15): emu's fft route "
    "widens Half and ComplexHalf only, and torch has no complex BFloat16 result type to cast back to",
    ("sparse.sampled_addmm", torch.float16): "sparse CSR sampled_addmm in Half (cuSPARSE's): emu's sparse CSR "
    "support has no reduced-precision route",
    ("sparse.sampled_addmm", torch.bfloat16): "sparse CSR sampled_addmm in BFloat16 (cuSPARSE's): emu's sparse CSR "
    "support has no reduced-precision route",
}


def not_claimed_reason(full_name: str, dtype: torch.dtype) -> str | None:
    """Why emu does not claim (op, CUDA-only dtype), or None when it computes it."""
    if full_name in NOT_CLAIMED:
        return NOT_CLAIMED[full_name]
    for (prefix, gap_dtype), why in NOT_CLAIMED_DTYPES.items():
        if dtype == gap_dtype and (full_name == prefix or (prefix.endswith(".") and full_name.startswith(prefix))):
            return why
    return None


# Sparse emu tensors exist from torch 2.5 (plugin/csrc/aten/SparseSupport.h): before, to_sparse has no emu layout.
if Version(torch.__version__.split("+")[0]) < Version("2.5"):
    KNOWN_GAPS["to_sparse"] = "sparse emu tensors need torch >= 2.5"
# to(..., pin_memory=True / non_blocking) needs pinned host memory: the isPinnedPtr hook (torch 2.5) and the driver's
# host allocation (API 2.2).
if Version(torch.__version__.split("+")[0]) < Version("2.5") or not torch_emu.features()["pinned_memory"]:
    KNOWN_GAPS["to"] = "pinned host memory (to(..., non_blocking/pin_memory)): needs torch >= 2.5 and driver API 2.2"

PASSES = {
    "forward float32": (torch.float32, False),
    "backward float32": (torch.float32, True),
    "forward complex64": (torch.complex64, False),
}
# The passes over the (op, dtype) pairs that only CUDA supports: whether they compute gradients.
CUDA_DTYPE_PASSES = {"forward CUDA's dtypes": False, "backward CUDA's dtypes": True}

# The CPU reference of a dtype the CPU lacks: computed in this wider one. Integers widen to int64, Bool to uint8.
REFERENCE_DTYPE = {
    torch.float16: torch.float32,
    torch.bfloat16: torch.float32,
    torch.complex32: torch.complex64,
    torch.bool: torch.uint8,
    torch.uint8: torch.int64,
    torch.int8: torch.int64,
    torch.int16: torch.int64,
    torch.int32: torch.int64,
}

# Tolerances of a narrow result, in units of the narrow dtype's last place (relative and absolute). Forward: the
# reference rounds once, but composite ops (bilinear, cov) and kernels that take the narrow dtype round their
# intermediates in it, on CUDA as on emu; the OpInfo's own tolerance for its ComplexHalf reference test (the same
# comparison, upstream) is taken where larger. Backward: a gradient passes through several ops, each rounding to the
# narrow dtype on emu and on CUDA alike.
EPS = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7, torch.complex32: 2.0**-10}
ULPS = {False: 4, True: 8}


def tolerance(op: Any, dtype: torch.dtype, backward: bool) -> dict[str, float]:
    if dtype not in EPS:
        return {}  # exact dtypes, and those the CPU has a kernel for: assert_close's defaults
    atol = rtol = ULPS[backward] * EPS[dtype]
    from torch.testing._internal.common_device_type import toleranceOverride
    from torch.testing._internal.opinfo.core import DecorateInfo

    for entry in op.decorators:
        if not isinstance(entry, DecorateInfo) or entry.test_name != "test_complex_half_reference_testing":
            continue
        for decorator in entry.decorators:
            if isinstance(decorator, toleranceOverride) and dtype in decorator.d:
                atol = max(atol, decorator.d[dtype].atol)
                rtol = max(rtol, decorator.d[dtype].rtol)
    return {"atol": atol, "rtol": rtol}


def histc_like_cuda(values: torch.Tensor, bins: int = 100, min: float = 0, max: float = 0) -> torch.Tensor:
    """CUDA's histc of integers (SummaryOps.cu, _histc_cuda_template), in plain tensor arithmetic: min and max become
    integers of the input's dtype, an element's bin is (x - min) * bins // (max - min) with x == max in the last bin,
    and the counts have the input's dtype. The CPU computes histc only in floating point, with real-valued edges."""
    dtype = values.dtype

    def narrow(v: int) -> int:
        return int(torch.tensor(v, dtype=torch.int64).to(dtype))

    low, high = int(min), int(max)
    first, last = narrow(low), narrow(high)
    if low == high and values.numel() > 0:
        first, last = int(values.min()), int(values.max())
    if first == last:
        first, last = narrow(first - 1), narrow(last + 1)
    flat = values.flatten().to(torch.int64)
    kept = flat[(flat >= first) & (flat <= last)]
    bin_of = ((kept - first) * bins).div(last - first, rounding_mode="floor").clamp(max=bins - 1)
    return torch.bincount(bin_of, minlength=bins).to(dtype)


def nansum_like_cuda(
    values: torch.Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> torch.Tensor:
    """CUDA's nansum of complex numbers (NanSumOps): an element with a NaN real or imaginary part adds zero. The CPU
    refuses complex inputs."""
    if not values.is_complex():
        return torch.nansum(values, dim, keepdim, dtype=dtype)
    nan = torch.isnan(torch.view_as_real(values)).any(-1)
    return torch.where(nan, torch.zeros_like(values), values).sum(dim=dim, keepdim=keepdim, dtype=dtype)


def nanmean_like_cuda(
    values: torch.Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> torch.Tensor:
    """CUDA's nanmean: the nansum over the count of elements that are not NaN."""
    counted = torch.logical_not(torch.isnan(values)).sum(dim=dim, keepdim=keepdim)
    return nansum_like_cuda(values, dim, keepdim, dtype=dtype).div(counted)


INTEGERS = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)
COMPLEX = (torch.complex32, torch.complex64, torch.complex128)
# (op name, dtype) -> (the function computing CUDA's result on CPU tensors, whether it gets them widened by
# REFERENCE_DTYPE), where CUDA's semantics for a dtype the CPU lacks are not "compute widened and cast back".
CUDA_REFERENCES: dict[tuple[str, torch.dtype], tuple[Any, bool]] = {
    **{("histc", dtype): (histc_like_cuda, False) for dtype in INTEGERS},
    **{("nansum", dtype): (nansum_like_cuda, True) for dtype in COMPLEX},
    **{("nanmean", dtype): (nanmean_like_cuda, True) for dtype in COMPLEX},
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


REAL_OF = {torch.complex32: torch.float16, torch.complex64: torch.float32, torch.complex128: torch.float64}
COMPLEX_OF = {real: complex_ for complex_, real in REAL_OF.items()}


def on_cpu_in(value: Any, dtype: torch.dtype, wide: torch.dtype) -> Any:
    """The same values on the CPU, tensors (and requested dtypes) of `dtype` in `wide`; a tensor that requires grad
    becomes a leaf that does."""

    def move(t: Any) -> Any:
        if isinstance(t, torch.dtype):  # a requested dtype (sum(..., dtype=...)) is widened with the tensors
            return wide if t == dtype else t
        if not isinstance(t, torch.Tensor):
            return t
        moved = t.detach().cpu()
        if moved.dtype == dtype:
            moved = moved.to(wide)
        return moved.requires_grad_(t.requires_grad)

    return tree_map(move, value)


def on_meta(value: Any) -> Any:
    return tree_map(lambda t: t.detach().to("meta") if isinstance(t, torch.Tensor) else t, value)


def narrow_counterpart(result: torch.dtype, dtype: torch.dtype, wide: torch.dtype) -> torch.dtype:
    """The dtype CUDA returns for a result the reference computed as `result` from `dtype` widened to `wide`."""
    if result == wide:
        return dtype
    if REAL_OF.get(wide) == result and dtype in REAL_OF:
        return REAL_OF[dtype]
    if COMPLEX_OF.get(wide) == result and dtype in COMPLEX_OF:
        return COMPLEX_OF[dtype]
    return result


def first_line(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[0][:200]


def promoted_with_others(sample: Any, dtype: torch.dtype) -> torch.dtype:
    """`dtype` promoted with the sample's floating and complex tensors of other dtypes."""
    flat, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    promoted = dtype
    for t in flat:
        if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()) and t.dim() > 0:
            promoted = torch.promote_types(promoted, t.dtype)
    return promoted


def compare_cuda_dtype(op: Any, sample: Any, dtype: torch.dtype, backward: bool, values: bool) -> None:
    """Raises AssertionError unless emu computes this CUDA-only (op, dtype) sample as CUDA does: the reference's
    dtypes (cast back as described above), shapes and, if `values`, its values within the narrow dtype's tolerance."""
    wide = REFERENCE_DTYPE.get(dtype, dtype)
    reference, widened = CUDA_REFERENCES.get((op.name, dtype), (op, True))
    convert = (lambda v: on_cpu_in(v, dtype, wide)) if widened else to_cpu
    cpu_sample = type(sample)(convert(sample.input), args=convert(sample.args), kwargs=convert(sample.kwargs))
    try:
        actual = gradients(op, sample) if backward else run(op, sample)
        torch.emu.synchronize()
    except Exception as exc:
        # CUDA computes the pair: emu raising is a mismatch, unless the reference refuses this sample's values alike
        # (an integer remainder by zero is a ZeroDivisionError for the CPU in every integer dtype).
        try:
            gradients(reference, cpu_sample) if backward else run(reference, cpu_sample)
        except Exception as reference_exc:
            if type(reference_exc) is type(exc) and first_line(reference_exc) == first_line(exc):
                return
        raise
    try:
        expected = gradients(reference, cpu_sample) if backward else run(reference, cpu_sample)
    except Exception as exc:
        raise AssertionError(f"no CPU reference in {wide if widened else dtype}: {first_line(exc)}") from None
    flat_expected, spec = tree_flatten(expected)
    if backward:  # a gradient has its input's dtype
        targets = [t.dtype if isinstance(t, torch.Tensor) else None for t in leaves(sample)]
    else:
        try:
            meta = tree_flatten(
                run(op, type(sample)(on_meta(sample.input), args=on_meta(sample.args), kwargs=on_meta(sample.kwargs)))
            )[0]
        except Exception:
            meta = None  # no meta kernel: the narrow counterpart of the reference's dtype
        if meta is not None and len(meta) == len(flat_expected):
            targets = [m.dtype if isinstance(m, torch.Tensor) else None for m in meta]
        elif promoted_with_others(sample, dtype) != dtype:  # a wider input (Float weights) makes wide results CUDA's
            targets = [e.dtype if isinstance(e, torch.Tensor) else None for e in flat_expected]
        else:
            targets = [
                narrow_counterpart(e.dtype, dtype, wide) if isinstance(e, torch.Tensor) else None for e in flat_expected
            ]
    cast = [
        e.detach().to(target) if isinstance(e, torch.Tensor) and target is not None else e
        for e, target in zip(flat_expected, targets)
    ]
    expected = tree_unflatten(cast, spec)
    # A result beyond the narrow dtype's range: CUDA's value then depends on where its intermediates overflowed. A
    # gradient is a chain of ops each rounding to the narrow dtype (on CUDA too): one that is not finite on emu where
    # the reference's is overflowed in such an intermediate.
    flat_actual = tree_flatten(to_cpu(actual))[0]
    overflowed = any(
        isinstance(e, torch.Tensor)
        and isinstance(c, torch.Tensor)
        and c.dtype in EPS
        and bool((torch.isfinite(e) & ~torch.isfinite(c.to(e.dtype))).any())
        for e, c in zip(flat_expected, cast)
    ) or (
        backward
        and any(
            isinstance(a, torch.Tensor)
            and isinstance(e, torch.Tensor)
            and a.dtype in EPS
            and a.shape == e.shape
            and bool((torch.isfinite(e) & ~torch.isfinite(a.to(e.dtype))).any())
            for a, e in zip(flat_actual, flat_expected)
        )
    )
    if not values or overflowed:  # random draws and overflows: CUDA's dtypes and shapes, not its numbers
        expected = tree_map(lambda t: (t.dtype, t.shape) if isinstance(t, torch.Tensor) else t, expected)
        actual = tree_map(lambda t: (t.dtype, t.shape) if isinstance(t, torch.Tensor) else t, to_cpu(actual))
        assert actual == expected, f"dtypes and shapes {actual} differ from CUDA's {expected}"
        return
    closeness = tolerance(op, dtype, backward)
    torch.testing.assert_close(to_cpu(actual), expected, equal_nan=True, check_device=False, **closeness)


def cuda_dtype_pass(op_db: Any, samples_per_op: int, backward: bool) -> dict[str, Any]:
    """One pass over the (op, dtype) pairs CUDA supports and the CPU does not, by this release's op_db."""
    compared, passed, mismatches, not_claimed = 0, 0, {}, {}
    for op in op_db:
        full_name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        if (full_name in INCOMPARABLE and INCOMPARABLE[full_name] != "random") or (
            op.name in INCOMPARABLE and INCOMPARABLE[op.name] != "random"
        ):
            continue
        if backward:
            if not op.supports_autograd:
                continue
            only_cuda = set(op.supported_backward_dtypes("cuda")) - set(op.supported_backward_dtypes("cpu"))
        else:
            only_cuda = set(op.supported_dtypes("cuda")) - set(op.supported_dtypes("cpu"))
        for dtype in sorted(only_cuda, key=str):
            pair = f"{full_name} ({str(dtype).replace('torch.', '')})"
            why = not_claimed_reason(full_name, dtype)
            if why is not None:
                not_claimed[pair] = why
                continue
            print(f"CUDA's dtypes: {pair}", file=sys.stderr, flush=True)  # names the pair if the process dies
            torch.manual_seed(0)
            try:
                batch = comparable_samples(op, full_name, dtype, backward, samples_per_op)
            except Exception:
                continue
            compared += 1
            values = full_name not in INCOMPARABLE and op.name not in INCOMPARABLE
            try:
                for sample in batch:
                    compare_cuda_dtype(op, sample, dtype, backward, values)
                passed += 1
            except Exception as exc:
                lines = traceback.format_exception_only(type(exc), exc)
                mismatches[pair] = "".join(lines).strip().splitlines()[0][:300]
    gaps = {pair: why for pair, why in mismatches.items() if pair.split(" (")[0] in KNOWN_GAPS}
    mismatches = {pair: why for pair, why in mismatches.items() if pair not in gaps}
    return {
        "compared": compared,
        "passed": passed,
        "mismatches": mismatches,
        "known_gaps": gaps,
        "not_claimed": not_claimed,
    }


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
                batch = comparable_samples(op, full_name, dtype, backward, samples_per_op)
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
    for name, backward in CUDA_DTYPE_PASSES.items():
        report["passes"][name] = cuda_dtype_pass(op_db, samples_per_op, backward)
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
