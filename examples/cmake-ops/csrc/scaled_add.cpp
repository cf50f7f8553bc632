// cmake_ops::scaled_add(a, b, alpha) = a + alpha * b on CPU: one operator, registered with TORCH_LIBRARY.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

namespace {

at::Tensor scaled_add(const at::Tensor& a, const at::Tensor& b, double alpha) {
  TORCH_CHECK(a.sizes() == b.sizes(), "scaled_add: shapes differ: ", a.sizes(), " and ", b.sizes());
  TORCH_CHECK(
      a.scalar_type() == b.scalar_type(), "scaled_add: dtypes differ: ", a.scalar_type(), " and ", b.scalar_type());
  const at::Tensor x = a.contiguous();
  const at::Tensor y = b.contiguous();
  at::Tensor out = at::empty_like(x);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "scaled_add", [&] {
    const scalar_t* px = x.const_data_ptr<scalar_t>();
    const scalar_t* py = y.const_data_ptr<scalar_t>();
    scalar_t* po = out.mutable_data_ptr<scalar_t>();
    const auto scale = static_cast<scalar_t>(alpha);
    for (int64_t i = 0; i < x.numel(); ++i) {
      po[i] = px[i] + scale * py[i];
    }
  });
  return out;
}

} // namespace

TORCH_LIBRARY(cmake_ops, m) {
  m.def("scaled_add(Tensor a, Tensor b, float alpha) -> Tensor");
}

TORCH_LIBRARY_IMPL(cmake_ops, CPU, m) {
  m.impl("scaled_add", &scaled_add);
}
