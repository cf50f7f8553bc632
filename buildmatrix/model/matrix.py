"""Parse matrix.yaml into typed objects once; the rest of the code never sees raw dicts."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from buildmatrix.errors import MatrixError, Problem
from buildmatrix.model.vocab import RunnerName, Variant, WheelSourceKind
from buildmatrix.model.yamlsource import LineMap, load_yaml_with_lines

SCHEMA_VERSION = 1
RUNNERS = tuple(RunnerName)
VARIANTS = tuple(Variant)
WHEEL_SOURCES = ("registry", "pip-find-links")
INDEX_SOURCE_KEYS = ("index", "local-find-links")

TOP_KEYS = (
    "schema-version",
    "plugin",
    "driver",
    "python",
    "torch",
    "exclude",
    "include",
    "images",
    "runner",
    "timeouts",
)
# Seconds a step may run before its whole process tree is killed and the cell fails (transient: retried).
# Generous: a cold uv cache downloads GBs of CUDA torch; the real plugin compiles in minutes on 2 cores.
DEFAULT_TIMEOUTS = {
    "driver": 1800,
    "build-env": 3600,
    "build": 3600,
    "check": 600,
    "smoke-env": 3600,
    "smoke": 1800,
    "image": 3600,
}
TIMEOUT_KEYS = tuple(DEFAULT_TIMEOUTS)
PLUGIN_KEYS = ("distribution", "version", "source", "smoke-tests")
DRIVER_KEYS = ("distribution", "source", "versions")
TORCH_KEYS = ("version", "variant", "wheels", "python", "patches")
RULE_KEYS = ("torch", "python", "driver", "variant")
IMAGE_KEYS = ("base", "python")

ABSENT: Any = object()  # a key not written at all, as opposed to written as null

# Names that become path components (patch series, images): never a path, never hidden.
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
DISTRIBUTION_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
DEBOOTSTRAP_BASE = re.compile(r"debootstrap:[a-z][a-z0-9-]*")
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_REFERENCE = re.compile(
    rf"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
)


PIP_CONFIG = "pip-config"  # a find-links location meaning pip's configured find-links (PIP_FIND_LINKS, pip.conf)


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

    def sequence(self, value: Any, key: str, required: bool = False) -> list[Any]:
        if value is ABSENT or (value is None and not required):
            return []  # a missing required key is reported once, by mapping()
        if not isinstance(value, list):
            self.problem(key, f"expected a list, got {_kind(value)}")
            return []
        return value

    def version(self, value: Any, key: str) -> Version | None:
        if not isinstance(value, str):
            self.not_text(value, key)
            return None
        try:
            return Version(value)
        except InvalidVersion:
            self.problem(key, f"'{value}' is not a valid version (PEP 440, e.g. \"2.4.1\")")
            return None

    def not_text(self, value: Any, key: str) -> None:
        """A version or selector YAML typed as something else: a number loses digits (2.10 reads as 2.1)."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            written = self.lines.text(key) or repr(value)
            read_as = f" (YAML reads it as {value!r})" if written != repr(value) else ""
            self.problem(key, f'{written} is a number{read_as}; quote versions, e.g. "{written}"')
        else:
            self.problem(key, f'expected a quoted version like "2.4", got {_kind(value)}')

    def choice(self, value: Any, key: str, allowed: tuple[str, ...]) -> str | None:
        if value not in allowed:
            hint = difflib.get_close_matches(str(value), allowed, n=1)
            tip = f"; did you mean '{hint[0]}'?" if hint else ""
            self.problem(key, f"'{value}' is not allowed (allowed: {', '.join(allowed)}){tip}")
            return None
        return str(value)

    def project_dir(self, value: Any, key: str, root: Path) -> Path | None:
        """A directory given relative to the matrix file; it must exist and stay inside the project."""
        text = self.string(value, key)
        if text is None:
            return None
        path = root / text
        resolved = path.resolve()
        if resolved == root.resolve():
            self.problem(key, f"'{text}' is the project itself (allowed: a directory inside {root})")
            return None
        if Path(text).is_absolute() or not resolved.is_relative_to(root.resolve()):
            self.problem(key, f"'{text}' is outside the project (allowed: a directory relative to {root})")
            return None
        if not path.is_dir():
            self.problem(key, f"directory '{text}' does not exist next to the matrix file")
            return None
        return path

    def distribution(self, value: Any, key: str) -> str | None:
        """A distribution name (PEP 508); it names wheel files, so it is never a path."""
        text = self.string(value, key)
        if text is not None and not DISTRIBUTION_NAME.fullmatch(text):
            self.problem(key, f"'{text}' is not a distribution name (allowed: letters, digits, . _ -, e.g. torch-emu)")
            return None
        return text

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
    driver_source = (
        reader.project_dir(driver_raw["source"], "driver.source", path.parent) if "source" in driver_raw else None
    )
    drivers = _drivers(reader, driver_raw.get("versions", ABSENT))
    driver_distribution = reader.distribution(driver_raw.get("distribution", "emu-driver"), "driver.distribution")
    python = _versions(reader, root.get("python", ABSENT), "python", minors=True)
    patches_root = patches_dir if patches_dir is not None else path.parent / "patches"
    torch = _torch(reader, root.get("torch", ABSENT), patches_root)
    exclude = _rules(reader, root.get("exclude"), "exclude")
    include = _rules(reader, root.get("include"), "include")
    for index, rule in enumerate(include):
        if rule.torch is None or rule.python is None or rule.driver is None:
            reader.problem(f"include[{index}]", "an include rule names torch, python and driver")
    images = _images(reader, root.get("images"))
    runner = RunnerName(reader.choice(root.get("runner", RunnerName.AUTO), "runner", RUNNERS) or RunnerName.AUTO)
    timeouts = _timeouts(reader, root.get("timeouts"))

    if reader.problems:
        raise MatrixError(reader.problems)
    assert plugin is not None and driver_source is not None and driver_distribution is not None
    return Matrix(
        path=path,
        plugin=plugin,
        driver_source=driver_source,
        driver_distribution=driver_distribution,
        drivers=drivers,
        python=python,
        torch=torch,
        exclude=exclude,
        include=include,
        images=images,
        runner=runner,
        patches_dir=patches_root,
        lines=lines,
        timeouts=timeouts,
    )


def _timeouts(reader: _Reader, value: Any) -> Timeouts:
    raw = reader.mapping(value, "timeouts", TIMEOUT_KEYS) if value is not None else {}
    seconds = {k: float(v) for k, v in DEFAULT_TIMEOUTS.items()}
    for step, given in raw.items():
        if step not in seconds:
            continue  # reported by mapping() as an unknown key
        if isinstance(given, bool) or not isinstance(given, int | float) or not 0 < given <= 7 * 24 * 3600:
            reader.problem(
                f"timeouts.{step}", f"{given!r:.40} is not a positive number of seconds (at most 604800, a week)"
            )
            continue
        seconds[step] = float(given)
    return Timeouts(seconds)


def _plugin(reader: _Reader, value: Any, root: Path) -> PluginSpec | None:
    raw = reader.mapping(value, "plugin", PLUGIN_KEYS, required=PLUGIN_KEYS)
    if set(PLUGIN_KEYS) - set(raw):
        return None
    version = reader.version(raw["version"], "plugin.version")
    distribution = reader.distribution(raw["distribution"], "plugin.distribution")
    source = reader.project_dir(raw["source"], "plugin.source", root)
    tests = reader.project_dir(raw["smoke-tests"], "plugin.smoke-tests", root)
    if source and tests and not tests.resolve().is_relative_to(source.resolve()):
        reader.problem(
            "plugin.smoke-tests",
            f"'{raw['smoke-tests']}' is outside plugin.source '{raw['source']}' (allowed: a directory inside it)",
        )
        return None
    if None in (version, distribution, source, tests):
        return None
    assert version and distribution and source and tests
    return PluginSpec(distribution, version, source, tests)


def _drivers(reader: _Reader, value: Any) -> tuple[DriverVersion, ...]:
    out = []
    for index, item in enumerate(reader.sequence(value, "driver.versions", required=True)):
        version = reader.version(item, f"driver.versions[{index}]")
        if version is not None:
            out.append(DriverVersion(version))
    if isinstance(value, list) and not value:
        reader.problem("driver.versions", 'needs at least one driver API version, e.g. ["2.2"]')
    majors = [d.major for d in out]
    if len(set(majors)) != len(majors):
        reader.problem("driver.versions", f"two versions share an API major ({majors}); cells are per major")
    return tuple(out)


def _versions(reader: _Reader, value: Any, key: str, minors: bool = False) -> tuple[Version, ...]:
    """A list of versions, each once; minors=True: Python minors such as "3.11" (cells are per minor)."""
    out: list[Version] = []
    items = reader.sequence(value, key, required=True)
    for index, item in enumerate(items):
        ikey = f"{key}[{index}]"
        version = reader.version(item, ikey)
        if version is None:
            continue
        if minors and (len(version.release) != 2 or version != Version(version.base_version)):
            reader.problem(ikey, f"'{item}' is not a Python minor (allowed: major.minor, e.g. \"3.11\")")
            continue
        if version in out:
            first = out.index(version)
            reader.problem(ikey, f"'{item}' repeats {key}[{first}] ('{items[first]}'); list each version once")
            continue
        out.append(version)
    if not out and isinstance(value, list) and not value:
        reader.problem(key, "needs at least one version")
    return tuple(out)


def _wheel_source(reader: _Reader, value: Any, key: str) -> WheelSource:
    if value is None or value == WheelSourceKind.REGISTRY:
        return WheelSource(WheelSourceKind.REGISTRY)
    if value == "pip-find-links":
        return WheelSource(WheelSourceKind.FIND_LINKS, "pip-config")
    if isinstance(value, dict) and set(value) == {"find-links"} and isinstance(value["find-links"], str):
        location = value["find-links"]
        directory = Path(location.removeprefix("file://"))
        if not directory.is_absolute():
            reader.problem(
                f"{key}.find-links",
                f"'{location}' is not absolute (allowed: an absolute directory path or file:// URL; runners "
                "resolve a relative one from different directories)",
            )
        elif not directory.is_dir():
            reader.problem(f"{key}.find-links", f"'{location}' is not a directory (allowed: a directory of wheels)")
        return WheelSource(WheelSourceKind.FIND_LINKS, str(directory))
    if isinstance(value, dict) and "index" in value:
        return _index_source(reader, value, key)
    reader.problem(
        key,
        f"{_kind(value)} is not allowed (allowed: registry, pip-find-links, {{find-links: <path or URL>}}, "
        f"{{index: <URL>, local-find-links: <absolute directory or {PIP_CONFIG}>}})",
    )
    return WheelSource(WheelSourceKind.REGISTRY)


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
    return WheelSource(WheelSourceKind.INDEX, url.rstrip("/"), str(local))


def _torch(reader: _Reader, value: Any, patches_root: Path) -> tuple[TorchRelease, ...]:
    out: list[TorchRelease] = []
    seen: dict[str, list[tuple[int, TorchRelease]]] = {}
    for index, item in enumerate(reader.sequence(value, "torch", required=True)):
        key = f"torch[{index}]"
        raw = reader.mapping(item, key, TORCH_KEYS, required=("version",))
        if "version" not in raw:
            continue
        version = reader.version(raw["version"], f"{key}.version")
        wheels = _wheel_source(reader, raw.get("wheels"), f"{key}.wheels")
        default_variant = Variant.CUDA if wheels.kind == WheelSourceKind.REGISTRY else None
        variant_raw = raw.get("variant", default_variant)
        if variant_raw is None:
            reader.problem(
                f"{key}.variant", "a torch release from find-links must name its variant (allowed: cpu, cuda)"
            )
            continue
        chosen = reader.choice(variant_raw, f"{key}.variant", VARIANTS)
        variant = Variant(chosen) if chosen is not None else None
        python = _versions(reader, raw["python"], f"{key}.python") if "python" in raw else None
        patches = []
        for p_index, name in enumerate(reader.sequence(raw.get("patches"), f"{key}.patches")):
            pkey = f"{key}.patches[{p_index}]"
            if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name):
                reader.problem(pkey, f"expected a series name (a directory of patches/), got {_kind(name)}")
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
                    f"no patch series '{name}' (expected {patches_root / name / 'series'}; "
                    f"known: {', '.join(known) or 'none'}){tip}",
                )
            patches.append(name)
        if version is None or variant is None:
            continue
        if version.is_prerelease or version.local:
            reader.problem(f"{key}.version", f"'{version}': give the public release version; the variant says cpu/cuda")
        release = TorchRelease(version, variant, wheels, python, tuple(patches), reader.lines.line(key))
        for other_index, other in seen.get(release.minor, []):
            _second_entry(reader, key, release, other_index, other)
        seen.setdefault(release.minor, []).append((index, release))
        out.append(release)
    if not out and not reader.problems:
        reader.problem("torch", "needs at least one torch release")
    return tuple(out)


def _second_entry(reader: _Reader, key: str, release: TorchRelease, other_index: int, other: TorchRelease) -> None:
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


def _rules(reader: _Reader, value: Any, key: str) -> tuple[CellRule, ...]:
    out = []
    for index, item in enumerate(reader.sequence(value, key)):
        rkey = f"{key}[{index}]"
        raw = reader.mapping(item, rkey, RULE_KEYS)
        if not raw:
            reader.problem(rkey, f"a rule needs at least one of {', '.join(RULE_KEYS)}")
            continue
        torch = None
        if "torch" in raw and not isinstance(raw["torch"], str):
            reader.not_text(raw["torch"], f"{rkey}.torch")
        elif "torch" in raw:
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
        chosen = reader.choice(raw["variant"], f"{rkey}.variant", VARIANTS) if "variant" in raw else None
        variant = Variant(chosen) if chosen is not None else None
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
        if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name):
            reader.problem(key, f"image name {_kind(name)} is not a plain name (allowed: letters, digits, . _ -)")
            continue
        raw = reader.mapping(item, key, IMAGE_KEYS, required=IMAGE_KEYS)
        if set(IMAGE_KEYS) - set(raw):
            continue
        base = reader.string(raw["base"], f"{key}.base")
        python = _versions(reader, raw["python"], f"{key}.python", minors=True)
        if base and not (DEBOOTSTRAP_BASE.fullmatch(base) or IMAGE_REFERENCE.fullmatch(base)):
            reader.problem(
                f"{key}.base",
                f"'{base}' is neither debootstrap:<suite> (a Debian suite name like bookworm) nor an image "
                "reference like quay.io/pypa/manylinux_2_28_x86_64:latest; bases are names, never paths",
            )
        elif base:
            out.append(BuildImage(name, base, python))
    return tuple(out)
