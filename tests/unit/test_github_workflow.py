"""The GitHub Actions fan-out: the `--github` matrix it runs, and the practices its jobs must keep.

GitHub's own workflow schema and zizmor check the file in .ci/run; these check what neither can: that every matrix key
the workflow reads exists in every entry, names are unique, and each job keeps the practices the README promises.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.version import Version

from torch_buildmatrix.builder.selection import GITHUB_MATRIX_LIMIT
from torch_buildmatrix.errors import MatrixTooLarge
from torch_buildmatrix.model.builds import Build, plan_builds
from torch_buildmatrix.model.cells import Cell, expand, make_cell
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import SdkVersion, TorchRelease, WheelSource
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.publish.table import CompatTable, available_from_table
from torch_buildmatrix.report_matrix import github_matrix
from torch_buildmatrix.vocab import RunnerName, WheelSourceKind

ROOT = Path(__file__).parents[2]
WORKFLOW_PATH = ROOT / ".github" / "workflows" / "build-matrix.yml"
WORKFLOW: dict[Any, Any] = yaml.safe_load(WORKFLOW_PATH.read_text())
JOBS: dict[str, dict[str, Any]] = WORKFLOW["jobs"]


def project_cells() -> list[Cell]:
    """The project's cells, expanded offline with the Pythons recorded in docs/compatibility.json."""
    matrix = load_matrix(ROOT / "matrix.yaml")
    table = CompatTable.from_json((ROOT / "docs" / "compatibility.json").read_text())
    return expand(matrix, available_from_table(table, matrix))


def project_builds(cells: list[Cell]) -> list[Build]:
    return list(plan_builds(load_matrix(ROOT / "matrix.yaml"), cells).values())


def local(cells: list[Cell], builds: list[Build] = ()) -> dict[Python, RunnerName]:  # type: ignore[assignment]
    """Every Python on the local runner (which runner a Python gets is tested in test_github_matrix_runners)."""
    return dict.fromkeys([*(c.python for c in cells), *(b.python for b in builds)], RunnerName.LOCAL)


def fanout() -> dict[str, Any]:
    cells = project_cells()
    builds = project_builds(cells)
    return github_matrix(cells, builds, local(cells, builds))


def test_project_matrix_fits_one_workflow_run_with_unique_names() -> None:
    matrices = fanout()
    for part, key, prefix in (("cells", "cell", "cell"), ("builds", "build", "build")):
        include = matrices[part]["include"]
        assert 0 < len(include) <= GITHUB_MATRIX_LIMIT
        for name in (key, "artifact"):
            names = [entry[name] for entry in include]
            assert len(set(names)) == len(names), f"duplicate {name} names"
        # Artifact names may not hold characters upload-artifact refuses.
        assert all(re.fullmatch(rf"{prefix}-[A-Za-z0-9._-]+", entry["artifact"]) for entry in include)
    builds = {entry["artifact"] for entry in matrices["builds"]["include"]}
    assert {entry["build_artifact"] for entry in matrices["cells"]["include"]} == builds  # every build has a cell


@pytest.mark.parametrize(("job", "part", "must"), [("build", "builds", "build"), ("cell", "cells", "cell")])
def test_every_matrix_key_a_job_reads_is_in_every_entry(job: str, part: str, must: str) -> None:
    expressions = re.findall(r"\$\{\{(.*?)\}\}", yaml.safe_dump(JOBS[job]))
    used = {key for expression in expressions for key in re.findall(r"\bmatrix\.(\w+)", expression)}
    assert {must, "args", "artifact", "python", "torch_version", "variant", "runner"} <= used
    for entry in fanout()[part]["include"]:
        assert used <= set(entry), f"{entry[must]} lacks {used - set(entry)}"


def test_entry_args_select_exactly_their_cell_or_build() -> None:
    from torch_buildmatrix.cli import build_parser

    cells = project_cells()
    matrices = fanout()
    for cell, entry in zip(cells, matrices["cells"]["include"], strict=True):
        assert entry["args"].split() == [
            "--torch",
            cell.torch.minor,
            "--python",
            str(cell.python),
            "--sdk",
            str(cell.sdk.version if cell.sdk else ""),
            "--variant",
            cell.torch.variant,
            "--prebuilt",
        ]
        assert entry["build"] == cell.build.id
    for entry in matrices["builds"]["include"]:
        assert entry["args"].split() == ["--build", entry["build"], "--builds-only"]
        args = build_parser().parse_args(
            ["build", "--matrix", str(ROOT / "matrix.yaml"), "--offline", *entry["args"].split()]
        )
        assert args.builds_only and args.build == [entry["build"]]


def test_planning_fails_beyond_the_job_limit() -> None:
    matrix = load_matrix(ROOT / "matrix.yaml")
    release = TorchRelease(Version("2.4.1"), "cuda", WheelSource(WheelSourceKind.REGISTRY), None, ())
    sdk = SdkVersion(Version("2.1"), "drv2")
    cells = [make_cell(matrix, release, Python.parse(f"3.{n}"), sdk) for n in range(GITHUB_MATRIX_LIMIT + 1)]
    builds = list(plan_builds(matrix, cells).values())  # one for all: torch_emu's wheel serves every Python
    fits = github_matrix(cells[:GITHUB_MATRIX_LIMIT], builds, local(cells, builds))
    assert len(fits["cells"]["include"]) == GITHUB_MATRIX_LIMIT and len(fits["builds"]["include"]) == 1
    with pytest.raises(
        MatrixTooLarge, match=f"{GITHUB_MATRIX_LIMIT + 1} cells, but a GitHub Actions matrix runs at most"
    ):
        github_matrix(cells, builds, local(cells, builds))


@pytest.mark.parametrize("job", sorted(JOBS))
def test_every_job_has_a_timeout_and_least_privilege(job: str) -> None:
    spec = JOBS[job]
    assert isinstance(spec.get("timeout-minutes"), int)
    permissions = spec.get("permissions")
    assert isinstance(permissions, dict) and permissions, "each job names the permissions it needs"
    writes = {name for name, level in permissions.items() if level == "write"}
    assert writes <= ({"pages", "id-token"} if job == "deploy" else set())


def test_workflow_level_practice() -> None:
    assert WORKFLOW["permissions"] == {}
    assert "group" in WORKFLOW["concurrency"] and "cancel-in-progress" in WORKFLOW["concurrency"]
    for job, part in (("build", "builds"), ("cell", "cells")):
        assert JOBS[job]["strategy"]["fail-fast"] is False
        assert JOBS[job]["strategy"]["matrix"] == f"${{{{ fromJSON(needs.plan.outputs.{part}) }}}}"
    # a cell runs after its build even when it failed (the cell then records the build's failure), never before
    assert JOBS["cell"]["needs"] == ["plan", "build"] and "!cancelled()" in JOBS["cell"]["if"]
    download = next(s for s in JOBS["cell"]["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"] == {"name": "${{ matrix.build_artifact }}", "path": "wheels"}
    for job in ("publish", "deploy"):
        text = yaml.safe_dump(JOBS[job])
        assert "refs/heads/main" in text, f"{job} publishes from main only"
        assert "!inputs.selection" in text, f"{job} never publishes a run that built a selection only"


def test_every_action_is_pinned_by_commit_sha_with_its_version() -> None:
    lines = [line.strip() for line in WORKFLOW_PATH.read_text().splitlines() if re.match(r"\s*(- )?uses:", line)]
    assert lines
    for line in lines:
        assert re.fullmatch(r"(- )?uses: [\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+", line), line


def test_merge_runs_merge_results_on_every_cell_artifact() -> None:
    steps = JOBS["merge"]["steps"]
    download = next(s for s in steps if "download-artifact" in s.get("uses", ""))
    assert download["with"]["pattern"] == "cell-*" and "merge-multiple" not in download["with"]
    [merge] = [s["run"] for s in steps if "merge-results" in s.get("run", "")]
    assert 'nox -s merge-results -- "${trees[@]}" --into wheels' in merge
    assert "trees=(artifacts/cell-*)" in merge and "trees=(artifacts)" in merge  # several artifacts, or a lone one


def test_matrix_github_refuses_more_than_256_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`nox -s matrix -- --github` on a matrix of 2 releases x 20 Pythons x 7 SDK versions: an error, no JSON."""
    from torch_buildmatrix.cli import main

    wheels = tmp_path / "torch-wheels"
    wheels.mkdir()
    pythons = [f"3.{n}" for n in range(20)]
    for version in ("2.12.0", "2.13.0"):
        for python in pythons:
            tag = f"cp3{python.split('.')[1]}"
            (wheels / f"torch-{version}+cpu-{tag}-{tag}-manylinux_2_28_x86_64.whl").write_bytes(b"")
    for part in ("plugin/tests", "driver"):
        (tmp_path / part).mkdir(parents=True)
    (tmp_path / "plugin/tests/test_smoke.py").write_text("")
    releases = "".join(
        f'  - {{version: "{v}", variant: cpu, wheels: {{find-links: "{wheels}"}}}}\n' for v in ("2.12.0", "2.13.0")
    )
    drivers = ", ".join(f'"{n}.0"' for n in range(1, 8))
    (tmp_path / "matrix.yaml").write_text(
        "plugin: {distribution: p, version: 0.1.0, source: plugin, smoke-tests: plugin/tests,\n"
        '  label: "torch.{torch_minor}.sdk.{sdk_major}"}\n'
        f"sdk: {{kind: wheel, distribution: d, source: driver, versions: [{drivers}]}}\n"
        f"python: [{', '.join(repr(p) for p in pythons)}]\n"
        f"torch:\n{releases}"
    )
    code = main(["matrix", "--matrix", str(tmp_path / "matrix.yaml"), "--github"])
    captured = capsys.readouterr()
    assert code == MatrixTooLarge.exit_code
    assert "280 cells, but a GitHub Actions matrix runs at most 256 jobs" in captured.err
    assert captured.out == ""


def test_publish_starts_from_the_live_sites_history() -> None:
    """A fresh runner has no site of its own: the publish job fetches the live site's ledger, compatibility.json and
    released wheels before compat-table, so one failing cell never takes its released wheels off the site."""
    steps = JOBS["publish"]["steps"]
    runs = [step.get("run", "") for step in steps]
    fetch = next(i for i, run in enumerate(runs) if "nox -s fetch-site -- --site-url" in run)
    publish = next(i for i, run in enumerate(runs) if "nox -s compat-table -- --site-url" in run)
    download = next(i for i, step in enumerate(steps) if step.get("uses", "").startswith("actions/download-artifact"))
    assert download < fetch < publish and "curl" not in "\n".join(runs)
    noxfile = (ROOT / "noxfile.py").read_text()
    assert 'name="fetch-site"' in noxfile and '"fetch-site", *session.posargs' in noxfile
    # The live site's URL: the repository variable, else Pages' address, at the root for a <owner>.github.io site.
    url = " ".join(JOBS["publish"]["env"]["SITE_URL"].split())
    assert url.startswith("${{ vars.SITE_URL ||")
    assert "github.event.repository.name == format('{0}.github.io', github.repository_owner)" in url
    assert "format('https://{0}.github.io', github.repository_owner)" in url


def test_a_large_matrix_prints_as_plain_aligned_text() -> None:
    """Beyond RICH_ROWS cells `matrix` prints plain columns (rich measured every cell: 45 s for 10 000 rows)."""
    from torch_buildmatrix.report_matrix import RICH_ROWS, cells_text

    cells = project_cells()
    text = cells_text(cells, {c.id: "local: /usr/bin/python3" for c in cells}, "driver")
    lines = text.splitlines()
    assert len(lines) == len(cells) + 2 and lines[0].split() == [
        "cell",
        "torch",
        "variant",
        "python",
        "driver",
        "patches",
        "build",
        "runner",
    ]
    assert [line.split()[0] for line in lines[2:]] == [c.id for c in cells]
    assert len({line.index(" local: ") for line in lines[2:]}) == 1  # one column for the runner, aligned
    assert RICH_ROWS < 10_000


def test_a_large_build_list_prints_as_plain_aligned_text() -> None:
    """The builds table too: at 10 000 cells of a per-Python project there are 10 000 builds, which rich took 6 s to
    lay out."""
    from torch_buildmatrix.report_matrix import builds_table, builds_text

    builds = project_builds(project_cells())
    runners = {b.id: f"local: /usr/bin/python{b.python}" for b in builds}
    lines = builds_text(builds, runners, "driver").splitlines()
    assert re.split(r"\s{2,}", lines[0]) == [c.header for c in builds_table(builds, runners, "driver").columns]
    assert set(lines[1]) == {"-", " "}
    assert [line.split()[0] for line in lines[2:]] == [b.id for b in builds]
    assert [line.split()[-1] for line in lines[2:]] == [runners[b.id].split()[-1] for b in builds]
    assert len({line.index(" local: ") for line in lines[2:]}) == 1  # the runner column is aligned


def test_publish_puts_the_strictly_built_docs_into_the_site_it_uploads() -> None:
    """One site: the docs are built (strict) into wheels/site/docs after compat-table made the site, before upload."""
    steps = JOBS["publish"]["steps"]
    runs = [s.get("run", "") for s in steps]
    table = next(i for i, run in enumerate(runs) if "nox -s compat-table" in run)
    docs = next(i for i, run in enumerate(runs) if "nox -s docs" in run)
    upload = next(i for i, s in enumerate(steps) if "upload-pages-artifact" in s.get("uses", ""))
    assert table < docs < upload
    assert "--build-only --site-dir wheels/site/docs" in runs[docs]
    assert steps[upload]["with"]["path"] == "wheels/site/"


def test_the_workflow_buildmatrix_init_writes_is_this_one() -> None:
    """`torch-buildmatrix init` gives adopters this workflow (its own header and name, their sources in the ccache key),
    so what the act runs prove of ours holds for theirs (tests/integration/test_act_build_matrix.py)."""
    template = (ROOT / "torch_buildmatrix" / "templates" / "workflow.yml").read_text()
    ours = WORKFLOW_PATH.read_text()
    ours_body = ours[ours.index("\non:") :].replace(
        "hashFiles('plugin/**', 'driver/**', 'patches/**')", "hashFiles(@SOURCE_GLOBS@)"
    )
    assert template[template.index("\non:") :] == ours_body
