"""The drift probe's report: compiler output grouped by interface and kind of break, smoke failures listed."""
# ruff: noqa: E501  (compiler output quoted verbatim)

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torch_buildmatrix.builder.probe import ProbeReport, parse_compile_errors, parse_failed_tests, resolve_release
from torch_buildmatrix.errors import UserError
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.vocab import Status

from conftest import REPO, WriteMatrix

# Real lines from building the plugin against torch 2.4.1 and 2.1.2 without their shims.
LOG = """\
[3/11] c++ -MMD -MF /x/build/temp/csrc/runtime/EmuGuard.o.d ... -c /x/tree/plugin/csrc/runtime/EmuGuard.cpp
../../csrc/runtime/EmuGuard.cpp:43:15: error: looser exception specification on overriding virtual function 'virtual c10::Stream torch_emu::{anonymous}::EmuGuardImpl::getStream(c10::Device) const'
   43 |   c10::Stream getStream(c10::Device d) const EMU_STREAM_NOEXCEPT override { return getCurrentEmuStream(d.index()); }
../../csrc/runtime/EmuGuard.cpp:74:8: error: 'void torch_emu::{anonymous}::EmuGuardImpl::synchronizeDevice(c10::DeviceIndex) const' marked 'override', but does not override
../../csrc/runtime/EmuHooks.cpp:108:8: error: 'bool torch_emu::{anonymous}::EmuHooks::isBuilt() const' marked 'override', but does not override
../../csrc/runtime/EmuHooks.cpp:108:8: error: 'bool torch_emu::{anonymous}::EmuHooks::isBuilt() const' marked 'override', but does not override
../../csrc/runtime/EmuAllocator.cpp:224:49: error: invalid new-expression of abstract class type 'torch_emu::{anonymous}::CachingAllocator'
../../csrc/aten/EmuMinimal.cpp:40:38: error: could not convert 'layout' from 'torch_emu::compat::optional<c10::Layout>' to 'c10::optional<c10::Layout>'
/venv/lib/python3.11/site-packages/torch/include/ATen/core/ivalue_inl.h:1801:9: error: no type named 'element_type' in 'std::optional<c10::Layout>'
../../csrc/runtime/EmuRuntimeOps.cpp:123:49: error: 'struct c10::Event' has no member named 'synchronize'
ninja: build stopped: subcommand failed.
"""


def test_errors_are_deduplicated_and_grouped_by_interface() -> None:
    errors = parse_compile_errors(LOG)
    assert len(errors) == 7
    interfaces = load_matrix(REPO / "matrix.yaml").contract.probe_interfaces  # this repository's own map
    report = ProbeReport("2.4.1", "torch2.4-cuda-cp312-drv2", Status.FAILED, "build", errors, interfaces=interfaces)
    groups = report.by_interface()
    assert [e.line for e in groups["DeviceGuardImplInterface (c10/core/impl)"]] == [43, 74]
    assert [e.kind for e in groups["DeviceGuardImplInterface (c10/core/impl)"]] == [
        "noexcept differs from this release's declaration",
        "virtual method absent in this release (drop the override)",
    ]
    assert groups["Allocator (c10/core/Allocator.h)"][0].kind == "new pure virtual method to implement"
    assert groups["ATen kernels and dispatcher registration"][0].kind == "signature or type changed"
    assert "torch headers (torch/include/ATen/core/ivalue_inl.h)" in groups
    assert groups["Python-facing ops (torch/library.h)"][0].kind == "name missing in this release"
    text = report.markdown()
    assert "## Compile errors (7), by interface" in text and "`csrc/runtime/EmuHooks.cpp:108`" in text
    assert "torch-buildmatrix patches edit" in text


def test_failed_smoke_tests_are_listed() -> None:
    log = "smoke-tests/test_ops.py ..F\nFAILED smoke-tests/test_ops.py::test_native_kernel_matches_cpu[mm] - AssertionError: x\nFAILED a.py::b\n"
    assert parse_failed_tests(log) == [
        "smoke-tests/test_ops.py::test_native_kernel_matches_cpu[mm]: AssertionError: x",
        "a.py::b",
    ]
    passed = ProbeReport("2.14.1", "c", Status.PASSED, None)
    assert "without a shim series" in passed.markdown()


class FakeRegistry:
    def index_files(self, project: str) -> list[tuple[str, str]]:
        names = [
            "torch-2.14.0-cp311-cp311-manylinux_2_28_x86_64.whl",
            "torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl",
            "torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl",
            "torch-2.16.0rc1-cp312-cp312-manylinux_2_28_x86_64.whl",
        ]
        return [(n, "https://example/" + n) for n in names]


def test_release_resolution(tmp_path: Path, write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix())
    registry = FakeRegistry()
    assert str(resolve_release("2.14", matrix, registry, ()).version) == "2.14.1"  # type: ignore[arg-type]
    assert str(resolve_release("2.14.0", matrix, registry, ()).version) == "2.14.0"  # type: ignore[arg-type]
    with pytest.raises(UserError, match=r"torch 2.16 has no wheels on the registry \(newest release there: 2.15.0\)"):
        resolve_release("2.16", matrix, registry, ())  # type: ignore[arg-type]
    with pytest.raises(UserError, match="not a torch version"):
        resolve_release("latest", matrix, registry, ())  # type: ignore[arg-type]
    with pytest.raises(UserError, match=re.escape("no shim series patches/pre-2.9/series")):
        resolve_release("2.14", matrix, registry, ("pre-2.9",))  # type: ignore[arg-type]


def test_without_a_declared_map_errors_group_by_file() -> None:
    report = ProbeReport("2.4.1", "c", Status.FAILED, "build", parse_compile_errors(LOG))
    assert all(k.startswith(("other (csrc/", "torch headers (")) for k in report.by_interface())


def test_verdict_for_outdated_says_which_interfaces_need_shims() -> None:
    errors = parse_compile_errors(LOG)
    assert ProbeReport("2.14.1", "c", Status.PASSED, None).verdict() == "builds and passes as is"
    interfaces = load_matrix(REPO / "matrix.yaml").contract.probe_interfaces
    shims = ProbeReport("2.4.1", "c", Status.FAILED, "build", errors, interfaces=interfaces).verdict()
    assert shims.startswith("needs shims: ATen kernels and dispatcher registration; Allocator (c10/core/Allocator.h); ")
    smoke = ProbeReport("2.4.1", "c", Status.FAILED, "smoke", [], ["a.py::b"]).verdict()
    assert smoke == "needs shims: smoke suite (1 failed)"
    # A probe stopped before the compiler or the smoke suite said anything proves nothing either way.
    early = ProbeReport("2.4.1", "c", Status.FAILED, "build-env").verdict()
    assert early == "probe inconclusive: failed in step build-env before any compile error or smoke result"


def test_the_probe_picks_a_python_this_machine_has_among_those_the_release_publishes(
    tmp_path: Path, write_matrix: WriteMatrix, monkeypatch: pytest.MonkeyPatch
) -> None:
    """outdated --apply adds a new release as a coverage cell on the newest Python (3.14 here, which only the forky
    image serves); with no engine, its probe once came back 'not probed: no interpreter for 3.14' although the
    release publishes Pythons this machine has. The probe tests torch's C++ interfaces: any of them will do."""
    import os
    import sys

    from packaging.version import Version

    from torch_buildmatrix.builder.probe import probe_cell_here
    from torch_buildmatrix.model.matrix import TorchRelease, WheelSource
    from torch_buildmatrix.model.registry import Registry
    from torch_buildmatrix.vocab import RunnerName, WheelSourceKind

    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    links = tmp_path / "links"
    links.mkdir()
    for python in ("3.99", here, "3.10"):
        tag = "cp" + python.replace(".", "")
        (links / f"torch-2.14.1+cpu-{tag}-{tag}-manylinux_2_28_x86_64.whl").write_bytes(b"")
    # This machine, as the probe sees it: only this interpreter on PATH, no pyenv.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / f"python{here}").symlink_to(sys.executable)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    text = (
        "schema-version: 2\n"
        "plugin: {distribution: torch-emu, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,\n"
        '  label: "torch.{torch_minor}.drv.{sdk_major}"}\n'
        'sdk: {kind: wheel, id: "drv{sdk_major}", distribution: emu-driver, source: driver, versions: ["1.4", "2.1"]}\n'
        f'python: ["3.10", "{here}", "3.99"]\n'
        f'torch:\n  - {{version: "2.14.1", variant: cpu, wheels: {{find-links: {links}}}, python: ["3.99"]}}\n'
        'images:\n  future: {base: "debootstrap:forky", python: ["3.99"]}\n'
    )
    matrix = load_matrix(write_matrix(text))
    [release] = matrix.torch
    registry = Registry(tmp_path / "cache")
    registry.machine = "x86_64"
    cell, _runner, why = probe_cell_here(release, matrix, registry, RunnerName.LOCAL)
    assert (
        cell.sdk is not None
        and (str(cell.python), cell.sdk.major) == (here, 2)
        and why == f"local: {bin_dir / f'python{here}'}"
    )
    # When no Python it publishes can be built here, it says so for each.
    none_here = TorchRelease(
        Version("2.14.1"), "cpu", WheelSource(WheelSourceKind.FIND_LINKS, str(links)), (Python.parse("3.99"),), ()
    )
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(
        UserError,
        match=r"no Python that torch 2\.14\.1 publishes can be built here \(3\.99: no "
        r"interpreter for 3\.99: build it with --runner docker \(image future serves it\); ",
    ):
        probe_cell_here(none_here, matrix, registry, RunnerName.LOCAL)
