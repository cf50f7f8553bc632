// Backend metadata of emu tensors, carried through torch.save/torch.load and tensor copies like
// PyTorch's reference backend does with its BackendMeta.
//
// torch's own interface to it is a map of string to bool per tensor (torch._utils.set_tensor_metadata /
// get_tensor_metadata, the serialization hooks, torch._C._copy_backend_meta); emu keeps that map whole.
// torch_emu's named integers (set_backend_meta below) are entries of the same map, "emu_meta:<name>=<value>".
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>

namespace torch_emu {

// Replaces the tensor's named integers (an empty map removes them); other entries stay.
void set_backend_meta(const at::Tensor& t, const std::map<std::string, int64_t>& values);
// The tensor's named integers; empty when it has none.
std::map<std::string, int64_t> backend_meta(const at::Tensor& t);
// Gives dst a copy of src's whole map (torch's entries and the named integers); nothing when src has none. Works on
// the tensors' own TensorImpls, whatever device they report: a FakeTensor reports "meta" while a kernel runs.
void copy_backend_meta(const at::Tensor& src, const at::Tensor& dst);

} // namespace torch_emu
