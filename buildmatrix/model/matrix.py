"""Parse matrix.yaml into typed objects once; the rest of the code never sees raw dicts."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from buildmatrix.errors import MatrixError
from buildmatrix.model.contract import Contract, read_contract
from buildmatrix.model.options import PIP_CONFIG, TIMEOUT_DEFAULTS
from buildmatrix.model.optreader import Node, OptionReader, torch_selector
from buildmatrix.model.vocab import RunnerName, Variant, WheelSourceKind
from buildmatrix.model.yamlsource import LineMap, load_yaml_with_lines

__all__ = ["PIP_CONFIG", "Matrix", "load_matrix", "torch_selector"]

SCHEMA_VERSION = 1
# Seconds a step may run before its whole process tree is killed and the cell fails (transient: retried).
# Generous: a cold uv cache downloads GBs of CUDA torch; the real plugin compiles in minutes on 2 cores.
DEFAULT_TIMEOUTS = TIMEOUT_DEFAULTS


@dataclass(frozen=True)
class WheelSource:
    """Where a torch release's wheel comes from: the registry, a find-links location, or an index of its own."""

    kind: WheelSourceKind
    location: str = ""  # find-links: a path or URL, or PIP_CONFIG; index: the index URL
    # index only: find-links that replace the index on a machine where they hold the release's wheels (offline
    # machines); a directory, PIP_CONFIG, or "" for none. Not part of describe(): the same wheels, mirrored.
    local_find_links: str = ""

    def describe(self) -> str:
        if self.kind == WheelSourceKind.REGISTRY:
            return str(self.kind)
        return f"{self.kind} {self.location}"


@dataclass(frozen=True)
class TorchRelease:
    version: Version
    variant: Variant
    wheels: WheelSource
    python: tuple[Version, ...] | None  # None: use the matrix-wide list
    patches: tuple[str, ...]
    line: int | None = None

    @property
    def minor(self) -> str:
        return f"{self.version.major}.{self.version.minor}"

    @property
    def requirement_version(self) -> str:
        """The exact version pip must install: the CPU build carries a +cpu local label."""
        cpu_build = self.variant == Variant.CPU and self.wheels.kind != WheelSourceKind.REGISTRY
        return f"{self.version}+{Variant.CPU}" if cpu_build else str(self.version)


@dataclass(frozen=True)
class DriverVersion:
    api: Version

    @property
    def major(self) -> int:
        return self.api.major


@dataclass(frozen=True)
class CellRule:
    """An include or exclude rule; unset fields match anything."""

    torch: SpecifierSet | None = None
    python: Version | None = None
    driver: int | None = None
    variant: Variant | None = None
    line: int | None = None


@dataclass(frozen=True)
class BuildImage:
    name: str
    base: str  # "debootstrap:<suite>" (made locally, no registry) or a plain image reference
    python: tuple[Version, ...]
    layer: Path | None = None  # the project's Dockerfile on top of the builder image
    dockerfile: Path | None = None  # the project's own builder recipe, instead of the package's
    context: Path | None = None  # build context of layer/dockerfile (default: the Dockerfile's directory)
    build_args: tuple[tuple[str, str], ...] = ()  # for layer/dockerfile

    @property
    def suite(self) -> str | None:
        return self.base.removeprefix("debootstrap:") if self.base.startswith("debootstrap:") else None


@dataclass(frozen=True)
class PluginSpec:
    distribution: str
    version: Version
    source: Path
    smoke_tests: Path


@dataclass(frozen=True)
class Timeouts:
    """Seconds each step may run (matrix.yaml `timeouts:` over DEFAULT_TIMEOUTS)."""

    seconds: dict[str, float] = field(default_factory=lambda: {k: float(v) for k, v in DEFAULT_TIMEOUTS.items()})

    def __getitem__(self, step: str) -> float:
        return self.seconds[step]

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.seconds.items())))


@dataclass(frozen=True)
class Matrix:
    path: Path
    plugin: PluginSpec
    driver_source: Path
    driver_distribution: str
    drivers: tuple[DriverVersion, ...]
    python: tuple[Version, ...]
    torch: tuple[TorchRelease, ...]
    exclude: tuple[CellRule, ...]
    include: tuple[CellRule, ...]
    images: tuple[BuildImage, ...]
    runner: RunnerName
    patches_dir: Path  # patches/<series>/ for the torch releases' shim series
    lines: LineMap = field(repr=False, compare=False, default_factory=LineMap)
    timeouts: Timeouts = field(default_factory=Timeouts)
    contract: Contract = field(default_factory=Contract)  # what the project's build, wheel and tests promise
    # The declared options the loader looked at (tests compare them with the table).
    options_read: frozenset[str] = field(repr=False, compare=False, default=frozenset())

    @property
    def root(self) -> Path:
        return self.path.parent

    def release(self, minor: str) -> TorchRelease | None:
        return next((r for r in self.torch if r.minor == minor), None)


def load_matrix(path: Path, patches_dir: Path | None = None) -> Matrix:
    """Read and validate matrix.yaml through the declared options; raises MatrixError listing every problem."""
    data, lines = load_yaml_with_lines(path)
    reader = OptionReader(path, lines)
    top = reader.top(data)
    reader.mapping(top)
    version = reader.child(top, "schema-version")
    if version.present and version.value != SCHEMA_VERSION:
        reader.problem("schema-version", f"unsupported schema version {version.value!r} (allowed: {SCHEMA_VERSION})")

    plugin = _plugin(reader, reader.child(top, "plugin"))
    driver = reader.child(top, "driver")
    reader.mapping(driver)
    driver_source = reader.parse(reader.child(driver, "source"))
    drivers = _drivers(reader, reader.child(driver, "versions"))
    driver_distribution = reader.parse(reader.child(driver, "distribution"))
    python = reader.parse(reader.child(top, "python"))
    declared_patches = reader.parse(reader.child(top, "patches"))
    patches_root = patches_dir or declared_patches or path.parent / "patches"
    torch = _torch(reader, reader.child(top, "torch"), patches_root)
    exclude = _rules(reader, reader.child(top, "exclude"))
    include = _rules(reader, reader.child(top, "include"))
    for index, rule in enumerate(include):
        if rule.torch is None or rule.python is None or rule.driver is None:
            reader.problem(f"include[{index}]", "an include rule names torch, python and driver")
    images = _images(reader, reader.child(top, "images"))
    runner = RunnerName(reader.parse(reader.child(top, "runner")) or RunnerName.AUTO)
    timeouts = _timeouts(reader, reader.child(top, "timeouts"))
    contract = read_contract(reader, top)

    if reader.problems:
        raise MatrixError(reader.problems)
    assert plugin is not None and driver_source is not None and driver_distribution is not None
    return Matrix(
        path=path,
        plugin=plugin,
        driver_source=driver_source,
        driver_distribution=driver_distribution,
        drivers=drivers,
        python=python or (),
        torch=torch,
        exclude=exclude,
        include=include,
        images=images,
        runner=runner,
        patches_dir=patches_root,
        lines=lines,
        timeouts=timeouts,
        contract=contract,
        options_read=frozenset(reader.read),
    )


def _timeouts(reader: OptionReader, node: Node) -> Timeouts:
    seconds = {k: float(v) for k, v in DEFAULT_TIMEOUTS.items()}
    if node.present and node.value is not None and reader.mapping(node):
        for step in DEFAULT_TIMEOUTS:
            given = reader.child(node, step)
            if given.present and (value := reader.parse(given)) is not None:
                seconds[step] = value
    else:
        for step in DEFAULT_TIMEOUTS:
            reader.child(node, step)
    return Timeouts(seconds)


def _plugin(reader: OptionReader, node: Node) -> PluginSpec | None:
    keys = ("distribution", "version", "source", "smoke-tests")
    distribution_node, version_node, source_node, tests_node = (reader.child(node, key) for key in keys)
    if not reader.mapping(node) or not all(
        n.present for n in (distribution_node, version_node, source_node, tests_node)
    ):
        return None
    version = reader.version(version_node)
    distribution = reader.distribution(distribution_node)
    source = reader.directory(source_node)
    tests = reader.directory(tests_node)
    if source and tests and not tests.resolve().is_relative_to(source.resolve()):
        reader.problem(
            tests_node.key,
            f"'{tests_node.value}' is outside plugin.source '{source_node.value}' (allowed: a directory inside it)",
        )
        return None
    if version is None or distribution is None or source is None or tests is None:
        return None
    return PluginSpec(distribution, version, source, tests)


def _drivers(reader: OptionReader, node: Node) -> tuple[DriverVersion, ...]:
    out = [DriverVersion(v) for v in reader.versions(node)] if node.present else []
    majors = [d.major for d in out]
    if len(set(majors)) != len(majors):
        reader.problem(node.key, f"two versions share an API major ({majors}); cells are per major")
    return tuple(out)


def _wheel_source(reader: OptionReader, node: Node) -> WheelSource:
    value = node.value
    find_links, index = reader.child(node, "find-links"), reader.child(node, "index")
    local = reader.child(node, "local-find-links")
    if not node.present or value is None or value == WheelSourceKind.REGISTRY:
        return WheelSource(WheelSourceKind.REGISTRY)
    if value == "pip-find-links":
        return WheelSource(WheelSourceKind.FIND_LINKS, PIP_CONFIG)
    if isinstance(value, dict) and set(value) == {"find-links"} and isinstance(value["find-links"], str):
        directory = reader.parse(find_links)
        return WheelSource(WheelSourceKind.FIND_LINKS, directory or value["find-links"].removeprefix("file://"))
    if isinstance(value, dict) and "index" in value:
        # {index: URL, local-find-links: DIR | pip-config}: an index any machine reaches, and an optional local mirror.
        reader.mapping(node)
        if "find-links" in value:
            return WheelSource(WheelSourceKind.REGISTRY)  # reported by mapping() as an unknown key
        url = reader.parse(index) or ""
        mirror = reader.parse(local) if local.present else ""
        return WheelSource(WheelSourceKind.INDEX, url, mirror or "")
    reader.problem(
        node.key,
        f"{_describe(value)} is not allowed (allowed: registry, pip-find-links, {{find-links: <path or URL>}}, "
        f"{{index: <URL>, local-find-links: <absolute directory or {PIP_CONFIG}>}})",
    )
    return WheelSource(WheelSourceKind.REGISTRY)


def _describe(value: Any) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"


def _torch(reader: OptionReader, node: Node, patches_root: Path) -> tuple[TorchRelease, ...]:
    out: list[TorchRelease] = []
    seen: dict[str, list[tuple[int, TorchRelease]]] = {}
    for index, entry in enumerate(reader.items(node)):
        key = entry.key
        reader.mapping(entry)
        version_node = reader.child(entry, "version")
        wheels_node, variant_node = reader.child(entry, "wheels"), reader.child(entry, "variant")
        python_node, patches_node = reader.child(entry, "python"), reader.child(entry, "patches")
        if not version_node.present:
            continue
        version = reader.parse(version_node)
        wheels = _wheel_source(reader, wheels_node)
        default_variant = Variant.CUDA if wheels.kind == WheelSourceKind.REGISTRY else None
        if not variant_node.present and default_variant is None:
            reader.problem(
                variant_node.key, "a torch release from find-links must name its variant (allowed: cpu, cuda)"
            )
            continue
        chosen = reader.parse(variant_node) if variant_node.present else default_variant
        variant = Variant(chosen) if chosen is not None else None
        python = reader.parse(python_node) if python_node.present else None
        patches = _patches(reader, patches_node, patches_root)
        if version is None or variant is None:
            continue
        if version.is_prerelease or version.local:
            reader.problem(version_node.key, f"'{version}': give the public release version; the variant says cpu/cuda")
        release = TorchRelease(version, variant, wheels, python, patches, reader.line(key))
        for other_index, other in seen.get(release.minor, []):
            _second_entry(reader, key, release, other_index, other)
        seen.setdefault(release.minor, []).append((index, release))
        out.append(release)
    if not out and not reader.problems:
        reader.problem("torch", "needs at least one torch release")
    return tuple(out)


def _patches(reader: OptionReader, node: Node, patches_root: Path) -> tuple[str, ...]:
    names = reader.names(node, "series name (a directory of patches/)")
    for index, name in enumerate(reader.sequence(node)):
        if name not in names or (patches_root / name / "series").is_file():
            continue
        known = (
            sorted(p.name for p in patches_root.iterdir() if (p / "series").is_file()) if patches_root.is_dir() else []
        )
        hint = difflib.get_close_matches(name, known, n=1)
        tip = f"; did you mean '{hint[0]}'?" if hint else ""
        reader.problem(
            f"{node.key}[{index}]",
            f"no patch series '{name}' (expected {patches_root / name / 'series'}; known: {', '.join(known) or 'none'})"
            f"{tip}",
        )
    return names


def _second_entry(reader: OptionReader, key: str, release: TorchRelease, other_index: int, other: TorchRelease) -> None:
    """A torch minor declared twice: allowed once per variant, each entry on Pythons of its own.

    The plugin wheel's name carries the torch minor and the Python tag, not the variant, so a cpu and a cuda
    build of one minor may share the minor only where their Pythons differ (torch 2.13: the CPU build on cp311
    from PyTorch's index, the registry's CUDA build on cp314); otherwise they would publish the same file.
    """
    minor = release.minor
    why = (
        f"the plugin wheel's name carries the torch minor and the Python, not the variant: a {other.variant} and a "
        f"{release.variant} build of {minor} for one Python would publish the same file and overwrite each other"
    )
    if other.variant == release.variant:
        reader.problem(
            f"{key}.version",
            f"torch {minor} ({release.variant}) is already declared at torch[{other_index}]; one entry per torch "
            "minor and variant",
        )
    elif other.python is None or release.python is None:
        reader.problem(
            f"{key}.version",
            f"torch {minor} is already declared at torch[{other_index}]; one entry per torch minor, or one per "
            f"variant (that one is {other.variant}) when both list their own Pythons and share none ({why})",
        )
    else:
        for p_index, python in enumerate(release.python):
            if python in other.python:
                reader.problem(
                    f"{key}.python[{p_index}]",
                    f"Python {python} is already built from torch {minor} at torch[{other_index}] "
                    f"({other.variant}); each variant of one torch minor needs Pythons of its own ({why})",
                )


def _rules(reader: OptionReader, node: Node) -> tuple[CellRule, ...]:
    out = []
    for entry in reader.items(node):
        reader.mapping(entry)
        torch, python, driver, variant = (reader.child(entry, k) for k in ("torch", "python", "driver", "variant"))
        if isinstance(entry.value, dict) and not entry.value:
            reader.problem(entry.key, "a rule needs at least one of torch, python, driver, variant")
            continue
        if not isinstance(entry.value, dict):
            continue
        driver_version = reader.parse(driver)
        chosen = reader.parse(variant)
        out.append(
            CellRule(
                reader.parse(torch),
                reader.parse(python),
                driver_version.major if driver_version else None,
                Variant(chosen) if chosen is not None else None,
                reader.line(entry.key),
            )
        )
    return tuple(out)


def _images(reader: OptionReader, node: Node) -> tuple[BuildImage, ...]:
    out = []
    for name, entry in reader.entries(node, "image name"):
        base_node, python_node = reader.child(entry, "base"), reader.child(entry, "python")
        if not reader.mapping(entry) or not (base_node.present and python_node.present):
            continue
        base = reader.parse(base_node)
        python = reader.parse(python_node)
        layer = reader.parse(reader.child(entry, "layer"))
        dockerfile = reader.parse(reader.child(entry, "dockerfile"))
        context_node = reader.child(entry, "context")
        context = reader.parse(context_node)
        args = []
        for arg, value_node in reader.entries(reader.child(entry, "build-args"), "argument name"):
            value = reader.parse(value_node)
            if value is not None:
                args.append((arg, value))
        if context_node.present and layer is None and dockerfile is None:
            reader.problem(context_node.key, "a context is for `layer` or `dockerfile`, and this image has neither")
        if base:
            out.append(BuildImage(name, base, python or (), layer, dockerfile, context, tuple(args)))
    return tuple(out)
