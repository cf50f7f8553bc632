"""Checks every built plugin wheel: name, label and tags, dependency pins, baked build info, unresolved symbols."""

from __future__ import annotations

import ast
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from email.parser import Parser
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from torch_buildmatrix.errors import StepFailed
from torch_buildmatrix.model.builds import Build
from torch_buildmatrix.model.contract import CheckContract, TorchPin
from torch_buildmatrix.model.pythons import installs_on
from torch_buildmatrix.util.process import run_captured


def read_metadata(wheel: Path) -> dict[str, list[str]]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        message = Parser().parsestr(archive.read(name).decode())
    return {key: message.get_all(key) or [] for key in set(message.keys())}


def requires_dist(wheel: Path) -> list[Requirement]:
    """The wheel's Requires-Dist, parsed."""
    return [Requirement(r) for r in read_metadata(wheel).get("Requires-Dist", [])]


def requirements_named(requirements: Sequence[Requirement], name: str) -> list[Requirement]:
    """Every requirement on distribution `name` (torch, a wheel SDK's), compared by canonical name, in order."""
    wanted = canonicalize_name(name)
    return [r for r in requirements if canonicalize_name(r.name) == wanted]


def requirement_named(requirements: Sequence[Requirement], name: str) -> Requirement | None:
    """The requirement on distribution `name`; None if there is none. Of a wheel naming it more than once (one entry
    per marker), the last, as check.torch-pin has judged it."""
    found = requirements_named(requirements, name)
    return found[-1] if found else None


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


@dataclass(frozen=True)
class CheckedWheel:
    """What the check read of a plugin wheel that passed it, each part read once: the check step's lines are said
    from it, never from the wheel read again."""

    requires_dist: tuple[Requirement, ...]  # its METADATA's Requires-Dist, parsed, in order
    build_info: dict[str, Any]  # its baked build facts (check.build-info; {} without)


def check_plugin_wheel(
    wheel: Path,
    build: Build,
    distribution: str,
    sdk_distribution: str | None,
    *,
    plugin_version: Version,
    check: CheckContract,
) -> CheckedWheel:
    """Raises StepFailed naming what is wrong; returns what it read of the wheel (its pins, its build facts).

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
    requirements = tuple(requires_dist(wheel))
    if check.torch_pin == TorchPin.RELEASE_LINE:
        problem = torch_pin_problem(requirement_named(requirements, "torch"), build)
        if problem:
            problems.append(problem)
    if sdk_distribution is not None and build.sdk is not None:
        sdk_req = requirement_named(requirements, sdk_distribution)
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
            serving = (
                f" (the stable-ABI build for torch {', '.join(map(str, build.torch_releases))})"
                if build.key.stable
                else ""
            )
            problems.append(
                f"built against torch {recorded} ({check.build_info}: {check.build_info_torch}), the build's torch is "
                f"{build.release.requirement_version}{serving}"
            )
    if problems:
        raise StepFailed("check", "; ".join(problems))
    return CheckedWheel(requirements, facts)


def torch_pin_problem(torch_req: Requirement | None, build: Build) -> str | None:
    """What is wrong with the wheel's Requires-Dist for torch under `check.torch-pin: release-line`, or None.

    An ordinary build pins its release line, not a range: vendor builds (2.4.0a0+nv24.07) satisfy ==2.4.* but not
    >=2.4,<2.5. A stable-ABI build (build.stable-abi) starts at its release line (`torch>=X.Y`) and must admit every
    release it serves, nothing older."""
    minor = build.release.minor
    if not build.key.stable:
        line_pin = SpecifierSet(f"=={minor}.*")
        if torch_req is None or torch_req.specifier != line_pin or torch_req.marker is not None:
            return f"Requires-Dist for torch is '{torch_req}', expected 'torch{line_pin}' (check.torch-pin)"
        return None
    expected = f"torch>={minor} (a stable-ABI build for torch {', '.join(map(str, build.torch_releases))})"
    if torch_req is None or torch_req.marker is not None:
        return f"Requires-Dist for torch is '{torch_req}', expected '{expected}' (check.torch-pin)"
    spec = torch_req.specifier
    excluded = [v for v in build.torch_releases if not spec.contains(v, prereleases=True)]
    if excluded:
        return (
            f"Requires-Dist for torch is '{torch_req}', which excludes torch {', '.join(map(str, excluded))} that "
            f"this build serves; expected '{expected}' (check.torch-pin)"
        )
    # From the release line built against on (X.Y.0 in), nothing before it (X.(Y-1)'s last out).
    version = build.release.version
    start = Version(f"{version.major}.{version.minor}.0")
    before = (
        Version(f"{version.major}.{version.minor - 1}.999")
        if version.minor > 0
        else Version(f"{version.major - 1}.999.999")
    )
    if not spec.contains(start, prereleases=True) or spec.contains(before, prereleases=True):
        return (
            f"Requires-Dist for torch is '{torch_req}', expected '{expected}': from torch {minor} on (check.torch-pin)"
        )
    return None


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


@dataclass(frozen=True)
class SymbolCheck:
    """What the symbol check found in a wheel's extension modules."""

    libraries: tuple[str, ...]  # the extension modules (*.so), by their path inside the wheel
    undefined: int  # the undefined symbols they leave to torch's libraries (or the SDK's)
    missing: tuple[str, ...]  # of those, the ones `provided` does not name, sorted


def check_symbols(wheel: Path, provided: set[str]) -> SymbolCheck:
    """The undefined, unversioned symbols of the wheel's extension modules, and those `provided` does not name.

    Versioned symbols (name@GLIBC_2.2.5, @GLIBCXX_3.4) come from the system and Python symbols from the
    interpreter; what is left must come from torch's libraries (or the SDK's), or loading fails with
    'undefined symbol'.
    """
    needed: set[str] = set()
    libraries = []
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.endswith(".so"):
                libraries.append(member)
                path = Path(archive.extract(member, tmp))
                for symbol in _dynamic_symbols(path, undefined=True):
                    if "@" not in symbol and not symbol.startswith(("Py", "_Py")):
                        needed.add(symbol)
    return SymbolCheck(tuple(libraries), len(needed), tuple(sorted(needed - provided)))


def check_cell_pin(wheel: Path, torch_version: Version, build_id: str) -> None:
    """The build's wheel must admit the cell's torch (a stable-ABI build serves several releases; a record made before
    a release joined the matrix may not): raises StepFailed("check", ...) before anything is installed."""
    for torch in requirements_named(requires_dist(wheel), "torch"):
        if torch.marker is not None:  # a marked pin holds only where its marker does: not judged here
            continue
        if not torch.specifier.contains(torch_version, prereleases=True):  # every unmarked pin applies
            raise StepFailed(
                "check",
                f"{wheel.name}, the wheel of build {build_id}, requires '{torch}', which excludes this "
                f"cell's torch {torch_version}: installing it would replace the cell's torch; rebuild it "
                "(torch-buildmatrix build --force) so its pin covers every release it serves",
            )


def installed_versions(site_packages: Path) -> dict[str, Version]:
    """The distributions installed in an environment, by canonical name, read from its *.dist-info/METADATA."""
    found: dict[str, Version] = {}
    for metadata in sorted(site_packages.glob("*.dist-info/METADATA")):
        message = Parser().parsestr(metadata.read_text(errors="replace"), headersonly=True)
        name, version = message.get("Name"), message.get("Version")
        if name and version:
            try:
                found[canonicalize_name(name)] = Version(version)
            except InvalidVersion:
                continue
    return found


def check_installed(site_packages: Path, torch_requirement: str, distribution: str, plugin_wheel: Path) -> None:
    """After the smoke environment is made: it holds the cell's own torch (exactly, never another one a wheel's pin
    pulled in) and the build's plugin wheel; raises StepFailed("smoke-env", ...)."""
    installed = installed_versions(site_packages)
    wanted_torch = SpecifierSet(f"=={torch_requirement}")  # as the install asked: 2.10.0 admits 2.10.0+cu128
    wanted_plugin = parse_wheel_filename(plugin_wheel.name)[1]
    problems = []
    torch = installed.get("torch")
    if torch is None or not wanted_torch.contains(torch, prereleases=True):
        problems.append(f"torch {torch or '(none)'} is installed, the cell's torch is {torch_requirement}")
    plugin = installed.get(canonicalize_name(distribution))
    if plugin != wanted_plugin:
        problems.append(f"{distribution} {plugin or '(none)'} is installed, the build's wheel is {plugin_wheel.name}")
    if problems:
        raise StepFailed(
            "smoke-env", f"the smoke environment ({site_packages}) is not the cell's: {'; '.join(problems)}"
        )
