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
#include <ATen/ops/empty.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <array>
#include <exception>
#include <map>
#include <tuple>

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
// dispatcher from the top, then casts each result back to the dtype CUDA returns: a result in the widened inputs'
// promoted dtype (or its real or complex counterpart) goes back to the narrow one's. (The meta device would know
// CUDA's result dtypes, but up to torch 2.1 many meta kernels are Python functions, whose errors cannot be dropped
// here without leaving Python's error indicator set; ops with other result dtypes have their own route, such as
// batch norm's Float statistics.) Arguments the
// op writes (out=, in-place) get the results copied back, and the returns that alias them are the caller's
// tensors again. Raises if a narrow argument is one the op returns a view of (a copy cannot alias it).
void call_widened(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// ---- native kernels ----
// A native kernel probes its CPU kernel on one-element CPU tensors of its dtypes (out, a, b; Undefined where it has
// fewer), at the call. When the CPU kernel refuses a narrow dtype among them but takes the wider ones, the kernel
// computes in those (computed, write_into) and its result keeps the dtype the op returns. Decided once per (op,
// dtypes) and thread; a refusal of the wider dtypes too raises the CPU kernel's error for the caller's dtypes.
using Dtypes = std::array<c10::ScalarType, 3>;

template <typename Probe>
bool computes_widened(const char* op, const Dtypes& dtypes, const Probe& probe) {
  thread_local std::map<std::tuple<const char*, int, int, int>, bool> decided;
  const auto key = std::make_tuple(op, int(dtypes[0]), int(dtypes[1]), int(dtypes[2]));
  const auto known = decided.find(key);
  if (known != decided.end())
    return known->second;
  bool widened = false;
  try {
    probe(dtypes);
  } catch (const c10::Error& error) {
    if (!is_narrow_dtype_refusal(error))
      throw;
    const std::exception_ptr refusal = std::current_exception();
    try {
      probe(Dtypes{wider(dtypes[0]), wider(dtypes[1]), wider(dtypes[2])});
    } catch (const c10::Error&) {
      std::rethrow_exception(refusal);
    }
    widened = true;
  }
  decided.emplace(key, widened);
  return widened;
}

// Kernel side: the view as the kernel computes it (a widened copy when the kernel computes widened).
inline at::Tensor computed(const at::Tensor& view, bool widened) {
  return widened ? to_wider(view) : view;
}

// Kernel side: f writes the result into out, or into a widened stand-in whose values go back into out.
template <typename F>
void write_into(const at::Tensor& out, bool widened, const F& f) {
  if (!widened || !is_narrow(out.scalar_type())) {
    f(out);
    return;
  }
  at::Tensor stand_in = at::empty(out.sizes(), out.options().dtype(wider(out.scalar_type())));
  f(stand_in);
  out.copy_(stand_in);
}

// ---- the CPU fallback ----
// The CPU fallback for an op with narrow arguments: aten's CPU kernel when it takes the dtypes, else (its
// refusal of a narrow dtype, remembered per op and dtypes) the op computed widened. If the widened call is
// refused too, the CPU kernel's own error is raised.
void cpu_fallback_or_widened(const c10::OperatorHandle& op, torch::jit::Stack* stack);

} // namespace torch_emu
