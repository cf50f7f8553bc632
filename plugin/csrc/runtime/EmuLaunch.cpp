// The non-template half of launch(): which stream the work goes to, and API 1.x's
// synchronous error reporting.
#include "runtime/EmuLaunch.h"

#include <c10/util/Type.h>

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

#if EMU_DRIVER_HAS_TRACING
bool tracing() {
  return emuTraceIsOn() != 0;
}

namespace {
// "a::b::f(int)::{lambda()#1}" -> "a::b::f": the function, without its parameters.
std::string function_of(const std::string& name) {
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<')
      ++depth;
    else if (name[i] == '>')
      --depth;
    else if (name[i] == '(' && depth == 0 && i > 0)
      return name.substr(0, i);
  }
  return name;
}
} // namespace

std::string kernel_name(const std::type_info& body) {
  // "torch_emu::(anonymous namespace)::softmax_out(at::Tensor const&, ...)::{lambda()#1}" -> "torch_emu::softmax_out";
  // a template's arguments by their last name: "torch_emu::native::unary<torch_emu::native::relu(...)::{lambda...}>
  // (char const*, ...)::{lambda()#1}" -> "torch_emu::native::unary<relu>".
  std::string name = c10::demangle(body.name());
  const std::string anonymous = "(anonymous namespace)::";
  for (size_t at = name.find(anonymous); at != std::string::npos; at = name.find(anonymous))
    name.erase(at, anonymous.size());
  name = function_of(name);
  const size_t open = name.find('<'), close = name.rfind('>');
  if (open == std::string::npos || close == std::string::npos || close < open)
    return name;
  std::string argument = function_of(name.substr(open + 1, close - open - 1));
  const size_t last = argument.rfind("::");
  if (last != std::string::npos)
    argument = argument.substr(last + 2);
  return name.substr(0, open + 1) + argument + ">";
}

void label_kernel(const char* name) {
  emuTraceLabel(name);
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
