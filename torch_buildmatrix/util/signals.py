"""Ctrl-C and SIGTERM while a run goes on: they stop it (its children die at once, no new cell starts) instead of
raising KeyboardInterrupt wherever the main thread happens to be."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def stop_on_signals(stop: Callable[[str], object]) -> Iterator[list[str]]:
    """While the block runs, Ctrl-C and SIGTERM call stop (an engine's interrupt: its children die at once, no new
    cell starts); yields the signals seen."""
    seen: list[str] = []

    def handler(number: int, _frame: object) -> None:
        seen.append(signal.Signals(number).name)
        stop(seen[0])

    previous = {number: signal.signal(number, handler) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield seen
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def exit_code_of(signal_name: str) -> int:
    """The shell's exit code of a run stopped by this signal (128 + its number)."""
    return 128 + int(signal.Signals[signal_name])
