// Linear algebra kernels: mm, bmm and addmm.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

namespace torch_emu {
namespace native {

at::Tensor mm(const at::Tensor& a, const at::Tensor& b);
at::Tensor bmm(const at::Tensor& a, const at::Tensor& b);
at::Tensor addmm(
    const at::Tensor& self,
    const at::Tensor& a,
    const at::Tensor& b,
    const at::Scalar& beta,
    const at::Scalar& alpha);

} // namespace native
} // namespace torch_emu
