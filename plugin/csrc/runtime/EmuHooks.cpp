// The generator and the PrivateUse1 hooks: what ATen asks of a backend beyond kernels
// (availability, default generators, the device of a pointer, storage resizing, pinned host memory).
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/ops/empty.h>
#include <c10/core/StorageImpl.h>

#include <array>
#include <cstring>
#include <mutex>
#include <random>

#include "runtime/EmuException.h"
#include "runtime/EmuGenerator.h"
#include "runtime/EmuHostAllocator.h"
#include "runtime/EmuStorage.h"
#include "runtime/EmuStream.h"

namespace torch_emu {

namespace {

constexpr size_t kStateBytes = 2 * sizeof(uint64_t);

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// A negative index is the current device; one out of range raises the runtime's message.
c10::DeviceIndex checked(c10::DeviceIndex device) {
  return device_or_current(device);
}

} // namespace

EmuGeneratorImpl::EmuGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(
          c10::Device(c10::DeviceType::PrivateUse1, device),
          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void EmuGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}
uint64_t EmuGeneratorImpl::current_seed() const {
  return seed_;
}
void EmuGeneratorImpl::set_offset(uint64_t offset) {
  offset_ = offset;
}
uint64_t EmuGeneratorImpl::get_offset() const {
  return offset_;
}

uint64_t EmuGeneratorImpl::seed() {
  std::random_device rd;
  const uint64_t s = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  set_current_seed(s);
  return s;
}

void EmuGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(
      new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && new_state.numel() == static_cast<int64_t>(kStateBytes),
      "emu generator state must be a torch.uint8 tensor of ",
      kStateBytes,
      " bytes, got ",
      new_state.numel(),
      " elements of ",
      new_state.dtype());
  uint64_t values[2];
  std::memcpy(values, new_state.data(), kStateBytes);
  seed_ = values[0];
  offset_ = values[1];
}

c10::intrusive_ptr<c10::TensorImpl> EmuGeneratorImpl::get_state() const {
  at::Tensor state = at::empty({static_cast<int64_t>(kStateBytes)}, at::TensorOptions().dtype(at::kByte));
  const uint64_t values[2] = {seed_, offset_};
  std::memcpy(state.data_ptr(), values, kStateBytes);
  return state.getIntrusivePtr();
}

uint64_t EmuGeneratorImpl::next_kernel_seed() {
  return splitmix64(seed_ ^ splitmix64(offset_++));
}

EmuGeneratorImpl* EmuGeneratorImpl::clone_impl() const {
  auto* copy = new EmuGeneratorImpl(device().index(), seed_);
  copy->offset_ = offset_;
  return copy;
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  device = checked(device);
  // Sized by the driver's device bound; checked() has kept device below the device count.
  static std::array<std::once_flag, EMU_MAX_DEVICES> once;
  static std::array<at::Generator, EMU_MAX_DEVICES> generators;
  std::call_once(once[static_cast<size_t>(device)], [device] {
    generators[static_cast<size_t>(device)] = at::make_generator<EmuGeneratorImpl>(device);
  });
  return generators[static_cast<size_t>(device)];
}

at::Generator new_generator(c10::DeviceIndex device) {
  return at::make_generator<EmuGeneratorImpl>(checked(device));
}

uint64_t draw_kernel_seed(const compat::optional<at::Generator>& gen, c10::DeviceIndex device) {
  at::Generator g = gen.has_value() && gen->defined() ? *gen : default_generator(device);
  TORCH_CHECK(
      g.device().type() == c10::DeviceType::PrivateUse1, "expected a generator for emu, got one for ", g.device());
  auto* impl = g.get<EmuGeneratorImpl>();
  std::lock_guard<std::mutex> lock(impl->mutex_);
  return impl->next_kernel_seed();
}

namespace {

struct EmuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override {
    return true;
  }
  bool isAvailable() const override {
    return device_count() > 0;
  }
  bool hasPrimaryContext(c10::DeviceIndex /*device*/) const override {
    return true;
  }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override {
    return device_count();
  }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    EMU_CHECK(emuSetDevice(checked(device)));
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return current_device();
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex previous = current_device();
    EMU_CHECK(emuSetDevice(checked(device)));
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
  bool isPinnedPtr(const void* data) const override {
    return is_pinned_host(data);
  }
  at::Allocator* getPinnedMemoryAllocator() const override {
    return pinned_host_allocator();
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return new_generator(device);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    emuPointerAttributes attrs{};
    EMU_CHECK(emuPointerGetAttributes(&attrs, data));
    TORCH_CHECK(attrs.type == emuMemoryTypeDevice, "pointer ", data, " is host memory, not emu device memory");
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(attrs.device));
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), new_bytes);
  }
};

// Registered when the extension loads, before any emu tensor can exist.
const bool hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new EmuHooks());
  return true;
}();

} // namespace
} // namespace torch_emu
