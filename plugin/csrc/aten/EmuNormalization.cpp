// Batch normalization on emu. native_batch_norm updates running_mean and running_var in place
// without declaring them mutable in its schema (`Tensor? running_mean`), so the boxed CPU fallback,
// which copies back only arguments marked as written, silently drops the update and a BatchNorm
// layer trained on emu keeps its initial statistics. This route runs the op on CPU copies, as the
// fallback would, and writes the running statistics back to the emu tensors.
// Half and BFloat16 inputs are normalized in Float, as CUDA's kernels do (their accumulate type): the output has
// the input's dtype and the saved mean and inverse deviation are Float, the dtypes CUDA returns (the CPU kernel
// returns them in the input's dtype, which also costs the backward its precision).
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_native_batch_norm_legit_ops.h>
#include <ATen/ops/native_batch_norm.h>
#include <ATen/ops/native_batch_norm_backward.h>
#include <torch/library.h>

#include <array>
#include <tuple>

#include "aten/Fallback.h"
#include "aten/Launch.h"
#include "aten/Widen.h"

namespace torch_emu {

namespace {

using at::Tensor;

compat::optional<Tensor> on_cpu(const compat::optional<Tensor>& t, bool widened) {
  if (!t.has_value() || !t->defined())
    return compat::optional<Tensor>();
  return widened ? t->cpu().to(wider(t->scalar_type())) : t->cpu();
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(
    const Tensor& input,
    const compat::optional<Tensor>& weight,
    const compat::optional<Tensor>& bias,
    const compat::optional<Tensor>& running_mean,
    const compat::optional<Tensor>& running_var,
    bool training,
    double momentum,
    double eps) {
  const Tensor none;
  common_device(
      "native_batch_norm",
      {&input,
       weight ? &*weight : &none,
       bias ? &*bias : &none,
       running_mean ? &*running_mean : &none,
       running_var ? &*running_var : &none});
  const bool widened = is_narrow(input.scalar_type());
  compat::optional<Tensor> mean_cpu = on_cpu(running_mean, widened), var_cpu = on_cpu(running_var, widened);
  auto result = at::native_batch_norm(
      widened ? input.cpu().to(wider(input.scalar_type())) : input.cpu(),
      on_cpu(weight, widened),
      on_cpu(bias, widened),
      mean_cpu,
      var_cpu,
      training,
      momentum,
      eps);
  if (training) {
    if (mean_cpu.has_value())
      running_mean->copy_(*mean_cpu);
    if (var_cpu.has_value())
      running_var->copy_(*var_cpu);
  }
  const auto device = input.device();
  return {
      std::get<0>(result).to(device, input.scalar_type()),
      std::get<1>(result).to(device),
      std::get<2>(result).to(device)};
}

// The same op as torch.export and torch.compile spell it (running statistics declared mutable): Half and BFloat16
// through the route above, every other dtype through the CPU fallback.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm_legit(
    const Tensor& input,
    const compat::optional<Tensor>& weight,
    const compat::optional<Tensor>& bias,
    Tensor& running_mean,
    Tensor& running_var,
    bool training,
    double momentum,
    double eps) {
  if (!is_narrow(input.scalar_type()))
    return at::native::call_fallback_fn<&emu_fallback, at::_ops::_native_batch_norm_legit>::call(
        input, weight, bias, running_mean, running_var, training, momentum, eps);
  return (
      native_batch_norm)(input, weight, bias, running_mean, running_var, training, momentum, eps); // emu's, not at::
}
std::tuple<Tensor, Tensor, Tensor> native_batch_norm_legit_no_stats(
    const Tensor& input,
    const compat::optional<Tensor>& weight,
    const compat::optional<Tensor>& bias,
    bool training,
    double momentum,
    double eps) {
  if (!is_narrow(input.scalar_type()))
    return at::native::call_fallback_fn<&emu_fallback, at::_ops::_native_batch_norm_legit_no_stats>::call(
        input, weight, bias, training, momentum, eps);
  return (
      native_batch_norm)(input, weight, bias, compat::optional<Tensor>(), compat::optional<Tensor>(), training, momentum, eps);
}

// The backward of a Half or BFloat16 normalization, in Float too (the CPU kernel refuses the Float statistics
// CUDA's forward saves): the input's gradient in the input's dtype, the weight's and bias's in the weight's.
std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(
    const Tensor& grad_out,
    const Tensor& input,
    const compat::optional<Tensor>& weight,
    const compat::optional<Tensor>& running_mean,
    const compat::optional<Tensor>& running_var,
    const compat::optional<Tensor>& save_mean,
    const compat::optional<Tensor>& save_invstd,
    bool train,
    double eps,
    std::array<bool, 3> output_mask) {
  if (!is_narrow(input.scalar_type()))
    return at::native::call_fallback_fn<&emu_fallback, at::_ops::native_batch_norm_backward>::call(
        grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask);
  const Tensor none;
  common_device("native_batch_norm_backward", {&grad_out, &input, weight ? &*weight : &none});
  auto grads = at::native_batch_norm_backward(
      grad_out.cpu().to(wider(grad_out.scalar_type())),
      input.cpu().to(wider(input.scalar_type())),
      on_cpu(weight, true),
      on_cpu(running_mean, true),
      on_cpu(running_var, true),
      on_cpu(save_mean, true),
      on_cpu(save_invstd, true),
      train,
      eps,
      output_mask);
  const auto device = input.device();
  const auto parameters = weight.has_value() && weight->defined() ? weight->scalar_type() : input.scalar_type();
  auto back = [&](const Tensor& t, c10::ScalarType dtype) { return t.defined() ? t.to(device, dtype) : t; };
  return {
      back(std::get<0>(grads), input.scalar_type()),
      back(std::get<1>(grads), parameters),
      back(std::get<2>(grads), parameters)};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", native_batch_norm);
  m.impl("native_batch_norm_backward", native_batch_norm_backward);
  m.impl("_native_batch_norm_legit", native_batch_norm_legit);
  m.impl("_native_batch_norm_legit.no_stats", native_batch_norm_legit_no_stats);
}

} // namespace torch_emu
