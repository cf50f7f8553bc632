// Events over the driver's event API (2.x) or as markers on the synchronous 1.x driver.
#include "runtime/EmuEvent.h"

#include "runtime/EmuException.h"
#include "runtime/EmuStream.h"

namespace torch_emu {

#if EMU_DRIVER_HAS_EVENTS

void event_record(void** event, const c10::Stream& stream, bool timing) {
  DeviceSwitch on(stream.device_index());
  if (*event == nullptr) {
    emuEvent_t created = nullptr;
    EMU_CHECK(emuEventCreateWithFlags(&created, timing ? emuEventDefault : emuEventDisableTiming));
    *event = created;
  }
  EMU_CHECK(emuEventRecord(static_cast<emuEvent_t>(*event), raw_stream(stream)));
}

void event_block(void* event, const c10::Stream& stream) {
  if (event == nullptr)
    return; // never recorded: nothing to wait for
  DeviceSwitch on(stream.device_index());
  EMU_CHECK(emuStreamWaitEvent(raw_stream(stream), static_cast<emuEvent_t>(event)));
}

bool event_query(void* event) {
  if (event == nullptr)
    return true;
  const emuError_t err = emuEventQuery(static_cast<emuEvent_t>(event));
  if (err == emuErrorNotReady)
    return false;
  EMU_CHECK(err);
  return true;
}

void event_synchronize(void* event) {
  if (event != nullptr)
    EMU_CHECK(emuEventSynchronize(static_cast<emuEvent_t>(event)));
}

double event_elapsed_ms(void* start, void* end) {
  TORCH_CHECK(start != nullptr && end != nullptr, "both events must be recorded before asking for the elapsed time");
  float ms = 0;
  EMU_CHECK(emuEventElapsedTime(&ms, static_cast<emuEvent_t>(start), static_cast<emuEvent_t>(end)));
  return static_cast<double>(ms);
}

void event_destroy(void* event) noexcept {
  if (event != nullptr)
    (void)emuEventDestroy(static_cast<emuEvent_t>(event));
}

#else // API 1.x: no events in the driver

namespace {
struct SyncEventMarker {};
} // namespace

void event_record(void** event, const c10::Stream& /*stream*/, bool /*timing*/) {
  if (*event == nullptr)
    *event = new SyncEventMarker();
}
void event_block(void* /*event*/, const c10::Stream& /*stream*/) {}
bool event_query(void* /*event*/) {
  return true;
}
void event_synchronize(void* /*event*/) {}
double event_elapsed_ms(void* /*start*/, void* /*end*/) {
  TORCH_CHECK(
      false,
      "emu event timing needs driver API 2.x; this torch_emu was built against driver API ",
      EMU_DRIVER_VERSION_MAJOR,
      ".",
      EMU_DRIVER_VERSION_MINOR,
      " (synchronous streams, no events)");
}
void event_destroy(void* event) noexcept {
  delete static_cast<SyncEventMarker*>(event);
}

#endif

} // namespace torch_emu
