"""The published site as a visitor sees it: the docs home page, the options reference and the install page, rendered
in headless Chromium at a laptop's window size, each showing its key elements in the first screen.

The site is put together as the publish job does: the install page rendered from a published compatibility table
(tests/fixtures/published, a full run's, so every choice has a command; the committed table has none between a version
bump and its full run) at the root, the docs built strictly (scripts/docs_site.py, what `nox -s docs` runs) under
docs/; served on 127.0.0.1.
"""

from __future__ import annotations

import functools
import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from buildmatrix.publish.page import site_page
from buildmatrix.publish.table import CompatTable

from conftest import REPO, headless_chromium

WIDTH, HEIGHT = 1280, 800  # what the screenshots show: the first screen of a laptop


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    site = tmp_path_factory.mktemp("published") / "site"
    site.mkdir()
    table = CompatTable.from_json((REPO / "tests" / "fixtures" / "published" / "compatibility.json").read_text("utf-8"))
    (site / "index.html").write_text(site_page(table), encoding="utf-8")
    bin_dir = str(Path(sys.executable).parent)
    built = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "docs_site.py"), "--build-only", "--site-dir", str(site / "docs")],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
    )
    assert built.returncode == 0, built.stderr
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = headless_chromium(WIDTH, HEIGHT)
    try:
        yield driver
    finally:
        driver.quit()


def in_first_screen(browser: Any, css: str) -> Any:
    """The first element matching `css` that is displayed and lies (at least partly) in the first screen."""
    elements = browser.find_elements("css selector", css)
    height = browser.execute_script("return window.innerHeight")
    width = browser.execute_script("return window.innerWidth")
    for element in elements:
        box = browser.execute_script("return arguments[0].getBoundingClientRect().toJSON()", element)
        if element.is_displayed() and box["top"] < height and box["bottom"] > 0 and box["left"] < width:
            return element
    raise AssertionError(f"no {css!r} in the first {width}x{height} screen ({len(elements)} on the page)")


def screenshot(browser: Any, name: str) -> None:
    shots = REPO / "build" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(shots / f"docs-{name}.png"))


@pytest.mark.integration
@pytest.mark.browser
def test_docs_home_page_shows_the_title_the_sections_and_the_commands(browser: Any, site_url: str) -> None:
    browser.get(f"{site_url}/docs/")
    assert "buildmatrix" in in_first_screen(browser, "article h1").text
    navigation = in_first_screen(browser, "nav.md-nav--primary").text
    for section in ("Tutorial", "How-to guides", "Reference", "Explanation"):
        assert section in navigation, navigation
    assert "Where to start" in in_first_screen(browser, "article h2").text
    # The search box of the theme is there (search works offline, from the built index).
    assert browser.find_elements("css selector", "input.md-search__input")
    screenshot(browser, "home")
    browser.execute_script("document.getElementById('the-two-commands').scrollIntoView()")
    commands = [e.text for e in browser.find_elements("css selector", "article pre code")]
    assert "python3 -m pip install nox uv && nox -s build-matrix" in commands


@pytest.mark.integration
@pytest.mark.browser
def test_options_reference_shows_its_table_with_working_anchors(browser: Any, site_url: str) -> None:
    browser.get(f"{site_url}/docs/reference/matrix-options/")
    assert "options" in in_first_screen(browser, "article h1").text.lower()
    table = in_first_screen(browser, "article table")
    assert "plugin.distribution" in table.text and "required" in table.text
    link = browser.find_element("css selector", "article table a[href='#opt-plugin-distribution']")
    link.click()
    heading = in_first_screen(browser, "h3:has(#opt-plugin-distribution)")  # the anchor lands in view
    assert "plugin.distribution" in heading.text
    screenshot(browser, "matrix-options")


@pytest.mark.integration
@pytest.mark.browser
def test_install_page_shows_the_choice_and_a_command(browser: Any, site_url: str) -> None:
    browser.get(f"{site_url}/")
    assert "install and compatibility" in in_first_screen(browser, "h1").text
    for control in ("#torch", "#python", "#sdk"):
        in_first_screen(browser, control)
    command = in_first_screen(browser, "#command")
    assert "pip install torch-emu" in command.text, command.text
    screenshot(browser, "install-page")
