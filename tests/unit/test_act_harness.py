"""The act harness without act: every action our workflows use has a complete stand-in, a missing or incomplete one
is refused before any run starts (naming file, line and what is missing), and the stand-ins choose and lay out files
as the actions they stand in for."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from act_harness import REPO, STANDINS, StandInError, remote_uses, runs_on_labels, stand_ins

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))


def load_stand_in(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_of_our_workflows_has_a_complete_stand_in(workflow: Path) -> None:
    mapping = stand_ins([workflow])
    uses = [use for use in remote_uses(workflow) if not isinstance(use, str)]
    assert uses and {use.repository_ref for use in uses} <= set(mapping)
    for ref, directory in mapping.items():
        owner_repo, sha = ref.split("@")
        assert re.fullmatch(r"[0-9a-f]{40}", sha), f"{ref}: mapped at the exact SHA the workflow pins"
        assert directory == STANDINS / owner_repo


def test_stand_ins_of_composites_are_followed() -> None:
    """upload-pages-artifact's stand-in uploads through upload-artifact, at the SHA the real action pins."""
    mapping = stand_ins([STANDINS / "actions" / "upload-pages-artifact" / "action.yml"])
    assert list(mapping) == ["actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f"]


def write_workflow(tmp_path: Path, steps: str) -> Path:
    workflow = tmp_path / "w.yml"
    workflow.write_text(
        "on: push\njobs:\n  build:\n    runs-on: ubuntu-24.04\n    steps:\n"
        "      - uses: actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1\n" + steps
    )
    return workflow


def test_a_use_without_stand_in_is_refused_with_its_place(tmp_path: Path) -> None:
    workflow = write_workflow(tmp_path, "      - uses: someone/lint-action@0123456789abcdef0123456789abcdef01234567\n")
    with pytest.raises(StandInError) as raised:
        stand_ins([workflow])
    message = str(raised.value)
    assert (
        f"{workflow}:7: uses: someone/lint-action@0123456789abcdef0123456789abcdef01234567 has no stand-in" in message
    )
    assert str(STANDINS / "someone" / "lint-action" / "action.yml") in message


def test_an_input_or_output_the_stand_in_lacks_is_refused(tmp_path: Path) -> None:
    workflow = write_workflow(
        tmp_path,
        "      - id: py\n"
        "        uses: actions/setup-python@5fda3b95a4ea91299a34e894583c3862153e4b97\n"
        "        with: {python-version: '3.12', cache: pip}\n"
        "      - run: echo ${{ steps.py.outputs.cache-hit }} ${{ steps.py.outputs.python-version }}\n",
    )
    with pytest.raises(StandInError) as raised:
        stand_ins([workflow])
    message = str(raised.value)
    assert f"{workflow}:8: uses: actions/setup-python@" in message
    assert "lacks input(s) cache (it implements allow-prereleases, python-version)" in message
    assert "output(s) cache-hit (it sets python-path, python-version)" in message


def test_uses_no_stand_in_can_replace_are_refused(tmp_path: Path) -> None:
    workflow = write_workflow(tmp_path, "      - uses: docker://alpine:3\n")
    workflow.write_text(workflow.read_text() + "  reuse:\n    uses: someone/workflows/.github/workflows/x.yml@v1\n")
    with pytest.raises(StandInError, match=r"docker://alpine:3 is not owner/repo\[/path\]@ref") as raised:
        stand_ins([workflow])
    assert "reusable workflow someone/workflows/.github/workflows/x.yml@v1: no stand-in is implemented" in str(
        raised.value
    )


def test_every_runner_label_of_our_workflows_is_known() -> None:
    assert set().union(*(runs_on_labels(w) for w in WORKFLOWS)) == {"ubuntu-24.04"}


# --- upload-artifact's choice of files, as the real action makes it ---------------------------------------------

UPLOAD = STANDINS / "actions" / "upload-artifact" / "upload_artifact_standin.py"


def tree(root: Path, *files: str) -> None:
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)


def chosen(workspace: Path, lines: list[str], hidden: bool = False) -> tuple[list[str], str]:
    files, root = load_stand_in(UPLOAD).choose(lines, workspace, hidden)
    return sorted(str(Path(f).relative_to(root)) for f in files), str(Path(root).relative_to(workspace))


def test_upload_one_directory_keeps_paths_below_it_and_leaves_out_exclusions_and_hidden(tmp_path: Path) -> None:
    """The cell job's upload: `wheels/` without `wheels/site/` (a symlink to a hidden directory)."""
    tree(tmp_path, "wheels/results/cells/a.json", "wheels/t/a.whl", "wheels/.site.1/index.html", "wheels/.lock")
    (tmp_path / "wheels" / "site").symlink_to(".site.1")
    assert chosen(tmp_path, ["wheels/", "!wheels/site/"]) == (["results/cells/a.json", "t/a.whl"], "wheels")
    files, _root = chosen(tmp_path, ["wheels/"])
    assert "site/index.html" in files and ".site.1/index.html" not in files  # the symlink is followed
    files, _root = chosen(tmp_path, ["wheels/"], hidden=True)
    assert ".lock" in files


def test_upload_several_search_paths_are_laid_out_from_their_common_ancestor(tmp_path: Path) -> None:
    """outdated.yml's upload: the report and each probe's report and logs."""
    tree(tmp_path, "build/outdated/report.md", "build/probe/2.16/report.md", "build/probe/2.16/out/logs/c.log",
         "build/probe/2.16/out/other.txt")  # fmt: skip
    lines = ["build/outdated/", "build/probe/*/report.md", "build/probe/*/out/logs/"]
    assert chosen(tmp_path, lines) == (
        ["outdated/report.md", "probe/2.16/out/logs/c.log", "probe/2.16/report.md"],
        "build",
    )


def test_upload_a_lone_file_lands_at_the_artifact_root(tmp_path: Path) -> None:
    tree(tmp_path, "tmp/artifact.tar")
    assert chosen(tmp_path, [str(tmp_path / "tmp" / "artifact.tar")]) == (["artifact.tar"], "tmp")


# --- the cache stand-in's keys, as actions/cache matches them ---------------------------------------------------

CACHE = STANDINS / "actions" / "cache" / "cache_standin.py"


def cache_step(tmp_path: Path, action: str, **inputs: str) -> tuple[int, dict[str, str], str]:
    """Run the cache stand-in's restore or save as a job step would; returns its exit code, outputs and output."""
    import subprocess

    output = tmp_path / "output"
    output.write_text("")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "GITHUB_WORKSPACE": str(tmp_path / "workspace"),
        "GITHUB_OUTPUT": str(output),
        "ACT_STANDIN_CACHES": str(tmp_path / "store"),
        **{f"INPUT_{name.upper()}": value for name, value in inputs.items()},
    }
    if action == "restore":
        env = {"INPUT_RESTORE_KEYS": "", "INPUT_FAIL_ON_CACHE_MISS": "false", "INPUT_LOOKUP_ONLY": "false", **env}
    done = subprocess.run(
        [sys.executable, str(CACHE), action], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    return done.returncode, outputs, done.stdout + done.stderr


def test_cache_keys_match_exactly_then_by_newest_prefix_and_entries_never_change(tmp_path: Path) -> None:
    cached = tmp_path / "home" / ".cache" / "thing"
    cached.mkdir(parents=True)
    for key, content in (("deps-a-1", "first"), ("deps-a-2", "second")):
        (cached / "file").write_text(content)
        assert cache_step(tmp_path, "save", path="~/.cache/thing", key=key)[0] == 0
    (cached / "file").write_text("third")
    code, _out, said = cache_step(tmp_path, "save", path="~/.cache/thing", key="deps-a-1")
    assert code == 0 and "Unable to reserve cache with key deps-a-1" in said  # the first entry stays
    (cached / "file").unlink()

    code, outputs, _said = cache_step(tmp_path, "restore", path="~/.cache/thing", key="deps-a-1")
    assert (code, outputs["cache-hit"], (cached / "file").read_text()) == (0, "true", "first")
    code, outputs, _said = cache_step(
        tmp_path, "restore", path="~/.cache/thing", key="deps-b-9", restore_keys="deps-b-\ndeps-a-"
    )
    assert (outputs["cache-hit"], outputs["cache-matched-key"], (cached / "file").read_text()) == (
        "false",
        "deps-a-2",
        "second",
    )
    # Entries are scoped by their paths: the same key for another path is another cache.
    code, outputs, said = cache_step(tmp_path, "restore", path="~/.cache/other", key="deps-a-1")
    assert (code, outputs["cache-hit"], outputs["cache-matched-key"]) == (0, "false", "")
    assert "Cache not found for input keys: deps-a-1" in said
    code, _outputs, said = cache_step(
        tmp_path, "restore", path="~/.cache/other", key="deps-a-1", fail_on_cache_miss="true"
    )
    assert code != 0 and "fail-on-cache-miss" in said


def test_jobs_restoring_one_entry_at_once_never_read_it_half_written(tmp_path: Path) -> None:
    """The parallel build jobs of an act run restore the same entry at once: each marks it used while the others list
    the entries. A CI run failed when one read the manifest while another had truncated it (JSONDecodeError)."""
    import importlib.util
    import json
    import threading

    spec = importlib.util.spec_from_file_location("cache_standin_under_test", CACHE)
    assert spec is not None and spec.loader is not None
    standin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(standin)
    version = tmp_path / "store" / "version"
    (version / "entry").mkdir(parents=True)
    (version / "entry" / "entry.json").write_text(json.dumps({"key": "k", "paths": ["p"], "created": 1, "used": 1}))
    failures: list[BaseException] = []
    done = threading.Event()

    def mark_used() -> None:
        try:
            for _ in range(2000):
                standin.touch({"dir": str(version / "entry")})
        except BaseException as exc:  # reported below
            failures.append(exc)
        finally:
            done.set()

    def list_entries() -> None:
        try:
            while not done.is_set():
                assert [e["key"] for e in standin.entries(version)] == ["k"]
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=mark_used), threading.Thread(target=list_entries)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == []
    assert sorted(p.name for p in (version / "entry").iterdir()) == ["entry.json"]  # no temporary file left


def test_a_restore_beside_a_job_using_the_tree_never_shows_it_a_temporary_file(tmp_path: Path) -> None:
    """Two cell jobs of an act run restore the same uv cache into one HOME; one job's uv was already hard-linking
    from it while the other's restore renamed files into place, and uv met the restore's temporary file
    (`failed to hardlink file from ....standin-5678`): every act push test failed on a fresh machine. A restore
    writes nothing where an identical file already is, and stages what it writes outside the tree."""
    import importlib.util
    import threading

    spec = importlib.util.spec_from_file_location("cache_standin_restore_under_test", CACHE)
    assert spec is not None and spec.loader is not None
    standin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(standin)
    entry = tmp_path / "entry"
    for n in range(300):
        (entry / f"pkg{n % 7}").mkdir(parents=True, exist_ok=True)
        (entry / f"pkg{n % 7}" / f"file{n}.py").write_text(f"# {n}\n" * 50)
    (entry / "link").symlink_to("pkg0")
    home = tmp_path / "home" / "cache"
    assert standin.copy_tree(entry, home) == 301
    inodes = {q: q.lstat().st_ino for q in home.rglob("*")}
    seen: set[str] = set()
    done = threading.Event()

    def walk() -> None:
        while not done.is_set():
            seen.update(q.name for q in home.rglob("*"))

    reader = threading.Thread(target=walk)
    reader.start()
    try:
        for _ in range(5):
            assert standin.copy_tree(entry, home) == 301
    finally:
        done.set()
        reader.join(timeout=60)
    assert {q: q.lstat().st_ino for q in home.rglob("*")} == inodes  # nothing replaced under a reader
    assert not [name for name in seen if "standin" in name]
    assert sorted(q.name for q in home.parent.iterdir()) == ["cache"]  # no staging directory left
    (entry / "pkg1" / "file1.py").write_text("changed\n")  # a differing file is still restored
    standin.copy_tree(entry, home)
    assert (home / "pkg1" / "file1.py").read_text() == "changed\n"
