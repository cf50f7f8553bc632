"""The typed objects matrix.yaml is parsed into (model/loader.py parses it once); the rest of the code never sees raw
dicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from torch_buildmatrix.model.cellkey import Naming
from torch_buildmatrix.model.contract import Contract
from torch_buildmatrix.model.options import HOST, PIP_CONFIG, TIMEOUT_DEFAULTS
from torch_buildmatrix.model.optreader import torch_selector
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.model.yamlsource import LineMap
from torch_buildmatrix.vocab import CPU_VARIANT, RunnerName, SdkKind, WheelSourceKind

__all__ = ["HOST", "PIP_CONFIG", "Matrix", "torch_selector"]

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
    variant: str  # cpu, cuda, cu121, rocm6.2, xpu (matrix.yaml's names)
    wheels: WheelSource
    python: tuple[Python, ...] | None  # None: use the matrix-wide list
    patches: tuple[str, ...]
    line: int | None = None
    key: str = ""  # where matrix.yaml declares it ("torch[3]"), for located errors

    @property
    def minor(self) -> str:
        return f"{self.version.major}.{self.version.minor}"

    @property
    def requirement_version(self) -> str:
        """The exact version pip must install: outside the registry, PyTorch labels its builds with the variant
        (2.13.0+cpu, 2.4.1+cu121); the registry's wheels carry no label."""
        labelled = self.wheels.kind != WheelSourceKind.REGISTRY
        return f"{self.version}+{self.variant}" if labelled else str(self.version)

    @property
    def is_cpu(self) -> bool:
        return self.variant == CPU_VARIANT


@dataclass(frozen=True)
class SdkVersion:
    """One version of the project's SDK: an axis value of the cells."""

    version: Version
    tag: str  # its part of a cell id ("drv2"), from sdk.id
    provided_by: str = ""  # a system SDK: the image of images: that has it, or HOST; "" for a wheel SDK

    @property
    def major(self) -> int:
        return self.version.major

    def matches(self, prefix: Version) -> bool:
        """Whether a rule's `sdk: "2"` (every 2.x) or `sdk: "2.2"` selects this version."""
        return self.version.release[: len(prefix.release)] == prefix.release


def shortest_prefix(version: Version, versions: list[Version]) -> str:
    """The shortest prefix of `version` that no other of `versions` has: "2" for 2.2 among 1.4 and 2.2."""
    release = version.release
    for length in range(1, len(release) + 1):
        if not any(v != version and v.release[:length] == release[:length] for v in versions):
            return ".".join(map(str, release[:length]))
    return str(version)


@dataclass(frozen=True)
class Sdk:
    """The project's SDK (matrix.yaml `sdk:`); a project without one has Matrix.sdk None."""

    kind: SdkKind
    name: str  # tables, messages, and the directory of its wheels (wheels/<name>/)
    title: str  # what the install page calls it
    versions: tuple[SdkVersion, ...]
    libraries: tuple[str, ...]  # file name patterns of its shared libraries, never bundled into the plugin wheel
    distribution: str = ""  # wheel SDK: its distribution name
    source: Path | None = None  # wheel SDK: its source tree
    version_env: str = ""  # wheel SDK: the variable that tells its build the version to build ("": none)
    library_dirs: tuple[str, ...] = ()  # system SDK: where its shared libraries are (image or host)

    @property
    def builds_wheel(self) -> bool:
        return self.kind == SdkKind.WHEEL

    def short(self, sdk: SdkVersion) -> str:
        """The shortest version prefix that selects only this version ("2" when it is the only 2.x): what rules and
        messages write."""
        return shortest_prefix(sdk.version, [v.version for v in self.versions])

    def version(self, text: str) -> SdkVersion | None:
        """The declared version a command-line or rule value selects ("2" or "2.2"), the newest when several do."""
        try:
            prefix = Version(text)
        except ValueError:
            return None
        matching = [v for v in self.versions if v.matches(prefix)]
        return max(matching, key=lambda v: v.version) if matching else None


@dataclass(frozen=True)
class CellRule:
    """An include or exclude rule; unset fields match anything."""

    torch: SpecifierSet | None = None
    python: Python | None = None
    sdk: Version | None = None  # a version prefix: "2" matches every 2.x
    variant: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class BuildImage:
    name: str
    base: str  # "debootstrap:<suite>" (made locally, no registry) or a plain image reference
    python: tuple[Python, ...]
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
    label: str = "torch.{torch_minor}"  # plugin.label, checked (Matrix.naming renders it)


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
    sdk: Sdk | None  # None: no SDK, cells are torch x Python
    naming: Naming  # the wheel's label template and the SDK's id part
    python: tuple[Python, ...]
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

    @property
    def sdk_versions(self) -> tuple[SdkVersion | None, ...]:
        """The SDK axis of the cells: its versions, or one None for a project without an SDK."""
        return self.sdk.versions if self.sdk is not None else (None,)
