"""The generated site served over HTTP: real pip and uv installs from it, and the install page in headless Chromium.

Honest about the fakes: the plugin wheels here are tiny stand-ins with the real names, versions and tags, and the
real `emu-driver` requirement; instead of `torch` they require `emu-fake-torch` (served by a local stand-in for the
default index), so
that no test ever downloads torch. The site, its index pages, the .metadata files and the commands are the real ones.
"""

from __future__ import annotations

import http.server
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.error import HTTPError
from urllib.parse import urljoin
from urllib.request import urlopen

import loopback_http
import pytest
from fake_wheels import cell_result, interpreter_tag, make_wheel

from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.publish.advice import any_torch_command, install_choice
from torch_buildmatrix.publish.overlay import build_table
from torch_buildmatrix.publish.site import write_site
from torch_buildmatrix.publish.table import CompatTable

from conftest import VALID, WriteMatrix, headless_chromium

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
# The shared test matrix (torch 2.4.1 and the 2.13.0 CPU build, drivers 1.4 and 2.1) with only the running Python.
MATRIX = VALID.replace('python: ["3.9", "3.10", "3.11"]', f'python: ["{PYTHON}"]')
assert f'python: ["{PYTHON}"]' in MATRIX, "conftest.VALID no longer lists its Pythons as this module expects"
BUILT = ("torch2.4-cuda", "torch2.13-cpu")  # driver 2 only; every driver 1 cell is 'not built'


@dataclass
class Served:
    url: str  # the site's root URL, no trailing slash
    root: Path  # what the server serves: site/ and fake-pypi/
    table: CompatTable
    requests: list[str]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    requests: list[str]

    def log_message(self, format: str, *args: object) -> None:
        self.requests.append(f"{args[1] if len(args) > 1 else '?'} {self.path}")


@pytest.fixture
def served(write_matrix: WriteMatrix, tmp_path: Path) -> Iterator[Served]:
    matrix = load_matrix(write_matrix(MATRIX))
    available = {r: {Python.parse(PYTHON)} for r in matrix.torch}
    cells = expand(matrix, available)
    wheels, root = tmp_path / "wheels", tmp_path / "www"
    results = []
    for cell in cells:
        if cell.sdk is not None and cell.sdk.major == 2 and f"torch{cell.torch.minor}-{cell.torch.variant}" in BUILT:
            pin = f"emu-fake-torch=={cell.torch.minor}.*"
            results.append(
                cell_result(
                    cell,
                    wheels_dir=wheels,
                    plugin_requires=[pin],
                    tag=interpreter_tag(),
                    features={"events": "passed", "event_timing": "passed"},
                )
            )
    for version in ("2.4.1", "2.13.0", "2.14.0"):
        make_wheel(
            root / "fake-pypi" / "emu-fake-torch", "emu-fake-torch", version
        )  # served listing = a PEP 503 project page
    table = build_table(matrix, cells, results, available)
    report = write_site(table, wheels, root / "site")
    assert report.problems == [] and report.wheels == 3
    requests: list[str] = []
    with loopback_http.served(root, type("Handler", (_QuietHandler,), {"requests": requests})) as url:
        yield Served(f"{url}/site", root, table, requests)


def isolated_env(served: Served) -> dict[str, str]:
    """No configured index or find-links: the default index is a local one holding only emu-fake-torch."""
    base = served.url.rsplit("/", 1)[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update(
        {
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_INDEX_URL": f"{base}/fake-pypi/",
            "PIP_NO_CACHE_DIR": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "UV_NO_CONFIG": "1",
            "UV_INDEX_URL": f"{base}/fake-pypi/",
            "UV_NO_CACHE": "1",
        }
    )
    return env


def fresh_venv(path: Path) -> Path:
    """A uv venv seeded with its own pip (the nox session's uv venv has none)."""
    subprocess.run(["uv", "venv", "-q", "--seed", "--python", sys.executable, str(path)], check=True, timeout=120)
    return path / "bin" / "python"


def run_install(command: str, python: Path, env: dict[str, str], tool: str) -> subprocess.CompletedProcess[str]:
    """The page's command verbatim, run by the fresh venv's own pip, or by `uv pip --python <venv>`."""
    words = shlex.split(command)
    assert words[:2] == ["pip", "install"], command
    prefix = (
        [str(python), "-m", "pip", "install"] if tool == "pip" else ["uv", "pip", "install", "--python", str(python)]
    )
    return subprocess.run([*prefix, *words[2:]], check=False, capture_output=True, text=True, env=env, timeout=300)


def installed(python: Path) -> dict[str, str]:
    code = (
        "import importlib.metadata as m\nfor n in ('torch-emu', 'emu-driver', 'emu-fake-torch'): print(n, m.version(n))"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout
    return dict(line.split() for line in out.splitlines())


@pytest.mark.integration
@pytest.mark.parametrize(
    ("release", "how", "tool", "expected_torch"),
    [
        ("torch2.13-cpu", "index", "pip", "2.13.0"),
        ("torch2.4-cuda", "find-links", "pip", "2.4.1"),
        ("torch2.13-cpu", "find-links", "uv", "2.13.0"),
        ("torch2.4-cuda", "index", "uv", "2.4.1"),
    ],
)
def test_page_command_installs_the_cells_wheels(
    served: Served, tmp_path: Path, *, release: str, how: str, tool: str, expected_torch: str
) -> None:
    choice = install_choice(served.table, release, PYTHON, "drv2", site=served.url)
    assert choice.exact
    command = choice.index_command if how == "index" else choice.find_links_command
    python = fresh_venv(tmp_path / "venv")
    result = run_install(command, python, isolated_env(served), tool)
    assert result.returncode == 0, result.stdout + result.stderr
    minor = release.removeprefix("torch").split("-")[0]
    assert installed(python) == {
        "torch-emu": f"0.1.0+torch.{minor}.drv.2",
        "emu-driver": "2.1.0+emu",
        "emu-fake-torch": expected_torch,
    }
    if tool == "pip":  # pip reads PEP 658 metadata instead of downloading wheels to resolve
        assert any(r.startswith("200 ") and r.endswith(".whl.metadata") for r in served.requests), served.requests


@pytest.mark.integration
def test_not_built_choice_offers_the_nearest_built_wheel_and_never_an_sdist(served: Served, tmp_path: Path) -> None:
    choice = install_choice(served.table, "torch2.13-cpu", PYTHON, "drv1", site=served.url)  # driver 1 was never built
    assert not choice.exact and choice.cell == "torch2.13-cpu-cp" + PYTHON.replace(".", "") + "-drv2"
    sdist = "torch_emu-0.1.0+torch.2.13.drv.1.tar.gz"
    project = served.root / "site" / "torch2.13" / "simple" / "torch-emu"  # the index the command names
    (project / sdist).write_bytes(b"not a real sdist")
    (project / "index.html").write_text(
        f'<a href="{sdist}">{sdist}</a>'
    )  # plant an sdist where the driver 1 wheel would be
    python = fresh_venv(tmp_path / "venv")
    asked = choice.index_command.replace("drv.2 emu-driver==2.1.0+emu", "drv.1 emu-driver==1.4.0+emu")
    assert asked != choice.index_command
    result = run_install(asked, python, isolated_env(served), "pip")
    assert result.returncode != 0 and "No matching distribution" in result.stderr, result.stderr
    assert not any(sdist in r for r in served.requests)  # --only-binary: pip never even downloads it


def page_links(driver: object, base: str) -> list[str]:
    anchors = driver.find_elements("css selector", "a[href]")  # type: ignore[attr-defined]
    return sorted({urljoin(base, a.get_attribute("href")) for a in anchors})


@pytest.mark.integration
@pytest.mark.browser
def test_install_page_in_chromium(served: Served) -> None:
    browser = headless_chromium(1280, 1600)
    from selenium.webdriver.support.ui import Select

    try:
        browser.get(f"{served.url}/index.html")
        command = browser.find_element("id", "command")
        note = browser.find_element("id", "note")
        # The newest built cell is preselected.
        assert (
            command.text == install_choice(served.table, "torch2.13-cpu", PYTHON, "drv2", site=served.url).index_command
        )

        def pick(torch: str, driver: str, how: str = "index") -> None:
            Select(browser.find_element("id", "torch")).select_by_value(torch)
            Select(browser.find_element("id", "python")).select_by_value(PYTHON)
            Select(browser.find_element("id", "sdk")).select_by_value(f"drv{driver}")
            browser.find_element("css selector", f"input[name=how][value={how}]").click()

        for torch, driver, how in [
            ("torch2.4-cuda", "2", "find-links"),
            ("torch2.4-cuda", "1", "index"),
            ("torch2.13-cpu", "1", "find-links"),
            ("torch2.13-cpu", "2", "find-links"),
            ("torch2.4-cuda", "2", "plain"),
        ]:
            pick(torch, driver, how)
            expected = install_choice(served.table, torch, PYTHON, f"drv{driver}", site=served.url)
            assert (
                command.text
                == {
                    "index": expected.index_command,
                    "plain": expected.release_index_command,
                    "find-links": expected.find_links_command,
                }[how]
            )
            assert command.get_attribute("data-cell") == expected.cell
            assert note.text == expected.note
            if driver == "1":
                assert "Nearest supported choice" in note.text and "inexact" in (note.get_attribute("class") or "")
        assert browser.find_element("id", "any-torch").text == any_torch_command(served.table, served.url)
        assert "pip merges every index" in browser.find_element("id", "look-alike").text
        links = page_links(browser, served.url + "/")
        assert any(link.endswith(".log") for link in links) and any(".whl" in link for link in links)
        for link in links:
            try:
                with urlopen(link) as response:
                    assert response.status == 200, link
            except HTTPError as exc:  # pragma: no cover - the assertion message is the point
                raise AssertionError(f"{link}: {exc}") from exc
        shots = Path(__file__).parents[2] / "build" / "screenshots"
        shots.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(shots / "compat-site.png"))
    finally:
        browser.quit()
