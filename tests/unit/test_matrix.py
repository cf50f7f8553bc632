"""matrix.yaml parsing: every user mistake names file, line, key, the bad value and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from torch_buildmatrix.errors import MatrixError
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import torch_selector
from torch_buildmatrix.model.pythons import Python

from conftest import VALID, WriteMatrix


def problems(path: Path) -> list[str]:
    with pytest.raises(MatrixError) as info:
        load_matrix(path)
    return [str(p) for p in info.value.problems]


def test_valid_matrix_parses(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix())
    assert [str(r.version) for r in matrix.torch] == ["2.4.1", "2.13.0"]
    assert matrix.torch[0].variant == "cuda" and matrix.torch[0].wheels.kind == "registry"
    assert matrix.torch[1].variant == "cpu" and matrix.torch[1].requirement_version == "2.13.0+cpu"
    assert matrix.sdk is not None and [v.major for v in matrix.sdk.versions] == [1, 2]
    assert [v.tag for v in matrix.sdk.versions] == ["drv1", "drv2"]
    assert matrix.python == (Python.parse("3.9"), Python.parse("3.10"), Python.parse("3.11"))


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "runner: auto",
            "runner: autp",
            ["matrix.yaml:22: runner: 'autp' is not allowed (allowed: auto, local, docker); did you mean 'auto'?"],
        ),
        (
            'python: ["3.9", "3.10", "3.11"]',
            "python: [3.9, 3.10]",
            [
                "matrix.yaml:15: python[0]: 3.9 is a number; quote versions",
                "matrix.yaml:15: python[1]: 3.10 is a number (YAML reads it as 3.1)",
            ],
        ),
        (
            "    variant: cpu",
            "    variant: ROCm",
            ["matrix.yaml:20: torch[1].variant: 'ROCm' is not a variant name (allowed: lowercase letters, digits"],
        ),
        (
            "    patches: [pre-2.7]",
            "    patches: [pre-2.8]",
            ["torch[0].patches[0]: no patch series 'pre-2.8'", "did you mean 'pre-2.7'?"],
        ),
        (
            '  - version: "2.4.1"',
            '  - version: "two"',
            ["matrix.yaml:17: torch[0].version: 'two' is not a valid version"],
        ),
        (
            "runner: auto",
            "runner: auto\nrunners: local",
            ["matrix.yaml:23: runners: unknown key 'runners'", "did you mean 'runner'?"],
        ),
        ("  version: 0.1.0\n", "", ["plugin: missing required key 'version'"]),
        ("    wheels: pip-find-links", "    wheels: ftp", ["torch[1].wheels: str 'ftp' is not allowed"]),
        (
            '  - version: "2.13.0"\n    variant: cpu',
            '  - version: "2.4.0"\n    variant: cuda',
            ["torch 2.4 (cuda) is already declared at torch[0]; one entry per torch minor and variant"],
        ),
        ("runner: auto", 'runner: auto\nexclude: [{torch: "x.y"}]', ["exclude[0].torch: 'x.y' is neither a version"]),
        (
            "runner: auto",
            'runner: auto\ninclude: [{torch: "2.4"}]',
            ["include[0]: an include rule names torch, python and sdk"],
        ),
        ('versions: ["1.4", "2.1"]', 'versions: ["2.0", "2.1"]', ["two versions share an API major"]),
    ],
)
def test_bad_matrix_names_line_key_and_allowed(
    write_matrix: WriteMatrix, old: str, new: str, expected: list[str]
) -> None:
    assert old in VALID
    found = "\n".join(problems(write_matrix(VALID.replace(old, new))))
    for fragment in expected:
        assert fragment in found, found


def test_all_problems_reported_at_once(write_matrix: WriteMatrix) -> None:
    text = VALID.replace("runner: auto", "runner: nope").replace("variant: cpu", "variant: T.P.U")
    assert len(problems(write_matrix(text))) == 2


def test_yaml_syntax_error_names_line(write_matrix: WriteMatrix) -> None:
    found = problems(write_matrix(VALID + "torch: [\n"))
    # The unclosed bracket opens on line 18; the parser notices at the end of the file.
    assert found and "(syntax)" in found[0] and "matrix.yaml:24:" in found[0]


def test_missing_file_is_a_matrix_error(tmp_path: Path) -> None:
    found = problems(tmp_path / "nope.yaml")
    assert "cannot read the matrix file" in found[0]


@pytest.mark.parametrize(
    ("text", "inside", "outside"),
    [
        ("2.4", ["2.4.0", "2.4.1"], ["2.5.0", "2.3.1"]),
        ("2.4.1", ["2.4.1"], ["2.4.0"]),
        (">=2.4,<2.6", ["2.5.1"], ["2.6.0"]),
    ],
)
def test_torch_selector(text: str, inside: list[str], outside: list[str]) -> None:
    spec = torch_selector(text)
    assert all(spec.contains(v) for v in inside)
    assert not any(spec.contains(v) for v in outside)


def test_project_matrix_is_valid() -> None:
    matrix = load_matrix(Path(__file__).parents[2] / "matrix.yaml")
    assert any(r.minor == "2.13" and r.variant == "cpu" for r in matrix.torch)


def test_timeouts_default_and_override(write_matrix: WriteMatrix) -> None:
    assert load_matrix(write_matrix()).timeouts["build"] == 3600
    matrix = load_matrix(write_matrix(VALID + "timeouts:\n  build: 90\n  smoke: 12.5\n"))
    assert (matrix.timeouts["build"], matrix.timeouts["smoke"], matrix.timeouts["build-env"]) == (90, 12.5, 3600)


def test_bad_timeouts_name_key_value_and_allowed(write_matrix: WriteMatrix) -> None:
    found = problems(write_matrix(VALID + "timeouts:\n  build: -1\n  smoek: 5\n  smoke: yes\n"))
    assert any("timeouts.build" in p and "-1 is not a positive number of seconds" in p for p in found)
    assert any("timeouts.smoek" in p and "did you mean 'smoke'?" in p for p in found)
    assert any("timeouts.smoke" in p and "True is not a positive number" in p for p in found)


# ---- one torch minor, two variants (torch 2.13: the CPU build on cp311, the registry's CUDA build on cp314) ----------

CPU_213 = '  - version: "2.13.0"\n    variant: cpu\n    wheels: pip-find-links\n'


def with_cuda_213(cpu_python: str | None, cuda_python: str | None) -> str:
    """VALID with a second, CUDA entry of torch 2.13; each entry's python list given, or none."""
    cpu = CPU_213 + (f"    python: {cpu_python}\n" if cpu_python else "")
    cuda = '  - version: "2.13.0"\n' + (f"    python: {cuda_python}\n" if cuda_python else "")
    assert CPU_213 in VALID
    return VALID.replace(CPU_213, cpu + cuda)


def test_a_minor_may_have_two_variants_on_pythons_of_their_own(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix(with_cuda_213('["3.11"]', '["3.10"]')))
    assert [(r.minor, r.variant, r.python) for r in matrix.torch if r.minor == "2.13"] == [
        ("2.13", "cpu", (Python.parse("3.11"),)),
        ("2.13", "cuda", (Python.parse("3.10"),)),
    ]
    assert matrix.release("2.13") is matrix.torch[1]  # the first entry of the minor (patch series are per minor)


@pytest.mark.parametrize(
    ("cpu_python", "cuda_python", "expected"),
    [
        # both on Python 3.11: the two plugin wheels would have one file name
        (
            '["3.11"]',
            '["3.10", "3.11"]',
            "matrix.yaml:24: torch[2].python[1]: Python 3.11 is already built from torch 2.13 at torch[1] (cpu); "
            "each variant of one torch minor needs Pythons of its own",
        ),
        # the second entry would take the matrix-wide list, which may overlap
        (
            '["3.11"]',
            None,
            "matrix.yaml:23: torch[2].version: torch 2.13 is already declared at torch[1]; one entry per torch minor, "
            "or one per variant (that one is cpu) when both list their own Pythons and share none",
        ),
        (None, '["3.10"]', "torch[2].version: torch 2.13 is already declared at torch[1]; one entry per torch minor"),
    ],
)
def test_two_variants_of_a_minor_that_could_share_a_wheel_name_are_refused(
    write_matrix: WriteMatrix, cpu_python: str | None, cuda_python: str | None, expected: str
) -> None:
    found = problems(write_matrix(with_cuda_213(cpu_python, cuda_python)))
    assert len(found) == 1 and expected in found[0], found
