// Activity tracing (API 2.4): what each stream ran, and when, for profilers. The API call that queues work says
// what it is (TracedAs); enqueue wraps the task so that, when it has run, its record joins the buffer.
#include <time.h>

#include <cstring>
#include <deque>

#include "internal.h"

#if EMU_DRIVER_HAS_TRACING

namespace emu {
namespace {

std::atomic<bool> g_on{false};
std::mutex g_mu; // guards g_records, g_dropped
std::deque<emuActivityRecord> g_records;
uint64_t g_dropped = 0;

struct ThreadTrace {
  TracedAs* scope = nullptr; // the innermost API call queuing work on this thread
  std::string label; // the next kernel's name
  std::vector<uint64_t> correlations;
};

ThreadTrace& thread_trace() {
  thread_local ThreadTrace t;
  return t;
}

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void keep(const emuActivityRecord& record) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_records.size() >= EMU_TRACE_CAPACITY) {
    ++g_dropped;
    return;
  }
  g_records.push_back(record);
}

// What the calling thread is queuing: its TracedAs's kind, and the name (a kernel's label, consumed here).
bool traced_as(emuActivityKind* kind, std::string* name) {
  ThreadTrace& t = thread_trace();
  if (t.scope == nullptr)
    return false; // not work the trace records (an event record or wait)
  *kind = t.scope->kind;
  const char* given = t.scope->name;
  if (*kind == emuActivityKernel && !t.label.empty())
    given = t.label.c_str();
  *name = given == nullptr ? "kernel" : given;
  if (*kind == emuActivityKernel)
    t.label.clear();
  return true;
}

} // namespace

TracedAs::TracedAs(emuActivityKind kind, const char* name) : kind(kind), name(name), outer(thread_trace().scope) {
  thread_trace().scope = this;
}

TracedAs::~TracedAs() {
  thread_trace().scope = outer;
}

#if EMU_DRIVER_HAS_GRAPHS
GraphNode traced_node(GraphNode node) {
  emuActivityKind kind{};
  std::string name;
  if (!traced_as(&kind, &name))
    return node;
  return [node = std::move(node), kind, name] {
    Task task = node();
    task.traced_kind = int(kind);
    task.traced_name = name;
    return task;
  };
}
#endif

void trace_task(Stream* s, Task& task) {
  if (!g_on.load(std::memory_order_relaxed))
    return;
  emuActivityKind kind{};
  std::string name;
  if (task.traced_kind != 0) {
    kind = emuActivityKind(task.traced_kind);
    name = task.traced_name;
  } else if (!traced_as(&kind, &name)) {
    return;
  }
  ThreadTrace& t = thread_trace();
  auto record = std::make_shared<emuActivityRecord>();
  record->kind = kind;
  record->device = s->device->index;
  record->stream = s->number;
  record->correlation = t.correlations.empty() ? 0 : t.correlations.back();
  record->queued_ns = now_ns();
  std::strncpy(record->name, name.c_str(), EMU_TRACE_NAME_LENGTH - 1);
  record->name[EMU_TRACE_NAME_LENGTH - 1] = '\0';
  task.run = [run = std::move(task.run), record] {
    record->start_ns = now_ns();
    const int status = run();
    record->end_ns = now_ns();
    keep(*record);
    return status;
  };
}

} // namespace emu

extern "C" {

emuError_t emuTraceStart(void) {
  emu::g_on.store(true, std::memory_order_relaxed);
  return emu::succeed();
}

emuError_t emuTraceStop(void) {
  emu::g_on.store(false, std::memory_order_relaxed);
  return emu::succeed();
}

int emuTraceIsOn(void) {
  return emu::g_on.load(std::memory_order_relaxed) ? 1 : 0;
}

emuError_t emuTraceLabel(const char* name) {
  emu::thread_trace().label = name == nullptr ? "" : name;
  return emu::succeed();
}

emuError_t emuTracePushCorrelation(uint64_t id) {
  emu::thread_trace().correlations.push_back(id);
  return emu::succeed();
}

emuError_t emuTracePopCorrelation(void) {
  auto& ids = emu::thread_trace().correlations;
  if (ids.empty())
    return emu::fail(emuErrorInvalidValue, "emuTracePopCorrelation: this thread has no correlation id pushed");
  ids.pop_back();
  return emu::succeed();
}

emuError_t emuTraceRead(emuActivityRecord* records, size_t capacity, size_t* count, uint64_t* dropped) {
  if (count == nullptr)
    return emu::fail(emuErrorInvalidValue, "count is null");
  if (records == nullptr && capacity > 0)
    return emu::fail(emuErrorInvalidValue, "records is null");
  std::lock_guard<std::mutex> lock(emu::g_mu);
  size_t n = 0;
  while (n < capacity && !emu::g_records.empty()) {
    records[n++] = emu::g_records.front();
    emu::g_records.pop_front();
  }
  *count = n;
  if (dropped != nullptr) {
    *dropped = emu::g_dropped;
    emu::g_dropped = 0;
  }
  return emu::succeed();
}

} // extern "C"

#endif
