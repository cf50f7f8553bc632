// Backend metadata of emu tensors (named integers on the TensorImpl), carried through
// torch.save/torch.load like PyTorch's reference backend does with its BackendMeta.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>

namespace torch_emu {

// Replaces the tensor's emu metadata (an empty map removes it).
void set_backend_meta(const at::Tensor& t, const std::map<std::string, int64_t>& values);
// The tensor's emu metadata; empty when it has none.
std::map<std::string, int64_t> backend_meta(const at::Tensor& t);

}  // namespace torch_emu
