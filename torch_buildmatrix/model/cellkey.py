"""What identifies a cell, and how it and its wheel are named: the cell key, its id, and the wheel's local label.

The one place the tool spells names: cell ids (`torch2.13-cpu-cp311-drv2`), the SDK's part of an id (from
`sdk.id`), and the plugin wheel's local label (from `plugin.label`, e.g. `torch.{torch_minor}.drv.{sdk_major}` or
PyG's `pt{torch_nodot}{variant}`). Records, the compat table, the wheel check and the label handed to the build all
come from here.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

from packaging.version import InvalidVersion, Version

from torch_buildmatrix.model.options import PLAIN_NAME, VARIANT_NAME
from torch_buildmatrix.model.pythons import Python


class Release(Protocol):
    """What naming reads of a torch release (model/matrix.TorchRelease, which imports this module)."""

    @property
    def version(self) -> Version: ...

    @property
    def variant(self) -> str: ...


class SdkAxisValue(Protocol):
    """What naming reads of an SDK version of the cells (model/matrix.SdkAxisValue)."""

    @property
    def version(self) -> Version: ...


# The fields a template may use, with an example value each (the reference page shows them).
TORCH_FIELDS = {
    "torch_minor": "2.13",
    "torch_major": "2",
    "torch_nodot": "213",
    "torch_version": "2.13.0",
    "variant": "cu121",
}
SDK_FIELDS = {"sdk_major": "2", "sdk_version": "2.2", "sdk_nodot": "22"}
LABEL_FIELDS = {**TORCH_FIELDS, **SDK_FIELDS}
LOCAL_LABEL = re.compile(r"[a-z0-9]+(?:\.[a-z0-9]+)*")  # a normalised PEP 440 local label
LABEL_TEXT = re.compile(r"[a-z0-9.]*")  # the literal text around a label's fields
DEFAULT_LABEL = "torch.{torch_minor}"
DEFAULT_SDK_ID = "{sdk_name}{sdk_version}"  # documented default of sdk.id; {sdk_name} is replaced at load


class TemplateError(ValueError):
    """A template that cannot be used; the message says what is allowed."""


@dataclass(frozen=True)
class Template:
    """A `{field}` template (str.format syntax, no format specs) over a declared set of fields."""

    text: str
    fields: tuple[str, ...]  # the fields it uses, in order

    @classmethod
    def parse(cls, text: str, allowed: Mapping[str, str], literal: re.Pattern[str] | None = None) -> Template:
        """Raises TemplateError for bad syntax, an unknown field, or literal text `literal` does not allow."""
        try:
            parts = list(string.Formatter().parse(text))
        except ValueError as exc:
            raise TemplateError(f"'{text}' is not a template ({exc}; fields are written {{name}})") from None
        fields = []
        for before, name, spec, conversion in parts:
            if literal is not None and not literal.fullmatch(before):
                raise TemplateError(
                    f"'{text}': the text '{before}' is not allowed (allowed around fields: {_describe(literal)})"
                )
            if name is None:
                continue
            if name not in allowed:
                close = _close(name, allowed)
                raise TemplateError(f"unknown field {{{name}}} in '{text}' (allowed: {', '.join(allowed)}){close}")
            if spec or conversion:
                raise TemplateError(f"'{text}': field {{{name}}} takes no format spec or conversion")
            fields.append(name)
        return cls(text, tuple(fields))

    def render(self, values: Mapping[str, str]) -> str:
        return self.text.format_map(values)


def _describe(pattern: re.Pattern[str]) -> str:
    return "lowercase letters, digits and dots" if pattern is LABEL_TEXT else pattern.pattern


def _close(name: str, allowed: Mapping[str, str]) -> str:
    import difflib

    hint = difflib.get_close_matches(name, list(allowed), n=1)
    return f"; did you mean {{{hint[0]}}}?" if hint else ""


def torch_fields(release: Release) -> dict[str, str]:
    version = release.version
    return {
        "torch_minor": f"{version.major}.{version.minor}",
        "torch_major": str(version.major),
        "torch_nodot": f"{version.major}{version.minor}",
        "torch_version": str(version),
        "variant": release.variant,
    }


def sdk_fields(version: Version) -> dict[str, str]:
    return {"sdk_major": str(version.major), "sdk_version": str(version), "sdk_nodot": str(version).replace(".", "")}


@dataclass(frozen=True)
class Naming:
    """The project's naming: the wheel's label template and, with an SDK, the template of the SDK's id part."""

    label: Template
    sdk_id: Template | None = None

    def sdk_tag(self, version: Version) -> str:
        """The SDK version's part of a cell id (`drv2`)."""
        assert self.sdk_id is not None
        return self.sdk_id.render(sdk_fields(version))

    def local_label(self, release: Release, sdk: Version | None) -> str:
        values = torch_fields(release) | (sdk_fields(sdk) if sdk is not None else {})
        return self.label.render(values)

    def key(self, release: Release, python: Python, sdk: SdkAxisValue | None, build: BuildKey | None = None) -> CellKey:
        """The cell's key; `build` is the build whose wheel it tests (model/builds.build_key), by default a build of
        its own (its release, its Python)."""
        version = sdk.version if sdk is not None else None
        if build is not None and build.sdk == version:  # its key named the SDK version already (builds.build_key)
            tag = build.sdk_tag
        else:
            tag = self.sdk_tag(version) if version is not None else ""
        label = build.label if build is not None else self.local_label(release, version)
        return CellKey(release.version, release.variant, python, version, tag, label, build)


def _strings(data: Mapping[str, Any], names: tuple[str, ...], what: str) -> dict[str, str]:
    if not isinstance(data, Mapping):
        raise ValueError(f"{what}: expected a mapping with {', '.join(names)}, got {data!r:.60}")
    fields: dict[str, str] = {}
    for name in (*names, *(("sdk",) if "sdk" in data else ())):
        value = data.get(name)
        if not isinstance(value, str):
            raise ValueError(f"{name}: expected a string, got {value!r:.60}")
        fields[name] = value
    if not VARIANT_NAME.fullmatch(fields["variant"]):
        raise ValueError(f"variant: {fields['variant']!r:.60} is not a variant name (e.g. cpu, cu121, rocm6.2)")
    if not LOCAL_LABEL.fullmatch(fields["label"]):
        raise ValueError(f"label: {fields['label']!r:.60} is not a PEP 440 local label (e.g. torch.2.13)")
    return fields


def _sdk_tag(full_id: str, base: str) -> str:
    """The SDK part of an id that starts with `base` (what the other fields make); raises ValueError otherwise."""
    tag = full_id.removeprefix(f"{base}-") if full_id.startswith(f"{base}-") else ""
    if not PLAIN_NAME.fullmatch(tag):
        raise ValueError(f"id: {full_id!r:.80} is not {base}-<sdk part>, the id its torch, variant and python make")
    return tag


@dataclass(frozen=True)
class BuildKey:
    """What makes a wheel's bytes (model/builds.py decides which cells share one): the torch release and variant it
    is built against, the interpreter's minor and ABI for a project whose wheel depends on the Python (None: one
    wheel for every Python), the SDK version, whether it is built against the LibTorch stable ABI (then it serves the
    later releases too), and the wheel's local label. Sources, patches and the plugin version are its inputs."""

    torch: Version
    variant: str
    python: Python | None
    sdk: Version | None
    sdk_tag: str
    label: str
    stable: bool = False

    @property
    def torch_minor(self) -> str:
        return f"{self.torch.major}.{self.torch.minor}"

    @cached_property  # asked for in every loop over builds and cells: computed once per key
    def id(self) -> str:
        """torch2.13-cpu-drv2 (one wheel for every Python), torch2.13-cpu-cp311-drv2 (per Python), torch2.10-cuda-stable
        (a stable-ABI build): names its log, record and CI job."""
        base = _build_base(self.torch, self.variant, self.stable, self.python)
        return f"{base}-{self.sdk_tag}" if self.sdk is not None else base

    def to_dict(self) -> dict[str, str]:
        """The record form (a build record's `build`, a cell record's `cell.build`); from_dict reads it back."""
        data = {"id": self.id, "torch": str(self.torch), "variant": self.variant}
        if self.python is not None:
            data["python"] = str(self.python)
        if self.sdk is not None:
            data["sdk"] = str(self.sdk)
        if self.stable:
            data["stable"] = "true"
        return {**data, "label": self.label}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BuildKey:
        """Parse the record form; raises ValueError starting with the bad field's name (KeyParser.build)."""
        return KeyParser().build(data)


@dataclass(frozen=True)
class CellKey:
    """What identifies a cell from the matrix through result records to the compat table.

    Equal keys mean the same cell testing the same build: the exact torch release and variant, the Python (minor,
    free-threaded or not), the SDK version (none without an SDK), and the build whose wheel it tests (its key holds
    the wheel's local label). A record made for an older matrix (another torch patch release, another SDK version,
    another label scheme or build layout) has a different key, so it never describes a current cell.
    """

    torch: Version
    variant: str
    python: Python  # the minor, with the GIL or free-threaded
    sdk: Version | None  # the SDK version; None: the project has no SDK
    sdk_tag: str  # the SDK's part of the id ("drv2"); "" without an SDK
    label: str  # the plugin wheel's PEP 440 local label: its build's
    # The build whose wheel it tests; given None, a build of its own (its release and Python: records of schema 2).
    built_by: BuildKey | None = None

    def __post_init__(self) -> None:
        if self.built_by is None:  # always set after construction, so equal cells compare equal
            object.__setattr__(self, "built_by", self.own_build)
        elif self.built_by.label != self.label:
            raise ValueError(f"label: {self.label!r} is not its build's label {self.built_by.label!r}")

    @property
    def build(self) -> BuildKey:
        assert self.built_by is not None  # set by __post_init__
        return self.built_by

    @property
    def own_build(self) -> BuildKey:
        """The build of this cell alone (its release and Python), as every cell had before builds were shared."""
        return BuildKey(self.torch, self.variant, self.python, self.sdk, self.sdk_tag, self.label)

    @cached_property  # asked for in every loop over cells: computed once per key
    def torch_minor(self) -> str:
        return f"{self.torch.major}.{self.torch.minor}"

    @cached_property
    def python_minor(self) -> str:
        """The Python as matrix.yaml and the tables write it: 3.11, 3.13t."""
        return str(self.python)

    @cached_property
    def python_tag(self) -> str:
        """Its interpreter's ABI tag: cp311, cp313t."""
        return self.python.tag

    @cached_property
    def id(self) -> str:
        """Stable, readable id used for folders, logs, results and CI job names."""
        base = _cell_base(self.torch, self.variant, self.python)
        return f"{base}-{self.sdk_tag}" if self.sdk is not None else base

    @property
    def local_version_label(self) -> str:
        """PEP 440 local label of the plugin wheel the cell tests (its build's)."""
        return self.label

    def to_dict(self, patches: tuple[str, ...] = ()) -> dict[str, Any]:
        """The record form (result records, `matrix --json`, the inputs hash); from_dict reads it back."""
        data: dict[str, Any] = {
            "id": self.id,
            "torch": str(self.torch),
            "torch_minor": self.torch_minor,
            "variant": self.variant,
            "python": self.python_minor,
        }
        if self.sdk is not None:
            data["sdk"] = str(self.sdk)
        return {**data, "label": self.label, "patches": ",".join(patches), "build": self.build.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CellKey:
        """Parse the record form (without `build`: a record of schema 2, whose cell built its own wheel); raises
        ValueError starting with the bad field's name ("sdk: ...", "build.id: ...") (KeyParser.cell)."""
        return KeyParser().cell(data)


def _build_base(torch: Version, variant: str, stable: bool, python: Python | None) -> str:
    """A build's id without its SDK part: torch2.13-cpu, torch2.10-cuda-stable-cp311."""
    parts = [f"torch{torch.major}.{torch.minor}", variant]
    parts += ["stable"] if stable else []
    parts += [python.tag] if python is not None else []
    return "-".join(parts)


def _cell_base(torch: Version, variant: str, python: Python) -> str:
    """A cell's id without its SDK part: torch2.13-cpu-cp311."""
    return f"torch{torch.major}.{torch.minor}-{variant}-{python.tag}"


class KeyParser:
    """Reads the record forms of build and cell keys, checking every field and that the id is the one the other
    fields make, with each version and Python text parsed once: the records and tables of 10 000 cells name a few
    dozen distinct ones, and packaging's Version costs about 10 us. Made for one batch of reads (a store's records,
    one table), never shared module-wide; what it hands out is immutable."""

    def __init__(self) -> None:
        self._versions: dict[str, Version] = {}
        self._pythons: dict[str, Python] = {}

    def version(self, fields: Mapping[str, str], name: str) -> Version | None:
        """The version in fields[name] (None when absent); raises ValueError naming the field."""
        if name not in fields:
            return None
        text = fields[name]
        version = self._versions.get(text)
        if version is None:
            try:
                version = Version(text)
            except InvalidVersion:
                raise ValueError(f"{name}: {text!r:.60} is not a version") from None
            self._versions[text] = version
        return version

    def python(self, text: str) -> Python:
        """The Python minor in `text`; raises ValueError starting with "python: "."""
        python = self._pythons.get(text)
        if python is None:
            try:
                python = Python.parse(text)
            except ValueError as exc:
                raise ValueError(f"python: {exc}") from None
            self._pythons[text] = python
        return python

    def build(self, data: Mapping[str, Any]) -> BuildKey:
        """A build key's record form; raises ValueError starting with the bad field's name."""
        fields = _strings(data, ("id", "torch", "variant", "label"), "build")
        unknown = sorted(set(data) - {"id", "torch", "variant", "label", "python", "sdk", "stable"})
        if unknown:
            raise ValueError(f"{unknown[0]}: not a field of a build")
        stable = data.get("stable", "false")
        if stable not in ("true", "false"):
            raise ValueError(f"stable: expected 'true' or 'false', got {stable!r:.20}")
        python = data.get("python")
        if python is not None and not isinstance(python, str):
            raise ValueError(f"python: expected a string, got {python!r:.60}")
        torch, sdk = self.version(fields, "torch"), self.version(fields, "sdk")
        assert torch is not None
        parsed = self.python(python) if python is not None else None
        base = _build_base(torch, fields["variant"], stable == "true", parsed)
        tag = _sdk_tag(fields["id"], base) if sdk is not None else ""
        key = BuildKey(torch, fields["variant"], parsed, sdk, tag, fields["label"], stable == "true")
        if fields["id"] != key.id:
            raise ValueError(f"id: {fields['id']!r:.80} is not {key.id!r}, the id its other fields make")
        return key

    def cell(self, data: Mapping[str, Any]) -> CellKey:
        """A cell key's record form (without `build`: a record of schema 2, whose cell built its own wheel); raises
        ValueError starting with the bad field's name ("sdk: ...", "build.id: ...")."""
        fields = _strings(data, ("id", "torch", "variant", "python", "label"), "cell")
        torch, sdk = self.version(fields, "torch"), self.version(fields, "sdk")
        assert torch is not None
        python = self.python(fields["python"])
        build = None
        if data.get("build") is not None:
            try:
                build = self.build(data["build"])
            except ValueError as exc:
                raise ValueError(f"build.{exc}") from None
            if build.sdk != sdk:
                raise ValueError(f"build.sdk: {build.sdk} is not the cell's SDK {sdk}")
        base = _cell_base(torch, fields["variant"], python)
        tag = _sdk_tag(fields["id"], base) if sdk is not None else ""
        key = CellKey(torch, fields["variant"], python, sdk, tag, fields["label"], build)
        if fields["id"] != key.id:
            raise ValueError(f"id: {fields['id']!r:.80} is not {key.id!r}, the id its torch, variant and python make")
        return key
