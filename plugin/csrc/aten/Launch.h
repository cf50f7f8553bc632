// Running ATen CPU kernels as emu driver work: a kernel is queued on the current emu
// stream and, when the stream reaches it, sees device memory through the driver's
// kernel view (emuKernelTranslate) as CPU tensors that alias the device bytes. The queuing
// itself, launch(), is runtime/EmuLaunch.h; this header adds the tensor arguments.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/SmallVector.h>

#include "TorchCompat.h"
#include "runtime/EmuException.h"
#include "runtime/EmuFork.h"
#include "runtime/EmuLaunch.h"
#include "runtime/EmuStream.h"

namespace torch_emu {

// Caller side: the storage must cover the tensor's view. Catches a storage freed or
// shrunk under a live tensor before any work is queued.
void check_storage(const at::Tensor& t, const char* what);

// Caller side: the one emu device all emu tensors among `tensors` are on. CPU tensors
// are allowed only as 0-dim scalars (wrapped numbers), as on CUDA.
c10::DeviceIndex common_device(const char* op, std::initializer_list<const at::Tensor*> tensors);

// A tensor argument of a kernel, taken when the kernel is queued: the device address of
// its bytes and its layout then. Later changes to the tensor (resize_, set_, t_(), a freed
// storage) do not reach work already queued, as with CUDA kernels and their pointers.
struct KernelArg {
  at::Tensor host; // a CPU argument (0-dim scalar or a host buffer): used as is
  c10::Storage storage; // keeps the storage object alive until the kernel ran
  const void* data = nullptr; // device address of the storage's first byte, at launch
  size_t nbytes = 0;
  c10::SmallVector<int64_t, 5> sizes;
  c10::SmallVector<int64_t, 5> strides;
  int64_t offset = 0;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  bool conj = false;
  bool neg = false;
};

// Caller side: capture a tensor for a kernel.
KernelArg arg(const at::Tensor& t);

// Kernel side: a CPU tensor that aliases the argument's device bytes (CPU arguments pass through).
at::Tensor kernel_view(const KernelArg& a);

// Kernel side: ATen's *_out functions take the output as Tensor&; a temporary view lives
// until the end of the full expression, so as_lvalue(kernel_view(out)) is safe as an argument.
inline at::Tensor& as_lvalue(at::Tensor&& view) {
  return view;
}

} // namespace torch_emu
