// Storage resize: fresh memory from the caching allocator, the kept bytes copied as work
// on the device's current stream.
#include "runtime/EmuStorage.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "runtime/EmuAllocator.h"
#include "runtime/EmuException.h"
#include "runtime/EmuLaunch.h"
#include "runtime/EmuStream.h"

namespace torch_emu {

void resize_storage_bytes(c10::StorageImpl* storage, size_t new_bytes) {
  TORCH_CHECK(storage->resizable(), "Trying to resize storage that is not resizable");
  const c10::DeviceIndex device = storage->device().has_index() ? storage->device().index() : current_device();
  DeviceSwitch on(device);
  c10::DataPtr fresh = emu_allocator()->allocate(new_bytes);
  void* fresh_ptr = fresh.get();
  const size_t keep = std::min(storage->nbytes(), new_bytes);
  auto old = std::make_shared<c10::DataPtr>(storage->set_data_ptr(std::move(fresh)));
  storage->set_nbytes(new_bytes);
  if (keep == 0)
    return;
  // The old block lives until the copy has run on the stream.
  launch(device, [old, fresh_ptr, keep] {
    void* from = nullptr;
    void* to = nullptr;
    EMU_CHECK(emuKernelTranslate(old->get(), keep, &from));
    EMU_CHECK(emuKernelTranslate(fresh_ptr, keep, &to));
    std::memcpy(to, from, keep);
  });
}

} // namespace torch_emu
