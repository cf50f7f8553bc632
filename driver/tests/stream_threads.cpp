// The driver's streams and events under concurrent host threads, with no Python: built with ThreadSanitizer by
// `nox -s sanitize` (driver/tests/sanitize.py), it makes TSan check the worker thread each stream runs, the queues
// the host threads fill, event records and waits across streams and threads, and the host reading results that a
// worker wrote once an event or a synchronize says the work is done. Exits 0 when every result is right.
#include <emu_driver.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int kThreads = 4;
constexpr int kRounds = 50;
constexpr size_t kBytes = 4096;

std::atomic<int> failures{0};

void check(emuError_t error, const char* what, int line) {
  if (error != emuSuccess) {
    std::fprintf(stderr, "line %d: %s: %s (%s)\n", line, what, emuGetErrorName(error), emuGetLastErrorMessage());
    failures.fetch_add(1);
  }
}
#define CHECK(call) check((call), #call, __LINE__)

struct AddOne {
  void* device;
  size_t bytes;
};

// Runs on the stream's worker thread: adds 1 to every byte of the buffer, through the kernel's view of it.
int add_one(void* raw) {
  auto* args = static_cast<AddOne*>(raw);
  void* view = nullptr;
  const emuError_t error = emuKernelTranslate(args->device, args->bytes, &view);
  if (error == emuSuccess) {
    auto* bytes = static_cast<unsigned char*>(view);
    for (size_t i = 0; i < args->bytes; ++i) {
      bytes[i] = static_cast<unsigned char>(bytes[i] + 1);
    }
  }
  delete args;
  return error == emuSuccess ? 0 : 1;
}

// One host thread: its own stream, a buffer it fills and increments on that stream, results copied back through
// pinned memory and checked once an event has completed; every other round it hands the buffer to a second stream
// that waits on its event, as torch's record_stream/wait_stream do.
void worker(int index, int devices) {
  CHECK(emuSetDevice(index % devices));
  emuStream_t stream = nullptr;
  emuStream_t other = nullptr;
  CHECK(emuStreamCreate(&stream));
  CHECK(emuStreamCreate(&other));
  emuEvent_t done = nullptr;
  emuEvent_t start = nullptr;
  CHECK(emuEventCreateWithFlags(&done, emuEventDefault));
  CHECK(emuEventCreateWithFlags(&start, emuEventDefault));
  void* device = nullptr;
  void* pinned = nullptr;
  CHECK(emuMalloc(&device, kBytes));
  CHECK(emuHostAlloc(&pinned, kBytes, emuHostAllocDefault));
  std::vector<unsigned char> pageable(kBytes);
  for (int round = 0; round < kRounds; ++round) {
    const int value = (index * 7 + round) % 200;
    CHECK(emuEventRecord(start, stream));
    CHECK(emuMemsetAsync(device, value, kBytes, stream));
    CHECK(emuLaunchKernel(add_one, new AddOne{device, kBytes}, stream));
    CHECK(emuEventRecord(done, stream));
    emuStream_t reader = stream;
    if (round % 2 == 1) { // the copy back runs on the other stream, after the event
      CHECK(emuStreamWaitEvent(other, done));
      CHECK(emuLaunchKernel(add_one, new AddOne{device, kBytes}, other));
      reader = other;
    }
    CHECK(emuMemcpyAsync(pinned, device, kBytes, emuMemcpyDeviceToHost, reader));
    CHECK(emuEventRecord(done, reader));
    while (emuEventQuery(done) == emuErrorNotReady) {
      std::this_thread::yield();
    }
    CHECK(emuEventSynchronize(done));
    const unsigned char expected = static_cast<unsigned char>(value + (round % 2 == 1 ? 2 : 1));
    const auto* host = static_cast<const unsigned char*>(pinned);
    for (size_t i = 0; i < kBytes; ++i) {
      if (host[i] != expected) {
        std::fprintf(stderr, "thread %d round %d: byte %zu is %d, expected %d\n", index, round, i, host[i], expected);
        failures.fetch_add(1);
        break;
      }
    }
    float ms = -1;
    CHECK(emuEventElapsedTime(&ms, start, done));
    // A pageable destination: the call returns once the copy is done.
    CHECK(emuMemcpyAsync(pageable.data(), device, kBytes, emuMemcpyDeviceToHost, stream));
    if (std::memcmp(pageable.data(), host, kBytes) != 0 && round % 2 == 0) {
      std::fprintf(stderr, "thread %d round %d: pageable copy differs\n", index, round);
      failures.fetch_add(1);
    }
  }
  CHECK(emuStreamSynchronize(other));
  CHECK(emuStreamQuery(stream));
  CHECK(emuFreeHost(pinned));
  CHECK(emuFree(device));
  CHECK(emuEventDestroy(done));
  CHECK(emuEventDestroy(start));
  CHECK(emuStreamDestroy(other));
  CHECK(emuStreamDestroy(stream));
}

#if EMU_DRIVER_HAS_GRAPHS
void release_add_one(void* raw) {
  delete static_cast<AddOne*>(raw);
}

int add_one_retained(void* raw) {
  auto* args = static_cast<AddOne*>(raw);
  void* view = nullptr;
  const emuError_t error = emuKernelTranslate(args->device, args->bytes, &view);
  if (error != emuSuccess)
    return 1;
  auto* bytes = static_cast<unsigned char*>(view);
  for (size_t i = 0; i < args->bytes; ++i) {
    bytes[i] = static_cast<unsigned char>(bytes[i] + 1);
  }
  return 0;
}

// One captured graph per thread: a memset and two retained kernels on the thread's buffer, captured on the main
// thread, then replayed by its thread on its own stream while the other threads replay theirs; each replay's
// result is read back through pinned memory once an event says it is done.
struct Replay {
  emuStream_t stream = nullptr;
  emuGraphExec_t exec = nullptr;
  void* device = nullptr;
  int value = 0;
};

void replay_worker(int index, Replay* r) {
  void* pinned = nullptr;
  emuEvent_t done = nullptr;
  CHECK(emuHostAlloc(&pinned, kBytes, emuHostAllocDefault));
  CHECK(emuEventCreateWithFlags(&done, emuEventDisableTiming));
  for (int round = 0; round < kRounds; ++round) {
    CHECK(emuGraphLaunch(r->exec, r->stream));
    CHECK(emuMemcpyAsync(pinned, r->device, kBytes, emuMemcpyDeviceToHost, r->stream));
    CHECK(emuEventRecord(done, r->stream));
    CHECK(emuEventSynchronize(done));
    const auto* host = static_cast<const unsigned char*>(pinned);
    if (host[0] != r->value + 2 || host[kBytes - 1] != r->value + 2) {
      std::fprintf(stderr, "replay thread %d round %d: byte is %d, expected %d\n", index, round, host[0], r->value + 2);
      failures.fetch_add(1);
    }
  }
  CHECK(emuGraphExecDestroy(r->exec)); // concurrently with other threads' launches and destroys
  CHECK(emuEventDestroy(done));
  CHECK(emuFreeHost(pinned));
}

void replay_graphs() {
  std::vector<Replay> replays(kThreads);
  for (int i = 0; i < kThreads; ++i) {
    Replay& r = replays[size_t(i)];
    r.value = 10 * i;
    CHECK(emuMalloc(&r.device, kBytes));
    CHECK(emuStreamCreate(&r.stream));
    CHECK(emuStreamBeginCapture(r.stream));
    CHECK(emuMemsetAsync(r.device, r.value, kBytes, r.stream));
    CHECK(emuLaunchKernelRetained(add_one_retained, new AddOne{r.device, kBytes}, release_add_one, r.stream));
    CHECK(emuLaunchKernelRetained(add_one_retained, new AddOne{r.device, kBytes}, release_add_one, r.stream));
    emuGraph_t graph = nullptr;
    CHECK(emuStreamEndCapture(r.stream, &graph));
    CHECK(emuGraphInstantiate(&r.exec, graph));
    CHECK(emuGraphDestroy(graph));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back(replay_worker, i, &replays[size_t(i)]);
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  for (Replay& r : replays) {
    CHECK(emuStreamDestroy(r.stream));
    CHECK(emuFree(r.device));
  }
}
#endif

} // namespace

int main() {
  int devices = 0;
  CHECK(emuGetDeviceCount(&devices));
  if (devices < 1) {
    std::fprintf(stderr, "no emu device\n");
    return 1;
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back(worker, i, devices);
  }
  // Meanwhile the main thread synchronizes whole devices, as torch.emu.synchronize() does from another thread.
  for (int i = 0; i < 20; ++i) {
    CHECK(emuSetDevice(i % devices));
    CHECK(emuDeviceSynchronize());
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
#if EMU_DRIVER_HAS_GRAPHS
  CHECK(emuSetDevice(0));
  replay_graphs();
#endif
  if (failures.load() != 0) {
    std::fprintf(stderr, "%d failure(s)\n", failures.load());
    return 1;
  }
  std::printf("%d threads x %d rounds on %d device(s): every result right\n", kThreads, kRounds, devices);
  return 0;
}
