// Caching allocator. Freed blocks stay cached for the stream that allocated them, so the
// next allocation of a similar size on that stream costs no driver call (emuFree waits for
// the whole device). A block that was also used on other streams (record_stream) goes back
// to the cache only once events recorded on those streams have completed (API 2.x).
#include "EmuAllocator.h"

#include <c10/util/Exception.h>

#include <array>
#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "EmuException.h"
#include "EmuFork.h"
#include "EmuStream.h"

namespace torch_emu {

namespace {

constexpr size_t kSmallRound = 512;
constexpr size_t kLargeThreshold = size_t(1) << 20;
constexpr size_t kLargeRound = size_t(2) << 20;

size_t round_size(size_t n) {
  if (n < kLargeThreshold) return (n + kSmallRound - 1) / kSmallRound * kSmallRound;
  return (n + kLargeRound - 1) / kLargeRound * kLargeRound;
}

struct Block {
  void* ptr = nullptr;
  size_t size = 0;
  c10::DeviceIndex device = 0;
  c10::StreamId stream = 0;                 // the stream it was allocated on
  std::unordered_set<c10::StreamId> used_on;  // other streams that used it
};

#if EMU_DRIVER_HAS_EVENTS
struct PendingFree {
  Block* block;
  std::vector<emuEvent_t> events;
};
#endif

class CachingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const c10::DeviceIndex device = current_device();
    if (n == 0) return {nullptr, nullptr, &no_delete, c10::Device(c10::DeviceType::PrivateUse1, device)};
    const c10::StreamId stream = getCurrentEmuStream(device).id();
    check_not_forked();  // device memory in a forked child would be freed by a driver whose workers are gone
    const size_t size = round_size(n);
    std::lock_guard<std::mutex> lock(mu_);
    process_pending();
    Block* block = take_cached(device, stream, size);
    if (block == nullptr) block = fresh_block(device, stream, size, n);
    active_[block->ptr] = block;
    auto& st = stats_[device];
    st.allocated_bytes += static_cast<int64_t>(block->size);
    st.peak_allocated_bytes = std::max(st.peak_allocated_bytes, st.allocated_bytes);
    st.allocations += 1;
    return {block->ptr, block->ptr, &deleter, c10::Device(c10::DeviceType::PrivateUse1, device)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &deleter; }

  // Device-to-device copy of raw bytes (used by Storage clone paths).
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    EMU_CHECK(emuMemcpy(dest, src, count, emuMemcpyDeviceToDevice));
  }

  void release(void* ptr) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(ptr);
    // A forked child frees what it inherited at exit: the driver's workers are gone, so
    // leave the memory to the process's end instead of recording events no one runs.
    if (in_bad_fork()) return;
    TORCH_INTERNAL_ASSERT(it != active_.end(), "emu allocator: freeing unknown pointer ", ptr);
    Block* block = it->second;
    active_.erase(it);
    stats_[block->device].allocated_bytes -= static_cast<int64_t>(block->size);
#if EMU_DRIVER_HAS_EVENTS
    if (!block->used_on.empty()) {
      PendingFree pending{block, {}};
      DeviceSwitch on(block->device);
      for (c10::StreamId id : block->used_on) {
        emuEvent_t event = nullptr;
        EMU_CHECK(emuEventCreateWithFlags(&event, emuEventDisableTiming));
        EMU_CHECK(emuEventRecord(event, raw_stream(c10::Stream(c10::Stream::UNSAFE,
                                                                c10::Device(c10::DeviceType::PrivateUse1, block->device), id))));
        pending.events.push_back(event);
      }
      block->used_on.clear();
      pending_.push_back(std::move(pending));
      return;
    }
#endif
    block->used_on.clear();
    cache(block);
  }

  void record(const c10::DataPtr& data_ptr, const c10::Stream& stream) {
    if (data_ptr.get() == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(data_ptr.get());
    if (it == active_.end()) return;  // not ours (e.g. a view of host memory)
    if (stream.id() != it->second->stream) it->second->used_on.insert(stream.id());
  }

  void empty() {
    std::lock_guard<std::mutex> lock(mu_);
#if EMU_DRIVER_HAS_EVENTS
    for (auto& pending : pending_) {
      for (emuEvent_t e : pending.events) {
        EMU_CHECK(emuEventSynchronize(e));
        EMU_CHECK(emuEventDestroy(e));
      }
      cache(pending.block);
    }
    pending_.clear();
#endif
    for (auto& entry : cached_) {
      Block* block = entry.second;
      DeviceSwitch on(block->device);
      EMU_CHECK(emuFree(block->ptr));
      stats_[block->device].reserved_bytes -= static_cast<int64_t>(block->size);
      stats_[block->device].driver_frees += 1;
      delete block;
    }
    cached_.clear();
  }

  MemoryStats stats(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_[device];
  }

  void reset_peak(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& st = stats_[device];
    st.peak_allocated_bytes = st.allocated_bytes;
    st.peak_reserved_bytes = st.reserved_bytes;
  }

 private:
  struct Key {
    c10::DeviceIndex device;
    c10::StreamId stream;
    size_t size;
    bool operator<(const Key& o) const {
      if (device != o.device) return device < o.device;
      if (stream != o.stream) return stream < o.stream;
      return size < o.size;
    }
  };

  static void no_delete(void*) {}
  static void deleter(void* ptr);

  Block* take_cached(c10::DeviceIndex device, c10::StreamId stream, size_t size) {
    // Smallest cached block of this device and stream that fits, unless it would waste more than half.
    auto it = cached_.lower_bound(Key{device, stream, size});
    if (it == cached_.end() || it->first.device != device || it->first.stream != stream) return nullptr;
    if (it->first.size > 2 * size && it->first.size >= kLargeThreshold) return nullptr;
    Block* block = it->second;
    cached_.erase(it);
    return block;
  }

  Block* fresh_block(c10::DeviceIndex device, c10::StreamId stream, size_t size, size_t asked) {
    void* ptr = nullptr;
    DeviceSwitch on(device);
    emuError_t err = emuMalloc(&ptr, size);
    if (err == emuErrorMemoryAllocation && !cached_.empty()) {
      // Out of memory: give the cache back to the driver and try once more.
      mu_.unlock();
      empty();
      mu_.lock();
      err = emuMalloc(&ptr, size);
    }
    if (err != emuSuccess) {
      size_t free_bytes = 0, total = 0;
      emuMemGetInfo(&free_bytes, &total);
      TORCH_CHECK_WITH(OutOfMemoryError, false, "emu out of memory: tried to allocate ", asked, " bytes on emu:",
                       int(device), " (", free_bytes, " of ", total, " bytes free; ", stats_[device].allocated_bytes,
                       " allocated by tensors, ", stats_[device].reserved_bytes, " reserved by the caching allocator). ",
                       "Driver: ", emuGetErrorName(err), ": ", emuGetLastErrorMessage());
    }
    auto* block = new Block{ptr, size, device, stream, {}};
    auto& st = stats_[device];
    st.reserved_bytes += static_cast<int64_t>(size);
    st.peak_reserved_bytes = std::max(st.peak_reserved_bytes, st.reserved_bytes);
    st.driver_mallocs += 1;
    return block;
  }

  void cache(Block* block) { cached_.emplace(Key{block->device, block->stream, block->size}, block); }

  void process_pending() {
#if EMU_DRIVER_HAS_EVENTS
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool done = true;
      for (emuEvent_t e : it->events) done = done && emuEventQuery(e) == emuSuccess;
      if (!done) {
        ++it;
        continue;
      }
      for (emuEvent_t e : it->events) emuEventDestroy(e);
      cache(it->block);
      it = pending_.erase(it);
    }
#endif
  }

  std::mutex mu_;
  std::unordered_map<void*, Block*> active_;
  std::multimap<Key, Block*> cached_;
  std::array<MemoryStats, EMU_MAX_DEVICES> stats_{};  // indexed by device: the driver's bound
#if EMU_DRIVER_HAS_EVENTS
  std::vector<PendingFree> pending_;
#endif
};

CachingAllocator& instance() {
  static auto* allocator = new CachingAllocator();  // outlives every tensor: never destroyed
  return *allocator;
}

void CachingAllocator::deleter(void* ptr) { instance().release(ptr); }

}  // namespace

c10::Allocator* emu_allocator() { return &instance(); }
MemoryStats memory_stats(c10::DeviceIndex device) { return instance().stats(device); }
void reset_peak_stats(c10::DeviceIndex device) { instance().reset_peak(device); }
void empty_cache() { instance().empty(); }
void record_stream(const c10::DataPtr& data_ptr, const c10::Stream& stream) { instance().record(data_ptr, stream); }

// Registered for DeviceType::PrivateUse1: at::empty on emu reaches it through GetAllocator.
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &instance());

}  // namespace torch_emu
