// In-place random sampling on emu tensors (what torch.rand/randn/randint/dropout reach), and the
// emu-to-CPU generator swap for random ops that run through the CPU fallback.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "aten/Fallback.h"
#include "aten/Launch.h"
#include "aten/Widen.h"
#include "runtime/EmuGenerator.h"
#if EMU_DRIVER_HAS_GRAPHS
#include "runtime/EmuGraph.h"
#endif

namespace torch_emu {

namespace {

using at::Tensor;

// Queues `sample(view, cpu_generator)` with a CPU generator seeded from the emu generator now. `probe(t, g)` samples
// a one-element CPU tensor t the same way, at the call: a CPU kernel that refuses the dtype raises here, and one that
// refuses a narrow dtype CUDA samples in (Half on older releases) samples into a widened stand-in instead (Widen.h).
// f(view, generator, widened) and probe(view, generator, dtypes) get the dtype of a tensor argument, if the op has one,
// as second of the dtypes.
template <typename F, typename P>
Tensor& sample(
    const char* op,
    Tensor& self,
    const compat::optional<at::Generator>& gen,
    const Dtypes& dtypes,
    F f,
    P probe) {
  const auto device = common_device(op, {&self});
  const bool widened = computes_widened(op, dtypes, [&](const Dtypes& d) {
    at::Generator cpu = at::make_generator<at::CPUGeneratorImpl>(0);
    probe(at::zeros({1}, at::TensorOptions().dtype(d[0])), cpu, d);
  });
  const uint64_t seed = draw_kernel_seed(gen, device);
#if EMU_DRIVER_HAS_GRAPHS
  // Captured into a graph: the seed is the replay's, drawn when the kernel runs (runtime/EmuGraph.h).
  launch(device, [self = arg(self), seed, graph = graph_seed_slot(device), f, widened] {
    at::Generator cpu = at::make_generator<at::CPUGeneratorImpl>(graph ? graph->value() : seed);
#else
  launch(device, [self = arg(self), seed, f, widened] {
    at::Generator cpu = at::make_generator<at::CPUGeneratorImpl>(seed);
#endif
    write_into(kernel_view(self), widened, [&](Tensor v) { f(v, cpu, widened); });
  });
  return self;
}
// A sampler with scalar parameters only: f(view, generator) is its own probe.
template <typename F>
Tensor& sample(const char* op, Tensor& self, const compat::optional<at::Generator>& gen, F f) {
  return sample(
      op,
      self,
      gen,
      {self.scalar_type(), c10::ScalarType::Undefined, c10::ScalarType::Undefined},
      [f](Tensor v, const at::Generator& g, bool) { f(v, g); },
      [f](Tensor v, const at::Generator& g, const Dtypes&) { f(v, g); });
}

Tensor& normal_(Tensor& self, double mean, double std, compat::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  return sample("normal_", self, gen, [mean, std](Tensor v, const at::Generator& g) { v.normal_(mean, std, g); });
}
Tensor& uniform_(Tensor& self, double from, double to, compat::optional<at::Generator> gen) {
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  return sample("uniform_", self, gen, [from, to](Tensor v, const at::Generator& g) { v.uniform_(from, to, g); });
}
Tensor& bernoulli_float(Tensor& self, double p, compat::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  return sample("bernoulli_", self, gen, [p](Tensor v, const at::Generator& g) { v.bernoulli_(p, g); });
}
Tensor& bernoulli_tensor(Tensor& self, const Tensor& p, compat::optional<at::Generator> gen) {
  common_device("bernoulli_", {&self, &p});
  return sample(
      "bernoulli_.Tensor",
      self,
      gen,
      {self.scalar_type(), p.scalar_type(), c10::ScalarType::Undefined},
      [p = arg(p)](Tensor v, const at::Generator& g, bool widened) {
        v.bernoulli_(computed(kernel_view(p), widened), g);
      },
      [](Tensor v, const at::Generator& g, const Dtypes& d) {
        v.bernoulli_(at::full({1}, 0.5, at::TensorOptions().dtype(d[1])), g);
      });
}
Tensor& random_from(Tensor& self, int64_t from, compat::optional<int64_t> to, compat::optional<at::Generator> gen) {
  return sample("random_", self, gen, [from, to](Tensor v, const at::Generator& g) { v.random_(from, to, g); });
}
Tensor& random_to(Tensor& self, int64_t to, compat::optional<at::Generator> gen) {
  return sample("random_", self, gen, [to](Tensor v, const at::Generator& g) { v.random_(to, g); });
}
Tensor& random_all(Tensor& self, compat::optional<at::Generator> gen) {
  return sample("random_", self, gen, [](Tensor v, const at::Generator& g) { v.random_(g); });
}

// The emu device an op works on: that of its first emu tensor argument, or -1.
c10::DeviceIndex emu_device_of(const torch::jit::Stack& stack, size_t first) {
  for (size_t i = first; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == c10::DeviceType::PrivateUse1)
      return v.toTensor().device().index();
    if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec())
        if (t.defined() && t.device().type() == c10::DeviceType::PrivateUse1)
          return t.device().index();
    }
  }
  return -1;
}

} // namespace

void emu_generators_to_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& arguments = op.schema().arguments();
  const size_t first = stack->size() - arguments.size();
  for (size_t i = 0; i < arguments.size(); ++i) {
    c10::IValue& v = (*stack)[first + i];
    compat::optional<at::Generator> gen;
    c10::DeviceIndex device = -1;
    if (v.isGenerator()) {
      gen = v.toGenerator();
      if (gen->device().type() != c10::DeviceType::PrivateUse1)
        continue;
      device = gen->device().index();
    } else if (
        v.isNone() && arguments[i].type()->kind() == c10::TypeKind::OptionalType &&
        arguments[i].type()->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType) {
      device = emu_device_of(*stack, first); // no generator: the emu device's default one, as for native kernels
      if (device < 0)
        continue;
    } else {
      continue;
    }
    v = c10::IValue(at::make_generator<at::CPUGeneratorImpl>(draw_kernel_seed(gen, device)));
  }
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("normal_", normal_);
  m.impl("uniform_", uniform_);
  m.impl("bernoulli_.float", bernoulli_float);
  m.impl("bernoulli_.Tensor", bernoulli_tensor);
  m.impl("random_.from", random_from);
  m.impl("random_.to", random_to);
  m.impl("random_", random_all);
}

} // namespace torch_emu
