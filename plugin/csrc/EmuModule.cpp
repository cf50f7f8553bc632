// torch_emu._C: the Python-facing functions of the runtime (devices, streams, events,
// memory statistics, generators, fallback counts). The only file that includes
// torch/extension.h: it is the slow one to compile.
#include <torch/csrc/Generator.h>
#include <torch/extension.h>


#include "aten/Fallback.h"
#include "runtime/EmuAllocator.h"
#include "runtime/EmuEvent.h"
#include "runtime/EmuException.h"
#include "runtime/EmuFork.h"
#include "runtime/EmuGenerator.h"
#include "runtime/EmuHostAllocator.h"
#include "runtime/EmuSerialization.h"
#include "runtime/EmuStream.h"

namespace py = pybind11;

namespace torch_emu {
namespace {

constexpr c10::DeviceType kEmu = c10::DeviceType::PrivateUse1;

c10::DeviceIndex index_or_current(int64_t device) {
  if (device < 0) return current_device();
  TORCH_CHECK(device < device_count(), "emu device index ", device, " is out of range: there are ", int(device_count()),
              " emu device(s)");
  return static_cast<c10::DeviceIndex>(device);
}

c10::Stream stream_of(int64_t stream_id, int64_t device) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kEmu, index_or_current(device)), static_cast<c10::StreamId>(stream_id));
}

py::tuple as_tuple(const c10::Stream& s) { return py::make_tuple(s.id(), s.device_index()); }

py::dict properties(int64_t device) {
  emuDeviceProp prop{};
  EMU_CHECK(emuGetDeviceProperties(&prop, index_or_current(device)));
  py::dict d;
  d["name"] = std::string(prop.name);
  d["total_memory"] = prop.totalGlobalMem;
  d["major"] = prop.major;
  d["minor"] = prop.minor;
  d["multi_processor_count"] = prop.multiProcessorCount;
  return d;
}

// The statistics under torch.cuda.memory_stats's names: "<stat>.<pool>.<metric>" and plain counters.
// inactive_split and the oversize counts are zero: this allocator never splits or over-sizes a block.
py::dict stats(int64_t device) {
  const MemoryStats s = memory_stats(index_or_current(device));
  const std::pair<const char*, const StatArray*> arrays[] = {
      {"allocation", &s.allocation},           {"segment", &s.segment},
      {"active", &s.active},                   {"allocated_bytes", &s.allocated_bytes},
      {"reserved_bytes", &s.reserved_bytes},   {"active_bytes", &s.active_bytes},
      {"requested_bytes", &s.requested_bytes}, {"inactive_split", nullptr},
      {"inactive_split_bytes", nullptr}};
  const char* pools[kPools] = {"all", "small_pool", "large_pool"};
  py::dict d;
  for (const auto& [name, array] : arrays) {
    for (size_t pool = 0; pool < kPools; ++pool) {
      const Stat stat = array != nullptr ? (*array)[pool] : Stat{};
      const std::string prefix = std::string(name) + "." + pools[pool] + ".";
      d[py::str(prefix + "current")] = stat.current;
      d[py::str(prefix + "peak")] = stat.peak;
      d[py::str(prefix + "allocated")] = stat.allocated;
      d[py::str(prefix + "freed")] = stat.freed;
    }
  }
  for (const char* name : {"oversize_allocations", "oversize_segments"}) {
    for (const char* metric : {"current", "peak", "allocated", "freed"}) d[py::str(std::string(name) + "." + metric)] = 0;
  }
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_sync_all_streams"] = s.num_sync_all_streams;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["max_split_size"] = 0;
  return d;
}

// torch.emu.Event's handle: created lazily by the first record, destroyed with the Python object.
struct PyEvent {
  explicit PyEvent(bool enable_timing) : timing(enable_timing) {}
  ~PyEvent() { event_destroy(event); }
  PyEvent(const PyEvent&) = delete;
  PyEvent& operator=(const PyEvent&) = delete;
  void* event = nullptr;
  bool timing;
};

EmuGeneratorImpl* generator_impl(int64_t device) {
  return default_generator(index_or_current(device)).get<EmuGeneratorImpl>();
}

}  // namespace
}  // namespace torch_emu

PYBIND11_MODULE(_C, m) {
  using namespace torch_emu;
  m.doc() = "torch_emu runtime bindings";
  m.attr("DRIVER_API_BUILT") = py::make_tuple(EMU_DRIVER_VERSION_MAJOR, EMU_DRIVER_VERSION_MINOR);
  m.attr("HAS_ASYNC") = bool(EMU_DRIVER_HAS_ASYNC);
  m.attr("HAS_EVENTS") = bool(EMU_DRIVER_HAS_EVENTS);
  m.attr("HAS_HOST_ALLOC") = pinned_memory_available();  // driver API 2.2: pinned host memory
  m.def("host_memory_stats", [] {
    const PinnedStats s = pinned_stats();
    py::dict d;
    d["allocated_bytes.current"] = s.allocated_bytes;
    d["cached_bytes.current"] = s.cached_bytes;
    d["num_host_alloc"] = s.driver_allocs;
    return d;
  });
  m.def("host_empty_cache", [] { empty_pinned_cache(); }, py::call_guard<py::gil_scoped_release>());

  m.def("driver_version", [] {
    int v = 0;
    EMU_CHECK(emuDriverGetVersion(&v));
    return v;
  });
  m.def("device_count", [] { return int(device_count()); });
  m.def("is_in_bad_fork", [] { return in_bad_fork(); });
  m.def("check_not_forked", [] { check_not_forked(); });
  m.def("current_device", [] { return int(current_device()); });
  m.def("set_device", [](int64_t device) { EMU_CHECK(emuSetDevice(index_or_current(device))); });
  m.def("get_device_properties", &properties);
  m.def("mem_get_info", [](int64_t device) {
    const auto [free_bytes, total] = memory_info(index_or_current(device));
    return py::make_tuple(free_bytes, total);
  });
  m.def("synchronize", [](int64_t device) {
    DeviceSwitch on(index_or_current(device));
    EMU_CHECK(emuDeviceSynchronize());
  }, py::call_guard<py::gil_scoped_release>());

  // Streams travel to Python as (stream_id, device_index).
  m.def("current_stream", [](int64_t device) { return as_tuple(getCurrentEmuStream(index_or_current(device))); });
  m.def("default_stream", [](int64_t device) { return as_tuple(getDefaultEmuStream(index_or_current(device))); });
  m.def("stream_from_pool", [](int64_t device) { return as_tuple(getStreamFromPool(index_or_current(device))); });
  m.def("set_stream", [](int64_t id, int64_t device) { setCurrentEmuStream(stream_of(id, device)); });
  m.def("stream_query", [](int64_t id, int64_t device) {
    const c10::Stream s = stream_of(id, device);
    DeviceSwitch on(s.device_index());
    const emuError_t err = emuStreamQuery(raw_stream(s));
    if (err == emuErrorNotReady) return false;
    EMU_CHECK(err);
    return true;
  });
  m.def("stream_synchronize", [](int64_t id, int64_t device) {
    const c10::Stream s = stream_of(id, device);
    DeviceSwitch on(s.device_index());
    EMU_CHECK(emuStreamSynchronize(raw_stream(s)));
  }, py::call_guard<py::gil_scoped_release>());

  // Events go through the same code as the device guard's (what the autograd engine uses).
  py::class_<PyEvent, std::shared_ptr<PyEvent>>(m, "_Event")
      .def(py::init<bool>(), py::arg("enable_timing") = false)
      .def("record", [](PyEvent& e, int64_t id, int64_t device) { event_record(&e.event, stream_of(id, device), e.timing); })
      .def("block", [](PyEvent& e, int64_t id, int64_t device) { event_block(e.event, stream_of(id, device)); })
      .def("query", [](PyEvent& e) { return event_query(e.event); })
      .def("synchronize", [](PyEvent& e) { event_synchronize(e.event); }, py::call_guard<py::gil_scoped_release>())
      .def("elapsed_time", [](PyEvent& e, PyEvent& end) { return event_elapsed_ms(e.event, end.event); })
      .def_property_readonly("was_recorded", [](PyEvent& e) { return e.event != nullptr; });

  m.def("memory_stats", &stats);
  m.def("reset_peak_memory_stats", [](int64_t device) { reset_peak_stats(index_or_current(device)); });
  m.def("reset_accumulated_memory_stats", [](int64_t device) { reset_accumulated_stats(index_or_current(device)); });
  m.def("empty_cache", [] { empty_cache(); }, py::call_guard<py::gil_scoped_release>());

  m.def("manual_seed", [](int64_t device, uint64_t seed) {
    auto* g = generator_impl(device);
    std::lock_guard<std::mutex> lock(g->mutex_);
    g->set_current_seed(seed);
  });
  m.def("seed", [](int64_t device) {
    auto* g = generator_impl(device);
    std::lock_guard<std::mutex> lock(g->mutex_);
    return g->seed();
  });
  m.def("initial_seed", [](int64_t device) {
    auto* g = generator_impl(device);
    std::lock_guard<std::mutex> lock(g->mutex_);
    return g->current_seed();
  });
  m.def("get_rng_state", [](int64_t device) {
    auto* g = generator_impl(device);
    std::lock_guard<std::mutex> lock(g->mutex_);
    return at::Tensor(g->get_state());
  });
  m.def("set_rng_state", [](int64_t device, const at::Tensor& state) {
    auto* g = generator_impl(device);
    std::lock_guard<std::mutex> lock(g->mutex_);
    g->set_state(*state.unsafeGetTensorImpl());
  });
  m.def("default_generator", [](int64_t device) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(default_generator(index_or_current(device))));
  });

  m.def("set_backend_meta", [](const at::Tensor& t, const std::map<std::string, int64_t>& values) { set_backend_meta(t, values); });
  m.def("backend_meta", [](const at::Tensor& t) { return backend_meta(t); });
  m.def("fallback_counts", [] { return fallback_counts(); });
  m.def("reset_fallback_counts", [] { reset_fallback_counts(); });
}
