// The native kernels' registrations for PrivateUse1: each op's schema name and its kernel in native/, apart from
// the kernels themselves (as PyTorch's reference backend keeps registrations apart from its native/ kernels).
#include <torch/library.h>

#include "aten/native/Arithmetic.h"
#include "aten/native/Fill.h"
#include "aten/native/Indexing.h"
#include "aten/native/LinearAlgebra.h"
#include "aten/native/Reduction.h"
#include "aten/native/Softmax.h"

namespace torch_emu {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", native::add);
  m.impl("add_.Tensor", native::add_);
  m.impl("sub.Tensor", native::sub);
  m.impl("sub_.Tensor", native::sub_);
  m.impl("mul.Tensor", native::mul);
  m.impl("mul_.Tensor", native::mul_);
  m.impl("div.Tensor", native::div);
  m.impl("div_.Tensor", native::div_);
  m.impl("eq.Tensor", native::eq_tensor);
  m.impl("eq.Scalar", native::eq_scalar);
  m.impl("ne.Tensor", native::ne_tensor);
  m.impl("ne.Scalar", native::ne_scalar);
  m.impl("lt.Tensor", native::lt_tensor);
  m.impl("lt.Scalar", native::lt_scalar);
  m.impl("le.Tensor", native::le_tensor);
  m.impl("le.Scalar", native::le_scalar);
  m.impl("gt.Tensor", native::gt_tensor);
  m.impl("gt.Scalar", native::gt_scalar);
  m.impl("ge.Tensor", native::ge_tensor);
  m.impl("ge.Scalar", native::ge_scalar);
  m.impl("where.self", native::where);
  m.impl("abs", native::abs);
  m.impl("abs_", native::abs_);
  m.impl("neg", native::neg);
  m.impl("neg_", native::neg_);
  m.impl("exp", native::exp);
  m.impl("exp_", native::exp_);
  m.impl("log", native::log);
  m.impl("log_", native::log_);
  m.impl("sqrt", native::sqrt);
  m.impl("sqrt_", native::sqrt_);
  m.impl("rsqrt", native::rsqrt);
  m.impl("rsqrt_", native::rsqrt_);
  m.impl("sin", native::sin);
  m.impl("sin_", native::sin_);
  m.impl("cos", native::cos);
  m.impl("cos_", native::cos_);
  m.impl("tanh", native::tanh);
  m.impl("tanh_", native::tanh_);
  m.impl("sigmoid", native::sigmoid);
  m.impl("sigmoid_", native::sigmoid_);
  m.impl("reciprocal", native::reciprocal);
  m.impl("reciprocal_", native::reciprocal_);
  m.impl("relu", native::relu);
  m.impl("relu_", native::relu_);
  m.impl("threshold_backward", native::threshold_backward);
  m.impl("fill_.Scalar", native::fill_scalar);
  m.impl("fill_.Tensor", native::fill_tensor);
  m.impl("zero_", native::zero_);
  m.impl("sum.dim_IntList", native::sum_dim);
  m.impl("mean.dim", native::mean_dim);
  m.impl("max", native::max_all);
  m.impl("max.dim", native::max_dim);
  m.impl("mm", native::mm);
  m.impl("bmm", native::bmm);
  m.impl("addmm", native::addmm);
  m.impl("_softmax", native::softmax);
  m.impl("_log_softmax", native::log_softmax);
  m.impl("_softmax_backward_data", native::softmax_backward);
  m.impl("_log_softmax_backward_data", native::log_softmax_backward);
  m.impl("index_select", native::index_select);
  m.impl("cat", native::cat);
}

} // namespace torch_emu
