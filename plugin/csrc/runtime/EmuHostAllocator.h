// The pinned host allocator of emu: page-locked host memory from the driver (API 2.2), cached by
// size like CUDA's CachingHostAllocator; a freed block is reused only once the emu streams that
// used it (recorded by the copy path) have passed it.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

#include <cstddef>
#include <cstdint>

namespace torch_emu {

// The driver this plugin was built against has host allocation (API 2.2 and newer).
bool pinned_memory_available();

// The allocator behind Tensor.pin_memory() for emu; raises "not available" on a driver without
// host allocation.
c10::Allocator* pinned_host_allocator();

// The driver says ptr lies in page-locked host memory (from this allocator or any emuHostAlloc).
bool is_pinned_host(const void* ptr);

// Work queued on stream uses the pinned block holding ptr: the block is not handed out again
// before that work has run. False (nothing recorded) when ptr is not from this allocator.
bool record_pinned_use(const void* ptr, const c10::Stream& stream);

struct PinnedStats {
  int64_t allocated_bytes = 0; // in tensors now
  int64_t cached_bytes = 0; // freed, waiting for reuse (some still in use by queued copies)
  int64_t driver_allocs = 0; // cache misses that went to emuHostAlloc
  int64_t driver_frees = 0; // blocks given back with emuFreeHost
  int64_t driver_blocks = 0; // blocks held from the driver now (in tensors or cached)
  int64_t active_requests = 0; // blocks in tensors now
  int64_t peak_allocated_bytes = 0; // highest allocated_bytes since the last peak reset
  int64_t peak_reserved_bytes = 0; // highest allocated + cached since the last peak reset
  int64_t total_allocated_bytes = 0; // bytes handed out since the last accumulated reset
  int64_t total_freed_bytes = 0; // bytes given back by tensors since then
};
PinnedStats pinned_stats();
void reset_pinned_peak_stats();
void reset_pinned_accumulated_stats();
// Returns cached blocks whose streams have passed them to the driver.
void empty_pinned_cache();

} // namespace torch_emu
