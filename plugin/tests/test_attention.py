"""scaled_dot_product_attention on emu: emu's fused kernel (SDPBackend.OVERRIDEABLE, from torch 2.5) for the inputs it
takes, forward and backward as the CPU's math backend computes them; the math backend (SDPBackend.MATH) for the rest
and on older releases; the caller's backend choice honoured."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import torch
from packaging.version import Version
from smoke_gates import TORCH, dynamo_unavailable, requires_fused_attention, requires_graphs, requires_torch

import torch_emu

# The deep tier (smoke.tiers: once per build): results against the CPU reference depend on the wheel and torch alone.
pytestmark = [pytest.mark.feature("attention"), pytest.mark.deep]

MATH = 0  # SDPBackend.MATH in every release
OVERRIDEABLE = 4  # SDPBackend.OVERRIDEABLE from torch 2.5
FUSED_NODE = "ScaledDotProductFusedAttentionOverrideableBackward0"
requires_fused = requires_fused_attention()
attention = torch.nn.functional.scaled_dot_product_attention


@contextlib.contextmanager
def _sdp_flags(math: bool, flash: bool, efficient: bool) -> Iterator[None]:
    """The global backend flags that torch.nn.attention.sdpa_kernel sets (every release has these three)."""
    flags = torch.backends.cuda
    saved = (flags.math_sdp_enabled(), flags.flash_sdp_enabled(), flags.mem_efficient_sdp_enabled())
    flags.enable_math_sdp(math)
    flags.enable_flash_sdp(flash)
    flags.enable_mem_efficient_sdp(efficient)
    try:
        yield
    finally:
        flags.enable_math_sdp(saved[0])
        flags.enable_flash_sdp(saved[1])
        flags.enable_mem_efficient_sdp(saved[2])


def _cpu_math() -> contextlib.AbstractContextManager[None]:
    """The CPU reference: its math backend (by default the CPU takes its flash kernel)."""
    return _sdp_flags(math=True, flash=False, efficient=False)


def _fused_switch() -> object:
    """The backend sdpa_kernel enables emu's fused kernel with, as the build says (EmuAttention.cpp: OVERRIDEABLE from
    torch 2.9, whose sdpa_kernel is the first to set it; the memory-efficient flag before)."""
    from torch.nn.attention import SDPBackend

    return getattr(SDPBackend, torch.ops.torch_emu.sdpa_switch())


@dataclass(frozen=True)
class Case:
    """One call of scaled_dot_product_attention: shapes (batch, heads, length, embedding) and its arguments."""

    name: str
    query: tuple[int, ...] = (2, 4, 6, 8)
    key: tuple[int, ...] = (2, 4, 7, 8)
    value: tuple[int, ...] = (2, 4, 7, 5)
    is_causal: bool = False
    mask: str = ""  # "", "float" (an additive bias that takes a gradient) or "bool" (a row fully masked)
    scale: float | None = None
    enable_gqa: bool = False
    transposed: bool = False  # the query a (batch, length, heads, embedding) tensor's transpose, as models make it

    def kwargs(self) -> dict[str, object]:
        extra: dict[str, object] = {"enable_gqa": True} if self.enable_gqa else {}
        return {"is_causal": self.is_causal, "scale": self.scale, **extra}


CASES = [
    Case("plain"),
    Case("causal", is_causal=True),
    Case("causal-square", key=(2, 4, 6, 8), value=(2, 4, 6, 8), is_causal=True),
    Case("float-mask", mask="float"),
    Case("bool-mask", mask="bool"),
    Case("scale", scale=0.3),
    Case("negative-scale", scale=-0.5, is_causal=True),
    Case("transposed-query", transposed=True),
    Case("gqa", query=(2, 6, 5, 8), key=(2, 2, 7, 8), value=(2, 2, 7, 4), enable_gqa=True, is_causal=True),
    Case("gqa-mask", query=(1, 4, 5, 8), key=(1, 1, 7, 8), value=(1, 1, 7, 8), enable_gqa=True, mask="float"),
]


def _gated(case: Case) -> object:
    if case.enable_gqa:
        return pytest.param(case, id=case.name, marks=requires_torch(">=2.5", "enable_gqa"))
    return pytest.param(case, id=case.name)


def _inputs(case: Case) -> list[torch.Tensor]:
    """query, key, value and the mask (if any) on the CPU, as leaves that take gradients (a boolean mask takes none)."""
    torch.manual_seed(0)
    if case.transposed:
        b, h, length, e = case.query
        query = torch.randn(b, length, h, e).transpose(1, 2)
    else:
        query = torch.randn(case.query)
    tensors = [query, torch.randn(case.key), torch.randn(case.value)]
    length, kv_length = case.query[-2], case.key[-2]
    if case.mask == "float":
        tensors.append(torch.randn(length, kv_length))
    elif case.mask == "bool":
        keep = torch.rand(case.query[0], 1, length, kv_length) > 0.3
        keep[:, :, 1] = False  # a row with nothing to attend to gives zeros, as the math backend's safe softmax
        tensors.append(keep)
    return [t.detach().requires_grad_(t.is_floating_point()) for t in tensors]


def _run(case: Case, tensors: list[torch.Tensor]) -> torch.Tensor:
    q, k, v, *mask = tensors
    return attention(q, k, v, attn_mask=mask[0] if mask else None, **case.kwargs())  # type: ignore[arg-type]


def _forward_backward(case: Case, device: str) -> tuple[torch.Tensor, list[torch.Tensor | None], str]:
    """The output, the inputs' gradients (on the CPU) and the autograd node that produced the output."""
    cpu = _inputs(case)
    tensors = cpu if device == "cpu" else [t.detach().to(device).requires_grad_(t.requires_grad) for t in cpu]
    out = _run(case, tensors)
    node = out.grad_fn.name() if out.grad_fn is not None else ""
    torch.manual_seed(1)
    out.backward(torch.randn(out.shape).to(device))
    return out.detach().cpu(), [t.grad.cpu() if t.grad is not None else None for t in tensors], node


@pytest.mark.parametrize("case", [_gated(c) for c in CASES])
def test_attention_matches_cpu_math_forward_and_backward(case: Case) -> None:
    with _cpu_math():
        out_cpu, grads_cpu, _ = _forward_backward(case, "cpu")
    out_emu, grads_emu, _ = _forward_backward(case, "emu")
    # Before torch 2.5 the math backend gives NaN for a query row the mask hides entirely (2.5 made it 0): on the CPU
    # as on emu, so NaN must sit in the same places.
    torch.testing.assert_close(out_emu, out_cpu, equal_nan=True)  # float32's tolerances
    for grad_emu, grad_cpu in zip(grads_emu, grads_cpu):
        assert (grad_emu is None) == (grad_cpu is None)
        if grad_cpu is not None:
            torch.testing.assert_close(grad_emu, grad_cpu, equal_nan=True)


@requires_fused
@pytest.mark.parametrize("case", [_gated(c) for c in CASES])
def test_attention_runs_the_fused_kernel_without_falling_back(case: Case) -> None:
    before = set(torch_emu.fallback_ops())
    *_, node = _forward_backward(case, "emu")
    assert node == FUSED_NODE
    assert set(torch_emu.fallback_ops()) == before  # forward and backward ran as emu kernels


@requires_fused
def test_fused_sdp_choice_answers_the_fused_backend() -> None:
    from torch.nn.attention import SDPBackend

    q, k, v = (t.detach().emu() for t in _inputs(Case("plain"))[:3])
    if hasattr(SDPBackend, "OVERRIDEABLE"):
        assert int(SDPBackend.OVERRIDEABLE) == OVERRIDEABLE
    assert torch._fused_sdp_choice(q, k, v) == OVERRIDEABLE  # the CPU's choice (flash) came back through the fallback
    gqa = Case("gqa", query=(1, 4, 3, 8), key=(1, 2, 3, 8), value=(1, 2, 3, 8))
    q, k, v = (t.detach().emu() for t in _inputs(gqa)[:3])
    assert torch._fused_sdp_choice(q, k, v, enable_gqa=True) == OVERRIDEABLE


def _math_only_inputs() -> list[object]:
    """Inputs emu's fused kernel does not take: scaled_dot_product_attention runs them with the math backend."""
    return [
        pytest.param(((2, 4, 6, 8), (2, 4, 6, 8), 1.0, False), id="dropout-1"),
        pytest.param(((4, 6, 8), (4, 6, 8), 0.0, False), id="3-D"),
        pytest.param(((2, 4, 6, 8), (2, 1, 6, 8), 0.0, False), id="heads-broadcast-without-gqa"),
        pytest.param(((2, 4, 6, 8), (1, 4, 6, 8), 0.0, False), id="batch-broadcast"),
    ]


@pytest.mark.parametrize("shapes", _math_only_inputs())
def test_inputs_the_fused_kernel_does_not_take_run_the_math_backend(shapes: tuple) -> None:  # type: ignore[type-arg]
    query_shape, kv_shape, dropout_p, _ = shapes
    torch.manual_seed(0)
    cpu = [torch.randn(query_shape), torch.randn(kv_shape), torch.randn(kv_shape)]
    q, k, v = (t.emu().requires_grad_() for t in cpu)
    assert torch._fused_sdp_choice(q, k, v, dropout_p=dropout_p) == MATH
    out = attention(q, k, v, dropout_p=dropout_p)
    assert out.grad_fn is None or out.grad_fn.name() != FUSED_NODE
    with _cpu_math():  # dropout_p=1 drops everything: zeros on both
        torch.testing.assert_close(out.detach().cpu(), attention(*cpu, dropout_p=dropout_p))


@requires_fused
def test_fused_op_returns_output_and_logsumexp_as_its_schema() -> None:
    case = Case("float-mask", mask="float")
    q, k, v, bias = (t.detach() for t in _inputs(case))
    scale = 0.25
    results = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
        q.emu(), k.emu(), v.emu(), bias.emu(), 0.0, False, True, scale=scale
    )
    out, lse, cum_q, cum_k, max_q, max_k, seed, offset, probs = results
    scores = (q @ k.transpose(-2, -1)) * scale + bias
    with _cpu_math():
        expected = attention(q, k, v, attn_mask=bias, scale=scale)
    torch.testing.assert_close(out.cpu(), expected)
    assert lse.dtype == torch.float32 and lse.shape == q.shape[:3] and lse.device == q.emu().device
    torch.testing.assert_close(lse.cpu(), torch.logsumexp(scores, -1))
    torch.testing.assert_close(probs.cpu(), scores.softmax(-1))  # return_debug_mask: the attention weights
    assert (cum_q, cum_k, max_q, max_k) == (None, None, q.shape[2], k.shape[2])
    assert seed.shape == offset.shape == ()


@requires_fused
def test_fused_backward_op_gives_only_the_gradients_asked_for() -> None:
    case = Case("plain")
    q, k, v = (t.detach().emu() for t in _inputs(case)[:3])
    fused = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, k, v)
    out, lse = fused[0], fused[1]
    grad_out = torch.ones_like(out)
    empty = torch.empty(0, device="emu")
    grads = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward(
        grad_out, q, k, v, empty, [False, True, False, False], out, lse, empty, empty, 6, 7, 0.0, False, empty, empty
    )
    assert grads[0] is None and grads[2] is None and grads[3] is None
    leaves = [t.cpu().requires_grad_() for t in (q, k, v)]
    with _cpu_math():
        attention(*leaves).backward(grad_out.cpu())
    torch.testing.assert_close(grads[1].cpu(), leaves[1].grad)


DROPOUT_CASES = [
    Case("causal", is_causal=True),
    Case("float-mask", mask="float", scale=0.4),
    Case("gqa-mask", query=(1, 4, 5, 8), key=(1, 2, 7, 8), value=(1, 2, 7, 8), enable_gqa=True, mask="float"),
]


# torch's math backend warns when given a dropout mask: here it is the point.
IGNORE_MASK_WARNING = pytest.mark.filterwarnings("ignore:Dropout mask should only be used for testing purposes")


@requires_fused
@IGNORE_MASK_WARNING
@pytest.mark.parametrize("case", [_gated(c) for c in DROPOUT_CASES])
def test_dropout_matches_cpu_math_with_the_same_mask(case: Case) -> None:
    """The fused ops called as autograd calls them: the forward's kept probabilities (return_debug_mask) give the
    dropout mask for the CPU's math backend, whose output and gradients the fused forward and backward must give; the
    backward draws the same mask again from the forward's philox_seed."""
    dropout_p = 0.3
    q, k, v, *mask = (t.detach() for t in _inputs(case))
    bias = mask[0] if mask else None
    emu = [t.emu() for t in (q, k, v)]
    emu_bias = bias.emu() if bias is not None else None
    forward = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(
        *emu, emu_bias, dropout_p, case.is_causal, True, scale=case.scale
    )
    out, lse, cum_q, cum_k, max_q, max_k, seed, offset, kept = forward
    keep = kept.cpu() != 0
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    bias_leaf = bias.clone().requires_grad_() if bias is not None else None
    expected, _ = torch.ops.aten._scaled_dot_product_attention_math(
        *leaves, bias_leaf, dropout_p, case.is_causal, keep, scale=case.scale, enable_gqa=case.enable_gqa
    )
    torch.testing.assert_close(out.cpu(), expected)
    torch.manual_seed(1)
    grad_out = torch.randn(out.shape)
    expected.backward(grad_out)
    grads = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward(
        grad_out.emu(),
        *emu,
        emu_bias if emu_bias is not None else torch.empty(0, device="emu"),
        [True, True, True, bias is not None],
        out,
        lse,
        cum_q,
        cum_k,
        max_q,
        max_k,
        dropout_p,
        case.is_causal,
        seed,
        offset,
        scale=case.scale,
    )
    for grad, leaf in zip(grads, [*leaves, bias_leaf]):
        if leaf is not None:
            torch.testing.assert_close(grad.cpu(), leaf.grad)


@requires_fused
def test_attention_dropout_takes_the_fused_kernel_and_follows_the_seed() -> None:
    q, k, v = (
        t.detach().emu().requires_grad_() for t in _inputs(Case("plain", key=(2, 4, 64, 8), value=(2, 4, 64, 5)))[:3]
    )
    torch.manual_seed(5)
    first = attention(q, k, v, dropout_p=0.4)
    torch.manual_seed(5)
    again = attention(q, k, v, dropout_p=0.4)
    other = attention(q, k, v, dropout_p=0.4)
    assert first.grad_fn.name() == FUSED_NODE
    torch.testing.assert_close(first, again)  # torch.manual_seed seeds emu's generator
    assert not torch.allclose(first, other)
    first.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))
    kept = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, k, v, None, 0.4, False, True)[-1]
    dropped = (kept == 0).float().mean().item()
    assert 0.35 < dropped < 0.45  # of 2 * 4 * 6 * 64 = 3072 probabilities


def _graph_nodes(node: object) -> set[str]:
    """The names of the autograd nodes reachable from node."""
    seen: set[str] = set()
    todo = [node]
    while todo:
        current = todo.pop()
        if current is None or current.name() in seen:  # type: ignore[attr-defined]
            continue
        seen.add(current.name())  # type: ignore[attr-defined]
        todo.extend(child for child, _ in current.next_functions)  # type: ignore[attr-defined]
    return seen


@requires_fused
def test_callers_backend_choice_is_honoured() -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (t.detach().emu().requires_grad_() for t in _inputs(Case("plain"))[:3])
    with sdpa_kernel([SDPBackend.MATH]):
        assert torch._fused_sdp_choice(q, k, v) == MATH
        assert attention(q, k, v).grad_fn.name() != FUSED_NODE
    with sdpa_kernel([_fused_switch()]):  # type: ignore[list-item]
        assert torch._fused_sdp_choice(q, k, v) == OVERRIDEABLE
        assert attention(q, k, v).grad_fn.name() == FUSED_NODE
        if Version("2.14") > TORCH:
            with pytest.raises(RuntimeError, match=r"does not take inputs that are not 4-D .* math backend"):
                attention(q[0], k[0], v[0])
        else:  # torch 2.14 makes a 3-D input 4-D before choosing a backend: the fused kernel then takes it
            out = attention(q[0], k[0], v[0])
            assert out.grad_fn.name() == "SqueezeBackward1"
            assert FUSED_NODE in _graph_nodes(out.grad_fn)  # under the squeeze: emu's kernel, not the math backend
    neither = pytest.raises(RuntimeError, match=r"OVERRIDEABLE\) is disabled and the math backend")
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]), neither:  # neither backend emu runs
        attention(q, k, v)
    assert attention(q, k, v).grad_fn.name() == FUSED_NODE  # the default flags again


@requires_fused
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_reduced_precision_attention_computes_in_float(dtype: torch.dtype) -> None:
    """PyTorch's reference-backend SDPA test's inputs (half query, key, value and mask; smaller here): the fused kernel
    computes in float32 and rounds once, so it gives the CPU's float32 math rounded to the dtype."""
    torch.manual_seed(0)
    shape = (2, 2, 64, 32)
    cpu = [torch.rand(shape, dtype=dtype) for _ in range(3)] + [torch.rand(2, 2, 64, 64, dtype=dtype)]
    emu = [t.emu().requires_grad_() for t in cpu]
    out = attention(*emu[:3], attn_mask=emu[3])
    assert out.dtype == dtype and out.grad_fn.name() == FUSED_NODE
    grad = torch.rand(shape, dtype=dtype)
    out.backward(grad.emu())
    reference = [t.float().requires_grad_() for t in cpu]
    with _cpu_math():
        expected = attention(*reference[:3], attn_mask=reference[3])
    expected.backward(grad.float())
    torch.testing.assert_close(out.detach().cpu(), expected.detach().to(dtype))
    for leaf, ref in zip(emu, reference):
        torch.testing.assert_close(leaf.grad.cpu(), ref.grad.to(dtype))


@requires_fused
@requires_graphs()
def test_captured_graph_replays_the_fused_kernel_on_new_inputs() -> None:
    q, k, v = (t.detach().emu() for t in _inputs(Case("plain"))[:3])
    side = torch.emu.Stream()
    with torch.emu.stream(side):  # warm up outside the capture, as with CUDA graphs
        attention(q, k, v, is_causal=True)
    torch.emu.synchronize()
    graph = torch.emu.EmuGraph()
    with torch.emu.graph(graph):
        out = attention(q, k, v, is_causal=True)
    torch.manual_seed(2)
    q.copy_(torch.randn(q.shape))
    graph.replay()
    torch.emu.synchronize()
    with _cpu_math():
        torch.testing.assert_close(out.cpu(), attention(q.cpu(), k.cpu(), v.cpu(), is_causal=True))


@requires_fused
def test_compiled_attention_traces_the_fused_op_and_matches_eager() -> None:
    """AOTAutograd traces the fused forward and backward through torch's Meta kernels and autograd formula (aot_eager:
    no Inductor compile; test_models compiles attention models with Inductor)."""
    reason = dynamo_unavailable()
    if reason is not None:
        pytest.skip(reason)
    case = Case("gqa-mask", query=(1, 4, 5, 8), key=(1, 2, 7, 8), value=(1, 2, 7, 8), enable_gqa=True, mask="float")
    traced: list[str] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> object:
        from functorch.compile import make_boxed_func
        from torch._dynamo.backends.common import aot_autograd

        def record(graph: torch.fx.GraphModule, _inputs: list[torch.Tensor]) -> object:
            traced.extend(str(node.target) for node in graph.graph.nodes if node.op == "call_function")
            return make_boxed_func(graph.forward)

        return aot_autograd(fw_compiler=record, bw_compiler=record)(gm, example_inputs)

    eager_out, eager_grads, _ = _forward_backward(case, "emu")
    compiled = torch.compile(lambda *tensors: _run(case, list(tensors)), backend=backend, fullgraph=True)
    tensors = [t.detach().emu().requires_grad_(t.requires_grad) for t in _inputs(case)]
    out = compiled(*tensors)
    torch.manual_seed(1)
    out.backward(torch.randn(out.shape).emu())
    assert any("_scaled_dot_product_fused_attention_overrideable.default" in t for t in traced)
    assert any("_scaled_dot_product_fused_attention_overrideable_backward.default" in t for t in traced)
    torch.testing.assert_close(out.detach().cpu(), eager_out)
    for tensor, grad in zip(tensors, eager_grads):
        torch.testing.assert_close(tensor.grad.cpu(), grad)


@requires_fused
@requires_graphs()
@IGNORE_MASK_WARNING
def test_captured_dropout_draws_fresh_numbers_on_each_replay() -> None:
    """As CUDA graphs' philox offsets: each replay of the fused kernel draws its own dropout seed, writes it to
    philox_seed, and its output is the math backend's with the mask of that replay."""
    q, k, v = (t.detach().emu() for t in _inputs(Case("plain"))[:3])
    fused = torch.ops.aten._scaled_dot_product_fused_attention_overrideable
    side = torch.emu.Stream()
    with torch.emu.stream(side):
        fused(q, k, v, None, 0.3)
    torch.emu.synchronize()
    graph = torch.emu.EmuGraph()
    with torch.emu.graph(graph):
        results = fused(q, k, v, None, 0.3, False, True)
    replays = []
    for _ in range(2):
        graph.replay()
        torch.emu.synchronize()
        out, seed, kept = results[0].cpu(), results[6].item(), results[8].cpu()
        expected, _ = torch.ops.aten._scaled_dot_product_attention_math(
            q.cpu(), k.cpu(), v.cpu(), None, 0.3, False, kept != 0
        )
        torch.testing.assert_close(out, expected)
        replays.append((out, seed))
    assert replays[0][1] != replays[1][1] and not torch.equal(replays[0][0], replays[1][0])
