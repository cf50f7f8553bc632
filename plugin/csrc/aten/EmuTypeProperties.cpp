// Type properties torch asks of a backend's tensors: whether one tensor's TensorImpl may be
// shallow-copied into another's (aten::_has_compatible_shallow_copy_type).
//
// `param.data = other` (VariableHooks::set_data) refuses unless that op says yes, and Module._apply
// (behind .to(), .cpu(), .half(), ...) keeps a Parameter object by setting its .data only where it
// says yes; elsewhere it wraps the moved tensor in a new Parameter, so modules that shared one
// parameter (tied input and output embeddings) end up with two. torch's own answer is
// TensorImpl::has_compatible_shallow_copy_type, a CompositeImplicitAutograd kernel that accepts two
// dense tensors only when both backends are in the list the release compiles in (CPU, CUDA, MPS,
// HIP, XPU, HPU and, from some release on, MTIA), never PrivateUse1. The op dispatches on the
// highest backend among its arguments, which is PrivateUse1 whenever an emu tensor is one of them,
// so a PrivateUse1 kernel answers for every pair that involves emu and no other pair.
#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/TensorImpl.h>
#include <torch/library.h>

namespace torch_emu {

namespace {

// A dense emu tensor: a plain TensorImpl whose storage comes from emu's allocator, as a dense CUDA
// tensor's is a plain TensorImpl over CUDA memory. Sparse emu tensors (SparsePrivateUse1) are not:
// SparseTensorImpl::shallow_copy_from asserts torch's own check, which lists no PrivateUse1 sparse
// backend, so saying yes for them would turn a refusal into an internal assert.
bool is_dense_emu(const at::Tensor& t) {
  return t.key_set().has(c10::DispatchKey::PrivateUse1);
}

// Dense as this torch release counts it: its own check against the key set of a dense CPU tensor,
// so the list of dense backends is the release's, never a copy that drifts from it.
bool is_dense_for_torch(const at::Tensor& t) {
  return t.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(c10::DispatchKeySet(c10::DispatchKey::CPU));
}

bool is_dense(const at::Tensor& t) {
  return is_dense_emu(t) || is_dense_for_torch(t);
}

// torch's answer, plus: a dense emu tensor and any tensor torch counts as dense (CPU, CUDA, another
// emu tensor of another dtype) are compatible, as two dense CUDA and CPU tensors are.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()))
    return true;
  return (is_dense_emu(self) || is_dense_emu(from)) && is_dense(self) && is_dense(from);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

// With a PrivateUse1 kernel, the op's CompositeImplicitAutograd kernel no longer serves the autograd key
// either; releases without an autograd fallback for PrivateUse1 (2.1) then had no kernel there at all.
// A bool has no gradient: straight through to the kernel above.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", torch::CppFunction::makeFallthrough());
}

} // namespace torch_emu
