// Reduction kernels: sum and mean over dims, max over all and over one dim.
#include "aten/native/Reduction.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/ops/max.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/sum.h>

#include "aten/native/Common.h"

namespace torch_emu {
namespace native {

// ---- reductions ----
std::vector<int64_t> reduced_shape(const Tensor& self, const std::vector<int64_t>& dims, bool keepdim) {
  std::vector<bool> reduce(static_cast<size_t>(self.dim()), dims.empty());
  for (int64_t d : dims)
    reduce[static_cast<size_t>(d)] = true;
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!reduce[static_cast<size_t>(d)])
      shape.push_back(self.size(d));
    else if (keepdim)
      shape.push_back(1);
  }
  return shape;
}

std::vector<int64_t> wrap_dims(const Tensor& self, at::OptionalIntArrayRef dim) {
  std::vector<int64_t> dims;
  if (!dim.has_value())
    return dims;
  for (int64_t d : *dim)
    dims.push_back(at::maybe_wrap_dim(d, std::max<int64_t>(self.dim(), 1)));
  if (self.dim() == 0)
    dims.clear();
  return dims;
}

Tensor sum_dim(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, compat::optional<c10::ScalarType> dtype) {
  const auto device = common_device("sum", {&self});
  const auto dims = wrap_dims(self, dim);
  const auto result = dtype.value_or(c10::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type());
  auto as_computed = [](compat::optional<c10::ScalarType> t, bool widened) {
    return widened && t.has_value() ? compat::optional<c10::ScalarType>(wider(*t)) : t;
  };
  const bool widened =
      computes_widened("sum", {result, self.scalar_type(), c10::ScalarType::Undefined}, [&](const Dtypes& d) {
        const bool wide = d[0] != result || d[1] != self.scalar_type();
        at::sum_out(
            as_lvalue(ones_of_rank(self, d[0]).sum(dims, keepdim)),
            ones_of_rank(self, d[1]),
            dims,
            keepdim,
            as_computed(dtype, wide));
      });
  Tensor out = at::empty(reduced_shape(self, dims, keepdim), on_emu(device, result));
  launch(device, [out = arg(out), self = arg(self), dims, keepdim, dtype = as_computed(dtype, widened), widened] {
    write_into(kernel_view(out), widened, [&](Tensor o) {
      at::sum_out(o, computed(kernel_view(self), widened), dims, keepdim, dtype);
    });
  });
  return out;
}

Tensor mean_dim(
    const Tensor& self,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    compat::optional<c10::ScalarType> dtype) {
  const auto result = dtype.value_or(self.scalar_type());
  TORCH_CHECK(
      c10::isFloatingType(result) || c10::isComplexType(result),
      "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: ",
      result);
  const auto device = common_device("mean", {&self});
  const auto dims = wrap_dims(self, dim);
  Tensor out = at::empty(reduced_shape(self, dims, keepdim), on_emu(device, result));
  if (result == at::kHalf || result == at::kBFloat16) {
    // The CPU mean_out of older releases (2.5 among them) sums half types in float into a tensor it assigns to
    // its out argument: written through a view, the result never reached emu memory. Compute, then copy.
    launch(device, [out = arg(out), self = arg(self), dims, keepdim, dtype] {
      kernel_view(out).copy_(at::mean(kernel_view(self), dims, keepdim, dtype));
    });
    return out;
  }
  launch(device, [out = arg(out), self = arg(self), dims, keepdim, dtype] {
    at::mean_out(as_lvalue(kernel_view(out)), kernel_view(self), dims, keepdim, dtype);
  });
  return out;
}

Tensor max_all(const Tensor& self) {
  check_real("max()", self);
  TORCH_CHECK(
      self.numel() > 0,
      "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
  const auto device = common_device("max", {&self});
  Tensor out = at::empty({}, on_emu(device, self.scalar_type()));
  launch(device, [out = arg(out), self = arg(self)] { kernel_view(out).copy_(at::max(kernel_view(self))); });
  return out;
}

std::tuple<Tensor, Tensor> max_dim(const Tensor& self, int64_t dim, bool keepdim) {
  check_real("max()", self);
  const auto device = common_device("max", {&self});
  dim = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  TORCH_CHECK(self.dim() == 0 || self.size(dim) > 0, "max(): Expected reduction dim ", dim, " to have non-zero size.");
  const auto shape = reduced_shape(self, self.dim() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{dim}, keepdim);
  Tensor values = at::empty(shape, on_emu(device, self.scalar_type()));
  Tensor indices = at::empty(shape, on_emu(device, at::kLong));
  launch(device, [values = arg(values), indices = arg(indices), self = arg(self), dim, keepdim] {
    Tensor v = kernel_view(values), i = kernel_view(indices);
    at::max_out(v, i, kernel_view(self), dim, keepdim);
  });
  return {values, indices};
}

} // namespace native
} // namespace torch_emu
