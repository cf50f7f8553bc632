"""torch.emu.memory: the caching allocator's statistics as a table (memory_summary) and its memory history
(_record_memory_history, _snapshot, _dump_snapshot), as torch.cuda.memory has them.

The history is kept by the allocator in C++ (csrc/runtime/EmuMemoryHistory.cpp): it takes each event's stack with
torch's own CapturedTraceback, whose Python unwinder torch_python registers, so the compiled library needs no
CPython API, and it writes snapshots itself, which is what lets an out-of-memory error write one where no Python
code can run. Snapshots are the pickle torch.cuda._memory_viz reads (`segments` with their `blocks`,
`device_traces` per device): `python -m torch.cuda._memory_viz trace_plot snapshot.pickle -o out.html` renders one.
"""

from __future__ import annotations

import os
import pickle
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Literal

from torch_emu._library import ops as _ops

# (statistics key, row name, formatter): the caching allocator's counters under torch.cuda.memory_stats's names.
_BYTES_ROWS = (
    ("allocated_bytes", "Allocated memory"),
    ("active_bytes", "Active memory"),
    ("requested_bytes", "Requested memory"),
    ("reserved_bytes", "Reserved memory"),
    ("inactive_split_bytes", "Non-releasable memory"),
)
_COUNT_ROWS = (
    ("allocation", "Allocations"),
    ("active", "Active allocs"),
    ("segment", "Device reserved segments"),
    ("inactive_split", "Non-releasable allocs"),
)
_POOLS = (("all", ""), ("large_pool", "  from large pool"), ("small_pool", "  from small pool"))
_COLUMNS = ("current", "peak", "allocated", "freed")
_WIDTH = 83


def _bytes(value: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value = value / 1024
    raise AssertionError("unreachable")


def _count(value: int) -> str:
    return str(value)


def summary(stats: dict[str, Any], device: int, abbreviated: bool = False) -> str:
    """The table memory_summary prints, from a memory_stats() dict of emu's caching allocator."""
    rule, thin = "=" * _WIDTH, "-" * _WIDTH
    lines = [
        rule,
        f" PyTorch emu memory summary, device ID {device}".ljust(_WIDTH),
        thin,
        f" device allocs: {stats.get('num_device_alloc', 0):<10} device frees: {stats.get('num_device_free', 0):<10}"
        f" OOMs: {stats.get('num_ooms', 0):<8} alloc retries: {stats.get('num_alloc_retries', 0)}",
        rule,
        f" {'Metric':<26}|{'Cur Usage':>13} |{'Peak Usage':>13} |{'Tot Alloc':>13} |{'Tot Freed':>12}",
    ]
    pools = _POOLS[:1] if abbreviated else _POOLS
    rows: list[tuple[str, str, Callable[[int], str]]] = [(key, name, _bytes) for key, name in _BYTES_ROWS]
    rows += [(key, name, _count) for key, name in _COUNT_ROWS]
    for key, name, render in rows:
        if f"{key}.all.current" not in stats:
            continue
        lines.append(thin)
        for pool, label in pools:
            cells = [render(int(stats.get(f"{key}.{pool}.{column}", 0))) for column in _COLUMNS]
            lines.append(f" {label or name:<26}|{cells[0]:>13} |{cells[1]:>13} |{cells[2]:>13} |{cells[3]:>12}")
    lines.append(rule)
    return "\n".join(lines) + "\n"


def _record_memory_history(
    enabled: Literal[None, "state", "all"] = "all",
    context: Literal[None, "state", "alloc", "all"] = "all",
    stacks: Literal["python", "all"] = "all",
    max_entries: int = sys.maxsize,
    *,
    clear_history: bool = False,
    oom_snapshot: str | os.PathLike[str] | None = None,
    device: Any = None,
) -> None:
    """Starts (or, with enabled=None, stops) recording the emu caching allocator's history, as
    torch.cuda.memory._record_memory_history does for CUDA.

    enabled: None records nothing; "state" keeps the stacks of live allocations (for _snapshot's segments);
    "all" also records every event (alloc, free_requested, free_completed, segment_alloc, segment_free, oom) in
    each device's trace, at most max_entries per device, the oldest dropped first.
    context: which of them carry a stack: None, "state" (live allocations), "alloc" (also allocation events),
    "all" (also frees). stacks: "python" frames, or "all" to add C++ frames (slower to symbolize).
    clear_history (keyword-only here, as the options after it): forget the events recorded so far (otherwise they
    stay, also after enabled=None).
    oom_snapshot: a path the allocator writes a snapshot to at every emu out-of-memory error while the history
    records (the last one wins), before the error reaches Python; emu's own option, since CUDA's equivalent is an
    observer callback that emu's compiled library, having no CPython API, cannot call.
    device: accepted for torch.cuda's signature; the history covers every emu device.
    Stacks need torch 2.13 or later (EmuMemoryHistory.cpp says why): on older releases a context other than None
    warns and the history is recorded without stacks, so a CUDA script's default call still records.
    """
    del device
    if enabled is not None and context in ("state", "alloc", "all") and not _ops.memory_history_stacks():
        warnings.warn(
            f"torch_emu cannot give the memory history stacks ({_ops.memory_history_stacks_unavailable()}): "
            f"recording it without stacks (context={context!r} taken as None)",
            stacklevel=2,
        )
        context = None
    path = None if oom_snapshot is None else str(Path(oom_snapshot).resolve())
    _ops.memory_record_history(enabled, context, stacks, max_entries, clear_history, path)


def _dump_snapshot(filename: str | os.PathLike[str] = "dump_snapshot.pickle") -> None:
    """Writes _snapshot() as a pickle, the file torch.cuda._memory_viz and https://pytorch.org/memory_viz read."""
    _ops.memory_snapshot_dump(str(Path(filename).resolve()))


def _snapshot(device: Any = None) -> dict[str, Any]:
    """The allocator's state and recorded history: `segments` (one per driver allocation, each with its one
    block: this allocator never splits) and `device_traces` (a list of events per emu device)."""
    del device
    with tempfile.TemporaryDirectory(prefix="torch_emu_snapshot_") as directory:
        path = Path(directory) / "snapshot.pickle"
        _dump_snapshot(path)
        with path.open("rb") as f:
            snapshot: dict[str, Any] = pickle.load(f)
    return snapshot
