// Graph capture and replay (driver API 2.3): the C++ half of torch.emu.EmuGraph, reached through
// torch.ops.torch_emu.graph_* with integer handles whose lifetime Python manages, and, on torch releases that have
// at::GraphImplInterface (2.13), the device-generic graph behind torch.accelerator.Graph. A capture allocates from a
// private pool of the caching allocator that lives as long as its graph.
#include <c10/core/Stream.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>

#include "runtime/EmuAllocator.h"
#include "runtime/EmuException.h"
#include "runtime/EmuGenerator.h"
#include "runtime/EmuGraph.h"
#include "runtime/EmuLaunch.h"
#include "runtime/EmuStream.h"

#if EMU_DRIVER_HAS_GRAPHS

// torch 2.13 added the device-generic graph interface; older releases have no header to include (found by looking,
// so no shim patch is needed for them: they get the torch.emu API only).
#if __has_include(<ATen/core/GraphImplInterface.h>)
#include <ATen/core/GraphImplInterface.h>
#define EMU_HAS_GRAPH_IMPL 1
#else
#define EMU_HAS_GRAPH_IMPL 0
#endif

namespace torch_emu {
namespace {

// Pool ids as c10 makes them: a graph's own pool is (id, 0), a pool from graph_pool_handle() is (0, id).
uint64_t next_pool_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

// The random state of each capture in progress, by (device, capturing stream).
struct CaptureSeeds {
  std::mutex mu;
  std::map<std::pair<c10::DeviceIndex, c10::StreamId>, std::pair<std::shared_ptr<std::atomic<uint64_t>>, uint64_t>>
      capturing; // -> (base seed, slots handed out)
};

CaptureSeeds& capture_seeds() {
  static auto* seeds = new CaptureSeeds(); // outlives every graph
  return *seeds;
}

class EmuGraph {
 public:
  explicit EmuGraph(bool keep_graph) : keep_graph_(keep_graph) {}
  EmuGraph(const EmuGraph&) = delete;
  EmuGraph& operator=(const EmuGraph&) = delete;
  ~EmuGraph() {
    try {
      reset();
    } catch (...) { // a destructor must not throw; reset() only fails on a driver that is gone
    }
  }

  void capture_begin(PoolId pool) {
    TORCH_CHECK(
        !capturing_ && graph_ == nullptr && exec_ == nullptr,
        "emu graph: capture_begin on a graph that holds a capture already; call reset() first");
    const c10::DeviceIndex device = current_device();
    const c10::Stream stream = getCurrentEmuStream(device);
    TORCH_CHECK(
        stream != getDefaultEmuStream(device),
        "emu graphs must be captured on a non-default stream: capture inside `with torch.emu.stream(torch.emu.Stream())`"
        " (torch.emu.graph(...) does so)");
    pool_ = pool == PoolId{0, 0} ? PoolId{next_pool_id(), 0} : pool;
    device_ = device;
    stream_id_ = stream.id();
    begin_allocate_to_pool(device, pool_, stream_id_);
    DeviceSwitch on(device);
    const emuError_t err = emuStreamBeginCapture(raw_stream(stream));
    if (err != emuSuccess) {
      end_allocate_to_pool(device, pool_);
      release_pool(device, pool_);
      EMU_CHECK(err);
    }
    holds_pool_ = true;
    capturing_ = true;
    seed_ = std::make_shared<std::atomic<uint64_t>>(0);
    auto& seeds = capture_seeds();
    std::lock_guard<std::mutex> lock(seeds.mu);
    seeds.capturing[{device_, stream_id_}] = {seed_, 0};
  }

  void capture_end() {
    TORCH_CHECK(capturing_, "emu graph: capture_end without capture_begin");
    const c10::Stream stream = captured_stream();
    TORCH_CHECK(
        getCurrentEmuStream(device_) == stream,
        "emu graph: capture_end on another stream than capture_begin's (stream ",
        stream_id_,
        " of emu:",
        int(device_),
        ")");
    DeviceSwitch on(device_);
    emuGraph_t graph = nullptr;
    const emuError_t err = emuStreamEndCapture(raw_stream(stream), &graph);
    end_allocate_to_pool(device_, pool_);
    end_seeds();
    capturing_ = false;
    EMU_CHECK(err); // a capture spoilt by a synchronising call says which call here
    graph_ = graph;
    if (!keep_graph_) {
      instantiate();
      EMU_CHECK(emuGraphDestroy(graph_));
      graph_ = nullptr;
    }
  }

  void instantiate() {
    TORCH_CHECK(graph_ != nullptr, "emu graph: instantiate needs a captured graph kept (keep_graph=True)");
    if (exec_ != nullptr) {
      EMU_CHECK(emuGraphExecDestroy(exec_));
      exec_ = nullptr;
    }
    EMU_CHECK(emuGraphInstantiate(&exec_, graph_));
  }

  void replay() {
    TORCH_CHECK(!capturing_, "emu graph: replay during its own capture");
    if (exec_ == nullptr)
      instantiate(); // keep_graph=True instantiates at the first replay, as torch.cuda.CUDAGraph does
    DeviceSwitch on(device_);
    // This replay's random base: drawn now, in program order, and set in stream order before its kernels run.
    const uint64_t base = draw_kernel_seed(compat::optional<at::Generator>(), device_);
    launch(device_, [seed = seed_, base] { seed->store(base, std::memory_order_relaxed); });
    EMU_CHECK(emuGraphLaunch(exec_, raw_stream(getCurrentEmuStream(device_))));
  }

  void reset() {
    if (capturing_) { // abandoned mid-capture (an error in the captured code): end it, keep nothing
      DeviceSwitch on(device_);
      emuGraph_t graph = nullptr;
      if (emuStreamEndCapture(raw_stream(captured_stream()), &graph) == emuSuccess)
        emuGraphDestroy(graph);
      end_allocate_to_pool(device_, pool_);
      end_seeds();
      capturing_ = false;
    }
    if (exec_ != nullptr) {
      EMU_CHECK(emuGraphExecDestroy(exec_));
      exec_ = nullptr;
    }
    if (graph_ != nullptr) {
      EMU_CHECK(emuGraphDestroy(graph_));
      graph_ = nullptr;
    }
    if (holds_pool_) {
      release_pool(device_, pool_);
      holds_pool_ = false;
    }
  }

  PoolId pool() const {
    return pool_;
  }

  size_t node_count() const {
    TORCH_CHECK(graph_ != nullptr, "emu graph: no captured graph kept (capture with keep_graph=True)");
    size_t count = 0;
    EMU_CHECK(emuGraphGetNodeCount(graph_, &count));
    return count;
  }

  c10::DeviceIndex device() const {
    return device_;
  }

 private:
  void end_seeds() {
    auto& seeds = capture_seeds();
    std::lock_guard<std::mutex> lock(seeds.mu);
    seeds.capturing.erase({device_, stream_id_});
  }

  c10::Stream captured_stream() const {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device_), stream_id_);
  }

  bool keep_graph_;
  bool capturing_ = false;
  bool holds_pool_ = false;
  c10::DeviceIndex device_ = 0;
  c10::StreamId stream_id_ = 0;
  PoolId pool_{0, 0};
  emuGraph_t graph_ = nullptr;
  emuGraphExec_t exec_ = nullptr;
  std::shared_ptr<std::atomic<uint64_t>> seed_; // the random base of the current replay
};

// ---- torch.emu.EmuGraph: graphs by integer handle ----

struct GraphTable {
  std::mutex mu;
  int64_t next = 1;
  std::unordered_map<int64_t, std::shared_ptr<EmuGraph>> graphs;

  std::shared_ptr<EmuGraph> get(int64_t handle) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = graphs.find(handle);
    TORCH_CHECK(it != graphs.end(), "emu graph: unknown or destroyed graph handle ", handle);
    return it->second;
  }
};

GraphTable& graphs() {
  static auto* table = new GraphTable(); // outlives every graph Python holds
  return *table;
}

int64_t graph_create(bool keep_graph) {
  auto& table = graphs();
  std::lock_guard<std::mutex> lock(table.mu);
  const int64_t handle = table.next++;
  table.graphs[handle] = std::make_shared<EmuGraph>(keep_graph);
  return handle;
}

void graph_destroy(int64_t handle) {
  std::shared_ptr<EmuGraph> dead; // reset outside the table's lock
  auto& table = graphs();
  {
    std::lock_guard<std::mutex> lock(table.mu);
    auto it = table.graphs.find(handle);
    if (it == table.graphs.end())
      return;
    dead = std::move(it->second);
    table.graphs.erase(it);
  }
  dead->reset();
}

void graph_capture_begin(int64_t handle, int64_t pool_first, int64_t pool_second) {
  graphs().get(handle)->capture_begin({static_cast<uint64_t>(pool_first), static_cast<uint64_t>(pool_second)});
}
void graph_capture_end(int64_t handle) {
  graphs().get(handle)->capture_end();
}
void graph_instantiate(int64_t handle) {
  graphs().get(handle)->instantiate();
}
void graph_replay(int64_t handle) {
  graphs().get(handle)->replay();
}
void graph_reset(int64_t handle) {
  graphs().get(handle)->reset();
}
std::tuple<int64_t, int64_t> graph_pool(int64_t handle) {
  const PoolId pool = graphs().get(handle)->pool();
  return {static_cast<int64_t>(pool.first), static_cast<int64_t>(pool.second)};
}
int64_t graph_node_count(int64_t handle) {
  return static_cast<int64_t>(graphs().get(handle)->node_count());
}
std::tuple<int64_t, int64_t> graph_pool_handle() {
  return {0, static_cast<int64_t>(next_pool_id())};
}
int64_t graph_pool_reserved_bytes(int64_t device, int64_t pool_first, int64_t pool_second) {
  return static_cast<int64_t>(pool_reserved_bytes(
      checked_device_index(device), {static_cast<uint64_t>(pool_first), static_cast<uint64_t>(pool_second)}));
}
bool stream_is_capturing(int64_t stream_id, int64_t device) {
  const c10::Stream stream(
      c10::Stream::UNSAFE,
      c10::Device(c10::DeviceType::PrivateUse1, device_or_current(device)),
      static_cast<c10::StreamId>(stream_id));
  int capturing = 0;
  EMU_CHECK(emuStreamIsCapturing(raw_stream(stream), &capturing));
  return capturing != 0;
}

#if EMU_HAS_GRAPH_IMPL
// torch.accelerator.Graph on emu: c10's registry creates one per graph, keyed by the backend's name ("EMU").
class EmuGraphImpl final : public at::GraphImplInterface {
 public:
  explicit EmuGraphImpl(const at::GraphImplArgs& args) : graph_(args.keep_graph) {}

  void capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode /*mode: emu refuses unsafe calls in every mode*/)
      override {
    graph_.capture_begin({static_cast<uint64_t>(pool.first), static_cast<uint64_t>(pool.second)});
  }
  void capture_end() override {
    graph_.capture_end();
  }
  void instantiate() override {
    graph_.instantiate();
  }
  void replay() override {
    graph_.replay();
  }
  void reset() override {
    graph_.reset();
  }
  c10::MempoolId_t pool() const override {
    const PoolId pool = graph_.pool();
    return {pool.first, pool.second};
  }
  void enable_debug_mode() override {} // nothing extra to check: the driver validates every captured call
  void debug_dump(const std::string& path) override {
    std::ofstream out(path);
    TORCH_CHECK(out, "emu graph: cannot write ", path);
    out << "emu graph on emu:" << int(graph_.device()) << ": " << graph_.node_count() << " nodes\n";
  }

 private:
  EmuGraph graph_;
};

#endif

} // namespace

uint64_t GraphSeed::value() const {
  // splitmix64 of the replay's base and the slot: distinct, well-mixed seeds for the kernels of one replay.
  uint64_t z = base->load(std::memory_order_relaxed) + (slot + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

std::optional<GraphSeed> graph_seed_slot(c10::DeviceIndex device) {
  auto& seeds = capture_seeds();
  const c10::StreamId stream = getCurrentEmuStream(device).id();
  std::lock_guard<std::mutex> lock(seeds.mu);
  auto it = seeds.capturing.find({device, stream});
  if (it == seeds.capturing.end())
    return std::nullopt;
  return GraphSeed{it->second.first, it->second.second++};
}

TORCH_LIBRARY_FRAGMENT(torch_emu, m) {
  m.def("graph_create(bool keep_graph) -> int", &graph_create);
  m.def("graph_destroy(int graph) -> ()", &graph_destroy);
  m.def("graph_capture_begin(int graph, int pool_first, int pool_second) -> ()", &graph_capture_begin);
  m.def("graph_capture_end(int graph) -> ()", &graph_capture_end);
  m.def("graph_instantiate(int graph) -> ()", &graph_instantiate);
  m.def("graph_replay(int graph) -> ()", &graph_replay);
  m.def("graph_reset(int graph) -> ()", &graph_reset);
  m.def("graph_pool(int graph) -> (int, int)", &graph_pool);
  m.def("graph_node_count(int graph) -> int", &graph_node_count);
  m.def("graph_pool_handle() -> (int, int)", &graph_pool_handle);
  m.def("graph_pool_reserved_bytes(int device, int pool_first, int pool_second) -> int", &graph_pool_reserved_bytes);
  m.def("stream_is_capturing(int stream_id, int device) -> bool", &stream_is_capturing);
}

} // namespace torch_emu

#if EMU_HAS_GRAPH_IMPL
// c10's registry macros name the registry unqualified: the registration lives in its namespace.
namespace at {
REGISTER_GRAPH_IMPL(EMU, torch_emu::EmuGraphImpl);
} // namespace at
#endif

#endif // EMU_DRIVER_HAS_GRAPHS
