// ATen on tacc: creation, views, resize, copies through the toolkit, add and mul on the toolkit's kernels, and the
// boxed CPU fallback for every other operator.
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include "TaccRuntime.h"

namespace torch_tacc {
namespace {

constexpr c10::DispatchKeySet kTaccKeys(c10::DispatchKey::PrivateUse1);

void check_options(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, "tacc supports only strided tensors");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "pin_memory applies to CPU tensors only");
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  check_options(layout, pin_memory);
  DeviceSwitch on(checked_index(c10::device_or_default(device)));
  return at::detail::empty_generic(size, tacc_allocator(), kTaccKeys, c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  check_options(layout, pin_memory);
  DeviceSwitch on(checked_index(c10::device_or_default(device)));
  return at::detail::empty_strided_generic(size, stride, tacc_allocator(), kTaccKeys, c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, offset);
}
at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) { return at::native::view(self, size); }
at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Preserve) {
    impl->empty_tensor_restride(*memory_format);
  }
  const size_t needed = static_cast<size_t>(self.storage_offset() + self.numel()) * self.element_size();
  if (needed > self.storage().nbytes()) {
    DeviceSwitch on(self.device().index());
    c10::DataPtr grown = tacc_allocator()->allocate(needed);
    if (self.storage().nbytes() > 0) {
      TACC_CHECK(tacc_memcpy(grown.get(), self.storage().data(), self.storage().nbytes(), TACC_COPY_DEVICE_TO_DEVICE));
    }
    self.storage().unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(grown));
    self.storage().unsafeGetStorageImpl()->set_nbytes(needed);
  }
  return self;
}

// Copies go through the host: a tacc tensor's whole storage moves with tacc_memcpy, and the CPU rearranges strides
// and converts dtypes. (Device memory is host memory here, but the plugin never reads it except through the toolkit.)
at::Tensor storage_on_host(const at::Tensor& t) {
  at::Tensor bytes = at::empty({static_cast<int64_t>(t.storage().nbytes())}, t.options().device(at::kCPU).dtype(at::kByte));
  TACC_CHECK(tacc_memcpy(bytes.data_ptr(), t.storage().data(), t.storage().nbytes(), TACC_COPY_DEVICE_TO_HOST));
  return bytes;
}

at::Tensor to_host(const at::Tensor& t) {
  if (t.numel() == 0) return at::empty(t.sizes(), t.options().device(at::kCPU));
  return storage_on_host(t).view(t.scalar_type()).as_strided(t.sizes(), t.strides(), t.storage_offset());
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  (void)non_blocking;  // tacc copies complete before they return
  at::Tensor host = self.is_privateuseone() ? to_host(self) : self;
  if (!dst.is_privateuseone()) {
    dst.copy_(host);
    return dst;
  }
  if (dst.numel() == 0) return dst;
  if (dst.is_contiguous()) {
    host = host.to(dst.scalar_type()).contiguous().expand(dst.sizes()).contiguous();
    TACC_CHECK(tacc_memcpy(dst.data_ptr(), host.data_ptr(), dst.nbytes(), TACC_COPY_HOST_TO_DEVICE));
    return dst;
  }
  // A strided destination: rewrite its whole storage on the host, then put it back.
  at::Tensor storage = storage_on_host(dst);
  storage.view(dst.scalar_type()).as_strided(dst.sizes(), dst.strides(), dst.storage_offset()).copy_(host);
  TACC_CHECK(tacc_memcpy(dst.storage().mutable_data(), storage.data_ptr(), dst.storage().nbytes(), TACC_COPY_HOST_TO_DEVICE));
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

bool on_toolkit_kernels(const at::Tensor& a, const at::Tensor& b) {
  return a.is_privateuseone() && b.is_privateuseone() && a.device() == b.device() &&
         a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat && a.sizes() == b.sizes() &&
         a.is_contiguous() && b.is_contiguous();
}

void tacc_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) { at::native::cpu_fallback(op, stack); }

at::Tensor call_fallback_add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::add", "Tensor");
  torch::jit::Stack stack{a, b, alpha};
  tacc_fallback(op, &stack);
  return stack.back().toTensor();
}

at::Tensor add(const at::Tensor& a, const at::Tensor& b, const at::Scalar& alpha) {
  if (!on_toolkit_kernels(a, b)) return call_fallback_add(a, b, alpha);
  DeviceSwitch on(a.device().index());
  at::Tensor out = at::empty(a.sizes(), a.options());
  TACC_CHECK(tacc_vadd_f32(a.data_ptr<float>(), b.data_ptr<float>(), alpha.toFloat(), out.data_ptr<float>(),
                           static_cast<size_t>(a.numel())));
  return out;
}

#if TACC_VERSION_MAJOR >= 2
at::Tensor mul(const at::Tensor& a, const at::Tensor& b) {
  if (!on_toolkit_kernels(a, b)) {
    static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::mul", "Tensor");
    torch::jit::Stack stack{a, b};
    tacc_fallback(op, &stack);
    return stack.back().toTensor();
  }
  DeviceSwitch on(a.device().index());
  at::Tensor out = at::empty(a.sizes(), a.options());
  TACC_CHECK(tacc_vmul_f32(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(),
                           static_cast<size_t>(a.numel())));
  return out;
}
#endif

}  // namespace
}  // namespace torch_tacc

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", &torch_tacc::empty_memory_format);
  m.impl("empty_strided", &torch_tacc::empty_strided);
  m.impl("as_strided", &torch_tacc::as_strided);
  m.impl("view", &torch_tacc::view);
  m.impl("_reshape_alias", &torch_tacc::reshape_alias);
  m.impl("resize_", &torch_tacc::resize_);
  m.impl("_copy_from", &torch_tacc::copy_from);
  m.impl("_copy_from_and_resize", &torch_tacc::copy_from_and_resize);
  m.impl("add.Tensor", &torch_tacc::add);
#if TACC_VERSION_MAJOR >= 2
  m.impl("mul.Tensor", &torch_tacc::mul);
#endif
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&torch_tacc::tacc_fallback>());
}
