// Events (API 2.x): markers recorded in a stream's order, with completion and timing.
#include "internal.h"

#if EMU_DRIVER_HAS_EVENTS

#include <chrono>
#include <unordered_map>

namespace emu {
namespace {

struct Event {
  unsigned flags = 0;
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0; // generation of the latest record
  uint64_t completed = 0; // generation the stream has reached
  std::chrono::steady_clock::time_point when;
};

std::mutex g_events_mu;
std::unordered_map<emuEvent_t, std::shared_ptr<Event>>& live_events() {
  static auto* events = new std::unordered_map<emuEvent_t, std::shared_ptr<Event>>();
  return *events;
}

std::shared_ptr<Event> find_event(emuEvent_t handle, emuError_t* error) {
  std::lock_guard<std::mutex> lock(g_events_mu);
  auto it = live_events().find(handle);
  if (it == live_events().end()) {
    *error = fail(emuErrorInvalidResourceHandle, "unknown or destroyed event");
    return nullptr;
  }
  return it->second;
}

} // namespace
} // namespace emu

using emu::fail;

extern "C" {

emuError_t emuEventCreateWithFlags(emuEvent_t* event, unsigned int flags) {
  if (event == nullptr)
    return fail(emuErrorInvalidValue, "event is null");
  if ((flags & ~unsigned(emuEventDisableTiming)) != 0)
    return fail(emuErrorInvalidValue, "unknown event flags " + std::to_string(flags));
  auto e = std::make_shared<emu::Event>();
  e->flags = flags;
  auto handle = reinterpret_cast<emuEvent_t>(e.get());
  std::lock_guard<std::mutex> lock(emu::g_events_mu);
  emu::live_events()[handle] = e;
  *event = handle;
  return emuSuccess;
}

emuError_t emuEventDestroy(emuEvent_t event) {
  std::lock_guard<std::mutex> lock(emu::g_events_mu);
  // Queued records and waits keep their own reference; the handle dies now.
  if (emu::live_events().erase(event) == 0)
    return fail(emuErrorInvalidResourceHandle, "unknown or destroyed event");
  return emuSuccess;
}

emuError_t emuEventRecord(emuEvent_t event, emuStream_t stream) {
  EMU_RUNTIME(rt);
  emuError_t err = emuSuccess;
  auto e = emu::find_event(event, &err);
  if (!e)
    return err;
  emu::Stream* s = emu::resolve_stream(rt, stream, &err);
  if (s == nullptr)
    return err;
  // The generation is taken when the record is queued: at the call, or at each launch of a graph recording it.
  auto make = [e] {
    uint64_t generation;
    {
      std::lock_guard<std::mutex> lock(e->mu);
      generation = ++e->recorded;
    }
    return emu::Task{
        [e] {
          std::lock_guard<std::mutex> lock(e->mu);
          e->when = std::chrono::steady_clock::now();
          return 0;
        },
        [e, generation] {
          {
            std::lock_guard<std::mutex> lock(e->mu);
            if (e->completed < generation)
              e->completed = generation;
          }
          e->cv.notify_all();
        },
        0};
  };
#if EMU_DRIVER_HAS_GRAPHS
  return emu::submit_node(s, make);
#else
  emu::Task task = make();
  return emu::submit(s, std::move(task.run), std::move(task.after));
#endif
}

emuError_t emuEventQuery(emuEvent_t event) {
  emuError_t err = emuSuccess;
  auto e = emu::find_event(event, &err);
  if (!e)
    return err;
  std::lock_guard<std::mutex> lock(e->mu);
  return e->completed >= e->recorded ? emuSuccess : fail(emuErrorNotReady, "the event's work is still pending");
}

emuError_t emuEventSynchronize(emuEvent_t event) {
  emuError_t err = emuSuccess;
  auto e = emu::find_event(event, &err);
  if (!e)
    return err;
  std::unique_lock<std::mutex> lock(e->mu);
  const uint64_t target = e->recorded;
  e->cv.wait(lock, [&] { return e->completed >= target; });
  return emuSuccess;
}

emuError_t emuStreamWaitEvent(emuStream_t stream, emuEvent_t event) {
  EMU_RUNTIME(rt);
  emuError_t err = emuSuccess;
  auto e = emu::find_event(event, &err);
  if (!e)
    return err;
  emu::Stream* s = emu::resolve_stream(rt, stream, &err);
  if (s == nullptr)
    return err;
  // The record to wait for is the event's latest when the wait is queued (at the call, or at each launch of a
  // graph recording the wait); never recorded: nothing to wait for, as in CUDA.
  auto make = [e] {
    uint64_t target;
    {
      std::lock_guard<std::mutex> lock(e->mu);
      target = e->recorded;
    }
    return emu::Task{
        [e, target] {
          std::unique_lock<std::mutex> lock(e->mu);
          e->cv.wait(lock, [&] { return e->completed >= target; });
          return 0;
        },
        {},
        0};
  };
#if EMU_DRIVER_HAS_GRAPHS
  return emu::submit_node(s, make);
#else
  return emu::submit(s, make().run);
#endif
}

emuError_t emuEventElapsedTime(float* ms, emuEvent_t start, emuEvent_t end) {
  if (ms == nullptr)
    return fail(emuErrorInvalidValue, "ms is null");
  emuError_t err = emuSuccess;
  auto a = emu::find_event(start, &err);
  if (!a)
    return err;
  auto b = emu::find_event(end, &err);
  if (!b)
    return err;
  if ((a->flags | b->flags) & emuEventDisableTiming)
    return fail(emuErrorInvalidResourceHandle, "elapsed time needs two events created with timing enabled");
  std::chrono::steady_clock::time_point ta, tb;
  {
    std::lock_guard<std::mutex> lock(a->mu);
    if (a->recorded == 0)
      return fail(emuErrorInvalidResourceHandle, "the start event was never recorded");
    if (a->completed < a->recorded)
      return fail(emuErrorNotReady, "the start event has not completed");
    ta = a->when;
  }
  {
    std::lock_guard<std::mutex> lock(b->mu);
    if (b->recorded == 0)
      return fail(emuErrorInvalidResourceHandle, "the end event was never recorded");
    if (b->completed < b->recorded)
      return fail(emuErrorNotReady, "the end event has not completed");
    tb = b->when;
  }
  *ms = std::chrono::duration<float, std::milli>(tb - ta).count();
  return emuSuccess;
}

} // extern "C"

#endif // EMU_DRIVER_HAS_EVENTS
