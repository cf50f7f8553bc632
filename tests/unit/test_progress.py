"""The build's progress display: states replace each other, notes (a step saying what it did) are printed lines."""

from __future__ import annotations

import io

from rich.console import Console

from torch_buildmatrix.builder.steps import Note
from torch_buildmatrix.progress import ProgressDisplay

NOTE = "check: relabelled tiny_plugin-0.1.0 -> 0.1.0+torch.2.13 (build.relabel)"


def test_a_state_holding_a_colon_is_a_state_not_a_note() -> None:
    """A note is one by its type: a state whose text holds ": " (as every note's does) changes the state."""
    out = io.StringIO()
    display = ProgressDisplay(Console(file=out, width=200), [], [])
    with display:
        display.update("build torch2.13-cpu-cp311", "check")
        display.update("build torch2.13-cpu-cp311", "smoke: deep")
    assert display.state["build torch2.13-cpu-cp311"][0] == "smoke: deep"
    assert out.getvalue().splitlines() == ["build torch2.13-cpu-cp311: check", "build torch2.13-cpu-cp311: smoke: deep"]


def test_a_note_reads_as_its_line() -> None:
    """Where events are shown as text (the outdated report's probe says `{cell}: {event}`), a note is its line."""
    assert f"{Note(NOTE)}" == str(Note(NOTE)) == NOTE


def test_a_note_is_printed_and_leaves_the_state_alone() -> None:
    out = io.StringIO()
    display = ProgressDisplay(Console(file=out, width=200), [], [])
    with display:
        display.update("build torch2.13-cpu-cp311", "check")
        display.update("build torch2.13-cpu-cp311", Note(NOTE))
    assert out.getvalue().splitlines() == ["build torch2.13-cpu-cp311: check", f"build torch2.13-cpu-cp311: {NOTE}"]
    assert display.state["build torch2.13-cpu-cp311"][0] == "check"


def test_on_a_terminal_the_note_is_printed_above_the_live_table() -> None:
    out = io.StringIO()
    display = ProgressDisplay(Console(file=out, width=200, force_terminal=True), [], [])
    with display:
        display.update("build torch2.13-cpu-cp311", "check")
        display.update("build torch2.13-cpu-cp311", Note(f"{NOTE} [bold]"))  # printed as it is, never read as markup
    assert f"build torch2.13-cpu-cp311: {NOTE} [bold]" in out.getvalue()
    assert display.state["build torch2.13-cpu-cp311"][0] == "check"
