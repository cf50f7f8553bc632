// The collectives of the emu device as operators (torch.ops.torch_emu.comm_*): thin calls into the driver's
// interconnect (API 2.3), each queued on the current emu stream of its tensors' device. The process group in
// torch_emu/distributed.py drives them; no CPython API here, so the wheel stays py3-none.
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/EmuException.h"
#include "runtime/EmuStream.h"

namespace torch_emu {
namespace {

bool comm_available() {
  return EMU_DRIVER_HAS_COMM != 0;
}

#if EMU_DRIVER_HAS_COMM

emuComm_t as_comm(int64_t handle) {
  TORCH_CHECK(handle != 0, "emu communicator handle is null");
  return reinterpret_cast<emuComm_t>(static_cast<intptr_t>(handle));
}

emuDataType data_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return emuFloat32;
    case at::kDouble:
      return emuFloat64;
    case at::kHalf:
      return emuFloat16;
    case at::kBFloat16:
      return emuBfloat16;
    case at::kInt:
      return emuInt32;
    case at::kLong:
      return emuInt64;
    case at::kShort:
      return emuInt16;
    case at::kChar:
      return emuInt8;
    case at::kByte:
      return emuUint8;
    case at::kBool:
      return emuBool;
    default:
      TORCH_CHECK(false, "emu collectives do not support dtype ", t.scalar_type());
  }
}

// A tensor a collective may use in place: on an emu device, contiguous (its bytes are one range).
c10::DeviceIndex checked(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, what, " must be an emu tensor, not on ", t.device());
  TORCH_CHECK(t.is_contiguous(), what, " must be contiguous for an emu collective");
  return t.device().index();
}

emuRedOp red_op(int64_t op) {
  TORCH_CHECK(op >= emuSum && op <= emuAvg, "unknown emu reduction ", op);
  return static_cast<emuRedOp>(op);
}

// The driver call, on the current stream of device, with device current for the calling thread.
template <typename F>
void on_stream(c10::DeviceIndex device, F&& call) {
  DeviceSwitch on(device);
  call(raw_stream(getCurrentEmuStream(device)));
}

std::string comm_unique_id() {
  emuCommUniqueId id{};
  EMU_CHECK(emuCommGetUniqueId(&id));
  return std::string(id.internal, strnlen(id.internal, sizeof(id.internal)));
}

int64_t comm_init(const std::string& uid, int64_t nranks, int64_t rank, int64_t device, int64_t timeout_ms) {
  emuCommUniqueId id{};
  TORCH_CHECK(uid.size() < sizeof(id.internal), "emu communicator id too long");
  std::memcpy(id.internal, uid.data(), uid.size());
  DeviceSwitch on(checked_device_index(device));
  emuComm_t comm = nullptr;
  EMU_CHECK(
      emuCommInitRank(&comm, static_cast<int>(nranks), id, static_cast<int>(rank), static_cast<unsigned>(timeout_ms)));
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(comm));
}

void comm_destroy(int64_t comm) {
  EMU_CHECK(emuCommDestroy(as_comm(comm)));
}
void comm_abort(int64_t comm) {
  EMU_CHECK(emuCommAbort(as_comm(comm)));
}
std::string comm_failure(int64_t comm) {
  return emuCommGetFailure(as_comm(comm));
}

void comm_all_reduce(int64_t comm, at::Tensor& tensor, int64_t op) {
  const auto device = checked(tensor, "all_reduce tensor");
  on_stream(device, [&](emuStream_t s) {
    EMU_CHECK(emuCommAllReduce(
        tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), data_type(tensor), red_op(op), as_comm(comm), s));
  });
}

void comm_reduce(int64_t comm, at::Tensor& tensor, int64_t op, int64_t root) {
  const auto device = checked(tensor, "reduce tensor");
  on_stream(device, [&](emuStream_t s) {
    EMU_CHECK(emuCommReduce(
        tensor.data_ptr(),
        tensor.data_ptr(),
        tensor.numel(),
        data_type(tensor),
        red_op(op),
        static_cast<int>(root),
        as_comm(comm),
        s));
  });
}

void comm_broadcast(int64_t comm, at::Tensor& tensor, int64_t root) {
  const auto device = checked(tensor, "broadcast tensor");
  on_stream(device, [&](emuStream_t s) {
    EMU_CHECK(emuCommBroadcast(
        tensor.data_ptr(),
        tensor.data_ptr(),
        tensor.numel(),
        data_type(tensor),
        static_cast<int>(root),
        as_comm(comm),
        s));
  });
}

// The input and output of a gather or a scatter: emu tensors on one device, of one dtype, the one holding every
// rank's block (the output of a gather, the input of a scatter) the group size times the other. Returns the device.
c10::DeviceIndex checked_blocks(
    int64_t comm,
    const std::string& name,
    const at::Tensor& input,
    const at::Tensor& output,
    bool output_is_whole) {
  const auto device = checked(output, (name + " output").c_str());
  TORCH_CHECK(checked(input, (name + " input").c_str()) == device, name, " input and output must share a device");
  TORCH_CHECK(
      input.scalar_type() == output.scalar_type(),
      name,
      " input is ",
      input.scalar_type(),
      " but the output is ",
      output.scalar_type());
  int n = 0;
  EMU_CHECK(emuCommCount(as_comm(comm), &n));
  const at::Tensor& whole = output_is_whole ? output : input;
  const at::Tensor& block = output_is_whole ? input : output;
  TORCH_CHECK(
      whole.numel() == block.numel() * n,
      name,
      output_is_whole ? " output has " : " input has ",
      whole.numel(),
      " elements; it needs the group size (",
      n,
      ") times the ",
      output_is_whole ? "input's " : "output's ",
      block.numel());
  return device;
}

void comm_all_gather(int64_t comm, at::Tensor& output, const at::Tensor& input) {
  const auto device = checked_blocks(comm, "all_gather", input, output, true);
  on_stream(device, [&](emuStream_t s) {
    EMU_CHECK(emuCommAllGather(input.data_ptr(), output.data_ptr(), input.numel(), data_type(input), as_comm(comm), s));
  });
}

void comm_reduce_scatter(int64_t comm, at::Tensor& output, const at::Tensor& input, int64_t op) {
  const auto device = checked_blocks(comm, "reduce_scatter", input, output, false);
  on_stream(device, [&](emuStream_t s) {
    EMU_CHECK(emuCommReduceScatter(
        input.data_ptr(), output.data_ptr(), output.numel(), data_type(output), red_op(op), as_comm(comm), s));
  });
}

void comm_send(int64_t comm, const at::Tensor& tensor, int64_t peer) {
  const auto device = checked(tensor, "send tensor");
  on_stream(device, [&](emuStream_t s) {
    EMU_CHECK(
        emuCommSend(tensor.data_ptr(), tensor.numel(), data_type(tensor), static_cast<int>(peer), as_comm(comm), s));
  });
}

void comm_recv(int64_t comm, at::Tensor& tensor, int64_t peer) {
  const auto device = checked(tensor, "recv tensor");
  on_stream(device, [&](emuStream_t s) {
    EMU_CHECK(
        emuCommRecv(tensor.data_ptr(), tensor.numel(), data_type(tensor), static_cast<int>(peer), as_comm(comm), s));
  });
}

void comm_group_start() {
  EMU_CHECK(emuCommGroupStart());
}
void comm_group_end() {
  EMU_CHECK(emuCommGroupEnd());
}

#else // driver API < 2.3: the operators exist and say why they cannot run

[[noreturn]] void unavailable() {
  TORCH_CHECK(
      false,
      "emu collectives need driver API 2.3 (the interconnect); this torch_emu was built against ",
      EMU_DRIVER_VERSION_MAJOR,
      ".",
      EMU_DRIVER_VERSION_MINOR);
}
std::string comm_unique_id() {
  unavailable();
}
int64_t comm_init(const std::string&, int64_t, int64_t, int64_t, int64_t) {
  unavailable();
}
void comm_destroy(int64_t) {
  unavailable();
}
void comm_abort(int64_t) {
  unavailable();
}
std::string comm_failure(int64_t) {
  unavailable();
}
void comm_all_reduce(int64_t, at::Tensor&, int64_t) {
  unavailable();
}
void comm_reduce(int64_t, at::Tensor&, int64_t, int64_t) {
  unavailable();
}
void comm_broadcast(int64_t, at::Tensor&, int64_t) {
  unavailable();
}
void comm_all_gather(int64_t, at::Tensor&, const at::Tensor&) {
  unavailable();
}
void comm_reduce_scatter(int64_t, at::Tensor&, const at::Tensor&, int64_t) {
  unavailable();
}
void comm_send(int64_t, const at::Tensor&, int64_t) {
  unavailable();
}
void comm_recv(int64_t, at::Tensor&, int64_t) {
  unavailable();
}
void comm_group_start() {
  unavailable();
}
void comm_group_end() {
  unavailable();
}

#endif

} // namespace

TORCH_LIBRARY_FRAGMENT(torch_emu, m) {
  m.def("comm_available() -> bool", &comm_available);
  m.def("comm_unique_id() -> str", &comm_unique_id);
  m.def("comm_init(str uid, int nranks, int rank, int device, int timeout_ms) -> int", &comm_init);
  m.def("comm_destroy(int comm) -> ()", &comm_destroy);
  m.def("comm_abort(int comm) -> ()", &comm_abort);
  m.def("comm_failure(int comm) -> str", &comm_failure);
  m.def("comm_all_reduce(int comm, Tensor(a!) tensor, int op) -> ()", &comm_all_reduce);
  m.def("comm_reduce(int comm, Tensor(a!) tensor, int op, int root) -> ()", &comm_reduce);
  m.def("comm_broadcast(int comm, Tensor(a!) tensor, int root) -> ()", &comm_broadcast);
  m.def("comm_all_gather(int comm, Tensor(a!) output, Tensor input) -> ()", &comm_all_gather);
  m.def("comm_reduce_scatter(int comm, Tensor(a!) output, Tensor input, int op) -> ()", &comm_reduce_scatter);
  m.def("comm_send(int comm, Tensor tensor, int peer) -> ()", &comm_send);
  m.def("comm_recv(int comm, Tensor(a!) tensor, int peer) -> ()", &comm_recv);
  m.def("comm_group_start() -> ()", &comm_group_start);
  m.def("comm_group_end() -> ()", &comm_group_end);
}

} // namespace torch_emu
