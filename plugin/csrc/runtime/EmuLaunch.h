// Queuing host work on an emu stream: the driver's kernel launch with C++ lambdas. It lives
// in runtime/ because runtime code queues work too (storage resize copies on the stream);
// aten/Launch.h builds the tensor-facing kernel arguments on top of it.
#pragma once

#include <c10/core/Device.h>
#include <emu_driver.h>

#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

#include "runtime/EmuException.h"

namespace torch_emu {

namespace detail {
emuError_t launch_raw(c10::DeviceIndex device, emuKernelFn fn, void* args);
void after_launch(c10::DeviceIndex device);
void set_kernel_error(const char* message);
} // namespace detail

// Queues body() on the current stream of `device`. The lambda owns what it captures
// (tensors keep their storage alive until the kernel has run). An exception in the
// body fails the stream: the next synchronize (or, on API 1.x, this call) raises it.
template <typename F>
void launch(c10::DeviceIndex device, F&& body) {
  using Body = std::decay_t<F>;
  auto* work = new Body(std::forward<F>(body));
  auto trampoline = [](void* args) -> int {
    std::unique_ptr<Body> owned(static_cast<Body*>(args));
    try {
      (*owned)();
      return 0;
    } catch (const c10::Error& e) {
      detail::set_kernel_error(e.what_without_backtrace());
    } catch (const std::exception& e) {
      detail::set_kernel_error(e.what());
    }
    return 1;
  };
  const emuError_t err = detail::launch_raw(device, trampoline, work);
  if (err != emuSuccess) {
    delete work; // not queued: still ours
    EMU_CHECK(err);
  }
  detail::after_launch(device);
}

} // namespace torch_emu
