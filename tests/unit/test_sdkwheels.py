"""Driver wheels: each carries a local version label, so an exact pin on it can never match a public look-alike."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from torch_buildmatrix.builder.sdkwheels import SdkWheels, sdk_version_problem
from torch_buildmatrix.errors import StepFailed
from torch_buildmatrix.model.matrix import SdkVersion

from conftest import wheel_sdk

API = SdkVersion(Version("2.1"), "drv2")


@pytest.mark.parametrize(
    ("filename", "ok"),
    [
        ("emu_driver-2.1.0+emu-py3-none-linux_x86_64.whl", True),
        ("emu_driver-2.1.0-py3-none-linux_x86_64.whl", False),  # what a squatter can publish too
        ("emu_driver-2.2.0+emu-py3-none-linux_x86_64.whl", False),
    ],
)
def test_driver_version_must_be_the_api_with_a_local_label(filename: str, ok: bool) -> None:
    assert (sdk_version_problem(filename, API) == "") is ok


def test_an_unlabelled_driver_build_is_not_cached_or_published(tmp_path: Path) -> None:
    source = tmp_path / "driver"
    source.mkdir()
    (source / "setup.py").write_text("")

    def build(tree: Path, out_dir: Path, env: object, log_file: Path) -> None:
        (out_dir / "emu_driver-2.1.0-py3-none-any.whl").write_bytes(b"wheel")

    cache = tmp_path / "cache"
    wheels = SdkWheels(wheel_sdk(source, "emu-driver"), cache, build=build)
    with pytest.raises(StepFailed, match=r"is not 2\.1\[\.x\]\+<local label>"):
        wheels.wheel(API, tmp_path / "log")
    assert not [p for p in cache.rglob("*.whl") if ".building" not in p.as_posix()]  # nothing cached for reuse
