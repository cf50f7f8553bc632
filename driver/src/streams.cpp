// Streams and kernels. API 1.x runs work at once on the caller's thread; API 2.x gives every
// stream its own worker thread that runs queued work in order, asynchronously to the caller.
#include <chrono>
#include <cstring>
#include <string>
#include <unordered_set>

#include "internal.h"

namespace emu {

namespace {

std::mutex g_streams_mu;
std::unordered_set<Stream*>& live_streams() {
  static auto* streams = new std::unordered_set<Stream*>(); // process lifetime, like the runtime
  return *streams;
}

// Runs one task as a kernel and records a failure as the stream's sticky error.
void run_task(Stream* s, const std::function<int()>& task) {
  const bool outer = in_kernel(); // 1.x runs kernels on the caller: a kernel may launch another
  in_kernel() = true;
  kernel_message().clear();
  int status = task();
  in_kernel() = outer;
  if (status != 0) {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->sticky == emuSuccess) {
      s->sticky = emuErrorLaunchFailure;
      s->sticky_message = kernel_message().empty() ? "kernel returned " + std::to_string(status) : kernel_message();
    }
  }
}

#if EMU_DRIVER_HAS_ASYNC
// A created stream orders after its device's default stream, as CUDA's blocking streams after the legacy
// default stream: without it, work queued on the default stream (a tensor's creation) and then read on
// another stream (which waited on an event of a third) could be read before it was written.
void wait_for_default_stream(Stream* s, uint64_t target) {
  Stream* d = s->device->default_stream;
  if (target == 0 || d == nullptr || d == s || d->completed.load(std::memory_order_acquire) >= target)
    return;
  std::unique_lock<std::mutex> lock(d->mu);
  d->idle_cv.wait(lock, [d, target] { return d->completed.load(std::memory_order_acquire) >= target; });
}

void worker_loop(Stream* s) {
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(s->mu);
      if (s->queue.empty()) {
        // Spin briefly before sleeping: a producer issuing many small kernels keeps the
        // worker busy without paying a futex wake-up per kernel.
        lock.unlock();
        for (int spin = 0; spin < 2000; ++spin) {
          if (s->completed.load(std::memory_order_acquire) != s->enqueued.load(std::memory_order_acquire))
            break;
          std::this_thread::yield();
        }
        lock.lock();
        s->work_cv.wait(lock, [s] { return s->stopping || !s->queue.empty(); });
      }
      if (s->queue.empty() && s->stopping)
        return;
      task = std::move(s->queue.front());
      s->queue.pop_front();
    }
    wait_for_default_stream(s, task.after_default);
    run_task(s, task.run);
    // What the work holds (a retained kernel's arguments, released once no graph can run it again) goes before the
    // task counts as done, so a synchronize that returns has seen it released.
    task.run = nullptr;
    s->completed.fetch_add(1, std::memory_order_release);
    if (task.after)
      task.after();
    { std::lock_guard<std::mutex> lock(s->mu); }
    s->idle_cv.notify_all();
  }
}
#endif

#if EMU_DRIVER_HAS_HOST_ALLOC
// Queues a checked copy with CUDA's host-memory rules (API 2.2). host_src and host_dst are the
// host ends of the copy (null for a device end): a pinned end is used in place when the stream
// reaches the copy, and counted so emuFreeHost waits for it; a pageable source is staged now; a
// pageable destination makes the caller wait for the copy.
emuError_t copy_async(Stream* s, char* to, char* from, size_t count, const void* host_src, const void* host_dst) {
  void* pinned_src = host_src == nullptr ? nullptr : pinned_use_begin(host_src, count);
  void* pinned_dst = host_dst == nullptr ? nullptr : pinned_use_begin(host_dst, count);
  std::shared_ptr<char[]> staged;
  if (host_src != nullptr && pinned_src == nullptr) {
    staged.reset(new char[count]);
    std::memcpy(staged.get(), from, count);
    from = staged.get();
  }
  emuError_t err = submit(
      s,
      [to, from, count, staged] {
        std::memmove(to, from, count);
        return 0;
      },
      [pinned_src, pinned_dst] {
        if (pinned_src != nullptr)
          pinned_use_done(pinned_src);
        if (pinned_dst != nullptr)
          pinned_use_done(pinned_dst);
      });
  if (err != emuSuccess) { // refused (a capturing stream): nothing was queued
    if (pinned_src != nullptr)
      pinned_use_done(pinned_src);
    if (pinned_dst != nullptr)
      pinned_use_done(pinned_dst);
    return err;
  }
  if (host_dst != nullptr && pinned_dst == nullptr)
    return synchronize_stream(s);
  return emuSuccess;
}
#endif

emuError_t take_sticky(Stream* s) {
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->sticky == emuSuccess)
    return emuSuccess;
  emuError_t err = s->sticky;
  std::string message = s->sticky_message;
  s->sticky = emuSuccess;
  s->sticky_message.clear();
  return fail(err, "a kernel on stream of device " + std::to_string(s->device->index) + " failed: " + message);
}

} // namespace

bool& in_kernel() {
  thread_local bool flag = false;
  return flag;
}

std::string& kernel_message() {
  thread_local std::string message;
  return message;
}

Stream* create_stream(Device* d, bool is_default) {
  auto* s = new Stream();
  s->device = d;
  s->is_default = is_default;
  if (!is_default) {
    std::lock_guard<std::mutex> lock(d->mu);
    s->number = d->next_stream_number++;
  }
#if EMU_DRIVER_HAS_ASYNC
  s->worker = std::thread(worker_loop, s);
#endif
  {
    std::lock_guard<std::mutex> lock(d->mu);
    d->streams.push_back(s);
  }
  std::lock_guard<std::mutex> lock(g_streams_mu);
  live_streams().insert(s);
  return s;
}

void destroy_stream(Stream* s) {
  {
    std::lock_guard<std::mutex> lock(g_streams_mu);
    live_streams().erase(s);
  }
  {
    std::lock_guard<std::mutex> lock(s->device->mu);
    auto& v = s->device->streams;
    for (auto it = v.begin(); it != v.end(); ++it)
      if (*it == s) {
        v.erase(it);
        break;
      }
  }
#if EMU_DRIVER_HAS_ASYNC
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->stopping = true;
  }
  s->work_cv.notify_all();
  s->worker.join();
#endif
  delete s;
}

Stream* resolve_stream(Runtime* rt, emuStream_t handle, emuError_t* error) {
  if (handle == nullptr)
    return rt->devices[size_t(current_device_index())]->default_stream;
  auto* s = reinterpret_cast<Stream*>(handle);
  std::lock_guard<std::mutex> lock(g_streams_mu);
  if (live_streams().count(s) == 0) {
    *error = fail(emuErrorInvalidResourceHandle, "unknown or destroyed stream");
    return nullptr;
  }
  return s;
}

namespace {

// Queues (2.x) or runs at once (1.x) a task, whatever the stream's capture state.
emuError_t enqueue(Stream* s, Task task) {
#if EMU_DRIVER_HAS_TRACING
  trace_task(s, task);
#endif
#if EMU_DRIVER_HAS_ASYNC
  Stream* d = s->device->default_stream;
  // The default stream's tasks queued so far: this one starts after them (0 when already done).
  if (d != nullptr && d != s) {
    task.after_default = d->enqueued.load(std::memory_order_acquire);
    if (d->completed.load(std::memory_order_acquire) >= task.after_default)
      task.after_default = 0;
  }
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->queue.push_back(std::move(task));
    s->enqueued.fetch_add(1, std::memory_order_release);
  }
  s->work_cv.notify_one();
#else
  run_task(s, task.run);
  if (task.after)
    task.after();
#endif
  return emuSuccess;
}

} // namespace

emuError_t submit(Stream* s, std::function<int()> run, std::function<void()> after) {
#if EMU_DRIVER_HAS_GRAPHS
  if (s->capturing.load(std::memory_order_acquire)) {
    emuError_t err = refuse_while_capturing(
        s,
        "work that cannot be replayed (a kernel that frees its arguments, a "
        "copy from or to host memory, a collective)");
    if (err != emuSuccess)
      return err;
  }
#endif
  return enqueue(s, Task{std::move(run), std::move(after), 0});
}

#if EMU_DRIVER_HAS_GRAPHS
emuError_t submit_node(Stream* s, GraphNode node) {
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->capture) {
      if (!s->capture->invalidated.empty())
        return fail(
            emuErrorStreamCaptureInvalidated,
            "the stream's capture was invalidated by " + s->capture->invalidated + "; end it with emuStreamEndCapture");
#if EMU_DRIVER_HAS_TRACING
      node = traced_node(std::move(node));
#endif
      s->capture->nodes.push_back(std::move(node));
      return emuSuccess;
    }
  }
  return enqueue(s, node());
}

emuError_t refuse_while_capturing(Stream* s, const char* call) {
  std::lock_guard<std::mutex> lock(s->mu);
  if (!s->capture)
    return emuSuccess;
  if (s->capture->invalidated.empty())
    s->capture->invalidated = call;
  return fail(
      emuErrorStreamCaptureUnsupported,
      std::string(call) + " is not allowed while a stream of device " + std::to_string(s->device->index) +
          " captures: the capture is invalidated; end it with emuStreamEndCapture");
}

emuError_t refuse_while_device_captures(Device* d, const char* call) {
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(d->mu);
    streams = d->streams;
  }
  emuError_t first = emuSuccess;
  for (Stream* s : streams)
    if (s->capturing.load(std::memory_order_acquire)) {
      emuError_t err = refuse_while_capturing(s, call);
      if (first == emuSuccess)
        first = err;
    }
  return first;
}

void discard_capture(Stream* s) {
  std::lock_guard<std::mutex> lock(s->mu);
  s->capture.reset();
  s->capturing.store(false, std::memory_order_release);
}
#endif

emuError_t synchronize_stream(Stream* s) {
#if EMU_DRIVER_HAS_ASYNC
  std::unique_lock<std::mutex> lock(s->mu);
  const uint64_t target = s->enqueued.load();
  s->idle_cv.wait(lock, [s, target] { return s->completed.load(std::memory_order_acquire) >= target; });
  lock.unlock();
#endif
  return take_sticky(s);
}

emuError_t synchronize_device(Device* d) {
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(d->mu);
    streams = d->streams;
  }
  emuError_t first = emuSuccess;
  for (Stream* s : streams) {
    emuError_t err = synchronize_stream(s);
    if (first == emuSuccess)
      first = err;
  }
  return first;
}

} // namespace emu

using emu::fail;

extern "C" {

emuError_t emuStreamCreate(emuStream_t* stream) {
  if (stream == nullptr)
    return fail(emuErrorInvalidValue, "stream is null");
  EMU_RUNTIME(rt);
  *stream =
      reinterpret_cast<emuStream_t>(emu::create_stream(rt->devices[size_t(emu::current_device_index())].get(), false));
  return emuSuccess;
}

emuError_t emuStreamDestroy(emuStream_t stream) {
  EMU_RUNTIME(rt);
  if (stream == nullptr)
    return fail(emuErrorInvalidResourceHandle, "the default stream cannot be destroyed");
  emuError_t err = emuSuccess;
  emu::Stream* s = emu::resolve_stream(rt, stream, &err);
  if (s == nullptr)
    return err;
  if (s->is_default)
    return fail(emuErrorInvalidResourceHandle, "the default stream cannot be destroyed");
#if EMU_DRIVER_HAS_GRAPHS
  emu::discard_capture(s); // as CUDA: destroying a capturing stream ends its capture
#endif
  emu::synchronize_stream(s); // a pending failure dies with the stream, as in CUDA
  emu::destroy_stream(s);
  return emuSuccess;
}

emuError_t emuStreamSynchronize(emuStream_t stream) {
  EMU_RUNTIME(rt);
  emuError_t err = emuSuccess;
  emu::Stream* s = emu::resolve_stream(rt, stream, &err);
  if (s == nullptr)
    return err;
#if EMU_DRIVER_HAS_GRAPHS
  if ((err = emu::refuse_while_capturing(s, "emuStreamSynchronize")))
    return err;
#endif
  return emu::synchronize_stream(s);
}

emuError_t emuStreamQuery(emuStream_t stream) {
  EMU_RUNTIME(rt);
  emuError_t err = emuSuccess;
  emu::Stream* s = emu::resolve_stream(rt, stream, &err);
  if (s == nullptr)
    return err;
#if EMU_DRIVER_HAS_GRAPHS
  if ((err = emu::refuse_while_capturing(s, "emuStreamQuery")))
    return err;
#endif
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->completed.load(std::memory_order_acquire) < s->enqueued)
      return fail(emuErrorNotReady, "work is still queued on the stream");
  }
  return emu::synchronize_stream(s); // reports (and clears) a failed kernel
}

emuError_t emuStreamGetDevice(emuStream_t stream, int* device) {
  if (device == nullptr)
    return fail(emuErrorInvalidValue, "device is null");
  EMU_RUNTIME(rt);
  emuError_t err = emuSuccess;
  emu::Stream* s = emu::resolve_stream(rt, stream, &err);
  if (s == nullptr)
    return err;
  *device = s->device->index;
  return emuSuccess;
}

emuError_t emuLaunchKernel(emuKernelFn fn, void* args, emuStream_t stream) {
  if (fn == nullptr)
    return fail(emuErrorInvalidValue, "kernel function is null");
  EMU_RUNTIME(rt);
  emuError_t err = emuSuccess;
  emu::Stream* s = emu::resolve_stream(rt, stream, &err);
  if (s == nullptr)
    return err;
#if EMU_DRIVER_HAS_TRACING
  emu::TracedAs traced(emuActivityKernel, nullptr);
#endif
  return emu::submit(s, [fn, args] { return fn(args); });
}

emuError_t emuKernelTranslate(const void* devPtr, size_t bytes, void** kernelPtr) {
  if (kernelPtr == nullptr)
    return fail(emuErrorInvalidValue, "kernelPtr is null");
  if (!emu::in_kernel())
    return fail(emuErrorNotPermitted, "emuKernelTranslate is only allowed inside a running kernel");
  EMU_RUNTIME(rt);
  char* host = nullptr;
  emuError_t err = emu::translate(rt, devPtr, bytes, "kernel pointer", &host, nullptr);
  if (err != emuSuccess)
    return err;
  *kernelPtr = host;
  return emuSuccess;
}

void emuKernelSetErrorMessage(const char* message) {
  if (emu::in_kernel())
    emu::kernel_message() = message == nullptr ? "" : message;
}

#if EMU_DRIVER_HAS_ASYNC
emuError_t emuMemcpyAsync(void* dst, const void* src, size_t count, emuMemcpyKind kind, emuStream_t stream) {
  EMU_RUNTIME(rt);
  emuError_t err = emuSuccess;
  emu::Stream* s = emu::resolve_stream(rt, stream, &err);
  if (s == nullptr)
    return err;
  if (count == 0)
    return emuSuccess;
  // Ranges are checked now, so the caller gets the error; the copy runs in stream order.
  char* to = static_cast<char*>(dst);
  char* from = const_cast<char*>(static_cast<const char*>(src));
  const bool dst_device = kind == emuMemcpyHostToDevice || kind == emuMemcpyDeviceToDevice;
  const bool src_device = kind == emuMemcpyDeviceToHost || kind == emuMemcpyDeviceToDevice;
  if (kind < emuMemcpyHostToHost || kind > emuMemcpyDeviceToDevice)
    return fail(emuErrorInvalidValue, "unknown emuMemcpyKind " + std::to_string(int(kind)));
#if EMU_DRIVER_HAS_TRACING
  static const char* const copy_names[] = {"Memcpy HtoH", "Memcpy HtoD", "Memcpy DtoH", "Memcpy DtoD"};
  emu::TracedAs traced(emuActivityMemcpy, copy_names[int(kind) - int(emuMemcpyHostToHost)]);
#endif
  if (dst_device) {
    if ((err = emu::translate(rt, dst, count, "dst", &to, nullptr)))
      return err;
  } else if (dst == nullptr || emu::device_of(rt, dst) != nullptr) {
    return fail(emuErrorInvalidValue, "dst must be host memory for this copy kind");
  }
  if (src_device) {
    if ((err = emu::translate(rt, src, count, "src", &from, nullptr)))
      return err;
  } else if (src == nullptr || emu::device_of(rt, src) != nullptr) {
    return fail(emuErrorInvalidValue, "src must be host memory for this copy kind");
  }
#if EMU_DRIVER_HAS_GRAPHS
  if (src_device && dst_device) // a copy within device memory can be replayed
    return emu::submit_node(s, [to, from, count] {
      return emu::Task{
          [to, from, count] {
            std::memmove(to, from, count);
            return 0;
          },
          {},
          0};
    });
#endif
#if EMU_DRIVER_HAS_HOST_ALLOC
  return emu::copy_async(s, to, from, count, src_device ? nullptr : src, dst_device ? nullptr : dst);
#else
  return emu::submit(s, [to, from, count] {
    std::memmove(to, from, count);
    return 0;
  });
#endif
}

emuError_t emuMemsetAsync(void* devPtr, int value, size_t count, emuStream_t stream) {
  EMU_RUNTIME(rt);
  emuError_t err = emuSuccess;
  emu::Stream* s = emu::resolve_stream(rt, stream, &err);
  if (s == nullptr)
    return err;
  if (count == 0)
    return emuSuccess;
  char* host = nullptr;
  if ((err = emu::translate(rt, devPtr, count, "devPtr", &host, nullptr)))
    return err;
  auto run = [host, value, count] {
    std::memset(host, value, count);
    return 0;
  };
#if EMU_DRIVER_HAS_TRACING
  emu::TracedAs traced(emuActivityMemset, "Memset");
#endif
#if EMU_DRIVER_HAS_GRAPHS
  return emu::submit_node(s, [run] { return emu::Task{run, {}, 0}; });
#else
  return emu::submit(s, run);
#endif
}
#endif

} // extern "C"
