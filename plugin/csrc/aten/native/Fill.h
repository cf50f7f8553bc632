// Fill kernels: fill_ with a scalar or a 0-dim tensor, and zero_.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

namespace torch_emu {
namespace native {

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value);
at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value);
at::Tensor& zero_(at::Tensor& self);

} // namespace native
} // namespace torch_emu
