// The emu random generator. Each random kernel takes one 64-bit seed from the device's
// generator when it is queued (caller's thread, in program order) and runs ATen's CPU
// sampler seeded with it on the stream: results depend only on manual_seed and the order
// of random ops, never on when the stream runs them.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <cstdint>
#include <optional>

#include "TorchCompat.h"

namespace torch_emu {

struct EmuGeneratorImpl : public c10::GeneratorImpl {
  explicit EmuGeneratorImpl(c10::DeviceIndex device, uint64_t seed = 67280421310721ULL);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() {
    return c10::DeviceType::PrivateUse1;
  }

  // The seed for the next random kernel (callers hold mutex_).
  uint64_t next_kernel_seed();

 private:
  EmuGeneratorImpl* clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);
// The seed for one random kernel on `device`, from gen or the device's default generator.
uint64_t draw_kernel_seed(const compat::optional<at::Generator>& gen, c10::DeviceIndex device);

} // namespace torch_emu
