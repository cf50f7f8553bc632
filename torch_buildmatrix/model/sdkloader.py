"""Parse the SDK of matrix.yaml (`sdk:`, each version's id part and provider) and check the wheel's label template
against the fields the matrix has; part of the loader (model/loader.py)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from itertools import product

from torch_buildmatrix.model.cellkey import (
    LABEL_FIELDS,
    LABEL_TEXT,
    LOCAL_LABEL,
    SDK_FIELDS,
    TORCH_FIELDS,
    Naming,
    Template,
    TemplateError,
    sdk_fields,
    torch_fields,
)
from torch_buildmatrix.model.matrix import BuildImage, PluginSpec, Sdk, SdkVersion, TorchRelease
from torch_buildmatrix.model.options import HOST, PLAIN_NAME
from torch_buildmatrix.model.optreader import OptionReader
from torch_buildmatrix.model.optwalk import Node
from torch_buildmatrix.vocab import SdkKind

# ---- the SDK --------------------------------------------------------------------------------------------------------


def sdk_kind(reader: OptionReader, node: Node) -> SdkKind | None:
    if not node.present or not isinstance(node.value, dict):
        return None
    kind = reader.child(node, "kind")
    chosen = reader.choice(kind) if kind.present else None
    return SdkKind(chosen) if chosen is not None else None


def read_sdk(reader: OptionReader, node: Node, images: tuple[BuildImage, ...]) -> tuple[Sdk | None, Template | None]:
    """The SDK, and the template of its versions' part of a cell id."""
    keys = ("name", "title", "id", "distribution", "source", "version-env", "versions", "library-dirs", "libraries")
    nodes = {key: reader.child(node, key) for key in keys}
    if not node.present:
        return None, None
    if not reader.mapping(node) or reader.sdk_kind is None:
        return None, None
    kind = reader.sdk_kind
    if kind == SdkKind.WHEEL:
        for required in ("distribution", "source"):
            if not nodes[required].present:
                reader.problem(node.key, f"missing required key '{required}' (a wheel SDK is built from a source tree)")
    name = reader.parse(nodes["name"]) or "sdk"
    title = reader.text(nodes["title"]) if nodes["title"].present else name
    sdk_id = _sdk_id(reader, nodes["id"], f"{name}{{sdk_version}}")
    versions = _sdk_versions(reader, nodes["versions"], kind, sdk_id, images)
    distribution = reader.parse(nodes["distribution"]) if kind == SdkKind.WHEEL else None
    source = reader.parse(nodes["source"]) if kind == SdkKind.WHEEL else None
    if nodes["libraries"].present:
        libraries = reader.globs(nodes["libraries"])
    else:
        package = (distribution or "").replace("-", "_").replace(".", "_")
        libraries = (f"lib{package}*.so*",) if distribution else ()
    if kind == SdkKind.WHEEL and (distribution is None or source is None):
        return None, None
    if title is None or sdk_id is None:
        return None, None
    sdk = Sdk(
        kind,
        name,
        title,
        versions,
        libraries,
        distribution or "",
        source,
        reader.parse(nodes["version-env"]) or "",
        reader.absolute_paths(nodes["library-dirs"]) if kind == SdkKind.SYSTEM else (),
    )
    return sdk, sdk_id


def _sdk_versions(
    reader: OptionReader, node: Node, kind: SdkKind, sdk_id: Template | None, images: tuple[BuildImage, ...]
) -> tuple[SdkVersion, ...]:
    out: list[SdkVersion] = []
    first: dict[str, str] = {}  # id part -> key of the version that made it
    image_names = [image.name for image in images]
    entries = reader.items(node)
    if node.present and isinstance(node.value, list) and not node.value:
        reader.problem(node.key, 'needs at least one version, e.g. ["2.2"]')
    for entry in entries:
        version_node = reader.child(entry, "version")
        provider_node = reader.child(entry, "provided-by")
        if isinstance(entry.value, dict):
            if not reader.mapping(entry) or not version_node.present:
                continue
            where = version_node
        else:
            where = entry
        version = reader.version(where)
        provided_by = ""
        if kind == SdkKind.SYSTEM:
            provided_by = _provider(reader, entry, provider_node, image_names) or ""
        if version is None:
            continue
        if any(v.version == version for v in out):
            reader.problem(where.key, f"'{version}' is listed twice; list each SDK version once")
            continue
        tag = sdk_id.render(sdk_fields(version)) if sdk_id is not None else ""
        if sdk_id is not None and tag in first:
            reader.problem(
                where.key,
                f"'{version}' makes the cell id part '{tag}' that {first[tag]} makes too (sdk.id is "
                f"'{sdk_id.text}'); each version needs an id part of its own: two versions share an API major",
            )
            continue
        first[tag] = where.key
        out.append(SdkVersion(version, tag, provided_by))
    return tuple(out)


def _provider(reader: OptionReader, entry: Node, node: Node, image_names: list[str]) -> str | None:
    """What provides a system SDK's version: an image of images:, or the host; required."""
    if not node.present:
        reader.problem(
            entry.key,
            f"a system SDK's version names what provides it: {{version: ..., provided-by: <image> or {HOST}}} "
            f"(images: {', '.join(image_names) or 'none declared'})",
        )
        return None
    name = reader.name(node)
    if name is None or name == HOST or name in image_names:
        return name
    hint = difflib.get_close_matches(name, [*image_names, HOST], n=1)
    tip = f"; did you mean '{hint[0]}'?" if hint else ""
    reader.problem(
        node.key,
        f"no image '{name}' provides this SDK version (allowed: an image of images: "
        f"({', '.join(image_names) or 'none declared'}) or {HOST}){tip}",
    )
    return None


def _sdk_id(reader: OptionReader, node: Node, default: str) -> Template | None:
    """sdk.id: a template over the SDK fields that makes a plain name (it is part of cell ids and paths)."""
    text = reader.text(node) if node.present else default
    if text is None:
        return None
    try:
        template = Template.parse(text, SDK_FIELDS)
    except TemplateError as exc:
        reader.problem(node.key, str(exc))
        return None
    if not PLAIN_NAME.fullmatch(template.render(SDK_FIELDS)):
        reader.problem(node.key, f"'{text}' does not make a plain name (allowed: letters, digits, . _ -)")
        return None
    return template


# ---- naming ----------------------------------------------------------------------------------------------------


def read_naming(
    reader: OptionReader,
    plugin: PluginSpec | None,
    sdk: Sdk | None,
    sdk_id: Template | None,
    torch: tuple[TorchRelease, ...],
    *,
    declared_sdk: bool = False,
) -> Naming | None:
    """The label template checked: known fields only (SDK fields only with an SDK), and a valid local label for
    every release and SDK version of the matrix."""
    if plugin is None or (sdk is None and declared_sdk):
        return None  # no plugin, or an sdk: with problems of its own (reported): the label cannot be checked
    key = "plugin.label"
    allowed = LABEL_FIELDS if sdk is not None else TORCH_FIELDS
    try:
        label = Template.parse(plugin.label, allowed, LABEL_TEXT)
    except TemplateError as exc:
        message = str(exc)
        used = [name for name in SDK_FIELDS if f"{{{name}}}" in plugin.label]
        if sdk is None and used:
            message = (
                f"field {{{used[0]}}} in '{plugin.label}' needs an sdk:, and this matrix declares none (allowed: "
                f"{', '.join(TORCH_FIELDS)})"
            )
        reader.problem(key, message)
        return None
    versions: Iterable[SdkVersion | None] = sdk.versions if sdk is not None else (None,)
    for release, version in product(torch, versions):
        values = torch_fields(release) | (sdk_fields(version.version) if version is not None else {})
        rendered = label.render(values)
        if not LOCAL_LABEL.fullmatch(rendered):
            reader.problem(
                key,
                f"'{plugin.label}' gives '{rendered}' for torch {release.version} ({release.variant}), not a PEP 440 "
                "local label (allowed: lowercase letters and digits in dot-separated parts, e.g. torch.2.13)",
            )
            return None
    return Naming(label, sdk_id if sdk is not None else None)
