""".github/workflows/outdated.yml, run under act on this host (see act_harness), against recorded registry answers
served on 127.0.0.1 (the repository variable TORCH_INDEX_URL points the workflow there).

The repository is this one, as pushed: with torch-next.json the registry holds a patch release 2.15.1 and a new minor
2.16.0 our matrix.yaml lacks, so the probe job edits matrix.yaml and probes both, and the propose job pushes the
branch and opens the pull request through the gh stand-in; with torch-recorded.json it is up to date and nothing is
proposed. The probes install torch from the registry, where these two releases do not exist: they fail at that
step, quickly, and the report says so; what is checked is the proposal (branch, diff, report), not the probes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from act_harness import ActRun, ActWorld, act_world, git, publish_repository, run_act
from registry_server import Answers

# One worker runs every act test that uses the cache store (~/.cache/buildmatrix-act, kept between runs): each run
# restores from it, saves to it and evicts from it, and runs of one stand-in repository share its entries
# (tests/parallel_plan.py).
pytestmark = [pytest.mark.act, pytest.mark.integration, pytest.mark.xdist_group("act-cache-store")]

WORKFLOW = "outdated.yml"
BRANCH = "outdated/matrix"


@pytest.fixture(scope="module")
def served_answers() -> Iterator[Answers]:
    answers = Answers()
    yield answers
    answers.close()


@pytest.fixture(scope="module")
def proposed(tmp_path_factory: pytest.TempPathFactory, served_answers: Answers) -> Iterator[tuple[ActWorld, ActRun]]:
    served_answers.use("torch-next.json")
    with act_world(tmp_path_factory.mktemp("act-outdated"), name="build-matrix") as world:
        work = publish_repository(world)
        run = run_act(world, work, WORKFLOW, "schedule", variables={"TORCH_INDEX_URL": served_answers.url})
        yield world, run


def test_probe_then_propose(proposed: tuple[ActWorld, ActRun], served_answers: Answers) -> None:
    _world, run = proposed
    assert run.results() == {"probe": "success", "propose": "success"}, run.summary() + "\n" + run.output[-6000:]
    assert served_answers.requests > 0  # the registry it read was the recorded one
    assert sorted(p.name for p in run.artifacts.iterdir()) == ["outdated-proposal", "outdated-report"]


def test_the_branch_holds_only_the_matrix_change(proposed: tuple[ActWorld, ActRun]) -> None:
    world, _run = proposed
    changed = git(world.bare, "diff", "--name-only", "main", BRANCH)
    assert changed == "matrix.yaml"
    diff = git(world.bare, "diff", "main", BRANCH, "--", "matrix.yaml")
    removed = [line[1:].strip() for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert any('"2.15.0"' in line for line in removed) and any('"2.15.1"' in line for line in added), diff
    assert any('version: "2.16.0"' in line for line in added), diff
    assert git(world.bare, "log", "-1", "--format=%an <%ae>", BRANCH) == (
        "github-actions[bot] <41898282+github-actions[bot]@users.noreply.github.com>"
    )
    assert git(world.bare, "rev-parse", f"{BRANCH}~1") == git(world.bare, "rev-parse", "main")


def test_the_pull_request_proposes_the_report(proposed: tuple[ActWorld, ActRun]) -> None:
    world, run = proposed
    [pull_file] = (world.pulls / world.owner / world.name).glob("*.json")
    pull = json.loads(pull_file.read_text())
    report = (run.artifacts / "outdated-proposal" / "files" / "report.md").read_text()
    assert (pull["state"], pull["head"], pull["base"]) == ("OPEN", BRANCH, "main")
    assert pull["title"] == "matrix: new torch releases from the registry"
    assert pull["body"] == report
    assert pull["head_sha"] == git(world.bare, "rev-parse", BRANCH)
    message = git(world.bare, "log", "-1", "--format=%B", BRANCH)
    assert message.startswith("matrix: new torch releases from the registry (outdated --apply)\n\n")
    assert report.strip() in message
    for release in ("2.15.1", "2.16.0"):
        assert release in report
    proposal = (run.artifacts / "outdated-proposal" / "files" / "matrix.yaml").read_text()
    assert proposal == git(world.bare, "show", f"{BRANCH}:matrix.yaml") + "\n"


def test_nothing_is_proposed_when_the_matrix_is_up_to_date(tmp_path: Path, served_answers: Answers) -> None:
    served_answers.use("torch-recorded.json")
    with act_world(tmp_path / "world", name="build-matrix") as world:
        work = publish_repository(world)
        run = run_act(world, work, WORKFLOW, "workflow_dispatch", variables={"TORCH_INDEX_URL": served_answers.url})
        assert run.results() == {"probe": "success"}, run.summary() + "\n" + run.output[-6000:]
        assert "matrix.yaml is up to date with the torch registry" in run.job("probe").log
        assert git(world.bare, "branch", "--list", BRANCH) == ""
        assert not (world.pulls / world.owner / world.name).exists() or not any(
            (world.pulls / world.owner / world.name).iterdir()
        )
        assert sorted(p.name for p in run.artifacts.iterdir()) == ["outdated-report"]
