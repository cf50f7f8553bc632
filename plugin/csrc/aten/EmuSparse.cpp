// Sparse (COO) and compressed (CSR/CSC/BSR/BSC) emu tensors: the layout's own structure ops.
// A sparse tensor is a SparseTensorImpl/SparseCsrTensorImpl around dense indices and values
// tensors; those are ordinary emu tensors, so aten's device-agnostic kernels that build,
// resize and take apart that structure are correct for emu as they are, and must be native:
// through the CPU fallback `values()` would return a copy instead of the aliased member, and
// `.to("emu")` of a CPU sparse tensor (the fallback's way back) would recurse into itself.
// Computation on sparse tensors (to_sparse, sampled_addmm, ...) runs through the same boxed
// CPU fallback as dense ops (registered for the sparse keys in EmuMinimal.cpp).
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_dimI_native.h>
#include <ATen/ops/_dimV_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/resize_as_sparse_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <torch/library.h>

#include <memory>
#include <optional>
#include <vector>

#include "aten/Fallback.h"
#include "aten/SparseSupport.h"

namespace torch_emu {

namespace {

bool defined_on_emu(const at::Tensor& t) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1;
}

// An emu tensor's CPU copy, keeping requires_grad: some CPU kernels read it to decide what to compute (the
// amax/amin forward of sparse.mm's reduce returns the argmax its backward indexes only when self requires grad;
// without it the backward read an empty tensor and crashed). Below autograd here, so nothing is recorded.
at::Tensor cpu_copy(const at::Tensor& t) {
  // A quantized tensor whose quantizer is not set yet (torch.empty with a quantized dtype, or a structured op's
  // output before its kernel ran) holds nothing to copy, and torch cannot move it: its CPU stand-in is as empty.
  if (has_unknown_quantizer(t))
    return at::empty(t.sizes(), t.options().device(at::kCPU));
  at::Tensor c = t.cpu();
  if (t.requires_grad() && !c.requires_grad())
    c.requires_grad_(true);
  return c;
}

// The emu tensors of one IValue moved to the CPU (others as they are); `device` learns their device.
c10::IValue to_cpu(const c10::IValue& v, std::optional<c10::Device>& device) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!defined_on_emu(t))
      return v;
    device = t.device();
    return cpu_copy(t);
  }
  if (v.isTensorList()) {
    std::vector<at::Tensor> moved;
    for (const at::Tensor& t : v.toTensorVector()) {
      if (defined_on_emu(t))
        device = t.device();
      moved.push_back(defined_on_emu(t) ? cpu_copy(t) : t);
    }
    return moved;
  }
  return v;
}

c10::IValue to_device(const c10::IValue& v, c10::Device device) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() ? c10::IValue(t.to(device)) : v;
  }
  if (v.isTensorList()) {
    std::vector<at::Tensor> moved;
    for (const at::Tensor& t : v.toTensorVector())
      moved.push_back(t.defined() ? t.to(device) : t);
    return moved;
  }
  return v;
}

} // namespace

bool needs_dispatching_fallback(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto dense_cpu_cannot_take = [](const at::Tensor& t) {
    return t.defined() && (t.layout() != c10::kStrided || t.is_quantized());
  };
  const size_t n = op.schema().arguments().size();
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor() && dense_cpu_cannot_take(v.toTensor()))
      return true;
    if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorVector())
        if (dense_cpu_cannot_take(t))
          return true;
  }
  return false;
}

void dispatching_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  const size_t first = stack->size() - n;
  const std::vector<c10::IValue> originals(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  std::optional<c10::Device> device;
  for (size_t i = 0; i < n; ++i)
    (*stack)[first + i] = to_cpu(originals[i], device);
  std::vector<c10::IValue> cpu_args(stack->begin() + static_cast<std::ptrdiff_t>(first), stack->end());
  op.callBoxed(stack);
  // Arguments the op writes (in-place, out=): the CPU result goes back into the emu tensor.
  for (size_t i = 0; i < n; ++i) {
    const auto* alias = schema.arguments()[i].alias_info();
    if (alias == nullptr || !alias->isWrite() || !originals[i].isTensor() || !defined_on_emu(originals[i].toTensor()))
      continue;
    originals[i].toTensor().copy_(cpu_args[i].toTensor());
  }
  const size_t results = schema.returns().size();
  const size_t begin = stack->size() - results;
  for (size_t r = 0; r < results; ++r) {
    // A result that aliases a written argument is that argument itself; anything else moves to emu.
    const auto* alias = schema.returns()[r].alias_info();
    bool aliased = false;
    for (size_t i = 0; alias != nullptr && i < n && !aliased; ++i) {
      const auto* arg_alias = schema.arguments()[i].alias_info();
      if (arg_alias != nullptr && arg_alias->isWrite() && arg_alias->beforeSets() == alias->beforeSets()) {
        (*stack)[begin + r] = originals[i];
        aliased = true;
      }
    }
    if (!aliased && device.has_value())
      (*stack)[begin + r] = to_device((*stack)[begin + r], *device);
  }
}

std::unique_ptr<torch::Library> bind_fallback_where_cpu_has_kernel(c10::DispatchKey cpu_key, c10::DispatchKey emu_key) {
  auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", emu_key, __FILE__, __LINE__);
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0)
      continue;
    const auto op = c10::Dispatcher::singleton().findOp(name);
    if (!op.has_value() || !op->hasKernelForDispatchKey(cpu_key) || op->hasKernelForDispatchKey(emu_key))
      continue;
    const std::string qualified = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
    library->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&emu_fallback>());
  }
  return library;
}

#if EMU_HAS_SPARSE
TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(at::native::new_with_dims_sparse));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse));
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_dimI", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("_dimV", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
  m.impl("sparse_resize_", TORCH_FN(at::native::sparse_resize_));
  m.impl("sparse_resize_and_clear_", TORCH_FN(at::native::sparse_resize_and_clear_));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_wrapper_));
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse_compressed));
  m.impl("crow_indices", TORCH_FN(at::native::crow_indices_sparse_csr));
  m.impl("col_indices", TORCH_FN(at::native::col_indices_sparse_csr));
  m.impl("ccol_indices", TORCH_FN(at::native::ccol_indices_sparse_csr));
  m.impl("row_indices", TORCH_FN(at::native::row_indices_sparse_csr));
  m.impl("values", TORCH_FN(at::native::values_sparse_csr));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse_csr));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse_csr));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse_csr));
  m.impl("resize_as_sparse_", TORCH_FN(at::native::resize_as_sparse_compressed_));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_compressed_));
}

namespace {

// Ops with a SparseCPU (SparseCsrCPU) kernel of their own often also have a composite default kernel for
// every other key (sum, mul.Tensor, ...): on emu it would run the dense algorithm on a sparse tensor (sum()
// would sum over no dimension and stay sparse; mul would refuse the layout), so they are bound to the fallback
// by name (bind_fallback_where_cpu_has_kernel): exactly the ops the CPU treats specially run as on the CPU.
struct SparseFallbackBindings {
  std::unique_ptr<torch::Library> coo =
      bind_fallback_where_cpu_has_kernel(c10::DispatchKey::SparseCPU, c10::DispatchKey::SparsePrivateUse1);
  std::unique_ptr<torch::Library> compressed =
      bind_fallback_where_cpu_has_kernel(c10::DispatchKey::SparseCsrCPU, c10::DispatchKey::SparseCsrPrivateUse1);
};
const SparseFallbackBindings sparse_fallback_bindings;

} // namespace
#endif // EMU_HAS_SPARSE

} // namespace torch_emu
