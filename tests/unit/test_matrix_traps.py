"""Every matrix.yaml trap is a located error (file:line:key, bad value, what is allowed), never a silent change."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torch_buildmatrix.docker.images import ImageBuilder
from torch_buildmatrix.errors import MatrixError, StepFailed
from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.model.registry import Registry, published_pythons

from conftest import VALID, WriteMatrix, copy_project, run_cli

BOMB = """\
a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


def problems(path: Path) -> str:
    with pytest.raises(MatrixError) as info:
        load_matrix(path)
    return "\n".join(str(p) for p in info.value.problems)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # an unquoted number loses digits: 2.10 would select torch 2.1
        (
            "runner: auto",
            "runner: auto\nexclude: [{torch: 2.10}]",
            'matrix.yaml:23: exclude[0].torch: 2.10 is a number (YAML reads it as 2.1); quote versions, e.g. "2.10"',
        ),
        (
            "runner: auto",
            "runner: auto\nexclude: [{sdk: 1}]",
            'matrix.yaml:23: exclude[0].sdk: 1 is a number; quote versions, e.g. "1"',
        ),
        ("  version: 0.1.0", "  version: 1", "matrix.yaml:4: plugin.version: 1 is a number; quote versions"),
        ('  - version: "2.4.1"', "  - version: 2.4", "matrix.yaml:17: torch[0].version: 2.4 is a number"),
        (
            "runner: auto",
            "runner: auto\nrunner: local",
            "matrix.yaml:23: runner: duplicate key 'runner' (first at line 22)",
        ),
        (
            "  source: plugin\n",
            "  source: plugin\n  source: other\n",
            "matrix.yaml:6: plugin.source: duplicate key 'source' (first at line 5)",
        ),
        (
            'python: ["3.9", "3.10", "3.11"]',
            'python: ["3.9", "3.11", "3.11.0"]',
            "matrix.yaml:15: python[2]: '3.11.0' is not a Python minor",
        ),
        (
            'python: ["3.9", "3.10", "3.11"]',
            'python: ["3.9", "3.11", "3.11"]',
            "matrix.yaml:15: python[2]: '3.11' repeats python[1]",
        ),
        ('python: ["3.9", "3.10", "3.11"]', "python: null", "matrix.yaml:15: python: expected a list, got nothing"),
        ('python: ["3.9", "3.10", "3.11"]', "python: []", "matrix.yaml:15: python: needs at least one version"),
        (
            'python: ["3.9", "3.10", "3.11"]',
            f"python: [{'7' * 5000}]",
            "matrix.yaml:15: python[0]: a value of 5000 characters (at most 1000)",
        ),
        (
            "runner: auto",
            "runner: auto\nx: " + "[" * 5000 + "]" * 5000,
            "matrix.yaml:23: (nesting): lists and mappings nested more than 32 deep",
        ),
        (
            "runner: auto",
            "runner: auto\n" + BOMB,
            "matrix.yaml:27: e: expands to more than 20000 values with its YAML aliases",
        ),
        (
            VALID[VALID.index("torch:") : VALID.index("runner:")],
            "torch: null\n",
            "matrix.yaml:16: torch: expected a list, got nothing",
        ),
        # one entry per torch minor: a cpu and a cuda 2.4 would publish the same wheel file name
        (
            '  - version: "2.13.0"',
            '  - version: "2.4.0"',
            "matrix.yaml:19: torch[1].version: torch 2.4 is already declared at torch[0]; one entry per torch minor",
        ),
        (
            "    wheels: pip-find-links",
            "    wheels: {find-links: wheelhouse}",
            "matrix.yaml:21: torch[1].wheels.find-links: 'wheelhouse' is not absolute",
        ),
        (
            "    wheels: pip-find-links",
            "    wheels: {find-links: /nonexistent/wheels}",
            "torch[1].wheels.find-links: '/nonexistent/wheels' is not a directory",
        ),
        # paths in matrix.yaml stay inside the project; names that become paths are plain names
        ("  source: plugin\n", "  source: /etc\n", "matrix.yaml:5: plugin.source: '/etc' is outside the project"),
        ("  source: plugin\n", "  source: ../..\n", "matrix.yaml:5: plugin.source: '../..' is outside the project"),
        ("  source: driver", "  source: /usr", "matrix.yaml:13: sdk.source: '/usr' is outside the project"),
        (
            "  smoke-tests: plugin/tests",
            "  smoke-tests: driver",
            "plugin.smoke-tests: 'driver' is outside plugin.source 'plugin'",
        ),
        (
            "    patches: [pre-2.7]",
            "    patches: [../../etc]",
            "matrix.yaml:18: torch[0].patches[0]: expected a series name",
        ),
        (
            "runner: auto",
            'runner: auto\nimages: {deb: {base: "debootstrap:../../X", python: ["3.11"]}}',
            "matrix.yaml:23: images.deb.base: 'debootstrap:../../X' is neither debootstrap:<suite>",
        ),
        (
            "runner: auto",
            'runner: auto\nimages: {deb: {base: "/srv/rootfs", python: ["3.11"]}}',
            "bases are names, never paths",
        ),
        (
            "runner: auto",
            'runner: auto\nimages: {"../x": {base: "debian:12", python: ["3.11"]}}',
            "images.../x: image name str '../x' is not a plain name",
        ),
    ],
)
def test_trap_is_a_located_error(write_matrix: WriteMatrix, old: str, new: str, expected: str) -> None:
    assert old in VALID
    found = problems(write_matrix(VALID.replace(old, new, 1)))
    assert expected in found, found


def test_non_utf8_byte_names_line_and_column(write_matrix: WriteMatrix) -> None:
    path = write_matrix()
    path.write_bytes(path.read_bytes().replace(b"runner: auto", b"runner: aut\xe9"))
    assert "matrix.yaml:22: (encoding): byte 0xe9 at column 12 is not UTF-8" in problems(path)


def test_valid_image_references_are_accepted(write_matrix: WriteMatrix) -> None:
    images = (
        'images:\n  a: {base: "debootstrap:bookworm", python: ["3.11"]}\n'
        '  b: {base: "quay.io/pypa/manylinux_2_28_x86_64:2024.11.16-1", python: ["3.11"]}\n'
        '  c: {base: "localhost:5000/debian:12", python: ["3.11"]}\n'
    )
    matrix = load_matrix(write_matrix(VALID + images))
    assert [i.base for i in matrix.images][1] == "quay.io/pypa/manylinux_2_28_x86_64:2024.11.16-1"


def test_debootstrap_suite_cannot_delete_outside_the_cache(tmp_path: Path) -> None:
    victim = tmp_path / "X"
    victim.mkdir()
    (victim / "keep").write_text("precious")
    builder = ImageBuilder(tmp_path / "cache" / "a")
    with pytest.raises(StepFailed, match="would lead outside"):
        builder._debootstrap_base("../../../X", "buildmatrix-base:x", tmp_path / "log")
    assert (victim / "keep").read_text() == "precious"


# ---- expansion ------------------------------------------------------------------------------------------------


def test_exclude_that_matches_nothing(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix(VALID + 'exclude: [{torch: "2.99"}]\n'))
    with pytest.raises(MatrixError, match=r"matrix.yaml:23: exclude\[0\]: matches no cell of the matrix"):
        expand(matrix, {r: {Python.parse("3.11")} for r in matrix.torch})


def test_matrix_that_expands_to_no_cell(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix(VALID + 'exclude: [{python: "3.11"}]\n'))
    with pytest.raises(MatrixError, match=r"matrix.yaml:23: exclude: the matrix expands to no cell at all"):
        expand(matrix, {r: {Python.parse("3.11")} for r in matrix.torch})


# ---- torch versions must exist, with their variant, where the matrix says --------------------------------------


def registry_with(tmp_path: Path, files: list[str] | None) -> Registry:
    cache = tmp_path / "cache"
    cache.mkdir()
    body: dict[str, object] = (
        {"meta": {}} if files is None else {"files": [{"filename": f, "url": f"https://x/{f}"} for f in files]}
    )
    registry = Registry(cache, offline=True)
    registry.cache_path("torch").write_text(json.dumps(body))
    registry.machine = "x86_64"
    return registry


def find_links(tmp_path: Path, *names: str) -> Path:
    directory = tmp_path / "find-links"
    directory.mkdir()
    for name in names:
        (directory / name).write_bytes(b"")
    return directory


CPU_213 = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
CUDA_241 = "torch-2.4.1-cp311-cp311-manylinux1_x86_64.whl"


@pytest.mark.parametrize(
    ("registry_files", "find_links_files", "variant", "expected"),
    [
        # "2.4.1" written as "2.4.3": the release would silently leave the matrix
        (
            ["torch-2.4.0-cp311-cp311-manylinux1_x86_64.whl", "torch-2.5.0-cp311-cp311-manylinux1_x86_64.whl"],
            [CPU_213],
            "cpu",
            "matrix.yaml:17: torch[0].version: torch 2.4.1 (cuda) is not on https://pypi.org/simple/torch/ "
            "(it has: 2.4.0)",
        ),
        (
            None,
            [CPU_213],
            "cpu",
            # an index page listing no wheel is never an answer: cached, it is a damaged one
            "torch[0].wheels: offline and the cached registry answer",
        ),
        (
            ["torch-2.4.1-cp311-cp311-win_amd64.whl"],
            [CPU_213],
            "cpu",
            "torch 2.4.1 on https://pypi.org/simple/torch/ has no CPython Linux x86_64 wheel",
        ),
        # variant: cuda from find-links that hold only the +cpu build
        (
            [CUDA_241],
            [CPU_213],
            "cuda",
            "matrix.yaml:19: torch[1].version: torch 2.13.0+cuda (cuda) is not on find-links",
        ),
    ],
)
def test_release_without_wheels_is_a_located_error(
    write_matrix: WriteMatrix,
    tmp_path: Path,
    registry_files: list[str] | None,
    find_links_files: tuple[str, ...],
    *,
    variant: str,
    expected: str,
) -> None:
    links = find_links(tmp_path, *find_links_files)
    text = VALID.replace("wheels: pip-find-links", f"wheels: {{find-links: {links}}}").replace(
        "variant: cpu", f"variant: {variant}"
    )
    matrix = load_matrix(write_matrix(text))
    with pytest.raises(MatrixError) as info:
        published_pythons(matrix, registry_with(tmp_path, registry_files))
    found = "\n".join(str(p) for p in info.value.problems)
    assert expected in found, found


def test_pip_configured_relative_find_links_is_a_located_error(
    write_matrix: WriteMatrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_FIND_LINKS", "wheelhouse")
    matrix = load_matrix(write_matrix())
    with pytest.raises(
        MatrixError, match=r"matrix.yaml:21: torch\[1\].wheels: find-links location 'wheelhouse' is not an absolute"
    ):
        published_pythons(matrix, registry_with(tmp_path, [CUDA_241]))


def test_damaged_registry_cache_is_an_error_naming_it(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    registry = registry_with(tmp_path, [])
    registry.cache_path("torch").write_text('{"files": [1, 2]}')
    matrix = load_matrix(write_matrix())
    with pytest.raises(
        MatrixError, match=r"torch\[0\]\.wheels: offline and the cached registry answer .*torch-\w+\.json is damaged"
    ):
        published_pythons(matrix, registry)
    # Offline, nothing can replace it: the damaged answer is left for the next online run to fetch again.
    assert registry.cache_path("torch").read_text() == '{"files": [1, 2]}'


# ---- end to end: the command fails, names the place, prints no traceback and changes nothing ----------------------


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    root = copy_project(tmp_path / "project")
    # The registry answer for every release of the real matrix, offline: CPython 3.9 to 3.15 wheels each, and the
    # free-threaded cp313t ones torch publishes for 2.7 to 2.12.
    matrix = load_matrix(root / "matrix.yaml")
    files = [
        f"torch-{r.version}-cp3{m}-cp3{m}-manylinux_2_28_x86_64.whl"
        for r in matrix.torch
        for m in (9, 10, 11, 12, 13, 14, 15)
    ] + [
        f"torch-{r.version}-cp313-cp313t-manylinux_2_28_x86_64.whl"
        for r in matrix.torch
        if (2, 7) <= r.version.release[:2] <= (2, 12)
    ]
    (root / "build" / "cache" / "registry").mkdir(parents=True)
    Registry(root / "build" / "cache" / "registry").cache_path("torch").write_text(
        json.dumps({"files": [{"filename": f, "url": f} for f in files]})
    )
    links = root / "build" / "find-links"
    links.mkdir()
    for m in (9, 10, 11, 12, 13):
        (links / f"torch-2.13.0+cpu-cp3{m}-cp3{m}-manylinux_2_28_x86_64.whl").write_bytes(b"")
    # torch 2.13 from a find-links directory of the copy, so the test reads nothing of this machine's pip setup
    text = re.sub(
        r"    wheels:\n      index: .*\n      local-find-links: .*\n",
        f"    wheels: {{find-links: {links}}}\n",
        (root / "matrix.yaml").read_text(),
    )
    assert str(links) in text
    (root / "matrix.yaml").write_text(text)
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in [root / "README.md", *sorted((root / "docs").rglob("*"))]
        if p.is_file()
    }


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            '"2.15.0"',
            '"2.15.3"',
            "torch[15].version: torch 2.15.3 (cuda) is not on https://pypi.org/simple/torch/ (it has: 2.15.0)",
        ),
        (
            '{torch: "2.14", sdk: "1"}',
            '{torch: 2.10, sdk: "1"}',
            "exclude[2].torch: 2.10 is a number (YAML reads it as 2.1)",
        ),
        ("runner: auto", "runner: auto\n" + BOMB, "e: expands to more than 20000 values"),
        (
            '{torch: "2.2", sdk: "1"}',
            '{torch: "2.2", sdk: "1"}\n  - {sdk: "2"}\n  - {sdk: "1"}',
            "the matrix expands to no cell at all",
        ),
    ],
)
def test_compat_table_refuses_a_bad_matrix_and_changes_nothing(
    project_copy: Path, old: str, new: str, expected: str
) -> None:
    root = project_copy
    assert run_cli(root, "compat-table", "--offline", "--first-publish", timeout=120).returncode in (
        0,
        1,
    )  # the good matrix publishes
    before = snapshot(root)
    text = (root / "matrix.yaml").read_text()
    assert old in text
    (root / "matrix.yaml").write_text(text.replace(old, new, 1))
    result = run_cli(root, "compat-table", "--offline", timeout=60)
    assert result.returncode == 3, result.stdout + result.stderr
    said = (result.stdout + result.stderr).replace("\n", "")  # rich wraps long lines
    assert expected in said, said
    assert "/project/matrix.yaml:" in said
    assert "Traceback" not in result.stderr
    assert snapshot(root) == before


def test_the_project_root_is_not_a_source(write_matrix: WriteMatrix) -> None:
    found = problems(write_matrix(VALID.replace("  source: driver", "  source: .", 1)))
    assert "matrix.yaml:13: sdk.source: '.' is the project itself (allowed: a directory inside" in found, found


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "  distribution: torch-emu",
            "  distribution: ../../x",
            "matrix.yaml:3: plugin.distribution: '../../x' is not",
        ),
        (
            "  distribution: emu-driver",
            "  distribution: a/b",
            "matrix.yaml:12: sdk.distribution: 'a/b' is not",
        ),
    ],
)
def test_distribution_names_are_names(write_matrix: WriteMatrix, old: str, new: str, expected: str) -> None:
    """They name wheel files and glob patterns, so never a path."""
    found = problems(write_matrix(VALID.replace(old, new, 1)))
    assert expected in found and "allowed: letters, digits, . _ -" in found, found


# ---- anything at any key: a Matrix or a MatrixError, never another exception -----------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["2.4", "3.11", "3.11.0", "cpu", "cuda", "../x", "/etc", "debootstrap:../X", "pip-find-links"]),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_PATHS = [
    ("plugin",),
    ("plugin", "version"),
    ("plugin", "source"),
    ("plugin", "smoke-tests"),
    ("plugin", "distribution"),
    ("plugin", "label"),
    ("sdk",),
    ("sdk", "kind"),
    ("sdk", "id"),
    ("sdk", "versions"),
    ("sdk", "source"),
    ("variants",),
    ("python",),
    ("torch",),
    ("torch", 0),
    ("torch", 0, "version"),
    ("torch", 0, "python"),
    ("torch", 0, "patches"),
    ("torch", 1, "wheels"),
    ("torch", 1, "variant"),
    ("exclude",),
    ("include",),
    ("images",),
    ("runner",),
    ("schema-version",),
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(_PATHS), value=_values)
def test_any_value_anywhere_is_a_matrix_or_a_located_error(
    write_matrix: WriteMatrix, where: tuple[str | int, ...], value: object
) -> None:
    document = yaml.safe_load(VALID)
    target = document
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    path = write_matrix(yaml.safe_dump(document))
    try:
        matrix = load_matrix(path)
        expand(matrix, {r: {Python.parse("3.9"), Python.parse("3.10"), Python.parse("3.11")} for r in matrix.torch})
    except MatrixError as exc:
        assert exc.problems and all(p.file == str(path) and p.key for p in exc.problems)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=st.integers(min_value=0, max_value=VALID.count("\n")), junk=st.binary(max_size=40))
def test_any_bytes_anywhere_is_a_matrix_or_a_located_error(write_matrix: WriteMatrix, line: int, junk: bytes) -> None:
    lines = VALID.encode().split(b"\n")
    path = write_matrix()
    path.write_bytes(b"\n".join([*lines[:line], junk, *lines[line:]]))
    try:
        load_matrix(path)
    except MatrixError as exc:
        assert exc.problems and all(p.file == str(path) and p.key for p in exc.problems)


def test_nul_byte_names_its_line(write_matrix: WriteMatrix) -> None:
    path = write_matrix()
    path.write_bytes(path.read_bytes().replace(b"runner: auto", b"runner: a\x00uto"))
    assert "matrix.yaml:22: (encoding): character U+0000 is not allowed in YAML" in problems(path)
