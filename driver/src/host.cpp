// Page-locked host memory (API 2.2): page-aligned host allocations the driver registers, so that
// it can tell pinned from pageable memory, copy from pinned memory without staging, and free an
// allocation only once the copies queued on it have run.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>

#include "internal.h"

#if EMU_DRIVER_HAS_HOST_ALLOC

namespace emu {

namespace {

struct PinnedBlock {
  size_t size = 0; // as asked for
  size_t mapped = 0; // whole pages
  unsigned int flags = 0;
  bool locked = false;
  size_t queued = 0; // copies queued on a stream that still have to run
};

struct PinnedRegistry {
  std::mutex mu;
  std::condition_variable idle; // a block's queued count dropped
  std::map<uintptr_t, PinnedBlock> blocks; // base address -> block
};

PinnedRegistry& registry() {
  static auto* r = new PinnedRegistry(); // process lifetime, like the runtime
  return *r;
}

std::string hex(const void* p) {
  std::ostringstream out;
  out << p;
  return out.str();
}

// Caller holds the registry's lock.
std::map<uintptr_t, PinnedBlock>::iterator holding(PinnedRegistry& r, const void* p, size_t bytes) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  auto it = r.blocks.upper_bound(address);
  if (it == r.blocks.begin())
    return r.blocks.end();
  --it;
  if (address - it->first >= it->second.size || bytes > it->second.size - (address - it->first))
    return r.blocks.end();
  return it;
}

} // namespace

bool find_pinned(const void* p, size_t bytes, void** base, size_t* size) {
  PinnedRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = holding(r, p, bytes);
  if (it == r.blocks.end())
    return false;
  if (base != nullptr)
    *base = reinterpret_cast<void*>(it->first);
  if (size != nullptr)
    *size = it->second.size;
  return true;
}

void* pinned_use_begin(const void* p, size_t bytes) {
  PinnedRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = holding(r, p, bytes);
  if (it == r.blocks.end())
    return nullptr;
  it->second.queued += 1;
  return reinterpret_cast<void*>(it->first);
}

void pinned_use_done(void* base) {
  PinnedRegistry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.blocks.find(reinterpret_cast<uintptr_t>(base));
    if (it != r.blocks.end() && it->second.queued > 0)
      it->second.queued -= 1;
  }
  r.idle.notify_all();
}

} // namespace emu

using emu::fail;

extern "C" {

emuError_t emuHostAlloc(void** ptr, size_t size, unsigned int flags) {
  if (ptr == nullptr)
    return fail(emuErrorInvalidValue, "ptr is null");
  if ((flags & ~unsigned(emuHostAllocPortable)) != 0)
    return fail(
        emuErrorInvalidValue,
        "emuHostAlloc: unknown flags " + std::to_string(flags) +
            " (allowed: emuHostAllocDefault, emuHostAllocPortable)");
  if (size == 0) {
    *ptr = nullptr;
    return emuSuccess;
  }
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t mapped = (size + page - 1) / page * page;
  if (mapped < size)
    return fail(emuErrorMemoryAllocation, "emuHostAlloc: " + std::to_string(size) + " bytes is too large");
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return fail(
        emuErrorMemoryAllocation,
        "emuHostAlloc: cannot map " + std::to_string(mapped) + " bytes of host memory: " + std::strerror(errno));
  // Best effort: a low RLIMIT_MEMLOCK (the usual 8 MiB for unprivileged users) must not make
  // pinned allocation fail. The driver treats the memory as pinned either way; emuHostGetFlags says
  // whether the pages are really locked.
  const bool locked = mlock(p, mapped) == 0;
  emu::PinnedRegistry& r = emu::registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.blocks[reinterpret_cast<uintptr_t>(p)] = emu::PinnedBlock{size, mapped, flags, locked, 0};
  }
  *ptr = p;
  return emuSuccess;
}

emuError_t emuFreeHost(void* ptr) {
  if (ptr == nullptr)
    return emuSuccess;
  emu::PinnedRegistry& r = emu::registry();
  std::unique_lock<std::mutex> lock(r.mu);
  auto it = r.blocks.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == r.blocks.end()) {
    auto inside = emu::holding(r, ptr, 1);
    if (inside != r.blocks.end())
      return fail(
          emuErrorInvalidValue,
          "emuFreeHost: " + emu::hex(ptr) + " is inside the pinned allocation at " +
              emu::hex(reinterpret_cast<void*>(inside->first)) + ", not its start");
    return fail(
        emuErrorInvalidValue,
        "emuFreeHost: " + emu::hex(ptr) + " is not pinned host memory from emuHostAlloc (double free?)");
  }
  // Copies queued on streams still read or write the block: wait for them, as cudaFreeHost does.
  const uintptr_t base = it->first;
  r.idle.wait(lock, [&r, base] { return r.blocks.at(base).queued == 0; });
  it = r.blocks.find(base);
  const size_t mapped = it->second.mapped;
  const bool locked = it->second.locked;
  r.blocks.erase(it);
  lock.unlock();
  if (locked)
    munlock(ptr, mapped);
  munmap(ptr, mapped);
  return emuSuccess;
}

emuError_t emuHostGetFlags(unsigned int* flags, void* ptr) {
  if (flags == nullptr)
    return fail(emuErrorInvalidValue, "flags is null");
  emu::PinnedRegistry& r = emu::registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = emu::holding(r, ptr, 1);
  if (it == r.blocks.end())
    return fail(emuErrorInvalidValue, "emuHostGetFlags: " + emu::hex(ptr) + " is not pinned host memory");
  *flags = it->second.flags | (it->second.locked ? unsigned(emuHostAllocLocked) : 0u);
  return emuSuccess;
}

} // extern "C"

#endif // EMU_DRIVER_HAS_HOST_ALLOC
