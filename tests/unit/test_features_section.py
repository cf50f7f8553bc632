"""The pages speak of the project they publish: a smoke suite that ran and reports no features (a project's own
suite, e.g. torch-scatter's 1387 tests) gets no features section, never "no cell has run the smoke suite yet"."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from torch_buildmatrix.publish.markdown import compatibility_markdown, readme_section
from torch_buildmatrix.publish.page import site_page
from torch_buildmatrix.publish.tableparse import parse_table

REPO = Path(__file__).parents[2]


def test_no_features_section_when_the_suite_ran_and_reports_none() -> None:
    table = parse_table((REPO / "tests" / "fixtures" / "published" / "compatibility.json").read_text(encoding="utf-8"))
    assert any(r.features for r in table.releases) and "## Features per torch release" in compatibility_markdown(table)
    featureless = replace(table, releases=tuple(replace(r, features={}) for r in table.releases))
    assert any(c.smoke is not None for c in featureless.cells)  # the suites ran
    docs, page = compatibility_markdown(featureless), site_page(featureless)
    assert "Features per torch release" not in docs and "No cell has run" not in docs
    assert "Features per torch release" not in page and "No cell has run" not in page
    assert "Install commands: [docs/compatibility.md]" in readme_section(featureless)
    # Nothing has run yet: the section stays and says so.
    untested = replace(featureless, cells=tuple(replace(c, smoke=None) for c in featureless.cells))
    assert "No cell has run the smoke suite yet" in compatibility_markdown(untested)
    assert "No cell has run the smoke suite yet" in site_page(untested)
