// torch-tacc's runtime glue: the tacc toolkit's devices and memory as torch sees them (allocator, device guard).
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/util/Exception.h>
#include <tacc/tacc.h>

#define TACC_CHECK(expr)                                                                           \
  do {                                                                                             \
    const tacc_status tacc_check_status_ = (expr);                                                 \
    TORCH_CHECK(tacc_check_status_ == TACC_SUCCESS, "tacc: ", #expr, " failed: ",                  \
                tacc_status_string(tacc_check_status_));                                           \
  } while (0)

namespace torch_tacc {

c10::DeviceIndex device_count();
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex index);
// The device of an explicit or default tacc device, checked against the toolkit's device count.
c10::DeviceIndex checked_index(const c10::Device& device);
c10::Allocator* tacc_allocator();

// Sets the current device for a scope and restores the previous one.
class DeviceSwitch {
 public:
  explicit DeviceSwitch(c10::DeviceIndex index);
  ~DeviceSwitch();
  DeviceSwitch(const DeviceSwitch&) = delete;
  DeviceSwitch& operator=(const DeviceSwitch&) = delete;

 private:
  c10::DeviceIndex previous_;
};

}  // namespace torch_tacc
