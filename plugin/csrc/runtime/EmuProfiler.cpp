// The profiler's view of emu (torch.autograd.profiler.profile(use_device="emu")): without
// these stubs the profiler fails every op with "PrivateUse1 used in profiler but not enabled"
// and reports garbage (negative) durations. Device time of an op is measured between two
// events on the op's stream: driver timing events on API 2.x; on API 1.x all work is done
// when its call returns, so the host clock is the device clock.
#include <emu_driver.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <chrono>
#include <memory>

#include "runtime/EmuEvent.h"
#include "runtime/EmuException.h"
#include "runtime/EmuFork.h"
#include "runtime/EmuStream.h"

namespace torch_emu {
namespace {

using torch::profiler::impl::ProfilerVoidEventStub;

// ProfilerStubs::record's device out-parameter is int* in torch 2.1 and c10::DeviceIndex* later:
// read its type from the release's own declaration instead of naming one.
template <class Method>
struct FirstParameter;
template <class R, class C, class A, class... Rest>
struct FirstParameter<R (C::*)(A, Rest...) const> {
  using type = A;
};
using RecordDevicePtr = FirstParameter<decltype(&torch::profiler::impl::ProfilerStubs::record)>::type;

struct Marker {
  void* event = nullptr; // a driver timing event (API 2.x)
  std::chrono::steady_clock::time_point when{}; // the host clock (API 1.x)
};

void destroy_marker(Marker* m) {
  event_destroy(m->event);
  delete m;
}

struct EmuProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(RecordDevicePtr device, ProfilerVoidEventStub* event, int64_t* cpu_ns) const override {
    const c10::DeviceIndex index = current_device();
    if (device != nullptr)
      *device = index;
    auto* marker = new Marker();
#if EMU_DRIVER_HAS_EVENTS
    if (!in_bad_fork())
      event_record(&marker->event, getCurrentEmuStream(index), /*timing=*/true);
#endif
    marker->when = std::chrono::steady_clock::now();
    if (cpu_ns != nullptr) // the wall clock in nanoseconds, as c10::getTime() (not in every release's headers)
      *cpu_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count();
    *event = std::shared_ptr<Marker>(marker, destroy_marker);
  }

  float elapsed(const ProfilerVoidEventStub* start, const ProfilerVoidEventStub* end) const override {
    const auto* a = static_cast<const Marker*>(start->get());
    const auto* b = static_cast<const Marker*>(end->get());
    if (a->event != nullptr && b->event != nullptr) {
      event_synchronize(b->event);
      const double ms = event_elapsed_ms(a->event, b->event);
      return static_cast<float>(ms > 0 ? ms * 1000.0 : 0.0); // microseconds, as the profiler expects
    }
    const double us = std::chrono::duration<double, std::micro>(b->when - a->when).count();
    return static_cast<float>(us > 0 ? us : 0.0);
  }

  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override {
    return true;
  }

  void onEachDevice(std::function<void(int)> op) const override {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      DeviceSwitch on(i);
      op(i);
    }
  }

  void synchronize() const override {
    check_not_forked();
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      DeviceSwitch on(i);
      EMU_CHECK(emuDeviceSynchronize());
    }
  }
};

struct Registration {
  Registration() {
    static EmuProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
};
const Registration registration;

} // namespace
} // namespace torch_emu
