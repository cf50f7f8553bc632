// torch.autocast(device_type="emu") follows CUDA's policy, from the op lists ATen publishes for
// every backend (AT_FORALL_* in ATen/autocast_mode.h, so each release gets its own lists): matrix
// products, convolutions and recurrent cells run in the autocast dtype; ops that lose too much
// precision run in float32; mixed-dtype ops promote; binary_cross_entropy is refused, as on CUDA.
// Every other op passes through unchanged (the fallthrough).
#include <ATen/autocast_mode.h>
#include <ATen/ops/binary_cross_entropy.h>
#include <ATen/ops/norm.h>
#include <torch/library.h>

#include "TorchCompat.h"

namespace torch_emu {

namespace {

at::Tensor binary_cross_entropy_banned(
    const at::Tensor&,
    const at::Tensor&,
    const compat::optional<at::Tensor>&,
    int64_t) {
  TORCH_CHECK(
      false,
      "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
      "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
      "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
      "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
      "safe to autocast.");
}

} // namespace

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

// AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE spells its signatures unqualified, as inside namespace at,
// and which names it uses varies by release (DimnameList in 2.4, gone from ATen by 2.13).
using namespace at; // NOLINT(google-build-using-namespace)

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define EMU_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(EMU_LOWER_PRECISION_FP)
#undef EMU_LOWER_PRECISION_FP
#define EMU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(EMU_FP32)
#undef EMU_FP32
#define EMU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(EMU_FP32_SET_OPT_DTYPE)
#undef EMU_FP32_SET_OPT_DTYPE
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define EMU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(EMU_PROMOTE)
#undef EMU_PROMOTE
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN((&binary_cross_entropy_banned)));
}

} // namespace torch_emu
