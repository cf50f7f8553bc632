"""Publishing the site: verified in staging, then one atomic swap; a failed check or a kill leaves the previous site
served; released bytes never change; files are world-readable whatever the umask; paths stay inside wheels/."""

from __future__ import annotations

import dataclasses
import json
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fake_wheels import cell_result, make_wheel, sha256_file

from torch_buildmatrix.builder.records.model import WheelRecord
from torch_buildmatrix.model.cells import expand
from torch_buildmatrix.model.loader import load_matrix
from torch_buildmatrix.model.matrix import Matrix
from torch_buildmatrix.model.pythons import Python
from torch_buildmatrix.publish import site as site_module
from torch_buildmatrix.publish.advice import all_choices
from torch_buildmatrix.publish.docs import DocsLayout, write_docs
from torch_buildmatrix.publish.index import page_anchors
from torch_buildmatrix.publish.overlay import build_table
from torch_buildmatrix.publish.page import choice_key, site_page
from torch_buildmatrix.publish.site import write_site
from torch_buildmatrix.publish.table import CompatTable
from torch_buildmatrix.publish.verify import RELEASED
from torch_buildmatrix.publish.versions import recover_site
from torch_buildmatrix.vocab import Status

from conftest import WriteMatrix

PUBLISHED = {"2.4": {"3.9", "3.10", "3.11"}, "2.13": {"3.11"}}
CELL = "torch2.13-cpu-cp311-drv2"


def table_of(matrix: Matrix, wheels: Path, built: tuple[str, ...] = (CELL,)) -> CompatTable:
    available = {r: {Python.parse(p) for p in PUBLISHED[r.minor]} for r in matrix.torch}
    cells = expand(matrix, available)
    results = [cell_result(c, wheels_dir=wheels) for c in cells if c.id in built]
    return build_table(matrix, cells, results, available)


def snapshot(site: Path) -> dict[str, bytes]:
    return {p.relative_to(site).as_posix(): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}


def siblings(site: Path) -> list[str]:
    return sorted(p.name for p in site.parent.iterdir() if p.name.startswith(f".{site.name}."))


Published = tuple[Matrix, CompatTable, Path, Path]  # matrix, table, wheels/, wheels/site


@pytest.fixture
def published(write_matrix: WriteMatrix, tmp_path: Path) -> Published:
    matrix = load_matrix(write_matrix())
    wheels = tmp_path / "wheels"
    table = table_of(matrix, wheels)
    report = write_site(table, wheels, wheels / "site", matrix)
    assert report.published and report.problems == [] and report.wheels == 2
    return matrix, table, wheels, wheels / "site"


def test_site_is_a_link_to_one_verified_version_and_world_readable(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    matrix = load_matrix(write_matrix())
    wheels = tmp_path / "wheels"
    table = table_of(matrix, wheels)
    old = os.umask(0o077)
    try:
        report = write_site(table, wheels, wheels / "site", matrix)
    finally:
        os.umask(old)
    site = wheels / "site"
    assert report.published and site.is_symlink() and not Path(site.readlink().as_posix()).is_absolute()
    assert siblings(site) == [site.readlink().as_posix()]  # no staging or previous version left beside it
    modes = {p.relative_to(site).as_posix(): p.stat().st_mode & 0o777 for p in site.rglob("*")}
    assert modes and all(m == (0o755 if (site / p).is_dir() else 0o644) for p, m in modes.items()), modes
    assert site.resolve().stat().st_mode & 0o777 == 0o755


def test_a_wheel_differing_from_its_record_is_never_published(published: Published, tmp_path: Path) -> None:
    matrix, table, wheels, site = published
    before, live = snapshot(site), site.readlink().as_posix()
    plugin = next((wheels / "torch2.13").glob("*drv.2*.whl"))
    plugin.write_bytes(plugin.read_bytes() + b"tampered")
    report = write_site(table, wheels, site, matrix)
    assert not report.published
    assert report.problems == [
        f"torch2.13/{plugin.name}: sha256 {sha256_file(plugin)} differs from its cell's record "
        f"({next(c for c in table.cells if c.id == CELL).wheel.sha256})"  # type: ignore[union-attr]
    ]
    assert site.readlink().as_posix() == live and snapshot(site) == before and siblings(site) == [live]


def test_released_bytes_never_change(published: Published) -> None:
    """A rebuild with other bytes under a released filename is refused; the site keeps the released bytes."""
    matrix, table, wheels, site = published
    released = (site / "torch2.13").glob("*drv.2*.whl").__next__()
    old_bytes = released.read_bytes()
    rebuilt = make_wheel(wheels / "torch2.13", "torch-emu", "0.1.0+torch.2.13.drv.2", requires=["extra-dep"])
    assert rebuilt.name == released.name and rebuilt.read_bytes() != old_bytes
    cells = tuple(
        dataclasses.replace(c, wheel=WheelRecord(c.wheel.filename, sha256_file(rebuilt), c.wheel.path))
        if c.id == CELL and c.wheel
        else c
        for c in table.cells
    )
    report = write_site(dataclasses.replace(table, cells=cells), wheels, site, matrix)
    assert not report.published and len(report.problems) == 1
    assert "a different build" in report.problems[0] and "released bytes never change" in report.problems[0]
    assert "raise plugin.version in matrix.yaml" in report.problems[0]
    assert (site / "torch2.13" / released.name).read_bytes() == old_bytes


def test_a_released_wheel_stays_in_the_index_when_its_cell_leaves_the_table(published: Published) -> None:
    """The cell's record is gone (or it failed): its released wheel stays served, and keeps its bytes."""
    matrix, table, wheels, site = published
    wheel = next((site / "torch2.13").glob("*drv.2*.whl"))
    name, released = wheel.name, wheel.read_bytes()
    empty = table_of(matrix, wheels, built=())
    assert write_site(empty, wheels, site, matrix).published
    assert (site / "torch2.13" / name).read_bytes() == released
    assert name in (site / "torch2.13" / "simple" / "torch-emu" / "index.html").read_text()
    rebuilt = make_wheel(wheels / "torch2.13", "torch-emu", "0.1.0+torch.2.13.drv.2", requires=["other"])
    cells = tuple(
        dataclasses.replace(c, wheel=WheelRecord(c.wheel.filename, sha256_file(rebuilt), c.wheel.path))
        if c.id == CELL and c.wheel
        else c
        for c in table.cells
    )
    report = write_site(dataclasses.replace(table, cells=cells), wheels, site, matrix)
    assert not report.published and "a different build" in report.problems[0]
    assert (site / "torch2.13" / name).read_bytes() == released and f"torch2.13/{name}" in (site / RELEASED).read_text()


def test_same_bytes_republish(published: Published) -> None:
    matrix, table, wheels, site = published
    before = snapshot(site)
    report = write_site(table, wheels, site, matrix)
    assert report.published and snapshot(site) == before


def test_metadata_must_match_the_filename(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    matrix = load_matrix(write_matrix())
    wheels = tmp_path / "wheels"
    table = table_of(matrix, wheels)
    plugin = next((wheels / "torch2.13").glob("*drv.2*.whl"))
    lying = make_wheel(wheels / "lying", "torch-emu", "0.2.0+torch.2.13.drv.2")  # METADATA says 0.2.0
    plugin.write_bytes(lying.read_bytes())
    cells = tuple(
        dataclasses.replace(c, wheel=WheelRecord(c.wheel.filename, sha256_file(plugin), c.wheel.path))
        if c.id == CELL and c.wheel
        else c
        for c in table.cells
    )
    report = write_site(dataclasses.replace(table, cells=cells), wheels, wheels / "site", matrix)
    assert not report.published
    assert report.problems == [
        f"torch2.13/{plugin.name}: METADATA Version '0.2.0+torch.2.13.drv.2' is not the filename's "
        "0.1.0+torch.2.13.drv.2"
    ]
    assert not (wheels / "site").exists() and siblings(wheels / "site") == []  # nothing was ever live


def test_a_table_that_no_longer_describes_the_matrix_is_not_published(
    published: Published, write_matrix: WriteMatrix
) -> None:
    matrix, table, wheels, site = published
    live = site.readlink().as_posix()
    changed = load_matrix(write_matrix(Path(matrix.path).read_text().replace('"2.4.1"', '"2.4.0"')))
    report = write_site(table, wheels, site, changed)
    assert not report.published and any("torch releases" in p for p in report.problems)
    assert site.readlink().as_posix() == live


def test_a_log_path_outside_wheels_is_never_read_or_written(published: Published, tmp_path: Path) -> None:
    matrix, table, wheels, site = published
    outside = tmp_path / "passwd"
    outside.write_text("root:x:0:0\n")
    cells = tuple(dataclasses.replace(c, log=str(outside)) if c.id == CELL else c for c in table.cells)
    report = write_site(dataclasses.replace(table, cells=cells), wheels, site, matrix)
    assert not report.published
    assert report.problems == [f"{CELL}: its log path {str(outside)!r} is absolute"]
    assert outside.read_text() == "root:x:0:0\n" and oct(outside.stat().st_mode & 0o777) == oct(0o644)
    assert "root:x" not in "".join(p.read_text(errors="replace") for p in site.rglob("*") if p.is_file())


def test_a_table_its_reader_would_refuse_never_goes_live(published: Published) -> None:
    """The writer wrote a table the next publish (and fetch-site) refused with exit 7: the staged table is read back
    with the reader before the swap."""
    matrix, table, wheels, site = published
    before, live = snapshot(site), site.readlink().as_posix()
    cells = tuple(
        dataclasses.replace(c, requirement="x" * 2000) if c.id == CELL else c for c in table.cells
    )  # longer than the reader's 1024
    report = write_site(dataclasses.replace(table, cells=cells), wheels, site, matrix)
    assert not report.published
    assert any("does not read back" in p and "requirement" in p for p in report.problems), report.problems
    assert site.readlink().as_posix() == live and snapshot(site) == before


def test_a_failure_while_staging_leaves_the_live_site(published: Published, monkeypatch: pytest.MonkeyPatch) -> None:
    matrix, table, wheels, site = published
    before, live = snapshot(site), site.readlink().as_posix()

    def killed(*args: object, **kwargs: object) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(site_module, "site_page", killed)
    with pytest.raises(KeyboardInterrupt):
        write_site(table, wheels, site, matrix)
    assert site.readlink().as_posix() == live and snapshot(site) == before and siblings(site) == [live]


def test_a_kill_leaves_a_site_that_the_next_run_recovers(published: Published) -> None:
    """SIGKILL cannot be caught: what it leaves (a half-built version marked as ours, the link being placed) is
    removed at the next start; a directory we did not mark is never touched; the live link never pointed anywhere
    but at a verified version."""
    from torch_buildmatrix.publish.versions import new_version

    matrix, table, wheels, site = published
    live = site.readlink().as_posix()
    half = new_version(site)  # marked "staging", as a killed run leaves it
    (half / "torch2.13").mkdir(parents=True)
    (half / "index.html").write_text("half")
    foreign = site.with_name(f".{site.name}.77")  # someone else's directory under a name like ours
    foreign.mkdir()
    (foreign / "keep.txt").write_text("not ours")
    site.with_name(f".{site.name}.link").symlink_to(half.name)
    recover_site(site)
    assert siblings(site) == sorted([live, foreign.name]) and site.readlink().as_posix() == live
    assert (foreign / "keep.txt").read_text() == "not ours"
    assert write_site(table, wheels, site, matrix).published
    assert len(siblings(site)) == 3 and (foreign / "keep.txt").is_file()  # the new live, the previous, the foreign


def test_a_site_from_before_the_link_layout_is_replaced_and_a_kill_mid_swap_recovered(published: Published) -> None:
    matrix, table, wheels, site = published
    # The old layout: wheels/site a real directory.
    real = snapshot(site)
    target = site.resolve()
    site.unlink()
    target.rename(site)
    assert site.is_dir() and not site.is_symlink()
    # Killed right after renaming the old directory aside, before the link was placed: nothing is at wheels/site.
    site.rename(site.with_name(f".{site.name}.legacy"))
    recover_site(site)
    assert site.is_symlink() and snapshot(site) == real
    assert write_site(table, wheels, site, matrix).published and snapshot(site) == real
    # The old site is history: kept beside the new version, never deleted.
    assert site.with_name(f".{site.name}.legacy").is_dir() and len(siblings(site)) == 2


def test_a_javascript_wheel_path_never_becomes_a_link(published: Published) -> None:
    matrix, table, wheels, site = published
    hostile = "javascript:alert(document.cookie)//torch_emu-0.1.0+torch.2.13.drv.2-py3-none-any.whl"
    cells = tuple(
        dataclasses.replace(c, wheel=dataclasses.replace(c.wheel, path=hostile), log="javascript:alert(1)")
        if c.id == CELL and c.wheel
        else c
        for c in table.cells
    )
    hostile_table = dataclasses.replace(table, cells=cells)
    page = site_page(hostile_table, logs={"javascript:alert(1)"})
    assert "javascript:" not in page.split('<script id="choices"')[0]
    hrefs = [a["href"] for a in page_anchors(page)]
    assert hrefs and all(not h.lower().startswith("javascript") for h in hrefs)
    report = write_site(hostile_table, wheels, site, matrix)  # and the site refuses it before it goes live
    assert not report.published and any("javascript:" in p and "starts with a scheme" in p for p in report.problems)


def test_every_field_is_escaped_and_the_selector_data_survives_comment_and_script_markup(
    write_matrix: WriteMatrix,
) -> None:
    matrix = load_matrix(write_matrix())
    table = table_of(matrix, Path("/nonexistent"), built=())
    evil = '2.13.0<!--<script>alert(1)</script>"\u2028'
    releases = tuple(
        dataclasses.replace(r, version=evil, variant='cpu" onmouseover="x') if r.minor == "2.13" else r
        for r in table.releases
    )
    cells = tuple(
        dataclasses.replace(c, status=Status.FAILED, failed_step="<b>smoke</b>", error='"><img src=x>')
        for c in table.cells
    )
    hostile = dataclasses.replace(table, releases=releases, cells=cells)
    page = site_page(hostile)
    script = page.split('<script id="choices" type="application/json">')[1].split("</script>")[0]
    assert "<" not in script and ">" not in script and "\u2028" not in script
    data = json.loads(script)
    assert data["choices"] == {
        choice_key(c.release, c.python, c.sdk): {
            "cell": c.cell,
            "exact": c.exact,
            "note": c.note,
            "index_command": c.index_command,
            "release_index_command": c.release_index_command,
            "find_links_command": c.find_links_command,
        }
        for c in all_choices(hostile)
    }
    assert any(evil in c["note"] for c in data["choices"].values())  # the text itself survives, escaped
    assert "<script>alert" not in page and "<img" not in page and "<b>smoke" not in page
    assert 'onmouseover="x' not in page and "&lt;!--" in page
    # The page parses into exactly the elements we wrote: two scripts, no element from a field.
    tags = _Tags()
    tags.feed(page)
    assert tags.seen.count("script") == 2 and "img" not in tags.seen and "b" not in tags.seen


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append(tag)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("javascript:alert(1)", "is not an http:// or https:// URL"),
        ("https://user:FAKE-PASSWORD@wheels.example", "holds credentials, which would be published"),
        ('https://wheels.example/"><script>', "no query, fragment, quotes, spaces or angle brackets"),
    ],
)
def test_a_site_url_that_is_not_a_plain_http_url_is_refused(published: Published, url: str, problem: str) -> None:
    matrix, table, wheels, site = published
    before, live = snapshot(site), site.readlink().as_posix()
    report = write_site(dataclasses.replace(table, site_url=url), wheels, site, matrix)
    assert not report.published and len(report.problems) == 1 and problem in report.problems[0]
    assert "FAKE-PASSWORD" not in report.problems[0]
    assert site.readlink().as_posix() == live and snapshot(site) == before


def test_a_second_publisher_is_refused_while_one_publishes(published: Published) -> None:
    import fcntl

    from torch_buildmatrix.errors import RunLocked

    matrix, table, wheels, site = published
    before, live = snapshot(site), site.readlink().as_posix()
    with site.with_name(f".{site.name}-publish.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(RunLocked, match="another command is publishing"):
            write_site(table, wheels, site, matrix)
    assert site.readlink().as_posix() == live and snapshot(site) == before and siblings(site) == [live]
    assert write_site(table, wheels, site, matrix).published  # once the other is done


def test_a_site_link_the_user_pointed_elsewhere_never_has_its_target_deleted(
    write_matrix: WriteMatrix, tmp_path: Path
) -> None:
    matrix = load_matrix(write_matrix())
    wheels = tmp_path / "wheels"
    table = table_of(matrix, wheels)
    elsewhere = tmp_path / "www" / "site"
    elsewhere.mkdir(parents=True)
    (elsewhere / "keep.txt").write_text("the user's")
    wheels.mkdir(exist_ok=True)
    (wheels / "site").symlink_to(elsewhere)
    assert write_site(table, wheels, wheels / "site", matrix).published
    assert (elsewhere / "keep.txt").read_text() == "the user's"


def test_check_of_a_damaged_committed_table_is_an_error_naming_it(write_matrix: WriteMatrix) -> None:
    from conftest import run_cli

    path = write_matrix()
    table = path.parent / "docs" / "compatibility.json"
    table.parent.mkdir()
    table.write_text('{"schema_version": 1, "releases": [{"key": 3}]')  # truncated, wrong types
    done = run_cli(path.parent, "compat-table", "--check", "--matrix", str(path), timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{table}: unreadable (JSONDecodeError" in done.stderr and "Traceback" not in done.stderr
    assert table.read_text() == '{"schema_version": 1, "releases": [{"key": 3}]'


def test_the_docs_are_written_under_the_publish_lock(
    write_matrix: WriteMatrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second compat-table starting between the swap and the docs would publish a site the docs do not describe."""
    import fcntl

    path = write_matrix()
    (path.parent / "README.md").write_text("# x\n\n<!-- compat-table:start -->\n<!-- compat-table:end -->\n")
    matrix = load_matrix(path)
    wheels = tmp_path / "wheels"
    table = table_of(matrix, wheels)
    seen: list[bool] = []
    real = write_docs  # as site.py imported it: the name the publish looks up there is patched

    def write_docs_and_try_the_lock(
        table: CompatTable, root: Path, layout: DocsLayout, rendered: dict[Path, str] | None = None
    ) -> list[Path]:
        with (wheels / ".site-publish.lock").open("a") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                seen.append(True)  # held by the publisher while the docs are written
            else:
                seen.append(False)
        return real(table, root, layout, rendered)

    monkeypatch.setattr(site_module, "write_docs", write_docs_and_try_the_lock)
    report = write_site(table, wheels, wheels / "site", matrix, docs_root=path.parent)
    assert report.published and seen == [True]
    assert {p.relative_to(path.parent).as_posix() for p in report.docs} == {
        "README.md",
        "docs/compatibility.md",
        "docs/compatibility.json",
    }
    assert CompatTable.from_json((path.parent / "docs" / "compatibility.json").read_text()) == table


def test_committed_docs_their_reader_would_refuse_are_never_written(write_matrix: WriteMatrix, tmp_path: Path) -> None:
    """docs/compatibility.json is the base of every later publish: it is read back with the reader (parse_table)
    before it replaces the committed one, and when it would not read back, the docs and the site stay as they were."""
    from torch_buildmatrix.errors import DocsError

    path = write_matrix()
    root = path.parent
    (root / "README.md").write_text("# x\n\n<!-- compat-table:start -->\n<!-- compat-table:end -->\n")
    matrix = load_matrix(path)
    wheels, site = tmp_path / "wheels", tmp_path / "wheels" / "site"
    table = table_of(matrix, wheels)
    assert write_site(table, wheels, site, matrix, docs_root=root).published
    committed = {p: p.read_bytes() for p in [root / "README.md", *sorted((root / "docs").iterdir())]}
    before, live = snapshot(site), site.readlink().as_posix()
    cells = tuple(dataclasses.replace(c, requirement="x" * 2000) if c.id == CELL else c for c in table.cells)
    unreadable = dataclasses.replace(table, cells=cells)  # a requirement longer than the reader's 1024
    with pytest.raises(DocsError, match=r"docs/compatibility.json: the table as written does not read back \(.*"):
        write_docs(unreadable, root, DocsLayout())
    with pytest.raises(DocsError, match="requirement"):
        write_site(unreadable, wheels, site, matrix, docs_root=root)
    assert {p: p.read_bytes() for p in [root / "README.md", *sorted((root / "docs").iterdir())]} == committed
    assert site.readlink().as_posix() == live and snapshot(site) == before and siblings(site) == [live]


def test_a_log_or_wheel_that_is_a_symlink_is_never_published(published: Published, tmp_path: Path) -> None:
    matrix, table, wheels, site = published
    before, live = snapshot(site), site.readlink().as_posix()
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0\n")
    log = wheels / "logs" / f"{CELL}.log"
    log.unlink()
    log.symlink_to(secret)
    report = write_site(table, wheels, site, matrix)
    assert not report.published and report.problems == [
        f"{CELL}: its log logs/{CELL}.log is a symlink ({log}); only regular files are read"
    ]
    assert site.readlink().as_posix() == live and snapshot(site) == before
    assert "root:x" not in "".join(p.read_text(errors="replace") for p in site.rglob("*") if p.is_file())
    log.unlink()
    log.write_text("# log\n")
    wheel = next((wheels / "torch2.13").glob("*.whl"))
    wheel.rename(tmp_path / wheel.name)
    wheel.symlink_to(tmp_path / wheel.name)
    report = write_site(table, wheels, site, matrix)
    assert not report.published and len(report.problems) == 1 and "is a symlink" in report.problems[0]
    assert snapshot(site) == before


def test_a_log_is_linked_only_from_the_live_site_and_a_rebuilds_log_never_changes_a_published_one(
    published: Published,
) -> None:
    """Logs with the bytes the live site holds are hard-linked from it (a site version is never written again); this
    run's logs in wheels/ are copied, never linked: a rebuild rewrites them in place."""
    matrix, table, wheels, site = published
    log = next(c.log for c in table.cells if c.id == CELL)
    assert log is not None
    first = (site / log).resolve()
    assert not first.samefile(wheels / log)  # copied from wheels/
    assert write_site(table, wheels, site, matrix).published
    second = (site / log).resolve()
    assert second != first and second.samefile(first)  # same bytes: linked from the version before
    with (wheels / log).open("w") as handle:  # a rebuild writes the log in place
        handle.write("the rebuild's log\n")
    assert write_site(table, wheels, site, matrix).published
    third = (site / log).resolve()
    assert third.read_text() == "the rebuild's log\n" and not third.samefile(wheels / log)
    assert first.read_text() != "the rebuild's log\n" and second.read_text() == first.read_text()
