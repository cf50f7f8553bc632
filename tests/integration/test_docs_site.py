"""The strict docs build fails (writing and serving nothing) on a broken link, a broken anchor, a missing page or a page
left out of the navigation; the real docs build strictly and are served on localhost."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.request import urlopen

import pytest

from conftest import REPO

DOCS = REPO / "docs"


# --- the strict build ---------------------------------------------------------------------------------------------


def docs_copy(root: Path) -> Path:
    """A copy of the docs sources (mkdocs.yml and docs/) to damage."""
    root.mkdir()
    shutil.copy(REPO / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(DOCS, root / "docs")
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def docs_site(config: Path, site: Path, *args: str) -> subprocess.Popen[str]:
    bin_dir = str(Path(sys.executable).parent)
    return subprocess.Popen(
        [
            sys.executable,
            str(REPO / "scripts" / "docs_site.py"),
            "--config",
            str(config),
            "--site-dir",
            str(site),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},  # mkdocs from this environment
    )


def reword(page: Path, old: str, new: str) -> None:
    """Edits a page as a stale copy would read; the words must be there, or the damage would be none."""
    text = page.read_text()
    assert old in text, f"{page.name} no longer says {old!r}: choose words it does say"
    page.write_text(text.replace(old, new))


def damage(root: Path, how: str) -> None:
    index = root / "docs" / "index.md"
    if how == "broken link":
        index.write_text(index.read_text() + "\nSee [the missing page](how-to/no-such-page.md).\n")
    elif how == "broken anchor":
        index.write_text(index.read_text() + "\nSee [an option](reference/matrix-options.md#opt-no-such-option).\n")
    elif how == "missing page":
        (root / "docs" / "how-to" / "rerun-cell.md").unlink()  # still in mkdocs.yml's nav (and linked)
    elif how == "stale sessions page":  # noxfile.py says otherwise now
        reword(root / "docs" / "reference" / "nox-sessions.md", "Fast tests", "Quick tests")
    elif how == "stale reference":  # the code says otherwise now
        reword(root / "docs" / "reference" / "command-line.md", "show the expanded cells", "show the cells")
    else:  # a page nobody can reach from the navigation
        (root / "docs" / "how-to" / "orphan.md").write_text("# Orphan\n")


@pytest.mark.integration
@pytest.mark.parametrize(
    "how", ["broken link", "broken anchor", "missing page", "page not in nav", "stale reference", "stale sessions page"]
)
def test_strict_build_fails_and_leaves_the_last_good_site_and_serves_nothing(tmp_path: Path, how: str) -> None:
    root = docs_copy(tmp_path / "src")
    site = tmp_path / "site"
    good = docs_site(root / "mkdocs.yml", site, "--build-only")
    assert good.wait(timeout=600) == 0, good.communicate()[1]
    before = {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()}
    damage(root, how)
    port = free_port()
    failed = docs_site(root / "mkdocs.yml", site, "--port", str(port))  # asked to serve: it must not
    out, err = failed.communicate(timeout=600)
    assert failed.returncode == 1, out + err
    assert "nothing is served" in err and not listening(port)
    assert {p.relative_to(site): p.read_bytes() for p in site.rglob("*") if p.is_file()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site", "src"]  # no staging copy left beside it


@pytest.mark.integration
def test_docs_build_strictly_and_are_served_on_localhost(tmp_path: Path) -> None:
    site = tmp_path / "site"
    port = free_port()
    server = docs_site(REPO / "mkdocs.yml", site, "--port", str(port))
    try:
        deadline = time.monotonic() + 600
        while not listening(port):
            assert server.poll() is None, server.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.2)
        for path, text in [
            ("/", "torch-buildmatrix"),
            ("/reference/command-line/", "merge-results"),
            ("/reference/exit-codes/", "MatrixError"),
            ("/reference/matrix-options/", "plugin.distribution"),
            ("/compatibility/", "compatibility"),
        ]:
            with urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
                assert response.status == 200 and text in response.read().decode(), path
    finally:
        server.terminate()
        server.communicate(timeout=60)
