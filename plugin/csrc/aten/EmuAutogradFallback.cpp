// Autograd for ops without an autograd kernel of their own, on releases where torch registers no fallback for
// PrivateUse1's autograd key.
//
// Every release registers a backend fallback for the CPU's and CUDA's autograd keys, so an op with no autograd
// kernel (the functional collectives _c10d_functional::* and c10d_functional::* that DTensor and DeviceMesh call,
// FSDP2's fsdp::all_gather_copy_in) goes on to its backend kernel there. Before torch 2.13 (2.1 to 2.8 seen),
// AutogradPrivateUse1 has no fallback, so the same ops on emu failed with "Could not run
// '_c10d_functional::all_gather_into_tensor' with arguments from the 'Autogrademu' backend" (torch 2.1 to 2.8 seen).
// There, emu registers a fallthrough, as the CPU key behaves and as torch_npu does for its device; a release that has a
// fallback keeps its own.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace {

const bool autograd_fallback_registered = [] {
  if (c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(c10::DispatchKey::AutogradPrivateUse1)) {
    return false;
  }
  static torch::Library library(torch::Library::IMPL, "_", c10::DispatchKey::AutogradPrivateUse1, __FILE__, __LINE__);
  library.fallback(torch::CppFunction::makeFallthrough());
  return true;
}();

} // namespace
