"""Gates for smoke tests: a test for something this torch or driver lacks skips as 'not available: <why>'."""

import pytest
import torch
from packaging.specifiers import SpecifierSet
from packaging.version import Version

import torch_emu

TORCH = Version(torch.__version__.split("+")[0])
DRIVER_MAJOR = torch_emu.driver_api_version()[0]


def requires_torch(spec: str):
    """Runs the test only on torch releases in spec (e.g. ">=2.5"); elsewhere it is 'not available'."""
    return pytest.mark.skipif(
        TORCH not in SpecifierSet(spec), reason=f"not available: needs torch {spec}, this is {TORCH}"
    )


def requires_driver(major: int, what: str):
    return pytest.mark.skipif(
        major > DRIVER_MAJOR,
        reason=f"not available: {what} needs driver API {major}.x, "
        f"this build uses {'.'.join(map(str, torch_emu.driver_api_version()))}",
    )


# A torch release that is not the installed one, for tests that fake a mismatched install.
OTHER_TORCH = "2.4.1" if (TORCH.major, TORCH.minor) != (2, 4) else "2.1.2"
OTHER_MINOR = ".".join(OTHER_TORCH.split(".")[:2])
