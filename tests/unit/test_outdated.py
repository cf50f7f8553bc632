"""`outdated` against recorded registry answers served over HTTP: findings, edits, --apply keeping every comment."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version
from registry_server import ANSWERS, Answers

from torch_buildmatrix.builder.update import write_edits
from torch_buildmatrix.errors import RegistryError, UpdateError
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import WheelSource
from torch_buildmatrix.model.matrixedit import apply_edits
from torch_buildmatrix.model.outdated import AddRelease, Comparison, SetVersion, compare, read_sources
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.model.registry import Registry
from torch_buildmatrix.vocab import FindingKind, WheelSourceKind

from conftest import WriteMatrix, copy_project, run_cli

OLD_MATRIX = """\
schema-version: 2
plugin: {distribution: torch-emu, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{torch_minor}.drv.{sdk_major}"}
sdk: {kind: wheel, name: driver, id: "drv{sdk_major}", distribution: emu-driver, source: driver,
  version-env: EMU_DRIVER_API_VERSION, versions: ["1.4", "2.1"]}
python: ["3.11", "3.12", "3.13"]
torch:
  - version: "2.12.0"
    python: ["3.13"]
    patches: [pre-2.7]
  - version: "2.14.0"     # the newest we knew
exclude:
  - {torch: "2.12", sdk: "1"}
"""


@pytest.fixture
def no_pip_find_links(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """This machine's pip find-links (the 2.13 CPU wheel) would be a source too; these tests choose theirs."""
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr("torch_buildmatrix.model.registry.Path.home", lambda: tmp_path / "home")


def outdated(matrix_path: Path, answers: Answers, tmp_path: Path, **kwargs: object) -> Comparison:
    matrix = load_matrix(matrix_path)
    registry = Registry(tmp_path / "cache", index_url=answers.url)
    registry.machine = "x86_64"
    return compare(matrix, read_sources(matrix, registry), **kwargs)  # type: ignore[arg-type]


def by_kind(result: Comparison) -> dict[FindingKind, list[str]]:
    return {kind: [f"{f.subject} => {f.need}" for f in result.of_kind(kind)] for kind in FindingKind}


@pytest.mark.usefixtures("no_pip_find_links")
def test_recorded_answer_new_minors_patches_and_pythons(
    write_matrix: WriteMatrix, answers: Answers, tmp_path: Path
) -> None:
    result = outdated(write_matrix(OLD_MATRIX), answers, tmp_path)
    found = by_kind(result)
    assert found[FindingKind.NEW_PATCH] == [
        'torch 2.12.1 (cuda, registry) => the torch entry "2.12.0" becomes "2.12.1" (same patches and Pythons)',
        'torch 2.14.1 (cuda, registry) => the torch entry "2.14.0" becomes "2.14.1" (same patches and Pythons)',
    ]
    assert found[FindingKind.NEW_MINOR] == [
        'torch 2.13.0 (cuda, registry) => a torch entry "2.13.0" as a coverage cell (Python 3.13, driver 2; '
        "exclude driver 1) with the shim series of the nearest release 2.14.0: none",
        'torch 2.15.0 (cuda, registry) => a torch entry "2.15.0" as a coverage cell (Python 3.13, driver 2; '
        "exclude driver 1) with the shim series of the nearest release 2.14.0: none",
    ]
    assert found[FindingKind.NEW_PYTHON] == [
        "Python 3.14, published by torch 2.12.0 (cuda), 2.14.0 (cuda) => "
        'python: add "3.14" (a CPython 3.14 interpreter on every builder, and in an image for Docker); '
        "new cells: torch2.14-cuda-cp314-drv1, torch2.14-cuda-cp314-drv2"
    ]
    assert found[FindingKind.YANKED] == []
    assert result.edits == [
        SetVersion(Version("2.12.0"), "cuda", Version("2.12.1")),
        SetVersion(Version("2.14.0"), "cuda", Version("2.14.1")),
        AddRelease(
            Version("2.13.0"),
            "cuda",
            WheelSource(WheelSourceKind.REGISTRY),
            Python.parse("3.13"),
            (),
            Version("2.14.0"),
            ("1",),
        ),
        AddRelease(
            Version("2.15.0"),
            "cuda",
            WheelSource(WheelSourceKind.REGISTRY),
            Python.parse("3.13"),
            (),
            Version("2.14.0"),
            ("1",),
        ),
    ]
    assert answers.requests == 1  # one index request; the answer is cached for the rest


@pytest.mark.usefixtures("no_pip_find_links")
def test_yanked_listed_release_moves_to_the_newest_not_yanked(
    write_matrix: WriteMatrix, answers: Answers, tmp_path: Path
) -> None:
    answers.use("torch-yanked.json")
    path = write_matrix(OLD_MATRIX.replace('"2.14.0"     # the newest we knew', '"2.14.1"'))
    result = outdated(path, answers, tmp_path)
    [yanked] = result.of_kind(FindingKind.YANKED)
    assert yanked.subject == "torch 2.14.1 (cuda) is yanked (wheels miss a header (test fixture))"
    assert yanked.edit == SetVersion(Version("2.14.1"), "cuda", Version("2.14.0"))
    # Nor is a yanked release ever proposed as a new patch release.
    older = outdated(write_matrix(OLD_MATRIX), answers, tmp_path / "again")
    assert [f.subject for f in older.of_kind(FindingKind.NEW_PATCH)] == ["torch 2.12.1 (cuda, registry)"]


@pytest.mark.usefixtures("no_pip_find_links")
def test_find_links_source_new_minor_only_when_its_variant_is_asked_for(
    write_matrix: WriteMatrix, answers: Answers, tmp_path: Path
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for name in (
        "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch-2.14.0+cpu-cp312-cp312-linux_x86_64.whl",
    ):
        (wheels / name).write_bytes(b"")
    path = write_matrix(
        OLD_MATRIX.replace(
            '  - version: "2.14.0"     # the newest we knew\n',
            f'  - {{version: "2.14.0", variant: cpu, wheels: {{find-links: "{wheels}"}}}}\n',
        )
    )
    default = outdated(path, answers, tmp_path)
    [minor_13, minor_15] = default.of_kind(FindingKind.NEW_MINOR)
    assert minor_13.subject == f"torch 2.13.0 (cuda, registry); also offered: cpu build from find-links {wheels}"
    assert minor_15.subject == "torch 2.15.0 (cuda, registry)"
    cpu = outdated(path, answers, tmp_path / "cpu", variants=frozenset({"cpu"}))
    [only] = cpu.of_kind(FindingKind.NEW_MINOR)
    # 2.12.0 and 2.14.0 are as near as each other: the newer one's series (shims only ever drop out going up).
    assert only.edit == AddRelease(
        Version("2.13.0"),
        "cpu",
        WheelSource(WheelSourceKind.FIND_LINKS, str(wheels)),
        Python.parse("3.11"),
        (),
        Version("2.14.0"),
        ("1",),
    )


@pytest.mark.usefixtures("no_pip_find_links")
def test_unreadable_registry_is_an_error_and_nothing_is_written(write_matrix: WriteMatrix) -> None:
    path = write_matrix(OLD_MATRIX)
    before = path.read_bytes()
    result = run_cli(path.parent, "outdated", "--apply", "--index-url", "http://127.0.0.1:9/simple/", timeout=60)
    assert result.returncode == RegistryError.exit_code == 9
    assert "cannot read http://127.0.0.1:9/simple/torch/" in result.stderr
    assert "up to date" not in result.stdout
    assert path.read_bytes() == before
    assert not (path.parent / "build" / "outdated").exists()


@pytest.mark.usefixtures("no_pip_find_links")
def test_an_unreadable_index_source_is_a_note(write_matrix: WriteMatrix, answers: Answers, tmp_path: Path) -> None:
    cpu = '  - {version: "2.13.0", variant: cpu, python: ["3.11"], wheels: {index: "http://127.0.0.1:9/whl/cpu"}}\n'
    text = OLD_MATRIX.replace("exclude:\n", cpu + "exclude:\n")
    result = outdated(write_matrix(text), answers, tmp_path)
    [note] = result.notes
    assert note.startswith("torch 2.13.0 (cpu): not checked, index http://127.0.0.1:9/whl/cpu unreadable: ")
    assert "cannot read http://127.0.0.1:9/whl/cpu/torch/" in note
    assert len(result.of_kind(FindingKind.NEW_PATCH)) == 2  # the registry's releases are still compared


def comment_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("#") or " # " in line]


@pytest.mark.usefixtures("no_pip_find_links")
def test_apply_on_a_copy_of_matrix_yaml_keeps_every_comment(
    answers: Answers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers.use("torch-next.json")
    root = copy_project(tmp_path / "project")
    before = (root / "matrix.yaml").read_text()
    result = run_cli(root, "outdated", "--apply", "--no-probe", "--index-url", answers.url, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    after = (root / "matrix.yaml").read_text()
    old, new = before.splitlines(), after.splitlines()
    # Line by line: every line of the old file is still there, in order; the only changed one is 2.15.0 -> 2.15.1
    # (with its comment); the added ones are the 2.16.0 coverage entry.
    added = []
    cursor = 0
    for line in new:
        expected = old[cursor] if cursor < len(old) else None
        if line == expected or (expected is not None and line == expected.replace('"2.15.0"', '"2.15.1"')):
            cursor += 1
        else:
            added.append(line)
    assert cursor == len(old), f"line {cursor + 1} of the old matrix.yaml is missing or moved: {old[cursor]!r}"
    # No driver-1 exclusion is added: matrix.yaml's rule for Python 3.14 (the forky image's) keeps driver 1 out.
    assert added == [
        '  - version: "2.16.0"',
        '    python: ["3.14"]',
    ]
    assert '  - version: "2.15.1"         # newest on the registry: every Python it publishes (cp311-cp315)' in new
    assert comment_lines(after) == [c.replace('"2.15.0"', '"2.15.1"') for c in comment_lines(before)]
    # The comment block that followed the last torch entry still introduces the exclude rules.
    tail = after.split('  - version: "2.16.0"\n    python: ["3.14"]\n', 1)[1]
    assert tail.startswith("\n# Rules in the spirit of GitHub Actions")
    report = (root / "build" / "outdated" / "report.md").read_text()
    assert "torch 2.16.0 (cuda): not probed (`--no-probe`)" in report
    assert "(applied)" in report and "Python 3.14" in report
    # The edited matrix is valid and its new cells are what was promised (2.13's CPU wheel from a local mirror).
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    monkeypatch.setenv("PIP_FIND_LINKS", str(mirror))
    # `matrix` reads the registry (PyPI), whose answer the recorded one stands for here; --index-url's answer was
    # cached under its own URL, never as PyPI's.
    registry = Registry(root / "build" / "cache" / "registry")
    assert not registry.cache_path("torch").exists()
    registry.cache_path("torch").write_bytes((ANSWERS / "torch-next.json").read_bytes())
    listed = run_cli(root, "matrix", "--torch", "2.16", "--torch", "2.15", "--offline", timeout=60)
    assert "torch2.16-cuda-cp314-drv2" in listed.stdout and "torch2.16-cuda-cp314-drv1" not in listed.stdout


@pytest.mark.usefixtures("no_pip_find_links")
def test_no_findings_leaves_matrix_yaml_byte_identical(answers: Answers, tmp_path: Path) -> None:
    root = copy_project(tmp_path / "project")
    before = (root / "matrix.yaml").read_bytes()
    result = run_cli(root, "outdated", "--apply", "--no-probe", "--index-url", answers.url, "--variant", "cpu")
    assert result.returncode == 0, result.stderr
    assert (root / "matrix.yaml").read_bytes() == before
    assert "edited" not in result.stdout


def test_edits_that_would_break_the_matrix_leave_it_unchanged(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    path = write_matrix(OLD_MATRIX)
    before = path.read_bytes()
    registry = Registry(tmp_path / "cache", offline=True)
    (tmp_path / "cache").mkdir()
    registry.cache_path("torch").write_bytes((ANSWERS / "torch-recorded.json").read_bytes())
    registry.machine = "x86_64"
    # Python 3.9: torch 2.15.0 publishes no wheel for it, so the edited matrix would not expand.
    bad = AddRelease(
        Version("2.15.0"), "cuda", WheelSource(WheelSourceKind.REGISTRY), Python.parse("3.9"), (), None, ()
    )
    with pytest.raises(
        UpdateError,
        match=r"(?s)unchanged:\n.*matrix.yaml \(as edited\):11: torch\[2\].python\[0\]: "
        r"torch 2.15.0 \(cuda\) publishes no wheel for Python 3.9",
    ):
        write_edits(load_matrix(path), [bad], registry)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith(".")) == []


def test_set_version_of_an_entry_that_is_not_there_names_it(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"no entry for torch 2\.3\.0 \(cuda\) to move to 2\.3\.1"):
        apply_edits(tmp_path / "m.yaml", OLD_MATRIX, [SetVersion(Version("2.3.0"), "cuda", Version("2.3.1"))])
