// Per-device stream pools and the per-thread current stream, as c10::Stream values.
#include "runtime/EmuStream.h"

#include <array>
#include <atomic>
#include <mutex>
#include <vector>

#include "runtime/EmuException.h"
#include "runtime/EmuFork.h"

namespace torch_emu {

namespace {

constexpr int kPoolSize = 8; // streams per device and priority handed out round robin, as in c10/cuda

// Ids 1..kPoolSize are the normal pool, kPoolSize+1..2*kPoolSize the high-priority pool.
struct DevicePool {
  std::once_flag created;
  std::array<emuStream_t, 2 * kPoolSize> streams{};
  std::atomic<uint32_t> next{0};
  std::atomic<uint32_t> next_high{0};
};

// One pool per possible device index: the driver's own bound, so the two cannot disagree.
std::array<DevicePool, EMU_MAX_DEVICES>& pools() {
  static std::array<DevicePool, EMU_MAX_DEVICES> all;
  return all;
}

// Current stream ids per device for this thread; 0 means the default stream.
std::vector<c10::StreamId>& current_ids() {
  thread_local std::vector<c10::StreamId> ids;
  return ids;
}

void create_pool(c10::DeviceIndex device, DevicePool& pool) {
  int previous = 0;
  EMU_CHECK(emuGetDevice(&previous));
  EMU_CHECK(emuSetDevice(device));
  for (auto& s : pool.streams)
    EMU_CHECK(emuStreamCreate(&s));
  EMU_CHECK(emuSetDevice(previous));
}

} // namespace

c10::DeviceIndex current_device() {
  int device = 0;
  EMU_CHECK(emuGetDevice(&device));
  return static_cast<c10::DeviceIndex>(device);
}

c10::DeviceIndex device_count() {
  static const c10::DeviceIndex count = [] {
    int n = 0;
    // No device is not an error for the guard's deviceCount(): report zero.
    return emuGetDeviceCount(&n) == emuSuccess ? static_cast<c10::DeviceIndex>(n) : c10::DeviceIndex(0);
  }();
  return count;
}

c10::DeviceIndex checked_device_index(int64_t device) {
  const int count = device_count();
  TORCH_CHECK(
      device >= 0 && device < count,
      "The device index is out of range. It must be in [0, ",
      count,
      "), but got ",
      device,
      " (there are ",
      count,
      " emu devices).");
  return static_cast<c10::DeviceIndex>(device);
}

c10::DeviceIndex device_or_current(int64_t device) {
  return device < 0 ? current_device() : checked_device_index(device);
}

// Stream ids: 0 is the default stream; 1..2*kPoolSize are pool entries (the upper half high priority).
emuStream_t raw_stream(const c10::Stream& stream) {
  check_not_forked(); // the stream's worker thread did not survive fork(): waiting on it would hang
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1, "not an emu stream: ", stream);
  const c10::StreamId id = stream.id();
  if (id == 0)
    return nullptr; // the default stream of the current device: callers switch device first
  TORCH_CHECK(id > 0 && id <= 2 * kPoolSize, "unknown emu stream id ", id);
  auto& pool = pools()[static_cast<size_t>(stream.device_index())];
  std::call_once(pool.created, create_pool, stream.device_index(), std::ref(pool));
  return pool.streams[static_cast<size_t>(id - 1)];
}

c10::Stream getDefaultEmuStream(c10::DeviceIndex device) {
  return c10::Stream(c10::Stream::DEFAULT, c10::Device(c10::DeviceType::PrivateUse1, device_or_current(device)));
}

c10::Stream getCurrentEmuStream(c10::DeviceIndex device) {
  device = device_or_current(device);
  auto& ids = current_ids();
  const c10::StreamId id = static_cast<size_t>(device) < ids.size() ? ids[static_cast<size_t>(device)] : 0;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id);
}

void setCurrentEmuStream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1, "not an emu stream: ", stream);
  auto& ids = current_ids();
  const auto device = static_cast<size_t>(stream.device_index());
  if (ids.size() <= device)
    ids.resize(device + 1, 0);
  ids[device] = stream.id();
}

DeviceSwitch::DeviceSwitch(c10::DeviceIndex device) {
  int current = 0;
  EMU_CHECK(emuGetDevice(&current));
  if (current != device) {
    EMU_CHECK(emuSetDevice(device));
    previous_ = current;
  }
}

DeviceSwitch::~DeviceSwitch() {
  if (previous_ >= 0)
    emuSetDevice(previous_);
}

c10::Stream getStreamFromPool(c10::DeviceIndex device, bool high_priority) {
  device = device_or_current(device);
  auto& pool = pools()[static_cast<size_t>(device)];
  auto& next = high_priority ? pool.next_high : pool.next;
  const auto id = static_cast<c10::StreamId>(next.fetch_add(1) % kPoolSize + 1 + (high_priority ? kPoolSize : 0));
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id);
}

int stream_priority(const c10::Stream& stream) {
  return stream.id() > kPoolSize ? kHighestStreamPriority : kLowestStreamPriority;
}

} // namespace torch_emu
