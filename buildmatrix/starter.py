"""`buildmatrix init`: a project's starter files (matrix.yaml, noxfile.py, the GitHub workflow) from the templates
the package carries, filled with what the project's own files say. Existing files are never overwritten."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from buildmatrix.errors import MatrixError, UserError
from buildmatrix.model.options import DISTRIBUTION_NAME
from buildmatrix.util.atomic import write_text_atomic

TEMPLATES = Path(__file__).resolve().parent / "templates"
DEFAULT_REQUIREMENT = "buildmatrix[docker]"
WORKFLOW = Path(".github/workflows/buildmatrix.yml")


@dataclass(frozen=True)
class StarterFacts:
    """What the starter files say about the project."""

    distribution: str
    version: str
    source: str  # relative to the project root; "." for the project itself
    tests: str  # relative to the project root, inside source
    requirement: str = DEFAULT_REQUIREMENT  # how the noxfile installs buildmatrix

    @property
    def version_env(self) -> str:
        return re.sub(r"[^A-Z0-9]+", "_", self.distribution.upper()).strip("_") + "_VERSION"

    @property
    def module(self) -> str:
        return re.sub(r"[^A-Za-z0-9_]", "_", self.distribution)


def _pyproject(root: Path) -> dict[str, object]:
    try:
        return tomllib.loads((root / "pyproject.toml").read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def project_facts(
    root: Path,
    *,
    distribution: str | None = None,
    version: str | None = None,
    source: str | None = None,
    tests: str | None = None,
    requirement: str = DEFAULT_REQUIREMENT,
) -> StarterFacts:
    """The facts the starter files need, given or read from the project: its pyproject.toml's [project] name and
    version, else its directory's name and 0.1.0; its source is the project itself unless given; its tests are
    tests/ or test/ inside the source (tests/ when neither exists: init writes a first test there)."""
    project = _pyproject(root).get("project", {})
    project = project if isinstance(project, dict) else {}
    name = distribution or str(project.get("name") or "") or re.sub(r"[^A-Za-z0-9._-]+", "-", root.resolve().name)
    name = name.strip("-._") or "my-extension"
    if not DISTRIBUTION_NAME.fullmatch(name):
        raise UserError(f"'{name}' is not a distribution name (allowed: letters, digits, . _ -); give --distribution")
    found_version = version or (str(project["version"]) if isinstance(project.get("version"), str) else "0.1.0")
    source = source or "."
    if tests is None:
        base = root / source
        tests = next(
            (str(Path(source) / t) for t in ("tests", "test") if (base / t).is_dir()), str(Path(source) / "tests")
        )
    return StarterFacts(name, found_version, source, Path(tests).as_posix(), requirement)


def _source_globs(facts: StarterFacts, root: Path) -> str:
    """hashFiles() arguments for the workflow's compiler cache key: the declared source tree and the patches."""
    globs = ["**", "!wheels/**", "!build/**"] if facts.source in (".", "") else [f"{facts.source.rstrip('/')}/**"]
    if (root / "patches").is_dir() and facts.source not in (".", ""):
        globs.append("patches/**")
    return ", ".join(f"'{g}'" for g in globs)


def _fill(template: str, values: dict[str, str]) -> str:
    text = (TEMPLATES / template).read_text()
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    if leftover := re.findall(r"@[A-Z_]+@", text):
        raise AssertionError(f"template {template} has unfilled fields {leftover}")
    return text


FIRST_TEST = '''"""The first smoke test (written by `buildmatrix init`): the installed wheel imports, with the
cell's torch.

Replace it with your own suite; buildmatrix runs it against each cell's installed wheel."""

import importlib

import torch


def test_the_wheel_imports() -> None:
    module = importlib.import_module("{module}")
    assert module is not None and torch.__version__
'''


def starter_files(root: Path, facts: StarterFacts) -> dict[Path, str]:
    """The files `init` writes, by path relative to the project root."""
    values = {
        "DISTRIBUTION": facts.distribution,
        "VERSION": facts.version,
        "SOURCE": facts.source,
        "TESTS": facts.tests,
        "VERSION_ENV": facts.version_env,
        "REQUIREMENT": facts.requirement,
        "SOURCE_GLOBS": _source_globs(facts, root),
    }
    files = {
        Path("matrix.yaml"): _fill("matrix.yaml", values),
        Path("noxfile.py"): _fill("noxfile.py", values),
        WORKFLOW: _fill("workflow.yml", values),
    }
    if not (root / facts.tests).is_dir():
        files[Path(facts.tests) / "test_installed.py"] = FIRST_TEST.format(module=facts.module)
    return files


def write_starter(root: Path, files: dict[Path, str]) -> list[Path]:
    """Write the files, or none of them: any that exists stops init (UserError) before anything is written, and a
    matrix that does not load (a bug in the templates) takes back what was written."""
    existing = [str(p) for p in files if (root / p).exists()]
    if existing:
        raise UserError(
            f"init writes no file that exists: {', '.join(existing)} already exist in {root} (nothing was written)"
        )
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
        from buildmatrix.model.matrix import load_matrix

        load_matrix(root / "matrix.yaml")
    except (MatrixError, OSError):
        for path in written:
            path.unlink(missing_ok=True)
        for directory in made:  # deepest first: the directories init made, emptied again
            if directory.is_dir() and not any(directory.iterdir()):
                directory.rmdir()
        raise
    return written
