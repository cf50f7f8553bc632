// scaled_dot_product_attention on emu: which backend runs it, and the fused entry points torch keeps
// for PrivateUse1 backends.
//
// emu has no fused attention kernel: attention runs as the math backend (SDPBackend.MATH), the
// composite of matmul, softmax and dropout over emu's own kernels. torch asks a backend for its
// choice through _fused_sdp_choice_stub (scaled_dot_product_attention itself, and the Meta kernel
// of _fused_sdp_choice under FakeTensor) and the _fused_sdp_choice op (torch._fused_sdp_choice).
// Unanswered, scaled_dot_product_attention took the math path even where the caller had disabled
// it (sdpa_kernel), and the op ran the CPU's choice through the fallback: FLASH_ATTENTION, a kernel
// emu does not have. The fused entry points (_scaled_dot_product_fused_attention_overrideable and
// its backward, SDPBackend.OVERRIDEABLE) refuse with a message that names the backend to use.
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <memory>
#include <string>

// Whether the release ships the header that declares _fused_sdp_choice_stub (torch 2.1 does not):
// detected here rather than patched, so every release that has the stub gets emu's answer.
#if __has_include(<ATen/native/transformers/attention.h>)
#define EMU_HAS_SDP_CHOICE_STUB 1
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#else
#define EMU_HAS_SDP_CHOICE_STUB 0
#endif

namespace torch_emu {
namespace {

constexpr int64_t kMathBackend = 0; // SDPBackend::math: 0 in every release (its enum moved between headers)

int64_t choose_backend(const at::Tensor& query) {
  TORCH_CHECK(
      at::globalContext().userEnabledMathSDP(),
      "No available kernel for scaled_dot_product_attention on ",
      query.device(),
      ": emu runs attention with the math backend only (SDPBackend.MATH), which is disabled here; enable "
      "it, for example with torch.nn.attention.sdpa_kernel([SDPBackend.MATH])");
  return kMathBackend;
}

#if EMU_HAS_SDP_CHOICE_STUB
// The stub's function type gained parameters over the releases (scale, enable_gqa); the query comes
// first in all of them, and only the query matters here.
template <class Fn>
struct StubChoice;
template <class... Rest>
struct StubChoice<int64_t (*)(const at::Tensor&, Rest...)> {
  static int64_t call(const at::Tensor& query, Rest... /*key, value, mask, dropout, causal, ...*/) {
    return choose_backend(query);
  }
};
#endif

// torch._fused_sdp_choice: boxed, so one kernel fits the op's schema in every release.
void fused_sdp_choice_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  const at::Tensor query = (*stack)[stack->size() - n].toTensor();
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, choose_backend(query));
}

void refuse_fused_attention(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false,
      op.schema().name(),
      ": emu has no fused scaled_dot_product_attention kernel (SDPBackend.OVERRIDEABLE). "
      "torch.nn.functional.scaled_dot_product_attention runs on emu with the math backend "
      "(SDPBackend.MATH), the one torch._fused_sdp_choice reports for emu tensors: call it "
      "instead, or select SDPBackend.MATH with torch.nn.attention.sdpa_kernel");
}

// The fused entry points exist from torch 2.5 on: registered only where the release declares them, so
// one source serves every release.
std::unique_ptr<torch::Library> register_refusals() {
  auto library =
      std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  for (const char* name :
       {"_scaled_dot_product_fused_attention_overrideable",
        "_scaled_dot_product_fused_attention_overrideable_backward"}) {
    if (c10::Dispatcher::singleton().findSchema({std::string("aten::") + name, ""}).has_value())
      library->impl(name, torch::CppFunction::makeFromBoxedFunction<&refuse_fused_attention>());
  }
  return library;
}

const std::unique_ptr<torch::Library> g_refusals = register_refusals();

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", torch::CppFunction::makeFromBoxedFunction<&fused_sdp_choice_op>());
}

} // namespace torch_emu

#if EMU_HAS_SDP_CHOICE_STUB
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_emu::StubChoice<fused_sdp_choice_fn>::call)
} // namespace at::native
#endif
