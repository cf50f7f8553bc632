// The CPU fallback for every op without a native emu kernel, and its per-op counts.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace torch {
class Library;
} // namespace torch

namespace torch_emu {

// The boxed CPU fallback registered for every emu dispatch key; also bound explicitly to ops whose
// composite default kernel would otherwise shadow the fallback for one layout (EmuSparse.cpp).
void emu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Operator name ("aten::addcmul_" or "aten::add.out") -> times it ran through the CPU fallback.
std::map<std::string, int64_t> fallback_counts();
void reset_fallback_counts();

// Before an op runs through the CPU fallback: its Generator arguments (an emu generator, or none
// when the op works on emu tensors) become CPU generators seeded from the emu generator, so the
// CPU kernel accepts them and torch.emu.manual_seed / an explicit emu generator reproduce the
// result. Defined with the random kernels (EmuRandom.cpp).
void emu_generators_to_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Whether an argument of the op on the stack is a sparse or compressed tensor, or a quantized one, and the
// fallback for those ops: arguments to the CPU, the op called through the dispatcher for whatever kind of CPU
// tensor they became, results back (EmuSparse.cpp). aten's cpu_fallback cannot serve them: it always runs the
// dense CPU kernel.
bool needs_dispatching_fallback(const c10::OperatorHandle& op, const torch::jit::Stack& stack);
bool has_unknown_quantizer(const at::Tensor& t);
void dispatching_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Ops the CPU runs with a kernel of its own for a layout or dtype kind (cpu_key: SparseCPU, SparseCsrCPU,
// QuantizedCPU) often also have a composite default kernel, and that default wins over a backend fallback: on
// emu it would run the dense algorithm on such a tensor. So every aten op with a cpu_key kernel and none for
// emu_key yet is bound to emu_fallback by name, read from the dispatcher when this is called: call it at load
// time, after the unit's own emu_key registrations (static initialisation follows definition order).
std::unique_ptr<torch::Library> bind_fallback_where_cpu_has_kernel(c10::DispatchKey cpu_key, c10::DispatchKey emu_key);

} // namespace torch_emu
