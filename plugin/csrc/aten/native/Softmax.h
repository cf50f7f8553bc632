// Softmax kernels: softmax and log_softmax, forward and backward.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

namespace torch_emu {
namespace native {

at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float);
at::Tensor log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float);
at::Tensor softmax_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim, c10::ScalarType input_dtype);
at::Tensor log_softmax_backward(
    const at::Tensor& grad,
    const at::Tensor& output,
    int64_t dim,
    c10::ScalarType input_dtype);

} // namespace native
} // namespace torch_emu
