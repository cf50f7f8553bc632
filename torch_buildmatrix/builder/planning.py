"""What a build and a cell depend on (their inputs, hashed), and when a stored record of one is still up to date.

A build's inputs are what makes its wheel's bytes: its key (torch release and variant, SDK version, the Python for a
per-Python project, the stable ABI), the plugin version, sources (never the smoke suite nor what the tool writes into
the project: project_tree), patches, build settings, the build epoch (what they hold of the tool's own code,
epoch.py), and the interpreter's identity (its minor and ABI and what provides it, never a path). A cell's inputs are
what its test depends on: its own torch, Python, patches (its smoke tests come from its release's patched copy), the
smoke suite's files, smoke settings, the build epoch, and the exact wheels its build made (by sha256): a rebuild that
gives the same bytes leaves its cells up to date.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch_buildmatrix.builder.buildcode import ENGINE_MODULES
from torch_buildmatrix.builder.epoch import CodeHashes, epoch_key
from torch_buildmatrix.builder.records.model import BuildResult, CellResult
from torch_buildmatrix.builder.runners.base import Runner
from torch_buildmatrix.builder.sourcetree import release_series
from torch_buildmatrix.model.builds import Build
from torch_buildmatrix.model.cells import Cell
from torch_buildmatrix.model.contract import readme_block
from torch_buildmatrix.model.matrix import Matrix, TorchRelease
from torch_buildmatrix.util.fingerprint import FileHashes, file_sha256, files_hash, inputs_hash, tree_hash
from torch_buildmatrix.util.paths import regular_file
from torch_buildmatrix.vocab import FailureClass, Status


@dataclass
class PlannedBuild:
    build: Build
    inputs: dict[str, Any]
    inputs_hash: str
    reusable: BuildResult | None  # a stored record for the same inputs
    problem: str | None = None  # why the build cannot even be planned (e.g. no interpreter)
    unusable: str = ""  # with --prebuilt: why the stored record cannot be used although it is there


@dataclass
class PlannedCell:
    cell: Cell
    build: Build
    inputs: dict[str, Any]
    inputs_hash: str
    reusable: CellResult | None  # a stored record for the same inputs
    problem: str | None = None


class Inputs:
    """Computes inputs, caching the hashes builds and cells share (the sources, once for every runner; the smoke suite;
    each release's patches; each runner's build epoch).
    code_cache: where the build code's hashes are kept across runs (None: computed in each run)."""

    def __init__(self, matrix: Matrix, code_cache: Path | None = None) -> None:
        self.matrix = matrix
        self._shared: dict[str, dict[str, str]] = {}  # by runner name
        self._patches: dict[TorchRelease, str] = {}
        self._code = CodeHashes(code_cache)
        self._smoke_tree: str | None = None
        self._sources: dict[str, str] | None = None

    def code_hash(self, runner: Runner) -> str:
        """The hash of the code a runner's builds and cells run (recorded, never a key: keys hold the epoch)."""
        return self._code.of((*ENGINE_MODULES, *runner.build_modules))

    def shared(self, runner: Runner) -> dict[str, str]:
        """The sources and the build epoch under that runner."""
        if runner.name not in self._shared:
            self._shared[runner.name] = {**self.sources(), "build_code": epoch_key(runner.name)}
        return self._shared[runner.name]

    def sources(self) -> dict[str, str]:
        """The project's and the SDK's sources, hashed once: the same under every runner."""
        if self._sources is None:
            sdk, generated = self.matrix.sdk, self.matrix.contract.build.generated
            self._sources = {
                **project_tree(self.matrix),
                **(
                    {"sdk_tree": tree_hash(sdk.source, generated=generated)}
                    if sdk is not None and sdk.source is not None
                    else {}
                ),
            }
        return self._sources

    def smoke_tree(self) -> str:
        """The smoke suite's hash: a cell's input (its build never reads the suite)."""
        if self._smoke_tree is None:
            self._smoke_tree = tree_hash(self.matrix.plugin.smoke_tests, generated=self.matrix.contract.build.generated)
        return self._smoke_tree

    def patches(self, release: TorchRelease) -> str:
        if release not in self._patches:
            files = [
                p for s in release_series(self.matrix, release) for p in sorted(s.directory.iterdir()) if p.is_file()
            ]
            self._patches[release] = files_hash(files)
        return self._patches[release]

    def of_build(self, build: Build, runner: Runner, python: str) -> dict[str, Any]:
        contract = self.matrix.contract.build
        return {
            "build": build.key.to_dict(),
            "plugin_version": str(self.matrix.plugin.version),
            "torch_requirement": build.release.requirement_version,
            "wheel_source": build.release.wheels.describe(),
            "python": python,
            "runner": runner.name,
            "patches": self.patches(build.release),
            "build_settings": {
                "requires": list(contract.requires),
                "project_requires": contract.project_requires,
                "env": dict(sorted(contract.env.items())),
                "relabel": contract.relabel,
                "ninja": contract.ninja,
            },
            **self.shared(runner),
        }

    def of_cell(
        self, cell: Cell, build: BuildResult, runner: Runner, python: str, deep: bool = False
    ) -> dict[str, Any]:
        """deep: the cell runs its build's deep tier (smoke.tiers)."""
        smoke = self.matrix.contract.smoke
        made: dict[str, Any] = {"id": build.id}
        if build.status == Status.PASSED and build.wheel is not None:
            made["wheel"] = build.wheel.sha256
            made["sdk_wheel"] = build.sdk_wheel.sha256 if build.sdk_wheel is not None else None
        else:  # failed with these inputs: the cell fails with it, until the build's inputs change
            made["failed"] = build.inputs_hash
        return {
            "cell": cell.as_dict(),
            "torch_requirement": cell.torch.requirement_version,
            "wheel_source": cell.torch.wheels.describe(),
            "python": python,
            "runner": runner.name,
            "patches": self.patches(cell.torch),
            "smoke_requires": list(smoke.requirements_for(cell.torch.version, cell.python)),
            "smoke_args": list(smoke.args),
            "smoke_threads": smoke.threads,
            "smoke_tree": self.smoke_tree(),
            "build": made,
            # Only with tiers, so that a project without them keeps its cells' inputs (and records) as they were.
            **({"tiers": smoke.tiers.as_inputs(deep)} if smoke.tiers is not None else {}),
            **self.shared(runner),
        }


def project_tree(matrix: Matrix) -> dict[str, str]:
    """plugin.source's hash as a build's input: without the smoke suite (the cells' input, `Inputs.smoke_tree`), the
    patch series and the SDK's source (their own inputs), and what the tool writes into a project that is its own
    source (`source: .`): publish.docs' compatibility.md and .json, and the README's table block (the README's other
    text counts, apart as `readme`)."""
    source = matrix.plugin.source.resolve()
    inside: dict[Path, str] = {}  # paths under the source, by path
    for path in (
        matrix.plugin.smoke_tests,
        matrix.patches_dir,
        *([matrix.sdk.source] if matrix.sdk is not None and matrix.sdk.source is not None else []),
        matrix.root / matrix.contract.publish_docs / "compatibility.md",
        matrix.root / matrix.contract.publish_docs / "compatibility.json",
        *([matrix.root / matrix.contract.publish_readme] if matrix.contract.publish_readme is not None else []),
    ):
        resolved = path.resolve()
        if resolved != source and resolved.is_relative_to(source):
            inside[path] = resolved.relative_to(source).as_posix()
    tree = tree_hash(
        matrix.plugin.source, exclude=frozenset(inside.values()), generated=matrix.contract.build.generated
    )
    readme = matrix.root / matrix.contract.publish_readme if matrix.contract.publish_readme is not None else None
    if readme is None or readme not in inside or not readme.is_file():
        return {"plugin_tree": tree}
    return {"plugin_tree": tree, "readme": hashlib.sha256(without_block(readme.read_text()).encode()).hexdigest()}


def without_block(readme: str) -> str:
    """A README's text without what `compat-table` writes between its markers (all of it if they are not a pair)."""
    bounds = readme_block(readme).bounds
    if bounds is None:
        return readme
    start, end = bounds
    return readme[:start] + readme[end:]


def digest(inputs: dict[str, Any]) -> str:
    return inputs_hash(inputs)


def up_to_date(
    stored: CellResult | BuildResult,
    wanted: str,
    wheels_dir: Path,
    needs_sdk_wheel: bool,
    hashes: FileHashes | None = None,
) -> bool:
    """Whether a stored record stands for these inputs: passed with every file it names intact, or failed in a way
    the same inputs would fail again (a network blip, a timeout or a stop says nothing about them: tried again)."""
    if stored.inputs_hash != wanted:
        return False
    if stored.status == Status.PASSED:
        return files_intact(stored, wheels_dir, needs_sdk_wheel, hashes)
    if stored.status in (Status.INTERRUPTED, Status.NOT_BUILT):  # a stop, or no runner could start: never tried
        return False
    return stored.failure_class != FailureClass.TRANSIENT


def files_intact(
    stored: CellResult | BuildResult, wheels_dir: Path, needs_sdk_wheel: bool, hashes: FileHashes | None = None
) -> bool:
    """Its wheels unchanged (the plugin's and a wheel SDK's, each against its sha256), its log a regular file."""
    return not files_problem(stored, wheels_dir, needs_sdk_wheel, hashes)


def files_problem(
    stored: CellResult | BuildResult, wheels_dir: Path, needs_sdk_wheel: bool, hashes: FileHashes | None = None
) -> str:
    """Why the files a record names are not as it says ('' when they are): a wheel missing, changed or not named, or
    its log not a regular file. hashes: the run's, so a wheel several records name is hashed once."""
    if stored.wheel is None or (needs_sdk_wheel and stored.sdk_wheel is None):
        return "its record names no wheel" if stored.wheel is None else "its record names no SDK wheel"
    for wheel in (w for w in (stored.wheel, stored.sdk_wheel) if w is not None):
        try:
            path = regular_file(wheels_dir, wheel.path)
        except ValueError as exc:
            return f"its wheel {wheel.path}: {exc}"
        if (digest := hashes.of(path) if hashes is not None else file_sha256(path)) != wheel.sha256:
            return f"its wheel {wheel.path} has sha256 {digest}, not the {wheel.sha256} its record names"
    if stored.log is not None:
        try:
            regular_file(wheels_dir, stored.log)
        except ValueError as exc:
            return f"its log {stored.log}: {exc}"
    return ""
