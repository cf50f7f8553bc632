// Indexing and joining kernels: index_select and cat.
#pragma once

#include <ATen/core/IListRef.h>
#include <ATen/core/Tensor.h>

namespace torch_emu {
namespace native {

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index);
at::Tensor cat(const at::ITensorListRef& list, int64_t dim);

} // namespace native
} // namespace torch_emu
