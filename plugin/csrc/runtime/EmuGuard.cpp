// c10's device guard for emu: device switching, streams and events, used by DeviceGuard,
// StreamGuard, the autograd engine and torch.Stream / torch.Event.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "TorchCompat.h"
#include "runtime/EmuAllocator.h"
#include "runtime/EmuEvent.h"
#include "runtime/EmuException.h"
#include "runtime/EmuStream.h"

namespace torch_emu {

namespace {

#if EMU_HAS_DEVICE_CAPABILITY
// The dtypes an emu tensor can be created with and converted between (what the smoke test checks):
// emu memory is host memory that ATen's CPU kernels run on, so it is the CPU's set, less the
// quantized types (made by quantize_per_tensor and its kin, never by a conversion: EmuQuantized.cpp)
// and the bit and sub-byte placeholder types.
c10::DeviceCapability device_capability() {
  using c10::ScalarType;
  c10::DeviceCapability cap;
  cap.capability_data.capability_bits = 0;
  for (ScalarType t :
       {ScalarType::Byte,
        ScalarType::Char,
        ScalarType::Short,
        ScalarType::Int,
        ScalarType::Long,
        ScalarType::Half,
        ScalarType::Float,
        ScalarType::Double,
        ScalarType::ComplexHalf,
        ScalarType::ComplexFloat,
        ScalarType::ComplexDouble,
        ScalarType::Bool,
        ScalarType::BFloat16,
        ScalarType::Float8_e5m2,
        ScalarType::Float8_e4m3fn,
        ScalarType::Float8_e5m2fnuz,
        ScalarType::Float8_e4m3fnuz,
        ScalarType::Float8_e8m0fnu,
        ScalarType::UInt16,
        ScalarType::UInt32,
        ScalarType::UInt64}) {
    cap.capability_data.capability_bits |= uint64_t{1} << static_cast<int>(t);
  }
  return cap;
}
#endif

struct EmuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override {
    return kEmu;
  }

  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kEmu, "expected an emu device, got ", d);
    const c10::Device old = getDevice();
    if (old.index() != d.index())
      setDevice(d);
    return old;
  }

  c10::Device getDevice() const override {
    return c10::Device(kEmu, current_device());
  }

  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kEmu, "expected an emu device, got ", d);
    EMU_CHECK(emuSetDevice(checked_device_index(d.index())));
  }

  void uncheckedSetDevice(c10::Device d) const noexcept override {
    (void)emuSetDevice(d.index());
  }

  c10::Stream getStream(c10::Device d) const EMU_STREAM_NOEXCEPT override {
    return getCurrentEmuStream(d.index());
  }

  c10::Stream getDefaultStream(c10::Device d) const override {
    return getDefaultEmuStream(d.index());
  }

  c10::Stream getStreamFromGlobalPool(c10::Device d, bool isHighPriority = false) const override {
    return getStreamFromPool(d.index(), isHighPriority);
  }

  c10::Stream getNewStream(c10::Device d, int priority = 0) const override {
    return getStreamFromPool(d.index(), priority < 0);
  }

  c10::Stream exchangeStream(c10::Stream s) const EMU_STREAM_NOEXCEPT override {
    const c10::Stream old = getCurrentEmuStream(s.device_index());
    setCurrentEmuStream(s);
    return old;
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return device_count();
  }

#if EMU_HAS_DEVICE_CAPABILITY
  // torch.accelerator.get_device_capability: the dtypes an emu tensor can hold and convert between.
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    device_or_current(d.index()); // -1: the current device
    return device_capability();
  }
#endif

  bool queryStream(const c10::Stream& s) const override {
    DeviceSwitch on(s.device_index());
    const emuError_t err = emuStreamQuery(raw_stream(s));
    if (err == emuErrorNotReady)
      return false;
    EMU_CHECK(err);
    return true;
  }

  void synchronizeStream(const c10::Stream& s) const override {
    DeviceSwitch on(s.device_index());
    EMU_CHECK(emuStreamSynchronize(raw_stream(s)));
  }

  void synchronizeDevice(const c10::DeviceIndex device) const override {
    DeviceSwitch on(device);
    EMU_CHECK(emuDeviceSynchronize());
  }

  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& s) const override {
    record_stream(data_ptr, s);
  }

  // torch's convention (c10::Event, torch.Event): BACKEND_DEFAULT means timing on,
  // PYTORCH_DEFAULT means timing off (cheaper), as CUDA maps them.
  void record(void** event, const c10::Stream& s, const c10::DeviceIndex device, const c10::EventFlag flag)
      const override {
    TORCH_CHECK(
        device == -1 || device == s.device_index(),
        "event on emu:",
        int(device),
        " cannot be recorded on a stream of emu:",
        int(s.device_index()));
    event_record(event, s, flag == c10::EventFlag::BACKEND_DEFAULT);
  }
  void block(void* event, const c10::Stream& s) const override {
    event_block(event, s);
  }
  bool queryEvent(void* event) const override {
    return event_query(event);
  }
  void synchronizeEvent(void* event) const override {
    event_synchronize(event);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device*/) const override {
    return event_elapsed_ms(start, end);
  }
  void destroyEvent(void* event, const c10::DeviceIndex /*device*/) const noexcept override {
    event_destroy(event);
  }
};

} // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, EmuGuardImpl);

} // namespace torch_emu
