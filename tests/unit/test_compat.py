"""Compatibility table, its Markdown and HTML renderings, the wheel index and its coverage check (fast, no network)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from fake_wheels import cell_result, make_wheel

from torch_buildmatrix.model.cells import Cell, expand
from torch_buildmatrix.model.contract import README_END, README_START, TorchPin
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import Matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.publish.advice import all_choices, install_choice
from torch_buildmatrix.publish.docs import DOCS_TABLE, docs_problems, rendered_docs
from torch_buildmatrix.publish.index import check_coverage, page_anchors, read_metadata
from torch_buildmatrix.publish.markdown import (
    features_table,
    grid,
    install_section,
    readme_section,
    replace_readme_section,
)
from torch_buildmatrix.publish.overlay import build_table, feature_support
from torch_buildmatrix.publish.page import site_page
from torch_buildmatrix.publish.site import write_site
from torch_buildmatrix.publish.staleness import stale_problems
from torch_buildmatrix.publish.table import CompatTable, FeatureSupport, available_from_table
from torch_buildmatrix.vocab import FeatureState, Status

from conftest import REPO, VALID, WriteMatrix

PUBLISHED = {"2.4": {"3.9", "3.10", "3.11"}, "2.13": {"3.11"}}


def cells_of(matrix: Matrix) -> tuple[list[Cell], dict]:  # type: ignore[type-arg]
    available = {r: {Python.parse(p) for p in PUBLISHED[r.minor]} for r in matrix.torch}
    return expand(matrix, available), available


def table_for(matrix: Matrix, results: list) -> CompatTable:  # type: ignore[type-arg]
    cells, available = cells_of(matrix)
    return build_table(matrix, cells, results, available)


def by_id(cells: list[Cell]) -> dict[str, Cell]:
    return {c.id: c for c in cells}


def test_without_results_every_declared_cell_is_not_built(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix())
    table = table_for(matrix, [])
    assert len(table.cells) == 8 and {c.status for c in table.cells} == {Status.NOT_BUILT}
    section = readme_section(table)
    assert section.count(f" {Status.NOT_BUILT} |") == 8 and "✓ " not in grid(table) and "✗ " not in grid(table)
    assert "| 2.13.0 (cpu) | 1.4 | — | — | not built |" in section  # torch 2.13 has no wheel for 3.9/3.10
    assert all(c.cell is None for c in all_choices(table))


def test_a_driver_a_release_never_uses_gets_no_row(write_matrix: WriteMatrix) -> None:
    from conftest import VALID

    matrix = load_matrix(
        write_matrix(VALID.replace("runner: auto", 'exclude:\n  - {torch: "2.13", sdk: "1"}\nrunner: auto'))
    )
    table = table_for(matrix, [])
    markdown = grid(table)
    assert "| 2.13.0 (cpu) | 2.1 |" in markdown and "| 2.13.0 (cpu) | 1.4 |" not in markdown
    assert "| 2.4.1 (cuda) | 1.4 |" in markdown
    page = site_page(table)
    assert page.count("<th>2.13.0 (cpu)</th>") == 1 and page.count("<th>2.4.1 (cuda)</th>") == 2


def test_statuses_and_stale_records(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    matrix = load_matrix(write_matrix())
    cells = by_id(cells_of(matrix)[0])
    results = [
        cell_result(cells["torch2.13-cpu-cp311-drv2"], wheels_dir=tmp_path),
        cell_result(cells["torch2.4-cuda-cp310-drv1"], "failed", wheels_dir=tmp_path),
        cell_result(cells["torch2.4-cuda-cp39-drv1"], torch="2.4.0", wheels_dir=tmp_path),  # built for an older matrix
    ]
    table = table_for(matrix, results)
    status = {c.id: c.status for c in table.cells}
    assert status["torch2.13-cpu-cp311-drv2"] == "passed"
    assert status["torch2.4-cuda-cp310-drv1"] == "failed"
    assert status["torch2.4-cuda-cp39-drv1"] == Status.NOT_BUILT
    passed = next(c for c in table.cells if c.id == "torch2.13-cpu-cp311-drv2")
    assert passed.requirement == "torch-emu==0.1.0+torch.2.13.drv.2" and passed.installable
    section = readme_section(table)
    assert "✓ 90 (2 skipped)" in section and "✗ smoke" in section


def test_records_of_another_plugin_version_are_not_built(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    """Changing plugin.version leaves no install command for a version that was never built."""
    path = write_matrix()
    old = load_matrix(path)
    cells = by_id(cells_of(old)[0])
    results = [cell_result(cells["torch2.13-cpu-cp311-drv2"], wheels_dir=tmp_path)]  # a 0.1.0 wheel
    assert {c.id: c.status for c in table_for(old, results).cells}["torch2.13-cpu-cp311-drv2"] == "passed"
    path.write_text(path.read_text().replace("version: 0.1.0", "version: 0.2.0"))
    new = load_matrix(path)
    table = table_for(new, results)
    cell = next(c for c in table.cells if c.id == "torch2.13-cpu-cp311-drv2")
    assert cell.status == Status.NOT_BUILT and cell.wheel is None
    assert cell.requirement == "torch-emu==0.2.0+torch.2.13.drv.2"
    assert "0.1.0" not in readme_section(table)


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ({"1": "passed", "2": "passed"}, FeatureSupport(FeatureState.AVAILABLE)),
        (
            {"1": "not available: needs driver API 2.x", "2": "passed"},
            FeatureSupport(FeatureState.PARTIAL, "driver 2 only"),
        ),
        (
            {"1": "not available: needs torch >=2.6", "2": "not available: needs torch >=2.6"},
            FeatureSupport(FeatureState.NOT_AVAILABLE, "needs torch >=2.6"),
        ),
        ({"1": "passed", "2": "failed"}, FeatureSupport(FeatureState.FAILED, "driver 2")),
        # A passed outcome with a detail (the OpInfo conformance counts) is passed, the detail its note.
        (
            {"1": "passed: forward float32 500/500", "2": "passed: forward float32 500/500"},
            FeatureSupport(FeatureState.AVAILABLE, "forward float32 500/500"),
        ),
        (
            {"1": "not available: needs driver API 2.x", "2": "passed: 7/7"},
            FeatureSupport(FeatureState.PARTIAL, "driver 2 only"),
        ),
    ],
)
def test_feature_support(outcomes: dict[str, str], expected: FeatureSupport) -> None:
    assert feature_support(outcomes, "driver") == expected


def test_features_per_release_from_results(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix())
    cells = by_id(cells_of(matrix)[0])
    results = [
        cell_result(
            cells["torch2.13-cpu-cp311-drv1"],
            features={"events": "passed", "event_timing": "not available: needs driver API 2.x"},
        ),
        cell_result(cells["torch2.13-cpu-cp311-drv2"], features={"events": "passed", "event_timing": "passed"}),
    ]
    release = table_for(matrix, results).release("torch2.13-cpu")
    assert release.features == {
        "event_timing": FeatureSupport(FeatureState.PARTIAL, "driver 2 only"),
        "events": FeatureSupport(FeatureState.AVAILABLE),
    }


def test_markdown_features_say_why_a_release_lacks_one(write_matrix: WriteMatrix) -> None:
    """The committed docs give the reason the page gives: a footnote per distinct reason, shared by the releases."""
    matrix = load_matrix(write_matrix())
    cells = by_id(cells_of(matrix)[0])
    needs = "not available: transformers 5 needs torch >= 2.6 | pinned"
    results = [
        cell_result(cells["torch2.13-cpu-cp311-drv1"], features={"models": needs, "named": "not available"}),
        cell_result(cells["torch2.13-cpu-cp311-drv2"], features={"models": needs, "named": "not available"}),
        cell_result(cells["torch2.4-cuda-cp310-drv1"], features={"models": needs, "named": "passed"}),
    ]
    text = features_table(table_for(matrix, results))
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| ")}
    assert rows["| Models"].count("\N{EN DASH} \\[1\\]") == 2  # one reason, one footnote, both releases
    assert "\\[2\\]" not in text
    assert "\N{EN DASH} |" in rows["| Named"]  # no reason recorded: the mark alone
    assert "- \\[1\\] transformers 5 needs torch &gt;= 2.6 \\| pinned" in text.splitlines()  # escaped, one line
    assert text.count("transformers 5 needs") == 1


def test_install_choice_exact_and_nearest(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    matrix = load_matrix(write_matrix())
    cells = by_id(cells_of(matrix)[0])
    results = [
        cell_result(cells[i], wheels_dir=tmp_path)
        for i in ("torch2.13-cpu-cp311-drv2", "torch2.4-cuda-cp310-drv1", "torch2.4-cuda-cp39-drv2")
    ]
    table = table_for(matrix, results)

    exact = install_choice(table, "torch2.13-cpu", "3.11", "drv2", site="https://w.example")
    assert exact.exact and exact.cell == "torch2.13-cpu-cp311-drv2"
    assert exact.index_command == (
        "pip install torch-emu==0.1.0+torch.2.13.drv.2 emu-driver==2.1.0+emu --only-binary=:all: "
        "--extra-index-url https://w.example/torch2.13/simple/"
    )
    assert exact.release_index_command == (
        "pip install torch-emu --only-binary=:all: --extra-index-url https://w.example/torch2.13/simple/"
    )
    assert exact.find_links_command.endswith("--find-links https://w.example/torch2.13/")
    # Same driver beats same torch; within a release the closest Python wins.
    assert install_choice(table, "torch2.4-cuda", "3.11", "drv2").cell == "torch2.4-cuda-cp39-drv2"
    assert install_choice(table, "torch2.4-cuda", "3.11", "drv1").cell == "torch2.4-cuda-cp310-drv1"
    outside = install_choice(table, "torch2.13-cpu", "3.9", "drv1")
    assert not outside.exact and outside.cell == "torch2.4-cuda-cp310-drv1"
    assert (
        "publishes no wheel for Python 3.9" in outside.note
        and "Nearest supported choice: torch 2.4.1, Python 3.10, driver 1" in outside.note
    )
    assert "sdist" not in exact.index_command and all(
        "--only-binary=:all:" in c.index_command for c in all_choices(table) if c.cell
    )


def test_without_a_torch_pin_no_choice_offers_another_releases_wheel(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    """Wheels that name no torch import only beside their own release's torch: a choice whose nearest installable
    cell is of another release gets no command (it would install a wheel that fails with undefined symbols, and
    nothing would bring its torch), only the note; a choice of the same release keeps its commands."""
    matrix = load_matrix(write_matrix())
    cells = by_id(cells_of(matrix)[0])
    table = replace(
        table_for(matrix, [cell_result(cells["torch2.13-cpu-cp311-drv2"], wheels_dir=tmp_path)]),
        torch_pin=TorchPin.NONE,
    )
    other_release = install_choice(table, "torch2.4-cuda", "3.11", "drv2")  # nearest: torch 2.13's cell
    assert other_release.cell is None and not other_release.exact
    assert not (other_release.index_command or other_release.find_links_command or other_release.release_index_command)
    assert other_release.note.endswith("import only beside torch 2.13.0: choose that release")
    same_release = install_choice(table, "torch2.13-cpu", "3.11", "drv2")
    assert same_release.exact and "--only-binary=:all:" in same_release.index_command
    pinned = install_choice(replace(table, torch_pin=TorchPin.RELEASE_LINE), "torch2.4-cuda", "3.11", "drv2")
    assert pinned.cell == "torch2.13-cpu-cp311-drv2"  # a pinned wheel brings its torch: the nearest's commands stay


def test_json_round_trip(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    matrix = load_matrix(write_matrix())
    cells = by_id(cells_of(matrix)[0])
    table = table_for(
        matrix, [cell_result(cells["torch2.13-cpu-cp311-drv1"], wheels_dir=tmp_path, features={"events": "passed"})]
    )
    assert CompatTable.from_json(table.to_json()) == table
    with pytest.raises(ValueError, match="schema"):
        CompatTable.from_dict({**json.loads(table.to_json()), "schema_version": 99})


def test_readme_section_replacement() -> None:
    readme = f"intro\n{README_START}\nold\n{README_END}\noutro\n"
    assert (
        replace_readme_section(readme, f"{README_START}new{README_END}")
        == f"intro\n{README_START}new{README_END}\noutro\n"
    )
    with pytest.raises(ValueError, match=r"markers|pair"):
        replace_readme_section("no markers here", "x")


def test_stale_table_is_detected(write_matrix: WriteMatrix) -> None:
    matrix = load_matrix(write_matrix())
    table = table_for(matrix, [])
    assert stale_problems(table, matrix) == []
    changed = load_matrix(
        write_matrix(
            Path(matrix.path).read_text().replace('python: ["3.9", "3.10", "3.11"]', 'python: ["3.10", "3.11"]')
        )
    )
    assert any("cells" in p for p in stale_problems(table, changed))
    newer = load_matrix(write_matrix(Path(matrix.path).read_text().replace('"2.4.1"', '"2.4.0"')))
    assert any("torch releases" in p for p in stale_problems(table, newer))


def site_with_two_cells(matrix: Matrix, wheels: Path) -> tuple[CompatTable, Path]:
    cells = by_id(cells_of(matrix)[0])
    results = [
        cell_result(cells["torch2.13-cpu-cp311-drv1"], wheels_dir=wheels),
        cell_result(cells["torch2.13-cpu-cp311-drv2"], wheels_dir=wheels),
        cell_result(cells["torch2.4-cuda-cp310-drv1"], "failed", wheels_dir=wheels),
    ]
    # A wheel left by an earlier passing run of the now failing cell must not be indexed.
    make_wheel(wheels / "torch2.4", "torch-emu", "0.1.0+torch.2.4.drv.1")
    table = table_for(matrix, results)
    report = write_site(table, wheels, wheels / "site")
    assert report.problems == []
    return table, wheels / "site"


def test_site_and_wheel_index(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    matrix = load_matrix(write_matrix())
    table, site = site_with_two_cells(matrix, tmp_path / "wheels")
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("index.html"))
    # torch 2.4 built no wheel: no find-links page for it.
    assert pages == [
        "index.html",
        "simple/emu-driver/index.html",
        "simple/index.html",
        "simple/torch-emu/index.html",
        "torch2.13/index.html",
        "torch2.13/simple/emu-driver/index.html",
        "torch2.13/simple/index.html",
        "torch2.13/simple/torch-emu/index.html",
    ]
    assert not (site / "torch2.4").exists() and not list(site.rglob("*.tar.gz"))
    anchors = page_anchors((site / "simple/torch-emu/index.html").read_text())
    assert len(anchors) == 2
    for anchor in anchors:
        href, _, fragment = anchor["href"].partition("#")
        wheel = (site / "simple/torch-emu" / href).resolve()
        assert fragment.startswith("sha256=") and wheel.is_file()
        metadata = wheel.with_name(wheel.name + ".metadata").read_bytes()
        assert metadata == read_metadata(wheel) and b"Requires-Dist: emu-driver" in metadata
        assert anchor["data-core-metadata"] == anchor["data-dist-info-metadata"] and anchor[
            "data-core-metadata"
        ].startswith("sha256=")
    find_links = [a["href"].split("#")[0] for a in page_anchors((site / "torch2.13/index.html").read_text())]
    find_links_names = sorted(Path(h).name for h in find_links)
    assert find_links_names == sorted(
        [
            "emu_driver-1.4.0+emu-py3-none-any.whl",
            "emu_driver-2.1.0+emu-py3-none-any.whl",
            "torch_emu-0.1.0+torch.2.13.drv.1-py3-none-any.whl",
            "torch_emu-0.1.0+torch.2.13.drv.2-py3-none-any.whl",
        ]
    )
    # The release's own index root: PEP 503 pages with hashes and PEP 658 metadata, only this release's wheels.
    root = [a["href"] for a in page_anchors((site / "torch2.13/simple/index.html").read_text())]
    assert root == ["emu-driver/", "torch-emu/"]
    for project in ("torch-emu", "emu-driver"):
        page = site / "torch2.13/simple" / project / "index.html"
        for anchor in page_anchors(page.read_text()):
            href, _, fragment = anchor["href"].partition("#")
            wheel = (page.parent / href).resolve()
            assert wheel.is_file() and fragment == "sha256=" + hashlib.sha256(wheel.read_bytes()).hexdigest()
            assert (
                anchor["data-core-metadata"]
                == "sha256=" + hashlib.sha256(wheel.with_name(wheel.name + ".metadata").read_bytes()).hexdigest()
            )
    plugin_links = page_anchors((site / "torch2.13/simple/torch-emu/index.html").read_text())
    assert sorted(Path(a["href"].split("#")[0]).name for a in plugin_links) == sorted(
        n for n in find_links_names if n.startswith("torch_emu")
    )
    assert CompatTable.from_json((site / "compatibility.json").read_text()) == table


def test_every_link_of_the_page_resolves(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    matrix = load_matrix(write_matrix())
    table, site = site_with_two_cells(matrix, tmp_path / "wheels")
    page = (site / "index.html").read_text()
    hrefs = [a["href"] for a in page_anchors(page)]
    assert any(h.startswith("logs/") for h in hrefs) and any(h.endswith(".whl") for h in hrefs)
    for href in hrefs:
        target = site / href.split("#")[0]
        assert target.is_file() or (target / "index.html").is_file(), href
    assert page == site_page(
        table,
        {c.log for c in table.cells if c.log and (site / c.log).is_file()},
        [p.relative_to(site).as_posix() for p in sorted(site.glob("**/index.html")) if p.parent != site],
    )


@pytest.mark.parametrize(
    "damage", ["missing wheel", "changed wheel", "sdist", "stray wheel", "empty page", "other release's wheel"]
)
def test_coverage_check_fails_when_index_and_results_disagree(
    write_matrix: WriteMatrix, tmp_path: Path, damage: str
) -> None:
    matrix = load_matrix(write_matrix())
    table, site = site_with_two_cells(matrix, tmp_path / "wheels")
    plugin = next(site.glob("torch2.13/*drv.2*.whl"))
    if damage == "missing wheel":
        plugin.unlink()
    elif damage == "changed wheel":
        shutil.copyfile(next(site.glob("torch2.13/*drv.1*.whl")), plugin)
    elif damage == "sdist":
        (site / "torch2.13" / "torch_emu-0.1.0.tar.gz").write_bytes(b"")
    elif damage == "stray wheel":
        make_wheel(site / "torch2.13", "torch-emu", "0.1.0+torch.2.13.drv.9")
    elif damage == "empty page":
        (site / "torch2.4").mkdir()
        (site / "torch2.4" / "index.html").write_text("<html><body></body></html>")
    else:  # a release's own index offering a wheel of another release would steer installers to the wrong torch
        page = site / "torch2.13/simple/torch-emu/index.html"
        stray = make_wheel(site / "torch2.4", "torch-emu", "0.1.0+torch.2.4.drv.1")
        page.write_text(page.read_text().replace("</body>", f'<a href="../../../torch2.4/{stray.name}">x</a></body>'))
        assert any("which was never released for torch 2.13" in p for p in check_coverage(table, site))
    assert check_coverage(table, site) != []


def test_readme_and_docs_are_not_stale() -> None:
    """README's table and docs/compatibility.md are what the committed docs/compatibility.json renders to, and that
    table still describes matrix.yaml. Deterministic in a clean clone: nothing here reads wheels/ or the registry."""
    matrix = load_matrix(REPO / "matrix.yaml")
    table = CompatTable.from_json((REPO / DOCS_TABLE).read_text())
    assert docs_problems(table, matrix) == []


def test_clean_clone_renders_every_declared_cell_as_not_built() -> None:
    matrix = load_matrix(REPO / "matrix.yaml")
    recorded = CompatTable.from_json((REPO / DOCS_TABLE).read_text())
    available = available_from_table(recorded, matrix)
    empty = build_table(matrix, expand(matrix, available), [], available)
    readme = rendered_docs(empty, (REPO / "README.md").read_text())[Path("README.md")]
    section = readme[readme.index(README_START) : readme.index(README_END)]
    assert section.count(f" {Status.NOT_BUILT} |") == len(empty.cells) == len(recorded.cells)


def test_docs_say_when_recorded_wheels_carry_an_older_label_scheme(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    matrix = load_matrix(write_matrix())
    cells = by_id(cells_of(matrix)[0])
    table = table_for(matrix, [cell_result(cells["torch2.13-cpu-cp311-drv2"], wheels_dir=tmp_path)])
    assert "earlier local-label scheme" not in install_section(table)
    [cell] = [c for c in table.cells if c.installable]
    old = dataclasses.replace(cell, requirement="torch-emu==0.1.0+torch2.13.drv2")
    recorded = dataclasses.replace(table, cells=tuple(old if c == cell else c for c in table.cells))
    text = install_section(recorded)
    assert "earlier local-label scheme (e.g. `torch-emu==0.1.0+torch2.13.drv2`)" in text
    assert "pip install torch-emu==0.1.0+torch2.13.drv2 emu-driver==2.1.0+emu" in text  # the wheels that exist


def test_the_table_names_the_build_a_cell_shares(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    """A cell testing a build shared with other cells names it in the table; a cell with a build of its own (every
    table before builds were shared) names none, so those tables stay byte-identical."""
    shared = load_matrix(write_matrix(VALID + "build: {per-python: false}\n"))
    cells = by_id(cells_of(shared)[0])
    cell = cells["torch2.4-cuda-cp310-drv1"]
    table = table_for(shared, [cell_result(cell, wheels_dir=tmp_path)])
    data = json.loads(table.to_json())
    [row] = [c for c in data["cells"] if c["id"] == cell.id]
    assert row["build"]["id"] == "torch2.4-cuda-drv1" == cell.build.id
    assert CompatTable.from_json(table.to_json()) == table
    own = load_matrix(write_matrix())
    rows = json.loads(table_for(own, []).to_json())["cells"]
    assert rows and not any("build" in c for c in rows)
