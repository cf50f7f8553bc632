// Differences between torch releases that the plugin's C++ meets, in one place. The
// source targets the newest torch; a shim patch for an older release edits this file
// (and the few call sites that cannot be hidden here) instead of every kernel. Named
// TorchCompat, not Compat: in this project "compat" is the published compatibility table.
#pragma once

#include <optional>

namespace torch_emu {
namespace compat {

// Optional arguments in kernel signatures: std::optional from torch 2.3 (c10::optional is an alias);
// torch 2.1 and 2.2 have their own c10::optional class.
template <class T>
using optional = std::optional<T>;

} // namespace compat
} // namespace torch_emu

// torch >= 2.9 has c10::DeviceAllocator (c10/core/CachingDeviceAllocator.h), the base that
// torch.accelerator's memory functions require of a device's allocator; older releases set 0.
#define EMU_HAS_DEVICE_ALLOCATOR 1

// torch >= 2.10 asks the device guard for getDeviceCapability (torch.accelerator.get_device_capability);
// older releases set 0.
#define EMU_HAS_DEVICE_CAPABILITY 1

// c10::Allocator up to torch 2.2: allocate() is const and copy_data() does not exist (the pre-2.3
// series sets these two).
#define EMU_ALLOCATE_CONST
#define EMU_ALLOCATOR_HAS_COPY_DATA 1

// torch >= 2.7 declares DeviceGuardImplInterface::getStream/exchangeStream without noexcept;
// 2.6 and older need the overrides to say noexcept.
#define EMU_STREAM_NOEXCEPT

// torch >= 2.9 has at::HostAllocator and at::setHostAllocator (ATen/core/CachingHostAllocator.h):
// the pinned-memory cache is registered as the backend's host allocator, which torch.accelerator's
// host-memory calls need; older releases set 0 and keep it behind the hooks only.
#define EMU_HAS_HOST_ALLOCATOR 1
