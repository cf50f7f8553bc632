"""The site's front page, rendered purely from a CompatTable: install selector, cell table, features per release.

Every selector choice is resolved in Python (compat.all_choices) and embedded as JSON; the page's script only
looks the choice up and puts the site's own URL into the command, so the logic stays tested here.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Collection
from urllib.parse import quote

from torch_buildmatrix.publish.advice import (
    all_choices,
    any_torch_command,
    deep_summary,
    free_threaded_note,
    install_choice,
    install_commands,
    partial_words,
    smoke_summary,
)
from torch_buildmatrix.publish.markdown import (
    FEATURE_MARKS,
    NO_ANY_TORCH,
    NOT_AVAILABLE_MARK,
    NOT_IN_MATRIX,
    look_alike_note,
    shows_features,
)
from torch_buildmatrix.publish.table import SITE_PLACEHOLDER, CompatCell, CompatTable
from torch_buildmatrix.util.paths import relative_path_problem
from torch_buildmatrix.util.when import day
from torch_buildmatrix.vocab import Status

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; padding: 0 1rem; color: #1b1f24; }
table { border-collapse: collapse; margin: 1rem 0; }
th, td { border: 1px solid #ccd; padding: .3rem .6rem; text-align: left; }
td.passed { background: #e6f6e6; } td.failed { background: #fbe4e4; } td.not-built { color: #777; }
td.absent { color: #aaa; text-align: center; }
#cells, #features { width: 100%; table-layout: fixed; } td, th { overflow-wrap: break-word; }
#cells td, #cells th, #features td, #features th { padding: .3rem .4rem; } #features th { font-size: .85em; }
#features tr > :first-child { width: 14rem; } #cells th.sdk { width: 4rem; }
summary.mark { cursor: pointer; list-style: none; text-decoration: underline dotted #99a; }
summary.mark::-webkit-details-marker { display: none; }
.cell-details { font-size: .85em; padding-top: .2rem; }
pre { background: #f3f4f6; padding: .8rem; white-space: pre-wrap; word-break: break-all; }
label { margin-right: 1rem; } .note { color: #555; } .inexact { color: #9a3b00; }
.recorded, .off-site { color: #666; font-size: .85em; } .latest-failed { color: #9a3b00; font-size: .85em; }
"""

SCRIPT = """
const data = JSON.parse(document.getElementById('choices').textContent);
const site = data.site_url || new URL('.', window.location.href).href.replace(/\\/$/, '');
const anyTorch = document.getElementById('any-torch');
if (anyTorch) anyTorch.textContent = anyTorch.textContent.split('{site}').join(site);
function update() {
  const key = ['torch', 'python', 'sdk'].map(id => document.getElementById(id)).filter(el => el)
    .map(el => el.value).join('|');
  const how = document.querySelector('input[name=how]:checked').value;
  const choice = data.choices[key];
  const command = document.getElementById('command');
  const note = document.getElementById('note');
  if (!choice || !choice.cell) {
    command.textContent = '# no wheel is published for this choice yet';
  } else {
    const text = {plain: choice.release_index_command, index: choice.index_command}[how] || choice.find_links_command;
    command.textContent = text.split('{site}').join(site);
  }
  note.textContent = choice ? choice.note : '';
  note.className = choice && choice.exact ? 'note' : 'note inexact';
  command.dataset.cell = choice && choice.cell ? choice.cell : '';
}
for (const el of document.querySelectorAll('select, input[name=how]')) el.addEventListener('change', update);
update();
"""


def _e(text: object) -> str:
    """Escaped for HTML text and for a double-quoted attribute alike."""
    return html.escape(str(text), quote=True)


def code_spans(text: str) -> str:
    """Markdown-ish text as HTML: escaped, its `code` spans as <code> elements (never literal backticks)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", _e(text))


def site_href(path: str) -> str | None:
    """A link to a file of the site: only a plain relative path (never a scheme such as javascript:, never outside
    the site), percent-encoded and escaped for the attribute; None when the path is not one."""
    if relative_path_problem(path):
        return None
    return _e(quote(path, safe="/+"))


def _options(select_id: str, label: str, values: list[tuple[str, str]], default: str) -> str:
    options = "".join(
        f'<option value="{_e(v)}"{" selected" if v == default else ""}>{_e(text)}</option>' for v, text in values
    )
    return f'<label>{_e(label)} <select id="{select_id}">{options}</select></label>'


def default_choice(table: CompatTable) -> tuple[str, str, str]:
    """The newest installable cell preselected, else the newest release with the first Python and newest SDK."""
    installable = [c for c in table.cells if c.installable]
    tags = [c.tag for c in table.columns]
    if installable:
        order = [r.key for r in table.releases]
        best = max(
            installable, key=lambda c: (order.index(c.release), tags.index(c.sdk), -table.pythons.index(c.python))
        )
        return best.release, best.python, best.sdk
    return table.releases[-1].key, table.pythons[0], tags[-1]


def choice_key(release: str, python: str, sdk: str) -> str:
    """The page's key of a selector choice: the selects' values joined (no SDK select without an SDK)."""
    return "|".join([release, python, *([sdk] if sdk else [])])


def selector(table: CompatTable) -> str:
    """The selects and the command of the preselected choice, in the HTML itself: readable without JavaScript (the
    page's script replaces it as the choice changes)."""
    torch, python, sdk = default_choice(table)
    chosen = install_choice(table, torch, python, sdk, table.site_url.rstrip("/") or SITE_PLACEHOLDER)
    command = chosen.index_command if chosen.cell else "# no wheel is published for this choice yet"
    sdk_select = [_options("sdk", table.sdk.title, [(c.tag, c.version) for c in table.sdks], sdk)] if table.sdk else []
    return "\n".join(
        [
            '<form id="selector" onsubmit="return false">',
            _options("torch", "torch", [(r.key, r.label) for r in table.releases], torch),
            _options("python", "Python", [(p, p) for p in table.pythons], python),
            *sdk_select,
            '<label><input type="radio" name="how" value="plain"> your torch\'s index</label>',
            '<label><input type="radio" name="how" value="index" checked> pinned (index)</label>',
            '<label><input type="radio" name="how" value="find-links"> pinned (find-links)</label>',
            "</form>",
            f'<pre id="command">{_e(command)}</pre>',
            f'<p id="note" class="{"note" if chosen.exact else "note inexact"}">{_e(chosen.note)}</p>',
            static_commands(table),
        ]
    )


def static_commands(table: CompatTable) -> str:
    """Every tested choice's commands in the HTML itself, for a browser without JavaScript (which never sees the
    selector change): per release its index's command, then each tested Python (and SDK version) pinned."""
    site = table.site_url.rstrip("/") or SITE_PLACEHOLDER
    order = {r.key: i for i, r in enumerate(table.releases)}
    pythons = {p: i for i, p in enumerate(table.pythons)}
    sdks = {c.tag: i for i, c in enumerate(table.columns)}
    cells = sorted(
        (c for c in table.cells if c.installable), key=lambda c: (order[c.release], pythons[c.python], sdks[c.sdk])
    )
    if not cells:
        return ""
    items = []
    for release in table.releases:
        tested = [c for c in cells if c.release == release.key]
        if not tested:
            continue
        pinned = []
        for cell in tested:
            with_sdk = f", {table.sdk.name} {table.sdk_short(cell.sdk)}" if table.sdk is not None else ""
            command = install_commands(table, cell, site).pinned
            pinned.append(f"<li>Python {_e(cell.python)}{_e(with_sdk)}, pinned: <code>{_e(command)}</code></li>")
        plain = _e(install_commands(table, tested[0], site).release_index)
        items.append(
            f"<li>torch {_e(release.label)}, your torch's index: <code>{plain}</code><ul>{''.join(pinned)}</ul></li>"
        )
    return (
        '<noscript><div id="static-commands"><p>Every tested choice (the selector needs JavaScript):</p><ul>'
        + "".join(items)
        + "</ul></div></noscript>"
    )


def cell_mark(cell: CompatCell) -> str:
    """A built cell's mark in the table, a few characters whatever its record holds ("✓ 288", "✗ smoke", with "!"
    when a later attempt failed): the details open on demand beneath it."""
    if cell.status == Status.PASSED:
        mark = f"✓ {cell.smoke.passed}" if cell.smoke is not None else "✓"
    else:
        mark = f"✗ {cell.failed_step or cell.status}"
    return mark + (" !" if cell.latest is not None else "")


def cell_td(cell: CompatCell | None, logs: Collection[str], deep: str = "") -> str:
    """A cell of the table: its short mark, and (in a <details> that opens on demand) the counts, wheel, deep tier,
    log, where its wheels are and when it was recorded. deep: the cell's build's deep tier as words
    (table.deep_summary), when it has one."""
    if cell is None:
        return f'<td class="absent" title="not in the matrix">{NOT_IN_MATRIX}</td>'
    if cell.status == Status.NOT_BUILT:
        return f'<td class="not-built" id="{_e(cell.id)}">{Status.NOT_BUILT}</td>'
    parts = []
    if cell.status == Status.PASSED:
        parts.append(_e(smoke_summary(cell.smoke)))
        href = site_href(cell.wheel.path) if cell.wheel is not None else None
        if href is not None:
            parts.append(f'<a class="wheel" href="{href}">wheel</a>')
    else:
        parts.append(f"✗ {_e(cell.failed_step)}" + (f" ({_e(cell.failure)})" if cell.failure else ""))
        if cell.smoke is not None:
            parts.append(_e(smoke_summary(cell.smoke)))
    if deep and cell.deep is not None:
        parts.append(f'<span class="deep deep-{_e(cell.deep.status).replace(" ", "-")}">{_e(deep)}</span>')
    log_href = site_href(cell.log) if cell.log and cell.log in logs else None
    if log_href is not None:
        parts.append(f'<a class="log" href="{log_href}">log</a>')
    if cell.off_site:
        parts.append('<span class="off-site">its wheels are not on this site</span>')
    if cell.recorded:
        parts.append(f'<span class="recorded">recorded {_e(day(cell.recorded))}</span>')
    if cell.latest is not None:
        how = f" ({_e(cell.latest.failure)})" if cell.latest.failure else ""
        parts.append(
            f'<span class="latest-failed">latest attempt {_e(cell.latest.status)} {_e(day(cell.latest.recorded))} '
            f"in {_e(cell.latest.failed_step or 'an unknown step')}{how}; its last pass stays published</span>"
        )
    css = Status.PASSED if cell.status == Status.PASSED else Status.FAILED
    title = f' title="{_e(cell.error)}"' if cell.error else ""
    return (
        f'<td class="{css}" id="{_e(cell.id)}"{title}><details><summary class="mark">{_e(cell_mark(cell))}</summary>'
        + '<div class="cell-details">'
        + "<br>".join(parts)
        + "</div></details></td>"
    )


def cells_table(table: CompatTable, logs: Collection[str]) -> str:
    sdk_head = f'<th class="sdk">{_e(table.sdk.name)}</th>' if table.sdk else ""
    head = f"<tr><th>torch</th>{sdk_head}" + "".join(f"<th>Python {_e(p)}</th>" for p in table.pythons) + "</tr>"
    rows = [head]
    for release, column, cells in table.grid_rows():
        tds = "".join(cell_td(cell, logs, deep_summary(table, cell) if cell is not None else "") for cell in cells)
        sdk_td = f"<td>{_e(column.version)}</td>" if table.sdk else ""
        rows.append(f"<tr><th>{_e(release.label)}</th>{sdk_td}{tds}</tr>")
    return '<table id="cells">' + "\n".join(rows) + "</table>"


CELLS_LEGEND = (
    "✓ n: passed, n smoke tests passed; ✗ step: failed in that step; ! its latest attempt failed, its last pass stays "
    f"published; {NOT_IN_MATRIX} not in the matrix. Click a cell for its counts, wheel, log and date."
)


def features_html(table: CompatTable) -> str:
    measured = [r for r in table.releases if r.features]
    shown = table.features_shown()
    if not shown:
        return "<p>No cell has run the smoke suite yet.</p>"
    rows = ["<tr><th>feature</th>" + "".join(f"<th>{_e(r.label)}</th>" for r in measured) + "</tr>"]
    for name, title in shown:
        tds = []
        for release in measured:
            support = release.features.get(name)
            state = _e(support.state if support else "unknown")
            if support is None:
                tds.append(f'<td title="{state}">?</td>')
            elif support.note:  # the note opens on demand: the mark alone keeps the table a screen wide
                tds.append(
                    f'<td title="{state}"><details><summary class="mark">{_e(FEATURE_MARKS[support.state])}</summary>'
                    f'<div class="cell-details">{_e(support.note)}</div></details></td>'
                )
            else:
                tds.append(f'<td title="{state}">{_e(FEATURE_MARKS[support.state])}</td>')
        # The title for people, the key (what records and the suite call it) for tools and a hover.
        rows.append(f'<tr data-feature="{_e(name)}"><th title="{_e(name)}">{_e(title)}</th>{"".join(tds)}</tr>')
    return '<table id="features">' + "\n".join(rows) + "</table>"


def index_links(pages: Collection[str]) -> str:
    items = [
        f'<li><a href="{href}/">{_e(p.removesuffix("/index.html"))}/</a></li>'
        for p in sorted(pages)
        if (href := site_href(p.removesuffix("/index.html"))) is not None
    ]
    items.append('<li><a href="compatibility.json">compatibility.json</a></li>')
    return '<ul id="links">' + "".join(items) + "</ul>"


def choices_json(table: CompatTable) -> str:
    choices = {
        choice_key(c.release, c.python, c.sdk): {
            "cell": c.cell,
            "exact": c.exact,
            "note": c.note,
            "index_command": c.index_command,
            "release_index_command": c.release_index_command,
            "find_links_command": c.find_links_command,
        }
        for c in all_choices(table)
    }
    text = json.dumps({"site_url": table.site_url.rstrip("/"), "choices": choices}, sort_keys=True, ensure_ascii=False)
    return script_json(text)


def script_json(text: str) -> str:
    """JSON safe inside a <script> element: no '<' (so no </script> or <!-- that changes how HTML parses the
    element), no '>' or '&', no line separators; the JSON parser reads the escapes back as the same characters."""
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


def picks(table: CompatTable) -> str:
    return f", Python and {table.sdk.title}" if table.sdk else " and Python"


def site_page(table: CompatTable, logs: Collection[str] = (), index_pages: Collection[str] = ()) -> str:
    """index.html of the site; `logs` and `index_pages` are the site paths that exist, so every link resolves."""
    title = f"{table.plugin} {table.plugin_version}: install and compatibility"
    site = table.site_url.rstrip("/") or SITE_PLACEHOLDER
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f"<title>{_e(title)}</title>",
            f"<style>{STYLE}</style>",
            "</head>",
            "<body>",
            f"<h1>{_e(title)}</h1>",
            "<h2>Install</h2>",
            f"<p>Pick your torch release{picks(table)}. <em>Your torch's index</em> installs the wheel built "
            "for your torch release and Python from that release's own index; the pinned commands install exactly "
            "the tested wheels. None builds from source or changes the installed torch; <code>uv pip install</code> "
            "takes the same arguments.</p>",
            selector(table),
            (
                f'<p>For whatever torch is installed: <code id="any-torch">{_e(any_torch)}</code></p>'
                if (any_torch := any_torch_command(table, site)) is not None
                else f'<p class="note" id="no-any-torch">{_e(NO_ANY_TORCH)}</p>'
            ),
            *(
                [f'<p class="note" id="look-alike">{code_spans(note)}</p>']
                if (note := look_alike_note(table, "choose pinned above"))
                else []
            ),
            "<h2>Cells</h2>",
            cells_table(table, logs),
            f'<p class="note" id="cells-legend">{_e(CELLS_LEGEND)}</p>',
            *([f'<p class="note" id="free-threaded">{_e(note)}</p>'] if (note := free_threaded_note(table)) else []),
            *(
                [
                    "<h2>Features per torch release</h2>",
                    features_html(table),
                    f"<p>✓ available, ◐ {partial_words(table)}, {NOT_AVAILABLE_MARK} not available in this release, "
                    "✗ failed.</p>",
                ]
                if shows_features(table)
                else []
            ),
            "<h2>Index</h2>",
            index_links(index_pages),
            f'<script id="choices" type="application/json">{choices_json(table)}</script>',
            f"<script>{SCRIPT}</script>",
            "</body>",
            "</html>",
            "",
        ]
    )
