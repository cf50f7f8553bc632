// Runtime start-up (device count and memory from the environment), devices, and the
// fault handler that names a device pointer dereferenced by host code.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "internal.h"

namespace emu {

namespace {

constexpr size_t kMiB = size_t(1) << 20;
constexpr size_t kHugePage = 2 * kMiB;

void* align_up(void* p, size_t alignment) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<void*>((address + alignment - 1) & ~(uintptr_t(alignment) - 1));
}

Runtime* g_runtime = nullptr; // set once by start(); never freed (process lifetime)
emuError_t g_start_error = emuSuccess;
std::string g_start_message;
struct sigaction g_previous_segv;
struct sigaction g_previous_bus;

bool parse_int(const char* text, long lo, long hi, long* out) {
  if (text == nullptr || *text == '\0')
    return false;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

void write_hex(char* buf, size_t* n, uintptr_t v) {
  const char* digits = "0123456789abcdef";
  char tmp[2 * sizeof(uintptr_t)];
  int len = 0;
  do {
    tmp[len++] = digits[v & 0xf];
    v >>= 4;
  } while (v != 0);
  buf[(*n)++] = '0';
  buf[(*n)++] = 'x';
  while (len > 0)
    buf[(*n)++] = tmp[--len];
}

// Async-signal-safe: only write(2) and sigaction. Host code touched the
// PROT_NONE device range: say so, then let the previous handler (Python's
// faulthandler, or the default action) deal with the repeated fault.
void on_fault(int sig, siginfo_t* info, void*) {
  Runtime* rt = g_runtime;
  auto addr = static_cast<char*>(info->si_addr);
  if (rt != nullptr && addr >= rt->reserved && addr < rt->reserved + rt->reserved_bytes) {
    char buf[256];
    size_t n = 0;
    const char* head = "emu driver: host code dereferenced device pointer ";
    for (const char* c = head; *c; ++c)
      buf[n++] = *c;
    write_hex(buf, &n, reinterpret_cast<uintptr_t>(addr));
    const char* tail = "; device memory is reachable only through emuMemcpy or inside a kernel\n";
    for (const char* c = tail; *c && n < sizeof(buf) - 1; ++c)
      buf[n++] = *c;
    ssize_t ignored = write(2, buf, n);
    (void)ignored;
  }
  sigaction(sig, sig == SIGSEGV ? &g_previous_segv : &g_previous_bus, nullptr);
}

void start() {
  long count = 2, megabytes = 4096;
  const char* count_env = std::getenv("EMU_DEVICE_COUNT");
  const char* mem_env = std::getenv("EMU_DEVICE_MEMORY_MB");
  if (count_env != nullptr && !parse_int(count_env, 1, EMU_MAX_DEVICES, &count)) {
    g_start_error = emuErrorInitialization;
    g_start_message =
        std::string("EMU_DEVICE_COUNT='") + count_env + "' is not an integer in 1.." + std::to_string(EMU_MAX_DEVICES);
    return;
  }
  if (mem_env != nullptr && !parse_int(mem_env, 1, 1 << 20, &megabytes)) {
    g_start_error = emuErrorInitialization;
    g_start_message = std::string("EMU_DEVICE_MEMORY_MB='") + mem_env + "' is not an integer in 1..1048576";
    return;
  }
  const size_t capacity = size_t(megabytes) * kMiB;
  const size_t total = capacity * size_t(count);
  // The device ranges: reserved, never readable by the host.
  void* reserved = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  // The bytes: committed lazily by the kernel as they are touched.
  // One huge page of slack, so the bytes can start on a 2 MiB boundary.
  void* mapping =
      mmap(nullptr, total + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  void* backing = mapping == MAP_FAILED ? MAP_FAILED : align_up(mapping, kHugePage);
  // With transparent huge pages in "madvise" mode (the common default), an anonymous mapping gets 4 KiB pages
  // unless asked. A 64 MiB memcpy into such a mapping took 7.9 ms against 3.4 ms with huge pages (best of 15, on
  // a loaded machine); on a quiet one scripts/bench_plugin.py shows ~1.0 of memcpy with either, and the 0.4-0.8
  // spread of issue 17 came from machine load (see the per-round spread it prints). Asking is harmless where THP
  // is off or "always" (the call then changes nothing).
  if (backing != MAP_FAILED)
    (void)madvise(backing, total, MADV_HUGEPAGE);
  if (reserved == MAP_FAILED || backing == MAP_FAILED) {
    g_start_error = emuErrorInitialization;
    g_start_message = "could not reserve " + std::to_string(total / kMiB) + " MiB of address space for " +
        std::to_string(count) + " device(s): " + std::strerror(errno);
    return;
  }
  auto* rt = new Runtime();
  rt->reserved = static_cast<char*>(reserved);
  rt->backing = static_cast<char*>(backing);
  rt->reserved_bytes = total;
  for (long i = 0; i < count; ++i) {
    auto d = std::make_unique<Device>();
    d->index = int(i);
    d->capacity = capacity;
    d->dev_base = rt->reserved + size_t(i) * capacity;
    d->host_base = rt->backing + size_t(i) * capacity;
    d->free_blocks[0] = capacity;
    rt->devices.push_back(std::move(d));
  }
  for (auto& d : rt->devices)
    d->default_stream = create_stream(d.get(), true);
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_sigaction = on_fault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &g_previous_segv);
  sigaction(SIGBUS, &action, &g_previous_bus);
  g_runtime = rt;
}

} // namespace

Runtime* runtime(emuError_t* error) {
  static std::once_flag once;
  std::call_once(once, start);
  if (g_runtime == nullptr) {
    *error = fail(g_start_error, g_start_message);
    return nullptr;
  }
  return g_runtime;
}

Device* device_of(Runtime* rt, const void* p) {
  auto c = static_cast<const char*>(p);
  if (c < rt->reserved || c >= rt->reserved + rt->reserved_bytes)
    return nullptr;
  return rt->devices[size_t(c - rt->reserved) / rt->devices[0]->capacity].get();
}

int& current_device_index() {
  thread_local int index = 0;
  return index;
}

} // namespace emu

using emu::fail;

extern "C" {

emuError_t emuDriverGetVersion(int* version) {
  if (version == nullptr)
    return fail(emuErrorInvalidValue, "version is null");
  *version = EMU_DRIVER_VERSION;
  return emuSuccess;
}

emuError_t emuGetDeviceCount(int* count) {
  if (count == nullptr)
    return fail(emuErrorInvalidValue, "count is null");
  EMU_RUNTIME(rt);
  *count = int(rt->devices.size());
  return emuSuccess;
}

emuError_t emuSetDevice(int device) {
  EMU_RUNTIME(rt);
  if (device < 0 || size_t(device) >= rt->devices.size())
    return fail(
        emuErrorInvalidDevice,
        "device " + std::to_string(device) + " does not exist; there are " + std::to_string(rt->devices.size()) +
            " device(s)");
  emu::current_device_index() = device;
  return emuSuccess;
}

emuError_t emuGetDevice(int* device) {
  if (device == nullptr)
    return fail(emuErrorInvalidValue, "device is null");
  EMU_RUNTIME(rt);
  *device = emu::current_device_index();
  return emuSuccess;
}

emuError_t emuGetDeviceProperties(emuDeviceProp* prop, int device) {
  if (prop == nullptr)
    return fail(emuErrorInvalidValue, "prop is null");
  EMU_RUNTIME(rt);
  if (device < 0 || size_t(device) >= rt->devices.size())
    return fail(
        emuErrorInvalidDevice,
        "device " + std::to_string(device) + " does not exist; there are " + std::to_string(rt->devices.size()) +
            " device(s)");
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(
      prop->name,
      sizeof(prop->name),
      "Emu Accelerator E%d (API %d.%d)",
      EMU_DRIVER_VERSION_MAJOR,
      EMU_DRIVER_VERSION_MAJOR,
      EMU_DRIVER_VERSION_MINOR);
  prop->totalGlobalMem = rt->devices[size_t(device)]->capacity;
  prop->major = EMU_DRIVER_VERSION_MAJOR;
  prop->minor = EMU_DRIVER_VERSION_MINOR;
  prop->multiProcessorCount = int(std::thread::hardware_concurrency());
  return emuSuccess;
}

emuError_t emuMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (free_bytes == nullptr || total_bytes == nullptr)
    return fail(emuErrorInvalidValue, "null out-pointer");
  EMU_RUNTIME(rt);
  emu::Device* d = rt->devices[size_t(emu::current_device_index())].get();
  std::lock_guard<std::mutex> lock(d->mu);
  *total_bytes = d->capacity;
  *free_bytes = d->capacity - d->used;
  return emuSuccess;
}

emuError_t emuDeviceSynchronize(void) {
  EMU_RUNTIME(rt);
  emu::Device* d = rt->devices[size_t(emu::current_device_index())].get();
#if EMU_DRIVER_HAS_GRAPHS
  if (emuError_t refused = emu::refuse_while_device_captures(d, "emuDeviceSynchronize"))
    return refused;
#endif
  return emu::synchronize_device(d);
}

} // extern "C"
