// Fill kernels: fill_ with a scalar or a 0-dim tensor, and zero_.
#include "aten/native/Fill.h"

#include <ATen/TensorIterator.h>
#include <ATen/ops/fill.h>
#include <ATen/ops/zeros.h>

#include "aten/native/Common.h"

namespace torch_emu {
namespace native {

// The CPU's fill kernel for the dtype, tried on one element when first met: the bit and sub-byte dtypes
// it lacks raise at the call, not inside the queued work at the next synchronize.
void check_fill_supported(c10::ScalarType dtype, c10::ScalarType value_type) {
  probe_once("fill_", dtype, value_type, c10::ScalarType::Undefined, [&] {
    at::zeros({1}, at::TensorOptions().dtype(dtype)).fill_(at::zeros({}, at::TensorOptions().dtype(value_type)));
  });
}

Tensor& fill_scalar(Tensor& self, const at::Scalar& value) {
  const auto device = common_device("fill_", {&self});
  check_fill_supported(self.scalar_type(), value.type());
  launch(device, [self = arg(self), value] { kernel_view(self).fill_(value); });
  return self;
}
Tensor& fill_tensor(Tensor& self, const Tensor& value) {
  TORCH_CHECK(
      value.dim() == 0,
      "fill_ only supports 0-dimension value tensor but got tensor with ",
      value.dim(),
      " dimensions.");
  const auto device = common_device("fill_", {&self, &value});
  check_fill_supported(self.scalar_type(), value.scalar_type());
  launch(device, [self = arg(self), value = arg(value)] { kernel_view(self).fill_(kernel_view(value)); });
  return self;
}
// As the CPU's zero_, which the kernel runs: a small dense tensor is cleared with memset (any dtype),
// anything else is filled with 0, which the dtype must support.
Tensor& zero_(Tensor& self) {
  const auto device = common_device("zero_", {&self});
  if (!self.is_non_overlapping_and_dense() || self.numel() >= at::internal::GRAIN_SIZE)
    check_fill_supported(self.scalar_type(), c10::ScalarType::Long);
  launch(device, [self = arg(self)] { kernel_view(self).zero_(); });
  return self;
}

} // namespace native
} // namespace torch_emu
