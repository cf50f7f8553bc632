"""Builds torch-tacc against the torch installed in this environment and the tacc toolkit installed on the system.

- The toolkit is found at $TACC_HOME (default /opt/tacc: the tacc-toolkit Debian package). Its API version comes from
  its header; when TACC_EXPECTED_VERSION is set (torch-buildmatrix sets it to the cell's SDK version), a toolkit of
  another API major.minor stops the build, so a build image can never pass off one toolkit as another.
- The version comes from the file VERSION beside this script (torch-buildmatrix writes plugin.version and the cell's
  local label there, e.g. 0.1.0+torch.2.13.tacc.2), else 0.1.0.dev0.
- torch_tacc/_build_info.py records what the wheel was built against; Requires-Dist pins torch's release line. The
  toolkit is not a Python package: nothing pins it, the import checks it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch
from packaging.version import Version
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

HERE = Path(__file__).parent.resolve()
VERSION_FILE = HERE / "VERSION"
VERSION = VERSION_FILE.read_text().strip() if VERSION_FILE.is_file() else "0.1.0.dev0"
TACC_HOME = Path(os.environ.get("TACC_HOME", "/opt/tacc"))

version_header = TACC_HOME / "include" / "tacc" / "tacc_version.h"
if not version_header.is_file():
    raise SystemExit(f"no tacc toolkit at {TACC_HOME} ({version_header} is missing): install tacc-toolkit")
found = dict(re.findall(r"#define TACC_VERSION_(MAJOR|MINOR) (\d+)", version_header.read_text()))
tacc_api = Version(f"{found['MAJOR']}.{found['MINOR']}")
expected = os.environ.get("TACC_EXPECTED_VERSION", "")
if expected and Version(expected).release[:2] != tacc_api.release:
    raise SystemExit(f"TACC_EXPECTED_VERSION is {expected}, but the toolkit at {TACC_HOME} has API {tacc_api}")

torch_version = Version(torch.__version__)
torch_minor = f"{torch_version.major}.{torch_version.minor}"
(HERE / "torch_tacc" / "_build_info.py").write_text(
    '"""What this torch-tacc wheel was built against (written by setup.py)."""\n\n'
    f"TORCH_VERSION = {torch.__version__!r}\n"
    f"TACC_API = {str(tacc_api)!r}\n"
)

setup(
    name="torch-tacc",
    version=VERSION,
    description="PyTorch PrivateUse1 backend for the toy accelerator tacc (system toolkit tacc-toolkit)",
    packages=["torch_tacc"],
    ext_modules=[
        CppExtension(
            name="torch_tacc._C",
            sources=["csrc/TaccRuntime.cpp", "csrc/TaccOps.cpp"],
            include_dirs=[str(HERE / "csrc"), str(TACC_HOME / "include")],
            library_dirs=[str(TACC_HOME / "lib")],
            libraries=["tacc"],
            extra_compile_args=["-O2", "-g0", "-fvisibility=hidden"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    python_requires=">=3.9",
    install_requires=[f"torch=={torch_minor}.*"],
    zip_safe=False,
)
