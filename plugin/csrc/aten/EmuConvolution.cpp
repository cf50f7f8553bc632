// Convolutions on emu. For a device that is not CPU, CUDA or MKLDNN, at::convolution picks
// ConvBackend::Overrideable and calls convolution_overrideable / convolution_backward_overrideable,
// whose default kernels raise and which the boxed CPU fallback never sees; so both are native here.
// Shapes and argument checks are settled on the caller's thread, the arithmetic runs as stream work
// with ATen's CPU convolution on CPU tensors aliasing device memory (every variant: 1-3d, transposed,
// groups, dilation; padding modes other than zeros reach us already padded by torch.nn). Half and BFloat16
// convolutions accumulate in Float and round once, as CUDA's cuDNN descriptors ask (the CPU kernels round more
// often, which Complex Half convolutions, built from three real ones, magnify).
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <array>
#include <tuple>
#include <vector>

#include "aten/Launch.h"
#include "aten/Widen.h"

namespace torch_emu {

namespace {

using at::Tensor;

// One spatial parameter per spatial dimension (a single value broadcasts, as ATen's expand_param_if_needed).
std::vector<int64_t> per_dim(c10::IntArrayRef values, const char* name, int64_t spatial) {
  TORCH_CHECK(
      values.size() == 1 || static_cast<int64_t>(values.size()) == spatial,
      "convolution: expected ",
      name,
      " to be a single integer value or a list of ",
      spatial,
      " values to match the convolution dimensions, but got ",
      name,
      "=",
      values);
  return values.size() == 1 ? std::vector<int64_t>(static_cast<size_t>(spatial), values[0]) :
                              std::vector<int64_t>(values.begin(), values.end());
}

struct ConvParams {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
};

ConvParams make_params(
    const Tensor& input,
    const Tensor& weight,
    c10::IntArrayRef stride,
    c10::IntArrayRef padding,
    c10::IntArrayRef dilation,
    bool transposed,
    c10::IntArrayRef output_padding,
    int64_t groups) {
  TORCH_CHECK(
      input.dim() >= 3 && input.dim() <= 5,
      "convolution: expected a batched 3-D, 4-D or 5-D input, got ",
      input.dim(),
      "-D of shape ",
      input.sizes());
  TORCH_CHECK(
      weight.dim() == input.dim(),
      "convolution: expected weight to be ",
      input.dim(),
      "-D for input of shape ",
      input.sizes(),
      ", but got weight of size ",
      weight.sizes());
  TORCH_CHECK(groups > 0, "non-positive groups is not supported");
  const int64_t spatial = input.dim() - 2;
  ConvParams p{
      per_dim(stride, "stride", spatial),
      per_dim(padding, "padding", spatial),
      per_dim(dilation, "dilation", spatial),
      per_dim(output_padding, "output_padding", spatial),
      transposed,
      groups};
  for (int64_t d = 0; d < spatial; ++d) {
    const auto i = static_cast<size_t>(d);
    TORCH_CHECK(p.stride[i] > 0, "non-positive stride is not supported");
    TORCH_CHECK(p.padding[i] >= 0, "negative padding is not supported");
    TORCH_CHECK(p.dilation[i] > 0, "dilation should be greater than zero");
    TORCH_CHECK(p.output_padding[i] >= 0, "negative output_padding is not supported");
  }
  return p;
}

// Output shape of the convolution (ATen's conv_output_size / conv_input_size), checked like at::_convolution.
std::vector<int64_t> output_shape(const Tensor& input, const Tensor& weight, const ConvParams& p) {
  const int64_t in_channels = input.size(1);
  std::vector<int64_t> shape{input.size(0)};
  if (p.transposed) {
    TORCH_CHECK(
        in_channels == weight.size(0),
        "Given transposed=1, weight of size ",
        weight.sizes(),
        ", expected input",
        input.sizes(),
        " to have ",
        weight.size(0),
        " channels, but got ",
        in_channels,
        " channels instead");
    TORCH_CHECK(
        weight.size(0) % p.groups == 0,
        "Given groups=",
        p.groups,
        ", expected weight to be divisible by ",
        p.groups,
        " at dimension 0, but got weight of size ",
        weight.sizes(),
        " instead");
    shape.push_back(weight.size(1) * p.groups);
  } else {
    TORCH_CHECK(
        weight.size(0) % p.groups == 0,
        "Given groups=",
        p.groups,
        ", expected weight to be divisible by ",
        p.groups,
        " at dimension 0, but got weight of size ",
        weight.sizes(),
        " instead");
    TORCH_CHECK(
        in_channels == weight.size(1) * p.groups,
        "Given groups=",
        p.groups,
        ", weight of size ",
        weight.sizes(),
        ", expected input",
        input.sizes(),
        " to have ",
        weight.size(1) * p.groups,
        " channels, but got ",
        in_channels,
        " channels instead");
    shape.push_back(weight.size(0));
  }
  for (int64_t d = 2; d < input.dim(); ++d) {
    const auto i = static_cast<size_t>(d - 2);
    const int64_t kernel = p.dilation[i] * (weight.size(d) - 1) + 1;
    int64_t size = 0;
    if (p.transposed) {
      TORCH_CHECK(
          p.output_padding[i] < p.stride[i] || p.output_padding[i] < p.dilation[i],
          "output padding must be smaller than either stride or dilation, but got output_padding=",
          p.output_padding[i]);
      size = (input.size(d) - 1) * p.stride[i] - 2 * p.padding[i] + kernel + p.output_padding[i];
    } else {
      const int64_t padded = input.size(d) + 2 * p.padding[i];
      TORCH_CHECK(
          padded >= kernel,
          "Calculated padded input size per channel: (",
          padded,
          "). Kernel size: (",
          kernel,
          "). Kernel size can't be greater than actual input size");
      size = (padded - kernel) / p.stride[i] + 1;
    }
    TORCH_CHECK(size > 0, "convolution: computed output size ", size, " is too small (input ", input.sizes(), ")");
    shape.push_back(size);
  }
  return shape;
}

void check_dtypes(const Tensor& input, const Tensor& weight, const Tensor* bias) {
  TORCH_CHECK(
      input.scalar_type() == weight.scalar_type(),
      "Input type (",
      input.scalar_type(),
      ") and weight type (",
      weight.scalar_type(),
      ") should be the same");
  TORCH_CHECK(
      c10::isFloatingType(input.scalar_type()) || c10::isComplexType(input.scalar_type()),
      "convolution on emu: expected a floating point or complex input, got ",
      input.scalar_type());
  if (bias != nullptr && bias->defined()) {
    TORCH_CHECK(
        bias->scalar_type() == input.scalar_type(),
        "Input type (",
        input.scalar_type(),
        ") and bias type (",
        bias->scalar_type(),
        ") should be the same");
  }
}

int64_t out_channels(const Tensor& weight, const ConvParams& p) {
  return p.transposed ? weight.size(1) * p.groups : weight.size(0);
}

c10::MemoryFormat memory_format(const Tensor& input, const Tensor& weight) {
  // As on CPU: channels-last input or weight gives a channels-last result.
  const auto format = input.suggest_memory_format();
  if (format != c10::MemoryFormat::Contiguous)
    return format;
  return weight.suggest_memory_format();
}

Tensor convolution(
    const Tensor& input,
    const Tensor& weight,
    const compat::optional<Tensor>& bias_opt,
    c10::IntArrayRef stride,
    c10::IntArrayRef padding,
    c10::IntArrayRef dilation,
    bool transposed,
    c10::IntArrayRef output_padding,
    int64_t groups) {
  const Tensor bias = bias_opt.has_value() ? *bias_opt : Tensor();
  const auto device = common_device("convolution", {&input, &weight, &bias});
  check_dtypes(input, weight, &bias);
  const ConvParams p = make_params(input, weight, stride, padding, dilation, transposed, output_padding, groups);
  const auto shape = output_shape(input, weight, p);
  if (bias.defined()) {
    TORCH_CHECK(
        bias.dim() == 1 && bias.size(0) == shape[1],
        "Given weight of size ",
        weight.sizes(),
        ", expected bias to be 1-dimensional with ",
        shape[1],
        " elements, but got bias of size ",
        bias.sizes(),
        " instead");
  }
  auto options = input.options();
  Tensor out = at::empty(shape, options, memory_format(input, weight));
  launch(device, [out = arg(out), input = arg(input), weight = arg(weight), bias = arg(bias), p] {
    const Tensor result = at::convolution(
        to_wider(kernel_view(input)),
        to_wider(kernel_view(weight)),
        to_wider(kernel_view(bias)),
        p.stride,
        p.padding,
        p.dilation,
        p.transposed,
        p.output_padding,
        p.groups);
    kernel_view(out).copy_(result);
  });
  return out;
}

std::tuple<Tensor, Tensor, Tensor> convolution_backward(
    const Tensor& grad_output,
    const Tensor& input,
    const Tensor& weight,
    c10::IntArrayRef stride,
    c10::IntArrayRef padding,
    c10::IntArrayRef dilation,
    bool transposed,
    c10::IntArrayRef output_padding,
    int64_t groups,
    std::array<bool, 3> output_mask) {
  const auto device = common_device("convolution_backward", {&grad_output, &input, &weight});
  check_dtypes(input, weight, nullptr);
  TORCH_CHECK(
      grad_output.scalar_type() == input.scalar_type(),
      "convolution_backward: grad_output type (",
      grad_output.scalar_type(),
      ") and input type (",
      input.scalar_type(),
      ") should be the same");
  const ConvParams p = make_params(input, weight, stride, padding, dilation, transposed, output_padding, groups);
  const auto shape = output_shape(input, weight, p);
  TORCH_CHECK(
      grad_output.sizes() == c10::IntArrayRef(shape),
      "convolution_backward: expected grad_output of shape ",
      shape,
      " but got ",
      grad_output.sizes());
  const auto format = memory_format(input, weight);
  Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0])
    grad_input = at::empty(input.sizes(), input.options(), format);
  if (output_mask[1])
    grad_weight = at::empty(weight.sizes(), weight.options(), weight.suggest_memory_format());
  const int64_t channels = out_channels(weight, p);
  if (output_mask[2])
    grad_bias = at::empty({channels}, grad_output.options());
  launch(
      device,
      [grad_input = arg(grad_input),
       grad_weight = arg(grad_weight),
       grad_bias = arg(grad_bias),
       grad_output = arg(grad_output),
       input = arg(input),
       weight = arg(weight),
       p,
       channels,
       output_mask] {
        const std::vector<int64_t> bias_sizes{channels};
        auto grads = at::convolution_backward(
            to_wider(kernel_view(grad_output)),
            to_wider(kernel_view(input)),
            to_wider(kernel_view(weight)),
            bias_sizes,
            p.stride,
            p.padding,
            p.dilation,
            p.transposed,
            p.output_padding,
            p.groups,
            output_mask);
        if (output_mask[0])
          kernel_view(grad_input).copy_(std::get<0>(grads));
        if (output_mask[1])
          kernel_view(grad_weight).copy_(std::get<1>(grads));
        if (output_mask[2])
          kernel_view(grad_bias).copy_(std::get<2>(grads));
      });
  return {grad_input, grad_weight, grad_bias};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", convolution);
  m.impl("convolution_backward_overrideable", convolution_backward);
}

} // namespace torch_emu
