// Runs a host function that torch.compile's Inductor generated (C++ compiled on the fly) as
// a kernel on the current emu stream: when the stream reaches it, each tensor argument is
// translated to the kernel's view of its bytes and the function is called with those
// pointers and the integer arguments. The generated source carries a shim with one fixed
// signature, `void emu_entry(const uint64_t* args)`, that casts each slot back to the
// kernel's own parameter type, so no call here depends on the kernel's signature.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <cstdint>
#include <vector>

#include "aten/Launch.h"

namespace torch_emu {
namespace {

using EntryFn = void (*)(const uint64_t*);

// kinds[i]: 0 = a tensor (values[i] indexes `tensors`), 1 = an integer or the bits of a double (values[i] itself).
void launch_host_kernel(int64_t entry, at::TensorList tensors, at::IntArrayRef kinds, at::IntArrayRef values) {
  TORCH_CHECK(entry != 0, "launch_host_kernel: no kernel entry point");
  TORCH_CHECK(
      kinds.size() == values.size(), "launch_host_kernel: ", kinds.size(), " kinds for ", values.size(), " values");
  c10::DeviceIndex device = -1;
  std::vector<KernelArg> captured;
  captured.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.defined(), "launch_host_kernel: an undefined tensor argument");
    if (!t.is_cpu()) {
      TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "launch_host_kernel: a tensor on ", t.device());
      TORCH_CHECK(
          device == -1 || device == t.device().index(),
          "launch_host_kernel: tensors on two emu devices, emu:",
          int(device),
          " and emu:",
          int(t.device().index()));
      device = t.device().index();
      check_storage(t, "launch_host_kernel");
    }
    captured.push_back(arg(t));
  }
  if (device == -1)
    device = current_device();
  std::vector<int64_t> slots(kinds.begin(), kinds.end());
  std::vector<int64_t> given(values.begin(), values.end());
  for (size_t i = 0; i < slots.size(); ++i) {
    TORCH_CHECK(slots[i] == 0 || slots[i] == 1, "launch_host_kernel: argument ", i, " has unknown kind ", slots[i]);
    TORCH_CHECK(
        slots[i] == 1 || (given[i] >= 0 && given[i] < static_cast<int64_t>(captured.size())),
        "launch_host_kernel: argument ",
        i,
        " names tensor ",
        given[i],
        " of ",
        captured.size());
  }
  launch(
      device,
      [fn = reinterpret_cast<EntryFn>(entry),
       captured = std::move(captured),
       slots = std::move(slots),
       given = std::move(given)] {
        std::vector<uint64_t> args(slots.size());
        for (size_t i = 0; i < slots.size(); ++i) {
          if (slots[i] == 1) {
            args[i] = static_cast<uint64_t>(given[i]);
            continue;
          }
          const KernelArg& a = captured[static_cast<size_t>(given[i])];
          if (a.host.defined()) {
            args[i] = reinterpret_cast<uint64_t>(a.host.data_ptr());
            continue;
          }
          void* base = nullptr;
          if (a.nbytes > 0)
            EMU_CHECK(emuKernelTranslate(a.data, a.nbytes, &base));
          const auto offset = a.offset * static_cast<int64_t>(c10::elementSize(a.dtype));
          args[i] = reinterpret_cast<uint64_t>(static_cast<char*>(base) + offset);
        }
        fn(args.data());
      });
}

} // namespace

TORCH_LIBRARY_FRAGMENT(torch_emu, m) {
  m.def("launch_host_kernel(int entry, Tensor(a!)[] tensors, int[] kinds, int[] values) -> ()", &launch_host_kernel);
}

} // namespace torch_emu
