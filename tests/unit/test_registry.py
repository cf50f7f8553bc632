"""Reading published Pythons from wheel filenames and pip's find-links configuration."""

from __future__ import annotations

import http.server
import json
import os
import re
from pathlib import Path
from typing import ClassVar

import pytest
from loopback_http import running
from packaging.version import Version

from torch_buildmatrix.errors import RegistryError
from torch_buildmatrix.model.matrix import TorchRelease, WheelSource
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.model.registry import PEP691, Registry, pip_configured_find_links, pythons_from_filenames
from torch_buildmatrix.vocab import WheelSourceKind

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


def test_free_threaded_wheels_are_their_own_python() -> None:
    # A cp314t wheel is for the free-threaded 3.14, not for 3.14: a release may publish either without the other.
    assert [str(w.python) for w in pythons_from_filenames(FILES, Version("2.15.0"), "x86_64")] == ["3.14t"]


def test_find_links_directory(tmp_path: Path) -> None:
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    (tmp_path / "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"")
    release = TorchRelease(Version("2.13.0"), "cpu", WheelSource(WheelSourceKind.FIND_LINKS, str(tmp_path)), None, ())
    registry = Registry(tmp_path / "cache")
    registry.machine = "x86_64"
    assert registry.pythons(release) == {Python.parse("3.11")}


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
    release = TorchRelease(Version("2.4.1"), "cuda", WheelSource(WheelSourceKind.REGISTRY), None, ())
    with pytest.raises(RegistryError, match="offline and no cached copy"):
        Registry(tmp_path, offline=True).pythons(release)


def test_unreachable_registry_without_cache_says_so(tmp_path: Path) -> None:
    release = TorchRelease(Version("2.4.1"), "cuda", WheelSource(WheelSourceKind.REGISTRY), None, ())
    with pytest.raises(RegistryError, match=re.escape("cannot read http://127.0.0.1:9/simple/torch/")):
        Registry(tmp_path, index_url="http://127.0.0.1:9/simple/").pythons(release)


def default_cache(cache_dir: Path) -> Path:
    """The cache file of the registry's torch page."""
    return Registry(cache_dir).cache_path("torch")


def test_cached_answer_is_used_offline(tmp_path: Path) -> None:
    default_cache(tmp_path).write_text(json.dumps({"files": [{"filename": FILES[0][0], "url": "x"}]}))
    release = TorchRelease(Version("2.4.1"), "cuda", WheelSource(WheelSourceKind.REGISTRY), None, ())
    registry = Registry(tmp_path, offline=True)
    registry.machine = "x86_64"
    assert registry.pythons(release) == {Python.parse("3.11")}


def test_yank_status_from_json_html_and_old_caches(tmp_path: Path) -> None:
    from torch_buildmatrix.model.registry import simple_page_entries

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
    default_cache(tmp_path).write_text(body)
    assert [f.yanked for f in Registry(tmp_path, offline=True).index_entries("torch")] == [None, "", "broken", None]


class OneAnswer(http.server.BaseHTTPRequestHandler):
    """A PEP 691 index on 127.0.0.1 that lists one torch wheel and counts the requests."""

    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        file = {"filename": FILES[0][0], "url": "https://example.invalid/" + FILES[0][0]}
        body = json.dumps({"meta": {"api-version": "1.1"}, "name": "torch", "files": [file]})
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("damage", [b'{"files": [{"filen', b"\xff\xfe not json", b'{"files": [{"url": "x"}]}', b"[]"])
def test_damaged_cache_is_fetched_again(tmp_path: Path, damage: bytes) -> None:
    OneAnswer.hits = []
    with running(OneAnswer) as root:
        registry = Registry(tmp_path, index_url=f"{root}/simple/")
        cache = registry.cache_path("torch")
        cache.write_bytes(damage)  # fresh by its mtime, but truncated or not an index answer
        registry.machine = "x86_64"
        release = TorchRelease(Version("2.4.1"), "cuda", WheelSource(WheelSourceKind.REGISTRY), None, ())
        assert registry.pythons(release) == {Python.parse("3.11")}
    assert OneAnswer.hits == ["/simple/torch/"]
    assert json.loads(cache.read_text())["files"][0]["filename"] == FILES[0][0]  # repaired


def test_damaged_cache_offline_is_an_error_naming_it(tmp_path: Path) -> None:
    default_cache(tmp_path).write_text('{"files": [')
    release = TorchRelease(Version("2.4.1"), "cuda", WheelSource(WheelSourceKind.REGISTRY), None, ())
    with pytest.raises(RegistryError, match=r"offline and the cached registry answer .*torch-\w+.json is damaged"):
        Registry(tmp_path, offline=True).pythons(release)


def test_refresh_asks_again_although_the_cache_is_fresh(tmp_path: Path) -> None:
    OneAnswer.hits = []
    with running(OneAnswer) as root:
        url = f"{root}/simple/"
        cached = Registry(tmp_path, index_url=url)
        cached.machine = "x86_64"
        cached.cache_path("torch").write_text(json.dumps({"files": [{"filename": FILES[1][0], "url": "u2"}]}))
        release = TorchRelease(Version("2.4.1"), "cuda", WheelSource(WheelSourceKind.REGISTRY), None, ())
        assert cached.pythons(release) == {Python.parse("3.12")}  # fresh cache, no request
        fresh = Registry(tmp_path, index_url=url, refresh=True)
        fresh.machine = "x86_64"
        assert fresh.pythons(release) == {Python.parse("3.11")}
    assert OneAnswer.hits == ["/simple/torch/"]


# ---- registry reads are bounded and checked ----------------------------------------------------------------------

RELEASE = TorchRelease(Version("2.4.1"), "cuda", WheelSource(WheelSourceKind.REGISTRY), None, ())


def pep691(*filenames: str) -> bytes:
    files = [{"filename": f, "url": f"https://files.invalid/{f}"} for f in filenames]
    return json.dumps({"meta": {"api-version": "1.1"}, "name": "torch", "files": files}).encode()


def test_each_index_has_its_own_cache_named_after_the_url_read(tmp_path: Path) -> None:
    """`outdated --index-url X` once shared the registry's cache file, so X's answer stood for PyPI's for a day."""
    from registry_server import serving

    with serving(pep691(FILES[0][0]), PEP691) as first, serving(pep691(FILES[1][0]), PEP691) as second:
        x = Registry(tmp_path, index_url=first[0] + "simple/")
        y = Registry(tmp_path, index_url=second[0] + "simple/")
        x.machine = y.machine = "x86_64"
        assert x.pythons(RELEASE) == {Python.parse("3.11")} and y.pythons(RELEASE) == {Python.parse("3.12")}
    assert first[1:] == second[1:] == ["/simple/torch/"]
    cached = {json.loads(p.read_text())["url"]: p.name for p in tmp_path.glob("torch-*.json")}
    assert set(cached) == {first[0] + "simple/torch/", second[0] + "simple/torch/"}
    # The default registry never reads either answer: offline, it has no cached copy of its own.
    with pytest.raises(RegistryError, match=r"offline and no cached copy of the torch index https://pypi\.org/simple/"):
        Registry(tmp_path, offline=True).pythons(RELEASE)
    # A cache file holding another URL's answer (copied over, or from before) is not taken for this one's.
    x.cache_path("torch").write_text(y.cache_path("torch").read_text())
    with pytest.raises(RegistryError, match=r"is the answer of .*, not of http://127"):
        Registry(tmp_path, index_url=first[0] + "simple/", offline=True).pythons(RELEASE)


PORTAL = b"<!DOCTYPE html><html><body><h1>Welcome</h1><a href='/login'>Log in to use the network</a></body></html>"


@pytest.mark.parametrize(
    ("body", "content_type", "problem"),
    [
        (PORTAL, "text/html", "answered a page that lists no wheel for torch"),
        (b'{"status": "ok", "files": []}', "application/json", "answered application/json, not a PEP 691"),
        (b'{"files": []}', PEP691, "without PEP 691's meta.api-version 1.x"),
        (pep691(), PEP691, "answered a page that lists no wheel for torch"),
        (b"\xff\xfe<html>", "text/html", "is not UTF-8 text"),
        (pep691(FILES[0][0]), "text/plain", "answered text/plain, not a PEP 691"),
    ],
)
def test_an_answer_that_is_not_a_project_page_is_an_error_and_never_cached(
    tmp_path: Path, body: bytes, content_type: str, problem: str
) -> None:
    from registry_server import serving

    with serving(body, content_type) as seen:
        registry = Registry(tmp_path, index_url=seen[0] + "simple/")
        with pytest.raises(RegistryError, match=re.escape(problem)):
            registry.pythons(RELEASE)
        assert not registry.cache_path("torch").exists() and list(tmp_path.iterdir()) == []
        # An older good answer stays as it was, and is not used in place of the bad one: the bad one is an error.
        registry.cache_path("torch").write_bytes(
            good := json.dumps(
                {"url": registry.index_url + "torch/", "files": [{"filename": FILES[0][0], "url": "u1"}]}
            ).encode()
        )
        os.utime(registry.cache_path("torch"), (1, 1))  # stale: asked again
        with pytest.raises(RegistryError, match=re.escape(problem)):
            Registry(tmp_path, index_url=seen[0] + "simple/").pythons(RELEASE)
        assert registry.cache_path("torch").read_bytes() == good


def test_a_trickling_index_is_cut_off_at_the_deadline(tmp_path: Path) -> None:
    """One byte every 0.3 s: no read ever times out, only the total deadline ends the request."""
    import time

    from registry_server import trickling_server

    with trickling_server(pep691(FILES[0][0]), interval=0.3) as url:
        registry = Registry(tmp_path, index_url=url + "simple/", deadline=1.5)
        start = time.monotonic()
        with pytest.raises(RegistryError, match=r"did not answer in full within 1\.5 s\) and no cached copy"):
            registry.pythons(RELEASE)
        assert time.monotonic() - start < 4 and list(tmp_path.iterdir()) == []


def test_every_page_of_a_command_shares_one_total_deadline(tmp_path: Path) -> None:
    """Two index pages of a trickling server, each allowed 10 s: the Registry's total of 1.5 s ends both, so a
    command reading many pages never takes more than its --network-deadline."""
    import time

    from registry_server import trickling_server

    with trickling_server(pep691(FILES[0][0]), interval=0.3) as url:
        registry = Registry(tmp_path, index_url=url + "simple/", deadline=10, total=1.5)
        start = time.monotonic()
        for index in ("a", "b"):
            with pytest.raises(RegistryError, match=r"within the 1\.5 s all network reads of this command may take"):
                registry.index_entries("torch", url + index)
        assert time.monotonic() - start < 4 and list(tmp_path.iterdir()) == []


def test_an_answer_past_the_size_cap_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from registry_server import serving

    from torch_buildmatrix.model import registry as registry_module

    monkeypatch.setattr(registry_module, "PAGE_MAX_BYTES", 100)
    with (
        serving(pep691(*(name for name, _url in FILES)), PEP691) as seen,
        pytest.raises(RegistryError, match="answered more than 100 bytes"),
    ):
        Registry(tmp_path, index_url=seen[0] + "simple/").pythons(RELEASE)
    assert list(tmp_path.iterdir()) == []


def test_a_find_links_directory_is_listed_once_per_command(tmp_path: Path) -> None:
    links = tmp_path / "links"
    links.mkdir()
    (links / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    source = WheelSource(WheelSourceKind.FIND_LINKS, str(links))
    release = TorchRelease(Version("2.13.0"), "cpu", source, None, ())
    registry = Registry(tmp_path / "cache")
    registry.machine = "x86_64"
    assert registry.pythons(release) == {Python.parse("3.11")}
    (links / "torch-2.13.0+cpu-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"")
    # The same Registry (one command) answers from its one listing, for every release and every question.
    assert registry.pythons(release) == {Python.parse("3.11")}
    assert [str(w.python) for w in registry.published(source)] == ["3.11"]
