// Softmax kernels: softmax and log_softmax, forward and backward.
#include "aten/native/Softmax.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_log_softmax_backward_data.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>

#include "aten/native/Common.h"

namespace torch_emu {
namespace native {

// ---- softmax ----
// half_to_float (a Half input, a Float result) is CUDA's; computed widened, the input is Float already.
template <typename K>
Tensor softmax_like(const char* op, const Tensor& self, int64_t dim, bool half_to_float, const K& k) {
  const auto device = common_device(op, {&self});
  dim = at::maybe_wrap_dim(dim, self.dim());
  const auto dtype = half_to_float ? at::kFloat : self.scalar_type();
  const bool widened =
      computes_widened(op, {dtype, self.scalar_type(), c10::ScalarType::Undefined}, [&](const Dtypes& d) {
        k(as_lvalue(ones_of_rank(self, d[0])),
          ones_of_rank(self, d[1]),
          dim,
          half_to_float && d[1] == self.scalar_type());
      });
  Tensor out = at::empty(self.sizes(), on_emu(device, dtype));
  launch(device, [out = arg(out), self = arg(self), dim, half_to_float, widened, k] {
    write_into(kernel_view(out), widened, [&](Tensor o) {
      k(o, computed(kernel_view(self), widened), dim, half_to_float && !widened);
    });
  });
  return out;
}
Tensor softmax(const Tensor& self, int64_t dim, bool half_to_float) {
  return softmax_like("softmax", self, dim, half_to_float, [](Tensor& o, const Tensor& x, int64_t d, bool h) {
    at::_softmax_out(o, x, d, h);
  });
}
Tensor log_softmax(const Tensor& self, int64_t dim, bool half_to_float) {
  return softmax_like("log_softmax", self, dim, half_to_float, [](Tensor& o, const Tensor& x, int64_t d, bool h) {
    at::_log_softmax_out(o, x, d, h);
  });
}

template <typename K>
Tensor softmax_backward_like(
    const char* op,
    const Tensor& grad,
    const Tensor& output,
    int64_t dim,
    c10::ScalarType input_dtype,
    const K& k) {
  const auto device = common_device(op, {&grad, &output});
  dim = at::maybe_wrap_dim(dim, grad.dim());
  const bool widened =
      computes_widened(op, {input_dtype, grad.scalar_type(), output.scalar_type()}, [&](const Dtypes& d) {
        k(as_lvalue(ones_of_rank(grad, d[0])), ones_of_rank(grad, d[1]), ones_of_rank(grad, d[2]), dim, d[0]);
      });
  Tensor out = at::empty(grad.sizes(), on_emu(device, input_dtype));
  launch(device, [out = arg(out), grad = arg(grad), output = arg(output), dim, input_dtype, widened, k] {
    write_into(kernel_view(out), widened, [&](Tensor o) {
      k(o, computed(kernel_view(grad), widened), computed(kernel_view(output), widened), dim, o.scalar_type());
    });
  });
  return out;
}
Tensor softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim, c10::ScalarType input_dtype) {
  return softmax_backward_like(
      "softmax_backward",
      grad,
      output,
      dim,
      input_dtype,
      [](Tensor& o, const Tensor& g, const Tensor& y, int64_t d, c10::ScalarType t) {
        at::_softmax_backward_data_out(o, g, y, d, t);
      });
}
Tensor log_softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim, c10::ScalarType input_dtype) {
  return softmax_backward_like(
      "log_softmax_backward",
      grad,
      output,
      dim,
      input_dtype,
      [](Tensor& o, const Tensor& g, const Tensor& y, int64_t d, c10::ScalarType t) {
        at::_log_softmax_backward_data_out(o, g, y, d, t);
      });
}

} // namespace native
} // namespace torch_emu
