// The emu caching allocator: device memory from the driver, kept and reused per stream.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

#include <cstdint>

namespace torch_emu {

struct MemoryStats {
  int64_t allocated_bytes = 0;      // in tensors now
  int64_t reserved_bytes = 0;       // obtained from the driver (allocated + cached)
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t allocations = 0;          // total blocks handed out
  int64_t driver_mallocs = 0;       // cache misses that went to the driver
  int64_t driver_frees = 0;
};

c10::Allocator* emu_allocator();
MemoryStats memory_stats(c10::DeviceIndex device);
void reset_peak_stats(c10::DeviceIndex device);
// Returns every cached, unused block to the driver.
void empty_cache();
// The block behind data_ptr is also used by work on stream: do not reuse it before that work is done.
void record_stream(const c10::DataPtr& data_ptr, const c10::Stream& stream);

}  // namespace torch_emu
