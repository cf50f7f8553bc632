""".github/workflows/build-matrix.yml, run under act on this host with the stand-ins of tests/act/ (see act_harness).

The workflow under test is the one we ship, byte for byte; what changes between runs is the repository it runs in
(its matrix.yaml, or the tiny plugin in place of ours) and the event, as they would for a user:
- the tiny plugin (builds in seconds): a push whose driver-1 cell fails, a workflow_dispatch with a selection, and
  the plans that must fail;
- the real plugin on the cheap torch 2.13 CPU cells (marked slow): the published site equals a single machine's.
"""

from __future__ import annotations

import json
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from act_harness import (
    REPO,
    ActRun,
    ActWorld,
    StandInError,
    act_world,
    git,
    project_files,
    publish_repository,
    run_act,
)
from site_compare import assert_same_site

from conftest import PUBLISHED_DOCS, SHORT_DEEP_TIER, TINY_CONTRACT, run_cli

# One worker runs every act test that uses the cache store (~/.cache/buildmatrix-act, kept between runs): each run
# restores from it, saves to it and evicts from it, and runs of one stand-in repository share its entries
# (tests/parallel_plan.py).
pytestmark = [pytest.mark.act, pytest.mark.integration, pytest.mark.xdist_group("act-cache-store")]

WORKFLOW = "build-matrix.yml"
TINY = Path(__file__).parents[1] / "fixtures" / "tiny"
TINY_MATRIX = (
    """\
schema-version: 2
plugin: {distribution: tiny-plugin, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,
  label: "torch.{torch_minor}.drv.{sdk_major}"}
sdk: {kind: wheel, name: driver, id: "drv{sdk_major}", distribution: tiny-driver, source: driver,
  version-env: TINY_DRIVER_VERSION, versions: ["1.4", "2.1"]}
python: ["3.11"]
torch:
  - version: "2.13.0"
    variant: cpu
    wheels: {index: "https://download.pytorch.org/whl/cpu", local-find-links: pip-config}
runner: auto
"""
    + TINY_CONTRACT
)
TINY_CELLS = ("torch2.13-cpu-cp311-drv1", "torch2.13-cpu-cp311-drv2")


def site_variables(world: ActWorld) -> dict[str, str]:
    """The repository variables of every run: the stand-in Pages site, whose first run is the first publish (the flag
    matters only while the address answers 404 for everything)."""
    return {"SITE_URL": world.pages_url, "FIRST_PUBLISH": "true"}


def tiny_project(extra: dict[str, str | None] | None = None) -> dict[str, str | None]:
    """This repository with the tiny plugin and driver in place of ours, and the tiny matrix."""
    changes: dict[str, str | None] = {
        name: None for name in project_files() if name.startswith(("plugin/", "driver/", "patches/"))
    }
    for path in TINY.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts and path.parent != TINY:
            changes[path.relative_to(TINY).as_posix()] = path.read_text()
    changes["matrix.yaml"] = TINY_MATRIX
    return {**changes, **(extra or {})}


def unpublished() -> dict[str, str | None]:
    """Our committed table deleted: the repository is one that has never published (its first push publishes). The
    tiny project needs none of this: a table of another plugin is no base of its own, and no history of it."""
    return dict.fromkeys(PUBLISHED_DOCS)


def results(run: ActRun) -> dict[str, str]:
    return run.results()


def served(world: ActWorld, path: str) -> bytes:
    with urllib.request.urlopen(f"{world.pages_url}/{path}", timeout=30) as response:
        body: bytes = response.read()
        return body


def single_machine_site(world: ActWorld, work: Path, dest: Path, *build_args: str) -> Path:
    """The same repository built on one machine: every selected cell with `build`, then `compat-table` for the same
    site address the workflow published to; returns its site."""
    git(dest.parent, "clone", "-q", str(world.bare), str(dest))
    run_cli(dest, "build", "--runner", "local", *build_args)  # failed cells are part of the comparison
    published = run_cli(dest, "compat-table", "--site-url", world.pages_url)
    assert published.returncode == 0, published.stdout + published.stderr
    return dest / "wheels" / "site"


@pytest.fixture(scope="module")
def tiny_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ActWorld, Path]]:
    # plugin/BREAK_DRIVER_1 (a fault hook of the tiny plugin) breaks the driver-1 compile: that cell fails.
    with act_world(tmp_path_factory.mktemp("act-tiny"), name="tiny-project") as world:
        yield world, publish_repository(world, tiny_project({"plugin/BREAK_DRIVER_1": ""}))


@pytest.fixture(scope="module")
def tiny_push(tiny_world: tuple[ActWorld, Path]) -> ActRun:
    world, work = tiny_world
    return run_act(world, work, WORKFLOW, "push", variables=site_variables(world))


def test_the_workflow_under_test_is_the_one_we_ship(tiny_world: tuple[ActWorld, Path]) -> None:
    _world, work = tiny_world
    shipped = REPO / ".github" / "workflows" / WORKFLOW
    assert (work / ".github" / "workflows" / WORKFLOW).read_bytes() == shipped.read_bytes()


def test_push_runs_plan_cells_merge_publish_and_deploys_to_the_stand_in(tiny_push: ActRun) -> None:
    """A push to main runs every job; deploy runs (against the deploy-pages stand-in), although one cell failed."""
    assert results(tiny_push) == {
        "plan": "success",
        # the tiny plugin is a C extension: a build per cell; the broken one fails, and its cell with it
        f"build {TINY_CELLS[0]}": "failure",
        f"build {TINY_CELLS[1]}": "success",
        f"cell {TINY_CELLS[0]}": "failure",
        f"cell {TINY_CELLS[1]}": "success",
        "merge": "success",
        "publish": "success",
        "deploy": "success",
    }, tiny_push.summary() + "\n" + tiny_push.output[-6000:]
    assert tiny_push.returncode != 0  # act reports the failed job, as GitHub marks the run failed
    plan = [
        json.loads(line.split("cells=", 1)[1])
        for line in tiny_push.job("plan").log.splitlines()
        if "::set-output:: cells=" in line
    ]
    assert [e["cell"] for e in plan[0]["include"]] == list(TINY_CELLS)
    assert {e["runner"] for e in plan[0]["include"]} == {"local"}


def test_failed_cell_is_merged_and_published_as_failed(tiny_world: tuple[ActWorld, Path], tiny_push: ActRun) -> None:
    world, _work = tiny_world
    failed = tiny_push.artifacts / f"cell-{TINY_CELLS[0]}" / "files" / "results" / "cells" / f"{TINY_CELLS[0]}.json"
    assert json.loads(failed.read_text())["status"] == "failed"
    merged = tiny_push.artifacts / "wheels" / "files" / "results"
    assert sorted(p.stem for p in (merged / "cells").glob("*.json")) == list(TINY_CELLS)
    assert json.loads((merged / "summary.json").read_text())["counts"] == {"passed": 1, "failed": 1}
    # What the deployed site serves over HTTP: the failed cell shown failed, the other's wheel downloadable.
    table = json.loads(served(world, "compatibility.json"))
    statuses = {cell["id"]: cell["status"] for cell in table["cells"]}
    assert statuses == {TINY_CELLS[0]: "failed", TINY_CELLS[1]: "passed"}, statuses


def test_deployed_site_serves_the_docs_beside_the_install_page(
    tiny_world: tuple[ActWorld, Path], tiny_push: ActRun
) -> None:
    """One site: the publish job built the documentation (strict) into it, so Pages serves it under /docs/."""
    world, _work = tiny_world
    assert b"torch-buildmatrix" in served(world, "docs/index.html")
    assert b"merge-results" in served(world, "docs/reference/command-line/index.html")
    assert b"install and compatibility" in served(world, "index.html")


def test_deployed_site_equals_a_single_machine_build(
    tiny_world: tuple[ActWorld, Path], tiny_push: ActRun, tmp_path: Path
) -> None:
    world, work = tiny_world
    single = single_machine_site(world, work, tmp_path / "single")
    assert_same_site(world.pages / "live", single)


def test_dispatch_with_a_selection_builds_only_it_and_never_deploys(
    tiny_world: tuple[ActWorld, Path], tiny_push: ActRun
) -> None:
    world, work = tiny_world
    live_before = (world.pages / "live").resolve()
    run = run_act(
        world,
        work,
        WORKFLOW,
        "workflow_dispatch",
        payload={"ref": "refs/heads/main", "inputs": {"selection": "--sdk 2"}},
        variables=site_variables(world),
    )
    assert results(run) == {
        "plan": "success",
        f"build {TINY_CELLS[1]}": "success",
        f"cell {TINY_CELLS[1]}": "success",
        "merge": "success",
        "publish": "success",
    }, run.summary() + "\n" + run.output[-6000:]
    assert run.returncode == 0
    assert sorted(p.name for p in run.artifacts.iterdir()) == [
        f"build-{TINY_CELLS[1]}",
        f"cell-{TINY_CELLS[1]}",
        "wheels",
    ]  # no github-pages
    assert (world.pages / "live").resolve() == live_before
    assert len(list((world.pages / "deployments").iterdir())) == 1


def test_a_run_without_a_stand_in_fails_in_plan(tiny_world: tuple[ActWorld, Path]) -> None:
    """act left to fetch actions/checkout from GitHub (unreachable here): plan fails, naming it; nothing else runs."""
    world, work = tiny_world
    run = run_act(
        world, work, WORKFLOW, "push", variables=site_variables(world), without=frozenset({"actions/checkout"})
    )
    assert run.returncode != 0
    assert results(run) == {"plan": "failure"}, run.summary()
    assert "actions/checkout" in run.job("plan").log
    assert not any(run.artifacts.iterdir())


def test_a_workflow_using_an_action_without_stand_in_is_refused_before_act_starts(tmp_path: Path) -> None:
    """A workflow change that adds an action nobody stood in for: the harness names it, and nothing runs."""
    shipped = (REPO / ".github" / "workflows" / WORKFLOW).read_text()
    anchor = "      - name: Install nox and uv (retried)\n"
    added = "      - uses: someone/new-action@0123456789abcdef0123456789abcdef01234567 # v1.0.0\n"
    changed = shipped.replace(anchor, added + anchor, 1)
    line = changed[: changed.index(added)].count("\n") + 1
    with act_world(tmp_path / "world", name="new-action") as world:
        work = publish_repository(world, tiny_project({f".github/workflows/{WORKFLOW}": changed}))
        with pytest.raises(StandInError) as refused:
            run_act(world, work, WORKFLOW, "push", variables=site_variables(world))
        assert not list(world.root.glob("act-*.log"))  # act never started
    where = work / ".github" / "workflows" / WORKFLOW
    assert f"{where}:{line}: uses: someone/new-action@0123456789abcdef0123456789abcdef01234567 has no stand-in" in str(
        refused.value
    )


def test_a_plan_over_githubs_job_limit_fails_before_any_cell(tmp_path: Path) -> None:
    """280 cells (2 releases x 20 Pythons x 7 drivers) in matrix.yaml: plan fails saying why, and no cell job runs."""
    wheels = tmp_path / "torch-wheels"
    wheels.mkdir()
    pythons = [f"3.{n}" for n in range(20)]
    for version in ("2.12.0", "2.13.0"):
        for python in pythons:
            tag = f"cp3{python.split('.')[1]}"
            (wheels / f"torch-{version}+cpu-{tag}-{tag}-manylinux_2_28_x86_64.whl").write_bytes(b"")
    releases = "".join(
        f'  - {{version: "{v}", variant: cpu, wheels: {{find-links: "{wheels}"}}}}\n' for v in ("2.12.0", "2.13.0")
    )
    matrix = (
        TINY_MATRIX.split("python:", maxsplit=1)[0].replace(
            'versions: ["1.4", "2.1"]', "versions: [" + ", ".join(f'"{n}.0"' for n in range(1, 8)) + "]"
        )
        + f"python: [{', '.join(repr(p) for p in pythons)}]\ntorch:\n{releases}"
        + TINY_CONTRACT
    )
    with act_world(tmp_path / "world", name="too-large") as world:
        work = publish_repository(world, tiny_project({"matrix.yaml": matrix}))
        run = run_act(world, work, WORKFLOW, "push", variables=site_variables(world))
    assert results(run) == {"plan": "failure"}, run.summary() + "\n" + run.output[-4000:]
    assert "280 cells, but a GitHub Actions matrix runs at most 256 jobs" in run.job("plan").log


# --- the real plugin --------------------------------------------------------------------------------------------


def narrowed_matrix(image_cell: bool = False) -> str:
    """matrix.yaml with only the torch 2.13 CPU release (both drivers, Python 3.11): the cells this machine builds
    without downloading torch; with image_cell, also 2.13's CUDA build on Python 3.14 (driver 2), which only the
    forky image serves. The rules that would then match nothing are dropped; the deep tier is SHORT_DEEP_TIER."""
    spec = yaml.safe_load((REPO / "matrix.yaml").read_text())
    spec["torch"] = [t for t in spec["torch"] if t["version"] == "2.13.0" and (image_cell or t.get("variant") == "cpu")]
    spec["exclude"] = [{"python": "3.14", "driver": "1"}] if image_cell else []
    spec["include"] = []
    assert spec["smoke"]["tiers"]["deep"] == ["-m", "deep"]
    spec["smoke"]["tiers"]["deep"] = SHORT_DEEP_TIER
    return yaml.safe_dump(spec, sort_keys=False)


@pytest.mark.slow
def test_real_plugin_push_publishes_what_a_single_machine_publishes(tmp_path: Path) -> None:
    with act_world(tmp_path / "world") as world:
        work = publish_repository(world, {**unpublished(), "matrix.yaml": narrowed_matrix()})
        run = run_act(world, work, WORKFLOW, "push", variables=site_variables(world))
        print(run.summary())
        cells = ("torch2.13-cpu-cp311-drv1", "torch2.13-cpu-cp311-drv2")
        builds = ("torch2.13-cpu-drv1", "torch2.13-cpu-drv2")  # torch_emu's wheel serves every Python
        assert results(run) == {
            "plan": "success",
            **{f"build {build}": "success" for build in builds},
            **{f"cell {cell}": "success" for cell in cells},
            "merge": "success",
            "publish": "success",
            "deploy": "success",
        }, run.summary() + "\n" + run.output[-6000:]
        single = single_machine_site(world, work, tmp_path / "single")
        assert_same_site(world.pages / "live", single)
        wheel = next(iter(sorted((world.pages / "live").rglob("torch_emu-*.whl"))))
        assert served(world, wheel.relative_to(world.pages / "live").as_posix()) == wheel.read_bytes()
    shutil.rmtree(tmp_path / "single", ignore_errors=True)


@pytest.mark.slow
@pytest.mark.docker
def test_a_cell_only_an_image_serves_runs_on_the_docker_runner(tmp_path: Path) -> None:
    """torch 2.13 CUDA on Python 3.14 (about 3 GB of torch): plan gives it the Docker runner (no setup-python 3.14 on
    a hosted runner, the forky image serves it), its job builds it there, and it is published beside the local cells."""
    image_cell = "torch2.13-cuda-cp314-drv2"
    with act_world(tmp_path / "world") as world:
        work = publish_repository(world, {**unpublished(), "matrix.yaml": narrowed_matrix(image_cell=True)})
        run = run_act(world, work, WORKFLOW, "push", variables=site_variables(world), timeout=3 * 3600)
        print(run.summary())
        assert results(run)[f"cell {image_cell}"] == "success", run.summary() + "\n" + run.output[-6000:]
        assert {job.matrix["cell"]: job.matrix["runner"] for job in run.ran("cell")} == {
            "torch2.13-cpu-cp311-drv1": "local",
            "torch2.13-cpu-cp311-drv2": "local",
            image_cell: "docker",
        }
        assert results(run)["deploy"] == "success", run.summary()
        record = run.artifacts / f"cell-{image_cell}" / "files" / "results" / "cells" / f"{image_cell}.json"
        assert json.loads(record.read_text())["status"] == "passed"
        table = json.loads(served(world, "compatibility.json"))
        assert {cell["id"]: cell["status"] for cell in table["cells"]}[image_cell] == "passed"
