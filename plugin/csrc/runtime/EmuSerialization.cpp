// EmuBackendMeta and its (de)serialization hooks, registered for PrivateUse1 in torch's
// TensorBackendMetaRegistry: torch.save asks the first for a tensor's metadata, torch.load and
// torch._utils.set_tensor_metadata hand a map to the second.
#include "runtime/EmuSerialization.h"

#include <c10/core/TensorImpl.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <cstdlib>
#include <unordered_map>

namespace torch_emu {
namespace {

constexpr const char* kPrefix = "emu_meta:";

using Entries = std::map<std::string, bool>;

struct EmuBackendMeta final : public c10::BackendMeta {
  explicit EmuBackendMeta(Entries e) : entries(std::move(e)) {}
  // Copies of the tensor (detach, shallow copies, torch._C._copy_backend_meta) keep it.
  c10::intrusive_ptr<c10::BackendMeta> clone(const c10::intrusive_ptr<c10::BackendMeta>& /*ptr*/) const override {
    return c10::make_intrusive<EmuBackendMeta>(entries);
  }
  Entries entries;
};

Entries entries_of(const at::Tensor& t) {
  const auto* meta = dynamic_cast<const EmuBackendMeta*>(t.unsafeGetTensorImpl()->get_backend_meta());
  return meta == nullptr ? Entries{} : meta->entries;
}

void set_entries(const at::Tensor& t, Entries entries) {
  auto* impl = t.unsafeGetTensorImpl();
  if (entries.empty()) {
    impl->set_backend_meta(c10::intrusive_ptr<c10::BackendMeta>());
  } else {
    impl->set_backend_meta(c10::make_intrusive<EmuBackendMeta>(std::move(entries)));
  }
}

bool is_named_integer(const std::string& key) {
  return key.rfind(kPrefix, 0) == 0;
}

void for_serialization(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  for (const auto& [key, value] : entries_of(t))
    metadata[key] = value;
}

// The map replaces the tensor's metadata, as the reference backend's hook does.
void for_deserialization(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  set_entries(t, Entries(metadata.begin(), metadata.end()));
}

const int backend_meta_registered = [] {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &for_serialization, &for_deserialization);
  return 0;
}();

} // namespace

void set_backend_meta(const at::Tensor& t, const std::map<std::string, int64_t>& values) {
  (void)backend_meta_registered;
  Entries entries;
  for (const auto& [key, value] : entries_of(t))
    if (!is_named_integer(key))
      entries[key] = value;
  for (const auto& [name, value] : values)
    entries[kPrefix + name + "=" + std::to_string(value)] = true;
  set_entries(t, std::move(entries));
}

std::map<std::string, int64_t> backend_meta(const at::Tensor& t) {
  std::map<std::string, int64_t> values;
  const std::string prefix(kPrefix);
  for (const auto& [key, present] : entries_of(t)) {
    if (!present || !is_named_integer(key))
      continue;
    const auto eq = key.find('=', prefix.size());
    if (eq == std::string::npos)
      continue;
    const std::string number = key.substr(eq + 1);
    char* end = nullptr;
    const long long value = std::strtoll(number.c_str(), &end, 10);
    if (number.empty() || *end != '\0')
      continue; // not one of ours (set through torch._utils.set_tensor_metadata)
    values[key.substr(prefix.size(), eq - prefix.size())] = value;
  }
  return values;
}

void copy_backend_meta(const at::Tensor& src, const at::Tensor& dst) {
  (void)backend_meta_registered;
  Entries entries = entries_of(src);
  if (!entries.empty())
    set_entries(dst, std::move(entries));
}

} // namespace torch_emu
