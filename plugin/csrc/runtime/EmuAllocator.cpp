// Caching allocator. Freed blocks stay cached for the stream that allocated them, so the
// next allocation of a similar size on that stream costs no driver call (emuFree waits for
// the whole device). A block that was also used on other streams (record_stream) goes back
// to the cache only once events recorded on those streams have completed (API 2.x).
// From torch 2.9 it is a c10::DeviceAllocator, which torch.accelerator's memory functions require.
#include "runtime/EmuAllocator.h"

#include <c10/util/Exception.h>

#include "TorchCompat.h"
#if EMU_HAS_DEVICE_ALLOCATOR
#include <c10/core/CachingDeviceAllocator.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/EmuException.h"
#include "runtime/EmuFork.h"
#include "runtime/EmuStream.h"

namespace torch_emu {

namespace {

constexpr size_t kSmallRound = 512;
constexpr size_t kLargeThreshold = size_t(1) << 20;
constexpr size_t kLargeRound = size_t(2) << 20;

Pool pool_of(size_t size) {
  return size < kLargeThreshold ? Pool::Small : Pool::Large;
}

// Counts amount in the aggregate and in the block's pool.
void increase(StatArray& stats, size_t block_size, int64_t amount) {
  stats[static_cast<size_t>(Pool::All)].increase(amount);
  stats[static_cast<size_t>(pool_of(block_size))].increase(amount);
}
void decrease(StatArray& stats, size_t block_size, int64_t amount) {
  stats[static_cast<size_t>(Pool::All)].decrease(amount);
  stats[static_cast<size_t>(pool_of(block_size))].decrease(amount);
}

constexpr std::array<StatArray MemoryStats::*, 7> kStatArrays = {
    &MemoryStats::allocation,
    &MemoryStats::segment,
    &MemoryStats::active,
    &MemoryStats::allocated_bytes,
    &MemoryStats::reserved_bytes,
    &MemoryStats::active_bytes,
    &MemoryStats::requested_bytes};

struct Block {
  void* ptr = nullptr;
  size_t size = 0;
  size_t requested = 0; // what the tensor asked for, before rounding
  c10::DeviceIndex device = 0;
  c10::StreamId stream = 0; // the stream it was allocated on
  std::unordered_set<c10::StreamId> used_on; // other streams that used it
  PoolId pool{0, 0}; // a graph's private pool, or (0, 0): the general cache
  // Memory history's stacks: of the tensor's allocation, of the driver allocation, of the tensor's free.
  StackContext stack;
  StackContext segment_stack;
  StackContext free_stack;
};

// A device's recorded events, oldest dropped first once max_entries are held (as CUDA's alloc_trace).
class TraceRing {
 public:
  void push(TraceEntry entry, size_t max_entries) {
    if (entries_.size() < max_entries) {
      entries_.push_back(std::move(entry));
      return;
    }
    if (entries_.size() > max_entries) { // max_entries shrank: keep the newest
      entries_ = ordered();
      entries_.erase(entries_.begin(), entries_.end() - static_cast<std::ptrdiff_t>(max_entries));
      next_ = 0;
    }
    entries_[next_] = std::move(entry);
    next_ = (next_ + 1) % max_entries;
  }
  std::vector<TraceEntry> ordered() const {
    std::vector<TraceEntry> out(entries_.begin() + static_cast<std::ptrdiff_t>(next_), entries_.end());
    out.insert(out.end(), entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(next_));
    return out;
  }
  void clear() {
    entries_.clear();
    next_ = 0;
  }

 private:
  std::vector<TraceEntry> entries_;
  size_t next_ = 0; // where the next entry overwrites, once full
};

// A capture's private pool: its free blocks by size, and the graphs that use it.
struct PrivatePool {
  int use_count = 0;
  size_t reserved = 0; // bytes of the pool's blocks, in tensors or free
  std::multimap<size_t, Block*> free_blocks;
};

#if EMU_DRIVER_HAS_EVENTS
struct PendingFree {
  Block* block;
  std::vector<emuEvent_t> events;
};
#endif

#if EMU_HAS_DEVICE_ALLOCATOR
using AllocatorBase = c10::DeviceAllocator;

// c10's statistics types of this release (the struct grows from release to release; only fields
// that every release from 2.9 has are set, the rest keep their zero defaults).
using C10DeviceStats = c10::CachingDeviceAllocator::DeviceStats;
using C10StatArray = decltype(C10DeviceStats::allocation);

C10StatArray as_c10(const StatArray& stats) {
  C10StatArray out{};
  for (size_t i = 0; i < kPools; ++i) {
    out[i].current = stats[i].current;
    out[i].peak = stats[i].peak;
    out[i].allocated = stats[i].allocated;
    out[i].freed = stats[i].freed;
  }
  return out;
}

C10DeviceStats as_c10(const MemoryStats& s) {
  C10DeviceStats out;
  out.allocation = as_c10(s.allocation);
  out.segment = as_c10(s.segment);
  out.active = as_c10(s.active);
  out.allocated_bytes = as_c10(s.allocated_bytes);
  out.reserved_bytes = as_c10(s.reserved_bytes);
  out.active_bytes = as_c10(s.active_bytes);
  out.requested_bytes = as_c10(s.requested_bytes);
  out.num_alloc_retries = s.num_alloc_retries;
  out.num_ooms = s.num_ooms;
  out.num_sync_all_streams = s.num_sync_all_streams;
  out.num_device_alloc = s.num_device_alloc;
  out.num_device_free = s.num_device_free;
  return out;
}
#else
using AllocatorBase = c10::Allocator;
#endif

// torch.profiler's profile_memory and memory timeline see emu allocations and frees (a free as a negative
// size), with the device's totals after it, as CUDA's allocator reports them.
void report_to_profiler(void* ptr, int64_t bytes, const MemoryStats& st, c10::DeviceIndex device) {
  if (!c10::memoryProfilingEnabled())
    return;
  c10::reportMemoryUsageToProfiler(
      ptr,
      bytes,
      static_cast<size_t>(st.allocated_bytes[static_cast<size_t>(Pool::All)].current),
      static_cast<size_t>(st.reserved_bytes[static_cast<size_t>(Pool::All)].current),
      c10::Device(c10::DeviceType::PrivateUse1, device));
}

thread_local StackContext t_free_stack; // the free being released on this thread: see CachingAllocator::deleter

class CachingAllocator final : public AllocatorBase {
 public:
  c10::DataPtr allocate(size_t n) override {
    const c10::DeviceIndex device = current_device();
    if (n == 0)
      return {nullptr, nullptr, &no_delete, c10::Device(c10::DeviceType::PrivateUse1, device)};
    const c10::StreamId stream = getCurrentEmuStream(device).id();
    check_not_forked(); // device memory in a forked child would be freed by a driver whose workers are gone
    const size_t size = round_size(n);
    // Taken before mu_: gathering a stack takes the GIL, and a Python thread holding it may wait for mu_.
    StackContext stack = stack_for(HistoryContext::State);
    try {
      return allocate_locked(device, stream, size, n, stack);
    } catch (const c10::OutOfMemoryError&) {
      dump_oom_snapshot();
      throw;
    }
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &deleter;
  }

  // Device-to-device copy of raw bytes (used by Storage clone paths).
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    EMU_CHECK(emuMemcpy(dest, src, count, emuMemcpyDeviceToDevice));
  }

  void release(void* ptr) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(ptr);
    StackContext stack = std::move(t_free_stack); // deleter() took it before mu_
    // A forked child frees what it inherited at exit: the driver's workers are gone, so
    // leave the memory to the process's end instead of recording events no one runs.
    if (in_bad_fork())
      return;
    TORCH_INTERNAL_ASSERT(it != active_.end(), "emu allocator: freeing unknown pointer ", ptr);
    Block* block = it->second;
    active_.erase(it);
    auto& st = stats_[block->device];
    decrease(st.allocation, block->size, 1);
    decrease(st.allocated_bytes, block->size, static_cast<int64_t>(block->size));
    decrease(st.requested_bytes, block->size, static_cast<int64_t>(block->requested));
    report_to_profiler(block->ptr, -static_cast<int64_t>(block->size), st, block->device);
    record_event(block->device, TraceAction::FreeRequested, block->ptr, block->size, block->stream, stack);
    block->free_stack = std::move(stack);
#if EMU_DRIVER_HAS_EVENTS
    if (!block->used_on.empty()) {
      PendingFree pending{block, {}};
      DeviceSwitch on(block->device);
      for (c10::StreamId id : block->used_on) {
        emuEvent_t event = nullptr;
        EMU_CHECK(emuEventCreateWithFlags(&event, emuEventDisableTiming));
        EMU_CHECK(emuEventRecord(
            event,
            raw_stream(
                c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, block->device), id))));
        pending.events.push_back(event);
      }
      block->used_on.clear();
      pending_.push_back(std::move(pending));
      return;
    }
#endif
    block->used_on.clear();
    retire(block);
  }

  // allocate() after the stack is taken.
  c10::DataPtr allocate_locked(
      c10::DeviceIndex device,
      c10::StreamId stream,
      size_t size,
      size_t n,
      const StackContext& stack) {
    std::lock_guard<std::mutex> lock(mu_);
    process_pending();
    PrivatePool* pool = capturing_pool(device, stream);
    Block* block = pool != nullptr ? take_from_pool(*pool, size) : take_cached(device, stream, size);
    if (block == nullptr) {
      block = fresh_block(device, stream, size, n, stack);
      if (pool != nullptr) {
        block->pool = capturing_.at(device).first;
        pool->reserved += block->size;
      }
    }
    block->requested = n;
    block->stack = stack;
    record_event(device, TraceAction::Alloc, block->ptr, block->size, stream, stack);
    active_[block->ptr] = block;
    auto& st = stats_[device];
    increase(st.allocation, block->size, 1);
    increase(st.allocated_bytes, block->size, static_cast<int64_t>(block->size));
    increase(st.requested_bytes, block->size, static_cast<int64_t>(n));
    increase(st.active, block->size, 1);
    increase(st.active_bytes, block->size, static_cast<int64_t>(block->size));
    report_to_profiler(block->ptr, static_cast<int64_t>(block->size), st, device);
    return {block->ptr, block->ptr, &deleter, c10::Device(c10::DeviceType::PrivateUse1, device)};
  }

  void record(const c10::DataPtr& data_ptr, const c10::Stream& stream) {
    if (data_ptr.get() == nullptr)
      return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(data_ptr.get());
    if (it == active_.end())
      return; // not ours (e.g. a view of host memory)
    if (stream.id() != it->second->stream)
      it->second->used_on.insert(stream.id());
  }

  void empty() {
    // Emptying waits for the devices (emuFree, the pending blocks' events). A kernel still queued may hold
    // the last reference to a tensor, and its end frees that block through release(), which takes mu_:
    // waiting with mu_ held deadlocked (torch.emu.empty_cache() right after a dropped tensor's kernel was
    // queued). So the devices are drained first, without the lock.
    if (!in_bad_fork()) {
      for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
        DeviceSwitch on(d);
        EMU_CHECK(emuDeviceSynchronize());
      }
    }
    StackContext stack = stack_for(HistoryContext::All);
    std::lock_guard<std::mutex> lock(mu_);
    empty_locked(stack);
  }

  MemoryStats stats(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_[checked_device_index(device)];
  }

  void reset_peak(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& st = stats_[checked_device_index(device)];
    for (auto member : kStatArrays)
      for (Stat& stat : st.*member)
        stat.peak = stat.current;
  }

  void reset_accumulated(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& st = stats_[checked_device_index(device)];
    for (auto member : kStatArrays) {
      for (Stat& stat : st.*member) {
        stat.allocated = 0;
        stat.freed = 0;
      }
    }
    st.num_alloc_retries = 0;
    st.num_ooms = 0;
    st.num_sync_all_streams = 0;
    st.num_device_alloc = 0;
    st.num_device_free = 0;
  }

#if EMU_HAS_DEVICE_ALLOCATOR
  // c10::DeviceAllocator: what torch.accelerator's memory functions and c10::getDeviceAllocator reach.
  // A forked child reports "not initialized", so torch.accelerator.empty_cache leaves the parent's
  // driver state alone there, as it does for a CUDA allocator that never started.
  bool initialized() override {
    return !in_bad_fork();
  }
  void emptyCache(c10::MempoolId_t mempool_id) override {
    TORCH_CHECK(
        mempool_id.first == 0 && mempool_id.second == 0,
        "emu has no private memory pools: got pool (",
        mempool_id.first,
        ", ",
        mempool_id.second,
        ")");
    empty();
  }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    record(ptr, stream);
  }
  C10DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    return as_c10(stats(device));
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    reset_accumulated(device);
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    reset_peak(device);
  }
  // Overrides DeviceAllocator::getMemoryInfo where the release declares it (torch.accelerator.get_memory_info;
  // not in 2.9), so no `override`: on 2.9 it is a plain member. The smoke test proves it is reached.
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) {
    return memory_info(device);
  }
#endif

 private:
  struct Key {
    c10::DeviceIndex device;
    c10::StreamId stream;
    size_t size;
    bool operator<(const Key& o) const {
      if (device != o.device)
        return device < o.device;
      if (stream != o.stream)
        return stream < o.stream;
      return size < o.size;
    }
  };

  static void no_delete(void*) {}
  static void deleter(void* ptr);

  Block* take_cached(c10::DeviceIndex device, c10::StreamId stream, size_t size) {
    // Smallest cached block of this device and stream that fits, unless it would waste more than half.
    auto it = cached_.lower_bound(Key{device, stream, size});
    if (it == cached_.end() || it->first.device != device || it->first.stream != stream)
      return nullptr;
    if (it->first.size > 2 * size && it->first.size >= kLargeThreshold)
      return nullptr;
    Block* block = it->second;
    cached_.erase(it);
    return block;
  }

  Block* fresh_block(
      c10::DeviceIndex device,
      c10::StreamId stream,
      size_t size,
      size_t asked,
      const StackContext& stack) {
    void* ptr = nullptr;
    DeviceSwitch on(device);
    auto& st = stats_[device];
    emuError_t err = emuMalloc(&ptr, size);
    if (err == emuErrorMemoryAllocation && (!cached_.empty() || has_pending())) {
      // Out of memory: give the cache back to the driver and try once more.
      st.num_alloc_retries += 1;
      empty_locked(stack);
      err = emuMalloc(&ptr, size);
    }
    if (err != emuSuccess) {
      if (err == emuErrorMemoryAllocation)
        st.num_ooms += 1;
      size_t free_bytes = 0, total = 0;
      emuMemGetInfo(&free_bytes, &total);
      record_event(device, TraceAction::Oom, 0, size, stream, stack, free_bytes);
      const Stat& allocated = st.allocated_bytes[static_cast<size_t>(Pool::All)];
      const Stat& reserved = st.reserved_bytes[static_cast<size_t>(Pool::All)];
      TORCH_CHECK_WITH(
          OutOfMemoryError,
          false,
          "emu out of memory: tried to allocate ",
          asked,
          " bytes on emu:",
          int(device),
          " (",
          free_bytes,
          " of ",
          total,
          " bytes free; ",
          allocated.current,
          " allocated by tensors, ",
          reserved.current,
          " reserved by the caching allocator). ",
          "Driver: ",
          emuGetErrorName(err),
          ": ",
          emuGetLastErrorMessage());
    }
    auto* block = new Block{ptr, size, 0, device, stream, {}, PoolId{0, 0}, nullptr, stack, nullptr};
    record_event(device, TraceAction::SegmentAlloc, ptr, size, stream, stack);
    increase(st.segment, size, 1);
    increase(st.reserved_bytes, size, static_cast<int64_t>(size));
    st.num_device_alloc += 1;
    return block;
  }

  // A block no tensor uses and no other stream's work still touches: inactive, back in its pool while the pool
  // lives, else in the cache.
  void retire(Block* block) {
    record_event(block->device, TraceAction::FreeCompleted, block->ptr, block->size, block->stream, block->free_stack);
    block->stack = nullptr;
    block->free_stack = nullptr;
    auto& st = stats_[block->device];
    decrease(st.active, block->size, 1);
    decrease(st.active_bytes, block->size, static_cast<int64_t>(block->size));
    if (block->pool != PoolId{0, 0}) {
      auto it = pools_.find({block->device, block->pool});
      if (it != pools_.end()) {
        it->second.free_blocks.emplace(block->size, block);
        return;
      }
      block->pool = {0, 0};
    }
    cached_.emplace(Key{block->device, block->stream, block->size}, block);
  }

 public:
  void begin_pool(c10::DeviceIndex device, PoolId pool, c10::StreamId stream) {
    std::lock_guard<std::mutex> lock(mu_);
    TORCH_CHECK(
        capturing_.count(device) == 0, "emu: a capture on device ", int(device), " is allocating to a pool already");
    pools_[{device, pool}].use_count += 1;
    capturing_[device] = {pool, stream};
  }

  void end_pool(c10::DeviceIndex device, PoolId pool) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = capturing_.find(device);
    if (it != capturing_.end() && it->second.first == pool)
      capturing_.erase(it);
  }

  void release_pool(c10::DeviceIndex device, PoolId pool) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pools_.find({device, pool});
    if (it == pools_.end() || --it->second.use_count > 0)
      return;
    // No graph uses it: its free blocks join the cache, and blocks still in tensors follow when freed.
    for (auto& entry : it->second.free_blocks) {
      Block* block = entry.second;
      block->pool = {0, 0};
      cached_.emplace(Key{block->device, block->stream, block->size}, block);
    }
    for (auto& entry : active_)
      if (entry.second->device == device && entry.second->pool == pool)
        entry.second->pool = {0, 0};
    pools_.erase(it);
  }

  size_t pool_bytes(c10::DeviceIndex device, PoolId pool) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pools_.find({device, pool});
    return it == pools_.end() ? 0 : it->second.reserved;
  }

  // ---- memory history ----

  void set_history(const HistoryOptions& options) {
    std::lock_guard<std::mutex> lock(mu_);
    if (options.clear)
      for (auto& ring : traces_)
        ring.clear();
    history_max_entries_ = options.max_entries;
    oom_snapshot_path_ = options.oom_snapshot_path;
    history_cpp_.store(options.cpp_frames, std::memory_order_relaxed);
    history_context_.store(static_cast<int>(options.context), std::memory_order_relaxed);
    history_record_.store(static_cast<int>(options.record), std::memory_order_relaxed);
  }

  MemorySnapshot snapshot() {
    std::lock_guard<std::mutex> lock(mu_);
    MemorySnapshot out;
    auto add = [&out](const Block* b, BlockState state) {
      out.segments.push_back(SegmentInfo{
          b->device,
          reinterpret_cast<uint64_t>(b->ptr),
          b->size,
          state == BlockState::Inactive ? 0 : b->requested,
          b->stream,
          state,
          b->pool,
          b->stack,
          b->segment_stack});
    };
    for (const auto& entry : active_)
      add(entry.second, BlockState::ActiveAllocated);
#if EMU_DRIVER_HAS_EVENTS
    for (const auto& pending : pending_)
      add(pending.block, BlockState::ActivePendingFree);
#endif
    for (const auto& entry : cached_)
      add(entry.second, BlockState::Inactive);
    for (const auto& entry : pools_)
      for (const auto& free_block : entry.second.free_blocks)
        add(free_block.second, BlockState::Inactive);
    std::sort(out.segments.begin(), out.segments.end(), [](const SegmentInfo& a, const SegmentInfo& b) {
      return std::make_pair(a.device, a.address) < std::make_pair(b.device, b.address);
    });
    for (c10::DeviceIndex d = 0; d < device_count(); ++d)
      out.device_traces.push_back(traces_[d].ordered());
    return out;
  }

 private:
  // The calling thread's stack when the history keeps stacks at this level, else null (no cost but the loads).
  StackContext stack_for(HistoryContext least) const {
    if (history_record_.load(std::memory_order_relaxed) == static_cast<int>(HistoryRecord::Off) ||
        history_context_.load(std::memory_order_relaxed) < static_cast<int>(least))
      return nullptr;
    return gather_stack(history_cpp_.load(std::memory_order_relaxed));
  }

  // Appends an event to the device's trace while the whole history is recorded. Called with mu_ held.
  void record_event(
      c10::DeviceIndex device,
      TraceAction action,
      const void* addr,
      size_t size,
      c10::StreamId stream,
      const StackContext& stack,
      size_t device_free = 0) {
    if (history_record_.load(std::memory_order_relaxed) != static_cast<int>(HistoryRecord::All))
      return;
    // context="state" keeps stacks on live blocks only, not in the trace.
    const bool traced_stack =
        history_context_.load(std::memory_order_relaxed) >= static_cast<int>(HistoryContext::Alloc);
    traces_[device].push(
        TraceEntry{
            action,
            reinterpret_cast<uint64_t>(addr),
            size,
            stream,
            time_now_us(),
            traced_stack ? stack : nullptr,
            device_free},
        history_max_entries_);
  }

  // After an out-of-memory error, outside mu_ (symbolizing takes the GIL): the snapshot the history asked for.
  void dump_oom_snapshot() {
    std::string path;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (history_record_.load(std::memory_order_relaxed) == static_cast<int>(HistoryRecord::Off))
        return;
      path = oom_snapshot_path_;
    }
    if (path.empty())
      return;
    try {
      write_snapshot(snapshot(), path);
    } catch (const std::exception& e) {
      // The out-of-memory error is what the caller must see; a snapshot that could not be written is a warning.
      TORCH_WARN("emu: could not write the out-of-memory memory snapshot to ", path, ": ", e.what());
    }
  }

  // The pool a capture on (device, stream) allocates to, or null.
  PrivatePool* capturing_pool(c10::DeviceIndex device, c10::StreamId stream) {
    auto it = capturing_.find(device);
    if (it == capturing_.end() || it->second.second != stream)
      return nullptr;
    return &pools_[{device, it->second.first}];
  }

  static Block* take_from_pool(PrivatePool& pool, size_t size) {
    auto it = pool.free_blocks.lower_bound(size);
    if (it == pool.free_blocks.end() || (it->first > 2 * size && it->first >= kLargeThreshold))
      return nullptr;
    Block* block = it->second;
    pool.free_blocks.erase(it);
    return block;
  }

  bool has_pending() const {
#if EMU_DRIVER_HAS_EVENTS
    return !pending_.empty();
#else
    return false;
#endif
  }

  // Waits for blocks pending on other streams, then frees every cached block. Called with mu_ held.
  void empty_locked(const StackContext& stack) {
#if EMU_DRIVER_HAS_EVENTS
    for (auto& pending : pending_) {
      for (emuEvent_t e : pending.events) {
        EMU_CHECK(emuEventSynchronize(e));
        EMU_CHECK(emuEventDestroy(e));
      }
      retire(pending.block);
    }
    pending_.clear();
#endif
    for (auto& entry : cached_) {
      Block* block = entry.second;
      DeviceSwitch on(block->device);
      EMU_CHECK(emuFree(block->ptr));
      record_event(block->device, TraceAction::SegmentFree, block->ptr, block->size, block->stream, stack);
      auto& st = stats_[block->device];
      decrease(st.segment, block->size, 1);
      decrease(st.reserved_bytes, block->size, static_cast<int64_t>(block->size));
      st.num_device_free += 1;
      delete block;
    }
    cached_.clear();
    // Every device's statistics count it, as CUDA's synchronize_and_free_events spans all devices.
    for (auto& st : stats_)
      st.num_sync_all_streams += 1;
  }

  void process_pending() {
#if EMU_DRIVER_HAS_EVENTS
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool done = true;
      for (emuEvent_t e : it->events)
        done = done && emuEventQuery(e) == emuSuccess;
      if (!done) {
        ++it;
        continue;
      }
      for (emuEvent_t e : it->events)
        emuEventDestroy(e);
      retire(it->block);
      it = pending_.erase(it);
    }
#endif
  }

  std::mutex mu_;
  std::unordered_map<void*, Block*> active_;
  std::multimap<Key, Block*> cached_;
  std::map<std::pair<c10::DeviceIndex, PoolId>, PrivatePool> pools_;
  std::map<c10::DeviceIndex, std::pair<PoolId, c10::StreamId>> capturing_; // device -> (pool, capturing stream)
  std::array<MemoryStats, EMU_MAX_DEVICES> stats_{}; // indexed by device: the driver's bound
  // Memory history: what is recorded (HistoryRecord, HistoryContext) is read without mu_ on every
  // allocation and free, so that with the history off they gather nothing; the rest is guarded by mu_.
  std::atomic<int> history_record_{0};
  std::atomic<int> history_context_{0};
  std::atomic<bool> history_cpp_{false};
  size_t history_max_entries_ = 0;
  std::string oom_snapshot_path_;
  std::array<TraceRing, EMU_MAX_DEVICES> traces_;
#if EMU_DRIVER_HAS_EVENTS
  std::vector<PendingFree> pending_;
#endif
};

CachingAllocator& instance() {
  static auto* allocator = new CachingAllocator(); // outlives every tensor: never destroyed
  return *allocator;
}

void CachingAllocator::deleter(void* ptr) {
  CachingAllocator& allocator = instance();
  // The free's stack, taken before release() locks mu_ (gathering takes the GIL, and a Python thread holding it
  // may wait for mu_) and handed over through the thread, so release() keeps the one argument c10 gives it.
  t_free_stack = allocator.stack_for(HistoryContext::All);
  allocator.release(ptr);
}

} // namespace

size_t round_size(size_t n) {
  if (n < kLargeThreshold)
    return (n + kSmallRound - 1) / kSmallRound * kSmallRound;
  return (n + kLargeRound - 1) / kLargeRound * kLargeRound;
}

c10::Allocator* emu_allocator() {
  return &instance();
}
MemoryStats memory_stats(c10::DeviceIndex device) {
  return instance().stats(device);
}
void reset_peak_stats(c10::DeviceIndex device) {
  instance().reset_peak(device);
}
void reset_accumulated_stats(c10::DeviceIndex device) {
  instance().reset_accumulated(device);
}
std::pair<size_t, size_t> memory_info(c10::DeviceIndex device) {
  DeviceSwitch on(checked_device_index(device));
  size_t free_bytes = 0, total = 0;
  EMU_CHECK(emuMemGetInfo(&free_bytes, &total));
  return {free_bytes, total};
}
void empty_cache() {
  instance().empty();
}
void record_stream(const c10::DataPtr& data_ptr, const c10::Stream& stream) {
  instance().record(data_ptr, stream);
}
void begin_allocate_to_pool(c10::DeviceIndex device, PoolId pool, c10::StreamId stream) {
  instance().begin_pool(device, pool, stream);
}
void end_allocate_to_pool(c10::DeviceIndex device, PoolId pool) {
  instance().end_pool(device, pool);
}
void release_pool(c10::DeviceIndex device, PoolId pool) {
  instance().release_pool(device, pool);
}
size_t pool_reserved_bytes(c10::DeviceIndex device, PoolId pool) {
  return instance().pool_bytes(device, pool);
}
void set_memory_history(const HistoryOptions& options) {
  instance().set_history(options);
}
MemorySnapshot memory_snapshot() {
  return instance().snapshot();
}

// Registered for DeviceType::PrivateUse1: at::empty on emu reaches it through GetAllocator.
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &instance());

} // namespace torch_emu
