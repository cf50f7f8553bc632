"""Every install command the README, the compatibility page (docs/compatibility.md) and the site's HTML page give is
binary-only, and none relies on a torch pin the wheels do not carry: with `check.torch-pin: none`, the command "for
whatever torch is installed" (which restates the installed torch and lets the installer pick a wheel by it) is left
out, since every release's wheel would admit that torch and the newest would win.

The commands are collected from the committed files, and from the renderings of a published table (a full 0.3.0 run,
kept in tests/fixtures/published: the committed table has no published cell between a version bump and its full run),
with its wheels' torch pin as recorded (release-line) and as `none`."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from install_harness import markdown_commands, page_commands

from torch_buildmatrix.model.contract import TorchPin
from torch_buildmatrix.publish.advice import ONLY_BINARY, all_choices, any_torch_command, release_index_command
from torch_buildmatrix.publish.markdown import NO_ANY_TORCH, compatibility_markdown, readme_section
from torch_buildmatrix.publish.page import site_page
from torch_buildmatrix.publish.table import CompatTable
from torch_buildmatrix.publish.tableparse import parse_table

REPO = Path(__file__).parents[2]
ANY_TORCH = "torch==$("  # the command that restates the installed torch


PUBLISHED = REPO / "tests" / "fixtures" / "published" / "compatibility.json"


def committed_table() -> CompatTable:
    return parse_table((REPO / "docs" / "compatibility.json").read_text(encoding="utf-8"))


def published_table() -> CompatTable:
    """A table whose every cell passed (this project's full 0.3.0 run), so every command the pages can give is given."""
    table = parse_table(PUBLISHED.read_text(encoding="utf-8"))
    assert table.cells and all(c.status == "passed" for c in table.cells)
    return table


def check_binary_only(commands: list[str], where: str, *, published: bool = True) -> None:
    assert commands or not published, f"no install command found in {where}"
    for command in commands:
        assert ONLY_BINARY in command and "--no-binary" not in command, f"{where}: not binary-only: {command}"


def renderings(table: CompatTable) -> dict[str, list[str]]:
    return {
        "docs/compatibility.md": markdown_commands(compatibility_markdown(table)),
        "README block": markdown_commands(readme_section(table)),
        "site page": page_commands(site_page(table)),
    }


def test_committed_readme_and_compatibility_page_give_binary_only_commands() -> None:
    """Every command the committed files give is binary-only; while no cell of the current version is published
    (after a version bump, before its full run) they give none, and say so."""
    published = any(c.status == "passed" for c in committed_table().cells)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("<!-- compat-table:start -->") : readme.index("<!-- compat-table:end -->")]
    docs = (REPO / "docs" / "compatibility.md").read_text(encoding="utf-8")
    check_binary_only(markdown_commands(block), "README.md", published=published)
    check_binary_only(markdown_commands(docs), "docs", published=published)
    if not published:
        assert "No wheel is published yet" in docs


@pytest.mark.parametrize("pin", list(TorchPin))
def test_every_rendered_command_is_binary_only_and_needs_no_absent_torch_pin(pin: TorchPin) -> None:
    table = replace(published_table(), torch_pin=pin)
    for where, commands in renderings(table).items():
        check_binary_only(commands, where)
        restating = [c for c in commands if ANY_TORCH in c]
        if pin == TorchPin.NONE:
            assert restating == [], f"{where} offers a command that needs a torch pin the wheels lack: {restating}"
        else:
            assert restating, f"{where} lost the command for whatever torch is installed"
    if pin == TorchPin.NONE:
        assert any_torch_command(table) is None
        assert NO_ANY_TORCH in compatibility_markdown(table) and NO_ANY_TORCH in readme_section(table)
        page = site_page(table)
        assert 'id="any-torch"' not in page and html.escape(NO_ANY_TORCH) in page


def test_the_torch_pin_survives_the_table_json_and_old_tables_read_as_pinned() -> None:
    table = committed_table()
    assert table.torch_pin == TorchPin.RELEASE_LINE and '"torch_pin"' not in table.to_json()  # the committed form
    unpinned = replace(table, torch_pin=TorchPin.NONE)
    assert parse_table(unpinned.to_json()).torch_pin == TorchPin.NONE
    data = json.loads(unpinned.to_json())
    data["torch_pin"] = "loose"
    with pytest.raises(ValueError, match="loose"):
        parse_table(json.dumps(data))


def test_the_look_alike_note_points_at_commands_that_exist_where_it_is() -> None:
    table = published_table()
    page = site_page(table)
    note = re.search(r'<p class="note" id="look-alike">(.*?)</p>', page)[1]  # type: ignore[index]
    assert "`" not in note and "<code>torch-emu</code>" in note  # rendered as HTML, not Markdown
    assert "choose pinned above" in note and 'value="index" checked> pinned (index)' in page
    assert "(below)" in compatibility_markdown(table) and "Pinned, driver" in compatibility_markdown(table)
    assert "(in [docs/compatibility.md](docs/compatibility.md))" in readme_section(table)
    unpinned = replace(table, torch_pin=TorchPin.NONE)
    assert "whatever torch" not in re.search(r"Look-alike.*", readme_section(unpinned))[0]  # type: ignore[index]


def test_the_page_shows_a_command_without_javascript() -> None:
    page = site_page(published_table())
    command = html.unescape(re.search(r'<pre id="command">([^<]*)</pre>', page)[1])  # type: ignore[index]
    assert command.startswith("pip install ") and ONLY_BINARY in command and "==" in command
    script_free = re.sub(r"<script.*?</script>", "", page, flags=re.S)
    assert command in html.unescape(script_free)  # in the HTML itself, not only in the script's data
    # Without JavaScript the selector never changes: every release's commands are in the HTML too (issue 37 item 9),
    # its index's and each tested Python's pinned one, the same the script would show.
    table = published_table()
    static = re.search(r"<noscript>(.*?)</noscript>", script_free, re.S)
    assert static, "no <noscript> list of commands"
    shown = [html.unescape(c) for c in re.findall(r"<code>([^<]*)</code>", static[1])]
    assert all(ONLY_BINARY in c for c in shown)
    choices = [c for c in all_choices(table) if c.exact]
    for release in table.releases:
        wanted = {c.index_command for c in choices if c.release == release.key}
        assert wanted, f"torch {release.version} has no tested choice in the fixture"
        assert wanted <= set(shown), f"torch {release.version}: pinned commands missing without JavaScript"
        assert release_index_command(table, release.minor) in shown, f"torch {release.version}: no index command"


def test_the_look_alike_note_is_only_where_a_name_is_not_the_projects_own_on_the_public_index() -> None:
    """publish.own-names (an upstream project's own name, its sdist built here): the note leaves those names out, and
    is left out of the page, the compatibility page and the README block when every name is the project's own."""
    table = published_table()
    sdk_only = replace(table, own_names=("torch_emu",))  # compared as PEP 503 names
    note = re.search(r'<p class="note" id="look-alike">(.*?)</p>', site_page(sdk_only))[1]  # type: ignore[index]
    assert "<code>emu-driver</code> is not ours" in note and "torch-emu" not in note.split(" is not ours")[0]
    assert "both pins carry local version labels" in note  # the pinned commands still pin both
    owned = replace(table, own_names=("torch-emu", "emu-driver"))
    assert 'id="look-alike"' not in site_page(owned)
    for text in (compatibility_markdown(owned), readme_section(owned)):
        assert "Look-alike" not in text and "not ours" not in text
    assert "Look-alike" in compatibility_markdown(table) and "Look-alike" in readme_section(table)
    assert parse_table(owned.to_json()) == owned and '"own_names"' not in table.to_json()
    with pytest.raises(ValueError, match="own_names"):
        parse_table(replace(table, own_names=("a", "b", "c")).to_json())
    with pytest.raises(ValueError, match=r"own_names\[0\]"):
        parse_table(json.dumps({**json.loads(table.to_json()), "own_names": [7]}))
