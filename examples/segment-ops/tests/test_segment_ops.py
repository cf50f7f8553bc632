"""segops's own test suite, run against the installed wheel (torch-buildmatrix's smoke test for each cell)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import segops
import torch
from packaging.version import Version

TORCH = Version(Version(torch.__version__).base_version)


def reference_sum(src: torch.Tensor, index: torch.Tensor, num_segments: int) -> torch.Tensor:
    return torch.zeros((num_segments, *src.shape[1:]), dtype=src.dtype).index_add_(0, index, src)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", [(7,), (7, 3), (7, 2, 4)])
def test_segment_sum_matches_index_add(dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    generator = torch.Generator().manual_seed(0)
    src = torch.randn(shape, dtype=dtype, generator=generator)
    index = torch.tensor([0, 2, 2, 4, 0, 1, 4])
    out = segops.segment_sum(src, index, 5)
    assert out.shape == (5, *shape[1:]) and out.dtype == dtype
    torch.testing.assert_close(out, reference_sum(src, index, 5))
    assert torch.count_nonzero(out[3]) == 0  # a segment no row names stays zero


def test_segment_sum_of_a_non_contiguous_source() -> None:
    src = torch.arange(12.0).view(3, 4).t()  # 4 x 3, transposed: not contiguous
    index = torch.tensor([1, 0, 1, 1])
    torch.testing.assert_close(segops.segment_sum(src, index, 2), reference_sum(src.contiguous(), index, 2))


def test_segment_count_matches_bincount() -> None:
    index = torch.tensor([3, 0, 3, 3, 1])
    torch.testing.assert_close(segops.segment_count(index, 6), torch.bincount(index, minlength=6))


def test_segment_mean_leaves_empty_segments_zero() -> None:
    src = torch.tensor([[1.0, 2.0], [3.0, 4.0], [10.0, 10.0]])
    out = segops.segment_mean(src, torch.tensor([0, 0, 2]), 3)
    torch.testing.assert_close(out, torch.tensor([[2.0, 3.0], [0.0, 0.0], [10.0, 10.0]]))


def test_gradient_of_segment_sum() -> None:
    src = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    index = torch.tensor([1, 1, 0, 3, 3, 3])
    assert torch.autograd.gradcheck(lambda s: segops.segment_sum(s, index, 4), (src,))
    weights = torch.arange(4.0, dtype=torch.float64).view(4, 1)
    (segops.segment_sum(src, index, 4) * weights).sum().backward()
    assert src.grad is not None
    torch.testing.assert_close(src.grad, weights[index].expand(6, 3))


def test_an_index_outside_the_segments_is_refused() -> None:
    with pytest.raises(RuntimeError, match=r"index\[2\] = 5 is outside \[0, 5\)"):
        segops.segment_sum(torch.ones(3), torch.tensor([0, 1, 5]), 5)
    with pytest.raises(RuntimeError, match=r"index\[0\] = -1"):
        segops.segment_count(torch.tensor([-1]), 2)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(RuntimeError, match="float32 or float64"):
        segops.segment_sum(torch.ones(3, dtype=torch.int32), torch.tensor([0, 1, 1]), 2)
    with pytest.raises(RuntimeError, match="int64"):
        segops.segment_sum(torch.ones(3), torch.tensor([0, 1, 1], dtype=torch.int32), 2)
    with pytest.raises(RuntimeError, match="one entry per row"):
        segops.segment_sum(torch.ones(3), torch.tensor([0, 1]), 2)


@pytest.mark.skipif(not hasattr(torch.library, "opcheck"), reason="torch.library.opcheck exists from torch 2.4")
def test_operators_pass_torch_opcheck() -> None:
    src = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
    index = torch.tensor([0, 1, 1, 2, 0])
    torch.library.opcheck(torch.ops.segops.segment_sum.default, (src, index, 3))
    torch.library.opcheck(torch.ops.segops.segment_count.default, (index, 3))


def test_build_mode_follows_the_torch_it_was_built_against() -> None:
    # From torch 2.10 the wheel is a stable-ABI build; it may have been built against an older release than the
    # one installed (one build serves every later release), never against a newer one.
    built = Version(Version(segops.TORCH_VERSION).base_version)
    assert (built >= Version("2.10")) == segops.STABLE_ABI
    if segops.STABLE_ABI:
        assert built <= TORCH
    else:
        assert (built.major, built.minor) == (TORCH.major, TORCH.minor)


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs nm (binutils)")
def test_a_stable_build_uses_torch_through_its_c_shims_only() -> None:
    if not segops.STABLE_ABI:
        pytest.skip("an ordinary build links torch's C++ API by design")
    (library,) = Path(segops.__file__).parent.glob("_segops*.so")
    nm = ["nm", "-D", "--undefined-only", str(library)]
    undefined = subprocess.run(nm, capture_output=True, text=True, check=True).stdout
    cxx_torch = [line.split()[-1] for line in undefined.splitlines() if "_ZN2at" in line or "_ZN3c10" in line]
    assert not cxx_torch, f"the stable build reaches torch's C++ ABI: {cxx_torch[:5]}"
