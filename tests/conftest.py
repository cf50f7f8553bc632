"""Shared fixtures: a minimal valid matrix written on the fly; the check that each test sits where its kind belongs."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path
from typing import Protocol

import pytest
from packaging.version import Version

from torch_buildmatrix.model.matrix import Sdk, SdkVersion
from torch_buildmatrix.vocab import SdkKind

VALID = """\
schema-version: 2
plugin:
  distribution: torch-emu
  version: 0.1.0
  source: plugin
  smoke-tests: plugin/tests
  label: "torch.{torch_minor}.drv.{sdk_major}"
sdk:
  kind: wheel
  name: driver
  id: "drv{sdk_major}"
  distribution: emu-driver
  source: driver
  versions: ["1.4", "2.1"]
python: ["3.9", "3.10", "3.11"]
torch:
  - version: "2.4.1"
    patches: [pre-2.7]
  - version: "2.13.0"
    variant: cpu
    wheels: pip-find-links
runner: auto
"""


def wheel_sdk(
    source: Path,
    distribution: str = "tiny-driver",
    versions: tuple[str, ...] = ("2.1",),
    env: str = "TINY_DRIVER_VERSION",
) -> Sdk:
    """A wheel SDK as matrix.yaml declares one (name driver, ids -drv<major>), built from `source`."""
    declared = tuple(SdkVersion(Version(v), f"drv{Version(v).major}") for v in versions)
    package = distribution.replace("-", "_")
    return Sdk(SdkKind.WHEEL, "driver", "driver API", declared, (f"lib{package}*.so*",), distribution, source, env)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "plugin" / "tests").mkdir(parents=True)
    (tmp_path / "plugin" / "tests" / "test_smoke.py").write_text("def test_imports():\n    pass\n")
    (tmp_path / "driver").mkdir()
    (tmp_path / "patches" / "pre-2.7").mkdir(parents=True)
    (tmp_path / "patches" / "pre-2.7" / "series").write_text("# empty\n")
    return tmp_path


class WriteMatrix(Protocol):
    """The write_matrix fixture: writes matrix.yaml (VALID unless given) into the test project, returns its path."""

    def __call__(self, text: str = ...) -> Path: ...


@pytest.fixture
def write_matrix(project: Path) -> WriteMatrix:
    def write(text: str = VALID) -> Path:
        path = project / "matrix.yaml"
        path.write_text(textwrap.dedent(text))
        return path

    return write


# The tiny fixture's contract (tests/fixtures/tiny), appended to every matrix that builds it.
TINY_CONTRACT = """\
build: {version-file: PLUGIN_VERSION, generated: [_build_info.py, PLUGIN_VERSION]}
check: {build-info: tiny_plugin/_build_info.py}
smoke: {args: ["--tiny-features-json={features}"]}
"""

REPO = Path(__file__).parent.parent
HERE = Path(__file__).parent
PROJECT_PARTS = ("matrix.yaml", "matrix.schema.json", "plugin", "driver", "patches", "README.md", "docs")
# What compat-table publishes into docs/ (publish.docs of our matrix.yaml). A test project that publishes cells of
# its own is one that has never published: it starts without our committed table, which would give it a release
# history (compat-table refuses to publish such a project without its live site, exit 7) and lay our cells over its
# own.
PUBLISHED_DOCS = ("docs/compatibility.json", "docs/compatibility.md")
# A deep tier of the real plugin that costs 15 s, not about 4 minutes per build (test_recurrent.py's 9 deep tests):
# for the tests of the fan-out and the workflow, which check how the deep tier is planned, run, carried and published,
# not what it finds (plugin/devtests/test_real_cell.py runs the whole deep tier on the 2.13 CPU cells).
SHORT_DEEP_TIER = ["-m", "deep", "-k", "recurrent"]


def copy_project(dest: Path, never_published: bool = False) -> Path:
    """A copy of this project's build inputs, so tests never touch the checkout's wheels/ and build/; with
    never_published, without our committed table (PUBLISHED_DOCS): for tests that build cells and publish them."""
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    for part in PROJECT_PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(
                source,
                dest / part,
                ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "_build_info.py"),
            )
        elif source.is_file():
            shutil.copy2(source, dest / part)
    if never_published:
        for published in PUBLISHED_DOCS:
            (dest / published).unlink(missing_ok=True)
    return dest


def run_cli(
    root: Path, *args: str, timeout: float = 3600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m torch_buildmatrix ...` from the project directory, importing this checkout's package.

    env replaces this process's environment (it must then set PYTHONPATH to the checkout itself)."""
    import os
    import subprocess
    import sys

    if env is None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "torch_buildmatrix", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=root,
        env=env,
    )


@pytest.fixture
def answers():  # type: ignore[no-untyped-def]
    """Recorded registry answers served on 127.0.0.1 (registry_server.Answers); `answers.use(name)` picks one."""
    from registry_server import Answers

    served = Answers()
    yield served
    served.close()


def headless_chromium(width: int, height: int):  # type: ignore[no-untyped-def]
    """Debian's Chromium through its chromedriver, headless, offline, at width x height (skips without selenium)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path="/usr/bin/chromedriver"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """tests/unit holds only tests not marked integration (`nox -s unit` runs them), tests/integration only marked
    ones: a test in the wrong place stops the run, naming it."""
    misplaced = []
    for item in items:
        marked = item.get_closest_marker("integration") is not None
        if marked and item.path.is_relative_to(HERE / "unit"):
            misplaced.append(f"{item.nodeid}: marked integration, in tests/unit")
        elif not marked and item.path.is_relative_to(HERE / "integration"):
            misplaced.append(f"{item.nodeid}: in tests/integration, not marked integration")
    if misplaced:
        raise pytest.UsageError("tests in the wrong directory:\n  " + "\n  ".join(misplaced))
