// Elementwise kernels: arithmetic, comparisons, where, unary math, relu and its backward.
#include "aten/native/Arithmetic.h"

#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/div.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/le.h>
#include <ATen/ops/log.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/threshold_backward.h>
#include <ATen/ops/where.h>

#include "aten/native/Common.h"

namespace torch_emu {
namespace native {

// ---- arithmetic ----
Tensor add(const Tensor& a, const Tensor& b, const at::Scalar& alpha) {
  return binary("add", a, b, at::result_type(a, b), [alpha](Tensor o, const Tensor& x, const Tensor& y) {
    at::add_out(o, x, y, alpha);
  });
}
Tensor& add_(Tensor& self, const Tensor& other, const at::Scalar& alpha) {
  return binary_(
      "add_", self, other, at::result_type(self, other), [alpha](Tensor o, const Tensor& x, const Tensor& y) {
        at::add_out(o, x, y, alpha);
      });
}
void check_sub(const Tensor& a, const Tensor& b) {
  TORCH_CHECK(
      a.scalar_type() != at::kBool || b.scalar_type() != at::kBool,
      "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead.");
  TORCH_CHECK(
      a.scalar_type() != at::kBool && b.scalar_type() != at::kBool,
      "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
}
Tensor sub(const Tensor& a, const Tensor& b, const at::Scalar& alpha) {
  check_sub(a, b);
  return binary("sub", a, b, at::result_type(a, b), [alpha](Tensor o, const Tensor& x, const Tensor& y) {
    at::sub_out(o, x, y, alpha);
  });
}
Tensor& sub_(Tensor& self, const Tensor& other, const at::Scalar& alpha) {
  check_sub(self, other);
  return binary_(
      "sub_", self, other, at::result_type(self, other), [alpha](Tensor o, const Tensor& x, const Tensor& y) {
        at::sub_out(o, x, y, alpha);
      });
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary(
      "mul", a, b, at::result_type(a, b), [](Tensor o, const Tensor& x, const Tensor& y) { at::mul_out(o, x, y); });
}
Tensor& mul_(Tensor& self, const Tensor& other) {
  return binary_("mul_", self, other, at::result_type(self, other), [](Tensor o, const Tensor& x, const Tensor& y) {
    at::mul_out(o, x, y);
  });
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binary("div", a, b, float_result(at::result_type(a, b)), [](Tensor o, const Tensor& x, const Tensor& y) {
    at::div_out(o, x, y);
  });
}
Tensor& div_(Tensor& self, const Tensor& other) {
  return binary_(
      "div_", self, other, float_result(at::result_type(self, other)), [](Tensor o, const Tensor& x, const Tensor& y) {
        at::div_out(o, x, y);
      });
}

// ---- comparisons (bool results) ----
// Ordering has no meaning for complex numbers: aten refuses them when the kernel is chosen,
// so emu refuses them here, at the call, not later inside the queued kernel.
void check_ordered(const char* op, c10::ScalarType t) {
  TORCH_CHECK_NOT_IMPLEMENTED(!c10::isComplexType(t), '"', op, "\" not implemented for '", c10::toString(t), "'");
}
void check_equality(const char*, c10::ScalarType) {}

#define EMU_COMPARISON(NAME, CHECK)                                                                           \
  Tensor NAME##_tensor(const Tensor& a, const Tensor& b) {                                                    \
    CHECK(#NAME "_emu", at::result_type(a, b));                                                               \
    return binary(                                                                                            \
        #NAME, a, b, at::kBool, [](Tensor o, const Tensor& x, const Tensor& y) { at::NAME##_out(o, x, y); }); \
  }                                                                                                           \
  Tensor NAME##_scalar(const Tensor& a, const at::Scalar& s) {                                                \
    CHECK(#NAME "_emu", at::result_type(a, s));                                                               \
    return unary(#NAME, a, at::kBool, [s](Tensor o, const Tensor& x) { at::NAME##_out(o, x, s); });           \
  }
EMU_COMPARISON(eq, check_equality)
EMU_COMPARISON(ne, check_equality)
EMU_COMPARISON(lt, check_ordered)
EMU_COMPARISON(le, check_ordered)
EMU_COMPARISON(gt, check_ordered)
EMU_COMPARISON(ge, check_ordered)
#undef EMU_COMPARISON

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  TORCH_CHECK(
      cond.scalar_type() == at::kBool || cond.scalar_type() == at::kByte,
      "where expected condition to be a boolean tensor, but got a tensor with dtype ",
      cond.scalar_type());
  const auto device = common_device("where", {&cond, &a, &b});
  const auto shape = at::infer_size(cond.sizes(), at::infer_size(a.sizes(), b.sizes()));
  Tensor out = at::empty(shape, on_emu(device, at::result_type(a, b)));
  launch(device, [out = arg(out), cond = arg(cond), a = arg(a), b = arg(b)] {
    at::where_out(as_lvalue(kernel_view(out)), kernel_view(cond), kernel_view(a), kernel_view(b));
  });
  return out;
}

// ---- unary math ----
#define EMU_UNARY(NAME, RESULT)                                                                                \
  Tensor NAME(const Tensor& a) {                                                                               \
    return unary(#NAME, a, RESULT(a.scalar_type()), [](Tensor o, const Tensor& x) { at::NAME##_out(o, x); });  \
  }                                                                                                            \
  Tensor& NAME##_(Tensor& self) {                                                                              \
    return unary_(                                                                                             \
        #NAME "_", self, RESULT(self.scalar_type()), [](Tensor o, const Tensor& x) { at::NAME##_out(o, x); }); \
  }
c10::ScalarType same(c10::ScalarType t) {
  return t;
}
// abs of a complex tensor is its real magnitude (aten's result-type rule for abs).
c10::ScalarType magnitude(c10::ScalarType t) {
  return c10::toRealValueType(t);
}
c10::ScalarType abs_in_place(c10::ScalarType t) {
  TORCH_CHECK(!c10::isComplexType(t), "In-place abs is not supported for complex tensors.");
  return t;
}
// CUDA's abs takes Bool, where it is the identity; the CPU kernel refuses it.
Tensor abs(const Tensor& a) {
  if (a.scalar_type() == at::kBool)
    return unary("abs", a, at::kBool, [](Tensor o, const Tensor& x) { o.copy_(x); });
  return unary("abs", a, magnitude(a.scalar_type()), [](Tensor o, const Tensor& x) { at::abs_out(o, x); });
}
Tensor& abs_(Tensor& self) {
  if (self.scalar_type() == at::kBool)
    return self;
  return unary_("abs_", self, abs_in_place(self.scalar_type()), [](Tensor o, const Tensor& x) { at::abs_out(o, x); });
}
EMU_UNARY(neg, same) // neg of bool: the CPU probe raises aten's own error (NotImplementedError from 2.15 on)
EMU_UNARY(exp, float_result)
EMU_UNARY(log, float_result)
EMU_UNARY(sqrt, float_result)
EMU_UNARY(rsqrt, float_result)
EMU_UNARY(sin, float_result)
EMU_UNARY(cos, float_result)
EMU_UNARY(tanh, float_result)
EMU_UNARY(sigmoid, float_result)
EMU_UNARY(reciprocal, float_result)
#undef EMU_UNARY

Tensor relu(const Tensor& a) {
  check_real("clamp", a);
  return unary("relu", a, a.scalar_type(), [](Tensor o, const Tensor& x) { o.copy_(at::relu(x)); });
}
Tensor& relu_(Tensor& self) {
  check_real("clamp", self);
  const auto device = common_device("relu_", {&self});
  launch(device, [self = arg(self)] { kernel_view(self).clamp_min_(0); });
  return self;
}

// relu's backward (threshold 0) as a kernel of its own, not the CPU fallback: the fallback copies through the host,
// which a graph capture cannot record, so a captured training step with relu needs it.
Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, const at::Scalar& threshold) {
  return binary(
      "threshold_backward",
      grad_output,
      self,
      at::result_type(grad_output, self),
      [threshold](Tensor o, const Tensor& g, const Tensor& x) { at::threshold_backward_out(o, g, x, threshold); });
}

} // namespace native
} // namespace torch_emu
