"""What a project's own files say about it, for `torch-buildmatrix init`: its name and version, whether its build
computes the version, the torch requirement its wheels will carry and its build requirements, read from pyproject.toml,
setup.cfg, setup.py (parsed with ast, never run) and PKG-INFO."""

from __future__ import annotations

import ast
import configparser
import email.parser
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

SCM = "setuptools_scm"


@dataclass(frozen=True)
class Found:
    """A value and the file that said it ("setup.py", "pyproject.toml's [project]")."""

    value: str
    where: str


@dataclass(frozen=True)
class TorchRequirement:
    """What the project's metadata says of torch: `literal` when every wheel carries the same requirement (written
    out in a file), else the build computes it."""

    where: str
    literal: bool
    specifier: str = ""  # the literal requirement's specifier (">=2.0"); "" for a bare "torch"


@dataclass(frozen=True)
class ProjectMetadata:
    """A project's metadata as its files state it; None where no file says."""

    name: Found | None = None
    version: Found | None = None
    # How the build computes its version (setuptools_scm, `dynamic`, `attr:`, an expression): None where it is
    # written out, or where no file names one.
    computed_version: Found | None = None
    torch: TorchRequirement | None = None  # None: the metadata names no torch (or there is no metadata)
    requirements_known: bool = False  # some file lists the requirements (so "no torch" means none)
    build_requires: tuple[str, ...] = ()  # pyproject.toml's [build-system].requires, as written
    ninja_off: bool = False  # setup.py passes use_ninja=False (torch's BuildExtension compiles one file at a time)

    @property
    def ninja_in_build_requires(self) -> bool:
        return any(_name(r) == "ninja" for r in self.build_requires)


def _name(requirement: str) -> str | None:
    try:
        return canonicalize_name(Requirement(requirement).name)
    except InvalidRequirement:
        return None


def _torch_in(requirements: list[str], where: str) -> TorchRequirement | None:
    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) == "torch":
            return TorchRequirement(where, literal=True, specifier=str(requirement.specifier))
    return None


def _strings(value: object) -> list[str] | None:
    """A list of strings as written, None for anything else."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def read_pyproject(root: Path) -> ProjectMetadata:
    try:
        data = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return ProjectMetadata()
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    assert isinstance(project, dict)
    build = data.get("build-system") if isinstance(data.get("build-system"), dict) else {}
    assert isinstance(build, dict)
    where = "pyproject.toml's [project]"
    build_requires = tuple(_strings(build.get("requires")) or ())
    dynamic = _strings(project.get("dynamic")) or []
    name = Found(project["name"], where) if isinstance(project.get("name"), str) else None
    version = Found(project["version"], where) if isinstance(project.get("version"), str) else None
    computed = None
    if "version" in dynamic:
        tool = data.get("tool") if isinstance(data.get("tool"), dict) else {}
        assert isinstance(tool, dict)
        uses_scm = SCM in tool or any(_name(r) == "setuptools-scm" for r in build_requires)
        how = f"{SCM}" if uses_scm else 'dynamic = ["version"]'
        computed = Found(how, "pyproject.toml")
    dependencies = _strings(project.get("dependencies"))
    torch = None
    if "dependencies" in dynamic:
        torch = TorchRequirement("pyproject.toml's dynamic dependencies", literal=False)
    elif dependencies is not None:
        torch = _torch_in(dependencies, where)
    known = "dependencies" in dynamic or dependencies is not None or bool(project)
    return ProjectMetadata(name, version, computed, torch, known, build_requires)


def read_setup_cfg(root: Path) -> ProjectMetadata:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string((root / "setup.cfg").read_text("utf-8"))
    except (OSError, UnicodeDecodeError, configparser.Error):
        return ProjectMetadata()
    name = parser.get("metadata", "name", fallback="").strip()
    version = parser.get("metadata", "version", fallback="").strip()
    computed = None
    if version.startswith(("attr:", "file:")):
        computed, version = Found(version, "setup.cfg's [metadata] version"), ""
    setup_requires = parser.get("options", "setup_requires", fallback="")
    if SCM in setup_requires.replace("-", "_"):
        computed = Found(SCM, "setup.cfg's setup_requires")
    install = parser.get("options", "install_requires", fallback=None)
    lines = [line.strip() for line in (install or "").splitlines() if line.strip() and not line.startswith("#")]
    return ProjectMetadata(
        Found(name, "setup.cfg") if name else None,
        Found(version, "setup.cfg") if version else None,
        computed,
        _torch_in(lines, "setup.cfg's install_requires"),
        install is not None or parser.has_section("metadata"),
    )


def _module_values(tree: ast.Module) -> dict[str, ast.expr | None]:
    """Each module-level name assigned once, to its value; a name assigned more than once (or augmented) to None."""
    values: dict[str, ast.expr | None] = {}
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets, value = [node.target], None
        for target in targets:
            if isinstance(target, ast.Name):
                values[target.id] = None if target.id in values else value
    return values


def _literal(node: ast.expr | None, values: dict[str, ast.expr | None]) -> object:
    """The expression's value when it is a literal, or a module-level name assigned one literal once; else a
    sentinel (`_COMPUTED`)."""
    if isinstance(node, ast.Name) and node.id in values:
        node = values[node.id]
    if node is None:
        return _COMPUTED
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _COMPUTED


_COMPUTED = object()


def read_setup_py(root: Path) -> ProjectMetadata:
    try:
        tree = ast.parse((root / "setup.py").read_text("utf-8"), "setup.py")
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return ProjectMetadata()
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) == "setup" or getattr(node.func, "attr", None) == "setup")
    ]
    if not calls:
        return ProjectMetadata()
    values = _module_values(tree)
    keywords = {k.arg: k.value for k in calls[0].keywords if k.arg is not None}
    name_value = _literal(keywords.get("name"), values) if "name" in keywords else None
    name = Found(name_value, "setup.py") if isinstance(name_value, str) and name_value else None
    version = computed = None
    if keywords.get("use_scm_version") is not None and _literal(keywords["use_scm_version"], values) is not False:
        computed = Found(SCM, "setup.py's use_scm_version")
    elif "version" in keywords:
        found = _literal(keywords["version"], values)
        if isinstance(found, str) and found:
            version = Found(found, "setup.py")
        else:
            computed = Found("an expression", "setup.py's version=")
    torch = None
    known = "install_requires" in keywords
    if known:
        requirements = _literal(keywords["install_requires"], values)
        if isinstance(requirements, list | tuple) and all(isinstance(r, str) for r in requirements):
            torch = _torch_in(list(requirements), "setup.py's install_requires")
        else:
            torch = TorchRequirement("setup.py's install_requires", literal=False)
    spread = any(k.arg is None for k in calls[0].keywords)  # setup(**options): what they hold is not read here
    ninja_off = any(
        k.arg == "use_ninja" and isinstance(k.value, ast.Constant) and k.value.value is False
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for k in node.keywords
    )
    return ProjectMetadata(name, version, computed, torch, known or not spread, ninja_off=ninja_off)


def read_pkg_info(root: Path) -> ProjectMetadata:
    try:
        message = email.parser.Parser().parsestr((root / "PKG-INFO").read_text("utf-8"), headersonly=True)
    except (OSError, UnicodeDecodeError):
        return ProjectMetadata()
    name, version = message.get("Name"), message.get("Version")
    return ProjectMetadata(
        Found(str(name).strip(), "PKG-INFO") if name else None,
        Found(str(version).strip(), "PKG-INFO") if version else None,
        None,
        _torch_in([str(r) for r in message.get_all("Requires-Dist") or []], "PKG-INFO's Requires-Dist"),
        bool(name or version),
    )


def read_project(root: Path) -> ProjectMetadata:
    """The project's metadata: each value from the first of pyproject.toml, setup.cfg, setup.py and PKG-INFO that
    states it. The build's own files decide whether the version is computed (PKG-INFO then gives the version an
    sdist's build makes) and what torch requirement the wheels carry; PKG-INFO stands in where they say nothing."""
    sources = [read_pyproject(root), read_setup_cfg(root), read_setup_py(root), read_pkg_info(root)]
    build_files = sources[:3]
    name = next((s.name for s in sources if s.name is not None), None)
    computed = next((s.computed_version for s in build_files if s.computed_version is not None), None)
    if computed is None:
        version = next((s.version for s in sources if s.version is not None), None)
    else:
        version = sources[3].version  # what the sdist's build computed, when this is an unpacked sdist
    known = [s for s in sources if s.requirements_known]
    torch = known[0].torch if known else None  # the first file listing requirements says whether torch is one
    return ProjectMetadata(
        name, version, computed, torch, bool(known), sources[0].build_requires, ninja_off=sources[2].ninja_off
    )


def located(metadata: ProjectMetadata, directory: PurePosixPath) -> ProjectMetadata:
    """The same metadata, each file it names given as a path from the project root where it was read in `directory`
    ("torch_scatter-2.1.2/setup.py"); unchanged for the root itself."""
    if directory == PurePosixPath("."):
        return metadata

    def found(value: Found | None) -> Found | None:
        return None if value is None else replace(value, where=f"{directory}/{value.where}")

    torch = metadata.torch
    return replace(
        metadata,
        name=found(metadata.name),
        version=found(metadata.version),
        computed_version=found(metadata.computed_version),
        torch=None if torch is None else replace(torch, where=f"{directory}/{torch.where}"),
    )
