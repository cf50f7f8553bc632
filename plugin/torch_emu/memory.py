"""torch.emu's memory report: memory_summary, the caching allocator's statistics as a table (like CUDA's)."""

from __future__ import annotations

from typing import Any, Callable

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
