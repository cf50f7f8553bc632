// emu's fused attention kernel (SDPBackend.OVERRIDEABLE): one piece of stream work each way, ATen's CPU math on CPU
// tensors aliasing the device bytes, in the math backend's steps (scores of the query and key each scaled by the
// scale's square root, softmax, a fully masked row giving zeros, dropout), in Float for Half and BFloat16. The forward
// returns the output and the rows' logsumexp, as the op's schema asks; the backward recomputes the probabilities with
// softmax, as the math backend's autograd has them, rather than as exp(scores - logsumexp): with op_db's samples
// (scores up to ~200) that lost Float precision and gave gradients of ~30 five times the CPU's error (1.5e-4 against
// 3e-5, to a Double reference).
#include "aten/native/Attention.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "aten/Launch.h"
#include "aten/Widen.h"
#include "runtime/EmuGenerator.h"
#if EMU_DRIVER_HAS_GRAPHS
#include "runtime/EmuGraph.h"
#endif

namespace torch_emu {
namespace native {

using at::Tensor;

namespace {

constexpr const char* kForward = "_scaled_dot_product_fused_attention_overrideable";
constexpr const char* kBackward = "_scaled_dot_product_fused_attention_overrideable_backward";

struct Problem {
  bool causal = false;
  double scale = 1.0;
  int64_t groups = 1; // query heads per key/value head (grouped-query attention)
  double dropout_p = 0.0;
};

// The caller's checks: what the kernel computes must be what the math backend computes.
Problem check_problem(
    const char* op,
    const Tensor& query,
    const Tensor& key,
    const Tensor& value,
    const Tensor& bias,
    double dropout_p,
    bool is_causal,
    std::optional<double> scale) {
  TORCH_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, op, ": expected 0 <= dropout_p < 1, got ", dropout_p);
  TORCH_CHECK(
      (query.dim() == 4 || query.dim() == 3) && key.dim() == query.dim() && value.dim() == query.dim(),
      op,
      ": expected query, key and value to be 4-D (batch, heads, sequence, embedding) or 3-D (heads, sequence, "
      "embedding), got ",
      query.sizes(),
      ", ",
      key.sizes(),
      " and ",
      value.sizes());
  TORCH_CHECK(
      c10::isFloatingType(query.scalar_type()) && key.scalar_type() == query.scalar_type() &&
          value.scalar_type() == query.scalar_type(),
      op,
      ": expected query, key and value of one floating dtype, got ",
      query.scalar_type(),
      ", ",
      key.scalar_type(),
      " and ",
      value.scalar_type());
  const int64_t heads = query.size(-3);
  const int64_t kv_heads = key.size(-3);
  const bool batched = query.dim() == 4;
  TORCH_CHECK(
      (!batched || (key.size(0) == query.size(0) && value.size(0) == query.size(0))) && value.size(-3) == kv_heads &&
          value.size(-2) == key.size(-2) && key.size(-1) == query.size(-1) && kv_heads > 0 && heads % kv_heads == 0,
      op,
      ": expected key and value of the query's batch, one number of heads dividing the query's, one sequence length, "
      "and key of the query's embedding size; got query ",
      query.sizes(),
      ", key ",
      key.sizes(),
      ", value ",
      value.sizes());
  if (bias.defined()) {
    TORCH_CHECK(
        !is_causal, op, ": _scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True");
    TORCH_CHECK(
        bias.scalar_type() == at::kBool || c10::isFloatingType(bias.scalar_type()),
        op,
        ": expected attn_bias of dtype bool or floating, got ",
        bias.scalar_type());
    const std::vector<int64_t> scores{batched ? query.size(0) : 1, heads, query.size(-2), key.size(-2)};
    TORCH_CHECK(
        at::is_expandable_to(bias.sizes(), scores),
        op,
        ": attn_bias of shape ",
        bias.sizes(),
        " does not broadcast to the attention scores' ",
        c10::IntArrayRef(scores));
  }
  Problem p;
  p.causal = is_causal;
  p.scale = scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
  p.groups = heads / kv_heads;
  p.dropout_p = dropout_p;
  return p;
}

// An output of `shape` laid out in memory like the query (as torch's Meta kernel for the op, so compiled code
// sees the strides eager gives).
Tensor like_query(const Tensor& query, c10::IntArrayRef shape) {
  if (query.sizes() == shape)
    return at::empty_like(query, at::MemoryFormat::Preserve);
  std::vector<int64_t> order(static_cast<size_t>(query.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return query.stride(a) > query.stride(b); });
  std::vector<int64_t> strides(order.size());
  int64_t stride = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[static_cast<size_t>(*it)] = stride;
    stride *= shape[static_cast<size_t>(*it)];
  }
  return at::empty_strided(shape, strides, query.options());
}

// Kernel side, on CPU tensors: 4-D, in the computing dtype.
Tensor as_batched(const Tensor& t) {
  return t.dim() == 3 ? t.unsqueeze(0) : t;
}
Tensor batched_input(const KernelArg& a) {
  return as_batched(to_wider(kernel_view(a)));
}

// Each key/value head serves `groups` consecutive query heads (repeat_interleave along the heads).
Tensor repeat_heads(const Tensor& t, int64_t groups) {
  if (groups == 1)
    return t;
  return t.unsqueeze(2).expand({t.size(0), t.size(1), groups, t.size(2), t.size(3)}).flatten(1, 2);
}
// The gradient of repeat_heads: each key/value head sums its query heads'.
Tensor sum_heads(const Tensor& t, int64_t groups) {
  if (groups == 1)
    return t;
  return t.unflatten(1, {t.size(1) / groups, groups}).sum(2);
}

// The scaled and masked scores, as the math backend forms them: query and key each scaled by the square root of
// the scale (the key by its negative for a negative scale), a causal mask aligned to the top left, a boolean mask
// keeping where it is true, a floating one added.
struct Scores {
  double query_factor = 1.0, key_factor = 1.0;
  Tensor query, key; // scaled
  Tensor scores;

  Scores(const Tensor& q, const Tensor& k, const Tensor& bias, const Problem& p)
      : query_factor(std::sqrt(std::abs(p.scale))),
        key_factor(p.scale < 0 ? -query_factor : query_factor),
        query(q.mul(query_factor)),
        key(k.mul(key_factor)),
        scores(at::matmul(query, key.transpose(-2, -1))) {
    const auto neg_inf = -std::numeric_limits<double>::infinity();
    if (p.causal)
      scores.masked_fill_(
          at::ones({scores.size(-2), scores.size(-1)}, scores.options().dtype(at::kBool)).tril().logical_not(),
          neg_inf);
    if (bias.defined()) {
      if (bias.scalar_type() == at::kBool)
        scores.masked_fill_(bias.logical_not(), neg_inf);
      else
        scores.add_(bias.to(scores.scalar_type()));
    }
  }

  // softmax's, as the math backend takes them (not exp(scores - logsumexp), which loses Float's precision where
  // scores are large); a row with nothing to attend to gives zeros, as the math backend's safe softmax does.
  Tensor probabilities() const {
    return at::softmax(scores, -1).masked_fill_(scores.amax(-1, true).isneginf(), 0.0);
  }
};

// Dropout of the probabilities as the math backend's (at::dropout): each kept with probability 1 - p and scaled by
// 1 / (1 - p). The factors (0 or 1 / (1 - p)) per probability, or undefined without dropout, from a CPU generator
// seeded with the kernel's seed: the backward draws the same ones again from the seed the forward wrote, instead of
// keeping a mask of the scores' size.
Tensor dropout_factors(const Tensor& probs, double dropout_p, int64_t seed) {
  if (dropout_p == 0.0)
    return Tensor();
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  const Tensor draws = at::empty(probs.sizes(), probs.options()).uniform_(0.0, 1.0, generator);
  return draws.lt(1.0 - dropout_p).to(probs.scalar_type()).div_(1.0 - dropout_p);
}

Tensor times(const Tensor& t, const Tensor& factors) {
  return factors.defined() ? t.mul(factors) : t;
}

} // namespace

AttentionResult fused_attention(
    const Tensor& query,
    const Tensor& key,
    const Tensor& value,
    const Tensor& bias,
    double dropout_p,
    bool is_causal,
    bool return_attention,
    std::optional<double> scale) {
  const Problem p = check_problem(kForward, query, key, value, bias, dropout_p, is_causal, scale);
  const auto device = common_device(kForward, {&query, &key, &value, &bias});
  const int64_t batch = query.dim() == 4 ? query.size(0) : 1;
  const int64_t heads = query.size(-3), length = query.size(-2), kv_length = key.size(-2);
  std::vector<int64_t> out_shape(query.sizes().begin(), query.sizes().end());
  out_shape.back() = value.size(-1);
  AttentionResult result;
  result.output = like_query(query, out_shape);
  result.logsumexp = at::empty({batch, heads, length}, query.options().dtype(at::kFloat));
  if (return_attention)
    result.attention = at::empty({batch, heads, length, kv_length}, query.options().dtype(at::kFloat));
  // The dropout seed: drawn from the device's generator now (in program order, as emu's random kernels), or, in a
  // captured graph, when the kernel runs (each replay draws fresh numbers); the kernel writes the one it used into
  // philox_seed on the device, where the backward's kernel reads it.
  result.philox_seed = at::zeros({}, query.options().dtype(at::kLong));
  result.philox_offset = at::zeros({}, query.options().dtype(at::kLong));
  const int64_t seed =
      p.dropout_p > 0.0 ? static_cast<int64_t>(draw_kernel_seed(compat::optional<at::Generator>(), device)) : 0;
#if EMU_DRIVER_HAS_GRAPHS
  const auto graph = p.dropout_p > 0.0 ? graph_seed_slot(device) : std::nullopt;
#endif
  launch(
      device,
      [out = arg(result.output),
       lse = arg(result.logsumexp),
       attn = arg(result.attention),
       seed_out = arg(result.philox_seed),
       query = arg(query),
       key = arg(key),
       value = arg(value),
       bias = arg(bias),
#if EMU_DRIVER_HAS_GRAPHS
       graph,
#endif
       seed,
       p] {
#if EMU_DRIVER_HAS_GRAPHS
        const int64_t used = graph ? static_cast<int64_t>(graph->value()) : seed;
#else
        const int64_t used = seed;
#endif
        const Tensor q = batched_input(query), k = batched_input(key), v = batched_input(value);
        const Scores s(q, repeat_heads(k, p.groups), kernel_view(bias), p);
        const Tensor all = s.probabilities();
        const Tensor probs = times(all, dropout_factors(all, p.dropout_p, used));
        as_batched(kernel_view(out)).copy_(at::matmul(probs, repeat_heads(v, p.groups)));
        kernel_view(lse).copy_(at::logsumexp(s.scores, -1));
        kernel_view(seed_out).fill_(used);
        if (attn.dtype != c10::ScalarType::Undefined)
          kernel_view(attn).copy_(probs);
      });
  return result;
}

std::array<Tensor, 4> fused_attention_backward(
    const Tensor& grad_out,
    const Tensor& query,
    const Tensor& key,
    const Tensor& value,
    const Tensor& bias,
    std::array<bool, 4> wanted,
    double dropout_p,
    bool is_causal,
    const at::Tensor& philox_seed,
    std::optional<double> scale) {
  const Problem p = check_problem(kBackward, query, key, value, bias, dropout_p, is_causal, scale);
  TORCH_CHECK(
      dropout_p == 0.0 || (philox_seed.defined() && philox_seed.numel() == 1 && philox_seed.scalar_type() == at::kLong),
      kBackward,
      ": with dropout_p > 0, expected the forward's philox_seed (one int64), got ",
      philox_seed.defined() ? philox_seed.sizes() : c10::IntArrayRef());
  const Tensor seed = dropout_p > 0.0 ? philox_seed : Tensor();
  const auto device = common_device(kBackward, {&grad_out, &query, &key, &value, &bias, &seed});
  std::vector<int64_t> out_shape(query.sizes().begin(), query.sizes().end());
  out_shape.back() = value.size(-1);
  TORCH_CHECK(
      grad_out.defined() && grad_out.sizes() == c10::IntArrayRef(out_shape),
      kBackward,
      ": expected grad_out of the output's shape ",
      c10::IntArrayRef(out_shape),
      ", got ",
      grad_out.defined() ? grad_out.sizes() : c10::IntArrayRef());
  const bool bias_grad = wanted[3] && bias.defined() && c10::isFloatingType(bias.scalar_type());
  const Tensor grad_query = wanted[0] ? at::empty_like(query) : Tensor();
  const Tensor grad_key = wanted[1] ? at::empty_like(key) : Tensor();
  const Tensor grad_value = wanted[2] ? at::empty_like(value) : Tensor();
  const Tensor grad_bias = bias_grad ? at::empty_like(bias) : Tensor();
  const auto defined = [](const KernelArg& a) { return a.dtype != c10::ScalarType::Undefined; };
  launch(
      device,
      [grad_query = arg(grad_query),
       grad_key = arg(grad_key),
       grad_value = arg(grad_value),
       grad_bias = arg(grad_bias),
       grad_out = arg(grad_out),
       query = arg(query),
       key = arg(key),
       value = arg(value),
       bias = arg(bias),
       seed = arg(seed),
       p,
       defined] {
        const Tensor q = batched_input(query), k = repeat_heads(batched_input(key), p.groups),
                     v = repeat_heads(batched_input(value), p.groups), d_out = batched_input(grad_out);
        const Scores s(q, k, kernel_view(bias), p);
        const Tensor probs = s.probabilities();
        // With dropout: the forward's kept probabilities D(P), and dP = D(dO V^T) (dropout's backward is itself).
        const int64_t used = p.dropout_p > 0.0 ? kernel_view(seed).item<int64_t>() : 0;
        const Tensor factors = dropout_factors(probs, p.dropout_p, used);
        const Tensor kept = times(probs, factors);
        const Tensor d_probs = times(at::matmul(d_out, v.transpose(-2, -1)), factors);
        // Softmax's backward: dS = P * (dP - rowsum(P * dP)).
        const Tensor d_scores = probs.mul(d_probs.sub(probs.mul(d_probs).sum(-1, true)));
        if (defined(grad_query))
          as_batched(kernel_view(grad_query)).copy_(at::matmul(d_scores, s.key).mul_(s.query_factor));
        if (defined(grad_key))
          as_batched(kernel_view(grad_key))
              .copy_(sum_heads(at::matmul(d_scores.transpose(-2, -1), s.query).mul_(s.key_factor), p.groups));
        if (defined(grad_value))
          as_batched(kernel_view(grad_value)).copy_(sum_heads(at::matmul(kept.transpose(-2, -1), d_out), p.groups));
        if (defined(grad_bias)) {
          const Tensor grad = kernel_view(grad_bias);
          grad.copy_(d_scores.sum_to_size(grad.sizes())); // over the dimensions the bias was broadcast along
        }
      });
  return {grad_query, grad_key, grad_value, grad_bias};
}

} // namespace native
} // namespace torch_emu
