"""The guide's checked blocks are all known to the checker (no orphan block, no check without its block), well
formed, and the checker fails on a guide that says what a run did not do."""

from __future__ import annotations

from pathlib import Path

import pytest
from guide_claims import CHECKS, GUIDE, SITE, GuideError, Run, check, claims, command

GOOD = """\
Intro.

<!-- checked: scatter-build -->
```sh
# a comment line
torch-buildmatrix build --jobs 1   # one job
```
<!-- /checked -->

- a bullet holding one:

  <!-- checked: scatter-metadata -->
  ```text
  Version: 2.1.2+pt213cpu
  ```
  <!-- /checked -->
"""


def test_every_block_of_the_guide_is_checked_and_every_check_has_its_block() -> None:
    found = claims(GUIDE.read_text())
    assert sorted(found) == sorted(CHECKS)
    for claim in found.values():
        if CHECKS[claim.name] is not CHECKS["layout"]:
            assert claim.code()  # each holds one code block, which its check reads


def test_blocks_are_read_with_their_lines_and_code() -> None:
    found = claims(GOOD)
    assert sorted(found) == ["scatter-build", "scatter-metadata"]
    assert found["scatter-build"].line == 3
    assert found["scatter-build"].code_lines() == ["torch-buildmatrix build --jobs 1"]
    assert command(found["scatter-build"], "torch-buildmatrix") == ({}, ["build", "--jobs", "1"])
    assert found["scatter-metadata"].code() == "Version: 2.1.2+pt213cpu\n"


def test_a_command_line_gives_its_variables() -> None:
    text = "<!-- checked: x -->\n```sh\nmkdir a && cd a\nA_B=1 pip download --no-deps x==1\n```\n<!-- /checked -->\n"
    assert command(claims(text)["x"], "pip") == ({"A_B": "1"}, ["download", "--no-deps", "x==1"])
    with pytest.raises(GuideError, match="has 0 `tar` lines"):
        command(claims(text)["x"], "tar")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("<!-- checked: a -->\nx\n", "block 'a' is never closed"),
        ("<!-- checked: a -->\n<!-- checked: b -->\n<!-- /checked -->\n", "block 'b' opens inside block 'a'"),
        ("<!-- /checked -->\n", "closes no block"),
        ("<!-- checked: a -->\n<!-- /checked -->\n<!-- checked: a -->\n<!-- /checked -->\n", "'a' is marked twice"),
        ("text <!-- checked: a -->\n", "must be a line of its own"),
        ("<!-- checked: A_B -->\n<!-- /checked -->\n", "must be a line of its own"),
    ],
)
def test_a_malformed_mark_is_refused(text: str, says: str) -> None:
    with pytest.raises(GuideError, match=says):
        claims(text)


def run_of(tmp_path: Path, **changes: object) -> Run:
    values: dict[str, object] = {
        "project": tmp_path,
        "cell": "torch2.13-cpu-cp311",
        "build": "torch2.13-cpu-cp311",
        "stdout": "noise\nbuild torch2.13-cpu-cp311: source\nmore\ntorch2.13-cpu-cp311: passed\n",
        "metadata": "Metadata-Version: 2.1\nName: torch_scatter\nVersion: 2.1.2+pt213cpu\n",
        "built_files": ["wheels/torch2.13/a.whl", "wheels/results/summary.json"],
        "used": {},
    }
    values.update(changes)
    return Run(**values)  # type: ignore[arg-type]


def block(name: str, code: str) -> str:
    return f"<!-- checked: {name} -->\n```text\n{code}```\n<!-- /checked -->\n"


def only(text: str, run: Run) -> list[str]:
    """The problems check() finds in text's blocks, less those of checks whose block text leaves out."""
    return [p for p in check(text, run) if "has no block in the guide" not in p]


def test_an_excerpt_must_be_printed_in_its_order(tmp_path: Path) -> None:
    run = run_of(tmp_path)
    ordered = "build torch2.13-cpu-cp311: source\ntorch2.13-cpu-cp311: passed\n"
    assert only(block("scatter-progress", ordered), run) == []
    swapped = "torch2.13-cpu-cp311: passed\nbuild torch2.13-cpu-cp311: source\n"
    assert only(block("scatter-progress", swapped), run) == [
        "scatter-progress: 'build torch2.13-cpu-cp311: source' is not (in this order) in what `torch-buildmatrix "
        "build` "
        "printed"
    ]
    assert only(block("scatter-metadata", "Version: 2.1.2+pt213cpu\n"), run) == []
    assert only(block("scatter-metadata", "Version: 2.1.2+torch.2.13\n"), run) != []


def test_the_files_listed_are_exactly_those_the_run_left(tmp_path: Path) -> None:
    run = run_of(tmp_path)
    assert only(block("scatter-files", "wheels/results/summary.json\nwheels/torch2.13/a.whl\n"), run) == []
    assert only(block("scatter-files", "wheels/torch2.13/a.whl\n"), run) != []  # one left out
    extra = "wheels/results/summary.json\nwheels/torch2.13/a.whl\nwheels/logs/x.log\n"
    assert only(block("scatter-files", extra), run) != []


def test_the_layout_names_paths_the_run_made(tmp_path: Path) -> None:
    (tmp_path / "wheels" / "logs" / "builds").mkdir(parents=True)
    (tmp_path / "wheels" / "logs" / "builds" / "torch2.13-cpu-cp311.log").write_text("")
    text = "<!-- checked: layout -->\n- `wheels/logs/builds/<build id>.log` a log\n<!-- /checked -->\n"
    assert only(text, run_of(tmp_path)) == []
    moved = text.replace("logs/builds/", "logs/")
    assert only(moved, run_of(tmp_path)) == [
        "layout: the run left nothing at `wheels/logs/<build id>.log` (wheels/logs/torch2.13-cpu-cp311.log)"
    ]


def test_the_install_commands_are_those_the_page_gives(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    line = f"pip install torch-scatter --only-binary=:all: --extra-index-url {SITE}/torch2.13/simple/"
    (tmp_path / "docs" / "compatibility.md").write_text(f"# t\n\n```sh\n{line}\n```\n")
    said = "pip install torch-scatter --only-binary=:all: --extra-index-url <site>/torch2.13/simple/\n"
    assert only(block("scatter-install", said), run_of(tmp_path)) == []
    assert only(block("scatter-install", said.replace("2.13", "2.14")), run_of(tmp_path)) != []
    assert only(block("scatter-install", said + said.replace("torch2.13/", "")), run_of(tmp_path)) != []


def test_a_block_the_run_took_its_input_from_must_be_what_it_used(tmp_path: Path) -> None:
    text = block("scatter-build", "torch-buildmatrix build --jobs 1\n")
    assert only(text, run_of(tmp_path, used={"scatter-build": "torch-buildmatrix build --jobs 1\n"})) == []
    assert only(text, run_of(tmp_path)) == ["the run did not use block 'scatter-build' as the guide gives it"]


def test_an_unknown_block_and_a_missing_one_are_problems(tmp_path: Path) -> None:
    problems = check(block("scatter-unknown", "x\n"), run_of(tmp_path))
    assert "block 'scatter-unknown' is marked in the guide but nothing checks it" in problems
    assert "check 'layout' has no block in the guide" in problems
