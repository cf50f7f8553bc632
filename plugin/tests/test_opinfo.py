"""OpInfo conformance: PyTorch's op_db samples give the same results on emu as on CPU, and the dtypes only CUDA
supports give CUDA's results.

The comparison runs in a child process (opinfo_conformance.py beside this file), bounded by a timeout, so an op
that crashes or hangs fails this test with its name instead of ending the smoke session. One run serves both
features; the per-pass counts are recorded in their outcomes ("passed: ...") for the compatibility page:
`opinfo_conformance` for the passes against the CPU, `opinfo_cuda_dtypes` for the (op, dtype) pairs only CUDA
supports. From torch 2.13 every compared op must match; on older releases a mismatch makes the feature "not
available" with the count (the list is in the log). TORCH_EMU_OPINFO_SAMPLES sets how many samples per op are
compared: the default 1 takes about 20 s a cell; all samples (e.g. 1000000) about 1.5-2.5 min.
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

# The deep tier (smoke.tiers: once per build): op_db against the CPU depends on the wheel and torch alone.
pytestmark = [pytest.mark.feature("opinfo_conformance"), pytest.mark.deep]

SCRIPT = Path(__file__).with_name("opinfo_conformance.py")
TIMEOUT_S = 1500
STRICT_FROM = Version("2.13")  # every comparable op must match from this release on


def _op_db_missing() -> str:
    for module in ("expecttest", "numpy", "torch.testing._internal.opinfo"):
        try:
            if importlib.util.find_spec(module) is None:
                return module
        except ImportError:
            return module
    return ""


CPU_PASSES = ("forward float32", "backward float32", "forward complex64")
CUDA_DTYPE_PASSES = ("forward CUDA's dtypes", "backward CUDA's dtypes")


@pytest.fixture(scope="module")
def conformance_report(tmp_path_factory: pytest.TempPathFactory) -> dict:  # type: ignore[type-arg]
    """One run of the conformance script (every pass) for the module's tests."""
    missing = _op_db_missing()
    if missing:
        pytest.skip(f"not available: this torch has no OpInfo database ({missing} missing)")
    out = tmp_path_factory.mktemp("opinfo") / "opinfo.json"
    samples = os.environ.get("TORCH_EMU_OPINFO_SAMPLES", "1")
    try:
        done = subprocess.run(
            [sys.executable, str(SCRIPT), str(out), "--samples", samples],
            capture_output=True,
            check=False,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        last = (exc.stderr or b"").decode(errors="replace").strip().splitlines()[-1:]
        pytest.fail(f"the conformance run hung for {TIMEOUT_S} s at {last}")
    assert done.returncode == 0, (
        f"the conformance run died (exit {done.returncode}) at {done.stderr.strip().splitlines()[-1:]}"
    )
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def _check(report: dict, passes: tuple, emu_feature_detail) -> None:  # type: ignore[no-untyped-def,type-arg]
    def count(name: str, p: dict) -> str:  # type: ignore[type-arg]
        apart = [
            f"{len(p[key])} {label}"
            for key, label in (("known_gaps", "known gaps"), ("not_claimed", "not claimed"))
            if p.get(key)
        ]
        return f"{name} {p['passed']}/{p['compared']}" + (f" ({', '.join(apart)})" if apart else "")

    counts = ", ".join(count(name, report["passes"][name]) for name in passes)
    emu_feature_detail(counts)
    for name in passes:
        for pair, why in report["passes"][name].get("not_claimed", {}).items():
            print(f"not claimed: {name}: {pair}: {why}")
    mismatches = {f"{name}: {op}": why for name in passes for op, why in report["passes"][name]["mismatches"].items()}
    if mismatches and TORCH < STRICT_FROM:
        # Older releases' OpInfo databases were written for other kernels and skips: the conformance claim is made
        # for the release emu is developed against, and reported (not failed) as unavailable elsewhere, with the list.
        print("\n".join(f"{k}: {v}" for k, v in sorted(mismatches.items())))
        pytest.skip(f"not available: {len(mismatches)} op(s) of torch {TORCH}'s OpInfo differ ({counts})")
    assert not mismatches, f"{len(mismatches)} op(s) differ ({counts}):\n" + "\n".join(
        f"  {k}: {v}" for k, v in sorted(mismatches.items())
    )


def test_op_db_matches_cpu(conformance_report, emu_feature_detail):  # type: ignore[no-untyped-def]
    _check(conformance_report, CPU_PASSES, emu_feature_detail)


@pytest.mark.feature("opinfo_cuda_dtypes")
def test_op_db_cuda_dtypes(conformance_report, emu_feature_detail):  # type: ignore[no-untyped-def]
    """Every (op, dtype) pair this release's op_db says CUDA supports and the CPU does not, computed on emu as CUDA
    does (against the CPU in a wider dtype, cast back): model code takes CUDA's path on emu."""
    _check(conformance_report, CUDA_DTYPE_PASSES, emu_feature_detail)
