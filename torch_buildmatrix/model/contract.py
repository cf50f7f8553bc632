"""The plugin contract: what torch-buildmatrix asks of a project's build, wheel and tests, as declared in matrix.yaml.

Nothing here is a fact about any one project: each field comes from an option of the table (model/options.py,
CONTRACT_OPTIONS), with a neutral default, and a project states its own conventions in its matrix.yaml (this
repository's own plugin does in the repository's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from torch_buildmatrix.model.optreader import OptionReader
from torch_buildmatrix.model.optwalk import Node
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.util.features import FEATURE_KEY, KEY_RULE, is_feature_key, title_problem

FEATURES_PLACEHOLDER = "{features}"


class TorchPin(StrEnum):
    """How a wheel's Requires-Dist must name torch."""

    RELEASE_LINE = "release-line"  # torch==X.Y.* (a stable-ABI build: torch>=X.Y)
    NONE = "none"


@dataclass(frozen=True)
class BuildContract:
    """How the build learns its version and what its environment holds."""

    version_file: str | None = None  # written into the source copy
    version_env: str | None = None
    sdk_version_env: str | None = None
    relabel: bool = False  # the tool gives the built wheel the cell's version afterwards
    requires: tuple[str, ...] = ()
    project_requires: bool = True  # install the project's own [build-system].requires too
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    generated: frozenset[str] = frozenset()  # file names the build writes into its own tree
    # What the wheel's bytes depend on beyond the torch release and SDK version (model/builds.py).
    per_python: bool = True  # the interpreter's minor and ABI (a C extension using the CPython API)
    per_variant: bool = True  # the torch release's variant (cpu, cu121...), not only its version
    stable_abi: Version | None = None  # from this torch release on, one build against the oldest serves the later
    ninja: bool = True  # ninja goes into the build environment (torch's cpp_extension compiles in parallel with it)
    parallel_extensions: bool = False  # setuptools builds the extensions at the same time (a build without ninja)

    def environment(self, version: Version, sdk_version: str | None) -> dict[str, str]:
        """The variables a cell's build gets: the declared ones, its version and SDK version where asked for."""
        out = dict(self.env)
        if self.version_env:
            out[self.version_env] = str(version)
        if self.sdk_version_env and sdk_version is not None:
            out[self.sdk_version_env] = sdk_version
        return out


@dataclass(frozen=True)
class CheckContract:
    torch_pin: TorchPin = TorchPin.RELEASE_LINE
    build_info: str | None = None  # module path inside the wheel
    build_info_torch: str = "TORCH_VERSION"


@dataclass(frozen=True)
class SmokeRequirementsFor:
    """Smoke requirements for the torch releases a selector matches (smoke.requires-for[])."""

    torch: SpecifierSet
    requires: tuple[str, ...]
    free_threaded: bool | None = None  # None: every cell; False: Pythons with the GIL only; True: free-threaded only


class Tier(StrEnum):
    """A part of the smoke suite: the quick one runs on every cell, the deep one once per build (smoke.tiers)."""

    QUICK = "quick"
    DEEP = "deep"


@dataclass(frozen=True)
class SmokeTiers:
    """smoke.tiers: the pytest selections of the quick and deep suites, and the deep cell's preferred Pythons."""

    quick: tuple[str, ...]
    deep: tuple[str, ...]
    deep_python: tuple[Python, ...] = ()

    def selection(self, tier: Tier) -> tuple[str, ...]:
        return self.quick if tier == Tier.QUICK else self.deep

    def as_inputs(self, deep: bool) -> dict[str, object]:
        """What a cell's test depends on of the tiers: its quick selection, and the deep one on the deep cell."""
        return {"quick": list(self.quick), **({"deep": list(self.deep)} if deep else {})}


@dataclass(frozen=True)
class SmokeContract:
    requires: tuple[str, ...] = ("pytest",)
    args: tuple[str, ...] = ()
    requires_for: tuple[SmokeRequirementsFor, ...] = ()
    tiers: SmokeTiers | None = None  # None: the whole suite on every cell
    threads: int = 1  # OMP_NUM_THREADS of the smoke run: the cores a cell's test counts as
    # smoke.features: feature key -> the title the pages show
    feature_titles: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def reports_features(self) -> bool:
        return any(FEATURES_PLACEHOLDER in a for a in self.args)

    def pytest_args(self, features: str, tier: Tier | None = None) -> list[str]:
        """smoke.args, then the tier's selection (none without tiers, or for the whole suite)."""
        selection = self.tiers.selection(tier) if self.tiers is not None and tier is not None else ()
        return [a.replace(FEATURES_PLACEHOLDER, features) for a in (*self.args, *selection)]

    @property
    def requirements(self) -> tuple[str, ...]:
        """What the smoke environment installs: the declared requirements, pytest always (its report is read)."""
        names = {canonicalize_name(Requirement(r).name) for r in self.requires}
        return self.requires if "pytest" in names else ("pytest", *self.requires)

    def requirements_for(self, torch_version: Version, python: Python) -> tuple[str, ...]:
        """What a cell's smoke environment installs: `requirements`, then those of every rule its torch and Python
        match."""
        extra = [
            r
            for rule in self.requires_for
            if rule.torch.contains(torch_version, prereleases=True)
            and rule.free_threaded in (None, python.free_threaded)
            for r in rule.requires
        ]
        return (*self.requirements, *extra)


# The README block `compat-table` rewrites (publish.readme): the markers around it.
README_START = "<!-- compat-table:start -->"
README_END = "<!-- compat-table:end -->"


@dataclass(frozen=True)
class ReadmeBlock:
    """Where a README's compat-table block lies. bounds: from its first start marker to the end of its first end
    marker, when that follows it (None: no such pair); what a build's key leaves out of the README. problem: '' when
    those are the README's only markers, the one block publishing rewrites; else what is wrong."""

    bounds: tuple[int, int] | None
    problem: str


def readme_block(readme: str) -> ReadmeBlock:
    """The compat-table block of a README's text (the builder's key and the publisher's rewrite both find it here)."""
    start, end = readme.find(README_START), readme.find(README_END)
    bounds = (start, end + len(README_END)) if 0 <= start < end else None
    single = bounds is not None and readme.count(README_START) == 1 and readme.count(README_END) == 1
    return ReadmeBlock(bounds, "" if single else f"README needs exactly one {README_START} ... {README_END} pair")


@dataclass(frozen=True)
class Contract:
    build: BuildContract = field(default_factory=BuildContract)
    check: CheckContract = field(default_factory=CheckContract)
    smoke: SmokeContract = field(default_factory=SmokeContract)
    probe_interfaces: tuple[tuple[str, str], ...] = ()  # (source path prefix, torch interface)
    # Relative to the project root, holds the compat-table markers; None: `publish.readme: false`, no README block.
    publish_readme: Path | None = Path("README.md")
    publish_docs: Path = Path("docs")  # compatibility.md and .json, relative to the project root
    # Distribution names the project owns on the public index (no look-alike can take them); checked by the loader.
    publish_own_names: tuple[str, ...] = ()


def read_contract(reader: OptionReader, top: Node) -> Contract:
    """The build, check and smoke sections of matrix.yaml (problems go to the reader, reported with the others)."""
    return Contract(
        _build(reader, reader.child(top, "build")),
        _check(reader, reader.child(top, "check")),
        _smoke(reader, reader.child(top, "smoke")),
        _probe(reader, reader.child(top, "probe")),
        *_publish(reader, reader.child(top, "publish")),
    )


def _publish(reader: OptionReader, node: Node) -> tuple[Path | None, Path, tuple[str, ...]]:
    _section(reader, node)
    readme = reader.parse(reader.child(node, "readme"))
    docs = reader.parse(reader.child(node, "docs"))
    own = reader.parse(reader.child(node, "own-names"))
    return None if readme is False else Path(readme or "README.md"), Path(docs or "docs"), tuple(own or ())


def _probe(reader: OptionReader, node: Node) -> tuple[tuple[str, str], ...]:
    _section(reader, node)
    out = []
    for item in reader.items(reader.child(node, "interfaces")):
        prefix, interface = reader.child(item, "prefix"), reader.child(item, "interface")
        if not reader.mapping(item) or not (prefix.present and interface.present):
            continue
        values = reader.parse(prefix), reader.parse(interface)
        if values[0] and values[1]:
            out.append((values[0], values[1]))
    return tuple(out)


def _section(reader: OptionReader, node: Node) -> bool:
    return node.present and node.value is not None and reader.mapping(node)


def _build(reader: OptionReader, node: Node) -> BuildContract:
    _section(reader, node)
    names = (
        "version-file",
        "version-env",
        "sdk-version-env",
        "relabel",
        "requires",
        "project-requires",
        "generated",
        "per-python",
        "per-variant",
        "stable-abi",
        "ninja",
        "parallel-extensions",
    )
    values = {name: reader.parse(reader.child(node, name)) for name in names}
    env = {}
    for name, entry in reader.entries(reader.child(node, "env"), "variable name"):
        value = reader.parse(entry)
        if value is not None:
            env[name] = value
    requires = values["requires"] or ()
    for index, text in enumerate(requires):
        _requirement(reader, f"{node.key}.requires[{index}]", text)
    return BuildContract(
        version_file=values["version-file"],
        version_env=values["version-env"],
        sdk_version_env=values["sdk-version-env"],
        relabel=values["relabel"] is True,
        requires=tuple(requires),
        project_requires=values["project-requires"] is not False,
        env=MappingProxyType(env),
        generated=frozenset(values["generated"] or ()),
        per_python=values["per-python"] is not False,
        per_variant=values["per-variant"] is not False,
        stable_abi=values["stable-abi"],
        ninja=values["ninja"] is not False,
        parallel_extensions=values["parallel-extensions"] is True,
    )


def _requirement(reader: OptionReader, key: str, text: str) -> None:
    try:
        Requirement(text)
    except InvalidRequirement as exc:
        reader.problem(key, f"'{text}' is not a requirement (PEP 508, e.g. \"ninja>=1.11\"): {exc}")


def _check(reader: OptionReader, node: Node) -> CheckContract:
    _section(reader, node)
    pin = reader.parse(reader.child(node, "torch-pin"))
    return CheckContract(
        torch_pin=TorchPin(pin) if pin else TorchPin.RELEASE_LINE,
        build_info=reader.parse(reader.child(node, "build-info")),
        build_info_torch=reader.parse(reader.child(node, "build-info-torch")) or "TORCH_VERSION",
    )


def _smoke(reader: OptionReader, node: Node) -> SmokeContract:
    _section(reader, node)
    requires = reader.parse(reader.child(node, "requires"))
    for index, text in enumerate(requires or ()):
        _requirement(reader, f"{node.key}.requires[{index}]", text)
    args = reader.parse(reader.child(node, "args"))
    threads = reader.parse(reader.child(node, "threads"))
    return SmokeContract(
        tuple(requires) if requires is not None else ("pytest",),
        tuple(args or ()),
        _smoke_requires_for(reader, reader.child(node, "requires-for")),
        _smoke_tiers(reader, reader.child(node, "tiers")),
        threads=threads if threads is not None else 1,
        feature_titles=_feature_titles(reader, reader.child(node, "features")),
    )


def _feature_titles(reader: OptionReader, node: Node) -> Mapping[str, str]:
    titles = {}
    for key, entry in reader.entries(node, "feature key", FEATURE_KEY, f"{KEY_RULE} characters"):
        title = reader.parse(entry)
        if not is_feature_key(key):
            reader.problem(entry.key, f"{key!r} is not a feature key ({KEY_RULE} characters)")
        elif title is not None and (problem := title_problem(title)):
            reader.problem(entry.key, f"the title {title!r:.80} {problem}")
        elif title is not None:
            titles[key] = title
    return MappingProxyType(titles)


def _smoke_tiers(reader: OptionReader, node: Node) -> SmokeTiers | None:
    declared = _section(reader, node)
    quick = reader.parse(reader.child(node, "quick"))
    deep_node = reader.child(node, "deep")
    deep = reader.parse(deep_node)
    deep_python = reader.parse(reader.child(node, "deep-python"))
    if deep_node.present and deep == ():
        reader.problem(
            deep_node.key, 'needs a pytest selection (e.g. ["-m", "deep"]): an empty one runs the whole suite again'
        )
    if not declared or quick is None or deep is None:
        return None
    return SmokeTiers(tuple(quick), tuple(deep), tuple(deep_python or ()))


def _smoke_requires_for(reader: OptionReader, node: Node) -> tuple[SmokeRequirementsFor, ...]:
    out = []
    for entry in reader.items(node):
        if not reader.mapping(entry):
            continue
        torch = reader.parse(reader.child(entry, "torch"))
        requires = reader.parse(reader.child(entry, "requires"))
        for index, text in enumerate(requires or ()):
            _requirement(reader, f"{entry.key}.requires[{index}]", text)
        free_threaded = reader.parse(reader.child(entry, "free-threaded"))
        if torch is not None and requires is not None:
            out.append(SmokeRequirementsFor(torch, tuple(requires), free_threaded))
    return tuple(out)
