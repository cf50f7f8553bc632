"""Reading published Pythons from wheel filenames and pip's find-links configuration."""

from __future__ import annotations

import http.server
import json
import re
import threading
from pathlib import Path
from typing import ClassVar

import pytest
from packaging.version import Version

from buildmatrix.errors import RegistryError
from buildmatrix.model.matrix import TorchRelease, WheelSource
from buildmatrix.model.registry import Registry, pip_configured_find_links, pythons_from_filenames
from buildmatrix.model.vocab import Variant, WheelSourceKind

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
    release = TorchRelease(
        Version("2.13.0"), Variant.CPU, WheelSource(WheelSourceKind.FIND_LINKS, str(tmp_path)), None, ()
    )
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
    release = TorchRelease(Version("2.4.1"), Variant.CUDA, WheelSource(WheelSourceKind.REGISTRY), None, ())
    with pytest.raises(RegistryError, match="offline and no cached copy"):
        Registry(tmp_path, offline=True).pythons(release)


def test_unreachable_registry_without_cache_says_so(tmp_path: Path) -> None:
    release = TorchRelease(Version("2.4.1"), Variant.CUDA, WheelSource(WheelSourceKind.REGISTRY), None, ())
    with pytest.raises(RegistryError, match=re.escape("cannot read http://127.0.0.1:9/simple/torch/")):
        Registry(tmp_path, index_url="http://127.0.0.1:9/simple/").pythons(release)


def test_cached_answer_is_used_offline(tmp_path: Path) -> None:
    (tmp_path / "torch.json").write_text(json.dumps({"files": [{"filename": FILES[0][0], "url": "x"}]}))
    release = TorchRelease(Version("2.4.1"), Variant.CUDA, WheelSource(WheelSourceKind.REGISTRY), None, ())
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


class OneAnswer(http.server.BaseHTTPRequestHandler):
    """A PEP 691 index on 127.0.0.1 that lists one torch wheel and counts the requests."""

    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = json.dumps({"files": [{"filename": FILES[0][0], "url": "https://example.invalid/" + FILES[0][0]}]})
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("damage", [b'{"files": [{"filen', b"\xff\xfe not json", b'{"files": [{"url": "x"}]}', b"[]"])
def test_damaged_cache_is_fetched_again(tmp_path: Path, damage: bytes) -> None:
    (tmp_path / "torch.json").write_bytes(damage)  # fresh by its mtime, but truncated or not an index answer
    OneAnswer.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), OneAnswer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        registry = Registry(tmp_path, index_url=f"http://127.0.0.1:{server.server_address[1]}/simple/")
        registry.machine = "x86_64"
        release = TorchRelease(Version("2.4.1"), Variant.CUDA, WheelSource(WheelSourceKind.REGISTRY), None, ())
        assert registry.pythons(release) == {Version("3.11")}
    finally:
        server.shutdown()
    assert OneAnswer.hits == ["/simple/torch/"]
    assert json.loads((tmp_path / "torch.json").read_text())["files"][0]["filename"] == FILES[0][0]  # repaired


def test_damaged_cache_offline_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "torch.json").write_text('{"files": [')
    release = TorchRelease(Version("2.4.1"), Variant.CUDA, WheelSource(WheelSourceKind.REGISTRY), None, ())
    with pytest.raises(RegistryError, match=r"offline and the cached registry answer .*torch.json is damaged"):
        Registry(tmp_path, offline=True).pythons(release)


def test_refresh_asks_again_although_the_cache_is_fresh(tmp_path: Path) -> None:
    (tmp_path / "torch.json").write_text(json.dumps({"files": []}))
    OneAnswer.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), OneAnswer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/simple/"
        release = TorchRelease(Version("2.4.1"), Variant.CUDA, WheelSource(WheelSourceKind.REGISTRY), None, ())
        assert Registry(tmp_path, index_url=url).pythons(release) == set()  # fresh cache, no request
        fresh = Registry(tmp_path, index_url=url, refresh=True)
        fresh.machine = "x86_64"
        assert fresh.pythons(release) == {Version("3.11")}
    finally:
        server.shutdown()
    assert OneAnswer.hits == ["/simple/torch/"]
