// The ops every backend must provide natively: creation, views, resize/set, reading one
// scalar, and the boxed CPU fallback (with counts) for everything else.
#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "aten/Fallback.h"
#include "aten/Launch.h"
#include "aten/SparseSupport.h"
#include "aten/Widen.h"
#include "runtime/EmuAllocator.h"
#include "runtime/EmuStorage.h"

namespace torch_emu {

namespace {

constexpr c10::DispatchKeySet kEmuKeys(c10::DispatchKey::PrivateUse1);

c10::DeviceIndex checked_index(const c10::Device& device) {
  TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1, "expected an emu device, got ", device);
  return device.has_index() ? checked_device_index(device.index()) : current_device();
}

void check_options(compat::optional<c10::Layout> layout, compat::optional<bool> pin_memory) {
  TORCH_CHECK(
      c10::layout_or_default(layout) == c10::Layout::Strided, "emu supports only strided tensors, not ", *layout);
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "pin_memory applies to CPU tensors only, not emu tensors");
}

at::Tensor empty_memory_format(
    c10::IntArrayRef size,
    compat::optional<c10::ScalarType> dtype,
    compat::optional<c10::Layout> layout,
    compat::optional<c10::Device> device,
    compat::optional<bool> pin_memory,
    compat::optional<c10::MemoryFormat> memory_format) {
  check_options(layout, pin_memory);
  DeviceSwitch on(checked_index(c10::device_or_default(device)));
  return at::detail::empty_generic(size, emu_allocator(), kEmuKeys, c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(
    c10::IntArrayRef size,
    c10::IntArrayRef stride,
    compat::optional<c10::ScalarType> dtype,
    compat::optional<c10::Layout> layout,
    compat::optional<c10::Device> device,
    compat::optional<bool> pin_memory) {
  check_options(layout, pin_memory);
  DeviceSwitch on(checked_index(c10::device_or_default(device)));
  return at::detail::empty_strided_generic(size, stride, emu_allocator(), kEmuKeys, c10::dtype_or_default(dtype));
}

// Views share storage and only change metadata: ATen's device-generic implementations serve.
at::Tensor as_strided(
    const at::Tensor& self,
    c10::IntArrayRef size,
    c10::IntArrayRef stride,
    compat::optional<int64_t> offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, offset);
}
at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}
at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}
at::Tensor unfold(const at::Tensor& self, int64_t dim, int64_t size, int64_t step) {
  return at::native::unfold(self, dim, size, step);
}
at::Tensor view_as_real(const at::Tensor& self) {
  return at::native::view_as_real(self);
}
at::Tensor view_as_complex(const at::Tensor& self) {
  return at::native::view_as_complex(self);
}

int64_t bytes_needed(const at::Tensor& self) {
  if (self.numel() == 0)
    return 0;
  int64_t extent = 1;
  for (int64_t d = 0; d < self.dim(); ++d)
    extent += (self.size(d) - 1) * self.stride(d);
  return (self.storage_offset() + extent) * static_cast<int64_t>(self.element_size());
}

void grow_to_fit(const at::Tensor& self) {
  const int64_t needed = bytes_needed(self);
  if (needed > static_cast<int64_t>(self.storage().nbytes()))
    resize_storage_bytes(self.storage().unsafeGetStorageImpl(), static_cast<size_t>(needed));
}

const at::Tensor& resize_(
    const at::Tensor& self,
    c10::IntArrayRef size,
    compat::optional<c10::MemoryFormat> memory_format) {
  for (int64_t s : size)
    TORCH_CHECK(s >= 0, "resize_: negative size ", s, " in ", size);
  auto* impl = self.unsafeGetTensorImpl();
  if (self.sizes() == size && !memory_format.has_value())
    return self;
  impl->set_sizes_contiguous(size);
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Preserve)
    impl->empty_tensor_restride(*memory_format);
  grow_to_fit(self);
  return self;
}

at::Tensor& set_storage_offset(
    at::Tensor& self,
    at::Storage storage,
    int64_t offset,
    c10::IntArrayRef size,
    c10::IntArrayRef stride) {
  TORCH_CHECK(
      !storage.data() || storage.device().type() == c10::DeviceType::PrivateUse1,
      "set_: an emu tensor can only take emu storage, not storage on ",
      storage.device());
  // As on CPU and CUDA: taking another device's storage would silently move the tensor.
  TORCH_CHECK(
      !storage.data() || storage.device() == self.device(),
      "Attempted to set the storage of a tensor on device \"",
      self.device(),
      "\" to a storage on different device \"",
      storage.device(),
      "\".  This is no longer allowed; the devices must match.");
  TORCH_CHECK(offset >= 0, "set_: negative storage offset ", offset);
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(storage));
  impl->set_storage_offset(offset);
  if (stride.empty()) {
    impl->set_sizes_contiguous(size);
  } else {
    TORCH_CHECK(stride.size() == size.size(), "set_: ", size.size(), " sizes but ", stride.size(), " strides");
    impl->set_sizes_and_strides(size, stride);
  }
  grow_to_fit(self);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, at::Storage storage) {
  const int64_t n = static_cast<int64_t>(storage.nbytes() / self.element_size());
  return set_storage_offset(self, std::move(storage), 0, {n}, {});
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source))
    return self;
  return set_storage_offset(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  DeviceSwitch on(self.device().index()); // the empty storage belongs to self's device
  at::Storage storage(at::Storage::use_byte_size_t(), 0, emu_allocator(), /*resizable=*/true);
  return set_storage_offset(self, std::move(storage), 0, {0}, {});
}

// .item(): waits for the stream, then reads the element through the driver.
at::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  const c10::DeviceIndex device = common_device("item", {&self});
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  DeviceSwitch on(device);
  EMU_CHECK(emuStreamSynchronize(raw_stream(getCurrentEmuStream(device))));
  EMU_CHECK(emuMemcpy(
      host.data_ptr(),
      static_cast<const char*>(self.storage().data()) + self.storage_offset() * self.element_size(),
      self.element_size(),
      emuMemcpyDeviceToHost));
  if (self.is_conj())
    host = host.conj().resolve_conj();
  if (self.is_neg())
    host = host.neg();
  return host.item();
}

// ---- fallback ----
struct FallbackCounts {
  std::mutex mu;
  std::map<std::string, int64_t> counts;
};

FallbackCounts& counts() {
  static auto* c = new FallbackCounts();
  return *c;
}

bool fallback_disabled() {
  static const bool disabled = [] {
    const char* mode = std::getenv("TORCH_EMU_FALLBACK");
    return mode != nullptr && std::strcmp(mode, "error") == 0;
  }();
  return disabled;
}

// The device of an op's inputs: that of its first input tensor (or tensor in a list) that is not a
// 0-dim CPU tensor, which stands for a number and goes with any device; none if it has no such input.
compat::optional<c10::Device> input_device(
    const std::vector<c10::Argument>& args,
    const torch::jit::Stack& stack,
    size_t first) {
  auto device_of = [](const at::Tensor& t) -> compat::optional<c10::Device> {
    if (!t.defined() || (t.is_cpu() && t.dim() == 0))
      return {};
    return t.device();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = stack[first + i];
    if (args[i].is_out())
      continue;
    if (v.isTensor()) {
      if (auto d = device_of(v.toTensor()))
        return d;
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec())
        if (auto d = device_of(t))
          return d;
    }
  }
  return {};
}

// An out= tensor on another device than the inputs (an emu input with a CPU out, or a CPU input with an
// emu out): refused before the fallback moves anything, as CUDA's out= kernels refuse it. The message
// carries both phrasings torch uses ("Expected out tensor to have device ...", "... on the same device").
void check_out_devices(const c10::OperatorHandle& op, const torch::jit::Stack& stack, const std::string& name) {
  const auto& args = op.schema().arguments();
  if (stack.size() < args.size())
    return;
  const size_t first = stack.size() - args.size();
  const auto device = input_device(args, stack, first);
  if (!device.has_value())
    return;
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = stack[first + i];
    if (!args[i].is_out() || !v.isTensor() || !v.toTensor().defined())
      continue;
    TORCH_CHECK(
        v.toTensor().device() == *device,
        "Expected out tensor to have device ",
        *device,
        ", but got ",
        v.toTensor().device(),
        " instead: out= tensors must be on the same device as the inputs (in ",
        name,
        ")");
  }
}

// Optional tensor lists (the indices of index and index_put_): aten's cpu_fallback moves them to the CPU
// only in newer releases; in older ones (2.1) their emu tensors reached the CPU kernel, which refused them
// ("indices should be either on cpu or on the same device as the indexed tensor"). They are read, never
// written, so CPU copies serve. Only when an emu tensor is indexed: a CPU tensor with emu indices keeps
// the CPU kernel's refusal, as on CUDA.
void optional_tensor_lists_to_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& args = op.schema().arguments();
  if (stack->size() < args.size())
    return;
  const size_t first = stack->size() - args.size();
  bool emu_tensor_argument = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = (*stack)[first + i];
    emu_tensor_argument |=
        v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == c10::DeviceType::PrivateUse1;
  }
  if (!emu_tensor_argument)
    return;
  for (size_t i = 0; i < args.size(); ++i) {
    c10::IValue& v = (*stack)[first + i];
    if (!v.isOptionalTensorList())
      continue;
    c10::List<compat::optional<at::Tensor>> on_cpu;
    bool moved = false;
    for (const compat::optional<at::Tensor>& t : v.toOptionalTensorList()) {
      if (t.has_value() && t->defined() && t->device().type() == c10::DeviceType::PrivateUse1) {
        on_cpu.push_back(t->cpu());
        moved = true;
      } else {
        on_cpu.push_back(t);
      }
    }
    if (moved)
      v = c10::IValue(std::move(on_cpu));
  }
}

// The op this thread's fallback is computing in a wider dtype: its widened call comes through the fallback
// again, and is one run of the op, not two.
thread_local std::string widened_now;

struct WideningOp {
  std::string outer;
  explicit WideningOp(const std::string& key) : outer(std::exchange(widened_now, key)) {}
  ~WideningOp() {
    widened_now = outer;
  }
  WideningOp(const WideningOp&) = delete;
  WideningOp& operator=(const WideningOp&) = delete;
};

} // namespace

void emu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  const std::string key = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
  TORCH_CHECK(
      !fallback_disabled(),
      "operator ",
      key,
      " has no native emu kernel and the CPU fallback is off "
      "(TORCH_EMU_FALLBACK=error)");
  check_out_devices(op, *stack, key);
  if (key != widened_now) {
    std::lock_guard<std::mutex> lock(counts().mu);
    counts().counts[key] += 1;
  }
  emu_generators_to_cpu(op, stack);
  optional_tensor_lists_to_cpu(op, stack);
  // aten's cpu_fallback redispatches to the dense CPU kernel, which sparse and quantized arguments do not have.
  if (needs_dispatching_fallback(op, *stack)) {
    dispatching_cpu_fallback(op, stack);
  } else if (has_narrow_argument(op, *stack)) {
    // CUDA computes Half, BFloat16 and ComplexHalf where the CPU kernel may not: then computed widened.
    WideningOp widening(key);
    cpu_fallback_or_widened(op, stack);
  } else {
    at::native::cpu_fallback(op, stack);
  }
}

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard<std::mutex> lock(counts().mu);
  return counts().counts;
}

void reset_fallback_counts() {
  std::lock_guard<std::mutex> lock(counts().mu);
  counts().counts.clear();
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("unfold", unfold);
  m.impl("view_as_real", view_as_real);
  m.impl("view_as_complex", view_as_complex);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage_offset);
  m.impl("set_.source_Storage", set_storage);
  m.impl("set_.source_Tensor", set_tensor);
  m.impl("set_", set_empty);
  m.impl("_local_scalar_dense", local_scalar_dense);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&emu_fallback>());
}

// Composite kernels that hand emu memory to a CPU routine, so they must run through the CPU fallback
// instead: torch 2.1's CompositeExplicitAutograd linalg_eigvals.out calls linalg_eig's DispatchStub for
// the input's device, which reaches the CPU LAPACK kernel with emu pointers (a segfault in cgeev).
// The composite kernel also stood for the op's autograd key, so that key now falls through to this
// one: linalg_eigvals only takes the out= path when no gradient is needed (else it calls linalg_eig).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_eigvals.out", torch::CppFunction::makeFromBoxedFunction<&emu_fallback>());
}
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("linalg_eigvals.out", torch::CppFunction::makeFallthrough());
}

// Structured ops without an emu kernel reach the fallback through their out= variant: the generated
// functional kernel runs the op's meta function on emu, then the fallback runs the CPU kernel, meta
// function included, so a warning raised there comes twice. index.Tensor's does: a uint8 mask warns
// "indexing with dtype torch.uint8 is now deprecated" once on the CPU and on CUDA, twice on emu (the
// count PyTorch's test_byte_mask_accumulate checks). Handing the functional op itself to the fallback
// runs the CPU's functional kernel once.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("index.Tensor", torch::CppFunction::makeFromBoxedFunction<&emu_fallback>());
}

#if EMU_HAS_SPARSE
// Sparse and compressed emu tensors compute through the same fallback: their structure ops are
// native (EmuSparse.cpp), so the fallback can move them to the CPU and back.
TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&emu_fallback>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&emu_fallback>());
}
#endif // EMU_HAS_SPARSE

} // namespace torch_emu
