"""Where each torch comes from: the registry, an index of its own (PyTorch's CPU builds), and a local mirror of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from loopback_http import served

from torch_buildmatrix.errors import MatrixError, RegistryError
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.model.registry import Registry, TorchSource, simple_page_files

from conftest import VALID, WriteMatrix

CPU_WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
# What download.pytorch.org/whl/cpu/torch/ serves: PEP 503 HTML, relative links, the local label percent-encoded.
PYTORCH_FILES = [
    ("2.13.0", "cp311-cp311-manylinux_2_28_x86_64", "#sha256=ab"),
    ("2.13.0", "cp312-cp312-manylinux_2_28_x86_64", "#sha256=cd"),
    ("2.13.0", "cp312-cp312-win_amd64", ""),
    ("2.12.0", "cp310-cp310-manylinux_2_28_x86_64", ""),
]
PYTORCH_PAGE = (
    "<!DOCTYPE html><html><body><h1>Links for torch</h1>\n"
    + "".join(
        f'<a href="/whl/cpu/torch-{v}%2Bcpu-{tag}.whl{frag}">torch-{v}+cpu-{tag}.whl</a><br/>\n'
        for v, tag, frag in PYTORCH_FILES
    )
    + "</body></html>"
)


def index_matrix(url: str, local: str | None) -> str:
    extra = f"\n      local-find-links: {local}" if local is not None else ""
    return VALID.replace("    wheels: pip-find-links", f"    wheels:\n      index: {url}{extra}")


def problems(path: Path) -> list[str]:
    with pytest.raises(MatrixError) as info:
        load_matrix(path)
    return [str(p) for p in info.value.problems]


def test_index_source_parses(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix(index_matrix("https://download.pytorch.org/whl/cpu/", "pip-config")))
    source = matrix.torch[1].wheels
    assert (source.kind, source.location, source.local_find_links) == (
        "index",
        "https://download.pytorch.org/whl/cpu",
        "pip-config",
    )
    assert matrix.torch[1].requirement_version == "2.13.0+cpu"  # PyTorch's index names its CPU builds so
    assert source.describe() == "index https://download.pytorch.org/whl/cpu"  # a mirror does not change it


@pytest.mark.parametrize(
    ("url", "local", "expected"),
    [
        (
            "download.pytorch.org/whl/cpu",
            None,
            "torch[1].wheels.index: str 'download.pytorch.org/whl/cpu' is not an index URL",
        ),
        (
            "https://download.pytorch.org/whl/cpu",
            "wheels/here",
            "torch[1].wheels.local-find-links: str 'wheels/here' is not allowed (allowed: an absolute directory",
        ),
    ],
)
def test_bad_index_source_is_named(write_matrix: WriteMatrix, url: str, local: str | None, expected: str) -> None:
    assert any(expected in p for p in problems(write_matrix(index_matrix(url, local))))


def test_unknown_key_in_an_index_source_gets_a_hint(write_matrix: WriteMatrix) -> None:
    text = index_matrix("https://download.pytorch.org/whl/cpu", "pip-config").replace(
        "local-find-links", "local-findlinks"
    )
    assert any(
        "unknown key 'local-findlinks'" in p and "did you mean 'local-find-links'?" in p
        for p in problems(write_matrix(text))
    )


def test_pytorch_style_html_page() -> None:
    files = simple_page_files(PYTORCH_PAGE, "https://download.pytorch.org/whl/cpu/torch/")
    assert files[0] == (
        CPU_WHEEL,
        "https://download.pytorch.org/whl/cpu/torch-2.13.0%2Bcpu-cp311-cp311-manylinux_2_28_x86_64.whl#sha256=ab",
    )
    assert len(files) == 4


def test_pep691_json_page() -> None:
    body = f'{{"files": [{{"filename": "{CPU_WHEEL}", "url": "../../f/{CPU_WHEEL}"}}]}}'
    assert simple_page_files(body, "https://x.test/simple/torch/") == [(CPU_WHEEL, f"https://x.test/f/{CPU_WHEEL}")]


@pytest.fixture
def pytorch_index(tmp_path: Path) -> Iterator[str]:
    """A stand-in for download.pytorch.org/whl/cpu on loopback: the same HTML page layout."""
    root = tmp_path / "served"
    (root / "whl" / "cpu" / "torch").mkdir(parents=True)
    (root / "whl" / "cpu" / "torch" / "index.html").write_text(PYTORCH_PAGE)
    with served(root) as url:
        yield f"{url}/whl/cpu"


def registry_for(tmp_path: Path) -> Registry:
    registry = Registry(tmp_path / "cache")
    registry.machine = "x86_64"
    return registry


def test_without_a_mirror_the_index_is_read_and_installed_from(
    write_matrix: WriteMatrix, pytorch_index: str, tmp_path: Path
) -> None:
    matrix = load_matrix(write_matrix(index_matrix(pytorch_index, str(tmp_path / "no-mirror"))))
    registry = registry_for(tmp_path)
    release = matrix.torch[1]
    assert registry.pythons(release) == {Python.parse("3.11"), Python.parse("3.12")}
    assert registry.source(release) == TorchSource(index_urls=(pytorch_index,))
    # The answer is cached per index, so a later offline run still expands the matrix.
    offline = Registry(tmp_path / "cache", offline=True)
    offline.machine = "x86_64"
    assert offline.pythons(release) == {Python.parse("3.11"), Python.parse("3.12")}


def test_a_local_mirror_holding_the_release_replaces_the_index(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / CPU_WHEEL).write_bytes(b"")
    # The index is unreachable (port 9): with the mirror, it is never asked.
    matrix = load_matrix(write_matrix(index_matrix("http://127.0.0.1:9/whl/cpu", str(mirror))))
    registry = registry_for(tmp_path)
    assert registry.source(matrix.torch[1]) == TorchSource(find_links=(str(mirror),))
    assert registry.pythons(matrix.torch[1]) == {Python.parse("3.11")}


def test_a_mirror_without_the_release_falls_back_to_the_index(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "torch-2.12.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    matrix = load_matrix(write_matrix(index_matrix("http://127.0.0.1:9/whl/cpu", str(mirror))))
    registry = registry_for(tmp_path)
    assert registry.source(matrix.torch[1]) == TorchSource(index_urls=("http://127.0.0.1:9/whl/cpu",))
    with pytest.raises(RegistryError, match=r"cannot read http://127\.0\.0\.1:9/whl/cpu/torch/ .*local-find-links"):
        registry.pythons(matrix.torch[1])


def test_pip_config_mirror(write_matrix: WriteMatrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mirror = tmp_path / "pip-wheels"
    mirror.mkdir()
    (mirror / CPU_WHEEL).write_bytes(b"")
    monkeypatch.setenv("PIP_FIND_LINKS", str(mirror))
    matrix = load_matrix(write_matrix(index_matrix("http://127.0.0.1:9/whl/cpu", "pip-config")))
    assert registry_for(tmp_path).source(matrix.torch[1]) == TorchSource(find_links=(str(mirror),))


def test_project_matrix_declares_pytorchs_cpu_index_for_2_13() -> None:
    matrix = load_matrix(Path(__file__).parents[2] / "matrix.yaml")
    release = next(r for r in matrix.torch if r.minor == "2.13")
    assert release.wheels.kind == "index" and release.wheels.location == "https://download.pytorch.org/whl/cpu"
    assert release.python == (Python.parse("3.11"),)  # the same cells whichever source serves it
