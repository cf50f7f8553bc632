// The runtime's Python-facing entry points as operators of torch's registry
// (torch.ops.torch_emu.<name>): devices, driver facts, fork state, streams, events, memory
// statistics, pinned host memory, generators and backend metadata. No CPython API: Python
// reaches these through the dispatcher, which converts the arguments and results (int, bool,
// float, str, Tensor, Generator, tuples, lists and Dict(str, int)) and releases the GIL
// around the call. Streams travel as (stream_id, device_index); events as integer handles
// whose lifetime Python manages (event_create / event_destroy).
#include <ATen/core/Dict.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>
#include <torch/library.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include "runtime/EmuAllocator.h"
#include "runtime/EmuEvent.h"
#include "runtime/EmuException.h"
#include "runtime/EmuFork.h"
#include "runtime/EmuGenerator.h"
#include "runtime/EmuHostAllocator.h"
#include "runtime/EmuSerialization.h"
#include "runtime/EmuStream.h"

namespace torch_emu {
namespace {

using IntDict = c10::Dict<std::string, int64_t>;

c10::Stream stream_of(int64_t stream_id, int64_t device) {
  return c10::Stream(
      c10::Stream::UNSAFE, c10::Device(kEmu, device_or_current(device)), static_cast<c10::StreamId>(stream_id));
}

std::tuple<int64_t, int64_t> as_tuple(const c10::Stream& s) {
  return {s.id(), s.device_index()};
}

// ---- driver and devices ----

// What this library was compiled against (the driver API and its gated features).
IntDict build_features() {
  IntDict d;
  d.insert("driver_api_major", EMU_DRIVER_VERSION_MAJOR);
  d.insert("driver_api_minor", EMU_DRIVER_VERSION_MINOR);
  d.insert("async_streams", EMU_DRIVER_HAS_ASYNC ? 1 : 0);
  d.insert("event_timing", EMU_DRIVER_HAS_EVENTS ? 1 : 0);
  d.insert("pinned_memory", pinned_memory_available() ? 1 : 0); // driver API 2.2: pinned host memory
  d.insert("graphs", EMU_DRIVER_HAS_GRAPHS ? 1 : 0); // driver API 2.3: stream capture and graphs
  return d;
}

int64_t driver_version() {
  int v = 0;
  EMU_CHECK(emuDriverGetVersion(&v));
  return v;
}

int64_t device_count_op() {
  return device_count();
}
int64_t device_current() {
  return current_device();
}
int64_t device_index(int64_t device) {
  return checked_device_index(device);
}
void device_set(int64_t device) {
  EMU_CHECK(emuSetDevice(device_or_current(device)));
}

void device_synchronize(int64_t device) {
  DeviceSwitch on(device_or_current(device));
  EMU_CHECK(emuDeviceSynchronize());
}

std::tuple<std::string, int64_t, int64_t, int64_t, int64_t> device_properties(int64_t device) {
  emuDeviceProp prop{};
  EMU_CHECK(emuGetDeviceProperties(&prop, device_or_current(device)));
  return {
      std::string(prop.name),
      static_cast<int64_t>(prop.totalGlobalMem),
      prop.major,
      prop.minor,
      prop.multiProcessorCount};
}

std::tuple<int64_t, int64_t> device_memory_info(int64_t device) {
  const auto [free_bytes, total] = memory_info(device_or_current(device));
  return {static_cast<int64_t>(free_bytes), static_cast<int64_t>(total)};
}

bool fork_is_bad() {
  return in_bad_fork();
}
void fork_check() {
  check_not_forked();
}

// ---- streams ----

std::tuple<int64_t, int64_t> stream_current(int64_t device) {
  return as_tuple(getCurrentEmuStream(device_or_current(device)));
}
std::tuple<int64_t, int64_t> stream_default(int64_t device) {
  return as_tuple(getDefaultEmuStream(device_or_current(device)));
}
// priority as CUDA numbers it: below 0 takes the high-priority pool (emu has two priorities).
std::tuple<int64_t, int64_t> stream_from_pool(int64_t device, int64_t priority) {
  return as_tuple(getStreamFromPool(device_or_current(device), priority < 0));
}
int64_t stream_priority_of(int64_t stream_id, int64_t device) {
  return stream_priority(stream_of(stream_id, device));
}
std::tuple<int64_t, int64_t> stream_priority_range() {
  return {kLowestStreamPriority, kHighestStreamPriority};
}
void stream_set(int64_t stream_id, int64_t device) {
  setCurrentEmuStream(stream_of(stream_id, device));
}

bool stream_query(int64_t stream_id, int64_t device) {
  const c10::Stream s = stream_of(stream_id, device);
  DeviceSwitch on(s.device_index());
  const emuError_t err = emuStreamQuery(raw_stream(s));
  if (err == emuErrorNotReady)
    return false;
  EMU_CHECK(err);
  return true;
}

void stream_synchronize(int64_t stream_id, int64_t device) {
  const c10::Stream s = stream_of(stream_id, device);
  DeviceSwitch on(s.device_index());
  EMU_CHECK(emuStreamSynchronize(raw_stream(s)));
}

// ---- events: torch.emu.Event's handles ----
// The driver event is created by the first record (as the device guard's are). A handle names a
// slot; a call holds the slot while it runs, so event_destroy from another thread frees the driver
// event only once that call is done. Records of one event are serialised by the slot's mutex.

struct EventSlot {
  explicit EventSlot(bool enable_timing) : timing(enable_timing) {}
  ~EventSlot() {
    event_destroy(event);
  }
  EventSlot(const EventSlot&) = delete;
  EventSlot& operator=(const EventSlot&) = delete;
  std::mutex mutex;
  void* event = nullptr;
  const bool timing;
};

class EventTable {
 public:
  int64_t add(bool timing) {
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t handle = next_++;
    slots_.emplace(handle, std::make_shared<EventSlot>(timing));
    return handle;
  }
  std::shared_ptr<EventSlot> get(int64_t handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = slots_.find(handle);
    TORCH_CHECK(it != slots_.end(), "emu event handle ", handle, " names no live event (destroyed, or never created)");
    return it->second;
  }
  void remove(int64_t handle) {
    std::shared_ptr<EventSlot> gone; // released after the table's lock
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = slots_.find(handle);
    if (it == slots_.end())
      return;
    gone = std::move(it->second);
    slots_.erase(it);
  }

 private:
  std::mutex mutex_;
  int64_t next_ = 1;
  std::unordered_map<int64_t, std::shared_ptr<EventSlot>> slots_;
};

EventTable& events() {
  static auto* table = new EventTable(); // never destroyed: Python may free events during interpreter exit
  return *table;
}

void* recorded_event(const std::shared_ptr<EventSlot>& slot) {
  std::lock_guard<std::mutex> lock(slot->mutex);
  return slot->event;
}

int64_t event_create(bool enable_timing) {
  return events().add(enable_timing);
}
void event_destroy_op(int64_t handle) {
  events().remove(handle);
}

void event_record_op(int64_t handle, int64_t stream_id, int64_t device) {
  const auto slot = events().get(handle);
  std::lock_guard<std::mutex> lock(slot->mutex);
  event_record(&slot->event, stream_of(stream_id, device), slot->timing);
}

void event_block_op(int64_t handle, int64_t stream_id, int64_t device) {
  const auto slot = events().get(handle);
  event_block(recorded_event(slot), stream_of(stream_id, device));
}

bool event_query_op(int64_t handle) {
  const auto slot = events().get(handle);
  return event_query(recorded_event(slot));
}

void event_synchronize_op(int64_t handle) {
  const auto slot = events().get(handle);
  event_synchronize(recorded_event(slot));
}

double event_elapsed_time(int64_t start, int64_t end) {
  const auto a = events().get(start);
  const auto b = events().get(end);
  return event_elapsed_ms(recorded_event(a), recorded_event(b));
}

bool event_recorded(int64_t handle) {
  return recorded_event(events().get(handle)) != nullptr;
}

// ---- device memory ----

// The statistics under torch.cuda.memory_stats's names: "<stat>.<pool>.<metric>" and plain counters.
// inactive_split and the oversize counts are zero: this allocator never splits or over-sizes a block.
IntDict memory_stats_op(int64_t device) {
  const MemoryStats s = memory_stats(device_or_current(device));
  const std::pair<const char*, const StatArray*> arrays[] = {
      {"allocation", &s.allocation},
      {"segment", &s.segment},
      {"active", &s.active},
      {"allocated_bytes", &s.allocated_bytes},
      {"reserved_bytes", &s.reserved_bytes},
      {"active_bytes", &s.active_bytes},
      {"requested_bytes", &s.requested_bytes},
      {"inactive_split", nullptr},
      {"inactive_split_bytes", nullptr}};
  const char* pools[kPools] = {"all", "small_pool", "large_pool"};
  IntDict d;
  for (const auto& [name, array] : arrays) {
    for (size_t pool = 0; pool < kPools; ++pool) {
      const Stat stat = array != nullptr ? (*array)[pool] : Stat{};
      const std::string prefix = std::string(name) + "." + pools[pool] + ".";
      d.insert(prefix + "current", stat.current);
      d.insert(prefix + "peak", stat.peak);
      d.insert(prefix + "allocated", stat.allocated);
      d.insert(prefix + "freed", stat.freed);
    }
  }
  for (const char* name : {"oversize_allocations", "oversize_segments"}) {
    for (const char* metric : {"current", "peak", "allocated", "freed"})
      d.insert(std::string(name) + "." + metric, 0);
  }
  d.insert("num_alloc_retries", s.num_alloc_retries);
  d.insert("num_ooms", s.num_ooms);
  d.insert("num_sync_all_streams", s.num_sync_all_streams);
  d.insert("num_device_alloc", s.num_device_alloc);
  d.insert("num_device_free", s.num_device_free);
  d.insert("max_split_size", 0);
  return d;
}

void memory_reset_peak(int64_t device) {
  reset_peak_stats(device_or_current(device));
}
void memory_reset_accumulated(int64_t device) {
  reset_accumulated_stats(device_or_current(device));
}
void memory_empty_cache() {
  empty_cache();
}

// ---- pinned host memory ----

IntDict host_memory_stats() {
  const PinnedStats s = pinned_stats();
  IntDict d;
  d.insert("allocated_bytes.current", s.allocated_bytes);
  d.insert("allocated_bytes.peak", s.peak_allocated_bytes);
  d.insert("allocated_bytes.allocated", s.total_allocated_bytes);
  d.insert("allocated_bytes.freed", s.total_freed_bytes);
  d.insert("cached_bytes.current", s.cached_bytes);
  d.insert("reserved_bytes.peak", s.peak_reserved_bytes);
  d.insert("active_requests.current", s.active_requests);
  d.insert("segment.current", s.driver_blocks);
  d.insert("num_host_alloc", s.driver_allocs);
  d.insert("num_host_free", s.driver_frees);
  return d;
}

void host_memory_reset_peak() {
  reset_pinned_peak_stats();
}
void host_memory_reset_accumulated() {
  reset_pinned_accumulated_stats();
}

void host_memory_empty_cache() {
  empty_pinned_cache();
}

// ---- generators ----

// The device's default generator; Python seeds it and reads its state through torch.Generator's own methods.
// ("Generator?" is how the registry spells an at::Generator result.)
at::Generator default_generator_op(int64_t device) {
  return default_generator(device_or_current(device));
}

// ---- backend metadata ----

void backend_meta_set(const at::Tensor& t, const IntDict& values) {
  std::map<std::string, int64_t> copy;
  for (const auto& entry : values)
    copy[entry.key()] = entry.value();
  set_backend_meta(t, copy);
}

// FakeTensorMode.from_tensor's fake of an emu tensor gets its metadata through this (torch_emu/_fake_tensor.py).
void backend_meta_copy(const at::Tensor& src, const at::Tensor& dst) {
  copy_backend_meta(src, dst);
}

IntDict backend_meta_get(const at::Tensor& t) {
  IntDict d;
  for (const auto& [name, value] : backend_meta(t))
    d.insert(name, value);
  return d;
}

} // namespace

TORCH_LIBRARY_FRAGMENT(torch_emu, m) {
  m.def("build_features() -> Dict(str, int)", &build_features);
  m.def("driver_version() -> int", &driver_version);
  m.def("device_count() -> int", &device_count_op);
  m.def("device_current() -> int", &device_current);
  m.def("device_index(int device) -> int", &device_index);
  m.def("device_set(int device) -> ()", &device_set);
  m.def("device_synchronize(int device) -> ()", &device_synchronize);
  m.def(
      "device_properties(int device) -> (str name, int total_memory, int major, int minor, int multi_processor_count)",
      &device_properties);
  m.def("device_memory_info(int device) -> (int free, int total)", &device_memory_info);
  m.def("fork_is_bad() -> bool", &fork_is_bad);
  m.def("fork_check() -> ()", &fork_check);

  m.def("stream_current(int device) -> (int stream_id, int device_index)", &stream_current);
  m.def("stream_default(int device) -> (int stream_id, int device_index)", &stream_default);
  m.def("stream_from_pool(int device, int priority=0) -> (int stream_id, int device_index)", &stream_from_pool);
  m.def("stream_priority(int stream_id, int device) -> int", &stream_priority_of);
  m.def("stream_priority_range() -> (int least, int greatest)", &stream_priority_range);
  m.def("stream_set(int stream_id, int device) -> ()", &stream_set);
  m.def("stream_query(int stream_id, int device) -> bool", &stream_query);
  m.def("stream_synchronize(int stream_id, int device) -> ()", &stream_synchronize);

  m.def("event_create(bool enable_timing) -> int", &event_create);
  m.def("event_destroy(int event) -> ()", &event_destroy_op);
  m.def("event_record(int event, int stream_id, int device) -> ()", &event_record_op);
  m.def("event_block(int event, int stream_id, int device) -> ()", &event_block_op);
  m.def("event_query(int event) -> bool", &event_query_op);
  m.def("event_synchronize(int event) -> ()", &event_synchronize_op);
  m.def("event_elapsed_time(int start, int end) -> float", &event_elapsed_time);
  m.def("event_recorded(int event) -> bool", &event_recorded);

  m.def("memory_stats(int device) -> Dict(str, int)", &memory_stats_op);
  m.def("memory_reset_peak(int device) -> ()", &memory_reset_peak);
  m.def("memory_reset_accumulated(int device) -> ()", &memory_reset_accumulated);
  m.def("memory_empty_cache() -> ()", &memory_empty_cache);
  m.def("host_memory_stats() -> Dict(str, int)", &host_memory_stats);
  m.def("host_memory_empty_cache() -> ()", &host_memory_empty_cache);
  m.def("host_memory_reset_peak() -> ()", &host_memory_reset_peak);
  m.def("host_memory_reset_accumulated() -> ()", &host_memory_reset_accumulated);

  m.def("default_generator(int device) -> Generator?", &default_generator_op);

  m.def("backend_meta_set(Tensor tensor, Dict(str, int) values) -> ()", &backend_meta_set);
  m.def("backend_meta_get(Tensor tensor) -> Dict(str, int)", &backend_meta_get);
  m.def("backend_meta_copy(Tensor src, Tensor dst) -> ()", &backend_meta_copy);
}

} // namespace torch_emu
