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
  at::Tensor attention; // Float probabilities (batch, heads, query length, key length) if asked for, else undefined
};

// query, key and value 4-D (batch, heads, length, embedding) or 3-D (heads, length, embedding); bias undefined or
// broadcasting to the scores (bool: where true is kept; floating: added). Key and value heads divide the query's
// (grouped-query attention). dropout_p > 0 raises NotImplementedError: the math backend runs those.
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
    std::optional<double> scale);

} // namespace native
} // namespace torch_emu
