"""The daily `outdated` workflow: what GitHub's schema and zizmor (in .ci/run) do not check about it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parents[2]
WORKFLOW: dict[Any, Any] = yaml.safe_load((ROOT / ".github" / "workflows" / "outdated.yml").read_text())
PROBE: dict[str, Any] = WORKFLOW["jobs"]["probe"]
PROPOSE: dict[str, Any] = WORKFLOW["jobs"]["propose"]
PROBE_SCRIPT = "\n".join(step.get("run", "") for step in PROBE["steps"])
PROPOSE_SCRIPT = "\n".join(step.get("run", "") for step in PROPOSE["steps"])


def test_runs_daily_and_by_hand_one_at_a_time() -> None:
    triggers = WORKFLOW[True]  # YAML 1.1 reads the key `on` as true
    [schedule] = triggers["schedule"]
    minute, hour, day, month, weekday = schedule["cron"].split()
    assert (day, month, weekday) == ("*", "*", "*") and minute.isdigit() and hour.isdigit()
    assert "workflow_dispatch" in triggers
    assert WORKFLOW["concurrency"] == {"group": "${{ github.workflow }}", "cancel-in-progress": False}


def test_least_privilege_and_no_secret_but_the_token() -> None:
    assert WORKFLOW["permissions"] == {}
    assert set(WORKFLOW["jobs"]) == {"probe", "propose"}
    assert PROBE["permissions"] == {"contents": "read"}  # the job that runs the new torch can write nothing
    assert PROPOSE["permissions"] == {"contents": "write", "pull-requests": "write"}
    for job in (PROBE, PROPOSE):
        assert 0 < job["timeout-minutes"] <= 360
    text = (ROOT / ".github" / "workflows" / "outdated.yml").read_text()
    assert "secrets." not in text
    assert re.findall(r"\$\{\{\s*github\.token\s*\}\}", text) == ["${{ github.token }}"]
    assert "github.token" not in yaml.safe_dump(PROBE)
    for step in PROBE["steps"] + PROPOSE["steps"]:
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False


def test_the_job_with_the_token_runs_no_code_from_the_probe() -> None:
    """The probe runs a torch release nobody reviewed; whatever it does stays in its job (GITHUB_ENV, GITHUB_PATH
    and git hooks act within the job that wrote them). The job that can push runs only git, gh and coreutils on a
    fresh checkout, and takes two data files from the probe: the edited matrix.yaml and the report."""
    assert PROPOSE["needs"] == "probe" and PROPOSE["if"] == "needs.probe.outputs.changed == 'true'"
    actions = [step["uses"].split("@")[0] for step in PROPOSE["steps"] if "uses" in step]
    assert actions == ["actions/checkout", "actions/download-artifact"]
    download = next(s for s in PROPOSE["steps"] if s.get("uses", "").startswith("actions/download-artifact"))
    assert download["with"] == {"name": "outdated-proposal", "path": "${{ runner.temp }}/proposal"}
    for word in ("python", "nox", "pip", "uv ", "bash ", "source ", ". ./", "chmod", "make", "npm"):
        assert word not in PROPOSE_SCRIPT, word
    assert "$GITHUB_ENV" not in PROPOSE_SCRIPT and "$GITHUB_PATH" not in PROPOSE_SCRIPT
    # Exactly the two files, regular, bounded in size; only matrix.yaml enters the checkout.
    assert "f matrix.yaml\\nf report.md" in PROPOSE_SCRIPT and "-gt 1048576" in PROPOSE_SCRIPT
    assert 'cp "$PROPOSAL/matrix.yaml" matrix.yaml' in PROPOSE_SCRIPT
    assert "git add matrix.yaml" in PROPOSE_SCRIPT and "git add -A" not in PROPOSE_SCRIPT
    upload = next(s for s in PROBE["steps"] if s.get("with", {}).get("name") == "outdated-proposal")
    assert upload["with"]["path"].split() == ["build/proposal/matrix.yaml", "build/proposal/report.md"]


def test_applies_then_proposes_the_change_with_the_probe_report() -> None:
    assert "nox -s outdated -- --apply --report build/outdated/report.md" in PROBE_SCRIPT
    assert "--no-probe" not in PROBE_SCRIPT
    assert "git diff --quiet -- matrix.yaml" in PROBE_SCRIPT  # no proposal, and no second job, when nothing changed
    assert "git diff --quiet -- matrix.yaml" in PROPOSE_SCRIPT
    assert '--body-file "$PROPOSAL/report.md"' in PROPOSE_SCRIPT
    noxfile = (ROOT / "noxfile.py").read_text()
    assert "def outdated(session" in noxfile and '"outdated", *session.posargs' in noxfile


def run_check(tmp_path: Path, proposal: dict[str, str | Path]) -> tuple[int, str, str]:
    """The propose job's check step, run with bash on a proposal laid out as given (text, or a Path to link to)."""
    import subprocess

    [step] = [s for s in PROPOSE["steps"] if s.get("name", "").startswith("Check the proposal")]
    folder, checkout = tmp_path / "proposal", tmp_path / "checkout"
    folder.mkdir(parents=True)
    checkout.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    (checkout / "matrix.yaml").write_text("old\n")
    for name, content in proposal.items():
        if isinstance(content, Path):
            (folder / name).symlink_to(content)
        else:
            (folder / name).write_text(content)
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        cwd=checkout,
        env={"PROPOSAL": str(folder), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, done.stdout, (checkout / "matrix.yaml").read_text()


def test_the_proposal_check_takes_matrix_yaml_only_from_exactly_two_regular_files(tmp_path: Path) -> None:
    code, _out, taken = run_check(tmp_path / "good", {"matrix.yaml": "new\n", "report.md": "# report\n"})
    assert (code, taken) == (0, "new\n")
    secret = tmp_path / "secret"
    secret.write_text("token\n")
    cases: dict[str, dict[str, str | Path]] = {
        "link": {"matrix.yaml": secret, "report.md": "r"},
        "extra": {"matrix.yaml": "new\n", "report.md": "r", ".git-hook": "#!/bin/sh"},
        "missing": {"matrix.yaml": "new\n"},
        "large": {"matrix.yaml": "x" * 1048577, "report.md": "r"},
    }
    for case, proposal in cases.items():
        code, out, taken = run_check(tmp_path / case, proposal)
        assert code == 1 and taken == "old\n", (case, out)
