// EmuBackendMeta and its (de)serialization hooks. torch.save passes a tensor's metadata as a
// map of string to bool, so each entry travels as one key "emu_meta:<name>=<value>" set to true.
#include "EmuSerialization.h"

#include <c10/core/TensorImpl.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <unordered_map>

namespace torch_emu {
namespace {

constexpr const char* kPrefix = "emu_meta:";

struct EmuBackendMeta final : public c10::BackendMeta {
  explicit EmuBackendMeta(std::map<std::string, int64_t> v) : values(std::move(v)) {}
  // Copies of the tensor (detach, shallow copies, FakeTensor conversion through them) keep it.
  c10::intrusive_ptr<c10::BackendMeta> clone(const c10::intrusive_ptr<c10::BackendMeta>& /*ptr*/) const override {
    return c10::make_intrusive<EmuBackendMeta>(values);
  }
  std::map<std::string, int64_t> values;
};

void for_serialization(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  for (const auto& [name, value] : backend_meta(t)) metadata[kPrefix + name + "=" + std::to_string(value)] = true;
}

void for_deserialization(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  std::map<std::string, int64_t> values;
  const std::string prefix(kPrefix);
  for (const auto& [key, present] : metadata) {
    if (!present || key.rfind(prefix, 0) != 0) continue;
    const auto eq = key.find('=', prefix.size());
    if (eq == std::string::npos) continue;
    values[key.substr(prefix.size(), eq - prefix.size())] = std::stoll(key.substr(eq + 1));
  }
  if (!values.empty()) set_backend_meta(t, values);
}

const int registered = [] {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &for_serialization, &for_deserialization);
  return 0;
}();

}  // namespace

void set_backend_meta(const at::Tensor& t, const std::map<std::string, int64_t>& values) {
  (void)registered;
  auto* impl = t.unsafeGetTensorImpl();
  if (values.empty()) {
    impl->set_backend_meta(c10::intrusive_ptr<c10::BackendMeta>());
  } else {
    impl->set_backend_meta(c10::make_intrusive<EmuBackendMeta>(values));
  }
}

std::map<std::string, int64_t> backend_meta(const at::Tensor& t) {
  const auto* meta = dynamic_cast<const EmuBackendMeta*>(t.unsafeGetTensorImpl()->get_backend_meta());
  return meta == nullptr ? std::map<std::string, int64_t>{} : meta->values;
}

}  // namespace torch_emu
