"""fetch-site: a machine without the live site (a fresh CI runner) copies its release history first, so its publish
keeps every released wheel; a site that has published before but serves no ledger stops it. The live site is served
on 127.0.0.1; what is checked is what lands on disk and what the republished site serves."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from loopback_http import served
from test_release_history import A, Project, check_served, get, plugin_wheel

from torch_buildmatrix.errors import FetchError, RecordError
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.publish.fetch import fetch_site
from torch_buildmatrix.publish.ledger import RELEASED
from torch_buildmatrix.publish.table import CompatTable
from torch_buildmatrix.vocab import Cause, FailureClass, Status

from conftest import WriteMatrix


@pytest.fixture
def live(write_matrix: WriteMatrix, tmp_path: Path) -> Iterator[tuple[Project, str, Path]]:
    """A project that published cell A, its site served as the live site (a copy: the deployed artifact)."""
    project = Project(load_matrix(write_matrix()))
    project.run(project.record(A))
    deployed = tmp_path / "deployed"
    shutil.copytree(project.site, deployed, symlinks=False)
    with served(deployed) as url:
        yield project, url, deployed


def runner_project(project: Project, tmp_path: Path) -> Project:
    """A fresh CI runner: a clone of the project (matrix, README), no wheels/ at all."""
    root = tmp_path / "runner"
    root.mkdir(parents=True)
    shutil.copy(project.matrix.path, root / "matrix.yaml")
    for part in ("plugin", "driver", "patches"):
        shutil.copytree(project.root / part, root / part)
    return Project(load_matrix(root / "matrix.yaml"))


def test_a_fresh_runner_publishes_on_the_live_sites_history(live: tuple[Project, str, Path], tmp_path: Path) -> None:
    """On CI every run rebuilds every cell on fresh runners: one failing job once took its wheels off the site."""
    project, url, deployed = live
    path = plugin_wheel(project.record(A))
    released = (deployed / path).read_bytes()
    runner = runner_project(project, tmp_path)
    report = fetch_site(url, runner.site)
    assert report.version is not None and report.wheels == 2 and report.logs == 1 and report.ledger_entries == 2
    assert (runner.site / path).read_bytes() == released
    assert (runner.site / RELEASED).read_bytes() == (deployed / RELEASED).read_bytes()
    # This run's cell fails (a network blip): the site it deploys still serves the released wheel, marked.
    failed = runner.record(A, "failed", finished=2e9, failure_class=FailureClass.TRANSIENT, cause=Cause.NETWORK)
    assert not (runner.wheels / path).exists()  # the runner built nothing
    table, published = runner.run(failed)
    assert published.published, published.problems
    [cell] = [c for c in table.cells if c.id == A]
    assert cell.status == Status.PASSED and cell.latest is not None
    with runner.served() as base:
        check_served(base, path, released)
        assert "latest attempt failed" in get(f"{base}/index.html").decode()


def test_a_url_that_answers_404_for_everything_is_not_found_unless_a_first_publish(
    write_matrix: WriteMatrix, tmp_path: Path
) -> None:
    """A wrong or renamed site URL (three 404s) once passed as "nothing released yet", and the publish started an
    empty history. Now it is "not found", naming both ways on; a first publish is said explicitly."""
    empty = tmp_path / "empty-site"
    empty.mkdir()
    project = Project(load_matrix(write_matrix()))
    with served(empty) as url:
        with pytest.raises(FetchError) as stopped:
            fetch_site(url, project.site)
        message = str(stopped.value)
        assert message.startswith(f"not found: {url} answers 404") and "SITE_URL" in message
        assert "--first-publish" in message and "FIRST_PUBLISH" in message
        assert not project.wheels.exists()
        report = fetch_site(url, project.site, first_publish=True)
    assert report.version is not None and "first publish" in report.notes[0]
    assert json.loads((project.site / RELEASED).read_text())["wheels"] == {}
    # compat-table publishes on that empty history, although the committed docs list passed cells
    _table, published = project.run(project.record(A))
    assert published.published and plugin_wheel(project.record(A)) in (project.site / RELEASED).read_text()
    shutil.rmtree(project.wheels)
    with pytest.raises(RecordError, match="fetch-site"):  # once published, the docs stop a fresh workspace
        project.run(project.record(A))


def test_fetch_site_takes_the_publish_lock(live: tuple[Project, str, Path], tmp_path: Path) -> None:
    import fcntl

    from torch_buildmatrix.errors import RunLocked

    project, url, _deployed = live
    runner = runner_project(project, tmp_path)
    runner.wheels.mkdir()
    with (runner.wheels / ".site-publish.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(RunLocked, match="another command is publishing or fetching"):
            fetch_site(url, runner.site)
    assert [p.name for p in runner.wheels.iterdir()] == [".site-publish.lock"]
    assert fetch_site(url, runner.site).version is not None


def test_a_fetched_log_path_naming_a_site_file_says_so(live: tuple[Project, str, Path], tmp_path: Path) -> None:
    project, url, deployed = live
    table = json.loads((deployed / "compatibility.json").read_text())
    cell = next(c for c in table["cells"] if c.get("log"))
    cell["log"] = RELEASED
    (deployed / "compatibility.json").write_text(json.dumps(table))
    runner = runner_project(project, tmp_path)
    with pytest.raises(RecordError, match=r"log path 'released.json' names a file of the site itself"):
        fetch_site(url, runner.site)
    assert not runner.site.exists()


@pytest.mark.parametrize("how", ["the site answers", "the committed docs list wheels"])
def test_a_site_that_published_before_but_serves_no_ledger_stops_the_fetch(
    live: tuple[Project, str, Path], tmp_path: Path, how: str
) -> None:
    """A 404 for the ledger (a renamed repository, a user site) once started immutability from zero, silently."""
    project, url, deployed = live
    runner = runner_project(project, tmp_path)
    committed = None
    if how == "the site answers":
        (deployed / RELEASED).unlink()
        fetch_url = url
    else:  # the site is not where the URL says (the repository was renamed): every request is a 404
        committed = CompatTable.from_json((project.root / "docs" / "compatibility.json").read_text())
        # Docs made without a site URL (locally) say nothing about a site: every request a 404 is "not found".
        with pytest.raises(FetchError, match="not found"):
            fetch_site(url + "/renamed-repository", runner.site, committed=committed)
        committed = dataclasses.replace(committed, site_url=url)
        fetch_url = url + "/renamed-repository"
    with pytest.raises(RecordError) as stopped:
        fetch_site(fetch_url, runner.site, committed=committed)
    message = str(stopped.value)
    assert "missing (HTTP 404), but the site has published before" in message
    assert "https://OWNER.github.io/" in message and "--new-ledger" in message
    assert not runner.wheels.exists()
    if how == "the site answers":  # knowingly: a new ledger from the wheels its table lists, checked against it
        report = fetch_site(url, runner.site, new_ledger=True)
        ledger = json.loads((runner.site / RELEASED).read_text())
        assert report.wheels == 2 and plugin_wheel(project.record(A)) in ledger["wheels"]


@pytest.mark.parametrize("damage", ["a released wheel gone", "a released wheel changed", "a damaged ledger"])
def test_a_live_site_that_lost_or_changed_a_release_is_refused_and_nothing_is_linked(
    live: tuple[Project, str, Path], tmp_path: Path, damage: str
) -> None:
    project, url, deployed = live
    path = plugin_wheel(project.record(A))
    runner = runner_project(project, tmp_path)
    if damage == "a released wheel gone":
        (deployed / path).unlink()
        expected: type[Exception] = FetchError
        match = "missing (HTTP 404), but the site's ledger says it released it"
    elif damage == "a released wheel changed":
        (deployed / path).write_bytes((deployed / path).read_bytes() + b"\0")
        expected, match = FetchError, "is not the released"
    else:
        (deployed / RELEASED).write_text('{"schema_version": 2, "wheels": {"../x.whl": {}}}')
        expected, match = RecordError, "not a release ledger"
    with pytest.raises(expected) as refused:
        fetch_site(url, runner.site)
    assert match in str(refused.value)
    assert not runner.site.exists() and not list(runner.wheels.glob(".site.*"))  # nothing half-fetched stays


def test_a_trickling_site_is_cut_off_at_the_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from registry_server import trickling_server

    from torch_buildmatrix.publish import fetch

    monkeypatch.setattr(fetch, "RETRY_WAIT", 0.1)
    with trickling_server(b'{"schema_version": 2, "wheels": {}}', interval=0.3, content_type="application/json") as u:
        start = time.monotonic()
        with pytest.raises(FetchError, match=r"\(3 attempts\): .* did not answer in full within 1\.5 s"):
            fetch_site(u.rstrip("/"), tmp_path / "wheels" / "site", deadline=1.5)
        assert time.monotonic() - start < 8  # three deadlines and two short waits, never forever
        start = time.monotonic()
        with pytest.raises(FetchError, match=r"within its total deadline of 2 s"):
            fetch_site(u.rstrip("/"), tmp_path / "wheels" / "site", deadline=1.5, total=2.0)
        assert time.monotonic() - start < 4  # the total deadline, not three request deadlines
    assert not (tmp_path / "wheels").exists()


def test_a_transient_server_error_is_tried_again(
    live: tuple[Project, str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 503 from Pages for the ledger, once: the second attempt reads it (a 4xx is never retried)."""
    from torch_buildmatrix.publish import fetch
    from torch_buildmatrix.util import http as http_module

    project, url, _deployed = live
    monkeypatch.setattr(fetch, "RETRY_WAIT", 0.01)
    real = http_module.get
    failures = [f"{url}/{RELEASED}"]
    asked: list[str] = []

    def flaky(address: str, **kwargs: object) -> http_module.Answer:
        import urllib.error

        asked.append(address)
        if address in failures:
            failures.remove(address)
            raise urllib.error.HTTPError(address, 503, "Service Unavailable", {}, None)  # type: ignore[arg-type]
        return real(address, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(http_module, "get", flaky)
    report = fetch_site(url, runner_project(project, tmp_path).site)
    assert report.wheels == 2 and asked[:2] == [f"{url}/{RELEASED}", f"{url}/{RELEASED}"]


def test_fetch_into_a_machine_that_has_a_site_merges_and_keeps_it(
    live: tuple[Project, str, Path], tmp_path: Path
) -> None:
    project, url, _deployed = live
    before = project.site.resolve()
    report = fetch_site(url, project.site)
    assert report.version is not None and project.site.resolve() == report.version
    assert before.is_dir() and any("merged with the local site's ledger" in n for n in report.notes)
    ledger = json.loads((project.site / RELEASED).read_text())
    assert {hashlib.sha256((project.site / p).read_bytes()).hexdigest() for p in ledger["wheels"]} == {
        w["sha256"] for w in ledger["wheels"].values()
    }


def test_the_command_line(live: tuple[Project, str, Path], tmp_path: Path) -> None:
    from conftest import run_cli

    project, url, deployed = live
    runner = runner_project(project, tmp_path)
    done = run_cli(runner.root, "fetch-site", "--site-url", url, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"fetched {url}: released.json (2 wheel(s) released), 2 wheel(s) served and 1 log(s)" in done.stdout
    (deployed / RELEASED).unlink()
    again = runner_project(project, tmp_path / "again")
    stopped = run_cli(again.root, "fetch-site", "--site-url", url, timeout=120)
    assert stopped.returncode == RecordError.exit_code and "Traceback" not in stopped.stderr
    assert "but the site has published before" in stopped.stderr and not again.wheels.exists()
    bad = run_cli(again.root, "fetch-site", "--site-url", "https://user:FAKE-PASSWORD@x.invalid", timeout=120)
    assert bad.returncode == FetchError.exit_code and "FAKE-PASSWORD" not in bad.stderr
