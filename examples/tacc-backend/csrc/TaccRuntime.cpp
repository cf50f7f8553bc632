// The allocator (tacc_malloc/tacc_free), the device guard, and the runtime queries reached as torch.ops.tacc.*.
#include "TaccRuntime.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <vector>

namespace torch_tacc {

c10::DeviceIndex device_count() { return static_cast<c10::DeviceIndex>(tacc_device_count()); }

c10::DeviceIndex current_device() {
  int device = 0;
  TACC_CHECK(tacc_get_device(&device));
  return static_cast<c10::DeviceIndex>(device);
}

void set_device(c10::DeviceIndex index) { TACC_CHECK(tacc_set_device(index)); }

c10::DeviceIndex checked_index(const c10::Device& device) {
  TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1, "expected a tacc device, got ", device);
  if (!device.has_index()) return current_device();
  TORCH_CHECK(device.index() >= 0 && device.index() < device_count(), "tacc device index ", int(device.index()),
              " is out of range: there are ", int(device_count()), " tacc device(s)");
  return device.index();
}

DeviceSwitch::DeviceSwitch(c10::DeviceIndex index) : previous_(current_device()) {
  if (index != previous_) set_device(index);
}

DeviceSwitch::~DeviceSwitch() { tacc_set_device(previous_); }

namespace {

void free_tacc(void* pointer) { tacc_free(pointer); }

class TaccAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    const c10::DeviceIndex device = current_device();
    void* pointer = nullptr;
    if (bytes > 0) TACC_CHECK(tacc_malloc(device, bytes, &pointer));
    return {pointer, pointer, &free_tacc, c10::Device(c10::DeviceType::PrivateUse1, device)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &free_tacc; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    TACC_CHECK(tacc_memcpy(dest, src, count, TACC_COPY_DEVICE_TO_DEVICE));
  }
};

TaccAllocator allocator_instance;

struct TaccGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }

  c10::Device exchangeDevice(c10::Device device) const override {
    const c10::Device old = getDevice();
    if (old.index() != device.index()) set_device(device.index());
    return old;
  }

  c10::Device getDevice() const override { return c10::Device(c10::DeviceType::PrivateUse1, current_device()); }

  void setDevice(c10::Device device) const override { set_device(device.index()); }

  void uncheckedSetDevice(c10::Device device) const noexcept override { tacc_set_device(device.index()); }

  // tacc has no streams: every device has its one default stream, and work runs when called.
  c10::Stream getStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    return c10::Stream(c10::Stream::DEFAULT, stream.device());
  }

  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TaccGuardImpl);

// What torch asks of an accelerator beyond the guard (the autograd engine asks for a primary context, for one).
struct TaccHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return device_index >= 0 && device_index < device_count();
  }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  at::Device getDeviceFromPtr(void* data) const override {
    int device = 0;
    TACC_CHECK(tacc_pointer_device(data, &device));
    return {c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device)};
  }
};

const bool hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new TaccHooks());
  return true;
}();

int64_t op_device_count() { return device_count(); }
int64_t op_current_device() { return current_device(); }
void op_set_device(int64_t index) {
  TORCH_CHECK(index >= 0 && index < device_count(), "tacc device index ", index, " is out of range: there are ",
              int(device_count()), " tacc device(s)");
  set_device(static_cast<c10::DeviceIndex>(index));
}
int64_t op_runtime_version() { return tacc_runtime_version(); }
int64_t op_compiled_version() { return TACC_VERSION_MAJOR * 1000 + TACC_VERSION_MINOR; }

std::vector<int64_t> op_memory_allocated(int64_t device) {
#if TACC_VERSION_MAJOR >= 2
  size_t current = 0;
  size_t peak = 0;
  TACC_CHECK(tacc_memory_allocated(static_cast<int>(device), &current, &peak));
  return {static_cast<int64_t>(current), static_cast<int64_t>(peak)};
#else
  TORCH_CHECK_NOT_IMPLEMENTED(false, "tacc memory statistics need toolkit API 2 (this build has ", TACC_VERSION_MAJOR,
                              ".", TACC_VERSION_MINOR, ")");
#endif
}

}  // namespace

c10::Allocator* tacc_allocator() { return &allocator_instance; }

}  // namespace torch_tacc

TORCH_LIBRARY(tacc, m) {
  m.def("device_count() -> int", &torch_tacc::op_device_count);
  m.def("current_device() -> int", &torch_tacc::op_current_device);
  m.def("set_device(int device) -> ()", &torch_tacc::op_set_device);
  m.def("runtime_version() -> int", &torch_tacc::op_runtime_version);
  m.def("compiled_version() -> int", &torch_tacc::op_compiled_version);
  m.def("memory_allocated(int device) -> int[]", &torch_tacc::op_memory_allocated);
}
