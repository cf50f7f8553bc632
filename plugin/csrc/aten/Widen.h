// CUDA's dtypes on emu. Model code takes CUDA's path on emu (it branches on device.type), so emu must
// compute every dtype CUDA computes; the CPU kernels emu runs lack some of them (ComplexHalf for most
// math, Half and BFloat16 for a few kernels). Such an op is computed in the wider dtype CUDA itself
// computes in (its opmath type: Float for Half and BFloat16, ComplexFloat for ComplexHalf) and its
// results are cast back to the dtypes CUDA returns. Ops whose CUDA semantics differ from that (integer
// histc, bool trace, complex nansum, half FFT) have native kernels (EmuCudaDtypes.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/ScalarType.h>

namespace torch_emu {

// Half, BFloat16 and ComplexHalf: the dtypes CUDA computes through a wider opmath type.
bool is_narrow(c10::ScalarType t);
// The dtype a narrow dtype is computed in (Float or ComplexFloat); any other dtype maps to itself.
c10::ScalarType wider(c10::ScalarType t);

// The tensor in the dtype its narrow dtype is computed in (a copy), or itself (also undefined).
at::Tensor to_wider(const at::Tensor& t);

// Whether the error is aten's refusal of a narrow dtype by a kernel ("abs_cpu" not implemented for 'ComplexHalf').
bool is_narrow_dtype_refusal(const c10::Error& error);

// Whether a tensor argument of the op on the stack (also inside a list), or a requested dtype, is narrow.
bool has_narrow_argument(const c10::OperatorHandle& op, const torch::jit::Stack& stack);

// Runs the op on the stack with every narrow tensor argument (and requested dtype) widened, through the
// dispatcher from the top, then casts each result back to the dtype CUDA returns: a result in the widened
// inputs' promoted dtype (or its real or complex counterpart) goes back to the narrow one's. Arguments the
// op writes (out=, in-place) get the results copied back, and the returns that alias them are the caller's
// tensors again. Raises if a narrow argument is one the op returns a view of (a copy cannot alias it).
void call_widened(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// The CPU fallback for an op with narrow arguments: aten's CPU kernel when it takes the dtypes, else (its
// refusal of a narrow dtype, remembered per op and dtypes) the op computed widened. If the widened call is
// refused too, the CPU kernel's own error is raised.
void cpu_fallback_or_widened(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace torch_emu
