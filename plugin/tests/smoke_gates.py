"""Gates for smoke tests: a test for something this torch or driver lacks skips as 'not available: <why>'."""

from __future__ import annotations

import sys
import sysconfig
import warnings

import pytest
import torch
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import torch_emu

TORCH = Version(torch.__version__.split("+")[0])
DRIVER_MAJOR = torch_emu.driver_api_version()[0]
# The Python as the matrix names it: a free-threaded 3.13 is "3.13t", whose reasons differ from 3.13's.
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}{'t' if FREE_THREADED else ''}"


# A test that starts a child Python importing torch (2-8 s a cell) and whose outcome depends only on the wheel and
# torch: it runs once per build, in the build's deep cell, not on every cell.
child_process_deep = pytest.mark.deep


def requires_torch(spec: str, what: str = ""):
    """Runs the test only on torch releases in spec (e.g. ">=2.5"); elsewhere it is 'not available'.

    what names the torch feature, so the reason reads "not available: <what> needs torch >=2.9, this is 2.8.0".
    """
    needs = f"{what} needs torch {spec}" if what else f"needs torch {spec}"
    return pytest.mark.skipif(TORCH not in SpecifierSet(spec), reason=f"not available: {needs}, this is {TORCH}")


def torch_save_unavailable() -> str | None:
    """Why torch.save cannot write even a CPU tensor here, or None.

    torch 2.5 assigns pickler.persistent_id on the C Pickler, which CPython 3.13 made read-only: every torch.save
    raises AttributeError on that release and Python, whatever the device (torch 2.6 subclasses the Pickler instead).
    """
    import io

    try:
        torch.save(torch.zeros(1), io.BytesIO())
    except Exception as exc:
        return f"not available: torch {TORCH} cannot torch.save a CPU tensor on Python {PYTHON}: {_first_line(exc)}"
    return None


def requires_torch_save():
    """Runs the test only where torch.save works for the CPU; elsewhere it is 'not available' with torch's error."""
    reason = torch_save_unavailable()
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def backend_meta_serialization_unavailable() -> str | None:
    """Why torch.save cannot carry an emu tensor's backend metadata here, or None.

    torch.save reads a tensor's metadata through torch._C._get_tensor_metadata. Releases whose version of it does not
    consult the PrivateUse1 TensorBackendMetaRegistry (2.4 does not) never see emu's metadata, so there is nothing for
    a plugin to make survive: detected rather than guessed per version.
    """
    x = torch.ones(1, device="emu")
    torch_emu.set_backend_meta(x, {"probe": 1})
    if any(key.startswith("emu_meta:") for key in torch._C._get_tensor_metadata(x)):
        return None
    return (
        f"not available: torch {TORCH} does not hand PrivateUse1 backend metadata to torch.save "
        "(torch._C._get_tensor_metadata leaves it out)"
    )


def numpy_bridge_unavailable() -> str | None:
    """Why torch cannot make a tensor of a numpy array here, or None: a torch built against numpy 1.x (2.2 and
    before) beside numpy 2 says "Numpy is not available"."""
    try:
        import numpy as np

        torch.from_numpy(np.zeros(1))
    except Exception as exc:
        return f"not available: torch {TORCH} cannot make tensors of numpy arrays here: {_first_line(exc)}"
    return None


def requires_driver(major: int, what: str):
    return pytest.mark.skipif(
        major > DRIVER_MAJOR,
        reason=f"not available: {what} needs driver API {major}.x, "
        f"this build uses {'.'.join(map(str, torch_emu.driver_api_version()))}",
    )


def requires_pinned_memory():
    """Pinned host memory needs the PrivateUse1 isPinnedPtr hook (torch 2.5) and host allocation in the driver
    (API 2.2); elsewhere the test is 'not available' with whichever is missing."""
    if TORCH not in SpecifierSet(">=2.5"):
        return pytest.mark.skip(
            reason=f"not available: torch {TORCH} has no PrivateUse1 isPinnedPtr hook (added in 2.5), so "
            "Tensor.is_pinned() cannot see emu's pinned host memory"
        )
    return pytest.mark.skipif(
        not torch_emu.features()["pinned_memory"],
        reason="not available: pinned host memory needs driver API 2.2 (emuHostAlloc), this build uses "
        + torch_emu.build_info()["DRIVER_API"],
    )


FUSED_ATTENTION_OPS = (
    "_scaled_dot_product_fused_attention_overrideable",
    "_scaled_dot_product_fused_attention_overrideable_backward",
)


def requires_fused_attention():
    """emu's fused attention kernel serves torch's entry points for backends other than CPU and CUDA
    (SDPBackend.OVERRIDEABLE, torch 2.5); where the release lacks them the test is 'not available'."""
    missing = [name for name in FUSED_ATTENTION_OPS if not hasattr(torch.ops.aten, name)]
    return pytest.mark.skipif(
        bool(missing),
        reason=f"not available: torch {TORCH} has no aten::{missing[0] if missing else ''} (SDPBackend.OVERRIDEABLE, "
        "torch's fused attention entry point for PrivateUse1 backends, from 2.5): emu runs the math backend",
    )


def requires_graphs():
    """Graph capture needs stream capture in the driver (API 2.3); elsewhere the test is 'not available'."""
    return pytest.mark.skipif(
        not torch_emu.features().get("graphs", False),
        reason="not available: graph capture needs driver API 2.3 (stream capture), this build uses "
        + ".".join(map(str, torch_emu.driver_api_version())),
    )


def requires_captured_backward():
    """A backward captured into an emu graph needs torch 2.3: before, the autograd engine puts a node on its forward's
    stream only for CUDA (Node::stream(DeviceType::CUDA)), so emu's backward runs eagerly on the autograd thread's
    default stream, outside the capture, and a replay does not recompute the gradients."""
    return requires_torch(">=2.3", "a captured backward (autograd running emu nodes on their forward's stream)")


# A torch release that is not the installed one, for tests that fake a mismatched install.
OTHER_TORCH = "2.4.1" if (TORCH.major, TORCH.minor) != (2, 4) else "2.1.2"
OTHER_MINOR = ".".join(OTHER_TORCH.split(".")[:2])


def dynamo_unavailable() -> str | None:
    """Why torch.compile (Dynamo) cannot run here, or None. Imports torch._dynamo (seconds): call it in a test.

    A release supports the Pythons that were out when it was made: torch 2.9 refuses Python 3.14 ("Python 3.14+ not
    yet supported for torch.compile", raised by torch._dynamo.eval_frame.check_if_dynamo_supported), so the reason
    quotes the release's own check where it has one.
    """
    try:
        import torch._dynamo as dynamo
    except Exception as exc:
        return f"not available: torch {TORCH} cannot import Dynamo on Python {PYTHON}: {_first_line(exc)}"
    check = getattr(getattr(dynamo, "eval_frame", None), "check_if_dynamo_supported", None)
    if check is not None:
        try:
            check()
        except Exception as exc:
            return f"not available: torch {TORCH} has no torch.compile (Dynamo) on Python {PYTHON}: {_first_line(exc)}"
        return None
    if not getattr(dynamo, "is_dynamo_supported", lambda: True)():
        return f"not available: torch {TORCH} has no torch.compile (Dynamo) on Python {PYTHON}"
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{exc.__class__.__name__}: {text[0][:200]}" if text else exc.__class__.__name__


def dynamo_device_registry_unavailable() -> str | None:
    """Why Dynamo has no device interface for emu here, or None (register_interface_for_device came in torch 2.2)."""
    reason = dynamo_unavailable()
    if reason is not None:
        return reason
    try:
        from torch._dynamo import device_interface
    except ImportError:  # torch 2.1 has no torch._dynamo.device_interface module at all
        return f"not available: torch {TORCH} has no Dynamo device registry (no torch._dynamo.device_interface)"
    if not hasattr(device_interface, "register_interface_for_device"):
        return f"not available: torch {TORCH} has no Dynamo device registry (register_interface_for_device)"
    return None


def inductor_device_registry_unavailable() -> str | None:
    """Why Inductor has no registry to put emu in here, or None (register_backend_for_device)."""
    reason = dynamo_unavailable()
    if reason is not None:
        return reason
    try:
        import torch._inductor.codegen.common as inductor_codegen
    except Exception as exc:
        return f"not available: torch {TORCH} cannot import Inductor's code generators ({exc.__class__.__name__})"
    if not hasattr(inductor_codegen, "register_backend_for_device"):
        return f"not available: torch {TORCH} has no Inductor device registry (register_backend_for_device)"
    return None


def transformers_unavailable() -> str | None:
    """Why transformers' models cannot run beside this torch, or None. Imports transformers (seconds): call it in a
    test. The smoke environment installs a transformers that supports the cell's torch; a release or Python it
    cannot serve says so here."""
    try:
        import transformers
    except ImportError as exc:
        return f"not available: no transformers for torch {TORCH} on Python {PYTHON} ({_first_line(exc)})"
    except Exception as exc:
        return f"not available: transformers cannot be imported beside torch {TORCH}: {_first_line(exc)}"
    if not transformers.utils.is_torch_available():
        return f"not available: transformers {transformers.__version__} does not support torch {TORCH}"
    return None


def quantized_tensors_unavailable() -> str | None:
    """Why this torch cannot hold a quantized tensor on a PrivateUse1 device, or None.

    Only what torch itself lacks counts: its quantized dtypes (deprecated in 2.13), or a quantizer that allocates on
    CPU and CUDA alone ("unrecognized device for new_qtensor"). Any other failure is the plugin's, and fails the test.
    """
    if not hasattr(torch, "qint8"):
        return f"not available: torch {TORCH} has no quantized dtypes"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the dtypes' deprecation
            torch._empty_affine_quantized([1], scale=1.0, zero_point=0, dtype=torch.qint8, device="emu")
    except RuntimeError as exc:
        if "unrecognized device for new_qtensor" in str(exc):
            return f"not available: torch {TORCH} makes quantized tensors on the CPU and CUDA only: {_first_line(exc)}"
    return None
