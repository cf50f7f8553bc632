// Reduction kernels: sum and mean over dims, max over all and over one dim.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/OptionalArrayRef.h>

#include <tuple>

#include "TorchCompat.h"

namespace torch_emu {
namespace native {

at::Tensor sum_dim(
    const at::Tensor& self,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    compat::optional<c10::ScalarType> dtype);
at::Tensor mean_dim(
    const at::Tensor& self,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    compat::optional<c10::ScalarType> dtype);
at::Tensor max_all(const at::Tensor& self);
std::tuple<at::Tensor, at::Tensor> max_dim(const at::Tensor& self, int64_t dim, bool keepdim);

} // namespace native
} // namespace torch_emu
