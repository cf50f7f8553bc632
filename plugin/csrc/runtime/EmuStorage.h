// Growing the storage of an emu tensor (resize_, set_, storage.resize_()). In runtime/
// because both the PrivateUse1 hooks (storage.resize_()) and the aten kernels (resize_,
// set_) need it, and runtime/ must not depend on aten/.
#pragma once

#include <c10/core/StorageImpl.h>

#include <cstddef>

namespace torch_emu {

// Gives the storage new_bytes of fresh device memory, keeping the common prefix of the old bytes
// (copied in stream order on the storage's device).
void resize_storage_bytes(c10::StorageImpl* storage, size_t new_bytes);

} // namespace torch_emu
