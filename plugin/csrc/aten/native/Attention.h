// emu's fused attention kernel (SDPBackend.OVERRIDEABLE), forward and backward; EmuAttention.cpp decides when
// scaled_dot_product_attention takes it and registers it for the releases that have the entry points.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <optional>

namespace torch_emu {
namespace native {

struct AttentionResult {
  at::Tensor output; // the query's shape with value's embedding size, laid out like the query
  at::Tensor logsumexp; // Float, (batch, heads, query length): each row's log-sum-exp of its scores
  at::Tensor attention; // Float probabilities (batch, heads, query length, key length), after dropout, if asked for
  at::Tensor philox_seed; // int64 on the device: the dropout seed the kernel used (0 without dropout)
  at::Tensor philox_offset; // int64 on the device: 0 (each kernel has a seed of its own)
};

// query, key and value 4-D (batch, heads, length, embedding) or 3-D (heads, length, embedding); bias undefined or
// broadcasting to the scores (bool: where true is kept; floating: added). Key and value heads divide the query's
// (grouped-query attention). Dropout draws from the device's generator, as emu's random kernels do.
AttentionResult fused_attention(
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    const at::Tensor& bias,
    double dropout_p,
    bool is_causal,
    bool return_attention,
    std::optional<double> scale);

// The gradients of query, key, value and a floating bias, each only where `wanted` says (else undefined).
std::array<at::Tensor, 4> fused_attention_backward(
    const at::Tensor& grad_out,
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    const at::Tensor& bias,
    std::array<bool, 4> wanted,
    double dropout_p,
    bool is_causal,
    const at::Tensor& philox_seed, // the forward's, read where dropout_p > 0
    std::optional<double> scale);

} // namespace native
} // namespace torch_emu
