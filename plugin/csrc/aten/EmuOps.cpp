// Native compute kernels. Shapes, dtypes and devices are settled on the caller's thread
// (so user errors raise where the op is called); the arithmetic runs as stream work, on
// CPU tensors aliasing device memory, with ATen's CPU kernels.
#include <ATen/ExpandUtils.h>
#include <ATen/TensorIterator.h>  // at::internal::GRAIN_SIZE
#include <ATen/WrapDimUtils.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/fill.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/le.h>
#include <ATen/ops/log.h>
#include <ATen/ops/_log_softmax.h>
#include <ATen/ops/_log_softmax_backward_data.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/max.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DefaultDtype.h>
#include <torch/library.h>

#include <array>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "Launch.h"
#include "Widen.h"

namespace torch_emu {

namespace {

using at::Tensor;

at::TensorOptions on_emu(c10::DeviceIndex device, c10::ScalarType dtype) {
  return at::TensorOptions().dtype(dtype).device(c10::Device(c10::DeviceType::PrivateUse1, device));
}

c10::ScalarType default_float() { return c10::typeMetaToScalarType(c10::get_default_dtype()); }

c10::ScalarType float_result(c10::ScalarType t) { return c10::isIntegralType(t, /*includeBool=*/true) ? default_float() : t; }

void check_inplace(const char* op, const Tensor& self, c10::IntArrayRef shape, c10::ScalarType result) {
  TORCH_CHECK(shape == self.sizes(), op, ": output with shape ", self.sizes(), " doesn't match the broadcast shape ", shape);
  TORCH_CHECK(c10::canCast(result, self.scalar_type()), op, ": result type ", result,
              " can't be cast to the desired output type ", self.scalar_type());
}

// ---- dtype support, checked at the call ----
// ATen's CPU kernels refuse unsupported dtypes only when they run ("abs_cpu" not implemented for
// 'Bool'): inside queued work that would surface at the next synchronize. So the kernel first
// runs here on one-element CPU tensors of the same dtypes, once per (op, dtypes) and thread, and
// raises aten's own error at the call.
Tensor one_on_cpu(c10::ScalarType t) { return at::ones({1}, at::TensorOptions().dtype(t)); }

// Ones on the CPU with t's rank (every size 1): dims valid for t are valid for it.
Tensor ones_of_rank(const Tensor& t, c10::ScalarType dtype) {
  return at::ones(std::vector<int64_t>(static_cast<size_t>(t.dim()), 1), at::TensorOptions().dtype(dtype));
}

template <typename Run>
void probe_once(const char* op, c10::ScalarType out, c10::ScalarType a, c10::ScalarType b, const Run& run) {
  thread_local std::set<std::tuple<const char*, int, int, int>> supported;
  const auto key = std::make_tuple(op, int(out), int(a), int(b));
  if (supported.count(key) != 0) return;
  run();
  supported.insert(key);
}
template <typename K>
bool probe_dtypes(const char* op, c10::ScalarType out, c10::ScalarType a, c10::ScalarType b, const K& k) {
  return computes_widened(op, {out, a, b}, [&](const Dtypes& d) { k(one_on_cpu(d[0]), one_on_cpu(d[1]), one_on_cpu(d[2])); });
}
template <typename K>
bool probe_dtypes(const char* op, c10::ScalarType out, c10::ScalarType a, const K& k) {
  return computes_widened(op, {out, a, c10::ScalarType::Undefined}, [&](const Dtypes& d) { k(one_on_cpu(d[0]), one_on_cpu(d[1])); });
}

// ---- elementwise binary: K(out, a, b) runs the CPU op ----
template <typename K>
Tensor binary(const char* op, const Tensor& a, const Tensor& b, c10::ScalarType dtype, K k) {
  const auto device = common_device(op, {&a, &b});
  const bool widened = probe_dtypes(op, dtype, a.scalar_type(), b.scalar_type(), k);
  Tensor out = at::empty(at::infer_size(a.sizes(), b.sizes()), on_emu(device, dtype));
  launch(device, [out = arg(out), a = arg(a), b = arg(b), k, widened] {
    write_into(kernel_view(out), widened, [&](Tensor o) { k(o, computed(kernel_view(a), widened), computed(kernel_view(b), widened)); });
  });
  return out;
}

template <typename K>
Tensor& binary_(const char* op, Tensor& self, const Tensor& other, c10::ScalarType result, K k) {
  const auto device = common_device(op, {&self, &other});
  check_inplace(op, self, at::infer_size(self.sizes(), other.sizes()), result);
  const bool widened = probe_dtypes(op, self.scalar_type(), self.scalar_type(), other.scalar_type(), k);
  launch(device, [self = arg(self), other = arg(other), k, widened] {
    Tensor s = kernel_view(self);
    write_into(s, widened, [&](Tensor o) { k(o, computed(s, widened), computed(kernel_view(other), widened)); });
  });
  return self;
}

// ---- elementwise unary (and tensor-with-scalar): K(out, a) ----
template <typename K>
Tensor unary(const char* op, const Tensor& a, c10::ScalarType dtype, K k) {
  const auto device = common_device(op, {&a});
  const bool widened = probe_dtypes(op, dtype, a.scalar_type(), k);
  Tensor out = at::empty(a.sizes(), on_emu(device, dtype));
  launch(device, [out = arg(out), a = arg(a), k, widened] {
    write_into(kernel_view(out), widened, [&](Tensor o) { k(o, computed(kernel_view(a), widened)); });
  });
  return out;
}

template <typename K>
Tensor& unary_(const char* op, Tensor& self, c10::ScalarType result, K k) {
  const auto device = common_device(op, {&self});
  check_inplace(op, self, self.sizes(), result);
  const bool widened = probe_dtypes(op, self.scalar_type(), self.scalar_type(), k);
  launch(device, [self = arg(self), k, widened] {
    Tensor s = kernel_view(self);
    write_into(s, widened, [&](Tensor o) { k(o, computed(s, widened)); });
  });
  return self;
}

// ---- arithmetic ----
Tensor add(const Tensor& a, const Tensor& b, const at::Scalar& alpha) {
  return binary("add", a, b, at::result_type(a, b), [alpha](Tensor o, const Tensor& x, const Tensor& y) { at::add_out(o, x, y, alpha); });
}
Tensor& add_(Tensor& self, const Tensor& other, const at::Scalar& alpha) {
  return binary_("add_", self, other, at::result_type(self, other),
                 [alpha](Tensor o, const Tensor& x, const Tensor& y) { at::add_out(o, x, y, alpha); });
}
void check_sub(const Tensor& a, const Tensor& b) {
  TORCH_CHECK(a.scalar_type() != at::kBool || b.scalar_type() != at::kBool,
              "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead.");
  TORCH_CHECK(a.scalar_type() != at::kBool && b.scalar_type() != at::kBool,
              "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.");
}
Tensor sub(const Tensor& a, const Tensor& b, const at::Scalar& alpha) {
  check_sub(a, b);
  return binary("sub", a, b, at::result_type(a, b), [alpha](Tensor o, const Tensor& x, const Tensor& y) { at::sub_out(o, x, y, alpha); });
}
Tensor& sub_(Tensor& self, const Tensor& other, const at::Scalar& alpha) {
  check_sub(self, other);
  return binary_("sub_", self, other, at::result_type(self, other),
                 [alpha](Tensor o, const Tensor& x, const Tensor& y) { at::sub_out(o, x, y, alpha); });
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary("mul", a, b, at::result_type(a, b), [](Tensor o, const Tensor& x, const Tensor& y) { at::mul_out(o, x, y); });
}
Tensor& mul_(Tensor& self, const Tensor& other) {
  return binary_("mul_", self, other, at::result_type(self, other), [](Tensor o, const Tensor& x, const Tensor& y) { at::mul_out(o, x, y); });
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binary("div", a, b, float_result(at::result_type(a, b)), [](Tensor o, const Tensor& x, const Tensor& y) { at::div_out(o, x, y); });
}
Tensor& div_(Tensor& self, const Tensor& other) {
  return binary_("div_", self, other, float_result(at::result_type(self, other)),
                 [](Tensor o, const Tensor& x, const Tensor& y) { at::div_out(o, x, y); });
}

// ---- comparisons (bool results) ----
// Ordering has no meaning for complex numbers: aten refuses them when the kernel is chosen,
// so emu refuses them here, at the call, not later inside the queued kernel.
void check_ordered(const char* op, c10::ScalarType t) {
  TORCH_CHECK_NOT_IMPLEMENTED(!c10::isComplexType(t), '"', op, "\" not implemented for '", c10::toString(t), "'");
}
void check_equality(const char*, c10::ScalarType) {}

#define EMU_COMPARISON(NAME, CHECK)                                                                                 \
  Tensor NAME##_tensor(const Tensor& a, const Tensor& b) {                                                          \
    CHECK(#NAME "_emu", at::result_type(a, b));                                                                     \
    return binary(#NAME, a, b, at::kBool, [](Tensor o, const Tensor& x, const Tensor& y) { at::NAME##_out(o, x, y); }); \
  }                                                                                                                 \
  Tensor NAME##_scalar(const Tensor& a, const at::Scalar& s) {                                                      \
    CHECK(#NAME "_emu", at::result_type(a, s));                                                                     \
    return unary(#NAME, a, at::kBool, [s](Tensor o, const Tensor& x) { at::NAME##_out(o, x, s); });                 \
  }
EMU_COMPARISON(eq, check_equality)
EMU_COMPARISON(ne, check_equality)
EMU_COMPARISON(lt, check_ordered)
EMU_COMPARISON(le, check_ordered)
EMU_COMPARISON(gt, check_ordered)
EMU_COMPARISON(ge, check_ordered)
#undef EMU_COMPARISON

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  TORCH_CHECK(cond.scalar_type() == at::kBool || cond.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ", cond.scalar_type());
  const auto device = common_device("where", {&cond, &a, &b});
  const auto shape = at::infer_size(cond.sizes(), at::infer_size(a.sizes(), b.sizes()));
  Tensor out = at::empty(shape, on_emu(device, at::result_type(a, b)));
  launch(device, [out = arg(out), cond = arg(cond), a = arg(a), b = arg(b)] { at::where_out(as_lvalue(kernel_view(out)), kernel_view(cond), kernel_view(a), kernel_view(b)); });
  return out;
}

// ---- unary math ----
#define EMU_UNARY(NAME, RESULT)                                                                              \
  Tensor NAME(const Tensor& a) {                                                                             \
    return unary(#NAME, a, RESULT(a.scalar_type()), [](Tensor o, const Tensor& x) { at::NAME##_out(o, x); }); \
  }                                                                                                          \
  Tensor& NAME##_(Tensor& self) {                                                                            \
    return unary_(#NAME "_", self, RESULT(self.scalar_type()), [](Tensor o, const Tensor& x) { at::NAME##_out(o, x); }); \
  }
c10::ScalarType same(c10::ScalarType t) { return t; }
// abs of a complex tensor is its real magnitude (aten's result-type rule for abs).
c10::ScalarType magnitude(c10::ScalarType t) { return c10::toRealValueType(t); }
c10::ScalarType abs_in_place(c10::ScalarType t) {
  TORCH_CHECK(!c10::isComplexType(t), "In-place abs is not supported for complex tensors.");
  return t;
}
// CUDA's abs takes Bool, where it is the identity; the CPU kernel refuses it.
Tensor abs(const Tensor& a) {
  if (a.scalar_type() == at::kBool) return unary("abs", a, at::kBool, [](Tensor o, const Tensor& x) { o.copy_(x); });
  return unary("abs", a, magnitude(a.scalar_type()), [](Tensor o, const Tensor& x) { at::abs_out(o, x); });
}
Tensor& abs_(Tensor& self) {
  if (self.scalar_type() == at::kBool) return self;
  return unary_("abs_", self, abs_in_place(self.scalar_type()), [](Tensor o, const Tensor& x) { at::abs_out(o, x); });
}
EMU_UNARY(neg, same)  // neg of bool: the CPU probe raises aten's own error (NotImplementedError from 2.15 on)
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

void check_real(const char* what, const Tensor& t) {
  TORCH_CHECK(!t.is_complex(), what, " is not supported for complex types");
}
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

// The CPU's fill kernel for the dtype, tried on one element when first met: the bit and sub-byte dtypes
// it lacks raise at the call, not inside the queued work at the next synchronize.
void check_fill_supported(c10::ScalarType dtype, c10::ScalarType value_type) {
  probe_once("fill_", dtype, value_type, c10::ScalarType::Undefined,
             [&] { at::zeros({1}, at::TensorOptions().dtype(dtype)).fill_(at::zeros({}, at::TensorOptions().dtype(value_type))); });
}

Tensor& fill_scalar(Tensor& self, const at::Scalar& value) {
  const auto device = common_device("fill_", {&self});
  check_fill_supported(self.scalar_type(), value.type());
  launch(device, [self = arg(self), value] { kernel_view(self).fill_(value); });
  return self;
}
Tensor& fill_tensor(Tensor& self, const Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(), " dimensions.");
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

// ---- reductions ----
std::vector<int64_t> reduced_shape(const Tensor& self, const std::vector<int64_t>& dims, bool keepdim) {
  std::vector<bool> reduce(static_cast<size_t>(self.dim()), dims.empty());
  for (int64_t d : dims) reduce[static_cast<size_t>(d)] = true;
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!reduce[static_cast<size_t>(d)]) shape.push_back(self.size(d));
    else if (keepdim) shape.push_back(1);
  }
  return shape;
}

std::vector<int64_t> wrap_dims(const Tensor& self, at::OptionalIntArrayRef dim) {
  std::vector<int64_t> dims;
  if (!dim.has_value()) return dims;
  for (int64_t d : *dim) dims.push_back(at::maybe_wrap_dim(d, std::max<int64_t>(self.dim(), 1)));
  if (self.dim() == 0) dims.clear();
  return dims;
}

Tensor sum_dim(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, compat::optional<c10::ScalarType> dtype) {
  const auto device = common_device("sum", {&self});
  const auto dims = wrap_dims(self, dim);
  const auto result = dtype.value_or(c10::isIntegralType(self.scalar_type(), true) ? at::kLong : self.scalar_type());
  auto as_computed = [](compat::optional<c10::ScalarType> t, bool widened) {
    return widened && t.has_value() ? compat::optional<c10::ScalarType>(wider(*t)) : t;
  };
  const bool widened = computes_widened("sum", {result, self.scalar_type(), c10::ScalarType::Undefined}, [&](const Dtypes& d) {
    const bool wide = d[0] != result || d[1] != self.scalar_type();
    at::sum_out(as_lvalue(ones_of_rank(self, d[0]).sum(dims, keepdim)), ones_of_rank(self, d[1]), dims, keepdim, as_computed(dtype, wide));
  });
  Tensor out = at::empty(reduced_shape(self, dims, keepdim), on_emu(device, result));
  launch(device, [out = arg(out), self = arg(self), dims, keepdim, dtype = as_computed(dtype, widened), widened] {
    write_into(kernel_view(out), widened, [&](Tensor o) { at::sum_out(o, computed(kernel_view(self), widened), dims, keepdim, dtype); });
  });
  return out;
}

Tensor mean_dim(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, compat::optional<c10::ScalarType> dtype) {
  const auto result = dtype.value_or(self.scalar_type());
  TORCH_CHECK(c10::isFloatingType(result) || c10::isComplexType(result),
              "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: ", result);
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
  launch(device, [out = arg(out), self = arg(self), dims, keepdim, dtype] { at::mean_out(as_lvalue(kernel_view(out)), kernel_view(self), dims, keepdim, dtype); });
  return out;
}

Tensor max_all(const Tensor& self) {
  check_real("max()", self);
  TORCH_CHECK(self.numel() > 0, "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.");
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

// ---- linear algebra ----
void check_matmul_dtypes(const char* op, const Tensor& a, const Tensor& b) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected m1 and m2 to have the same dtype, but got: ", a.scalar_type(),
              " != ", b.scalar_type(), " (in ", op, ")");
}

Tensor mm(const Tensor& a, const Tensor& b) {
  TORCH_CHECK(a.dim() == 2, "self must be a matrix");
  TORCH_CHECK(b.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1), " and ",
              b.size(0), "x", b.size(1), ")");
  check_matmul_dtypes("mm", a, b);
  const bool widened = computes_widened("mm", {a.scalar_type(), a.scalar_type(), b.scalar_type()}, [&](const Dtypes& d) {
    at::mm_out(as_lvalue(one_on_cpu(d[0]).view({1, 1})), one_on_cpu(d[1]).view({1, 1}), one_on_cpu(d[2]).view({1, 1}));
  });
  const auto device = common_device("mm", {&a, &b});
  Tensor out = at::empty({a.size(0), b.size(1)}, on_emu(device, a.scalar_type()));
  launch(device, [out = arg(out), a = arg(a), b = arg(b), widened] {
    write_into(kernel_view(out), widened, [&](Tensor o) { at::mm_out(o, computed(kernel_view(a), widened), computed(kernel_view(b), widened)); });
  });
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  TORCH_CHECK(a.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), "Expected size for first two dimensions of batch2 tensor to be: [",
              a.size(0), ", ", a.size(2), "] but got: [", b.size(0), ", ", b.size(1), "].");
  check_matmul_dtypes("bmm", a, b);
  const bool widened = computes_widened("bmm", {a.scalar_type(), a.scalar_type(), b.scalar_type()}, [&](const Dtypes& d) {
    at::bmm_out(as_lvalue(one_on_cpu(d[0]).view({1, 1, 1})), one_on_cpu(d[1]).view({1, 1, 1}), one_on_cpu(d[2]).view({1, 1, 1}));
  });
  const auto device = common_device("bmm", {&a, &b});
  Tensor out = at::empty({a.size(0), a.size(1), b.size(2)}, on_emu(device, a.scalar_type()));
  launch(device, [out = arg(out), a = arg(a), b = arg(b), widened] {
    write_into(kernel_view(out), widened, [&](Tensor o) { at::bmm_out(o, computed(kernel_view(a), widened), computed(kernel_view(b), widened)); });
  });
  return out;
}

Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const at::Scalar& beta, const at::Scalar& alpha) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "addmm: mat1 and mat2 must be matrices, got ", a.dim(), "-D and ", b.dim(), "-D");
  TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1), " and ",
              b.size(0), "x", b.size(1), ")");
  check_matmul_dtypes("addmm", a, b);
  // dtypes: the result's (a's), self's, b's (a's too, checked above)
  const bool widened = computes_widened("addmm", {a.scalar_type(), self.scalar_type(), b.scalar_type()}, [&](const Dtypes& d) {
    at::addmm_out(as_lvalue(one_on_cpu(d[0]).view({1, 1})), one_on_cpu(d[1]).view({1, 1}), one_on_cpu(d[0]).view({1, 1}),
                  one_on_cpu(d[2]).view({1, 1}), beta, alpha);
  });
  const auto device = common_device("addmm", {&self, &a, &b});
  Tensor out = at::empty({a.size(0), b.size(1)}, on_emu(device, a.scalar_type()));
  TORCH_CHECK(at::is_expandable_to(self.sizes(), out.sizes()), "addmm: self of shape ", self.sizes(),
              " cannot broadcast to the result shape ", out.sizes());
  launch(device, [out = arg(out), self = arg(self), a = arg(a), b = arg(b), beta, alpha, widened] {
    write_into(kernel_view(out), widened, [&](Tensor o) {
      at::addmm_out(o, computed(kernel_view(self), widened), computed(kernel_view(a), widened), computed(kernel_view(b), widened), beta, alpha);
    });
  });
  return out;
}

// ---- softmax ----
// half_to_float (a Half input, a Float result) is CUDA's; computed widened, the input is Float already.
template <typename K>
Tensor softmax_like(const char* op, const Tensor& self, int64_t dim, bool half_to_float, const K& k) {
  const auto device = common_device(op, {&self});
  dim = at::maybe_wrap_dim(dim, self.dim());
  const auto dtype = half_to_float ? at::kFloat : self.scalar_type();
  const bool widened = computes_widened(op, {dtype, self.scalar_type(), c10::ScalarType::Undefined}, [&](const Dtypes& d) {
    k(as_lvalue(ones_of_rank(self, d[0])), ones_of_rank(self, d[1]), dim, half_to_float && d[1] == self.scalar_type());
  });
  Tensor out = at::empty(self.sizes(), on_emu(device, dtype));
  launch(device, [out = arg(out), self = arg(self), dim, half_to_float, widened, k] {
    write_into(kernel_view(out), widened, [&](Tensor o) { k(o, computed(kernel_view(self), widened), dim, half_to_float && !widened); });
  });
  return out;
}
Tensor softmax(const Tensor& self, int64_t dim, bool half_to_float) {
  return softmax_like("softmax", self, dim, half_to_float,
                      [](Tensor& o, const Tensor& x, int64_t d, bool h) { at::_softmax_out(o, x, d, h); });
}
Tensor log_softmax(const Tensor& self, int64_t dim, bool half_to_float) {
  return softmax_like("log_softmax", self, dim, half_to_float,
                      [](Tensor& o, const Tensor& x, int64_t d, bool h) { at::_log_softmax_out(o, x, d, h); });
}

template <typename K>
Tensor softmax_backward_like(const char* op, const Tensor& grad, const Tensor& output, int64_t dim, c10::ScalarType input_dtype,
                             const K& k) {
  const auto device = common_device(op, {&grad, &output});
  dim = at::maybe_wrap_dim(dim, grad.dim());
  const bool widened = computes_widened(op, {input_dtype, grad.scalar_type(), output.scalar_type()}, [&](const Dtypes& d) {
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
  return softmax_backward_like("softmax_backward", grad, output, dim, input_dtype,
                               [](Tensor& o, const Tensor& g, const Tensor& y, int64_t d, c10::ScalarType t) {
                                 at::_softmax_backward_data_out(o, g, y, d, t);
                               });
}
Tensor log_softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim, c10::ScalarType input_dtype) {
  return softmax_backward_like("log_softmax_backward", grad, output, dim, input_dtype,
                               [](Tensor& o, const Tensor& g, const Tensor& y, int64_t d, c10::ScalarType t) {
                                 at::_log_softmax_backward_data_out(o, g, y, d, t);
                               });
}

// ---- indexing and joining ----
Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  TORCH_CHECK(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  const auto device = common_device("index_select", {&self, &index});
  // The CPU kernel refuses some dtypes (uint16/32/64) only when it runs: probed here, at the call.
  probe_once("index_select", self.scalar_type(), self.scalar_type(), index.scalar_type(), [&] {
    at::index_select(one_on_cpu(self.scalar_type()), 0, at::zeros({1}, at::TensorOptions().dtype(index.scalar_type())));
  });
  dim = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  if (!shape.empty()) shape[static_cast<size_t>(dim)] = index.numel();
  Tensor out = at::empty(shape, on_emu(device, self.scalar_type()));
  launch(device, [out = arg(out), self = arg(self), dim, index = arg(index)] { at::index_select_out(as_lvalue(kernel_view(out)), kernel_view(self), dim, kernel_view(index)); });
  return out;
}

Tensor cat(const at::ITensorListRef& list, int64_t dim) {
  std::vector<Tensor> tensors(list.begin(), list.end());
  TORCH_CHECK(!tensors.empty(), "torch.cat(): expected a non-empty list of Tensors");
  // Legacy rule: 1-D empty tensors are skipped when choosing the shape.
  const Tensor* like = nullptr;
  for (const Tensor& t : tensors)
    if (!(t.dim() == 1 && t.numel() == 0)) { like = &t; break; }
  if (like == nullptr) like = &tensors.front();
  dim = at::maybe_wrap_dim(dim, like->dim());
  c10::ScalarType dtype = tensors.front().scalar_type();
  c10::DeviceIndex device = -1;
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    dtype = c10::promoteTypes(dtype, t.scalar_type());
    const auto d = common_device("cat", {&t});
    TORCH_CHECK(device == -1 || device == d, "Expected all tensors to be on the same device, but found at least two devices, emu:",
                int(device), " and emu:", int(d), "! (in cat)");
    device = d;
    if (t.dim() == 1 && t.numel() == 0) continue;
    TORCH_CHECK(t.dim() == like->dim(), "Tensors must have same number of dimensions: got ", like->dim(), " and ", t.dim());
    for (int64_t k = 0; k < t.dim(); ++k)
      TORCH_CHECK(k == dim || t.size(k) == like->size(k), "Sizes of tensors must match except in dimension ", dim,
                  ". Expected size ", like->size(k), " but got size ", t.size(k), " for tensor number ", i, " in the list.");
    total += t.size(dim);
  }
  // Each input's dtype into the result's, as the CPU kernel will do it: a refusal is raised at the call.
  for (const Tensor& t : tensors)
    probe_once("cat", dtype, t.scalar_type(), c10::ScalarType::Undefined, [&] {
      Tensor probe_out = one_on_cpu(dtype);
      at::cat_out(probe_out, {one_on_cpu(t.scalar_type())}, 0);
    });
  std::vector<int64_t> shape(like->sizes().begin(), like->sizes().end());
  if (!shape.empty()) shape[static_cast<size_t>(dim)] = total;
  Tensor out = at::empty(shape, on_emu(device, dtype));
  std::vector<KernelArg> args;
  args.reserve(tensors.size());
  for (const Tensor& t : tensors) args.push_back(arg(t));
  launch(device, [out = arg(out), args = std::move(args), dim] {
    std::vector<Tensor> views;
    views.reserve(args.size());
    for (const KernelArg& t : args) views.push_back(kernel_view(t));
    at::cat_out(as_lvalue(kernel_view(out)), views, dim);
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", add);
  m.impl("add_.Tensor", add_);
  m.impl("sub.Tensor", sub);
  m.impl("sub_.Tensor", sub_);
  m.impl("mul.Tensor", mul);
  m.impl("mul_.Tensor", mul_);
  m.impl("div.Tensor", div);
  m.impl("div_.Tensor", div_);
  m.impl("eq.Tensor", eq_tensor);
  m.impl("eq.Scalar", eq_scalar);
  m.impl("ne.Tensor", ne_tensor);
  m.impl("ne.Scalar", ne_scalar);
  m.impl("lt.Tensor", lt_tensor);
  m.impl("lt.Scalar", lt_scalar);
  m.impl("le.Tensor", le_tensor);
  m.impl("le.Scalar", le_scalar);
  m.impl("gt.Tensor", gt_tensor);
  m.impl("gt.Scalar", gt_scalar);
  m.impl("ge.Tensor", ge_tensor);
  m.impl("ge.Scalar", ge_scalar);
  m.impl("where.self", where);
  m.impl("abs", abs);
  m.impl("abs_", abs_);
  m.impl("neg", neg);
  m.impl("neg_", neg_);
  m.impl("exp", exp);
  m.impl("exp_", exp_);
  m.impl("log", log);
  m.impl("log_", log_);
  m.impl("sqrt", sqrt);
  m.impl("sqrt_", sqrt_);
  m.impl("rsqrt", rsqrt);
  m.impl("rsqrt_", rsqrt_);
  m.impl("sin", sin);
  m.impl("sin_", sin_);
  m.impl("cos", cos);
  m.impl("cos_", cos_);
  m.impl("tanh", tanh);
  m.impl("tanh_", tanh_);
  m.impl("sigmoid", sigmoid);
  m.impl("sigmoid_", sigmoid_);
  m.impl("reciprocal", reciprocal);
  m.impl("reciprocal_", reciprocal_);
  m.impl("relu", relu);
  m.impl("relu_", relu_);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("zero_", zero_);
  m.impl("sum.dim_IntList", sum_dim);
  m.impl("mean.dim", mean_dim);
  m.impl("max", max_all);
  m.impl("max.dim", max_dim);
  m.impl("mm", mm);
  m.impl("bmm", bmm);
  m.impl("addmm", addmm);
  m.impl("_softmax", softmax);
  m.impl("_log_softmax", log_softmax);
  m.impl("_softmax_backward_data", softmax_backward);
  m.impl("_log_softmax_backward_data", log_softmax_backward);
  m.impl("index_select", index_select);
  m.impl("cat", cat);
}

}  // namespace torch_emu
