// Ops whose CUDA kernels take dtypes the CPU kernels refuse, where computing widened (Widen.h) would not give
// CUDA's result: each follows its CUDA kernel. Every other dtype goes on to the CPU fallback.
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/histc_ops.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/nansum_ops.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <string>
#include <vector>

#include "aten/Fallback.h"
#include "aten/Launch.h"
#include "aten/Widen.h"

namespace torch_emu {

namespace {

using at::Tensor;

// ---- histc of integers ----
// transformers' mixture-of-experts layers count tokens per expert with torch.histc on int32 on every device but
// the CPU and MPS. CUDA's integer histc (SummaryOps.cu, _histc_cuda_template) differs from the CPU's floating one:
// min and max become integers of the input's dtype, the bin is ((x - min) * bins / (max - min)) in int64
// arithmetic, truncated, with x == max in the last bin, and the counts have the input's dtype.
template <typename scalar_t>
Tensor integer_histc(const Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  const auto device = common_device("histc", {&self});
  TORCH_CHECK(bins > 0, "bins must be > 0");
  const int64_t lo = min.to<int64_t>();
  const int64_t hi = max.to<int64_t>();
  auto minvalue = static_cast<scalar_t>(lo);
  auto maxvalue = static_cast<scalar_t>(hi);
  if (lo == hi && self.numel() > 0) {
    minvalue = self.min().item<scalar_t>();
    maxvalue = self.max().item<scalar_t>();
  }
  if (minvalue == maxvalue) {
    minvalue = static_cast<scalar_t>(minvalue - 1);
    maxvalue = static_cast<scalar_t>(maxvalue + 1);
  }
  TORCH_CHECK(minvalue < maxvalue, "max must be larger than min");
  Tensor out = at::zeros({bins}, self.options());
  launch(device, [out = arg(out), self = arg(self), bins, first = int64_t(minvalue), last = int64_t(maxvalue)] {
    const Tensor values = kernel_view(self).contiguous();
    std::vector<int64_t> counts(static_cast<size_t>(bins), 0);
    const scalar_t* data = values.data_ptr<scalar_t>();
    for (int64_t i = 0; i < values.numel(); ++i) {
      const auto v = static_cast<int64_t>(data[i]);
      if (v < first || v > last)
        continue;
      int64_t bin = static_cast<int>((v - first) * bins / (last - first));
      if (bin == bins)
        bin -= 1;
      counts[static_cast<size_t>(bin)] += 1;
    }
    // The counts in the input's dtype, wrapping as CUDA's atomic adds in that dtype do.
    kernel_view(out).copy_(at::from_blob(counts.data(), {bins}, at::TensorOptions().dtype(at::kLong)));
  });
  return out;
}

Tensor histc_like_cuda(const Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  if (!c10::isIntegralType(self.scalar_type(), /*includeBool=*/false))
    return at::native::call_fallback_fn<&emu_fallback, at::_ops::histc>::call(self, bins, min, max);
  Tensor out;
  AT_DISPATCH_INTEGRAL_TYPES(self.scalar_type(), "histc", [&] { out = integer_histc<scalar_t>(self, bins, min, max); });
  return out;
}

Tensor& histc_out(const Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max, Tensor& out) {
  if (!c10::isIntegralType(self.scalar_type(), /*includeBool=*/false))
    return at::native::call_fallback_fn<&emu_fallback, at::_ops::histc_out>::call(self, bins, min, max, out);
  const Tensor result = histc_like_cuda(self, bins, min, max);
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return out;
}

// ---- trace ----
// CUDA's trace is the sum of the diagonal, so it takes every dtype sum takes (Bool, ComplexHalf); the CPU kernel
// refuses those.
Tensor trace_like_cuda(const Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "expected a matrix");
  return self.diagonal().sum();
}

// ---- nansum of complex numbers ----
// The CPU refuses complex inputs ("nansum on CPU does not support complex inputs"); CUDA sums them, an element
// with a NaN real or imaginary part counting as zero.
Tensor nansum_like_cuda(
    const Tensor& self,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    compat::optional<c10::ScalarType> dtype) {
  if (!self.is_complex())
    return at::native::call_fallback_fn<&emu_fallback, at::_ops::nansum>::call(self, dim, keepdim, dtype);
  return at::sum(self.masked_fill(at::isnan(self), 0), dim, keepdim, dtype);
}

Tensor& nansum_out(
    const Tensor& self,
    at::OptionalIntArrayRef dim,
    bool keepdim,
    compat::optional<c10::ScalarType> dtype,
    Tensor& out) {
  if (!self.is_complex())
    return at::native::call_fallback_fn<&emu_fallback, at::_ops::nansum_out>::call(self, dim, keepdim, dtype, out);
  const Tensor result = nansum_like_cuda(
      self, dim, keepdim, dtype.has_value() ? dtype : compat::optional<c10::ScalarType>(out.scalar_type()));
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return out;
}

// ---- torch.fft in Half and ComplexHalf ----
// torch.fft's functions are composites that refuse Half before any kernel runs, except on CUDA (promote_type_fft
// in SpectralOps.cpp); cuFFT computes Half and ComplexHalf. On emu they take them too: computed in Float and
// ComplexFloat, with autograd (this kernel also serves the autograd key), the results cast back to Half and
// ComplexHalf. Every other dtype runs the composite itself. Unlike cuFFT, sizes need not be powers of two.
void fft_in_narrow_dtypes(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t first = stack->size() - op.schema().arguments().size();
  const c10::IValue& self = (*stack)[first];
  const auto dtype = self.isTensor() ? self.toTensor().scalar_type() : c10::ScalarType::Undefined;
  if (dtype == c10::ScalarType::Half || dtype == c10::ScalarType::ComplexHalf)
    call_widened(op, stack);
  else
    op.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd, *stack);
}

const char* const kFftFunctions[] = {
    "fft_fft",
    "fft_ifft",
    "fft_rfft",
    "fft_irfft",
    "fft_hfft",
    "fft_ihfft",
    "fft_fft2",
    "fft_ifft2",
    "fft_rfft2",
    "fft_irfft2",
    "fft_hfft2",
    "fft_ihfft2",
    "fft_fftn",
    "fft_ifftn",
    "fft_rfftn",
    "fft_irfftn",
    "fft_hfftn",
    "fft_ihfftn",
};

void register_fft(torch::Library& m) {
  for (const char* name : kFftFunctions) {
    for (const std::string overload : {"", "out"}) {
      const std::string qualified = std::string("aten::") + name + (overload.empty() ? "" : "." + overload);
      m.impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&fft_in_narrow_dtypes>());
    }
  }
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histc", histc_like_cuda);
  m.impl("histc.out", histc_out);
  m.impl("trace", trace_like_cuda);
  m.impl("nansum", nansum_like_cuda);
  m.impl("nansum.out", nansum_out);
  register_fft(m);
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  register_fft(m);
}

} // namespace torch_emu
