// Caching pinned host allocator. Blocks come from emuHostAlloc rounded up to a power of two, and
// a freed block goes back to the cache at once unless a copy on some stream used it: then an
// event is recorded on each such stream and the block is reused only when they have completed
// (the driver's emuFreeHost would wait for the copies too, but blocking there stalls the host).
// From torch 2.8 the same cache is torch's host allocator for PrivateUse1 (at::getHostAllocator),
// which torch.accelerator's host-memory calls and Tensor.pin_memory() reach.
#include "runtime/EmuHostAllocator.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "TorchCompat.h"
#if EMU_HAS_HOST_ALLOCATOR
#include <ATen/core/CachingHostAllocator.h>
#endif
#include "runtime/EmuException.h"
#include "runtime/EmuFork.h"
#include "runtime/EmuStream.h"

namespace torch_emu {

#if EMU_DRIVER_HAS_HOST_ALLOC

namespace {

size_t round_up_power_of_two(size_t n) {
  size_t size = 4096; // one page: the driver maps whole pages anyway
  while (size < n)
    size <<= 1;
  return size;
}

void delete_pinned(void* ptr);

struct PinnedBlock {
  void* ptr = nullptr;
  size_t size = 0;
  bool in_use = false;
  std::set<std::pair<c10::DeviceIndex, c10::StreamId>> used_on; // streams whose queued work used it
  std::vector<emuEvent_t> events; // recorded on them when it was freed
};

class HostCache {
 public:
  c10::DataPtr allocate(size_t n) {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0)
      return {nullptr, nullptr, &no_delete, cpu};
    const size_t size = round_up_power_of_two(n);
    std::lock_guard<std::mutex> lock(mu_);
    process_events();
    PinnedBlock* block = nullptr;
    auto it = free_.find(size);
    if (it != free_.end()) {
      block = it->second;
      free_.erase(it);
      stats_.cached_bytes -= static_cast<int64_t>(size);
    } else {
      void* ptr = nullptr;
      emuError_t err = emuHostAlloc(&ptr, size, emuHostAllocDefault);
      if (err == emuErrorMemoryAllocation) {
        release_free_blocks();
        err = emuHostAlloc(&ptr, size, emuHostAllocDefault);
      }
      EMU_CHECK(err);
      block = new PinnedBlock{ptr, size, false, {}, {}};
      blocks_[ptr] = block;
      stats_.driver_allocs += 1;
    }
    block->in_use = true;
    stats_.allocated_bytes += static_cast<int64_t>(size);
    stats_.active_requests += 1;
    stats_.total_allocated_bytes += static_cast<int64_t>(size);
    stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.allocated_bytes + stats_.cached_bytes);
    return {block->ptr, block->ptr, &delete_pinned, cpu};
  }

  void release(void* ptr) {
    // A forked child frees what it inherited at exit: the driver's workers are gone, so leave
    // the memory to the process's end instead of recording events no one runs.
    if (in_bad_fork())
      return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(ptr);
    TORCH_INTERNAL_ASSERT(
        it != blocks_.end() && it->second->in_use, "emu pinned allocator: freeing unknown pointer ", ptr);
    PinnedBlock* block = it->second;
    block->in_use = false;
    stats_.allocated_bytes -= static_cast<int64_t>(block->size);
    stats_.cached_bytes += static_cast<int64_t>(block->size);
    stats_.active_requests -= 1;
    stats_.total_freed_bytes += static_cast<int64_t>(block->size);
    if (block->used_on.empty()) {
      free_.emplace(block->size, block);
      return;
    }
    for (const auto& used : block->used_on) {
      DeviceSwitch on(used.first);
      emuEvent_t event = nullptr;
      EMU_CHECK(emuEventCreateWithFlags(&event, emuEventDisableTiming));
      EMU_CHECK(emuEventRecord(
          event,
          raw_stream(
              c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, used.first), used.second))));
      block->events.push_back(event);
    }
    block->used_on.clear();
    waiting_.push_back(block);
  }

  bool record(const void* ptr, const c10::Stream& stream) {
    std::lock_guard<std::mutex> lock(mu_);
    PinnedBlock* block = holding(ptr);
    if (block == nullptr)
      return false;
    block->used_on.emplace(stream.device_index(), stream.id());
    return true;
  }

  PinnedStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    PinnedStats out = stats_;
    out.driver_blocks = static_cast<int64_t>(blocks_.size());
    return out;
  }

  void empty() {
    std::lock_guard<std::mutex> lock(mu_);
    process_events();
    release_free_blocks();
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
    stats_.peak_reserved_bytes = stats_.allocated_bytes + stats_.cached_bytes;
  }

  void reset_accumulated() {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.driver_allocs = 0;
    stats_.driver_frees = 0;
    stats_.total_allocated_bytes = 0;
    stats_.total_freed_bytes = 0;
  }

 private:
  static void no_delete(void*) {}

  // Caller holds mu_. The live or cached block whose bytes contain ptr.
  PinnedBlock* holding(const void* ptr) {
    auto it = blocks_.upper_bound(const_cast<void*>(ptr));
    if (it == blocks_.begin())
      return nullptr;
    --it;
    PinnedBlock* block = it->second;
    const auto* start = static_cast<const char*>(block->ptr);
    return static_cast<const char*>(ptr) < start + block->size ? block : nullptr;
  }

  // Caller holds mu_. Blocks whose streams have passed their events become reusable.
  void process_events() {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      PinnedBlock* block = *it;
      bool done = true;
      for (emuEvent_t e : block->events) {
        const emuError_t err = emuEventQuery(e);
        if (err == emuErrorNotReady) {
          done = false;
          break;
        }
        EMU_CHECK(err);
      }
      if (!done) {
        ++it;
        continue;
      }
      for (emuEvent_t e : block->events)
        (void)emuEventDestroy(e);
      block->events.clear();
      free_.emplace(block->size, block);
      it = waiting_.erase(it);
    }
  }

  // Caller holds mu_.
  void release_free_blocks() {
    for (auto& entry : free_) {
      PinnedBlock* block = entry.second;
      EMU_CHECK(emuFreeHost(block->ptr));
      blocks_.erase(block->ptr);
      stats_.cached_bytes -= static_cast<int64_t>(block->size);
      stats_.driver_frees += 1;
      delete block;
    }
    free_.clear();
  }

  std::mutex mu_;
  std::map<void*, PinnedBlock*> blocks_; // every block from the driver, by address
  std::multimap<size_t, PinnedBlock*> free_; // reusable now, by size
  std::vector<PinnedBlock*> waiting_; // freed, but queued work may still use them
  PinnedStats stats_;
};

HostCache& cache() {
  static auto* instance = new HostCache(); // outlives every pinned tensor: never destroyed
  return *instance;
}

void delete_pinned(void* ptr) {
  cache().release(ptr);
}

#if EMU_HAS_HOST_ALLOCATOR
using PinnedAllocatorBase = at::HostAllocator;

// at::HostStats changed its fields after 2.9 (allocation/segment/allocated_bytes/reserved_bytes became
// active_requests/active_bytes/allocations/allocated_bytes, allocated_bytes changing meaning): the
// overload is picked by which fields the release's struct has, so one source serves both.
template <class Stats>
auto fill_host_stats(Stats& out, const PinnedStats& s, int) -> decltype(out.active_bytes, void()) {
  out.active_requests.current = s.active_requests;
  out.active_bytes.current = s.allocated_bytes;
  out.active_bytes.peak = s.peak_allocated_bytes;
  out.active_bytes.allocated = s.total_allocated_bytes;
  out.active_bytes.freed = s.total_freed_bytes;
  out.allocations.current = s.driver_blocks;
  out.allocated_bytes.current = s.allocated_bytes + s.cached_bytes;
  out.allocated_bytes.peak = s.peak_reserved_bytes;
  out.num_host_alloc = s.driver_allocs;
  out.num_host_free = s.driver_frees;
}

template <class Stats>
auto fill_host_stats(Stats& out, const PinnedStats& s, long) -> decltype(out.reserved_bytes, void()) {
  out.allocation.current = s.active_requests;
  out.segment.current = s.driver_blocks;
  out.allocated_bytes.current = s.allocated_bytes;
  out.allocated_bytes.peak = s.peak_allocated_bytes;
  out.allocated_bytes.allocated = s.total_allocated_bytes;
  out.allocated_bytes.freed = s.total_freed_bytes;
  out.reserved_bytes.current = s.allocated_bytes + s.cached_bytes;
  out.reserved_bytes.peak = s.peak_reserved_bytes;
  out.num_host_alloc = s.driver_allocs;
  out.num_host_free = s.driver_frees;
}
#else
using PinnedAllocatorBase = c10::Allocator;
#endif

// c10::Allocator::allocate is const up to torch 2.2 (EMU_ALLOCATE_CONST): the state lives in HostCache.
class PinnedHostAllocator final : public PinnedAllocatorBase {
 public:
  c10::DataPtr allocate(size_t n) EMU_ALLOCATE_CONST override {
    return cache().allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const override {
    return &delete_pinned;
  }
#if EMU_ALLOCATOR_HAS_COPY_DATA
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
#endif
#if EMU_HAS_HOST_ALLOCATOR
  // ctx is the DataPtr's context, the block's start; ptr may point inside the block.
  bool record_event(void* ptr, void* ctx, c10::Stream stream) override {
    return cache().record(ctx != nullptr ? ctx : ptr, stream);
  }
  void empty_cache() override {
    cache().empty();
  }
  at::HostStats get_stats() override {
    at::HostStats out;
    fill_host_stats(out, cache().stats(), 0);
    return out;
  }
  void reset_accumulated_stats() override {
    cache().reset_accumulated();
  }
  void reset_peak_stats() override {
    cache().reset_peak();
  }
#endif
};

PinnedHostAllocator* the_pinned_allocator() {
  static auto* allocator = new PinnedHostAllocator(); // registered with torch below: never destroyed
  return allocator;
}

#if EMU_HAS_HOST_ALLOCATOR
// torch's host allocator for the backend: without it, at::getHostAllocator(PrivateUse1) is null and
// torch.accelerator.empty_host_cache() (which torch.accelerator.Graph calls) dereferences it.
const bool host_allocator_registered = [] {
  at::setHostAllocator(c10::DeviceType::PrivateUse1, the_pinned_allocator());
  return true;
}();
#endif

} // namespace

bool pinned_memory_available() {
  return true;
}

c10::Allocator* pinned_host_allocator() {
  return the_pinned_allocator();
}

bool is_pinned_host(const void* ptr) {
  if (ptr == nullptr)
    return false;
  emuPointerAttributes attrs{};
  EMU_CHECK(emuPointerGetAttributes(&attrs, ptr));
  return attrs.type == emuMemoryTypePinnedHost;
}

bool record_pinned_use(const void* ptr, const c10::Stream& stream) {
  return cache().record(ptr, stream);
}
PinnedStats pinned_stats() {
  return cache().stats();
}
void reset_pinned_peak_stats() {
  cache().reset_peak();
}
void reset_pinned_accumulated_stats() {
  cache().reset_accumulated();
}
void empty_pinned_cache() {
  cache().empty();
}

#else // driver API older than 2.2: no host allocation in the driver

bool pinned_memory_available() {
  return false;
}

namespace {

[[noreturn]] void no_pinned_memory() {
  TORCH_CHECK(
      false,
      "pinned host memory is not available: it needs emu driver API 2.2 (emuHostAlloc); this torch_emu "
      "was built against driver API ",
      EMU_DRIVER_VERSION_MAJOR,
      ".",
      EMU_DRIVER_VERSION_MINOR);
}

#if EMU_HAS_HOST_ALLOCATOR
// Still registered: torch.accelerator's host-memory calls must find an allocator (empty_host_cache
// dereferences it). Emptying and statistics have nothing to do; allocating raises "not available".
class NoPinnedHostAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t /*n*/) override {
    no_pinned_memory();
  }
  c10::DeleterFnPtr raw_deleter() const override {
    return nullptr;
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
  bool record_event(void* /*ptr*/, void* /*ctx*/, c10::Stream /*stream*/) override {
    return false;
  }
  void empty_cache() override {}
  at::HostStats get_stats() override {
    return {};
  }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}
};

const bool host_allocator_registered = [] {
  static auto* allocator = new NoPinnedHostAllocator();
  at::setHostAllocator(c10::DeviceType::PrivateUse1, allocator);
  return true;
}();
#endif

} // namespace

c10::Allocator* pinned_host_allocator() {
  no_pinned_memory();
}

bool is_pinned_host(const void* /*ptr*/) {
  return false;
}
bool record_pinned_use(const void* /*ptr*/, const c10::Stream& /*stream*/) {
  return false;
}
PinnedStats pinned_stats() {
  return {};
}
void reset_pinned_peak_stats() {}
void reset_pinned_accumulated_stats() {}
void empty_pinned_cache() {}

#endif

} // namespace torch_emu
