"""Every install command the published pages give, run as a user would, on wheels the tool really built.

segment-ops (examples/: a C++ extension whose library links against torch's ATen and c10, or from 2.10 on its stable
C ABI) is built by `torch-buildmatrix build` for torch 2.4.1 (the registry's CUDA build, ~3 GB, from uv's cache) and
2.13.0+cpu (this machine's find-links), and published by `compat-table`; its site is served on 127.0.0.1 beside a
stand-in public index that holds newer torch stand-ins (an installer that upgraded torch would show). Twice: as the
example pins torch (check.torch-pin: release-line; Requires-Dist torch==2.4.* and, for the stable build, torch>=2.13),
and with the pin taken out of its setup.py (check.torch-pin: none), where only the release's own index or the label a
command pins keeps a user of torch 2.4 from 2.13's wheel.

Each command the README block, docs/compatibility.md and the site page give a user of a release (its release's index,
the pinned index and find-links commands, the README's X.Y template filled in, and with a pin the one for whatever
torch is installed) runs with pip and with uv in a fresh clone of an environment that holds that release's torch
(tests/torch_envs.py). The installed files must be, byte for byte, the wheel the release's cell passed with; torch's
version must be what it was; `import segops` must load the library and run an operator. The other release's wheel,
installed on purpose, fails that import, so the check can fail.

Marked `download` (torch 2.4.1, kept in tests/torch_envs.py's cache), so `nox -s tests` leaves it out; run it with
`nox -s tests -- -m download tests/integration/test_install_built_wheels.py` (about 7 minutes here).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from install_harness import (
    environment,
    installed_is_ours,
    markdown_commands,
    page_commands,
    public_index,
    run,
    site_packages,
)
from loopback_http import served
from torch_envs import cached_torch_env, clone, python_of, torch_version

from torch_buildmatrix.builder.wheelcheck import read_metadata
from torch_buildmatrix.model.contract import README_END, README_START, TorchPin
from torch_buildmatrix.publish.advice import any_torch_command
from torch_buildmatrix.publish.table import SITE_PLACEHOLDER, CompatCell, CompatTable
from torch_buildmatrix.publish.tableparse import parse_table
from torch_buildmatrix.vocab import Status

from conftest import REPO, run_cli

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.download,
    pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="torch 2.13.0+cpu is on this machine for 3.11 only"),
]

PYTHON = "3.11"
TORCH = {"2.4": "2.4.1", "2.13": "2.13.0+cpu"}  # torch release line -> what the user's environment holds
EXAMPLE = REPO / "examples" / "segment-ops"
PIN = 'install_requires=[f"torch>={torch_minor}" if stable else f"torch=={torch_minor}.*"],'
# The example's contract (examples/segment-ops/matrix.yaml) with two of its releases: 2.10 (its stable build's base)
# is left out, so 2.13's stable build is made against 2.13 itself.
MATRIX = """\
schema-version: 2
plugin: {{distribution: segops, version: 0.1.0, source: ., smoke-tests: tests, label: "torch.{{torch_minor}}"}}
python: ["3.11"]
torch:
  - version: "2.4.1"
  - version: "2.13.0"
    variant: cpu
    wheels: {{index: https://download.pytorch.org/whl/cpu, local-find-links: pip-config}}
build:
  version-env: SEGOPS_VERSION
  requires: ["ninja"]
  generated: ["_build_info.py"]
  stable-abi: "2.13"
  per-variant: false
check: {{torch-pin: {pin}, build-info: segops/_build_info.py}}
smoke: {{requires: ["pytest", "packaging"]}}
runner: local
"""
# Run in the user's environment after an install: what `import segops` loads, and one operator on it.
IMPORT_CHECK = """\
import importlib.metadata, json, torch, segops
out = segops.segment_sum(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 0, 1]), 2)
print(json.dumps({"torch": importlib.metadata.version("torch"), "built_with": segops.TORCH_VERSION,
                  "segment_sum": out.tolist()}))
"""


@dataclass
class Published:
    """A project built by the tool and published, its site served."""

    pin: TorchPin
    root: Path
    site: str  # the site's URL, as the pages name it
    public: str  # the stand-in public index's URL
    table: CompatTable
    commands: dict[str, list[str]]  # where (README block, docs, page) -> the install commands it gives

    def cell(self, minor: str) -> CompatCell:
        """The passed cell of torch release line `minor` on our Python."""
        (cell,) = [c for c in self.table.cells if c.key.torch_minor == minor and c.python == PYTHON]
        assert cell.status == Status.PASSED and cell.wheel is not None, cell
        return cell

    def wheel(self, minor: str) -> Path:
        wheel = self.cell(minor).wheel
        assert wheel is not None
        return self.root / "wheels" / wheel.path

    def commands_for(self, minor: str) -> dict[str, list[str]]:
        """Each command addressed to a user of torch `minor` -> where it is given. A command that names no release's
        index (torchX.Y is the README's template, filled in as a user does) must be the one for any torch."""
        out: dict[str, list[str]] = {}
        for where, commands in self.commands.items():
            for given in commands:
                command = given.replace(f"{self.site}/torchX.Y/", f"{self.site}/torch{minor}/")
                named = [m for m in TORCH if f"{self.site}/torch{m}/" in command]
                if not named:
                    assert f"--extra-index-url {self.site}/simple/" in command, f"{where}: whose command? {command}"
                elif named != [minor]:
                    continue
                out.setdefault(command, []).append(where)
        return out


def make_project(tmp_path: Path, pin: TorchPin) -> Path:
    root = tmp_path / "segment-ops"
    shutil.copytree(
        EXAMPLE, root, ignore=shutil.ignore_patterns("build", "wheels", "*.egg-info", "__pycache__", "*.so")
    )
    (root / "matrix.yaml").write_text(MATRIX.format(pin=pin.value))
    if pin == TorchPin.NONE:  # a project whose metadata names no torch, as torch-scatter's
        setup = (root / "setup.py").read_text()
        assert PIN in setup
        (root / "setup.py").write_text(setup.replace(PIN, "install_requires=[],"))
    (root / "README.md").write_text(f"# segops\n\n{README_START}\n{README_END}\n")
    return root


def published_commands(root: Path, site: str) -> dict[str, list[str]]:
    readme = (root / "README.md").read_text()
    page = page_commands((root / "wheels" / "site" / "index.html").read_text())
    return {
        "README block": markdown_commands(readme[readme.index(README_START) : readme.index(README_END)]),
        "docs/compatibility.md": markdown_commands((root / "docs" / "compatibility.md").read_text()),
        "site page": [c.replace(SITE_PLACEHOLDER, site) for c in page],  # as the page's script shows them
    }


@pytest.fixture(scope="module", params=list(TorchPin), ids=[f"torch-pin-{p.value}" for p in TorchPin])
def published(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Published]:
    pin: TorchPin = request.param
    tmp = tmp_path_factory.mktemp(f"published-{pin.value}")
    root = make_project(tmp, pin)
    built = run_cli(root, "build", "--jobs", "1", timeout=3600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    www = tmp / "www"
    public_index(www / "clean", squatted=False)
    (www / "site").symlink_to(root / "wheels" / "site", target_is_directory=True)
    with served(www) as url:
        site = f"{url}/site"
        made = run_cli(root, "compat-table", "--offline", "--site-url", site)
        assert made.returncode == 0, made.stdout + made.stderr
        table = parse_table((root / "docs" / "compatibility.json").read_text())
        yield Published(pin, root, site, f"{url}/clean/", table, published_commands(root, site))


def import_check(env: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`import segops` and one operator, in the user's environment, away from any source tree."""
    return subprocess.run(
        [str(python_of(env)), "-c", IMPORT_CHECK], capture_output=True, text=True, cwd=cwd, timeout=300, check=False
    )


def test_the_pages_give_what_the_wheels_pin_allows(published: Published) -> None:
    """Every page gives commands; the one for whatever torch is installed only where the wheels pin torch."""
    for where, commands in published.commands.items():
        assert commands, f"{where} gives no install command"
    torch_requires = {
        minor: [r for r in read_metadata(published.wheel(minor)).get("Requires-Dist", []) if r.startswith("torch")]
        for minor in TORCH
    }
    every = {c for commands in published.commands.values() for c in commands}
    for_any = {c for c in every if f"{published.site}/simple/" in c}
    if published.pin == TorchPin.RELEASE_LINE:
        assert torch_requires == {"2.4": ["torch==2.4.*"], "2.13": ["torch>=2.13"]}
        assert for_any and all(c == any_torch_command(published.table, published.site) for c in for_any)
        assert set(published.commands_for("2.4")) & set(published.commands_for("2.13")) == for_any
    else:
        assert torch_requires == {"2.4": [], "2.13": []}  # nothing ties a wheel to its torch but its index and label
        assert for_any == set(), "a command that needs a torch pin the wheels do not carry"


@pytest.mark.parametrize("tool", ["pip", "uv"])
@pytest.mark.parametrize("minor", list(TORCH))
def test_every_command_installs_a_wheel_that_imports_and_keeps_torch(
    published: Published, minor: str, tool: str, tmp_path: Path
) -> None:
    cell = published.cell(minor)
    assert cell.wheel is not None
    commands = published.commands_for(minor)
    release = f"{published.site}/torch{minor}/"
    for kind, given in (
        ("release index", f"--extra-index-url {release}simple/"),
        ("find-links", f"--find-links {release}"),
    ):
        assert any(c.endswith(given) for c in commands), f"no {kind} command for torch {minor}: {commands}"
    assert any(cell.requirement in c for c in commands), f"no command pins {cell.requirement}"
    problems = []
    for command, where in commands.items():
        with clone(cached_torch_env(TORCH[minor])) as env:
            before = torch_version(python_of(env))
            done = run(command, tool, env, environment(published.public, env))
            said = f"{tool}: {command} (from {', '.join(where)})"
            if done.returncode != 0:
                problems.append(f"{said}: exit {done.returncode}: {done.stderr[-1500:]}")
                continue
            if torch_version(python_of(env)) != before:
                problems.append(f"{said}: torch {before} became {torch_version(python_of(env))}")
            if not installed_is_ours(site_packages(env, PYTHON), published.wheel(minor), cell.wheel.sha256):
                problems.append(f"{said}: the installed segops is not {cell.wheel.filename}")
            imported = import_check(env, tmp_path)
            if imported.returncode != 0:
                problems.append(f"{said}: import segops failed: {imported.stderr[-1500:]}")
                continue
            seen = json.loads(imported.stdout)
            if seen["segment_sum"] != [3.0, 3.0] or not seen["built_with"].startswith(f"{minor}."):
                problems.append(f"{said}: {seen}")
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("minor", list(TORCH))
def test_the_other_releases_wheel_does_not_import(published: Published, minor: str, tmp_path: Path) -> None:
    """What the commands must never install: the wheel of the other release, put in with --no-deps, does not load.
    Without a pin, the command for whatever torch is installed (left out of the pages) would install it for 2.4."""
    other = next(m for m in TORCH if m != minor)
    with clone(cached_torch_env(TORCH[minor])) as env:
        done = run(f"pip install --no-deps {published.wheel(other)}", "pip", env, environment(published.public, env))
        assert done.returncode == 0, done.stderr
        imported = import_check(env, tmp_path)
        assert imported.returncode != 0 and "undefined symbol" in imported.stderr, imported.stdout + imported.stderr
    if published.pin == TorchPin.NONE and minor == "2.4":
        left_out = any_torch_command(replace(published.table, torch_pin=TorchPin.RELEASE_LINE), published.site)
        assert left_out is not None
        with clone(cached_torch_env(TORCH[minor])) as env:
            done = run(left_out, "pip", env, environment(published.public, env))
            assert done.returncode == 0, done.stderr
            wrong = published.cell(other).wheel
            assert wrong is not None
            assert installed_is_ours(site_packages(env, PYTHON), published.wheel(other), wrong.sha256)
            assert import_check(env, tmp_path).returncode != 0
