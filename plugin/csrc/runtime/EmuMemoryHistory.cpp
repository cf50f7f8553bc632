// Stacks and snapshots of the memory history. Stacks are torch's own CapturedTraceback (libtorch_cpu), so
// Python frames come without any CPython API here: torch_python registers the unwinder that reads them
// and takes the GIL itself. The snapshot is a pickle of plain dicts and lists written with torch's
// Pickler, the way CUDA's memory_snapshot.cpp writes it, so the same C++ serves _dump_snapshot and the
// dump at an out-of-memory (where no Python code can run).
#include "runtime/EmuMemoryHistory.h"

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/library.h>
#include <torch/version.h>

#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <unordered_map>

#include "TorchCompat.h"
#include "runtime/EmuAllocator.h"
#include "runtime/EmuStream.h"

// Symbolizing a Python frame needs the GIL, and the dispatcher has released it around our operators. From
// torch 2.13 torch_python's unwinder takes it itself in gather() and appendSymbolized() (read in the 2.13
// wheel's libtorch_python.so); older releases are not checked, so they record history without stacks.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 13)
#define EMU_HAS_PYTHON_STACKS 1
#else
#define EMU_HAS_PYTHON_STACKS 0
#endif

// torch's stacks (CapturedTraceback) only where they are used: torch 2.1's wheel ships combined_traceback.h without
// the unwind.h it includes.
#if EMU_HAS_PYTHON_STACKS
#include <torch/csrc/profiler/combined_traceback.h>
#endif

namespace torch_emu {

namespace {

using GenericDict = c10::Dict<c10::IValue, c10::IValue>;
using GenericList = c10::List<c10::IValue>;

GenericDict new_dict() {
  return GenericDict(c10::StringType::get(), c10::AnyType::get());
}
GenericList new_list() {
  return GenericList(c10::AnyType::get());
}

const char* action_name(TraceAction action) {
  switch (action) {
    case TraceAction::Alloc:
      return "alloc";
    case TraceAction::FreeRequested:
      return "free_requested";
    case TraceAction::FreeCompleted:
      return "free_completed";
    case TraceAction::SegmentAlloc:
      return "segment_alloc";
    case TraceAction::SegmentFree:
      return "segment_free";
    case TraceAction::Oom:
      return "oom";
  }
  return "unknown";
}

const char* state_name(BlockState state) {
  switch (state) {
    case BlockState::ActiveAllocated:
      return "active_allocated";
    case BlockState::ActivePendingFree:
      return "active_pending_free";
    case BlockState::Inactive:
      return "inactive";
  }
  return "unknown";
}

int64_t as_int(uint64_t v) {
  return static_cast<int64_t>(v);
}

// Frames of every stack in the snapshot, symbolized in one call (torch dedupes the frames).
class FrameTable {
 public:
  void add(const StackContext& stack) {
#if EMU_HAS_PYTHON_STACKS
    if (stack == nullptr || index_.count(stack.get()) != 0)
      return;
    auto* traceback = dynamic_cast<torch::CapturedTraceback*>(stack.get());
    if (traceback == nullptr)
      return;
    index_[stack.get()] = tracebacks_.size();
    tracebacks_.push_back(traceback);
#else
    (void)stack; // no release without stacks records one
#endif
  }

  void symbolize() {
#if EMU_HAS_PYTHON_STACKS
    if (tracebacks_.empty())
      return;
    const torch::SymbolizedTracebacks s = torch::symbolize(tracebacks_);
    std::vector<GenericDict> frames;
    frames.reserve(s.all_frames.size());
    for (const auto& f : s.all_frames) {
      GenericDict d = new_dict();
      d.insert("filename", f.filename);
      d.insert("name", f.funcname);
      d.insert("line", as_int(f.lineno));
      frames.push_back(std::move(d));
    }
    for (const auto& indices : s.tracebacks) {
      GenericList list = new_list();
      for (uint64_t i : indices)
        list.push_back(frames.at(i));
      lists_.push_back(std::move(list));
    }
#endif
  }

  // The frames of a stack, innermost first; an empty list without one.
  GenericList frames(const StackContext& stack) const {
    auto it = stack == nullptr ? index_.end() : index_.find(stack.get());
    return it == index_.end() ? new_list() : lists_.at(it->second);
  }

 private:
  std::unordered_map<c10::GatheredContext*, size_t> index_;
#if EMU_HAS_PYTHON_STACKS
  std::vector<torch::CapturedTraceback*> tracebacks_;
#endif
  std::vector<GenericList> lists_;
};

c10::IValue snapshot_ivalue(const MemorySnapshot& snapshot) {
  FrameTable table;
  for (const auto& seg : snapshot.segments) {
    table.add(seg.block_stack);
    table.add(seg.segment_stack);
  }
  for (const auto& trace : snapshot.device_traces)
    for (const auto& e : trace)
      table.add(e.stack);
  table.symbolize();

  GenericList segments = new_list();
  for (const auto& seg : snapshot.segments) {
    const bool active = seg.state != BlockState::Inactive;
    const bool allocated = seg.state == BlockState::ActiveAllocated;
    GenericDict block = new_dict();
    block.insert("address", as_int(seg.address));
    block.insert("size", as_int(seg.size));
    block.insert("requested_size", as_int(active ? seg.requested : 0));
    block.insert("state", state_name(seg.state));
    block.insert("frames", table.frames(active ? seg.block_stack : nullptr));
    GenericList blocks = new_list();
    blocks.push_back(block);

    GenericDict d = new_dict();
    d.insert("device", static_cast<int64_t>(seg.device));
    d.insert("address", as_int(seg.address));
    d.insert("total_size", as_int(seg.size));
    d.insert("allocated_size", as_int(allocated ? seg.size : 0));
    d.insert("active_size", as_int(active ? seg.size : 0));
    d.insert("requested_size", as_int(active ? seg.requested : 0));
    d.insert("stream", static_cast<int64_t>(seg.stream));
    d.insert("segment_type", round_size(seg.size) < (size_t(1) << 20) ? "small" : "large");
    d.insert("segment_pool_id", c10::ivalue::Tuple::create(as_int(seg.pool.first), as_int(seg.pool.second)));
    d.insert("is_expandable", false);
    d.insert("frames", table.frames(seg.segment_stack));
    d.insert("blocks", blocks);
    segments.push_back(d);
  }

  GenericList traces = new_list();
  for (const auto& trace : snapshot.device_traces) {
    GenericList entries = new_list();
    for (const auto& e : trace) {
      GenericDict d = new_dict();
      d.insert("action", action_name(e.action));
      d.insert("addr", as_int(e.addr));
      d.insert("size", as_int(e.size));
      d.insert("stream", static_cast<int64_t>(e.stream));
      d.insert("time_us", e.time_us);
      d.insert("frames", table.frames(e.stack));
      if (e.action == TraceAction::Oom)
        d.insert("device_free", as_int(e.device_free));
      entries.push_back(d);
    }
    traces.push_back(entries);
  }

  GenericDict out = new_dict();
  out.insert("segments", segments);
  out.insert("device_traces", traces);
  return out;
}

void write_file_atomically(const std::string& path, const std::vector<char>& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    TORCH_CHECK(f.good(), "emu memory snapshot: cannot write ", tmp);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.close();
    TORCH_CHECK(f.good(), "emu memory snapshot: writing ", tmp, " failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    TORCH_CHECK(false, "emu memory snapshot: cannot rename ", tmp, " to ", path);
  }
}

// ---- operators (torch.ops.torch_emu.*) ----

void memory_record_history(
    compat::optional<std::string> enabled,
    compat::optional<std::string> context,
    std::string stacks,
    int64_t max_entries,
    bool clear_history,
    compat::optional<std::string> oom_snapshot) {
  set_memory_history(parse_history_options(
      enabled.value_or(""), context.value_or(""), stacks, max_entries, clear_history, oom_snapshot.value_or("")));
}

void memory_snapshot_dump(std::string path) {
  write_snapshot(memory_snapshot(), path);
}

bool memory_history_stacks() {
  return python_stacks_available();
}

// Why this build records the history without stacks ("" when it has them): the reason is the build's, not Python's.
std::string memory_history_stacks_unavailable() {
  if (python_stacks_available())
    return "";
  return std::string("torch_emu was built against torch ") + TORCH_VERSION +
      ", whose unwinder does not take the GIL itself (torch 2.13 and later do)";
}

} // namespace

HistoryOptions parse_history_options(
    const std::string& enabled,
    const std::string& context,
    const std::string& stacks,
    int64_t max_entries,
    bool clear,
    const std::string& oom_snapshot_path) {
  HistoryOptions o;
  if (enabled.empty())
    o.record = HistoryRecord::Off;
  else if (enabled == "state")
    o.record = HistoryRecord::State;
  else if (enabled == "all")
    o.record = HistoryRecord::All;
  else
    TORCH_CHECK(false, "_record_memory_history: enabled must be None, 'state' or 'all', got '", enabled, "'");
  if (context.empty())
    o.context = HistoryContext::None;
  else if (context == "state")
    o.context = HistoryContext::State;
  else if (context == "alloc")
    o.context = HistoryContext::Alloc;
  else if (context == "all")
    o.context = HistoryContext::All;
  else
    TORCH_CHECK(false, "_record_memory_history: context must be None, 'state', 'alloc' or 'all', got '", context, "'");
  TORCH_CHECK(
      stacks == "python" || stacks == "all",
      "_record_memory_history: stacks must be 'python' or 'all', got '",
      stacks,
      "'");
  TORCH_CHECK(max_entries > 0, "_record_memory_history: max_entries must be positive, got ", max_entries);
  if (o.record == HistoryRecord::Off)
    o.context = HistoryContext::None;
  TORCH_CHECK(
      o.context == HistoryContext::None || python_stacks_available(),
      "_record_memory_history: stacks (context='",
      context,
      "') are not available on torch ",
      TORCH_VERSION,
      ": use context=None (see torch_emu's EmuMemoryHistory.cpp)");
  o.cpp_frames = stacks == "all";
  o.max_entries = static_cast<size_t>(max_entries);
  o.clear = clear;
  o.oom_snapshot_path = oom_snapshot_path;
  return o;
}

bool python_stacks_available() {
  return EMU_HAS_PYTHON_STACKS != 0;
}

StackContext gather_stack(bool cpp_frames) {
#if EMU_HAS_PYTHON_STACKS
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true, /*cpp=*/cpp_frames);
#else
  (void)cpp_frames;
  return nullptr;
#endif
}

int64_t time_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void write_snapshot(const MemorySnapshot& snapshot, const std::string& path) {
  const c10::IValue value = snapshot_ivalue(snapshot);
  std::vector<char> bytes;
  // No type tags (tag_aggregates=false): Python's pickle reads plain dicts, lists and tuples.
  torch::jit::Pickler pickler(
      [&bytes](const char* data, size_t size) { bytes.insert(bytes.end(), data, data + size); },
      nullptr,
      nullptr,
      nullptr,
      nullptr,
      false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  write_file_atomically(path, bytes);
}

TORCH_LIBRARY_FRAGMENT(torch_emu, m) {
  m.def(
      "memory_record_history(str? enabled, str? context, str stacks, int max_entries, bool clear_history, "
      "str? oom_snapshot) -> ()",
      &memory_record_history);
  m.def("memory_snapshot_dump(str path) -> ()", &memory_snapshot_dump);
  m.def("memory_history_stacks() -> bool", &memory_history_stacks);
  m.def("memory_history_stacks_unavailable() -> str", &memory_history_stacks_unavailable);
}

} // namespace torch_emu
