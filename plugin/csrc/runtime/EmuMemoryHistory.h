// Memory history of the emu caching allocator (torch.emu.memory._record_memory_history): the events it
// records, the stacks it keeps and the snapshot it writes, in the format torch.cuda._memory_viz reads.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace torch_emu {

// What is recorded (torch.cuda's `enabled`): nothing, the stacks of live blocks only, or also every event.
enum class HistoryRecord : int { Off = 0, State = 1, All = 2 };
// Which of them carry a stack (torch.cuda's `context`): none, live blocks, also allocations, also frees.
enum class HistoryContext : int { None = 0, State = 1, Alloc = 2, All = 3 };

struct HistoryOptions {
  HistoryRecord record = HistoryRecord::Off;
  HistoryContext context = HistoryContext::None;
  bool cpp_frames = false; // stacks="all": C++ frames besides Python's
  size_t max_entries = 0; // per device; the oldest events make room for new ones
  bool clear = false; // forget the events recorded so far
  std::string oom_snapshot_path; // written at each emu out-of-memory while recording, when not empty
};

// A stack of the thread that allocated or freed (a torch::CapturedTraceback), or null.
using StackContext = std::shared_ptr<c10::GatheredContext>;

enum class TraceAction { Alloc, FreeRequested, FreeCompleted, SegmentAlloc, SegmentFree, Oom };

struct TraceEntry {
  TraceAction action;
  uint64_t addr;
  size_t size;
  c10::StreamId stream;
  int64_t time_us;
  StackContext stack;
  size_t device_free = 0; // the driver's free bytes, for Oom
};

enum class BlockState { ActiveAllocated, ActivePendingFree, Inactive };

// One driver allocation. The allocator never splits one, so each segment holds exactly one block.
struct SegmentInfo {
  c10::DeviceIndex device;
  uint64_t address;
  size_t size;
  size_t requested; // what the tensor in it asked for (0 when inactive)
  c10::StreamId stream;
  BlockState state;
  std::pair<uint64_t, uint64_t> pool; // (0, 0), or a graph capture's private pool
  StackContext block_stack; // the allocation now in it
  StackContext segment_stack; // the allocation that made the driver call
};

struct MemorySnapshot {
  std::vector<SegmentInfo> segments;
  std::vector<std::vector<TraceEntry>> device_traces; // one list per device, oldest first
};

// Parses torch.cuda's option words; raises naming what is allowed.
HistoryOptions parse_history_options(
    const std::string& enabled,
    const std::string& context,
    const std::string& stacks,
    int64_t max_entries,
    bool clear,
    const std::string& oom_snapshot_path);
// Whether this build can take Python stacks (see EmuMemoryHistory.cpp).
bool python_stacks_available();
// The calling thread's stack. Takes the GIL: never call it holding a lock a Python thread may wait for.
StackContext gather_stack(bool cpp_frames);
int64_t time_now_us();
// Writes the snapshot, stacks symbolized, as the pickle torch.cuda.memory._dump_snapshot writes (through a
// temporary file in the same directory, then renamed). Takes the GIL to name Python frames.
void write_snapshot(const MemorySnapshot& snapshot, const std::string& path);

} // namespace torch_emu
