"""Native kernels follow aten: result types as on CPU, argument errors raised at the call (not at the next
synchronize)."""

import pytest
import torch

pytestmark = pytest.mark.feature("checks_at_the_call")


def _both(fn, *tensors):  # type: ignore[no-untyped-def]
    """fn on CPU and on emu, the emu result brought back."""
    cpu = fn(*tensors)
    emu = fn(*[t.emu() for t in tensors])
    torch.emu.synchronize()
    return cpu, emu


def test_abs_of_complex_is_real_like_cpu():
    z = torch.tensor([3 + 4j, -1 - 0j], dtype=torch.complex64)
    cpu, emu = _both(torch.abs, z)
    assert emu.dtype == cpu.dtype == torch.float32
    assert emu.cpu().tolist() == cpu.tolist() == [5.0, 1.0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.complex64])
@pytest.mark.parametrize("op", [torch.abs, torch.neg, torch.exp, torch.sigmoid, torch.sqrt])
def test_unary_result_types_match_cpu(op, dtype):  # type: ignore[no-untyped-def]
    x = torch.tensor([1, 0, 1]).to(dtype)
    if op is torch.abs and dtype == torch.bool:  # CUDA's abs takes Bool, the CPU's refuses it: emu is CUDA's
        assert torch.equal(op(x.emu()).cpu(), x)
        return
    try:
        expected = op(x)
    except (RuntimeError, NotImplementedError) as exc:
        with pytest.raises(type(exc)):
            op(x.emu())
        return
    result = op(x.emu())
    assert result.dtype == expected.dtype
    torch.testing.assert_close(result.cpu(), expected, equal_nan=True)


@pytest.mark.parametrize("op", [torch.le, torch.lt, torch.ge, torch.gt])
def test_ordering_complex_raises_at_the_call(op):  # type: ignore[no-untyped-def]
    e = torch.ones(3, dtype=torch.complex64, device="emu")
    with pytest.raises(NotImplementedError, match="not implemented for 'ComplexFloat'"):
        op(e, e)
    with pytest.raises(NotImplementedError, match="not implemented for 'ComplexFloat'"):
        op(e, 1)
    # Nothing failed on the stream: the next synchronize is clean.
    torch.emu.synchronize()
    assert torch.equal((e == e).cpu(), torch.ones(3, dtype=torch.bool))  # noqa: PLR0124


def test_bool_arithmetic_errors_at_the_call():
    m = torch.ones(2, dtype=torch.bool, device="emu")
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool tensors"):
        _ = m - m
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor"):
        _ = -m
    with pytest.raises(RuntimeError, match="In-place abs is not supported for complex"):
        torch.ones(2, dtype=torch.complex64, device="emu").abs_()
    torch.emu.synchronize()


def test_shape_and_cast_errors_at_the_call():
    a = torch.ones(2, 3, device="emu")
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        a.add_(torch.ones(4, 2, 3, device="emu"))
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        torch.ones(2, dtype=torch.int64, device="emu").mul_(torch.ones(2, device="emu"))
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        torch.mm(a, a)
    torch.emu.synchronize()


UNSIGNED = [getattr(torch, name) for name in ("uint16", "uint32", "uint64") if hasattr(torch, name)]


@pytest.mark.parametrize(
    ("name", "op", "dtype"),
    [
        ("softmax", lambda t: torch.softmax(t, 0), torch.int64),
        ("log_softmax", lambda t: torch.log_softmax(t, 0), torch.int64),
        ("mm", lambda t: torch.mm(t.view(1, -1), t.view(-1, 1)), torch.bool),
        ("bmm", lambda t: torch.bmm(t.view(1, 1, -1), t.view(1, -1, 1)), torch.bool),
        ("sum", lambda t: t.sum(0), torch.float32),
        # The CPU's index_select refuses the unsigned types wider than 8 bits; cat takes them.
        *[("index_select", lambda t: t.index_select(0, torch.tensor([1, 0], device=t.device)), d) for d in UNSIGNED],
        *[("cat", lambda t: torch.cat([t, t]), d) for d in UNSIGNED],
    ],
)
def test_kernels_raise_unsupported_dtypes_at_the_call_like_cpu(name, op, dtype):  # type: ignore[no-untyped-def]
    x = torch.ones(4).to(dtype)
    try:
        expected = op(x)
    except (RuntimeError, NotImplementedError) as exc:
        with pytest.raises(type(exc)):
            op(x.emu())  # raised here, at the call, not by the synchronize below
        torch.emu.synchronize()
        return
    assert op(x.emu()).cpu().tolist() == expected.tolist()  # tolist: the CPU has no eq for uint16-64


# The bit and sub-byte dtypes: tensors of them can be made and moved, but the CPU's kernels convert, fill and copy
# few of them. emu runs the CPU's kernels as queued work, so without a check at the call the error surfaced at the
# next synchronize, from whatever call happened to wait.
BIT_DTYPES = [
    getattr(torch, name)
    for name in (
        *(f"uint{bits}" for bits in range(1, 8)),
        *(f"int{bits}" for bits in range(1, 8)),
        "bits1x8",
        "bits2x4",
        "bits4x2",
        "bits8",
        "bits16",
        "float4_e2m1fn_x2",
    )
    if isinstance(getattr(torch, name, None), torch.dtype)
]

BIT_DTYPE_CALLS = {
    "float to it": lambda dtype, device: torch.ones(4, device=device).to(dtype),
    "it to float": lambda dtype, device: torch.zeros(4, dtype=dtype, device=device).float(),
    "it to int64": lambda dtype, device: torch.zeros(4, dtype=dtype, device=device).long(),
    "clone": lambda dtype, device: torch.zeros(4, dtype=dtype, device=device).clone(),
    "strided clone": lambda dtype, device: torch.zeros(8, dtype=dtype, device=device)[::2].clone(),
    "fill_": lambda dtype, device: torch.empty(4, dtype=dtype, device=device).fill_(1),
    "zeros": lambda dtype, device: torch.zeros(4, dtype=dtype, device=device),
    "large zero_": lambda dtype, device: torch.empty(1 << 16, dtype=dtype, device=device).zero_(),
}


@pytest.mark.skipif(not BIT_DTYPES, reason=f"not available: torch {torch.__version__} has no bit dtypes")
@pytest.mark.parametrize("call", sorted(BIT_DTYPE_CALLS))
@pytest.mark.parametrize("dtype", BIT_DTYPES or [None], ids=str)
def test_bit_dtypes_raise_at_the_call_like_cpu(dtype, call):  # type: ignore[no-untyped-def]
    run = BIT_DTYPE_CALLS[call]
    try:
        run(dtype, "cpu")
    except (RuntimeError, NotImplementedError) as exc:
        with pytest.raises(type(exc)):
            run(dtype, "emu")  # raised here, at the call
    else:
        result = run(dtype, "emu")
        assert result.device.type == "emu" and result.dtype in (dtype, torch.float32, torch.int64)
    torch.emu.synchronize()  # nothing failed in the queued work
