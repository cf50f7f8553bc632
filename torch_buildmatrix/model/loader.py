"""Parse matrix.yaml once into a Matrix, walking it by the declared options; every problem located, all at once."""

from __future__ import annotations

import difflib
from pathlib import Path

from packaging.utils import canonicalize_name

from torch_buildmatrix import schema1
from torch_buildmatrix.errors import MatrixError
from torch_buildmatrix.model.cellkey import (
    DEFAULT_LABEL,
    Naming,
)
from torch_buildmatrix.model.contract import read_contract
from torch_buildmatrix.model.matrix import BuildImage, CellRule, Matrix, PluginSpec, Timeouts, TorchRelease, WheelSource
from torch_buildmatrix.model.options import HOST, OPTIONS, PIP_CONFIG, TIMEOUT_DEFAULTS
from torch_buildmatrix.model.optreader import OptionReader
from torch_buildmatrix.model.optwalk import Node, describe
from torch_buildmatrix.model.sdkloader import read_naming, read_sdk, sdk_kind
from torch_buildmatrix.model.yamlsource import load_yaml_with_lines
from torch_buildmatrix.vocab import REGISTRY_VARIANT, RunnerName, WheelSourceKind

SCHEMA_VERSION = int(OPTIONS["schema-version"].allowed[0])


def read_matrix(path: Path, patches_dir: Path | None = None) -> Matrix:
    """Read and validate matrix.yaml through the declared options; raises MatrixError listing every problem."""
    data, lines = load_yaml_with_lines(path)
    reader = OptionReader(path, lines)
    top = reader.top(data)
    sdk_node = reader.child(top, "sdk")
    reader.sdk_kind = sdk_kind(reader, sdk_node)  # before any mapping is checked: some keys are per SDK kind
    reader.mapping(top)
    _schema_version(reader, reader.child(top, "schema-version"))

    plugin_node = reader.child(top, "plugin")
    plugin = _plugin(reader, plugin_node)
    images = _images(reader, reader.child(top, "images"))
    sdk, sdk_id = read_sdk(reader, sdk_node, images)
    python = reader.parse(reader.child(top, "python"))
    variants = _variants(reader, reader.child(top, "variants"))
    declared_patches = reader.parse(reader.child(top, "patches"))
    patches_root = patches_dir or declared_patches or path.parent / "patches"
    torch = _torch(reader, reader.child(top, "torch"), patches_root, variants)
    # An sdk: with problems of its own (or schema 1's driver:): the label's SDK fields cannot be checked.
    declared_sdk = sdk_node.present or (isinstance(data, dict) and schema1.SDK_KEY in data)
    naming = read_naming(reader, plugin, sdk, sdk_id, torch, declared_sdk=declared_sdk)
    if plugin is not None and naming is not None:
        _same_minor_twice(reader, torch, naming)
    exclude = _rules(reader, reader.child(top, "exclude"), torch)
    include = _rules(reader, reader.child(top, "include"), torch)
    for index, rule in enumerate(include):
        if rule.torch is None or rule.python is None or (sdk is not None and rule.sdk is None):
            names = "torch, python and sdk" if sdk is not None else "torch and python"
            reader.problem(f"include[{index}]", f"an include rule names {names}")
    runner = RunnerName(reader.parse(reader.child(top, "runner")) or RunnerName.AUTO)
    timeouts = _timeouts(reader, reader.child(top, "timeouts"))
    contract = read_contract(reader, top)
    if plugin is not None:
        _own_names(reader, contract.publish_own_names, [plugin.distribution, *([sdk.distribution] if sdk else [])])

    if reader.problems:
        raise MatrixError(reader.problems)
    assert plugin is not None and naming is not None
    return Matrix(
        path=path,
        plugin=plugin,
        sdk=sdk,
        naming=naming,
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


def _own_names(reader: OptionReader, own: tuple[str, ...], names: list[str]) -> None:
    """publish.own-names holds only the project's own distribution names: another would silence no note."""
    ours = {canonicalize_name(n) for n in names if n}
    for index, name in enumerate(own):
        if canonicalize_name(name) not in ours:
            allowed = ", ".join(n for n in names if n)
            reader.problem(
                f"publish.own-names[{index}]",
                f"'{name:.80}' is not a distribution of this project (allowed: {allowed})",
            )


def _schema_version(reader: OptionReader, node: Node) -> None:
    if not node.present or node.value == SCHEMA_VERSION:
        return
    if node.value == 1:
        reader.problem(node.key, schema1.MATRIX_HINT)
        return
    reader.problem(node.key, f"unsupported schema version {node.value!r:.40} (allowed: {SCHEMA_VERSION})")


def _timeouts(reader: OptionReader, node: Node) -> Timeouts:
    seconds = {k: float(v) for k, v in TIMEOUT_DEFAULTS.items()}
    steps = [reader.child(node, step) for step in TIMEOUT_DEFAULTS]
    if node.present and node.value is not None and reader.mapping(node):
        for given in steps:
            if given.present and (value := reader.seconds(given)) is not None:
                seconds[given.option.key] = value
    return Timeouts(seconds)


def _plugin(reader: OptionReader, node: Node) -> PluginSpec | None:
    keys = ("distribution", "version", "source", "smoke-tests")
    distribution_node, version_node, source_node, tests_node = (reader.child(node, key) for key in keys)
    label_node = reader.child(node, "label")
    if not reader.mapping(node) or not all(
        n.present for n in (distribution_node, version_node, source_node, tests_node)
    ):
        return None
    version = reader.version(version_node)
    distribution = reader.distribution(distribution_node)
    source = reader.directory(source_node)
    tests = reader.directory(tests_node)
    label = reader.text(label_node) if label_node.present else DEFAULT_LABEL
    if source and tests and not tests.resolve().is_relative_to(source.resolve()):
        reader.problem(
            tests_node.key,
            f"'{tests_node.value}' is outside plugin.source '{source_node.value}' (allowed: a directory inside it)",
        )
        return None
    if tests is not None and not _has_tests(tests):
        reader.problem(
            tests_node.key,
            f"'{tests_node.value}' holds no test file (allowed: a directory with pytest's test_*.py or *_test.py); a "
            "cell whose smoke run tests nothing would pass and publish an untested wheel",
        )
        return None
    if version is None or distribution is None or source is None or tests is None or label is None:
        return None
    return PluginSpec(distribution, version, source, tests, label)


def _has_tests(directory: Path) -> bool:
    """Whether pytest's default collection finds a test module there (test_*.py or *_test.py, at any depth)."""
    return any(directory.rglob("test_*.py")) or any(directory.rglob("*_test.py"))


# ---- torch releases and variants ------------------------------------------------------------------------------------


def _variants(reader: OptionReader, node: Node) -> dict[str, WheelSource]:
    out = {}
    for name, entry in reader.entries(node, "variant name"):
        wheels = reader.child(entry, "wheels")
        if reader.variant(Node(entry.option, entry.key, name)) is None:
            continue
        if reader.mapping(entry) and wheels.present:
            out[name] = _wheel_source(reader, wheels)
    return out


def _wheel_source(reader: OptionReader, node: Node) -> WheelSource:
    value = node.value
    find_links, index = reader.child(node, "find-links"), reader.child(node, "index")
    local = reader.child(node, "local-find-links")
    if not node.present or value is None or value == WheelSourceKind.REGISTRY:
        return WheelSource(WheelSourceKind.REGISTRY)
    if value == "pip-find-links":
        return WheelSource(WheelSourceKind.FIND_LINKS, PIP_CONFIG)
    if isinstance(value, dict) and set(value) == {"find-links"} and isinstance(value["find-links"], str):
        directory = reader.absolute_directory(find_links)
        return WheelSource(WheelSourceKind.FIND_LINKS, directory or value["find-links"].removeprefix("file://"))
    if isinstance(value, dict) and "index" in value:
        # {index: URL, local-find-links: DIR | pip-config}: an index any machine reaches, and an optional local mirror.
        reader.mapping(node)
        if "find-links" in value:
            return WheelSource(WheelSourceKind.REGISTRY)  # reported by mapping() as an unknown key
        url = reader.url(index) or ""
        mirror = reader.local_find_links(local) if local.present else ""
        return WheelSource(WheelSourceKind.INDEX, url, mirror or "")
    reader.problem(
        node.key,
        f"{describe(value)} is not allowed (allowed: registry, pip-find-links, {{find-links: <path or URL>}}, "
        f"{{index: <URL>, local-find-links: <absolute directory or {PIP_CONFIG}>}})",
    )
    return WheelSource(WheelSourceKind.REGISTRY)


def _torch(
    reader: OptionReader, node: Node, patches_root: Path, variants: dict[str, WheelSource]
) -> tuple[TorchRelease, ...]:
    out: list[TorchRelease] = []
    for entry in reader.items(node):
        key = entry.key
        reader.mapping(entry)
        version_node = reader.child(entry, "version")
        wheels_node, variant_node = reader.child(entry, "wheels"), reader.child(entry, "variant")
        python_node, patches_node = reader.child(entry, "python"), reader.child(entry, "patches")
        if not version_node.present:
            continue
        version = reader.version(version_node)
        variant = reader.variant(variant_node) if variant_node.present else None
        if wheels_node.present:
            wheels = _wheel_source(reader, wheels_node)
        else:
            wheels = variants.get(variant or "", WheelSource(WheelSourceKind.REGISTRY))
        if not variant_node.present:
            if wheels.kind != WheelSourceKind.REGISTRY:
                reader.problem(
                    variant_node.key,
                    "a torch release from find-links or an index must name its variant (e.g. cpu, cu121)",
                )
                continue
            variant = REGISTRY_VARIANT
        python = reader.python_minors(python_node) if python_node.present else None
        patches = _patches(reader, patches_node, patches_root)
        if version is None or variant is None:
            continue
        if version.is_prerelease or version.local:
            reader.problem(
                version_node.key, f"'{version}': give the public release version; the variant says which build"
            )
        out.append(TorchRelease(version, variant, wheels, python, patches, reader.line(key), key))
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


def _same_minor_twice(reader: OptionReader, torch: tuple[TorchRelease, ...], naming: Naming) -> None:
    """A torch minor declared twice: once per variant, and each variant's wheels must have names of their own.

    The wheel's name carries the label and the Python tag: where the label has no {variant}, a cpu and a cuda build
    of one minor for one Python would publish the same file (torch 2.13 in our matrix: the CPU build on cp311,
    the registry's CUDA build on cp314, each entry on Pythons of its own)."""
    seen: dict[str, list[TorchRelease]] = {}
    carries_variant = "variant" in naming.label.fields
    for release in torch:
        for other in seen.get(release.minor, []):
            _second_entry(reader, release, other, carries_variant)
        seen.setdefault(release.minor, []).append(release)


def _second_entry(reader: OptionReader, release: TorchRelease, other: TorchRelease, carries_variant: bool) -> None:
    minor, key, other_key = release.minor, release.key, other.key
    why = (
        f"the plugin wheel's name carries the label and the Python, and plugin.label has no {{variant}}: a "
        f"{other.variant} and a {release.variant} build of {minor} for one Python would publish the same file and "
        "overwrite each other"
    )
    if other.variant == release.variant:
        reader.problem(
            f"{key}.version",
            f"torch {minor} ({release.variant}) is already declared at {other_key}; one entry per torch minor and "
            "variant",
        )
    elif carries_variant:
        return
    elif other.python is None or release.python is None:
        reader.problem(
            f"{key}.version",
            f"torch {minor} is already declared at {other_key}; one entry per torch minor, or one per variant (that "
            f"one is {other.variant}) when both list their own Pythons and share none, or a label with {{variant}} "
            f"({why})",
        )
    else:
        for p_index, python in enumerate(release.python):
            if python in other.python:
                reader.problem(
                    f"{key}.python[{p_index}]",
                    f"Python {python} is already built from torch {minor} at {other_key} ({other.variant}); each "
                    f"variant of one torch minor needs Pythons of its own, or a label with {{variant}} ({why})",
                )


# ---- rules and images ---------------------------------------------------------------------------------------------


def _rules(reader: OptionReader, node: Node, torch: tuple[TorchRelease, ...]) -> tuple[CellRule, ...]:
    variants = tuple(dict.fromkeys(r.variant for r in torch))
    out = []
    for entry in reader.items(node):
        reader.mapping(entry)
        torch_node, python, sdk, variant = (reader.child(entry, k) for k in ("torch", "python", "sdk", "variant"))
        if isinstance(entry.value, dict) and not entry.value:
            reader.problem(entry.key, "a rule needs at least one of torch, python, sdk, variant")
            continue
        if not isinstance(entry.value, dict):
            continue
        chosen = reader.variant(variant) if variant.present else None
        if chosen is not None and chosen not in variants:
            reader.choice(variant, variants)  # names the variants the matrix has, with a hint
            chosen = None
        out.append(
            CellRule(
                reader.torch_selector(torch_node) if torch_node.present else None,
                reader.python(python) if python.present else None,
                reader.version(sdk) if sdk.present and reader.sdk_kind is not None else None,
                chosen,
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
        if name == HOST:
            reader.problem(
                entry.key, f"'{HOST}' is reserved (sdk.versions[].provided-by: {HOST} means the build machine)"
            )
            continue
        base = reader.image_base(base_node)
        python = reader.python_minors(python_node)
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
            out.append(BuildImage(name, base, python, layer, dockerfile, context, tuple(args)))
    return tuple(out)


def load_matrix(path: Path, patches_dir: Path | None = None) -> Matrix:
    """Read and validate matrix.yaml; raises MatrixError listing every problem."""
    return read_matrix(path, patches_dir)
