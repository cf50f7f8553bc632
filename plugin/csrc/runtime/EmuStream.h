// Streams of the emu device as c10::Stream values, and the current-stream state.
//
// A c10::Stream of DeviceType::PrivateUse1 stands for one emuStream_t. Stream id 0
// is the device's default stream (the driver's null stream); other ids come from a
// per-device pool created lazily, like c10/cuda's stream pool.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <emu_driver.h>

namespace torch_emu {

// The device type emu registers as.
constexpr c10::DeviceType kEmu = c10::DeviceType::PrivateUse1;

// The device of the calling thread (driver's emuGetDevice).
c10::DeviceIndex current_device();
c10::DeviceIndex device_count();

// The index when it names an emu device, else the message c10 gives for XPU and PyTorch's reference
// backend gives: "The device index is out of range. It must be in [0, 2), but got 5 ...". Every place
// that takes a device index from a caller checks it here, so the message is the same everywhere.
c10::DeviceIndex checked_device_index(int64_t device);
// The same, with a negative index standing for the calling thread's current device.
c10::DeviceIndex device_or_current(int64_t device);

// The raw driver stream behind a c10::Stream of the emu device.
emuStream_t raw_stream(const c10::Stream& stream);

c10::Stream getDefaultEmuStream(c10::DeviceIndex device = -1);
c10::Stream getCurrentEmuStream(c10::DeviceIndex device = -1);
void setCurrentEmuStream(const c10::Stream& stream);
// Makes a device current for a scope: the driver's null stream, emuMalloc and
// emuMemGetInfo act on the calling thread's current device.
class DeviceSwitch {
 public:
  explicit DeviceSwitch(c10::DeviceIndex device);
  ~DeviceSwitch();
  DeviceSwitch(const DeviceSwitch&) = delete;
  DeviceSwitch& operator=(const DeviceSwitch&) = delete;

 private:
  int previous_ = -1;
};

// A stream from the device's pool (round robin), for torch.emu.Stream(); high_priority takes it from
// the high-priority pool instead.
c10::Stream getStreamFromPool(c10::DeviceIndex device = -1, bool high_priority = false);

// Stream priorities as CUDA numbers them: lower is higher. Emu has two, normal (0) and high (-1):
// kLowestStreamPriority, kHighestStreamPriority (torch.emu.Stream.priority_range()). The priority of
// a stream is kept in its id (the pool it came from).
constexpr int kLowestStreamPriority = 0;
constexpr int kHighestStreamPriority = -1;
int stream_priority(const c10::Stream& stream);

} // namespace torch_emu
