"""Nothing published is lost: an append-only release history (the ledger), results that accumulate over runs, and a
site history that recovery never deletes. Each case publishes, then checks what is on disk and what a client gets from
the site served on 127.0.0.1 (the wheel, its PEP 658 metadata, the index pages)."""

from __future__ import annotations

import hashlib
import json
import shutil
import urllib.error
import urllib.request
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from fake_wheels import cell_result, make_wheel
from loopback_http import served

from torch_buildmatrix.builder.records.model import CellResult, WheelRecord
from torch_buildmatrix.errors import RecordError, UserError
from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import Matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.publish.docs import write_docs
from torch_buildmatrix.publish.index import page_anchors
from torch_buildmatrix.publish.ledger import RELEASED
from torch_buildmatrix.publish.site import SiteReport, publish
from torch_buildmatrix.publish.staging import Withdrawal
from torch_buildmatrix.publish.table import CompatTable
from torch_buildmatrix.publish.versions import VERSION_MARKER
from torch_buildmatrix.vocab import Cause, FailureClass, Status

from conftest import WriteMatrix, run_cli

PUBLISHED = {"2.4": {"3.9", "3.10", "3.11"}, "2.13": {"3.11"}}
A = "torch2.13-cpu-cp311-drv2"
B = "torch2.13-cpu-cp311-drv1"
README_TEXT = "# project\n\n<!-- compat-table:start -->\n<!-- compat-table:end -->\n"


class Project:
    """A project with a matrix, its wheels/ and site; `run` publishes this run's records as compat-table does."""

    def __init__(self, matrix: Matrix) -> None:
        self.matrix = matrix
        self.root = matrix.root
        self.wheels = self.root / "wheels"
        self.site = self.wheels / "site"
        (self.root / "README.md").write_text(README_TEXT)
        self.available = {r: {Python.parse(p) for p in PUBLISHED[r.minor]} for r in matrix.torch}
        self.cells = {c.id: c for c in expand(matrix, self.available)}

    def record(self, cell_id: str, status: str = "passed", finished: float = 1e9, **changes: object) -> CellResult:
        result = cell_result(self.cells[cell_id], status, wheels_dir=self.wheels)
        result.finished = finished
        result.started = finished - 60
        for name, value in changes.items():
            setattr(result, name, value)
        return result

    def run(self, *results: CellResult, **options: object) -> tuple[CompatTable, SiteReport]:
        return publish(
            self.matrix,
            list(self.cells.values()),
            list(results),
            self.available,
            wheels_dir=self.wheels,
            site=self.site,
            docs_root=self.root,
            **options,  # type: ignore[arg-type]
        )

    def served(self) -> AbstractContextManager[str]:
        """The live site on 127.0.0.1 while the context lasts."""
        return served(self.site)


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as response:
        body: bytes = response.read()
        return body


def status_of(url: str) -> int:
    try:
        get(url)
    except urllib.error.HTTPError as exc:
        return exc.code
    return 200


@pytest.fixture
def project(write_matrix: WriteMatrix) -> Project:
    return Project(load_matrix(write_matrix()))


def plugin_wheel(result: CellResult) -> str:
    assert result.wheel is not None
    return result.wheel.path


def offline_sources(project: Project) -> dict[str, str]:
    """The environment for `compat-table --offline` on the project: the registry's answer cached, torch 2.13's
    find-links a directory of the test's own."""
    import os

    from torch_buildmatrix.model.registry import Registry

    from conftest import REPO

    files = [f"torch-2.4.1-cp3{m}-cp3{m}-manylinux1_x86_64.whl" for m in (9, 10, 11)]
    cache = Registry(project.root / "build" / "cache" / "registry").cache_path("torch")
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"files": [{"filename": f, "url": f"https://x.invalid/{f}"} for f in files]}))
    links = project.root / "links"
    links.mkdir(exist_ok=True)
    (links / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    return {**os.environ, "PIP_FIND_LINKS": str(links), "PYTHONPATH": str(REPO)}


def check_served(base: str, path: str, data: bytes, yanked: str | None = None) -> None:
    """What pip and uv get: the wheel with its bytes, its PEP 658 metadata, and the anchors of every index page that
    must list it (with the sha256 fragment, the metadata hash and the yank)."""
    assert get(f"{base}/{path}") == data
    metadata = get(f"{base}/{path}.metadata")
    assert b"Name: torch-emu" in metadata
    minor = path.split("/", 1)[0].removeprefix("torch")
    for page in ("simple/torch-emu/", f"torch{minor}/simple/torch-emu/", f"torch{minor}/"):
        anchors = [a for a in page_anchors(get(f"{base}/{page}").decode()) if path.rsplit("/", 1)[1] in a["href"]]
        assert len(anchors) == 1, (page, anchors)
        assert anchors[0]["href"].endswith(f"#sha256={hashlib.sha256(data).hexdigest()}")
        assert anchors[0]["data-core-metadata"] == f"sha256={hashlib.sha256(metadata).hexdigest()}"
        assert anchors[0].get("data-yanked") == yanked


# ---- 1. an append-only release history -----------------------------------------------------------------------------


@pytest.mark.parametrize("later", ["transient failure", "deterministic failure", "record deleted"])
def test_a_released_wheel_stays_served_with_its_cells_last_pass(project: Project, later: str) -> None:
    """Once a cell has published, a later failing run of it (a network blip is enough) once published 0 wheels."""
    passed = project.record(A)
    _table, first = project.run(passed)
    assert first.published
    path = plugin_wheel(passed)
    released = (project.wheels / path).read_bytes()
    if later == "record deleted":
        results: tuple[CellResult, ...] = ()
    else:
        transient = later == "transient failure"
        failed = project.record(
            A,
            "failed",
            finished=2e9,
            failure_class=FailureClass.TRANSIENT if transient else FailureClass.DETERMINISTIC,
            cause=Cause.NETWORK if transient else None,
        )
        (project.wheels / path).unlink()  # a fresh CI runner has only the failed cell's tree
        results = (failed,)
    table, report = project.run(*results)
    assert report.published and report.problems == [], report.problems
    [cell] = [c for c in table.cells if c.id == A]
    assert cell.status == Status.PASSED and cell.wheel == passed.wheel and cell.recorded == "2001-09-09T01:46:40Z"
    if later == "record deleted":
        assert cell.latest is None and report.origins[A].startswith("the live site")
    else:
        assert cell.latest is not None and cell.latest.recorded == "2033-05-18T03:33:20Z"
        assert (
            cell.latest.failed_step == "smoke"
            and report.origins[A] == "the live site (" + (report.origins[A].split("(", 1)[1])
        )
    with project.served() as base:
        check_served(base, path, released)
        page = get(f"{base}/index.html").decode()
        assert "recorded 2001-09-09" in page
        if later != "record deleted":
            assert "latest attempt failed 2033-05-18 in smoke" in page
        shown = json.loads(get(f"{base}/compatibility.json"))
        [on_site] = [c for c in shown["cells"] if c["id"] == A]
        assert on_site["status"] == "passed" and on_site["wheel"]["path"] == path
    ledger = json.loads((project.site / RELEASED).read_text())
    assert ledger["schema_version"] == 3 and ledger["wheels"][path]["sha256"] == hashlib.sha256(released).hexdigest()
    readme = (project.root / "README.md").read_text()
    assert ("✓ 90 (2 skipped) †" in readme) is (later != "record deleted")


def test_a_newer_pass_replaces_the_shown_one_and_the_old_wheel_stays_released(project: Project) -> None:
    """A new plugin version's wheel enters the index beside the old one; nothing released leaves it."""
    first = project.record(A)
    project.run(first)
    old_path = plugin_wheel(first)
    old = (project.wheels / old_path).read_bytes()
    text = project.matrix.path.read_text().replace("version: 0.1.0", "version: 0.2.0")
    project.matrix.path.write_text(text)
    newer = Project(load_matrix(project.matrix.path))
    again = newer.record(A, finished=2e9)
    new_path = plugin_wheel(again).replace("0.1.0", "0.2.0")
    wheel = make_wheel(newer.wheels / "torch2.13", "torch-emu", "0.2.0+torch.2.13.drv.2", requires=["emu-driver>=2,<3"])
    again.wheel = WheelRecord(wheel.name, hashlib.sha256(wheel.read_bytes()).hexdigest(), new_path)
    _table, report = newer.run(again)
    assert report.published, report.problems
    with newer.served() as base:
        check_served(base, old_path, old)
        check_served(base, new_path, wheel.read_bytes())


def test_withdrawing_a_wheel_is_explicit_and_recorded(project: Project) -> None:
    passed = project.record(A)
    project.run(passed)
    path = plugin_wheel(passed)
    data = (project.wheels / path).read_bytes()
    name = path.rsplit("/", 1)[1]
    with pytest.raises(UserError, match="--reason is empty"):
        project.run(passed, withdrawals=[Withdrawal(name, " ")])
    with pytest.raises(UserError, match="is not a wheel this site released"):
        project.run(passed, withdrawals=[Withdrawal("nothing.whl", "why")])
    _table, yanked = project.run(passed, withdrawals=[Withdrawal(name, "corrupts tensors on emu:1")])
    assert yanked.published and f"{path}: yanked (corrupts tensors on emu:1)" in yanked.notes
    with project.served() as base:
        check_served(base, path, data, yanked="corrupts tensors on emu:1")
    _table, again = project.run(passed)  # the yank stays: it is in the ledger, not in this run's options
    assert again.published
    with project.served() as base:
        check_served(base, path, data, yanked="corrupts tensors on emu:1")
    _table, removed = project.run(withdrawals=[Withdrawal(path, "built from a bad tag", remove=True)])
    assert removed.published
    entry = json.loads((project.site / RELEASED).read_text())["wheels"][path]
    assert entry["removed"]["reason"] == "built from a bad tag" and entry["sha256"] == hashlib.sha256(data).hexdigest()
    with project.served() as base:
        assert status_of(f"{base}/{path}") == 404 and status_of(f"{base}/{path}.metadata") == 404
        assert status_of(f"{base}/simple/torch-emu/") == 404  # no torch-emu wheel is served any more
        assert name not in get(f"{base}/simple/").decode() + get(f"{base}/index.html").decode()
    # Its record comes back (the same bytes, a reproducible rebuild): it stays withdrawn, and the publish goes on.
    _table, back = project.run(passed)
    assert back.published and any(n.startswith(f"{path}: withdrawn on") for n in back.notes), back.problems
    with project.served() as base:
        assert status_of(f"{base}/{path}") == 404


def test_remove_works_with_the_records_present_and_never_blocks_other_cells(project: Project) -> None:
    """Right after a build, and always on CI, wheels/results holds the records of the cells that tested the wheel:
    --remove once failed there, and every later publish of that reproducible build failed too."""
    first, other = project.record(A), project.record(B)
    project.run(first, other)
    path, kept = plugin_wheel(first), plugin_wheel(other)
    _table, removed = project.run(first, other, withdrawals=[Withdrawal(path, "bad tag", remove=True)])
    assert removed.published, removed.problems
    _table, again = project.run(
        first, other, withdrawals=[Withdrawal(path, "again, from CI\nsecond line", remove=True)]
    )
    assert again.published, again.problems
    entry = json.loads((project.site / RELEASED).read_text())["wheels"][path]
    assert entry["removed"]["reason"] == "bad tag"  # the first reason and date are kept
    assert [(h["kind"], h["reason"]) for h in entry["history"]] == [("remove", "again, from CI\nsecond line")]
    _table, later = project.run(project.record(A, finished=2e9), other)  # a rebuild: same bytes, still withdrawn
    assert later.published, later.problems
    with project.served() as base:
        assert status_of(f"{base}/{path}") == 404
        check_served(base, kept, (project.wheels / kept).read_bytes())


def test_a_multi_line_reason_publishes_round_trips_and_the_site_publishes_again(project: Project) -> None:
    """The previous release wrote such a yank, then refused to read its own ledger (exit 7 on every later publish)."""
    passed = project.record(A)
    project.run(passed)
    path = plugin_wheel(passed)
    data = (project.wheels / path).read_bytes()
    reason = "wrong results\nsee issue 42\twith a tab " + "x" * 2000
    _table, yanked = project.run(passed, withdrawals=[Withdrawal(path, reason)])
    assert yanked.published, yanked.problems
    with project.served() as base:
        check_served(base, path, data, yanked=reason)
    _table, again = project.run(passed)
    assert again.published, again.problems
    entry = json.loads((project.site / RELEASED).read_text())["wheels"][path]
    assert entry["yanked"] == reason and entry["yanked_on"]


def test_a_wheel_whose_requires_python_holds_a_tab_publishes_and_publishes_again(project: Project) -> None:
    """The previous release wrote such a wheel's Requires-Python into the ledger, then refused to read its own ledger
    (exit 7 on every later publish and fetch-site)."""
    from fake_wheels import record
    from packaging.utils import parse_wheel_filename

    passed = project.record(A)
    assert passed.wheel is not None
    version = parse_wheel_filename(passed.wheel.filename)[1]
    (project.wheels / passed.wheel.path).unlink()
    tabbed = ">=3.9,\t<4"
    wheel = make_wheel(
        project.wheels / "torch2.13", "torch-emu", str(version), requires=["emu-driver>=2,<3"], requires_python=tabbed
    )
    passed.wheel = record(project.wheels, wheel)
    _table, first = project.run(passed)
    assert first.published, first.problems
    _table, again = project.run(passed)
    assert again.published, again.problems
    entry = json.loads((project.site / RELEASED).read_text())["wheels"][passed.wheel.path]
    assert entry["requires_python"] == tabbed
    with project.served() as base:
        check_served(base, passed.wheel.path, wheel.read_bytes())


def test_a_site_whose_live_ledger_the_previous_release_broke_publishes_again(project: Project) -> None:
    passed = project.record(A)
    project.run(passed)
    path = plugin_wheel(passed)
    live = project.site.resolve()
    ledger = json.loads((live / RELEASED).read_text())
    ledger["schema_version"] = 2
    ledger["wheels"][path].pop("yanked_on", None)
    ledger["wheels"][path]["yanked"] = "wrong results\nsee issue 42"
    ledger["wheels"][path]["requires_python"] = ">=3.9,\t<4"
    (live / RELEASED).write_text(json.dumps(ledger))
    _table, report = project.run(passed)
    assert report.published, report.problems
    healed = json.loads((project.site / RELEASED).read_text())
    assert healed["schema_version"] == 3 and healed["wheels"][path]["yanked"] == "wrong results\nsee issue 42"


def test_a_publish_past_the_ledger_limit_is_refused_and_nothing_changes(project: Project) -> None:
    from torch_buildmatrix.errors import LedgerFull
    from torch_buildmatrix.publish.ledger import LedgerLimits

    first = project.record(A)
    project.run(first)
    second = project.record(B)  # another wheel: one more than the ledger may hold
    live = project.site.resolve()
    before = {p.relative_to(project.root).as_posix() for p in project.root.rglob("*")}
    docs = (project.root / "docs" / "compatibility.json").read_text()
    held = len(json.loads((live / RELEASED).read_text())["wheels"])
    with pytest.raises(LedgerFull, match=f"more than {held} wheels"):
        project.run(first, second, limits=LedgerLimits(wheels=held))
    assert project.site.resolve() == live
    assert {p.relative_to(project.root).as_posix() for p in project.root.rglob("*")} == before
    assert (project.root / "docs" / "compatibility.json").read_text() == docs


def test_a_withdrawal_reason_is_checked_at_the_command_line(project: Project) -> None:
    passed = project.record(A)
    project.run(passed)
    name = plugin_wheel(passed).rsplit("/", 1)[1]
    live = project.site.resolve()
    done = run_cli(
        project.root,
        "compat-table",
        "--offline",
        "--yank",
        name,
        "--reason",
        "x" * (16 * 1024 + 1),
        timeout=120,
        env=offline_sources(project),
    )
    assert done.returncode == 2 and "16 KiB" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert project.site.resolve() == live and "yanked" not in (live / RELEASED).read_text()


def test_a_held_publish_lock_is_exit_6_for_every_command_that_takes_it(project: Project) -> None:
    """The exit-code reference says 6 for a held lock; a busy publish lock once exited 2."""
    import fcntl

    from torch_buildmatrix.errors import RunLocked

    passed = project.record(A)
    project.run(passed)
    live = project.site.resolve()
    published_files = [project.root / "docs", project.wheels]  # not build/: the registry's answers are a cache
    files = {p: p.read_bytes() for d in published_files for p in sorted(d.rglob("*")) if p.is_file()}
    with (project.wheels / ".site-publish.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        env = offline_sources(project)
        published = run_cli(project.root, "compat-table", "--offline", timeout=120, env=env)
        with project.served() as url:  # the live site itself, read in full before the fetch writes under the lock
            fetched = run_cli(project.root, "fetch-site", "--site-url", url, timeout=120, env=env)
    for done in (published, fetched):
        assert done.returncode == RunLocked.exit_code == 6, done.stdout + done.stderr
        assert "another command is publishing" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert project.site.resolve() == live
    assert {p: p.read_bytes() for d in published_files for p in sorted(d.rglob("*")) if p.is_file()} == files


def test_a_fresh_workspace_never_starts_a_new_history_over_a_published_site(project: Project) -> None:
    """`git clean -fdx` removes wheels/: the next compat-table once published an empty ledger, exit 0."""
    passed = project.record(A)
    project.run(passed)
    docs = {p: p.read_text() for p in (project.root / "docs").iterdir()}
    shutil.rmtree(project.wheels)
    with pytest.raises(RecordError) as stopped:
        project.run()
    message = str(stopped.value)
    assert "lists 1 passed cell(s)" in message and "torch-buildmatrix fetch-site --site-url" in message
    assert "--first-publish" in message
    assert [p.name for p in project.wheels.iterdir()] == [".site-publish.lock"]  # no site, no version, no ledger
    assert {p: p.read_text() for p in (project.root / "docs").iterdir()} == docs
    _table, report = project.run(project.record(A), first_publish=True)  # said explicitly: it starts again
    assert report.published


def test_compat_table_without_a_site_url_keeps_the_committed_one(project: Project) -> None:
    url = "https://owner.example.org/repo"
    passed = project.record(A)
    project.run(passed, site_url=url)
    table, _report = project.run(passed)
    assert table.site_url == url
    assert json.loads((project.root / "docs" / "compatibility.json").read_text())["site_url"] == url
    shutil.rmtree(project.wheels)
    with pytest.raises(RecordError, match=f"names the site {url}.*fetch-site --site-url {url}"):
        project.run(project.record(A))


def test_a_site_that_published_before_but_lost_its_ledger_stops_the_publish(project: Project) -> None:
    passed = project.record(A)
    project.run(passed)
    live = project.site.resolve()
    (live / RELEASED).unlink()
    before = sorted(p.relative_to(live).as_posix() for p in live.rglob("*"))
    with pytest.raises(RecordError) as stopped:
        project.run(passed)
    message = str(stopped.value)
    assert "missing, but this site has published before" in message and "--new-ledger" in message
    assert "torch-buildmatrix fetch-site" in message
    assert sorted(p.relative_to(live).as_posix() for p in live.rglob("*")) == before
    _table, report = project.run(passed, new_ledger=True)
    assert report.published and plugin_wheel(passed) in json.loads((project.site / RELEASED).read_text())["wheels"]


def test_a_schema_1_ledger_is_upgraded_and_its_lost_wheels_stay_reserved(project: Project) -> None:
    passed = project.record(A)
    project.run(passed)
    path = plugin_wheel(passed)
    live = project.site.resolve()
    sha = hashlib.sha256((live / path).read_bytes()).hexdigest()
    lost = "torch2.13/torch_emu-0.0.9+torch.2.13.drv.2-py3-none-any.whl"
    (live / RELEASED).write_text(json.dumps({"schema_version": 1, "wheels": {path: sha, lost: "ab" * 32}}))
    _table, report = project.run(passed)
    assert report.published, report.problems
    ledger = json.loads((project.site / RELEASED).read_text())
    assert ledger["wheels"][path]["metadata_sha256"] and ledger["wheels"][path]["indexes"] == ["2.13"]
    assert ledger["wheels"][lost]["removed"]["restorable"] is True and ledger["wheels"][lost]["sha256"] == "ab" * 32
    assert any("schema 1 let it go" in n for n in report.notes)


def test_a_damaged_live_table_or_ledger_is_exit_7_naming_it(project: Project) -> None:
    project.run(project.record(A))
    live = project.site.resolve()
    for name, damage in [("compatibility.json", '{"cells": [1'), (RELEASED, '{"schema_version": 2, "wheels": 7}')]:
        good = (live / name).read_bytes()
        (live / name).write_text(damage)
        with pytest.raises(RecordError, match=name):
            project.run()
        (live / name).write_bytes(good)
    (live / "compatibility.json").write_text('{"cells": [1')
    done = run_cli(project.root, "compat-table", "--offline", timeout=120, env=offline_sources(project))
    assert done.returncode == RecordError.exit_code and "Traceback" not in done.stderr
    assert "the live site's table is damaged" in done.stderr


# ---- 2. results accumulate -----------------------------------------------------------------------------------------


def test_a_partial_build_overlays_the_committed_results(project: Project, tmp_path: Path) -> None:
    """After building one cell on a fresh clone, the docs once forgot every other cell ('not built')."""
    machine_one = project.record(A)
    machine_two = project.record(B)
    table, _ = project.run(machine_one, machine_two)
    committed = (project.root / "docs" / "compatibility.json").read_text()
    # A fresh clone: the committed docs, no wheels/ at all; one cell rebuilt (it passes again, later).
    shutil.rmtree(project.wheels)
    clone = Project(load_matrix(project.matrix.path))
    (clone.root / "README.md").write_text(README_TEXT)
    write_docs(CompatTable.from_json(committed), clone.root)
    rebuilt = clone.record(A, finished=2e9)
    # Without its site's ledger the clone starts a new history: only when told to (else it says to fetch-site first).
    with pytest.raises(RecordError, match="fetch-site"):
        clone.run(rebuilt)
    table, report = clone.run(rebuilt, first_publish=True)
    assert report.published, report.problems
    shown = {c.id: c for c in table.cells}
    assert shown[A].recorded == "2033-05-18T03:33:20Z" and shown[B].status == Status.PASSED
    assert report.origins == {**dict.fromkeys(clone.cells, ""), A: "records", B: "docs/compatibility.json"}
    readme = (clone.root / "README.md").read_text()
    assert readme.count("✓ 90 (2 skipped)") == 2 and "2 passed" in readme
    # This machine has no copy of B's wheels: the site shows its result, marked, and links to no missing file.
    assert report.off_site == (B,)
    with clone.served() as base:
        page = get(f"{base}/index.html").decode()
        assert "its wheels are not on this site" in page
        check_served(base, plugin_wheel(rebuilt), (clone.wheels / plugin_wheel(rebuilt)).read_bytes())
    # The committed docs keep B's wheels; --check still passes on what was written.
    docs = json.loads((clone.root / "docs" / "compatibility.json").read_text())
    assert next(c for c in docs["cells"] if c["id"] == B)["wheel"] is not None
    check = run_cli(clone.root, "compat-table", "--check", timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr


def test_an_older_local_record_never_replaces_a_newer_published_result(project: Project) -> None:
    project.run(project.record(A, finished=2e9))
    stale = project.record(A, "failed", finished=1e9)  # an old local record, e.g. from before the last CI run
    table, report = project.run(stale)
    [cell] = [c for c in table.cells if c.id == A]
    assert cell.status == Status.PASSED and cell.latest is None and report.origins[A].startswith("the live site")


# ---- 3. the site's history is never deleted ------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["link removed", "link dangling"])
def test_recovery_relinks_the_newest_intact_version_and_released_bytes_stay(project: Project, damage: str) -> None:
    """With wheels/site gone or dangling, the next publish once deleted every version, the only ledger among them,
    and then published other bytes under a released filename."""
    passed = project.record(A)
    project.run(passed)
    project.run(passed)  # two versions: the live one and the previous
    live = project.site.resolve()
    versions_before = sorted(p.name for p in project.wheels.iterdir() if p.name.startswith(".site."))
    if damage == "link removed":
        project.site.unlink()
    else:
        project.site.unlink()
        project.site.symlink_to(".site.404")
    path = plugin_wheel(passed)
    released = (live / path).read_bytes()
    other = make_wheel(project.wheels / "other", "torch-emu", "0.1.0+torch.2.13.drv.2", requires=["different"])
    rebuilt = project.record(A, finished=2e9)  # a rebuild with other bytes under the released filename
    shutil.copyfile(other, project.wheels / path)
    rebuilt.wheel = WheelRecord(other.name, hashlib.sha256(other.read_bytes()).hexdigest(), path)
    _table, report = project.run(rebuilt)
    assert not report.published and "a different build" in report.problems[0]
    assert project.site.resolve() == live and any("linked again" in n for n in report.notes)
    assert sorted(p.name for p in project.wheels.iterdir() if p.name.startswith(".site.")) == versions_before
    with project.served() as base:
        check_served(base, path, released)


def test_only_versions_we_made_and_marked_are_cleaned_up(project: Project) -> None:
    passed = project.record(A)
    for _ in range(5):
        project.run(passed)
    ours = sorted(p for p in project.wheels.iterdir() if p.name.startswith(".site."))
    # The live version and the KEEP previous ones; older ones, superseded by the live ledger, were removed.
    assert len(ours) == 3 and all((p / VERSION_MARKER).is_file() for p in ours)
    assert project.site.resolve() == ours[-1]
    unmarked = project.wheels / ".site.5"
    unmarked.mkdir()
    (unmarked / RELEASED).write_text('{"schema_version": 2, "wheels": {}}')
    for _ in range(3):
        project.run(passed)
    assert unmarked.is_dir() and (unmarked / RELEASED).is_file()


@pytest.mark.parametrize("link", ["docs", "README.md"])
def test_the_docs_are_never_written_through_a_symlink_that_leaves_the_project(
    project: Project, tmp_path_factory: pytest.TempPathFactory, link: str
) -> None:
    """publish.docs and publish.readme were written through such a link (patches: was refused in the same case)."""
    from torch_buildmatrix.errors import DocsError

    outside = tmp_path_factory.mktemp("outside")
    if link == "docs":
        (project.root / "docs").symlink_to(outside, target_is_directory=True)
    else:
        (outside / "README.md").write_text(README_TEXT)
        (project.root / "README.md").unlink()
        (project.root / "README.md").symlink_to(outside / "README.md")
    before = {p.name: p.read_text() for p in outside.iterdir()}
    with pytest.raises(DocsError, match="outside the project"):
        project.run(project.record(A))
    assert {p.name: p.read_text() for p in outside.iterdir()} == before
    assert not project.site.exists()  # nothing published either
