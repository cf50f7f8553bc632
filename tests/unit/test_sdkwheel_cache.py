"""The driver wheel cache: built once under a lock (threads and processes), verified on use, rebuilt when damaged."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path

from packaging.version import Version

from torch_buildmatrix.builder.sdkwheels import SdkWheels, verify_cached
from torch_buildmatrix.model.matrix import SdkVersion

from conftest import wheel_sdk

REPO = Path(__file__).parents[2]
DRIVER = SdkVersion(Version("2.1"), "drv2")


def slow_build(counter: Path):  # type: ignore[no-untyped-def]
    """A DriverBuild that takes a while and counts its runs in a file (appends are atomic for short lines)."""

    def build(tree: Path, out_dir: Path, env: Mapping[str, str], log_file: Path) -> None:
        with counter.open("a") as handle:
            handle.write(f"{os.getpid()}\n")
        time.sleep(1)
        name = f"tiny_driver-{env['TINY_DRIVER_VERSION']}.0+emu"
        with zipfile.ZipFile(out_dir / f"{name}-py3-none-any.whl", "w") as wheel:
            wheel.writestr("tiny_driver/__init__.py", "")
            wheel.writestr(f"{name}.dist-info/RECORD", "")

    return build


def source(tmp_path: Path) -> Path:
    tree = tmp_path / "driver"
    tree.mkdir(exist_ok=True)
    (tree / "setup.py").write_text("# driver\n")
    return tree


def test_two_cells_of_one_driver_at_once_build_it_once(tmp_path: Path) -> None:
    counter = tmp_path / "builds"
    wheels = SdkWheels(wheel_sdk(source(tmp_path), "tiny-driver"), tmp_path / "cache", build=slow_build(counter))
    got: list[Path] = []
    threads = [threading.Thread(target=lambda: got.append(wheels.wheel(DRIVER, tmp_path / "log"))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(counter.read_text().splitlines()) == 1
    assert got[0] == got[1] and got[0].is_file() and verify_cached(got[0]) == ""


def test_two_processes_sharing_the_cache_build_it_once(tmp_path: Path) -> None:
    counter = tmp_path / "builds"
    source(tmp_path)
    script = tmp_path / "one.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            from pathlib import Path
            sys.path[:0] = [{str(REPO)!r}, {str(REPO / "tests")!r}, {str(Path(__file__).parent)!r}]
            from packaging.version import Version
            from torch_buildmatrix.builder.sdkwheels import SdkWheels
            from torch_buildmatrix.model.matrix import SdkVersion
            from conftest import wheel_sdk
            from test_sdkwheel_cache import slow_build
            tmp = Path({str(tmp_path)!r})
            wheels = SdkWheels(wheel_sdk(tmp / "driver"), tmp / "cache", build=slow_build(tmp / "builds"))
            print(wheels.wheel(SdkVersion(Version("2.1"), "drv2"), tmp / "log"))
            """
        )
    )
    procs = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [proc.communicate(timeout=60)[0].strip() for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0]
    assert len(counter.read_text().splitlines()) == 1
    assert outputs[0] == outputs[1] and Path(outputs[0]).is_file()


def test_truncated_cached_wheel_is_rebuilt(tmp_path: Path) -> None:
    counter = tmp_path / "builds"
    log = tmp_path / "log"
    wheels = SdkWheels(wheel_sdk(source(tmp_path), "tiny-driver"), tmp_path / "cache", build=slow_build(counter))
    built = wheels.wheel(DRIVER, log)
    built.write_bytes(built.read_bytes()[:40])  # a disk filled up or a copy died half way
    assert "sha256" in verify_cached(built)
    again = SdkWheels(wheel_sdk(source(tmp_path), "tiny-driver"), tmp_path / "cache", build=slow_build(counter)).wheel(
        DRIVER, log
    )
    assert len(counter.read_text().splitlines()) == 2
    assert verify_cached(again) == "" and zipfile.ZipFile(again).testzip() is None
    assert "is damaged" in log.read_text() and "building it again" in log.read_text()


def test_wheel_without_its_digest_is_not_trusted(tmp_path: Path) -> None:
    counter = tmp_path / "builds"
    wheels = SdkWheels(wheel_sdk(source(tmp_path), "tiny-driver"), tmp_path / "cache", build=slow_build(counter))
    built = wheels.wheel(DRIVER, tmp_path / "log")
    built.with_name(built.name + ".sha256").unlink()  # a run killed between the two writes, or an older cache
    fresh = SdkWheels(wheel_sdk(source(tmp_path), "tiny-driver"), tmp_path / "cache", build=slow_build(counter))
    assert fresh.wheel(DRIVER, tmp_path / "log").is_file()
    assert len(counter.read_text().splitlines()) == 2


def test_force_rebuilds_once_per_run(tmp_path: Path) -> None:
    counter = tmp_path / "builds"
    SdkWheels(wheel_sdk(source(tmp_path), "tiny-driver"), tmp_path / "cache", build=slow_build(counter)).wheel(
        DRIVER, tmp_path / "log"
    )
    run = SdkWheels(wheel_sdk(source(tmp_path), "tiny-driver"), tmp_path / "cache", build=slow_build(counter))
    run.wheel(DRIVER, tmp_path / "log", force=True)
    run.wheel(DRIVER, tmp_path / "log", force=True)  # the second cell of the same driver reuses this run's build
    assert len(counter.read_text().splitlines()) == 2
