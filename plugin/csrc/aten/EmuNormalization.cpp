// Batch normalization on emu. native_batch_norm updates running_mean and running_var in place
// without declaring them mutable in its schema (`Tensor? running_mean`), so the boxed CPU fallback,
// which copies back only arguments marked as written, silently drops the update and a BatchNorm
// layer trained on emu keeps its initial statistics. This route runs the op on CPU copies, as the
// fallback would, and writes the running statistics back to the emu tensors.
#include <ATen/core/Tensor.h>
#include <ATen/ops/native_batch_norm.h>
#include <torch/library.h>

#include <tuple>

#include "Launch.h"

namespace torch_emu {

namespace {

using at::Tensor;

compat::optional<Tensor> on_cpu(const compat::optional<Tensor>& t) {
  if (!t.has_value() || !t->defined()) return compat::optional<Tensor>();
  return t->cpu();
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, const compat::optional<Tensor>& weight,
                                                     const compat::optional<Tensor>& bias,
                                                     const compat::optional<Tensor>& running_mean,
                                                     const compat::optional<Tensor>& running_var, bool training,
                                                     double momentum, double eps) {
  const Tensor none;
  common_device("native_batch_norm", {&input, weight ? &*weight : &none, bias ? &*bias : &none,
                                      running_mean ? &*running_mean : &none, running_var ? &*running_var : &none});
  compat::optional<Tensor> mean_cpu = on_cpu(running_mean), var_cpu = on_cpu(running_var);
  auto result = at::native_batch_norm(input.cpu(), on_cpu(weight), on_cpu(bias), mean_cpu, var_cpu, training, momentum, eps);
  if (training) {
    if (mean_cpu.has_value()) running_mean->copy_(*mean_cpu);
    if (var_cpu.has_value()) running_var->copy_(*var_cpu);
  }
  const auto device = input.device();
  return {std::get<0>(result).to(device), std::get<1>(result).to(device), std::get<2>(result).to(device)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("native_batch_norm", native_batch_norm); }

}  // namespace torch_emu
