"""tests/parallel_plan.py on a generated suite: who shares an xdist worker, and in what order the work is handed out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import REPO

SUITE = {
    "conftest.py": """
        import json, os
        import pytest

        @pytest.fixture(scope="session")
        def built():
            return 1

        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(items):
            seen = [[i.name, [m.args[0] for m in i.iter_markers("xdist_group")]] for i in items]
            with open(os.environ["PLAN_OUT"], "w") as handle:
                json.dump(seen, handle)
    """,
    "test_a_unit.py": """
        def test_pure():
            pass
    """,
    "test_b_module.py": """
        import pytest

        @pytest.fixture(scope="module")
        def site():
            return 1

        def test_site_one(site):
            pass

        def test_site_two(site):
            pass

        def test_alone():
            pass
    """,
    "test_c_session.py": """
        import pytest

        pytestmark = pytest.mark.integration

        def test_uses_built(built):
            pass

        @pytest.mark.slow
        def test_slow_alone():
            pass
    """,
    "test_d_act.py": """
        import pytest

        pytestmark = [pytest.mark.act, pytest.mark.xdist_group("store")]

        @pytest.fixture(scope="module")
        def world():
            return 1

        def test_world(world):
            pass

        def test_also_built(built):
            pass
    """,
}


def plan(tmp_path: Path) -> list[tuple[str, list[str]]]:
    for name, text in SUITE.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n  integration\n  slow\n  act\n")
    out = tmp_path / "plan.json"
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests"), "PLAN_OUT": str(out)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "parallel_plan", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [(name, groups) for name, groups in json.loads(out.read_text())]


def test_shared_fixtures_and_marks_make_groups_and_long_work_goes_first(tmp_path: Path) -> None:
    assert plan(tmp_path) == [
        # act first; the session fixture `built` joins test_uses_built to the act group, named by its mark
        ("test_uses_built", ["store"]),
        ("test_world", ["store"]),
        ("test_also_built", ["store"]),
        # then slow; then the rest as collected, the tests sharing a module fixture one group beside their module
        ("test_slow_alone", []),
        ("test_pure", []),
        ("test_site_one", ["module test_b_module.py"]),
        ("test_site_two", ["module test_b_module.py"]),
        ("test_alone", []),
    ]
