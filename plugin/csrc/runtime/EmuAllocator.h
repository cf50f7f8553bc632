// The emu caching allocator: device memory from the driver, kept and reused per stream.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "runtime/EmuMemoryHistory.h"

namespace torch_emu {

// One statistic with the CUDA caching allocator's meaning: current value, its peak since the
// last peak reset, and the total increase and decrease since the last accumulated reset.
struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;
  int64_t freed = 0;

  void increase(int64_t amount) {
    current += amount;
    peak = std::max(peak, current);
    allocated += amount;
  }
  void decrease(int64_t amount) {
    current -= amount;
    freed += amount;
  }
};

// Pools in c10's StatType order: every block, blocks under 1 MiB, blocks of 1 MiB and more.
enum class Pool : size_t { All = 0, Small = 1, Large = 2 };
constexpr size_t kPools = 3;
using StatArray = std::array<Stat, kPools>;

// What torch.cuda.memory_stats reports, for what this allocator does. It never splits a
// block, so c10's inactive_split statistics are always zero and are not kept here.
struct MemoryStats {
  StatArray allocation; // COUNT: blocks handed to tensors
  StatArray segment; // COUNT: driver allocations held (cached or in use)
  StatArray active; // COUNT: blocks in tensors or awaiting another stream's work
  StatArray allocated_bytes; // SUM: rounded bytes in tensors
  StatArray reserved_bytes; // SUM: bytes obtained from the driver (allocated + cached)
  StatArray active_bytes; // SUM: bytes of active blocks
  StatArray requested_bytes; // SUM: bytes tensors asked for, before rounding
  int64_t num_alloc_retries = 0; // driver allocations that failed, so the cache was emptied and retried
  int64_t num_ooms = 0; // out-of-memory errors raised
  int64_t num_sync_all_streams = 0; // waits for every block pending on other streams (empty_cache)
  int64_t num_device_alloc = 0; // emuMalloc calls that succeeded
  int64_t num_device_free = 0; // emuFree calls
};

// Rounded size the allocator gives a request of n bytes (what memory_allocated grows by).
size_t round_size(size_t n);

c10::Allocator* emu_allocator();
MemoryStats memory_stats(c10::DeviceIndex device);
void reset_peak_stats(c10::DeviceIndex device);
void reset_accumulated_stats(c10::DeviceIndex device);
// Returns every cached, unused block to the driver.
void empty_cache();
// The block behind data_ptr is also used by work on stream: do not reuse it before that work is done.
void record_stream(const c10::DataPtr& data_ptr, const c10::Stream& stream);
// The driver's (free, total) bytes of a device.
std::pair<size_t, size_t> memory_info(c10::DeviceIndex device);

// Private pools for graph capture, named as c10's MempoolId_t: (0, 0) is the general cache. While a capture
// allocates to a pool, what the capturing stream allocates on its device comes from the pool and goes back to
// it when freed, so no block a graph replays into is handed to other work. A pool lives while a graph uses it
// (graphs sharing one through torch.emu.graph_pool_handle() each count); then its blocks join the general cache.
using PoolId = std::pair<uint64_t, uint64_t>;
void begin_allocate_to_pool(c10::DeviceIndex device, PoolId pool, c10::StreamId stream);
void end_allocate_to_pool(c10::DeviceIndex device, PoolId pool);
void release_pool(c10::DeviceIndex device, PoolId pool);
// Bytes held by the pool's blocks (in tensors and cached), 0 when it does not exist.
size_t pool_reserved_bytes(c10::DeviceIndex device, PoolId pool);

// Memory history (torch.emu.memory._record_memory_history): what the allocator records from now on. While it
// records, each out-of-memory also writes a snapshot to options.oom_snapshot_path when that is set.
void set_memory_history(const HistoryOptions& options);
// Every segment with its block, and the events recorded per device.
MemorySnapshot memory_snapshot();

} // namespace torch_emu
