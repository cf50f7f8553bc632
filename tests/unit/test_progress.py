"""The build's progress display: states replace each other, notes (a step saying what it did) are printed lines."""

from __future__ import annotations

import io

from rich.console import Console

from torch_buildmatrix.builder.steps import is_note
from torch_buildmatrix.progress import ProgressDisplay

NOTE = "check: relabelled tiny_plugin-0.1.0 -> 0.1.0+torch.2.13 (build.relabel)"


def test_states_are_never_notes() -> None:
    states = ["queued", "up-to-date", "source", "smoke-env", "retry 2", "passed", "failed", "interrupted"]
    assert not any(is_note(state) for state in states)
    assert is_note(NOTE) and is_note("source: no patch applied: torch 2.13.0 lists no patch series")


def test_a_note_is_printed_and_leaves_the_state_alone() -> None:
    out = io.StringIO()
    display = ProgressDisplay(Console(file=out, width=200), [], [])
    with display:
        display.update("build torch2.13-cpu-cp311", "check")
        display.update("build torch2.13-cpu-cp311", NOTE)
    assert out.getvalue().splitlines() == ["build torch2.13-cpu-cp311: check", f"build torch2.13-cpu-cp311: {NOTE}"]
    assert display.state["build torch2.13-cpu-cp311"][0] == "check"


def test_on_a_terminal_the_note_is_printed_above_the_live_table() -> None:
    out = io.StringIO()
    display = ProgressDisplay(Console(file=out, width=200, force_terminal=True), [], [])
    with display:
        display.update("build torch2.13-cpu-cp311", "check")
        display.update("build torch2.13-cpu-cp311", f"{NOTE} [bold]")  # printed as it is, never read as markup
    assert f"build torch2.13-cpu-cp311: {NOTE} [bold]" in out.getvalue()
    assert display.state["build torch2.13-cpu-cp311"][0] == "check"
