"""Reading published Pythons from wheel filenames and pip's find-links configuration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

from buildmatrix.model.matrix import TorchRelease, WheelSource
from buildmatrix.model.registry import Registry, RegistryError, pip_configured_find_links, pythons_from_filenames

FILES = [
    ("torch-2.4.1-cp311-cp311-manylinux1_x86_64.whl", "u1"),
    ("torch-2.4.1-cp312-cp312-manylinux1_x86_64.whl", "u2"),
    ("torch-2.4.1-cp312-cp312-manylinux2014_aarch64.whl", "u3"),
    ("torch-2.4.1-cp313-cp313-win_amd64.whl", "u4"),
    ("torch-2.4.0-cp38-cp38-manylinux1_x86_64.whl", "u5"),
    ("torch-2.15.0-cp314-cp314t-manylinux_2_28_x86_64.whl", "u6"),
    ("torch-2.4.1.tar.gz", "u7"),
    ("not-a-wheel.whl", "u8"),
]


def test_only_exact_version_cpython_linux_of_this_machine() -> None:
    found = pythons_from_filenames(FILES, Version("2.4.1"), "x86_64")
    assert sorted(str(w.python) for w in found) == ["3.11", "3.12"]


def test_free_threaded_wheels_are_not_counted() -> None:
    assert pythons_from_filenames(FILES, Version("2.15.0"), "x86_64") == []


def test_find_links_directory(tmp_path: Path) -> None:
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    (tmp_path / "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"")
    release = TorchRelease(Version("2.13.0"), "cpu", WheelSource("find-links", str(tmp_path)), None, ())
    registry = Registry(tmp_path / "cache")
    registry.machine = "x86_64"
    assert registry.pythons(release) == {Version("3.11")}


def test_pip_find_links_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_FIND_LINKS", "/a /b")
    assert pip_configured_find_links() == ["/a", "/b"]


def test_pip_find_links_from_config_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nfind-links = /wheels/here\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    assert pip_configured_find_links() == ["/wheels/here"]


def test_offline_without_cache_says_so(tmp_path: Path) -> None:
    release = TorchRelease(Version("2.4.1"), "cuda", WheelSource("registry"), None, ())
    with pytest.raises(RegistryError, match="offline and no cached copy"):
        Registry(tmp_path, offline=True).pythons(release)


def test_unreachable_registry_without_cache_says_so(tmp_path: Path) -> None:
    release = TorchRelease(Version("2.4.1"), "cuda", WheelSource("registry"), None, ())
    with pytest.raises(RegistryError, match="cannot read http://127.0.0.1:9/simple/torch/"):
        Registry(tmp_path, index_url="http://127.0.0.1:9/simple/").pythons(release)


def test_cached_answer_is_used_offline(tmp_path: Path) -> None:
    (tmp_path / "torch.json").write_text(json.dumps({"files": [{"filename": FILES[0][0], "url": "x"}]}))
    release = TorchRelease(Version("2.4.1"), "cuda", WheelSource("registry"), None, ())
    registry = Registry(tmp_path, offline=True)
    registry.machine = "x86_64"
    assert registry.pythons(release) == {Version("3.11")}


def test_yank_status_from_json_html_and_old_caches(tmp_path: Path) -> None:
    from buildmatrix.model.registry import simple_page_entries

    page = "https://example.invalid/simple/torch/"
    body = json.dumps(
        {
            "files": [
                {"filename": "a.whl", "url": "a.whl", "yanked": False},
                {"filename": "b.whl", "url": "b.whl", "yanked": True},
                {"filename": "c.whl", "url": "c.whl", "yanked": "broken"},
                {"filename": "d.whl", "url": "d.whl"},
            ]
        }
    )
    assert [f.yanked for f in simple_page_entries(body, page)] == [None, "", "broken", None]
    html = '<a href="a.whl">a.whl</a><a href="b.whl" data-yanked>b.whl</a><a href="c.whl" data-yanked="bad">c.whl</a>'
    assert [(f.url, f.yanked) for f in simple_page_entries(html, page)] == [
        (page + "a.whl", None),
        (page + "b.whl", ""),
        (page + "c.whl", "bad"),
    ]
    # A cache written before yank status was kept: PyPI's raw answer, "yanked": false on every file.
    (tmp_path / "torch.json").write_text(body)
    assert [f.yanked for f in Registry(tmp_path, offline=True).index_entries("torch")] == [None, "", "broken", None]
