// segops's operators in torch's registry (torch.ops.segops.*), built one of two ways, chosen by setup.py:
//  - SEGOPS_STABLE_ABI defined (torch >= 2.10): against the LibTorch stable ABI only (torch/csrc/stable, C shims), with
//    TORCH_TARGET_VERSION naming the oldest release it supports, so one build serves every later release;
//  - otherwise: ordinary ATen/c10 C++, which must be rebuilt for every torch release.
// Both register the same schemas and call the same loops (segment_kernels.h). Autograd and the fake (meta) kernels
// live in Python (segops/_registrations.py), so they too are one code for both builds.

#include "segment_kernels.h"

#ifdef SEGOPS_STABLE_ABI

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <vector>

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace {

void check_arguments(const Tensor& src, const Tensor& index, int64_t num_segments) {
  STD_TORCH_CHECK(src.is_cpu() && index.is_cpu(), "segops: CPU tensors only");
  STD_TORCH_CHECK(src.dim() >= 1, "segops: src needs at least one dimension");
  STD_TORCH_CHECK(index.dim() == 1 && index.size(0) == src.size(0),
                  "segops: index must be 1-D with one entry per row of src");
  STD_TORCH_CHECK(index.scalar_type() == ScalarType::Long, "segops: index must be int64");
  STD_TORCH_CHECK(num_segments >= 0, "segops: num_segments must be >= 0");
}

std::vector<int64_t> out_shape(const Tensor& src, int64_t num_segments) {
  std::vector<int64_t> shape{num_segments};
  for (int64_t d = 1; d < src.dim(); ++d) shape.push_back(src.size(d));
  return shape;
}

Tensor segment_sum(Tensor src, Tensor index, int64_t num_segments) {
  check_arguments(src, index, num_segments);
  src = torch::stable::contiguous(src);
  index = torch::stable::contiguous(index);
  const int64_t rows = src.size(0);
  const int64_t cols = rows == 0 ? 0 : src.numel() / rows;
  const std::string problem = segops::check_index(index.const_data_ptr<int64_t>(), rows, num_segments);
  STD_TORCH_CHECK(problem.empty(), "segops.segment_sum: ", problem);
  std::vector<int64_t> shape = out_shape(src, num_segments);
  Tensor out = torch::stable::new_zeros(src, shape);
  switch (src.scalar_type()) {
    case ScalarType::Float:
      segops::segment_sum(src.const_data_ptr<float>(), index.const_data_ptr<int64_t>(),
                          out.mutable_data_ptr<float>(), rows, cols);
      break;
    case ScalarType::Double:
      segops::segment_sum(src.const_data_ptr<double>(), index.const_data_ptr<int64_t>(),
                          out.mutable_data_ptr<double>(), rows, cols);
      break;
    default:
      STD_TORCH_CHECK(false, "segops.segment_sum: src must be float32 or float64");
  }
  return out;
}

Tensor segment_count(Tensor index, int64_t num_segments) {
  STD_TORCH_CHECK(index.is_cpu() && index.dim() == 1 && index.scalar_type() == ScalarType::Long,
                  "segops.segment_count: index must be a 1-D int64 CPU tensor");
  STD_TORCH_CHECK(num_segments >= 0, "segops: num_segments must be >= 0");
  index = torch::stable::contiguous(index);
  const int64_t rows = index.size(0);
  const std::string problem = segops::check_index(index.const_data_ptr<int64_t>(), rows, num_segments);
  STD_TORCH_CHECK(problem.empty(), "segops.segment_count: ", problem);
  std::vector<int64_t> shape{num_segments};
  Tensor counts = torch::stable::new_zeros(index, shape);
  segops::segment_count(index.const_data_ptr<int64_t>(), counts.mutable_data_ptr<int64_t>(), rows);
  return counts;
}

}  // namespace

STABLE_TORCH_LIBRARY(segops, m) {
  m.def("segment_sum(Tensor src, Tensor index, int num_segments) -> Tensor");
  m.def("segment_count(Tensor index, int num_segments) -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(segops, CPU, m) {
  m.impl("segment_sum", TORCH_BOX(&segment_sum));
  m.impl("segment_count", TORCH_BOX(&segment_count));
}

#else  // ordinary build: one per torch release

#include <ATen/core/Tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <vector>

namespace {

void check_arguments(const at::Tensor& src, const at::Tensor& index, int64_t num_segments) {
  TORCH_CHECK(src.device().is_cpu() && index.device().is_cpu(), "segops: CPU tensors only");
  TORCH_CHECK(src.dim() >= 1, "segops: src needs at least one dimension");
  TORCH_CHECK(index.dim() == 1 && index.size(0) == src.size(0),
              "segops: index must be 1-D with one entry per row of src");
  TORCH_CHECK(index.scalar_type() == at::kLong, "segops: index must be int64");
  TORCH_CHECK(num_segments >= 0, "segops: num_segments must be >= 0");
}

at::Tensor segment_sum(const at::Tensor& src_in, const at::Tensor& index_in, int64_t num_segments) {
  check_arguments(src_in, index_in, num_segments);
  const at::Tensor src = src_in.contiguous();
  const at::Tensor index = index_in.contiguous();
  const int64_t rows = src.size(0);
  const int64_t cols = rows == 0 ? 0 : src.numel() / rows;
  const std::string problem = segops::check_index(index.data_ptr<int64_t>(), rows, num_segments);
  TORCH_CHECK(problem.empty(), "segops.segment_sum: ", problem);
  std::vector<int64_t> shape = src.sizes().vec();
  shape[0] = num_segments;
  at::Tensor out = at::zeros(shape, src.options());
  if (src.scalar_type() == at::kFloat) {
    segops::segment_sum(src.data_ptr<float>(), index.data_ptr<int64_t>(), out.data_ptr<float>(), rows, cols);
  } else if (src.scalar_type() == at::kDouble) {
    segops::segment_sum(src.data_ptr<double>(), index.data_ptr<int64_t>(), out.data_ptr<double>(), rows, cols);
  } else {
    TORCH_CHECK(false, "segops.segment_sum: src must be float32 or float64");
  }
  return out;
}

at::Tensor segment_count(const at::Tensor& index_in, int64_t num_segments) {
  TORCH_CHECK(index_in.device().is_cpu() && index_in.dim() == 1 && index_in.scalar_type() == at::kLong,
              "segops.segment_count: index must be a 1-D int64 CPU tensor");
  TORCH_CHECK(num_segments >= 0, "segops: num_segments must be >= 0");
  const at::Tensor index = index_in.contiguous();
  const int64_t rows = index.size(0);
  const std::string problem = segops::check_index(index.data_ptr<int64_t>(), rows, num_segments);
  TORCH_CHECK(problem.empty(), "segops.segment_count: ", problem);
  at::Tensor counts = at::zeros({num_segments}, index.options());
  segops::segment_count(index.data_ptr<int64_t>(), counts.data_ptr<int64_t>(), rows);
  return counts;
}

}  // namespace

TORCH_LIBRARY(segops, m) {
  m.def("segment_sum(Tensor src, Tensor index, int num_segments) -> Tensor");
  m.def("segment_count(Tensor index, int num_segments) -> Tensor");
}

TORCH_LIBRARY_IMPL(segops, CPU, m) {
  m.impl("segment_sum", &segment_sum);
  m.impl("segment_count", &segment_count);
}

#endif
