// Device memory: allocation inside each device's range, range checks, copies and memsets.
#include <sys/mman.h>

#include <cstring>
#include <sstream>
#include <string>

#include "internal.h"

namespace emu {

namespace {

constexpr size_t kAlignment = 256;
constexpr size_t kReleaseThreshold = size_t(1) << 20; // give big freed blocks' pages back to the OS

std::string hex(const void* p) {
  std::ostringstream out;
  out << p;
  return out.str();
}

// First fit over the coalesced free list; allocation is rare behind the plugin's caching allocator.
bool carve(Device* d, size_t size, size_t* offset) {
  for (auto it = d->free_blocks.begin(); it != d->free_blocks.end(); ++it) {
    if (it->second < size)
      continue;
    *offset = it->first;
    size_t rest = it->second - size;
    size_t rest_offset = it->first + size;
    d->free_blocks.erase(it);
    if (rest > 0)
      d->free_blocks[rest_offset] = rest;
    return true;
  }
  return false;
}

void give_back(Device* d, size_t offset, size_t size) {
  auto next = d->free_blocks.lower_bound(offset);
  if (next != d->free_blocks.end() && offset + size == next->first) {
    size += next->second;
    next = d->free_blocks.erase(next);
  }
  if (next != d->free_blocks.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  d->free_blocks[offset] = size;
}

emuError_t check_host(Runtime* rt, const void* p, const char* what) {
  if (p == nullptr)
    return fail(emuErrorInvalidValue, std::string(what) + " is null");
  if (device_of(rt, p) != nullptr)
    return fail(
        emuErrorInvalidValue,
        std::string(what) + " " + hex(p) + " is a device pointer, but the copy kind says it is host memory");
  return emuSuccess;
}

} // namespace

emuError_t translate(Runtime* rt, const void* p, size_t bytes, const char* what, char** host, Device** device) {
  Device* d = device_of(rt, p);
  if (d == nullptr)
    return fail(emuErrorInvalidDevicePointer, std::string(what) + " " + hex(p) + " is not device memory");
  const size_t offset = size_t(static_cast<const char*>(p) - d->dev_base);
  std::lock_guard<std::mutex> lock(d->mu);
  auto it = d->live.upper_bound(offset);
  if (it == d->live.begin())
    return fail(
        emuErrorInvalidDevicePointer,
        std::string(what) + " " + hex(p) + " on device " + std::to_string(d->index) +
            " is not in a live allocation (freed?)");
  --it;
  const size_t alloc_offset = it->first, alloc_size = it->second;
  if (offset >= alloc_offset + alloc_size)
    return fail(
        emuErrorInvalidDevicePointer,
        std::string(what) + " " + hex(p) + " on device " + std::to_string(d->index) +
            " is not in a live allocation (freed?)");
  if (bytes > alloc_offset + alloc_size - offset)
    return fail(
        emuErrorInvalidDevicePointer,
        std::string(what) + " range [" + hex(p) + ", +" + std::to_string(bytes) + ") overruns its allocation of " +
            std::to_string(alloc_size) + " bytes at " + hex(d->dev_base + alloc_offset));
  *host = d->host_base + offset;
  if (device != nullptr)
    *device = d;
  return emuSuccess;
}

} // namespace emu

using emu::fail;

extern "C" {

emuError_t emuMalloc(void** devPtr, size_t size) {
  if (devPtr == nullptr)
    return fail(emuErrorInvalidValue, "devPtr is null");
  EMU_RUNTIME(rt);
  if (size == 0) {
    *devPtr = nullptr;
    return emuSuccess;
  }
  emu::Device* d = rt->devices[size_t(emu::current_device_index())].get();
  const size_t rounded = (size + emu::kAlignment - 1) / emu::kAlignment * emu::kAlignment;
  std::lock_guard<std::mutex> lock(d->mu);
  size_t offset = 0;
  if (rounded < size || !emu::carve(d, rounded, &offset))
    return fail(
        emuErrorMemoryAllocation,
        "cannot allocate " + std::to_string(size) + " bytes on device " + std::to_string(d->index) + ": " +
            std::to_string(d->capacity - d->used) + " of " + std::to_string(d->capacity) + " bytes free");
  d->live[offset] = rounded;
  d->used += rounded;
  *devPtr = d->dev_base + offset;
  return emuSuccess;
}

emuError_t emuFree(void* devPtr) {
  if (devPtr == nullptr)
    return emuSuccess;
  EMU_RUNTIME(rt);
  emu::Device* d = emu::device_of(rt, devPtr);
  if (d == nullptr)
    return fail(emuErrorInvalidDevicePointer, "emuFree: " + emu::hex(devPtr) + " is not device memory");
  emuError_t err = emuSuccess;
#if EMU_DRIVER_HAS_GRAPHS
  if ((err = emu::refuse_while_device_captures(d, "emuFree")))
    return err;
#endif
  // Queued work may still use the block.
  if ((err = emu::synchronize_device(d)))
    return err;
  const size_t offset = size_t(static_cast<char*>(devPtr) - d->dev_base);
  std::lock_guard<std::mutex> lock(d->mu);
  auto it = d->live.find(offset);
  if (it == d->live.end())
    return fail(
        emuErrorInvalidDevicePointer,
        "emuFree: " + emu::hex(devPtr) + " is not the start of a live allocation (double free?)");
  const size_t size = it->second;
  d->live.erase(it);
  d->used -= size;
  if (size >= emu::kReleaseThreshold)
    madvise(d->host_base + offset, size, MADV_DONTNEED);
  emu::give_back(d, offset, size);
  return emuSuccess;
}

emuError_t emuPointerGetAttributes(emuPointerAttributes* attr, const void* ptr) {
  if (attr == nullptr)
    return fail(emuErrorInvalidValue, "attr is null");
  EMU_RUNTIME(rt);
  emu::Device* d = emu::device_of(rt, ptr);
  if (d == nullptr) {
#if EMU_DRIVER_HAS_HOST_ALLOC
    void* base = nullptr;
    size_t size = 0;
    if (emu::find_pinned(ptr, 0, &base, &size)) {
      *attr = emuPointerAttributes{emuMemoryTypePinnedHost, -1, base, size};
      return emuSuccess;
    }
#endif
    *attr = emuPointerAttributes{emuMemoryTypeHost, -1, nullptr, 0};
    return emuSuccess;
  }
  const size_t offset = size_t(static_cast<const char*>(ptr) - d->dev_base);
  std::lock_guard<std::mutex> lock(d->mu);
  auto it = d->live.upper_bound(offset);
  if (it == d->live.begin() || std::prev(it)->first + std::prev(it)->second <= offset)
    return fail(
        emuErrorInvalidDevicePointer,
        emu::hex(ptr) + " points into device " + std::to_string(d->index) + " but not into a live allocation (freed?)");
  --it;
  *attr = emuPointerAttributes{emuMemoryTypeDevice, d->index, d->dev_base + it->first, it->second};
  return emuSuccess;
}

emuError_t emuMemcpy(void* dst, const void* src, size_t count, emuMemcpyKind kind) {
  EMU_RUNTIME(rt);
  if (count == 0)
    return emuSuccess;
  char* host_dst = static_cast<char*>(dst);
  const char* host_src = static_cast<const char*>(src);
  emu::Device* dst_dev = nullptr;
  emu::Device* src_dev = nullptr;
  emuError_t err = emuSuccess;
  switch (kind) {
    case emuMemcpyHostToHost:
      if ((err = emu::check_host(rt, dst, "dst")) || (err = emu::check_host(rt, src, "src")))
        return err;
      break;
    case emuMemcpyHostToDevice:
      if ((err = emu::check_host(rt, src, "src")) || (err = emu::translate(rt, dst, count, "dst", &host_dst, &dst_dev)))
        return err;
      break;
    case emuMemcpyDeviceToHost: {
      char* translated = nullptr;
      if ((err = emu::check_host(rt, dst, "dst")) ||
          (err = emu::translate(rt, src, count, "src", &translated, &src_dev)))
        return err;
      host_src = translated;
      break;
    }
    case emuMemcpyDeviceToDevice: {
      char* translated = nullptr;
      if ((err = emu::translate(rt, dst, count, "dst", &host_dst, &dst_dev)) ||
          (err = emu::translate(rt, src, count, "src", &translated, &src_dev)))
        return err;
      host_src = translated;
      break;
    }
    default:
      return fail(emuErrorInvalidValue, "unknown emuMemcpyKind " + std::to_string(int(kind)));
  }
#if EMU_DRIVER_HAS_GRAPHS
  if (dst_dev != nullptr && (err = emu::refuse_while_device_captures(dst_dev, "emuMemcpy")))
    return err;
  if (src_dev != nullptr && (err = emu::refuse_while_device_captures(src_dev, "emuMemcpy")))
    return err;
#endif
  if (dst_dev != nullptr && (err = emu::synchronize_device(dst_dev)))
    return err;
  if (src_dev != nullptr && src_dev != dst_dev && (err = emu::synchronize_device(src_dev)))
    return err;
  std::memmove(host_dst, host_src, count);
  return emuSuccess;
}

emuError_t emuMemset(void* devPtr, int value, size_t count) {
  EMU_RUNTIME(rt);
  if (count == 0)
    return emuSuccess;
  char* host = nullptr;
  emu::Device* d = nullptr;
  emuError_t err = emu::translate(rt, devPtr, count, "devPtr", &host, &d);
  if (err != emuSuccess)
    return err;
#if EMU_DRIVER_HAS_GRAPHS
  if ((err = emu::refuse_while_device_captures(d, "emuMemset")))
    return err;
#endif
  if ((err = emu::synchronize_device(d)))
    return err;
  std::memset(host, value, count);
  return emuSuccess;
}

} // extern "C"
