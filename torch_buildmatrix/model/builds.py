"""Builds apart from cells: which wheel each cell tests, and which build makes it, as pure functions of the matrix.

A build is keyed by what determines its wheel's bytes (cellkey.BuildKey): the torch release built against (its
variant where the project's wheel depends on it: `build.per-variant`), the SDK version, and the interpreter's minor
and ABI only for a project whose wheel depends on the Python (`build.per-python`, true for a C extension using the
CPython API). A project built against the LibTorch stable ABI from a release on (`build.stable-abi`) makes one build,
against the oldest such release of the matrix, for every later release. Sources, patches and the plugin version are
the build's inputs, hashed by the engine. A cell (release x Python x SDK) tests its build's wheel in a clean
environment of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from packaging.version import Version

from torch_buildmatrix.errors import MatrixError, Problem
from torch_buildmatrix.model.cellkey import BuildKey
from torch_buildmatrix.model.matrix import Matrix, SdkVersion, TorchRelease
from torch_buildmatrix.model.pythons import Python

__all__ = ["Build", "BuildKey", "build_key", "build_release", "deep_cell", "plan_builds"]


def _is_stable(matrix: Matrix, release: TorchRelease) -> bool:
    stable = matrix.contract.build.stable_abi
    return stable is not None and release.version >= stable


def build_release(matrix: Matrix, release: TorchRelease) -> TorchRelease:
    """The release a cell of `release` has its wheel built against: its own; the first entry of the same version
    (another variant) when the wheel does not depend on the variant; the oldest release the project builds against
    the stable ABI for, when `release` is one of those."""
    per_variant = matrix.contract.build.per_variant
    declared: list[TorchRelease] = [
        *matrix.torch,
        *(() if release in matrix.torch else (release,)),
    ]  # a probe's release is not declared
    if _is_stable(matrix, release):
        targets = [r for r in declared if _is_stable(matrix, r) and (not per_variant or r.variant == release.variant)]
        return min(targets, key=lambda r: (r.version, declared.index(r)))
    if not per_variant:
        return next(r for r in declared if r.version == release.version)
    return release


def build_key(
    matrix: Matrix, release: TorchRelease, python: Python, sdk: SdkVersion | None, built: TorchRelease | None = None
) -> BuildKey:
    """The key of the build whose wheel the cell (release, python, sdk) tests; `built`: build_release's answer for
    `release`, when the caller has it (it scans the releases: once per release, not per cell)."""
    built = built if built is not None else build_release(matrix, release)
    version = sdk.version if sdk is not None else None
    return BuildKey(
        built.version,
        built.variant,
        python if matrix.contract.build.per_python else None,
        version,
        matrix.naming.sdk_tag(version) if version is not None else "",
        matrix.naming.local_label(built, version),
        stable=_is_stable(matrix, built),
    )


@dataclass(frozen=True)
class Build:
    """One build: its key, the release it is built against, the interpreter it is built with, and its cells."""

    key: BuildKey
    release: TorchRelease
    python: Python  # the interpreter the build runs on (key.python for a per-Python project)
    sdk: SdkVersion | None
    cells: tuple[str, ...]  # ids of the matrix's cells that test its wheel, in matrix order
    # The torch versions its cells test, oldest first: the release it is built against alone, but for a stable-ABI
    # build (key.stable), whose wheel must install with each of them.
    serves: tuple[Version, ...] = ()
    # With smoke.tiers: the id of the cell that runs the build's deep tier (deep_cell); None: no tiers.
    deep_cell: str | None = None

    @property
    def id(self) -> str:
        return self.key.id

    @property
    def local_version_label(self) -> str:
        """The PEP 440 local label of its wheel."""
        return self.key.label

    def as_dict(self) -> dict[str, object]:
        """What `torch-buildmatrix matrix --json` shows of it."""
        deep = {"deep_cell": self.deep_cell} if self.deep_cell is not None else {}
        return {**self.key.to_dict(), "python_built_with": str(self.python), "cells": list(self.cells), **deep}

    @property
    def torch_releases(self) -> tuple[Version, ...]:
        """The torch versions its wheel must install with: those of its cells, else the one it is built against."""
        return self.serves or (self.release.version,)


class _Tested(Protocol):
    """What choosing a build's deep cell needs of a cell."""

    @property
    def id(self) -> str: ...
    @property
    def torch(self) -> TorchRelease: ...
    @property
    def python(self) -> Python: ...


class _Cellish(_Tested, Protocol):
    """What planning needs of a cell (model.cells.Cell has it; structural, so cells.py can import this module)."""

    @property
    def sdk(self) -> SdkVersion | None: ...
    @property
    def build(self) -> BuildKey: ...


def _interpreter(
    key: BuildKey,
    release: TorchRelease,
    cells: list[_Cellish],
    available: Mapping[TorchRelease, set[Python]] | None,
) -> Python | None:
    """The Python a build runs on: a per-Python build's own; else the oldest Python with the GIL among its cells of
    the release it is built against (a free-threaded one only when it has no other), so the choice is the matrix's,
    never the machine's or the selection's; failing those, the oldest of its cells' Pythons that release publishes."""
    if key.python is not None:
        return key.python
    own = sorted({c.python for c in cells if c.torch == release}, key=lambda p: (p.free_threaded, p))
    if own:
        return own[0]
    # Without the registry's answer (a probe, a test), its cells' Pythons are taken as published.
    published = available.get(release, set()) if available is not None else {c.python for c in cells}
    offered = sorted({c.python for c in cells if c.python in published}, key=lambda p: (p.free_threaded, p))
    return offered[0] if offered else None


def deep_cell(release: TorchRelease, cells: Iterable[_Tested], preference: Iterable[Python] = ()) -> str:
    """The id of the cell that runs a build's deep tier (smoke.tiers, the rule its options reference states).

    `release`: the release the build is made against; `cells`: the build's cells in matrix order (at least one);
    `preference`: smoke.tiers.deep-python. Among the cells of `release` (all the cells when none is of it): the
    cell of the first preferred Python they have; else the one with the oldest Python with the GIL (a free-threaded
    one only when there is no other); the first in matrix order between cells of one Python (variants)."""
    members = list(cells)
    if not members:
        raise ValueError("a build has at least one cell")
    candidates = [c for c in members if c.torch == release] or members
    for python in preference:
        chosen = next((c for c in candidates if c.python == python), None)
        if chosen is not None:
            return chosen.id
    return min(candidates, key=lambda c: (c.python.free_threaded, c.python)).id


def plan_builds(
    matrix: Matrix, cells: Iterable[_Cellish], available: Mapping[TorchRelease, set[Python]] | None = None
) -> dict[str, Build]:
    """Every build the cells need, by id, in the order of their first cell. Give it the whole expansion, not a
    selection: a build's interpreter is chosen from all of its cells, so selecting some never changes a build.

    Raises MatrixError when a build has no Python its release publishes (a stable-ABI release none of whose cells'
    Pythons the oldest targeted release has a wheel for)."""
    groups: dict[BuildKey, list[_Cellish]] = {}
    for cell in cells:
        groups.setdefault(cell.build, []).append(cell)
    out: dict[str, Build] = {}
    problems = []
    for key, members in groups.items():
        release = build_release(matrix, members[0].torch)
        python = _interpreter(key, release, members, available)
        if python is None:
            problems.append(
                Problem(
                    str(matrix.path),
                    release.line,
                    f"{release.key}.python",
                    f"build {key.id} is made against torch {release.version} ({release.variant}), which publishes "
                    f"no wheel for any Python of its cells ({', '.join(sorted({str(c.python) for c in members}))}); "
                    "give the release a Python its cells share",
                )
            )
            continue
        serves = tuple(sorted({c.torch.version for c in members}))
        tiers = matrix.contract.smoke.tiers
        deep = deep_cell(release, members, tiers.deep_python) if tiers is not None else None
        out[key.id] = Build(key, release, python, members[0].sdk, tuple(c.id for c in members), serves, deep)
    if problems:
        raise MatrixError(problems)
    return out
