// Elementwise kernels: arithmetic, comparisons, where, unary math, relu and its backward.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

namespace torch_emu {
namespace native {

at::Tensor add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha);
at::Tensor& add_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha);
at::Tensor sub(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha);
at::Tensor& sub_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha);
at::Tensor mul(const at::Tensor& a, const at::Tensor& b);
at::Tensor& mul_(at::Tensor& self, const at::Tensor& other);
at::Tensor div(const at::Tensor& a, const at::Tensor& b);
at::Tensor& div_(at::Tensor& self, const at::Tensor& other);

// Comparisons (bool results).
at::Tensor eq_tensor(const at::Tensor& a, const at::Tensor& b);
at::Tensor eq_scalar(const at::Tensor& a, const at::Scalar& s);
at::Tensor ne_tensor(const at::Tensor& a, const at::Tensor& b);
at::Tensor ne_scalar(const at::Tensor& a, const at::Scalar& s);
at::Tensor lt_tensor(const at::Tensor& a, const at::Tensor& b);
at::Tensor lt_scalar(const at::Tensor& a, const at::Scalar& s);
at::Tensor le_tensor(const at::Tensor& a, const at::Tensor& b);
at::Tensor le_scalar(const at::Tensor& a, const at::Scalar& s);
at::Tensor gt_tensor(const at::Tensor& a, const at::Tensor& b);
at::Tensor gt_scalar(const at::Tensor& a, const at::Scalar& s);
at::Tensor ge_tensor(const at::Tensor& a, const at::Tensor& b);
at::Tensor ge_scalar(const at::Tensor& a, const at::Scalar& s);

at::Tensor where(const at::Tensor& cond, const at::Tensor& a, const at::Tensor& b);

// Unary math.
at::Tensor abs(const at::Tensor& a);
at::Tensor& abs_(at::Tensor& self);
at::Tensor neg(const at::Tensor& a);
at::Tensor& neg_(at::Tensor& self);
at::Tensor exp(const at::Tensor& a);
at::Tensor& exp_(at::Tensor& self);
at::Tensor log(const at::Tensor& a);
at::Tensor& log_(at::Tensor& self);
at::Tensor sqrt(const at::Tensor& a);
at::Tensor& sqrt_(at::Tensor& self);
at::Tensor rsqrt(const at::Tensor& a);
at::Tensor& rsqrt_(at::Tensor& self);
at::Tensor sin(const at::Tensor& a);
at::Tensor& sin_(at::Tensor& self);
at::Tensor cos(const at::Tensor& a);
at::Tensor& cos_(at::Tensor& self);
at::Tensor tanh(const at::Tensor& a);
at::Tensor& tanh_(at::Tensor& self);
at::Tensor sigmoid(const at::Tensor& a);
at::Tensor& sigmoid_(at::Tensor& self);
at::Tensor reciprocal(const at::Tensor& a);
at::Tensor& reciprocal_(at::Tensor& self);
at::Tensor relu(const at::Tensor& a);
at::Tensor& relu_(at::Tensor& self);
at::Tensor threshold_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Scalar& threshold);

} // namespace native
} // namespace torch_emu
