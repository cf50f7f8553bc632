// Queuing host work on an emu stream: the driver's kernel launch with C++ lambdas. It lives
// in runtime/ because runtime code queues work too (storage resize copies on the stream);
// aten/Launch.h builds the tensor-facing kernel arguments on top of it.
#pragma once

#include <c10/core/Device.h>
#include <emu_driver.h>

#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "runtime/EmuException.h"

namespace torch_emu {

namespace detail {
emuError_t launch_raw(c10::DeviceIndex device, emuKernelFn fn, void* args);
#if EMU_DRIVER_HAS_GRAPHS
emuError_t launch_retained(c10::DeviceIndex device, emuKernelFn fn, emuKernelReleaseFn release, void* args);
#endif
void after_launch(c10::DeviceIndex device);
void set_kernel_error(const char* message);
#if EMU_DRIVER_HAS_TRACING
// While the driver traces (a profile with ProfilerActivity.PrivateUse1), each kernel is named after the function
// that launched it: "torch_emu::softmax_out" for a lambda in torch_emu::(anonymous namespace)::softmax_out(...).
bool tracing();
std::string kernel_name(const std::type_info& body);
void label_kernel(const char* name);
#endif
} // namespace detail

// Queues body() on the current stream of `device`. The lambda owns what it captures
// (tensors keep their storage alive until the kernel has run). An exception in the
// body fails the stream: the next synchronize (or, on API 1.x, this call) raises it.
// Driver API 2.3: the driver owns the lambda and may run it many times (a captured graph replays it), so it
// runs without being consumed and is deleted by the driver's release once nothing can run it again.
template <typename F>
void launch(c10::DeviceIndex device, F&& body) {
  using Body = std::decay_t<F>;
  auto* work = new Body(std::forward<F>(body));
#if EMU_DRIVER_HAS_GRAPHS
  auto run = [](void* args) -> int {
    try {
      (*static_cast<Body*>(args))();
      return 0;
    } catch (const c10::Error& e) {
      detail::set_kernel_error(e.what_without_backtrace());
    } catch (const std::exception& e) {
      detail::set_kernel_error(e.what());
    }
    return 1;
  };
  auto release = [](void* args) { delete static_cast<Body*>(args); };
#if EMU_DRIVER_HAS_TRACING
  if (detail::tracing()) {
    static const std::string name = detail::kernel_name(typeid(Body));
    detail::label_kernel(name.c_str());
  }
#endif
  // The driver releases the work also when it refuses it (a spoilt capture): never ours again.
  EMU_CHECK(detail::launch_retained(device, run, release, work));
  detail::after_launch(device);
#else
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
#endif
}

} // namespace torch_emu
