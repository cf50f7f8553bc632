"""No torch.accelerator or torch.emu call ends the process (issue: empty_host_cache died with SIGSEGV).

every_call.py calls each public function once in a child process; the child's output names each call before
it runs, so a crash is reported with the call that caused it and the signal that ended the process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from smoke_gates import child_process_deep

SCRIPT = Path(__file__).resolve().parent / "every_call.py"


@child_process_deep
@pytest.mark.feature("no_crashing_call")
def test_no_accelerator_or_emu_call_crashes():
    child = subprocess.run(
        [sys.executable, str(SCRIPT)],
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
        env={**os.environ, "EMU_DEVICE_COUNT": "2"},
    )
    lines = child.stdout.splitlines()
    started = [line.split()[1] for line in lines if line.startswith("CALL ")]
    finished = {line.split()[1]: line.split(" ", 2)[2] for line in lines if line.startswith("DONE ")}
    if child.returncode < 0:
        crashed = next((name for name in started if name not in finished), "after the last call")
        died = signal.Signals(-child.returncode).name
        pytest.fail(f"{crashed} ended the process with {died}:\n{child.stderr[-3000:]}")
    needs = [name for name, outcome in finished.items() if outcome == "NEEDS-ARGS"]
    assert not needs, f"every_call.py has no arguments for {needs}: add them to its table"
    assert child.returncode == 0, child.stderr[-3000:]
    # Every function was reached, torch.emu's and (where the release has it) torch.accelerator's host-cache call.
    assert "torch.emu.host_empty_cache" in finished and "torch.emu.synchronize" in finished
    if hasattr(getattr(torch, "accelerator", None), "empty_host_cache"):
        assert finished["torch.accelerator.empty_host_cache"] == "ok"
    assert set(started) == set(finished)
