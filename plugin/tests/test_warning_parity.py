"""Warning parity: an op on emu warns only where the CPU warns too, over PyTorch's op_db, forward and backward.

A project running its tests with warnings as errors fails on emu for every warning the CPU does not give (mse_loss
and smooth_l1_loss warned "An output with one or more elements was resized" on emu only). The scan runs in a child
process (warning_parity.py beside this file); it is heavy (about a minute with 2 samples per op), depends only on
the wheel and torch, and so is marked `deep`: once per build (smoke.tiers). From torch 2.13 any emu-only warning
fails; on older releases the count makes the feature "not available" (the list is in the log).
TORCH_EMU_OPINFO_SAMPLES sets the samples per op (default 2).
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version
from smoke_gates import TORCH

SCRIPT = Path(__file__).with_name("warning_parity.py")
STRICT_FROM = Version("2.13")


@pytest.mark.deep
@pytest.mark.feature("warning_parity")
@pytest.mark.skipif(
    importlib.util.find_spec("expecttest") is None, reason="not available: op_db needs expecttest, not installed"
)
def test_emu_warns_only_where_the_cpu_does(tmp_path: Path, emu_feature_detail) -> None:
    out = tmp_path / "parity.json"
    samples = os.environ.get("TORCH_EMU_OPINFO_SAMPLES", "2")
    child = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), "--samples", samples],
        capture_output=True,
        check=False,
        text=True,
        timeout=1500,
    )
    assert child.returncode == 0, f"warning_parity.py failed (last op on stderr):\n{child.stderr[-3000:]}"
    passes = json.loads(out.read_text())["passes"]
    extra = {f"{name}: {op}": why for name, p in passes.items() for op, why in p["emu_only_warnings"].items()}
    counts = ", ".join(f"{name} {p['compared']} ops" for name, p in passes.items())
    left_out = {op: why for p in passes.values() for op, why in p.get("not_compared", {}).items()}
    if left_out:
        counts += "; not compared: " + ", ".join(f"{op} ({why})" for op, why in sorted(left_out.items()))
    print(json.dumps(extra, indent=2))
    if extra and TORCH < STRICT_FROM:
        pytest.skip(f"not available: {len(extra)} emu-only warnings on torch {TORCH} ({counts})")
    assert not extra, f"emu warns where the CPU does not: {json.dumps(extra, indent=2)}"
    emu_feature_detail(f"no emu-only warning ({counts})")


@pytest.mark.feature("warning_parity")
@pytest.mark.parametrize("loss", ["mse_loss", "smooth_l1_loss", "l1_loss", "huber_loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses_warn_as_on_the_cpu(loss: str, reduction: str) -> None:
    """The quick tier's share: the losses that warned on emu only, with warnings as errors, forward and backward."""
    import warnings

    import torch

    function = getattr(torch.nn.functional, loss)
    x = torch.randn(4, 3, device="emu", requires_grad=True)
    y = torch.randn(4, 3, device="emu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = function(x, y, reduction=reduction)
        result.sum().backward()
    expected = function(x.detach().cpu(), y.cpu(), reduction=reduction)
    torch.testing.assert_close(result.detach().cpu(), expected)
