// Kernel launch and the kernel-side view of device memory.
#include "aten/Launch.h"

#include <ATen/ops/_conj.h>
#include <ATen/ops/_neg_view.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

namespace torch_emu {

void check_storage(const at::Tensor& t, const char* what) {
  if (!t.defined() || t.is_cpu() || t.numel() == 0)
    return;
  int64_t extent = 1;
  for (int64_t d = 0; d < t.dim(); ++d)
    extent += (t.size(d) - 1) * t.stride(d);
  const int64_t needed = (t.storage_offset() + extent) * static_cast<int64_t>(t.element_size());
  const int64_t held = static_cast<int64_t>(t.storage().nbytes());
  TORCH_CHECK(
      needed <= held && t.storage().data() != nullptr,
      what,
      ": the emu tensor needs ",
      needed,
      " bytes of storage but its storage holds ",
      held,
      " (was the storage freed or resized after the tensor was made?)");
}

c10::DeviceIndex common_device(const char* op, std::initializer_list<const at::Tensor*> tensors) {
  c10::DeviceIndex device = -1;
  const at::Tensor* cpu_operand = nullptr;
  for (const at::Tensor* t : tensors) {
    if (t == nullptr || !t->defined())
      continue;
    if (t->is_cpu()) {
      if (t->dim() != 0)
        cpu_operand = t;
      continue;
    }
    TORCH_CHECK(t->device().type() == c10::DeviceType::PrivateUse1, op, ": unexpected device ", t->device());
    if (device == -1) {
      device = t->device().index();
    } else {
      TORCH_CHECK(
          device == t->device().index(),
          "Expected all tensors to be on the same device, but found at least two devices, emu:",
          int(device),
          " and emu:",
          int(t->device().index()),
          "! (in ",
          op,
          ")");
    }
    check_storage(*t, op);
  }
  TORCH_CHECK(device >= 0, op, ": no emu tensor among the arguments");
  TORCH_CHECK(
      cpu_operand == nullptr,
      "Expected all tensors to be on the same device, but found at least two devices, emu:",
      int(device),
      " and cpu! (in ",
      op,
      ")");
  return device;
}

KernelArg arg(const at::Tensor& t) {
  KernelArg a;
  if (!t.defined())
    return a;
  a.dtype = t.scalar_type();
  if (t.is_cpu()) {
    a.host = t;
    return a;
  }
  a.storage = t.storage();
  a.data = a.storage.data();
  a.nbytes = a.storage.nbytes();
  a.sizes.assign(t.sizes().begin(), t.sizes().end());
  a.strides.assign(t.strides().begin(), t.strides().end());
  a.offset = t.storage_offset();
  a.conj = t.is_conj();
  a.neg = t.is_neg();
  return a;
}

at::Tensor kernel_view(const KernelArg& a) {
  if (a.host.defined() || a.dtype == c10::ScalarType::Undefined)
    return a.host;
  const auto options = at::TensorOptions().dtype(a.dtype).device(at::kCPU);
  int64_t numel = 1;
  for (int64_t s : a.sizes)
    numel *= s;
  if (numel == 0)
    return at::empty(a.sizes, options);
  void* host = nullptr;
  EMU_CHECK(emuKernelTranslate(a.data, a.nbytes, &host));
  char* data = static_cast<char*>(host) + a.offset * static_cast<int64_t>(c10::elementSize(a.dtype));
  at::Tensor view = at::from_blob(data, a.sizes, a.strides, options);
  // Lazy conjugation and negation are metadata: carry them over to the alias.
  if (a.conj)
    view = at::_conj(view);
  if (a.neg)
    view = at::_neg_view(view);
  return view;
}

} // namespace torch_emu
