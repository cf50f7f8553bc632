// The non-template half of launch(): which stream the work goes to, and API 1.x's
// synchronous error reporting.
#include "runtime/EmuLaunch.h"

#include "runtime/EmuStream.h"

namespace torch_emu {
namespace detail {

void set_kernel_error(const char* message) {
  emuKernelSetErrorMessage(message);
}

emuError_t launch_raw(c10::DeviceIndex device, emuKernelFn fn, void* args) {
  DeviceSwitch on(device);
  return emuLaunchKernel(fn, args, raw_stream(getCurrentEmuStream(device)));
}

#if EMU_DRIVER_HAS_GRAPHS
emuError_t launch_retained(c10::DeviceIndex device, emuKernelFn fn, emuKernelReleaseFn release, void* args) {
  DeviceSwitch on(device);
  return emuLaunchKernelRetained(fn, args, release, raw_stream(getCurrentEmuStream(device)));
}
#endif

void after_launch(c10::DeviceIndex device) {
#if EMU_DRIVER_HAS_ASYNC
  (void)device;
#else
  // API 1.x has run the kernel already: raise its failure here, where the op was called.
  DeviceSwitch on(device);
  EMU_CHECK(emuStreamSynchronize(raw_stream(getCurrentEmuStream(device))));
#endif
}

} // namespace detail
} // namespace torch_emu
