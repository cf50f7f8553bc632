// Tensor.record_stream on emu: tells the caching allocator that work on another stream uses the
// tensor's block, so a free does not hand the block to its own stream again before that work is done.
#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>
#include <torch/library.h>

#include "runtime/EmuAllocator.h"

namespace torch_emu {

namespace {

void record_stream_op(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(
      self.device().type() == c10::DeviceType::PrivateUse1,
      "record_stream: expected an emu tensor, got ",
      self.device());
  TORCH_CHECK(
      stream.device_type() == c10::DeviceType::PrivateUse1 && stream.device_index() == self.device().index(),
      "record_stream: the stream is on ",
      stream.device(),
      " but the tensor is on ",
      self.device());
  record_stream(self.storage().data_ptr(), stream);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", record_stream_op);
}

} // namespace torch_emu
