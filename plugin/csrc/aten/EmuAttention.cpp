// scaled_dot_product_attention on emu: which backend runs it, and emu's fused attention kernel.
//
// torch asks a backend for its choice through _fused_sdp_choice_stub (scaled_dot_product_attention itself, and
// the Meta kernel of _fused_sdp_choice under FakeTensor) and the _fused_sdp_choice op (torch._fused_sdp_choice).
// From torch 2.5 on, torch keeps a fused entry point for backends that are not CPU or CUDA
// (SDPBackend.OVERRIDEABLE: _scaled_dot_product_fused_attention_overrideable and its backward, with their autograd
// formula): emu answers it for the inputs its kernel takes (4-D, one floating dtype, dropout_p < 1, key and value
// heads equal to the query's or, with enable_gqa, dividing them) and the math backend (SDPBackend.MATH, the
// composite of emu's matmul, softmax and dropout kernels) for the rest and on older releases. Unanswered, the op
// ran the CPU's choice through the fallback (FLASH_ATTENTION, a kernel emu does not have), and
// scaled_dot_product_attention took the math path even where the caller had disabled it (sdpa_kernel).
//
// The kernel itself is native/Attention.cpp; this file holds the choice and the boxed glue of the entry points.
#include <ATen/Context.h>
#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>
#include <torch/version.h>

#include <algorithm>
#include <array>
#include <memory>
#include <string>

#include "aten/native/Attention.h"

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

using at::Tensor;

// SDPBackend's values in every release that has them (the enum moved between headers).
constexpr int64_t kMathBackend = 0;
constexpr int64_t kOverrideableBackend = 4;

constexpr const char* kForward = "_scaled_dot_product_fused_attention_overrideable";
constexpr const char* kBackward = "_scaled_dot_product_fused_attention_overrideable_backward";

bool release_has(const char* name) {
  return c10::Dispatcher::singleton().findSchema({std::string("aten::") + name, ""}).has_value();
}

// The fused entry points exist from torch 2.5 on: looked up rather than assumed, so one source serves every release.
bool release_has_fused_attention() {
  static const bool has = release_has(kForward) && release_has(kBackward);
  return has;
}

bool forward_takes_mask() {
  static const bool takes = c10::Dispatcher::singleton()
                                .findSchema({std::string("aten::") + kForward, ""})
                                ->schema()
                                .argumentIndexWithName("attn_bias")
                                .has_value();
  return takes;
}

// The caller's switch for the fused backend: its own flag (SDPBackend.OVERRIDEABLE) from torch 2.9, the first
// release whose torch.nn.attention.sdpa_kernel sets it (2.5-2.8 have the flag, but sdpa_kernel leaves it on, so a
// caller could not turn the fused kernel off); before that, the memory-efficient flag, which is what torch's own
// overrideable backend (XPU's) answered to in those releases. Read in each release's sdpa_kernel.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 9)
#define EMU_SDPA_SWITCH "OVERRIDEABLE"
bool fused_enabled(const at::Context& ctx) {
  return ctx.userEnabledOverrideableSDP();
}
#else
#define EMU_SDPA_SWITCH "EFFICIENT_ATTENTION"
bool fused_enabled(const at::Context& ctx) {
  return ctx.userEnabledMemEfficientSDP();
}
#endif

// Why emu's fused kernel cannot take these inputs, or nullptr when it can. The math backend takes what the kernel
// does not, and gives the CPU's results or the CPU's errors for it (shapes that only broadcast, mixed dtypes).
const char* unsupported(
    const Tensor& query,
    const Tensor& key,
    const Tensor& value,
    const Tensor* mask,
    double dropout_p,
    bool enable_gqa) {
  if (query.is_nested() || key.is_nested() || value.is_nested())
    return "nested tensors";
  if (query.layout() != c10::kStrided || key.layout() != c10::kStrided || value.layout() != c10::kStrided)
    return "tensors that are not strided";
  if (query.dim() != 4 || key.dim() != 4 || value.dim() != 4)
    return "inputs that are not 4-D (batch, heads, sequence, embedding)";
  if (!c10::isFloatingType(query.scalar_type()) || key.scalar_type() != query.scalar_type() ||
      value.scalar_type() != query.scalar_type())
    return "inputs that are not of one floating dtype";
  if (!(dropout_p >= 0.0 && dropout_p < 1.0))
    return "dropout_p outside [0, 1)";
  if (key.size(0) != query.size(0) || value.size(0) != query.size(0) || key.size(-1) != query.size(-1) ||
      value.size(-2) != key.size(-2) || value.size(1) != key.size(1))
    return "batch, sequence or embedding sizes that only broadcast";
  if (key.size(1) != query.size(1) && !(enable_gqa && key.size(1) > 0 && query.size(1) % key.size(1) == 0))
    return "key and value heads that differ from the query's (without enable_gqa, or not dividing them)";
  if (mask != nullptr && mask->defined() &&
      !at::is_expandable_to(mask->sizes(), {query.size(0), query.size(1), query.size(2), key.size(2)}))
    return "an attn_mask that does not broadcast to (batch, heads, query length, key length)";
  return nullptr;
}

int64_t choose_backend(
    const Tensor& query,
    const Tensor& key,
    const Tensor& value,
    const Tensor* mask,
    double dropout_p,
    bool enable_gqa) {
  auto& ctx = at::globalContext();
  const bool math = ctx.userEnabledMathSDP();
  if (!release_has_fused_attention()) {
    TORCH_CHECK(
        math,
        "No available kernel for scaled_dot_product_attention on ",
        query.device(),
        ": emu runs attention with the math backend only (SDPBackend.MATH) on this torch release (it has no "
        "SDPBackend.OVERRIDEABLE), which is disabled here; enable it, for example with "
        "torch.nn.attention.sdpa_kernel([SDPBackend.MATH])");
    return kMathBackend;
  }
  const char* reason = unsupported(query, key, value, mask, dropout_p, enable_gqa);
  if (reason == nullptr && mask != nullptr && mask->defined() && !forward_takes_mask())
    reason = "an attn_mask (this release's fused entry point takes none)";
  if (fused_enabled(ctx) && reason == nullptr)
    return kOverrideableBackend;
  TORCH_CHECK(
      math,
      "No available kernel for scaled_dot_product_attention on ",
      query.device(),
      ": emu's fused kernel (SDPBackend.OVERRIDEABLE) ",
      reason == nullptr ? "is disabled" : (std::string("does not take ") + reason).c_str(),
      " and the math backend (SDPBackend.MATH) is disabled; enable ",
      reason == nullptr ? "one, for example with torch.nn.attention.sdpa_kernel([SDPBackend." EMU_SDPA_SWITCH "])" :
                          "the math backend, for example with torch.nn.attention.sdpa_kernel([SDPBackend.MATH])");
  return kMathBackend;
}

template <class OptionalTensor>
const Tensor* present(const OptionalTensor& t) {
  return t.has_value() ? &*t : nullptr;
}

#if EMU_HAS_SDP_CHOICE_STUB
// The stub's function type gained parameters over the releases: (query, key, value, mask, dropout_p, is_causal,
// scale) up to torch 2.4, enable_gqa after them from 2.5.
template <class Fn>
struct StubChoice;
template <class Mask, class Scale, class... Gqa>
struct StubChoice<int64_t (*)(const Tensor&, const Tensor&, const Tensor&, Mask, double, bool, Scale, Gqa...)> {
  static int64_t call(
      const Tensor& query,
      const Tensor& key,
      const Tensor& value,
      Mask mask,
      double dropout_p,
      bool /*is_causal*/,
      Scale /*scale*/,
      Gqa... enable_gqa) {
    return choose_backend(query, key, value, present(mask), dropout_p, (false || ... || enable_gqa));
  }
};
#endif

// An op's arguments by name: one boxed kernel serves each release's schema of the op.
class Arguments {
 public:
  Arguments(const c10::OperatorHandle& op, const torch::jit::Stack& stack)
      : schema_(op.schema()), first_(stack.size() - schema_.arguments().size()), stack_(stack) {}

  bool has(const char* name) const {
    return schema_.argumentIndexWithName(name).has_value();
  }
  const c10::IValue& operator[](const char* name) const {
    const auto index = schema_.argumentIndexWithName(name);
    TORCH_INTERNAL_ASSERT(index.has_value(), schema_.name(), " has no argument ", name);
    return stack_[first_ + *index];
  }
  // Undefined also where the release's schema has no such argument.
  Tensor tensor(const char* name) const {
    if (!has(name))
      return Tensor();
    const auto& value = (*this)[name];
    return value.isNone() ? Tensor() : value.toTensor();
  }
  std::optional<double> optional_double(const char* name) const {
    if (!has(name) || (*this)[name].isNone())
      return std::nullopt;
    return (*this)[name].toDouble();
  }

 private:
  const c10::FunctionSchema& schema_;
  size_t first_;
  const torch::jit::Stack& stack_;
};

// The attn_bias argument, undefined for none: the backward's schema takes a Tensor, not an optional one, so a
// Python caller passes an empty tensor for none (autograd passes an undefined one).
Tensor bias_argument(const Arguments& args) {
  Tensor bias = args.tensor("attn_bias");
  return bias.defined() && bias.numel() == 0 && bias.dim() == 1 ? Tensor() : bias;
}

// torch._fused_sdp_choice.
void fused_sdp_choice_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const Arguments args(op, *stack);
  const Tensor mask = args.tensor("attn_mask");
  const int64_t choice = choose_backend(
      args.tensor("query"),
      args.tensor("key"),
      args.tensor("value"),
      mask.defined() ? &mask : nullptr,
      args["dropout_p"].toDouble(),
      args.has("enable_gqa") && args["enable_gqa"].toBool());
  torch::jit::drop(*stack, op.schema().arguments().size());
  torch::jit::push(*stack, choice);
}

// aten::_scaled_dot_product_fused_attention_overrideable
void fused_attention_forward_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const Arguments args(op, *stack);
  const native::AttentionResult result = native::fused_attention(
      args.tensor("query"),
      args.tensor("key"),
      args.tensor("value"),
      bias_argument(args),
      args["dropout_p"].toDouble(),
      args["is_causal"].toBool(),
      args["return_debug_mask"].toBool(),
      args.optional_double("scale"));
  const int64_t length = args.tensor("query").size(-2), kv_length = args.tensor("key").size(-2);
  torch::jit::drop(*stack, op.schema().arguments().size());
  const auto none = Tensor();
  torch::jit::push(
      *stack,
      result.output,
      result.logsumexp,
      none, // cum_seq_q, cum_seq_k: no variable-length batches
      none,
      length, // max_q, max_k
      kv_length,
      result.philox_seed, // the dropout seed, for the backward
      result.philox_offset,
      result.attention); // debug_attn_mask: the probabilities, if asked for
}

// aten::_scaled_dot_product_fused_attention_overrideable_backward (the saved output and logsumexp are not needed:
// the kernel recomputes the probabilities).
void fused_attention_backward_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const Arguments args(op, *stack);
  // query, key, value and, where the release's schema has it, attn_bias.
  const auto mask_list = args["grad_input_mask"].toBoolList();
  std::array<bool, 4> wanted{};
  for (size_t i = 0; i < std::min<size_t>(mask_list.size(), wanted.size()); ++i)
    wanted[i] = mask_list[i];
  const auto grads = native::fused_attention_backward(
      args.tensor("grad_out"),
      args.tensor("query"),
      args.tensor("key"),
      args.tensor("value"),
      bias_argument(args),
      wanted,
      args["dropout_p"].toDouble(),
      args["is_causal"].toBool(),
      args.tensor("philox_seed"),
      args.optional_double("scale"));
  torch::jit::drop(*stack, op.schema().arguments().size());
  for (size_t i = 0; i < op.schema().returns().size() && i < grads.size(); ++i)
    torch::jit::push(*stack, grads[i]);
}

// Registered only where the release declares the fused entry points.
std::unique_ptr<torch::Library> register_fused_attention() {
  auto library =
      std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  if (release_has_fused_attention()) {
    library->impl(kForward, torch::CppFunction::makeFromBoxedFunction<&fused_attention_forward_op>());
    library->impl(kBackward, torch::CppFunction::makeFromBoxedFunction<&fused_attention_backward_op>());
  }
  return library;
}

const std::unique_ptr<torch::Library> g_fused_attention = register_fused_attention();

} // namespace

TORCH_LIBRARY_FRAGMENT(torch_emu, m) {
  // The SDPBackend member that switches emu's fused kernel in this build ("OVERRIDEABLE" or "EFFICIENT_ATTENTION"):
  // the tests and callers read it here instead of repeating the release cutoff.
  m.def("sdpa_switch() -> str", [] { return std::string(EMU_SDPA_SWITCH); });
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", torch::CppFunction::makeFromBoxedFunction<&fused_sdp_choice_op>());
}

} // namespace torch_emu

#if EMU_HAS_SDP_CHOICE_STUB
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_emu::StubChoice<fused_sdp_choice_fn>::call)
} // namespace at::native
#endif
