"""Parse matrix.yaml into typed objects once; the rest of the code never sees raw dicts."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from buildmatrix.errors import MatrixError, Problem
from buildmatrix.model.yamlsource import LineMap, load_yaml_with_lines

SCHEMA_VERSION = 1
RUNNERS = ("auto", "local", "docker")
VARIANTS = ("cpu", "cuda")
WHEEL_SOURCES = ("registry", "pip-find-links")
INDEX_SOURCE_KEYS = ("index", "local-find-links")

TOP_KEYS = ("schema-version", "plugin", "driver", "python", "torch", "exclude", "include", "images", "runner")
PLUGIN_KEYS = ("distribution", "version", "source", "smoke-tests")
DRIVER_KEYS = ("distribution", "source", "versions")
TORCH_KEYS = ("version", "variant", "wheels", "python", "patches")
RULE_KEYS = ("torch", "python", "driver", "variant")
IMAGE_KEYS = ("base", "python")


PIP_CONFIG = "pip-config"  # a find-links location meaning pip's configured find-links (PIP_FIND_LINKS, pip.conf)


@dataclass(frozen=True)
class WheelSource:
    """Where a torch release's wheel comes from: the registry, a find-links location, or an index of its own."""

    kind: str  # "registry" | "find-links" | "index"
    location: str = ""  # find-links: a path or URL, or PIP_CONFIG; index: the index URL
    # index only: find-links that replace the index on a machine where they hold the release's wheels (offline
    # machines); a directory, PIP_CONFIG, or "" for none. Not part of describe(): the same wheels, mirrored.
    local_find_links: str = ""

    def describe(self) -> str:
        if self.kind == "registry":
            return "registry"
        return f"{self.kind} {self.location}"


@dataclass(frozen=True)
class TorchRelease:
    version: Version
    variant: str
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
        return f"{self.version}+cpu" if self.variant == "cpu" and self.wheels.kind != "registry" else str(self.version)


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
    variant: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class BuildImage:
    name: str
    base: str  # "debootstrap:<suite>" (made locally, no registry) or a plain image reference
    python: tuple[Version, ...]

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
    runner: str
    lines: LineMap = field(repr=False, compare=False, default_factory=LineMap)

    @property
    def root(self) -> Path:
        return self.path.parent

    def release(self, minor: str) -> TorchRelease | None:
        return next((r for r in self.torch if r.minor == minor), None)


def torch_selector(text: str) -> SpecifierSet:
    """'2.4' means the 2.4 series; anything starting with an operator is a PEP 440 specifier."""
    text = text.strip()
    if text and text[0] in "<>=!~":
        return SpecifierSet(text)
    Version(text)  # raises InvalidVersion for nonsense
    return SpecifierSet(f"=={text}.*") if text.count(".") < 2 else SpecifierSet(f"=={text}")


class _Reader:
    """Collects every problem of the file before raising, each tagged with its key and line."""

    def __init__(self, path: Path, lines: LineMap) -> None:
        self.path = path
        self.lines = lines
        self.problems: list[Problem] = []

    def problem(self, key: str, message: str) -> None:
        self.problems.append(Problem(str(self.path), self.lines.line(key), key, message))

    def mapping(self, value: Any, key: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.problem(key or "(top level)", f"expected a mapping with keys {', '.join(allowed)}, got {_kind(value)}")
            return {}
        for name in value:
            if name not in allowed:
                hint = difflib.get_close_matches(str(name), allowed, n=1)
                tip = f"; did you mean '{hint[0]}'?" if hint else ""
                self.problem(_join(key, str(name)), f"unknown key '{name}' (allowed: {', '.join(allowed)}){tip}")
        for name in required:
            if name not in value:
                self.problem(key or "(top level)", f"missing required key '{name}'")
        return value

    def sequence(self, value: Any, key: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.problem(key, f"expected a list, got {_kind(value)}")
            return []
        return value

    def version(self, value: Any, key: str) -> Version | None:
        if isinstance(value, float):
            # YAML reads 3.10 as 3.1: refuse rather than guess.
            self.problem(key, f'{value!r} is a number; quote versions, e.g. "{value}"')
            return None
        try:
            return Version(str(value))
        except InvalidVersion:
            self.problem(key, f"'{value}' is not a valid version (PEP 440, e.g. \"2.4.1\")")
            return None

    def choice(self, value: Any, key: str, allowed: tuple[str, ...]) -> str | None:
        if value not in allowed:
            hint = difflib.get_close_matches(str(value), allowed, n=1)
            tip = f"; did you mean '{hint[0]}'?" if hint else ""
            self.problem(key, f"'{value}' is not allowed (allowed: {', '.join(allowed)}){tip}")
            return None
        return str(value)

    def string(self, value: Any, key: str) -> str | None:
        if not isinstance(value, str) or not value:
            self.problem(key, f"expected a non-empty string, got {_kind(value)}")
            return None
        return value


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"


def _join(parent: str, child: str) -> str:
    return f"{parent}.{child}" if parent else child


def load_matrix(path: Path, patches_dir: Path | None = None) -> Matrix:
    """Read and validate matrix.yaml; raises MatrixError listing every problem."""
    data, lines = load_yaml_with_lines(path)
    reader = _Reader(path, lines)
    root = reader.mapping(data, "", TOP_KEYS, required=("plugin", "driver", "python", "torch"))
    if root.get("schema-version", SCHEMA_VERSION) != SCHEMA_VERSION:
        reader.problem(
            "schema-version", f"unsupported schema version {root['schema-version']!r} (allowed: {SCHEMA_VERSION})"
        )

    plugin = _plugin(reader, root.get("plugin"), path.parent)
    driver_raw = reader.mapping(root.get("driver"), "driver", DRIVER_KEYS, required=("source", "versions"))
    drivers = _drivers(reader, driver_raw.get("versions"))
    python = _versions(reader, root.get("python"), "python")
    patches_root = patches_dir if patches_dir is not None else path.parent / "patches"
    torch = _torch(reader, root.get("torch"), patches_root)
    exclude = _rules(reader, root.get("exclude"), "exclude")
    include = _rules(reader, root.get("include"), "include")
    for index, rule in enumerate(include):
        if rule.torch is None or rule.python is None or rule.driver is None:
            reader.problem(f"include[{index}]", "an include rule names torch, python and driver")
    images = _images(reader, root.get("images"))
    runner = reader.choice(root.get("runner", "auto"), "runner", RUNNERS) or "auto"

    if reader.problems:
        raise MatrixError(reader.problems)
    assert plugin is not None
    return Matrix(
        path=path,
        plugin=plugin,
        driver_source=path.parent / str(driver_raw["source"]),
        driver_distribution=str(driver_raw.get("distribution", "emu-driver")),
        drivers=drivers,
        python=python,
        torch=torch,
        exclude=exclude,
        include=include,
        images=images,
        runner=runner,
        lines=lines,
    )


def _plugin(reader: _Reader, value: Any, root: Path) -> PluginSpec | None:
    raw = reader.mapping(value, "plugin", PLUGIN_KEYS, required=PLUGIN_KEYS)
    if set(PLUGIN_KEYS) - set(raw):
        return None
    version = reader.version(raw["version"], "plugin.version")
    distribution = reader.string(raw["distribution"], "plugin.distribution")
    source = reader.string(raw["source"], "plugin.source")
    tests = reader.string(raw["smoke-tests"], "plugin.smoke-tests")
    if source and not (root / source).is_dir():
        reader.problem("plugin.source", f"directory '{source}' does not exist next to the matrix file")
    if None in (version, distribution, source, tests):
        return None
    assert version and distribution and source and tests
    return PluginSpec(distribution, version, root / source, root / tests)


def _drivers(reader: _Reader, value: Any) -> tuple[DriverVersion, ...]:
    out = []
    for index, item in enumerate(reader.sequence(value, "driver.versions")):
        version = reader.version(item, f"driver.versions[{index}]")
        if version is not None:
            out.append(DriverVersion(version))
    majors = [d.major for d in out]
    if len(set(majors)) != len(majors):
        reader.problem("driver.versions", f"two versions share an API major ({majors}); cells are per major")
    return tuple(out)


def _versions(reader: _Reader, value: Any, key: str) -> tuple[Version, ...]:
    out = []
    for index, item in enumerate(reader.sequence(value, key)):
        version = reader.version(item, f"{key}[{index}]")
        if version is not None:
            out.append(version)
    if not out and value is not None:
        reader.problem(key, "needs at least one version")
    return tuple(out)


def _wheel_source(reader: _Reader, value: Any, key: str) -> WheelSource:
    if value is None or value == "registry":
        return WheelSource("registry")
    if value == "pip-find-links":
        return WheelSource("find-links", "pip-config")
    if isinstance(value, dict) and set(value) == {"find-links"} and isinstance(value["find-links"], str):
        return WheelSource("find-links", value["find-links"])
    if isinstance(value, dict) and "index" in value:
        return _index_source(reader, value, key)
    reader.problem(
        key,
        f"{_kind(value)} is not allowed (allowed: registry, pip-find-links, {{find-links: <path or URL>}}, "
        f"{{index: <URL>, local-find-links: <absolute directory or {PIP_CONFIG}>}})",
    )
    return WheelSource("registry")


def _index_source(reader: _Reader, value: dict[str, Any], key: str) -> WheelSource:
    """{index: URL, local-find-links: DIR | pip-config}: an index any machine reaches, and an optional local mirror."""
    raw = reader.mapping(value, key, INDEX_SOURCE_KEYS, required=("index",))
    url = raw.get("index")
    if not isinstance(url, str) or not url.startswith(("https://", "http://")):
        reader.problem(f"{key}.index", f"{_kind(url)} is not an index URL (allowed: https://..., a PEP 503 index)")
        url = ""
    local = raw.get("local-find-links", "")
    if local not in {PIP_CONFIG, ""} and not (isinstance(local, str) and Path(local).is_absolute()):
        reader.problem(
            f"{key}.local-find-links",
            f"{_kind(local)} is not allowed (allowed: an absolute directory of wheels, or {PIP_CONFIG} for pip's "
            "configured find-links)",
        )
        local = ""
    return WheelSource("index", url.rstrip("/"), str(local))


def _torch(reader: _Reader, value: Any, patches_root: Path) -> tuple[TorchRelease, ...]:
    out: list[TorchRelease] = []
    seen: dict[tuple[str, str], int] = {}
    for index, item in enumerate(reader.sequence(value, "torch")):
        key = f"torch[{index}]"
        raw = reader.mapping(item, key, TORCH_KEYS, required=("version",))
        if "version" not in raw:
            continue
        version = reader.version(raw["version"], f"{key}.version")
        wheels = _wheel_source(reader, raw.get("wheels"), f"{key}.wheels")
        default_variant = "cuda" if wheels.kind == "registry" else None
        variant_raw = raw.get("variant", default_variant)
        if variant_raw is None:
            reader.problem(
                f"{key}.variant", "a torch release from find-links must name its variant (allowed: cpu, cuda)"
            )
            continue
        variant = reader.choice(variant_raw, f"{key}.variant", VARIANTS)
        python = _versions(reader, raw["python"], f"{key}.python") if "python" in raw else None
        patches = []
        for p_index, name in enumerate(reader.sequence(raw.get("patches"), f"{key}.patches")):
            pkey = f"{key}.patches[{p_index}]"
            if not isinstance(name, str):
                reader.problem(pkey, f"expected a series name, got {_kind(name)}")
                continue
            if not (patches_root / name / "series").is_file():
                known = (
                    sorted(p.name for p in patches_root.iterdir() if (p / "series").is_file())
                    if patches_root.is_dir()
                    else []
                )
                hint = difflib.get_close_matches(name, known, n=1)
                tip = f"; did you mean '{hint[0]}'?" if hint else ""
                reader.problem(
                    pkey,
                    f"no patch series '{name}' (expected {patches_root / name / 'series'}; known: {', '.join(known) or 'none'}){tip}",
                )
            patches.append(name)
        if version is None or variant is None:
            continue
        if version.is_prerelease or version.local:
            reader.problem(f"{key}.version", f"'{version}': give the public release version; the variant says cpu/cuda")
        ident = (f"{version.major}.{version.minor}", variant)
        if ident in seen:
            reader.problem(
                f"{key}.version",
                f"torch {ident[0]} ({variant}) is already declared at torch[{seen[ident]}]; one entry per minor and variant",
            )
        seen[ident] = index
        out.append(TorchRelease(version, variant, wheels, python, tuple(patches), reader.lines.line(key)))
    if not out and not reader.problems:
        reader.problem("torch", "needs at least one torch release")
    return tuple(out)


def _rules(reader: _Reader, value: Any, key: str) -> tuple[CellRule, ...]:
    out = []
    for index, item in enumerate(reader.sequence(value, key)):
        rkey = f"{key}[{index}]"
        raw = reader.mapping(item, rkey, RULE_KEYS)
        if not raw:
            reader.problem(rkey, f"a rule needs at least one of {', '.join(RULE_KEYS)}")
            continue
        torch = None
        if "torch" in raw:
            try:
                torch = torch_selector(str(raw["torch"]))
            except (InvalidSpecifier, InvalidVersion):
                reader.problem(
                    f"{rkey}.torch",
                    f'\'{raw["torch"]}\' is neither a version like "2.4" nor a specifier like ">=2.4,<2.6"',
                )
        python = reader.version(raw["python"], f"{rkey}.python") if "python" in raw else None
        driver = None
        if "driver" in raw:
            driver_version = reader.version(raw["driver"], f"{rkey}.driver")
            driver = driver_version.major if driver_version else None
        variant = reader.choice(raw["variant"], f"{rkey}.variant", VARIANTS) if "variant" in raw else None
        out.append(CellRule(torch, python, driver, variant, reader.lines.line(rkey)))
    return tuple(out)


def _images(reader: _Reader, value: Any) -> tuple[BuildImage, ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        reader.problem("images", f"expected a mapping of image name to image, got {_kind(value)}")
        return ()
    out = []
    for name, item in value.items():
        key = f"images.{name}"
        raw = reader.mapping(item, key, IMAGE_KEYS, required=IMAGE_KEYS)
        if set(IMAGE_KEYS) - set(raw):
            continue
        base = reader.string(raw["base"], f"{key}.base")
        python = _versions(reader, raw["python"], f"{key}.python")
        if base:
            out.append(BuildImage(str(name), base, python))
    return tuple(out)
