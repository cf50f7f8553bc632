"""transfer_to_emu runs an unmodified CUDA-style script on emu."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.feature("transfer_to_emu")

CUDA_SCRIPT = textwrap.dedent("""
    import torch
    import torch_emu.contrib.transfer_to_emu  # the only line a user adds

    assert torch.cuda.is_available()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Linear(8, 2).cuda()
    x = torch.randn(4, 8, device="cuda")
    y = torch.zeros(4, 2, device=device)
    z = model(x) + y + torch.ones(4, 2).cuda()
    z = z.to("cuda:1")
    torch.cuda.synchronize()
    torch.cuda.manual_seed(0)
    print(
        model.weight.device, x.device, y.device, z.device, torch.cuda.device_count(), torch.cuda.memory_allocated() > 0
    )
""")


def test_cuda_script_runs_on_emu():
    done = subprocess.run([sys.executable, "-c", CUDA_SCRIPT], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["emu:0", "emu:0", "emu:0", "emu:1", "2", "True"]
