"""The published site as a visitor sees it: the docs home page, the options reference and the install page, rendered
in headless Chromium at a laptop's window size, each showing its key elements in the first screen.

The site is put together as the publish job does: the install page rendered from a published compatibility table
(tests/fixtures/published, a full run's 46 cells, so every choice has a command; the committed table has none between
a version bump and its full run) at the root, the same table with every cell's details at their longest (a log, a
deep tier, wheels off the site, a later failed attempt; every fifth cell failed) at crowded.html, the docs built
strictly (scripts/docs_site.py, what `nox -s docs` runs) under docs/; served on 127.0.0.1.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loopback_http import served

from torch_buildmatrix.builder.records.model import SmokeCounts
from torch_buildmatrix.publish.page import site_page
from torch_buildmatrix.publish.table import Attempt, CompatTable, DeepShown
from torch_buildmatrix.vocab import Status, TierStatus

from conftest import REPO, headless_chromium

WIDTH, HEIGHT = 1280, 800  # what the screenshots show: the first screen of a laptop
LAPTOP = 1366, 768  # the commonest laptop screen: the install page's table must fit its width
MARK_CHARS = 14  # a cell's mark ("✓ 288 !", "✗ interpreter", the longest step): its details open on demand


@pytest.fixture(scope="module")
def site_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    site = tmp_path_factory.mktemp("published") / "site"
    site.mkdir()
    table = CompatTable.from_json((REPO / "tests" / "fixtures" / "published" / "compatibility.json").read_text("utf-8"))
    (site / "index.html").write_text(site_page(table), encoding="utf-8")
    crowded, logs = crowded_table(table)
    (site / "crowded.html").write_text(site_page(crowded, logs=logs), encoding="utf-8")
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
    with served(site) as url:
        yield url


def crowded_table(table: CompatTable) -> tuple[CompatTable, set[str]]:
    """The table with each cell's details at their longest, and the logs the site holds for them."""
    cells = []
    for n, cell in enumerate(table.cells):
        log = f"logs/{cell.id}.log"
        longest = dataclasses.replace(
            cell,
            log=log,
            off_site=True,
            deep=DeepShown(table.cells[n - n % 2].id, TierStatus.PASSED, SmokeCounts(passed=120, skipped=10)),
            latest=Attempt(Status.FAILED, "2026-11-27T01:02:03Z", "smoke", "transient: the index did not answer"),
        )
        if n % 5 == 0:
            longest = dataclasses.replace(
                longest,
                status=Status.FAILED,
                failed_step="interpreter",
                failure="deterministic",
                smoke=SmokeCounts(passed=280, failed=3, skipped=51, errors=1),
                latest=None,
            )
        cells.append(longest)
    return dataclasses.replace(table, cells=tuple(cells)), {c.log for c in cells if c.log}


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
    assert "torch-buildmatrix" in in_first_screen(browser, "article h1").text
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


@pytest.fixture(scope="module")
def laptop() -> Iterator[Any]:
    driver = headless_chromium(*LAPTOP)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.mark.integration
@pytest.mark.browser
@pytest.mark.parametrize("page", ["index.html", "crowded.html"])
def test_install_page_table_fits_a_laptop_screen_and_opens_a_cell_on_demand(
    laptop: Any, site_url: str, page: str
) -> None:
    """At 1366x768: no sideways scroll, each of the 46 cells a short mark with its details closed, the table at most
    two screens tall; a click on a mark opens that cell's details, and still nothing scrolls sideways."""
    laptop.get(f"{site_url}/{page}")
    screen = laptop.execute_script("return [window.innerWidth, window.innerHeight]")
    assert screen[0] == LAPTOP[0] and screen[1] <= LAPTOP[1], screen

    def sideways() -> int:
        return int(laptop.execute_script("return document.documentElement.scrollWidth - window.innerWidth"))

    assert sideways() <= 0
    box = laptop.execute_script("return document.getElementById('cells').getBoundingClientRect().toJSON()")
    assert box["right"] <= screen[0] and box["height"] <= 2 * screen[1], (box, screen)
    cells = laptop.find_elements("css selector", "#cells td[id]")
    assert len(cells) == 46
    marks = [c.find_element("css selector", "summary").text for c in cells]
    assert all(0 < len(mark) <= MARK_CHARS for mark in marks), max(marks, key=len)
    assert {m[0] for m in marks} == ({"✓", "✗"} if page == "crowded.html" else {"✓"})
    spilled = laptop.execute_script(
        "return [...document.querySelectorAll('#cells td, #cells th')].filter(c => c.scrollWidth > c.clientWidth)"
        ".map(c => c.id || c.textContent)"
    )
    assert spilled == []  # every mark and heading inside its own cell
    details = laptop.find_elements("css selector", "#cells .cell-details")
    assert len(details) == 46 and not any(d.is_displayed() for d in details)  # closed until asked for
    screenshot(laptop, f"install-table-{page.removesuffix('.html')}")
    last = next(c for c, mark in zip(reversed(cells), reversed(marks), strict=True) if mark.startswith("✓"))
    laptop.execute_script("arguments[0].scrollIntoView()", last)
    last.find_element("css selector", "summary").click()
    opened = last.find_element("css selector", ".cell-details")
    assert opened.is_displayed() and "passed" in opened.text
    assert last.find_element("css selector", "a.wheel").get_attribute("href").endswith(".whl")
    if page == "crowded.html":
        assert "its wheels are not on this site" in opened.text and "latest attempt failed" in opened.text
        log = last.find_element("css selector", "a.log").get_attribute("href")
        assert log.endswith(f"/logs/{last.get_attribute('id')}.log"), log
    assert sideways() <= 0
    assert sum(d.is_displayed() for d in details) == 1
    screenshot(laptop, f"install-table-{page.removesuffix('.html')}-open")
