// Internal state of the emulated runtime: devices, their memory ranges, streams and errors.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "emu_driver.h"

namespace emu {

// Records the detail message of a failing call on this thread and returns its code.
emuError_t fail(emuError_t code, const std::string& message);
emuError_t succeed();

struct Stream;

// One device: a range of addresses the host cannot touch (PROT_NONE), and a
// second, readable mapping of the same size that holds the bytes. Device
// address dev_base + off is backed by host_base + off; only the driver (and
// kernels, through emuKernelTranslate) know host_base.
struct Device {
  int index = 0;
  size_t capacity = 0;
  char* dev_base = nullptr;
  char* host_base = nullptr;

  std::mutex mu; // guards live, free_blocks, used, streams
  std::map<size_t, size_t> live; // offset -> size of live allocations
  std::map<size_t, size_t> free_blocks; // offset -> size, coalesced
  size_t used = 0;
  std::vector<Stream*> streams; // every live stream of the device, default first
  Stream* default_stream = nullptr;
  uint64_t next_stream_number = 1; // guarded by mu: a created stream's number (the default stream's is 0)

  bool contains(const void* p) const {
    auto c = static_cast<const char*>(p);
    return c >= dev_base && c < dev_base + capacity;
  }
};

struct Runtime {
  std::vector<std::unique_ptr<Device>> devices;
  char* reserved = nullptr; // all device ranges, PROT_NONE
  char* backing = nullptr; // all host mappings, read-write
  size_t reserved_bytes = 0;
};

// The runtime, created on first use; null (with the error recorded) when it could not start.
Runtime* runtime(emuError_t* error);
Device* device_of(Runtime* rt, const void* p);

// Checks [p, p + bytes) lies inside one live allocation and gives the host-side address.
emuError_t translate(Runtime* rt, const void* p, size_t bytes, const char* what, char** host, Device** device);

int& current_device_index();

// ---- streams ----
// run() is the work; after(), if set, runs once the stream counts the task as completed
// (an event becomes complete only when a query of its stream would also say so).
struct Task {
  Task() = default;
  Task(std::function<int()> run, std::function<void()> after = {}, uint64_t after_default = 0)
      : run(std::move(run)), after(std::move(after)), after_default(after_default) {}
  std::function<int()> run;
  std::function<void()> after;
  // A created stream's task starts once its device's default stream has completed this many tasks:
  // the default stream's work queued before it (0 on the default stream itself).
  uint64_t after_default = 0;
#if EMU_DRIVER_HAS_TRACING
  // A replayed graph's node: what it was when captured (0: ask the queuing thread's TracedAs).
  int traced_kind = 0;
  std::string traced_name;
#endif
};

#if EMU_DRIVER_HAS_GRAPHS
// A recorded piece of work: at each launch of its graph, make() gives the task to queue (an event record
// takes its generation then, a kernel shares its retained arguments).
using GraphNode = std::function<Task()>;

// The recording of a capturing stream (API 2.3, graphs.cpp).
struct Capture {
  std::vector<GraphNode> nodes;
  std::string invalidated; // why the capture was spoilt, or "" while it is good
};
#endif

struct Stream {
  Device* device = nullptr;
  bool is_default = false;
  uint64_t number = 0; // 0 for the default stream, then 1, 2, ... per device (the trace's stream id)
  std::mutex mu;
  std::condition_variable work_cv; // worker waits for tasks
  std::condition_variable idle_cv; // synchronizers wait for completion
  std::deque<Task> queue;
  std::atomic<uint64_t> enqueued{0};
  std::atomic<uint64_t> completed{0};
  bool stopping = false;
  emuError_t sticky = emuSuccess; // a failed kernel, reported by the next sync/query
  std::string sticky_message;
  std::thread worker; // API 2.x only
#if EMU_DRIVER_HAS_GRAPHS
  std::unique_ptr<Capture> capture; // guarded by mu; set between begin and end of a capture
  std::atomic<bool> capturing{false}; // capture != null, readable without mu (the device-wide checks)
#endif
};

// Resolves a handle (null: the current device's default stream); null with the error recorded if unknown.
Stream* resolve_stream(Runtime* rt, emuStream_t handle, emuError_t* error);
// Queues (2.x) or runs at once (1.x) a task on the stream. Work queued through submit cannot be replayed:
// on a capturing stream it fails (and invalidates the capture); capturable work goes through submit_node.
emuError_t submit(Stream* s, std::function<int()> run, std::function<void()> after = {});
#if EMU_DRIVER_HAS_GRAPHS
// Records the node on a capturing stream, or queues the task it makes at once.
emuError_t submit_node(Stream* s, GraphNode node);
// Fail with emuErrorStreamCaptureUnsupported, invalidating the capture, if s (or any stream of d) captures;
// `call` names what was refused.
emuError_t refuse_while_capturing(Stream* s, const char* call);
emuError_t refuse_while_device_captures(Device* d, const char* call);
// Ends a capture without a graph (a capturing stream being destroyed).
void discard_capture(Stream* s);
#endif
emuError_t synchronize_stream(Stream* s);
emuError_t synchronize_device(Device* d);
Stream* create_stream(Device* d, bool is_default);
void destroy_stream(Stream* s);

#if EMU_DRIVER_HAS_HOST_ALLOC
// ---- pinned host memory (API 2.2, host.cpp) ----
// A live emuHostAlloc allocation holding [p, p + bytes), with its base and size; false if the
// range is not wholly inside one (pageable memory, or straddling an allocation's end).
bool find_pinned(const void* p, size_t bytes, void** base, size_t* size);
// Counts a queued copy against the pinned allocation holding [p, p + bytes), so emuFreeHost waits
// for it; returns the allocation's base to pass to pinned_use_done, or null for pageable memory.
void* pinned_use_begin(const void* p, size_t bytes);
void pinned_use_done(void* base);
#endif

#if EMU_DRIVER_HAS_TRACING
// ---- activity tracing (API 2.4, trace.cpp) ----
// Held by an API call while it queues work the trace records: what the work is and its name (null: a kernel's
// label, or "kernel"). Work queued outside any TracedAs (event records and waits) is not recorded.
struct TracedAs {
  TracedAs(emuActivityKind kind, const char* name);
  ~TracedAs();
  TracedAs(const TracedAs&) = delete;
  TracedAs& operator=(const TracedAs&) = delete;
  emuActivityKind kind;
  const char* name;
  TracedAs* outer;
};
// While tracing is on, wraps task.run so that its record (what the calling thread's TracedAs says) is kept once
// it has run; otherwise leaves the task alone.
void trace_task(Stream* s, Task& task);
#if EMU_DRIVER_HAS_GRAPHS
// A node being captured keeps what the calling thread's TracedAs says it is, for the trace of its replays.
GraphNode traced_node(GraphNode node);
#endif
#endif

// Marks the calling thread as running a kernel (translate is allowed only then).
bool& in_kernel();
std::string& kernel_message();

} // namespace emu

// Starts the runtime on first use; returns its error from the calling API function if it cannot start.
#define EMU_RUNTIME(rt)                         \
  emuError_t rt##_error = emuSuccess;           \
  emu::Runtime* rt = emu::runtime(&rt##_error); \
  if (rt == nullptr)                            \
  return rt##_error
