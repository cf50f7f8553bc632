// The CPU fallback for every op without a native emu kernel, and its per-op counts.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace torch_emu {

// Operator name ("aten::addcmul_" or "aten::add.out") -> times it ran through the CPU fallback.
std::map<std::string, int64_t> fallback_counts();
void reset_fallback_counts();

}  // namespace torch_emu
