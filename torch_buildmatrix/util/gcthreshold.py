"""The cyclic garbage collector's threshold while a command runs: a command builds many long-lived objects and almost
no cycles, so collections that find nothing cost more than they free."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

# The cyclic garbage collector's first threshold while a command runs (CPython's default is 700 allocations). A command
# builds tens of thousands of long-lived objects (records, tables, ledger entries: 10 000 cells make ~1 million) and
# almost no cycles; at the default, collections that find nothing took 15 % of compat-table's CPU at 10 000 cells.
GC_THRESHOLD = 100_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    """GC_THRESHOLD while the command runs, the caller's thresholds again after (main may run inside a test)."""
    before = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
