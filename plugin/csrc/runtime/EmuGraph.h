// What other parts of the plugin need of graph capture (runtime/EmuGraph.cpp): the random state of a capture.
#pragma once

#include <c10/core/Device.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

namespace torch_emu {

// A random kernel captured into a graph draws its seed when it runs, from its graph's state: one base seed, set from
// the device's default generator before every replay, and the kernel's slot in the capture. So each replay samples
// fresh numbers, and the numbers follow manual_seed and the order of replays, as CUDA graphs' philox offsets do.
struct GraphSeed {
  std::shared_ptr<std::atomic<uint64_t>> base;
  uint64_t slot = 0;
  uint64_t value() const; // at run time
};

// A new slot of the capture the current stream of `device` records, or nothing when it is not capturing.
std::optional<GraphSeed> graph_seed_slot(c10::DeviceIndex device);

} // namespace torch_emu
