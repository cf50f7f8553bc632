// Indexing and joining kernels: index_select and cat.
#include "aten/native/Indexing.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/zeros.h>

#include "aten/native/Common.h"

namespace torch_emu {
namespace native {

// ---- indexing and joining ----
Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index) {
  TORCH_CHECK(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(
      index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
      "index_select(): Expected dtype int32 or int64 for index");
  const auto device = common_device("index_select", {&self, &index});
  // The CPU kernel refuses some dtypes (uint16/32/64) only when it runs: probed here, at the call.
  probe_once("index_select", self.scalar_type(), self.scalar_type(), index.scalar_type(), [&] {
    at::index_select(one_on_cpu(self.scalar_type()), 0, at::zeros({1}, at::TensorOptions().dtype(index.scalar_type())));
  });
  dim = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  if (!shape.empty())
    shape[static_cast<size_t>(dim)] = index.numel();
  Tensor out = at::empty(shape, on_emu(device, self.scalar_type()));
  launch(device, [out = arg(out), self = arg(self), dim, index = arg(index)] {
    at::index_select_out(as_lvalue(kernel_view(out)), kernel_view(self), dim, kernel_view(index));
  });
  return out;
}

Tensor cat(const at::ITensorListRef& list, int64_t dim) {
  std::vector<Tensor> tensors(list.begin(), list.end());
  TORCH_CHECK(!tensors.empty(), "torch.cat(): expected a non-empty list of Tensors");
  // Legacy rule: 1-D empty tensors are skipped when choosing the shape.
  const Tensor* like = nullptr;
  for (const Tensor& t : tensors)
    if (!(t.dim() == 1 && t.numel() == 0)) {
      like = &t;
      break;
    }
  if (like == nullptr)
    like = &tensors.front();
  dim = at::maybe_wrap_dim(dim, like->dim());
  c10::ScalarType dtype = tensors.front().scalar_type();
  c10::DeviceIndex device = -1;
  int64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    dtype = c10::promoteTypes(dtype, t.scalar_type());
    const auto d = common_device("cat", {&t});
    TORCH_CHECK(
        device == -1 || device == d,
        "Expected all tensors to be on the same device, but found at least two devices, emu:",
        int(device),
        " and emu:",
        int(d),
        "! (in cat)");
    device = d;
    if (t.dim() == 1 && t.numel() == 0)
      continue;
    TORCH_CHECK(
        t.dim() == like->dim(), "Tensors must have same number of dimensions: got ", like->dim(), " and ", t.dim());
    for (int64_t k = 0; k < t.dim(); ++k)
      TORCH_CHECK(
          k == dim || t.size(k) == like->size(k),
          "Sizes of tensors must match except in dimension ",
          dim,
          ". Expected size ",
          like->size(k),
          " but got size ",
          t.size(k),
          " for tensor number ",
          i,
          " in the list.");
    total += t.size(dim);
  }
  // Each input's dtype into the result's, as the CPU kernel will do it: a refusal is raised at the call.
  for (const Tensor& t : tensors)
    probe_once("cat", dtype, t.scalar_type(), c10::ScalarType::Undefined, [&] {
      Tensor probe_out = one_on_cpu(dtype);
      at::cat_out(probe_out, {one_on_cpu(t.scalar_type())}, 0);
    });
  std::vector<int64_t> shape(like->sizes().begin(), like->sizes().end());
  if (!shape.empty())
    shape[static_cast<size_t>(dim)] = total;
  Tensor out = at::empty(shape, on_emu(device, dtype));
  std::vector<KernelArg> args;
  args.reserve(tensors.size());
  for (const Tensor& t : tensors)
    args.push_back(arg(t));
  launch(device, [out = arg(out), args = std::move(args), dim] {
    std::vector<Tensor> views;
    views.reserve(args.size());
    for (const KernelArg& t : args)
      views.push_back(kernel_view(t));
    at::cat_out(as_lvalue(kernel_view(out)), views, dim);
  });
  return out;
}

} // namespace native
} // namespace torch_emu
