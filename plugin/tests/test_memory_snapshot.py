"""Memory history and snapshots: torch.emu.memory records the caching allocator's events and stacks, writes
snapshots on demand and at an out-of-memory error, and PyTorch's visualiser (torch.cuda._memory_viz) renders them."""

import base64
import json
import pickle
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from packaging.version import Version
from smoke_gates import (  # imports torch_emu, which torch < 2.5 does not autoload
    TORCH,
    requires_driver,
    requires_graphs,
    requires_torch,
)

pytestmark = [pytest.mark.feature("memory_snapshots"), pytest.mark.deep]

# Python stacks need torch's unwinder to take the GIL itself (checked in the 2.13 wheel; EmuMemoryHistory.cpp).
python_stacks = requires_torch(">=2.13", "Python stacks in the memory history")
# torch.OutOfMemoryError arrives in 2.4; before, c10::OutOfMemoryError surfaces as torch.cuda.OutOfMemoryError.
OUT_OF_MEMORY = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
HUGE = 6 << 30  # more than the emulated device's memory


@pytest.fixture(autouse=True)
def _history_off_and_cleared():
    """Each test starts with no history recorded and an empty cache, and leaves the history off."""
    torch.emu.memory._record_memory_history(None, clear_history=True)
    torch.emu.empty_cache()
    yield
    torch.emu.memory._record_memory_history(None, clear_history=True)


def _record(context="all"):
    """History on, Python stacks only where this torch has them."""
    stacks_here = torch.ops.torch_emu.memory_history_stacks()
    torch.emu.memory._record_memory_history("all", context if stacks_here else None, stacks="python")


def _allocate_in_helper(n):
    return torch.empty(n, dtype=torch.uint8, device="emu")


def _events(snapshot, device=0, addrs=None):
    trace = snapshot["device_traces"][device]
    return [e for e in trace if addrs is None or e["addr"] in addrs]


def test_history_records_allocations_and_frees_in_order_with_sizes():
    _record()
    x = _allocate_in_helper(1000)  # a small block: 1024 bytes rounded to 512s
    y = torch.empty(3 << 20, dtype=torch.uint8, device="emu")  # a large block: 4 MiB rounded to 2 MiB
    px, py = x.data_ptr(), y.data_ptr()
    del x
    del y
    snapshot = torch.emu.memory._snapshot()
    seen = [(e["action"], e["addr"], e["size"], e["stream"]) for e in _events(snapshot, addrs={px, py})]
    assert seen == [
        ("segment_alloc", px, 1024, 0),
        ("alloc", px, 1024, 0),
        ("segment_alloc", py, 4 << 20, 0),
        ("alloc", py, 4 << 20, 0),
        ("free_requested", px, 1024, 0),
        ("free_completed", px, 1024, 0),
        ("free_requested", py, 4 << 20, 0),
        ("free_completed", py, 4 << 20, 0),
    ]
    times = [e["time_us"] for e in _events(snapshot)]
    assert times == sorted(times) and times[0] > 0
    assert snapshot["device_traces"][1] == []  # nothing happened on emu:1


@python_stacks
def test_history_events_carry_the_python_stack():
    _record()
    x = _allocate_in_helper(1000)
    px = x.data_ptr()
    del x
    events = _events(torch.emu.memory._snapshot(), addrs={px})
    alloc, free = (e for e in events if e["action"] in {"alloc", "free_requested"})
    here = "test_history_events_carry_the_python_stack"
    assert [f["name"] for f in alloc["frames"][:2]] == ["_allocate_in_helper", here]
    assert alloc["frames"][0]["filename"] == __file__
    assert alloc["frames"][0]["line"] > 0
    assert free["frames"][0]["name"] == here  # context="all": frees too


def test_snapshot_segments_match_memory_allocated_and_reserved():
    _record()
    kept = [_allocate_in_helper(n) for n in (100, 5000, 2 << 20)]
    cached = torch.empty(1 << 20, dtype=torch.uint8, device="emu")
    del cached  # stays reserved: an inactive segment
    on_1 = torch.empty(700, dtype=torch.uint8, device="emu:1")
    snapshot = torch.emu.memory._snapshot()
    for device in (0, 1):
        segments = [s for s in snapshot["segments"] if s["device"] == device]
        assert sum(s["total_size"] for s in segments) == torch.emu.memory_reserved(device)
        assert sum(s["allocated_size"] for s in segments) == torch.emu.memory_allocated(device)
        for s in segments:  # one block per segment: this allocator never splits
            assert [b["address"] for b in s["blocks"]] == [s["address"]]
            assert s["blocks"][0]["size"] == s["total_size"]
    by_address = {s["address"]: s for s in snapshot["segments"]}
    for t in [*kept, on_1]:
        segment = by_address[t.data_ptr()]
        assert segment["blocks"][0]["state"] == "active_allocated"
        assert segment["requested_size"] == segment["blocks"][0]["requested_size"] == t.numel()
        assert segment["device"] == t.device.index
    assert snapshot["segments"] == sorted(snapshot["segments"], key=lambda s: (s["device"], s["address"]))
    states = {s["blocks"][0]["state"] for s in snapshot["segments"]}
    assert "inactive" in states
    if torch.ops.torch_emu.memory_history_stacks():
        frames = by_address[kept[0].data_ptr()]["blocks"][0]["frames"]
        assert frames[0]["name"] == "_allocate_in_helper"


def _embedded_snapshot(html: str) -> dict:
    """The snapshot _memory_viz embeds in its page (base64 of the pickle, in a JSON list)."""
    match = re.search(r"(\[\{\"name\": \"snapshot\.pickle\", \"base64\": \"[A-Za-z0-9+/=]+\"\}\])", html)
    assert match, "no embedded snapshot in the page"
    [entry] = json.loads(match.group(1))
    return pickle.loads(base64.b64decode(entry["base64"]))


@pytest.mark.parametrize("plot", ["trace_plot", "segment_plot"])
def test_memory_viz_renders_the_snapshot(tmp_path, plot):
    _record()
    x = _allocate_in_helper(3 << 20)
    freed = _allocate_in_helper(1000)
    freed_ptr = freed.data_ptr()
    del freed
    path = tmp_path / "snapshot.pickle"
    torch.emu.memory._dump_snapshot(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snapshot.pickle"]  # no temporary file left
    out = tmp_path / "out.html"
    child = subprocess.run(
        [sys.executable, "-m", "torch.cuda._memory_viz", plot, str(path), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    html = out.read_text()
    assert ("Active Memory Timeline" if plot == "trace_plot" else "Allocator State History") in html
    shown = _embedded_snapshot(html)
    assert x.data_ptr() in {s["address"] for s in shown["segments"]}
    actions = {(e["action"], e["addr"]) for e in shown["device_traces"][0]}
    assert {("alloc", x.data_ptr()), ("alloc", freed_ptr), ("free_completed", freed_ptr)} <= actions
    if torch.ops.torch_emu.memory_history_stacks():
        names = {f["name"] for e in shown["device_traces"][0] for f in e["frames"]}
        assert "_allocate_in_helper" in names


def test_out_of_memory_writes_the_snapshot(tmp_path):
    path = tmp_path / "oom.pickle"
    stacks_here = torch.ops.torch_emu.memory_history_stacks()
    torch.emu.memory._record_memory_history("all", "all" if stacks_here else None, "python", oom_snapshot=path)
    held = _allocate_in_helper(3 << 20)
    with pytest.raises(OUT_OF_MEMORY, match="emu out of memory"):
        _allocate_in_helper(HUGE)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["oom.pickle"]
    snapshot = pickle.loads(path.read_bytes())
    [oom] = [e for e in snapshot["device_traces"][0] if e["action"] == "oom"]
    assert oom["size"] == HUGE  # already a multiple of 2 MiB
    assert 0 <= oom["device_free"] < HUGE
    live = [s for s in snapshot["segments"] if s["blocks"][0]["state"] == "active_allocated"]
    assert held.data_ptr() in {s["address"] for s in live}
    if stacks_here:
        assert oom["frames"][0]["name"] == "_allocate_in_helper"
    assert torch.ones(2, device="emu").sum().item() == 2  # the device still works


def test_out_of_memory_without_history_writes_nothing(tmp_path):
    path = tmp_path / "oom.pickle"
    torch.emu.memory._record_memory_history("all", None, oom_snapshot=path)
    torch.emu.memory._record_memory_history(None)  # stopped: the path no longer applies
    with pytest.raises(OUT_OF_MEMORY):
        _allocate_in_helper(HUGE)
    assert list(tmp_path.iterdir()) == []


def test_out_of_memory_snapshot_that_cannot_be_written_warns_and_still_raises(tmp_path):
    path = tmp_path / "missing-directory" / "oom.pickle"
    torch.emu.memory._record_memory_history("all", None, oom_snapshot=path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(OUT_OF_MEMORY, match="emu out of memory"):
            _allocate_in_helper(HUGE)
    assert any("could not write the out-of-memory memory snapshot" in str(w.message) for w in caught)
    assert list(tmp_path.iterdir()) == []


def test_history_off_records_nothing():
    x = _allocate_in_helper(1000)
    del x
    snapshot = torch.emu.memory._snapshot()
    assert snapshot["device_traces"] == [[] for _ in range(torch.emu.device_count())]
    _record()
    torch.emu.memory._record_memory_history(None)  # stopping keeps what was recorded, records nothing more
    y = _allocate_in_helper(1000)
    snapshot = torch.emu.memory._snapshot()
    assert all(e["addr"] != y.data_ptr() for e in snapshot["device_traces"][0])
    [segment] = [s for s in snapshot["segments"] if s["address"] == y.data_ptr()]
    assert segment["blocks"][0]["frames"] == [] and segment["frames"] == []


@python_stacks
def test_enabled_state_keeps_stacks_of_live_blocks_without_a_trace():
    torch.emu.memory._record_memory_history("state", "state", "python")
    x = _allocate_in_helper(1000)
    snapshot = torch.emu.memory._snapshot()
    assert snapshot["device_traces"][0] == []
    [segment] = [s for s in snapshot["segments"] if s["address"] == x.data_ptr()]
    assert segment["blocks"][0]["frames"][0]["name"] == "_allocate_in_helper"


def test_max_entries_keeps_the_newest_events():
    torch.emu.memory._record_memory_history("all", None, "python", max_entries=3)
    kept = [_allocate_in_helper(1000 * (i + 1)) for i in range(3)]  # segment_alloc + alloc each: six events
    trace = torch.emu.memory._snapshot()["device_traces"][0]
    assert [(e["action"], e["addr"]) for e in trace] == [
        ("alloc", kept[1].data_ptr()),
        ("segment_alloc", kept[2].data_ptr()),
        ("alloc", kept[2].data_ptr()),
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"enabled": "everything"}, r"enabled must be None, 'state' or 'all', got 'everything'"),
        ({"context": "stack"}, r"context must be None, 'state', 'alloc' or 'all', got 'stack'"),
        ({"stacks": "cpp"}, r"stacks must be 'python' or 'all', got 'cpp'"),
        ({"max_entries": 0}, r"max_entries must be positive, got 0"),
    ],
)
def test_bad_options_are_refused_naming_what_is_allowed(kwargs, message):
    options = {"enabled": "all", "context": None, "stacks": "python", **kwargs}
    with pytest.raises(RuntimeError, match=message):
        torch.emu.memory._record_memory_history(**options)
    x = _allocate_in_helper(1000)  # a refused call changed nothing: still off
    assert all(e["addr"] != x.data_ptr() for e in torch.emu.memory._snapshot()["device_traces"][0])


def test_stacks_are_taken_where_this_torch_can_and_refused_elsewhere():
    if Version("2.13") <= TORCH:
        assert torch.ops.torch_emu.memory_history_stacks()
        return
    assert not torch.ops.torch_emu.memory_history_stacks()
    with pytest.raises(RuntimeError, match=r"stacks \(context='all'\) are not available on torch"):
        torch.ops.torch_emu.memory_record_history("all", "all", "python", 100, False, None)
    # Through torch.emu.memory (and a CUDA script's default call): a warning, and the history without stacks.
    with pytest.warns(UserWarning, match=r"cannot give the memory history stacks .* without stacks"):
        torch.emu.memory._record_memory_history("all", "all", "python", clear_history=True)
    x = _allocate_in_helper(1000)
    trace = torch.emu.memory._snapshot()["device_traces"][0]
    assert [e["frames"] for e in trace if e["addr"] == x.data_ptr() and e["action"] == "alloc"] == [[]]


def test_snapshot_file_is_what_dump_snapshot_writes(tmp_path):
    _record()
    x = _allocate_in_helper(1000)
    path = Path(tmp_path) / "dump.pickle"
    torch.emu.memory._dump_snapshot(path)
    dumped = pickle.loads(path.read_bytes())
    assert dumped == torch.emu.memory._snapshot()
    assert x.data_ptr() in {s["address"] for s in dumped["segments"]}


@python_stacks
def test_stacks_all_adds_cpp_frames():
    torch.emu.memory._record_memory_history("all", "alloc", "all")  # torch.cuda's default stacks
    x = _allocate_in_helper(1000)
    [alloc] = [e for e in _events(torch.emu.memory._snapshot(), addrs={x.data_ptr()}) if e["action"] == "alloc"]
    names = [f["name"] for f in alloc["frames"]]
    # The C++ side of the allocation: frames in torch_emu's library. Their names depend on torch's symbolizer
    # (2.13's resolves the library's hidden symbols, CachingAllocator::allocate; 2.15's gives "??"), the file not.
    frames = alloc["frames"]
    assert any(f["filename"].endswith("libtorch_emu.so") or "CachingAllocator::" in f["name"] for f in frames), names
    assert any("empty" in name for name in names)  # torch's own C++ frames around it
    assert "_allocate_in_helper" in names  # and the Python side, in the same stack


@requires_driver(2, "a free deferred to another stream's event (driver events)")
def test_a_block_used_on_another_stream_completes_its_free_after_that_stream():
    _record(context=None)
    x = _allocate_in_helper(1000)  # no kernel holds it: del frees it here, on this thread
    px = x.data_ptr()
    x.record_stream(torch.emu.Stream())
    del x
    states = {s["address"]: s["blocks"][0]["state"] for s in torch.emu.memory._snapshot()["segments"]}
    assert states[px] == "active_pending_free"  # until an allocation sees the side stream's event passed
    actions = [e["action"] for e in _events(torch.emu.memory._snapshot(), addrs={px})]
    assert actions == ["segment_alloc", "alloc", "free_requested"]
    torch.emu.synchronize()
    torch.empty(4096, dtype=torch.uint8, device="emu")  # too big to reuse the pending block
    actions = [e["action"] for e in _events(torch.emu.memory._snapshot(), addrs={px})]
    assert actions == ["segment_alloc", "alloc", "free_requested", "free_completed"]
    states = {s["address"]: s["blocks"][0]["state"] for s in torch.emu.memory._snapshot()["segments"]}
    assert states[px] == "inactive"


@requires_graphs()
def test_a_graph_pools_segments_carry_its_pool_id():
    _record(context=None)
    x = torch.ones(1024, device="emu")
    graph = torch.emu.EmuGraph()
    with torch.emu.graph(graph):
        out = x + 1
    segments = {s["address"]: s for s in torch.emu.memory._snapshot()["segments"]}
    assert segments[out.data_ptr()]["segment_pool_id"] == tuple(graph.pool()) != (0, 0)
    assert segments[x.data_ptr()]["segment_pool_id"] == (0, 0)
    graph.reset()


CUDA_HISTORY_SCRIPT = """
import pickle
import sys

import torch
import torch_emu.contrib.transfer_to_emu

torch.cuda.memory._record_memory_history(max_entries=100000)  # a CUDA script's own lines, unchanged
x = torch.empty(1000, device="cuda")
torch.cuda.memory._dump_snapshot(sys.argv[1])
with open(sys.argv[1], "rb") as f:
    dumped = pickle.load(f)
assert x.device.type == "emu" and x.data_ptr() in {s["address"] for s in dumped["segments"]}
assert torch.cuda.memory._snapshot()["device_traces"][0][-1]["action"] == "alloc"
assert torch.cuda.memory.__name__ == "torch.cuda.memory"  # torch.cuda keeps its own module
print("recorded")
"""


def test_a_cuda_script_records_emu_history_after_transfer_to_emu(tmp_path):
    done = subprocess.run(
        [sys.executable, "-W", "ignore:torch_emu.contrib.transfer_to_emu", "-c", CUDA_HISTORY_SCRIPT, tmp_path / "s"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["recorded"]
