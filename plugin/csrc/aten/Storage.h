// Growing the storage of an emu tensor (resize_, set_, storage.resize_()).
#pragma once

#include <c10/core/StorageImpl.h>

namespace torch_emu {

// Gives the storage new_bytes of fresh device memory, keeping the common prefix of the old bytes
// (copied in stream order on the storage's device).
void resize_storage_bytes(c10::StorageImpl* storage, size_t new_bytes);

}  // namespace torch_emu
