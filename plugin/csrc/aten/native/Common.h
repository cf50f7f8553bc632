// Shared by the native kernels of native/*.cpp: tensor options on emu, result dtypes, and the elementwise
// patterns. Shapes, dtypes and devices are settled on the caller's thread (so user errors raise where the op is
// called); the arithmetic runs as stream work, on CPU tensors aliasing device memory, with ATen's CPU kernels.
#pragma once

#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>
#include <c10/core/DefaultDtype.h>

#include <set>
#include <tuple>
#include <vector>

#include "aten/Launch.h"
#include "aten/Widen.h"

namespace torch_emu {
namespace native {

using at::Tensor;

inline at::TensorOptions on_emu(c10::DeviceIndex device, c10::ScalarType dtype) {
  return at::TensorOptions().dtype(dtype).device(c10::Device(c10::DeviceType::PrivateUse1, device));
}

inline c10::ScalarType default_float() {
  return c10::typeMetaToScalarType(c10::get_default_dtype());
}

inline c10::ScalarType float_result(c10::ScalarType t) {
  return c10::isIntegralType(t, /*includeBool=*/true) ? default_float() : t;
}

inline void check_inplace(const char* op, const Tensor& self, c10::IntArrayRef shape, c10::ScalarType result) {
  TORCH_CHECK(
      shape == self.sizes(), op, ": output with shape ", self.sizes(), " doesn't match the broadcast shape ", shape);
  TORCH_CHECK(
      c10::canCast(result, self.scalar_type()),
      op,
      ": result type ",
      result,
      " can't be cast to the desired output type ",
      self.scalar_type());
}

// ---- dtype support, checked at the call ----
// ATen's CPU kernels refuse unsupported dtypes only when they run ("abs_cpu" not implemented for
// 'Bool'): inside queued work that would surface at the next synchronize. So the kernel first
// runs here on one-element CPU tensors of the same dtypes, once per (op, dtypes) and thread, and
// raises aten's own error at the call.
inline Tensor one_on_cpu(c10::ScalarType t) {
  return at::ones({1}, at::TensorOptions().dtype(t));
}

// Ones on the CPU with t's rank (every size 1): dims valid for t are valid for it.
inline Tensor ones_of_rank(const Tensor& t, c10::ScalarType dtype) {
  return at::ones(std::vector<int64_t>(static_cast<size_t>(t.dim()), 1), at::TensorOptions().dtype(dtype));
}

template <typename Run>
void probe_once(const char* op, c10::ScalarType out, c10::ScalarType a, c10::ScalarType b, const Run& run) {
  thread_local std::set<std::tuple<const char*, int, int, int>> supported;
  const auto key = std::make_tuple(op, int(out), int(a), int(b));
  if (supported.count(key) != 0)
    return;
  run();
  supported.insert(key);
}
template <typename K>
bool probe_dtypes(const char* op, c10::ScalarType out, c10::ScalarType a, c10::ScalarType b, const K& k) {
  return computes_widened(
      op, {out, a, b}, [&](const Dtypes& d) { k(one_on_cpu(d[0]), one_on_cpu(d[1]), one_on_cpu(d[2])); });
}
template <typename K>
bool probe_dtypes(const char* op, c10::ScalarType out, c10::ScalarType a, const K& k) {
  return computes_widened(
      op, {out, a, c10::ScalarType::Undefined}, [&](const Dtypes& d) { k(one_on_cpu(d[0]), one_on_cpu(d[1])); });
}

// ---- elementwise binary: K(out, a, b) runs the CPU op ----
template <typename K>
Tensor binary(const char* op, const Tensor& a, const Tensor& b, c10::ScalarType dtype, K k) {
  const auto device = common_device(op, {&a, &b});
  const bool widened = probe_dtypes(op, dtype, a.scalar_type(), b.scalar_type(), k);
  Tensor out = at::empty(at::infer_size(a.sizes(), b.sizes()), on_emu(device, dtype));
  launch(device, [out = arg(out), a = arg(a), b = arg(b), k, widened] {
    write_into(kernel_view(out), widened, [&](Tensor o) {
      k(o, computed(kernel_view(a), widened), computed(kernel_view(b), widened));
    });
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

inline void check_real(const char* what, const Tensor& t) {
  TORCH_CHECK(!t.is_complex(), what, " is not supported for complex types");
}

} // namespace native
} // namespace torch_emu
