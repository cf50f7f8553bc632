"""The declared options of matrix.yaml: each one once, with its path, type, default, allowed values and doc.

Like cibuildwheel's options table, this is the one place an option is described. From it come:
- the loader's checks (`model/optreader.py`: unknown keys with "did you mean", required keys, defaults, the types
  of values, and settings that only apply to one kind of SDK), used by `model/matrix.py`;
- matrix.schema.json (`model/schema.py`, written by `torch-buildmatrix schema`);
- the reference page docs/reference/matrix-options.md (`model/reference.py`).
Tests fail when the committed schema or page drift from the table, and when the loader reads an option the table
does not declare or leaves a declared one unread.

Paths: `plugin.version` is a key of a mapping; `torch[]` is the item of a list (`torch[].version` a key of each
item); `images.<name>` is each entry of a mapping of named entries. A shape (`rule`, `wheel-source`) is a group of
keys used at several places; it is declared once in SHAPES and its keys appear under each place that uses it.

Adding an option: one `Option(...)` below (or in a shape), then read it in the loader with `reader.child(node, key)`
and `reader.parse(...)`; `torch-buildmatrix schema` regenerates the schema and the page.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from torch_buildmatrix.util.features import FEATURE_KEY, MAX_KEY
from torch_buildmatrix.vocab import RunnerName, SdkKind


class Kind(StrEnum):
    """What a value is written as; each has one parser in the reader and one JSON Schema fragment."""

    MAPPING = "mapping"  # fixed keys: its children in the table
    LIST = "list"  # a list of items, the child `<path>[]`
    NAMED = "named mappings"  # a mapping of names to items, the child `<path>.<name>`
    TEXT = "text"
    INTEGER = "integer"
    COUNT = "count"  # a whole number, 1 or more
    CHOICE = "choice"  # one of Option.allowed
    VERSION = "version"  # a quoted PEP 440 version
    VERSIONS = "versions"  # a list of quoted versions, each once
    PYTHON = "Python minor"  # a quoted "3.11", or "3.13t" for the free-threaded build
    PYTHON_MINORS = "Python minors"  # a list of quoted "3.11"-style minors ("3.13t": free-threaded), each once
    DISTRIBUTION = "distribution name"
    DIRECTORY = "directory"  # relative to matrix.yaml, inside the project
    NAMES = "names"  # a list of plain names (each a path component somewhere)
    TORCH_SELECTOR = "torch selector"  # "2.4" (the series) or a PEP 440 specifier
    IMAGE_BASE = "image base"
    SECONDS = "seconds"
    ABSOLUTE_DIRECTORY = "absolute directory"  # a path or file:// URL on the building machine
    URL = "URL"
    LOCAL_FIND_LINKS = "local find-links"
    BOOLEAN = "boolean"  # true or false
    TEXTS = "texts"  # a list of non-empty strings
    RELATIVE_PATH = "relative path"  # a path inside a tree (the source copy, a wheel): relative, never through ..
    PATH_OR_OFF = "relative path or false"  # a relative path as above, or `false`: switched off
    PROJECT_FILE = "project file"  # a file relative to matrix.yaml, inside the project
    ENV_NAME = "variable name"  # an environment variable's name
    NAME = "name"  # a plain name: letters, digits, . _ - (it becomes a path component somewhere)
    VARIANT = "variant name"  # cpu, cuda, cu121, rocm6.2, xpu: also a PEP 440 local label segment
    TEMPLATE = "template"  # text with {field}s, checked by the loader against the fields allowed there
    ABSOLUTE_PATHS = "absolute paths"  # a list of absolute directories on the building machine (or in its image)
    GLOBS = "file name patterns"  # a list of shell patterns of file names, e.g. libfoo*.so*


# Names that become path components (patch series, images): never a path, never hidden.
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
DISTRIBUTION_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
DEBOOTSTRAP_BASE = re.compile(r"debootstrap:[a-z][a-z0-9-]*")
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_REFERENCE = re.compile(
    rf"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
)
VARIANT_NAME = re.compile(r"[a-z][a-z0-9]*(?:\.[a-z0-9]+)*")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
FILE_GLOB = re.compile(r"[A-Za-z0-9_.*?+\[\]-]+")
HOST = "host"  # sdk.versions[].provided-by: the machine that runs the build provides the SDK
PIP_CONFIG = "pip-config"  # a find-links location meaning pip's configured find-links (PIP_FIND_LINKS, pip.conf)
MAX_SECONDS = 7 * 24 * 3600

NO_DEFAULT: Any = object()


@dataclass(frozen=True)
class Option:
    """One key of matrix.yaml."""

    path: str
    kind: Kind
    doc: str
    default: Any = NO_DEFAULT  # what an absent key means (NO_DEFAULT: nothing, or computed; `default_doc` says)
    required: bool = False
    allowed: tuple[str, ...] = ()  # Kind.CHOICE: the values allowed
    root_allowed: bool = False  # Kind.DIRECTORY: "." (the project itself) is allowed too
    default_doc: str = ""  # the default in words, where it is not a plain value
    shape: str = ""  # a mapping whose keys are SHAPES[shape]
    # A mapping that may also be written as one scalar (a choice or a version): its kind, allowed values and meaning.
    shorthand: Kind | None = None
    shorthand_allowed: tuple[str, ...] = ()
    example: str = ""  # YAML, shown on the reference page
    # The SDK kinds the key applies to (() : always). Written for another kind, or with no SDK, it is an error.
    sdk_kinds: tuple[SdkKind, ...] = ()
    schema_extra: Mapping[str, Any] = field(default_factory=dict)  # constraints the kinds do not say (oneOf...)

    @property
    def key(self) -> str:
        """The last component: `version` of `torch[].version`, `[]` of `torch[]`, `<name>` of `images.<name>`."""
        return split_path(self.path)[1]

    @property
    def parent(self) -> str:
        return split_path(self.path)[0]

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT


def split_path(path: str) -> tuple[str, str]:
    """("torch[]", "version") for torch[].version, ("torch", "[]") for torch[], ("", "plugin") for plugin."""
    if path.endswith("[]"):
        return path[:-2], "[]"
    parent, _, key = path.rpartition(".")
    return parent, key


ANY_SDK = (SdkKind.WHEEL, SdkKind.SYSTEM)
WHEEL_SDK = (SdkKind.WHEEL,)
SYSTEM_SDK = (SdkKind.SYSTEM,)

SHAPES: dict[str, tuple[Option, ...]] = {
    "rule": (
        Option(
            "torch",
            Kind.TORCH_SELECTOR,
            'Torch releases the rule matches: a minor like "2.4" (the whole series), a version, or a specifier like '
            '">=2.4,<2.6".',
        ),
        Option("python", Kind.PYTHON, 'The Python the rule matches, e.g. "3.11" ("3.13t": the free-threaded build).'),
        Option(
            "sdk",
            Kind.VERSION,
            'The SDK versions the rule matches: "2" matches every 2.x, "2.2" matches 2.2 (and 2.2.x).',
            sdk_kinds=ANY_SDK,
        ),
        Option("variant", Kind.VARIANT, "The torch variant the rule matches (cpu, cuda, cu121, ...)."),
    ),
    "wheel-source": (
        Option(
            "find-links",
            Kind.ABSOLUTE_DIRECTORY,
            "A directory of torch wheels (an absolute path or file:// URL), given to the installers as --find-links.",
        ),
        Option(
            "index",
            Kind.URL,
            "A PEP 503 index of the release's own (PyTorch's per-variant indexes, e.g. "
            "https://download.pytorch.org/whl/cpu), reachable from any machine.",
        ),
        Option(
            "local-find-links",
            Kind.LOCAL_FIND_LINKS,
            f"With `index`: find-links that replace the index on a machine where they hold the release's wheels "
            f"(offline machines): an absolute directory, or `{PIP_CONFIG}` for pip's configured find-links.",
        ),
    ),
}

# What a shape's keys allow together, beyond each key (the loader checks the same).
SHAPE_SCHEMA: dict[str, dict[str, Any]] = {
    "rule": {"minProperties": 1},
    "wheel-source": {
        "oneOf": [
            {
                "required": ["find-links"],
                "not": {"anyOf": [{"required": ["index"]}, {"required": ["local-find-links"]}]},
            },
            {"required": ["index"], "not": {"required": ["find-links"]}},
        ]
    },
}

TIMEOUT_DEFAULTS = {
    "sdk": 1800,
    "build-env": 3600,
    "build": 3600,
    "check": 600,
    "smoke-env": 3600,
    "smoke": 1800,
    "image": 3600,
}
TIMEOUT_DOCS = {
    "sdk": "Building the SDK's wheel (a wheel SDK).",
    "build-env": "Making the build environment (installing torch and the build tools).",
    "build": "Building the plugin wheel.",
    "check": "Checking the built wheel.",
    "smoke-env": "Making the clean smoke-test environment.",
    "smoke": "Running the smoke tests.",
    "image": "Making a builder image (Docker runner).",
}

_OPTIONS: tuple[Option, ...] = (
    Option(
        "schema-version",
        Kind.INTEGER,
        "The version of this file's format (2: the SDK axis is general, `sdk:` replaces `driver:`).",
        default=2,
        allowed=("2",),
    ),
    # ---- the plugin --------------------------------------------------------------------------------------------
    Option(
        "plugin",
        Kind.MAPPING,
        "The project whose wheels are built: its name, version, sources and tests.",
        required=True,
    ),
    Option(
        "plugin.distribution",
        Kind.DISTRIBUTION,
        "The distribution name of the wheels (PEP 508), e.g. `my-backend`.",
        required=True,
    ),
    Option(
        "plugin.version",
        Kind.VERSION,
        "The version of the wheels, before the local label that names each cell's build.",
        required=True,
    ),
    Option(
        "plugin.source",
        Kind.DIRECTORY,
        "The pristine source tree; each cell copies it and applies its release's patch series to the copy. `.` is "
        "the project itself (a setup.py beside matrix.yaml): the copy leaves out the workspace (build/, wheels/).",
        required=True,
        root_allowed=True,
    ),
    Option(
        "plugin.smoke-tests",
        Kind.DIRECTORY,
        "The pytest suite run against each installed wheel; a directory inside `plugin.source`.",
        required=True,
    ),
    Option(
        "plugin.label",
        Kind.TEMPLATE,
        "The PEP 440 local label of each cell's wheel (its version is `plugin.version+label`), a template over the "
        "cell's fields: {torch_minor} (2.13), {torch_major} (2), {torch_nodot} (213), {torch_version} (2.13.0), "
        "{variant} (cu121) and, with an SDK, {sdk_major} (2), {sdk_version} (2.2), {sdk_nodot} (22); the text around "
        "them is lowercase letters, digits and dots. Cells that would publish one file name are an error: where two "
        "variants of a torch minor share a Python, the label carries {variant} (PyG's `pt{torch_nodot}{variant}`).",
        default="torch.{torch_minor}",
        example='label: "torch.{torch_minor}.drv.{sdk_major}"',
    ),
    # ---- the SDK ------------------------------------------------------------------------------------------------
    Option(
        "sdk",
        Kind.MAPPING,
        "The SDK the plugin is built against (a vendor's toolkit or driver), one cell per version. Leave it out for "
        "a plain extension: cells are then torch x Python, and ids, labels, tables and pages carry no SDK part.",
        default_doc="no SDK",
        example="sdk:\n  kind: wheel\n  name: driver\n  distribution: my-driver\n  source: driver\n"
        '  versions: ["1.4", "2.2"]',
    ),
    Option(
        "sdk.kind",
        Kind.CHOICE,
        "`wheel`: a wheel built from a source tree of the project, installed with the plugin and published beside "
        "it. `system`: a toolkit that a builder image or the building machine provides; nothing is built or "
        "published for it.",
        required=True,
        allowed=tuple(SdkKind),
    ),
    Option(
        "sdk.name",
        Kind.NAME,
        "What the SDK is called in tables and messages, and the directory of its wheels (`wheels/<name>/`, the same "
        "path on the site).",
        default="sdk",
    ),
    Option("sdk.title", Kind.TEXT, "What the install page calls it (e.g. `driver API`).", default_doc="`name`"),
    Option(
        "sdk.id",
        Kind.TEMPLATE,
        "The SDK version's part of a cell id (`torch2.13-cpu-cp311-<id>`), a template over {sdk_major}, "
        "{sdk_version} and {sdk_nodot}; each version must give its own.",
        default_doc="`<name>{sdk_version}`",
        example='id: "drv{sdk_major}"',
    ),
    Option(
        "sdk.distribution",
        Kind.DISTRIBUTION,
        "The SDK wheel's distribution name; the plugin wheel must pin it to the cell's SDK major.",
        sdk_kinds=WHEEL_SDK,
        default_doc="required for a wheel SDK",
    ),
    Option(
        "sdk.source",
        Kind.DIRECTORY,
        "The SDK's source tree, built into a wheel once per version (and builder image).",
        sdk_kinds=WHEEL_SDK,
        default_doc="required for a wheel SDK",
    ),
    Option(
        "sdk.version-env",
        Kind.ENV_NAME,
        "The environment variable that tells the SDK's build which version to build; its wheel's version must "
        "start with that version.",
        sdk_kinds=WHEEL_SDK,
        default_doc="none: the source fixes its own version",
    ),
    Option(
        "sdk.versions",
        Kind.LIST,
        "The SDK versions built against, each a cell axis value: a quoted version, or a mapping that also says what "
        "provides it (a system SDK).",
        required=True,
        example='versions:\n  - {version: "3.1", provided-by: toolkit3}   # an image of images:\n'
        '  - {version: "3.0", provided-by: host}',
    ),
    Option(
        "sdk.versions[]",
        Kind.MAPPING,
        "An SDK version.",
        shorthand=Kind.VERSION,
    ),
    Option("sdk.versions[].version", Kind.VERSION, 'The version, e.g. "2.2".', required=True),
    Option(
        "sdk.versions[].provided-by",
        Kind.NAME,
        f"What provides this version of a system SDK: the name of an image of `images:` (the Docker runner builds its "
        f"cells there), or `{HOST}` (the machine that runs the build has it installed).",
        sdk_kinds=SYSTEM_SDK,
        default_doc="required for a system SDK",
    ),
    Option(
        "sdk.library-dirs",
        Kind.ABSOLUTE_PATHS,
        "Where a system SDK's shared libraries are (in its image, or on the host): the wheel check takes the "
        "symbols they define as provided.",
        sdk_kinds=SYSTEM_SDK,
        default=(),
    ),
    Option(
        "sdk.libraries",
        Kind.GLOBS,
        "File name patterns of the SDK's shared libraries: never bundled into the plugin wheel when it is repaired.",
        sdk_kinds=ANY_SDK,
        default_doc="`lib<package>*.so*` of a wheel SDK's distribution; none for a system SDK",
    ),
    # ---- Pythons and torch releases ----------------------------------------------------------------------------
    Option(
        "python",
        Kind.PYTHON_MINORS,
        "The Pythons built for. Each torch release is intersected with the Pythons its published wheels support "
        "(read from its wheel source, never guessed); this list only bounds them. `3.13t` is the free-threaded build "
        "of 3.13, a Python of its own (torch publishes cp313t wheels apart from cp313 ones).",
        required=True,
        example='python: ["3.10", "3.11", "3.12"]',
    ),
    Option("torch", Kind.LIST, "The torch releases built against, one entry per release and variant.", required=True),
    Option("torch[]", Kind.MAPPING, "A torch release."),
    Option("torch[].version", Kind.VERSION, 'The release, e.g. "2.4.1" (the public version).', required=True),
    Option(
        "torch[].variant",
        Kind.VARIANT,
        "Which build of the release: `cpu`, `cuda`, `cu121`, `rocm6.2`, `xpu`... Outside the registry it is also the "
        "local label of the torch wheels (PyTorch's indexes label them `2.4.1+cu121`).",
        default_doc="`cuda` for the registry (its Linux wheels are CUDA builds); required for other wheel sources",
    ),
    Option(
        "torch[].wheels",
        Kind.MAPPING,
        "Where the release's wheels come from: `registry` (the index pip is configured with), `pip-find-links` "
        "(pip's configured find-links), `{find-links: DIR}` or `{index: URL, local-find-links: DIR}`.",
        default="registry",
        default_doc="its variant's `wheels` (variants:), else `registry`",
        shape="wheel-source",
        shorthand=Kind.CHOICE,
        shorthand_allowed=("registry", "pip-find-links"),
        example="wheels:\n  index: https://download.pytorch.org/whl/cpu\n  local-find-links: pip-config",
    ),
    Option(
        "torch[].python",
        Kind.PYTHON_MINORS,
        "This release's own Pythons, instead of the matrix-wide list; each must be published by the release.",
        default_doc="the matrix-wide `python`",
    ),
    Option(
        "torch[].patches",
        Kind.NAMES,
        "Shim series applied to the source copy, in this order: each names a directory of `patches/` with a "
        "`series` file.",
        default=(),
    ),
    Option(
        "variants",
        Kind.NAMED,
        "Torch variants by name, each with its own wheel source: a torch entry of that variant takes its wheels "
        "from there unless it names its own.",
        default={},
        example="variants:\n  cpu: {wheels: {index: https://download.pytorch.org/whl/cpu}}\n"
        "  cu121: {wheels: {index: https://download.pytorch.org/whl/cu121}}",
    ),
    Option("variants.<name>", Kind.MAPPING, "A variant; its name is a variant name (cpu, cu121, rocm6.2, ...)."),
    Option(
        "variants.<name>.wheels",
        Kind.MAPPING,
        "Where this variant's torch wheels come from (the same forms as `torch[].wheels`).",
        required=True,
        shape="wheel-source",
        shorthand=Kind.CHOICE,
        shorthand_allowed=("registry", "pip-find-links"),
    ),
    # ---- rules ------------------------------------------------------------------------------------------------
    Option(
        "exclude",
        Kind.LIST,
        "Rules in the spirit of GitHub Actions: each drops the cells it matches (it must match one).",
        default=(),
        example='exclude:\n  - {torch: ">=2.5,<2.13", sdk: "1"}',
    ),
    Option("exclude[]", Kind.MAPPING, "A rule; keys left out match anything.", shape="rule"),
    Option(
        "include",
        Kind.LIST,
        "Rules that add cells: each names a torch release, a Python and (with an SDK) an SDK version.",
        default=(),
    ),
    Option("include[]", Kind.MAPPING, "A cell to add.", shape="rule"),
    # ---- images and runners -----------------------------------------------------------------------------------
    Option(
        "images",
        Kind.NAMED,
        "Builder images for the Docker runner, by name; a cell is built in the first image that serves its Python "
        "(with a system SDK, in the image that provides the cell's SDK version).",
        default={},
        example='images:\n  bookworm: {base: "debootstrap:bookworm", python: ["3.11"]}',
    ),
    Option("images.<name>", Kind.MAPPING, "An image; its name is a plain name (letters, digits, . _ -)."),
    Option(
        "images.<name>.base",
        Kind.IMAGE_BASE,
        "`debootstrap:<Debian suite>` (made here, no registry) or an image reference; never a path.",
        required=True,
    ),
    Option(
        "images.<name>.python",
        Kind.PYTHON_MINORS,
        "The Pythons this image serves (`3.13t`: a free-threaded 3.13, built from the suite's own CPython sources).",
        required=True,
    ),
    Option(
        "images.<name>.layer",
        Kind.PROJECT_FILE,
        "A Dockerfile of the project applied on top of the builder image made from the package's recipe (it starts "
        "`ARG BUILDER` and `FROM ${BUILDER}`): system toolkits, libraries, an SDK the cells need.",
        default_doc="none",
        example="layer: docker/toolkit.Dockerfile",
    ),
    Option(
        "images.<name>.dockerfile",
        Kind.PROJECT_FILE,
        "The project's own builder recipe instead of the package's (it gets `BASE` and `PYTHONS`; the Docker runner "
        "needs /opt/python/cpXY-cpXY, auditwheel and uv in it).",
        default_doc="the package's recipe for the base",
    ),
    Option(
        "images.<name>.context",
        Kind.DIRECTORY,
        "The build context of `layer` or `dockerfile` (what their COPY lines see); `.` is the project itself.",
        default_doc="the directory of the Dockerfile",
        root_allowed=True,
    ),
    Option(
        "images.<name>.build-args",
        Kind.NAMED,
        "Build arguments for `layer` or `dockerfile`, by name (e.g. the toolkit version an image installs).",
        default={},
        example='build-args: {SDK_VERSION: "2.0"}',
    ),
    Option("images.<name>.build-args.<name>", Kind.TEXT, "The argument's value."),
    Option(
        "runner",
        Kind.CHOICE,
        "How cells are built: `local` (uv environments on this machine), `docker` (the same steps, each in a "
        "container of a builder image made for this machine's architecture), or `auto` (local where this machine "
        "has the Python, Docker where only an image serves it).",
        default=str(RunnerName.AUTO),
        allowed=tuple(RunnerName),
    ),
    Option(
        "timeouts",
        Kind.MAPPING,
        "Seconds a step may run before its whole process tree is killed and the cell fails as transient (retried).",
        default={},
        example="timeouts:\n  build: 7200",
    ),
    *(
        Option(
            f"timeouts.{step}",
            Kind.SECONDS,
            TIMEOUT_DOCS[step],
            default=seconds,
            sdk_kinds=WHEEL_SDK if step == "sdk" else (),
        )
        for step, seconds in TIMEOUT_DEFAULTS.items()
    ),
)


# ---- the plugin contract: what the tool assumes of a project, declared (a project's values are in its matrix.yaml) --
CONTRACT_OPTIONS: tuple[Option, ...] = (
    Option(
        "patches",
        Kind.DIRECTORY,
        "The directory of shim series (`<patches>/<series>/series`) that `torch[].patches` names.",
        default_doc="`patches` beside matrix.yaml",
    ),
    Option(
        "build",
        Kind.MAPPING,
        "How each cell builds its wheel from its copy of the source. The build runs without isolation, in an "
        "environment holding the cell's torch (and SDK wheel), so a setup.py that imports torch works.",
        default={},
        example='build:\n  version-env: MY_EXT_VERSION\n  requires: ["pybind11"]\n  env: {FORCE_CUDA: "0"}',
    ),
    Option(
        "build.version-file",
        Kind.RELATIVE_PATH,
        "A file written into the source copy, holding the wheel's full version (`plugin.version` and the cell's "
        "local label); the project's build reads it.",
        default_doc="none",
    ),
    Option(
        "build.version-env",
        Kind.ENV_NAME,
        "An environment variable the build gets, holding the wheel's full version.",
        default_doc="none",
    ),
    Option(
        "build.sdk-version-env",
        Kind.ENV_NAME,
        "An environment variable the plugin's build gets, holding the cell's SDK version (e.g. for a setup.py that "
        "checks the toolkit it finds).",
        default_doc="none",
        sdk_kinds=ANY_SDK,
    ),
    Option(
        "build.relabel",
        Kind.BOOLEAN,
        "`true`: the built wheel is given the cell's version (`plugin.version` and local label) afterwards, for a "
        "project whose build fixes its own version (a published sdist); `plugin.version` must equal that version.",
        default=False,
    ),
    Option(
        "build.requires",
        Kind.TEXTS,
        "Requirements installed into the build environment besides torch and the project's own "
        "`[build-system].requires`.",
        default=(),
    ),
    Option(
        "build.project-requires",
        Kind.BOOLEAN,
        "`true`: the project's `[build-system].requires` (pyproject.toml; setuptools and wheel without one) are "
        "installed too, torch and the SDK wheel excepted (the cell provides those).",
        default=True,
    ),
    Option(
        "build.env",
        Kind.NAMED,
        "Environment variables for the build, by name. Each replaces the variable's value in the build's "
        "environment; `${NAME}` in a value stands for NAME as the build would otherwise see it (empty when unset), "
        'so `PATH: "/opt/tool/bin:${PATH}"` extends PATH. A build for a `cpu` variant of torch sees no CUDA '
        "toolkit unless this asks for one: on the local runner the host's `nvcc` is hidden (each PATH entry holding "
        "it is replaced by links to its other programs) and `CUDA_HOME` and `CUDA_PATH` are left out, as its log "
        "says; set them here to give the build a toolkit.",
        default={},
        example='env:\n  FORCE_ONLY_CPU: "1"\n  PATH: "/opt/cmake/bin:${PATH}"',
    ),
    Option("build.env.<name>", Kind.TEXT, "The variable's value (`${NAME}`: another variable's, see `build.env`)."),
    Option(
        "build.generated",
        Kind.TEXTS,
        "Names of files the project's build writes into its own source trees (a build-info module, a version "
        "header): left out of each cell's copy and of the source hashes, so a local build changes no cell's inputs.",
        default=(),
        example='generated: ["_build_info.py", "VERSION"]',
    ),
    Option(
        "build.per-python",
        Kind.BOOLEAN,
        "`true`: the wheel depends on the Python it is built with (a C extension using the CPython API): one build "
        "per Python (and free-threaded or not). `false`: one wheel serves every Python (`py3-none`, or `abi3` for "
        "the Pythons with a GIL): one build per torch release (and SDK version), tested on each cell's Python in a "
        "clean environment of its own.",
        default=True,
    ),
    Option(
        "build.per-variant",
        Kind.BOOLEAN,
        "`true`: the wheel depends on the torch release's variant (a CUDA extension): one build per variant. "
        "`false`: the variants of one release share one build (against its first entry in `torch:`), tested on "
        "each variant's cells.",
        default=True,
    ),
    Option(
        "build.stable-abi",
        Kind.VERSION,
        "The first torch release the project builds against the LibTorch stable ABI (`TORCH_TARGET_VERSION`): "
        "every release of the matrix from this one on is served by one build, made against the oldest of them, and "
        "each still gets its own test cells, which install that wheel with their own torch. The releases before it "
        "are built one by one. The wheel's torch pin must admit every release it serves (`check.torch-pin`); it is "
        "listed on the index of each of them. With `build.per-variant: true` each variant has a stable build of "
        "its own.",
        default_doc="none: one build per release",
        example='stable-abi: "2.10"',
    ),
    Option(
        "build.ninja",
        Kind.BOOLEAN,
        "`true`: ninja is installed into the build environment (unless a requirement names it already), so torch's "
        "cpp_extension compiles each extension's translation units in parallel. Every build gets `MAX_JOBS` and "
        "`CMAKE_BUILD_PARALLEL_LEVEL`: its share of the machine's cores (all of them with `--jobs 1`, half each "
        "with `--jobs 2` on a machine of two or more). `false`: the build environment holds no ninja of ours.",
        default=True,
    ),
    Option(
        "build.parallel-extensions",
        Kind.BOOLEAN,
        "`true`: setuptools builds the project's extensions at the same time, as many as the build's share of "
        "cores (`build_ext --parallel`, through a `DIST_EXTRA_CONFIG` file read after the project's setup.cfg). "
        "For a build with several extensions that does not use ninja (torch's `BuildExtension` with "
        "`use_ninja=False`, as torch-scatter's): without ninja setuptools compiles one file at a time. Never with "
        "ninja: torch's ninja build writes one build.ninja per build directory, which extensions built at once "
        "overwrite.",
        default=False,
    ),
    Option("check", Kind.MAPPING, "What the check step requires of each built wheel.", default={}),
    Option(
        "check.torch-pin",
        Kind.CHOICE,
        "How the wheel's Requires-Dist must name torch: `release-line` (`torch==X.Y.*`, which vendor builds of the "
        "release satisfy too; a stable-ABI build's, see `build.stable-abi`, from its release line on, `torch>=X.Y`, "
        "admitting every release it serves) or `none` (not checked). Each cell also refuses a wheel whose pin "
        "excludes its torch, and checks that its clean environment kept its own torch. With `none`, nothing ties a "
        "wheel to its torch release, so the published pages leave out the one command for whatever torch is "
        "installed (an installer would take the newest release's wheel) and give each release's own index and the "
        "exact pins only.",
        default="release-line",
        allowed=("release-line", "none"),
    ),
    Option(
        "check.build-info",
        Kind.RELATIVE_PATH,
        "A Python module inside the wheel recording what it was built against (constant assignments); its torch "
        "version must be the build's (for a stable-ABI build, the oldest release it serves).",
        default_doc="none: not checked",
        example="build-info: my_ext/_build_info.py",
    ),
    Option(
        "check.build-info-torch",
        Kind.ENV_NAME,
        "The name of the torch version constant in `check.build-info`.",
        default="TORCH_VERSION",
    ),
    Option(
        "publish",
        Kind.MAPPING,
        "Where `torch-buildmatrix compat-table` writes the committed docs, relative to matrix.yaml.",
        default={},
    ),
    Option(
        "publish.readme",
        Kind.PATH_OR_OFF,
        "The README whose table between `<!-- compat-table:start -->` and `<!-- compat-table:end -->` is rewritten "
        "(it must hold that pair of markers once). `false`: no README block; publishing needs no README then (the "
        "table, install commands and site are in `publish.docs` and the site).",
        default="README.md",
    ),
    Option(
        "publish.own-names",
        Kind.TEXTS,
        "The project's distribution names (`plugin.distribution`, a wheel SDK's `distribution`) that are its own "
        "on the public index (PyPI): the project publishes its releases there under them, as an upstream project "
        "whose sdist these wheels are built from does. No look-alike can take such a name, so the pages' look-alike "
        "note leaves it out, and is left out when every name the commands install is the project's own.",
        default=(),
        example='own-names: ["torch-scatter"]',
    ),
    Option(
        "publish.docs",
        Kind.RELATIVE_PATH,
        "The directory of compatibility.md and compatibility.json (the committed table the docs are rendered from).",
        default="docs",
    ),
    Option(
        "probe", Kind.MAPPING, "The drift probe (`torch-buildmatrix probe`): how it reports compile errors.", default={}
    ),
    Option(
        "probe.interfaces",
        Kind.LIST,
        "Which torch interface each part of the source implements, so the probe groups a new release's compile "
        "errors by interface; the first prefix that matches a file wins.",
        default=(),
        example='interfaces:\n  - {prefix: csrc/Guard.cpp, interface: "DeviceGuardImplInterface (c10/core/impl)"}',
    ),
    Option("probe.interfaces[]", Kind.MAPPING, "A source path prefix and its interface."),
    Option(
        "probe.interfaces[].prefix", Kind.TEXT, "A path prefix inside the source tree (`csrc/aten/`).", required=True
    ),
    Option("probe.interfaces[].interface", Kind.TEXT, "The torch interface its files implement.", required=True),
    Option(
        "smoke", Kind.MAPPING, "The smoke test: the project's pytest suite against the installed wheel.", default={}
    ),
    Option(
        "smoke.requires",
        Kind.TEXTS,
        "Requirements of the clean smoke environment besides torch and the wheels (pytest is always installed).",
        default=("pytest",),
    ),
    Option(
        "smoke.requires-for",
        Kind.LIST,
        "More smoke requirements for some torch releases only: a package that supports a range of torch releases "
        "at each of its versions (PEP 508 markers in a requirement still select by Python and platform).",
        default=(),
        example='requires-for:\n  - {torch: "<2.6", requires: ["transformers==4.57.6"]}\n'
        '  - {torch: ">=2.6", requires: ["transformers==5.24.0"]}',
    ),
    Option("smoke.requires-for[]", Kind.MAPPING, "Requirements for the cells whose torch the selector matches."),
    Option(
        "smoke.requires-for[].torch",
        Kind.TORCH_SELECTOR,
        'The torch releases: a minor like "2.4" (the whole series), a version, or a specifier like ">=2.4,<2.6".',
        required=True,
    ),
    Option(
        "smoke.requires-for[].requires",
        Kind.TEXTS,
        "Requirements added to `smoke.requires` for those releases.",
        required=True,
    ),
    Option(
        "smoke.requires-for[].free-threaded",
        Kind.BOOLEAN,
        "`false`: only the cells of Pythons with the GIL, `true`: only free-threaded ones (`3.13t`); unset: both. "
        "For a package with no free-threaded wheel (an `abi3` one, which a free-threaded build does not install): "
        "its cells there run without it, and the suite reports what needs it as not available. PEP 508 markers "
        "cannot tell the two builds apart.",
    ),
    Option(
        "smoke.args",
        Kind.TEXTS,
        "Extra pytest arguments. `{features}` stands for a JSON file the suite may write with one outcome per "
        'feature, by its snake_case key (`{"named_tensors": "passed" | "not available: why" | ...}`), shown on the '
        "compatibility page under the titles of `features`.",
        default=(),
        example='args: ["--my-features-json={features}", "-k", "not slow"]',
    ),
    Option(
        "smoke.features",
        Kind.NAMED,
        "Titles of the features the suite reports (`{features}` in `args`), by key: the pages show a feature by its "
        "title, a key without one by its words (`host_allocator`: Host allocator). A key is snake_case: lower-case "
        "words of letters and digits joined by `_`, starting with a letter; a report with any other key fails the "
        "cell's smoke step. Records and tables written when a feature could be named by a phrase read with the "
        "phrase's key (`named tensors`: `named_tensors`).",
        default={},
        example='features:\n  cuda_dtypes: "CUDA dtypes"\n  any_python: "Any Python (py3-none wheel)"',
        schema_extra={"propertyNames": {"pattern": f"^{FEATURE_KEY.pattern}$", "maxLength": MAX_KEY}},
    ),
    Option("smoke.features.<name>", Kind.TEXT, "The feature's title: one line of plain text."),
    Option(
        "smoke.tiers",
        Kind.MAPPING,
        "Test tiers: a deep suite that runs once per build, on one of its cells (the build's deep cell), and a quick "
        "suite that runs on every cell, the deep cell too. A cell's wheel is its build's wheel: checks that depend "
        "only on the wheel and torch (operator conformance, models, compilers) need not run again on each Python. "
        "The deep cell of a build is, unless `deep-python` names one: among its cells of the torch release it is "
        "built against (all of its cells where it has none), the one with the oldest Python with the GIL, a "
        "free-threaded Python only when the build has no other; between cells of one Python (variants sharing a "
        "build), the first in matrix order. A deep tier whose tests all skipped (or that selected none) is `not "
        "run`, never passed. A failure of the deep tier fails every cell of the build, a failure of the quick suite "
        "its own cell. A run or job that leaves the deep cell out runs no deep tier: its other cells keep the deep "
        "result recorded with their build. Without `tiers` the whole suite runs on every cell.",
        default_doc="none: the whole suite on every cell",
        example='tiers:\n  quick: ["-m", "not deep"]\n  deep: ["-m", "deep"]\n  deep-python: ["3.12"]',
    ),
    Option(
        "smoke.tiers.quick",
        Kind.TEXTS,
        "pytest arguments, after `smoke.args`, that select the quick suite run on every cell: a marker expression "
        '(`["-m", "not deep"]`) or a keyword expression (`-k`); the suite is staged elsewhere on each runner, so '
        "select by marker or name, not by path.",
        required=True,
    ),
    Option(
        "smoke.tiers.deep",
        Kind.TEXTS,
        "pytest arguments, after `smoke.args`, that select the deep suite run once per build on its deep cell, "
        "after the quick suite (a second pytest run in the same environment, in a step of its own, `deep`).",
        required=True,
    ),
    Option(
        "smoke.tiers.deep-python",
        Kind.PYTHON_MINORS,
        "The deep cell's Python, in order of preference: each build's deep cell is its cell of the first of these it "
        "has (of the release it is built against first, as in the rule above); a build with none of them follows "
        "the rule.",
        default=(),
    ),
    Option(
        "smoke.threads",
        Kind.COUNT,
        "The threads a cell's smoke run may use (`OMP_NUM_THREADS`, which sizes torch's intra-op pool): one by "
        "default, so cells and builds running at once (`--jobs`) share the cores instead of each taking them all.",
        default=1,
    ),
)


def _expand(options: tuple[Option, ...]) -> dict[str, Option]:
    """Every option by path, with each shape's keys placed under every option that uses the shape."""
    out: dict[str, Option] = {}
    for option in options:
        if option.path in out:
            raise ValueError(f"option {option.path} is declared twice")
        out[option.path] = option
        for member in SHAPES.get(option.shape, ()):
            out[f"{option.path}.{member.path}"] = replace(member, path=f"{option.path}.{member.path}")
    for path, option in out.items():
        if option.parent and option.parent not in out:
            raise ValueError(f"option {path} has no declared parent {option.parent}")
    return out


OPTIONS: dict[str, Option] = _expand((*_OPTIONS, *CONTRACT_OPTIONS))


def children(path: str) -> list[Option]:
    """The declared keys of a mapping option, in declaration order ("" for the top level)."""
    return [o for o in OPTIONS.values() if o.parent == path and o.key not in ("[]", "<name>")]


def item(path: str) -> Option:
    """The item option of a list (`torch[]`) or of a mapping of named entries (`images.<name>`)."""
    option = OPTIONS[path]
    return OPTIONS[f"{path}[]" if option.kind == Kind.LIST else f"{path}.<name>"]
