"""The starter workflow `torch-buildmatrix init` writes passes the checks .ci/run applies to ours (schema, timeouts,
zizmor)."""

from __future__ import annotations

from pathlib import Path

import pytest

from torch_buildmatrix.starter import WORKFLOW, project_facts, starter_files


@pytest.mark.integration
def test_the_starter_workflow_passes_the_checks_ours_does(tmp_path: Path) -> None:
    """GitHub's workflow schema, the timeout rule and zizmor's audits, as .ci/run checks .github/workflows/."""
    import shutil
    import subprocess

    tools = [shutil.which("check-jsonschema"), shutil.which("zizmor")]
    if None in tools:
        pytest.skip("needs check-jsonschema and zizmor (.ci/run installs them)")
    facts = project_facts(tmp_path, distribution="my-ext")
    workflow = tmp_path / WORKFLOW
    workflow.parent.mkdir(parents=True)
    workflow.write_text(starter_files(tmp_path, facts)[WORKFLOW])
    for schema in ("vendor.github-workflows", "custom.github-workflows-require-timeout"):
        checked = subprocess.run(
            [str(tools[0]), "--builtin-schema", schema, str(workflow)], capture_output=True, text=True, check=False
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
    audit = subprocess.run(
        [str(tools[1]), "--offline", str(workflow.parent)], capture_output=True, text=True, check=False
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr
