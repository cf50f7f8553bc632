"""Checks every built plugin wheel: name, label and tags, dependency pins, baked build info, unresolved symbols."""

from __future__ import annotations

import ast
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from buildmatrix.errors import StepFailed
from buildmatrix.model.builds import Build
from buildmatrix.model.contract import CheckContract, TorchPin
from buildmatrix.model.pythons import Python
from buildmatrix.util.process import run_captured


def read_metadata(wheel: Path) -> dict[str, list[str]]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        message = Parser().parsestr(archive.read(name).decode())
    return {key: message.get_all(key) or [] for key in set(message.keys())}


def read_build_info(wheel: Path, module: str) -> dict[str, Any]:
    """The plain-Python build facts module baked into the wheel (constant assignments only), by its path inside it."""
    with zipfile.ZipFile(wheel) as archive:
        try:
            text = archive.read(module).decode()
        except KeyError:
            raise StepFailed("check", f"{wheel.name} has no {module} (matrix.yaml: check.build-info)") from None
    facts: dict[str, Any] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                facts[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return facts


def installs_on(wheel_tags: frozenset[Tag], python: Python) -> bool:
    """Whether CPython `python` (its ABI tag cp311, or cp314t for a free-threaded build) accepts one of these tags,
    whatever their platform: its own cpXY-cpXY, abi3 (not on a free-threaded build), none, or py3-none."""
    platforms = sorted({tag.platform for tag in wheel_tags})
    version = (python.major, python.minor)
    accepted = {
        *cpython_tags(version, abis=[python.tag], platforms=platforms),
        *compatible_tags(version, f"cp{python.major}{python.minor}", platforms),
    }
    return not wheel_tags.isdisjoint(accepted)


def check_plugin_wheel(
    wheel: Path,
    build: Build,
    distribution: str,
    sdk_distribution: str | None,
    *,
    plugin_version: Version,
    check: CheckContract,
) -> dict[str, Any]:
    """Raises StepFailed naming what is wrong; returns the wheel's build facts ({} without check.build-info).

    sdk_distribution: a wheel SDK's distribution, which the wheel must pin to the build's SDK major (None: no SDK
    wheel to pin)."""
    name, version, _build, tags = parse_wheel_filename(wheel.name)
    problems = []
    if not installs_on(tags, build.python):
        problems.append(
            f"its tags ({', '.join(sorted(map(str, tags)))}) do not install on the Python it was built with, "
            f"{build.python} ({build.python.tag})"
        )
    if name != canonicalize_name(distribution):
        problems.append(f"distribution is {name}, expected {distribution}")
    if Version(version.public) != plugin_version:
        problems.append(f"version is {version.public}, matrix.yaml's plugin.version is {plugin_version}")
    if version.local != build.key.label:
        problems.append(f"local version label is '{version.local}', expected '{build.key.label}'")
    requirements = [Requirement(r) for r in read_metadata(wheel).get("Requires-Dist", [])]
    by_name = {canonicalize_name(r.name): r for r in requirements}
    torch_req = by_name.get(canonicalize_name("torch"))
    # A release-line pin, not a range: vendor builds (2.4.0a0+nv24.07) satisfy ==2.4.* but not >=2.4,<2.5.
    line_pin = SpecifierSet(f"=={build.release.minor}.*")
    if check.torch_pin == TorchPin.RELEASE_LINE and (
        torch_req is None or torch_req.specifier != line_pin or torch_req.marker is not None
    ):
        problems.append(f"Requires-Dist for torch is '{torch_req}', expected 'torch{line_pin}' (check.torch-pin)")
    if sdk_distribution is not None and build.sdk is not None:
        sdk_req = by_name.get(canonicalize_name(sdk_distribution))
        next_major = Version(f"{build.sdk.major + 1}")
        if (
            sdk_req is None
            or not sdk_req.specifier.contains(build.sdk.version)
            or sdk_req.specifier.contains(next_major)
        ):
            problems.append(
                f"Requires-Dist for {sdk_distribution} is '{sdk_req}', expected a pin to {build.sdk.major}.x"
            )
    facts = read_build_info(wheel, check.build_info) if check.build_info else {}
    if check.build_info:
        recorded = facts.get(check.build_info_torch)
        try:
            built_torch: Version | None = Version(str(recorded))
        except InvalidVersion:
            built_torch = None
        if built_torch is None or built_torch.public != str(build.release.version):
            problems.append(
                f"built against torch {recorded} ({check.build_info}: {check.build_info_torch}), the build's torch is "
                f"{build.release.requirement_version}"
            )
    if problems:
        raise StepFailed("check", "; ".join(problems))
    return facts


def _dynamic_symbols(library: Path, undefined: bool) -> set[str]:
    flag = "--undefined-only" if undefined else "--defined-only"
    out = run_captured(["nm", "-D", flag, str(library)], step="check")
    if out.returncode != 0:
        raise StepFailed("check", f"nm failed on {library}: {out.stderr.strip()}")
    symbols = set()
    for line in out.stdout.splitlines():
        fields = line.split()
        # Weak undefined symbols ("w", "v") may stay unresolved; only "U" must be found.
        if len(fields) >= 2 and (not undefined or fields[-2] == "U"):
            symbols.add(fields[-1])
    return symbols


def provided_symbols(library_dirs: list[Path]) -> set[str]:
    """Dynamic symbols the shared libraries in library_dirs define (version suffixes dropped)."""
    provided: set[str] = set()
    for directory in library_dirs:
        for library in directory.glob("*.so*"):
            if library.is_file():
                provided |= {s.split("@", 1)[0] for s in _dynamic_symbols(library, undefined=False)}
    return provided


def unresolved_against(wheel: Path, provided: set[str]) -> list[str]:
    """Undefined, unversioned symbols of the wheel's extension modules that `provided` does not name.

    Versioned symbols (name@GLIBC_2.2.5, @GLIBCXX_3.4) come from the system and Python symbols from the
    interpreter; what is left must come from torch's libraries (or the SDK's), or loading fails with
    'undefined symbol'.
    """
    missing: set[str] = set()
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.endswith(".so"):
                path = Path(archive.extract(member, tmp))
                for symbol in _dynamic_symbols(path, undefined=True):
                    if "@" in symbol or symbol.startswith(("Py", "_Py")):
                        continue
                    if symbol not in provided:
                        missing.add(symbol)
    return sorted(missing)
