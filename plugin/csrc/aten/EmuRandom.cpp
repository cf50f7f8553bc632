// In-place random sampling on emu tensors (what torch.rand/randn/randint/dropout reach).
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "../runtime/EmuGenerator.h"
#include "Launch.h"

namespace torch_emu {

namespace {

using at::Tensor;

// Queues `sample(view, cpu_generator)` with a CPU generator seeded from the emu generator now.
template <typename F>
Tensor& sample(const char* op, Tensor& self, const compat::optional<at::Generator>& gen, F f) {
  const auto device = common_device(op, {&self});
  const uint64_t seed = draw_kernel_seed(gen, device);
  launch(device, [self = arg(self), seed, f] {
    at::Generator cpu = at::make_generator<at::CPUGeneratorImpl>(seed);
    f(kernel_view(self), cpu);
  });
  return self;
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
  return sample("bernoulli_", self, gen, [p = arg(p)](Tensor v, const at::Generator& g) { v.bernoulli_(kernel_view(p), g); });
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

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("normal_", normal_);
  m.impl("uniform_", uniform_);
  m.impl("bernoulli_.float", bernoulli_float);
  m.impl("bernoulli_.Tensor", bernoulli_tensor);
  m.impl("random_.from", random_from);
  m.impl("random_.to", random_to);
  m.impl("random_", random_all);
}

}  // namespace torch_emu
