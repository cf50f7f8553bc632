"""Real (tiny) wheel files and synthetic cell results, for the compatibility table and wheel index tests."""

from __future__ import annotations

import base64
import hashlib
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from packaging.version import Version

from torch_buildmatrix.builder.records.model import CellResult, SmokeCounts, WheelRecord
from torch_buildmatrix.model.cellkey import LABEL_FIELDS, LABEL_TEXT, SDK_FIELDS, Naming, Template
from torch_buildmatrix.model.cells import Cell
from torch_buildmatrix.model.matrix import SdkVersion, TorchRelease
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.vocab import RunnerName, Status

# torch_emu's naming, as our matrix.yaml declares it (plugin.label, sdk.id)
EMU_NAMING = Naming(
    Template.parse("torch.{torch_minor}.drv.{sdk_major}", LABEL_FIELDS, LABEL_TEXT),
    Template.parse("drv{sdk_major}", SDK_FIELDS),
)


def cell_of(release: TorchRelease, python: str, sdk: str | None = None, naming: Naming = EMU_NAMING) -> Cell:
    """A cell named as a matrix with `naming` names it; sdk: the SDK version ("2.1"), None for no SDK."""
    version = SdkVersion(Version(sdk), naming.sdk_tag(Version(sdk))) if sdk is not None else None
    return Cell(release, Python.parse(python), version, naming.key(release, Python.parse(python), version))


def make_wheel(
    directory: Path,
    name: str,
    version: str,
    *,
    tag: str = "py3-none-any",
    requires: Sequence[str] = (),
    requires_python: str = ">=3.8",
    extra_files: dict[str, str] | None = None,
) -> Path:
    """A valid, installable wheel with one module (plus `extra_files`, by path) and a METADATA listing `requires`."""
    stem = name.replace("-", "_")
    dist_info = f"{stem}-{version}.dist-info"
    metadata = "".join(
        [
            "Metadata-Version: 2.1\n",
            f"Name: {name}\n",
            f"Version: {version}\n",
            f"Requires-Python: {requires_python}\n",
            *(f"Requires-Dist: {r}\n" for r in requires),
        ]
    )
    files = {
        f"{stem}/__init__.py": f"VERSION = {version!r}\n",
        **(extra_files or {}),
        f"{dist_info}/METADATA": metadata,
        f"{dist_info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: fake_wheels\nRoot-Is-Purelib: true\nTag: {tag}\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / f"{stem}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, text in files.items():
            # A fixed stamp, like SOURCE_DATE_EPOCH in real builds: the same wheel made twice has the same bytes.
            archive.writestr(zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0)), text, zipfile.ZIP_DEFLATED)
    return wheel


def interpreter_tag() -> str:
    """The wheel tag of this interpreter on x86_64/aarch64 Linux, like the real plugin wheels."""
    import platform

    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return f"{py}-{py}-linux_{platform.machine()}"


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record(wheels_dir: Path, wheel: Path) -> WheelRecord:
    return WheelRecord(wheel.name, sha256_file(wheel), wheel.relative_to(wheels_dir).as_posix())


def cell_result(
    cell: Cell,
    status: str = "passed",
    *,
    wheels_dir: Path | None = None,
    plugin_requires: Sequence[str] = (),
    features: dict[str, str] | None = None,
    tag: str = "py3-none-any",
    torch: str | None = None,
) -> CellResult:
    """A record like the engine writes; with wheels_dir, a passed cell's plugin wheel and (with an SDK) its SDK
    wheel exist there (the SDK is torch_emu's driver: emu-driver wheels under driver/)."""
    key = cell.key if torch is None else replace(cell.key, torch=Version(torch))
    result = CellResult(
        cell=key,
        inputs_hash="h",
        inputs={},
        runner=RunnerName.LOCAL,
        status=Status(status),
        smoke=SmokeCounts(passed=90, skipped=2) if status == "passed" else SmokeCounts(passed=80, failed=3),
        features=features or {},
        log=f"logs/{cell.id}.log",
        finished=1.0,
    )
    if status != "passed":
        result.failed_step = "smoke"
        result.error = "3 smoke tests failed"
    if wheels_dir is not None:
        (wheels_dir / "logs").mkdir(parents=True, exist_ok=True)
        (wheels_dir / "logs" / f"{cell.id}.log").write_text(f"# {cell.id}\n")
        if status == "passed":
            version = f"0.1.0+{cell.local_version_label}"
            requires = list(plugin_requires)
            if cell.sdk is not None:
                driver = make_wheel(wheels_dir / "driver", "emu-driver", f"{cell.sdk.version}.0+emu")
                requires.insert(0, f"emu-driver>={cell.sdk.major},<{cell.sdk.major + 1}")
                result.sdk_wheel = record(wheels_dir, driver)
            plugin = make_wheel(
                wheels_dir / f"torch{cell.torch.minor}", "torch-emu", version, tag=tag, requires=requires
            )
            result.wheel = record(wheels_dir, plugin)
    return result


def fake_torch(directory: Path, version: str, pythons: Sequence[str]) -> list[Path]:
    """Stand-ins for torch wheels, one per CPython (cp311-cp311-manylinux_2_28_x86_64...), so the runners' tests can
    make and test builds across several Pythons in seconds: pure Python, with what a build reads of torch (its version,
    its C++ ABI) and no libraries. Only the projects' tiny fixture is built against them, never a real plugin."""
    import platform

    machine = platform.machine()
    files = {
        "torch/__init__.py": f"__version__ = {version!r}\nfrom torch import _C, version  # noqa: F401\n",
        "torch/_C.py": "_GLIBCXX_USE_CXX11_ABI = True\n",
        "torch/version.py": f"__version__ = {version!r}\ncuda = None\n",
    }
    made = []
    for python in pythons:
        tag = Python.parse(python).tag
        wheel = make_wheel(directory, "torch", version, tag=f"{tag}-{tag}-manylinux_2_28_{machine}", extra_files=files)
        made.append(wheel)
    return made
