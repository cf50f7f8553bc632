"""`torch-buildmatrix init`: a project's starter files (matrix.yaml, noxfile.py, the GitHub workflow) from the templates
the package carries, filled with what the project's own files say. Existing files are never overwritten."""

from __future__ import annotations

import ast
import json
import re
import tempfile
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from pathlib import Path, PurePosixPath

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from torch_buildmatrix import __version__
from torch_buildmatrix.errors import MatrixError, UserError
from torch_buildmatrix.model.contract import README_END, README_START
from torch_buildmatrix.model.options import DISTRIBUTION_NAME
from torch_buildmatrix.projectmeta import ProjectMetadata, located, read_project
from torch_buildmatrix.publish.markdown import replace_readme_section
from torch_buildmatrix.util.atomic import write_text_atomic

TEMPLATES = Path(__file__).resolve().parent / "templates"
# This very version, by name: init's noxfile takes it as a wheel only (--only-binary), so it never depends on the bare
# name resolving on the public index, nor on a source distribution there (issue 37).
DEFAULT_REQUIREMENT = f"torch-buildmatrix[docker]=={__version__}"
WORKFLOW = Path(".github/workflows/buildmatrix.yml")
# The characters a source or tests path may hold: each is written into YAML, into a GitHub expression (hashFiles) and
# into a glob, where only these mean themselves.
PATH_CHARS = re.compile(r"[A-Za-z0-9._/' -]+")


def requirement_as_installed(direct_url: str | None, installed_version: str | None) -> str:
    """How init's noxfile installs this tool: from the git commit this version was installed from (PEP 610's
    direct_url.json), as the adopters' guide installs it; otherwise this version, pinned (DEFAULT_REQUIREMENT). A path
    or an editable checkout names this machine only, so it is never written for CI to follow."""
    if direct_url is None or installed_version != __version__:
        return DEFAULT_REQUIREMENT
    try:
        data = json.loads(direct_url)
        vcs = data.get("vcs_info", {})
        if vcs.get("vcs") == "git" and vcs.get("commit_id") and str(data["url"]).startswith("https://"):
            return f"torch-buildmatrix[docker] @ git+{data['url']}@{vcs['commit_id']}"
    except (ValueError, KeyError, AttributeError):
        pass
    return DEFAULT_REQUIREMENT


def default_requirement() -> str:
    """requirement_as_installed for the torch-buildmatrix installed in this environment."""
    try:
        dist = importlib_metadata.distribution("torch-buildmatrix")
    except importlib_metadata.PackageNotFoundError:
        return DEFAULT_REQUIREMENT
    return requirement_as_installed(dist.read_text("direct_url.json"), dist.version)


def wheel_only(requirement: Requirement) -> str:
    """The value of --only-binary that init's noxfile installs its requirement with: a requirement by name is taken
    as a wheel only; a direct reference (git URL, path) is built as given (:none:)."""
    return ":none:" if requirement.url else requirement.name


@dataclass(frozen=True)
class StarterFacts:
    """What the starter files say about the project, as typed values (parse_facts makes them from text)."""

    distribution: str  # a PEP 508 name: letters and digits, with . _ - inside
    version: Version
    source: PurePosixPath  # relative to the project root; "." for the project itself
    tests: PurePosixPath  # relative to the project root, inside source
    requirement: Requirement = field(default_factory=lambda: Requirement(DEFAULT_REQUIREMENT))  # the noxfile's
    metadata: ProjectMetadata = field(default_factory=ProjectMetadata)  # what the project's files said

    @property
    def relabel(self) -> bool:
        """The build fixes or computes its own version (a file states it), so the wheel is relabelled afterwards;
        without one, the build is to read the version from `version_env`."""
        return self.metadata.version is not None or self.metadata.computed_version is not None

    @property
    def torch_pin(self) -> str:
        """release-line where the build may pin torch per release (it computes its requirements, or states none we
        could read); none where every wheel would carry the same torch requirement, or none at all."""
        torch = self.metadata.torch
        if torch is not None and not torch.literal:
            return "release-line"
        return "none" if self.metadata.requirements_known else "release-line"

    @property
    def version_env(self) -> str:
        name = re.sub(r"[^A-Z0-9]+", "_", self.distribution.upper()).strip("_")
        return ("PKG_" if name[:1].isdigit() else "") + name + "_VERSION"  # a variable name starts with no digit

    @property
    def module(self) -> str:
        return re.sub(r"[^A-Za-z0-9_]", "_", self.distribution)


def _relative(root: Path, text: str, flag: str) -> PurePosixPath:
    """A path inside the project, in the characters the starter files can spell; UserError (exit 2) otherwise."""
    if not PATH_CHARS.fullmatch(text) or text.startswith(("/", " ")) or text.endswith(" "):
        raise UserError(
            f"{flag} {text!r}: init writes it into YAML, a GitHub expression and a glob; allowed: a relative path of "
            "letters, digits, . _ - ' / and inner spaces (nothing was written)"
        )
    path = PurePosixPath(text)
    if ".." in path.parts or not (root / path).resolve().is_relative_to(root.resolve()):
        raise UserError(f"{flag} {text!r} is outside the project {root} (nothing was written)")
    return path


def project_facts(
    root: Path,
    *,
    distribution: str | None = None,
    version: str | None = None,
    source: str | None = None,
    tests: str | None = None,
    requirement: str | None = None,
) -> StarterFacts:
    """The facts the starter files need, given or read from the project: its name and version from pyproject.toml,
    setup.cfg, setup.py (read, never run) or PKG-INFO (projectmeta.read_project), else its directory's name and
    0.1.0; its source is the project itself unless given; its tests are tests/ or test/ inside the source (tests/
    when neither exists: init writes a first test there).

    The noxfile's requirement is default_requirement() unless given. Each value is checked by its standard (PEP 508
    names and requirements, PEP 440 versions) and the source and tests by what the files can spell: UserError (exit
    2), before anything is written."""
    source_path = _relative(root, source or ".", "--source")
    if not (root / source_path).is_dir():
        raise UserError(f"--source {str(source_path)!r} is not a directory of {root} (nothing was written)")
    # What is built is the source tree, so its files say what the project is (an unpacked sdist beside the
    # matrix, as the guide's worked example lays it out); their places are named from the root in comments.
    metadata = located(read_project(root / source_path), source_path)
    stated = metadata.name.value if metadata.name is not None else ""
    name = distribution or stated or re.sub(r"[^A-Za-z0-9._-]+", "-", root.resolve().name)
    if distribution is None:
        name = name.strip("-._") or "my-extension"
    if not DISTRIBUTION_NAME.fullmatch(name):
        raise UserError(
            f"{name!r} is not a distribution name (PEP 508: letters and digits, with . _ - inside); give "
            "--distribution (nothing was written)"
        )
    found_version = version or (metadata.version.value if metadata.version is not None else "0.1.0")
    where = "--version" if version else f"{metadata.version.where if metadata.version else 'the default'} version"
    try:
        parsed_version = Version(found_version)
    except InvalidVersion:
        raise UserError(
            f"{where} {found_version!r} is not a PEP 440 version (e.g. 1.0, 0.3.1); give --version (nothing was "
            "written)"
        ) from None
    if parsed_version.local is not None:
        raise UserError(
            f"{where} {found_version!r} has a local label (+{parsed_version.local}); each cell adds its own label to "
            "plugin.version: give a public version (nothing was written)"
        )
    if requirement is None:
        requirement = default_requirement()
    try:
        parsed_requirement = Requirement(requirement)
    except InvalidRequirement as exc:
        raise UserError(
            f"--requirement {requirement!r} is not a PEP 508 requirement ({exc}) (nothing was written)"
        ) from None
    if tests is None:
        base = root / source_path
        tests = next(
            (str(source_path / t) for t in ("tests", "test") if (base / t).is_dir()), str(source_path / "tests")
        )
    tests_path = _relative(root, tests, "--tests")
    return StarterFacts(name, parsed_version, source_path, tests_path, parsed_requirement, metadata)


def yaml_string(value: str) -> str:
    """`value` as a YAML double-quoted scalar (JSON's string syntax is YAML's, escapes included)."""
    return json.dumps(value)


def expression_string(value: str) -> str:
    """`value` as a GitHub Actions expression string literal: single quotes, a quote doubled."""
    return "'" + value.replace("'", "''") + "'"


def _source_globs(facts: StarterFacts, root: Path) -> str:
    """hashFiles() arguments for the workflow's compiler cache key: the declared source tree and the patches."""
    whole = facts.source == PurePosixPath(".")
    globs = ["**", "!wheels/**", "!build/**"] if whole else [f"{facts.source}/**"]
    if (root / "patches").is_dir() and not whole:
        globs.append("patches/**")
    return ", ".join(expression_string(g) for g in globs)


def _fill(template: str, values: dict[str, str]) -> str:
    text = (TEMPLATES / template).read_text()
    for key, value in values.items():
        if key.endswith("_PY"):  # a Python literal stands where the template holds a placeholder string
            text = text.replace(f'"@{key}@"', value)
        text = text.replace(f"@{key}@", value)
    if leftover := re.findall(r"@[A-Z_]+@", text):
        raise AssertionError(f"template {template} has unfilled fields {leftover}")
    return text


def _comment(text: str) -> str:
    """Text a YAML comment can hold: one line of printable characters (a file's value may hold anything)."""
    return " ".join("".join(c if c.isprintable() and c != "@" else " " for c in text).split())[:160]


def contract_lines(facts: StarterFacts) -> dict[str, str]:
    """The matrix's build and check lines init chooses from the project's metadata, each with a comment saying why:
    how the wheel gets each cell's version, the torch pin the check requires, ninja."""
    meta = facts.metadata
    env = facts.version_env
    if meta.computed_version is not None:
        how = meta.computed_version
        given = f"{facts.version}, PKG-INFO's" if meta.version is not None else f"{facts.version}: set it to yours"
        version = [
            f"  # {_comment(f'{how.where} computes the version ({how.value})')}, so the build cannot take each cell's:",
            "  # the wheel is relabelled with it after the build; plugin.version must be the version the build makes",
            f"  # ({_comment(given)}).",
            "  relabel: true",
        ]
    elif meta.version is not None:
        version = [
            f"  # {_comment(f'{meta.version.where} fixes the version ({meta.version.value})')}: the wheel is",
            "  # relabelled with each cell's after the build. Or have the build make it: read it from the variable",
            f"  # {env} and write `version-env: {env}` here instead.",
            "  relabel: true",
        ]
    else:
        version = [
            f"  version-env: {env}      # your build reads the wheel's version (plugin.version + the cell's label) here"
        ]
    torch = meta.torch
    if facts.torch_pin == "none":
        why = (
            f"{torch.where} requires torch{torch.specifier} of every wheel, not one release line"
            if torch is not None
            else "the metadata names no torch"
        )
        pin = [
            f"  # {_comment(why)}: nothing ties a wheel to its torch release, so the pages",
            "  # give each release's own index and the exact pins only. Pin torch==X.Y.* from the build's torch",
            "  # (e.g. in setup.py) and write release-line to check it.",
            "  torch-pin: none",
        ]
    else:
        why = f"{torch.where} is computed" if torch is not None else "no metadata names the requirements"
        pin = [
            f"  # {_comment(why)}: the check requires each wheel's Requires-Dist to pin torch==X.Y.* (the release",
            "  # it was built with); write none if your build pins no torch.",
            "  torch-pin: release-line",
        ]
    ninja = (
        "your [build-system].requires names it"
        if meta.ninja_in_build_requires
        else "torch-buildmatrix installs it into the build environment"
    )
    ninja_lines = f"  # ninja: {ninja}; torch's cpp_extension compiles with it in parallel.\n  ninja: true"
    if meta.ninja_off:
        setup_py = "setup.py" if facts.source == PurePosixPath(".") else f"{facts.source}/setup.py"
        ninja_lines = (
            f"  # {_comment(setup_py)} turns ninja off (use_ninja=False), so each extension compiles one file at a\n"
            "  # time: build the extensions at once instead.\n"
            "  ninja: false\n"
            "  parallel-extensions: true"
        )
    return {"VERSION_CONTRACT": "\n".join(version), "TORCH_PIN": "\n".join(pin), "NINJA": ninja_lines}


def publish_lines(root: Path, facts: StarterFacts) -> str:
    """The matrix's publish lines: the README table where README.md holds the compat-table markers, else none (with
    how to have one), so that compat-table publishes on the first try; the own-names line, commented."""
    readme = root / "README.md"
    try:
        replace_readme_section(readme.read_text("utf-8"), "")
        lines = ["  readme: README.md     # compat-table rewrites the table between its compat-table markers"]
    except (OSError, UnicodeDecodeError, ValueError):
        why = "README.md has no pair of compat-table markers" if readme.is_file() else "there is no README.md here"
        lines = [
            f"  # {why}, so compat-table writes no README table (the docs and the site",
            f"  # hold it all). To have one, put {README_START} and {README_END} in README.md",
            "  # and delete this line.",
            "  readme: false",
        ]
    names = yaml_string(facts.distribution)
    return "\n".join(
        [
            *lines,
            "  # Where the name is the project's own on PyPI (yours, or the upstream release whose sdist you build),",
            "  # uncomment: the pages then leave out their warning that a look-alike may hold it there.",
            f"  # own-names: [{names}]",
        ]
    )


FIRST_TEST = '''"""The first smoke test (written by `torch-buildmatrix init`): the installed wheel imports, with the
cell's torch.

Replace it with your own suite; torch-buildmatrix runs it against each cell's installed wheel."""

import importlib

import torch


def test_the_wheel_imports() -> None:
    module = importlib.import_module({module})
    assert module is not None and torch.__version__
'''


def starter_files(root: Path, facts: StarterFacts) -> dict[Path, str]:
    """The files `init` writes, by path relative to the project root: every value quoted for where it goes (YAML,
    Python, a workflow expression)."""
    values = {
        "DISTRIBUTION": facts.distribution,  # in comments and docstrings: a PEP 508 name needs no quoting there
        "DISTRIBUTION_YAML": yaml_string(facts.distribution),
        "VERSION": str(facts.version),
        "VERSION_YAML": yaml_string(str(facts.version)),
        "SOURCE_YAML": yaml_string(str(facts.source)),
        "TESTS_YAML": yaml_string(str(facts.tests)),
        "REQUIREMENT_PY": json.dumps(str(facts.requirement)),  # ASCII, escaped: a Python string literal too
        "ONLY_BINARY_PY": json.dumps(wheel_only(facts.requirement)),
        "SOURCE_GLOBS": _source_globs(facts, root),
        **contract_lines(facts),
        "PUBLISH": publish_lines(root, facts),
    }
    files = {
        Path("matrix.yaml"): _fill("matrix.yaml", values),
        Path("noxfile.py"): _fill("noxfile.py", values),
        WORKFLOW: _fill("workflow.yml", values),
    }
    if not (root / facts.tests).is_dir():
        files[Path(facts.tests) / "test_installed.py"] = FIRST_TEST.format(module=json.dumps(facts.module))
    return files


def check_starter(root: Path, facts: StarterFacts, files: dict[Path, str]) -> None:
    """The files load as what they are, before any is written: the matrix through the matrix loader (in a scratch
    copy of the project's layout), the Python files through the parser, the workflow through YAML. UserError (exit
    2) naming what does not."""
    problems = []
    for rel, text in files.items():
        try:
            if rel.suffix == ".py":
                ast.parse(text, str(rel))
            elif rel == WORKFLOW:
                yaml.safe_load(text)
        except (SyntaxError, yaml.YAMLError) as exc:
            problems.append(f"{rel}: {exc}")
    with tempfile.TemporaryDirectory(prefix="buildmatrix-init-") as scratch:
        copy = Path(scratch)
        (copy / facts.source).mkdir(parents=True, exist_ok=True)
        (copy / facts.tests).mkdir(parents=True, exist_ok=True)
        (copy / facts.tests / "test_installed.py").write_text("")
        (copy / "matrix.yaml").write_text(files[Path("matrix.yaml")])
        try:
            from torch_buildmatrix.model.loader import load_matrix

            load_matrix(copy / "matrix.yaml")
        except MatrixError as exc:
            problems += [f"matrix.yaml: {p.key}: {p.message}" for p in exc.problems]
    if problems:
        raise UserError(
            f"init cannot write files that load with these values (nothing was written): {'; '.join(problems)}"
        )


def write_starter(root: Path, files: dict[Path, str], facts: StarterFacts | None = None) -> list[Path]:
    """Write the files, or none of them: any that exists, or (with `facts`) files that would not load, stop init
    (UserError) before anything is written, and a matrix that does not load in place takes back what was written."""
    existing = [str(p) for p in files if (root / p).exists() or (root / p).is_symlink()]
    if existing:
        raise UserError(
            f"init writes no file that exists: {', '.join(existing)} already exist in {root} (nothing was written)"
        )
    if facts is not None:
        check_starter(root, facts, files)
    written: list[Path] = []
    made = sorted(
        {d for rel in files for d in (root / rel).parents if d != root and d.is_relative_to(root) and not d.exists()},
        key=lambda d: len(d.parts),
        reverse=True,
    )
    try:
        for rel, text in files.items():
            write_text_atomic(root / rel, text)
            written.append(root / rel)
        from torch_buildmatrix.model.loader import load_matrix

        load_matrix(root / "matrix.yaml")
    except (MatrixError, OSError):
        for path in written:
            path.unlink(missing_ok=True)
        for directory in made:  # deepest first: the directories init made, emptied again
            if directory.is_dir() and not any(directory.iterdir()):
                directory.rmdir()
        raise
    return written


@dataclass(frozen=True)
class InitOptions:
    """What `init` is told: the project's root, and what it would otherwise read from the project's metadata."""

    root: Path
    distribution: str | None = None
    version: str | None = None
    source: str | None = None
    tests: str | None = None
    requirement: str | None = None  # default_requirement()


def init_project(options: InitOptions) -> list[Path]:
    """The `init` command: the starter files of a project, matrix.yaml, noxfile.py and the GitHub workflow, never
    over existing files; returns what was written (UserError, nothing written, otherwise)."""
    root = options.root
    if not root.is_dir():
        raise UserError(f"{root} is not a directory (init writes into an existing project)")
    facts = project_facts(
        root,
        distribution=options.distribution,
        version=options.version,
        source=options.source,
        tests=options.tests,
        requirement=options.requirement,
    )
    return write_starter(root, starter_files(root, facts), facts)
