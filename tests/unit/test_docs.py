"""The documentation is checked like code: generated pages match their generators, documented command output matches
what the commands print, README stays short and keeps its two commands (the strict build: test_docs_site.py; the
doctor's output on the install page: plugin/devtests/test_guard_doctor.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from torch_buildmatrix.builder.records.model import CellResult
from torch_buildmatrix.cli import build_parser, main
from torch_buildmatrix.clireference import cli_markdown, exit_codes, exit_codes_markdown
from torch_buildmatrix.errors import UserError
from torch_buildmatrix.model.registry import Registry

from conftest import REPO, run_cli

DOCS = REPO / "docs"
CLI_PAGE = DOCS / "reference" / "command-line.md"
EXIT_PAGE = DOCS / "reference" / "exit-codes.md"
MAIN_JOB = "python3 -m pip install nox uv && nox -s build-matrix"
TESTS = "python3 -m pip install nox uv && nox -s tests"


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"docs_script_{name}", REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def fenced_blocks(page: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL)


# --- generated pages ---------------------------------------------------------------------------------------------


def test_committed_command_line_page_is_generated_from_the_parser() -> None:
    assert CLI_PAGE.read_text(encoding="utf-8") == cli_markdown(build_parser()), "run `nox -s schema`"


def test_committed_exit_codes_page_is_generated_from_the_error_hierarchy() -> None:
    assert EXIT_PAGE.read_text(encoding="utf-8") == exit_codes_markdown(), "run `nox -s schema`"


def test_every_error_class_and_its_code_is_on_the_exit_codes_page() -> None:
    def subclasses(cls: type[UserError]) -> list[type[UserError]]:
        return [cls, *(s for sub in cls.__subclasses__() for s in subclasses(sub))]

    rows = {(code, name) for code, name, _ in exit_codes()}
    declared = {
        (str(c.exit_code), c.__name__) for c in subclasses(UserError) if c.__module__ == "torch_buildmatrix.errors"
    }
    assert declared <= rows
    assert {"0", "1", "2", "3", "130"} <= {code for code, _ in rows}


def test_schema_command_writes_and_checks_the_generated_pages(tmp_path: Path) -> None:
    cli, codes = tmp_path / "cli.md", tmp_path / "codes.md"
    wrote = run_cli(tmp_path, "schema", "--cli", str(cli), "--exit-codes", str(codes), timeout=120)
    assert wrote.returncode == 0, wrote.stderr
    assert cli.read_text() == CLI_PAGE.read_text() and codes.read_text() == EXIT_PAGE.read_text()
    codes.write_text("stale\n")
    stale = run_cli(tmp_path, "schema", "--cli", str(cli), "--exit-codes", str(codes), "--check", timeout=120)
    assert stale.returncode == 1 and "codes.md" in stale.stdout
    assert codes.read_text() == "stale\n"  # --check writes nothing


def test_nox_sessions_page_is_generated_from_the_noxfile() -> None:
    site = load_script("docs_site")
    page = (DOCS / site.SESSIONS_PAGE).read_text(encoding="utf-8")
    assert page == site.sessions_markdown(REPO / "noxfile.py"), "run `python3 scripts/docs_site.py --write-sessions`"
    for name in ("build-matrix", "tests", "docs", "docker-tests"):
        assert f"| `nox -s {name}` |" in page


def test_benchmarks_page_is_generated_from_the_saved_outputs() -> None:
    page = load_script("benchmarks_page")
    assert page.PAGE.read_text(encoding="utf-8") == page.page(), "run `python3 scripts/benchmarks_page.py`"
    for saved in sorted((DOCS / "benchmarks").glob("*.txt")):
        run = page.Saved.parse(saved.read_text(encoding="utf-8"))
        assert {"command", "date", "machine"} <= set(run.fields), saved  # every figure says when and where
        assert saved.stem in page.scripts(), f"{saved}: no scripts/bench_{saved.stem}.py"


def test_format_pages_name_every_key_of_the_records_and_the_table() -> None:
    """The record and site format pages list every key the code writes; a new key fails here until documented."""
    record_keys = {f.name for f in dataclasses.fields(CellResult) if f.name != "patches"}
    records = (DOCS / "reference" / "records.md").read_text(encoding="utf-8")
    assert not {k for k in record_keys if f"`{k}`" not in records}, "document the new record keys"
    table_keys = set(json.loads((DOCS / "compatibility.json").read_text(encoding="utf-8")))
    site = (DOCS / "reference" / "site.md").read_text(encoding="utf-8")
    assert not {k for k in table_keys if f"`{k}`" not in site}, "document the new compatibility.json keys"


# --- README -------------------------------------------------------------------------------------------------------


def test_readme_is_short_and_gives_the_two_commands_and_links_that_resolve() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode()) <= 9 * 1024, "README.md is the front door: move details into docs/"
    assert f"\n{MAIN_JOB}\n" in readme and f"\n{TESTS}\n" in readme
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", readme):  # relative links only
        assert (REPO / target).exists(), f"README links to {target}, which does not exist"


# --- documented command output ------------------------------------------------------------------------------------


def help_options(parser_help: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", parser_help))


def test_cli_help_matches_the_command_line_page(capsys: pytest.CaptureFixture[str]) -> None:
    """`torch-buildmatrix --help` (a real process) lists the commands the page documents, and each command's `--help`
    (through the CLI's own entry point) shows exactly the options its section documents."""
    done = subprocess.run(
        [sys.executable, "-m", "torch_buildmatrix", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "COLUMNS": "120"},
    )
    assert done.returncode == 0, done.stderr
    page = CLI_PAGE.read_text(encoding="utf-8")
    commands = re.search(r"\{([\w,-]+)\}", done.stdout)
    assert commands is not None, done.stdout
    documented = re.findall(r"^## ([\w-]+)$", page, flags=re.MULTILINE)
    assert documented == commands.group(1).split(","), "the page lists the commands `--help` lists, in its order"
    for name in documented:
        section = page.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        with pytest.raises(SystemExit) as exited:
            main([name, "--help"])
        assert exited.value.code == 0
        shown = capsys.readouterr().out
        assert help_options(shown) - {"-h", "--help"} == help_options(section), name


def table_rows(text: str) -> list[tuple[str, ...]]:
    """The data rows of a rich table, without the last column (the runner, which names this machine's interpreter)."""
    rows = []
    for line in text.splitlines():
        if line.startswith("│"):
            cells = tuple(c.strip() for c in line.strip("│").split("│"))
            rows.append(cells[:-1])
    return rows


def test_matrix_output_matches_the_tutorial(tmp_path: Path) -> None:
    """`matrix --offline` on this project (registry answers from the recorded fixture) shows the tutorial's cells."""
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REPO / "matrix.yaml", project / "matrix.yaml")
    for tree in ("plugin", "driver", "patches"):  # copies: the loader refuses paths that leave the project
        shutil.copytree(
            REPO / tree, project / tree, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
        )
    registry = Registry(project / "build" / "cache" / "registry")
    registry.cache_path("torch").parent.mkdir(parents=True)
    shutil.copy(REPO / "tests" / "fixtures" / "registry" / "torch-recorded.json", registry.cache_path("torch"))
    done = run_cli(project, "matrix", "--offline", "--torch", "2.13", "--python", "3.11", timeout=120)
    assert done.returncode == 0, done.stderr
    [shown] = [b for b in fenced_blocks(DOCS / "tutorial" / "first-cell.md", "text") if "build matrix" in b]
    assert "nox -s matrix -- --torch 2.13 --python 3.11" in (DOCS / "tutorial" / "first-cell.md").read_text()
    assert table_rows(done.stdout) == table_rows(shown) and len(table_rows(shown)) == 4  # 2 cells, their 2 builds
    count = "2 cell(s), 2 build(s)"
    assert shown.strip().splitlines()[-1] == count and count in done.stdout.splitlines()
