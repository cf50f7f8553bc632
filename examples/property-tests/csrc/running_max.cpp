// propops::running_max(x) on CPU: each element the largest of x[0..i] (a 1-D floating tensor), registered with
// TORCH_LIBRARY in a library loaded by torch.ops.load_library.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like.h>
#include <torch/library.h>

#include <algorithm>

namespace {

at::Tensor running_max(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 1, "running_max: x must be 1-D, got ", x.dim(), " dimensions");
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty_like(in);
  AT_DISPATCH_FLOATING_TYPES(in.scalar_type(), "running_max", [&] {
    const scalar_t* src = in.const_data_ptr<scalar_t>();
    scalar_t* dst = out.mutable_data_ptr<scalar_t>();
    for (int64_t i = 0; i < in.numel(); ++i) {
      dst[i] = i == 0 ? src[0] : std::max(dst[i - 1], src[i]);
    }
  });
  return out;
}

} // namespace

TORCH_LIBRARY(propops, m) {
  m.def("running_max(Tensor x) -> Tensor");
}

TORCH_LIBRARY_IMPL(propops, CPU, m) {
  m.impl("running_max", &running_max);
}
