"""Views alias their base on emu, as on CPU (they must never go through the CPU fallback)."""

import pytest
import torch

pytestmark = pytest.mark.feature("views")


def test_views_share_storage_and_writes_show_through():
    base = torch.zeros(4, 6, device="emu")
    for view in (
        base.view(24),
        base.t(),
        base[1:3, ::2],
        base.reshape(2, 12),
        base.unsqueeze(0),
        base.as_strided((2, 2), (6, 1), 1),
        base.unfold(1, 2, 2),
        base.narrow(0, 1, 2),
        base.select(1, 3),
        base.expand(2, 4, 6),
    ):
        assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    base.t()[2].fill_(5.0)
    base[0, ::2].add_(torch.ones(3, device="emu"))
    expected = torch.zeros(4, 6)
    expected.t()[2].fill_(5.0)
    expected[0, ::2].add_(1)
    assert torch.equal(base.cpu(), expected)
    assert "aten::view" not in str(__import__("torch_emu").fallback_ops())


def test_complex_real_views():
    z = torch.tensor([1 + 2j, 3 + 4j], device="emu")
    r = torch.view_as_real(z)
    r[:, 1].zero_()
    assert torch.equal(z.cpu(), torch.tensor([1 + 0j, 3 + 0j]))
    assert torch.equal(torch.view_as_complex(r).cpu(), z.cpu())


def test_contiguous_of_a_view_is_a_copy():
    base = torch.arange(12.0, device="emu").reshape(3, 4)
    c = base.t().contiguous()
    assert c.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()
    assert torch.equal(c.cpu(), torch.arange(12.0).reshape(3, 4).t())
