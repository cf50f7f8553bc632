// Quantized emu tensors (the QuantizedPrivateUse1 key): a QTensorImpl over emu memory whose quantizer
// (scale and zero point, or per-channel scales and zero points) lives on the host, as CUDA keeps it.
// What only creates, reinterprets or moves the integer bytes is native: creation, the quantizer's
// parameters, views, copies in every direction, int_repr, flip and clone. Computation (quantize_per_tensor
// and quantize_per_channel through the dense fallback, dequantize and every op the CPU has a quantized
// kernel for through the quantized one) runs on the CPU's quantized kernels: arguments to the CPU, the
// CPU's kernel, results back to emu, so the numbers and the errors are the CPU's.
#include <ATen/ops/_empty_affine_quantized_native.h>
#include <ATen/ops/_empty_per_channel_affine_quantized_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/empty_quantized.h>
#include <ATen/ops/empty_quantized_native.h>
#include <ATen/ops/empty_strided_native.h>
#include <ATen/ops/flip.h>
#include <ATen/ops/q_per_channel_axis_native.h>
#include <ATen/ops/q_per_channel_scales_native.h>
#include <ATen/ops/q_per_channel_zero_points_native.h>
#include <ATen/ops/q_scale_native.h>
#include <ATen/ops/q_zero_point_native.h>
#include <ATen/ops/qscheme_native.h>
#include <ATen/ops/quantize_per_tensor.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/squeeze_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>
#include <torch/library.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "TorchCompat.h"
#include "aten/Fallback.h"
#include "runtime/EmuStream.h"

namespace torch_emu {

// Kernel names repeat the dense ones (view, copy_from, ...): their own namespace keeps the unity build's
// translation units free of clashes.
namespace quantized {
namespace {

// Factories allocate on the device they name: the emu allocator allocates on the current device.
class OnDevice {
 public:
  explicit OnDevice(compat::optional<c10::Device> device) {
    const c10::Device d = c10::device_or_default(device);
    if (d.type() == c10::DeviceType::PrivateUse1)
      on_.emplace(d.has_index() ? checked_device_index(d.index()) : current_device());
  }

 private:
  std::optional<DeviceSwitch> on_;
};

at::Tensor empty_affine_quantized(
    c10::IntArrayRef size,
    compat::optional<c10::ScalarType> dtype,
    compat::optional<c10::Layout> layout,
    compat::optional<c10::Device> device,
    compat::optional<bool> pin_memory,
    double scale,
    int64_t zero_point,
    compat::optional<c10::MemoryFormat> memory_format) {
  const OnDevice on(device);
  return at::native::empty_affine_quantized(size, dtype, layout, device, pin_memory, scale, zero_point, memory_format);
}

at::Tensor empty_per_channel_affine_quantized(
    c10::IntArrayRef size,
    const at::Tensor& scales,
    const at::Tensor& zero_points,
    int64_t axis,
    compat::optional<c10::ScalarType> dtype,
    compat::optional<c10::Layout> layout,
    compat::optional<c10::Device> device,
    compat::optional<bool> pin_memory,
    compat::optional<c10::MemoryFormat> memory_format) {
  const OnDevice on(device);
  return at::native::empty_per_channel_affine_quantized(
      size, scales, zero_points, axis, dtype, layout, device, pin_memory, memory_format);
}

// Also the first step of moving a quantized tensor between the CPU and emu (_to_copy): the device
// comes from the options when given, else from the model tensor.
at::Tensor empty_quantized(
    c10::IntArrayRef size,
    const at::Tensor& qtensor,
    compat::optional<c10::ScalarType> dtype,
    compat::optional<c10::Layout> layout,
    compat::optional<c10::Device> device,
    compat::optional<bool> pin_memory,
    compat::optional<c10::MemoryFormat> memory_format) {
  const OnDevice on(device.has_value() ? device : compat::optional<c10::Device>(qtensor.device()));
  return at::native::empty_quantized(size, qtensor, dtype, layout, device, pin_memory, memory_format);
}

at::Tensor empty_unknown_quantized(
    c10::IntArrayRef size,
    compat::optional<c10::ScalarType> dtype,
    compat::optional<c10::Layout> layout,
    compat::optional<c10::Device> device,
    compat::optional<bool> pin_memory,
    compat::optional<c10::MemoryFormat> memory_format) {
  const OnDevice on(device);
  return at::native::empty_unknown_quantized(size, dtype, layout, device, pin_memory, memory_format);
}

at::Tensor empty_strided_unknown_quantized(
    c10::IntArrayRef size,
    c10::IntArrayRef stride,
    compat::optional<c10::ScalarType> dtype,
    compat::optional<c10::Layout> layout,
    compat::optional<c10::Device> device,
    compat::optional<bool> pin_memory) {
  const OnDevice on(device);
  return at::native::empty_strided_unknown_quantized(size, stride, dtype, layout, device, pin_memory);
}

at::Tensor empty_like_quantized(
    const at::Tensor& self,
    compat::optional<c10::ScalarType> dtype,
    compat::optional<c10::Layout> layout,
    compat::optional<c10::Device> device,
    compat::optional<bool> pin_memory,
    compat::optional<c10::MemoryFormat> memory_format) {
  const OnDevice on(device.has_value() ? device : compat::optional<c10::Device>(self.device()));
  return at::native::empty_like_quantized(self, dtype, layout, device, pin_memory, memory_format);
}

// The integer bytes of a quantized tensor as an ordinary tensor of its underlying type (int8, uint8,
// int32) on the same device: same storage, offset, sizes and strides. Copies and element moves run
// on it through emu's dense kernels.
at::Tensor integer_view(const at::Tensor& q) {
  at::Tensor t = at::empty({0}, q.options().dtype(c10::toUnderlying(q.scalar_type())));
  t.set_(q.storage(), q.storage_offset(), q.sizes(), q.strides());
  return t;
}

// copy_ with a quantized side, as the CPU's copy_ defines it: quantized to quantized keeps the type and
// scheme and takes the source's quantizer; a float source is quantized with the destination's quantizer
// (on the CPU, where that kernel is); quantized to float is refused.
at::Tensor& copy_quantized(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  TORCH_CHECK(
      self.is_quantized() || !src.is_quantized(),
      "Copying from quantized Tensor to non-quantized Tensor is not allowed, please use dequantize to get a "
      "float Tensor from a quantized Tensor");
  if (self.is_same(src))
    return self;
  if (!src.is_quantized()) {
    at::Tensor on_host = at::empty_quantized(self.sizes(), self, self.options().device(at::kCPU));
    on_host.copy_(src.cpu());
    return copy_quantized(self, on_host, non_blocking);
  }
  TORCH_CHECK(self.qscheme() == src.qscheme(), "Quantized Copy only works with same qscheme");
  TORCH_CHECK(
      self.scalar_type() == src.scalar_type(),
      "copy_: quantized tensors of different types (",
      self.scalar_type(),
      " and ",
      src.scalar_type(),
      ")");
  at::set_quantizer_(self, src.quantizer());
  at::Tensor bytes = integer_view(self);
  bytes.copy_(integer_view(src), non_blocking);
  return self;
}

// at::native::copy_ (which quantized_clone calls directly) hands a copy involving a device it does not know
// to _copy_from.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor out = dst;
  copy_quantized(out, self, non_blocking);
  return dst;
}

at::Tensor int_repr(const at::Tensor& self) {
  return integer_view(self).clone(self.suggest_memory_format());
}

at::Tensor flip(const at::Tensor& self, c10::IntArrayRef dims) {
  // The CPU's flip restrides its result, which only a per-tensor quantizer allows: refused the same way.
  TORCH_CHECK(self.qscheme() == at::kPerTensorAffine, "Setting strides is possible only on uniformly quantized tensor");
  at::Tensor out = at::empty_like(self, c10::MemoryFormat::Preserve);
  at::Tensor bytes = integer_view(out);
  bytes.copy_(at::flip(integer_view(self), dims));
  return out;
}

// Views change metadata only: ATen's implementations keep the QTensorImpl and its quantizer (registered as they
// are below; squeeze's three overloads share one name, so each gets its own function here).
at::Tensor squeeze(const at::Tensor& self) {
  return at::native::squeeze_quantized(self);
}
at::Tensor squeeze_dim(const at::Tensor& self, int64_t dim) {
  return at::native::squeeze_quantized(self, dim);
}
at::Tensor squeeze_dims(const at::Tensor& self, c10::IntArrayRef dims) {
  return at::native::squeeze_quantized(self, dims);
}
at::Tensor& set_storage(
    at::Tensor& self,
    at::Storage storage,
    int64_t offset,
    c10::IntArrayRef size,
    c10::IntArrayRef stride) {
  TORCH_CHECK(
      !storage.data() || storage.device() == self.device(),
      "Attempted to set the storage of a tensor on device \"",
      self.device(),
      "\" to a storage on different device \"",
      storage.device(),
      "\".  This is no longer allowed; the devices must match.");
  return at::native::set_storage_quantized_(self, std::move(storage), offset, size, stride);
}

} // namespace
} // namespace quantized

bool has_unknown_quantizer(const at::Tensor& t) {
  return t.is_quantized() && dynamic_cast<const at::UnknownQuantizer*>(at::get_qtensorimpl(t)->quantizer().get());
}

TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("_empty_affine_quantized", quantized::empty_affine_quantized);
  m.impl("_empty_per_channel_affine_quantized", quantized::empty_per_channel_affine_quantized);
  m.impl("empty_quantized", quantized::empty_quantized);
  m.impl("empty.memory_format", quantized::empty_unknown_quantized);
  m.impl("empty_strided", quantized::empty_strided_unknown_quantized);
  m.impl("empty_like", quantized::empty_like_quantized);
  m.impl("q_scale", at::native::q_scale_quant);
  m.impl("q_zero_point", at::native::q_zero_point_quant);
  m.impl("q_per_channel_scales", at::native::q_per_channel_scales);
  m.impl("q_per_channel_zero_points", at::native::q_per_channel_zero_points);
  m.impl("q_per_channel_axis", at::native::q_per_channel_axis);
  m.impl("qscheme", at::native::qscheme_quant);
  m.impl("copy_", quantized::copy_quantized);
  m.impl("_copy_from", quantized::copy_from);
  m.impl("int_repr", quantized::int_repr);
  m.impl("flip", quantized::flip);
  m.impl("clone", at::native::quantized_clone);
  m.impl("as_strided", at::native::as_strided_qtensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("unfold", at::native::unfold);
  m.impl("unsqueeze", at::native::unsqueeze_quantized);
  m.impl("squeeze", quantized::squeeze);
  m.impl("squeeze.dim", quantized::squeeze_dim);
  m.impl("squeeze.dims", quantized::squeeze_dims);
  m.impl("set_.source_Storage_storage_offset", quantized::set_storage);
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&emu_fallback>());
}

namespace {

// An op with a quantized CPU kernel of its own (dequantize, cat, the comparisons, quantized activations) and
// none native here runs through the fallback by name: a composite default kernel would otherwise run on emu with
// dense kernels that cannot read quantized bytes. After this file's registrations above.
struct QuantizedFallbackBindings {
  std::unique_ptr<torch::Library> library =
      bind_fallback_where_cpu_has_kernel(c10::DispatchKey::QuantizedCPU, c10::DispatchKey::QuantizedPrivateUse1);
};
const QuantizedFallbackBindings quantized_fallback_bindings;

} // namespace

} // namespace torch_emu
