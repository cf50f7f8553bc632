"""The daily `outdated` workflow: what GitHub's schema and zizmor (in .ci/run) do not check about it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parent.parent
WORKFLOW: dict[Any, Any] = yaml.safe_load((ROOT / ".github" / "workflows" / "outdated.yml").read_text())
JOB: dict[str, Any] = WORKFLOW["jobs"]["outdated"]
SCRIPT = "\n".join(step.get("run", "") for step in JOB["steps"])


def test_runs_daily_and_by_hand_one_at_a_time() -> None:
    triggers = WORKFLOW[True]  # YAML 1.1 reads the key `on` as true
    [schedule] = triggers["schedule"]
    minute, hour, day, month, weekday = schedule["cron"].split()
    assert (day, month, weekday) == ("*", "*", "*") and minute.isdigit() and hour.isdigit()
    assert "workflow_dispatch" in triggers
    assert WORKFLOW["concurrency"] == {"group": "${{ github.workflow }}", "cancel-in-progress": False}


def test_least_privilege_and_no_secret_but_the_token() -> None:
    assert WORKFLOW["permissions"] == {}
    assert JOB["permissions"] == {"contents": "write", "pull-requests": "write"}
    assert 0 < JOB["timeout-minutes"] <= 360
    text = (ROOT / ".github" / "workflows" / "outdated.yml").read_text()
    assert "secrets." not in text
    assert re.findall(r"\$\{\{\s*github\.token\s*\}\}", text) == ["${{ github.token }}"]
    for step in JOB["steps"]:
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False


def test_applies_then_proposes_the_change_with_the_probe_report() -> None:
    assert "nox -s outdated -- --apply --report build/outdated/report.md" in SCRIPT
    assert "--no-probe" not in SCRIPT
    assert "git diff --quiet -- matrix.yaml" in SCRIPT  # no pull request when nothing changed
    assert "--body-file build/outdated/report.md" in SCRIPT
    noxfile = (ROOT / "noxfile.py").read_text()
    assert "def outdated(session" in noxfile and '"outdated", *session.posargs' in noxfile
