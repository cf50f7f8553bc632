// The CPU fallback's counts as operators of torch's registry (torch.ops.torch_emu.<name>), for
// torch_emu.fallback_ops() and reset_fallback_ops().
#include <ATen/core/Dict.h>
#include <torch/library.h>

#include <cstdint>
#include <string>

#include "aten/Fallback.h"

namespace torch_emu {
namespace {

c10::Dict<std::string, int64_t> fallback_counts_op() {
  c10::Dict<std::string, int64_t> d;
  for (const auto& [name, count] : fallback_counts())
    d.insert(name, count);
  return d;
}

void fallback_reset() {
  reset_fallback_counts();
}

} // namespace

TORCH_LIBRARY_FRAGMENT(torch_emu, m) {
  m.def("fallback_counts() -> Dict(str, int)", &fallback_counts_op);
  m.def("fallback_reset() -> ()", &fallback_reset);
}

} // namespace torch_emu
