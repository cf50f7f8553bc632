// copy_ in every direction. Bytes move as stream work: host<->device copies are one
// memcpy through the kernel view; anything needing a dtype change, broadcast or a
// strided layout goes through a contiguous staging tensor, converted where it is cheapest.
// non_blocking follows CUDA: a copy from or into pinned host memory is queued on the current
// stream (the driver's emuMemcpyAsync, the pinned block recorded as used by that stream) and
// returns at once; from pageable memory the source is first staged in a pinned block, into
// pageable memory the copy is complete on return.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cstring>
#include <set>
#include <tuple>

// Named tensors exist up to torch 2.12 (their header goes with them): a copy carries the names as the
// CPU's copy_ does. Detected, not patched.
#if __has_include(<ATen/NamedTensorUtils.h>)
#include <ATen/NamedTensorUtils.h>
#define EMU_HAS_NAMED_TENSORS 1
#else
#define EMU_HAS_NAMED_TENSORS 0
#endif

#include "aten/Launch.h"
#include "runtime/EmuHostAllocator.h"

namespace torch_emu {

namespace {

bool is_emu(const at::Tensor& t) {
  return t.device().type() == c10::DeviceType::PrivateUse1;
}

// Same bytes as dst would hold: contiguous, same dtype and shape, no lazy conj/neg bits.
bool plain_copy_of(const at::Tensor& src, const at::Tensor& dst) {
  return src.is_contiguous() && src.scalar_type() == dst.scalar_type() && src.sizes() == dst.sizes() &&
      !src.is_conj() && !src.is_neg();
}

// The device address of the first element (never dereferenced on the host).
char* device_address(const at::Tensor& t) {
  return static_cast<char*>(t.storage().mutable_data()) + t.storage_offset() * static_cast<int64_t>(t.element_size());
}

void sync_current(c10::DeviceIndex device) {
  DeviceSwitch on(device);
  EMU_CHECK(emuStreamSynchronize(raw_stream(getCurrentEmuStream(device))));
}

// Queues a copy between pinned host memory and the device on the current stream: no staging,
// and the pinned block is not reused before the stream has passed the copy.
void queue_pinned_copy(c10::DeviceIndex device, void* to, const void* from, size_t bytes, emuMemcpyKind kind) {
#if EMU_DRIVER_HAS_HOST_ALLOC
  DeviceSwitch on(device);
  const c10::Stream stream = getCurrentEmuStream(device);
  EMU_CHECK(emuMemcpyAsync(to, from, bytes, kind, raw_stream(stream)));
  record_pinned_use(kind == emuMemcpyHostToDevice ? from : to, stream);
#else
  (void)device, (void)to, (void)from, (void)bytes, (void)kind;
  TORCH_CHECK(false, "pinned host memory needs emu driver API 2.2"); // is_pinned_host() is false there
#endif
}

// The CPU's copy kernel for these dtypes and this kind of layout, tried on a few elements the first time
// a thread meets them: a conversion the CPU cannot make (the bit and sub-byte dtypes, uint1 to float and
// the like) raises here, at the call, as on the CPU, instead of inside the queued work at the next
// synchronize. The layout matters: the CPU copies some dtypes only when both sides are contiguous.
void check_copy_supported(const at::Tensor& dst, const at::Tensor& src) {
  const bool strided = !dst.is_contiguous() || !src.is_contiguous();
  const auto key = std::make_tuple(int(dst.scalar_type()), int(src.scalar_type()), strided);
  thread_local std::set<std::tuple<int, int, bool>> supported;
  if (supported.count(key) != 0)
    return;
  // Zeroed (a memset for any dtype), so the probe converts defined values: garbage may warn (NaN to integer).
  at::Tensor to = at::zeros({strided ? 4 : 2}, at::TensorOptions().dtype(dst.scalar_type()));
  at::Tensor from = at::zeros({strided ? 4 : 2}, at::TensorOptions().dtype(src.scalar_type()));
  if (strided)
    to = to.slice(0, 0, 4, 2), from = from.slice(0, 0, 4, 2);
  to.copy_(from);
  supported.insert(key);
}

void copy_same_device(const at::Tensor& dst, const at::Tensor& src) {
  const c10::DeviceIndex device = common_device("copy_", {&dst, &src});
  check_copy_supported(dst, src);
  launch(device, [dst = arg(dst), src = arg(src)] { kernel_view(dst).copy_(kernel_view(src)); });
}

void copy_host_to_device(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  // Convert on the host (dtype, broadcast, layout, conj): then one memcpy into device memory.
  at::Tensor host = src.expand(dst.sizes());
  if (!plain_copy_of(host, dst))
    host = host.to(dst.scalar_type()).resolve_conj().resolve_neg().contiguous();
  const at::Tensor staged = dst.is_contiguous() ? dst : at::empty(dst.sizes(), dst.options());
  const c10::DeviceIndex device = common_device("copy_", {&staged});
  const size_t bytes = static_cast<size_t>(staged.numel()) * staged.element_size();
  const bool callers_pageable = non_blocking && host.storage().is_alias_of(src.storage());
  if (non_blocking && is_pinned_host(host.data_ptr())) {
    queue_pinned_copy(device, device_address(staged), host.data_ptr(), bytes, emuMemcpyHostToDevice);
  } else if (callers_pageable && pinned_memory_available()) {
    // Pageable memory the caller may change once we return: stage it in a pinned block, as CUDA does, and queue
    // the copy from there (the block goes back to the cache once the stream has passed the copy).
    c10::DataPtr stage = pinned_host_allocator()->allocate(bytes);
    std::memcpy(stage.get(), host.data_ptr(), bytes);
    queue_pinned_copy(device, device_address(staged), stage.get(), bytes, emuMemcpyHostToDevice);
  } else {
    if (callers_pageable)
      host = host.clone(); // a driver without host allocation: copy what it holds now
    launch(device, [staged = arg(staged), host, bytes] {
      std::memcpy(kernel_view(staged).data_ptr(), host.data_ptr(), bytes);
    });
  }
  if (!staged.is_same(dst))
    copy_same_device(dst, staged);
  if (!non_blocking)
    sync_current(device);
}

void copy_device_to_host(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  at::Tensor device_src = src;
  if (!plain_copy_of(src, dst)) {
    device_src = at::empty(dst.sizes(), src.options().dtype(dst.scalar_type()));
    copy_same_device(device_src, src);
  }
  const at::Tensor host = dst.is_contiguous() ? dst : at::empty(dst.sizes(), dst.options());
  const c10::DeviceIndex device = common_device("copy_", {&device_src});
  const size_t bytes = static_cast<size_t>(host.numel()) * host.element_size();
  if (non_blocking && host.is_same(dst) && is_pinned_host(host.data_ptr())) {
    queue_pinned_copy(device, host.data_ptr(), device_address(device_src), bytes, emuMemcpyDeviceToHost);
    return; // complete once the current stream has passed it
  }
  launch(device, [host, device_src = arg(device_src), bytes] {
    std::memcpy(host.data_ptr(), kernel_view(device_src).data_ptr(), bytes);
  });
  sync_current(device); // pageable memory (or a staging tensor): complete on return, as with CUDA
  if (!host.is_same(dst))
    dst.copy_(host);
}

void copy_across_devices(const at::Tensor& dst, const at::Tensor& src) {
  at::Tensor from = src;
  if (!plain_copy_of(src, dst)) {
    from = at::empty(dst.sizes(), src.options().dtype(dst.scalar_type()));
    copy_same_device(from, src);
  }
  const at::Tensor to = dst.is_contiguous() ? dst : at::empty(dst.sizes(), dst.options());
  // emuMemcpy is ordered after all work on both devices and complete on return.
  EMU_CHECK(emuMemcpy(
      device_address(to),
      device_address(from),
      static_cast<size_t>(to.numel()) * to.element_size(),
      emuMemcpyDeviceToDevice));
  if (!to.is_same(dst))
    copy_same_device(dst, to);
}

at::Tensor& copy_unnamed(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  TORCH_CHECK(self.defined() && src.defined(), "copy_: undefined tensor");
  check_not_forked();
  TORCH_CHECK(
      at::is_expandable_to(src.sizes(), self.sizes()),
      "copy_: cannot copy a tensor of shape ",
      src.sizes(),
      " into one of shape ",
      self.sizes(),
      " (the shapes must match, or the source must broadcast to the destination)");
  if (self.is_same(src) || self.numel() == 0)
    return self;
  check_storage(self, "copy_ (destination)");
  check_storage(src, "copy_ (source)");
  if (is_emu(self) && is_emu(src)) {
    if (self.device() == src.device()) {
      copy_same_device(self, src);
    } else {
      copy_across_devices(self, src);
    }
  } else if (is_emu(self)) {
    TORCH_CHECK(src.is_cpu(), "copy_: cannot copy from ", src.device(), " to emu");
    copy_host_to_device(self, src, non_blocking);
  } else {
    TORCH_CHECK(self.is_cpu(), "copy_: cannot copy from emu to ", self.device());
    copy_device_to_host(self, src, non_blocking);
  }
  return self;
}

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
#if EMU_HAS_NAMED_TENSORS
  const auto names = at::namedinference::compute_broadcast_outnames(self, src);
  {
    at::NoNamesGuard guard;
    copy_unnamed(self, src, non_blocking);
  }
  at::namedinference::propagate_names_if_nonempty(self, names);
  return self;
#else
  return copy_unnamed(self, src, non_blocking);
#endif
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor out = dst;
  copy_(out, self, non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  at::Tensor out = dst;
  copy_(out, self, false);
  return dst;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("copy_", copy_);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
}

} // namespace torch_emu
