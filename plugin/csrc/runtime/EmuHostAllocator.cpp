// Caching pinned host allocator. Blocks come from emuHostAlloc rounded up to a power of two, and
// a freed block goes back to the cache at once unless a copy on some stream used it: then an
// event is recorded on each such stream and the block is reused only when they have completed
// (the driver's emuFreeHost would wait for the copies too, but blocking there stalls the host).
#include "EmuHostAllocator.h"

#include <c10/util/Exception.h>

#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "../TorchCompat.h"
#include "EmuException.h"
#include "EmuFork.h"
#include "EmuStream.h"

namespace torch_emu {

#if EMU_DRIVER_HAS_HOST_ALLOC

namespace {

size_t round_up_power_of_two(size_t n) {
  size_t size = 4096;  // one page: the driver maps whole pages anyway
  while (size < n) size <<= 1;
  return size;
}

void delete_pinned(void* ptr);

struct PinnedBlock {
  void* ptr = nullptr;
  size_t size = 0;
  bool in_use = false;
  std::set<std::pair<c10::DeviceIndex, c10::StreamId>> used_on;  // streams whose queued work used it
  std::vector<emuEvent_t> events;                               // recorded on them when it was freed
};

class HostCache {
 public:
  c10::DataPtr allocate(size_t n) {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return {nullptr, nullptr, &no_delete, cpu};
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
    return {block->ptr, block->ptr, &delete_pinned, cpu};
  }

  void release(void* ptr) {
    // A forked child frees what it inherited at exit: the driver's workers are gone, so leave
    // the memory to the process's end instead of recording events no one runs.
    if (in_bad_fork()) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(ptr);
    TORCH_INTERNAL_ASSERT(it != blocks_.end() && it->second->in_use, "emu pinned allocator: freeing unknown pointer ", ptr);
    PinnedBlock* block = it->second;
    block->in_use = false;
    stats_.allocated_bytes -= static_cast<int64_t>(block->size);
    stats_.cached_bytes += static_cast<int64_t>(block->size);
    if (block->used_on.empty()) {
      free_.emplace(block->size, block);
      return;
    }
    for (const auto& used : block->used_on) {
      DeviceSwitch on(used.first);
      emuEvent_t event = nullptr;
      EMU_CHECK(emuEventCreateWithFlags(&event, emuEventDisableTiming));
      EMU_CHECK(emuEventRecord(event, raw_stream(c10::Stream(c10::Stream::UNSAFE,
                                                             c10::Device(c10::DeviceType::PrivateUse1, used.first), used.second))));
      block->events.push_back(event);
    }
    block->used_on.clear();
    waiting_.push_back(block);
  }

  bool record(const void* ptr, const c10::Stream& stream) {
    std::lock_guard<std::mutex> lock(mu_);
    PinnedBlock* block = holding(ptr);
    if (block == nullptr) return false;
    block->used_on.emplace(stream.device_index(), stream.id());
    return true;
  }

  PinnedStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void empty() {
    std::lock_guard<std::mutex> lock(mu_);
    process_events();
    release_free_blocks();
  }

 private:
  static void no_delete(void*) {}

  // Caller holds mu_. The live or cached block whose bytes contain ptr.
  PinnedBlock* holding(const void* ptr) {
    auto it = blocks_.upper_bound(const_cast<void*>(ptr));
    if (it == blocks_.begin()) return nullptr;
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
      for (emuEvent_t e : block->events) (void)emuEventDestroy(e);
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
      delete block;
    }
    free_.clear();
  }

  std::mutex mu_;
  std::map<void*, PinnedBlock*> blocks_;          // every block from the driver, by address
  std::multimap<size_t, PinnedBlock*> free_;      // reusable now, by size
  std::vector<PinnedBlock*> waiting_;             // freed, but queued work may still use them
  PinnedStats stats_;
};

HostCache& cache() {
  static auto* instance = new HostCache();  // outlives every pinned tensor: never destroyed
  return *instance;
}

void delete_pinned(void* ptr) { cache().release(ptr); }

// c10::Allocator::allocate is const up to torch 2.2 (EMU_ALLOCATE_CONST): the state lives in HostCache.
class PinnedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) EMU_ALLOCATE_CONST override { return cache().allocate(n); }
  c10::DeleterFnPtr raw_deleter() const override { return &delete_pinned; }
#if EMU_ALLOCATOR_HAS_COPY_DATA
  void copy_data(void* dest, const void* src, std::size_t count) const override { std::memcpy(dest, src, count); }
#endif
};

}  // namespace

bool pinned_memory_available() { return true; }

c10::Allocator* pinned_host_allocator() {
  static auto* allocator = new PinnedHostAllocator();
  return allocator;
}

bool is_pinned_host(const void* ptr) {
  if (ptr == nullptr) return false;
  emuPointerAttributes attrs{};
  EMU_CHECK(emuPointerGetAttributes(&attrs, ptr));
  return attrs.type == emuMemoryTypePinnedHost;
}

bool record_pinned_use(const void* ptr, const c10::Stream& stream) { return cache().record(ptr, stream); }
PinnedStats pinned_stats() { return cache().stats(); }
void empty_pinned_cache() { cache().empty(); }

#else  // driver API older than 2.2: no host allocation in the driver

bool pinned_memory_available() { return false; }

c10::Allocator* pinned_host_allocator() {
  TORCH_CHECK(false, "pinned host memory is not available: it needs emu driver API 2.2 (emuHostAlloc); this torch_emu "
              "was built against driver API ", EMU_DRIVER_VERSION_MAJOR, ".", EMU_DRIVER_VERSION_MINOR);
}

bool is_pinned_host(const void* /*ptr*/) { return false; }
bool record_pinned_use(const void* /*ptr*/, const c10::Stream& /*stream*/) { return false; }
PinnedStats pinned_stats() { return {}; }
void empty_pinned_cache() {}

#endif

}  // namespace torch_emu
