// Losses whose functional form would warn on emu only. mse_loss and smooth_l1_loss are structured
// ops: without an emu kernel their functional form runs the composite kernel, which allocates the
// reduced (0-dim) result and calls the out= variant; that one reaches the CPU fallback, whose CPU
// kernel computes the unreduced loss into the given output and warns "An output with one or more
// elements was resized". The CPU calls the functional kernel directly and gives no warning, so on emu
// the functional form goes straight to the fallback too: the same CPU kernel, the same warnings.
#include <torch/library.h>

#include "aten/Fallback.h"

namespace torch_emu {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mse_loss", torch::CppFunction::makeFromBoxedFunction<&emu_fallback>());
  m.impl("smooth_l1_loss", torch::CppFunction::makeFromBoxedFunction<&emu_fallback>());
}

} // namespace torch_emu
