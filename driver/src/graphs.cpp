// Stream capture and graphs (API 2.3): a capturing stream records the nodes its work would have queued, a graph
// holds them, and each launch of an instance queues the tasks the nodes make, in order, on the launching stream.
#include "internal.h"

#if EMU_DRIVER_HAS_GRAPHS

#include <unordered_map>

namespace emu {
namespace {

// A kernel's arguments, released once no task, graph or instance can run the kernel again.
struct RetainedKernel {
  emuKernelFn fn = nullptr;
  void* args = nullptr;
  emuKernelReleaseFn release = nullptr;
  RetainedKernel(emuKernelFn f, void* a, emuKernelReleaseFn r) : fn(f), args(a), release(r) {}
  RetainedKernel(const RetainedKernel&) = delete;
  RetainedKernel& operator=(const RetainedKernel&) = delete;
  ~RetainedKernel() {
    if (release != nullptr)
      release(args);
  }
};

// The nodes are shared by a graph and its instances, so destroying either never waits for a replay.
using Nodes = std::shared_ptr<const std::vector<GraphNode>>;

struct Graph {
  Nodes nodes;
  int device = 0;
};

struct GraphExec {
  Nodes nodes;
  int device = 0;
};

std::mutex g_graphs_mu;
std::unordered_map<emuGraph_t, std::unique_ptr<Graph>>& live_graphs() {
  static auto* graphs = new std::unordered_map<emuGraph_t, std::unique_ptr<Graph>>(); // process lifetime
  return *graphs;
}
std::unordered_map<emuGraphExec_t, std::unique_ptr<GraphExec>>& live_execs() {
  static auto* execs = new std::unordered_map<emuGraphExec_t, std::unique_ptr<GraphExec>>();
  return *execs;
}

// The stream named by handle, which must be a created stream: the default stream orders every created stream of
// its device after it, so capturing it (as capturing CUDA's legacy default stream) is refused.
Stream* created_stream(Runtime* rt, emuStream_t handle, const char* call, emuError_t* error) {
  if (handle == nullptr) {
    *error =
        fail(emuErrorNotPermitted, std::string(call) + ": the default stream cannot capture; use a created stream");
    return nullptr;
  }
  Stream* s = resolve_stream(rt, handle, error);
  if (s != nullptr && s->is_default) {
    *error =
        fail(emuErrorNotPermitted, std::string(call) + ": the default stream cannot capture; use a created stream");
    return nullptr;
  }
  return s;
}

} // namespace
} // namespace emu

using emu::fail;

extern "C" {

emuError_t emuLaunchKernelRetained(emuKernelFn fn, void* args, emuKernelReleaseFn release, emuStream_t stream) {
  if (fn == nullptr)
    return fail(emuErrorInvalidValue, "kernel function is null");
  EMU_RUNTIME(rt);
  emuError_t err = emuSuccess;
  emu::Stream* s = emu::resolve_stream(rt, stream, &err);
  if (s == nullptr)
    return err;
  // Owned by the driver from here, also when the launch fails (a spoilt capture): the release runs then.
  auto kernel = std::make_shared<emu::RetainedKernel>(fn, args, release);
#if EMU_DRIVER_HAS_TRACING
  emu::TracedAs traced(emuActivityKernel, nullptr);
#endif
  return emu::submit_node(s, [kernel] { return emu::Task{[kernel] { return kernel->fn(kernel->args); }, {}, 0}; });
}

emuError_t emuStreamBeginCapture(emuStream_t stream) {
  EMU_RUNTIME(rt);
  emuError_t err = emuSuccess;
  emu::Stream* s = emu::created_stream(rt, stream, "emuStreamBeginCapture", &err);
  if (s == nullptr)
    return err;
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->capture)
    return fail(emuErrorNotPermitted, "emuStreamBeginCapture: the stream is capturing already");
  s->capture = std::make_unique<emu::Capture>();
  s->capturing.store(true, std::memory_order_release);
  return emuSuccess;
}

emuError_t emuStreamEndCapture(emuStream_t stream, emuGraph_t* graph) {
  if (graph == nullptr)
    return fail(emuErrorInvalidValue, "graph is null");
  *graph = nullptr;
  EMU_RUNTIME(rt);
  emuError_t err = emuSuccess;
  emu::Stream* s = emu::created_stream(rt, stream, "emuStreamEndCapture", &err);
  if (s == nullptr)
    return err;
  std::unique_ptr<emu::Capture> capture;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (!s->capture)
      return fail(emuErrorNotPermitted, "emuStreamEndCapture: the stream is not capturing");
    capture = std::move(s->capture);
    s->capturing.store(false, std::memory_order_release);
  }
  if (!capture->invalidated.empty())
    return fail(
        emuErrorStreamCaptureInvalidated,
        "the capture was invalidated by " + capture->invalidated + " and gave no graph; the stream is usable again");
  auto g = std::make_unique<emu::Graph>();
  g->nodes = std::make_shared<const std::vector<emu::GraphNode>>(std::move(capture->nodes));
  g->device = s->device->index;
  auto handle = reinterpret_cast<emuGraph_t>(g.get());
  std::lock_guard<std::mutex> lock(emu::g_graphs_mu);
  emu::live_graphs()[handle] = std::move(g);
  *graph = handle;
  return emuSuccess;
}

emuError_t emuStreamIsCapturing(emuStream_t stream, int* capturing) {
  if (capturing == nullptr)
    return fail(emuErrorInvalidValue, "capturing is null");
  EMU_RUNTIME(rt);
  emuError_t err = emuSuccess;
  emu::Stream* s = emu::resolve_stream(rt, stream, &err);
  if (s == nullptr)
    return err;
  *capturing = s->capturing.load(std::memory_order_acquire) ? 1 : 0;
  return emuSuccess;
}

emuError_t emuGraphGetNodeCount(emuGraph_t graph, size_t* count) {
  if (count == nullptr)
    return fail(emuErrorInvalidValue, "count is null");
  std::lock_guard<std::mutex> lock(emu::g_graphs_mu);
  auto it = emu::live_graphs().find(graph);
  if (it == emu::live_graphs().end())
    return fail(emuErrorInvalidResourceHandle, "unknown or destroyed graph");
  *count = it->second->nodes->size();
  return emuSuccess;
}

emuError_t emuGraphInstantiate(emuGraphExec_t* exec, emuGraph_t graph) {
  if (exec == nullptr)
    return fail(emuErrorInvalidValue, "exec is null");
  std::lock_guard<std::mutex> lock(emu::g_graphs_mu);
  auto it = emu::live_graphs().find(graph);
  if (it == emu::live_graphs().end())
    return fail(emuErrorInvalidResourceHandle, "unknown or destroyed graph");
  auto e = std::make_unique<emu::GraphExec>();
  e->nodes = it->second->nodes;
  e->device = it->second->device;
  auto handle = reinterpret_cast<emuGraphExec_t>(e.get());
  emu::live_execs()[handle] = std::move(e);
  *exec = handle;
  return emuSuccess;
}

emuError_t emuGraphLaunch(emuGraphExec_t exec, emuStream_t stream) {
  EMU_RUNTIME(rt);
  emuError_t err = emuSuccess;
  emu::Stream* s = emu::resolve_stream(rt, stream, &err);
  if (s == nullptr)
    return err;
  emu::Nodes nodes;
  {
    std::lock_guard<std::mutex> lock(emu::g_graphs_mu);
    auto it = emu::live_execs().find(exec);
    if (it == emu::live_execs().end())
      return fail(emuErrorInvalidResourceHandle, "unknown or destroyed graph instance");
    if (it->second->device != s->device->index)
      return fail(
          emuErrorInvalidValue,
          "the graph was captured on device " + std::to_string(it->second->device) + ", the stream is on device " +
              std::to_string(s->device->index));
    nodes = it->second->nodes;
  }
  // On a capturing stream the nodes are recorded again: the outer graph replays this one.
  for (const emu::GraphNode& node : *nodes)
    if ((err = emu::submit_node(s, node)))
      return err;
  return emuSuccess;
}

emuError_t emuGraphExecDestroy(emuGraphExec_t exec) {
  std::unique_ptr<emu::GraphExec> dead; // released outside the lock: a last release may run kernel callbacks
  std::lock_guard<std::mutex> lock(emu::g_graphs_mu);
  auto it = emu::live_execs().find(exec);
  if (it == emu::live_execs().end())
    return fail(emuErrorInvalidResourceHandle, "unknown or destroyed graph instance");
  dead = std::move(it->second);
  emu::live_execs().erase(it);
  return emuSuccess;
}

emuError_t emuGraphDestroy(emuGraph_t graph) {
  std::unique_ptr<emu::Graph> dead;
  std::lock_guard<std::mutex> lock(emu::g_graphs_mu);
  auto it = emu::live_graphs().find(graph);
  if (it == emu::live_graphs().end())
    return fail(emuErrorInvalidResourceHandle, "unknown or destroyed graph");
  dead = std::move(it->second);
  emu::live_graphs().erase(it);
  return emuSuccess;
}

} // extern "C"

#endif // EMU_DRIVER_HAS_GRAPHS
